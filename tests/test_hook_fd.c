/*
 * test_hook_fd.c - the semantics of the program's call on a G: close
 * and dup2 wake parked Gs with EBADF, socket timeouts, the program's own
 * O_NONBLOCK, shutdown, errno after a park, signals, files, the
 * resolver, the fortified entry points.
 */
#include "test_hook.h"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);

/* ---- close and dup2 wake parked Gs with EBADF ---------------------------- */

struct parked {
	int fd;
	_Atomic int state; /* 0 not yet, 1 parked (about to be), 2 returned */
	ssize_t r;
	int e;
};

static void park_read(void *arg)
{
	struct parked *p = arg;
	char c;
	atomic_store(&p->state, 1);
	p->r = read(p->fd, &c, 1);
	p->e = err();
	atomic_store(&p->state, 2);
}

static void wait_state(struct parked *p, int st)
{
	for (int i = 0; i < 5000 * test_slow() && atomic_load(&p->state) < st; i++)
		weft_sleep(1000000);
}

G_TEST(hook_fd, close_wakes_parked_reader_ebadf, 20)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	struct parked p = { sv[0], 0, 0, 0 };
	weft_go(park_read, &p);
	wait_state(&p, 1);
	weft_sleep(20 * 1000000); /* let it park */
	CHECK(atomic_load(&p.state) == 1);
	CHECK(close(sv[0]) == 0);
	wait_state(&p, 2);
	CHECK(p.r == -1 && p.e == EBADF);

	/* the number is reused at once: the new file gets no stray wakeup
	 * and no stale readiness */
	int sv2[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2) == 0);
	CHECK(sv2[0] == sv[0]);
	struct parked q = { sv2[0], 0, 0, 0 };
	weft_go(park_read, &q);
	wait_state(&q, 1);
	weft_sleep(30 * 1000000);
	CHECK(atomic_load(&q.state) == 1);
	CHECK(write(sv2[1], "y", 1) == 1);
	wait_state(&q, 2);
	CHECK(q.r == 1);
	close(sv[1]);
	close(sv2[0]);
	close(sv2[1]);
	return 0;
}

G_TEST(hook_fd, dup2_onto_parked_fd_ebadf, 20)
{
	(void)argc, (void)argv;
	int a[2], b[2];
	CHECK(pipe(a) == 0 && pipe(b) == 0);
	struct parked p = { a[0], 0, 0, 0 };
	weft_go(park_read, &p);
	wait_state(&p, 1);
	weft_sleep(20 * 1000000);
	CHECK(dup2(b[0], a[0]) == a[0]);
	wait_state(&p, 2);
	CHECK(p.r == -1 && p.e == EBADF);
	/* a[0] is now b's read end, blocking as b[0] is */
	CHECK(fcntl(a[0], F_GETFL) == fcntl(b[0], F_GETFL));
	struct parked q = { a[0], 0, 0, 0 };
	weft_go(park_read, &q);
	weft_sleep(20 * 1000000);
	CHECK(atomic_load(&q.state) == 1);
	CHECK(write(b[1], "z", 1) == 1);
	wait_state(&q, 2);
	CHECK(q.r == 1);
	return 0;
}

/* A plain thread closes the fd a G is parked on. */
static void *closer(void *arg)
{
	usleep(30000);
	close((int)(intptr_t)arg);
	return NULL;
}

G_TEST(hook_fd, plain_thread_close_wakes_g, 20)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pthread_t t;
	pthread_create(&t, NULL, closer, (void *)(intptr_t)sv[0]);
	char c;
	CHECK(read(sv[0], &c, 1) == -1);
	CHECK(err() == EBADF);
	pthread_join(t, NULL);
	return 0;
}

/* ---- timeouts -------------------------------------------------------------- */

