/*
 * servers.c - what a server does per request, for counting the system
 * calls weft adds to it (tests/test_preload_calls.c runs it under
 * tests/preload/sccount natively and under weft run).  A plain program.
 *
 *   servers nbhints - like apache per connection: a new socket made
 *           non-blocking (F_GETFL, F_SETFL O_NONBLOCK), then a read on
 *           another, older non-blocking socket that has nothing (EAGAIN),
 *           ROUNDS times.  The program makes ROUNDS F_GETFL itself.
 *   servers closes - like a server per connection: accept, write, a
 *           blocking read that waits for the client's answer, close,
 *           ROUNDS times against a client thread; then a connection whose
 *           accepted fd is dup'ed: a read parked on the original, close
 *           it, a read on the dup still gets the client's next byte.
 *           The program makes no epoll call itself.
 *   servers evfd - like nginx's thread pool telling its event loop a
 *           task is done: a write of 1 to a blocking eventfd, ROUNDS
 *           times, to one made by eventfd(), one made by a raw system
 *           call, and a dup of the first; then the counters read back.
 *           The program makes no poll itself.
 *   servers staleepipe - with SIGPIPE blocked, one write to a pipe with
 *           no reader (EPIPE, its SIGPIPE taken with sigtimedwait), then
 *           ROUNDS pwrites to a file that succeed: errno is still EPIPE
 *           after each, as glibc leaves it.  The program makes no
 *           rt_sigpending itself.
 *   servers sigact N - like a shell or an interpreter around each child
 *           or call: N rounds of six disposition calls that do not
 *           change whether a signal has a handler (one handler replaced
 *           by another and back, a flags change, SIG_IGN put on SIG_IGN
 *           by sigaction and by signal, a query): natively one
 *           rt_sigaction each.  Then the last handler set runs for a
 *           raise, and SIGUSR2 is still ignored.
 *   servers sigtoggle N - like CPython's signal.signal around a call:
 *           N rounds of a handler put, then SIG_IGN (after one round
 *           outside them); then a raise runs the handler.
 *   servers pollwake - like apache's lingering close: a poll for
 *           POLLIN on one socket that has nothing yet, woken by the
 *           peer's byte, ROUNDS times against a client thread; then the
 *           peer's close wakes a poll for POLLIN|POLLRDHUP, whose revents
 *           must be what a poll with no timeout says afterwards
 *           (POLLIN|POLLRDHUP|POLLHUP).  The program makes ROUNDS + 2
 *           polls itself, one of them with a zero timeout.
 *   servers echo - a thread-per-connection echo server's steady state:
 *           one TCP connection, ROUNDS one-byte messages echoed by a
 *           server thread; each side's read finds nothing yet and waits
 *           for the other's write.  The program makes no fcntl itself.
 *   servers echo1 N - a thread-per-connection echo server idle
 *           between messages: a client process (forked before any
 *           thread, so not traced by sccount and never under weft's
 *           runtime) sends N 16-byte messages on one connection, each
 *           after the echo of the one before; the server's thread reads
 *           each into a 64-byte buffer and writes it back, while main
 *           waits in accept for the next connection (the thread makes it
 *           when the client has gone).  Natively 2 calls per message:
 *           the read and the write.
 *   servers numnames - like varnish naming each connection's addresses
 *           (VTCP_name): four threads, each ROUNDS getnameinfo with
 *           NI_NUMERICHOST|NI_NUMERICSERV and getaddrinfo of a numeric
 *           address and port (AI_NUMERICHOST), and a sched_yield, so
 *           the others are runnable meanwhile.  The program makes no
 *           futex or clone call itself but the four threads' start and
 *           join.
 *   servers kicks - a G readied while no P is idle ends another
 *           thread's poll that waits in the kernel (a kick, runtime/
 *           kwait.c): a spinning thread (never parks, so it keeps its P)
 *           waits until the kernel says a thread sits in poll (or
 *           100 looks: under weft it may have parked instead), then
 *           posts a semaphore; the thread it wakes writes the pipe that
 *           poll waits for.  ROUNDS times.  The program makes no getpid
 *           itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#include <netdb.h>
#include <poll.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <dirent.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "check.h"

#define ROUNDS 200

static void case_nbhints(void)
{
	int old[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, old) == 0);
	int fl = fcntl(old[0], F_GETFL);
	CHECK(fl >= 0 && fcntl(old[0], F_SETFL, fl | O_NONBLOCK) == 0);
	char c;
	for (int i = 0; i < ROUNDS; i++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		fl = fcntl(sv[0], F_GETFL);
		CHECK(fl >= 0 && fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) == 0);
		errno = 0;
		CHECK(read(old[0], &c, 1) == -1 && errno == EAGAIN);
		errno = 0;
		CHECK(read(sv[0], &c, 1) == -1 && errno == EAGAIN);
		close(sv[0]);
		close(sv[1]);
	}
	/* made blocking again through a dup: the next read on the original
	 * must block as natively (here: find the byte written first) */
	int d = dup(old[0]);
	CHECK(d >= 0 && fcntl(d, F_SETFL, fl & ~O_NONBLOCK) == 0);
	CHECK(write(old[1], "x", 1) == 1);
	CHECK(read(old[0], &c, 1) == 1 && c == 'x');
	printf("nbhints: %d rounds\n", ROUNDS);
}

