/*
 * timer.c - per-P timers in a 4-ary min-heap ordered by 'when' (as Go's
 * runtime/time.go).  Timers go on the P of the M that adds them; the
 * owner runs due ones at each schedule, an idle M steals due ones from
 * other Ps, and the one M blocked in the netpoller sleeps until the
 * earliest 'when' over all Ps.  So an M with nothing to run sleeps until
 * the next timer, never in a polling loop.
 *
 * t->pp is the heap a timer is on (NULL when not queued); it changes only
 * under that heap's timerslock.  p->timer0when mirrors the heap's minimum
 * for lock-free peeks.  A P that retires (a spare given back, a P beyond
 * weft_maxprocs) hands its timers to P 0 (movetimers), so every queued
 * timer is on a P that an M holds or will hold again.
 *
 * A timer with an rtwhen stands for a deadline on the wall clock
 * (CLOCK_REALTIME): when the kernel reports the clock set (netpoll.c's
 * clock watch), timers_clockset places each such timer again from its
 * rtwhen, as the kernel re-evaluates its own CLOCK_REALTIME timers on a
 * clock_settime (glibc's timed waits are futex waits on that clock).
 */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>

#include "runtime.h"

#define TPP(t) ((struct p *_Atomic *)&(t)->pp)

static void siftup(struct timer **h, int32_t i)
{
	struct timer *t = h[i];
	while (i > 0) {
		int32_t parent = (i - 1) / 4;
		if (t->when >= h[parent]->when)
			break;
		h[i] = h[parent];
		h[i]->idx = i;
		i = parent;
	}
	h[i] = t;
	t->idx = i;
}

static void siftdown(struct timer **h, int32_t n, int32_t i)
{
	struct timer *t = h[i];
	for (;;) {
		int32_t c = 4 * i + 1;
		if (c >= n)
			break;
		int32_t best = c;
		for (int32_t k = c + 1; k < c + 4 && k < n; k++)
			if (h[k]->when < h[best]->when)
				best = k;
		if (h[best]->when >= t->when)
			break;
		h[i] = h[best];
		h[i]->idx = i;
		i = best;
	}
	h[i] = t;
	t->idx = i;
}

static void update0(struct p *pp)
{
	atomic_store(&pp->timer0when, pp->ntimers ? pp->timers[0]->when : 0);
}

/* Remove heap entry i; pp->timerslock held. */
static void heapdel(struct p *pp, int32_t i)
{
	struct timer **h = pp->timers;
	struct timer *t = h[i];
	int32_t last = --pp->ntimers;
	if (i != last) {
		struct timer *moved = h[last];
		h[i] = moved;
		moved->idx = i;
		siftdown(h, pp->ntimers, i);
		siftup(h, moved->idx);
	}
	t->idx = -1;
	atomic_store_explicit(TPP(t), NULL, memory_order_release);
	update0(pp);
}

/* Make room for n more timers in pp's heap; pp->timerslock held. */
static void growheap(struct p *pp, int32_t n)
{
	if (pp->ntimers + n <= pp->captimers)
		return;
	int32_t ncap = pp->captimers ? pp->captimers : 64;
	while (ncap < pp->ntimers + n)
		ncap *= 2;
	struct timer **h = rtalloc(ncap * sizeof *h);
	if (!h)
		fatal("out of memory growing the timer heap");
	if (pp->ntimers)
		memcpy(h, pp->timers, pp->ntimers * sizeof *h);
	rtfree(pp->timers);
	pp->timers = h;
	pp->captimers = ncap;
}

void addtimer(struct timer *t)
{
	struct m *m = getm();
	struct p *pp = m ? m->p : NULL;
	if (!pp)
		fatal("addtimer without a P");
	lock(&pp->timerslock);
	growheap(pp, 1);
	pp->timers[pp->ntimers] = t;
	atomic_store_explicit(TPP(t), pp, memory_order_relaxed);
	siftup(pp->timers, pp->ntimers++);
	bool first = t->idx == 0;
	/* read under the lock: once it is dropped the timer may fire and
	 * its owner re-arm it with another when (waiter_commit) */
	int64_t when = t->when;
	update0(pp);
	unlock(&pp->timerslock);
	if (first)
		wakenetpoller(when);
}

int64_t movetimers(struct p *pp, struct p *to)
{
	if (pp == to)
		return 0;
	lock(&pp->timerslock);
	int32_t n = pp->ntimers;
	if (n == 0) {
		unlock(&pp->timerslock);
		return 0;
	}
	/* Lock order: a retiring P's, then the live P's (to never retires
	 * while it receives).  A timer is on one heap or the other at every
	 * moment, with t->pp naming it under both locks, so deltimer and
	 * checktimers, which lock the heap t->pp names, see it exactly once. */
	lock(&to->timerslock);
	growheap(to, n);
	for (int32_t i = 0; i < n; i++) {
		struct timer *t = pp->timers[i];
		to->timers[to->ntimers] = t;
		atomic_store_explicit(TPP(t), to, memory_order_release);
		siftup(to->timers, to->ntimers++);
	}
	pp->ntimers = 0;
	update0(pp);
	update0(to);
	int64_t t0 = to->timers[0]->when;
	unlock(&to->timerslock);
	unlock(&pp->timerslock);
	return t0;
}

