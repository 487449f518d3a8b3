/*
 * test_preload_calls.c - the system calls weft adds to what a server does
 * (issue 12 item 5: apache under weft run must make <= 1.2x native's
 * calls per request).  tests/preload/servers.c does a server's steps;
 * tests/preload/sccount.c (ptrace) counts chosen calls of it and all its
 * threads, natively and under `weft run --procs 2`: counts, not time.
 */
#include "preload/harness.h"

#include <sys/epoll.h>
#include <signal.h>
#include <sys/syscall.h>

static struct hrun R, N; /* under weft, native */

/* Run `servers cas [arg]` under sccount with n specs, natively (weft
 * false) or under weft run --procs 2; out[i] the count sccount printed for
 * spec[i]. */
static void counted_env(struct hrun *r, bool weft, const char *const *spec, int n,
			const char *cas, const char *arg, const char *const env[], long *out)
{
	h_paths();
	const char *a[24];
	int k = 0;
	a[k++] = h_prog("sccount");
	for (int i = 0; i < n; i++)
		a[k++] = spec[i];
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
	h_run(r, a, env, NULL, 120);
	cr_assert_eq(h_code(r), 0, "%s: %s%s", weft ? "weft" : "native", r->out, r->err);
	for (int i = 0; i < n; i++) {
		char key[64];
		snprintf(key, sizeof key, "sccount %s ", spec[i]);
		const char *p = strstr(r->err, key);
		cr_assert(p, "no count in: %s", r->err);
		out[i] = atol(p + strlen(key));
	}
}

static void counted_n(struct hrun *r, bool weft, const char *const *spec, int n,
		      const char *cas, const char *arg, long *out)
{
	counted_env(r, weft, spec, n, cas, arg, NULL, out);
}

static long counted_arg(struct hrun *r, bool weft, const char *spec, const char *cas,
			const char *arg)
{
	long n = 0;
	counted_n(r, weft, &spec, 1, cas, arg, &n);
	return n;
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

/* The calls nr[0..2] made by the program of case cas, natively (n) and
 * under weft (w). */
static void counted_3(const long nr[3], const char *cas, long n[3], long w[3])
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	char s[3][24];
	const char *spec[3];
	for (int i = 0; i < 3; i++) {
		snprintf(s[i], sizeof s[i], "%ld", nr[i]);
		spec[i] = s[i];
	}
	counted_n(&N, false, spec, 3, cas, NULL, n);
	counted_n(&R, true, spec, 3, cas, NULL, w);
}

/* Calls nr with first argument a1 made by the program of case cas: none
 * natively, at most most under weft (what: the run, for the message). */
static void few_calls(long nr, long a1, const char *cas, long most, const char *what)
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	char spec[32];
	snprintf(spec, sizeof spec, "%ld:1=%ld", nr, a1);
	long n = counted(&N, false, spec, cas);
	long w = counted(&R, true, spec, cas);
	cr_expect_eq(n, 0, "natively %ld", n);
	cr_expect_leq(w, most, "weft %ld for %s: %s", w, what, R.err);
}

/* A server closing the connections it accepted (and parked on) makes no
 * EPOLL_CTL_DEL for them: the file's last close drops its registration
 * in the kernel (runtime/netpoll.h PD_SOLE; before: one per connection,
 * 100 here); a dup'ed connection is still read right after the original
 * is closed */
Test(calls, close_makes_no_epoll_del, .timeout = 300)
{
	few_calls(SYS_epoll_ctl, EPOLL_CTL_DEL, "closes", 5, "100 connections' EPOLL_CTL_DEL");
}

/* A write to a blocking eventfd (nginx's thread pool notify, one per
 * request) is one system call, as natively: the write itself under
 * entersyscall.  Before, weft asked poll first on every one (the kernel
 * refuses RWF_NOWAIT for eventfd writes): 600 polls here.  The eventfd
 * made by a raw system call is learnt by one pwritev2 try's EOPNOTSUPP
 * (the write counts are not compared: weft's netpoller writes its own
 * eventfd when it must wake). */
