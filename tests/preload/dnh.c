/*
 * dnh.c - "do no harm": what weft does not intercept must see the world
 * the program made (issue 12).  A plain pthread program.
 *
 *   dnh stdio N        a thread-per-connection server that talks through
 *                      fdopen/fgets/fputs/fflush (glibc's internal reads,
 *                      which no shim sees); N clients connect, wait for
 *                      each other, send one line each and check the echo
 *   dnh rawsys N [-q]  N threads each blocked in syscall(SYS_read) on its
 *                      own pipe; then one byte to each, all joined; -q
 *                      leaves the thread count out of the output
 *   dnh nonblock       a pipe and a socket the program made non-blocking
 *                      give EAGAIN, blocking ones never do
 *   dnh getfl          F_GETFL shows the program's flags on a G, on a real
 *                      thread, in a forked child and in an exec'd one
 *   dnh getfl_child FD F_GETFL of an inherited fd (the exec'd child)
 *   dnh nbbehind       an accepted socket (a file only its fd reaches: weft
 *                      parks on it without asking F_GETFL) made
 *                      non-blocking where the program's fcntl does not
 *                      go through the hooks - a raw syscall(), a forked
 *                      child, a spawned one, a process it was sent to
 *                      with SCM_RIGHTS - gives EAGAIN to read and recv
 *   dnh nbset FD       sets O_NONBLOCK on FD (the spawned child)
 *   dnh env            says whether this process runs under the shim and
 *                      what WEFT_MAXPROCS / WEFT_STACK_SIZE it sees
 *
 * Prints its results and exits 0, or says what failed and exits 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static const char *self;

/* ---- stdio over sockets ------------------------------------------------------ */

static int listen_any(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(listen(fd, 4096) == 0);
	socklen_t len = sizeof a;
	CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static int connect_to(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
	return fd;
}

/* The server's side of one connection: stdio all the way. */
static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	FILE *f = fdopen(fd, "r+");
	CHECK(f);
	char line[256];
	while (fgets(line, sizeof line, f)) {
		fputs(line, f);
		fflush(f);
	}
	fclose(f);
	return NULL;
}

static int nclients;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int connected;
static atomic_int echoed;
static int port;

static void *client(void *arg)
{
	int id = (int)(intptr_t)arg;
	int fd = connect_to(port);
	/* everyone connected before anyone sends: N server threads wait in fgets */
	pthread_mutex_lock(&mu);
	if (++connected == nclients)
		pthread_cond_broadcast(&cv);
	while (connected < nclients)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	char out[64], in[64];
	int n = snprintf(out, sizeof out, "hello from client %d\n", id);
	CHECK(write(fd, out, (size_t)n) == n);
	int got = 0;
	while (got < n) {
		ssize_t k = read(fd, in + got, (size_t)(n - got));
		if (k <= 0)
			break;
		got += (int)k;
	}
	if (got == n && memcmp(in, out, (size_t)n) == 0)
		atomic_fetch_add(&echoed, 1);
	close(fd);
	return NULL;
}

static void *acceptor(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	for (int i = 0; i < nclients; i++) {
		int fd = accept(lfd, NULL, NULL);
		CHECK(fd >= 0);
		pthread_t t;
		CHECK(pthread_create(&t, NULL, serve, (void *)(intptr_t)fd) == 0);
		pthread_detach(t);
	}
	return NULL;
}

static int stdio_case(int n)
{
	nclients = n;
	int lfd = listen_any(&port);
	pthread_t a, *c = calloc((size_t)n, sizeof *c);
	CHECK(pthread_create(&a, NULL, acceptor, (void *)(intptr_t)lfd) == 0);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&c[i], NULL, client, (void *)(intptr_t)i) == 0);
	for (int i = 0; i < n; i++)
		pthread_join(c[i], NULL);
	pthread_join(a, NULL);
	printf("echoed %d/%d\n", atomic_load(&echoed), n);
	return atomic_load(&echoed) == n ? 0 : 1;
}

/* ---- threads blocked in raw system calls ------------------------------------------ */

static atomic_int started, returned;

static void *raw_reader(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char c;
	atomic_fetch_add(&started, 1);
	long r = syscall(SYS_read, fd, &c, 1); /* no hook sees this */
	if (r == 1)
		atomic_fetch_add(&returned, 1);
	return NULL;
}

