/*
 * test_hook_net.c - blocking socket and pipe code on Gs: echo over TCP,
 * Unix sockets and pipes with thousands of Gs on one P, connect errors
 * and deadlines, an accept storm, large writes, 1 GiB through a socket
 * pair, all on WEFT_MAXPROCS=1.
 */
#include "test_hook.h"

#include <fcntl.h>
#include <sys/uio.h>

/* ---- echo: one G per connection on each side ---------------------------- */

#define ECHO_MSGS 8

static void echo_serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		CHECK(write(fd, buf, (size_t)n) == n);
	CHECK(n == 0);
	close(fd);
}

struct echo_client {
	int fd;
	int id;
	weft_wg_t *wg;
};

/* Send messages of varying size, each checked byte for byte on return. */
static void echo_client(void *arg)
{
	struct echo_client *c = arg;
	char out[2048], in[2048];
	for (int m = 0; m < ECHO_MSGS; m++) {
		size_t n = 1 + (size_t)(splitmix((uint64_t)c->id * 131 + m) % sizeof out);
		for (size_t i = 0; i < n; i++)
			out[i] = (char)pattern((uint64_t)c->id << 8 | m, i);
		CHECK(write(c->fd, out, n) == (ssize_t)n);
		CHECK(read_full(c->fd, in, n) == 0);
		CHECK(memcmp(in, out, n) == 0);
	}
	close(c->fd);
	weft_wg_done(c->wg);
}

struct acceptor {
	int lfd;
	int n;
};

static void accept_n(void *arg)
{
	struct acceptor *a = arg;
	for (int i = 0; i < a->n; i++) {
		int fd = accept(a->lfd, NULL, NULL);
		CHECK(fd >= 0);
		if (fd >= 0)
			weft_go(echo_serve, (void *)(intptr_t)fd);
	}
}

/* n clients through a listening socket lfd; connect_fn makes a client fd. */
static int echo_many(int lfd, int n, int (*connect_fn)(void *), void *carg)
{
	struct acceptor a = { lfd, n };
	weft_go(accept_n, &a);
	weft_wg_t wg = WEFT_WG_INIT;
	struct echo_client *cs = calloc((size_t)n, sizeof *cs);
	weft_wg_add(&wg, n);
	for (int i = 0; i < n; i++) {
		cs[i] = (struct echo_client){ connect_fn(carg), i, &wg };
		CHECK(cs[i].fd >= 0);
		weft_go(echo_client, &cs[i]);
	}
	weft_wg_wait(&wg);
	free(cs);
	close(lfd);
	/* Gs parked on the netpoller, not OS threads blocked in read */
	weft_stats_t st;
	weft_stats(&st);
	/* not one per blocked G (that would be ~2,000): a few dozen at most,
	 * as spare Ps lent around slow calls on a loaded or TSan machine
	 * bring Ms of their own (seen: > 16 under TSan at load ~70, > 64
	 * under TSan at load in the hundreds, where Ms sleep on TSan's own
	 * locks and sysmon lends spares around them) - so past 64, each
	 * thread must be one of those hand-offs' (a spare is an M), and
	 * never more than 256 */
	int64_t lent = st.syscall_handoffs + st.hog_handoffs;
	if (!(st.threads <= 64 || (st.threads <= 256 && st.threads <= 16 + lent))) {
		fprintf(stderr, "%d OS threads, %lld hand-offs\n", st.threads, (long long)lent);
		CHECK(0);
	}
	/* (accept on a blocking listener is accept4 under entersyscall once
	 * poll says a connection waits: on a loaded machine sysmon may hand
	 * a P off during one, so handoffs are not counted here) */
	return 0;
}

static int connect_tcp(void *arg)
{
	return tcp_connect(*(int *)arg);
}

G_TEST(hook_net, echo_tcp_2000_gs, 60)
{
	(void)argc, (void)argv;
	int port = 0;
	int lfd = tcp_listen(4096, &port);
	CHECK(lfd >= 0);
	return echo_many(lfd, 2000, connect_tcp, &port);
}

static int connect_unix(void *arg)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)arg, sizeof(struct sockaddr_un)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