G_TEST(hook_fd, so_rcvtimeo_and_sndtimeo, 20)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	struct timeval tv = { 0, 100 * 1000 };
	CHECK(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	char buf[64];
	int64_t t0 = now_ns();
	CHECK(read(sv[0], buf, sizeof buf) == -1);
	CHECK(err() == EAGAIN);
	int64_t ms = ms_since(t0);
	CHECK(ms >= 90 && ms < 3000 * test_slow());
	/* recv and recvmsg the same */
	CHECK(recv(sv[0], buf, sizeof buf, 0) == -1 && err() == EAGAIN);
	/* data before the deadline is returned */
	CHECK(write(sv[1], "hi", 2) == 2);
	CHECK(read(sv[0], buf, sizeof buf) == 2);

	/* accept honours SO_RCVTIMEO too */
	int port = 0;
	int lfd = tcp_listen(8, &port);
	CHECK(setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	CHECK(accept(lfd, NULL, NULL) == -1 && err() == EAGAIN);

	/* a full socket with SO_SNDTIMEO: the part written, then EAGAIN */
	CHECK(setsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
	size_t big = 8 << 20;
	char *p = calloc(1, big);
	ssize_t w = write(sv[1], p, big);
	CHECK(w > 0 && (size_t)w < big);
	CHECK(write(sv[1], p, big) == -1 && err() == EAGAIN);
	free(p);
	close(lfd);
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* ---- the program's own non-blocking mode ------------------------------------- */

G_TEST(hook_fd, program_nonblock_honoured, 20)
{
	(void)argc, (void)argv;
	char c;
	/* SOCK_NONBLOCK at creation */
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	CHECK(read(sv[0], &c, 1) == -1 && err() == EAGAIN);
	CHECK(fcntl(sv[0], F_GETFL) & O_NONBLOCK);
	close(sv[0]);
	close(sv[1]);

	/* a blocking socket: non-blocking underneath, blocking to the program */
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(!(fcntl(sv[0], F_GETFL) & O_NONBLOCK));
	/* fcntl O_NONBLOCK, and back */
	CHECK(fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK) == 0);
	CHECK(fcntl(sv[0], F_GETFL) & O_NONBLOCK);
	CHECK(read(sv[0], &c, 1) == -1 && err() == EAGAIN);
	CHECK(recv(sv[0], &c, 1, 0) == -1 && err() == EAGAIN);
	CHECK(fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) & ~O_NONBLOCK) == 0);
	CHECK(!(fcntl(sv[0], F_GETFL) & O_NONBLOCK));
	struct parked p = { sv[0], 0, 0, 0 };
	weft_go(park_read, &p);
	wait_state(&p, 1); /* it started (valgrind may take longer than 20 ms) */
	weft_sleep(20 * 1000000);
	CHECK(atomic_load(&p.state) == 1); /* blocking again: it parked */
	CHECK(write(sv[1], "a", 1) == 1);
	wait_state(&p, 2);
	CHECK(p.r == 1);

	/* ioctl FIONBIO */
	int on = 1;
	CHECK(ioctl(sv[0], FIONBIO, &on) == 0);
	CHECK(read(sv[0], &c, 1) == -1 && err() == EAGAIN);
	CHECK(fcntl(sv[0], F_GETFL) & O_NONBLOCK);
	on = 0;
	CHECK(ioctl(sv[0], FIONBIO, &on) == 0);
	CHECK(!(fcntl(sv[0], F_GETFL) & O_NONBLOCK));

	/* MSG_DONTWAIT is one try */
	CHECK(recv(sv[0], &c, 1, MSG_DONTWAIT) == -1 && err() == EAGAIN);

	/* pipe2 O_NONBLOCK, eventfd EFD_NONBLOCK, accept4 SOCK_NONBLOCK */
	int pf[2];
	CHECK(pipe2(pf, O_NONBLOCK) == 0);
	CHECK(read(pf[0], &c, 1) == -1 && err() == EAGAIN);
	int efd = eventfd(0, EFD_NONBLOCK);
	uint64_t v;
	CHECK(read(efd, &v, 8) == -1 && err() == EAGAIN);
	int port = 0;
	int lfd = tcp_listen(8, &port);
	int cfd = tcp_connect(port);
	int afd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	CHECK(afd >= 0);
	CHECK(read(afd, &c, 1) == -1 && err() == EAGAIN);
	CHECK(fcntl(afd, F_GETFL) & O_NONBLOCK);
	/* a listener the program made non-blocking */
	CHECK(fcntl(lfd, F_SETFL, O_NONBLOCK) == 0);
	CHECK(accept(lfd, NULL, NULL) == -1 && err() == EAGAIN);
	/* a dup shares the mode */
	int d = dup(sv[0]);
	CHECK(!(fcntl(d, F_GETFL) & O_NONBLOCK));
	CHECK(fcntl(d, F_DUPFD_CLOEXEC, 100) >= 100);
	close(d);
	close(afd);
	close(cfd);
	close(lfd);
	close(efd);
	close(pf[0]);
	close(pf[1]);
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* ---- shutdown wakes readers: EOF ---------------------------------------------- */

G_TEST(hook_fd, shutdown_wakes_reader, 20)
{
	(void)argc, (void)argv;
	int port = 0;
	int lfd = tcp_listen(8, &port);
	int c = tcp_connect(port);
	int a = accept(lfd, NULL, NULL);
	struct parked p = { a, 0, 0, 0 };
	weft_go(park_read, &p);
	weft_sleep(20 * 1000000);
	CHECK(shutdown(a, SHUT_RD) == 0);
	wait_state(&p, 2);
	CHECK(p.r == 0);
	close(a);
	close(c);
	close(lfd);
	return 0;
}

/* ---- errno belongs to the thread the G returns on ------------------------------ */

static _Atomic int errno_bad;

static void errno_worker(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char c;
	for (int i = 0; i < 20; i++) {
		if (read(fd, &c, 1) != -1 || err() != EAGAIN)
			atomic_fetch_add(&errno_bad, 1);
	}
	close(fd);
}

G_TEST_ENV(hook_fd, errno_after_park_procs2, env_procs2, 30)
{
	(void)argc, (void)argv;
	enum { N = 200 };
	int peers[N];
	struct timeval tv = { 0, 1000 };
	for (int i = 0; i < N; i++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		peers[i] = sv[1];
		weft_go(errno_worker, (void *)(intptr_t)sv[0]);
	}
	weft_sleep(500 * 1000000);
	CHECK(atomic_load(&errno_bad) == 0);
	for (int i = 0; i < N; i++)
		close(peers[i]);
	return 0;
}

/* ---- signals: a parked G is not interrupted --------------------------------------- */

static _Atomic int got_sig;

static void on_usr1(int s)
{
	(void)s;
	atomic_fetch_add(&got_sig, 1);
}

static void *signaller(void *arg)
{
	(void)arg;
	usleep(20000);
	kill(getpid(), SIGUSR1);
	usleep(20000);
	kill(getpid(), SIGUSR1);
	return NULL;
}

G_TEST(hook_fd, signal_does_not_interrupt_parked_g, 20)
{
	(void)argc, (void)argv;
	struct sigaction sa = { .sa_handler = on_usr1 }; /* no SA_RESTART */
	sigaction(SIGUSR1, &sa, NULL);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	struct timeval tv = { 0, 200 * 1000 };
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	pthread_t t;
	pthread_create(&t, NULL, signaller, NULL);
	char c;
	CHECK(read(sv[0], &c, 1) == -1 && err() == EAGAIN); /* the timeout, not EINTR */
	struct timespec ts = { 0, 100 * 1000000 };
	CHECK(nanosleep(&ts, NULL) == 0);
	pthread_join(t, NULL);
	CHECK(atomic_load(&got_sig) == 2);
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* ---- regular files run under entersyscall ----------------------------------------- */

G_TEST(hook_fd, regular_files, 20)
{
	(void)argc, (void)argv;
	char path[] = "/tmp/weft-hook-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(write(fd, "hello world", 11) == 11);
	CHECK(fsync(fd) == 0 && fdatasync(fd) == 0);
	char buf[16] = { 0 };
	CHECK(pread(fd, buf, 5, 6) == 5 && memcmp(buf, "world", 5) == 0);
	CHECK(pwrite(fd, "W", 1, 6) == 1);
	struct stat st;
	CHECK(fstat(fd, &st) == 0 && st.st_size == 11);
	CHECK(stat(path, &st) == 0 && lstat(path, &st) == 0);
	CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK)); /* files are never switched */
	close(fd);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(read(fd, buf, 11) == 11 && memcmp(buf, "hello World", 11) == 0);
	CHECK(read(fd, buf, 1) == 0);
	struct pollfd p = { fd, POLLIN, 0 };
	CHECK(poll(&p, 1, 1000) == 1); /* always ready */
	close(fd);
	fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(__pread_chk(fd, buf, 5, 0, sizeof buf) == 5);
	struct stat64 st64;
	CHECK(fstat64(fd, &st64) == 0 && st64.st_size == 11);
	CHECK(statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &(struct statx){ 0 }) == 0);
	close(fd);
	fd = open64(path, O_WRONLY | O_APPEND);
	CHECK(fd >= 0 && write(fd, "!", 1) == 1);
	close(fd);
	CHECK(unlink(path) == 0);
	CHECK(open(path, O_RDONLY) == -1 && err() == ENOENT);
	return 0;
}

