/*
 * sync.c - Go's sync package for C: semaphore, Mutex, RWMutex, Cond,
 * Once, on the one park/ready protocol of sema.c, so that each works
 * from Gs, plain threads, and between the two.
 *
 * weft_sem_t is the building block: a count and a FIFO of waiters under
 * a spin lock.  A post with someone waiting hands the unit straight to
 * the oldest waiter (it never goes through the count, so no newcomer
 * can take it first); otherwise it bumps the count.
 *
 * The mutex is Go's sync.Mutex: one word of state, with waiters asleep
 * on a weft_sem_t.  In normal mode a woken waiter competes with arriving
 * lockers (who may spin a little first) and, losing, goes back first in
 * line; once a waiter has waited over 1 ms it sets the starving bit and
 * the mutex switches to hand-off: unlock passes ownership directly to
 * the oldest waiter and arrivals queue at the back without trying.  The
 * last waiter, or one that waited less than 1 ms, switches back.
 *
 * Every slow path brackets its spin lock with rt_enter/rt_leave: the P
 * must already be held when we park or ready someone with the lock
 * taken, or re-acquiring it could block this M inside the critical
 * section.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include "runtime.h"
#include "waitq.h"

/* A NULL object is EINVAL (docs/api.md, "Bad input"): the check is one
 * predictable branch ahead of the fast paths. */
#define BADARG(cond)                          \
	do {                                  \
		if (unlikely(cond)) {         \
			errno = EINVAL;       \
			return -1;            \
		}                             \
	} while (0)

/* ---- semaphore ------------------------------------------------------------ */

static void unlockword(void *arg)
{
	spinunlock(arg);
}

/* The count is changed under the lock but read without it (trywait,
 * value): relaxed atomics, ordered by the lock where it matters. */
static inline uint32_t semcount(weft_sem_t *s)
{
	return __atomic_load_n(&s->_count, __ATOMIC_RELAXED);
}

static inline void semsetcount(weft_sem_t *s, uint32_t n)
{
	__atomic_store_n(&s->_count, n, __ATOMIC_RELAXED);
}

/* Take a unit, waiting (FIFO, or first in line if lifo) until the
 * absolute deadline (< 0: none).  False on timeout. */
static bool sem_acquire(weft_sem_t *s, bool lifo, int reason, int64_t deadline)
{
	rt_enter();
	spinlock(&s->_lock);
	uint32_t n = semcount(s);
	if (n > 0) {
		semsetcount(s, n - 1);
		spinunlock(&s->_lock);
		rt_leave();
		return true;
	}
	struct waiter w;
	waiter_init(&w);
	if (lifo)
		waitq_push_front(WAITQ(s), &w);
	else
		waitq_push(WAITQ(s), &w);
	bool got = waiter_block(&w, unlockword, &s->_lock, reason, deadline);
	if (!got) {
		/* timed out: nobody claimed us, so no unit was handed over; a
		 * poster that found us dropped us and moved on */
		spinlock(&s->_lock);
		if (w.queued)
			waitq_remove(WAITQ(s), &w);
		spinunlock(&s->_lock);
	}
	rt_leave();
	return got;
}

/* Give a unit: to the oldest waiter if any, else to the count.
 * -EOVERFLOW if the count would wrap. */
static int sem_release(weft_sem_t *s)
{
	rt_enter();
	spinlock(&s->_lock);
	struct waiter *w = waitq_claim(WAITQ(s));
	int r = 0;
	if (!w) {
		uint32_t n = semcount(s);
		if (n == UINT32_MAX)
			r = -EOVERFLOW;
		else
			semsetcount(s, n + 1);
	}
	spinunlock(&s->_lock);
	if (w)
		waiter_wake(w);
	rt_leave();
	return r;
}

static int sem_timedwait_abs(weft_sem_t *s, int64_t deadline)
{
	if (sem_acquire(s, false, W_SEMA, deadline))
		return 0;
	errno = ETIMEDOUT;
	return -1;
}

int weft_sem_wait(weft_sem_t *s)
{
	BADARG(!s);
	return sem_timedwait_abs(s, -1);
}

