/*
 * shim.h - what the LD_PRELOAD shim's files share (docs/preload.md).
 *
 * libweft_preload.so is libweft (runtime + hooks) plus hook/preload/:
 * the program's main runs as the first G, pthread_create starts Gs, and
 * the pthread synchronisation objects park Gs.  The rules every
 * interposed function follows:
 *
 *   - A call from inside the shim itself (the runtime, and jemalloc,
 *     which is linked in privately but reaches pthread_mutex_lock through
 *     the PLT, i.e. here) goes straight to glibc: FROM_SHIM().
 *   - Synchronisation objects: process-shared, robust and priority
 *     mutexes (and pshared conds, rwlocks, barriers, named semaphores)
 *     are glibc's, as they are.  Every other one is weft's, from Gs and
 *     plain threads alike, so an object used by both stays consistent.
 *   - Thread handles: a G's pthread_t points into a region of our own
 *     (struct gthr), never a real thread's; glibc gets everything else.
 *   - pthread functions return error numbers and leave errno alone.
 */
#ifndef WEFT_SHIM_H
#define WEFT_SHIM_H

#include "../hook.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

/* ---- is the caller the shim itself? ------------------------------------ */

/* The shim's own text, from the linker (hidden: never another module's). */
extern const char __ehdr_start[] HIDDEN;
extern const char __etext[] HIDDEN;

static inline bool from_shim(const void *ra)
{
	return (const char *)ra >= __ehdr_start && (const char *)ra < __etext;
}
/* In an interposed function: was it called by the runtime or jemalloc? */
#define FROM_SHIM() from_shim(__builtin_return_address(0))

/* ---- start-up (preload.c) ------------------------------------------------ */

/* WEFT_PTHREADS=native: pthread_create makes real threads. */
extern bool shim_native HIDDEN;
/* The runtime up, real pthread_create wired in, fork handlers set.
 * Idempotent; any thread. */
void shim_start(void) HIDDEN;
/* The runtime alone: main stays as it is (any thread). */
void shim_rtstart(void) HIDDEN;
/* Lazy start: main still runs as the real main thread, no G yet.
 * shim_start called from main makes it the main G. */
extern _Atomic bool shim_mainplain HIDDEN;
/* Print "weft: <msg>" once per flag. */
void shim_warn_once(_Atomic int *flag, const char *fmt, ...) HIDDEN
	__attribute__((format(printf, 2, 3)));

/* ---- threads (thread.c) ------------------------------------------------- */

/* One pthread running as a G: its pthread_t is this record's address. */
struct gthr;
/* The calling G's record (made on first use); NULL on a plain thread. */
struct gthr *gthr_self(void) HIDDEN;
/* On the real main thread: note the key values constructors set there.
 * On the main G: make its record, with those values. */
void gthr_main_keys(void) HIDDEN;
void gthr_main_init(void) HIDDEN;
/* Lazy start, on main before it becomes a G: the main G keeps main's
 * pthread_t and lock-owner identity as they were (gthr_main_init). */
void gthr_main_alias(void) HIDDEN;
/* Live pthreads (main, Gs, native threads): the last one to end exits. */
void gthr_live_add(long n) HIDDEN;
void gthr_live_done(void) HIDDEN;
/* Child of fork: the forking G is the only thread. */
void gthr_afterfork_child(void) HIDDEN;

/* The pthread functions behind the interposed names, for the shim's own
 * use (a call through the interposed name from inside the shim would be
 * taken for the runtime's and go to glibc). */
int shim_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) HIDDEN;
pthread_t shim_self(void) HIDDEN;
_Noreturn void shim_exit(void *ret) HIDDEN;
int shim_key_create(pthread_key_t *key, void (*dtor)(void *)) HIDDEN;
int shim_key_delete(pthread_key_t k) HIDDEN;
void *shim_getspecific(pthread_key_t k) HIDDEN;
int shim_setspecific(pthread_key_t k, uintptr_t v) HIDDEN;
int shim_once(pthread_once_t *o, void (*fn)(void)) HIDDEN;

