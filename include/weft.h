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
 * errno set, never a silent wrong result.  Bad input is an error, never a
 * crash: a NULL object is EINVAL everywhere (a void function sets errno
 * and does nothing); docs/api.md, "Bad input", lists every case.
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
	int tls;           /* WEFT_TLS_DEFAULT, _SHARED or _THREAD */
} weft_attr_t;

enum {
	WEFT_TLS_DEFAULT = 0, /* whatever WEFT_TLS selects (shared when linked) */
	WEFT_TLS_SHARED = 1,  /* __thread, errno... are the running OS thread's */
	WEFT_TLS_THREAD = 2,  /* a TLS block and TCB of its own, as a thread has:
	                       * errno, __thread, thread_local follow the G */
};

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

/* Bracket a call that may block the OS thread and that weft does not
 * hook (a raw system call, a blocking library): if it takes longer than
 * 20 us, sysmon hands this G's P to another OS thread so the other Gs
 * keep running (Go's entersyscall/exitsyscall); after a run of such calls
 * that all ended within sysmon's round, it looks less often, so a call
 * that then blocks is handed on up to 10 ms after it began, as in Go.
 * No effect outside a G.
 * errno is preserved by both. */
WEFT_API void weft_blocking_enter(void);
WEFT_API void weft_blocking_exit(void);

/* ---- wait group (Go's sync.WaitGroup) -------------------------------- */

/* Fields are private; declare with WEFT_WG_INIT. */
typedef struct weft_wg {
	int64_t _count;    /* outstanding adds */
	uint32_t _lock;    /* runtime spin lock */
	uint32_t _pad;
	void *_waiters;    /* parked waiters */
} weft_wg_t;
#define WEFT_WG_INIT { 0, 0, 0, NULL }

/* A negative count is a bug: it prints "weft: fatal: negative wait group
 * counter" and aborts, as Go panics. */
WEFT_API void weft_wg_add(weft_wg_t *wg, int64_t delta);
WEFT_API void weft_wg_done(weft_wg_t *wg);
WEFT_API void weft_wg_wait(weft_wg_t *wg);

/* ---- channels (Go's chan) -------------------------------------------- */

/* A typed-by-size FIFO between Gs and/or plain threads.  cap 0 makes an
 * unbuffered channel: a send and a receive meet (rendezvous).  Each
 * element is elem_size bytes, copied in and out; elem_size may be 0
 * (signals only; elem pointers may then be NULL). */
typedef struct weft_chan weft_chan_t;

/* NULL with errno ENOMEM, or EINVAL if elem_size * cap overflows. */
WEFT_API weft_chan_t *weft_chan_make(size_t elem_size, size_t cap);
/* Block until the element is taken by a receiver or buffered.
 * 0; -1 with EPIPE if the channel is closed (before or while blocked),
 * EINVAL if c is NULL or freed, or elem is NULL with elem_size > 0. */
WEFT_API int weft_chan_send(weft_chan_t *c, const void *elem);
/* Block until an element arrives: 1 with *elem set; 0 once the channel
 * is closed and drained (*elem zeroed).  elem may be NULL to drop the
 * value.  -1 with EINVAL if c is NULL. */
WEFT_API int weft_chan_recv(weft_chan_t *c, void *elem);
/* Non-blocking forms: as above, or -1 with EAGAIN when they would block. */
WEFT_API int weft_chan_trysend(weft_chan_t *c, const void *elem);
WEFT_API int weft_chan_tryrecv(weft_chan_t *c, void *elem);
/* Wake every blocked receiver (they return 0 once the buffer is
 * drained) and every blocked sender (-1 EPIPE).  0; -1 with EPIPE if
 * already closed, EINVAL if c is NULL. */
WEFT_API int weft_chan_close(weft_chan_t *c);
/* Free a channel nobody uses any more (NULL is a no-op).  Freeing a
 * channel that a G or thread is blocked on is a fatal error. */
WEFT_API void weft_chan_free(weft_chan_t *c);
/* Elements buffered now, and the capacity (0 for NULL, as Go's nil). */
WEFT_API size_t weft_chan_len(weft_chan_t *c);
WEFT_API size_t weft_chan_cap(weft_chan_t *c);

enum { WEFT_SEND = 1, WEFT_RECV = 2 };

