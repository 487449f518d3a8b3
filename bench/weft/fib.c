/*
 * fib.c - fork-join recursion, one G per call above a cutoff, the peer
 * of bench/go/fib.go.  Run with WEFT_MAXPROCS=1 and 2 for the speedup.
 *
 * fib(n) starts a G for fib(n-1) when n > cutoff, computes fib(n-2)
 * itself and joins; at or below the cutoff it recurses serially.
 *
 *   fib [N [CUTOFF]]      defaults 32 and 20; QUICK=1 in the env uses N=27.
 *
 * One fib(32) takes a few ms, about as long as starting the second M and
 * first touching the stacks of a few hundred Gs: one untimed warm-up
 * call, then the median of REPS timed calls, so the figure is the
 * scheduler's and not the process start-up's (bench/go/fib.go does the
 * same).
 *
 * Output: weft_fib_ms=<median wall ms of one call> n=<N> result=<fib(N)> procs=<P>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"

static int n = 32, cutoff = 20;

static long serial(int k)
{
	return k < 2 ? k : serial(k - 1) + serial(k - 2);
}

struct call {
	int k;
	long result;
	weft_wg_t done;
};

static long fib(int k);

static void child(void *arg)
{
	struct call *c = arg;
	c->result = fib(c->k);
	weft_wg_done(&c->done);
}

static long fib(int k)
{
	if (k <= cutoff)
		return serial(k);
	struct call c = { .k = k - 1, .result = 0, .done = WEFT_WG_INIT };
	weft_wg_add(&c.done, 1);
	if (weft_go(child, &c) < 0) {
		perror("fib: weft_go");
		exit(1);
	}
	long b = fib(k - 2);
	weft_wg_wait(&c.done);
	return c.result + b;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define REPS 9

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	long want = serial(n);
	double ms[REPS];
	long r = fib(n); /* warm-up */
	for (int i = 0; i < REPS && r == want; i++) {
		double t0 = now_s();
		r = fib(n);
		ms[i] = (now_s() - t0) * 1e3;
	}
	if (r != want) {
		fprintf(stderr, "fib: got %ld, want %ld\n", r, want);
		return 1;
	}
	qsort(ms, REPS, sizeof ms[0], cmp_double);
	printf("weft_fib_ms=%.3f n=%d result=%ld procs=%d\n", ms[REPS / 2], n, r, weft_maxprocs(0));
	return 0;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	if (argc > 1)
		n = atoi(argv[1]);
	else if (quick && !strcmp(quick, "1"))
		n = 27;
	if (argc > 2)
		cutoff = atoi(argv[2]);
	if (n < 0 || n > 50 || cutoff < 1) {
		fprintf(stderr, "usage: fib [N (0..50) [CUTOFF (>= 1)]]\n");
		return 2;
	}
	return weft_main(run, argc, argv);
}
