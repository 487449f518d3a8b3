/*
 * weft_stats_v1.h - the stats part of include/weft.h as it was before
 * weft_stats_t grew (commit 3db374d^, session 4), copied verbatim with
 * the two declarations test_abi.c also needs: what a program built then
 * saw.  test_abi.c is compiled against this, never against weft.h.
 */
#ifndef WEFT_STATS_V1_H
#define WEFT_STATS_V1_H

#include <stdint.h>

#define WEFT_API __attribute__((visibility("default")))

WEFT_API int64_t weft_go(void (*fn)(void *arg), void *arg);
WEFT_API int weft_sleep(int64_t ns);

/* A snapshot of the scheduler (as WEFT_DEBUG=schedtrace prints it). */
typedef struct weft_stats {
	int procs;                 /* Ps (WEFT_MAXPROCS) */
	int idle_procs;            /* Ps with nothing to run */
	int threads;               /* OS threads the runtime made (Ms + sysmon) */
	int idle_threads;          /* Ms parked with no P */
	int spinning_threads;      /* Ms looking for work */
	int global_runq;           /* Gs on the global run queue */
	int64_t gs;                /* live Gs */
	int64_t syscall_handoffs;  /* Ps taken from an M blocked in a call */
	int64_t hog_handoffs;      /* Ps taken from a G running > 10 ms */
	int64_t preempts;          /* Gs asked to yield after 10 ms in the runtime */
	int64_t timers_rescued;    /* timers fired for a P whose M fell behind */
} weft_stats_t;

/* Fill *st.  0, or -1 with EINVAL for NULL. */
WEFT_API int weft_stats(weft_stats_t *st);

#endif
