/*
 * sleep_pthreads -- a plain pthread program: N threads (default 10000)
 * each call sleep(1); reports the wall time until all have been joined.
 * Ideal is just over 1 s.  It is also run unmodified under weft's
 * LD_PRELOAD shim, so it must stay a portable, ordinary pthread program.
 *
 *   sleep_pthreads [N]     QUICK=1 in the env uses 1000 threads.
 *
 * Prints: sleep_pthreads_wall_ms=<ms> threads=<N>
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
	sleep(1);
	return arg;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	long i, made, n = argc > 1 ? atol(argv[1]) : 10000;
	struct timespec a, b;
	pthread_t *t;
	int rc = 0;

	if (quick != NULL && strcmp(quick, "1") == 0)
		n = 1000;
	if (n <= 0)
		n = 1;
	t = calloc((size_t)n, sizeof *t);
	if (t == NULL)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (made = 0; made < n; made++) {
		int err = pthread_create(&t[made], NULL, sleeper, NULL);

		if (err != 0) {
			fprintf(stderr, "sleep_pthreads: thread %ld: %s\n",
				made, strerror(err));
			rc = 1;
			break;
		}
	}
	for (i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	free(t);
	printf("sleep_pthreads_wall_ms=%.1f threads=%ld\n",
	       (double)(b.tv_sec - a.tv_sec) * 1e3 +
	       (double)(b.tv_nsec - a.tv_nsec) / 1e6, made);
	return rc;
}
