/*
 * sema.c - the one park/ready path that every blocking primitive uses,
 * for Gs and plain OS threads alike (protocol in runtime.h), and the
 * wait group built on it.
 *
 * A G's wait is identified by g->waitstate = (seq << 2) | state, bumped at
 * every wait: a waker's claim and a deadline timer's expiry are both CAS
 * on that word with the wait's seq, so exactly one wins, and a stale
 * timer from an earlier wait can never end a later one.  The word lives
 * in the G descriptor (never freed), not on the stack, so a timer that
 * lost the race may still touch it safely.
 *
 * An interruption (g_interrupt: a signal for the G, in the shim) is a
 * third party in the same race: a CAS of the wait's word to WS_INTR,
 * which the primitives take for a timeout (they unqueue themselves)
 * and the hooks, asking g_interrupted, for EINTR.  Only a wait begun
 * with g->introk set can be interrupted, so no primitive that cannot
 * give up (a mutex, a join) ever sees one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <time.h>

#include "runtime.h"
#include "sys.h"

void waiter_init(struct waiter *w)
{
	struct g *gp = getg();
	if (gp) {
		waiter_init_g(w, gp);
		w->excl = false;
	} else {
		w->g = NULL;
		w->queued = false;
		w->next = w->prev = NULL;
		w->result = 0;
		w->sel = NULL;
		w->excl = false;
	}
	atomic_store_explicit(&w->done, WS_WAIT, memory_order_relaxed);
	noteclear(&w->note);
}

/* Under the primitive's lock: take w's wakeup for ourselves.  acq_rel:
 * the waker's writes (result, elem) happen before the woken side reads. */
bool waiter_claim(struct waiter *w)
{
	if (w->excl) {
		/* nobody else can end this wait (struct waiter): a plain
		 * store; release orders what the waker wrote before it (the
		 * woken side reads the word with acquire, and is readied
		 * through a run queue or note, both release/acquire too) */
		if (w->g)
			atomic_store_explicit(&w->g->waitstate, w->seq << 2 | WS_WOKEN,
					      memory_order_release);
		else
			atomic_store_explicit(&w->done, WS_WOKEN, memory_order_release);
		return true;
	}
	if (w->g) {
		uint64_t want = w->seq << 2 | WS_WAIT;
		return atomic_compare_exchange_strong_explicit(&w->g->waitstate, &want,
							       w->seq << 2 | WS_WOKEN,
							       memory_order_acq_rel,
							       memory_order_relaxed);
	}
	uint32_t want = WS_WAIT;
	return atomic_compare_exchange_strong_explicit(&w->done, &want, WS_WOKEN,
						       memory_order_acq_rel, memory_order_relaxed);
}

void waiter_wake(struct waiter *w)
{
	if (w->g) {
		goready(w->g);
		return;
	}
	/* counted until the thread runs again, so that the deadlock check
	 * never takes a woken thread for a blocked one */
	atomic_fetch_add(&sched.nthreadwoken, 1);
	notewakeup(&w->note);
}

/* Claim every waiter of a detached list (linked by next), under the
 * primitive's lock; returns those whose wake-up is ours (timed-out ones
 * are dropped).  Wake them with waiters_wake after unlocking. */
struct waiter *waiters_claim(struct waiter *list)
{
	struct waiter *wake = NULL;
	while (list) {
		struct waiter *w = list;
		list = w->next;
		w->queued = false;
		if (waiter_claim(w)) {
			w->next = wake;
			wake = w;
		}
	}
	return wake;
}

void waiters_wake(struct waiter *wake)
{
	while (wake) {
		struct waiter *w = wake;
		wake = w->next; /* read before the wake: w may vanish after it */
		waiter_wake(w);
	}
}

/* Deadline timer of a parked G: arg is the G, seq its wait. */
static void waiter_timeout(void *arg, uintptr_t seq)
{
	struct g *gp = arg;
	uint64_t want = (uint64_t)seq << 2 | WS_WAIT;
	if (atomic_compare_exchange_strong_explicit(&gp->waitstate, &want,
						    (uint64_t)seq << 2 | WS_TIMEDOUT,
						    memory_order_acq_rel, memory_order_relaxed))
		goready_timer(gp); /* due timers wake in 'when' order */
}