static int listener(struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0);
	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof *a;
	CHECK(bind(l, (struct sockaddr *)a, len) == 0 && listen(l, 64) == 0);
	CHECK(getsockname(l, (struct sockaddr *)a, &len) == 0);
	return l;
}

static struct sockaddr_in caddr; /* the listener's address */

/* The client: per connection, read the server's byte, answer it; the
 * last connection answers twice. */
static void *client(void *arg)
{
	(void)arg;
	for (int i = 0; i <= ROUNDS; i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(c >= 0 && connect(c, (struct sockaddr *)&caddr, sizeof caddr) == 0);
		char b;
		CHECK(read(c, &b, 1) == 1);
		CHECK(write(c, "b", 1) == 1);
		if (i == ROUNDS) {
			CHECK(read(c, &b, 1) == 1);
			CHECK(write(c, "c", 1) == 1);
		}
		CHECK(read(c, &b, 1) == 0); /* the server's close */
		close(c);
	}
	return NULL;
}

static void case_closes(void)
{
	int l = listener(&caddr);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, client, NULL) == 0);
	char b;
	for (int i = 0; i < ROUNDS; i++) {
		int s = accept(l, NULL, NULL);
		CHECK(s >= 0);
		CHECK(write(s, "a", 1) == 1);
		CHECK(read(s, &b, 1) == 1 && b == 'b'); /* waits for the client */
		close(s);
	}
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	int d = dup(s);
	CHECK(d >= 0);
	CHECK(write(s, "a", 1) == 1);
	CHECK(read(s, &b, 1) == 1 && b == 'b');
	close(s);
	CHECK(write(d, "a", 1) == 1);
	CHECK(read(d, &b, 1) == 1 && b == 'c'); /* parks on the dup */
	close(d);
	CHECK(pthread_join(t, NULL) == 0);
	close(l);
	printf("closes: %d rounds\n", ROUNDS);
}

static void case_evfd(void)
{
	int fds[3];
	fds[0] = eventfd(0, 0);
	fds[1] = (int)syscall(SYS_eventfd2, 0, 0);
	CHECK(fds[0] >= 0 && fds[1] >= 0);
	fds[2] = dup(fds[0]);
	CHECK(fds[2] >= 0);
	uint64_t one = 1, v = 0;
	for (int i = 0; i < ROUNDS; i++)
		for (int k = 0; k < 3; k++)
			CHECK(write(fds[k], &one, 8) == 8);
	CHECK(read(fds[2], &v, 8) == 8 && v == 2 * ROUNDS);
	CHECK(read(fds[1], &v, 8) == 8 && v == ROUNDS);
	for (int k = 0; k < 3; k++)
		close(fds[k]);
	printf("evfd: %d rounds\n", ROUNDS);
}

