/*
 * cpuclock.c - a G's CPU-time clock.
 *
 * A thread's CPU clock (CLOCK_THREAD_CPUTIME_ID, pthread_getcpuclockid)
 * is the CPU time the kernel gave its thread, user and system.  A G's
 * thread is whichever M runs it, which also runs other Gs, so a G's
 * clock is the sum, over the spans it was on an M, of how much that M's
 * own thread clock advanced meanwhile: nothing while it is parked,
 * runnable or sleeping, and the M's time in its scheduler is no G's.
 *
 * Reading an M's thread clock is a system call (the vDSO answers no CPU
 * clock), far more than a switch costs (~15 ns), so a G's clock is kept
 * only once something asked for it (cputrack, set by the first read);
 * from then the switch reads the M's clock when that G goes on and off
 * (gcpu_switch, one read for both when two kept Gs switch).  A G nobody
 * asked about costs the switch a test of gcpu_any, and nothing at all
 * while no G in the process is kept (its bit in rt_swslow, one load the
 * switch makes anyway).  What a G ran before its first
 * read is not counted: its clock starts at 0 there - except the main G
 * of a lazy start, which starts at the CPU time the main thread had used
 * as a plain thread (gcpu_adopt), so main's clock never goes back.  A G
 * that asks for another's clock, running elsewhere, counts it from that
 * G's next switch on.
 *
 * The fields are written by one thread at a time (the M switching the
 * G, or the running G itself) inside an odd cpuseq; a reader elsewhere
 * takes a snapshot between two equal even cpuseq and, while the G is on
 * an M (cputid), adds what that M's clock moved since cpuon.
 */
#define _GNU_SOURCE
#include <time.h>

#include "runtime.h"
#include "sys.h"

_Atomic bool gcpu_any;

/* The kernel's CPU clock of thread tid (CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED:
 * glibc's make_thread_cpuclock), ns, or -1 (a thread that is gone). */
int64_t rt_threadcpu(int tid)
{
	clockid_t cid = (clockid_t)((~(unsigned)tid << 3) | 6);
	struct timespec ts;
	if (sys3(SYS_clock_gettime, cid, &ts, 0) != 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* This thread's CPU clock, ns. */
static int64_t selfclock(void)
{
	struct timespec ts;
	if (sys3(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &ts, 0) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Open a write of gp's fields.  A seq_cst read-modify-write (a locked
 * add: a full barrier on x86-64): the odd value is visible before the
 * writer reads its M's clock, so a reader that read that clock later
 * (and would add a span the G was no longer on) sees the change and
 * retries; the reader's fence pairs with it.  (An RMW, not a store and
 * a fence: gcc's TSan build refuses the fence here.) */
static inline void wbegin(struct g *gp)
{
	atomic_fetch_add_explicit(&gp->cpuseq, 1, memory_order_seq_cst);
}

/* Close it: release, the fields before the even value. */
static inline void wend(struct g *gp)
{
	uint32_t s = atomic_load_explicit(&gp->cpuseq, memory_order_relaxed);
	atomic_store_explicit(&gp->cpuseq, s + 1, memory_order_release);
}

/* gp leaves its M, whose clock reads now. */
static void goff(struct g *gp, int64_t now)
{
	wbegin(gp);
	int64_t on = atomic_load_explicit(&gp->cpuon, memory_order_relaxed);
	if (atomic_load_explicit(&gp->cputid, memory_order_relaxed) && now > on)
		atomic_store_explicit(&gp->cpuns,
				      atomic_load_explicit(&gp->cpuns, memory_order_relaxed) + now - on,
				      memory_order_relaxed);
	atomic_store_explicit(&gp->cputid, 0, memory_order_relaxed);
	wend(gp);
}

/* gp goes on M m, whose clock reads now. */
static void gon(struct g *gp, struct m *m, int64_t now)
{
	wbegin(gp);
	atomic_store_explicit(&gp->cpuon, now, memory_order_relaxed);
	atomic_store_explicit(&gp->cputid, atomic_load_explicit(&m->tid, memory_order_relaxed),
			      memory_order_relaxed);
	wend(gp);
}

void gcpu_switch(struct m *m, struct g *from, struct g *to)
{
	bool f = from && atomic_load_explicit(&from->cputrack, memory_order_relaxed);
	bool t = to && atomic_load_explicit(&to->cputrack, memory_order_relaxed);
	if (!f && !t)
		return;
	int64_t now = selfclock();
	if (f)
		goff(from, now);
	if (t)
		gon(to, m, now);
}

int64_t gcpu_read(struct g *gp)
{
	struct m *m = getm();
	bool self = m && atomic_load_explicit(&m->curg, memory_order_relaxed) == gp;
	if (unlikely(!atomic_load_explicit(&gp->cputrack, memory_order_relaxed))) {
		atomic_store_explicit(&gcpu_any, true, memory_order_relaxed);
		rt_swslow_set(SW_GCPU);
		if (self) /* the caller itself: counted from now */
			gon(gp, m, selfclock());
		/* else from its next switch on (gcpu_switch, once it sees the flag) */
		atomic_store_explicit(&gp->cputrack, true, memory_order_relaxed);
	} else if (self && !atomic_load_explicit(&gp->cputid, memory_order_relaxed)) {
		/* marked by another thread while it ran: count from now, not
		 * from its next switch on */
		gon(gp, m, selfclock());
	}
	for (int spins = 0;; spins++) {
		uint32_t s = atomic_load_explicit(&gp->cpuseq, memory_order_acquire);
		if (s & 1) {
			/* its writer is between two stores; if the kernel
			 * preempted it there, let it run */
			if (spins > 100)
				(void)sys3(SYS_sched_yield, 0, 0, 0);
			else
				cpu_relax();
			continue;
		}
		int64_t ns = atomic_load_explicit(&gp->cpuns, memory_order_relaxed);
		int64_t on = atomic_load_explicit(&gp->cpuon, memory_order_relaxed);
		int32_t tid = atomic_load_explicit(&gp->cputid, memory_order_relaxed);
		int64_t now = tid ? rt_threadcpu(tid) : 0;
		/* pairs with wbegin's RMW: if the writer's clock read came
		 * before ours, its odd cpuseq is seen here */
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&gp->cpuseq, memory_order_relaxed) != s)
			continue;
		if (tid && now < 0)
			return -1; /* its M's thread is gone, and it did not move off it */
		return tid && now > on ? ns + now - on : ns;
	}
}

void gcpu_reset(struct g *gp)
{
	atomic_store_explicit(&gp->cputrack, false, memory_order_relaxed);
	atomic_store_explicit(&gp->cpuns, 0, memory_order_relaxed);
	atomic_store_explicit(&gp->cputid, 0, memory_order_relaxed);
}

void gcpu_adopt(struct g *gp)
{
	atomic_store_explicit(&gp->cpuns, selfclock(), memory_order_relaxed);
}

void gcpu_afterfork(struct g *gp)
{
	if (!gp || !atomic_load_explicit(&gp->cputrack, memory_order_relaxed))
		return;
	atomic_store_explicit(&gp->cpuseq, 0, memory_order_relaxed); /* no writer is left */
	atomic_store_explicit(&gp->cpuns, 0, memory_order_relaxed);
	struct m *m = getm();
	if (m && m->curg == gp)
		gon(gp, m, selfclock());
}