/* ---- an eventfd write is the call itself ------------------------------------------ */

struct evwriter {
	int fd;
	_Atomic int state; /* 0 not yet, 1 about to write, 2 returned */
	ssize_t r;         /* write's result */
	int e;             /* errno after it */
};

static void ev_write_one(void *arg)
{
	struct evwriter *w = arg;
	uint64_t one = 1;
	atomic_store(&w->state, 1);
	errno = 4321; /* a write that succeeds leaves errno as it was */
	w->r = write(w->fd, &one, 8);
	w->e = err();
	atomic_store(&w->state, 2);
}

/* Whether some thread of this process is inside write(fd, ...) in the
 * kernel now (/proc/self/task/T/syscall: "1 0xFD ..."). */
static bool in_kernel_write(int fd)
{
	char want[32], path[300], buf[128];
	snprintf(want, sizeof want, "%d 0x%x ", SYS_write, fd);
	DIR *dir = opendir("/proc/self/task");
	CHECK(dir != NULL);
	bool found = false;
	for (struct dirent *de; dir && !found && (de = readdir(dir)) != NULL;) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/syscall", de->d_name);
		int f = open(path, O_RDONLY);
		if (f < 0)
			continue; /* the thread is gone */
		ssize_t n = read(f, buf, sizeof buf - 1);
		close(f);
		found = n > 0 && strncmp(buf, want, strlen(want)) == 0;
	}
	if (dir)
		closedir(dir);
	return found;
}

