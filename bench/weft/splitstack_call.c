/*
 * splitstack_call.c - what split-stack code pays per call, in a
 * segmented G.  Built with -fsplit-stack against libweft_split
 * (bench/splitstack.mk).
 *
 *   check    a call that stays in its segment, over the same function
 *            without the split-stack prologue (no_split_stack)
 *   cross    a call whose frame does not fit in what is left of the
 *            segment: __morestack, run on the next segment (kept linked
 *            after the first time), back
 *   libc     a call to a function that calls libc (gold makes it demand
 *            ~1 MiB): from the top of a default first segment, where
 *            that room is there, and from near the end of a segment
 *
 * The timed loops call nothing built without -fsplit-stack themselves
 * (that would put them on a 1 MiB segment): clock and printf are in
 * helpers.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"

static long iters = 100 * 1000 * 1000;

static uintptr_t splitlimit(void)
{
	uintptr_t v;
	__asm__ volatile("movq %%fs:0x70, %0" : "=r"(v));
	return v;
}

static __attribute__((noinline)) int64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* the same leaf, with and without the split-stack prologue */
__attribute__((noinline)) long leaf_split(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

__attribute__((noinline, no_split_stack)) long leaf_plain(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

/* a 20 KB frame: never fits near the end of a segment */
__attribute__((noinline)) long big_frame(long x)
{
	volatile char pad[20000];
	pad[0] = (char)x;
	return pad[0] + 1;
}

/* calls code built without -fsplit-stack (__errno_location, the
 * cheapest libc function there is): gold makes its prologue demand
 * ~1 MiB of free stack */
__attribute__((noinline)) long calls_libc(long x)
{
	return x + errno;
}

static long (*volatile fp_split)(long) = leaf_split;
static long (*volatile fp_plain)(long) = leaf_plain;
static long (*volatile fp_big)(long) = big_frame;
static long (*volatile fp_libc)(long) = calls_libc;

static volatile long sink;

/* best of three, ns per call */
static double per_call(long (*volatile *fp)(long), long n)
{
	double best = 1e9;
	for (int r = 0; r < 3; r++) {
		long (*f)(long) = *fp;
		long acc = 0;
		int64_t t0 = now();
		for (long i = 0; i < n; i++)
			acc += f(i);
		int64_t t1 = now();
		sink = acc;
		double ns = (double)(t1 - t0) / (double)n;
		best = ns < best ? ns : best;
	}
	return best;
}

struct res {
	double plain, split, libc_top, cross, libc_edge;
	int edge_depth;
};

/* Recurse until less than ~3 KB is left above the limit, then measure
 * the calls that cannot fit there.  Only for segmented Gs (a guarded
 * G's limit is 0). */
static __attribute__((noinline)) void at_edge(struct res *r, int depth)
{
	char pad[600];
	__asm__ volatile("" : : "r"(pad) : "memory");
	uintptr_t sp = (uintptr_t)pad;
	if (sp - splitlimit() > 3000 && depth < 100000) {
		at_edge(r, depth + 1);
		return;
	}
	r->edge_depth = depth;
	r->cross = per_call(&fp_big, iters / 50);
	r->libc_edge = per_call(&fp_libc, iters / 50);
}

static void measure(struct res *r, bool segmented)
{
	r->plain = per_call(&fp_plain, iters);
	r->split = per_call(&fp_split, iters);
	r->libc_top = per_call(&fp_libc, iters / 10);
	if (segmented)
		at_edge(r, 0);
}

static struct res results[3];
static const char *const labels[3] = { "guarded", "segmented", "segmented-16K" };

static weft_wg_t wg = WEFT_WG_INIT;

static __attribute__((noinline)) void done(void)
{
	weft_wg_done(&wg);
}

static void g_guarded(void *arg)
{
	measure(arg, false);
	done();
}

static void g_segmented(void *arg)
{
	measure(arg, true);
	done();
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_attr_t a[3];
	memset(a, 0, sizeof a);
	a[0].stack_kind = WEFT_STACK_GUARDED;
	a[1].stack_kind = WEFT_STACK_SEGMENTED;            /* default first segment */
	a[2].stack_kind = WEFT_STACK_SEGMENTED;
	a[2].stack_size = 16 * 1024;                        /* the smallest */
	for (int i = 0; i < 3; i++) {
		weft_wg_add(&wg, 1);
		weft_go_attr(&a[i], i ? g_segmented : g_guarded, &results[i]);
		weft_wg_wait(&wg);
		struct res *r = &results[i];
		printf("splitstack_call g=%s plain_ns=%.2f split_ns=%.2f check_ns=%.2f libc_top_ns=%.2f",
		       labels[i], r->plain, r->split, r->split - r->plain, r->libc_top);
		if (i)
			printf(" cross_ns=%.1f libc_edge_ns=%.1f", r->cross, r->libc_edge);
		printf("\n");
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv("QUICK"))
		iters = 10 * 1000 * 1000;
	if (argc > 1)
		iters = atol(argv[1]);
	weft_maxprocs(1);
	return weft_main(run, argc, argv);
}