static int rawsys_case(int n, bool quiet)
{
	int(*p)[2] = calloc((size_t)n, sizeof *p);
	pthread_t *t = calloc((size_t)n, sizeof *t);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 << 10);
	for (int i = 0; i < n; i++) {
		CHECK(pipe(p[i]) == 0);
		CHECK(pthread_create(&t[i], &at, raw_reader, (void *)(intptr_t)p[i][0]) == 0);
	}
	while (atomic_load(&started) < n)
		usleep(1000);
	usleep(20000); /* most of them in the kernel by now (not needed for correctness) */
	int most = os_threads();
	for (int i = 0; i < n; i++)
		CHECK(write(p[i][1], "x", 1) == 1);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	if (quiet)
		printf("returned %d/%d\n", atomic_load(&returned), n);
	else
		printf("returned %d/%d, OS threads while blocked %d, after %d\n",
		       atomic_load(&returned), n, most, os_threads());
	return atomic_load(&returned) == n ? 0 : 1;
}

/* ---- the program's own non-blocking mode ------------------------------------------- */

static int nonblock_case(void)
{
	int p[2], s[2];
	char c;
	CHECK(pipe2(p, O_NONBLOCK) == 0);
	CHECK(read(p[0], &c, 1) < 0 && errno == EAGAIN);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0);
	CHECK(fcntl(s[0], F_SETFL, fcntl(s[0], F_GETFL) | O_NONBLOCK) == 0);
	CHECK(read(s[0], &c, 1) < 0 && errno == EAGAIN);
	CHECK(recv(s[0], &c, 1, 0) < 0 && errno == EAGAIN);
	/* made blocking again: a read waits for the byte a thread sends */
	CHECK(fcntl(s[0], F_SETFL, fcntl(s[0], F_GETFL) & ~O_NONBLOCK) == 0);
	CHECK(!(fcntl(s[0], F_GETFL) & O_NONBLOCK));
	CHECK(write(s[1], "y", 1) == 1);
	CHECK(read(s[0], &c, 1) == 1 && c == 'y');
	/* and non-blocking through FIONBIO */
	int one = 1;
	CHECK(ioctl(s[0], FIONBIO, &one) == 0);
	CHECK(read(s[0], &c, 1) < 0 && errno == EAGAIN);
	printf("ok nonblock\n");
	return 0;
}

/* ---- F_GETFL everywhere ---------------------------------------------------------------- */

static int sock[2], pip[2];

static void expect_blocking(const char *where)
{
	int fds[4] = { sock[0], sock[1], pip[0], pip[1] };
	for (int i = 0; i < 4; i++) {
		long fl = fcntl(fds[i], F_GETFL);
		long raw = syscall(SYS_fcntl, fds[i], F_GETFL, 0);
		if (fl < 0 || (fl & O_NONBLOCK) || raw != fl)
			FAIL("%s: fd %d F_GETFL %#lx, raw %#lx", where, fds[i], fl, raw);
	}
}

static void *on_thread(void *arg)
{
	expect_blocking(arg);
	/* and a blocking read here sees the data a G wrote, no EAGAIN */
	char c;
	CHECK(read(sock[1], &c, 1) == 1);
	return NULL;
}

static int getfl_case(void)
{
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sock) == 0);
	CHECK(pipe(pip) == 0);
	/* used on a G: weft has tried these without blocking */
	char c;
	CHECK(write(sock[1], "a", 1) == 1 && read(sock[0], &c, 1) == 1);
	CHECK(write(pip[1], "b", 1) == 1 && read(pip[0], &c, 1) == 1);
	expect_blocking("on a G (main)");
	pthread_t t;
	CHECK(pthread_create(&t, NULL, on_thread, "on a pthread") == 0);
	CHECK(write(sock[0], "c", 1) == 1);
	pthread_join(t, NULL);
	/* a real OS thread: one with its own stack stays a thread */
	pthread_attr_t at;
	pthread_attr_init(&at);
	size_t sz = 256 << 10;
	void *stk = aligned_alloc(4096, sz);
	pthread_attr_setstack(&at, stk, sz);
	CHECK(pthread_create(&t, &at, on_thread, "on a real thread") == 0);
	CHECK(write(sock[0], "d", 1) == 1);
	pthread_join(t, NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		expect_blocking("in a forked child");
		_exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char fd[16];
		snprintf(fd, sizeof fd, "%d", sock[0]);
		execl(self, self, "getfl_child", fd, (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("ok getfl\n");
	return 0;
}

static int getfl_child(int fd)
{
	long fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_NONBLOCK))
		FAIL("exec'd child: F_GETFL %#lx", fl);
	return 0;
}

/* ---- O_NONBLOCK set behind the hooks -------------------------------------------------------- */

extern char **environ;

static void nb_expect_eagain(int s, const char *how)
{
	char c;
	errno = 0;
	if (read(s, &c, 1) != -1 || errno != EAGAIN)
		FAIL("%s: read did not say EAGAIN (errno %d)", how, errno);
	errno = 0;
	if (recv(s, &c, 1, 0) != -1 || errno != EAGAIN)
		FAIL("%s: recv did not say EAGAIN (errno %d)", how, errno);
	printf("ok %s\n", how);
}

/* The helper that takes an fd by SCM_RIGHTS over u, makes its file
 * non-blocking and says so; forked before the sockets are made. */
