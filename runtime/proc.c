/*
 * proc.c - the scheduler: Gs, Ms and Ps and how they meet.
 *
 * The model is Go's (proc.go).  A P is the right to run Gs; an M must hold
 * one to run G code.  Each P has a local run queue and a runnext slot; a
 * global run queue takes overflow and Gs readied off-P.  An M without
 * work spins briefly stealing from other Ps, then parks on a futex (or,
 * one at a time, in epoll_wait until the earliest timer).
 *
 * Switching.  A G that parks or yields picks its successor itself and
 * switches straight to it (one context switch, no trip through a
 * scheduler stack).  Whatever must happen once the old G is off its
 * stack - put it on a run queue, release the lock that a waker takes -
 * is left in m->afterfn and run by the new context right after the
 * switch.  Only when there is nothing local to run does the M switch to
 * its scheduler context (g0, the OS thread's own stack) to search,
 * steal, poll or sleep.
 *
 * P ownership.  A P is never taken from the M that holds it, so P-local
 * state (run queue tail, timers, caches) needs no atomic handshake on
 * the hot path.  When an M is stuck - in a blocking call for 20 us
 * (entersyscall) or running one G for 10 ms without a switch - and Gs
 * wait behind it, sysmon lends capacity instead: it starts a spare P
 * (lendp), whose M steals the stuck P's Gs.  At its next runtime call the
 * stuck M gives one spare back (it retires at its next trip through the
 * scheduler), so on average gomaxprocs Ps run G code, as in Go's handoffp.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"
#include "sanitizer.h"
#include "sys.h"

struct sched sched;
_Atomic int32_t sched_started STARTUP_DATA;
struct p *allp[MAXALLP];
struct m *_Atomic allm;

struct m *g_curm(struct g *gp)
{
	for (struct m *m = atomic_load(&allm); m; m = m->alllink)
		if (atomic_load_explicit(&m->curg, memory_order_relaxed) == gp)
			return m;
	return NULL;
}
__thread struct m *tls_m __attribute__((tls_model("initial-exec")));
_Atomic int64_t coarsenow;
_Atomic int32_t nallp; /* Ps allocated (>= gomaxprocs); see runtime.h */

/* glibc's pthread_create (sys.c); the preload shim sets one that also
 * blocks asynchronous signals (signal.c). */
int (*rt_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
			 void *) HIDDEN = sys_pthread_create;
/* Called at G exit before its stack is reused (preload: key destructors). */
void (*rt_gexit_hook)(struct g *gp) HIDDEN;

const char *const waitreasons[W_NREASONS] = {
	[W_NONE] = "runnable",
	[W_SLEEP] = "sleep",
	[W_WAITGROUP] = "wait group",
	[W_CHAN_SEND] = "chan send",
	[W_CHAN_RECV] = "chan receive",
	[W_SELECT] = "select",
	[W_SELECT_NOCASES] = "select (no cases)",
	[W_MUTEX] = "mutex",
	[W_RWLOCK_R] = "rwlock read",
	[W_RWLOCK_W] = "rwlock write",
	[W_COND] = "cond wait",
	[W_SEMA] = "semaphore",
	[W_ONCE] = "once",
	[W_IO_READ] = "IO wait read",
	[W_IO_WRITE] = "IO wait write",
	[W_POLL] = "poll",
	[W_JOIN] = "join",
	[W_FUTEX] = "futex",
	[W_LOCKED_THREAD] = "locked to thread",
};

/* ---- allgs: every G descriptor ever made, for dumps ------------------ */

/* A list threaded through the descriptors (g.alllink), appended at the
 * tail so a dump shows Gs in the order they were made.  Not an array
 * that doubles: copying it, and first touching the new one, took a
 * spawning loop milliseconds at each doubling (issue 16).  Descriptors
 * are reused, never freed, so the list only grows. */
struct lock allglock; /* not static: fork.c clears it in a child */
static struct g *allghead, *allgtail;

static void allgadd(struct g *gp)
{
	gp->alllink = NULL;
	lock(&allglock);
	if (allgtail)
		allgtail->alllink = gp;
	else
		allghead = gp;
	allgtail = gp;
	unlock(&allglock);
}

void forEachG(void (*fn)(struct g *gp, void *arg), void *arg)
{
	lock(&allglock);
	for (struct g *gp = allghead; gp; gp = gp->alllink)
		fn(gp, arg);
	unlock(&allglock);
}

uint32_t fastrand(void)
{
	static __thread uint32_t tstate;
	struct m *m = getm();
	uint32_t *s = m ? &m->fastrand : &tstate;
	if (*s == 0)
		*s = (uint32_t)nanotime() | 1;
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* ---- local run queue (lock-free ring, as in Go) ------------------------ */

bool runqempty(struct p *pp)
{
	/* tail, head and runnext must be read consistently: a G moving from
	 * runnext to the ring must not look like neither */
	for (;;) {
		uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
		uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_acquire);
		struct g *next = atomic_load_explicit(&pp->runnext, memory_order_acquire);
		if (t == atomic_load_explicit(&pp->runqtail, memory_order_acquire))
			return h == t && !next;
	}
}

/* Gs in pp's ring (not counting runnext); owner only. */
static uint32_t runqlen(struct p *pp)
{
	return atomic_load_explicit(&pp->runqtail, memory_order_relaxed) -
	       atomic_load_explicit(&pp->runqhead, memory_order_relaxed);
}

/* Move half the local queue plus gp to the global queue (queue full). */
static bool runqputslow(struct p *pp, struct g *gp, uint32_t h, uint32_t t)
{
	struct g *batch[RUNQ_SIZE / 2 + 1];
	uint32_t n = (t - h) / 2;
	if (n != RUNQ_SIZE / 2)
		fatal("runqputslow: queue is not full");
	for (uint32_t i = 0; i < n; i++)
		batch[i] = atomic_load_explicit(&pp->runq[(h + i) % RUNQ_SIZE], memory_order_relaxed);
	/* release: the slots we read stay ours only if no stealer moved head */
	if (!atomic_compare_exchange_strong_explicit(&pp->runqhead, &h, h + n,
						     memory_order_release, memory_order_relaxed))
		return false;
	batch[n] = gp;
	for (uint32_t i = 0; i < n; i++)
		batch[i]->schedlink = batch[i + 1];
	lock(&sched.lock);
	if (sched.runqtail)
		sched.runqtail->schedlink = batch[0];
	else
		sched.runqhead = batch[0];
	sched.runqtail = batch[n];
	batch[n]->schedlink = NULL;
	atomic_fetch_add_explicit(&sched.runqsize, n + 1, memory_order_relaxed);
	unlock(&sched.lock);
	return true;
}

/* Owner only.  next: put gp in runnext, kicking the old one to the tail. */
static inline __attribute__((always_inline)) void runqput_inl(struct p *pp, struct g *gp, bool next)
{
	if (next) {
		struct g *old = atomic_load_explicit(&pp->runnext, memory_order_relaxed);
		if (!old) {
			/* only the owner fills runnext and stealers only empty
			 * it: seen empty, it stays empty until this store, so
			 * no read-modify-write (release: gp's state is written
			 * before a stealer's acquire load sees it) */
			atomic_store_explicit(&pp->runnext, gp, memory_order_release);
			return;
		}
		/* a stealer may be taking old: exchange, and queue old only
		 * if it was still ours */
		old = atomic_exchange_explicit(&pp->runnext, gp, memory_order_acq_rel);
		if (!old)
			return;
		gp = old;
		/* a timer's G kicked from runnext (a spawn, a wake): the
		 * ring's tail is now where later timers' Gs wait behind it
		 * (runqput_timer's order) */
		if (unlikely(old == pp->tmrnext))
			pp->tmrmark = atomic_load_explicit(&pp->runqtail, memory_order_relaxed) + 1;
	}
	for (;;) {
		/* acquire: pairs with stealers' release of head, so we never
		 * overwrite a slot a stealer is still reading */
		uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
		uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
		if (t - h < RUNQ_SIZE) {
			atomic_store_explicit(&pp->runq[t % RUNQ_SIZE], gp, memory_order_relaxed);
			/* release: the slot is written before consumers see it */
			atomic_store_explicit(&pp->runqtail, t + 1, memory_order_release);
			return;
		}
		if (runqputslow(pp, gp, h, t))
			return;
	}
}

void runqput(struct p *pp, struct g *gp, bool next)
{
	runqput_inl(pp, gp, next);
}

/* Owner only: the head of pp's ring, or NULL. */
static inline __attribute__((always_inline)) struct g *runqget_ring(struct p *pp)
{
	for (;;) {
		uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
		uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
		if (t == h)
			return NULL;
		struct g *gp = atomic_load_explicit(&pp->runq[h % RUNQ_SIZE], memory_order_relaxed);
		if (atomic_compare_exchange_weak_explicit(&pp->runqhead, &h, h + 1,
							  memory_order_release, memory_order_relaxed))
			return gp;
	}
}

/* runnext without a locked instruction (Dice, Lev and Moir's asymmetric
 * Dekker idea; Linux's membarrier).  The owner stores rntaking = 1, then
 * loads rnsteal, with no fence between; a stealer increments rnsteal,
 * then makes every thread of the process pass a full barrier
 * (membarrier: an IPI to the CPUs running them; a context switch for the
 * others), then waits for rntaking == 0 before its CAS.  The owner's
 * program has a point B, inside the stealer's membarrier, before which
 * its stores are visible to the stealer and after which its loads see
 * rnsteal: either its rntaking = 1 came before B (the stealer waits
 * until its plain take is over and sees runnext NULL or a later G), or
 * its load of rnsteal came after B and sees the stealer (it takes by
 * CAS).  So the owner's common case costs two plain stores and a load,
 * where it was a lock cmpxchg (~5.5 ns here); the price, a system call,
 * is the stealer's, who takes runnext only as its last resort and after
 * waiting ~2 us anyway.  Registered once before any M runs; without
 * membarrier, every take is a CAS as before.  A registration is kept by
 * a fork child (same mm) and dropped by exec. */
static bool rnasym;

