/*
 * yield.c - two Gs on one P calling weft_yield in turn: ns per switch.
 * Peer: bench/go/gosched.go (runtime.Gosched), Boost.Context.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "weft.h"

static long iters = 10000000;
static weft_wg_t wg = WEFT_WG_INIT;

static void spin(void *arg)
{
	(void)arg;
	for (long i = 0; i < iters; i++)
		weft_yield();
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
	weft_wg_add(&wg, 2);
	int64_t t0 = now();
	weft_go(spin, NULL);
	weft_go(spin, NULL);
	weft_wg_wait(&wg);
	int64_t t1 = now();
	printf("weft_yield_ns=%.2f\n", (double)(t1 - t0) / (2.0 * iters));
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv("QUICK"))
		iters = 1000000;
	if (argc > 1)
		iters = atol(argv[1]);
	weft_maxprocs(1);
	return weft_main(run, argc, argv);
}