G_TEST(hook_net, echo_unix_2000_gs, 60)
{
	(void)argc, (void)argv;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "weft-echo-%d", (int)getpid());
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(listen(lfd, 4096) == 0);
	return echo_many(lfd, 2000, connect_unix, &a);
}

/* Pipes: a pair of pipes per client, the echo G between them. */
struct pipe_echo {
	int in, out;
};

static void pipe_serve(void *arg)
{
	struct pipe_echo *p = arg;
	char buf[4096];
	ssize_t n;
	while ((n = read(p->in, buf, sizeof buf)) > 0)
		CHECK(write(p->out, buf, (size_t)n) == n);
	close(p->in);
	close(p->out);
}

struct pipe_client {
	int to, from, id;
	weft_wg_t *wg;
};

static void pipe_client(void *arg)
{
	struct pipe_client *c = arg;
	char out[2048], in[2048];
	for (int m = 0; m < ECHO_MSGS; m++) {
		size_t n = 1 + (size_t)(splitmix((uint64_t)c->id * 7 + m) % sizeof out);
		for (size_t i = 0; i < n; i++)
			out[i] = (char)pattern((uint64_t)c->id << 8 | m, i);
		CHECK(write(c->to, out, n) == (ssize_t)n);
		CHECK(read_full(c->from, in, n) == 0);
		CHECK(memcmp(in, out, n) == 0);
	}
	close(c->to);
	close(c->from);
	weft_wg_done(c->wg);
}

G_TEST(hook_net, echo_pipes_2000_gs, 60)
{
	(void)argc, (void)argv;
	enum { N = 2000 };
	static struct pipe_echo se[N];
	static struct pipe_client cl[N];
	weft_wg_t wg = WEFT_WG_INIT;
	weft_wg_add(&wg, N);
	for (int i = 0; i < N; i++) {
		int a[2], b[2];
		CHECK(pipe(a) == 0 && pipe(b) == 0);
		se[i] = (struct pipe_echo){ a[0], b[1] };
		cl[i] = (struct pipe_client){ a[1], b[0], i, &wg };
		weft_go(pipe_serve, &se[i]);
		weft_go(pipe_client, &cl[i]);
	}
	weft_wg_wait(&wg);
	return 0;
}

/* ---- connect --------------------------------------------------------------- */

G_TEST(hook_net, connect_refused, 20)
{
	(void)argc, (void)argv;
	int port = 0;
	int lfd = tcp_listen(1, &port);
	close(lfd); /* nobody listens there now */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loopback(port);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == -1);
	CHECK(err() == ECONNREFUSED);
	close(fd);
	return 0;
}

/* A listener whose accept queue is full drops SYNs: connect hangs until
 * its deadline (SO_SNDTIMEO: EINPROGRESS, as in the kernel), and a
 * non-blocking connect polled with a timeout times out. */
G_TEST(hook_net, connect_deadline, 30)
{
	(void)argc, (void)argv;
	int port = 0;
	int lfd = tcp_listen(0, &port);
	struct sockaddr_in a = loopback(port);
	int filler[8];
	for (int i = 0; i < 8; i++) { /* fill the accept queue */
		filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(filler[i], (struct sockaddr *)&a, sizeof a);
	}
	weft_sleep(100 * 1000000);

	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval tv = { 0, 200 * 1000 };
	CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
	int64_t t0 = now_ns();
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == -1);
	CHECK(err() == EINPROGRESS);
	int64_t ms = ms_since(t0);
	CHECK(ms >= 150 && ms < 5000 * test_slow());
	close(fd);

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == -1 && err() == EINPROGRESS);
	struct pollfd p = { fd, POLLOUT, 0 };
	t0 = now_ns();
	CHECK(poll(&p, 1, 200) == 0);
	ms = ms_since(t0);
	CHECK(ms >= 150 && ms < 5000 * test_slow());
	close(fd);
	for (int i = 0; i < 8; i++)
		close(filler[i]);
	close(lfd);
	return 0;
}

/* ---- accept storm: many acceptors, a burst of clients ----------------------- */