/* A G's CPU-time clock id (pthread_getcpuclockid's): is clk one; the G
 * it is the clock of in *gpp (NULL: a thread not started yet), or
 * EINVAL (no such thread now). */
bool gthr_isclock(clockid_t clk) HIDDEN;
int gthr_clock(clockid_t clk, struct g **gpp) HIDDEN;
/* After a lazy start, the main G if clk is the id glibc gave main for
 * its CPU clock before (from its tid, the process id: the kernel's clock
 * of the real main thread, now weft's signal thread); else NULL. */
struct g *gthr_mainclock(clockid_t clk) HIDDEN;

/* Identity of the caller for owner checks: G id (> 0) or -tid. */
int64_t shim_selfid(void) HIDDEN;

/* ---- signals (signal.c) ----------------------------------------------------- */

/* rt_pthread_create: runtime threads block asynchronous signals. */
int sig_rt_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) HIDDEN;
/* On the real main thread before main's G: it becomes the signal thread. */
void sig_start(void) HIDDEN;
_Noreturn void sig_thread(void) HIDDEN;
void sig_afterfork_child(void) HIDDEN;
/* A thread of the program starts (with mask, its creator's: sig_inherit)
 * or ends as gp; a signal for one G (pthread_kill: 0 or an error number). */
void sig_gstart(struct g *gp, uint64_t mask, bool ismain) HIDDEN;
void sig_gend(struct g *gp) HIDDEN;
uint64_t sig_inherit(void) HIDDEN;
int sig_send_g(struct g *gp, int sig, int code, const union sigval *v) HIDDEN;

/* SIGWEFT to thread tid of this process (a mask change for it, or a kick:
 * sigasync.c); the router looks at its deadlines again. */
void sig_tell(int tid) HIDDEN;
void sig_router_poke(void) HIDDEN;

/* ---- handlers for computing Gs (sigasync.c) --------------------------------- */

#include <ucontext.h>
void async_init(void) HIDDEN;
/* In SIGWEFT's handler on an M: the G it runs takes its signals now. */
void async_check(ucontext_t *uc) HIDDEN;
/* gp has a signal to run and was not parked interruptibly: stop it. */
void async_kick(struct g *gp) HIDDEN;
/* The router: kick again whoever still has one; next time, or -1. */
int64_t async_rescan(void) HIDDEN;
void async_afterfork_child(void) HIDDEN;

/* ---- cancellation (cancel.c) ---------------------------------------------- */

/* pthread_cancel of gp (0); cancel_start wires the cancellation points. */
int cancel_g(struct g *gp) HIDDEN;
void cancel_start(void) HIDDEN;
/* On a G with the signal thread running: around a call whose child or
 * new program must inherit the program's mask (exec, spawn), the M
 * takes that mask for the call. */
bool sig_active(void) HIDDEN;
void sig_use_p(sigset_t *saved) HIDDEN;
void sig_restore(const sigset_t *saved) HIDDEN;
/* Around an exec: the runtime starts no thread (it would race the exec). */
void sig_exec_begin(void) HIDDEN;
void sig_exec_end(void) HIDDEN;

/* ---- futexes (futex.c) ----------------------------------------------------- */

/* syscall(SYS_futex, a..f) of the program (fromshim: of the runtime or
 * jemalloc): a G's private waits park it.  The result or -errno. */
long futex_syscall(bool fromshim, long a, long b, long c, long d, long e, long f) HIDDEN;

/* ---- time ------------------------------------------------------------------ */

#define NS_PER_S 1000000000LL

static inline bool ts_ok(const struct timespec *ts)
{
	return ts && ts->tv_nsec >= 0 && ts->tv_nsec < NS_PER_S;
}

/* Nanoseconds from now until abstime on clock clk (<= 0: passed).  The
 * wall clock is weft's (rt_realtime: CLOCK_REALTIME, moved by the
 * WEFT_DEBUG=clockset test knob). */
