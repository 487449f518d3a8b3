/*
 * diag.h - green-thread dumps and deadlock detection (dump.c,
 * traceback.c, deadlock.c).
 */
#ifndef WEFT_DIAG_H
#define WEFT_DIAG_H

#include <stdio.h>

#include "runtime.h"

/* ---- dump.c ------------------------------------------------------------ */

/* At runtime start (weak hook in proc.c): the unwinder (tb_init), the
 * SIGQUIT and SIGURG handlers and the thread that prints SIGQUIT dumps. */
void dump_init(void);
/* Runtime threads other than Ms and sysmon that dump.c started (the
 * dumper), for the deadlock check's thread count. */
int dump_nthreads(void);
/* At the start of every M's thread (weak hook in proc.c): waits while a
 * dump that did not stop this M is in progress. */
void dump_mstart(void);

/* ---- traceback.c --------------------------------------------------------- */

#define TB_MAXFRAMES 32

/* A backtrace as program counters, innermost first. */
struct tb {
	int n;
	bool exact0;                /* pc[0] is where a signal stopped the thread, not a return address */
	uintptr_t pc[TB_MAXFRAMES];
};

/* At runtime start (dump_init), in a plain context: load libunwind
 * (lazylib.c) and find its local unwinder.  Without it (not installed)
 * every backtrace below is empty and prints as such. */
void tb_init(void);
/* From a switched-out context (a parked or runnable G's saved sp). */
void tb_from_frame(void *sp, struct tb *t);
/* From a signal handler's ucontext_t. */
void tb_from_ucontext(void *uc, struct tb *t);
/* The caller's own stack. */
void tb_here(struct tb *t);
/* Print it as Go does: "function()\n\tfile:line (module+0xoff)\n" per frame,
 * dropping the runtime's own frames above the API call and below the G's
 * entry.  Symbolises with addr2line where it is installed. */
void tb_print(const struct tb *t, FILE *out);
/* End of a dump: stop the addr2line helpers, drop the cache. */
void tb_symclose(void);

#endif
