/*
 * runtime.h - weft's internal model: G (green thread), M (OS thread),
 * P (processor: the right to run Gs), and the scheduler that binds them.
 *
 * Names follow Go's runtime (proc.go, runtime2.go): runq, runnext,
 * gopark/goready, entersyscall/exitsyscall, handoffp, sysmon.  Read
 * docs/design.md first; this header states the invariants.
 */
#ifndef WEFT_RUNTIME_H
#define WEFT_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <time.h>

#include "weft.h"
#include "../arch/ctx.h"

#define MAXPROCS 1024
/* Ps in all: gomaxprocs plus spares lent around blocked Ms (one per OS
 * thread blocked in the kernel, up to WEFT_MAXTHREADS) */
#define MAXTHREADS_MAX 16384
#define MAXALLP (MAXPROCS + MAXTHREADS_MAX)
#define RUNQ_SIZE 256 /* local run queue ring; power of two */

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
/* A function left out of -fstack-protector-strong (one whose frame holds
 * no array: see its comment). */
#if __has_attribute(no_stack_protector)
#define NO_STACK_PROTECTOR __attribute__((no_stack_protector))
#else
#define NO_STACK_PROTECTOR
#endif
/* Every runtime symbol is hidden (-fvisibility=hidden), but a plain
 * extern declaration does not say so where it is used: the compiler goes
 * through the GOT (a lea once the linker relaxes it, then the load).
 * HIDDEN on the declaration of a global the switch and hand-off paths
 * read makes each read one RIP-relative load. */
#define HIDDEN __attribute__((visibility("hidden")))
/* Code every process under the shim runs as it starts (reading WEFT_*,
 * the shim's __libc_start_main): kept in .text.startup, beside the
 * constructors, so that its text is faulted in at once (the kernel maps
 * up to 16 pages around a fault) rather than one fault per function
 * spread over 800 KiB of text (docs/preload.md, Start-up). */
#define STARTUP_TEXT __attribute__((section(".text.startup")))
/* A variable every process under the shim reads or writes as it starts
 * (whether the runtime is up, the shim's mode, the real
 * __libc_start_main): kept in .data, whose pages the library's load
 * writes anyway (relocations, the zeroed tail before .bss), not in .bss,
 * where its first read maps the zero page and its first write copies
 * it: a fault each, a page at a time (docs/preload.md, Start-up). */
#define STARTUP_DATA __attribute__((section(".data.startup")))

struct g;
struct m;
struct p;

/* ---- locks and notes (lock.c) ---------------------------------------- */

/* A short-term mutex for runtime data: spins briefly, then futex-waits.
 * Held only for a few instructions; never across a park. */
struct lock {
	_Atomic uint32_t key; /* 0 free, 1 held, 2 held with sleepers */
};
void lock(struct lock *l);
void unlock(struct lock *l);

/* A one-shot wakeup for an OS thread: notesleep blocks until
 * notewakeup; noteclear re-arms.  One sleeper, one waker. */
struct note {
	_Atomic uint32_t key; /* 0 armed, 1 woken */
};
void noteclear(struct note *n);
void notewakeup(struct note *n);
/* A plain thread's wait that a signal handler interrupts (the shim's
 * sem_wait, EINTR as glibc's): with note_introk set, notetsleep returns
 * false when its futex wait is interrupted and sets note_intr. */
extern __thread bool note_introk __attribute__((tls_model("initial-exec")));
extern __thread bool note_intr __attribute__((tls_model("initial-exec")));
void notesleep(struct note *n);
bool notetsleep(struct note *n, int64_t ns); /* false on timeout */

int64_t nanotime(void); /* CLOCK_MONOTONIC, ns */
/* the kernel's sched_yield: the shim interposes the C library's (lock.c) */
void osyield(void);
int ncpu(void); /* CPUs the process may run on (sync.c) */
/* clock_gettime through the vDSO (vdso.c): 0 or -errno, errno untouched */
int rt_clock_gettime(clockid_t c, struct timespec *ts);
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
long rawsyscall6(long n, long a, long b, long c, long d, long e, long f);
void rt_thread_refused(int e); /* warn once: no more OS threads (proc.c) */

/* ---- stacks (stack.c) ------------------------------------------------ */

enum stackkind {
	STACK_GUARD,     /* PROT_NONE page below lo */
	STACK_CANARY,    /* canary words below lo, checked at every switch */
	STACK_SEGMENTED, /* gcc split-stack segments (splitstack.c) */
	STACK_THREAD,    /* an OS thread's own stack (g0) */
};

struct stackchunk;
struct stack {
	char *lo;                 /* lowest usable byte */
	char *hi;                 /* one past the highest usable byte (16-aligned) */
	struct stackchunk *chunk; /* mapping it was carved from */
	uint32_t slot;            /* index in the chunk */
	uint8_t kind;             /* enum stackkind */
	char *low;                /* lowest frame seen at a switch (pages below
	                           * it were probably never touched) */
};

int stackalloc(struct p *pp, struct stack *s, size_t size);
/* How far below its top (or its TLS block) a G's first frame starts on
 * s: the slots of a chunk are a multiple of 4 KiB apart, so two Gs'
 * frames at the same depth - two Gs yielding to each other, a channel's
 * two ends - would lie at the same address modulo 4096, in the same L1
 * set, where the loads of one G's switch wait on the other's stores to
 * an address that matches in its low 12 bits (4K aliasing).  A slot's
 * colour, (slot mod 8) cache lines, puts neighbours' frames apart. */
static inline size_t stackcolour(const struct stack *s)
{
	return (s->kind == STACK_GUARD || s->kind == STACK_CANARY) && s->chunk
		       ? (size_t)(s->slot & 7) * 64
		       : 0;
}
void stackfree(struct p *pp, struct stack *s);
void stackcache_flush(struct p *pp);               /* an idle or retiring P's cache to the pool */
bool stacks_reclaim(void);                         /* no memory: idle Ps' caches to the pool */
int stack_ready(struct p *pp, size_t size); /* weft_go: 0 or -1/ENOMEM */
/* a stack was freed, into pp's cache (pp ours) or not (NULL): Gs waiting
 * for one may start (proc.c) */
void stackwait_wake(struct p *pp);
bool stackcanary_ok(const struct stack *s);
void stackinit(void);
void stack_overflow(struct g *gp);                /* fatal report */
void stack_sigaltstack(struct m *m);              /* per-M signal stack */
void stack_sigaltstack_free(struct m *m);         /* a retiring M's (proc.c mexit) */
bool stack_scavenge(void);                        /* sysmon: unmap free chunks */
size_t stacksize(const struct stack *s);

/* ---- G ---------------------------------------------------------------- */

enum gstatus {
	G_IDLE,     /* just allocated, not yet initialised */
	G_RUNNABLE, /* on a run queue, not running */
	G_RUNNING,  /* running on an M (user code or runtime) */
	G_WAITING,  /* parked; some other party will goready it */
	G_SYSCALL,  /* in a blocking call between entersyscall/exitsyscall */
	G_DEAD,     /* exited; on a free list */
};

/* Why a G is parked (for dumps); keep waitreasons[] in proc.c in step. */
enum waitreason {
	W_NONE,
	W_SLEEP,
	W_WAITGROUP,
	W_CHAN_SEND,
	W_CHAN_RECV,
	W_SELECT,
	W_SELECT_NOCASES,
	W_MUTEX,
	W_RWLOCK_R,
	W_RWLOCK_W,
	W_COND,
	W_SEMA,
	W_ONCE,
	W_IO_READ,
	W_IO_WRITE,
	W_POLL,
	W_JOIN,
	W_FUTEX, /* a program's own futex wait (the shim's futex.c) */
	W_LOCKED_THREAD,
	W_NREASONS
};
extern const char *const waitreasons[W_NREASONS];

