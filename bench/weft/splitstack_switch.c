/*
 * splitstack_switch.c - the cost of a G switch with and without the
 * split-stack context saved and restored: two Gs on one P calling
 * weft_yield in turn, both guarded (libgcc's state untouched: guarded
 * Gs and g0 share the zero context) and both segmented (every switch
 * does __splitstack_getcontext for the G leaving and
 * __splitstack_setcontext for the G entering).  Built with -fsplit-stack
 * against libweft_split (bench/splitstack.mk).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"

static long iters = 10 * 1000 * 1000;
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

static double pair(int kind)
{
	weft_attr_t a;
	memset(&a, 0, sizeof a);
	a.stack_kind = kind;
	weft_wg_add(&wg, 2);
	int64_t t0 = now();
	weft_go_attr(&a, spin, NULL);
	weft_go_attr(&a, spin, NULL);
	weft_wg_wait(&wg);
	return (double)(now() - t0) / (2.0 * iters);
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	double best_g = 1e9, best_s = 1e9;
	/* alternate, keep the best of five: the machine's noise is larger
	 * than the difference measured */
	for (int r = 0; r < 5; r++) {
		double g = pair(WEFT_STACK_GUARDED), s = pair(WEFT_STACK_SEGMENTED);
		best_g = g < best_g ? g : best_g;
		best_s = s < best_s ? s : best_s;
	}
	printf("splitstack_switch guarded_ns=%.2f segmented_ns=%.2f extra_ns=%.2f\n", best_g, best_s,
	       best_s - best_g);
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv("QUICK"))
		iters = 1000 * 1000;
	if (argc > 1)
		iters = atol(argv[1]);
	weft_maxprocs(1);
	return weft_main(run, argc, argv);
}
