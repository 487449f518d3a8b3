/*
 * test_hook_thread.c - off a G every hooked call is libc's: a plain OS
 * thread (with the runtime running beside it) calls each of them and
 * gets libc's results, errors and blocking; a plain thread on an fd that
 * a G made non-blocking underneath still blocks; a process that never
 * starts the runtime is untouched.
 */
#define _LARGEFILE64_SOURCE
#include "test_hook.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);
int __poll(struct pollfd *fds, nfds_t n, int timeout);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *ss,
		size_t fdslen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);

/* The real O_NONBLOCK, bypassing every hook. */
static bool real_nonblock(int fd)
{
	return syscall(SYS_fcntl, fd, F_GETFL) & O_NONBLOCK;
}

/* Run fn on a plain thread; the G waits without holding its P. */
static void on_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	pthread_create(&t, NULL, fn, arg);
	weft_blocking_enter();
	pthread_join(t, NULL);
	weft_blocking_exit();
}

static void *write_later(void *arg)
{
	usleep(50000);
	CHECK(write((int)(intptr_t)arg, "late", 4) == 4);
	return NULL;
}

/* ---- pipes, sockets, I/O -------------------------------------------------- */

static void thread_io(void)
{
	char buf[64];
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(!real_nonblock(p[0]));
	pthread_t t; /* a blocking read really blocks the thread */
	pthread_create(&t, NULL, write_later, (void *)(intptr_t)p[1]);
	int64_t t0 = now_ns();
	CHECK(read(p[0], buf, sizeof buf) == 4);
	CHECK(ms_since(t0) >= 40);
	pthread_join(t, NULL);
	CHECK(__read_chk(p[0], buf, 0, sizeof buf) == 0);
	struct iovec iov[2] = { { "ab", 2 }, { "cd", 2 } };
	CHECK(writev(p[1], iov, 2) == 4);
	char x[2], y[2];
	struct iovec in[2] = { { x, 2 }, { y, 2 } };
	CHECK(readv(p[0], in, 2) == 4 && memcmp(x, "ab", 2) == 0 && memcmp(y, "cd", 2) == 0);
	int q[2];
	CHECK(pipe2(q, O_NONBLOCK | O_CLOEXEC) == 0);
	CHECK(read(q[0], buf, 1) == -1 && err() == EAGAIN);
	close(q[0]);
	close(q[1]);

	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
	CHECK(send(sv[0], "1", 1, 0) == 1);
	CHECK(recv(sv[1], buf, sizeof buf, 0) == 1);
	CHECK(sendto(sv[0], "22", 2, 0, NULL, 0) == 2);
	CHECK(recvfrom(sv[1], buf, sizeof buf, 0, NULL, NULL) == 2);
	CHECK(send(sv[0], "3", 1, 0) == 1);
	CHECK(__recv_chk(sv[1], buf, 1, sizeof buf, 0) == 1);
	CHECK(send(sv[0], "4", 1, 0) == 1);
	CHECK(__recvfrom_chk(sv[1], buf, 1, sizeof buf, 0, NULL, NULL) == 1);
	struct iovec one = { "msg", 3 };
	struct msghdr mh = { .msg_iov = &one, .msg_iovlen = 1 };
	CHECK(sendmsg(sv[0], &mh, 0) == 3);
	struct iovec back = { buf, sizeof buf };
	struct msghdr rh = { .msg_iov = &back, .msg_iovlen = 1 };
	CHECK(recvmsg(sv[1], &rh, 0) == 3);
	struct mmsghdr mm[2] = { { .msg_hdr = mh }, { .msg_hdr = mh } };
	CHECK(sendmmsg(sv[0], mm, 2, 0) == 2);
	struct mmsghdr rm[2] = { { .msg_hdr = rh }, { .msg_hdr = rh } };
	CHECK(recvmmsg(sv[1], rm, 2, 0, NULL) == 2);
	CHECK(recv(sv[1], buf, 1, MSG_DONTWAIT) == -1 && err() == EAGAIN);
	/* SO_RCVTIMEO is the kernel's own off a G */
	struct timeval tv = { 0, 50 * 1000 };
	CHECK(setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	socklen_t tl = sizeof tv;
	CHECK(getsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, &tl) == 0 && tv.tv_sec == 0 &&
	      tv.tv_usec >= 40000); /* in jiffies */
	t0 = now_ns();
	CHECK(read(sv[1], buf, 1) == -1 && err() == EAGAIN);
	CHECK(ms_since(t0) >= 40);
	CHECK(shutdown(sv[0], SHUT_RDWR) == 0);
	CHECK(shutdown(-1, SHUT_RDWR) == -1 && err() == EBADF);
	close(sv[0]);
	close(sv[1]);

	int efd = eventfd(3, 0);
	uint64_t v = 0;
	CHECK(read(efd, &v, 8) == 8 && v == 3);
	CHECK(!real_nonblock(efd));
	close(efd);
	close(p[0]);
	close(p[1]);
	CHECK(read(p[0], buf, 1) == -1 && err() == EBADF);
	CHECK(write(p[1], buf, 1) == -1 && err() == EBADF);
}