struct g {
	void *sp;                 /* saved stack pointer while switched out */
	struct stack stack;       /* this G's stack; none (lo NULL) until it
	                           * first runs, except a segmented one */
	size_t stackwant;         /* usable bytes gstart allocates (0: default) */
	_Atomic uint32_t status;  /* enum gstatus; written by the owner M */
	/* waitreason and blocking: written by whoever parks or readies the G
	 * (on any thread), read by dumps and the deadlock check: relaxed */
	_Atomic uint8_t waitreason; /* enum waitreason while G_WAITING */
	_Atomic uint8_t blocking; /* parked on something outside the runtime (netpoll, plain thread) */
	uint16_t lockcount;       /* weft_lock_thread nesting */
	int errno_save;           /* errno while switched out */
	int32_t rtdepth;          /* > 0 while inside the runtime; written by the
	                           * G's own M with rtdepth_set (relaxed atomic
	                           * stores: sysmon reads it, sysmon.c) */
	_Atomic uint64_t waitstate; /* (park seq << 2) | 0 waiting, 1 woken, 2 timed out,
	                             * 3 interrupted (g_interrupt) */
	int64_t id;               /* > 0, unique for the process lifetime */
	void (*fn)(void *);       /* entry function */
	void *arg;                /* its argument */
	struct g *schedlink;      /* next in the global run queue or a free list */
	/* Dead, heading a batch of dead Gs (linked by schedlink) on
	 * sched.gfree: the next batch, and this one's length (sched.lock) */
	struct g *gfbatch;
	int32_t gfbatchn;
	struct g *alllink;        /* next in allgs, in order made (allglock; proc.c) */
	struct m *lockedm;        /* M this G is locked to, or NULL */
	uintptr_t param;          /* value passed by the waker to the parked G */
	/* nanotime() when parked, for dumps; relaxed: a dump may read it
	 * while an M that did not stop for it parks the G (a stale value
	 * only misprints the minutes) */
	_Atomic int64_t waitsince;
	struct timer *timer;      /* reusable sleep timer, allocated on first use */
	void *waiting;            /* the waiter record this G is parked on */
	char *name;               /* from weft_attr_t, or NULL */
	void *tls;                /* per-G keys (preload shim) */
	/* Interruption (sema.c; signals in the shim).  introk is the G's
	 * own; intrseq and intrreq pair as a Dekker: g_interrupt stores
	 * intrreq then loads intrseq, the parking G stores intrseq then
	 * loads intrreq (all seq_cst), so one of them sees the other. */
	bool introk;              /* the waits this G starts now may be interrupted */
	int64_t rtdeadline;       /* its next timed wait's deadline on CLOCK_REALTIME, 0 none
	                           * (g_rtdeadline); the G's own */
	uint64_t rtgen;           /* clockgen when rtdeadline was set */
	_Atomic uint64_t intrseq; /* seq of the interruptible wait it is parked in, 0 none */
	_Atomic uint32_t intrreq; /* INTR_*: an interruption asked for, not yet taken
	                           * (g_intr_take) */
	/* Signals of a G (the preload shim's; bits are signals 1..64) */
	bool sigon;               /* a thread of the program: may be sent signals */
	_Atomic uint64_t sigmask; /* blocked (pthread_sigmask); written by the G only */
	_Atomic uint64_t sighold; /* also blocked while its handlers run (the G only) */
	_Atomic uint64_t sigpend; /* sent to it, not yet handled (any thread sets) */
	_Atomic uint64_t sigthr;  /* of sigpend, those sent to this G itself (pthread_kill,
	                           * tgkill ...), not routed to it for the process */
	_Atomic uint32_t cancel;  /* the shim's pthread_cancel state (cancel.c) */
	uintptr_t sigrip;         /* the shim's: where a G stopped in user code to run
	                           * a signal handler goes on (signal.c, async_run);
	                           * written by the SIGWEFT handler on its M, read by
	                           * the G on the same M just after */
	void *splitctx;           /* split-stack context (splitstack.c) */
	void *asan_fake;          /* ASan fake stack while switched out */
	void *tsan_fiber;         /* TSan fiber */
	unsigned valgrind_id;     /* valgrind stack id */
	bool owntls;              /* gets a TLS block of its own when it starts
	                           * (tls.c); gstart keeps the stack top free */
	void *tcb;                /* its own TCB (the FS base it runs on), or
	                           * NULL: it runs on its M's TLS */
	void *tcbfork;            /* its TCB while it forks on its M's (tls.c) */
	/* Its CPU-time clock (cpuclock.c), kept once someone asked for it
	 * (cputrack).  cpuns, cpuon and cputid are written only by the M
	 * that switches the G on or off (or the G itself, running), inside
	 * an odd cpuseq; readers on any thread retry until they see one
	 * even cpuseq around their reads (a seqlock). */
	_Atomic bool cputrack;    /* counted from now on (set once, by any thread) */
	_Atomic uint32_t cpuseq;  /* odd while the three below are written */
	_Atomic int64_t cpuns;    /* CPU ns of its runs on Ms that are over */
	_Atomic int64_t cpuon;    /* its M's thread CPU clock when it went on (cputid != 0) */
	_Atomic int32_t cputid;   /* tid of the M it runs on, counted; 0 none */
	void *tlsmem;             /* its block's own allocation when not at its
	                           * stack top (tls.c, after a dlopen took static
	                           * TLS), or NULL */
	bool tlsslot;             /* its block is in an interleaved slot (tls.c) */
	void *tlsprep;            /* a scratch block glibc filled for it on its
	                           * maker, which held the loader's TLS lock
	                           * (tls_gprep), taken by tls_gbegin; or NULL */
	int blkerrno;             /* errno before its blocking call, blk_enter to
	                           * blk_exit (hook.c; a signal handler that parks
	                           * in the call may move it to another M) */
	/* Its turn at request boundaries (proc.c rt_turn); the G's own:
	 * turnsent, it sent since its last receive (hooks); turnp and
	 * turntick, the P and its schedtick of the run turnstart (nanotime)
	 * was taken in, at the run's first request boundary */
	bool turnsent;
	uint32_t turntick;
	struct p *turnp;
	int64_t turnstart;
};

/* ---- signals blocked per G in the kernel (the preload shim's) ------------ */

/* Signals the kernel sends to the thread that made a call (SIGPIPE,
 * SIGXFSZ) and acts on there: a G that blocks one must have it blocked
 * in its OS thread's kernel mask while it runs, one that does not must
 * not.  The shim sets the bits (0 linked: nothing is done); a switch to
 * a program G whose (sigmask | sighold) differs there from m->sigk calls
 * rt_sigkswitch(m, want), which makes the kernel mask and m->sigk want.
 * A switch to the scheduler (or to a G of the shim's) blocks, besides what
 * m->sigk has, rt_sigkidle: those every program G blocks (set by the
 * shim), so no OS thread lets through a signal that every thread of the
 * program blocks. */
extern HIDDEN _Atomic uint64_t rt_sigkbits;
extern _Atomic uint64_t rt_sigkidle;
extern void (*rt_sigkswitch)(struct m *m, uint64_t want);
/* Called first by every new M on its own thread (the shim: its mask for
 * sigk 0, not its creator's).  NULL: nothing. */
extern void (*rt_mstarted)(void);

/* ---- a G's CPU-time clock (cpuclock.c) ---------------------------------- */

/* Set once any G's clock is kept: the switch looks at the Gs only then. */
extern HIDDEN _Atomic bool gcpu_any;

/* What the switch does beyond the common case, one bit a feature, set
 * (never cleared) before the first switch that needs it: the switch
 * loads this one word instead of a flag each (a relaxed load: whoever
 * sets a bit does so before it makes runnable the G whose switch needs
 * it, and the run queue orders the two). */
enum {
	SW_GCPU = 1, /* gcpu_any: a G's CPU clock is kept (cpuclock.c) */
	SW_SIGK = 2, /* rt_sigkbits not 0: per-G signals in the kernel mask */
	SW_TLS = 4,  /* Gs may run on TLS blocks of their own, or the scheduler
	              * keep one (tls.c): tls_loadfs may have work to do */
};
extern HIDDEN _Atomic uint32_t rt_swslow;
static inline void rt_swslow_set(uint32_t bit)
{
	if (!(atomic_load_explicit(&rt_swslow, memory_order_relaxed) & bit))
		atomic_fetch_or(&rt_swslow, bit);
}
/* The switch from from to to on m (either NULL: g0), gcpu_any set. */
void gcpu_switch(struct m *m, struct g *from, struct g *to);
/* Start keeping gp's clock (any thread; gp itself when running: from
 * now, else from its next switch on), then read it: ns, or -1 if the
 * clock of the M it runs on cannot be read. */
int64_t gcpu_read(struct g *gp);
/* A G made (or reused): its clock at 0, not kept. */
void gcpu_reset(struct g *gp);
/* rt_adopt: the adopted thread's CPU time so far is the G's start. */
void gcpu_adopt(struct g *gp);
/* Child of fork: the forking G goes on on a thread whose clock starts
 * again from 0, as a forked thread's does natively. */
