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
 * by that one: a real jump's size (the knob stands in for it).
 *
 * clock/real_jump_forward and real_jump_back move the clock for real
 * (tests/preload/clockreal.c: 4 s forward, 5 s back, put right within
 * the run against CLOCK_MONOTONIC, and again here should the program
 * die first), natively and under the shim on 1 and 2 Ps: the same line
 * each way.
 */
#include "preload/harness.h"
#include "clocklock.h"

#include <time.h>

static struct hrun R;

Test(clock, realtime_waits_follow_a_clock_set, .timeout = 120)
{
	clock_lock();
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

/* CLOCK_REALTIME minus CLOCK_MONOTONIC, in ns. */
static int64_t clock_offset(void)
{
	struct timespec r, m;
	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m);
	return (int64_t)(r.tv_sec - m.tv_sec) * 1000000000 + (r.tv_nsec - m.tv_nsec);
}

/* After a run that jumped the clock: had it not put the clock right
 * (it died first), set it back to off from the monotonic clock. */
static void clock_restore(int64_t off)
{
	int64_t d = clock_offset() - off;
	if (d > -50000000 && d < 50000000)
		return;
	struct timespec m;
	clock_gettime(CLOCK_MONOTONIC, &m);
	int64_t t = (int64_t)m.tv_sec * 1000000000 + m.tv_nsec + off;
	struct timespec ts = { t / 1000000000, t % 1000000000 };
	clock_settime(CLOCK_REALTIME, &ts);
}

/* clockreal MODE natively, then under the shim on 1 and 2 Ps: each
 * prints want. */
static void real_jump(const char *mode, const char *want)
{
	clock_lock();
	const char *a[] = { h_prog("clockreal"), mode, NULL };
	int64_t off = clock_offset();
	h_run(&R, a, NULL, NULL, 60);
	clock_restore(off);
	if (h_code(&R) == 77)
		cr_skip_test("cannot set CLOCK_REALTIME (not root, or no CAP_SYS_TIME)");
	cr_assert_eq(h_code(&R), 0, "native: %s%s", R.out, R.err);
	cr_assert_str_eq(R.out, want, "native (the test's own expectation is wrong?): %s", R.err);
	for (int procs = 1; procs <= 2; procs++) {
		h_shim_run(&R, procs, a, NULL, NULL, 60);
		clock_restore(off);
		cr_assert_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect_str_eq(R.out, want, "procs %d, as natively: %s", procs, R.err);
	}
}

/* 4 s forward past a deadline 3 s ahead: cond, sem, mutex and
 * clock_nanosleep waits on CLOCK_REALTIME end at once (early=4: before
 * the deadline on the real clock; clock_nanosleep with TIMER_ABSTIME on
 * a G lasted its 3 s before: early=3); a monotonic cond wait and a
 * relative sleep do not move. */
Test(clock, real_jump_forward, .timeout = 300)
{
	real_jump("fwd", "fwd rt_cond=110 sem=110 mutex=110 nanosleep=0 early=4 mono_cond=0 "
			 "rel=ok\n");
}

/* 5 s back before a deadline 1.5 s ahead: the four realtime waits are
 * all still waiting 0.5 s past it, and end (ETIMEDOUT, 0) once the
 * clock is put right; the relative sleep of 1 s ended meanwhile. */
Test(clock, real_jump_back, .timeout = 300)
{
	real_jump("back", "back waiting=4 rt_cond=110 sem=110 mutex=110 nanosleep=0 mono_cond=0 "
			  "rel=ok\n");
}

/* A clock interposer preloaded after the shim, as `weft run -- faketime
 * ...` has it (tests/preload/lib/fakeclock.c, a stand-in for libfaketime):
 * the program sees its clocks, and weft's timed waits measure the
 * program's deadlines against them (hook/preload/clock.c, rt_wallclock).
 * The shim's clock_gettime went to the kernel's clock: the program saw
 * today's date under weft run -- faketime. */
Test(clock, interposed_clock_seen_and_waited_on, .timeout = 120)
{
	if (h_asan())
		cr_skip_test("ASan build: the shim's LD_PRELOAD is set directly, one list");
	clock_lock(); /* its waits are on the wall clock, which the tests beside it move */
	char pre[PATH_MAX + 32];
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s", h_prog("libfakeclock.so"));
	const char *env[] = { pre, NULL };
	const char *a[] = { h_prog("fakeclock"), NULL };
	struct hrun N;
	h_run(&N, a, env, NULL, 60);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int procs = 1; procs <= 2; procs++) {
		h_shim_run(&R, procs, a, env, NULL, 60);
		cr_expect_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect_str_eq(R.out, N.out, "procs %d", procs);
	}
}
