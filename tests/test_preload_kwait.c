/*
 * test_preload_kwait.c - kernel waits under the shim (docs/hooks.md
 * "Waiting in the kernel"): a thread idle in epoll_wait costs no wakeups
 * (no 20 ms slices, sysmon asleep), and a signal handler or a
 * cancellation for a thread in a kernel wait ends it at once (its M is
 * sent a kick: runtime/kwait.c).  tests/preload/kwait.c is the program,
 * run natively and under `weft run` on 1 and 2 Ps.
 */
#include "preload/harness.h"

static struct hrun R, N; /* under weft, native */

static void kcase(const char *name)
{
	const char *a[] = { h_prog("kwait"), name, NULL };
	h_run(&N, a, NULL, NULL, 60);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int procs = 1; procs <= 2; procs++) {
		h_shim_run(&R, procs, a, NULL, NULL, 60);
		cr_expect_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect_eq(h_count(R.out, "FAIL"), 0, "procs %d: %s%s", procs, R.out, R.err);
	}
}

/* 2 s in epoll_wait with nothing ready: fewer than 20 wakeups of all the
 * process's threads (before: the wait came back every 20 ms to look for
 * a signal, and sysmon woke every 10 ms: ~300) */
Test(kwait, idle_wait_wakes_nothing, .timeout = 120)
{
	kcase("idle");
}

/* pthread_kill and the process's SIGALRM end epoll_wait, poll and select
 * without a timeout with EINTR, as natively (the handler runs on the G
 * when its kernel wait is ended by the kick) */
Test(kwait, signal_ends_kernel_wait, .timeout = 120)
{
	kcase("signal");
}

/* pthread_cancel of a thread in epoll_wait or poll */
Test(kwait, cancel_ends_kernel_wait, .timeout = 120)
{
	kcase("cancel");
}

/* the process's SIGALRM after main waited quietly in epoll_wait for a
 * while: the signal router, parked on the netpoller, is woken although
 * sysmon sleeps (an M blocks in netpoll whenever a P waits in the kernel
 * with Gs parked there and another P idle; before, memcached under the
 * shim never ended on SIGTERM) */
Test(kwait, signal_after_quiet_wait, .timeout = 120)
{
	kcase("idle_signal");
}