Test(calls, eventfd_write_is_one_call, .timeout = 300)
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	char poll_s[16], pwritev2_s[16];
	snprintf(poll_s, sizeof poll_s, "%d", SYS_poll);
	snprintf(pwritev2_s, sizeof pwritev2_s, "%d", SYS_pwritev2);
	const char *spec[] = { poll_s, pwritev2_s };
	long n[2], w[2];
	counted_n(&N, false, spec, 2, "evfd", NULL, n);
	counted_n(&R, true, spec, 2, "evfd", NULL, w);
	cr_expect_eq(n[0] + n[1], 0, "natively %ld poll, %ld pwritev2", n[0], n[1]);
	cr_expect_leq(w[0], 5, "weft %ld poll for 600 eventfd writes: %s", w[0], R.err);
	cr_expect_leq(w[1], 3, "weft %ld pwritev2 tries: %s", w[1], R.err);
}

/* Every call nr of case cas, natively (*n) and under weft (*w). */
static void counted_both(long nr, const char *cas, long *n, long *w)
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	char spec[32];
	snprintf(spec, sizeof spec, "%ld", nr);
	*n = counted(&N, false, spec, cas);
	*w = counted(&R, true, spec, cas);
}

/* errno left at EPIPE by an older write, while the thread blocks SIGPIPE:
 * the blocking calls after it (a file's pwrite under entersyscall) keep
 * errno and do not each look at the thread's pending signals (hook.c
 * blk_exit sees only what the call itself set; before: one rt_sigpending
 * per call, 200 here) */
Test(calls, stale_epipe_costs_no_sigpending, .timeout = 300)
{
	long n, w;
	counted_both(SYS_rt_sigpending, "staleepipe", &n, &w);
	cr_expect_eq(n, 0, "natively %ld", n);
	cr_expect_leq(w, 20, "weft %ld rt_sigpending for 200 pwrites: %s", w, R.err);
}

/* The native count only shows the counting works (one rt_sigaction a
 * call): the difference of two runs, whose start-ups may differ by a call
 * or two (1,999 for 2,000 seen on two machines). */
static void expect_native_counted(long n, long calls)
{
	cr_expect_geq(n, calls - calls / 100, "natively %ld system calls for %ld sigaction calls",
		      n, calls);
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
	expect_native_counted(n, calls);
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
	expect_native_counted(n, calls);
	cr_expect_leq(w, 4 * calls,
		      "weft %ld system calls for %ld sigaction calls (natively %ld): %s", w, calls,
		      n, R.err);
}

/* getnameinfo / getaddrinfo of numeric addresses and ports (varnish names
 * every connection's ends this way) never wait: no lookup, no file.
 * They run on the G as they are; before, every resolver call handed its
 * P on at once, and with other threads runnable each woke or made an M:
 * 1,600 calls here made ~1,000 futex calls and up to 16 new threads at a
 * time under varnish (~50 OS threads for 2 Ps). */
Test(calls, numeric_names_keep_the_p, .timeout = 300)
{
	long n[3], w[3];
	counted_3((const long[]){ SYS_futex, SYS_clone3, SYS_clone }, "numnames", n, w);
	cr_expect_leq(w[0], n[0] + 60, "weft %ld futex, natively %ld: %s", w[0], n[0], R.err);
	cr_expect_leq(w[1] + w[2], 8, "weft made %ld threads for 2 Ps: %s", w[1] + w[2], R.err);
}

/* A poll on one fd that parks (every wait parks here: WEFT_DEBUG=kwait=0)
 * and is woken by the netpoller's event is answered from that event's
 * mask: one ppoll per round, as native's one poll, and the same revents
 * (hook/wait.c g_poll; before: a second ppoll after each wake, 400 here) */
Test(calls, poll_wake_answers_from_event, .timeout = 300)
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	char poll_s[16], ppoll_s[16];
	snprintf(poll_s, sizeof poll_s, "%d", SYS_poll);
	snprintf(ppoll_s, sizeof ppoll_s, "%d", SYS_ppoll);
	const char *spec[] = { poll_s, ppoll_s };
	const char *env[] = { "WEFT_DEBUG=kwait=0", NULL };
	long n[2], w[2];
	counted_env(&N, false, spec, 2, "pollwake", NULL, env, n);
	counted_env(&R, true, spec, 2, "pollwake", NULL, env, w);
	cr_expect_eq(n[0] + n[1], 202, "natively %ld poll, %ld ppoll", n[0], n[1]);
	cr_expect_leq(w[0] + w[1], 202 + 30, "weft %ld poll, %ld ppoll for 202 polls: %s", w[0],
		      w[1], R.err);
}

