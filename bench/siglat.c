/*
 * siglat.c - how long from pthread_kill to the start of the handler, on
 * a thread parked in read(): a plain pthread program, run natively and
 * under the shim (docs/preload.md, Signals):
 *
 *   make $(BUILD)/bench/siglat
 *   build/bench/siglat; build/bin/weft run --procs 2 -- build/bench/siglat
 *
 * 2,000 rounds: the worker parks in read on a socket, main stamps the
 * clock and sends SIGUSR1, the handler stamps it and wakes main through a
 * pipe; prints the median, 90th and 99th percentiles.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define N 2000

static atomic_long t1;
static atomic_int ready;
static int sv[2], pp[2];

static long now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void on_usr1(int s)
{
	(void)s;
	atomic_store(&t1, now());
	(void)!write(pp[1], "x", 1);
}

static void *worker(void *arg)
{
	(void)arg;
	char c;
	for (;;) {
		ready = 1;
		(void)!read(sv[0], &c, 1); /* EINTR each round */
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : x > y;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(pp) != 0)
		return 1;
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	static long d[N];
	for (int i = 0; i < N; i++) {
		while (!ready)
			usleep(100);
		usleep(200); /* into read */
		ready = 0;
		t1 = 0;
		long t0 = now();
		pthread_kill(t, SIGUSR1);
		char c;
		(void)!read(pp[0], &c, 1);
		d[i] = t1 - t0;
	}
	qsort(d, N, sizeof d[0], cmp);
	printf("pthread_kill to handler start: median %.1f us, p90 %.1f us, p99 %.1f us\n",
	       d[N / 2] / 1e3, d[N * 9 / 10] / 1e3, d[N * 99 / 100] / 1e3);
	return 0;
}