static void case_staleepipe(void)
{
	sigset_t ps;
	sigemptyset(&ps);
	sigaddset(&ps, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &ps, NULL);
	int q[2];
	if (pipe(q) != 0)
		FAIL("pipe");
	close(q[0]);
	if (write(q[1], "x", 1) != -1 || errno_now() != EPIPE)
		FAIL("write to a pipe with no reader: not EPIPE");
	struct timespec zero = { 0, 0 };
	if (sigtimedwait(&ps, NULL, &zero) != SIGPIPE)
		FAIL("no SIGPIPE pending");
	char path[] = "/tmp/servers-staleepipe-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		FAIL("mkstemp");
	unlink(path);
	errno = EPIPE;
	for (int i = 0; i < ROUNDS; i++)
		if (pwrite(fd, "x", 1, i) != 1 || errno_now() != EPIPE)
			FAIL("pwrite %d: errno %d, not EPIPE as before it", i, errno_now());
	close(fd);
	close(q[1]);
	printf("staleepipe: %d rounds\n", ROUNDS);
}

static volatile sig_atomic_t sa_ran, sb_ran;

static void on_a(int s)
{
	(void)s;
	sa_ran++;
}

static void on_b(int s)
{
	(void)s;
	sb_ran++;
}

static int sa_rounds;

static void case_sigact(void)
{
	struct sigaction a, ar, b, ign, old;
	memset(&a, 0, sizeof a);
	a.sa_handler = on_a;
	ar = a;
	ar.sa_flags = SA_RESTART;
	b = a;
	b.sa_handler = on_b;
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	/* set up outside the rounds (N 0 counts this alone) */
	CHECK(sigaction(SIGUSR1, &a, NULL) == 0 && sigaction(SIGUSR2, &ign, NULL) == 0);
	for (int i = 0; i < sa_rounds; i++) {
		CHECK(sigaction(SIGUSR1, &b, NULL) == 0);
		CHECK(sigaction(SIGUSR1, &ar, NULL) == 0);
		CHECK(sigaction(SIGUSR1, &a, &old) == 0 && old.sa_handler == on_a &&
		      (old.sa_flags & SA_RESTART));
		CHECK(sigaction(SIGUSR2, &ign, NULL) == 0);
		CHECK(signal(SIGUSR2, SIG_IGN) == SIG_IGN);
		CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == on_a);
	}
	CHECK(raise(SIGUSR1) == 0 && sa_ran == 1 && sb_ran == 0);
	CHECK(raise(SIGUSR2) == 0 && sa_ran == 1);
	printf("sigact: %d rounds\n", sa_rounds);
}

static void case_sigtoggle(void)
{
	struct sigaction a, ign;
	memset(&a, 0, sizeof a);
	a.sa_handler = on_a;
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	CHECK(sigaction(SIGUSR1, &a, NULL) == 0 && sigaction(SIGUSR1, &ign, NULL) == 0);
	for (int i = 0; i < sa_rounds; i++)
		CHECK(sigaction(SIGUSR1, &a, NULL) == 0 && sigaction(SIGUSR1, &ign, NULL) == 0);
	CHECK(raise(SIGUSR1) == 0 && sa_ran == 0);
	CHECK(sigaction(SIGUSR1, &a, NULL) == 0 && raise(SIGUSR1) == 0 && sa_ran == 1);
	printf("sigtoggle: %d rounds\n", sa_rounds);
}