static void thread_tcp(void)
{
	int port = 0;
	int lfd = tcp_listen(8, &port);
	CHECK(lfd >= 0 && !real_nonblock(lfd));
	int c = tcp_connect(port);
	CHECK(c >= 0 && !real_nonblock(c));
	int a = accept(lfd, NULL, NULL);
	CHECK(a >= 0 && !real_nonblock(a));
	int c2 = tcp_connect(port);
	int a2 = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(a2 >= 0 && !real_nonblock(a2));
	CHECK(write(c, "ping", 4) == 4);
	char buf[8];
	CHECK(read(a, buf, 4) == 4);
	close(a2);
	close(c2);
	close(a);
	close(c);
	close(lfd);
	/* refused */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = loopback(port);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == -1 && err() == ECONNREFUSED);
	close(fd);
}

/* ---- waiting and sleeping ---------------------------------------------------- */

static void thread_wait(void)
{
	int p[2];
	CHECK(pipe(p) == 0);
	struct pollfd f = { p[0], POLLIN, 0 };
	int64_t t0 = now_ns();
	CHECK(poll(&f, 1, 30) == 0 && ms_since(t0) >= 25);
	CHECK(__poll(&f, 1, 0) == 0);
	CHECK(__poll_chk(&f, 1, 0, sizeof f) == 0);
	struct timespec ts = { 0, 20 * 1000000 };
	t0 = now_ns();
	CHECK(ppoll(&f, 1, &ts, NULL) == 0 && ms_since(t0) >= 15);
	CHECK(__ppoll_chk(&f, 1, &ts, NULL, sizeof f) == 0);
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	struct timeval tv = { 0, 20000 };
	t0 = now_ns();
	CHECK(select(p[0] + 1, &rs, NULL, NULL, &tv) == 0 && ms_since(t0) >= 15);
	FD_SET(p[0], &rs);
	CHECK(pselect(p[0] + 1, &rs, NULL, NULL, &ts, NULL) == 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN }, out;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0);
	t0 = now_ns();
	CHECK(epoll_wait(ep, &out, 1, 20) == 0 && ms_since(t0) >= 15);
	CHECK(epoll_pwait(ep, &out, 1, 0, NULL) == 0);
	CHECK(epoll_pwait2(ep, &out, 1, &ts, NULL) == 0);
	CHECK(write(p[1], "x", 1) == 1);
	CHECK(poll(&f, 1, -1) == 1 && f.revents == POLLIN);
	CHECK(epoll_wait(ep, &out, 1, -1) == 1);
	close(ep);
	close(p[0]);
	close(p[1]);

	t0 = now_ns();
	CHECK(sleep(0) == 0);
	CHECK(usleep(10000) == 0 && ms_since(t0) >= 9);
	ts = (struct timespec){ 0, 10 * 1000000 };
	t0 = now_ns();
	CHECK(nanosleep(&ts, NULL) == 0 && ms_since(t0) >= 9);
	t0 = now_ns();
	CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == 0 && ms_since(t0) >= 9);
	struct timespec bad = { 0, -1 };
	CHECK(nanosleep(&bad, NULL) == -1 && err() == EINVAL);
	CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL) == EINVAL);
}

/* ---- fds, modes, files, resolver --------------------------------------------------- */

