/*
 * gstate.c - what the hook fuzzer (hookdiff.c) asks of weft's internals:
 * whether the G that makes a pair's blocking call is blocked yet, so
 * its partner acts after the block (an event, not a sleep).  Linked into
 * weft's objects for the fuzzer only (tests/fuzz/fuzz.mk), which keeps
 * these two names global next to weft's API.
 */
#include "runtime.h"

/* The running G, NULL on a plain thread. */
__attribute__((visibility("default"))) void *hookdiff_g(void)
{
	return getg();
}

/* Is g stopped in a wait: parked (G_WAITING), or in a blocking call or
 * a kernel wait on its M (G_SYSCALL)? */
__attribute__((visibility("default"))) int hookdiff_gblocked(void *g)
{
	uint32_t st = atomic_load(&((struct g *)g)->status);
	return st == G_WAITING || st == G_SYSCALL;
}