static void rnasym_init(void)
{
	rnasym = sys3(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* Owner only: take runnext (NULL if empty). */
static inline __attribute__((always_inline)) struct g *runnext_take(struct p *pp)
{
	struct g *next = atomic_load_explicit(&pp->runnext, memory_order_relaxed);
	if (!next)
		return NULL;
	if (likely(rnasym)) {
		atomic_store_explicit(&pp->rntaking, 1, memory_order_relaxed);
		/* compiler only: the store-load order is the stealer's
		 * membarrier's business (above) */
		atomic_signal_fence(memory_order_seq_cst);
		if (likely(atomic_load_explicit(&pp->rnsteal, memory_order_relaxed) == 0)) {
			/* again: a stealer may have taken it before we said so */
			next = atomic_load_explicit(&pp->runnext, memory_order_acquire);
			if (next)
				atomic_store_explicit(&pp->runnext, NULL, memory_order_relaxed);
			atomic_signal_fence(memory_order_seq_cst);
			/* release: a stealer that sees 0 sees runnext NULL */
			atomic_store_explicit(&pp->rntaking, 0, memory_order_release);
			if (next)
				mtally(&pp->nrnplain);
			return next;
		}
		atomic_store_explicit(&pp->rntaking, 0, memory_order_release);
	}
	if (atomic_compare_exchange_strong_explicit(&pp->runnext, &next, NULL,
						    memory_order_acquire, memory_order_relaxed))
		return next;
	return NULL;
}

/* A stealer: take victim's runnext, expected to hold next.  1 taken, 0
 * not (it changed: look again), -1 given up (the owner stayed in a plain
 * take, descheduled; or no barrier could be had). */
static int runnext_steal(struct p *victim, struct g *next)
{
	if (!rnasym)
		return atomic_compare_exchange_strong_explicit(&victim->runnext, &next, NULL,
							       memory_order_acquire,
							       memory_order_relaxed);
	atomic_fetch_add(&victim->rnsteal, 1); /* seq_cst, before the barrier */
	int r = -1;
	if (sys3(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
		int i = 0;
		/* acquire: its plain take (runnext = NULL) is seen after 0 */
		while (atomic_load_explicit(&victim->rntaking, memory_order_acquire) && ++i < 1000)
			cpu_relax();
		if (i < 1000)
			r = atomic_compare_exchange_strong_explicit(&victim->runnext, &next, NULL,
								    memory_order_acquire,
								    memory_order_relaxed);
	}
	atomic_fetch_sub_explicit(&victim->rnsteal, 1, memory_order_release);
	return r;
}

/* Owner only: runnext, else the ring's head.  *inherit: gp came from
 * runnext.  ringfirst: the ring's head first (fairness: see nextg_fast). */
static inline __attribute__((always_inline)) struct g *runqget_inl(struct p *pp, bool *inherit,
								 bool ringfirst)
{
	struct g *gp;
	/* fairness takes the ring's head first, but not past a timer's G in
	 * runnext: the ring may hold a later timer's (runqput_timer) */
	if (unlikely(ringfirst) &&
	    atomic_load_explicit(&pp->runnext, memory_order_relaxed) != pp->tmrnext &&
	    (gp = runqget_ring(pp))) {
		if (inherit)
			*inherit = false;
		return gp;
	}
	struct g *next = runnext_take(pp);
	if (next) {
		if (inherit)
			*inherit = true;
		return next;
	}
	if (inherit)
		*inherit = false;
	return runqget_ring(pp);
}

struct g *runqget(struct p *pp, bool *inherit)
{
	return runqget_inl(pp, inherit, false);
}

/* Grab half of victim's queue into batch (a ring starting at bhead). */
static uint32_t runqgrab(struct p *victim, struct g *_Atomic *batch, uint32_t bhead,
			 bool stealrunnext)
{
	for (;;) {
		uint32_t h = atomic_load_explicit(&victim->runqhead, memory_order_acquire);
		uint32_t t = atomic_load_explicit(&victim->runqtail, memory_order_acquire);
		uint32_t n = t - h;
		n = n - n / 2;
		if (n == 0) {
			if (!stealrunnext)
				return 0;
			struct g *next = atomic_load_explicit(&victim->runnext, memory_order_acquire);
			if (!next)
				return 0;
			/* the victim's owner is likely about to run it: give it a
			 * moment, as Go does, unless the victim is idle */
			if (PSTATUS(atomic_load_explicit(&victim->state, memory_order_relaxed)) !=
			    P_IDLE)
				for (int i = 0; i < 200; i++) /* ~2 us, no system call */
					cpu_relax();
			int r = runnext_steal(victim, next);
			if (r < 0)
				return 0;
			if (r == 0)
				continue;
			atomic_store_explicit(&batch[bhead % RUNQ_SIZE], next, memory_order_relaxed);
			return 1;
		}
		if (n > RUNQ_SIZE / 2)
			continue; /* read h and t inconsistently */
		for (uint32_t i = 0; i < n; i++) {
			struct g *gp = atomic_load_explicit(&victim->runq[(h + i) % RUNQ_SIZE],
							    memory_order_relaxed);
			atomic_store_explicit(&batch[(bhead + i) % RUNQ_SIZE], gp,
					      memory_order_relaxed);
		}
		/* release: done reading the slots before the owner may reuse them */
		if (atomic_compare_exchange_strong_explicit(&victim->runqhead, &h, h + n,
							    memory_order_release,
							    memory_order_relaxed))
			return n;
	}
}

/* Steal half of victim's Gs into pp's queue; return one to run. */
struct g *runqsteal(struct p *pp, struct p *victim, bool stealrunnext)
{
	uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
	uint32_t n = runqgrab(victim, pp->runq, t, stealrunnext);
	if (n == 0)
		return NULL;
	n--;
	struct g *gp = atomic_load_explicit(&pp->runq[(t + n) % RUNQ_SIZE], memory_order_relaxed);
	/* the stolen Gs' descriptors were last written on the victim's CPU:
	 * ask for them all now (their first two lines: what the switch to
	 * each reads), so that their misses overlap instead of coming one
	 * at each switch (25 % of a 2-P spawn loop's samples were the
	 * first load from the next stolen G) */
	for (uint32_t i = 0; i < n; i++) {
		struct g *g1 = atomic_load_explicit(&pp->runq[(t + i) % RUNQ_SIZE],
						    memory_order_relaxed);
		__builtin_prefetch(g1, 1);
		__builtin_prefetch((char *)g1 + 64, 1);
	}
	if (n == 0)
		return gp;
	uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
	if (t - h + n >= RUNQ_SIZE)
		fatal("runqsteal: runq overflow");
	atomic_store_explicit(&pp->runqtail, t + n, memory_order_release);
	return gp;
}

/* ---- global run queue (sched.lock) ------------------------------------- */

static void globrunqput_locked(struct g *gp)
{
	gp->schedlink = NULL;
	if (sched.runqtail)
		sched.runqtail->schedlink = gp;
	else
		sched.runqhead = gp;
	sched.runqtail = gp;
	atomic_fetch_add_explicit(&sched.runqsize, 1, memory_order_relaxed);
}

void globrunqput(struct g *gp)
{
	lock(&sched.lock);
	globrunqput_locked(gp);
	unlock(&sched.lock);
}

/* sched.lock held.  Take a fair share of the global queue into pp. */
struct g *globrunqget(struct p *pp, int32_t max)
{
	int32_t size = atomic_load_explicit(&sched.runqsize, memory_order_relaxed);
	if (size == 0)
		return NULL;
	int32_t n = size / sched.gomaxprocs + 1;
	if (n > size)
		n = size;
	if (max > 0 && n > max)
		n = max;
	if (n > RUNQ_SIZE / 2)
		n = RUNQ_SIZE / 2;
	atomic_fetch_sub_explicit(&sched.runqsize, n, memory_order_relaxed);
	struct g *gp = sched.runqhead;
	sched.runqhead = gp->schedlink;
	for (int32_t i = 1; i < n; i++) {
		struct g *g1 = sched.runqhead;
		sched.runqhead = g1->schedlink;
		runqput(pp, g1, false);
	}
	if (!sched.runqhead)
		sched.runqtail = NULL;
	return gp;
}

/* ---- idle P and M lists (sched.lock) ----------------------------------- */

static void retire_spare_locked(void);

/* The spare list; sched.lock held.  sched.nspares counts spares in use.
 * A spare put back keeps no timers: they go to P 0, a live P (a G that
 * slept on the spare is woken by a P an M holds, not by whoever happens
 * to scan idle Ps). */
static void gfree_push_locked(struct g *list, int32_t n);

void sparefree_put(struct p *pp)
{
	movetimers(pp, allp[0]);
	/* nor dead Gs or cached stacks: no owner reaches them on the spare
	 * list, and at RLIMIT_AS a spare that retired holding the stacks of
	 * the Gs that ended on it (8 MiB each) left every weft_go ENOMEM
	 * for good (faults::stack_wait_woken_by_cached_free hung) */
	if (pp->gfree) {
		gfree_push_locked(pp->gfree, pp->gfreecnt);
		pp->gfree = NULL;
		pp->gfreecnt = 0;
		pp->gfcold = 0;
	}
	stackcache_flush(pp);
	pp->link = sched.sparefree;
	sched.sparefree = pp;
	atomic_fetch_sub(&sched.nspares, 1);
}

static struct p *sparefree_get(void)
{
	struct p *pp = sched.sparefree;
	if (pp) {
		sched.sparefree = pp->link;
		atomic_fetch_add(&sched.nspares, 1);
	}
	return pp;
}

/* A stack cannot be mapped (RLIMIT_AS, memory exhausted): the stacks
 * cached on idle Ps (spares among them) go back to the pool, where the P
 * that needs one finds it; no one else would take them (a spare put
 * away has none: sparefree_put).  sched.lock makes those caches ours
 * (only its holder takes a P off the idle list: gfget_idle).  True if
 * any came back. */
bool stacks_reclaim(void)
{
	bool any = false;
	lock(&sched.lock);
	for (struct p *pp = sched.pidle; pp; pp = pp->link)
		if (pp->nstackcache > 0) {
			stackcache_flush(pp);
			any = true;
		}
	unlock(&sched.lock);
	return any;
}

/* sched.lock held. */
void pidleput(struct p *pp)
{
	/* an idle P is no longer stuck: give back what sysmon lent for it */
	uint32_t old = atomic_exchange_explicit(&pp->flags, 0, memory_order_relaxed);
	if (old & PF_LENT_HOG)
		atomic_fetch_sub(&sched.nhogspares, 1);
	if (old & PF_LENT)
		retire_spare_locked();
	if (pp->spare && atomic_load(&sched.nretire) > 0) {
		atomic_fetch_sub(&sched.nretire, 1);
		sparefree_put(pp);
		return;
	}
	pp->link = sched.pidle;
	sched.pidle = pp;
	atomic_fetch_add(&sched.npidle, 1); /* seq_cst: see wakep */
}

struct p *pidleget(void)
{
	struct p *pp = sched.pidle;
	if (pp) {
		sched.pidle = pp->link;
		atomic_fetch_sub(&sched.npidle, 1);
	}
	return pp;
}

static void mput(struct m *m)
{
	m->schedlink = sched.midle;
	sched.midle = m;
	sched.nmidle++;
}

/* Take m itself off sched.midle: false if it is not there (an mget took
 * it, and a P is on its way: stopm, mpark). */
static bool munlist(struct m *m)
{
	for (struct m **l = &sched.midle; *l; l = &(*l)->schedlink) {
		if (*l == m) {
			*l = m->schedlink;
			sched.nmidle--;
			return true;
		}
	}
	return false;
}

static struct m *mget(void)
{
	struct m *m = sched.midle;
	if (m) {
		sched.midle = m->schedlink;
		sched.nmidle--;
	}
	return m;
}

static void acquirep(struct m *m, struct p *pp)
{
	atomic_store_explicit(&m->p, pp, memory_order_relaxed); /* see struct m */
	/* relaxed atomic: sysmon reads it from its own thread (inkernel) */
	__atomic_store_n(&pp->m, m, __ATOMIC_RELAXED);
	/* seq_cst, then the seq_cst load of sysmonwait: a Dekker pair with
	 * sysmon, which stores sysmonwait and then reads every P's state
	 * (allpidle) before it sleeps, so that either it sees this P
	 * running or we see it waiting.  (Release and a relaxed load let
	 * sysmon read "all idle", set sysmonwait after our load, and sleep
	 * for good while this P ran: no P was then lent around an M that
	 * blocked, and a blocked M waiting for a G queued behind it hung.) */
	atomic_store(&pp->state, PSTATE(m->id, P_RUNNING));
	if (atomic_load(&sched.sysmonwait))
		sysmon_wake();
}

static struct p *releasep(struct m *m)
{
	struct p *pp = m->p;
	__atomic_store_n(&pp->m, NULL, __ATOMIC_RELAXED); /* read by sysmon */
	atomic_store_explicit(&m->p, NULL, memory_order_relaxed);
	atomic_store_explicit(&pp->state, PSTATE(0, P_IDLE), memory_order_release);
	return pp;
}

/* ---- Ms ------------------------------------------------------------------ */

static void schedule(struct m *m);
void dump_mstart(void) __attribute__((weak)); /* dump.c */

static bool stopm(struct m *m);
static bool mpark(struct m *m);
static void mexit(struct m *m);

static void *mstart(void *arg)
{
	struct m *m = arg;
	tls_m = m;
	m->errnop = &errno;
	m->fsbase = m->fscur = tls_current();
	tls_mstart(m); /* its GS base, before any G's block is loaded here */
	void (*started)(void) = __atomic_load_n(&rt_mstarted, __ATOMIC_RELAXED);
	if (started)
		started();
	/* seq_cst, then dump_mstart: a dump either stops this M or is
	 * waited for (dump.c) */
	atomic_store(&m->tid, (int)sys_gettid());
	if (dump_mstart)
		dump_mstart();
	pthread_attr_t a;
	if (sys_pthread_getattr_np(sys_pthread_self(), &a) == 0) {
		void *lo;
		size_t sz;
		pthread_attr_getstack(&a, &lo, &sz);
		m->g0lo = lo;
		m->g0hi = (char *)lo + sz;
		pthread_attr_destroy(&a);
	}
	stack_sigaltstack(m);
	san_thread_start(m);
	if (m->nextp) {
		acquirep(m, m->nextp);
		m->nextp = NULL;
		schedule(m);
	} else if (stopm(m)) { /* a spare made ahead of need (mspare): idle until given a P */
		schedule(m);
	}
	/* the M retired (stopm): it holds nothing, and glibc ends the
	 * thread as it returns (its TLS, jemalloc's tsd, its stack) */
	mexit(m);
	return NULL;
}

static int64_t mid_gen;

/* Idle Ms retire only once no M has been made for this long (mretire,
 * below): a workload whose bursts of blocked calls come a few seconds
 * apart (MariaDB's 512 clients connecting: a burst every ~2 s for ~6 s
 * on a loaded machine) keeps the Ms it made for them, instead of
 * retiring them between two bursts and making them again (2.4 thread
 * starts a second against 1.1 with Ms kept for good, before this). */
#define MNEW_QUIET_NS 5000000000LL
/* An M made less than the window after one retired doubles the window,
 * up to this: a workload whose bursts come further apart than 6 s keeps
 * its Ms after one such round trip (a retire, then a new M for the next
 * burst), instead of making a burst's Ms again every time; the window
 * halves back after a retire that came two windows after the last M
 * was made. */
#define MNEW_QUIET_MAX_NS 60000000000LL
/* nanotime when mnew last made an M, when mretire last retired one, and
 * the window now (relaxed: hints; a lost update only moves the window
 * one step late) */
static _Atomic int64_t lastmnew, lastmretire, mquiet = MNEW_QUIET_NS;

/* Go's checkmcount: n OS threads for Ms (sysmon is one more).  Past
 * WEFT_MAXTHREADS the program has that many threads stuck in calls weft
 * does not see, or makes them in a runaway: say so, dump, stop. */
static void checkmcount(int32_t n)
{
	int max = weftenv.maxthreads > 0 ? weftenv.maxthreads : 10000;
	if (n + 1 <= max)
		return;
	static _Atomic int reported;
	if (atomic_exchange(&reported, 1))
		for (;;)
			sys_pause(); /* another thread is reporting and will exit */
	warn("fatal: program exceeds %d-thread limit (WEFT_MAXTHREADS)\n", max);
	weft_dump(stderr);
	_exit(2);
}

/* Start sysmon if it is owed (sysmon_pending): it could not be made, or
 * a fork child put it off until it has something to watch, a second G or
 * M (fork.c).  On the M's own TLS unless here, as mthread makes threads;
 * not by a G inside a dlopen (loaderlock.c: glibc's pthread_create would
 * wait for the loader's lock it holds), which leaves it owed. */
static void sysmon_owed(struct m *self, bool here)
{
	if (likely(!atomic_load_explicit(&sysmon_pending, memory_order_relaxed)) ||
	    (!here && loaderlock_mine()) || !atomic_exchange(&sysmon_pending, 0))
		return;
	uintptr_t fs = here ? 0 : tls_ownenter(self);
	int e = rt_geterrno();
	sysmon_start();
	rt_seterrno(e);
	tls_ownleave(self, fs);
}

/* Make the OS thread of m with glibc's pthread_create, on the running
 * context's TCB if here (a G that holds the loader's TLS lock: mspare),
 * else on the M's own TLS.  0 or the error. */
static int mthread(struct m *m, bool here)
{
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 1 << 20);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	/* glibc's pthread_create on this thread's own TLS: it reads and
	 * locks THREAD_SELF, and a failing mmap sets errno, which in a G's
	 * block is the G's (or, in a scheduler that kept the block, another
	 * M's G's).  A G that holds the loader's lock makes it on its own
	 * block, running (its errno kept): glibc's lock is recursive, owned
	 * by the tid in that block, and the M's own TCB would wait for it. */
	struct m *self = getm();
	uintptr_t fs = here ? 0 : tls_ownenter(self);
	int e = rt_geterrno();
	int r = rt_pthread_create(&m->thread, &a, mstart, m);
	rt_seterrno(e);
	pthread_attr_destroy(&a);
	if (r == 0)
		atomic_fetch_add_explicit(&sched.nmmade, 1, memory_order_relaxed);
	tls_ownleave(self, fs);
	if (r == 0) /* threads can be had again */
		sysmon_owed(self, here);
	return r;
}

/* The descriptor of a new M that starts by running pp (NULL: idle,
 * stopm), counted in sched.mcount: a retired M's (sched.mfree), else a
 * new one put on allm.  Descriptors are never freed: other threads read
 * any M on allm without a lock (g_curm, dumps, sysmon, the shim's
 * signals), and a retired one reads as an M that runs nothing.  NULL
 * if out of memory. */
static struct m *mnew(struct p *pp, bool spinning)
{
	lock(&sched.lock);
	struct m *m = sched.mfree;
	if (m)
		sched.mfree = m->schedlink;
	unlock(&sched.lock);
	if (m) {
		/* what mexit left: curg, p, lockedg, nextp, nextg, altstack
		 * and tlsscratch NULL, tid and fsblock 0, kwait KW_NONE; the
		 * switch and FS-load counts stay (schedtrace sums every M's);
		 * the rest is set as its thread starts (mstart) */
		m->schedlink = NULL;
		m->afterfn = NULL;
		m->aftergp = NULL;
		m->afterarg = NULL;
		m->g0lo = m->g0hi = NULL;
		m->g0asan_fake = NULL;
		m->g0tsan = NULL;
		/* the old thread may still be on its way out (deadlock.c) */
		atomic_store_explicit(&m->exittid, 0, memory_order_relaxed);
		noteclear(&m->park); /* its last wait timed out (mretire) */
	} else {
		m = rtalloc(sizeof *m);
		if (!m)
			return NULL;
		struct m *head = atomic_load(&allm);
		do
			m->alllink = head;
		while (!atomic_compare_exchange_weak(&allm, &head, m));
	}
	m->id = __atomic_add_fetch(&mid_gen, 1, __ATOMIC_RELAXED);
	m->nextp = pp;
	m->nextg = NULL;
	m->spinning = spinning;
	checkmcount(atomic_fetch_add(&sched.mcount, 1) + 1);
	int64_t now = nanotime();
	int64_t q = atomic_load_explicit(&mquiet, memory_order_relaxed);
	if (now - atomic_load_explicit(&lastmretire, memory_order_relaxed) < q && q < MNEW_QUIET_MAX_NS)
		atomic_store_explicit(&mquiet, 2 * q, memory_order_relaxed);
	atomic_store_explicit(&lastmnew, now, memory_order_relaxed);
	return m;
}

/* mthread failed with e for m (from mnew): its descriptor waits for the
 * next M; no thread ran on it. */
static void mrefused(struct m *m, int e)
{
	m->nextp = NULL;
	atomic_fetch_sub(&sched.mcount, 1);
	lock(&sched.lock);
	m->schedlink = sched.mfree;
	sched.mfree = m;
	unlock(&sched.lock);
	rt_thread_refused(e);
}

/* Invariant: the runtime never waits for a lock a G may hold while it
 * parks or blocks.  glibc's pthread_create takes dl_load_tls_lock, which
 * a G holds through a dlopen's relocation (its IFUNC resolvers may make a
 * thread and wait for it, or block), so an M is not made while another
 * context holds it (loaderlock.c): the P stays idle, or goes back to the
 * spare list, and sysmon or the next wakep tries again; the Ms that exist
 * and the spare such a G made ahead (mspare) run the Gs meanwhile.  Were
 * the maker to wait, sysmon or an M holding a P would wait for a G that
 * may need either to go on. */
/* Make an M (an OS thread) that starts by running pp, on a retired M's
 * descriptor if there is one (mnew).  False if the system refuses
 * another thread: the caller gets pp back. */
static bool newm(struct p *pp, bool spinning)
{
	if (loaderlock_other())
		return false;
	struct m *m = mnew(pp, spinning);
	if (!m)
		fatal("out of memory allocating an M");
	int e = mthread(m, false);
	if (e) {
		mrefused(m, e);
		return false;
	}
	return true;
}

/* The running G holds the loader's TLS lock (it runs inside a dlopen's
 * relocation: an IFUNC resolver) and makes a thread: make sure an idle M
 * exists, made now, on this G's block, where the lock lets
 * pthread_create through.  If this G then blocks in the kernel (a call
 * weft does not see) while the new G must run for it to go on, sysmon
 * lends its P to that M: newm cannot make one until the lock is free
 * (natively the new thread exists already).  One spare: a second such
 * need while the lock is held waits for the dlopen to end.  (It is an
 * idle M like any other: it retires only while more than gomaxprocs Ms
 * are idle, so one made because none was stays.) */
void mspare(void)
{
	lock(&sched.lock);
	bool have = sched.nmidle > 0;
	unlock(&sched.lock);
	if (have)
		return;
	struct m *m = mnew(NULL, false);
	if (!m)
		return;
	int e = mthread(m, true);
	if (e)
		mrefused(m, e);
}

/* The system refused an OS thread (error e): said once per process. */
void rt_thread_refused(int e)
{
	static _Atomic int warned;
	if (!atomic_exchange(&warned, 1))
		warn("cannot create another OS thread (%s): running on the ones there are",
		     strerror(e));
}

/* Start an M to run pp (or any idle P); spinning: it goes looking for work.
 *
 * With no idle M but one blocked in the netpoller (lastpoll == 0), and
 * any idle P wanted, no new OS thread: pp goes back to the idle list and
 * that M's poll is broken; it takes an idle P as it wakes (findrunnable).
 * lastpoll is read here, and stored by the poller as it starts and stops
 * polling, under sched.lock, with the idle P list: the poller either
 * still polls (and will find pp) or already holds a P or sits on midle
 * (mget).  Without this, a program whose Gs sleep on timers (the
 * netpoller M blocks until the earliest) made a third M on 2 Ps at its
 * first spawn after an M went idle (issue 16: threads while Gs park in
 * weft_sleep).  Ms parked on their notes are preferred: mget comes
 * first. */
static void startm(struct p *pp, bool spinning)
{
	bool idle = pp == NULL;
	lock(&sched.lock);
	if (!pp) {
		pp = pidleget();
		if (!pp) {
			unlock(&sched.lock);
			if (spinning)
				atomic_fetch_sub(&sched.nmspinning, 1);
			return;
		}
	}
	struct m *nm = mget();
	if (!nm && idle && !pp->spare && atomic_load(&sched.lastpoll) == 0) {
		pidleput(pp);
		unlock(&sched.lock);
		netpollbreak();
		if (spinning)
			atomic_fetch_sub(&sched.nmspinning, 1);
		return;
	}
	unlock(&sched.lock);
	if (!nm) {
		if (newm(pp, spinning))
			return;
		lock(&sched.lock);
		if (pp->spare) {
			sparefree_put(pp);
		} else {
			pidleput(pp);
		}
		unlock(&sched.lock);
		if (spinning)
			atomic_fetch_sub(&sched.nmspinning, 1);
		return;
	}
	nm->spinning = spinning;
	nm->nextp = pp;
	notewakeup(&nm->park);
}

bool allpidle(void)
{
	int32_t n = atomic_load(&nallp);
	for (int32_t i = 0; i < n; i++)
		if (PSTATUS(atomic_load(&allp[i]->state)) != P_IDLE) /* seq_cst: see acquirep */
			return false;
	return true;
}

/* An idle M (on sched.midle) that has had no P for this long ends its
 * thread if more than gomaxprocs Ms are idle then, once no M has been
 * made for MNEW_QUIET_NS (mretire).  Go keeps
 * idle Ms for good; glibc's and most thread pools end idle workers after
 * a timeout.  The Ms of spares that sysmon lent around blocking calls
 * are idle once the calls end, and without this they stayed, one per
 * call that was ever blocked at the same time (MariaDB at 512 clients:
 * 17-88 OS threads on 2 Ps). */
#define MIDLE_RETIRE_NS 1000000000LL

/* An idle M whose wait timed out: 1 if it retired (off sched.midle,
 * uncounted); 0 if it is to wait with no timeout (kept: gomaxprocs or
 * fewer Ms idle; or handed a P meanwhile); -1 to ask again in *again ns
 * (an M was made less than the window, mquiet, ago).
 *
 * Invariant (no P for a retiring M): an idle M is handed a P only by the
 * thread that took it off sched.midle (mget, then nextp and notewakeup:
 * startm), and it retires only if it takes itself off that list, both
 * under sched.lock.  So it is either handed a P or retires, never both;
 * one that times out and finds itself off the list has a P and a
 * wake-up on their way. */
static int mretire(struct m *m, int64_t *again)
{
	int r = 0;
	lock(&sched.lock);
	int64_t now = nanotime();
	int64_t since = now - atomic_load_explicit(&lastmnew, memory_order_relaxed);
	int64_t q = atomic_load_explicit(&mquiet, memory_order_relaxed);
	if (sched.nmidle <= sched.gomaxprocs || m->lockedg) {
		r = 0; /* kept */
	} else if (since < q) {
		*again = q - since;
		r = -1;
	} else {
		r = munlist(m);
	}
	if (r > 0) {
		atomic_store_explicit(&lastmretire, now, memory_order_relaxed);
		if (since >= 2 * q && q > MNEW_QUIET_NS)
			atomic_store_explicit(&mquiet, q / 2, memory_order_relaxed);
		atomic_fetch_sub(&sched.mcount, 1);
		atomic_fetch_add_explicit(&sched.nmretired, 1, memory_order_relaxed);
		atomic_store_explicit(&m->exittid, atomic_load(&m->tid), memory_order_relaxed);
		/* seq_cst, under sched.lock, which a dump's freeze holds from
		 * before it reads the tids to its thaw: it either stopped this
		 * thread before (it waited for the lock, held) or sees 0 and
		 * asks nothing of a thread on its way out */
		atomic_store(&m->tid, 0);
	}
	unlock(&sched.lock);
	return r;
}

/* Park this M until someone hands it a P: true, holding it.  False: it
 * retired (mretire) and holds nothing; its thread is to end (mstart,
 * mexit).  An M that stays idle after its timeout sleeps with none: an
 * idle runtime uses no CPU. */
static bool stopm(struct m *m)
{
	lock(&sched.lock);
	mput(m);
	unlock(&sched.lock);
	return mpark(m);
}

/* stopm for an M already on sched.midle (findrunnable puts it there with
 * its P's pidleput). */
static bool mpark(struct m *m)
{
	/* on whatever block the scheduler kept: checkdead moves to the M's
	 * own TLS only for its /proc read and its report (two FS loads per
	 * idle M were 29% of a preloaded memcached's arch_prctl) */
	if (checkdead && allpidle())
		checkdead();
	for (int64_t wait = MIDLE_RETIRE_NS; !notetsleep(&m->park, wait);) {
		int r = mretire(m, &wait);
		if (r > 0)
			return false;
		if (r == 0) {
			notesleep(&m->park); /* kept: no timeout */
			break;
		}
	}
	noteclear(&m->park);
	acquirep(m, m->nextp);
	m->nextp = NULL;
	return true;
}

/* The end of a retired M's thread (mstart, after stopm said so), on its
 * scheduler context: it gives back what is its own, then its descriptor
 * for the next M (mnew).  Its g0 stack, static TLS and jemalloc's tsd
 * (jemalloc's key destructor: the runtime's allocations use only the Ps'
 * caches) go with the thread, through glibc, on the thread's own TLS. */
static void mexit(struct m *m)
{
	/* its own TLS loaded and no G's block kept (fsblock 0: a dead G's
	 * block in the limbo is not held by it, tls.c) */
	tls_ownfs(m);
	if (m->tlsscratch) {
		rtfree(m->tlsscratch);
		m->tlsscratch = NULL;
	}
	stack_sigaltstack_free(m);
	/* no asynchronous signal on the way out: the thread runs nothing,
	 * and its tid is 0, so nobody keeps its mask in step (the shim's
	 * ms_idle); faults still kill */
	sigset_t all;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGABRT);
	sys_sigprocmask(SIG_BLOCK, &all, NULL);
	/* from here a signal handler (the dump's SIGURG) finds a plain
	 * thread, not whichever M the descriptor is next */
	tls_m = NULL;
	/* the last use of m: the lock orders what this thread wrote before
	 * the next M's */
	lock(&sched.lock);
	m->schedlink = sched.mfree;
	sched.mfree = m;
	unlock(&sched.lock);
}

/* Hand off a P whose M is going away (blocking call, hog, idle). */
void handoffp(struct p *pp)
{
	if (!runqempty(pp) || atomic_load(&sched.runqsize) != 0) {
		startm(pp, false);
		return;
	}
	int64_t t0 = atomic_load(&pp->timer0when);
	if (t0 && t0 <= nanotime()) {
		startm(pp, false);
		return;
	}
	/* no spinning or idle M: start one to look for work */
	int32_t zero = 0;
	if (atomic_load(&sched.nmspinning) + atomic_load(&sched.npidle) == 0 &&
	    atomic_compare_exchange_strong(&sched.nmspinning, &zero, 1)) {
		startm(pp, true);
		return;
	}
	lock(&sched.lock);
	if (atomic_load(&sched.runqsize) != 0) {
		unlock(&sched.lock);
		startm(pp, false);
		return;
	}
	/* the last running P going idle: someone must watch the network */
	if (atomic_load(&sched.npidle) == sched.gomaxprocs - 1 &&
	    atomic_load(&sched.lastpoll) != 0 && atomic_load(&netpollwaiters) > 0) {
		unlock(&sched.lock);
		startm(pp, false);
		return;
	}
	pidleput(pp);
	unlock(&sched.lock);
	if (t0)
		wakenetpoller(t0);
}

/* Someone readied a G: make sure an M is looking, if a P is idle.
 * The readier stored the G before these loads; an M going idle stores
 * npidle/nmspinning (seq_cst) before re-checking the run queues, so one
 * of the two sees the other. */
void wakep(void)
{
	if (atomic_load(&sched.npidle) == 0) {
		kwait_wakeone(); /* a P waiting in the kernel can run it */
		return;
	}
	int32_t zero = 0;
	if (atomic_load(&sched.nmspinning) != 0 ||
	    !atomic_compare_exchange_strong(&sched.nmspinning, &zero, 1))
		return;
	startm(NULL, true);
}

static void resetspinning(struct m *m)
{
	m->spinning = false;
	if (atomic_fetch_sub(&sched.nmspinning, 1) < 1)
		fatal("resetspinning: negative nmspinning");
	wakep();
}

/* Put a list of ready Gs (linked by schedlink) where Ms will find them. */
void injectglist(struct g *list)
{
	if (!list)
		return;
	int n = 0;
	lock(&sched.lock);
	while (list) {
		struct g *next = list->schedlink;
		atomic_store_explicit(&list->status, G_RUNNABLE, memory_order_relaxed);
		globrunqput_locked(list);
		list = next;
		n++;
	}
	unlock(&sched.lock);
	for (; n > 0 && atomic_load(&sched.npidle) > 0; n--)
		startm(NULL, false);
	if (n > 0)
		kwait_wakeone();
}

/* ---- switching ------------------------------------------------------------- */

static bool after_runqput(struct g *gp, void *arg);

/* Owner only: a G that yielded goes behind every G queued here; with none
 * queued, into runnext, from which the next switch takes it without a
 * locked instruction (runnext_take; the ring's head takes a CAS, since
 * stealers take from the same end).  Same order: nothing else waits here.
 * A G queued later goes before it: the next yield finds the ring not
 * empty and goes to its tail (and every 61st switch the ring goes first). */
static inline __attribute__((always_inline)) void runqput_yield(struct p *pp, struct g *gp)
{
	if (rnasym && !atomic_load_explicit(&pp->runnext, memory_order_relaxed) &&
	    runqlen(pp) == 0) {
		/* release: gp's state before a stealer's acquire (runqput_inl) */
		atomic_store_explicit(&pp->runnext, gp, memory_order_release);
		return;
	}
	runqput_inl(pp, gp, false);
}

/* A busy P's look at the netpoller.  Go (and weft before) polled only
 * from an idle P's scheduler and from sysmon (every 10 ms while the Ps
 * are busy): under a thread-per-connection server whose Ps never go
 * idle, a G whose request had come sat parked for up to 10 ms and then
 * queued behind every G readied meanwhile (MariaDB at 512 clients: p95
 * 1.8x native's; docs/benchmarks.md).  Now a P polls (without blocking)
 * after every switch, and in findrunnable, when the last poll is older
 * than weftenv.pollgap_ns, 1 ms by default; the Gs go to the global queue's
 * tail, in the order their events came, as sysmon's do.  One P polls per
 * gap: the CAS on lastpoll (seq_cst, as sysmon's and findrunnable's) is
 * the turn; lastpoll == 0 means an M blocks in the netpoller, which sees
 * the events itself.  The relaxed loads first: a program with no G
 * parked on an fd pays one load per switch, not a clock read, and one
 * with some reads the clock at every 8th switch of pp only (NULL, from
 * findrunnable: every time); a vDSO clock read is
 * ~20 ns, a channel round trip ~80.  After
 * the switch, not in nextg_fast: a G that parks still holds its
 * primitive's lock there (unlockf runs after the switch), and that may
 * be the lock of the very fd whose event netpoll would take. */
static inline __attribute__((always_inline)) void busypoll(struct p *pp)
{
	if (likely(!atomic_load_explicit(&netpollwaiters, memory_order_relaxed)))
		return;
	int64_t gap = weftenv.pollgap_ns;
	if (!gap || (pp && (atomic_load_explicit(&pp->schedtick, memory_order_relaxed) & 7)))
		return;
	int64_t last = atomic_load_explicit(&sched.lastpoll, memory_order_relaxed);
	if (last == 0)
		return;
	int64_t now = nanotime();
	if (now - last < gap || !atomic_compare_exchange_strong(&sched.lastpoll, &last, now))
		return;
	atomic_fetch_add_explicit(&sched.nbusypoll, 1, memory_order_relaxed);
	int *ep = getm()->errnop, e = *ep; /* the resumed G's (afterswitch) */
	injectglist(netpoll(0));
	*ep = e;
}

/* Run the deferred work of the context we just switched away from.  A
 * yield's (back on our queue) is done inline: it is the most frequent. */
static inline __attribute__((always_inline)) bool park_publish_inl(struct parkpub *pk)
{
	uintptr_t zero = 0;
	/* release: what the parked G wrote for a taker (its waiter) before
	 * the taker's acquire CAS */
	if (atomic_compare_exchange_strong_explicit(pk->word, &zero, pk->val,
						    memory_order_release, memory_order_relaxed))
		return true;
	/* nothing published: readied to look again (runtime.h) */
	((struct waiter *)(pk->val & ~(uintptr_t)3))->result = RDVPARK_AGAIN;
	pk->parked = false;
	return false;
}

bool park_publish(struct g *gp, void *arg)
{
	(void)gp;
	return park_publish_inl(arg);
}

/* Its calls out keep errno as they find it: the resumed G's already
 * (gswitch_inl sets it before the switch), on the M's own TLS (a G with
 * a block of its own has its errno there, which they leave alone as the
 * runtime's system calls do). */
static inline __attribute__((always_inline)) void afterswitch(struct m *m)
{
	bool (*fn)(struct g *, void *) = m->afterfn;
	if (fn) {
		m->afterfn = NULL;
		if (fn == after_runqput) {
			runqput_yield(m->p, m->aftergp);
		} else if (fn == park_publish) { /* a channel hand-off's: inline */
			if (unlikely(!park_publish_inl(m->afterarg))) {
				int *ep = m->errnop, e = *ep;
				goready(m->aftergp); /* readied to look again */
				*ep = e;
			}
		} else {
			int *ep = m->errnop, e = *ep;
			if (!fn(m->aftergp, m->afterarg))
				goready(m->aftergp);
			*ep = e;
		}
	}
	busypoll(m->p);
}

static void gentry(void);

/* First switch to gp (gp->sp == NULL): its stack, the warmest in this
 * P's cache (stack.c), and the frame that enters gentry.  Done here, not
 * in weft_go, so a G that has not run costs no stack and a spawning
 * loop's Gs run on a few warm stacks. */
/* Gs whose stack could not be had at their first switch (weft_go saw
 * one that others took meanwhile, and no new chunk could be mapped).
 * They wait here, runnable but not queued, until a stack is freed
 * (stackwait_wake): the creator was told its G exists, so it is not
 * dropped, and an out-of-memory machine is not a crash. */
static struct lock stackwaitlock;
static struct g *stackwaitq;     /* linked by schedlink; stackwaitlock */
static _Atomic int32_t nstackwait; /* its length, read unlocked by stackfree */
/* Stacks freed so far: those into a P's cache counted by the P
 * (p->nstackfreed, its owner's load and store: no shared line written at
 * every G exit), the others (to the pool, or off any P) here.  A Dekker
 * pair with nstackwait: stackwait_wake counts a free, then reads
 * nstackwait; gstart counts its G in nstackwait, then reads the counts.
 * So a stack freed between gstart's failed stackalloc and its queueing is
 * seen by one of the two (it was lost: the G waited for good, and a
 * sender waiting for it hung, 1 run in 4 of faults/stack_mapping_fails_
 * enomem on a loaded machine).  The freer's side of the pair is a
 * compiler fence only when membarrier is ours (rnasym, as for runnext):
 * the waiter, rare, makes every thread pass a full barrier instead. */
static _Atomic uint64_t nstackfreed;

/* Every stack freed so far (a sum: exact once the counts it read are
 * ordered before, see stackwait_wake). */
static uint64_t stackfreed(void)
{
	uint64_t n = atomic_load(&nstackfreed);
	int32_t np = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < np; i++)
		n += atomic_load_explicit(&allp[i]->nstackfreed, memory_order_relaxed);
	return n;
}