bool deltimer(struct timer *t)
{
	for (;;) {
		struct p *pp = atomic_load_explicit(TPP(t), memory_order_acquire);
		if (!pp)
			return false;
		lock(&pp->timerslock);
		if (atomic_load_explicit(TPP(t), memory_order_relaxed) == pp) {
			heapdel(pp, t->idx);
			unlock(&pp->timerslock);
			return true;
		}
		unlock(&pp->timerslock);
	}
}

/* Run pp's due timers (on an M holding some P, or sysmon).  Returns the
 * next when.  The owner readies the Gs of due timers at its queue's tail
 * in 'when' order; another thread - sysmon, for a P whose M fell behind,
 * or an idle M stealing due timers - readies them elsewhere (the global
 * queue, its own P), from where they may run after Gs of later timers
 * that the owner fires meanwhile: those fires are counted (weft_stats
 * timers_rescued). */
int64_t checktimers(struct p *pp, int64_t now)
{
	int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
	if (t0 == 0 || t0 > now)
		return t0;
	struct m *m = getm();
	bool owner = m && m->p == pp;
	lock(&pp->timerslock);
	while (pp->ntimers > 0 && pp->timers[0]->when <= now) {
		if (!owner)
			atomic_fetch_add_explicit(&sched.ntimersrescued, 1, memory_order_relaxed);
		struct timer *t = pp->timers[0];
		void (*f)(void *, uintptr_t) = t->f;
		void *arg = t->arg;
		uintptr_t seq = t->seq;
		heapdel(pp, 0);
		unlock(&pp->timerslock);
		f(arg, seq); /* t may be re-added or reused from here on */
		lock(&pp->timerslock);
	}
	t0 = pp->ntimers ? pp->timers[0]->when : 0;
	unlock(&pp->timerslock);
	return t0;
}

int64_t earliest_timer(void)
{
	int64_t best = 0;
	int32_t n = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < n; i++) {
		int64_t w = atomic_load(&allp[i]->timer0when);
		if (w && (!best || w < best))
			best = w;
	}
	return best;
}

/* A timer at 'when' was added: if the M blocked in the netpoller would
 * sleep past it, break its sleep; if no M is polling, wake one. */
void wakenetpoller(int64_t when)
{
	if (atomic_load(&sched.lastpoll) == 0) {
		int64_t until = atomic_load(&sched.polluntil);
		if (until == 0 || when < until)
			netpollbreak();
	} else {
		wakep();
	}
}

/* ---- deadlines on the wall clock ---------------------------------------- */

_Atomic uint64_t clockgen;
_Atomic int64_t rtskew;
int (*rt_wallclock)(struct timespec *ts) STARTUP_DATA;

int64_t rt_realtime(void)
{
	struct timespec ts;
	int (*wall)(struct timespec *) = rt_wallclock;
	if (!wall || wall(&ts) != 0)
		rt_clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec +
	       atomic_load_explicit(&rtskew, memory_order_relaxed);
}

void g_rtdeadline(int64_t rtns)
{
	struct g *gp = getg();
	if (!gp)
		return; /* a plain thread's timed sleep is a relative futex wait */
	if (rtns && !netpoll_watchclock())
		rtns = 0; /* no watch: the deadline acts as a duration */
	gp->rtdeadline = rtns;
	/* before the caller reads the clock for the duration: a clock set
	 * from here on either finds the timer queued or changes clockgen,
	 * which waiter_commit checks once it has queued it (sema.c) */
	gp->rtgen = atomic_load(&clockgen);
}

/* Re-place pp's realtime timers for wall-clock time rt at monotonic time
 * now; pp->timerslock held.  Then the heap is rebuilt (any entry may have
 * moved either way). */
static void replace_rt(struct p *pp, int64_t now, int64_t rt)
{
	bool moved = false;
	for (int32_t i = 0; i < pp->ntimers; i++) {
		struct timer *t = pp->timers[i];
		if (!t->rtwhen)
			continue;
		int64_t left = t->rtwhen - rt;
		int64_t when = left > 0 ? now + left : now;
		if (when != t->when) {
			t->when = when;
			moved = true;
		}
	}
	if (!moved)
		return;
	for (int32_t i = (pp->ntimers - 2) / 4; i >= 0 && pp->ntimers > 1; i--)
		siftdown(pp->timers, pp->ntimers, i);
	update0(pp);
}

void timers_clockset(void)
{
	/* seq_cst: pairs with waiter_commit, which queues its timer (under
	 * a timerslock) and then loads clockgen: either the scan below sees
	 * the timer, or the committer sees the new count and calls us */
	atomic_fetch_add(&clockgen, 1);
	/* the wall clock once, outside the locks: it may be the program's
	 * (rt_wallclock), a call into code that is not weft's */
	int64_t now = nanotime(), rt = rt_realtime();
	int32_t n = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < n; i++) {
		struct p *pp = allp[i];
		lock(&pp->timerslock);
		replace_rt(pp, now, rt);
		unlock(&pp->timerslock);
	}
	/* a timer now due, or due sooner: whoever sleeps until the old
	 * earliest wakes to look again */
	int64_t when = earliest_timer();
	if (when)
		wakenetpoller(when);
}
