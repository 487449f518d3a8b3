/*
 * sysmon.c - the system monitor: an OS thread (not a G, holds no P) that
 *   - notices a P whose M has sat in a blocking call for more than 20 us
 *     (entersyscall, or a call weft does not see: the thread's CPU time
 *     stands still), or has run one G for more than 10 ms without a
 *     switch, while Gs wait behind it, and hands the waiting Gs to another
 *     M: an idle P if there is one, else a spare P lent for as long as the
 *     M stays stuck (lendp, proc.c; uncapped for blocked Ms up to
 *     WEFT_MAXTHREADS, capped for hogs); a hog is also asked to yield at
 *     its next runtime call; an M waiting in the kernel for fds
 *     (entersyscallwait) is asked to end its wait instead (kwait.c);
 *   - fires timers more than 1 ms overdue on a P whose M is stuck;
 *   - polls the network if nobody has for 10 ms;
 *   - prints the schedtrace line (WEFT_DEBUG=schedtrace=<ms>);
 *   - about once a second, unmaps stack chunks the pool no longer needs.
 * It sleeps 20 us between rounds while it finds work; otherwise twice as
 * long each round, up to 10 ms, but no longer than the watch gap while a
 * P sits in a blocking call with Gs waiting behind it; and outright while
 * every P is idle (acquirep wakes it), or after 50 ms in which every P
 * was idle or waiting in the kernel with nothing behind it and the
 * netpoller watched (the end of such a wait wakes it too).  The watch
 * gap learns how long the calls are: twice as long (up to 10 ms) after
 * each round whose watched calls had all ended by it, half as long (down
 * to 20 us) after one that found a watched call still in it
 * (watchgap_learn).
 * weft_stats().sysmon_wakeups counts its rounds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime.h"
#include "netpoll.h"

#define SYSMON_MIN_NS (20 * 1000) /* sysmon's pace while something may be stuck */
#define SYSMON_MAX_NS (10 * 1000 * 1000) /* ... and when nothing is, backed off */
#define SYSCALL_RETAKE_NS (20 * 1000)
#define RELEND_NS (1000 * 1000) /* a blocked M's spare blocked too: another after this */
#define HOG_RETAKE_NS (10 * 1000 * 1000)
#define HOG_GRACE_NS (50 * 1000) /* a hog asked to yield: its CPU time before a lend */
#define POLL_IDLE_NS (10 * 1000 * 1000)
#define TIMER_LATE_NS (1000 * 1000) /* a P's timer this overdue: sysmon fires it */
#define SCAVENGE_NS (1000 * 1000 * 1000) /* return free stack chunks about once a second */
#define QUIET_NS (50 * 1000 * 1000) /* every P idle or in a quiet kernel wait this long: sleep */
#define IDLE_TIMER_LATE_NS (50 * 1000 * 1000) /* a timer this late on an idle P, no M polling: an M */
#define STAT_FORGET_NS (100 * 1000 * 1000) /* a P's /proc back-off forgotten after this */

static void usleep_ns(int64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };
	while (sys_clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) != 0)
		;
}

static bool haswork(struct p *pp, int64_t now)
{
	int64_t t0 = atomic_load(&pp->timer0when);
	return !runqempty(pp) || (t0 && t0 <= now);
}

/* A backstop for timers, as Go's sysmon sleeps no longer than until
 * the next one (timeSleepUntil): a timer on an idle P that is
 * IDLE_TIMER_LATE_NS overdue while no M polls the network (lastpoll != 0)
 * gets an M (wakep).  The M that goes idle last polls until the
 * earliest timer (findrunnable) and a P handed off with timers wakes
 * one (handoffp); some path leaves neither, and the program hung for
 * good: hook_fd::eventfd_write_waits_in_kernel_till_drained on 1 P,
 * twice in CI runs (the G asleep, its timer on idle P 0, the one M
 * parked in stopm, lastpoll set, sysmon asleep with no timeout; a
 * spare had been lent and given back).  Which path is not known yet. */
static void timers_backstop(int64_t now)
{
	if (atomic_load(&sched.lastpoll) == 0)
		return; /* an M polls, until the earliest timer */
	int32_t n = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < n; i++) {
		struct p *pp = allp[i];
		int64_t t0 = atomic_load(&pp->timer0when);
		if (t0 && t0 + IDLE_TIMER_LATE_NS < now && PSTATUS(atomic_load(&pp->state)) == P_IDLE) {
			atomic_fetch_add_explicit(&sched.ntimerbackstop, 1, memory_order_relaxed);
			wakep();
			return;
		}
	}
}

/* How long sysmon may sleep with every P idle or quiet: until the
 * earliest timer is IDLE_TIMER_LATE_NS late (timers_backstop), at least
 * SYSMON_MAX_NS; t (-1: for good) if that is sooner. */
static int64_t sleep_for_timers(int64_t t, int64_t now)
{
	int64_t next = earliest_timer();
	if (!next)
		return t;
	int64_t d = next + IDLE_TIMER_LATE_NS - now;
	if (d < SYSMON_MAX_NS)
		d = SYSMON_MAX_NS;
	return t < 0 || d < t ? d : t;
}

/* The state letter of thread tid (/proc/self/task/TID/stat: R running
 * or runnable, S or D asleep in the kernel...), or 0. */