/* One arm of weft_select.  chan NULL: the case never fires (a nil
 * channel).  ok (out): for RECV, 1 value / 0 closed; for SEND, 1 sent /
 * -1 the channel is closed. */
typedef struct {
	weft_chan_t *chan;
	int op;     /* WEFT_SEND or WEFT_RECV */
	void *elem; /* SEND: the value to send; RECV: where to store (may be NULL) */
	int ok;
} weft_case_t;

/* Go's select.  Returns the index of the case that fired, chosen
 * uniformly among those ready.  timeout_ns 0 polls (Go's default:),
 * -1 waits forever (n == 0 with -1 parks for good: Go's select {}).
 * -1 with ETIMEDOUT when the timeout passes with no case ready, EINVAL
 * for a bad op, n > 65536 or cases NULL with n > 0. */
WEFT_API int weft_select(weft_case_t *cases, size_t n, int64_t timeout_ns);

/* ---- sync (Go's sync package) ------------------------------------------
 * Every type is complete and statically initialisable; the fields are
 * private.  They work from Gs, from plain threads, and between the two.
 * None may be copied once in use. */

/* A count and a queue of waiters; the building block of what follows. */
typedef struct weft_sem {
	uint32_t _lock;   /* runtime spin lock */
	uint32_t _count;  /* units available */
	void *_head;      /* FIFO of waiters */
	void *_tail;
} weft_sem_t;
#define WEFT_SEM_INIT(n) { 0, (n), NULL, NULL }

/* Go's sync.Mutex: fair, switching to hand-off to the oldest waiter
 * once a waiter has waited 1 ms.  Not recursive; any G or thread may
 * unlock it. */
typedef struct weft_mutex {
	int32_t _state;   /* locked | woken | starving | waiters << 3 */
	uint32_t _pad;
	weft_sem_t _sema; /* where waiters sleep */
} weft_mutex_t;
#define WEFT_MUTEX_INIT { 0, 0, WEFT_SEM_INIT(0) }

/* 0.  trylock: 0, or -1 with EBUSY.  unlock: -1 with EPERM if the mutex
 * is not locked (Go: fatal error). */
WEFT_API int weft_mutex_lock(weft_mutex_t *m);
WEFT_API int weft_mutex_trylock(weft_mutex_t *m);
WEFT_API int weft_mutex_unlock(weft_mutex_t *m);

/* Go's sync.RWMutex: many readers or one writer; a waiting writer
 * keeps new readers out (no writer starvation). */
typedef struct weft_rwlock {
	weft_mutex_t _w;       /* held by the writer, or a writer about to be */
	int32_t _readers;      /* readers in or waiting; minus RWMAX while a writer is pending */
	int32_t _departing;    /* readers the pending writer still waits for */
	weft_sem_t _wsem;      /* the writer waits here for readers to leave */
	weft_sem_t _rsem;      /* readers wait here for the writer to leave */
} weft_rwlock_t;
#define WEFT_RWLOCK_INIT { WEFT_MUTEX_INIT, 0, 0, WEFT_SEM_INIT(0), WEFT_SEM_INIT(0) }

/* 0.  try*: 0 or -1 with EBUSY.  unlock: -1 with EPERM when not held
 * that way. */
WEFT_API int weft_rwlock_rdlock(weft_rwlock_t *l);
WEFT_API int weft_rwlock_tryrdlock(weft_rwlock_t *l);
WEFT_API int weft_rwlock_rdunlock(weft_rwlock_t *l);
WEFT_API int weft_rwlock_wrlock(weft_rwlock_t *l);
WEFT_API int weft_rwlock_trywrlock(weft_rwlock_t *l);
WEFT_API int weft_rwlock_wrunlock(weft_rwlock_t *l);

/* Go's sync.Cond on a weft_mutex_t. */
typedef struct weft_cond {
	uint32_t _lock;
	uint32_t _nwait;  /* queued waiters, readable without the lock */
	void *_head;      /* FIFO of waiters */
	void *_tail;
} weft_cond_t;
#define WEFT_COND_INIT { 0, 0, NULL, NULL }

/* Atomically unlock m and wait for a signal; m is locked again on
 * return.  0.  timedwait waits at most ns nanoseconds (relative): -1
 * with ETIMEDOUT when they pass, EINVAL for ns < 0.  As with every
 * condition variable, re-check the predicate in a loop. */