/* A write that would take the counter past 0xfffffffffffffffe waits in
 * the kernel until a read drains it, natively.  Under weft it is the same
 * call on the writer's OS thread (before: a poll, then the G parked, never
 * in write), and on 1 P sysmon must hand the P on, or the reader (this G)
 * never runs and the program hangs.  Same results as natively: the reader
 * gets 0xfffffffffffffffe, the writer 8 with errno untouched, the counter
 * then holds 1. */
static void ev_overflow(int e)
{
	uint64_t v = 0xfffffffffffffffeULL;
	CHECK(write(e, &v, 8) == 8); /* the most it holds */
	struct evwriter w = { e, 0, 0, 0 };
	weft_go(ev_write_one, &w);
	bool inside = false;
	for (int i = 0; i < 5000 * test_slow() && !inside && atomic_load(&w.state) < 2; i++) {
		weft_sleep(1000000);
		inside = in_kernel_write(e);
	}
	CHECK(inside);
	CHECK(atomic_load(&w.state) == 1); /* still waiting */
	v = 0;
	CHECK(read(e, &v, 8) == 8 && v == 0xfffffffffffffffeULL);
	for (int i = 0; i < 5000 * test_slow() && atomic_load(&w.state) < 2; i++)
		weft_sleep(1000000);
	CHECK(atomic_load(&w.state) == 2);
	CHECK(w.r == 8 && w.e == 4321);
	CHECK(read(e, &v, 8) == 8 && v == 1);
}