/* A read that waits (a park) on a socket only its fd reaches - accepted
 * or made by socket(), never dup'ed, shared with no other process - asks
 * no F_GETFL first: under the shim every way its O_NONBLOCK could change
 * unseen is seen (runtime/netpoll.h pd_sole; dnh::nonblock_behind_the_
 * hooks_gets_eagain).  Natively none; under weft the connect's own (it
 * sets O_NONBLOCK for its one call); before: one per park, ~400 here for
 * 200 round trips. */
Test(calls, park_on_sole_socket_asks_no_getfl, .timeout = 300)
{
	few_calls(SYS_fcntl, F_GETFL, "echo", 10, "200 round trips' F_GETFL");
}

/* A kick that ends a kernel wait (runtime/kwait.c) makes three system
 * calls: the sender's rt_tgsigqueueinfo, and on the waiting thread the
 * handler's rt_sigreturn and the wait's rt_sigpending.  It no longer
 * asks getpid per kick (the pid is kept, asked again only after a fork:
 * the kernel refuses a stale one), nor the handler gettid (a kick never
 * goes to the shim's signal thread).  200 rounds in which a posted
 * semaphore readies a G while one P waits in poll in the kernel and the
 * other spins; before: a getpid and a gettid per kick */
Test(calls, kick_asks_no_pid, .timeout = 300)
{
	long n[3], w[3];
	counted_3((const long[]){ SYS_getpid, SYS_gettid, SYS_rt_tgsigqueueinfo }, "kicks", n, w);
	cr_expect_eq(n[0] + n[2], 0, "natively %ld getpid, %ld rt_tgsigqueueinfo", n[0], n[2]);
	/* kicks: most rounds (a round whose G an idle P or a spinning M
	 * took sends none); getpid and gettid: a few at start-up (each M
	 * asks its tid once) */
	cr_expect_geq(w[2], 50, "weft %ld kicks in 200 rounds: %s", w[2], R.err);
	cr_expect_leq(w[0], 5, "weft %ld getpid for %ld kicks: %s", w[0], w[2], R.err);
	cr_expect_leq(w[1], n[1] + 20, "weft %ld gettid for %ld kicks (natively %ld): %s", w[1],
		      w[2], n[1], R.err);
}

/* A thread-per-connection echo server idle between messages (one
 * connection, the client a separate process, main waiting in accept):
 * the read that finds nothing waits in the kernel on its own M, as the
 * program's own blocking read, since its P has nothing else to run
 * (hook.c io_kcall, docs/hooks.md "Waiting in the kernel"), and its
 * socket leaves weft's epoll instance, so the M the other P left in the
 * netpoller for main's accept does not wake per message.  Every system
 * call of 1,000 messages minus those of none: natively 2 per message (the
 * read, the write); under weft at most 2.5 (before: a park per message,
 * the scheduler's epoll_wait twice, sysmon's futex: ~5). */
Test(calls, idle_echo_reads_in_the_kernel, .timeout = 300)
{
	if (h_asan())
		cr_skip_test("ASan build: the launcher's LD_PRELOAD cannot put ASan first");
	long msgs = 1000;
	long n = counted_arg(&N, false, "all", "echo1", "1000") -
		 counted_arg(&N, false, "all", "echo1", "0");
	long w = counted_arg(&R, true, "all", "echo1", "1000") -
		 counted_arg(&R, true, "all", "echo1", "0");
	cr_expect_geq(n, 2 * msgs - 10, "natively %ld system calls for %ld messages", n, msgs);
	cr_expect_leq(w, 2 * msgs + msgs / 2,
		      "weft %ld system calls for %ld messages (natively %ld): %s", w, msgs, n,
		      R.err);
}

/* A blocking connect on a G (TCP loopback: the kernel says EINPROGRESS,
 * the G parks until writable) makes one connect, as natively: the
 * connection's end is read from SO_ERROR and getpeername, not from a
 * second connect under O_NONBLOCK set and put back (before: two connects
 * and six fcntl each; 201 connects here) */
Test(calls, blocking_connect_connects_once, .timeout = 300)
{
	long n, w;
	counted_both(SYS_connect, "closes", &n, &w);
	cr_expect_geq(n, 100, "natively %ld connects", n);
	cr_expect_leq(w, n + 5, "weft %ld connects, natively %ld: %s", w, n, R.err);
}