static void thread_fds(void)
{
	CHECK(close(-1) == -1 && err() == EBADF);
	int p[2];
	CHECK(pipe(p) == 0);
	int d = dup(p[0]);
	CHECK(d >= 0);
	CHECK(dup2(p[0], d) == d);
	CHECK(dup3(p[0], d, O_CLOEXEC) == d);
	CHECK(dup3(p[0], p[0], 0) == -1 && err() == EINVAL);
	CHECK(dup2(-1, d) == -1 && err() == EBADF);
	CHECK(fcntl(d, F_GETFD) == FD_CLOEXEC); /* the failed dup2 left d alone */
	int d2 = fcntl(p[0], F_DUPFD, 50);
	CHECK(d2 >= 50);
	CHECK(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0);
	CHECK((fcntl(p[0], F_GETFL) & O_NONBLOCK) && real_nonblock(p[0]));
	char c;
	CHECK(read(p[0], &c, 1) == -1 && err() == EAGAIN);
	int off = 0;
	CHECK(ioctl(p[0], FIONBIO, &off) == 0);
	CHECK(!real_nonblock(p[0]) && !(fcntl(p[0], F_GETFL) & O_NONBLOCK));
	int avail = -1;
	CHECK(ioctl(p[0], FIONREAD, &avail) == 0 && avail == 0);
	close(d2);
	close(d);
	close(p[0]);
	close(p[1]);

	char path[] = "/tmp/weft-thread-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, "abcdef", 6, 0) == 6);
	CHECK(pwrite64(fd, "g", 1, 6) == 1);
	char buf[8] = { 0 };
	CHECK(pread(fd, buf, 3, 1) == 3 && memcmp(buf, "bcd", 3) == 0);
	CHECK(pread64(fd, buf, 1, 6) == 1 && buf[0] == 'g');
	CHECK(__pread_chk(fd, buf, 1, 0, sizeof buf) == 1);
	CHECK(__pread64_chk(fd, buf, 1, 0, sizeof buf) == 1);
	struct iovec iov = { buf, 2 };
	CHECK(preadv(fd, &iov, 1, 0) == 2 && pwritev(fd, &iov, 1, 7) == 2);
	CHECK(fsync(fd) == 0 && fdatasync(fd) == 0);
	struct stat st;
	CHECK(fstat(fd, &st) == 0 && st.st_size == 9);
	CHECK(stat(path, &st) == 0 && lstat(path, &st) == 0);
	CHECK(fstatat(AT_FDCWD, path, &st, 0) == 0);
	struct statx sx;
	CHECK(statx(AT_FDCWD, path, 0, STATX_SIZE, &sx) == 0 && sx.stx_size == 9);
	struct stat64 st64;
	CHECK(fstat64(fd, &st64) == 0 && st64.st_size == 9);
	CHECK(stat64(path, &st64) == 0 && lstat64(path, &st64) == 0);
	CHECK(fstatat64(AT_FDCWD, path, &st64, 0) == 0);
	CHECK(preadv64(fd, &iov, 1, 0) == 2 && pwritev64(fd, &iov, 1, 7) == 2);
	CHECK(fcntl64(fd, F_GETFD) >= 0);
	close(fd);
	CHECK(stat("/nonexistent/weft", &st) == -1 && err() == ENOENT);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && read(fd, buf, 8) == 8);
	close(fd);
	fd = openat(AT_FDCWD, path, O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	close(fd);
	fd = creat(path, 0600);
	CHECK(fd >= 0);
	close(fd);
	fd = creat64(path, 0600);
	CHECK(fd >= 0);
	close(fd);
	fd = open64(path, O_RDONLY);
	CHECK(fd >= 0);
	close(fd);
	fd = openat64(AT_FDCWD, path, O_RDONLY);
	CHECK(fd >= 0);
	close(fd);
	FILE *f = fopen(path, "r");
	CHECK(f && fclose(f) == 0);
	unlink(path);
	CHECK(open(path, O_RDONLY) == -1 && err() == ENOENT);

	struct addrinfo hints = { .ai_family = AF_INET }, *res = NULL;
	CHECK(getaddrinfo("127.0.0.1", "7", &hints, &res) == 0);
	if (res) {
		char host[32];
		CHECK(getnameinfo(res->ai_addr, res->ai_addrlen, host, sizeof host, NULL, 0,
				  NI_NUMERICHOST) == 0);
		freeaddrinfo(res);
	}
	struct hostent he, *hp = NULL;
	char hb[1024];
	int herr;
	CHECK(gethostbyname_r("localhost", &he, hb, sizeof hb, &hp, &herr) == 0 && hp);
	CHECK(gethostbyname("localhost") != NULL);
	CHECK(gethostbyname2_r("localhost", AF_INET, &he, hb, sizeof hb, &hp, &herr) == 0 && hp);
	struct in_addr lo = { htonl(INADDR_LOOPBACK) };
	CHECK(gethostbyaddr_r(&lo, sizeof lo, AF_INET, &he, hb, sizeof hb, &hp, &herr) == 0);
}

/* ---- signals: EINTR exactly where the kernel gives it ------------------------------------ */

static void on_usr2(int s)
{
	(void)s;
}

static _Atomic int reader_tid;

static void *blocked_reader(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char c;
	errno = 0;
	atomic_store(&reader_tid, (int)syscall(SYS_gettid));
	ssize_t r = read(fd, &c, 1);
	return (void *)(intptr_t)(r == -1 ? -err() : r);
}

/* Until the reader thread is blocked in its read (the kernel's word for
 * it: /proc/self/task/TID/syscall names read, 0): a signal sent before
 * would find it short of the call, and the read would then wait for good
 * (a hang seen at load 400 when this was a 30 ms sleep). */
static void reader_in_read(void)
{
	int tid;
	while ((tid = atomic_load(&reader_tid)) == 0)
		usleep(1000);
	char path[64], buf[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	for (;;) {
		int fd = open(path, O_RDONLY);
		CHECK(fd >= 0);
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n >= 2 && buf[0] == '0' && buf[1] == ' ')
			break;
		usleep(1000);
	}
	atomic_store(&reader_tid, 0);
}

