/*
 * fork.c - the runtime in the child of fork().
 *
 * Only the forking OS thread exists in the child.  As with threads, only
 * the forking G goes on: the child's runtime is rebuilt around it - its M
 * the only M, its P running, every other P idle and empty, every other G
 * frozen (never run again), the timers and fd waiters of those Gs gone,
 * a new epoll instance and sysmon.
 *
 * Frozen Gs keep their descriptors and stacks (their waiter records may
 * still sit in the queues of mutexes and channels), marked dead and with
 * their current wait ended, so a waker that meets one skips it.
 *
 * Locks another thread held at the moment of fork are simply cleared;
 * the structures they protect are either rebuilt here or were not being
 * changed (the preload shim calls this from an atfork child handler,
 * after jemalloc's own).
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"
#include "netpoll.h"

extern struct lock allglock, stacklock, wakelock;
void dump_afterfork_child(void) __attribute__((weak));

static inline void unlocked(struct lock *l)
{
	atomic_store_explicit(&l->key, 0, memory_order_relaxed);
}

static void freeze(struct g *gp, void *arg)
{
	if (gp == arg)
		return;
	uint32_t st = atomic_load_explicit(&gp->status, memory_order_relaxed);
	if (st == G_DEAD || st == G_IDLE)
		return;
	atomic_store_explicit(&gp->status, G_DEAD, memory_order_relaxed);
	/* end the wait it is in: claims on it (waiter_claim) now fail */
	uint64_t ws = atomic_load_explicit(&gp->waitstate, memory_order_relaxed);
	atomic_store_explicit(&gp->waitstate, (ws & ~(uint64_t)3) | 2, memory_order_relaxed);
}

static void resetp(struct p *pp)
{
	atomic_store_explicit(&pp->runqhead, 0, memory_order_relaxed);
	atomic_store_explicit(&pp->runqtail, 0, memory_order_relaxed);
	atomic_store_explicit(&pp->runnext, NULL, memory_order_relaxed);
	/* a take or steal of runnext (proc.c) that a parent thread was in */
	atomic_store_explicit(&pp->rntaking, 0, memory_order_relaxed);
	atomic_store_explicit(&pp->rnsteal, 0, memory_order_relaxed);
	unlocked(&pp->timerslock);
	for (int32_t i = 0; i < pp->ntimers; i++) {
		pp->timers[i]->idx = -1;
		atomic_store_explicit((struct p *_Atomic *)&pp->timers[i]->pp, NULL,
				      memory_order_relaxed);
	}
	pp->ntimers = 0;
	atomic_store_explicit(&pp->timer0when, 0, memory_order_relaxed);
	atomic_store_explicit(&pp->flags, 0, memory_order_relaxed);
	atomic_store_explicit(&pp->insyscall, 0, memory_order_relaxed);
	pp->sm_when = 0;
	pp->sm_preempt = 0;
	pp->sm_watched = false;
}

/* fd state: waiters were other Gs; registrations were with the old epoll.
 * By chunk (pd_foreach): a walk of every fd number skipped absent chunks
 * 64 numbers at a time, 65,536 lookups, 14 % of a preloaded fork loop's
 * samples.  Written only where something is to undo: the records' pages
 * are the parent's, copied on the child's first write, and most records
 * of a chunk are of fds never used (a write to each had cost a fault
 * and a page copy per 32 records: 32 a fork for the first chunk alone). */
static void resetpd(int fd, struct pd *d, void *arg)
{
	(void)fd, (void)arg;
	if (atomic_load_explicit(&d->lock.key, memory_order_relaxed))
		unlocked(&d->lock);
	if (d->waiters.head || d->waiters.tail)
		d->waiters = (struct waitq){ NULL, NULL };
	uint32_t f = atomic_load_explicit(&d->flags, memory_order_relaxed);
	if (f & PD_REG)
		atomic_store_explicit(&d->flags, f & ~(uint32_t)PD_REG, memory_order_relaxed);
}

