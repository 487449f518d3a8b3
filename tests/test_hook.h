/*
 * test_hook.h - shared by the hook suites (test_hook_*.c): run a body as
 * the main G of a child process with WEFT_MAXPROCS set, sockets on
 * 127.0.0.1, and a few I/O helpers.
 */
#ifndef WEFT_TEST_HOOK_H
#define WEFT_TEST_HOOK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

static __attribute__((unused)) char *env_procs1[] = { "WEFT_MAXPROCS=1", NULL };
static __attribute__((unused)) char *env_procs2[] = { "WEFT_MAXPROCS=2", NULL };

/* Run body as the main G in a child with env; it passes when body
 * returns 0 and every CHECK held. */
#define G_TEST_ENV(suite, name, env, secs) G_TEST_UNLESS(suite, name, env, secs, 0, "")

/* The same, reported skipped (why) when skip is true (a known finding). */
#define G_TEST_UNLESS(suite, name, env, secs, skip, why)                                 \
	static int name##_body(int argc, char **argv);                                   \
	static int name##_child(void)                                                    \
	{                                                                                \
		struct rlimit rl;                                                        \
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {                                \
			rl.rlim_cur = rl.rlim_max;                                       \
			setrlimit(RLIMIT_NOFILE, &rl);                                   \
		}                                                                        \
		int r = weft_main(name##_body, 0, NULL);                                 \
		return r ? r : check_failures ? 99 : 0;                                  \
	}                                                                                \
	Test(suite, name, .timeout = (secs) + 30)                                        \
	{                                                                                \
		if (skip)                                                                \
			cr_skip_test("%s", why);                                         \
		static struct child c;                                                   \
		run_child(&c, env, name##_child, secs);                                  \
		cr_assert(WIFEXITED(c.status), "status %d, stderr: %s", c.status, c.err); \
		cr_assert_eq(WEXITSTATUS(c.status), 0, "exit %d, stderr: %s",            \
			     WEXITSTATUS(c.status), c.err);                              \
	}                                                                                \
	static int name##_body(int argc, char **argv)

#define G_TEST(suite, name, secs) G_TEST_ENV(suite, name, env_procs1, secs)

/* A listening TCP socket on 127.0.0.1 (port chosen by the kernel). */
static inline int tcp_listen(int backlog, int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof a;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, backlog) ||
	    getsockname(fd, (struct sockaddr *)&a, &len)) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static inline struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static inline int tcp_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = loopback(port);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		int e = err();
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Read exactly n bytes (0 on success, -1 on EOF or error). */
static inline int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static inline uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* The byte at offset i of a test stream seeded by seed. */
static inline uint8_t pattern(uint64_t seed, uint64_t i)
{
	return (uint8_t)(splitmix(seed ^ (i >> 3)) >> ((i & 7) * 8));
}

static inline int64_t ms_since(int64_t t0)
{
	return (now_ns() - t0) / 1000000;
}

#endif
