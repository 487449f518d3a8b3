/*
 * splitstack_call.c - what split-stack code pays per call, in a
 * segmented G: a call that stays in its segment (the prologue's limit
 * check) against the same function without the check; a call that
 * crosses into the next segment (__morestack; the segment is cached
 * after the first); a call into code built without -fsplit-stack, with
 * and without the room gold demands for it.  Built with -fsplit-stack
 * against libweft_split (bench/splitstack.mk).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"

static long iters = 50 * 1000 * 1000;

static int64_t now(void)
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

/* a frame bigger than what is left in a 16 KiB first segment */
__attribute__((noinline)) long big_frame(long x)
{
	volatile char pad[20000];
	pad[0] = (char)x;
	return pad[0] + 1;
}

/* calls code built without -fsplit-stack (libc): gold makes its prologue
 * demand ~1 MiB */
__attribute__((noinline)) long calls_libc(long x)
{
	return labs(x) + 1;
}

static long (*volatile fp_split)(long) = leaf_split;
static long (*volatile fp_plain)(long) = leaf_plain;
static long (*volatile fp_big)(long) = big_frame;
static long (*volatile fp_libc)(long) = calls_libc;

static double per_call(long (*volatile *fp)(long), long n)
{
	long (*f)(long) = *fp;
	long acc = 0;
	int64_t t0 = now();
	for (long i = 0; i < n; i++)
		acc += f(i);
	int64_t t1 = now();
	if (acc == 42)
		printf(" ");
	return (double)(t1 - t0) / n;
}

static weft_wg_t wg = WEFT_WG_INIT;
static const char *label;

static void bench(void *arg)
{
	(void)arg;
	double plain = per_call(&fp_plain, iters);
	double split = per_call(&fp_split, iters);
	double big = per_call(&fp_big, iters / 20);
	double libc = per_call(&fp_libc, iters / 20);
	printf("splitstack_call g=%s plain_ns=%.2f split_ns=%.2f check_ns=%.2f "
	       "big_frame_ns=%.1f calls_libc_ns=%.1f\n",
	       label, plain, split, split - plain, big, libc);
	weft_wg_done(&wg);
}

static void one(const char *name, int kind, size_t size)
{
	weft_attr_t a;
	memset(&a, 0, sizeof a);
	a.stack_kind = kind;
	a.stack_size = size;
	label = name;
	weft_wg_add(&wg, 1);
	weft_go_attr(&a, bench, NULL);
	weft_wg_wait(&wg);
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	/* guarded: limit 0, nothing ever crosses */
	one("guarded", WEFT_STACK_GUARDED, 0);
	/* default first segment: ~1 MiB of room for non-split calls */
	one("segmented", WEFT_STACK_SEGMENTED, 0);
	/* 16 KiB first segment: big_frame and calls_libc cross every time */
	one("segmented-16K", WEFT_STACK_SEGMENTED, 16 * 1024);
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv("QUICK"))
		iters = 5 * 1000 * 1000;
	if (argc > 1)
		iters = atol(argv[1]);
	weft_maxprocs(1);
	return weft_main(run, argc, argv);
}
