/*
 * test_faults.c - the machine says no (issue 15, item 3): weft survives
 * what it cannot have, and the program sees the error it would see
 * natively.  Each case runs in a forked child with its own limits.
 *
 *   fd exhaustion       accept gets EMFILE; the netpoller and timers go on;
 *                       accept works again once fds are freed
 *   no new threads      RLIMIT_NPROC reached: the runtime runs its Gs on
 *                       the threads it has and says so once
 *   no memory for stacks RLIMIT_AS reached: weft_go fails with ENOMEM,
 *                       nothing crashes, and works again after
 *   peer reset          writing to a reset connection: EPIPE/ECONNRESET
 *                       with SIGPIPE ignored or MSG_NOSIGNAL; death by
 *                       SIGPIPE with the default disposition, as natively
 * (vm.max_map_count: guard pages fall back to canaries before it is
 * reached, sched/overflow_canary_stacks.)
 */
#include "helpers.h"
#include "preload/check.h" /* os_threads */

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>

static int listener(struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t al = sizeof *a;
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)a, sizeof *a) != 0 || listen(l, 128) != 0 ||
	    getsockname(l, (struct sockaddr *)a, &al) != 0)
		return -1;
	return l;
}

static int dial(const struct sockaddr_in *a)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (const struct sockaddr *)a, sizeof *a) != 0)
		return -1;
	return c;
}

/* ---- fd exhaustion ------------------------------------------------------------------ */

#define NCLIENTS 24
static int fx_rc; /* 0 ok, else the failed step */
static _Atomic int fx_done;

static void fx_main(void *arg)
{
	(void)arg;
	struct sockaddr_in a;
	int l = listener(&a), cl[NCLIENTS], acc[NCLIENTS], nacc = 0;
	if (l < 0) {
		fx_rc = 1;
		goto out;
	}
	for (int i = 0; i < NCLIENTS; i++)
		if ((cl[i] = dial(&a)) < 0) {
			fx_rc = 2;
			goto out;
		}
	/* room for 4 more descriptors: accept must run out */
	int maxfd = 0;
	for (int i = 0; i < NCLIENTS; i++)
		maxfd = cl[i] > maxfd ? cl[i] : maxfd;
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = (rlim_t)maxfd + 5;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		fx_rc = 3;
		goto out;
	}
	int r;
	while ((r = accept(l, NULL, NULL)) >= 0)
		acc[nacc++] = r;
	if (errno != EMFILE || nacc == 0 || nacc >= NCLIENTS) {
		fprintf(stderr, "accept: %d accepted, then %s\n", nacc, strerror(errno));
		fx_rc = 4;
		goto out;
	}
	/* the runtime's own descriptors (epoll, eventfd) still work: a timer
	 * fires, and a read parks and is woken by the netpoller */
	if (weft_sleep(1000000) != 0) {
		fx_rc = 5;
		goto out;
	}
	char b[8] = { 0 };
	if (write(cl[0], "ping", 4) != 4 || read(acc[0], b, sizeof b) != 4 || memcmp(b, "ping", 4)) {
		fx_rc = 6;
		goto out;
	}
	/* fds come free: accept works again */
	close(acc[--nacc]);
	close(acc[--nacc]);
	for (int k = 0; k < 2; k++) {
		if ((r = accept(l, NULL, NULL)) < 0) {
			fprintf(stderr, "accept after close: %s\n", strerror(errno));
			fx_rc = 7;
			goto out;
		}
		acc[nacc++] = r;
	}
out:
	fx_done = 1;
}

static int fd_exhaustion(void)
{
	weft_go(fx_main, NULL);
	while (!fx_done)
		weft_sleep(1000000);
	return fx_rc;
}

Test(faults, fd_exhaustion_emfile_then_recovers, .timeout = 120)
{
	struct child c;
	char *env[] = { "WEFT_MAXPROCS=2", NULL };
	run_child(&c, env, fd_exhaustion, 100);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
		  "status %#x, stderr:\n%s", c.status, c.err);
}

/* ---- thread creation fails ---------------------------------------------------------- */


static void nt_worker(void *arg)
{
	weft_chan_t *ch = arg;
	for (int i = 0; i < 10; i++) {
		weft_sleep(10000);
		weft_yield();
	}
	int one = 1;
	weft_chan_send(ch, &one);
}

static _Atomic int nt_in; /* blockers in their blocking call */

static void nt_blocker(void *arg)
{
	/* calls that block its OS thread until all four blockers are in
	 * theirs (an event, not a time: at a slow moment one could end
	 * before the next began; 30 s if they never meet): the runtime
	 * wants another M for a P meanwhile, and the system refuses it */
	weft_chan_t *ch = arg;
	weft_blocking_enter();
	atomic_fetch_add(&nt_in, 1);
	struct timespec ts = { 0, 1000 * 1000 };
	for (int i = 0; i < 30000 && atomic_load(&nt_in) < 4; i++)
		nanosleep(&ts, NULL);
	weft_blocking_exit();
	int one = 1;
	weft_chan_send(ch, &one);
}

