/*
 * cond.c - pthread_cond_t, pthread_rwlock_t and pthread_barrier_t on
 * weft's cond and mutex.
 *
 * cond (48 bytes, static initialiser all zero): a weft_cond_t in bytes
 * 0..24; glibc's __wrefs word (offset 36) keeps what pthread_cond_init
 * learnt from the attribute: bit 0 process-shared (then the object is
 * glibc's), bit 1 CLOCK_MONOTONIC for timed waits.
 *
 * rwlock (56 bytes) does not hold a weft rwlock, and glibc's default
 * prefers readers (a reader may take the lock again while a writer
 * waits), which weft's writer-preferring rwlock does not allow.  So the
 * object points (bytes 0..8, made on first use) to a small lock built of
 * a weft mutex and two weft conds that does either preference, as
 * glibc's kind word (offset 48) asks.  Process-shared ones (offset 28)
 * are glibc's.
 *
 * barrier (32 bytes, no static initialiser): pthread_barrier_init
 * allocates a weft mutex + cond + counters; a magic word tells ours from
 * glibc's process-shared ones.
 */
#include "shim.h"

#include <string.h>

/* ---- condition variables ---------------------------------------------------- */

struct pcv {
	weft_cond_t wc;
	uint32_t pad[3];
	uint32_t wrefs; /* glibc's __wrefs: bit 0 pshared, bit 1 monotonic */
	uint32_t pad2[2];
};
_Static_assert(sizeof(struct pcv) == sizeof(pthread_cond_t), "pthread_cond_t size");
_Static_assert(offsetof(struct pcv, wrefs) == 36, "__wrefs offset");

DEFREAL(pthread_cond_init);
DEFREAL(pthread_cond_destroy);
DEFREAL(pthread_cond_signal);
DEFREAL(pthread_cond_broadcast);
DEFREAL(pthread_cond_wait);
DEFREAL(pthread_cond_timedwait);
DEFREAL(pthread_cond_clockwait);
DEFREAL(pthread_condattr_getpshared);
DEFREAL(pthread_condattr_getclock);

static _Atomic int warned_mix;

static inline uint32_t wrefs(pthread_cond_t *c)
{
	return __atomic_load_n(&((struct pcv *)(void *)c)->wrefs, __ATOMIC_RELAXED);
}

static inline bool cv_glibc(pthread_cond_t *c)
{
	return wrefs(c) & 1;
}

int pcv_init(pthread_cond_t *c, const pthread_condattr_t *attr)
{
	int pshared = 0;
	clockid_t clk = CLOCK_REALTIME;
	if (attr) {
		REAL(pthread_condattr_getpshared)(attr, &pshared);
		REAL(pthread_condattr_getclock)(attr, &clk);
	}
	if (pshared != PTHREAD_PROCESS_PRIVATE)
		return REAL(pthread_cond_init)(c, attr);
	struct pcv *v = (struct pcv *)(void *)c;
	memset(v, 0, sizeof *v);
	__atomic_store_n(&v->wrefs, clk == CLOCK_MONOTONIC ? 2u : 0u, __ATOMIC_RELEASE);
	return 0;
}

int pcv_destroy(pthread_cond_t *c)
{
	if (cv_glibc(c))
		return REAL(pthread_cond_destroy)(c);
	struct pcv *v = (struct pcv *)(void *)c;
	return __atomic_load_n(&v->wc._head, __ATOMIC_ACQUIRE) ? EBUSY : 0;
}

int pcv_signal(pthread_cond_t *c)
{
	if (cv_glibc(c))
		return REAL(pthread_cond_signal)(c);
	weft_cond_signal(&((struct pcv *)(void *)c)->wc);
	return 0;
}

int pcv_broadcast(pthread_cond_t *c)
{
	if (cv_glibc(c))
		return REAL(pthread_cond_broadcast)(c);
	weft_cond_broadcast(&((struct pcv *)(void *)c)->wc);
	return 0;
}

