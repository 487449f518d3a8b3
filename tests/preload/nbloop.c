/*
 * nbloop.c - threads that loop on socket calls that never block: each
 * sends a byte to itself over a socketpair and reads it back, with
 * MSG_DONTWAIT (as MariaDB's vio reads and writes its sockets) or on an
 * end made O_NONBLOCK, until main says stop.  Main meanwhile sleeps 1 ms
 * at a time and samples the process's OS threads.  A plain pthread
 * program that knows nothing of weft.
 *
 * nbloop MODE NTHREADS ROUNDS   (MODE: dontwait or nonblock)
 * prints "ok loops: N" and "os_threads_max=K" (the most seen while the
 * loops ran); exit 0 if every loop ran and ended.
 *
 * Under weft the loops never park, so each is a G that runs until it is
 * asked to give way; a G on one P must take that request at its next
 * call, or sysmon takes it for C code that never calls in and lends a
 * spare P, with its OS thread, around it (docs/preload.md).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "check.h"

static atomic_bool stop;
static atomic_long loops;
static int dontwait; /* MSG_DONTWAIT, else the fds are O_NONBLOCK */

static void *loop(void *arg)
{
	(void)arg;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	if (!dontwait) {
		CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
		CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
	}
	int fl = dontwait ? MSG_DONTWAIT : 0;
	char c = 'x';
	long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		CHECK(send(sv[0], &c, 1, fl) == 1);
		CHECK(recv(sv[1], &c, 1, fl) == 1);
		n++;
	}
	close(sv[0]);
	close(sv[1]);
	atomic_fetch_add(&loops, n > 0);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: nbloop dontwait|nonblock NTHREADS ROUNDS\n");
		return 2;
	}
	dontwait = strcmp(argv[1], "dontwait") == 0;
	int n = atoi(argv[2]), rounds = atoi(argv[3]);
	CHECK(n > 0 && n <= 64 && rounds > 0);
	pthread_t t[64];
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, loop, NULL) == 0);
	int max = 0;
	for (int i = 0; i < rounds; i++) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
		int k = os_threads();
		if (k > max)
			max = k;
	}
	atomic_store(&stop, true);
	for (int i = 0; i < n; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	printf("ok loops: %ld\n", atomic_load(&loops));
	printf("os_threads_max=%d\n", max);
	return atomic_load(&loops) == n ? 0 : 1;
}