void gcpu_afterfork(struct g *gp);

/* ---- M ---------------------------------------------------------------- */

struct pd; /* runtime/netpoll.h */
struct m {
	void *g0sp;               /* saved sp of this M's scheduler context */
	/* curg, p, lockedg and tid are written only by this M's thread and
	 * read by others for diagnostics (deadlock.c, dump.c, the fault
	 * handler): _Atomic, so those reads are not data races.  The M's
	 * stores are relaxed (no fence, a plain mov on x86-64; curg's is a
	 * release, as plain, for sysmon, which reads the G through it with
	 * acquire); readers on other threads tolerate a stale value (see
	 * there); the M's own reads need no ordering. */
	struct g *_Atomic curg;   /* G running on this M, or NULL on g0 */
	struct p *_Atomic p;      /* attached P, or NULL (see p->state) */
	struct p *nextp;          /* P handed over by the M that woke us */
	struct g *nextg;          /* locked G handed over with nextp (startlockedm) */
	int64_t id;               /* > 0 */
	struct note park;         /* sleeps here when idle (stopm) */
	bool spinning;            /* looking for work, counted in sched.nmspinning */
	struct m *schedlink;      /* next on the idle M list */
	struct m *alllink;        /* next on allm */
	struct g *_Atomic lockedg; /* G locked to this M (weft_lock_thread), or NULL */
	/* After a switch, the new context runs afterfn(aftergp, afterarg)
	 * on behalf of the G it switched away from (gopark's unlock). */
	bool (*afterfn)(struct g *gp, void *arg);
	struct g *aftergp;        /* G switched away from */
	void *afterarg;
	void *g0lo, *g0hi;        /* the OS thread's own stack (for sanitizers, dumps) */
	void *g0asan_fake;        /* ASan fake stack of g0 */
	void *g0tsan;             /* TSan fiber of g0 */
	uint32_t fastrand;        /* xorshift state */
	_Atomic int tid;          /* kernel thread id, 0 until the thread runs */
	pthread_t thread;         /* the OS thread */
	int64_t syscallwhen;      /* nanotime at entersyscall, for dumps */
	void *altstack;           /* signal stack for overflow reports */
	int *errnop;              /* this OS thread's errno (gswitch saves and
	                           * restores it per G without a call) */
	uintptr_t fsbase;         /* the OS thread's own thread pointer (g0 and
	                           * shared-TLS Gs run on it) */
	uintptr_t fscur;          /* the FS base loaded now (this M only) */
	char *tlsscratch;         /* a whole static TLS block glibc fills for each new
	                           * G's block, then copied (tls.c scratch_alloc; this M) */
	struct m *gsself;         /* this M: the GS base points here (getm) */
	/* The G block this M runs on, or its scheduler context keeps
	 * loaded (g0keep), or 0; not changed by a short stay on the M's own
	 * TLS (alloc.c je_enter, fork).  Stored seq_cst after the FS load,
	 * read by other Ms (tls_gfree): a dead G's block is not freed while
	 * an M has it here (tls.c, the limbo). */
	_Atomic uintptr_t fsblock;
	/* counts for schedtrace (written by this M only, load+store; read
	 * relaxed by sysmon: a stale value is fine) */
	_Atomic uint64_t nfsload;  /* FS base loads (arch_prctl or wrfsbase) */
	_Atomic uint64_t nswgg;    /* switches G -> G */
	_Atomic uint64_t nswg0;    /* switches G -> scheduler context */
	_Atomic uint64_t nsw0g;    /* switches scheduler context -> G */
	_Atomic int32_t lockwait; /* asleep on a runtime lock (lock.c): sysmon
	                           * does not take that for a blocked call */
	/* enum kwstate: this M's G waits for fds in the kernel holding its
	 * P (entersyscallwait), or has been asked to stop (kwait.c: the
	 * M's own signal handler and the askers write it; seq_cst) */
	_Atomic int32_t kwait;
	/* The file its G reads or accepts on in the kernel now (hook.c
	 * io_kcall), NULL none: a close of that file asks the wait to end
	 * (pollfd.c pd_closing).  Written by this M, read by closers */
	struct pd *_Atomic kwpd;
	/* Of rt_sigkbits, those this thread's kernel mask blocks now: the
	 * switch makes them the running G's (sigk_switch).  This M only,
	 * its signal handlers too (the shim's SIGWEFT handler sets the mask
	 * it returns to from it): relaxed. */
	_Atomic uint64_t sigk;
	/* The tid its thread had when the M retired (mretire), while that
	 * thread may still be on its way out; 0 once the descriptor is
	 * reused (mnew).  The deadlock check does not count it among the
	 * plain threads (deadlock.c).  Relaxed: a stale 0 only delays a
	 * deadlock report to the next check. */
	_Atomic int exittid;
};

/* m->kwait.  Invariant: a kick's signal is sent only while the word
 * is KW_KICK, by the one asker that moved it there, and the waiter does
 * not leave its wait (kwait_leave) while it is KW_KICK, nor, after
 * KW_SENT, before the signal was delivered: so no kick outlives the
 * wait it was for (kwait.c). */
enum kwstate {
	KW_NONE, /* not in a kernel wait */
	KW_WAIT, /* in one (from before its last look at the run queues) */
	KW_STOP, /* asked to end it, no kick signal of ours on its way (a
	          * signal handled on the M, or an asker that sent none) */
	KW_KICK, /* asked to end it: the asker is sending its signal now */
	KW_SENT, /* asked to end it: the kick signal was sent (it is queued
	          * on the thread or was delivered) */
};

/* ---- P ---------------------------------------------------------------- */

enum pstatus {
	P_IDLE,    /* on the idle or spare list, or being handed over; no owner */
	P_RUNNING, /* owned by an M (p->m), which alone touches its local state */
};

/* p->state packs the owner M's id with the status (for stats and dumps). */
#define PSTATE(mid, st) (((uint64_t)(mid) << 8) | (uint64_t)(st))
#define PSTATUS(s) ((uint32_t)((s) & 0xff))

/* p->flags, set by sysmon, read by the owner with relaxed loads. */
enum {
	PF_LENT = 1,    /* sysmon started a spare P for this P's waiting Gs */
	PF_PREEMPT = 2, /* the running G has had 10 ms: yield at the next runtime call */
	PF_LENT_HOG = 4, /* PF_LENT for a G running code (counted in sched.nhogspares) */
};

struct timer;

struct p {
	_Atomic uint64_t state;   /* PSTATE(owner m id, enum pstatus) */
	int32_t id;               /* index in allp */
	/* incremented at every G switch-in by the owner (a relaxed load and
	 * store, no RMW: only the owner writes it); sysmon reads it relaxed
	 * to spot a G that does not switch, where a stale value only delays
	 * the verdict by one round */
	_Atomic uint32_t schedtick;
	_Atomic uint32_t syscalltick; /* incremented at every exitsyscall */
	struct m *m;              /* owner M (valid while state is not P_IDLE);
	                           * stored and read by sysmon with relaxed atomics */
	struct p *link;           /* next on the idle P list */

	/* Local run queue: the owner pushes at tail and pops at head;
	 * stealers pop at head with CAS.  Lock-free ring as in Go. */
	_Atomic uint32_t runqhead;
	_Atomic uint32_t runqtail;
	struct g *_Atomic runq[RUNQ_SIZE];
	/* A G readied by the running G runs next, inheriting the time
	 * slice.  Owner writes; stealers take it only as a last resort. */
	struct g *_Atomic runnext;
	/* The owner takes runnext with plain stores (proc.c runnext_take):
	 * rntaking is 1 while it does (owner only), rnsteal counts stealers
	 * about to CAS it, who first make every thread pass a full barrier
	 * (membarrier), then wait for rntaking to be 0. */
	_Atomic uint32_t rntaking;
	_Atomic uint32_t rnsteal;
	/* runnext taken so, for schedtrace (owner: load+store; relaxed) */
	_Atomic uint64_t nrnplain;
	/* Owner only (proc.c runqput_timer): the G a timer of this P last
	 * put in runnext, and the ring's tail just after the last G a
	 * timer queued there; a G readied by a later timer goes to runnext
	 * only once both have left (deadline order among sleepers). */
	struct g *tmrnext;
	uint32_t tmrmark;
	/* unbuffered channel hand-offs through the rendezvous word, no lock
	 * (chan.c; weft_stats: owner load+store, relaxed) */
	_Atomic uint64_t nchanfast;

