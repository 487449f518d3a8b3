/*
 * dump.c - weft_dump: every G with its state and wait reason, as Go's
 * goroutine dump.  (Backtraces: see traceback.c when present.)
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "runtime.h"

void gtraceback(struct g *gp, FILE *out) __attribute__((weak));

static const char *statename(struct g *gp)
{
	switch (atomic_load_explicit(&gp->status, memory_order_relaxed)) {
	case G_RUNNABLE: return "runnable";
	case G_RUNNING: return "running";
	case G_SYSCALL: return "syscall";
	case G_WAITING: return waitreasons[gp->waitreason];
	default: return NULL;
	}
}

static void dumpone(struct g *gp, void *arg)
{
	FILE *out = arg;
	const char *st = statename(gp);
	if (!st)
		return;
	fprintf(out, "green thread %lld [%s", (long long)gp->id, st);
	if (atomic_load_explicit(&gp->status, memory_order_relaxed) == G_WAITING && gp->waitsince) {
		int64_t min = (atomic_load(&coarsenow) - gp->waitsince) / 60000000000LL;
		if (min >= 1)
			fprintf(out, ", %lld minutes", (long long)min);
	}
	fprintf(out, "]%s%s:\n", gp->name ? " " : "", gp->name ? gp->name : "");
	if (gtraceback)
		gtraceback(gp, out);
	fprintf(out, "\n");
}

void weft_dump(FILE *out)
{
	if (!out)
		out = stderr;
	if (!atomic_load(&sched.started))
		return;
	forEachG(dumpone, out);
	fflush(out);
}