static _Atomic int served;

static void storm_acceptor(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			CHECK(err() == EBADF); /* the listener was closed: done */
			return;
		}
		char c;
		if (read(fd, &c, 1) == 1 && write(fd, &c, 1) == 1)
			atomic_fetch_add(&served, 1);
		close(fd);
	}
}

static void storm_client(void *arg)
{
	int port = (int)(intptr_t)arg & 0xffff;
	char c = 'x', r = 0;
	int fd = tcp_connect(port);
	CHECK(fd >= 0);
	CHECK(write(fd, &c, 1) == 1);
	CHECK(read(fd, &r, 1) == 1 && r == 'x');
	close(fd);
}

G_TEST(hook_net, accept_storm, 60)
{
	(void)argc, (void)argv;
	enum { ACCEPTORS = 8, CLIENTS = 3000 };
	int port = 0;
	int lfd = tcp_listen(4096, &port);
	for (int i = 0; i < ACCEPTORS; i++)
		weft_go(storm_acceptor, (void *)(intptr_t)lfd);
	for (int i = 0; i < CLIENTS; i++)
		weft_go(storm_client, (void *)(intptr_t)port);
	int64_t t0 = now_ns();
	while (atomic_load(&served) < CLIENTS && ms_since(t0) < 30000 * test_slow())
		weft_sleep(1000000);
	CHECK(atomic_load(&served) == CLIENTS);
	close(lfd); /* wakes the acceptors with EBADF */
	weft_sleep(20 * 1000000);
	return 0;
}

/* ---- writes the kernel splits complete whole ------------------------------------ */

struct sink {
	int fd;
	size_t n;
	uint64_t seed;
	_Atomic int ok;
};

static void sink_check(void *arg)
{
	struct sink *s = arg;
	size_t got = 0;
	char buf[65536];
	bool same = true;
	while (got < s->n) {
		ssize_t r = read(s->fd, buf, sizeof buf);
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			same &= (uint8_t)buf[i] == pattern(s->seed, got + (size_t)i);
		got += (size_t)r;
	}
	atomic_store(&s->ok, same && got == s->n ? 1 : -1);
}

struct source {
	int fd;
	const char *buf;
	size_t n;
	weft_wg_t done;
};

static void source_write(void *arg)
{
	struct source *s = arg;
	CHECK(write(s->fd, s->buf, s->n) == (ssize_t)s->n);
	weft_wg_done(&s->done);
}

static void wait_ok(_Atomic int *ok)
{
	while (!atomic_load(ok))
		weft_sleep(1000000);
}

G_TEST(hook_net, large_writes_whole, 60)
{
	(void)argc, (void)argv;
	enum { BIG = 32 << 20 };
	char *buf = malloc(BIG);
	for (size_t i = 0; i < BIG; i++)
		buf[i] = (char)pattern(1, i);

	/* write(2) on a socket pair, and on TCP */
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	struct sink s1 = { sv[1], BIG, 1, 0 };
	weft_go(sink_check, &s1);
	CHECK(write(sv[0], buf, BIG) == BIG);
	wait_ok(&s1.ok);
	CHECK(s1.ok == 1);

	int port = 0;
	int lfd = tcp_listen(1, &port);
	int c = tcp_connect(port);
	int a = accept(lfd, NULL, NULL);
	struct sink s2 = { a, BIG, 1, 0 };
	weft_go(sink_check, &s2);
	CHECK(send(c, buf, BIG, 0) == BIG);
	wait_ok(&s2.ok);
	CHECK(s2.ok == 1);

	/* writev and sendmsg with many pieces, split anywhere */
	struct iovec iov[64];
	for (int i = 0; i < 64; i++)
		iov[i] = (struct iovec){ buf + (size_t)i * (BIG / 64), BIG / 64 };
	struct sink s3 = { a, BIG, 1, 0 };
	weft_go(sink_check, &s3);
	CHECK(writev(c, iov, 64) == BIG);
	wait_ok(&s3.ok);
	CHECK(s3.ok == 1);
	struct sink s4 = { sv[1], BIG, 1, 0 };
	weft_go(sink_check, &s4);
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 64 };
	CHECK(sendmsg(sv[0], &mh, 0) == BIG);
	wait_ok(&s4.ok);
	CHECK(s4.ok == 1);
	CHECK(iov[0].iov_len == BIG / 64 && iov[0].iov_base == buf); /* the caller's iovec is untouched */

	/* MSG_WAITALL gets all of it in one call */
	char *in = malloc(BIG);
	struct source src = { sv[0], buf, BIG, WEFT_WG_INIT };
	weft_wg_add(&src.done, 1);
	weft_go(source_write, &src);
	CHECK(recv(sv[1], in, BIG, MSG_WAITALL) == BIG);
	CHECK(memcmp(in, buf, BIG) == 0);
	weft_wg_wait(&src.done);
	free(in);
	close(sv[0]);
	close(sv[1]);
	close(a);
	close(c);
	close(lfd);
	free(buf);
	return 0;
}