struct parkctx {
	void (*unlockf)(void *);
	void *arg;
	int64_t deadline;
	int64_t rtwhen; /* deadline is this time on CLOCK_REALTIME, 0: monotonic */
	uint64_t rtgen; /* clockgen when the caller read the wall clock */
	bool intr;      /* interruptible */
};

/* gp's wait ends for its interruption request: bind the request to it
 * (INTR_ASKED -> INTR_BOUND), unless the router withdrew it meanwhile. */
static void intr_bind(struct g *gp)
{
	uint32_t asked = INTR_ASKED;
	atomic_compare_exchange_strong(&gp->intrreq, &asked, INTR_BOUND);
}

bool g_interrupt(struct g *gp)
{
	/* seq_cst RMW (a store of ASKED over NONE; a request already there
	 * stays as it is), then load: pairs with waiter_commit's store of
	 * intrseq then load of intrreq (either we see its seq, or it sees
	 * our request and does not stay parked) */
	uint32_t none = INTR_NONE;
	atomic_compare_exchange_strong(&gp->intrreq, &none, INTR_ASKED);
	uint64_t s = atomic_load(&gp->intrseq);
	if (!s) {
		/* not parked: it may wait in the kernel (seq_cst RMW of
		 * intrreq, then kwait_kickg's load of its M's kwait: a Dekker
		 * pair with entersyscallwait, kwait.c).  If so, that wait
		 * ends and the G parks once, where it takes the request */
		if (kwait_kickg(gp))
			intr_bind(gp);
		return false;
	}
	uint64_t want = s << 2 | WS_WAIT;
	if (!atomic_compare_exchange_strong_explicit(&gp->waitstate, &want, s << 2 | WS_INTR,
						     memory_order_acq_rel, memory_order_relaxed))
		return false; /* woken, timed out, or an older wait: its seq is gone */
	intr_bind(gp);
	goready(gp);
	return true;
}

bool g_interrupted(void)
{
	struct g *gp = getg();
	return gp && (atomic_load_explicit(&gp->waitstate, memory_order_relaxed) & 3) == WS_INTR;
}

bool g_intr_take(void)
{
	struct g *gp = getg();
	return gp && atomic_exchange(&gp->intrreq, 0) != 0;
}

/* Runs off the G's stack: arm the deadline first (the G is safely
 * parked), then let wakers in.
 *
 * Once the timer is armed it may fire and the G run on - end this wait,
 * begin others - before the rest of this function runs (this M may be
 * descheduled in between).  So everything about this wait is read before
 * the timer is armed: pc (on the G's stack) and the wait's seq.  Read
 * later, the seq would be a later wait's: publishing it in intrseq let
 * g_interrupt end that wait before its own commit had run - before the
 * G was switched out - and the G ran on two Ms at once (a crash, or a G
 * left in the runtime for good, under a 1 us itimer; Python's
 * test_signal). */
static bool waiter_commit(struct g *gp, void *arg)
{
	struct parkctx pc = *(struct parkctx *)arg;
	uint64_t seq = atomic_load_explicit(&gp->waitstate, memory_order_relaxed) >> 2;
	if (pc.deadline >= 0) {
		struct timer *t = gp->timer;
		t->when = pc.deadline;
		t->f = waiter_timeout;
		t->arg = gp;
		t->seq = (uintptr_t)seq;
		t->rtwhen = pc.rtwhen;
		addtimer(t);
		/* seq_cst load after the queueing (timers_clockset): a clock
		 * set since the caller read the wall clock may have missed it */
		if (pc.rtwhen && atomic_load(&clockgen) != pc.rtgen)
			timers_clockset();
	}
	bool stay = true;
	if (pc.intr) {
		/* from here g_interrupt may end the wait (see g_interrupt).
		 * intrseq only grows: if this wait is already over and a
		 * later one published its seq, leave it (the CAS below would
		 * fail on the old seq anyway).  seq_cst RMW, then the load of
		 * intrreq: the Dekker pair with g_interrupt. */
		uint64_t cur = atomic_load(&gp->intrseq);
		bool mine = false;
		while (cur < seq && !(mine = atomic_compare_exchange_weak(&gp->intrseq, &cur, seq)))
			;
		uint64_t want = seq << 2 | WS_WAIT;
		if (mine && atomic_load(&gp->intrreq) &&
		    atomic_compare_exchange_strong_explicit(&gp->waitstate, &want,
							    seq << 2 | WS_INTR,
							    memory_order_acq_rel,
							    memory_order_relaxed)) {
			intr_bind(gp);
			stay = false; /* asked before we parked: back at once */
		}
	}
	if (pc.unlockf)
		pc.unlockf(pc.arg);
	return stay;
}

