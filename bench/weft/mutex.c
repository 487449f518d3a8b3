/*
 * mutex - 8 Gs incrementing one counter under a weft_mutex_t, the peer
 * of bench/go/mutex.go and bench/peers/pthread_mutex.c.  The critical
 * section is a load, a little arithmetic and a store.  Ps: as many as
 * the machine has CPUs (WEFT_MAXPROCS), like Go's GOMAXPROCS default.
 *
 *   mutex [TOTAL_OPS [GS]]   defaults 20000000 and 8; QUICK=1 uses 1000000.
 *
 * Output: weft_mutex_ops_per_sec=<rate> gs=<G> procs=<P> n=<ops>
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"

static weft_mutex_t mu = WEFT_MUTEX_INIT;
static uint64_t counter, mix;
static long per;
static weft_wg_t wg = WEFT_WG_INIT;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void worker(void *arg)
{
	(void)arg;
	for (long i = 0; i < per; i++) {
		weft_mutex_lock(&mu);
		counter++;
		mix = mix * 31 + counter;
		weft_mutex_unlock(&mu);
	}
	weft_wg_done(&wg);
}

static long total = 20000000;
static int gs = 8;

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	per = total / gs;
	weft_wg_add(&wg, gs);
	double t0 = now_s();
	for (int i = 0; i < gs; i++)
		if (weft_go(worker, NULL) < 0)
			return 1;
	weft_wg_wait(&wg);
	double el = now_s() - t0;
	if (counter != (uint64_t)per * (uint64_t)gs) {
		fprintf(stderr, "mutex: counter %llu, want %llu\n", (unsigned long long)counter,
			(unsigned long long)per * (unsigned long long)gs);
		return 1;
	}
	printf("weft_mutex_ops_per_sec=%.0f gs=%d procs=%d n=%llu\n", (double)counter / el, gs,
	       weft_maxprocs(0), (unsigned long long)counter);
	return 0;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	if (argc > 1)
		total = atol(argv[1]);
	else if (quick && !strcmp(quick, "1"))
		total = 1000000;
	if (argc > 2)
		gs = atoi(argv[2]);
	if (gs < 1 || gs > 100000)
		gs = 8;
	return weft_main(run, argc, argv);
}
