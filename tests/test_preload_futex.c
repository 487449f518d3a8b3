/*
 * test_preload_futex.c - a program's own futex waits (syscall(SYS_futex),
 * as InnoDB's locks and libstdc++'s atomic waits make them) park the G
 * instead of blocking its OS thread (hook/preload/futex.c).
 *
 * tests/preload/futex.c runs natively first, then under the shim.
 */
#include "preload/harness.h"

static struct hrun R, N;

/* The value of key=N in text, or -1. */
static int keyval(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	return p ? atoi(p + strlen(key)) : -1;
}

/* 200 threads waiting on one futex word: natively 201 OS threads; under
 * the shim the waits park and the process keeps a few (each wait blocked
 * an OS thread, and sysmon lent a spare P around it: ~200). */
Test(futex, waits_park_not_block, .timeout = 300)
{
	const char *a[] = { h_prog("futex"), "park", "200", NULL };
	h_run(&N, a, NULL, NULL, 120);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int procs = 1; procs <= 2; procs++) {
		h_shim_run(&R, procs, a, NULL, NULL, 120);
		cr_expect_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		int k = keyval(R.out, "os_threads=");
		cr_expect(k > 0 && k <= 16, "procs %d: %d OS threads with 200 threads in futex waits: %s%s",
			  procs, k, R.out, R.err);
	}
}

/* A futex mutex taken 64,000 times by 32 threads, held across a yield
 * now and then: every increment counted, on 1, 2 and 4 Ps. */
Test(futex, futex_mutex_counts, .timeout = 300)
{
	const char *a[] = { h_prog("futex"), "lock", "32", "2000", NULL };
	h_run(&N, a, NULL, NULL, 120);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int procs = 1; procs <= 4; procs *= 2) {
		h_shim_run(&R, procs, a, NULL, NULL, 120);
		cr_expect_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect(strstr(R.out, "ok lock: counter 64000 of 64000"), "procs %d: %s%s", procs,
			  R.out, R.err);
	}
}

/* What each call returns (EAGAIN, timeouts on both clocks, EINVAL,
 * bitsets, CMP_REQUEUE, WAKE_OP): the same lines as natively. */
Test(futex, results_as_natively, .timeout = 300)
{
	const char *a[] = { h_prog("futex"), "ops", NULL };
	h_run(&N, a, NULL, NULL, 60);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int procs = 1; procs <= 2; procs++) {
		h_shim_run(&R, procs, a, NULL, NULL, 60);
		cr_expect_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect_str_eq(R.out, N.out, "procs %d: %s", procs, R.err);
	}
}
