/*
 * spawn.c - spawn N Gs that each finish at once, wait for all: ns per G.
 * Run with WEFT_MAXPROCS=1 and 2.  Peer: bench/go/spawn.go.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "weft.h"

static long n = 1000000;
static weft_wg_t wg = WEFT_WG_INIT;

static void done(void *arg)
{
	(void)arg;
	weft_wg_done(&wg);
}

static int64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	/* warm-up round of the same size: afterwards descriptors and stacks
	 * come from the pools, as in a long-running program (the Go peer
	 * does the same warm-up round) */
	weft_wg_add(&wg, n);
	for (long i = 0; i < n; i++)
		weft_go(done, NULL);
	weft_wg_wait(&wg);
	weft_wg_add(&wg, n);
	int64_t t0 = now();
	for (long i = 0; i < n; i++)
		weft_go(done, NULL);
	weft_wg_wait(&wg);
	int64_t t1 = now();
	printf("weft_spawn_ns=%.1f procs=%d\n", (double)(t1 - t0) / n, weft_maxprocs(0));
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv("QUICK"))
		n = 100000;
	if (argc > 1)
		n = atol(argv[1]);
	return weft_main(run, argc, argv);
}
