/*
 * deadlock.c - Go's checkdead for weft: when nothing can ever run
 * again, say so and exit with status 2 instead of hanging.
 *
 *   weft: fatal: all green threads are asleep - deadlock!
 *
 * "Nothing can run again" means all of:
 *   - there is at least one live G, and none is runnable, running or in
 *     a blocking call; none waits on the netpoller;
 *   - every P is idle and every M is idle (on the idle list, or asleep
 *     with a locked G that is itself parked), and no run queue holds a G;
 *   - no timer is pending (a sleep or a timeout will wake someone);
 *   - every OS thread that is not the runtime's own (Ms, sysmon, the
 *     dumper) is blocked in waiter_block with no timeout: any other
 *     thread - running, sleeping in read(), waiting with a timeout -
 *     might still wake a G.
 * A false report kills a correct program, so every doubt means "alive":
 * the counters are read twice around the whole check and must agree, a
 * thread is counted as blocked only from after it released its
 * primitive (unlockf) until it is woken (sema.c counts wakes in
 * nthreadwoken before the futex wake), and an unreadable /proc means no
 * verdict.
 *
 * Called by an M about to sleep with every P idle (stopm: on whatever
 * TLS block its scheduler kept, so only the /proc read and the report
 * load the M's own), and by a plain thread about to block
 * (waiter_block): whichever comes last sees
 * the other's state, since each publishes its own (mput under
 * sched.lock; nthreadwait, seq_cst) before it looks.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag.h"
#include "sys.h"

struct gscan {
	int64_t waiting;  /* parked on runtime primitives */
	bool alive;       /* some G can run or will be woken from outside */
};

static void scang(struct g *gp, void *arg)
{
	struct gscan *s = arg;
	switch (atomic_load_explicit(&gp->status, memory_order_relaxed)) {
	case G_RUNNABLE:
	case G_RUNNING:
	case G_SYSCALL:
		s->alive = true;
		break;
	case G_WAITING:
		if (atomic_load_explicit(&gp->blocking, memory_order_relaxed))
			s->alive = true; /* netpoller or another party outside the runtime */
		else
			s->waiting++;
		break;
	default:
		break;
	}
}

/* A retired M's thread on its way out (proc.c mretire): a runtime
 * thread that will never act, not a plain one. */
static bool exiting(int tid)
{
	for (struct m *m = atomic_load(&allm); m; m = m->alllink)
		if (atomic_load_explicit(&m->exittid, memory_order_relaxed) == tid)
			return true;
	return false;
}

/* Threads in this process that have not exited (zombies and retired
 * Ms' excluded), or -1 if /proc cannot tell. */
static int livethreads(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || exiting(atoi(de->d_name)))
			continue;
		char path[300], buf[512];
		snprintf(path, sizeof path, "/proc/self/task/%s/stat", de->d_name);
		int fd = (int)sys_open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* exited meanwhile */
		ssize_t r = sys_read(fd, buf, sizeof buf - 1);
		sys_close(fd);
		if (r <= 0)
			continue;
		buf[r] = 0;
		/* "tid (comm) S ...": the state follows the last ')' */
		char *p = strrchr(buf, ')');
		if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
			continue;
		n++;
	}
	closedir(d);
	return n;
}

/* Ms asleep with a locked G that is parked (stoplockedm): idle too.
 * Relaxed reads of other Ms' fields (struct m): such an M leaves this
 * state only by acquiring a P, which dead()'s final allpidle() sees, and
 * its G is readied first, which scang sees as runnable. */
static int32_t lockedidle(void)
{
	int32_t n = 0;
	for (struct m *m = atomic_load(&allm); m; m = m->alllink) {
		struct g *lg = atomic_load_explicit(&m->lockedg, memory_order_relaxed);
		if (lg && !atomic_load_explicit(&m->p, memory_order_relaxed) &&
		    !atomic_load_explicit(&m->curg, memory_order_relaxed) &&
		    atomic_load_explicit(&lg->status, memory_order_relaxed) == G_WAITING)
			n++;
	}
	return n;
}

static bool runqsempty(void)
{
	int32_t n = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < n; i++)
		if (!runqempty(allp[i]))
			return false;
	return true;
}

struct counters {
	int32_t threadwait, threadwoken, npidle, nmidle, mcount;
	int64_t ngs;
};

static void readcounters(struct counters *c)
{
	c->threadwait = atomic_load(&sched.nthreadwait);
	c->threadwoken = atomic_load(&sched.nthreadwoken);
	lock(&sched.lock);
	c->npidle = atomic_load(&sched.npidle);
	c->nmidle = sched.nmidle;
	c->mcount = atomic_load(&sched.mcount);
	unlock(&sched.lock);
	c->ngs = gcount();
}

static bool samecounters(const struct counters *a, const struct counters *b)
{
	return a->threadwait == b->threadwait && a->threadwoken == b->threadwoken &&
	       a->npidle == b->npidle && a->nmidle == b->nmidle && a->mcount == b->mcount &&
	       a->ngs == b->ngs;
}

/* The one M blocked in the netpoller keeps "not every M is idle" true
 * though it may wait for nothing (its timer was deleted): wake it so
 * that it looks again and, if all is dead, comes here through stopm. */
static void kickpoller(const struct counters *c, int32_t idle)
{
	if (c->mcount - idle == 1 && atomic_load(&sched.lastpoll) == 0 &&
	    atomic_load(&netpollwaiters) == 0 && earliest_timer() == 0)
		netpollbreak();
}

static bool dead(void)
{
	struct counters a, b;
	readcounters(&a);
	if (a.ngs <= 0 || !allpidle())
		return false;
	int32_t idle = a.nmidle + lockedidle();
	if (idle != a.mcount) {
		kickpoller(&a, idle);
		return false;
	}
	if (atomic_load(&sched.runqsize) != 0 || !runqsempty())
		return false;
	struct gscan s = { 0, false };
	forEachG(scang, &s);
	if (s.alive || s.waiting == 0)
		return false;
	if (earliest_timer() != 0 || atomic_load(&netpollwaiters) != 0)
		return false;
	/* opendir allocates, which only ever runs on an OS thread's own
	 * TLS (alloc.c): the scheduler may have kept a G's block */
	struct m *m = getm();
	uintptr_t fs = tls_ownenter(m);
	int nthreads = livethreads();
	tls_ownleave(m, fs);
	if (nthreads < 0)
		return false;
	int plain = nthreads - a.mcount - 1 /* sysmon */ - dump_nthreads();
	if (plain != a.threadwait - a.threadwoken)
		return false; /* a thread that might still act (or an inconsistent count) */
	readcounters(&b);
	return samecounters(&a, &b) && idle == b.nmidle + lockedidle() && allpidle();
}

static _Atomic int reported;

static void report(void)
{
	(void)tls_ownenter(getm()); /* stdio and the dump: the thread's own TLS, for good */
	int zero = 0;
	if (!atomic_compare_exchange_strong(&reported, &zero, 1))
		for (;;)
			sys_pause(); /* another thread is reporting and will exit */
	warn("fatal: all green threads are asleep - deadlock!\n");
	weft_dump(stderr);
	/* what the program printed so far, unless someone holds stdout */
	if (ftrylockfile(stdout) == 0) {
		fflush(stdout);
		funlockfile(stdout);
	}
	_exit(2);
}

void checkdead(void)
{
	if (dead())
		report();
}

void checkdead_thread(void)
{
	/* cheap test first: a thread blocks often, and usually some P runs */
	if (!atomic_load_explicit(&sched_started, memory_order_acquire) || !allpidle())
		return;
	checkdead();
}