static void *nothing(void *arg)
{
	return arg;
}

static int no_threads(void)
{
	weft_chan_t *ch = weft_chan_make(sizeof(int), 0);
	/* the runtime starts with the threads it wants first */
	weft_go(nt_worker, ch);
	int v;
	weft_chan_recv(ch, &v);
	/* then no more: root is exempt from RLIMIT_NPROC, so become nobody,
	 * who owns no other task, limited to the threads we have */
	int have = os_threads();
	struct rlimit rl = { (rlim_t)have, (rlim_t)have };
	if (have < 2 || setrlimit(RLIMIT_NPROC, &rl) != 0 || setgid(65534) != 0 ||
	    setuid(65534) != 0)
		return 90;
	pthread_t t;
	if (pthread_create(&t, NULL, nothing, NULL) == 0)
		return 91; /* the limit does not hold here */
	for (int i = 0; i < 4; i++)
		if (weft_go(nt_blocker, ch) < 0)
			return 92;
	for (int i = 0; i < 200; i++)
		if (weft_go(nt_worker, ch) < 0)
			return 92;
	int sum = 0;
	for (int i = 0; i < 204; i++) {
		weft_chan_recv(ch, &v);
		sum += v;
	}
	if (os_threads() > have)
		return 94;
	return sum == 204 ? 0 : 93;
}

Test(faults, thread_creation_fails_runtime_keeps_running, .timeout = 120)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to run as a user with a process limit");
	struct child c;
	char *env[] = { "WEFT_MAXPROCS=2", NULL };
	run_child(&c, env, no_threads, 100);
	cr_assert_neq(WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1, 91,
		      "RLIMIT_NPROC does not stop thread creation here");
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
		  "status %#x, stderr:\n%s", c.status, c.err);
	/* said, and said once */
	const char *w = strstr(c.err, "cannot create another OS thread");
	cr_assert_not_null(w, "no warning about the missing threads:\n%s", c.err);
	cr_assert_null(strstr(w + 1, "cannot create another OS thread"),
		       "warned more than once:\n%s", c.err);
}

/* No thread at all when the runtime starts (not even sysmon's): not
 * fatal; the Gs run once the system lets threads be made again, and
 * sysmon with them. */
static void nt_flag(void *arg)
{
	atomic_store((_Atomic int *)arg, 1);
}

static int tl_pipe[2];
static _Atomic int tl_done;

static void tl_reader(void *arg)
{
	(void)arg;
	char c;
	weft_blocking_enter();
	long r = syscall(SYS_read, tl_pipe[0], &c, 1); /* blocks this M */
	weft_blocking_exit();
	atomic_store(&tl_done, r == 1);
}

static void tl_writer(void *arg)
{
	(void)arg;
	weft_sleep(1000000);
	(void)!write(tl_pipe[1], "x", 1);
}

static int threads_later(void)
{
	struct rlimit rl = { 1, 64 }; /* this thread only, for now */
	if (setrlimit(RLIMIT_NPROC, &rl) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
		return 90;
	_Atomic int a = 0, b = 0;
	if (weft_go(nt_flag, (void *)&a) <= 0)
		return 91;
	rl.rlim_cur = 64;
	if (setrlimit(RLIMIT_NPROC, &rl) != 0)
		return 92;
	if (weft_go(nt_flag, (void *)&b) <= 0) /* wakes an M, which can be made now */
		return 93;
	while (!atomic_load(&a) || !atomic_load(&b))
		sched_yield();
	/* sysmon is up: a G stuck in a blocking call has its one P handed
	 * on, so the G that would wake it runs (without sysmon: a hang) */
	if (pipe(tl_pipe) != 0)
		return 94;
	weft_go(tl_reader, NULL);
	weft_go(tl_writer, NULL);
	while (!atomic_load(&tl_done))
		sched_yield();
	return 0;
}

Test(faults, no_thread_at_start_is_not_fatal, .timeout = 120)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to run as a user with a process limit");
	struct child c;
	char *env[] = { "WEFT_MAXPROCS=1", NULL };
	run_child(&c, env, threads_later, 100);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
		  "status %#x, stderr:\n%s", c.status, c.err);
	cr_assert_not_null(strstr(c.err, "cannot create another OS thread"), "not said:\n%s",
			   c.err);
}

/* ---- stacks cannot be mapped -------------------------------------------------------- */