/* ---- 1 GiB through a socket pair, hashed at both ends ---------------------------- */

#define GIB (1ULL << 30)
#define CHUNK (1 << 20)

static uint64_t hash_words(uint64_t h, const uint64_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ w[i]) * 0x100000001b3ULL;
	return h;
}

struct gib {
	int fd;
	uint64_t hash;
	_Atomic int done;
};

static void gib_writer(void *arg)
{
	struct gib *g = arg;
	uint64_t *buf = malloc(CHUNK);
	uint64_t h = 0xcbf29ce484222325ULL, k = 0;
	for (uint64_t off = 0; off < GIB; off += CHUNK) {
		for (size_t i = 0; i < CHUNK / 8; i++)
			buf[i] = splitmix(k++);
		h = hash_words(h, buf, CHUNK / 8);
		CHECK(write(g->fd, buf, CHUNK) == CHUNK);
	}
	g->hash = h;
	close(g->fd);
	free(buf);
	atomic_store(&g->done, 1);
}

G_TEST(hook_net, gib_socketpair_checksum, 60)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	int sz = 4 << 20;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
	struct gib g = { sv[0], 0, 0 };
	int64_t t0 = now_ns();
	weft_go(gib_writer, &g);
	uint64_t *buf = malloc(CHUNK);
	uint64_t h = 0xcbf29ce484222325ULL, total = 0;
	for (;;) {
		ssize_t r = recv(sv[1], buf, CHUNK, MSG_WAITALL); /* whole chunks */
		if (r <= 0)
			break;
		CHECK(r == CHUNK);
		h = hash_words(h, buf, (size_t)r / 8);
		total += (uint64_t)r;
	}
	wait_ok(&g.done);
	CHECK(total == GIB);
	CHECK(h == g.hash);
	int64_t ms = ms_since(t0);
	/* a speed figure, not a bound: the child's alarm catches a hang */
	fprintf(stderr, "1 GiB through a socket pair in %lld ms\n", (long long)ms);
	close(sv[1]);
	free(buf);
	return 0;
}

/* ---- EOF right behind the data: the short read took the FIN too ---------------- */

struct eof_reader {
	int fd;
	ssize_t r1, r2;
	_Atomic int done;
};

static void eof_read(void *arg)
{
	struct eof_reader *e = arg;
	char buf[4096];
	e->r1 = read(e->fd, buf, sizeof buf);
	e->r2 = read(e->fd, buf, sizeof buf);
	atomic_store(&e->done, 1);
}

G_TEST(hook_net, eof_after_short_read, 20)
{
	(void)argc, (void)argv;
	int port = 0;
	int lfd = tcp_listen(8, &port);
	for (int round = 0; round < 50; round++) {
		int c = tcp_connect(port);
		int a = accept(lfd, NULL, NULL);
		struct eof_reader e = { a, 0, 0, 0 };
		weft_go(eof_read, &e);
		weft_yield(); /* it parks in read */
		CHECK(write(c, "abc", 3) == 3);
		CHECK(shutdown(c, SHUT_WR) == 0);
		for (int i = 0; i < 5000 * test_slow() && !atomic_load(&e.done); i++)
			usleep(1000);
		CHECK(atomic_load(&e.done));
		CHECK(e.r1 == 3 && e.r2 == 0);
		if (!atomic_load(&e.done))
			return 1; /* the reader still holds e */
		close(a);
		close(c);
	}
	close(lfd);
	return 0;
}