WEFT_API int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m);
WEFT_API int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, int64_t ns);
/* Wake the longest waiter / every waiter.  0. */
WEFT_API int weft_cond_signal(weft_cond_t *c);
WEFT_API int weft_cond_broadcast(weft_cond_t *c);

/* Counting semaphore.  wait: 0.  trywait: 0 or -1 EAGAIN.  timedwait
 * (relative ns): 0, -1 ETIMEDOUT or EINVAL (ns < 0).  post: 0, -1
 * EOVERFLOW past UINT32_MAX.  Waiters are served first come first served. */
WEFT_API int weft_sem_wait(weft_sem_t *s);
WEFT_API int weft_sem_trywait(weft_sem_t *s);
WEFT_API int weft_sem_timedwait(weft_sem_t *s, int64_t ns);
WEFT_API int weft_sem_post(weft_sem_t *s);
WEFT_API unsigned weft_sem_value(weft_sem_t *s);

/* Go's sync.Once: fn runs exactly once; every caller returns after it
 * has finished (the others park meanwhile). */
typedef struct weft_once {
	uint32_t _state;  /* 0 not run, 1 running, 2 done */
	uint32_t _lock;
	void *_waiters;
} weft_once_t;
#define WEFT_ONCE_INIT { 0, 0, NULL }

WEFT_API void weft_once(weft_once_t *o, void (*fn)(void));

/* ---- diagnostics ----------------------------------------------------- */

/* A snapshot of the scheduler (as WEFT_DEBUG=schedtrace prints it). */
typedef struct weft_stats {
	int procs;                 /* Ps (WEFT_MAXPROCS) */
	int idle_procs;            /* Ps with nothing to run */
	int threads;               /* OS threads of the runtime now (Ms + sysmon) */
	int idle_threads;          /* Ms parked with no P */
	int spinning_threads;      /* Ms looking for work */
	int global_runq;           /* Gs on the global run queue */
	int64_t gs;                /* live Gs */
	int64_t syscall_handoffs;  /* Ps taken from an M blocked in a call */
	int64_t hog_handoffs;      /* Ps taken from a G running > 10 ms */
	int64_t preempts;          /* Gs asked to yield after 10 ms in the runtime */
	int64_t timers_rescued;    /* timers fired for a P whose M fell behind */
	int64_t kernel_waits;      /* poll/select/epoll_wait, or a read or accept
	                            * that found nothing, made in the kernel on
	                            * the G's own M (its P had nothing else) */
	int64_t netpolls;          /* epoll waits of the runtime's netpoller */
	int64_t sysmon_wakeups;    /* rounds of the system monitor (each a sleep) */
	int64_t thread_state_reads; /* the monitor's reads of a thread's state in /proc */
	int64_t chan_fast_handoffs; /* unbuffered channel hand-offs made without the
	                            * channel's lock (one party waiting alone) */
	int64_t threads_made;      /* OS threads started for Ms since the runtime began */
	int64_t threads_retired;   /* of them, ended after a second idle (docs/design.md) */
} weft_stats_t;

/* Fill *st.  0, or -1 with EINVAL for NULL.
 *
 * weft_stats(st) is a macro: it passes the size of the weft_stats_t the
 * program was compiled with, so the library writes only what the
 * program's struct holds and a program keeps working with a later
 * library whose struct has grown (fields are only ever added at the
 * end).  weft_stats_sized: size below the first version's (the fields
 * up to timers_rescued, 64 bytes) is EINVAL; fields a size names that
 * this library does not know are zeroed.  The function weft_stats
 * itself (what binaries built before the macro call, and &weft_stats)
 * writes the first version's fields only (docs/api.md). */
WEFT_API int weft_stats_sized(weft_stats_t *st, size_t size);
WEFT_API int weft_stats(weft_stats_t *st);
#define weft_stats(st) weft_stats_sized((st), sizeof(weft_stats_t))

/* Print every G with its state, wait reason and backtrace (function,
 * file:line where debug info exists) to out (NULL: stderr), as Go's
 * goroutine dump.  SIGQUIT prints the same to stderr and exits with
 * status 2, unless WEFT_DEBUG=sigquit=continue.  When every G is asleep
 * for good, weft prints "weft: fatal: all green threads are asleep -
 * deadlock!" with this dump and exits with status 2.  docs/api.md. */
WEFT_API void weft_dump(FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_H */