bool waiter_block(struct waiter *w, void (*unlockf)(void *), void *arg, int reason,
		  int64_t deadline)
{
	w->since = atomic_load_explicit(&coarsenow, memory_order_relaxed);
	struct g *gp = w->g;
	/* still under the primitive's lock: no claimer has looked at w yet */
	if (deadline >= 0 || (gp && gp->introk))
		w->excl = false;
	if (gp) {
		if (deadline >= 0 && !gp->timer) {
			gp->timer = rtalloc(sizeof *gp->timer);
			if (!gp->timer)
				fatal("out of memory allocating a timer");
			gp->timer->idx = -1;
		}
		struct parkctx pc = { unlockf, arg, deadline, 0, 0, gp->introk };
		gp->introk = false; /* one wait per request: never the relock after it */
		if (deadline >= 0 && gp->rtdeadline) {
			/* one timed wait per g_rtdeadline, as introk */
			pc.rtwhen = gp->rtdeadline;
			pc.rtgen = gp->rtgen;
			gp->rtdeadline = 0;
		}
		gp->waiting = w;
		gopark(waiter_commit, &pc, reason);
		gp->waiting = NULL;
		if (pc.intr)
			atomic_store_explicit(&gp->intrseq, 0, memory_order_relaxed);
		uint64_t st = atomic_load_explicit(&gp->waitstate, memory_order_acquire) & 3;
		if (deadline >= 0 && st != WS_TIMEDOUT)
			deltimer(gp->timer);
		return st == WS_WOKEN;
	}
	/* plain OS thread: sleep on the note.  For the deadlock check, an
	 * untimed sleeper counts in nthreadwait from after unlockf (which
	 * may wake someone) and each wake in nthreadwoken until the thread
	 * runs; nthreadwait is dropped first, so the difference never
	 * overstates the blocked. */
	if (unlockf)
		unlockf(arg);
	if (deadline < 0) {
		atomic_fetch_add(&sched.nthreadwait, 1);
		if (checkdead_thread)
			checkdead_thread();
		notesleep(&w->note);
		atomic_fetch_sub(&sched.nthreadwait, 1);
		atomic_fetch_sub(&sched.nthreadwoken, 1);
		return true;
	}
	int64_t left = deadline - nanotime();
	if (!notetsleep(&w->note, left > 0 ? left : 0)) {
		uint32_t want = WS_WAIT;
		if (atomic_compare_exchange_strong_explicit(&w->done, &want, WS_TIMEDOUT,
							    memory_order_acq_rel,
							    memory_order_relaxed))
			return false;
		notesleep(&w->note); /* claimed just now: the wake is on its way */
	}
	atomic_fetch_sub(&sched.nthreadwoken, 1);
	return true;
}

/* ---- sleeping ---------------------------------------------------------- */