static void stackwait_run(void);

/* Returns false if gp has no stack yet (it is put to wait). */
static __attribute__((noinline)) bool gstart(struct m *m, struct g *gp, bool fromg)
{
	/* a stack from this P's cache cannot fail: count frees only for
	 * the pool's path, which takes stacklock anyway */
	uint64_t freed = (gp->stack.lo || (m->p->nstackcache > 0 && !gp->stackwant))
				 ? 0 : stackfreed();
	/* the scheduler may have kept another G's block: the new G starts
	 * on the M's own TLS anyway, and the stack's mmap must not set that
	 * G's errno */
	if (!fromg && tlsinfo.g0keep)
		tls_ownfs(m);
	/* from a G: its errno stays what it was (a failing mmap sets it) */
	int e = fromg ? rt_geterrno() : 0;
	if (!gp->stack.lo && stackalloc(m->p, &gp->stack, gp->stackwant) != 0) {
		if (fromg)
			rt_seterrno(e);
		static _Atomic int warned;
		if (!atomic_exchange(&warned, 1))
			warn("no memory for the stack of green thread %lld: it starts when "
			     "another stack is freed",
			     (long long)gp->id);
		lock(&stackwaitlock);
		gp->schedlink = stackwaitq;
		stackwaitq = gp;
		atomic_fetch_add(&nstackwait, 1); /* seq_cst, then (barrier) the counts */
		unlock(&stackwaitlock);
		/* a freer that counted before our count of nstackwait was seen
		 * fenced only its compiler (stackwait_wake): make it pass a
		 * barrier before we read; if that fails, look again anyway */
		if ((rnasym && sys3(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) ||
		    stackfreed() != freed)
			stackwait_run(); /* one was freed meanwhile: try again */
		return false;
	}
	/* a G with TLS of its own keeps the top of its stack for the block
	 * (tls_gbegin builds it there once the G runs) */
	char *top = gp->owntls ? gp->stack.hi - tlsinfo.reserve : gp->stack.hi;
	gp->sp = weft_ctx_make(top - stackcolour(&gp->stack), gentry);
	san_gcreate(gp);
	return true;
}

/* A stack was freed (stack.c) into pp's cache (pp held by us), or not
 * into a cache (pp NULL): the Gs waiting for one are runnable again
 * (those that still find none wait again). */
void stackwait_wake(struct p *pp)
{
	if (pp) {
		atomic_store_explicit(&pp->nstackfreed,
				      atomic_load_explicit(&pp->nstackfreed, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		/* the count before the load of nstackwait: the waiter's
		 * membarrier orders them (above), else a full fence */
		if (likely(rnasym))
			atomic_signal_fence(memory_order_seq_cst);
		else
			atomic_thread_fence(memory_order_seq_cst);
	} else {
		atomic_fetch_add(&nstackfreed, 1); /* seq_cst RMW: a full barrier */
	}
	if (likely(atomic_load_explicit(&nstackwait, memory_order_relaxed) == 0))
		return;
	stackwait_run();
}

/* The waiting Gs to the global queue (not counted as a free: two Gs that
 * find no stack must not wake each other for ever). */
static void stackwait_run(void)
{
	lock(&stackwaitlock);
	struct g *list = stackwaitq;
	stackwaitq = NULL;
	atomic_store(&nstackwait, 0);
	unlock(&stackwaitlock);
	while (list) {
		struct g *next = list->schedlink;
		globrunqput(list);
		list = next;
	}
	wakep();
}

_Atomic uint64_t rt_sigkbits;
_Atomic uint64_t rt_sigkidle;
_Atomic uint32_t rt_swslow;
void (*rt_mstarted)(void);
void (*rt_sigkswitch)(struct m *m, uint64_t want);

/* rt_sigkbits set, to (NULL: the scheduler) about to run on m: its
 * blocked per-G signals into the kernel mask if the M's differ.  A
 * program's G (sigon): exactly its own.  No program G (the scheduler,
 * idle; a G of the shim's): what the M has, plus what every program G
 * blocks (rt_sigkidle), so a process-directed one stays pending for the
 * process as natively: one load and a compare unless that adds a bit. */
static __attribute__((noinline)) void sigk_switch(struct m *m, struct g *to)
{
	uint64_t have = atomic_load_explicit(&m->sigk, memory_order_relaxed), want;
	if (to && to->sigon)
		want = (atomic_load_explicit(&to->sigmask, memory_order_relaxed) |
			atomic_load_explicit(&to->sighold, memory_order_relaxed)) &
		       atomic_load_explicit(&rt_sigkbits, memory_order_relaxed);
	else
		want = have | atomic_load_explicit(&rt_sigkidle, memory_order_relaxed);
	if (want != have)
		rt_sigkswitch(m, want);
}

/* Switch from 'from' (a G, or NULL for g0) to 'to' (a G, or NULL for
 * g0).  Returns in 'from' when something switches back to it, possibly
 * on another M: returns that M (getm(), as the M that switched to us
 * passed it). */
static inline __attribute__((always_inline)) struct m *gswitch_inl(struct m *m, struct g *from,
								struct g *to)
{
	void **save = from ? &from->sp : &m->g0sp;
	if (from) {
		char *fp = __builtin_frame_address(0);
		if (fp < from->stack.low)
			from->stack.low = fp;
		if (from->stack.kind == STACK_CANARY && !stackcanary_ok(&from->stack))
			stack_overflow(from);
	}
	/* a G's first switch gives it its stack; with none to be had, it
	 * waits for one and this M goes to its scheduler instead */
	if (to && unlikely(!to->sp) && !gstart(m, to, from != NULL)) {
		if (!from)
			return m; /* already on g0: its scheduler loop goes on */
		to = NULL;
	}
	/* release (a plain store on x86): sysmon, which reads the G's status
	 * through it (acquire), sees the G as made (struct m) */
	atomic_store_explicit(&m->curg, to, memory_order_release);
	void *next;
	if (to) {
		atomic_store_explicit(&to->status, G_RUNNING, memory_order_relaxed);
		/* only the owner writes it: no locked RMW (struct p) */
		ctx_tally32(&m->p->schedtick);
		next = to->sp;
	} else {
		next = m->g0sp;
	}
	mtally(from ? (to ? &m->nswgg : &m->nswg0) : &m->nsw0g);
	/* a G's CPU clock (cpuclock.c), the kernel mask's per-G signals
	 * (runtime.h), the FS base (tls.c): one load while none is in use
	 * (a linked program that asks no G's clock) */
	uint32_t slow = atomic_load_explicit(&rt_swslow, memory_order_relaxed);
	if (unlikely(slow & (SW_GCPU | SW_SIGK))) {
		if (slow & SW_GCPU)
			gcpu_switch(m, from, to);
		if ((slow & SW_SIGK) && atomic_load_explicit(&rt_sigkbits, memory_order_relaxed))
			sigk_switch(m, to);
	}
	san_switch_start(m, from, to);
	if (slow & SW_TLS)
		tls_loadfs(m, to);
	/* errno of the Gs on the M's own TLS (one with a block of its own
	 * keeps it there): ours saved, and the next G's restored here, on
	 * the thread it will run on, where both are known - not by each G
	 * after the switch, which had to test and load again what we have
	 * at hand.  (afterswitch keeps errno as it finds it.) */
	int *ep = m->errnop;
	if (from && (!(slow & SW_TLS) || !from->tcb))
		from->errno_save = *ep;
	if (to && (!(slow & SW_TLS) || !to->tcb))
		*ep = to->errno_save;
	/* the context we resume in runs on this M: it gets m from us,
	 * rather than reading TLS again (getm) */
	m = weft_ctx_switch(save, next, m);
	san_switch_finish(m, from);
	afterswitch(m);
	return m;
}

/* gswitch_inl's out-of-line copy, for the scheduler's less frequent paths. */
static __attribute__((noinline)) void gswitch(struct m *m, struct g *from, struct g *to)
{
	gswitch_inl(m, from, to);
}

/* The first code a new G runs (via weft_ctx_start). */
static void goexit1(void) __attribute__((noreturn));

static void gentry(void)
{
	struct m *m = getm();
	san_switch_finish(m, m->curg);
	afterswitch(m);
	struct g *gp = m->curg;
	rtdepth_set(gp, 0);
	leaveruntime(m);
	if (gp->owntls)
		tls_gbegin(gp);
	gp->fn(gp->arg);
	goexit1();
}

/* A runnable G that can run here now without the scheduler context:
 * runnext or local, the global queue every 61 switches or when the local
 * one is empty.  Runs due timers first.  Every 61st switch the ring's
 * head also goes before runnext: two Gs that keep readying each other
 * into runnext (a channel ping-pong) would otherwise never let the ring
 * run on this P (Go bounds them by a shared time slice and sysmon's
 * 10 ms preemption; a count needs no clock and no sysmon). */
static inline __attribute__((always_inline)) struct g *nextg_fast(struct m *m, struct p *pp)
{
	if (unlikely(atomic_load_explicit(&pp->retired, memory_order_relaxed) ||
		     (pp->spare && atomic_load_explicit(&sched.nretire, memory_order_relaxed))))
		return NULL; /* the scheduler context retires this P */
	int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
	if (t0 && t0 <= nanotime())
		checktimers(pp, nanotime());
	struct g *gp = NULL;
	bool fair = atomic_load_explicit(&pp->schedtick, memory_order_relaxed) % 61 == 0;
	if (fair && atomic_load_explicit(&sched.runqsize, memory_order_relaxed)) {
		lock(&sched.lock);
		gp = globrunqget(pp, 1);
		unlock(&sched.lock);
	}
	if (!gp)
		gp = runqget_inl(pp, NULL, fair);
	if (!gp && atomic_load_explicit(&sched.runqsize, memory_order_relaxed)) {
		lock(&sched.lock);
		gp = globrunqget(pp, 0);
		unlock(&sched.lock);
	}
	if (gp && gp->lockedm && gp->lockedm != m) {
		/* it must run on its own M: let the scheduler hand it over */
		runqput(pp, gp, true);
		return NULL;
	}
	(void)m;
	return gp;
}

/* Switch away from the running G gp, which the caller has made
 * runnable or waiting and set m->afterfn for. */
static inline __attribute__((always_inline)) struct m *gleave(struct m *m, struct g *gp)
{
	struct g *next = m->lockedg ? NULL : nextg_fast(m, m->p);
	return gswitch_inl(m, gp, next);
}

/* Park gp, running on m, inside the runtime (rtdepth > 0).  See runtime.h. */
static inline __attribute__((always_inline)) struct m *
gopark_g_inl(struct m *m, struct g *gp, bool (*unlockf)(struct g *, void *), void *arg, int reason)
{
	if (!m || !gp)
		__builtin_unreachable(); /* for the compiler: the inlined tests of either go */
	atomic_store_explicit(&gp->waitreason, (uint8_t)reason, memory_order_relaxed);
	atomic_store_explicit(&gp->waitsince, atomic_load_explicit(&coarsenow, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&gp->status, G_WAITING, memory_order_relaxed);
	m->afterfn = unlockf;
	m->aftergp = gp;
	m->afterarg = arg;
	return gleave(m, gp);
}

struct m *gopark_g(struct m *m, struct g *gp, bool (*unlockf)(struct g *, void *), void *arg,
		   int reason)
{
	return gopark_g_inl(m, gp, unlockf, arg, reason);
}

/* The parking half of an unbuffered channel's hand-off (chan.c's fast
 * path), in one frame: the waiter, its publication and the park inline
 * here, so the frame that saves the callee-saved registers around the
 * switch is the only one between the public call and weft_ctx_switch
 * (with chan.c's own frame for the waiter and a call to gopark_g, the
 * registers were saved twice).  No stack protector: the frame holds the
 * waiter and the publication record, no array, nothing written through
 * a length (the element is copied into the caller's memory, w.elem). */
NO_STACK_PROTECTOR struct rdvpark gopark_rdv(struct m *m, struct g *gp, _Atomic uintptr_t *word,
					     uintptr_t how, void *elem, rdvother_fn other)
{
	struct waiter w;
	waiter_init_word(&w, gp);
	w.elem = elem;
	/* the commit publishes w in the word (release: w's fields before a
	 * taker's acquire CAS), after the switch: park_publish */
	struct parkpub pk = { word, (uintptr_t)&w | (how & 0xff), true };
	m = gopark_g_inl(m, gp, park_publish, &pk, (int)(how >> 8)); /* perhaps another M now */
	/* from here on gp, word and elem are read where they are in memory
	 * anyway (the waiter, the record), not kept in the frame from the
	 * start: across the switch every register is lost (weft_ctx_switch),
	 * and a value live across it is spilled at once and reloaded at
	 * each use before it too */
	/* the result as the taker (or close) set it, or RDVPARK_AGAIN as
	 * the commit did.  No acquire load of waitstate (rdv_park's): the G
	 * was readied after its waiter was completed and runs now because a
	 * switch took it from a run queue, and that order (the queue's
	 * release and acquire) already makes the result visible */
	int32_t res = w.result;
	if (likely(res == RDVPARK_TAKEN))
		return (struct rdvpark){ m, 0 };
	return (struct rdvpark){ NULL, other(pk.word, m, w.elem, res) };
}

/* Park the running G.  See runtime.h. */
void gopark(bool (*unlockf)(struct g *, void *), void *arg, int reason)
{
	struct m *m = getm();
	struct g *gp = m->curg;
	/* from inside the runtime (a channel, a waiter: rtdepth > 0) the
	 * bracket would only count up and down; an outermost call makes it,
	 * for its checks of sysmon's flags */
	if (gp->rtdepth) {
		gopark_g(m, gp, unlockf, arg, reason);
		return;
	}
	rt_enter_g(m, gp);
	gopark_g(m, gp, unlockf, arg, reason);
	rt_leave(); /* perhaps on another M now */
}

/* Make gp runnable, from m (NULL: a plain thread), whose running G if
 * any is inside the runtime, or that runs no G: on m's P's queue if it
 * holds one (runnext: next), else globally. */
static inline __attribute__((always_inline)) void ready_m(struct m *m, struct g *gp, bool next)
{
	atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
	atomic_store_explicit(&gp->waitreason, W_NONE, memory_order_relaxed);
	if (m && m->p) {
		runqput_inl(m->p, gp, next);
		/* with one P, ours runs gp: no idle P to wake, and no point
		 * in ending another M's kernel wait (kwait_wakeone: a seq_cst
		 * fence per ready, 2 per channel round trip) to run it beside
		 * us (a spare there ran an M stuck elsewhere) */
		if (atomic_load_explicit(&sched.gomaxprocs, memory_order_relaxed) == 1)
			return;
	} else {
		globrunqput(gp);
	}
	wakep();
}

/* Make gp runnable: on this P's queue if we hold one, else globally.
 * The runtime bracket only for an outermost call on a G (as gopark). */
static void ready(struct g *gp, bool next)
{
	struct m *m = getm();
	struct g *cur = m ? atomic_load_explicit(&m->curg, memory_order_relaxed) : NULL;
	if (!cur || cur->rtdepth) {
		ready_m(m, gp, next);
		return;
	}
	rt_enter_g(m, cur);
	ready_m(m, gp, next);
	rt_leave_g(m, cur);
}

void goready(struct g *gp)
{
	ready(gp, true);
}

void goready_tail(struct g *gp)
{
	ready(gp, false);
}

void goready_m_slow(struct m *m, struct g *gp)
{
	ready_m(m, gp, true);
}

/* Owner only: gp's timer fired (its P's M fires them at a switch,
 * nextg_fast/findrunnable, or a stealer fires a victim's onto its own
 * P).  It goes to runnext, so the next switch runs it, ahead of the Gs
 * in the ring - among them, on a busy P, Gs that were preempted or
 * yielded and will run again anyway.  At the ring's tail, as every
 * woken sleeper went before, it waited behind all of them: under 8 Gs
 * that never park and take sysmon's yield requests (a preloaded
 * thread-per-connection loop: test_preload_serve), a 1 ms sleep on 1 P
 * took a whole round of them, 8 hand-offs of a sysmon round each,
 * 0.2-0.7 s at load 40-90, and the test ran past its timeout.
 * The invariant kept here: sleepers still wake in deadline order.  A G
 * goes to runnext only if no G readied by an earlier timer of this P
 * still waits - neither in runnext (tmrnext) nor in the ring up to the
 * tail it was queued at (tmrmark; the head is past it once every G
 * before it has been taken, by us or a stealer; runqput_inl moves the
 * mark when it kicks tmrnext from runnext to the tail) - else to the
 * tail behind it (test sched::sleep_order_not_early). */
static void runqput_timer(struct p *pp, struct g *gp)
{
	struct g *rn = atomic_load_explicit(&pp->runnext, memory_order_relaxed);
	/* acquire: as runqput_inl's, a stealer's advance of the head */
	uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
	if ((!rn || rn != pp->tmrnext) && (int32_t)(h - pp->tmrmark) >= 0) {
		pp->tmrnext = gp;
		runqput_inl(pp, gp, true); /* a peer in runnext goes to the tail */
		return;
	}
	runqput_inl(pp, gp, false);
	pp->tmrmark = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
}

void goready_timer(struct g *gp)
{
	struct m *m = getm();
	struct g *cur = m ? atomic_load_explicit(&m->curg, memory_order_relaxed) : NULL;
	if (!m || !m->p) {
		ready(gp, false); /* sysmon, a plain thread: the global queue */
		return;
	}
	bool bracket = cur && !cur->rtdepth;
	if (bracket)
		rt_enter_g(m, cur);
	atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
	atomic_store_explicit(&gp->waitreason, W_NONE, memory_order_relaxed);
	runqput_timer(m->p, gp);
	if (atomic_load_explicit(&sched.gomaxprocs, memory_order_relaxed) != 1)
		wakep(); /* as ready_m */
	if (bracket)
		rt_leave_g(m, cur);
}

static bool after_runqput(struct g *gp, void *arg)
{
	(void)arg;
	runqput_yield(getm()->p, gp);
	return true;
}

static bool after_globrunqput(struct g *gp, void *arg)
{
	(void)arg;
	globrunqput(gp);
	return true;
}

/* nextg_fast gave no G to a G that gives way (a yield, sysmon's request):
 * must it go through the scheduler all the same?  Yes while Gs wait here
 * (the G nextg_fast took must run on its own M: schedule hands it over)
 * or the P is to retire (a spare no longer needed, or shrunk away:
 * nextg_fast gives nothing then, and only findrunnable hands the P's Gs
 * on).  Invariant: a G on the run queue of a P to retire is handed on at
 * the next yield or preemption of the G running there, not only when
 * that G parks.  A G spinning on sched_yield on a spare kept the Gs
 * queued there for good (real::sched_yield_lets_other_gs_run), and so
 * did one taking sysmon's requests in gpreempt (sched::
 * retiring_spare_hands_on_its_gs). */
static bool mustsched(struct p *pp)
{
	return !runqempty(pp) || atomic_load_explicit(&pp->retired, memory_order_relaxed) ||
	       (pp->spare && atomic_load_explicit(&sched.nretire, memory_order_relaxed));
}

void weft_yield(void)
{
	(void)rt_yield();
}

bool rt_yield(void)
{
	struct m *m = getm();
	struct g *gp;
	if (!m || !(gp = m->curg)) {
		osyield();
		return true;
	}
	rt_enter_g(m, gp); /* we know m and gp already */
	struct p *pp = m->p;
	struct g *next = m->lockedg ? NULL : nextg_fast(m, pp);
	/* none from nextg_fast while Gs wait: its P is to retire (a spare no
	 * longer needed), or the G it took must run on its own M.  Only the
	 * scheduler does either (findrunnable hands the P's Gs on, schedule
	 * the locked G to its M), so go through it: a G spinning on
	 * sched_yield on a spare kept the Gs queued there for good (haproxy's
	 * `show threads`, real::sched_yield_lets_other_gs_run) */
	bool viasched = m->lockedg || (!next && mustsched(pp));
	if (next || viasched) {
		atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
		m->afterfn = next ? after_runqput : after_globrunqput;
		m->aftergp = gp;
		m = gswitch_inl(m, gp, next); /* we may be on another M now */
	}
	rt_leave_g(m, gp);
	return next || viasched;
}

/* A turn (runtime.h).  A thread-per-connection server's G whose client
 * answers quickly finds its next request already there at every receive
 * and never parks: it serves a streak of requests while the others wait
 * a whole round of the run queue, where the kernel would have put each
 * woken thread before one that has run (MariaDB at 512 clients: p95
 * 1.8-2.7x native's; docs/benchmarks.md).  A turn at every request
 * bounds the wait but costs a switch per request (~20-30 us of the
 * server's CPU on a VM without FSGSBASE); so a G gives way at a request
 * only once its run has lasted the quantum.  The run's start is taken
 * lazily, at its first request boundary (the P's schedtick tells a new
 * run), so that the switch itself reads no clock: one vDSO read per
 * request after a reply.  To the global queue's tail, as a preempted G,
 * behind the Gs the netpoller readied meanwhile. */
void rt_turn(struct m *m, struct g *gp)
{
	gp->turnsent = false;
	int64_t q = weftenv.turn_ns;
	if (!q || m->lockedg || gp->rtdepth ||
	    atomic_load_explicit(&gp->status, memory_order_relaxed) != G_RUNNING)
		return;
	struct p *pp = m->p;
	uint32_t tick = atomic_load_explicit(&pp->schedtick, memory_order_relaxed);
	int64_t now = nanotime();
	if (gp->turnp != pp || gp->turntick != tick) {
		gp->turnp = pp; /* a new run: its first boundary */
		gp->turntick = tick;
		gp->turnstart = now;
		return;
	}
	if (now - gp->turnstart < q)
		return;
	rt_enter_g(m, gp);
	/* the netpoller first, if no P looked for a pollgap: a P whose Gs
	 * streak never switches, so never polls (busypoll), and the Gs whose
	 * requests came meanwhile waited for sysmon's 10 ms look - with none
	 * queued here, the streak went on (MariaDB, 16 clients: p99 15-20 ms
	 * against native's 1.6) */
	busypoll(NULL);
	struct g *next = nextg_fast(m, pp);
	if (next || mustsched(pp)) { /* none: a spare to retire (mustsched) */
		atomic_fetch_add_explicit(&sched.nturn, 1, memory_order_relaxed);
		atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
		m->afterfn = after_globrunqput;
		m->aftergp = gp;
		m = gswitch_inl(m, gp, next); /* we may be on another M now */
	} else {
		gp->turnstart = now; /* nobody waits: a new quantum */
	}
	rt_leave_g(m, gp);
}

/* ---- G lifecycle --------------------------------------------------------- */

/* Count a G made (+1) or ended (-1) on pp (held by us), or off any P. */
static void gcountadd(struct p *pp, int64_t d)
{
	if (pp)
		atomic_store_explicit(&pp->ngs,
				      atomic_load_explicit(&pp->ngs, memory_order_relaxed) + d,
				      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&sched.ngs, d, memory_order_relaxed);
}

/* Live Gs.  Exact when nothing spawns or ends meanwhile (the deadlock
 * detector reads it twice around its checks); otherwise a recent value. */
int64_t gcount(void)
{
	int64_t n = atomic_load(&sched.ngs);
	int32_t np = atomic_load(&nallp);
	for (int32_t i = 0; i < np; i++)
		n += atomic_load_explicit(&allp[i]->ngs, memory_order_relaxed);
	return n;
}

static int64_t newgoid(struct p *pp)
{
	if (!pp)
		return atomic_fetch_add(&sched.goidgen, 1) + 1;
	if (pp->goidcache == pp->goidcacheend) {
		pp->goidcache = atomic_fetch_add(&sched.goidgen, 16) + 1;
		pp->goidcacheend = pp->goidcache + 16;
	}
	return pp->goidcache++;
}

/* Push the batch list (n dead Gs linked by schedlink, NULL-terminated)
 * on the global free list; sched.lock held. */
static void gfree_push_locked(struct g *list, int32_t n)
{
	list->gfbatch = sched.gfree;
	list->gfbatchn = n;
	sched.gfree = list;
	__atomic_fetch_add(&sched.ngfree, n, __ATOMIC_RELAXED);
}

/* A dead G's descriptor, from pp's list or the global one.  It has no
 * stack, or a segmented one (splitstack_prepare decides).  An empty
 * pp's list takes a whole batch from the global one without walking it:
 * the batch's descriptors were freed on another P, and reading each
 * one's schedlink in a row here was a chain of cache misses (15 % of a
 * 2-P spawn loop's samples); the miss on each now comes when it is
 * used, and its first use touches that line anyway. */
static struct g *gfget(struct p *pp)
{
	struct g *gp = NULL;
	if (pp) {
		if (!pp->gfree && __atomic_load_n(&sched.ngfree, __ATOMIC_RELAXED) > 0) {
			lock(&sched.lock);
			struct g *b = sched.gfree;
			if (b) {
				sched.gfree = b->gfbatch;
				__atomic_fetch_sub(&sched.ngfree, b->gfbatchn, __ATOMIC_RELAXED);
				pp->gfree = b;
				pp->gfreecnt = b->gfbatchn;
				pp->gfcold = b->gfbatchn;
			}
			unlock(&sched.lock);
		}
		gp = pp->gfree;
		if (gp) {
			struct g *next = gp->schedlink;
			pp->gfree = next;
			pp->gfreecnt--;
			/* a descriptor freed on another P is a miss per line we
			 * touch: ask for the rest of gp's lines (weft_go writes
			 * them all) and the next one's first two at once, so
			 * that they come together, not one after the other
			 * (not for this P's own, still in its caches) */
			if (pp->gfcold > 0) {
				pp->gfcold--;
				for (size_t off = 128; off < sizeof *gp; off += 64)
					__builtin_prefetch((char *)gp + off, 1);
				if (next) {
					__builtin_prefetch(next, 1);
					__builtin_prefetch((char *)next + 64, 1);
				}
			}
		}
	} else if (__atomic_load_n(&sched.ngfree, __ATOMIC_RELAXED) > 0) {
		lock(&sched.lock);
		gp = sched.gfree;
		if (gp) {
			struct g *rest = gp->schedlink;
			if (rest) { /* the rest of its batch stays a batch */
				rest->gfbatch = gp->gfbatch;
				rest->gfbatchn = gp->gfbatchn - 1;
				sched.gfree = rest;
			} else {
				sched.gfree = gp->gfbatch;
			}
			__atomic_fetch_sub(&sched.ngfree, 1, __ATOMIC_RELAXED);
		}
		unlock(&sched.lock);
	}
	return gp;
}

/* No descriptor could be allocated (ENOMEM): a dead G from an idle P's own
 * list, which a spawner without a P (or on another P) never sees and which
 * no one else will free (a process at its RLIMIT_AS, the Gs that ended
 * there kept).  An idle P has no owner to touch its list, and only a
 * holder of sched.lock takes a P off the idle list (acquirep), so the
 * lock makes the list ours meanwhile. */
static struct g *gfget_idle(void)
{
	struct g *gp = NULL;
	lock(&sched.lock);
	for (struct p *pp = sched.pidle; pp && !gp; pp = pp->link) {
		gp = pp->gfree;
		if (gp) {
			pp->gfree = gp->schedlink;
			pp->gfreecnt--;
			if (pp->gfcold > 0)
				pp->gfcold--;
		}
	}
	unlock(&sched.lock);
	return gp;
}

#define GFREE_GLOBAL_STACKS 16384 /* dead Gs beyond this give their segmented stacks back */

/* A dead G to pp's list; past 64, its oldest 32 go to the global list as
 * one batch. */
static void gfput(struct p *pp, struct g *gp)
{
	gp->schedlink = pp->gfree;
	pp->gfree = gp;
	if (++pp->gfreecnt < 64)
		return;
	struct g *list = NULL;
	int n = 0;
	while (pp->gfreecnt > 32) {
		struct g *g1 = pp->gfree;
		pp->gfree = g1->schedlink;
		pp->gfreecnt--;
		if (__atomic_load_n(&sched.ngfree, __ATOMIC_RELAXED) + n >= GFREE_GLOBAL_STACKS)
			stackfree(pp, &g1->stack);
		g1->schedlink = list;
		list = g1;
		n++;
	}
	lock(&sched.lock);
	gfree_push_locked(list, n);
	unlock(&sched.lock);
}

/* A new descriptor (no stack: see gstart). */
static struct g *malg(void)
{
	struct g *gp = rtalloc(sizeof *gp);
	if (!gp)
		return NULL;
	memset(gp, 0, sizeof *gp);
	allgadd(gp);
	return gp;
}

extern int splitstack_prepare(struct g *gp, const weft_attr_t *attr) __attribute__((weak));

/* Whether a new G gets TLS of its own (tls.c): asked in attr, else
 * WEFT_TLS (rt_tls_default: the preload shim's choice when unset).  Not
 * for a segmented stack: libgcc keeps its segments' state in TLS. */
int rt_tls_default HIDDEN;
static bool gowntls(const weft_attr_t *attr)
{
	int t = attr ? attr->tls : WEFT_TLS_DEFAULT;
	if (t == WEFT_TLS_DEFAULT)
		t = (weftenv.tls >= 0 ? weftenv.tls : rt_tls_default) ? WEFT_TLS_THREAD
								     : WEFT_TLS_SHARED;
	if (t != WEFT_TLS_THREAD)
		return false;
	int kind = attr && attr->stack_kind ? attr->stack_kind : weftenv.stackkind;
	return kind != WEFT_STACK_SEGMENTED && tls_init();
}

/* What every G, new or reused, starts from (weft_go_attr, rt_adopt): a
 * fresh id and name, no lock, no signal, no cancel, no TLS, not waiting,
 * and in the runtime (rtdepth 1) until it first reaches the program's
 * code. */
static void gprepare(struct g *gp, struct p *pp, const char *name)
{
	gp->id = newgoid(pp);
	gp->lockedm = NULL;
	gp->lockcount = 0;
	gp->errno_save = 0;
	rtdepth_set(gp, 1);
	atomic_store_explicit(&gp->waitreason, W_NONE, memory_order_relaxed);
	atomic_store_explicit(&gp->blocking, 0, memory_order_relaxed);
	gp->tls = NULL;
	gp->introk = false;
	gp->rtdeadline = 0;
	atomic_store_explicit(&gp->intrreq, 0, memory_order_relaxed);
	gp->sigon = false;
	atomic_store_explicit(&gp->sigpend, 0, memory_order_relaxed);
	atomic_store_explicit(&gp->cancel, 0, memory_order_relaxed);
	gcpu_reset(gp);
	if (gp->name)
		rtfree(gp->name);
	gp->name = NULL;
	if (name) {
		size_t n = strlen(name);
		gp->name = rtalloc(n + 1);
		if (gp->name)
			memcpy(gp->name, name, n + 1);
	}
}

/* weft_go's wakep for a G queued on our own P, which runs it if no one
 * else does: an idle P gets an M (wakep), as for any readied G; with none
 * idle, a P waiting in the kernel (kwait_wakeone) is asked only if one
 * is seen, without wakep's fence first (Go's wakep makes no fence
 * either).  That fence, a seq_cst one ordering our queueing before the
 * look at nkwait, waited at every spawn for the stores to the ring's
 * line, which an idle P's stealer keeps reading (23 % of a 2-P spawn
 * loop's samples).  Without it an M that starts a kernel wait while we
 * queue may miss our G and we miss it: the G then runs here, when the
 * spawner parks or yields, instead of beside it at once. */
static void spawnwake(void)
{
	if (atomic_load_explicit(&sched.npidle, memory_order_relaxed) == 0) {
		if (atomic_load_explicit(&sched.nkwait, memory_order_relaxed) != 0)
			kwait_wakeone();
		return;
	}
	wakep();
}

int64_t weft_go_attr(const weft_attr_t *attr, void (*fn)(void *), void *arg)
{
	if (!fn || (attr && attr->stack_size &&
		    (attr->stack_size < 16 * 1024 || attr->stack_size > (1UL << 30))) ||
	    (attr && (attr->stack_kind < 0 || attr->stack_kind > WEFT_STACK_SEGMENTED)) ||
	    (attr && (attr->tls < WEFT_TLS_DEFAULT || attr->tls > WEFT_TLS_THREAD))) {
		errno = EINVAL;
		return -1;
	}
	runtime_ensure();
	struct m *m = rt_enter();
	struct p *pp = (m && m->curg) ? m->p : NULL;
	struct g *gp = gfget(pp);
	if (!gp)
		gp = malg();
	if (!gp)
		gp = gfget_idle();
	if (gp) {
		gp->stackwant = attr ? attr->stack_size : 0;
		gp->owntls = gowntls(attr);
		gp->tcb = NULL;
	}
	/* the stack: segmented now, guarded when the G first runs (gstart) */
	if (gp && splitstack_prepare && splitstack_prepare(gp, attr) != 0) {
		lock(&sched.lock); /* no stack to be had: back to the free list */
		gp->schedlink = NULL;
		gfree_push_locked(gp, 1);
		unlock(&sched.lock);
		gp = NULL;
	}
	if (!gp) {
		rt_leave();
		errno = ENOMEM;
		return -1;
	}
	gp->fn = fn;
	gp->arg = arg;
	gprepare(gp, pp, attr ? attr->name : NULL); /* gentry: in the runtime until fn */
	gp->sp = NULL; /* gstart makes the first frame when it first runs */
	if (unlikely(loaderlock_mine())) {
		/* made inside a dlopen's relocation (an IFUNC resolver), as
		 * natively on the thread that holds the loader's TLS lock: its
		 * TLS, and an M to run it should this G block (loaderlock.c) */
		if (gp->owntls)
			tls_gprep(gp);
		mspare();
	}
	gcountadd(pp, 1);
	int64_t id = gp->id; /* once queued, gp may run, end and be reused */
	/* release: a dump that sees it live (acquire) sees its id and name,
	 * even when a plain thread, which a dump does not stop, made it */
	atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_release);
	/* runnext if it is empty, else the ring's tail: a spawning loop
	 * does not exchange runnext at every spawn (a locked instruction on
	 * the line an idle P's stealer keeps reading: 22 % of a 2-P spawn
	 * loop's samples), and runnext, which a stealer takes only last and
	 * with a membarrier, holds one G, not always the newest */
	if (pp)
		runqput(pp, gp, !atomic_load_explicit(&pp->runnext, memory_order_relaxed));
	else
		globrunqput(gp);
	sysmon_owed(m, false); /* a fork child's second G: now there is work to watch */
	/* with one P the G is ours to run, as in ready: no wakep (its
	 * kwait_wakeone is a seq_cst fence per spawn, 5 % of a 1-P spawn
	 * loop's samples) */
	if (!pp)
		wakep();
	else if (atomic_load_explicit(&sched.gomaxprocs, memory_order_relaxed) != 1)
		spawnwake();
	/* A spawner that has filled its P's queue yields to the Gs it made
	 * (it goes to the tail) instead of letting the next spawn spill half
	 * the queue to the global one: a spawning loop then works on a few
	 * hundred warm descriptors and stacks rather than on a backlog of
	 * thousands that fell out of the caches.  Idle Ps still steal.  Only
	 * for a call from G code (rtdepth 1: ours), never from inside the
	 * runtime. */
	if (pp && !m->lockedg && m->curg->rtdepth == 1 &&
	    (runqlen(pp) >= RUNQ_SIZE - 1 ||
	     (atomic_load_explicit(&pp->flags, memory_order_relaxed) & PF_PREEMPT))) {
		/* and a spawner sysmon asked to give way (it ran 10 ms with
		 * Gs waiting: its spawns are slow, or others steal them as
		 * fast as it makes them) does so here, its runtime call,
		 * rather than have a spare P lent around it */
		atomic_fetch_and_explicit(&pp->flags, ~PF_PREEMPT, memory_order_relaxed);
		weft_yield();
	}
	rt_leave();
	return id;
}

int64_t weft_go(void (*fn)(void *), void *arg)
{
	return weft_go_attr(NULL, fn, arg);
}

static bool after_gfput(struct g *gp, void *arg)
{
	(void)arg;
	san_gdestroy(gp);
	/* its block may still be loaded on another M whose scheduler kept
	 * it: then the M that moves off it frees it (tls.c, the limbo) */
	if (!gp->tcb || tls_release(gp))
		gfreedead(gp);
	return true;
}

/* A dead G, off every M: its block, stack and descriptor to the caches
 * of this M's P. */
void gfreedead(struct g *gp)
{
	if (gp->tcb)
		tls_gfree(gp); /* before its stack, which holds the block, is reused */
	struct p *pp = getm()->p;
	/* its stack, the warmest, to the top of pp's cache for the next G to
	 * start here; a segmented one stays for the next segmented G */
	if (gp->stack.kind == STACK_THREAD)
		memset(&gp->stack, 0, sizeof gp->stack); /* not ours: rt_adopt */
	else if (gp->stack.kind != STACK_SEGMENTED)
		stackfree(pp, &gp->stack);
	gfput(pp, gp);
}

static void goexit1(void)
{
	struct m *m = rt_enter();
	struct g *gp = m->curg;
	if (rt_gexit_hook)
		rt_gexit_hook(gp);
	tls_gdtors(gp); /* if the shim's exit path did not: as a thread ends */
	m = getm(); /* the hook may have parked */
	if (gp->lockedm) {
		atomic_store_explicit(&m->lockedg, NULL, memory_order_relaxed);
		gp->lockedm = NULL;
		gp->lockcount = 0;
	}
	atomic_store_explicit(&gp->status, G_DEAD, memory_order_relaxed);
	gcountadd(m->p, -1);
	m->afterfn = after_gfput;
	m->aftergp = gp;
	gleave(m, gp);
	fatal("a dead green thread was resumed");
}

/* ---- adopting a running context --------------------------------------- */

static struct g *adoptg;            /* rt_adopt: the G being handed over */
static void (*adoptthen)(void);    /* what the thread runs after it */

/* On the thread's new stack: gp's context is saved (gp->sp), so any M
 * may now run it. */
static void adopt_entry(void)
{
	struct g *gp = adoptg;
	void (*then)(void) = adoptthen;
	/* release: the M that takes gp from the queue sees its sp */
	atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_release);
	globrunqput(gp);
	wakep();
	then();
	fatal("rt_adopt: the thread's continuation returned");
}

int64_t rt_adopt(const char *name, char *lo, char *hi, char *althi, void (*then)(void))
{
	runtime_ensure();
	struct g *gp = gfget(NULL);
	if (!gp)
		gp = malg();
	if (!gp)
		gp = gfget_idle();
	if (!gp) {
		errno = ENOMEM;
		return -1;
	}
	if (gp->stack.lo) /* a dead G's stack that it kept: back to the pool */
		stackfree(NULL, &gp->stack);
	/* the fields weft_go_attr sets for a new G */
	gp->stackwant = 0;
	gp->owntls = false;
	gp->tcb = NULL;
	gp->fn = NULL;
	gp->arg = NULL;
	gprepare(gp, NULL, name); /* in the runtime until back in its caller, below */
	/* its stack is the thread's own: never pooled or freed (after_gfput) */
	gp->stack = (struct stack){ .lo = lo, .hi = hi, .kind = STACK_THREAD,
				    .low = __builtin_frame_address(0) };
	san_gcreate(gp);
	gcpu_adopt(gp); /* the thread's CPU time so far is the G's */
	gcountadd(NULL, 1);
	int64_t id = gp->id;
	int e = errno;
	adoptg = gp;
	adoptthen = then;
	struct m *m = weft_ctx_switch(&gp->sp, weft_ctx_make(althi, adopt_entry), NULL);
	/* now on an M that took gp from the global queue, as gp (the tail
	 * of gswitch_inl, for a context it did not save itself): that M's
	 * switch passed it */
	san_switch_finish(m, gp);
	afterswitch(m);
	errno = e;
	rtdepth_set(gp, 0);
	leaveruntime(m);
	return id;
}

_Noreturn void weft_exit(void)
{
	if (!getg())
		sys_pthread_exit(NULL);
	goexit1();
}

int64_t weft_self(void)
{
	struct g *gp = getg();
	return gp ? gp->id : 0;
}

/* ---- entering and leaving the runtime ------------------------------------ */

/* ---- lending Ps around stuck Ms ------------------------------------------- */

/* Retire one spare P: an idle one now, else the next busy one to pass
 * through its scheduler.  sched.lock held. */
static void retire_spare_locked(void)
{
	for (struct p **pl = &sched.pidle; *pl; pl = &(*pl)->link) {
		struct p *pp = *pl;
		if (pp->spare) {
			*pl = pp->link;
			atomic_fetch_sub(&sched.npidle, 1);
			sparefree_put(pp);
			return;
		}
	}
	atomic_fetch_add(&sched.nretire, 1);
}

static struct p *newp(int32_t id);
static void givebackp(struct p *pp);

/* sysmon: pp's M is stuck and Gs wait; see runtime.h.  hog: it runs G
 * code rather than sitting in a blocking call.  Blocked Ms use no CPU, so
 * spares for them are not capped (as Go makes Ms for blocked calls).
 * Spares for hogs are capped (HOG_SPARES_MAX): C code cannot be preempted,
 * so each hog that must not starve the Gs behind it costs a thread, and
 * past the cap further hogs wait for one to enter the runtime. */
#define HOG_SPARES_MAX(procs) (4 * (procs) + 4)
void lendp(struct p *pp, bool hog)
{
	if (atomic_load(&sched.npidle) > 0) {
		wakep(); /* an idle P can take the waiting Gs: no need to lend */
		return;
	}
	/* no idle M, and none can be made until a dlopen ends (newm):
	 * nothing to lend to now; sysmon asks again next round */
	if (unlikely(loaderlock_other())) {
		lock(&sched.lock);
		bool none = sched.nmidle == 0;
		unlock(&sched.lock);
		if (none)
			return;
	}
	/* spares that still run (a lent P's spare retires only at its next
	 * trip through the scheduler) count against the cap */
	if (hog && atomic_load(&sched.nspares) >= HOG_SPARES_MAX(sched.gomaxprocs))
		return;
	uint32_t old = atomic_fetch_or(&pp->flags, PF_LENT | (hog ? PF_LENT_HOG : 0));
	bool extra = old & PF_LENT;
	if (extra) {
		if (hog)
			return;
		/* a blocked M: one more spare, given back with the first */
		atomic_fetch_add(&pp->nlent, 1);
	} else if (hog) {
		atomic_fetch_add(&sched.nhogspares, 1);
	}
	lock(&sched.lock);
	struct p *sp = sparefree_get();
	if (!sp && atomic_load(&nallp) < MAXALLP) {
		int32_t id = atomic_load(&nallp);
		sp = allp[id] = newp(id);
		sp->spare = true;
		atomic_store(&nallp, id + 1);
		atomic_fetch_add(&sched.nspares, 1);
	}
	unlock(&sched.lock);
	if (!sp) {
		if (extra)
			atomic_fetch_sub(&pp->nlent, 1);
		else
			givebackp(pp);
		return;
	}
	startm(sp, false);
}

/* Our P's M was stuck and sysmon lent a spare: give it back. */
static void givebackp(struct p *pp)
{
	uint32_t old = atomic_fetch_and(&pp->flags, ~(PF_LENT | PF_LENT_HOG));
	if (!(old & PF_LENT))
		return;
	if (old & PF_LENT_HOG)
		atomic_fetch_sub(&sched.nhogspares, 1);
	int32_t more = atomic_exchange(&pp->nlent, 0);
	lock(&sched.lock);
	for (int32_t i = 0; i <= more; i++)
		retire_spare_locked();
	unlock(&sched.lock);
}

void enterruntime(struct m *m)
{
	if (atomic_load_explicit(&m->p->flags, memory_order_relaxed) & PF_LENT)
		givebackp(m->p);
}

/* sysmon asked the running G to give way: it goes to the back of the
 * global queue, as a preempted goroutine does. */
static void gpreempt(struct m *m)
{
	struct g *gp = m->curg;
	atomic_fetch_and_explicit(&m->p->flags, ~PF_PREEMPT, memory_order_relaxed);
	if (m->lockedg)
		return;
	rtdepth_set(gp, 1);
	struct g *next = nextg_fast(m, m->p);
	/* none, yet a spare to retire: through the scheduler (mustsched).
	 * Before, the G ran on, and the Gs queued behind it on the spare
	 * (taken there from the global queue in a batch, or readied there)
	 * waited for as long as it never parked: main of a preloaded
	 * program whose loops never park, on 1 P, for good */
	if (next || mustsched(m->p)) {
		atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
		m->afterfn = after_globrunqput;
		m->aftergp = gp;
		gswitch(m, gp, next);
	}
	rtdepth_set(gp, 0);
}

void leaveruntime(struct m *m)
{
	if (atomic_load_explicit(&m->p->flags, memory_order_relaxed) & PF_PREEMPT)
		gpreempt(m);
}

void entersyscall(void)
{
	struct m *m = getm();
	if (!m || !m->curg)
		return;
	struct g *gp = m->curg;
	if (gp->rtdepth != 0)
		return; /* runtime-internal call: not a blocking point of the G */
	m->syscallwhen = atomic_load_explicit(&coarsenow, memory_order_relaxed);
	atomic_store_explicit(&gp->status, G_SYSCALL, memory_order_relaxed);
	/* release: sysmon reading 1 sees a consistent syscalltick */
	atomic_store_explicit(&m->p->insyscall, 1, memory_order_release);
}

/* Gs queued on a P other than pp whose M sits in a call: only stealing
 * runs them, by a P lent around that call (sysmon) or an idle one. */
static bool gsbehindcall(struct p *pp)
{
	int32_t nps = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < nps; i++) {
		struct p *p2 = allp[i];
		if (p2 != pp && atomic_load_explicit(&p2->insyscall, memory_order_relaxed) &&
		    !runqempty(p2))
			return true;
	}
	return false;
}

/* A call known to block long (fsync, the resolver): lend a spare at
 * once if any G waits, not a sysmon round (up to its watch gap) later.
 * Gs queued behind another P's call count too: that P's spare, if it
 * has one, may be blocked in such a call itself (16 threads in
 * pwrite + fsync under sysbench fileio: 253-258k events in 4 s with
 * them, 129-218k without, native 229-338k; docs/benchmarks.md). */
void entersyscallblock(void)
{
	struct m *m = getm();
	if (!m || !m->curg || m->curg->rtdepth != 0)
		return;
	entersyscall();
	struct p *pp = m->p;
	if (!runqempty(pp) || atomic_load(&sched.runqsize) > 0 || gsbehindcall(pp))
		lendp(pp, false);
}

/* May m wait in the kernel holding pp (after saying KW_WAIT)? */
static bool entersyscallwait_ok(struct m *m, struct p *pp, int64_t *until)
{
	if (!runqempty(pp) || atomic_load(&sched.runqsize) != 0 ||
	    (atomic_load_explicit(&pp->flags, memory_order_relaxed) & (PF_PREEMPT | PF_LENT)) ||
	    atomic_load(&m->curg->intrreq))
		return false;
	/* Gs parked on the netpoller need a P that is not waiting in the
	 * kernel like us: an idle P's M blocks in netpoll, a running one
	 * blocks there when it runs out of work and polls every 1 ms while
	 * it does not (busypoll; sysmon polls after 10 ms if every P is
	 * stuck some other way) */
	if (atomic_load(&netpollwaiters) > 0) {
		if (atomic_load(&sched.nkwait) >= atomic_load(&sched.gomaxprocs))
			return false;
		/* and none blocks in netpoll (lastpoll != 0) while a P is
		 * idle: an M that went idle while no G was parked there did
		 * not stay to watch, and the Gs parked since on a P that then
		 * waited in the kernel (ours) would wait for sysmon's poll
		 * every 10 ms (a preloaded memcached's SIGTERM did: sysmon
		 * slept, and never).  A spinning M takes the idle P, finds
		 * nothing and blocks in netpoll (findrunnable) */
		int32_t zero = 0;
		if (atomic_load(&sched.lastpoll) != 0 && atomic_load(&sched.npidle) > 0 &&
		    atomic_load(&sched.nmspinning) == 0 &&
		    atomic_compare_exchange_strong(&sched.nmspinning, &zero, 1))
			startm(NULL, true);
	}
	/* Gs queued on a P whose M sits in a call are run by stealing:
	 * by a P lent around that call (sysmon), perhaps this one, or an
	 * idle one.  Waiting here would leave them there (a G queued
	 * behind a plain thread's pthread_join, the lent P's G reading in
	 * the kernel: test_hook_thread plain_thread_blocks_on_g_fd hung) */
	if (gsbehindcall(pp))
		return false;
	int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
	if (t0) {
		/* a call with no timeout could not be back for it */
		if (*until == KWAIT_NOBOUND || t0 <= nanotime())
			return false;
		if (*until < 0 || t0 < *until)
			*until = t0;
	}
	return true;
}

/* See runtime.h.  The P stays ours (P_RUNNING, insyscall), as for any
 * blocking call: a G made runnable meanwhile goes to its readier's P or
 * the global queue, and its readier (or sysmon) asks our wait to end
 * (kwait.c), so the P runs it; a timer of our P is the caller's own
 * deadline (until). */
bool entersyscallwait(int64_t *until)
{
	struct m *m = getm();
	if (!m || !m->curg || m->curg->rtdepth != 0 || !m->p)
		return false;
	struct p *pp = m->p;
	/* say we wait, then look (seq_cst): a G readied meanwhile is seen
	 * below, or its readier sees KW_WAIT and asks us to end (kwait.c) */
	atomic_store(&m->kwait, KW_WAIT);
	atomic_fetch_add(&sched.nkwait, 1);
	if (!entersyscallwait_ok(m, pp, until)) {
		/* not a plain store of KW_NONE: a readier may have seen our
		 * KW_WAIT and be sending its kick (kwait.c) */
		(void)kwait_leave(m);
		atomic_fetch_sub(&sched.nkwait, 1);
		/* sysmon may have taken our KW_WAIT for a quiet P and slept:
		 * it must watch the G that runs on (as exitsyscallwait) */
		if (atomic_load(&sched.sysmonwait))
			sysmon_wake();
		return false;
	}
	atomic_fetch_add_explicit(&sched.nsyscallwait, 1, memory_order_relaxed);
	entersyscall();
	return true;
}

bool exitsyscallwait(void)
{
	struct m *m = getm();
	bool stop = kwait_leave(m); /* no kick of this wait comes later */
	atomic_fetch_sub(&sched.nkwait, 1);
	exitsyscall();
	/* seq_cst after the exchange: sysmon, asleep for good while every
	 * P was idle or waiting in the kernel, stored sysmonwait and then
	 * read our kwait (sysmon.c) */
	if (atomic_load(&sched.sysmonwait))
		sysmon_wake();
	return stop;
}

void exitsyscall(void)
{
	struct m *m = getm();
	if (!m || !m->curg)
		return;
	struct g *gp = m->curg;
	if (gp->rtdepth != 0)
		return;
	struct p *pp = m->p;
	atomic_store_explicit(&pp->insyscall, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&pp->syscalltick, 1, memory_order_relaxed);
	atomic_store_explicit(&gp->status, G_RUNNING, memory_order_relaxed);
	if (unlikely(atomic_load_explicit(&pp->flags, memory_order_relaxed))) {
		/* no errno save here: a cached &errno would be the old
		 * thread's after gpreempt switches; the runtime's own calls
		 * keep errno, and gswitch carries it with the G */
		givebackp(pp);
		if (atomic_load_explicit(&pp->flags, memory_order_relaxed) & PF_PREEMPT)
			gpreempt(m);
	}
}

void weft_blocking_enter(void)
{
	int e = errno;
	entersyscall();
	errno = e;
}

void weft_blocking_exit(void)
{
	exitsyscall();
}

/* ---- thread locking ------------------------------------------------------ */

void weft_lock_thread(void)
{
	struct m *m = getm();
	if (!m || !m->curg)
		return;
	struct g *gp = m->curg;
	if (gp->lockcount++ == 0) {
		gp->lockedm = m;
		atomic_store_explicit(&m->lockedg, gp, memory_order_relaxed);
	}
}

void weft_unlock_thread(void)
{
	struct m *m = getm();
	if (!m || !m->curg)
		return;
	struct g *gp = m->curg;
	if (gp->lockcount == 0)
		return;
	if (--gp->lockcount == 0) {
		gp->lockedm = NULL;
		atomic_store_explicit(&m->lockedg, NULL, memory_order_relaxed);
	}
}

/* gp is locked to another M: give it our P and stop. */
static void startlockedm(struct m *m, struct g *gp)
{
	struct m *lm = gp->lockedm;
	struct p *pp = releasep(m);
	lm->nextp = pp;
	lm->nextg = gp;
	notewakeup(&lm->park);
}

/* Our locked G is not running: give the P away and wait for it. */
static struct g *stoplockedm(struct m *m)
{
	if (m->p)
		handoffp(releasep(m));
	notesleep(&m->park);
	noteclear(&m->park);
	acquirep(m, m->nextp);
	m->nextp = NULL;
	struct g *gp = m->nextg;
	m->nextg = NULL;
	return gp;
}

/* ---- finding work -------------------------------------------------------- */

static struct g *stealwork(struct m *m, int64_t now)
{
	struct p *pp = m->p;
	int32_t n = atomic_load(&nallp);
	for (int i = 0; i < 4; i++) {
		bool last = i == 3;
		uint32_t start = fastrand();
		for (int32_t j = 0; j < n; j++) {
			struct p *p2 = allp[(start + j) % n];
			if (p2 == pp)
				continue;
			if (last) {
				int64_t t0 = atomic_load(&p2->timer0when);
				if (t0 && t0 <= now) {
					checktimers(p2, now);
					struct g *gp = runqget(pp, NULL);
					if (gp)
						return gp;
				}
			}
			bool retired = atomic_load_explicit(&p2->retired, memory_order_relaxed);
			if (retired || !runqempty(p2)) {
				struct g *gp = runqsteal(pp, p2, last || retired);
				if (gp)
					return gp;
			}
		}
	}
	return NULL;
}

/* Fire the due timers of Ps that no M holds (idle ones; a retired P has
 * none, timer.c movetimers) from here; their Gs come to our P.  stealwork does this only
 * for a spinning M, and the spinning rule can forbid every M to spin
 * while such a timer waits: with spares on the idle list, npidle can
 * reach gomaxprocs while we hold a P (a fork child keeps running on the
 * spare P it forked on, its P 0 idle).  Then nobody fired the timer and
 * the M polled the network with a 0 delay for it, forever (a preloaded
 * python's subprocess child hung that way).  Returns a G to run, if any. */
static struct g *idletimers(struct m *m, int64_t now)
{
	struct p *pp = m->p;
	int32_t n = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < n; i++) {
		struct p *p2 = allp[i];
		if (p2 == pp || PSTATUS(atomic_load(&p2->state)) == P_RUNNING)
			continue;
		int64_t t0 = atomic_load(&p2->timer0when);
		if (t0 && t0 <= now)
			checktimers(p2, now);
	}
	return runqget(pp, NULL);
}

