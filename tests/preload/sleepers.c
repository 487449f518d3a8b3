/*
 * sleepers.c - N plain pthreads (default 10000) that each sleep(1), then
 * are joined.  Prints "threads=N max_os_threads=T secs=S": T is the most
 * OS threads /proc/self/status showed while they slept.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static void *sleeper(void *arg)
{
	(void)arg;
	sleep(1);
	return arg;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	pthread_t *t = calloc((size_t)n, sizeof *t);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (int i = 0; i < n; i++) {
		int e = pthread_create(&t[i], &attr, sleeper, (void *)(long)i);
		if (e) {
			fprintf(stderr, "pthread_create %d: %s\n", i, strerror(e));
			return 1;
		}
	}
	int max = os_threads();
	for (int i = 0; i < 5; i++) {
		usleep(100000);
		int m = os_threads();
		if (m > max)
			max = m;
	}
	for (int i = 0; i < n; i++) {
		void *r;
		if (pthread_join(t[i], &r) != 0 || r != (void *)(long)i) {
			fprintf(stderr, "join %d failed\n", i);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	printf("threads=%d max_os_threads=%d secs=%.3f\n", n, max, secs);
	return 0;
}