static void thread_eintr(void)
{
	struct sigaction sa = { .sa_handler = on_usr2 }; /* no SA_RESTART: EINTR */
	sigaction(SIGUSR2, &sa, NULL);
	int p[2];
	CHECK(pipe(p) == 0);
	pthread_t t;
	pthread_create(&t, NULL, blocked_reader, (void *)(intptr_t)p[0]);
	reader_in_read();
	pthread_kill(t, SIGUSR2);
	void *r;
	pthread_join(t, &r);
	CHECK((intptr_t)r == -EINTR);
	sa.sa_flags = SA_RESTART; /* restarted: the read goes on */
	sigaction(SIGUSR2, &sa, NULL);
	pthread_create(&t, NULL, blocked_reader, (void *)(intptr_t)p[0]);
	reader_in_read();
	pthread_kill(t, SIGUSR2);
	usleep(30000); /* the handler runs, the read goes on (if not yet: the same) */
	CHECK(write(p[1], "k", 1) == 1);
	pthread_join(t, &r);
	CHECK((intptr_t)r == 1);
	close(p[0]);
	close(p[1]);
}

static void *all_calls(void *arg)
{
	(void)arg;
	thread_io();
	thread_tcp();
	thread_wait();
	thread_fds();
	thread_eintr();
	return NULL;
}

G_TEST(hook_thread, plain_thread_gets_libc, 60)
{
	(void)argc, (void)argv;
	on_thread(all_calls, NULL);
	return 0;
}

/* ---- a plain thread on an fd a G uses: blocking, as the program made it ------------------ */

struct shared {
	int sv[2];
};

static void g_write_later(void *arg)
{
	struct shared *s = arg;
	weft_sleep(50 * 1000000);
	CHECK(write(s->sv[1], "from g", 6) == 6);
}

static void g_drain(void *arg)
{
	struct shared *s = arg;
	char buf[65536];
	size_t got = 0;
	while (got < (8u << 20)) {
		ssize_t r = read(s->sv[1], buf, sizeof buf);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	CHECK(got == (8u << 20));
}

static void *thread_on_g_fd(void *arg)
{
	struct shared *s = arg;
	CHECK(!real_nonblock(s->sv[0])); /* weft never sets O_NONBLOCK */
	CHECK(!(fcntl(s->sv[0], F_GETFL) & O_NONBLOCK));
	char buf[16];
	/* blocks until the G writes (what it reads is the G's write: a
	 * time bound here failed at load 160, the thread starting late
	 * into the G's 50 ms sleep) */
	CHECK(read(s->sv[0], buf, sizeof buf) == 6 && !memcmp(buf, "from g", 6));
	char *big = calloc(1, 8u << 20);
	CHECK(write(s->sv[0], big, 8u << 20) == (ssize_t)(8u << 20)); /* whole */
	free(big);
	struct timeval tv = { 0, 50 * 1000 };
	setsockopt(s->sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	int64_t t0 = now_ns();
	CHECK(read(s->sv[0], buf, 1) == -1 && err() == EAGAIN);
	CHECK(ms_since(t0) >= 40);
	return NULL;
}

G_TEST(hook_thread, plain_thread_blocks_on_g_fd, 30)
{
	(void)argc, (void)argv;
	static struct shared s;
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s.sv) == 0);
	char c;
	CHECK(recv(s.sv[0], &c, 1, MSG_DONTWAIT) == -1); /* first use on a G */
	CHECK(read(s.sv[1], &c, 0) == 0);                 /* a try on the other end */
	CHECK(!real_nonblock(s.sv[0]) && !real_nonblock(s.sv[1]));
	weft_go(g_write_later, &s);
	weft_go(g_drain, &s);
	on_thread(thread_on_g_fd, &s);
	close(s.sv[0]);
	close(s.sv[1]);
	return 0;
}

/* ---- a process that never starts the runtime -------------------------------------------- */

static int no_runtime_child(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || real_nonblock(sv[0]))
		return 1;
	if (write(sv[0], "abc", 3) != 3)
		return 2;
	char buf[4];
	if (read(sv[1], buf, 3) != 3 || real_nonblock(sv[1]))
		return 3;
	struct pollfd f = { sv[1], POLLIN, 0 };
	if (poll(&f, 1, 10) != 0)
		return 4;
	if (usleep(1000) != 0 || close(sv[0]) != 0 || close(sv[1]) != 0)
		return 5;
	if (close(sv[0]) != -1 || errno != EBADF)
		return 6;
	return 0;
}

Test(hook_thread, no_runtime_untouched, .timeout = 30)
{
	struct child c;
	run_child(&c, NULL, no_runtime_child, 20);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "status %d, stderr: %s",
		  c.status, c.err);
}