	struct g *gfree;          /* dead Gs with their stacks, for reuse */
	int32_t gfreecnt;
	int32_t gfcold;           /* of the next gfree pops, how many are of a batch
	                           * from the global list (freed on other Ps) */
	struct stack stackcache[32]; /* default-size stacks without a G */
	int32_t nstackcache;
	/* stacks freed into stackcache so far: only the owner writes (load
	 * and store, no RMW); summed by a G that found no stack (proc.c
	 * stackwait_wake) */
	_Atomic uint64_t nstackfreed;

	int64_t goidcache, goidcacheend; /* G ids reserved for this P */
	unsigned tcache;          /* jemalloc thread cache of this P */

	/* Timers: 4-ary min-heap ordered by when.  The owner and idle Ms
	 * running this P's timers take timerslock. */
	struct lock timerslock;
	struct timer **timers;
	int32_t ntimers, captimers;
	_Atomic int64_t timer0when; /* earliest when, 0 if none (for lock-free peeks) */

	/* beyond gomaxprocs after weft_maxprocs shrank: written under
	 * sched.lock, read without it by the owner and by stealers (relaxed:
	 * a stale value only delays retiring or draining by one round) */
	_Atomic bool retired;
	bool spare;               /* lent capacity (see lendp), not one of gomaxprocs */
	_Atomic uint32_t flags;   /* PF_* */
	_Atomic uint32_t insyscall; /* owner M is in a blocking call (entersyscall) */
	_Atomic int64_t ngs;      /* Gs made here minus Gs ended here; only the
	                           * owner writes (load + store, no RMW: one
	                           * shared counter bounced between cores on
	                           * every spawn and exit); see gcount */
	/* sysmon's view, touched only by sysmon */
	uint32_t sm_schedtick, sm_syscalltick;
	int64_t sm_when;
	int64_t sm_preempt;       /* when sysmon set PF_PREEMPT for this G run (0: not asked) */
	int64_t sm_preemptcpu;    /* its M's thread CPU time then (-1: unknown) */
	int64_t sm_cpu;           /* the owner M's thread CPU time at sm_cpuwhen */
	int64_t sm_cpuwhen;       /* when sm_cpu was read, 0: not yet for this G run */
	int64_t sm_lent;          /* when sysmon last lent a spare for this P */
	int64_t sm_kick;          /* when sysmon saw this P's kernel wait asked to end (0: not) */
	bool sm_rekick;           /* sysmon sent that wait its kick again (kwait_rekick) */
	bool sm_watched;          /* a blocking call with Gs behind it, seen last round */
	int64_t sm_statnext;      /* no /proc read of the owner's thread state before this */
	int64_t sm_statgap;       /* the back-off after a read that did not say S (0: none) */
	int64_t sm_statlast;      /* when a read last did not say S (0: never) */
	int64_t sm_cpusbusy;      /* when an unseen call here was first not lent a spare
	                           * because the CPUs were busy (cpusbusy; 0: not) */
	/* spares lent for this P beyond the first (PF_LENT): a blocked M's
	 * Gs whose first spare blocked too; givebackp retires them all */
	_Atomic int32_t nlent;
};

/* ---- scheduler globals ------------------------------------------------- */

struct sched {
	struct lock lock;             /* protects idle lists, global runq, gfree */
	struct m *midle;              /* idle Ms */
	int32_t nmidle;
	_Atomic int32_t mcount;       /* Ms whose threads run (made, not retired) */
	struct m *mfree;              /* retired Ms' descriptors, for the next
	                               * (proc.c mnew), linked by schedlink */
	_Atomic int64_t nmmade;       /* OS threads made for Ms (relaxed: a count) */
	_Atomic int64_t nmretired;    /* of them, ended while idle (relaxed) */
	_Atomic int32_t nmspinning;   /* Ms looking for work */
	struct p *pidle;              /* idle Ps */
	_Atomic int32_t npidle;
	struct g *runqhead, *runqtail; /* global run queue */
	_Atomic int32_t runqsize;
	/* Global free Gs: batches (each a list linked by schedlink, its
	 * head linking the next batch by gfbatch), so that a P takes or
	 * gives a batch without walking it (proc.c gfget) */
	struct g *gfree;
	int32_t ngfree;               /* Gs in them all */
	_Atomic int64_t goidgen;      /* last G id handed out */
	_Atomic int64_t ngs;          /* Gs made minus ended off any P (plain
	                               * threads); gcount() adds the Ps' */
	_Atomic int32_t sysmonwait;   /* sysmon sleeps on sysmonnote */
	struct note sysmonnote;
	_Atomic int64_t lastpoll;     /* nanotime of last netpoll; 0 while an M blocks in it */
	_Atomic int64_t polluntil;    /* when the blocked poller will wake */
	_Atomic int32_t nthreadwait;  /* plain OS threads blocked in waiter_block */
	_Atomic int32_t nthreadwoken; /* of those, woken but not yet running (deadlock.c) */
	_Atomic int32_t gomaxprocs;   /* active Ps (written under lock, read without) */
	_Atomic int32_t nretire;      /* spare Ps that should retire */
	_Atomic int32_t nhogspares;   /* Ps lent for hogs right now */
	_Atomic int32_t nspares;      /* spare Ps in use (not on sparefree) */
	struct p *sparefree;          /* retired spare Ps (sched.lock) */
	_Atomic int64_t nsyscallretake; /* sysmon: Ps retaken from blocking calls */
	_Atomic int64_t nbusylenddefer; /* sysmon: spares for unseen calls put off, CPUs busy */
	_Atomic int64_t nhogretake;   /* sysmon: Ps retaken from Gs running > 10 ms */
	_Atomic int64_t npreempt;     /* sysmon: preempt requests */
	_Atomic int64_t nturn;        /* Gs that gave way at a request boundary (rt_turn) */
	_Atomic int64_t ntimersrescued; /* timers fired by a thread not holding their P */
	_Atomic int32_t nkwait;        /* Gs waiting in the kernel now (entersyscallwait) */
	_Atomic int64_t nsyscallwait;  /* fd waits made in the kernel on the G's M (entersyscallwait) */
	_Atomic int64_t nkwaitkick;    /* kernel waits asked to end (kwait_kick) */
	_Atomic int64_t nnetpoll;      /* epoll waits of the netpoller (any timeout) */
	_Atomic int64_t nbusypoll;     /* of them, a busy P's (busypoll, proc.c) */
	_Atomic int64_t nsysmonwake;   /* sysmon rounds (each one sleep) */
	_Atomic int64_t ntimerbackstop; /* Ms sysmon woke for a late timer on an idle P (sysmon.c) */
	_Atomic int64_t nstatreads;    /* sysmon's reads of /proc/self/task/TID/stat */
};

extern HIDDEN struct sched sched;
/* 1 once the runtime is initialised (runtime_init_once's last store,
 * release); apart from sched, in .data (STARTUP_DATA): every hooked call
 * reads it, also in a process that never starts the runtime, which then
 * never touches sched's pages. */
extern HIDDEN _Atomic int32_t sched_started;
/* allp[0..nallp): every P made so far.  A new P is stored in allp
 * before nallp grows (seq_cst, so release); read nallp first, with at
 * least acquire, and only allp[i] below it: the P is then seen whole. */
extern struct p *allp[MAXALLP];
extern _Atomic int32_t nallp;
extern struct m *_Atomic allm;
/* The M running gp now, or NULL (any thread; relaxed: the answer may be
 * stale by the time it is used - Ms are never freed (a retired M's
 * descriptor stays on allm, running nothing, until a new M reuses it),
 * so it is safe to read, and every caller acts harmlessly on an M that
 * moved on). */
struct m *g_curm(struct g *gp);

/* The M running on this OS thread; NULL for plain threads. Initial-exec
 * TLS: always read through %fs, so it stays right after a G migrates. */
extern __thread struct m *tls_m __attribute__((tls_model("initial-exec")));

