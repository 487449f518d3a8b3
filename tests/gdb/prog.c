/*
 * prog.c - the program tests/gdb/run.sh debugs: Gs parked in known
 * functions for different reasons, one running, then a stop in
 * gdb_ready() where the script's breakpoint looks at them.
 *
 * Built with -fsplit-stack against libweft_split (prog-split) it also
 * parks a segmented G deep in a recursion that spans several segments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"

/* read by the gdb script */
volatile long receiver_id, sleeper_id, locker_id, spinner_id, deep_id;

static weft_chan_t *never;
static weft_mutex_t held = WEFT_MUTEX_INIT;
static weft_wg_t started = WEFT_WG_INIT;
static volatile int stop_spinning;

__attribute__((noinline)) void gdb_receiver_func(void *arg)
{
	(void)arg;
	int v;
	weft_wg_done(&started);
	weft_chan_recv(never, &v);
	stop_spinning = v; /* not a tail call: this frame stays */
}

__attribute__((noinline)) void gdb_sleeper_func(void *arg)
{
	(void)arg;
	weft_wg_done(&started);
	weft_sleep(3600LL * 1000 * 1000 * 1000); /* a tail call: WHERE says weft_sleep */
}

__attribute__((noinline)) void gdb_locker_func(void *arg)
{
	(void)arg;
	weft_wg_done(&started);
	weft_mutex_lock(&held);
	stop_spinning = 1;
}

__attribute__((noinline)) void gdb_spinner_func(void *arg)
{
	(void)arg;
	weft_wg_done(&started);
	while (!stop_spinning)
		__asm__ volatile("pause");
}

/* segmented G: parks at the bottom of 'depth' frames of ~2 KiB */
static __attribute__((noinline)) void gdb_park_deep(long level)
{
	(void)level;
	weft_wg_done(&started);
	int v;
	weft_chan_recv(never, &v);
}

static void (*volatile park_fn)(long) = gdb_park_deep;

__attribute__((noinline)) long gdb_deep_func(long depth)
{
	volatile char pad[2000];
	pad[0] = (char)depth;
	if (depth == 0) {
		park_fn(depth);
		return 0;
	}
	return gdb_deep_func(depth - 1) + pad[0];
}

static void deep_g(void *arg)
{
	gdb_deep_func((long)(size_t)arg);
}

/* the breakpoint */
__attribute__((noinline)) void gdb_ready(void)
{
	__asm__ volatile("" ::: "memory");
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	never = weft_chan_make(sizeof(int), 0);
	weft_attr_t a = { 0 };
	int n = 4;
	weft_wg_add(&started, n);
	a.name = "receiver";
	receiver_id = weft_go_attr(&a, gdb_receiver_func, NULL);
	a.name = "sleeper";
	sleeper_id = weft_go_attr(&a, gdb_sleeper_func, NULL);
	weft_mutex_lock(&held);
	a.name = "locker";
	locker_id = weft_go_attr(&a, gdb_locker_func, NULL);
	a.name = "spinner";
	spinner_id = weft_go_attr(&a, gdb_spinner_func, NULL);
	if (getenv("PROG_DEEP")) {
		weft_attr_t s = { .stack_kind = WEFT_STACK_SEGMENTED, .stack_size = 16 * 1024,
				  .name = "deep" };
		weft_wg_add(&started, 1);
		deep_id = weft_go_attr(&s, deep_g, (void *)(size_t)atol(getenv("PROG_DEEP")));
	}
	weft_wg_wait(&started);
	weft_sleep(50 * 1000 * 1000); /* all of them parked (the spinner spins) */
	gdb_ready();
	stop_spinning = 1;
	printf("prog: done\n");
	exit(0);
}

int main(int argc, char **argv)
{
	return weft_main(run, argc, argv);
}