int weft_sem_timedwait(weft_sem_t *s, int64_t ns)
{
	BADARG(!s);
	if (ns < 0) {
		errno = EINVAL;
		return -1;
	}
	return sem_timedwait_abs(s, nanotime() + ns);
}

int weft_sem_trywait(weft_sem_t *s)
{
	BADARG(!s);
	/* a count of 0 needs no lock to answer */
	if (semcount(s) > 0) {
		spinlock(&s->_lock);
		uint32_t n = semcount(s);
		if (n > 0) {
			semsetcount(s, n - 1);
			spinunlock(&s->_lock);
			return 0;
		}
		spinunlock(&s->_lock);
	}
	errno = EAGAIN;
	return -1;
}

int weft_sem_post(weft_sem_t *s)
{
	BADARG(!s);
	int r = sem_release(s);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return 0;
}

unsigned weft_sem_value(weft_sem_t *s)
{
	if (unlikely(!s)) {
		errno = EINVAL;
		return 0;
	}
	return semcount(s);
}

/* ---- mutex ------------------------------------------------------------------ */

enum {
	MLOCKED = 1,     /* held */
	MWOKEN = 2,      /* a waiter is awake (or spinning): unlock need not wake another */
	MSTARVING = 4,   /* hand-off mode */
	MWAITERSHIFT = 3 /* state >> 3: waiters asleep or about to sleep */
};
#define STARVE_NS (1000 * 1000) /* Go's starvationThresholdNs */

/* The CPUs this process may run on (its affinity mask, as Go's
 * getproccount; online CPUs if that cannot be read), taken once: a
 * server pinned to one CPU (taskset) has nothing to gain from spinning,
 * whatever the machine has. */