static struct g *netpoll_take(struct g *list)
{
	if (!list)
		return NULL;
	struct g *gp = list;
	injectglist(list->schedlink);
	gp->schedlink = NULL;
	return gp;
}

/* Block until there is a G to run; returns with m->p held, or NULL
 * (holding no P) when the M retired while idle (stopm). */
static struct g *findrunnable(struct m *m)
{
	struct g *gp;
top:;
	struct p *pp = m->p;
	int64_t now = nanotime();
	atomic_store_explicit(&coarsenow, now, memory_order_relaxed);
	if (atomic_load_explicit(&pp->flags, memory_order_relaxed) & PF_LENT)
		givebackp(pp); /* we are not stuck any more */
	if (atomic_load_explicit(&pp->retired, memory_order_relaxed) ||
	    (pp->spare && atomic_load(&sched.nretire) > 0)) {
		/* shrunk away, or a spare no longer needed: hand our Gs to the
		 * others and sleep until given a live P */
		lock(&sched.lock);
		int32_t n = atomic_load(&sched.nretire);
		bool retire = pp->retired;
		if (!retire && n > 0 && atomic_compare_exchange_strong(&sched.nretire, &n, n - 1))
			retire = true;
		int64_t moved = 0;
		if (retire) {
			while ((gp = runqget(pp, NULL)))
				globrunqput_locked(gp);
			/* and its timers to a live P (timer.c) */
			moved = movetimers(pp, allp[0]);
			releasep(m);
			if (pp->spare)
				sparefree_put(pp);
		}
		unlock(&sched.lock);
		if (retire) {
			if (m->spinning) {
				m->spinning = false;
				atomic_fetch_sub(&sched.nmspinning, 1);
			}
			if (atomic_load(&sched.runqsize) > 0)
				wakep();
			if (moved) /* we would have fired them: now P 0's must */
				wakenetpoller(moved);
			if (!stopm(m))
				return NULL;
			goto top;
		}
	}
	checktimers(pp, now);
	busypoll(NULL);
	bool fair = atomic_load_explicit(&pp->schedtick, memory_order_relaxed) % 61 == 0;
	if (fair && atomic_load(&sched.runqsize) > 0) {
		lock(&sched.lock);
		gp = globrunqget(pp, 1);
		unlock(&sched.lock);
		if (gp)
			return gp;
	}
	if ((gp = runqget_inl(pp, NULL, fair)))
		return gp;
	if (atomic_load(&sched.runqsize) > 0) {
		lock(&sched.lock);
		gp = globrunqget(pp, 0);
		unlock(&sched.lock);
		if (gp)
			return gp;
	}
	/* No look at the netpoller without waiting here (Go's "optimization
	 * before stealing"): when no M blocks in it (lastpoll != 0), this
	 * one is about to, unless it steals work first, and a wait on ready
	 * files returns at once.  The look found nothing 86% of the time in
	 * a preloaded memcached (strace, 2,000 connections): an epoll_wait
	 * more per trip to an empty scheduler.  A P kept busy by its queue
	 * still polls (busypoll, sysmon). */
	if ((gp = idletimers(m, now)))
		return gp;
	int32_t procs = sched.gomaxprocs;
	if (m->spinning || 2 * atomic_load(&sched.nmspinning) < procs - atomic_load(&sched.npidle)) {
		if (!m->spinning) {
			m->spinning = true;
			atomic_fetch_add(&sched.nmspinning, 1);
		}
		if ((gp = stealwork(m, now)))
			return gp;
	}