/* RLIMIT_AS to what the process has mapped now and room bytes more. */
static int as_limit(unsigned long room)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0;
	if (!f || fscanf(f, "%lu", &pages) != 1) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	struct rlimit rl = { (pages << 12) + room, RLIM_INFINITY };
	return setrlimit(RLIMIT_AS, &rl);
}

static void as_parked(void *arg)
{
	weft_chan_t *ch = arg;
	int v;
	weft_chan_recv(ch, &v);
}

static void as_quick(void *arg)
{
	atomic_store((_Atomic int *)arg, 1);
}

static int no_address_space(void)
{
	weft_chan_t *ch = weft_chan_make(sizeof(int), 0);
	weft_yield(); /* the runtime is up before the limit */
	/* room for a few hundred MiB more */
	if (as_limit(512UL << 20) != 0)
		return 81;
	weft_attr_t big = { .stack_size = 8 << 20 };
	/* AS_DEFAULT: the default size is 8M (WEFT_STACK_SIZE): freed stacks
	 * go to the P's cache, counted per P (proc.c stackwait_wake) */
	weft_attr_t *ap = getenv("AS_DEFAULT") ? NULL : &big;
	int n = 0;
	int64_t id;
	while ((id = weft_go_attr(ap, as_parked, ch)) > 0) {
		weft_yield(); /* let it take its stack */
		if (++n > 100000)
			return 82; /* the limit never bit */
	}
	if (errno != ENOMEM) {
		fprintf(stderr, "weft_go after %d: %s\n", n, strerror(errno));
		return 83;
	}
	if (n == 0)
		return 84;
	/* let them all go, then a new G gets a stack again */
	for (int i = 0; i < n; i++)
		weft_chan_send(ch, &i);
	/* they end (and give their stacks back) after their receives, on
	 * other Ps: until then a new descriptor or stack may still not fit,
	 * ENOMEM again; it must fit once they are gone (an event: the test's
	 * time bound catches a stack never given back) */
	_Atomic int done = 0;
	while (weft_go_attr(ap, as_quick, (void *)&done) <= 0) {
		if (errno != ENOMEM)
			return 85;
		weft_sleep(1000000);
	}
	while (!atomic_load(&done))
		weft_sleep(1000000);
	return 0;
}

Test(faults, stack_mapping_fails_enomem, .timeout = 120)
{
	struct child c;
	char *env[] = { "WEFT_MAXPROCS=2", NULL };
	run_child(&c, env, no_address_space, 100);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
		  "status %#x, stderr:\n%s", c.status, c.err);

}

/* A spare P that retires gives back what the Gs that ended on it left:
 * their descriptors and their cached stacks.  1 P; a G blocks in a raw
 * read (a call weft does not see), so sysmon lends a spare, and main and
 * SP_GS Gs run there, end there and leave their 8 MiB stacks in the
 * spare's cache.  The read is answered, the spare retires; then with
 * RLIMIT_AS at what the process has mapped (+4 MiB, less than a stack)
 * SP_GS Gs alive at once must find those stacks in the pool (before:
 * kept by the retired spare out of every P's reach, weft_go ENOMEM). */
enum { SP_GS = 8 };
static int sp_pipe[2];
static _Atomic int sp_ran;

static void sp_blocker(void *arg)
{
	char c;
	*(long *)arg = syscall(SYS_read, sp_pipe[0], &c, 1);
}

static _Atomic int sp_up;
static weft_chan_t *sp_go;

/* Alive at once, so each has a stack of its own; then it ends. */
static void sp_end(void *arg)
{
	int v;
	atomic_fetch_add(&sp_up, 1);
	weft_chan_recv(sp_go, &v);
	weft_wg_done(arg);
}

static void sp_hold(void *arg)
{
	atomic_fetch_add(&sp_ran, 1);
	as_parked(arg);
}

/* On a G (weft_main; main is a plain thread): the blocker and it share
 * P 0. */
static int sp_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_stats_t st;
	long got = 0;
	weft_wg_t bw = WEFT_WG_INIT;
	weft_go(sp_blocker, &got);
	weft_yield(); /* it blocks our only P's M; we wait for a spare */
	do {
		weft_sleep(1000000);
		if (weft_stats(&st) != 0)
			return 71;
	} while (st.syscall_handoffs + st.hog_handoffs == 0);
	weft_wg_add(&bw, SP_GS);
	sp_go = weft_chan_make(sizeof(int), 0);
	if (!sp_go)
		return 72;
	for (int i = 0; i < SP_GS; i++) /* on the spare: P 0's M is in the read */
		if (weft_go(sp_end, &bw) <= 0)
			return 72;
	while (atomic_load(&sp_up) < SP_GS)
		weft_sleep(1000000);
	for (int i = 0; i < SP_GS; i++)
		weft_chan_send(sp_go, &i);
	weft_wg_wait(&bw);
	if (write(sp_pipe[1], "x", 1) != 1)
		return 73;
	while (got != 1) /* the read is answered; sleeps take us off the spare */
		weft_sleep(1000000);
	for (int i = 0; i < 20; i++)
		weft_sleep(1000000);
	if (as_limit(4UL << 20) != 0) /* less than a stack */
		return 75;
	weft_chan_t *ch = weft_chan_make(sizeof(int), 0);
	if (!ch)
		return 76;
	for (int i = 0; i < SP_GS; i++)
		if (weft_go(sp_hold, ch) <= 0) {
			fprintf(stderr, "weft_go %d of %d: %s\n", i + 1, SP_GS, strerror(errno));
			return 77;
		}
	while (atomic_load(&sp_ran) < SP_GS) /* each on a stack of its own */
		weft_sleep(1000000);
	for (int i = 0; i < SP_GS; i++)
		weft_chan_send(ch, &i);
	return 0;
}