/* clk < 0: the cond's own clock (pthread_cond_timedwait); abstime NULL:
 * no timeout. */
int pcv_wait(pthread_cond_t *c, pthread_mutex_t *m, int clk, const struct timespec *abstime)
{
	weft_mutex_t *wm = mx_weft(m);
	if (cv_glibc(c) || !wm) {
		if (cv_glibc(c) && !wm) {
			if (!abstime)
				return REAL(pthread_cond_wait)(c, m);
			if (clk < 0)
				return REAL(pthread_cond_timedwait)(c, m, abstime);
			return REAL(pthread_cond_clockwait)(c, m, clk, abstime);
		}
		shim_warn_once(&warned_mix, "a condition variable and a mutex that are not both "
					    "process-shared (or both private) cannot be waited on "
					    "together under weft (EINVAL)");
		return EINVAL;
	}
	if (abstime && !ts_ok(abstime))
		return EINVAL;
	if (clk < 0)
		clk = (wrefs(c) & 2) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
	else if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
		return EINVAL;
	uint32_t saved;
	int r = mx_release(m, &saved);
	if (r)
		return r;
	int e = errno_get();
	weft_cond_t *wc = &((struct pcv *)(void *)c)->wc;
	struct g *gp = hook_g();
	if (gp) /* a signal handler for this G wakes it (a spurious wake-up) */
		intr_arm(gp);
	if (!abstime) {
		r = weft_cond_wait(wc, wm);
	} else {
		int64_t ns = ts_wait_begin((clockid_t)clk, abstime);
		r = weft_cond_timedwait(wc, wm, ns > 0 ? ns : 0);
		ts_wait_end();
	}
	if (gp)
		intr_disarm(gp);
	if (r)
		r = errno_get();
	errno_set(e);
	mx_reacquire(m, saved);
	if (r == ETIMEDOUT && gp && (!abstime || ts_until((clockid_t)clk, abstime) > 0)) {
		/* woken early: a handler to run, or a cancellation (the mutex
		 * held again, as glibc's cleanup handlers expect) */
		(void)hook_eintr(true);
		errno_set(e);
		r = 0;
	}
	return r;
}

HOOK int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr)
{
	return pcv_init(c, attr);
}

HOOK int pthread_cond_destroy(pthread_cond_t *c)
{
	return pcv_destroy(c);
}

HOOK int pthread_cond_signal(pthread_cond_t *c)
{
	return pcv_signal(c);
}

HOOK int pthread_cond_broadcast(pthread_cond_t *c)
{
	return pcv_broadcast(c);
}

HOOK int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	return pcv_wait(c, m, -1, NULL);
}

HOOK int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
				const struct timespec *abstime)
{
	return pcv_wait(c, m, -1, abstime);
}

HOOK int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk,
				const struct timespec *abstime)
{
	return pcv_wait(c, m, clk, abstime);
}

/* ---- rwlocks ---------------------------------------------------------------------- */

struct rwl {
	weft_mutex_t m;
	weft_cond_t rq, wq;  /* readers / writers waiting */
	int32_t readers;     /* read holds */
	int32_t rwait, wwait;
	bool writer;
	bool prefwriter;     /* PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP */
	int64_t wowner;      /* shim_selfid() of the writer */
};

struct prw {
	struct rwl *_Atomic impl; /* glibc's __readers, __writers */
	uint32_t pad[5];
	int32_t shared;           /* glibc's __shared */
	uint32_t pad2[4];
	uint32_t flags;           /* glibc's __flags: the kind */
	uint32_t pad3;
};
_Static_assert(sizeof(struct prw) == sizeof(pthread_rwlock_t), "pthread_rwlock_t size");
_Static_assert(offsetof(struct prw, shared) == 28, "__shared offset");
_Static_assert(offsetof(struct prw, flags) == 48, "__flags offset");