int ncpu(void)
{
	static int n; /* racing first callers compute the same value */
	int v = __atomic_load_n(&n, __ATOMIC_RELAXED);
	if (!v) {
		cpu_set_t set;
		if (sched_getaffinity(0, sizeof set, &set) == 0)
			v = CPU_COUNT(&set);
		if (v <= 0) {
			long c = sysconf(_SC_NPROCESSORS_ONLN);
			v = c > 0 ? (int)c : 1;
		}
		__atomic_store_n(&n, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* Mutex spinning: a few rounds, when spin_worthwhile (waitq.h). */
static bool canspin(int iter)
{
	return iter < 4 && spin_worthwhile();
}

static inline int32_t mload(weft_mutex_t *m)
{
	return __atomic_load_n(&m->_state, __ATOMIC_RELAXED);
}

/* acquire on success: the critical section happens after the previous
 * holder's release. */
static inline bool mcas(weft_mutex_t *m, int32_t *old, int32_t new)
{
	return __atomic_compare_exchange_n(&m->_state, old, new, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_RELAXED);
}

/* Whether a plain thread (not a G) that waited over STARVE_NS switches
 * the mutex to hand-off mode, as a G does.  On for linked programs (a
 * plain thread that shares a mutex with Gs is not starved by them:
 * mutex::starvation_bound).  The shim turns it off under
 * WEFT_PTHREADS=native, where every thread but main is a real one: glibc's
 * mutexes let a running thread take the lock over a woken one, and
 * handing it instead to one sleeping thread of hundreds at each unlock (a
 * futex wake, then a wait for the kernel to run that thread) made 512
 * real threads on 8 mutexes 9-20x slower than glibc on this 2-CPU VM;
 * without it, within noise of glibc (docs/preload.md, WEFT_PTHREADS=native). */
bool rt_mutex_threadstarve = true;

static void mutex_lockslow(weft_mutex_t *m)
{
	int64_t waitstart = 0;
	bool starving = false, awoke = false;
	int iter = 0;
	int32_t old = mload(m);
	for (;;) {
		/* held in normal mode: spin, announcing ourselves as woken so
		 * that unlock does not wake a sleeper to compete with us */
		if ((old & (MLOCKED | MSTARVING)) == MLOCKED && canspin(iter)) {
			if (!awoke && !(old & MWOKEN) && (old >> MWAITERSHIFT) != 0 &&
			    mcas(m, &old, old | MWOKEN))
				awoke = true;
			spin_pause(30);
			iter++;
			old = mload(m);
			continue;
		}
		int32_t new = old;
		if (!(old & MSTARVING))
			new |= MLOCKED; /* never barge in starvation mode */
		if (old & (MLOCKED | MSTARVING))
			new += 1 << MWAITERSHIFT;
		if (starving && (old & MLOCKED))
			new |= MSTARVING; /* only switch modes while it is held */
		if (awoke)
			new &= ~MWOKEN; /* we are about to sleep or own it */
		if (!mcas(m, &old, new))
			continue; /* old reloaded by the failed CAS */
		if (!(old & (MLOCKED | MSTARVING)))
			return; /* locked it */
		bool lifo = waitstart != 0; /* waited before: first in line */
		if (!waitstart)
			waitstart = nanotime();
		sem_acquire(&m->_sema, lifo, W_MUTEX, -1);
		starving = starving || ((rt_mutex_threadstarve || getg()) &&
					nanotime() - waitstart > STARVE_NS);
		old = mload(m);
		if (old & MSTARVING) {
			/* handed to us: the state still counts us as a waiter
			 * and has LOCKED clear */
			if ((old & (MLOCKED | MWOKEN)) || (old >> MWAITERSHIFT) == 0)
				fatal("weft_mutex: inconsistent state %#x", (unsigned)old);
			int32_t delta = MLOCKED - (1 << MWAITERSHIFT);
			if (!starving || (old >> MWAITERSHIFT) == 1)
				delta -= MSTARVING; /* last waiter, or not starved: back to normal */
			__atomic_add_fetch(&m->_state, delta, __ATOMIC_ACQ_REL);
			return;
		}
		awoke = true;
		iter = 0;
	}
}

int weft_mutex_lock(weft_mutex_t *m)
{
	BADARG(!m);
	int32_t z = 0;
	if (likely(mcas(m, &z, MLOCKED)))
		return 0;
	mutex_lockslow(m);
	return 0;
}

int weft_mutex_trylock(weft_mutex_t *m)
{
	BADARG(!m);
	int32_t old = mload(m);
	if (!(old & (MLOCKED | MSTARVING)) && mcas(m, &old, old | MLOCKED))
		return 0;
	errno = EBUSY;
	return -1;
}

/* new: the state just after clearing LOCKED.  yield: on a G, give the
 * rest of our time slice to the waiter we hand off to (not possible
 * when running as a park's unlock step, off the parked G's stack). */
static void mutex_unlockslow(weft_mutex_t *m, int32_t new, bool yield)
{
	if (new & MSTARVING) {
		/* hand-off: ownership passes to the oldest waiter as it wakes;
		 * arrivals see STARVING and queue behind it */
		sem_release(&m->_sema);
		if (yield && getg())
			weft_yield();
		return;
	}
	int32_t old = new;
	for (;;) {
		/* nobody to wake, or someone already awake, holding it, or
		 * the mode changed: nothing to do */
		if ((old >> MWAITERSHIFT) == 0 || (old & (MLOCKED | MWOKEN | MSTARVING)))
			return;
		new = (old - (1 << MWAITERSHIFT)) | MWOKEN;
		if (mcas(m, &old, new)) {
			sem_release(&m->_sema);
			return;
		}
	}
}

/* 0, or -EPERM if m is not locked (state left alone). */
static int mutex_unlock(weft_mutex_t *m, bool yield)
{
	int32_t old = MLOCKED;
	/* release: the critical section happens before the next locker's
	 * acquire */
	if (likely(__atomic_compare_exchange_n(&m->_state, &old, 0, false, __ATOMIC_RELEASE,
					       __ATOMIC_RELAXED)))
		return 0;
	for (;;) {
		if (!(old & MLOCKED))
			return -EPERM;
		if (mcas(m, &old, old - MLOCKED))
			break;
	}
	mutex_unlockslow(m, old - MLOCKED, yield);
	return 0;
}

int weft_mutex_unlock(weft_mutex_t *m)
{
	BADARG(!m);
	int r = mutex_unlock(m, true);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return 0;
}

/* ---- rwlock -------------------------------------------------------------------- */

#define RWMAX (1 << 30) /* subtracted from _readers while a writer is pending */

static inline int32_t radd(int32_t *p, int32_t d)
{
	/* acq_rel: reader entry/exit orders against the writer's, whose
	 * own handshake runs through these counters */
	return __atomic_add_fetch(p, d, __ATOMIC_ACQ_REL);
}

int weft_rwlock_rdlock(weft_rwlock_t *l)
{
	BADARG(!l);
	if (radd(&l->_readers, 1) < 0)
		sem_acquire(&l->_rsem, false, W_RWLOCK_R, -1); /* a writer is pending */
	return 0;
}

int weft_rwlock_tryrdlock(weft_rwlock_t *l)
{
	BADARG(!l);
	int32_t c = __atomic_load_n(&l->_readers, __ATOMIC_RELAXED);
	while (c >= 0) {
		if (__atomic_compare_exchange_n(&l->_readers, &c, c + 1, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return 0;
	}
	errno = EBUSY;
	return -1;
}

int weft_rwlock_rdunlock(weft_rwlock_t *l)
{
	BADARG(!l);
	int32_t r = radd(&l->_readers, -1);
	if (likely(r >= 0))
		return 0;
	if (r == -1 || r == -RWMAX - 1) {
		radd(&l->_readers, 1); /* was not read-locked: undo */
		errno = EPERM;
		return -1;
	}
	/* a writer is pending: the last reader it waits for lets it in */
	if (radd(&l->_departing, -1) == 0)
		sem_release(&l->_wsem);
	return 0;
}

int weft_rwlock_wrlock(weft_rwlock_t *l)
{
	BADARG(!l);
	weft_mutex_lock(&l->_w); /* one writer at a time */
	/* announce the writer: new readers now queue on _rsem */
	int32_t r = radd(&l->_readers, -RWMAX) + RWMAX;
	/* wait for the r readers already in to leave */
	if (r != 0 && radd(&l->_departing, r) != 0)
		sem_acquire(&l->_wsem, false, W_RWLOCK_W, -1);
	return 0;
}

int weft_rwlock_trywrlock(weft_rwlock_t *l)
{
	BADARG(!l);
	if (weft_mutex_trylock(&l->_w) != 0)
		return -1;
	int32_t z = 0;
	if (!__atomic_compare_exchange_n(&l->_readers, &z, -RWMAX, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED)) {
		mutex_unlock(&l->_w, false);
		errno = EBUSY;
		return -1;
	}
	return 0;
}

int weft_rwlock_wrunlock(weft_rwlock_t *l)
{
	BADARG(!l);
	int32_t r = radd(&l->_readers, RWMAX);
	if (r >= RWMAX) {
		radd(&l->_readers, -RWMAX); /* was not write-locked: undo */
		errno = EPERM;
		return -1;
	}
	/* let in the readers that queued while we held it */
	for (int32_t i = 0; i < r; i++)
		sem_release(&l->_rsem);
	mutex_unlock(&l->_w, true);
	return 0;
}

/* ---- cond ------------------------------------------------------------------------ */

struct condunlock {
	weft_cond_t *c;
	weft_mutex_t *m;
};

/* Runs once the waiter is committed to sleep: from then on a signal
 * finds it queued, so releasing the mutex cannot lose a wakeup. */
static void condrelease(void *arg)
{
	/* cu is on the waiter's stack: a timed-out waiter may run on as
	 * soon as the cond's lock is free */
	struct condunlock cu = *(struct condunlock *)arg;
	spinunlock(&cu.c->_lock);
	if (mutex_unlock(cu.m, false) != 0)
		fatal("weft_cond_wait: the mutex is not locked");
}

static int condwait(weft_cond_t *c, weft_mutex_t *m, int64_t deadline)
{
	BADARG(!c || !m);
	if (!(mload(m) & MLOCKED)) { /* the caller must hold it */
		errno = EPERM;
		return -1;
	}
	rt_enter();
	spinlock(&c->_lock);
	struct waiter w;
	waiter_init(&w);
	waitq_push(WAITQ(c), &w);
	__atomic_add_fetch(&c->_nwait, 1, __ATOMIC_RELAXED);
	struct condunlock cu = { c, m };
	bool woken = waiter_block(&w, condrelease, &cu, W_COND, deadline);
	if (!woken) {
		spinlock(&c->_lock);
		if (w.queued) {
			waitq_remove(WAITQ(c), &w);
			__atomic_sub_fetch(&c->_nwait, 1, __ATOMIC_RELAXED);
		}
		spinunlock(&c->_lock);
	}
	rt_leave();
	weft_mutex_lock(m);
	if (!woken) {
		errno = ETIMEDOUT;
		return -1;
	}
	return 0;
}

int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m)
{
	return condwait(c, m, -1);
}

int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, int64_t ns)
{
	if (ns < 0) {
		errno = EINVAL;
		return -1;
	}
	return condwait(c, m, nanotime() + ns);
}

/* Wake one waiter, or all.  An empty queue is seen without the lock: a
 * waiter counts itself (under c's lock) before it releases the mutex, so
 * a signaller that changed the predicate under that mutex sees the
 * count, ordered by the mutex (relaxed suffices). */
static void condwake(weft_cond_t *c, bool all)
{
	if (!__atomic_load_n(&c->_nwait, __ATOMIC_RELAXED))
		return;
	rt_enter();
	struct waiter *list = NULL, *w;
	spinlock(&c->_lock);
	while ((w = c->_head)) {
		waitq_remove(WAITQ(c), w);
		__atomic_sub_fetch(&c->_nwait, 1, __ATOMIC_RELAXED);
		if (!waiter_claim(w))
			continue; /* timed out: its owner finds it unqueued */
		w->next = list; /* ours now: it sleeps until we wake it */
		list = w;
		if (!all)
			break;
	}
	spinunlock(&c->_lock);
	/* the list is newest first; wake oldest first */
	struct waiter *rev = NULL;
	while (list) {
		w = list;
		list = w->next;
		w->next = rev;
		rev = w;
	}
	while (rev) {
		w = rev;
		rev = w->next;
		waiter_wake(w);
	}
	rt_leave();
}

int weft_cond_signal(weft_cond_t *c)
{
	BADARG(!c);
	condwake(c, false);
	return 0;
}

int weft_cond_broadcast(weft_cond_t *c)
{
	BADARG(!c);
	condwake(c, true);
	return 0;
}

/* ---- once ------------------------------------------------------------------------- */

enum { ONCE_NEW = 0, ONCE_RUNNING = 1, ONCE_DONE = 2 };

void weft_once(weft_once_t *o, void (*fn)(void))
{
	if (unlikely(!o || !fn)) { /* nothing to run, or nowhere to record it */
		errno = EINVAL;
		return;
	}
	/* acquire: fn's effects happen before we return.  The lock must be
	 * free as well: whoever ran fn stores DONE under it and touches o
	 * until it unlocks, and once we return our caller may free o */
	if (likely(__atomic_load_n(&o->_state, __ATOMIC_ACQUIRE) == ONCE_DONE &&
		   __atomic_load_n(&o->_lock, __ATOMIC_ACQUIRE) == 0))
		return;
	rt_enter();
	spinlock(&o->_lock);
	/* relaxed: under the lock; atomic for the fast path's reader */
	uint32_t st = __atomic_load_n(&o->_state, __ATOMIC_RELAXED);
	if (st == ONCE_NEW) {
		__atomic_store_n(&o->_state, ONCE_RUNNING, __ATOMIC_RELAXED);
		spinunlock(&o->_lock);
		rt_leave(); /* fn is user code: not inside the runtime */
		fn();
		rt_enter();
		spinlock(&o->_lock);
		/* release: pairs with the fast path's acquire */
		__atomic_store_n(&o->_state, ONCE_DONE, __ATOMIC_RELEASE);
		struct waiter *wake = waiters_claim(o->_waiters);
		o->_waiters = NULL;
		spinunlock(&o->_lock);
		waiters_wake(wake);
	} else if (st == ONCE_RUNNING) {
		struct waiter w;
		waiter_init(&w);
		w.next = o->_waiters;
		w.queued = true;
		o->_waiters = &w;
		waiter_block(&w, unlockword, &o->_lock, W_ONCE, -1);
	} else {
		spinunlock(&o->_lock);
	}
	rt_leave();
}
