/*
 * test_preload_clock.c - deadlines on CLOCK_REALTIME follow the wall
 * clock when it is set; those on CLOCK_MONOTONIC do not (issue 15,
 * faults: "the clock jumping"; docs/reliability.md).
 *
 * The machine's clock is not moved: tests/preload/clockjump.c sets it to
 * the time it reads (root only; skipped otherwise), which the kernel
 * still reports to weft's clock watch as a set, and WEFT_DEBUG=clockset
 * makes weft's wall clock an hour later at that report.  So what is
 * proven: weft hears of a clock set while Gs wait, re-places a waiting
 * realtime timer from its wall-clock deadline (a cond_timedwait whose
 * timer was queued before the set ends at once, 20 s early), computes
 * later realtime waits against the moved clock (sem_timedwait,
 * pthread_timedjoin_np), and leaves a monotonic wait alone.  Not proven
 * here: a real jump's size (the knob stands in for it).
 */
#include "preload/harness.h"

static struct hrun R;

Test(clock, realtime_waits_follow_a_clock_set, .timeout = 120)
{
	const char *s[] = { h_prog("clockjump"), "settime", NULL };
	h_run(&R, s, NULL, NULL, 10);
	if (h_code(&R) == 77)
		cr_skip_test("not root: clock_settime(CLOCK_REALTIME) refused");
	cr_assert_eq(h_code(&R), 0, "%s%s", R.out, R.err);

	const char *a[] = { h_prog("clockjump"), NULL };
	const char *env[] = { "WEFT_DEBUG=clockset=3600", NULL };
	for (int procs = 1; procs <= 2; procs++) {
		/* 60 s: the waits' own 20 s, had the set not been heard */
		h_shim_run(&R, procs, a, env, NULL, 60);
		cr_assert_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect(strstr(R.out, "rt_cond=110 mono_cond=0 sem=110 join=110 early=3\n"),
			  "procs %d (110 is ETIMEDOUT; early: realtime waits ended before their "
			  "deadline on the real clock): %s%s",
			  procs, R.out, R.err);
	}
}