/* The slot holds the M itself in the M's own TLS; in a G's block (tls.c)
 * with the low bit set when the scheduler may keep that block loaded
 * (tlsinfo.g0keep): two Ms may then have one block loaded, and the M is
 * the one this thread's GS base names (set once at mstart, never
 * changed: right at every instruction, in signal handlers too).  A plain
 * thread's slot is NULL whatever GS it inherited. */
static inline struct m *getm(void)
{
	struct m *m = tls_m;
	if (unlikely((uintptr_t)m & 1))
		__asm__ volatile("mov %%gs:0, %0" : "=r"(m));
	return m;
}

/* The running G, or NULL on a plain thread or the scheduler context. */
static inline struct g *getg(void)
{
	struct m *m = getm();
	return m ? atomic_load_explicit(&m->curg, memory_order_relaxed) : NULL;
}

/* ---- proc.c ----------------------------------------------------------- */

void runtime_init(void);
/* The running context of a plain thread (the preload shim's main, before
 * any G) becomes a G named name whose stack, [lo, hi), is the thread's
 * own (never pooled or freed).  The thread itself goes on at a fresh
 * context at the top of althi (its stack from now on), queues the G and
 * runs then(), which never returns; the caller returns as the G, on
 * whichever M took it, with errno as it was.  The G's id, or -1 (ENOMEM;
 * nothing changed). */
int64_t rt_adopt(const char *name, char *lo, char *hi, char *althi, void (*then)(void));
static inline void runtime_ensure(void)
{
	extern void runtime_start(void);
	if (unlikely(!atomic_load_explicit(&sched_started, memory_order_acquire)))
		runtime_start();
}

/* Park the running G.  After it is off its stack, unlockf(gp, arg) runs;
 * if it returns false the G is readied again at once.  Whoever wakes it
 * later calls goready.  Must be called on a G. */
void gopark(bool (*unlockf)(struct g *gp, void *arg), void *arg, int reason);
/* Make a parked G runnable (on the current P if any, else globally):
 * goready puts it in runnext (it runs next, as a woken channel peer
 * should); goready_tail queues it behind the others. */
void goready(struct g *gp);
void goready_tail(struct g *gp);
/* goready for a G whose timer fired (sema.c waiter_timeout): on the
 * current P, before the Gs queued there unless an earlier timer's G
 * still waits (proc.c runqput_timer); from a plain thread, globally. */
void goready_timer(struct g *gp);
/* weft_yield: false if nothing else could run here (no switch). */
bool rt_yield(void);
/* gopark and goready for a caller inside the runtime bracket (rtdepth >
 * 0) that knows its M (and, parking, its running G gp): the same without
 * the bracket or the look-up.  goready_m's m may be NULL (a plain
 * thread).  After gopark_g the G may run on another M: it returns that M. */
struct m *gopark_g(struct m *m, struct g *gp, bool (*unlockf)(struct g *gp, void *arg),
		   void *arg, int reason);
void goready_m_slow(struct m *m, struct g *gp);
/* A gopark commit (unlockf) that publishes the parked G in a word: CAS
 * *word from 0 to val (release), on the context that runs after the G.
 * val is a struct waiter's address with its low 2 bits free.  parked is
 * true until the commit finds the word not 0 (the parker sets it: once
 * published, the G may be taken, readied and running on another M,
 * returning from the frame the record lives in, so the commit writes
 * nothing after a CAS that succeeds); then nothing was published, the
 * commit sets parked false and the waiter's result RDVPARK_AGAIN, and
 * the G is readied to look again.  The scheduler runs it inline,
 * without the indirect call. */
struct parkpub {
	_Atomic uintptr_t *word;
	uintptr_t val;
	bool parked;
};
bool park_publish(struct g *gp, void *arg);
/* The parking half of an unbuffered channel hand-off (chan.c's fast
 * path): park gp (running on m, inside the runtime bracket) as a waiter
 * (struct waiter, excl, elem: its element's slot) that the context
 * running next publishes in *word as (waiter | dir) (park_publish);
 * how = RDVPARK_HOW(dir, reason).  Taken (the waiter's result
 * RDVPARK_TAKEN, as its taker sets it): returns the M it resumes on.
 * Else - closed meanwhile (the result close set), or RDVPARK_AGAIN if
 * the word was not 0 at the publication (nothing published: look again)
 * - returns m NULL and r, what other(word, m, elem, result) returned:
 * the caller then has nothing of its own to keep across the park (the
 * callee-saved registers that would hold it cost the public call a
 * save and restore of each at every hand-off, taking or parking). */
struct rdvpark {
	struct m *m; /* the M it resumed on, or NULL: r is the call's result */
	int r;       /* other's result (m NULL) */
};
#define RDVPARK_TAKEN 1
#define RDVPARK_AGAIN INT32_MIN
#define RDVPARK_HOW(dir, reason) ((uintptr_t)(dir) | (uintptr_t)(reason) << 8)
typedef int (*rdvother_fn)(_Atomic uintptr_t *word, struct m *m, void *elem, int32_t result);
struct rdvpark gopark_rdv(struct m *m, struct g *gp, _Atomic uintptr_t *word, uintptr_t how,
			  void *elem, rdvother_fn other);
static inline void goready_m(struct m *m, struct g *gp)
{
	struct p *pp;
	/* inline, the common case of a hand-off on one P: ours runs gp
	 * next, and there is no idle P to wake (ready_m in proc.c) */
	if (likely(m && (pp = m->p) &&
		   atomic_load_explicit(&sched.gomaxprocs, memory_order_relaxed) == 1 &&
		   !atomic_load_explicit(&pp->runnext, memory_order_relaxed))) {
		atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
		atomic_store_explicit(&gp->waitreason, W_NONE, memory_order_relaxed);
		/* only the owner fills runnext and stealers only empty it:
		 * seen empty, it stays empty until this store (release: gp's
		 * state before a stealer's acquire load; runqput_inl) */
		atomic_store_explicit(&pp->runnext, gp, memory_order_release);
		return;
	}
	goready_m_slow(m, gp);
}
/* Leave / re-enter user code around a call that may block the OS thread:
 * sysmon hands the P to another M if the call takes longer than 20 us. */
void entersyscall(void);
void exitsyscall(void);
/* Like entersyscall, but hand the P off at once (known to block long). */
void entersyscallblock(void);
/* A G about to wait for fds in the kernel (poll, select, epoll_wait,
 * or a blocking read or accept that would park):
 * if its P has nothing else to run (its queue and the global one empty,
 * no timer due, not asked to yield), and the netpoller is watched
 * without it (no G parked on it, or a P idle), entersyscall and return
 * true: the caller makes the real blocking call on this M, then
 * exitsyscall()s, instead of parking and asking again after the
 * netpoller's wakeup (three system calls and two thread switches per
 * wait, against one natively).  *until (absolute nanotime, -1 none) is
 * lowered to the P's earliest timer: the caller returns from the kernel
 * by then and looks again.  A call that takes no timeout (read, accept)
 * passes *until == KWAIT_NOBOUND: refused while the P has a timer
 * pending.  false: park as usual. */
bool entersyscallwait(int64_t *until);
#define KWAIT_NOBOUND INT64_MIN
/* After the call entersyscallwait allowed (exitsyscall for it): true
 * if the wait was asked to end (kwait.c: its P is wanted, or a signal
 * for the G): the caller parks rather than wait in the kernel again. */
bool exitsyscallwait(void);

/* ---- kwait.c: ending a kernel wait ---- */
/* The system call of a kernel wait: nr(a..f), or -EINTR at once if the
 * wait was asked to end already; a kick ends it with -EINTR. */
long kwait_syscall(long nr, long a, long b, long c, long d, long e, long f);
/* In a runtime signal handler (SIGURG, the shim's SIGWEFT) on an M, with
 * its siginfo_t and ucontext_t: end the M's kernel wait if it is in one;
 * true if the signal was a kick (kwait_kick's mark in its siginfo), not
 * someone else's: then it is no one else's business. */
bool kwait_onsignal(void *si, void *uc);
/* exitsyscallwait's first step: the M's kernel wait is over; wait out a
 * kick being sent and take delivery of one sent, so that it cannot land
 * later in a call of the program's.  true if the wait was asked to end. */
bool kwait_leave(struct m *m);
/* sysmon: a wait asked to end by a signal is still asleep in the kernel
 * (the signal came between the look and the call and its handler did
 * not run at once - TSan defers handlers - or the M blocks the signal):
 * send it again.  false if m is not in that state. */