G_TEST(hook_fd, eventfd_write_waits_in_kernel_till_drained, 30)
{
	(void)argc, (void)argv;
	int e = eventfd(0, 0);
	CHECK(e >= 0);
	ev_overflow(e);
	/* one weft learns by its first write's EOPNOTSUPP */
	int raw = (int)syscall(SYS_eventfd2, 0, 0);
	CHECK(raw >= 0);
	ev_overflow(raw);
	close(raw);
	close(e);
	return 0;
}

/* A permission-event listener (an antivirus, a file-access broker): the
 * thread that reads a fanotify event answers it with a write on the same
 * blocking fd.  fanotify's poll reports only POLLIN, so a write that
 * waited for POLLOUT would park forever (and the opener with it); the
 * write never waits for room, so weft makes it as the program did: one
 * call.  The opener is a plain OS thread, blocked in open(2) until the
 * answer.  Skipped (passes) where fanotify is refused (no CAP_SYS_ADMIN). */
struct fan_opener {
	const char *path;
	_Atomic int state; /* 0 not yet, 1 opening, 2 open returned */
	int fd;            /* open's result */
};

static void *fan_open(void *arg)
{
	struct fan_opener *o = arg;
	atomic_store(&o->state, 1);
	o->fd = open(o->path, O_RDONLY);
	atomic_store(&o->state, 2);
	return NULL;
}

G_TEST(hook_fd, fanotify_answer_does_not_park, 30)
{
	(void)argc, (void)argv;
	int fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDWR);
	if (fan < 0 && (errno == EPERM || errno == ENOSYS || errno == EINVAL)) {
		fprintf(stderr, "fanotify refused (%s): nothing to check\n", strerror(errno));
		return 0;
	}
	CHECK(fan >= 0);
	char path[] = "/tmp/weft-fanotify-XXXXXX";
	int t = mkstemp(path);
	CHECK(t >= 0);
	close(t);
	CHECK(fanotify_mark(fan, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD, path) == 0);
	struct fan_opener o = { path, 0, -1 };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, fan_open, &o) == 0);
	union {
		struct fanotify_event_metadata m;
		char b[4096];
	} ev;
	ssize_t n = read(fan, &ev, sizeof ev); /* parks until the opener's open */
	CHECK(n >= (ssize_t)sizeof ev.m && ev.m.vers == FANOTIFY_METADATA_VERSION);
	CHECK((ev.m.mask & FAN_OPEN_PERM) && ev.m.fd >= 0);
	CHECK(atomic_load(&o.state) == 1); /* still waiting for the answer */
	struct fanotify_response resp = { ev.m.fd, FAN_ALLOW };
	errno = 4321;
	CHECK(write(fan, &resp, sizeof resp) == (ssize_t)sizeof resp);
	CHECK(errno == 4321);
	close(ev.m.fd);
	for (int i = 0; i < 5000 * test_slow() && atomic_load(&o.state) < 2; i++)
		weft_sleep(1000000);
	CHECK(atomic_load(&o.state) == 2 && o.fd >= 0);
	pthread_join(th, NULL);
	close(o.fd);
	unlink(path);
	close(fan);
	return 0;
}

/* ---- the resolver ------------------------------------------------------------------ */