	/* Nothing to do: give up the P, and at once (same lock) say where
	 * this M is to be found.  If it is to block in the netpoller (a
	 * timer or an fd waiter to wait for, and no M does), it takes that
	 * role (lastpoll = 0); otherwise it goes on the idle list (midle)
	 * now, before its recheck, not later in stopm.  Either way a G
	 * readied from then on finds the P idle and this M ready to run it
	 * (startm: mget, or its break of our poll); before, between
	 * pidleput and the CAS or mput it found neither and made one more
	 * OS thread (two Ps, a third M).  m->spinning is cleared before: a
	 * startm that takes us off midle sets it for the P it hands us. */
	int64_t when = earliest_timer();
	bool wasspinning = m->spinning, poller = false;
	m->spinning = false;
	lock(&sched.lock);
	if (atomic_load(&sched.runqsize) != 0) {
		gp = globrunqget(pp, 0);
		unlock(&sched.lock);
		m->spinning = wasspinning;
		return gp;
	}
	int64_t last = atomic_load(&sched.lastpoll);
	if ((atomic_load(&netpollwaiters) > 0 || when != 0) && last != 0)
		poller = atomic_compare_exchange_strong(&sched.lastpoll, &last, 0);
	releasep(m);
	pidleput(pp);
	if (!poller)
		mput(m);
	unlock(&sched.lock);

