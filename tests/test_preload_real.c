/*
 * test_preload_real.c - what real programs (Debian's, and the test
 * suites of its interpreters) did differently under weft run, each
 * reduced to a case of tests/preload/realprogs.c and run natively, then
 * under the shim on 1, 2 and 4 Ps: the same output and status.  The
 * table of programs tried is in docs/preload.md ("Programs tried").
 */
#include "preload/harness.h"

static struct hrun R, N;

static void real(const char *name, const char *arg, int rounds)
{
	const char *a[] = { h_prog("realprogs"), name, arg, NULL };
	h_run(&N, a, NULL, NULL, 60);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int r = 0; r < rounds; r++)
		for (int procs = 1; procs <= 4; procs *= 2) {
			h_shim_run(&R, procs, a, NULL, NULL, 60);
			cr_assert_eq(h_code(&R), 0, "procs %d round %d: %s%s", procs, r, R.out,
				     R.err);
			cr_assert_str_eq(R.out, N.out, "procs %d round %d", procs, r);
		}
}

/* A wait that a signal interrupts just as its deadline is due (Python's
 * test_signal stress test: SIGALRM from a 1-10 us itimer, the main
 * thread in 10 us sleeps): the G ran on two OS threads at once
 * (runtime/sema.c, waiter_commit). */
Test(real, itimer_interrupts_short_sleeps, .timeout = 300)
{
	real("itimer_sleep", "3000", 2);
}

/* pidfd_send_signal (through syscall(), as Python makes it) of a signal
 * to the process itself: its handler has run when the call returns, as
 * for kill (hook/preload/signal.c). */
Test(real, pidfd_signal_to_self, .timeout = 120)
{
	real("pidfd_self", NULL, 1);
}

/* A thread in sigwait woken by pthread_kill (pbzip2's signal thread, at
 * its end): the signal is the G's and its sigwait takes it.  Then 300
 * rounds with 0-190 us between pthread_create and pthread_kill: a signal
 * (or a cancel) for a thread whose G had not run yet was dropped, and
 * one landing as the G entered sigwait was missed (hook/preload/thread.c
 * tg_started, signal.c g_sigwait): hung on 4 Ps every time before. */
Test(real, pthread_kill_ends_sigwait, .timeout = 120)
{
	real("sigwait_kill", "300", 1);
}

/* A signal blocked and ignored is still taken by sigwait, sigtimedwait
 * and a signalfd, sent by raise, kill or pthread_kill (Linux never
 * discards a blocked signal); pthread_kill to a G dropped it, and a
 * program in sigwait for a pthread_kill'd SIGQUIT the shell had left
 * ignored waited for good (hook/preload/signal.c, sig_send_g). */
Test(real, sigwait_takes_a_blocked_ignored_signal, .timeout = 300)
{
	real("sigwait_ignored", NULL, 1);
}

/* setuid, setgid, setgroups and the rest with threads running, in a
 * child of fork and in the process itself (CPython's test_subprocess
 * test_extra_groups; daemons dropping root): every OS thread has the
 * new ids.  glibc's own signals every thread it knows and waits for each
 * to change its ids; under weft it took the caller's own OS thread for
 * another and spun forever (hook/preload/setxid.c). */
Test(real, setuid_on_every_thread, .timeout = 120)
{
	real("setxid", "8", 1);
}

/* sigaction while another thread raises the signal (CPython's test_signal
 * test_stress_modifying_handlers): every one of the 4,000 calls ends
 * when the signal thread has taken the new disposition - it is woken
 * for it; it slept through its wake-up before and each call waited out
 * masks_apply's backstop, now 100 ms: 4,000 x 100 ms is past the run's
 * bound (hook/preload/signal.c, sig_thread). */
Test(real, sigaction_while_raising, .timeout = 600)
{
	real("sigaction_raise", "2000", 1);
}

/* A write into a full pipe that SIGALRM (no SA_RESTART) cuts short, then
 * makes fail with EINTR, its handler then starting the reader that lets
 * the write finish (CPython's test_io PySignalsTest
 * test_interrupted_write_retry_*): a short count, then EINTR, then the
 * rest, as natively, beside a thread that blocks every signal.  The
 * session-6 hang on 1 P was not reproduced (docs/preload.md, Programs
 * tried); this keeps the path the test takes. */
Test(real, write_cut_short_then_eintr, .timeout = 300)
{
	real("write_alarm", "200", 1);
}

/* A SIGALRM handler and a 20 us periodic timer, then the timer stopped
 * and SIG_DFL put back, 100 times (CPython's test_eintr, each test's
 * tearDown): natively no SIGALRM is left to act by then; under weft one
 * still in the router's signalfd, or given to main and not yet run, met
 * SIG_DFL and killed the process (signal 14) within a few rounds.  A
 * disposition change now takes delivery of those first
 * (hook/preload/signal.c, sig_settle). */
Test(real, itimer_then_default, .timeout = 300)
{
	real("itimer_dfl", "100", 1);
}

/* haproxy's `show threads`: SIGURG to every thread (each in epoll_wait)
 * and to itself, every handler spinning on sched_yield until all have
 * arrived, 100 rounds.  sched_yield gave up the OS thread's time slice,
 * not the P: spinning handlers on every P kept the other Gs (their
 * handlers pending) from running - hung on 1 and 2 Ps; and a G spinning
 * on a spare P about to retire kept the Gs queued there (4 Ps, or 2
 * after a lend).  Now a G's sched_yield is weft_yield, which goes
 * through the scheduler when its P retires (hook/preload/thread.c,
 * runtime/proc.c weft_yield). */
Test(real, sched_yield_lets_other_gs_run, .timeout = 600)
{
	real("yield_rendezvous", "100", 2);
}

/* The same with sched_yield's other names, which glibc implements with
 * the system call inside libc: C11's thrd_yield, and pthread_yield as
 * binaries linked before glibc 2.34 call it (a compat symbol).  The
 * shim defines both (hook/preload/thread.c, c11.c); without
 * pthread_yield's, hung on 1 and 2 Ps. */
Test(real, other_yields_let_other_gs_run, .timeout = 600)
{
	real("yield_rendezvous_pthread", "100", 1);
	real("yield_rendezvous_thrd", "100", 1);
}

/* sigpending() is what is pending and blocked by the caller - the G,
 * not the M it runs on, which blocks every signal: a child's SIGCHLD
 * sent to the M that forked (Python's test_sigpending_empty saw it once
 * in 11 runs on 1 P) or a raw tgkill to the M are not the G's
 * (hook/preload/signal.c, sigpending). */
Test(real, sigpending_is_what_the_caller_blocks, .timeout = 120)
{
	real("pending_unblocked", "200", 1);
}