/* A reset after part of a MSG_WAITALL read: the kernel returns the part
 * and leaves the reset for the next call (tcp_recvmsg stops once it has
 * copied something and the socket has an error); weft's loop must not
 * take it with a further try, or the program's next read says 0, end of
 * file, instead of ECONNRESET (fuzzer finding 15).  The peer is closed
 * with a byte it never read, so its close sends a reset; the same for
 * recvmsg, whose loop is io_allv. */
static void reset_after_part(bool use_msg)
{
	int port = 0;
	int lfd = tcp_listen(1, &port);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loopback(port);
	CHECK(connect(c, (struct sockaddr *)&a, sizeof a) == 0);
	int s = accept(lfd, NULL, NULL);
	CHECK(s >= 0);
	static char buf[16384];
	CHECK(write(c, "x", 1) == 1); /* s never reads it */
	memset(buf, 'a', 8192);
	CHECK(write(s, buf, 8192) == 8192);
	close(s); /* a reset to c */
	ssize_t n;
	if (use_msg) {
		struct iovec v = { buf, sizeof buf };
		struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
		n = recvmsg(c, &m, MSG_WAITALL);
	} else {
		n = recv(c, buf, sizeof buf, MSG_WAITALL);
	}
	CHECK(n == 8192);
	errno = 0;
	CHECK(recv(c, buf, sizeof buf, 0) == -1 && err() == ECONNRESET);
	CHECK(recv(c, buf, sizeof buf, 0) == 0); /* then end of file, as natively */
	close(c);
	close(lfd);
}

G_TEST(hook_net, waitall_part_keeps_the_reset, 20)
{
	(void)argc, (void)argv;
	reset_after_part(false);
	reset_after_part(true);
	return 0;
}

/* ---- a busy P polls the netpoller (proc.c, busypoll) ---------------------- */

/* Yielders keep both Ps busy (a P never goes idle, so its scheduler
 * never blocks in the netpoller) while one G is parked in a pipe read.
 * Once the byte is written, a P looks at the netpoller at its first 8th
 * switch past pollgap (1 ms) after the last poll, and the reader, now on
 * the global queue, runs at the next fair tick (every 61st switch of a
 * P).  So the yields made later than 1 ms after the write and before the
 * reader runs are at most ~2 x (8 + 61), counted, not timed.  Before,
 * only sysmon polled while the Ps were busy, every 10 ms: tens of
 * thousands of yields.  The median of 5 rounds is checked: a poller
 * descheduled between its epoll_wait and queueing the reader (a loaded
 * machine) delays one round. */
enum { BP_YIELDERS = 4, BP_ROUNDS = 5 };
static _Atomic int bp_stop, bp_reading, bp_done;
static _Atomic int64_t bp_wrote; /* ns; 0: not yet this round */
static _Atomic int64_t bp_late;  /* yields > 1 ms after the write */

static int64_t bp_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void bp_yield_once(void)
{
	weft_yield();
	int64_t w = atomic_load(&bp_wrote);
	if (w && !atomic_load(&bp_done) && bp_now() > w + 1000000)
		atomic_fetch_add(&bp_late, 1);
}

static void bp_yielder(void *arg)
{
	weft_wg_t *wg = arg;
	while (!atomic_load(&bp_stop))
		bp_yield_once();
	weft_wg_done(wg);
}

struct bp_reader {
	int fd;
	int64_t late; /* bp_late when it ran */
	weft_wg_t *wg;
};