G_TEST(hook_fd, resolver_on_g, 30)
{
	(void)argc, (void)argv;
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	CHECK(getaddrinfo("127.0.0.1", "80", &hints, &res) == 0);
	if (res) {
		char host[64], serv[16];
		CHECK(getnameinfo(res->ai_addr, res->ai_addrlen, host, sizeof host, serv,
				  sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0);
		CHECK(strcmp(host, "127.0.0.1") == 0 && strcmp(serv, "80") == 0);
		freeaddrinfo(res);
	}
	CHECK(getaddrinfo("localhost", NULL, &hints, &res) == 0);
	if (res)
		freeaddrinfo(res);
	struct hostent he, *hp = NULL;
	char buf[1024];
	int herr;
	CHECK(gethostbyname_r("localhost", &he, buf, sizeof buf, &hp, &herr) == 0 && hp);
	CHECK(gethostbyname("localhost") != NULL);
	return 0;
}

/* ---- fortified entry points park like the plain ones --------------------------------- */

static void late_writer(void *arg)
{
	weft_sleep(20 * 1000000);
	CHECK(write((int)(intptr_t)arg, "abcd", 4) == 4);
}

G_TEST(hook_fd, fortify_variants_park, 20)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	char buf[8];
	weft_go(late_writer, (void *)(intptr_t)sv[1]);
	CHECK(__read_chk(sv[0], buf, 1, sizeof buf) == 1);
	CHECK(__recv_chk(sv[0], buf, 1, sizeof buf, 0) == 1);
	CHECK(__recvfrom_chk(sv[0], buf, 2, sizeof buf, 0, NULL, NULL) == 2);
	weft_go(late_writer, (void *)(intptr_t)sv[1]);
	struct pollfd p = { sv[0], POLLIN, 0 };
	CHECK(__poll_chk(&p, 1, 5000, sizeof p) == 1 && (p.revents & POLLIN));
	weft_stats_t st;
	weft_stats(&st);
	CHECK(st.syscall_handoffs == 0); /* parked, not blocked */
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* ---- every reading and writing call parks and completes -------------------- */

struct later {
	int fd;
	int ms;
	size_t n; /* bytes to write (0: read and discard n_drain) */
	size_t n_drain;
};

static void later_write(void *arg)
{
	struct later *l = arg;
	weft_sleep((int64_t)l->ms * 1000000);
	char buf[64] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde";
	CHECK(write(l->fd, buf, l->n) == (ssize_t)l->n);
}

static void later_drain(void *arg)
{
	struct later *l = arg;
	weft_sleep((int64_t)l->ms * 1000000);
	char *buf = malloc(l->n_drain);
	CHECK(read_full(l->fd, buf, l->n_drain) == 0);
	free(buf);
}

/* The peer sends 4 bytes 10 ms later; fn's call must park meanwhile. */
static void expect_parked_read(int sv[2], ssize_t (*fn)(int fd, char *buf), ssize_t want)
{
	struct later l = { sv[1], 10, 4, 0 };
	weft_go(later_write, &l);
	char buf[64];
	int64_t t0 = now_ns();
	ssize_t r = fn(sv[0], buf);
	CHECK(r == want);
	CHECK(ms_since(t0) >= 5);
}

static ssize_t by_read(int fd, char *b) { return read(fd, b, 64); }
static ssize_t by_readv(int fd, char *b)
{
	struct iovec v[2] = { { b, 2 }, { b + 2, 62 } };
	return readv(fd, v, 2);
}
static ssize_t by_recv(int fd, char *b) { return recv(fd, b, 64, 0); }
static ssize_t by_recvfrom(int fd, char *b) { return recvfrom(fd, b, 64, 0, NULL, NULL); }
static ssize_t by_recvmsg(int fd, char *b)
{
	struct iovec v = { b, 64 };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	return recvmsg(fd, &m, 0);
}
static ssize_t by_recvmmsg(int fd, char *b)
{
	struct iovec v = { b, 64 };
	struct mmsghdr m = { .msg_hdr = { .msg_iov = &v, .msg_iovlen = 1 } };
	int r = recvmmsg(fd, &m, 1, 0, NULL);
	return r == 1 ? (ssize_t)m.msg_len : -1;
}
static ssize_t by_waitall(int fd, char *b) { return recv(fd, b, 4, MSG_WAITALL); }

G_TEST(hook_fd, every_read_call_parks, 30)
{
	(void)argc, (void)argv;
	ssize_t (*fns[])(int, char *) = { by_read, by_readv, by_recv, by_recvfrom, by_recvmsg,
					  by_waitall };
	for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		expect_parked_read(sv, fns[i], 4);
		close(sv[0]);
		close(sv[1]);
	}
	int dg[2]; /* recvmmsg on datagrams */
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) == 0);
	expect_parked_read(dg, by_recvmmsg, 4);
	close(dg[0]);
	close(dg[1]);
	return 0;
}