static void nb_taker(int u)
{
	for (;;) {
		char b;
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int))];
		} ctl;
		struct iovec iov = { &b, 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				    .msg_controllen = sizeof ctl.buf };
		if (recvmsg(u, &m, 0) != 1)
			_exit(0);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		if (!c || c->cmsg_type != SCM_RIGHTS)
			_exit(1);
		int fd;
		memcpy(&fd, CMSG_DATA(c), sizeof fd);
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
			_exit(1);
		close(fd);
		if (write(u, "k", 1) != 1)
			_exit(1);
	}
}

static void *nbbehind_run(void *arg)
{
	(void)arg;
	int u[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0);
	pid_t taker = fork();
	CHECK(taker >= 0);
	if (taker == 0) {
		close(u[0]);
		nb_taker(u[1]);
	}
	close(u[1]);
	int port, l = listen_any(&port);
	for (int way = 0; way < 4; way++) {
		int c = connect_to(port);
		int s = accept(l, NULL, NULL);
		CHECK(s >= 0);
		/* a round trip first: s is known to weft, and blocking */
		char b;
		CHECK(write(c, "a", 1) == 1 && read(s, &b, 1) == 1 && b == 'a');
		int fl = fcntl(s, F_GETFL);
		CHECK(fl >= 0 && !(fl & O_NONBLOCK));
		const char *how = "";
		int st;
		if (way == 0) {
			how = "raw syscall";
			CHECK(syscall(SYS_fcntl, s, F_SETFL, fl | O_NONBLOCK) == 0);
		} else if (way == 1) {
			how = "forked child";
			pid_t pid = fork();
			CHECK(pid >= 0);
			if (pid == 0)
				_exit(fcntl(s, F_SETFL, fl | O_NONBLOCK) == 0 ? 0 : 1);
			CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		} else if (way == 2) {
			how = "spawned child";
			char fd[16];
			snprintf(fd, sizeof fd, "%d", s);
			char *argv[] = { (char *)self, "nbset", fd, NULL };
			pid_t pid;
			CHECK(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0);
			CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		} else {
			how = "SCM_RIGHTS to another process";
			union {
				struct cmsghdr h;
				char buf[CMSG_SPACE(sizeof(int))];
			} ctl;
			memset(&ctl, 0, sizeof ctl);
			struct iovec iov = { "s", 1 };
			struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
					    .msg_controllen = sizeof ctl.buf };
			struct cmsghdr *h = CMSG_FIRSTHDR(&m);
			h->cmsg_level = SOL_SOCKET;
			h->cmsg_type = SCM_RIGHTS;
			h->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(h), &s, sizeof s);
			CHECK(sendmsg(u[0], &m, 0) == 1);
			CHECK(read(u[0], &b, 1) == 1 && b == 'k');
		}
		nb_expect_eagain(s, how);
		close(s);
		close(c);
	}
	close(u[0]); /* the taker sees EOF and ends */
	int st;
	CHECK(waitpid(taker, &st, 0) == taker && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("ok nbbehind\n");
	return NULL;
}

/* On a thread: a program that makes none never starts weft's runtime. */
static int nbbehind_case(void)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, nbbehind_run, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	return 0;
}

static int nbset(int fd)
{
	long fl = fcntl(fd, F_GETFL);
	return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0 ? 0 : 1;
}

/* ---- under weft? ----------------------------------------------------------------------------- */

static int env_case(void)
{
	const char *mp = getenv("WEFT_MAXPROCS"), *ss = getenv("WEFT_STACK_SIZE");
	printf("shim %s maxprocs %s stack %s\n", dlsym(RTLD_DEFAULT, "weft_self") ? "yes" : "no",
	       mp ? mp : "-", ss ? ss : "-");
	return 0;
}

int main(int argc, char **argv)
{
	self = argv[0];
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *c = argc > 1 ? argv[1] : "";
	int n = argc > 2 ? atoi(argv[2]) : 0;
	if (!strcmp(c, "stdio") && n > 0)
		return stdio_case(n);
	if (!strcmp(c, "rawsys") && n > 0)
		return rawsys_case(n, argc > 3 && !strcmp(argv[3], "-q"));
	if (!strcmp(c, "nonblock"))
		return nonblock_case();
	if (!strcmp(c, "getfl"))
		return getfl_case();
	if (!strcmp(c, "getfl_child") && argc > 2)
		return getfl_child(n);
	if (!strcmp(c, "nbbehind"))
		return nbbehind_case();
	if (!strcmp(c, "nbset") && argc > 2)
		return nbset(n);
	if (!strcmp(c, "env"))
		return env_case();
	fprintf(stderr, "usage: dnh stdio N | rawsys N [-q] | nonblock | getfl | nbbehind | env\n");
	return 2;
}