static void resetpds(void)
{
	pd_foreach(resetpd, NULL);
}

void runtime_afterfork_child(void)
{
	if (!atomic_load_explicit(&sched_started, memory_order_acquire))
		return;
	struct m *m = getm();
	struct g *cur = m ? m->curg : NULL;

	unlocked(&sched.lock);
	unlocked(&allglock);
	unlocked(&stacklock);
	unlocked(&wakelock);
	tls_forkchild();

	/* Ms: this one, if the fork came from an M */
	if (m) {
		m->tid = (int)sys_gettid();
		m->alllink = NULL;
		m->schedlink = NULL;
		m->spinning = false;
		m->nextp = NULL;
		m->nextg = NULL;
		noteclear(&m->park);
	}
	atomic_store(&allm, m);
	atomic_store(&sched.mcount, m ? 1 : 0);
	sched.midle = NULL;
	sched.nmidle = 0;
	sched.mfree = NULL; /* retired descriptors are on the parent's allm, not ours */
	atomic_store(&sched.nmspinning, 0);

	/* Gs: only the forking one */
	forEachG(freeze, cur);
	gcpu_afterfork(cur);
	atomic_store(&sched.ngs, cur ? 1 : 0);
	sched.runqhead = sched.runqtail = NULL;
	atomic_store(&sched.runqsize, 0);

	/* Ps: ours runs on, the rest are idle and empty */
	struct p *mine = m ? m->p : NULL;
	sched.pidle = NULL;
	atomic_store(&sched.npidle, 0);
	sched.sparefree = NULL;
	atomic_store(&sched.nspares, 0);
	atomic_store(&sched.nhogspares, 0);
	atomic_store(&sched.nretire, 0);
	int32_t n = 0;
	while (n < MAXALLP && allp[n])
		n++;
	for (int32_t i = n - 1; i >= 0; i--) {
		struct p *pp = allp[i];
		resetp(pp);
		atomic_store(&pp->ngs, 0); /* the one G left counts in sched.ngs */
		if (pp == mine)
			continue;
		pp->m = NULL;
		atomic_store(&pp->state, PSTATE(0, P_IDLE));
		if (pp->spare) {
			atomic_fetch_add(&sched.nspares, 1); /* sparefree_put counts it back */
			sparefree_put(pp);
		} else if (!pp->retired) {
			pidleput(pp);
		}
	}

	/* blocked plain threads and the poller were in other threads */
	atomic_store(&sched.nthreadwait, 0);
	atomic_store(&sched.nthreadwoken, 0);
	atomic_store(&sched.sysmonwait, 0);
	noteclear(&sched.sysmonnote);
	atomic_store(&netpollwaiters, 0);

	/* a new epoll instance (the old one is shared with the parent) */
	(void)sys3(SYS_close, netpoll_epfd, 0, 0);
	(void)sys3(SYS_close, netpoll_breakfd, 0, 0);
	netpollinit();
	netpoll_clockfork();
	/* a break may have been pending: make it real, so the next poll
	 * clears the flag that says so */
	uint64_t one = 1;
	(void)sys3(SYS_write, netpoll_breakfd, &one, sizeof one);
	resetpds();
	atomic_store(&sched.polluntil, 0);
	atomic_store(&sched.lastpoll, nanotime());
	atomic_store(&coarsenow, nanotime());

	if (dump_afterfork_child)
		dump_afterfork_child();
	/* sysmon once the child has a second G (weft_go_attr) or M (mthread):
	 * with one G there is no P to retake, no G to preempt, and the M
	 * polls and keeps its timers itself; a child that execs or exits
	 * soon, the usual case, never makes the thread (one clone, a stack,
	 * and its end at exit: 0.1-0.3 ms of a child's life here) */
	if (weftenv.schedtrace_ms)
		sysmon_start();
	else
		atomic_store(&sysmon_pending, 1);
}