bool kwait_rekick(struct m *m);
/* Ask m's kernel wait to end (a signal to its thread); false if m is not
 * waiting, or was asked already. */
bool kwait_kick(struct m *m);
/* A G was readied: if no P is idle and no M spins, end one kernel wait,
 * whose P then looks for it. */
void kwait_wakeone(void);
/* A signal or cancellation for gp: end its kernel wait if it is in one;
 * true if it was in one (ending now, or already asked to end). */
bool kwait_kickg(struct g *gp);
/* The state letter of OS thread tid (/proc/self/task/TID/stat: R running
 * or runnable, S or D asleep in the kernel...), or 0 (sysmon.c). */
char rt_threadstate(int tid);
/* The CPU time (ns) thread tid has had, or -1 (cpuclock.c). */
int64_t rt_threadcpu(int tid);
/* How a kick reaches thread tid: SIGURG; the shim's SIGWEFT.  Both
 * send it with kwait_sigsend, which marks it as a kick. */
extern void (*rt_kicktid)(int tid);
/* Send sig to thread tid of this process marked as a kick (kwait_onsignal
 * knows it by its siginfo). */
void kwait_sigsend(int tid, int sig);
/* Is this siginfo a kick's (kwait_sigsend's mark)? */
bool kwait_iskick(const void *si);

/* Runtime entry from user code on a G (rt_enter's slow part). */
void enterruntime(struct m *m);
/* sysmon: pp's M is stuck (blocking call, hog) and Gs wait behind it:
 * start a spare P so they run; the M gives it back at its next runtime
 * call.  A P is never taken away from the M that holds it. */
void lendp(struct p *pp, bool hog);
bool allpidle(void);
void sparefree_put(struct p *pp); /* sched.lock held */

/* errno through calls the compiler cannot merge: glibc's __errno_location
 * is const, so code around a switch must never reuse an address computed
 * on another thread. */
int rt_geterrno(void);
void rt_seterrno(int e);
/* Return to user code on a G. */
void leaveruntime(struct m *m);
/* Bracket runtime work on a G (a public call that may park, ready or
 * allocate): the first level checks sysmon's flags; nesting is a counter.
 * Returns the M (NULL on a plain thread). */
/* Set g->rtdepth (its own M only: a plain store on x86; atomic for
 * sysmon's reads, which need only some recent value). */
static inline void rtdepth_set(struct g *gp, int32_t d)
{
	__atomic_store_n(&gp->rtdepth, d, __ATOMIC_RELAXED);
}
/* rt_enter/rt_leave for a caller that knows its M and running G. */
static inline void rt_enter_g(struct m *m, struct g *gp)
{
	int32_t d = gp->rtdepth;
	rtdepth_set(gp, d + 1);
	if (d == 0 && unlikely(atomic_load_explicit(&m->p->flags, memory_order_relaxed)))
		enterruntime(m);
}
static inline void rt_leave_g(struct m *m, struct g *gp)
{
	int32_t d = gp->rtdepth - 1;
	rtdepth_set(gp, d);
	if (d == 0 &&
	    unlikely(atomic_load_explicit(&m->p->flags, memory_order_relaxed) & PF_PREEMPT))
		leaveruntime(m);
}
static inline struct m *rt_enter(void)
{
	struct m *m = getm();
	struct g *gp = m ? atomic_load_explicit(&m->curg, memory_order_relaxed) : NULL;
	if (gp)
		rt_enter_g(m, gp);
	return m;
}
static inline void rt_leave(void)
{
	struct m *m = getm();
	struct g *gp = m ? atomic_load_explicit(&m->curg, memory_order_relaxed) : NULL;
	if (gp)
		rt_leave_g(m, gp);
}
extern HIDDEN _Atomic int64_t coarsenow; /* nanotime, refreshed by sysmon and the scheduler */

/* gp (running on m, outside the runtime) received data after it had sent
 * since its last receive: a request boundary of a server's connection
 * (the hooks, hook_recvd).  If it has held its P for weftenv.turn_ns
 * since the run's first boundary and another G is runnable, it goes to
 * the global queue's tail.  Clears gp->turnsent. */
void rt_turn(struct m *m, struct g *gp);

void handoffp(struct p *pp);
void wakep(void);
void injectglist(struct g *list);
struct p *pidleget(void);
void pidleput(struct p *pp);
void globrunqput(struct g *gp);
void runqput(struct p *pp, struct g *gp, bool next);
struct g *runqget(struct p *pp, bool *inherit);
bool runqempty(struct p *pp);
struct g *runqsteal(struct p *pp, struct p *victim, bool stealrunnext);
struct g *globrunqget(struct p *pp, int32_t max);

uint32_t fastrand(void);
void forEachG(void (*fn)(struct g *gp, void *arg), void *arg);

/* Deadlock check (deadlock.c, Go's checkdead): called by an M that is
 * about to sleep with every P idle.  Weak: absent until it is linked. */
void checkdead(void) __attribute__((weak));
/* The same from a plain thread about to block in waiter_block. */
void checkdead_thread(void) __attribute__((weak));

/* ---- timers (timer.c) -------------------------------------------------- */

struct timer {
	int64_t when;              /* nanotime at which to fire */
	int64_t rtwhen;            /* the deadline on CLOCK_REALTIME (rt_realtime ns) that
	                            * when stands for, 0: a monotonic timer.  Read and
	                            * written under the heap's timerslock once queued */
	void (*f)(void *arg, uintptr_t seq); /* runs on an M with a P, without locks held */
	void *arg;
	uintptr_t seq;
	struct p *pp;              /* heap it is on, or NULL */
	int32_t idx;               /* index in pp->timers, -1 if not queued */
};

void addtimer(struct timer *t);          /* on the current P (or P 0) */
bool deltimer(struct timer *t);          /* true if it was queued (had not fired) */
int64_t checktimers(struct p *pp, int64_t now); /* run due timers; returns next when or 0 */
/* Every timer of pp onto to's heap (pp retires; to is P 0, which never
 * does).  Returns to's earliest when, 0 if nothing moved.  Whoever sleeps
 * until the earliest timer read it over every P, pp included, so only a
 * caller that owned pp and now stops (findrunnable) must wakenetpoller. */
int64_t movetimers(struct p *pp, struct p *to);
int64_t earliest_timer(void);            /* min over all Ps, 0 if none */
void wakenetpoller(int64_t when);

/* Deadlines on CLOCK_REALTIME (the shim's pthread_cond_timedwait,
 * sem_timedwait, pthread_timedjoin_np...).  A wait is turned into a
 * timer on the monotonic clock; when the kernel says the wall clock was
 * set (netpoll.c's clock watch), every timer with an rtwhen is placed
 * again from its wall-clock deadline (timers_clockset), so a jump
 * forward ends such waits at once and a jump back makes them longer,
 * as glibc's futex waits on CLOCK_REALTIME do.  docs/design.md. */
int64_t rt_realtime(void);   /* CLOCK_REALTIME in ns, + WEFT_DEBUG=clockset skew */
/* The wall clock deadlines are measured against: the program's
 * clock_gettime(CLOCK_REALTIME) under the hooks (hook.c sets it: the
 * clock the program made them from, another interposer's such as
 * libfaketime included), else NULL and the vDSO's.  Set before main. */
extern HIDDEN int (*rt_wallclock)(struct timespec *ts);
/* The next timed wait of the running G (not a plain thread) ends at
 * wall-clock time rtns: call before reading the clock for its duration,
 * 0 after the wait.  Makes the clock watch on first use. */
void g_rtdeadline(int64_t rtns);
void timers_clockset(void);  /* re-place every realtime timer (clock set) */
extern _Atomic uint64_t clockgen; /* clock sets seen (timers_clockset runs) */
extern _Atomic int64_t rtskew;    /* WEFT_DEBUG=clockset: added to CLOCK_REALTIME */

/* ---- netpoll.c ---------------------------------------------------------- */

int64_t gcount(void); /* live Gs: sched.ngs plus every P's ngs */
void netpollinit(void);
int rt_fdhigh(int fd); /* a runtime fd, moved out of the program's low numbers */
struct g *netpoll(int64_t delay);        /* Gs made ready; delay <0 block, 0 poll */
void netpollbreak(void);
bool netpollinited(void);
extern HIDDEN _Atomic int32_t netpollwaiters;   /* Gs parked on fds */
/* The clock watch: a timerfd on CLOCK_REALTIME armed with
 * TFD_TIMER_CANCEL_ON_SET in the epoll set, made on the first realtime
 * deadline; netpoll runs timers_clockset when it reports a clock set.
 * false if it could not be made (realtime deadlines then act as
 * durations, as before). */