	if (wasspinning) {
		atomic_fetch_sub(&sched.nmspinning, 1); /* seq_cst, then re-check */
		int32_t n = atomic_load(&nallp);
		/* i == -1: the global queue, which a plain thread's goready
		 * fills while its wakep sees us still spinning */
		for (int32_t i = -1; i < n; i++) {
			if (i < 0 ? atomic_load(&sched.runqsize) != 0
				  : !atomic_load_explicit(&allp[i]->retired, memory_order_relaxed) &&
					    !runqempty(allp[i])) {
				lock(&sched.lock);
				/* off midle again, unless a startm took us
				 * off it: then a P is on its way (mpark) */
				bool mine = poller || munlist(m);
				pp = mine ? pidleget() : NULL;
				if (mine && !pp && !poller)
					mput(m);
				if (pp && poller) /* not polling after all */
					atomic_store(&sched.lastpoll, nanotime());
				unlock(&sched.lock);
				if (pp) {
					acquirep(m, pp);
					m->spinning = true;
					atomic_fetch_add(&sched.nmspinning, 1);
					goto top;
				}
				break;
			}
		}
	}

	/* block in the netpoller until the earliest timer, if we are the
	 * one M to do so (poller); otherwise sleep until handed a P */
	if (poller) {
		/* Publish how long we will sleep, then re-read the timers: a
		 * timer added meanwhile either sees polluntil and breaks the
		 * poll, or is seen here.  An adder may have read any value we
		 * published, so we never sleep past one: polluntil only falls
		 * (when the first earliest timer has gone since, the re-read
		 * gives 0 or a later one, and we still wake at 'until'). */
		int64_t until = when ? when : INT64_MAX;
		atomic_store(&sched.polluntil, until);
		when = earliest_timer();
		if (when && when < until) {
			until = when;
			atomic_store(&sched.polluntil, until);
		}
		int64_t delay = -1;
		if (until != INT64_MAX) {
			delay = until - nanotime();
			if (delay < 0)
				delay = 0;
		}
		struct g *list = netpoll(delay);
		atomic_store(&sched.polluntil, 0);
		/* no longer the poller, and with a P or on midle, in one
		 * step (startm reads lastpoll under this lock) */
		lock(&sched.lock);
		atomic_store(&sched.lastpoll, nanotime());
		pp = pidleget();
		if (!pp)
			mput(m);
		unlock(&sched.lock);
		if (pp) {
			acquirep(m, pp);
			if ((gp = netpoll_take(list)))
				return gp;
			goto top;
		}
		injectglist(list); /* its startm may hand us a P: mpark */
	}
	if (!mpark(m))
		return NULL; /* retired: schedule returns */
	goto top;
}

