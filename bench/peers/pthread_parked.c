/*
 * pthread_parked -- creation time and memory of many blocked threads.
 *
 *   pthread_parked [N]     default 10000; QUICK=1 in the env uses 1000.
 *
 * Starts N threads (default attributes) that each wait on one condition
 * variable, waits until all of them are parked, reads VmRSS from
 * /proc/self/status, then wakes and joins them.  Prints:
 *   pthread_parked_create_us=<us each> pthread_parked_rss_bytes=<bytes each> n=<N>
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t parked_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t release_cv = PTHREAD_COND_INITIALIZER;
static long parked;
static int released;

static void *park(void *arg)
{
	pthread_mutex_lock(&mu);
	parked++;
	pthread_cond_signal(&parked_cv);	/* main counts us in */
	while (!released)
		pthread_cond_wait(&release_cv, &mu);
	pthread_mutex_unlock(&mu);
	return arg;
}

/* Resident set size in KiB, or -1. */
static long vm_rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
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
	long i, made, n = argc > 1 ? atol(argv[1]) : 10000;
	long rss0, rss1;
	pthread_t *t;
	double t0, el;
	int rc = 0;

	if (quick != NULL && strcmp(quick, "1") == 0)
		n = 1000;
	if (n <= 0)
		n = 1;
	t = calloc((size_t)n, sizeof *t);
	if (t == NULL)
		return 1;
	rss0 = vm_rss_kib();
	t0 = now_s();
	for (made = 0; made < n; made++) {
		int err = pthread_create(&t[made], NULL, park, NULL);

		if (err != 0) {
			fprintf(stderr, "pthread_parked: thread %ld: %s\n",
				made, strerror(err));
			rc = 1;
			break;
		}
	}
	pthread_mutex_lock(&mu);
	while (parked < made)
		pthread_cond_wait(&parked_cv, &mu);
	pthread_mutex_unlock(&mu);
	el = now_s() - t0;
	rss1 = vm_rss_kib();

	pthread_mutex_lock(&mu);
	released = 1;
	pthread_cond_broadcast(&release_cv);
	pthread_mutex_unlock(&mu);
	for (i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	free(t);
	if (made > 0)
		printf("pthread_parked_create_us=%.2f pthread_parked_rss_bytes=%.0f "
		       "n=%ld\n", el * 1e6 / (double)made,
		       (double)(rss1 - rss0) * 1024 / (double)made, made);
	return rc;
}