/* A full socket: each writing call parks until a reader makes room. */
static size_t fill(int fd)
{
	static char junk[65536];
	size_t n = 0;
	ssize_t r;
	while ((r = send(fd, junk, sizeof junk, MSG_DONTWAIT)) > 0)
		n += (size_t)r;
	return n;
}

G_TEST(hook_fd, every_write_call_parks, 30)
{
	(void)argc, (void)argv;
	char msg[100] = { 0 };
	for (int k = 0; k < 5; k++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		size_t full = fill(sv[0]);
		struct later l = { sv[1], 10, 0, full + sizeof msg };
		weft_go(later_drain, &l);
		int64_t t0 = now_ns();
		struct iovec v = { msg, sizeof msg };
		struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
		ssize_t r = k == 0 ? write(sv[0], msg, sizeof msg)
			  : k == 1 ? writev(sv[0], &v, 1)
			  : k == 2 ? send(sv[0], msg, sizeof msg, 0)
			  : k == 3 ? sendto(sv[0], msg, sizeof msg, 0, NULL, 0)
				   : sendmsg(sv[0], &m, 0);
		CHECK(r == (ssize_t)sizeof msg);
		CHECK(ms_since(t0) >= 5);
		weft_sleep(30 * 1000000); /* the drain finishes */
		close(sv[0]);
		close(sv[1]);
	}
	/* sendmmsg on a full datagram socket */
	int dg[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) == 0);
	int small = 4096;
	setsockopt(dg[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	int queued = 0;
	while (send(dg[0], msg, sizeof msg, MSG_DONTWAIT) > 0)
		queued++;
	struct iovec v = { msg, sizeof msg };
	struct mmsghdr mm[2] = { { .msg_hdr = { .msg_iov = &v, .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &v, .msg_iovlen = 1 } } };
	struct later l = { dg[1], 10, 0, (size_t)(queued + 2) * sizeof msg };
	weft_go(later_drain, &l); /* datagrams: read_full reads them one by one */
	CHECK(sendmmsg(dg[0], mm, 2, 0) == 2);
	weft_sleep(30 * 1000000);
	close(dg[0]);
	close(dg[1]);
	return 0;
}

/* ---- AF_UNIX connect to a full backlog waits (and honours SO_SNDTIMEO) ------ */

static void accept_later(void *arg)
{
	weft_sleep(30 * 1000000);
	int lfd = (int)(intptr_t)arg;
	for (int i = 0; i < 64; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		if (fd < 0)
			break;
		close(fd);
	}
}

G_TEST(hook_fd, unix_connect_full_backlog, 30)
{
	(void)argc, (void)argv;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "weft-backlog-%d", (int)getpid());
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 0) == 0);
	int fill_fds[64], n = 0;
	for (; n < 64; n++) {
		fill_fds[n] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (connect(fill_fds[n], (struct sockaddr *)&a, sizeof a) != 0) {
			CHECK(err() == EAGAIN);
			close(fill_fds[n]);
			break;
		}
	}
	CHECK(n < 64);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct timeval tv = { 0, 50 * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	int64_t t0 = now_ns();
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == -1 && err() == EAGAIN);
	CHECK(ms_since(t0) >= 40);
	close(fd);
	/* without a timeout it waits until the listener accepts */
	weft_go(accept_later, (void *)(intptr_t)lfd);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	t0 = now_ns();
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(ms_since(t0) >= 20);
	close(fd);
	for (int i = 0; i < n; i++)
		close(fill_fds[i]);
	close(lfd);
	return 0;
}