static void *numnames(void *arg)
{
	(void)arg;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(8080) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	for (int i = 0; i < ROUNDS; i++) {
		char host[64], serv[16];
		CHECK(getnameinfo((struct sockaddr *)&a, sizeof a, host, sizeof host, serv,
				  sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0);
		CHECK(strcmp(host, "127.0.0.1") == 0 && strcmp(serv, "8080") == 0);
		struct addrinfo *res = NULL;
		CHECK(getaddrinfo("127.0.0.2", "81", &hints, &res) == 0 && res);
		CHECK(((struct sockaddr_in *)res->ai_addr)->sin_port == htons(81));
		freeaddrinfo(res);
		sched_yield();
	}
	return NULL;
}

static void *pollpeer(void *arg)
{
	int fd = *(int *)arg;
	char b;
	while (read(fd, &b, 1) == 1 && b == 'a')
		CHECK(write(fd, "b", 1) == 1);
	close(fd); /* on 'q' */
	return NULL;
}

static void case_pollwake(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, pollpeer, &sv[1]) == 0);
	char b;
	for (int i = 0; i < ROUNDS; i++) {
		CHECK(write(sv[0], "a", 1) == 1);
		struct pollfd p = { sv[0], POLLIN, 0 };
		CHECK(poll(&p, 1, -1) == 1);
		CHECK(p.revents == POLLIN);
		CHECK(read(sv[0], &b, 1) == 1 && b == 'b');
	}
	CHECK(write(sv[0], "q", 1) == 1);
	struct pollfd p = { sv[0], POLLIN | POLLRDHUP, 0 };
	CHECK(poll(&p, 1, -1) == 1);
	struct pollfd q = { sv[0], POLLIN | POLLRDHUP, 0 };
	CHECK(poll(&q, 1, 0) == 1);
	if (p.revents != q.revents || !(p.revents & POLLHUP))
		FAIL("pollwake: revents %#x after the wake, %#x after it", p.revents, q.revents);
	CHECK(pthread_join(t, NULL) == 0);
	close(sv[0]);
	printf("pollwake: %d rounds\n", ROUNDS);
}

static sem_t ksem;
static int kpipe[2];
static _Atomic int kreads; /* bytes kwaiter read */

static void *kposted(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		CHECK(sem_wait(&ksem) == 0);
		CHECK(write(kpipe[1], "k", 1) == 1);
	}
	return NULL;
}

static void *kwaiter(void *arg)
{
	(void)arg;
	char b;
	for (int i = 0; i < ROUNDS; i++) {
		struct pollfd p = { kpipe[0], POLLIN, 0 };
		CHECK(poll(&p, 1, -1) == 1);
		CHECK(read(kpipe[0], &b, 1) == 1);
		atomic_fetch_add(&kreads, 1);
	}
	return NULL;
}

/* Does some thread of ours sit in poll or ppoll (/proc/self/task/ * /
 * syscall: the number of the call it is blocked in)? */
static bool one_in_poll(void)
{
	DIR *d = opendir("/proc/self/task");
	CHECK(d != NULL);
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], buf[64];
		snprintf(path, sizeof path, "/proc/self/task/%s/syscall", e->d_name);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			long nr = strtol(buf, NULL, 10);
			found = nr == SYS_poll || nr == SYS_ppoll;
		}
	}
	closedir(d);
	return found;
}

static void case_kicks(void)
{
	CHECK(sem_init(&ksem, 0, 0) == 0);
	CHECK(pipe(kpipe) == 0);
	pthread_t t[2];
	CHECK(pthread_create(&t[0], NULL, kposted, NULL) == 0);
	CHECK(pthread_create(&t[1], NULL, kwaiter, NULL) == 0);
	for (int i = 0; i < ROUNDS; i++) {
		/* the waiter is back in its poll, in the kernel (or has
		 * parked on weft's netpoller instead: a P had other work when
		 * it polled, e.g. this thread asked to yield as a hog; then no
		 * kick this round, rather than spin for good) */
		while (atomic_load(&kreads) < i)
			; /* spin: this thread never parks */
		for (int k = 0; k < 100 && !one_in_poll(); k++)
			;
		CHECK(sem_post(&ksem) == 0);
	}
	for (int i = 0; i < 2; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	printf("kicks: %d rounds\n", ROUNDS);
}

static void case_numnames(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, numnames, NULL) == 0);
	for (int i = 0; i < 4; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	printf("numnames: 4 threads x %d rounds\n", ROUNDS);
}

static void *echo_srv(void *arg)
{
	int s = *(int *)arg;
	char b;
	while (read(s, &b, 1) == 1)
		CHECK(write(s, &b, 1) == 1);
	close(s);
	return NULL;
}

