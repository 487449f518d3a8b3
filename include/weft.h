/*
 * weft.h - the public interface of weft, an M:N green-thread runtime for C.
 *
 * A green thread (G) is a function with its own stack.  Many Gs run on a
 * few OS threads (M); the right to run Gs is handed out through a fixed
 * set of processors (P, WEFT_MAXPROCS).  A G that blocks (sleep, a
 * channel, a lock, a socket read) parks; its OS thread runs other Gs.
 *
 * Every call here also works from a plain OS thread that is not a G: the
 * blocking ones then block that thread.  Errors are -1 (or NULL) with
 * errno set, never a silent wrong result.
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_API __attribute__((visibility("default")))

/* ---- green threads --------------------------------------------------- */

/* Run fn(argc, argv) as the first G; return its result when it returns.
 * The runtime starts if it has not yet. */
WEFT_API int weft_main(int (*fn)(int argc, char **argv), int argc, char **argv);

/* Start fn(arg) in a new G.  Returns its id (> 0), or -1 with errno:
 * EINVAL (fn NULL), ENOMEM (no memory for a descriptor or stack). */
WEFT_API int64_t weft_go(void (*fn)(void *arg), void *arg);

/* Attributes for weft_go_attr.  Zero-initialise, then set what you need. */
typedef struct weft_attr {
	size_t stack_size; /* usable stack bytes; 0 = WEFT_STACK_SIZE */
	int stack_kind;    /* WEFT_STACK_DEFAULT, _GUARDED or _SEGMENTED */
	const char *name;  /* copied; shown in dumps; NULL = none */
} weft_attr_t;

enum {
	WEFT_STACK_DEFAULT = 0,   /* whatever WEFT_STACK selects (guarded) */
	WEFT_STACK_GUARDED = 1,   /* fixed size, guard page or canary */
	WEFT_STACK_SEGMENTED = 2, /* gcc -fsplit-stack segments */
};

/* weft_go with attributes (NULL = defaults).  Errors as weft_go, and
 * EINVAL for a stack size below 16 KiB or above 1 GiB or a bad kind. */
WEFT_API int64_t weft_go_attr(const weft_attr_t *attr, void (*fn)(void *arg), void *arg);

/* Let other runnable Gs run; on a plain thread, sched_yield(). */
WEFT_API void weft_yield(void);

/* Park the calling G (or thread) for at least ns nanoseconds.
 * 0, or -1 with errno EINVAL for ns < 0. */
WEFT_API int weft_sleep(int64_t ns);

/* The calling G's id; 0 outside a G. */
WEFT_API int64_t weft_self(void);

/* End the calling G now (as if its function returned).  Called outside a
 * G it ends the calling OS thread (pthread_exit). */
WEFT_API _Noreturn void weft_exit(void);

/* n > 0 sets the number of Ps (1..1024) and returns the previous number;
 * n == 0 only queries.  -1 with EINVAL for n < 0 or n > 1024. */
WEFT_API int weft_maxprocs(int n);

/* Keep the calling G on its current OS thread until the matching unlock
 * (Go's runtime.LockOSThread); calls nest.  Outside a G: no effect. */
WEFT_API void weft_lock_thread(void);
WEFT_API void weft_unlock_thread(void);

/* ---- wait group (Go's sync.WaitGroup) -------------------------------- */

/* Fields are private; declare with WEFT_WG_INIT. */
typedef struct weft_wg {
	int64_t _count;    /* outstanding adds */
	uint32_t _lock;    /* runtime spin lock */
	uint32_t _pad;
	void *_waiters;    /* parked waiters */
} weft_wg_t;
#define WEFT_WG_INIT { 0, 0, 0, NULL }

/* A negative count is a bug: it prints "weft: fatal: ..." and aborts,
 * as Go panics. */
WEFT_API void weft_wg_add(weft_wg_t *wg, int64_t delta);
WEFT_API void weft_wg_done(weft_wg_t *wg);
WEFT_API void weft_wg_wait(weft_wg_t *wg);

/* ---- diagnostics ----------------------------------------------------- */

/* Print every G with its state, wait reason and backtrace, as Go's
 * SIGQUIT dump does. */
WEFT_API void weft_dump(FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_H */