static void bp_reader(void *arg)
{
	struct bp_reader *r = arg;
	char b;
	atomic_store(&bp_reading, 1);
	CHECK(read(r->fd, &b, 1) == 1);
	r->late = atomic_load(&bp_late);
	atomic_store(&bp_done, 1);
	weft_wg_done(r->wg);
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

G_TEST_ENV(hook_net, busy_ps_poll_the_netpoller, env_procs2, 60)
{
	(void)argc, (void)argv;
	weft_wg_t ywg = WEFT_WG_INIT;
	weft_wg_add(&ywg, BP_YIELDERS);
	for (int i = 0; i < BP_YIELDERS; i++)
		weft_go(bp_yielder, &ywg);
	int64_t late[BP_ROUNDS];
	for (int round = 0; round < BP_ROUNDS; round++) {
		int p[2];
		CHECK(pipe(p) == 0);
		atomic_store(&bp_reading, 0);
		atomic_store(&bp_done, 0);
		atomic_store(&bp_wrote, 0);
		atomic_store(&bp_late, 0);
		weft_wg_t rwg = WEFT_WG_INIT;
		weft_wg_add(&rwg, 1);
		struct bp_reader r = { p[0], 0, &rwg };
		weft_go(bp_reader, &r);
		while (!atomic_load(&bp_reading))
			weft_yield();
		for (int i = 0; i < 1000; i++) /* let it reach its park */
			weft_yield();
		CHECK(write(p[1], "x", 1) == 1);
		atomic_store(&bp_wrote, bp_now());
		while (!atomic_load(&bp_done))
			bp_yield_once();
		weft_wg_wait(&rwg);
		late[round] = r.late;
		close(p[0]);
		close(p[1]);
	}
	atomic_store(&bp_stop, 1);
	weft_wg_wait(&ywg);
	qsort(late, BP_ROUNDS, sizeof late[0], cmp64);
	if (late[BP_ROUNDS / 2] > 400)
		fprintf(stderr, "late yields per round: %lld %lld %lld %lld %lld\n",
			(long long)late[0], (long long)late[1], (long long)late[2],
			(long long)late[3], (long long)late[4]);
	CHECK(late[BP_ROUNDS / 2] <= 400);
	return 0;
}

/* ---- turns at request boundaries (proc.c rt_turn) ------------------------ */

/* A connection's G whose next request is always there already (its
 * client answers at once: here, all of them queued before it starts)
 * never parks: each receive finds data.  On 1 P, another G made runnable
 * behind it waits until the streak ends - for all TN_REQS requests (or
 * sysmon's 10 ms yield request).  With a turn of 100 us it gives way at
 * the first request boundary past 100 us of its run; each request takes
 * at least TN_WORK_NS of the clock, so the other G runs after at most
 * ~100 / 5 + 2 requests (counted, not timed: a loaded machine fits
 * fewer).  Both kinds of receive: MSG_DONTWAIT passed straight through
 * (MariaDB's) and a blocking read that the hooks try without blocking. */
enum { TN_REQS = 200, TN_BOUND = 60, TN_WORK_NS = 5000 };

struct tn {
	int req, rep; /* the server's ends: requests in, replies out */
	bool dontwait;
	_Atomic int served, atother; /* requests served; served when the other G ran */
	weft_wg_t *wg;
};

static void tn_streaker(void *arg)
{
	struct tn *t = arg;
	char c;
	for (int i = 0; i < TN_REQS; i++) {
		int64_t end = bp_now() + TN_WORK_NS; /* the request's work */
		while (bp_now() < end)
			;
		if (t->dontwait) {
			CHECK(recv(t->req, &c, 1, MSG_DONTWAIT) == 1);
			atomic_store(&t->served, i + 1);
			CHECK(send(t->rep, &c, 1, MSG_DONTWAIT) == 1);
		} else {
			CHECK(read(t->req, &c, 1) == 1);
			atomic_store(&t->served, i + 1);
			CHECK(write(t->rep, &c, 1) == 1);
		}
	}
	weft_wg_done(t->wg);
}

static void tn_other(void *arg)
{
	struct tn *t = arg;
	atomic_store(&t->atother, atomic_load(&t->served));
	weft_wg_done(t->wg);
}

/* The client's side of the replies: a plain thread (not a G) reads them
 * as they come (a unix socket holds only ~280 one-byte sends unread). */
static void *tn_drain(void *arg)
{
	char buf[TN_REQS];
	CHECK(read_full((int)(intptr_t)arg, buf, sizeof buf) == 0); /* every reply came */
	return NULL;
}

/* One round: the requests queued, the streaker made first (it runs
 * first, from runnext), the other G behind it.  Returns how many
 * requests the streaker had served when the other G ran; *sysmon: sysmon
 * asked a G to yield or lent a P meanwhile (a loaded machine). */
static int tn_round(bool dontwait, bool *sysmon)
{
	int req[2], rep[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, req) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, rep) == 0);
	char reqs[TN_REQS];
	memset(reqs, 'q', sizeof reqs);
	CHECK(write(req[1], reqs, sizeof reqs) == (ssize_t)sizeof reqs);
	pthread_t drain;
	CHECK(pthread_create(&drain, NULL, tn_drain, (void *)(intptr_t)rep[1]) == 0);
	weft_stats_t s0, s1;
	CHECK(weft_stats(&s0) == 0);
	weft_wg_t wg = WEFT_WG_INIT;
	weft_wg_add(&wg, 2);
	struct tn t = { .req = req[0], .rep = rep[0], .dontwait = dontwait, .wg = &wg };
	weft_go(tn_streaker, &t);
	weft_go(tn_other, &t);
	weft_wg_wait(&wg);
	CHECK(weft_stats(&s1) == 0);
	*sysmon = s1.preempts != s0.preempts || s1.hog_handoffs != s0.hog_handoffs;
	CHECK(atomic_load(&t.served) == TN_REQS);
	CHECK(pthread_join(drain, NULL) == 0);
	close(req[0]);
	close(req[1]);
	close(rep[0]);
	close(rep[1]);
	return atomic_load(&t.atother);
}

