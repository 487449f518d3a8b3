/*
 * pthread_mutex.c - N real threads taking M pthread mutexes, for
 * comparing glibc's mutexes with weft's under WEFT_PTHREADS=native (the
 * threads stay real there; the mutexes are weft's).  Built by hand, run
 * natively and under weft alternately:
 *
 *   cc -O2 -pthread bench/pthread_mutex.c -o /tmp/pthread_mutex
 *   /tmp/pthread_mutex 512 8 2
 *   WEFT_PTHREADS=native build/bin/weft run -- /tmp/pthread_mutex 512 8 2
 *
 * Arguments: threads (512), mutexes (8; each round picks one at random),
 * seconds (2).  Each round holds the mutex for ~50 loop iterations and
 * then works ~200 outside it.  Prints lock/unlock pairs per second and
 * the process's CPU time.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mus[64];
static long counter;
static atomic_int stop;
static int nlocks;

static void *worker(void *arg)
{
	unsigned r = (unsigned)(long)arg;
	long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		r = r * 1103515245 + 12345;
		pthread_mutex_t *m = &mus[(r >> 8) % (unsigned)nlocks];
		pthread_mutex_lock(m);
		counter++;
		for (volatile int k = 0; k < 50; k++)
			;
		pthread_mutex_unlock(m);
		n++;
		for (volatile int k = 0; k < 200; k++)
			;
	}
	return (void *)n;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 512;
	nlocks = argc > 2 ? atoi(argv[2]) : 8;
	double secs = argc > 3 ? atof(argv[3]) : 2;
	if (n < 1 || nlocks < 1 || nlocks > 64 || secs <= 0)
		return 2;
	for (int i = 0; i < 64; i++)
		pthread_mutex_init(&mus[i], NULL);
	pthread_t *t = calloc((size_t)n, sizeof *t);
	if (!t)
		return 1;
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i))
			return 1;
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, 1);
	long total = 0;
	for (int i = 0; i < n; i++) {
		void *r;
		pthread_join(t[i], &r);
		total += (long)r;
	}
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	printf("threads %d mutexes %d pairs/s %.0f cpu %.2f s\n", n, nlocks, total / secs,
	       ts.tv_sec + ts.tv_nsec / 1e9);
	return 0;
}