int weft_sleep(int64_t ns)
{
	if (ns < 0) {
		errno = EINVAL;
		return -1;
	}
	if (!getg()) {
		struct timespec ts = { ns / 1000000000, ns % 1000000000 };
		while (sys_clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == -EINTR)
			;
		return 0;
	}
	if (ns == 0) {
		weft_yield();
		return 0;
	}
	/* errno needs no saving: the switch keeps it with the G.  (errno = e
	 * here would write through an __errno_location result cached from
	 * before the park, i.e. into the old OS thread's errno.) */
	int64_t deadline = nanotime() + ns;
	/* in the runtime throughout: the timer's first allocation may wait
	 * for the allocator's lock, and a G waiting so is not blocked in its
	 * own code (sysmon lent a spare, one more thread, for such waits) */
	rt_enter();
	struct waiter w;
	waiter_init(&w);
	while (waiter_block(&w, NULL, NULL, W_SLEEP, deadline))
		waiter_init(&w); /* nobody else wakes a sleeper; be safe anyway */
	rt_leave();
	return 0;
}

/* ---- wait group ---------------------------------------------------------- */

static void wgunlock(void *arg)
{
	spinunlock(&((weft_wg_t *)arg)->_lock);
}

/* _count packs the counter (high 32 bits) with the number of waiters
 * (low 32 bits), as Go's WaitGroup does, so the add that brings the
 * counter to zero learns in the same atomic step whether anyone waits.
 * If nobody does, it must not touch wg again: a waiter may have seen zero
 * already, returned and freed it (a wait group on the waiter's stack is
 * the usual case).  If someone does, that waiter cannot return before it
 * is woken, so wg stays valid while the adder takes the waiters.  A
 * waiter counts itself (CAS) and queues under the lock, so an adder that
 * saw it counted finds it queued once it has the lock.  seq_cst on
 * _count: every check, count and add is totally ordered. */
#define WG_ONE ((uint64_t)1 << 32)

static uint64_t *wgstate(weft_wg_t *wg)
{
	return (uint64_t *)(void *)&wg->_count;
}

void weft_wg_add(weft_wg_t *wg, int64_t delta)
{
	if (unlikely(!wg)) {
		errno = EINVAL;
		return;
	}
	if (delta < INT32_MIN || delta > INT32_MAX)
		fatal("weft_wg_add: delta %lld out of range", (long long)delta);
	uint64_t st = __atomic_add_fetch(wgstate(wg), (uint64_t)delta * WG_ONE, __ATOMIC_SEQ_CST);
	int32_t v = (int32_t)(st >> 32);
	if (v < 0)
		fatal("negative wait group counter (more done than add)");
	if (v > 0 || (uint32_t)st == 0)
		return;
	spinlock(&wg->_lock);
	/* every waiter counted in st is queued; anything else changing the
	 * word now is an add racing with the wake-up, which Go calls misuse */
	if (__atomic_load_n(wgstate(wg), __ATOMIC_SEQ_CST) != st)
		fatal("weft_wg_add called while weft_wg_wait was still returning");
	__atomic_store_n(wgstate(wg), 0, __ATOMIC_SEQ_CST);
	struct waiter *wake = waiters_claim(wg->_waiters);
	wg->_waiters = NULL;
	spinunlock(&wg->_lock);
	waiters_wake(wake);
}

void weft_wg_done(weft_wg_t *wg)
{
	weft_wg_add(wg, -1);
}

void weft_wg_wait(weft_wg_t *wg)
{
	if (unlikely(!wg)) {
		errno = EINVAL;
		return;
	}
	uint64_t st = __atomic_load_n(wgstate(wg), __ATOMIC_SEQ_CST);
	if (st < WG_ONE)
		return; /* counter zero */
	spinlock(&wg->_lock);
	st = __atomic_load_n(wgstate(wg), __ATOMIC_SEQ_CST);
	do {
		if (st < WG_ONE) {
			spinunlock(&wg->_lock);
			return;
		}
	} while (!__atomic_compare_exchange_n(wgstate(wg), &st, st + 1, false, __ATOMIC_SEQ_CST,
					      __ATOMIC_SEQ_CST));
	struct waiter w;
	waiter_init(&w);
	w.next = wg->_waiters;
	w.queued = true;
	wg->_waiters = &w;
	waiter_block(&w, wgunlock, wg, W_WAITGROUP, -1);
}
