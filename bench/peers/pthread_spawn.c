/*
 * pthread_spawn -- cost of pthread_create + pthread_join.
 *
 *   pthread_spawn [N]      default 20000; QUICK=1 in the env uses 2000.
 *
 * Creates and joins N threads one after another (default attributes)
 * and prints: pthread_spawn_us=<us per thread> n=<N>
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *nop(void *arg)
{
	return arg;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	long i, n = argc > 1 ? atol(argv[1]) : 20000;
	double t0, el;

	if (quick != NULL && strcmp(quick, "1") == 0)
		n = 2000;
	if (n <= 0)
		n = 1;
	t0 = now_s();
	for (i = 0; i < n; i++) {
		pthread_t t;
		int rc = pthread_create(&t, NULL, nop, NULL);

		if (rc != 0) {
			fprintf(stderr, "pthread_spawn: pthread_create: %s\n",
				strerror(rc));
			return 1;
		}
		pthread_join(t, NULL);
	}
	el = now_s() - t0;
	printf("pthread_spawn_us=%.2f n=%ld\n", el * 1e6 / (double)n, n);
	return 0;
}