static char *env_turn100[] = { "WEFT_MAXPROCS=1", "WEFT_DEBUG=turn=100", NULL };
static char *env_turn0[] = { "WEFT_MAXPROCS=1", "WEFT_DEBUG=turn=0", NULL };

G_TEST_ENV(hook_net, turn_bounds_a_streak, env_turn100, 60)
{
	(void)argc, (void)argv;
	for (int round = 0; round < 6; round++) {
		bool sysmon;
		int at = tn_round(round & 1, &sysmon);
		if (at > TN_BOUND)
			fprintf(stderr, "round %d (%s): the other G ran after %d requests\n", round,
				round & 1 ? "MSG_DONTWAIT" : "read", at);
		CHECK(at <= TN_BOUND);
	}
	return 0;
}

/* Turns are on by default (200 us: docs/design.md, "Turns"; linked, no
 * G has TLS of its own, so a switch loads no FS base): a streak of 200
 * requests of 5 us each lets the other G in after ~42, well before its
 * end (bound TN_REQS / 2: without turns, all 200; with the default at
 * 1 ms, ~200). */
static char *env_turndefault[] = { "WEFT_MAXPROCS=1", NULL };

G_TEST_ENV(hook_net, default_turn_bounds_a_streak, env_turndefault, 60)
{
	(void)argc, (void)argv;
	for (int round = 0; round < 4; round++) {
		bool sysmon;
		int at = tn_round(round & 1, &sysmon);
		if (at > TN_REQS / 2)
			fprintf(stderr, "round %d (%s): the other G ran after %d requests\n", round,
				round & 1 ? "MSG_DONTWAIT" : "read", at);
		CHECK(at <= TN_REQS / 2);
	}
	return 0;
}

/* The same with turns off: the other G runs only once the streak is over
 * (counted in a round sysmon left alone: on a loaded machine its 10 ms
 * yield request may come first). */
G_TEST_ENV(hook_net, no_turn_lets_a_streak_run, env_turn0, 60)
{
	(void)argc, (void)argv;
	int clean = 0;
	for (int round = 0; round < 20 && clean < 2; round++) {
		bool sysmon;
		int at = tn_round(round & 1, &sysmon);
		if (sysmon)
			continue;
		clean++;
		CHECK(at == TN_REQS);
	}
	if (!clean)
		fprintf(stderr, "no round without sysmon: not checked\n");
	return 0;
}
