/*
 * pthread_mutex -- 8 threads incrementing one counter under a
 * pthread_mutex_t; the critical section is a few arithmetic operations.
 *
 *   pthread_mutex [TOTAL_OPS [THREADS]]   defaults 20000000 and 8;
 *                                         QUICK=1 in the env uses 1000000.
 *
 * Prints: pthread_mutex_ops_per_sec=<rate> threads=<T> n=<ops>
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t counter, mix;
static long per_thread;

static void *worker(void *arg)
{
	long i;

	for (i = 0; i < per_thread; i++) {
		pthread_mutex_lock(&mu);
		counter++;
		mix = mix * 31 + counter;
		pthread_mutex_unlock(&mu);
	}
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
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	int i, nt = argc > 2 ? atoi(argv[2]) : 8;
	pthread_t t[MAX_THREADS];
	double t0, el;

	if (quick != NULL && strcmp(quick, "1") == 0)
		n = 1000000;
	if (nt < 1 || nt > MAX_THREADS)
		nt = 8;
	per_thread = n / nt;
	t0 = now_s();
	for (i = 0; i < nt; i++)
		if (pthread_create(&t[i], NULL, worker, NULL) != 0) {
			fprintf(stderr, "pthread_mutex: pthread_create failed\n");
			return 1;
		}
	for (i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	el = now_s() - t0;
	if (counter != (uint64_t)per_thread * (uint64_t)nt) {
		fprintf(stderr, "pthread_mutex: lost updates\n");
		return 1;
	}
	printf("pthread_mutex_ops_per_sec=%.0f threads=%d n=%llu\n",
	       (double)counter / el, nt, (unsigned long long)counter);
	return 0;
}