static void case_echo(void)
{
	int l = listener(&caddr);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0 && connect(c, (struct sockaddr *)&caddr, sizeof caddr) == 0);
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, echo_srv, &s) == 0);
	for (int i = 0; i < ROUNDS; i++) {
		char b = (char)('a' + i % 26), e;
		CHECK(write(c, &b, 1) == 1);
		CHECK(read(c, &e, 1) == 1 && e == b);
	}
	close(c);
	CHECK(pthread_join(t, NULL) == 0);
	close(l);
	printf("echo: %d rounds\n", ROUNDS);
}

static int e1_listen = -1; /* echo1's listener, made before the fork */
static pid_t e1_pid;       /* echo1's client process */

/* echo1's client, in its own process: n messages, each echoed whole. */
static void echo1_client(int n)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0 && connect(c, (struct sockaddr *)&caddr, sizeof caddr) == 0);
	char msg[16], back[16];
	for (int i = 0; i < n; i++) {
		memset(msg, 'a' + i % 26, sizeof msg);
		CHECK(write(c, msg, sizeof msg) == (ssize_t)sizeof msg);
		size_t got = 0;
		while (got < sizeof back) {
			ssize_t r = read(c, back + got, sizeof back - got);
			CHECK(r > 0);
			got += (size_t)r;
		}
		CHECK(memcmp(msg, back, sizeof msg) == 0);
	}
	close(c);
	_exit(0);
}

static void *echo1_srv(void *arg)
{
	int s = *(int *)arg;
	char b[64];
	ssize_t r;
	while ((r = read(s, b, sizeof b)) > 0)
		CHECK(write(s, b, (size_t)r) == r);
	CHECK(r == 0);
	close(s);
	/* main's accept ends with the server's next connection */
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0 && connect(c, (struct sockaddr *)&caddr, sizeof caddr) == 0);
	close(c);
	return NULL;
}

static void case_echo1(void)
{
	int s = accept(e1_listen, NULL, NULL);
	CHECK(s >= 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, echo1_srv, &s) == 0);
	int s2 = accept(e1_listen, NULL, NULL); /* waits meanwhile, as a server's main */
	CHECK(s2 >= 0);
	close(s2);
	CHECK(pthread_join(t, NULL) == 0);
	close(e1_listen);
	int st;
	CHECK(waitpid(e1_pid, &st, 0) == e1_pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("echo1: %d messages\n", sa_rounds);
}

/* The case runs on a thread of its own: a program that never makes one
 * never starts weft's runtime (docs/preload.md). */
static void *run(void *arg)
{
	const char *name = arg;
	if (strcmp(name, "nbhints") == 0)
		case_nbhints();
	else if (strcmp(name, "closes") == 0)
		case_closes();
	else if (strcmp(name, "evfd") == 0)
		case_evfd();
	else if (strcmp(name, "staleepipe") == 0)
		case_staleepipe();
	else if (strcmp(name, "sigact") == 0)
		case_sigact();
	else if (strcmp(name, "sigtoggle") == 0)
		case_sigtoggle();
	else if (strcmp(name, "numnames") == 0)
		case_numnames();
	else if (strcmp(name, "pollwake") == 0)
		case_pollwake();
	else if (strcmp(name, "echo") == 0)
		case_echo();
	else if (strcmp(name, "echo1") == 0)
		case_echo1();
	else if (strcmp(name, "kicks") == 0)
		case_kicks();
	else
		FAIL("no case %s", name);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		FAIL("usage: servers CASE [N]");
	sa_rounds = argc > 2 ? atoi(argv[2]) : ROUNDS;
	if (strcmp(argv[1], "echo1") == 0) {
		e1_listen = listener(&caddr);
		e1_pid = fork();
		CHECK(e1_pid >= 0);
		if (e1_pid == 0)
			echo1_client(sa_rounds);
	}
	pthread_t t;
	CHECK(pthread_create(&t, NULL, run, argv[1]) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	return 0;
}