char rt_threadstate(int tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
	atomic_fetch_add_explicit(&sched.nstatreads, 1, memory_order_relaxed);
	long fd = sys4(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	long n = sys3(SYS_read, fd, buf, sizeof buf - 1);
	(void)sys3(SYS_close, fd, 0, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *e = strrchr(buf, ')'); /* the name may hold spaces and parens */
	return e && e[1] == ' ' ? e[2] : 0;
}

/* Is pp's M blocked in the kernel, in a call weft does not see (a raw
 * syscall(), glibc's internal read under stdio, a futex)?  Its thread's
 * CPU clock moved by less than an eighth of the wall time over at least
 * 20 us of the same G's run (cheap: clock_gettime), and the kernel says
 * it sleeps, S (exact: a hog is R even when the machine is too loaded to
 * give it CPU). */
/* The CPU time (ns) of the thread of pp's M while it runs a G, with its
 * tid in *tidp, or -1: no M, the scheduler (polling, sleeping until a
 * timer, or switching: the G it left is no longer G_RUNNING while it
 * finds and starts the next one, which may map and populate a stack
 * chunk), the runtime's own lock, whose holder runs, or the runtime
 * (rtdepth > 0: allocating, making an M, mapping a stack; it takes a
 * yield request as it leaves, and it blocks only on what other runtime
 * code holds, so a spare lent around it adds a thread and gains nothing:
 * on a loaded machine such Ms made 3-9 extra threads while Gs were spawned
 * to sleep, issue 16). */
static int64_t gthreadcpu(struct p *pp, int *tidp)
{
	/* P_RUNNING: its owner (or NULL if it let go meanwhile: relaxed, its
	 * owner writes it); Ms are never freed, nor are Gs */
	struct m *m = __atomic_load_n(&pp->m, __ATOMIC_RELAXED);
	int tid = m ? atomic_load_explicit(&m->tid, memory_order_relaxed) : 0;
	/* acquire: pairs with gswitch's release, so the G's fields read here
	 * (status) are seen after its making (malg's memset: TSan) */
	struct g *gp = tid > 0 ? atomic_load_explicit(&m->curg, memory_order_acquire) : NULL;
	if (!gp || atomic_load_explicit(&gp->status, memory_order_relaxed) != G_RUNNING ||
	    atomic_load_explicit(&m->lockwait, memory_order_relaxed) ||
	    __atomic_load_n(&gp->rtdepth, __ATOMIC_RELAXED) > 0)
		return -1;
	int64_t cpu = rt_threadcpu(tid);
	if (cpu >= 0)
		*tidp = tid;
	return cpu;
}

/* The /proc read is three system calls; a thread whose CPU clock
 * stands still is far more often one the kernel has not run (R: a
 * loaded machine) than one asleep in a call.  So after an answer that
 * is not S, that P's thread is not asked again for a while, twice as
 * long after each such answer, from 20 us up to 10 ms (Go's sysmon
 * backs off to 10 ms when idle); an S answer, or 100 ms without a
 * non-S one, starts again from nothing.  The cost: a G that blocks in
 * a call weft does not see, on a P whose thread was lately preempted,
 * is noticed up to 10 ms later.  (Before, sysmon read /proc every round
 * such a thread stood still: 3 system calls every 20 us per preempted
 * thread on a busy, loaded server.) */
static bool statread_due(struct p *pp, int64_t now)
{
	if (pp->sm_statlast && now - pp->sm_statlast > STAT_FORGET_NS)
		pp->sm_statgap = 0;
	return pp->sm_statgap == 0 || now >= pp->sm_statnext;
}

static void statread_backoff(struct p *pp, int64_t now)
{
	int64_t gap = pp->sm_statgap ? pp->sm_statgap * 2 : SYSCALL_RETAKE_NS;
	pp->sm_statgap = gap < SYSMON_MAX_NS ? gap : SYSMON_MAX_NS;
	pp->sm_statnext = now + pp->sm_statgap;
	pp->sm_statlast = now;
}

/* Is pp's M's thread tid asleep in the kernel (S in /proc; or D, if
 * disk)?  Asked only when statread_due, with its back-off after any
 * other answer. */
static bool threadasleep(struct p *pp, int64_t now, int tid, bool disk)
{
	if (!statread_due(pp, now))
		return false;
	char st = rt_threadstate(tid);
	if (st != 'S' && !(disk && st == 'D')) {
		statread_backoff(pp, now);
		return false;
	}
	pp->sm_statgap = 0;
	return true;
}

/* pp's M, in a call weft saw: its thread asleep in the kernel? */
static bool masleep(struct p *pp, int64_t now)
{
	/* relaxed: its owner writes it; Ms are never freed */
	struct m *m = __atomic_load_n(&pp->m, __ATOMIC_RELAXED);
	int tid = m ? atomic_load_explicit(&m->tid, memory_order_relaxed) : 0;
	return tid > 0 && threadasleep(pp, now, tid, true);
}

static bool inkernel(struct p *pp, int64_t now, uint32_t tick)
{
	int tid;
	int64_t cpu = gthreadcpu(pp, &tid);
	if (cpu < 0)
		return false;
	if (pp->sm_cpuwhen == 0) {
		pp->sm_cpu = cpu;
		pp->sm_cpuwhen = now;
		return false;
	}
	int64_t wall = now - pp->sm_cpuwhen;
	if (wall < SYSCALL_RETAKE_NS)
		return false;
	bool still = (cpu - pp->sm_cpu) * 8 < wall;
	pp->sm_cpu = cpu;
	pp->sm_cpuwhen = now;
	if (!still)
		return false;
	/* S: asleep in a call (a read, a futex).  Not D: a thread that
	 * faults pages in or waits for the address-space lock while others
	 * map stacks is busy, and taking it for blocked lends a spare per
	 * such wait, which adds to the contention. */
	if (!threadasleep(pp, now, tid, false))
		return false;
	/* and still in the same G's own code: reading /proc takes long
	 * enough for the M to have finished that G and gone to sleep in
	 * its scheduler (idle on its note, or in the netpoller), and such
	 * a sleep taken for a blocked G lent a spare, one more thread, to
	 * a P that was about to run its queue itself (issue 16) */
	int tid2;
	return gthreadcpu(pp, &tid2) >= 0 && tid2 == tid &&
	       atomic_load_explicit(&pp->schedtick, memory_order_relaxed) == tick;
}

/* WEFT_DEBUG=lendlog=<n>: why sysmon lends a spare for pp, for its first
 * n lends: the kind (a blocking call weft saw, one it did not, a hog),
 * the P, the M's thread and G, the G's wait reason, and the thread's
 * /proc syscall line (number, arguments, stack and instruction
 * pointers; "running" for a hog), to find which calls of a program
 * keep Ms stuck.  sysmon's thread only: the count needs no atomic. */
static void lendsay(struct p *pp, bool insys, bool unseen)
{
	static int said;
	if (said >= weftenv.lendlog)
		return;
	said++;
	struct m *m = __atomic_load_n(&pp->m, __ATOMIC_RELAXED);
	int tid = m ? atomic_load_explicit(&m->tid, memory_order_relaxed) : 0;
	struct g *gp = m ? atomic_load_explicit(&m->curg, memory_order_acquire) : NULL;
	char path[64], line[256] = "?";
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	long fd = tid > 0 ? sys4(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0) : -1;
	if (fd >= 0) {
		long n = sys3(SYS_read, fd, line, sizeof line - 1);
		(void)sys3(SYS_close, fd, 0, 0);
		line[n > 0 ? n : 0] = 0;
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
	}
	warn("lend %s: P%d tid %d G%lld (%s): %s\n",
	     unseen ? "unseen call" : insys ? "blocking call" : "hog", pp->id, tid,
	     gp ? (long long)gp->id : 0LL,
	     gp ? waitreasons[atomic_load_explicit(&gp->waitreason, memory_order_relaxed)] : "-",
	     line);
}

/* Are the CPUs this process may run on all taken by its Ms that hold a
 * P, other than stuck's: as many of their threads running or runnable
 * (R in /proc) as CPUs in its affinity mask?  Then a spare's M would
 * only queue for a CPU beside them.  It is what a call weft does not see
 * is most often stuck on when they are: a lock inside the C library
 * (glibc malloc's arena lock: a raw futex wait) whose holder, one of
 * those threads, the kernel has not run yet.  A spare lent then runs
 * more Gs into the same lock: MariaDB's 1,000 clients connecting on
 * one P, pinned to one CPU, had 284 of 400 lends go to Ms asleep in
 * futex waits on glibc arena locks, and up to 60 OS threads. */
static bool cpusbusy(struct p *stuck)
{
	cpu_set_t set;
	int ncpu = 1;
	if (sys3(SYS_sched_getaffinity, 0, sizeof set, (long)&set) > 0)
		ncpu = CPU_COUNT(&set);
	int32_t n = atomic_load_explicit(&nallp, memory_order_acquire);
	int busy = 0;
	for (int32_t i = 0; i < n && busy < ncpu; i++) {
		struct p *pp = allp[i];
		if (pp == stuck || PSTATUS(atomic_load(&pp->state)) != P_RUNNING)
			continue;
		/* relaxed: a stale M only makes one more /proc read */
		struct m *m = __atomic_load_n(&pp->m, __ATOMIC_RELAXED);
		int tid = m ? atomic_load_explicit(&m->tid, memory_order_relaxed) : 0;
		if (tid > 0 && rt_threadstate(tid) == 'R')
			busy++;
	}
	return busy >= ncpu;
}

/* pp's M waits in the kernel and was asked to end the wait (KW_SENT). */
static bool kwaitsent(struct p *pp)
{
	/* relaxed: its owner writes it (a stale M is not in this P's wait) */
	struct m *m = __atomic_load_n(&pp->m, __ATOMIC_RELAXED);
	return m && atomic_load(&m->kwait) == KW_SENT;
}

/* pp is in a blocking call with Gs waiting behind it (or, from retake,
 * none but a kernel wait someone else asked to end: kwaitsent): if its
 * M waits in the kernel (kwait.c), ask it to end, and once more if it
 * still sleeps 1 ms later; true while that is the answer (asked, or
 * asked less than 1 ms ago), false for a spare. */
static bool kwaitstuck(struct p *pp, int64_t now)
{
	/* relaxed: its owner writes it (a stale M is not in this P's wait) */
	struct m *m = __atomic_load_n(&pp->m, __ATOMIC_RELAXED);
	int32_t kw = m ? atomic_load(&m->kwait) : KW_NONE;
	if (kw == KW_NONE)
		return false;
	if (kw == KW_WAIT && kwait_kick(m)) {
		pp->sm_kick = now;
		return true;
	}
	if (pp->sm_kick == 0) /* asked by someone else */
		pp->sm_kick = now;
	if (now - pp->sm_kick < RELEND_NS)
		return true;
	/* lost only if its thread still sleeps in the kernel: one that is
	 * runnable is on its way out (a loaded machine may not run it for
	 * a while), and a spare would only add a thread */
	int tid = atomic_load_explicit(&m->tid, memory_order_relaxed);
	if (tid <= 0 || rt_threadstate(tid) != 'S')
		return true;
	/* once, the kick again: it came between the wait's look and its
	 * call while the handler that would have moved it out could not
	 * run (TSan runs handlers later), and ends the call itself now */
	if (!pp->sm_rekick && kwait_rekick(m)) {
		pp->sm_rekick = true;
		pp->sm_kick = now;
		return true;
	}
	return false;
}

/* Is every P idle, or waiting in the kernel (kwait.c) with nothing
 * behind it, and the netpoller watched?  Then nothing can be stuck: sysmon may sleep until a P is
 * acquired or a kernel wait ends (exitsyscallwait wakes it).  seq_cst
 * loads, after the caller's store of sysmonwait: see exitsyscallwait. */
static bool allpquiet(void)
{
	/* Gs parked on the netpoller and no M blocked in it: sysmon's poll
	 * every 10 ms is the backstop (entersyscallwait wakes a poller) */
	if (atomic_load(&sched.runqsize) != 0 ||
	    (atomic_load(&netpollwaiters) > 0 && atomic_load(&sched.lastpoll) != 0))
		return false;
	int32_t n = atomic_load(&nallp);
	for (int32_t i = 0; i < n; i++) {
		struct p *pp = allp[i];
		if (PSTATUS(atomic_load(&pp->state)) == P_IDLE)
			continue;
		struct m *m = __atomic_load_n(&pp->m, __ATOMIC_RELAXED);
		int32_t kw = m ? atomic_load(&m->kwait) : KW_NONE;
		/* KW_SENT: asked to end and not yet out, perhaps to be
		 * kicked again (retake): not quiet */
		if (kw == KW_NONE || kw == KW_SENT || !runqempty(pp) ||
		    atomic_load_explicit(&pp->timer0when, memory_order_relaxed) != 0)
			return false;
	}
	return true;
}

/* What a round saw of the blocking calls with Gs behind them. */
struct watch {
	int n;      /* Ps in such a call, not yet long enough to be handed
		     * on: the next round decides, at most the watch gap later */
	int ended;  /* calls watched last round that had ended by this one */
	int lasted; /* ... that had not: still the same call */
};

/* The watch gap after a round (struct watch).  A server whose Gs make
 * file calls (stat, open, pread: apache's every request) has a P in a
 * blocking call with Gs behind it in most rounds, and at a fixed 20 us
 * pace sysmon woke ~0.5 times per request (a clock_nanosleep each, and
 * the CPU-clock and /proc reads of the rounds) to find the call ended by
 * itself.  So each round whose watched calls all ended doubles the gap,
 * up to SYSMON_MAX_NS, Go's sysmon's longest sleep; a round that finds a
 * watched call still in it (a read that blocks; or a short call whose
 * thread the kernel preempted, which on a busy CPU is frequent, so not
 * straight back to 20 us) halves it, down to 20 us: a program whose
 * calls block gets back to the 20-40 us hand-off within a few calls.
 * The cost: the first call that blocks after a run of short ones is
 * handed on up to 10 ms after it began (Go's sysmon: the same, once
 * idle), the next up to 5 ms, and so on. */
static int64_t watchgap_learn(int64_t gap, const struct watch *w)
{
	if (w->lasted)
		return gap / 2 > SYSMON_MIN_NS ? gap / 2 : SYSMON_MIN_NS;
	if (w->ended)
		return gap * 2 < SYSMON_MAX_NS ? gap * 2 : SYSMON_MAX_NS;
	return gap;
}

/* A timer of pp, a P whose M runs a G, is TIMER_LATE_NS overdue: leave
 * it to the owner?  sysmon firing it readies its G onto the global
 * queue's tail, behind every G preempted before it, and on a busy P the
 * sleeper then waited for all of them: under 8 Gs that never park but
 * take yield requests (a preloaded server's loops on MSG_DONTWAIT calls,
 * test_preload_serve), a 1 ms nanosleep on 1 P took a whole round of
 * them, each hand-off a sysmon round away (0.2-0.7 s at load 40-90),
 * and the test ran past its timeout.  So the running G is asked to
 * yield, as a hog is (PF_PREEMPT, counted in preempts): at its next
 * runtime call its M switches, fires the timer as the owner, and the
 * sleeper runs next (proc.c runqput_timer).  sysmon fires it itself,
 * as before, when the owner cannot: the P is in a call, or a P is idle
 * (the sleeper runs there at once, the G here goes on), or the M's
 * thread has had HOG_GRACE_NS of CPU time since the request without a
 * switch (C code that never calls in, a G locked to its M, a spare P
 * about to retire), or when its thread sleeps in the kernel; an M
 * descheduled on a loaded machine has had no CPU time, and is not passed
 * over.  true: left to the owner for now. */
static bool timers_toowner(struct p *pp, int64_t now, bool insys, uint32_t tick, int32_t np)
{
	if (insys || np > 0)
		return false;
	if (pp->sm_schedtick != tick || pp->sm_when == 0)
		return true; /* it switched since the last round (firing what
			      * was due then): watch this run first (below) */
	/* the owner M's thread CPU time, whatever it runs: a G inside the
	 * runtime (a channel operation: gthreadcpu says -1) takes the
	 * request as it leaves, and an M in its scheduler fires the timer
	 * itself; either does within far less than the grace of CPU time */
	struct m *m = __atomic_load_n(&pp->m, __ATOMIC_RELAXED);
	int tid = m ? atomic_load_explicit(&m->tid, memory_order_relaxed) : 0;
	int64_t cpu = tid > 0 ? rt_threadcpu(tid) : -1;
	if (cpu < 0)
		return false;
	if (pp->sm_preempt == 0) {
		/* not asked during this run yet (retake's hog rule asks in
		 * the same way, and takes this request as its own) */
		if (!(atomic_fetch_or(&pp->flags, PF_PREEMPT) & PF_PREEMPT))
			atomic_fetch_add(&sched.npreempt, 1);
		pp->sm_preempt = now;
		pp->sm_preemptcpu = cpu;
		return true;
	}
	if (pp->sm_preemptcpu < 0) {
		pp->sm_preemptcpu = cpu;
		return true;
	}
	if (cpu - pp->sm_preemptcpu >= HOG_GRACE_NS)
		return false; /* ran, yet no switch: it never calls in */
	/* no CPU time since the request: a thread the kernel has not run
	 * (R: the request waits for it) or one asleep in a call weft does
	 * not see (a raw syscall(), a futex inside libc; S, D), which never
	 * switches: its sleepers would wait for the call to end (dnh rawsys:
	 * main's usleep behind 20 readers, for good).  Asked only once the
	 * request is TIMER_LATE_NS old, and with inkernel's back-off: the
	 * /proc read is three calls */
	if (atomic_load_explicit(&pp->flags, memory_order_relaxed) & PF_LENT)
		return false;
	if (now - pp->sm_preempt < TIMER_LATE_NS)
		return true;
	return !threadasleep(pp, now, tid, false);
}

/* Lend capacity around stuck Ms; returns how many Ps were lent or asked
 * to yield.  *w: the blocking calls watched (struct watch). */
static int retake(int64_t now, struct watch *w)
{
	int n = 0;
	int32_t np = atomic_load(&sched.npidle);
	int32_t nps = atomic_load_explicit(&nallp, memory_order_acquire);
	/* a backstop for the Ms' spinning protocol: Gs on the global queue,
	 * an idle P, and no M looking for them.  Seen under TSan (sched::
	 * sysmon_wakes_for_acquired_p): a lent spare went idle as the G it
	 * was lent for was queued globally, and the blocked P, flagged
	 * PF_LENT, is skipped below; the G waited for good. */
	if (np > 0 && atomic_load(&sched.runqsize) > 0 && atomic_load(&sched.nmspinning) == 0) {
		wakep();
		n++;
	}
	for (int32_t i = 0; i < nps; i++) {
		struct p *pp = allp[i];
		if (PSTATUS(atomic_load(&pp->state)) != P_RUNNING) {
			/* (a retired P keeps no timers: proc.c hands them
			 * to P 0; an idle P's are the netpoller's) */
			pp->sm_when = 0;
			if (pp->sm_watched) { /* its M let go: the call ended */
				pp->sm_watched = false;
				w->ended++;
			}
			continue;
		}
		/* acquire: pairs with entersyscall's release */
		bool insys = atomic_load_explicit(&pp->insyscall, memory_order_acquire);
		uint32_t tick = insys ? atomic_load_explicit(&pp->syscalltick, memory_order_relaxed)
				      : atomic_load_explicit(&pp->schedtick, memory_order_relaxed);
		uint32_t *seen = insys ? &pp->sm_syscalltick : &pp->sm_schedtick;
		/* timers the owner is not getting to (it runs one G without a
		 * switch, or sits in a call): its next switch fires them, or
		 * sysmon does; the Gs sysmon readies go to the global queue,
		 * where any M can take them (timers_toowner) */
		int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
		if (t0 && now - t0 > TIMER_LATE_NS) {
			if (!timers_toowner(pp, now, insys, tick, np))
				checktimers(pp, now);
			n++;
		}
		if (pp->sm_watched) {
			/* a call watched last round: still the same one? */
			pp->sm_watched = false;
			if (insys && tick == pp->sm_syscalltick && pp->sm_when != 0)
				w->lasted++;
			else
				w->ended++;
		}
		if (*seen != tick || pp->sm_when == 0) {
			/* a new G run (or call): a yield asked of the one
			 * before is moot, and must not make the next G that
			 * runs long a hog without its own grace */
			if (!insys && *seen != tick &&
			    (atomic_load_explicit(&pp->flags, memory_order_relaxed) & PF_PREEMPT))
				atomic_fetch_and(&pp->flags, ~PF_PREEMPT);
			pp->sm_preempt = 0;
			*seen = tick;
			pp->sm_when = now;
			pp->sm_cpuwhen = 0;
			pp->sm_kick = 0;
			pp->sm_rekick = false;
			pp->sm_cpusbusy = 0;
			if (insys && (haswork(pp, now) || atomic_load(&sched.runqsize) != 0)) {
				w->n++;
				pp->sm_watched = true;
			}
			continue;
		}
		if (!haswork(pp, now) && atomic_load(&sched.runqsize) == 0) {
			/* nobody waits behind it; but a kernel wait someone
			 * else asked to end (a close of its file: pollfd.c
			 * kickkw) and still asleep 1 ms later is kicked again,
			 * once (kwaitstuck: under TSan the first kick's handler
			 * may run only after the call began) */
			if (insys && kwaitsent(pp))
				(void)kwaitstuck(pp, now);
			continue;
		}
		if (now - pp->sm_when < SYSCALL_RETAKE_NS) {
			w->n += insys;
			pp->sm_watched = insys;
			continue;
		}
		/* a kernel wait (kwait.c) with Gs behind it: asked to end, its
		 * G parks and the P runs them; no spare P, whose M would be one
		 * more thread per such P (a readier asks first: this is the
		 * backstop).  A wait still not ended 1 ms after it was asked
		 * (its kick lost: a linked program blocking SIGURG on the Ms)
		 * gets a spare as any blocking call */
		if (insys && kwaitstuck(pp, now)) {
			n++;
			continue;
		}
		/* blocked in a call weft does not see: as a blocking call */
		bool unseen = !insys && inkernel(pp, now, tick);
		insys = insys || unseen;
		/* already has a spare working for it; unless it is blocked
		 * (in a call weft saw or one it did not) and its Gs still wait
		 * RELEND_NS later: that spare's M blocked in one of them before
		 * it could steal the rest, and nothing else would run them
		 * until this call ends.  16 Gs on 1 P each blocked in a call
		 * the others' progress waits for (pwrite to an O_DSYNC file, a
		 * FIFO's open) had at most a few in the kernel at once, the
		 * rest queued on lent Ps (sched::blocked_calls_all_run_at_once;
		 * natively all 16 wait in the kernel together).  Also when the
		 * spare is busy rather than blocked: it runs the Gs it stole
		 * and steals no more, and the rest waited for the call to end,
		 * for good if the call waits for one of them
		 * (sched::gs_behind_a_busy_spare_run).  Each spare steals half
		 * of what is left, so a queue of n takes about log2(n) of them;
		 * more Ms then run G code than gomaxprocs until the call ends
		 * and its spares retire, as those threads would run natively.
		 * Only while the call's thread sleeps in the kernel (S, or D: a
		 * disk wait), as inkernel asks of a call weft did not see: one
		 * the kernel preempted in a short call (R, a loaded machine) is
		 * not blocked, and spares for it only add threads that compete
		 * for the CPUs (serve::dontwait_calls_take_yield counts them) */
		if ((atomic_load_explicit(&pp->flags, memory_order_relaxed) & PF_LENT) &&
		    (!insys || now - pp->sm_lent < RELEND_NS || runqempty(pp) ||
		     (!unseen && !masleep(pp, now))))
			continue;
		if (!insys && now - pp->sm_when < HOG_RETAKE_NS)
			continue;
		if (!insys) {
			/* a hog: first ask it to yield at its next runtime call
			 * (a G spawning or sending in a loop will); lend a P
			 * only if it has not by the next round, i.e. it runs
			 * user code that never enters the runtime */
			int tid;
			if (!(atomic_load(&pp->flags) & PF_PREEMPT)) {
				if (pp->sm_preempt) {
					/* asked before, and a runtime call took
					 * the request (gpreempt), yet no switch: a
					 * G locked to its M, or nothing else was
					 * runnable there.  It answers: no hog;
					 * ask again in 10 ms */
					pp->sm_preempt = 0;
					pp->sm_when = now;
					continue;
				}
				atomic_fetch_or(&pp->flags, PF_PREEMPT);
				atomic_fetch_add(&sched.npreempt, 1);
				pp->sm_preempt = now;
				pp->sm_preemptcpu = gthreadcpu(pp, &tid);
				n++; /* keep sysmon's pace up: the next step may be a lend */
				continue;
			}
			/* a hog is a G running its own code that has had 50 us
			 * of CPU since, not merely of wall time (longer slows a
			 * hog that never calls in, such as a spinner a signal
			 * handler must stop: sigintr spin_libc on 1 P took 12 s
			 * at 50 us, over 60 s at 1 ms): one descheduled on a
			 * loaded machine has not yet had the chance to
			 * reach a runtime call, and an M in its scheduler or
			 * waiting for the runtime's lock (cpu -1) is no hog:
			 * a spare lent around either only adds a thread that
			 * competes for the same CPUs */
			int64_t cpu = gthreadcpu(pp, &tid);
			if (now - pp->sm_preempt < HOG_GRACE_NS || cpu < 0 ||
			    pp->sm_preemptcpu < 0 || cpu - pp->sm_preemptcpu < HOG_GRACE_NS) {
				if (pp->sm_preemptcpu < 0)
					pp->sm_preemptcpu = cpu;
				continue;
			}
		}
		if (np > 0) {
			wakep(); /* an idle P will steal the waiting Gs */
			continue;
		}
		/* WEFT_DEBUG=busydefer=<us>: a call weft does not see, while
		 * the CPUs are busy with Ms that hold Ps, gets no spare yet
		 * (cpusbusy says why); one after that long all the same, so a
		 * G truly blocked in the kernel still gets one, later,
		 * whatever runs beside it (no cap: the Gs behind it may be
		 * what it waits for).  Off by default: MariaDB at 512 clients
		 * had 8-9 OS threads instead of 44-45 with it (two pairs of
		 * three), but 0.4-0.6x the throughput (docs/design.md) */
		int64_t defer = weftenv.busydefer_ns;
		if (unseen && defer > 0) {
			if (!pp->sm_cpusbusy && cpusbusy(pp)) {
				pp->sm_cpusbusy = now;
				atomic_fetch_add_explicit(&sched.nbusylenddefer, 1, memory_order_relaxed);
				continue;
			}
			if (pp->sm_cpusbusy && now - pp->sm_cpusbusy < defer)
				continue;
		}
		pp->sm_cpusbusy = 0;
		atomic_fetch_add(insys ? &sched.nsyscallretake : &sched.nhogretake, 1);
		pp->sm_when = 0;
		pp->sm_lent = now;
		if (weftenv.lendlog)
			lendsay(pp, insys, unseen);
		lendp(pp, !insys);
		n++;
	}
	return n;
}

static void schedtrace(int64_t now, int64_t start)
{
	char buf[4096];
	int32_t nthreads = atomic_load(&sched.mcount) + 1; /* + sysmon */
	lock(&sched.lock); /* mput/mget change nmidle under it */
	int32_t nmidle = sched.nmidle;
	unlock(&sched.lock);
	int n = snprintf(buf, sizeof buf,
			 "SCHED %lldms: gomaxprocs=%d idleprocs=%d threads=%d spinningthreads=%d "
			 "idlethreads=%d runqueue=%d gs=%lld [",
			 (long long)((now - start) / 1000000), sched.gomaxprocs,
			 atomic_load(&sched.npidle), nthreads, atomic_load(&sched.nmspinning),
			 nmidle, atomic_load(&sched.runqsize),
			 (long long)gcount());
	int32_t nps = atomic_load_explicit(&nallp, memory_order_acquire);
	if (nps > sched.gomaxprocs)
		nps = sched.gomaxprocs;
	for (int32_t i = 0; i < nps && n < (int)sizeof buf - 32; i++) {
		struct p *pp = allp[i];
		uint32_t len = atomic_load(&pp->runqtail) - atomic_load(&pp->runqhead);
		n += snprintf(buf + n, sizeof buf - n, "%s%u", i ? " " : "", len);
	}
	n += snprintf(buf + n, sizeof buf - n, "]");
	if (n < (int)sizeof buf - 128)
		n += snprintf(buf + n, sizeof buf - n,
			      " kernelwaits=%lld kwaitkicks=%lld netpolls=%lld/%lld sysmonwakes=%lld"
			      " lends=%lld/%lld busydefers=%lld preempts=%lld turns=%lld mthreads=%lld/%lld",
			      (long long)atomic_load(&sched.nsyscallwait),
			      (long long)atomic_load(&sched.nkwaitkick),
			      (long long)atomic_load(&sched.nnetpoll),
			      (long long)atomic_load(&sched.nbusypoll),
			      (long long)atomic_load(&sched.nsysmonwake),
			      (long long)atomic_load(&sched.nsyscallretake),
			      (long long)atomic_load(&sched.nhogretake),
			      (long long)atomic_load_explicit(&sched.nbusylenddefer, memory_order_relaxed),
			      (long long)atomic_load(&sched.npreempt),
			      (long long)atomic_load(&sched.nturn),
			      (long long)atomic_load_explicit(&sched.nmmade, memory_order_relaxed),
			      (long long)atomic_load_explicit(&sched.nmretired, memory_order_relaxed));
	/* switches G->G, G->scheduler, scheduler->G and FS base loads,
	 * summed over the Ms */
	uint64_t sw[3] = { 0 }, fs = 0;
	for (struct m *m = atomic_load(&allm); m; m = m->alllink) {
		sw[0] += atomic_load_explicit(&m->nswgg, memory_order_relaxed);
		sw[1] += atomic_load_explicit(&m->nswg0, memory_order_relaxed);
		sw[2] += atomic_load_explicit(&m->nsw0g, memory_order_relaxed);
		fs += atomic_load_explicit(&m->nfsload, memory_order_relaxed);
	}
	/* runnext taken without a locked instruction (proc.c runnext_take) */
	uint64_t rnplain = 0;
	int32_t nall = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < nall; i++)
		rnplain += atomic_load_explicit(&allp[i]->nrnplain, memory_order_relaxed);
	if (n > 0 && n < (int)sizeof buf - 128)
		snprintf(buf + n, sizeof buf - n, " switches=%llu/%llu/%llu fsloads=%llu rnplain=%llu",
			 (unsigned long long)sw[0], (unsigned long long)sw[1],
			 (unsigned long long)sw[2], (unsigned long long)fs,
			 (unsigned long long)rnplain);
	warn("%s", buf);
}

static void *sysmon(void *arg)
{
	(void)arg;
	int64_t delay = SYSMON_MIN_NS;
	int64_t watchgap = SYSMON_MIN_NS; /* watchgap_learn */
	int64_t start = nanotime(), lasttrace = start, lastscavenge = start;
	int64_t quietsince = 0; /* since when allpquiet (0: not now) */
	bool scavenge_pending = false;
	for (;;) {
		usleep_ns(delay);
		atomic_fetch_add_explicit(&sched.nsysmonwake, 1, memory_order_relaxed);
		int64_t now = nanotime();
		atomic_store_explicit(&coarsenow, now, memory_order_relaxed);

		/* everything idle: sleep until a P is acquired (or the next
		 * trace line is due).  Or every P idle or waiting in the
		 * kernel with nothing behind it, for QUIET_NS: sleep until a
		 * P is acquired or a kernel wait ends (not at once: an event
		 * loop's waits end many times a second, and each end would
		 * then cost a futex wake) */
		if (!allpquiet())
			quietsince = 0;
		else if (quietsince == 0)
			quietsince = now;
		bool quiet = quietsince != 0 && now - quietsince >= QUIET_NS;
		if (quiet || allpidle()) {
			lock(&sched.lock);
			noteclear(&sched.sysmonnote);
			/* say we wait, then look (seq_cst both, as acquirep
			 * stores a P's state and then reads sysmonwait, and
			 * exitsyscallwait a kernel wait's end): a P acquired
			 * meanwhile is seen here, or sees us waiting and wakes
			 * us (acquirep does not take sched.lock) */
			atomic_store(&sched.sysmonwait, 1);
			if (quiet ? allpquiet() : allpidle()) {
				unlock(&sched.lock);
				int64_t t = weftenv.schedtrace_ms ? weftenv.schedtrace_ms * 1000000 : -1;
				if (scavenge_pending && (t < 0 || t > SCAVENGE_NS))
					t = SCAVENGE_NS;
				t = sleep_for_timers(t, now);
				bool woken = notetsleep(&sched.sysmonnote, t);
				lock(&sched.lock);
				atomic_store(&sched.sysmonwait, 0);
				unlock(&sched.lock);
				if (woken) /* something runs: watch it afresh */
					quietsince = 0;
				now = nanotime();
				atomic_store_explicit(&coarsenow, now, memory_order_relaxed);
			} else {
				atomic_store(&sched.sysmonwait, 0);
				unlock(&sched.lock);
			}
		}

		timers_backstop(now);
		int64_t last = atomic_load(&sched.lastpoll);
		/* fd waiters, or the clock watch (a wall-clock set ends
		 * realtime waits early even while every P is busy) */
		if ((atomic_load(&netpollwaiters) > 0 || netpoll_clockwatched()) && last != 0 &&
		    last + POLL_IDLE_NS < now &&
		    atomic_compare_exchange_strong(&sched.lastpoll, &last, now)) {
			struct g *list = netpoll(0);
			injectglist(list);
		}
		/* the next sleep: 20 us after a round that did something;
		 * else twice as long as the last, up to 10 ms (Go's sysmon
		 * keeps 20 us for 50 idle rounds first: ~60 wakeups after
		 * every handoff), and no longer than the watch gap while a
		 * blocking call with Gs behind it is watched */
		struct watch w = { 0, 0, 0 };
		int done = retake(now, &w);
		watchgap = watchgap_learn(watchgap, &w);
		if (done) {
			delay = SYSMON_MIN_NS;
		} else {
			delay = delay * 2 < SYSMON_MAX_NS ? delay * 2 : SYSMON_MAX_NS;
			if (w.n && delay > watchgap)
				delay = watchgap;
		}
		if (now - lastscavenge >= SCAVENGE_NS) {
			lastscavenge = now;
			scavenge_pending = stack_scavenge();
		}
		if (weftenv.schedtrace_ms && now - lasttrace >= weftenv.schedtrace_ms * 1000000) {
			lasttrace = now;
			schedtrace(now, start);
		}
	}
	return NULL;
}

/* The size of weft_stats_t as first published (up to timers_rescued):
 * what binaries built before weft_stats_sized existed pass, through the
 * plain symbol weft_stats.  Fields are only ever added after it. */
#define STATS_V1_SIZE offsetof(weft_stats_t, kernel_waits)
_Static_assert(STATS_V1_SIZE == 64, "weft_stats_t's first fields moved: the ABI broke");

static void stats_fill(weft_stats_t *st)
{
	runtime_ensure();
	lock(&sched.lock);
	st->procs = sched.gomaxprocs;
	st->idle_procs = atomic_load(&sched.npidle);
	st->threads = atomic_load(&sched.mcount) + 1;
	st->idle_threads = sched.nmidle;
	st->spinning_threads = atomic_load(&sched.nmspinning);
	st->global_runq = atomic_load(&sched.runqsize);
	unlock(&sched.lock);
	st->gs = gcount();
	st->syscall_handoffs = atomic_load(&sched.nsyscallretake);
	st->hog_handoffs = atomic_load(&sched.nhogretake);
	st->preempts = atomic_load(&sched.npreempt);
	st->timers_rescued = atomic_load(&sched.ntimersrescued);
	st->kernel_waits = atomic_load(&sched.nsyscallwait);
	st->netpolls = atomic_load(&sched.nnetpoll);
	st->sysmon_wakeups = atomic_load(&sched.nsysmonwake);
	int64_t fast = 0;
	int32_t nall = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < nall; i++)
		fast += (int64_t)atomic_load_explicit(&allp[i]->nchanfast, memory_order_relaxed);
	st->chan_fast_handoffs = fast;
	st->thread_state_reads = atomic_load(&sched.nstatreads);
	st->threads_made = atomic_load_explicit(&sched.nmmade, memory_order_relaxed);
	st->threads_retired = atomic_load_explicit(&sched.nmretired, memory_order_relaxed);
}