/* The scheduler context of every M: find a G, run it, repeat.  Returns
 * when the M retired (stopm), to mstart. */
static void schedule(struct m *m)
{
	for (;;) {
		m = getm();
		struct g *gp;
		if (m->lockedg) {
			gp = stoplockedm(m);
			gswitch(m, NULL, gp);
			continue;
		}
		if (!m->p && !stopm(m))
			return;
		gp = findrunnable(m);
		if (!gp)
			return;
		if (m->spinning)
			resetspinning(m);
		if (gp->lockedm && gp->lockedm != m) {
			startlockedm(m, gp);
			if (!stopm(m))
				return;
			continue;
		}
		gswitch(m, NULL, gp);
	}
}

/* ---- start-up -------------------------------------------------------------- */

static struct p *newp(int32_t id)
{
	struct p *pp = rtalloc(sizeof *pp);
	if (!pp)
		fatal("out of memory allocating a P");
	pp->id = id;
	pp->tcache = rt_tcache_create();
	atomic_store(&pp->state, PSTATE(0, P_IDLE));
	return pp;
}

static pthread_once_t startonce = PTHREAD_ONCE_INIT;
void dump_init(void) __attribute__((weak));
/* hook/hook.c's hook_resolve_all, set by its constructor (the runtime
 * calls no name hook/ defines: design.md "Layering") */
