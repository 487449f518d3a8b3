/*
 * test_preload_calls.c - the system calls weft adds to what a server does
 * (issue 12 item 5: apache under weft run must make <= 1.2x native's
 * calls per request).  tests/preload/servers.c does a server's steps;
 * tests/preload/sccount.c (ptrace) counts chosen calls of it and all its
 * threads, natively and under `weft run --procs 2`: counts, not time.
 */
#include "preload/harness.h"

#include <sys/epoll.h>
#include <sys/syscall.h>

static struct hrun R, N; /* under weft, native */

/* Run `servers cas [arg]` under sccount with spec, natively (weft false)
 * or under weft run --procs 2; the count sccount printed. */
static long counted_arg(struct hrun *r, bool weft, const char *spec, const char *cas,
			const char *arg)
{
	h_paths();
	const char *a[16];
	int k = 0;
	a[k++] = h_prog("sccount");
	a[k++] = spec;
	a[k++] = "--";
	if (weft) {
		a[k++] = h_weft;
		a[k++] = "run";
		a[k++] = "--procs";
		a[k++] = "2";
		a[k++] = "--";
	}
	a[k++] = h_prog("servers");
	a[k++] = cas;
	if (arg)
		a[k++] = arg;
	a[k] = NULL;
	h_run(r, a, NULL, NULL, 120);
	cr_assert_eq(h_code(r), 0, "%s: %s%s", weft ? "weft" : "native", r->out, r->err);
	char key[64];
	snprintf(key, sizeof key, "sccount %s ", spec);
	const char *p = strstr(r->err, key);
	cr_assert(p, "no count in: %s", r->err);
	return atol(p + strlen(key));
}

static long counted(struct hrun *r, bool weft, const char *spec, const char *cas)
{
	return counted_arg(r, weft, spec, cas, NULL);
}

/* A server that makes every accepted socket non-blocking (F_SETFL
 * O_NONBLOCK, as apache does) must not send the next call on every other
 * non-blocking socket to F_GETFL: 200 rounds, the program's own 200
 * F_GETFL and at most a few of weft's (before: one more per round, 400) */
Test(calls, nonblock_keeps_other_hints, .timeout = 300)
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	char spec[32];
	snprintf(spec, sizeof spec, "%d:1=%d", SYS_fcntl, F_GETFL);
	long n = counted(&N, false, spec, "nbhints");
	long w = counted(&R, true, spec, "nbhints");
	cr_expect_geq(n, 200, "natively %ld F_GETFL", n);
	cr_expect_leq(w, n + 20, "weft %ld F_GETFL, natively %ld: %s", w, n, R.err);
}

/* A server closing the connections it accepted (and parked on) makes no
 * EPOLL_CTL_DEL for them: the file's last close drops its registration
 * in the kernel (runtime/netpoll.h PD_SOLE; before: one per connection,
 * 100 here); a dup'ed connection is still read right after the original
 * is closed */
Test(calls, close_makes_no_epoll_del, .timeout = 300)
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	char spec[32];
	snprintf(spec, sizeof spec, "%d:1=%d", SYS_epoll_ctl, EPOLL_CTL_DEL);
	long n = counted(&N, false, spec, "closes");
	long w = counted(&R, true, spec, "closes");
	cr_expect_eq(n, 0, "natively %ld", n);
	cr_expect_leq(w, 5, "weft %ld EPOLL_CTL_DEL for 100 connections: %s", w, R.err);
}

/* sigaction and signal calls that do not change whether a signal has a
 * handler (a handler replaced by another, a flags change, SIG_IGN on
 * SIG_IGN, a query: 6 per round) make one system call each under weft
 * as natively - the rt_sigaction itself.  Counted as every system call
 * of 1,000 rounds minus those of 0 rounds (the same program's start and
 * set-up), with a quarter call per call of slack for the runtime's own
 * (sysmon) meanwhile.  Before: 14 per round (a read of the router's
 * signalfd before, a question to the kernel after, each change). */
Test(calls, sigaction_makes_one_call, .timeout = 300)
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	long calls = 6 * 1000;
	long n = counted_arg(&N, false, "all", "sigact", "1000") -
		 counted_arg(&N, false, "all", "sigact", "0");
	long w = counted_arg(&R, true, "all", "sigact", "1000") -
		 counted_arg(&R, true, "all", "sigact", "0");
	cr_expect_geq(n, calls, "natively %ld system calls for %ld sigaction calls", n, calls);
	cr_expect_leq(w, calls + calls / 4,
		      "weft %ld system calls for %ld sigaction calls (natively %ld): %s", w, calls,
		      n, R.err);
}

/* A handler put, then SIG_IGN, by turns (CPython's signal.signal): the
 * signal thread is waited for the first time only (it keeps blocking a
 * signal that had a handler: hook/preload/signal.c, h_set_locked); each
 * call then makes the rt_sigaction, a read of the router's signalfd
 * (what came meanwhile meets the disposition it was sent for) and one
 * question to the kernel.  1,000 rounds minus 0 rounds, at most 4 system
 * calls per call (before: the signalfd changed, SIGWEFT to the signal
 * thread and the wait for it, every call). */
Test(calls, sigaction_toggle_waits_once, .timeout = 300)
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	long calls = 2 * 1000;
	long n = counted_arg(&N, false, "all", "sigtoggle", "1000") -
		 counted_arg(&N, false, "all", "sigtoggle", "0");
	long w = counted_arg(&R, true, "all", "sigtoggle", "1000") -
		 counted_arg(&R, true, "all", "sigtoggle", "0");
	cr_expect_geq(n, calls, "natively %ld system calls for %ld sigaction calls", n, calls);
	cr_expect_leq(w, 4 * calls,
		      "weft %ld system calls for %ld sigaction calls (natively %ld): %s", w, calls,
		      n, R.err);
}