/* ---- the runtime's own fds stay out of the program's way ------------------------ */

/* Programs count on the lowest free fd: the next open() after start-up
 * returns it, and an fd number they inherited closed stays closed (GNU
 * make checks the jobserver fds in MAKEFLAGS and, finding weft's epoll fd
 * at 3, waited on it forever).  The runtime puts its epoll and eventfd
 * near the top of RLIMIT_NOFILE. */
static int lowfd_before;

static int lowfd_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	int fd = open("/dev/null", O_RDONLY);
	CHECK(fd == lowfd_before);
	close(fd);
	return 0;
}

static int lowfd_child(void)
{
	lowfd_before = open("/dev/null", O_RDONLY); /* before the runtime starts */
	close(lowfd_before);
	int r = weft_main(lowfd_body, 0, NULL);
	return r ? r : check_failures ? 99 : 0;
}

/* fn in a child on 1 P, which must exit 0 */
static void child_exits_0(int (*fn)(void))
{
	static struct child c;
	run_child(&c, env_procs1, fn, 20);
	cr_assert(WIFEXITED(c.status), "status %d, stderr: %s", c.status, c.err);
	cr_assert_eq(WEXITSTATUS(c.status), 0, "exit %d, stderr: %s", WEXITSTATUS(c.status), c.err);
}

Test(fd, runtime_fds_leave_low_numbers_free, .timeout = 30)
{
	child_exits_0(lowfd_child);
}

/* ...but not at the top of a high limit: the kernel's fd table grows to
 * the highest fd open, and every fork and posix_spawn copies it (at a
 * limit of 1,048,576, 8 MiB a process and a fork).  With the soft limit
 * raised (to 65,536 where we may, else to the hard limit) before the
 * runtime starts, every fd the runtime holds, with a timer, a parked read
 * and a fork behind it, is below 1,024. */
static int fdceil_limit;

static int fdceil_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(weft_sleep(1000000) == 0); /* a timer: the netpoller's fds */
	pid_t pid = fork();                /* the child's runtime makes new ones */
	if (pid == 0) {
		char b = 'x';
		_exit(write(p[1], &b, 1) == 1 ? 0 : 1);
	}
	char b;
	CHECK(read(p[0], &b, 1) == 1); /* parks, woken by the netpoller */
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	DIR *d = opendir("/proc/self/fd");
	CHECK(d != NULL);
	int maxfd = -1;
	for (struct dirent *e; d && (e = readdir(d));) {
		int fd = atoi(e->d_name);
		/* at or above the soft limit: not the program's (valgrind
		 * keeps its own fds there and shows the program a lower limit) */
		if (e->d_name[0] != '.' && fd > maxfd && fd < fdceil_limit)
			maxfd = fd;
	}
	if (d)
		closedir(d);
	if (maxfd >= 1024)
		fprintf(stderr, "highest fd %d (soft limit %d)\n", maxfd, fdceil_limit);
	CHECK(maxfd >= 0 && maxfd < 1024);
	return 0;
}

static int fdceil_child(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	struct rlimit want = { 65536, 65536 };
	if (setrlimit(RLIMIT_NOFILE, &want) != 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	fdceil_limit = (int)rl.rlim_cur;
	int r = weft_main(fdceil_body, 0, NULL);
	return r ? r : check_failures ? 99 : 0;
}

Test(fd, runtime_fds_stay_below_1024_under_a_high_limit, .timeout = 30)
{
	child_exits_0(fdceil_child);
}