DEFREAL(pthread_rwlock_init);
DEFREAL(pthread_rwlock_destroy);
DEFREAL(pthread_rwlock_rdlock);
DEFREAL(pthread_rwlock_tryrdlock);
DEFREAL(pthread_rwlock_timedrdlock);
DEFREAL(pthread_rwlock_clockrdlock);
DEFREAL(pthread_rwlock_wrlock);
DEFREAL(pthread_rwlock_trywrlock);
DEFREAL(pthread_rwlock_timedwrlock);
DEFREAL(pthread_rwlock_clockwrlock);
DEFREAL(pthread_rwlock_unlock);
DEFREAL(pthread_rwlockattr_getpshared);
DEFREAL(pthread_rwlockattr_getkind_np);

static inline struct prw *prw(pthread_rwlock_t *l)
{
	return (struct prw *)(void *)l;
}

/* The weft lock behind l (made on first use), or NULL for glibc's. */
static struct rwl *rw_get(pthread_rwlock_t *l)
{
	struct prw *p = prw(l);
	if (__atomic_load_n(&p->shared, __ATOMIC_RELAXED))
		return NULL;
	struct rwl *r = atomic_load_explicit(&p->impl, memory_order_acquire);
	if (likely(r))
		return r;
	struct rwl *n = rtalloc(sizeof *n);
	if (!n)
		fatal("out of memory allocating a pthread_rwlock_t");
	n->prefwriter = __atomic_load_n(&p->flags, __ATOMIC_RELAXED) ==
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP;
	if (atomic_compare_exchange_strong_explicit(&p->impl, &r, n, memory_order_acq_rel,
						    memory_order_acquire))
		return n;
	rtfree(n);
	return r;
}

HOOK int pthread_rwlock_init(pthread_rwlock_t *l, const pthread_rwlockattr_t *attr)
{
	int pshared = PTHREAD_PROCESS_PRIVATE, kind = PTHREAD_RWLOCK_DEFAULT_NP;
	if (attr) {
		REAL(pthread_rwlockattr_getpshared)(attr, &pshared);
		REAL(pthread_rwlockattr_getkind_np)(attr, &kind);
	}
	if (pshared != PTHREAD_PROCESS_PRIVATE)
		return REAL(pthread_rwlock_init)(l, attr);
	struct prw *p = prw(l);
	memset(p, 0, sizeof *p);
	__atomic_store_n(&p->flags, (uint32_t)kind, __ATOMIC_RELEASE);
	return 0;
}

HOOK int pthread_rwlock_destroy(pthread_rwlock_t *l)
{
	struct prw *p = prw(l);
	if (__atomic_load_n(&p->shared, __ATOMIC_RELAXED))
		return REAL(pthread_rwlock_destroy)(l);
	struct rwl *r = atomic_load_explicit(&p->impl, memory_order_acquire);
	if (!r)
		return 0;
	weft_mutex_lock(&r->m);
	bool busy = r->writer || r->readers || r->rwait || r->wwait;
	weft_mutex_unlock(&r->m);
	if (busy)
		return EBUSY;
	atomic_store_explicit(&p->impl, NULL, memory_order_release);
	rtfree(r);
	return 0;
}

/* Wait on q with r->m held; ETIMEDOUT once abstime (on clk) passes. */
static int rw_wait(struct rwl *r, weft_cond_t *q, clockid_t clk, const struct timespec *abstime)
{
	int e = errno_get(), rc = 0;
	if (!abstime) {
		weft_cond_wait(q, &r->m);
	} else {
		int64_t ns = ts_wait_begin(clk, abstime);
		if (ns <= 0 || weft_cond_timedwait(q, &r->m, ns) != 0)
			rc = ETIMEDOUT;
		ts_wait_end();
	}
	errno_set(e);
	return rc;
}

enum { RW_BLOCK, RW_TRY, RW_TIMED };