bool netpoll_watchclock(void);
bool netpoll_clockwatched(void);         /* made: sysmon polls even with no fd waiter */
void netpoll_clockfork(void);            /* fork child: a new epoll instance, watch again */

/* ---- sysmon.c ----------------------------------------------------------- */

void sysmon_start(void);
/* 1 while sysmon is owed: it could not be made, or a fork child put it
 * off until its second G or M (sysmon.c, fork.c, proc.c sysmon_owed) */
extern HIDDEN _Atomic int sysmon_pending;
void sysmon_wake(void);

/* ---- alloc.c ------------------------------------------------------------ */

void *rtalloc(size_t size);              /* zeroed; NULL on ENOMEM */
void *rtalloc_aligned(size_t size, size_t align); /* the same, align (a power of two) */
void rtfree(void *ptr);
unsigned rt_tcache_create(void);
void allocinit(void);

/* ---- lazylib.c: libraries loaded when the runtime starts, not with weft -- */

enum lazylib_id {
	LAZY_UNWIND, /* libunwind: dump backtraces (traceback.c) */
	LAZY_M,      /* libm: jemalloc's heap profiling */
};
/* The library's handle, dlopen'd (RTLD_LOCAL) at the first call; NULL if
 * it cannot be loaded (said once on stderr).  A plain context only: never
 * from a signal handler. */
void *lazylib_open(enum lazylib_id id);
/* dlsym in it, or NULL. */
void *lazylib_sym(enum lazylib_id id, const char *name);

/* ---- tls.c: a TLS block and TCB per G (WEFT_TLS=thread) ------------------ */

/* One more on a counter of this M's, or of the P it holds (only it
 * writes: no locked RMW; readers load it relaxed).  One instruction on
 * x86-64 (arch: ctx_tally64), where the relaxed load and store were
 * three: the switch and the hand-off pay a few each time. */
static inline void mtally(_Atomic uint64_t *c)
{
	ctx_tally64(c);
}


struct tlsinfo {
	size_t size;         /* static TLS area with the TCB (glibc's) */
	size_t align;        /* its alignment */
	size_t tcbsize;      /* sizeof(struct pthread) */
	size_t reserve;      /* bytes a G's block takes at its stack top: the TCB,
	                      * the static TLS in use (no surplus), alignment */
	size_t fullreserve;  /* a block with the whole static area (surplus
	                      * included) and the resolver state */
	size_t used;         /* static TLS the modules use, below the TCB */
	bool resdead;        /* a G's resolver state in jemalloc's dead tsd */
	size_t slot;         /* stride of the interleaved slots Gs' blocks take
	                      * (tls.c, "slots"), or 0: blocks at stack tops */
	size_t jehi, jelo;   /* jemalloc's tsd lies jehi..jelo bytes below the
	                      * thread pointer (jehi < jelo), 0 if not found */
	long off_res;        /* offsetof(struct pthread, res), or -1 */
	long off_tid;        /* offsetof(struct pthread, tid) */
	long off_specific;   /* offsetof(struct pthread, specific) */
	long off_list;       /* offsetof(struct pthread, list) */
	long off_robust;     /* offsetof(struct pthread, robust_head) */
	long off_rseq;       /* the rseq area from the thread pointer, or -1 */
	intptr_t tls_m_off;  /* &tls_m minus the thread pointer (every block) */
	intptr_t jetsd_off;  /* jemalloc's tsd (alloc.c), likewise */
	intptr_t resp_off;   /* glibc's __resp (resolver state pointer), likewise */
	bool fsgsbase;       /* wrfsbase allowed (HWCAP2_FSGSBASE) */
	bool g0keep;         /* the scheduler context keeps the last G's block
	                      * loaded (tls_g0keep_init: under the shim, whose
	                      * Ms block asynchronous signals) */
};
extern HIDDEN struct tlsinfo tlsinfo;
bool tls_init(void);                /* resolve glibc's entry points once */
void tls_setfs(uintptr_t base);     /* load this OS thread's FS base */
uintptr_t tls_current(void);        /* %fs:0 */
void tls_gbegin(struct g *gp);      /* on gp: its block at its stack top */
void tls_gprep(struct g *gp);       /* on its maker, holding the loader's lock */
void loaderlock_init(void);         /* find glibc's dl_load_tls_lock (loaderlock.c) */
bool loaderlock_other(void);        /* held by another than this OS thread's own TCB */
bool loaderlock_mine(void);         /* held by the running context */
void mspare(void);                  /* proc.c: an idle M made now, on this G's TCB */
void tls_adopt(struct g *gp, void *tcb); /* on gp: run on tcb from now */
void tls_gdtors(struct g *gp);      /* on gp: C++ thread_local destructors */
void tls_gfree(struct g *gp);       /* gp dead and off its M: its block freed */
void tls_forkenter(void);           /* fork runs on the M's own TCB ... */
void tls_forkleave(void);           /* ... then the G's again (parent, child) */
void tls_forkchild(void);           /* in a fork child: the cache pool reset */
void tls_forkprepare(void);         /* the shim's fork: no G in dl_iterate_phdr ... */
void tls_forkdone(void);            /* ... until it is done (parent, child) */
void *tls_movemain(void);           /* the real main thread to a fresh block */
extern int rt_tls_default;          /* WEFT_TLS when unset: 1 under the shim */
extern bool rt_mutex_threadstarve;  /* plain-thread waiters may switch a mutex to
                                     * hand-off (sync.c); off: WEFT_PTHREADS=native */

void tls_g0keep_init(void);         /* decide g0keep (runtime start) */
void tls_mstart(struct m *m);       /* on a new M: its GS base (g0keep) */
void tls_fsblock(struct m *m, uintptr_t b); /* m->fsblock = b, then the limbo */
void tls_ownfs(struct m *m);        /* the scheduler off a kept block, for good */
extern _Atomic int32_t tls_nlimbo;  /* dead Gs whose block an M still has */
uintptr_t tls_ownenter(struct m *m); /* a short stay on the M's own TLS ... */
void tls_ownleave(struct m *m, uintptr_t fs); /* ... and back */
bool tls_release(struct g *gp);     /* dead gp's block: free now, or the limbo */
void gfreedead(struct g *gp);       /* proc.c: a dead G's block, stack, descriptor freed */

/* What a G's block holds in its tls_m slot for m (getm). */
static inline struct m *tls_mslot(struct m *m)
{
	return tlsinfo.g0keep ? (struct m *)((uintptr_t)m | 1) : m;
}

/* Point the FS base at to's block (or the M's own) if it is not loaded.
 * The M goes into the block first, so tls_m reads right on both sides
 * of the load, whenever a signal comes.  to == NULL (the scheduler
 * context): with g0keep it stays on whatever is loaded (zero loads when
 * the same G comes back, one for another G: the invariants are in
 * docs/design.md, "The scheduler keeps the G's block"). */
static inline void tls_loadfs(struct m *m, struct g *to)
{
	if (!to && tlsinfo.g0keep)
		return;
	uintptr_t fs = (to && to->tcb) ? (uintptr_t)to->tcb : m->fsbase;
	if (likely(fs == m->fscur))
		return;
	if (to && to->tcb)
		*(struct m **)((char *)to->tcb + tlsinfo.tls_m_off) = tls_mslot(m);
	m->fscur = fs;
	mtally(&m->nfsload);
	tls_setfs(fs);
	if (tlsinfo.g0keep)
		tls_fsblock(m, (to && to->tcb) ? (uintptr_t)to->tcb : 0);
}

/* ---- env.c -------------------------------------------------------------- */

