/*
 * helpers.h - shared by the Criterion suites in tests/.
 *
 * Each Criterion test already runs in its own process, so the runtime
 * starts fresh per test.  For cases that must kill the process (stack
 * overflow, deadlock) or need a given environment (WEFT_MAXPROCS), run
 * the body in a child with run_child() and check its status and stderr.
 */
#ifndef WEFT_TEST_HELPERS_H
#define WEFT_TEST_HELPERS_H

#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

#include "runner.h"

/* 1 in a ThreadSanitizer build (make test SAN=thread), where a few tests
 * allow for what TSan changes: it is 5-15x slower, and it runs the
 * handler of an asynchronous signal only at the receiving thread's next
 * atomic operation or intercepted libc call (tests/tools.mk). */
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifndef TEST_TSAN
#define TEST_TSAN 0
#endif

static inline int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct child {
	int status;       /* from waitpid */
	char err[65536];  /* its stderr, NUL-terminated */
	char out[65536];  /* its stdout */
};

/* Read both pipes to EOF (poll, so a chatty child never blocks). */
static inline void drain2(int efd, char *ebuf, int ofd, char *obuf, size_t cap)
{
	size_t n[2] = { 0, 0 };
	int fds[2] = { efd, ofd };
	char *bufs[2] = { ebuf, obuf };
	int open_ = 2;
	struct pollfd p[2] = { { efd, POLLIN, 0 }, { ofd, POLLIN, 0 } };
	while (open_ > 0 && poll(p, 2, -1) > 0) {
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			char sink[4096];
			char *dst = n[i] + 1 < cap ? bufs[i] + n[i] : sink;
			size_t room = n[i] + 1 < cap ? cap - 1 - n[i] : sizeof sink;
			ssize_t r = read(fds[i], dst, room);
			if (r <= 0) {
				p[i].fd = -1;
				open_--;
			} else if (dst != sink) {
				n[i] += (size_t)r;
			}
		}
	}
	ebuf[n[0]] = 0;
	obuf[n[1]] = 0;
}

/* Fork; in the child set each "NAME=value" of env (NULL-terminated, may
 * be NULL), run fn() and exit with its result.  The parent collects exit
 * status, stdout and stderr.  timeout_s is a hang detector: after
 * timeout_s * test_slow() seconds the child gets SIGALRM. */
static inline void run_child(struct child *c, char *const env[], int (*fn)(void), int timeout_s)
{
	int ep[2], op[2];
	cr_assert(pipe(ep) == 0 && pipe(op) == 0);
	unsigned alarm_s = (unsigned)(timeout_s * test_slow());
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(ep[1], 2);
		dup2(op[1], 1);
		close(ep[0]);
		close(op[0]);
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		alarm(alarm_s);
		int r = fn();
		fflush(NULL);
		_exit(r);
	}
	close(ep[1]);
	close(op[1]);
	drain2(ep[0], c->err, op[0], c->out, sizeof c->err);
	close(ep[0]);
	close(op[0]);
	waitpid(pid, &c->status, 0);
}

#endif