static int rw_rdlock(struct rwl *r, int mode, clockid_t clk, const struct timespec *abstime)
{
	int64_t me = shim_selfid();
	weft_mutex_lock(&r->m);
	int rc = 0;
	if (r->writer && r->wowner == me) {
		rc = EDEADLK;
		goto out;
	}
	while (r->writer || (r->prefwriter && r->wwait > 0)) {
		if (mode == RW_TRY) {
			rc = EBUSY;
			goto out;
		}
		r->rwait++;
		rc = rw_wait(r, &r->rq, clk, mode == RW_TIMED ? abstime : NULL);
		r->rwait--;
		if (rc)
			goto out;
	}
	if (r->readers == INT32_MAX)
		rc = EAGAIN;
	else
		r->readers++;
out:
	weft_mutex_unlock(&r->m);
	return rc;
}

static int rw_wrlock(struct rwl *r, int mode, clockid_t clk, const struct timespec *abstime)
{
	int64_t me = shim_selfid();
	weft_mutex_lock(&r->m);
	int rc = 0;
	if (r->writer && r->wowner == me) {
		rc = EDEADLK;
		goto out;
	}
	while (r->writer || r->readers > 0) {
		if (mode == RW_TRY) {
			rc = EBUSY;
			goto out;
		}
		r->wwait++;
		rc = rw_wait(r, &r->wq, clk, mode == RW_TIMED ? abstime : NULL);
		r->wwait--;
		if (rc) {
			/* readers held back for us may go now */
			if (r->prefwriter && r->wwait == 0 && r->rwait > 0)
				weft_cond_broadcast(&r->rq);
			goto out;
		}
	}
	r->writer = true;
	r->wowner = me;
out:
	weft_mutex_unlock(&r->m);
	return rc;
}

static int rw_unlock(struct rwl *r)
{
	weft_mutex_lock(&r->m);
	int rc = 0;
	if (r->writer) {
		r->writer = false;
		r->wowner = 0;
		if (r->wwait > 0)
			weft_cond_signal(&r->wq);
		if (r->rwait > 0 && !(r->prefwriter && r->wwait > 0))
			weft_cond_broadcast(&r->rq);
	} else if (r->readers > 0) {
		if (--r->readers == 0 && r->wwait > 0)
			weft_cond_signal(&r->wq);
	} else {
		rc = EPERM;
	}
	weft_mutex_unlock(&r->m);
	return rc;
}

#define RW_HOOK(name, call, params, args)              \
	HOOK int name params                           \
	{                                              \
		struct rwl *r = rw_get(l);             \
		if (!r)                                \
			return REAL(name) args;        \
		return call;                           \
	}

RW_HOOK(pthread_rwlock_rdlock, rw_rdlock(r, RW_BLOCK, CLOCK_REALTIME, NULL),
	(pthread_rwlock_t *l), (l))
RW_HOOK(pthread_rwlock_tryrdlock, rw_rdlock(r, RW_TRY, CLOCK_REALTIME, NULL),
	(pthread_rwlock_t *l), (l))
RW_HOOK(pthread_rwlock_wrlock, rw_wrlock(r, RW_BLOCK, CLOCK_REALTIME, NULL),
	(pthread_rwlock_t *l), (l))
RW_HOOK(pthread_rwlock_trywrlock, rw_wrlock(r, RW_TRY, CLOCK_REALTIME, NULL),
	(pthread_rwlock_t *l), (l))
RW_HOOK(pthread_rwlock_unlock, rw_unlock(r), (pthread_rwlock_t *l), (l))
RW_HOOK(pthread_rwlock_timedrdlock,
	ts_ok(a) ? rw_rdlock(r, RW_TIMED, CLOCK_REALTIME, a) : EINVAL,
	(pthread_rwlock_t *l, const struct timespec *a), (l, a))