struct weftenv {
	int maxprocs;          /* WEFT_MAXPROCS, or 0: the CPUs available (envmaxprocs) */
	size_t stacksize;      /* WEFT_STACK_SIZE */
	int stackkind;         /* WEFT_STACK: guarded/segmented */
	int64_t schedtrace_ms; /* WEFT_DEBUG=schedtrace=N */
	int64_t clockset_ns;   /* WEFT_DEBUG=clockset=<s>: rt_realtime moves this much
	                        * further at each clock set the kernel reports (tests) */
	bool sigquit_continue; /* WEFT_DEBUG=sigquit=continue */
	int tls;               /* WEFT_TLS: -1 unset, 0 shared, 1 thread */
	int maxthreads;        /* WEFT_MAXTHREADS: OS threads weft may have (default 10000) */
	bool nokwait;          /* WEFT_DEBUG=kwait=0: fd waits always park (entersyscallwait) */
	int64_t kickdelay_ns;  /* WEFT_DEBUG=kickdelay=<us>: a kick's asker naps this long
	                        * between its ask and its signal (tests: kwait.c) */
	int64_t stall_ns;      /* WEFT_DEBUG=stall=<us>: how long a G has to take a process
	                        * signal routed to it before the router runs it (-1: the
	                        * shim's default; tests: hook/preload/signal.c, stall) */
	bool nog0keep;         /* WEFT_DEBUG=g0keep=0: the scheduler loads its M's own TLS (tls.c) */
	bool notlsslot;        /* WEFT_DEBUG=tlsslot=0: Gs' TLS blocks at their stack tops (tls.c) */
	bool noguardmarks;     /* WEFT_DEBUG=guardmarks=0: guard pages by mprotect even where
	                        * the kernel has guard markers (stack.c; tests) */
	int64_t pollgap_ns;    /* WEFT_DEBUG=pollgap=<us>: a busy P's scheduler polls the
	                        * netpoller when the last poll is older (0: never; proc.c) */
	int64_t turn_ns;       /* WEFT_DEBUG=turn=<us>: a G at a request boundary that has
	                        * run this long gives way (0: never; proc.c rt_turn) */
	bool turn_set;         /* turn= given: tls.c keeps it where a switch is dear */
	int64_t busydefer_ns;  /* WEFT_DEBUG=busydefer=<us>: the longest an unseen call
	                        * waits for a spare while the CPUs are busy (sysmon.c
	                        * cpusbusy; 0, the default: it does not wait) */
	int lendlog;           /* WEFT_DEBUG=lendlog=<n>: sysmon says why, for its first n
	                        * lends (sysmon.c lendsay) */
};
extern HIDDEN struct weftenv weftenv;
void envinit(void);
/* weftenv.maxprocs, the CPUs available counted now if WEFT_MAXPROCS did
 * not say (at the runtime's start: not a system call in every process
 * that never starts it). */
int envmaxprocs(void);
int parse_size(const char *s, size_t *out); /* "64K", "1M", "8M", bytes */

/* ---- waiters (sema.c): parking that works for Gs and plain threads ----- */

/* One blocked party: a G (parks) or a plain thread (futex). */
struct waiter {
	struct g *g;           /* the parked G, or NULL for a plain thread */
	uint64_t seq;          /* G: its park sequence number for this wait */
	struct note note;      /* plain thread: sleeps here */
	_Atomic uint32_t done; /* plain thread: 0 waiting, 1 woken, 2 timed out */
	bool queued;           /* on the primitive's queue (primitive's lock) */
	struct waiter *next;   /* queue links, owned by the primitive's lock */
	struct waiter *prev;
	void *elem;            /* data slot (channels) */
	uintptr_t ticket;      /* primitive-specific */
	int64_t since;         /* nanotime when it started waiting */
	int32_t result;        /* primitive-specific outcome, set by the waker */
	void *sel;             /* select: the shared select record */
	bool excl;             /* only the primitive's lock holder can end this wait
	                        * (no deadline, not interruptible, not a select):
	                        * waiter_claim needs no CAS.  Set by the caller before
	                        * it queues w; waiter_block clears it for a wait that
	                        * a timer or an interruption may end. */
};

/*
 * The one park/ready protocol for every blocking primitive, for Gs and
 * plain threads alike:
 *   waiter:  lock(prim); queue w; waiter_block(w, unlock_prim, prim, reason, deadline)
 *   waker:   lock(prim); dequeue w; if (waiter_claim(w)) {...; unlock(prim); waiter_wake(w);}
 *            (if the claim fails, w timed out: take the next waiter)
 * waiter_block returns true if woken, false if the deadline passed; on
 * false the primitive locks and removes w if still queued.  unlockf runs
 * once the caller is committed to sleep (for a G: off its stack).
 * deadline is absolute nanotime(), or < 0 for none.
 */
void waiter_init(struct waiter *w);   /* binds w to the caller (G or thread) */

/* g->waitstate's low bits (sema.c) */
enum { WS_WAIT = 0, WS_WOKEN = 1, WS_TIMEDOUT = 2, WS_INTR = 3 };

/* waiter_init's part for the running G gp, inline for the fast paths
 * (chan.c): begins its next wait (seq), and marks w excl (the caller
 * clears it for a wait others may end).  The plain thread's note and
 * done word are left alone: unused for a G. */
static inline void waiter_init_g(struct waiter *w, struct g *gp)
{
	w->g = gp;
	w->queued = false;
	w->next = w->prev = NULL;
	w->result = 0;
	w->sel = NULL;
	w->excl = true;
	uint64_t seq = (atomic_load_explicit(&gp->waitstate, memory_order_relaxed) >> 2) + 1;
	w->seq = seq;
	atomic_store_explicit(&gp->waitstate, seq << 2 | WS_WAIT, memory_order_relaxed);
}

/* waiter_init_g for a waiter published in an unbuffered channel's
 * rendezvous word (chan.c): no queue links, no queued mark and no
 * result, which nothing reads before a seal queues it (waitq_push sets
 * the first two) or its taker or a close sets the result; g, seq, sel
 * and excl are read by whoever takes it, from the word or a queue. */
static inline void waiter_init_word(struct waiter *w, struct g *gp)
{
	w->g = gp;
	w->sel = NULL;
	w->excl = true;
	uint64_t seq = (atomic_load_explicit(&gp->waitstate, memory_order_relaxed) >> 2) + 1;
	w->seq = seq;
	atomic_store_explicit(&gp->waitstate, seq << 2 | WS_WAIT, memory_order_relaxed);
}

/* waiter_claim and waiter_wake of a G's excl waiter that the caller
 * alone owns now (taken from a queue or word): the release store orders
 * what the caller wrote for it (result, its element) before the G
 * reads it (waiter_claim). */
static inline void waiter_claim_wake_g(struct waiter *w)
{
	struct g *gp = w->g;
	atomic_store_explicit(&gp->waitstate, w->seq << 2 | WS_WOKEN, memory_order_release);
	goready(gp);
}
/* The same from m (NULL: a plain thread) inside the runtime bracket. */
static inline void waiter_claim_wake_gm(struct waiter *w, struct m *m)
{
	struct g *gp = w->g;
	atomic_store_explicit(&gp->waitstate, w->seq << 2 | WS_WOKEN, memory_order_release);
	goready_m(m, gp);
}
/* Interrupt gp's wait if it is parked in an interruptible one (one it
 * began with introk set), else at its next: that wait then ends as a
 * timeout would (waiter_block false) and g_interrupted says why.  Any
 * thread; true if it readied gp now. */
bool g_interrupt(struct g *gp);
/* g->intrreq.  ASKED: g_interrupt asked; the G's next interruptible wait
 * ends for it, unless the shim's router withdraws it first (it ran the
 * G's signal itself: signal.c, stall).  BOUND: a wait of the G is ending
 * for it (woken by g_interrupt, its park's commit saw the request, or its
 * kernel wait was kicked): the G takes its signals itself, in the call
 * that the wait was for, which must end as a thread's call interrupted by
 * a handler; never withdrawn.  Both cleared by g_intr_take. */
enum { INTR_NONE = 0, INTR_ASKED = 1, INTR_BOUND = 2 };
/* The running G: was its last wait ended by g_interrupt? */
bool g_interrupted(void);
/* The running G takes (clears) a pending interruption request. */
bool g_intr_take(void);
bool waiter_block(struct waiter *w, void (*unlockf)(void *arg), void *arg,
		  int reason, int64_t deadline);
bool waiter_claim(struct waiter *w);
void waiter_wake(struct waiter *w);
struct waiter *waiters_claim(struct waiter *list); /* all of a list, under the lock */
void waiters_wake(struct waiter *wake);            /* then these, after it */

/* spin lock for public types whose layout users see (uint32_t word) */
void spinlock(uint32_t *l);
void spinunlock(uint32_t *l);

#endif /* WEFT_RUNTIME_H */