void (*rt_hookresolve)(void) HIDDEN STARTUP_DATA;

static void runtime_init_once(void)
{
	envinit();
	allocinit();
	if (rt_hookresolve)
		rt_hookresolve(); /* no G or M calls dlsym for a hook */
	loaderlock_init(); /* before any M is made */
	tls_g0keep_init(); /* before any M starts */
	rnasym_init();     /* likewise */
	stackinit();
	netpollinit();
	atomic_store(&coarsenow, nanotime());
	atomic_store(&sched.lastpoll, nanotime());
	sched.gomaxprocs = envmaxprocs();
	lock(&sched.lock);
	for (int32_t i = weftenv.maxprocs - 1; i >= 0; i--) {
		allp[i] = newp(i);
		pidleput(allp[i]);
	}
	atomic_store(&nallp, weftenv.maxprocs);
	unlock(&sched.lock);
	sysmon_start();
	if (dump_init)
		dump_init(); /* SIGQUIT dumps (dump.c) */
	atomic_store_explicit(&sched_started, 1, memory_order_release);
}

void runtime_start(void)
{
	sys_pthread_once(&startonce, runtime_init_once);
}

void runtime_init(void)
{
	runtime_start();
}

int weft_maxprocs(int n)
{
	if (n < 0 || n > MAXPROCS) {
		errno = EINVAL;
		return -1;
	}
	runtime_ensure();
	lock(&sched.lock);
	int old = sched.gomaxprocs;
	if (n == 0 || n == old) {
		unlock(&sched.lock);
		return old;
	}
	/* the first n regular Ps (in allp order) live, later ones retire:
	 * their Ms give them up at the next trip through the scheduler and
	 * stealers drain them; spares are not counted */
	int32_t regular = 0;
	for (int32_t i = 0; i < atomic_load(&nallp); i++) {
		struct p *pp = allp[i];
		if (pp->spare)
			continue;
		bool was = pp->retired;
		pp->retired = regular++ >= n;
		if (was && !pp->retired && PSTATUS(atomic_load(&pp->state)) == P_IDLE)
			pidleput(pp);
	}
	for (; regular < n && atomic_load(&nallp) < MAXALLP; regular++) {
		int32_t id = atomic_load(&nallp);
		allp[id] = newp(id);
		atomic_store(&nallp, id + 1);
		pidleput(allp[id]);
	}
	/* drop retired Ps from the idle list, their timers to P 0 (idle
	 * Ps' timers: the netpoller sleeps until them already) */
	struct p **pl = &sched.pidle;
	while (*pl) {
		if ((*pl)->retired) {
			movetimers(*pl, allp[0]);
			*pl = (*pl)->link;
			atomic_fetch_sub(&sched.npidle, 1);
		} else {
			pl = &(*pl)->link;
		}
	}
	sched.gomaxprocs = n;
	unlock(&sched.lock);
	wakep();
	return old;
}

/* ---- weft_main ------------------------------------------------------------- */

struct mainarg {
	int (*fn)(int, char **);
	int argc;
	char **argv;
	int ret;
	weft_wg_t wg;
};

static void mainwrap(void *arg)
{
	struct mainarg *a = arg;
	a->ret = a->fn(a->argc, a->argv);
	weft_wg_done(&a->wg);
}

int weft_main(int (*fn)(int, char **), int argc, char **argv)
{
	if (!fn) {
		errno = EINVAL;
		return -1;
	}
	struct mainarg a = { .fn = fn, .argc = argc, .argv = argv, .wg = WEFT_WG_INIT };
	weft_wg_add(&a.wg, 1);
	if (weft_go(mainwrap, &a) < 0)
		return -1;
	weft_wg_wait(&a.wg);
	return a.ret;
}