int weft_stats_sized(weft_stats_t *st, size_t size)
{
	if (!st || size < STATS_V1_SIZE) {
		errno = EINVAL;
		return -1;
	}
	/* filled on our stack, then only the caller's size copied out: a
	 * caller built with an older, smaller struct is never written past */
	weft_stats_t all;
	stats_fill(&all);
	size_t n = size < sizeof all ? size : sizeof all;
	memcpy(st, &all, n);
	if (size > n) /* a newer caller's fields this library does not know */
		memset((char *)st + n, 0, size - n);
	return 0;
}

/* The symbol of the first version (the header's weft_stats is a macro
 * for weft_stats_sized): the first version's fields only. */
int(weft_stats)(weft_stats_t *st)
{
	return weft_stats_sized(st, STATS_V1_SIZE);
}

struct lock wakelock; /* not static: fork.c clears it in a child */

void sysmon_wake(void)
{
	lock(&wakelock);
	lock(&sched.lock);
	if (atomic_load(&sched.sysmonwait)) {
		atomic_store(&sched.sysmonwait, 0);
		unlock(&sched.lock);
		notewakeup(&sched.sysmonnote);
	} else {
		unlock(&sched.lock);
	}
	unlock(&wakelock);
}

/* 1 while sysmon is owed (runtime.h): it could not be started, or a fork
 * child put it off; the next M the system lets us create, or the next G,
 * starts it (proc.c sysmon_owed). */
_Atomic int sysmon_pending;

/* Start sysmon.  If the system refuses a thread (RLIMIT_NPROC, a pid
 * limit), the Gs still run on the Ms there are, only without blocking-call
 * handoff, hog preemption or overdue-timer help until a thread can be
 * made: said once (rt_thread_refused), retried by newm. */
void sysmon_start(void)
{
	extern int (*rt_pthread_create)(pthread_t *, const pthread_attr_t *,
					void *(*)(void *), void *);
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 * 1024);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	int e = rt_pthread_create(&t, &a, sysmon, NULL);
	pthread_attr_destroy(&a);
	if (e != 0) {
		atomic_store(&sysmon_pending, 1);
		rt_thread_refused(e);
	}
}