RW_HOOK(pthread_rwlock_timedwrlock,
	ts_ok(a) ? rw_wrlock(r, RW_TIMED, CLOCK_REALTIME, a) : EINVAL,
	(pthread_rwlock_t *l, const struct timespec *a), (l, a))
RW_HOOK(pthread_rwlock_clockrdlock,
	ts_ok(a) && (c == CLOCK_REALTIME || c == CLOCK_MONOTONIC) ? rw_rdlock(r, RW_TIMED, c, a)
								  : EINVAL,
	(pthread_rwlock_t *l, clockid_t c, const struct timespec *a), (l, c, a))
RW_HOOK(pthread_rwlock_clockwrlock,
	ts_ok(a) && (c == CLOCK_REALTIME || c == CLOCK_MONOTONIC) ? rw_wrlock(r, RW_TIMED, c, a)
								  : EINVAL,
	(pthread_rwlock_t *l, clockid_t c, const struct timespec *a), (l, c, a))

/* ---- barriers ------------------------------------------------------------------------ */

struct bar {
	weft_mutex_t m;
	weft_cond_t c;
	unsigned count;   /* parties */
	unsigned arrived; /* in the current round */
	uint64_t round;
};

#define BAR_MAGIC 0x77656674u /* "weft" */

struct pbar {
	uint32_t magic; /* glibc's __in (0 after its init) */
	uint32_t pad;
	struct bar *b;
	uint32_t pad2[4];
};
_Static_assert(sizeof(struct pbar) == sizeof(pthread_barrier_t), "pthread_barrier_t size");

DEFREAL(pthread_barrier_init);
DEFREAL(pthread_barrier_destroy);
DEFREAL(pthread_barrier_wait);
DEFREAL(pthread_barrierattr_getpshared);

static inline struct bar *bar_get(pthread_barrier_t *b)
{
	struct pbar *p = (struct pbar *)(void *)b;
	return __atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) == BAR_MAGIC ? p->b : NULL;
}

HOOK int pthread_barrier_init(pthread_barrier_t *b, const pthread_barrierattr_t *attr,
			      unsigned count)
{
	int pshared = PTHREAD_PROCESS_PRIVATE;
	if (attr)
		REAL(pthread_barrierattr_getpshared)(attr, &pshared);
	struct pbar *p = (struct pbar *)(void *)b;
	if (pshared != PTHREAD_PROCESS_PRIVATE) {
		__atomic_store_n(&p->magic, 0, __ATOMIC_RELAXED);
		return REAL(pthread_barrier_init)(b, attr, count);
	}
	if (count == 0)
		return EINVAL;
	struct bar *n = rtalloc(sizeof *n);
	if (!n)
		return ENOMEM;
	n->count = count;
	memset(p, 0, sizeof *p);
	p->b = n;
	__atomic_store_n(&p->magic, BAR_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

HOOK int pthread_barrier_destroy(pthread_barrier_t *b)
{
	struct bar *r = bar_get(b);
	if (!r)
		return REAL(pthread_barrier_destroy)(b);
	weft_mutex_lock(&r->m);
	bool busy = r->arrived != 0;
	weft_mutex_unlock(&r->m);
	if (busy)
		return EBUSY;
	memset(b, 0, sizeof *b);
	rtfree(r);
	return 0;
}

HOOK int pthread_barrier_wait(pthread_barrier_t *b)
{
	struct bar *r = bar_get(b);
	if (!r)
		return REAL(pthread_barrier_wait)(b);
	weft_mutex_lock(&r->m);
	uint64_t round = r->round;
	int rc = 0;
	if (++r->arrived == r->count) {
		r->arrived = 0;
		r->round++;
		weft_cond_broadcast(&r->c);
		rc = PTHREAD_BARRIER_SERIAL_THREAD;
	} else {
		int e = errno_get();
		while (r->round == round)
			weft_cond_wait(&r->c, &r->m);
		errno_set(e);
	}
	weft_mutex_unlock(&r->m);
	return rc;
}