static int spare_gives_back(void)
{
	if (pipe(sp_pipe) != 0)
		return 70;
	return weft_main(sp_body, 0, NULL);
}

Test(faults, retired_spare_gives_back_stacks, .timeout = 120)
{
	struct child c;
	char *env[] = { "WEFT_MAXPROCS=1", "WEFT_STACK_SIZE=8M", NULL };
	run_child(&c, env, spare_gives_back, 100);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
		  "status %#x, stderr:\n%s", c.status, c.err);
}

/* The same with default-size stacks, which go back to their P's cache
 * when a G ends: a G that found no stack is woken by such a free too
 * (its count is the P's own, read by the waiter after a membarrier). */
Test(faults, stack_wait_woken_by_cached_free, .timeout = 120)
{
	struct child c;
	char *env[] = { "WEFT_MAXPROCS=2", "WEFT_STACK_SIZE=8M", "AS_DEFAULT=1", NULL };
	run_child(&c, env, no_address_space, 100);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
		  "status %#x, stderr:\n%s", c.status, c.err);
}

/* ---- the peer resets mid-write -------------------------------------------------------- */

static int rs_mode; /* 0 SIGPIPE ignored, 1 MSG_NOSIGNAL, 2 default disposition */
static int rs_rc;
static _Atomic int rs_done;

static void rs_main(void *arg)
{
	(void)arg;
	struct sockaddr_in a;
	int l = listener(&a);
	int c = dial(&a);
	int s = accept(l, NULL, NULL);
	if (l < 0 || c < 0 || s < 0) {
		rs_rc = 70;
		goto out;
	}
	/* the peer goes away abortively (RST) while we write */
	struct linger lg = { 1, 0 };
	setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	static char buf[1 << 16];
	ssize_t r = 0;
	for (int i = 0; i < 4; i++)
		r = rs_mode == 1 ? send(s, buf, sizeof buf, MSG_NOSIGNAL) : write(s, buf, sizeof buf);
	close(c);
	/* natively: ECONNRESET for the first write after the RST, then
	 * EPIPE (and SIGPIPE) for the next */
	int e = 0;
	for (int i = 0; i < 10000 && e != EPIPE; i++) {
		r = rs_mode == 1 ? send(s, buf, sizeof buf, MSG_NOSIGNAL) : write(s, buf, sizeof buf);
		e = r < 0 ? errno : 0;
		if (r < 0 && e != ECONNRESET && e != EPIPE)
			break;
	}
	if (e != EPIPE) {
		fprintf(stderr, "write to a reset peer: %zd %s\n", r, strerror(errno));
		rs_rc = 71;
	}
out:
	rs_done = 1;
}

static int peer_reset(void)
{
	if (rs_mode == 0)
		signal(SIGPIPE, SIG_IGN);
	weft_go(rs_main, NULL);
	while (!rs_done)
		weft_sleep(1000000);
	return rs_rc;
}

static int reset_ignored(void)
{
	rs_mode = 0;
	return peer_reset();
}

static int reset_nosignal(void)
{
	rs_mode = 1;
	return peer_reset();
}

static int reset_default(void)
{
	rs_mode = 2;
	return peer_reset();
}

Test(faults, peer_reset_mid_write, .timeout = 120)
{
	struct child c;
	char *env[] = { "WEFT_MAXPROCS=2", NULL };
	run_child(&c, env, reset_ignored, 100);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
		  "SIGPIPE ignored: status %#x, stderr:\n%s", c.status, c.err);
	run_child(&c, env, reset_nosignal, 100);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
		  "MSG_NOSIGNAL: status %#x, stderr:\n%s", c.status, c.err);
	/* the program did not ask to survive it: SIGPIPE, as natively */
	run_child(&c, env, reset_default, 100);
	cr_assert(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGPIPE,
		  "default SIGPIPE: status %#x, stderr:\n%s", c.status, c.err);
}