static inline int64_t ts_until(clockid_t clk, const struct timespec *abstime)
{
	if (abstime->tv_sec >= INT64_MAX / NS_PER_S - 1)
		return INT64_MAX / 2; /* "never" (the product would overflow) */
	if (clk == CLOCK_REALTIME)
		return (int64_t)abstime->tv_sec * NS_PER_S + abstime->tv_nsec - rt_realtime();
	struct timespec now;
	clock_gettime(clk, &now);
	return (int64_t)(abstime->tv_sec - now.tv_sec) * NS_PER_S + (abstime->tv_nsec - now.tv_nsec);
}

/* A timed wait until abstime on clk is about to begin on this thread:
 * the time left, as ts_until, and on CLOCK_REALTIME the mark that makes
 * the wait follow the wall clock - a clock set re-places its timer, so a
 * jump forward past abstime ends it at once (g_rtdeadline, runtime.h).
 * ts_wait_end() once the wait is over. */
static inline int64_t ts_wait_begin(clockid_t clk, const struct timespec *abstime)
{
	if (clk == CLOCK_REALTIME && abstime->tv_sec > 0)
		g_rtdeadline(abstime->tv_sec >= INT64_MAX / NS_PER_S - 1
				     ? INT64_MAX / 2
				     : (int64_t)abstime->tv_sec * NS_PER_S + abstime->tv_nsec);
	return ts_until(clk, abstime);
}

static inline void ts_wait_end(void)
{
	g_rtdeadline(0);
}

/* ---- a mutex view (mutex.c), for the cond and C11 wrappers --------------- */

/* A weft-managed pthread_mutex_t: its weft_mutex_t, or NULL when the
 * object is glibc's (pshared, robust, priority). */
weft_mutex_t *mx_weft(pthread_mutex_t *m) HIDDEN;
/* Around a condition wait: give up / take back ownership bookkeeping
 * (recursive count, owner).  mx_release: 0 or EPERM (not the owner). */
int mx_release(pthread_mutex_t *m, uint32_t *saved) HIDDEN;
void mx_reacquire(pthread_mutex_t *m, uint32_t saved) HIDDEN;

/* The mutex operations behind the interposed names (error numbers). */
int pmx_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr) HIDDEN;
int pmx_destroy(pthread_mutex_t *m) HIDDEN;
int pmx_lock(pthread_mutex_t *m) HIDDEN;
int pmx_trylock(pthread_mutex_t *m) HIDDEN;
int pmx_unlock(pthread_mutex_t *m) HIDDEN;
int pmx_timedlock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime) HIDDEN;

/* The cond operations (cond.c); clk < 0: the cond's own clock. */
int pcv_init(pthread_cond_t *c, const pthread_condattr_t *attr) HIDDEN;
int pcv_destroy(pthread_cond_t *c) HIDDEN;
int pcv_signal(pthread_cond_t *c) HIDDEN;
int pcv_broadcast(pthread_cond_t *c) HIDDEN;
int pcv_wait(pthread_cond_t *c, pthread_mutex_t *m, int clk, const struct timespec *abstime) HIDDEN;

/* Sleep a little while polling (timed locks): parks on a G. */
void shim_backoff(int64_t *delay, int64_t left) HIDDEN;

/* ---- stdio (stdio.c) ------------------------------------------------------ */

/* popen's FILE f as a cookie FILE over its fd whose reads and writes park
 * a G (f itself if mode is not a plain one or memory ran out). */
FILE *stdio_popen(FILE *f, const char *mode) HIDDEN;
/* A cookie FILE (made by stdio.c's fdopen/popen, or the program's own). */
bool stdio_parks(FILE *f) HIDDEN;
/* At the shim's start: stdin/stdout over a socket, pipe or FIFO become
 * FILEs whose reads and writes park. */
void stdio_std(void) HIDDEN;

#endif
