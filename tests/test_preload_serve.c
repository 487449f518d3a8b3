/*
 * test_preload_serve.c - what a thread-per-connection server's threads
 * do between their waits, under the shim.  tests/preload/nbloop.c runs
 * natively first, then under `weft run` on 1 and 2 Ps.
 */
#include "preload/harness.h"

static struct hrun R, N;

/* The value of key=N in the last line of text holding key, or -1. */
static int lastval(const char *text, const char *key)
{
	const char *p = NULL, *q = text;
	while ((q = strstr(q, key)))
		p = q++;
	return p ? atoi(p + strlen(key)) : -1;
}

/* Eight threads looping on socket calls that never block (send and recv
 * of a byte to themselves) while main sleeps 1 ms at a time: each call is
 * where a loop takes sysmon's request to give way, so no spare P (an OS
 * thread) is lent around them as around C code that never calls in.
 * Before: 12 OS threads on 1 and 2 Ps (4 base + the cap of 8 spares
 * lent around hogs); now 7-8. */
static void nbcase(const char *mode)
{
	const char *a[] = { h_prog("nbloop"), mode, "8", "150", NULL };
	h_run(&N, a, NULL, NULL, 60);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int procs = 1; procs <= 2; procs++) {
		h_shim_run(&R, procs, a, NULL, NULL, 60);
		cr_expect_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		int k = lastval(R.out, "os_threads_max=");
		cr_expect(k > 0 && k <= 10, "procs %d: %d OS threads: %s%s", procs, k, R.out, R.err);
	}
}

/* recv/send with MSG_DONTWAIT on blocking sockets (MariaDB's vio) */
Test(serve, dontwait_calls_take_yield, .timeout = 180)
{
	nbcase("dontwait");
}

/* recv/send on sockets made O_NONBLOCK */
Test(serve, nonblock_calls_take_yield, .timeout = 180)
{
	nbcase("nonblock");
}
