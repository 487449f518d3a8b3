/*
 * test_preload_cpuclock.c - a thread's CPU-time clock under the shim
 * (issue 12; docs/preload.md "A thread's CPU-time clock").  Each case of
 * tests/preload/cpuclock.c (see there) runs natively, then under the
 * shim on 1 and 2 Ps: the same output and status.  Before, a G read its
 * OS thread's clock (which ran other Gs too, and differs per OS thread)
 * and pthread_getcpuclockid answered ENOTSUP.
 */
#include "preload/harness.h"

static struct hrun R, N;

static void same(const char *name, int rounds)
{
	const char *a[] = { h_prog("cpuclock"), name, NULL };
	h_run(&N, a, NULL, NULL, 120);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int r = 0; r < rounds; r++)
		for (int procs = 1; procs <= 2; procs++) {
			h_shim_run(&R, procs, a, NULL, NULL, 120);
			cr_assert_eq(h_code(&R), 0, "procs %d round %d: %s%s", procs, r, R.out,
				     R.err);
			cr_assert_str_eq(R.out, N.out, "procs %d round %d", procs, r);
		}
}

/* A spinner and a sleeper: each clock moves by its own work only, and
 * they add up to no more than the process's CPU time (on 1 P they
 * shared one OS thread's clock); getrusage(RUSAGE_THREAD) agrees. */
Test(cpuclock, own_work_only, .timeout = 600)
{
	same("alternate", 1);
}

/* Threads that burn and sleep in turn never see their clock go back
 * when they come back on another OS thread. */
Test(cpuclock, never_back_across_migration, .timeout = 600)
{
	same("migrate", 2);
}

/* pthread_getcpuclockid of another thread: its clock, read from here
 * (moves while it spins, not while it waits); of itself, the clock
 * CLOCK_THREAD_CPUTIME_ID reads; clock_getres 1 ns. */
Test(cpuclock, getcpuclockid_of_another_thread, .timeout = 600)
{
	same("other", 1);
}

/* Main's clock keeps what main spent before its first thread (the lazy
 * start makes it a G then). */
Test(cpuclock, main_keeps_its_time_at_the_start, .timeout = 600)
{
	same("mainfirst", 1);
}

/* A forked child's thread clock starts again from 0, as natively. */
Test(cpuclock, fork_child_starts_from_zero, .timeout = 600)
{
	same("fork", 1);
}

/* timer_create on a G's CPU clock: ENOTSUP (natively a timer). */
Test(cpuclock, no_timer_on_a_g_clock, .timeout = 120)
{
	const char *a[] = { h_prog("cpuclock"), "timer", NULL };
	h_run(&N, a, NULL, NULL, 60);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	cr_assert_str_eq(N.out, "timer: ok\n");
	h_shim_run(&R, 2, a, NULL, NULL, 60);
	cr_assert_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_assert_str_eq(R.out, "timer: Operation not supported\n");
}
