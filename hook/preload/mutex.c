/*
 * mutex.c - pthread_mutex_t on weft's mutex, and pthread_spinlock_t.
 *
 * A glibc pthread_mutex_t is 40 bytes with the kind at offset 16; every
 * static initialiser is zero except that kind.  weft keeps a whole
 * weft_mutex_t (32 bytes) in the object, with the kind moved out of the
 * way on first use:
 *
 *    0  weft_mutex_t._state       the lock word (Go's sync.Mutex state)
 *    4  weft_mutex_t._pad         META: READY | kind << 24 | recursion count
 *    8  weft_mutex_t._sema        waiters (its _head overlays glibc's kind)
 *   32  int64 owner               G id (> 0) or -tid, for recursive and
 *                                 error-checking mutexes
 *
 * META at offset 4 is glibc's __count, which never reaches 2^30, so the
 * READY (bit 31) and MOVING (bit 30) bits tell a weft object from a
 * glibc one.  A fresh object (static initialiser, zeroed memory, or
 * pthread_mutex_init) whose glibc kind asks for nothing special is
 * claimed by the first caller: META 0 -> MOVING, kind read and the word
 * it sat in cleared, META -> READY.  Process-shared, robust and priority
 * mutexes are never claimed: glibc's own functions run them.
 *
 * Every path - a G, a plain thread, before the runtime starts - goes
 * through weft_mutex_lock for a claimed object, so a mutex shared by Gs
 * and plain threads stays one mutex.  Calls from the shim itself
 * (jemalloc's own mutexes) go to glibc.
 */
#include "shim.h"

#include <string.h>

struct pmx {
	weft_mutex_t wm;
	int64_t owner;
};
_Static_assert(sizeof(struct pmx) == sizeof(pthread_mutex_t), "pthread_mutex_t size");
_Static_assert(offsetof(struct pmx, wm._pad) == 4, "META offset");

#define READY (1u << 31)
#define MOVING (1u << 30)
#define KSHIFT 24
#define KMASK (3u << KSHIFT)
#define CMASK 0xffffffu /* recursion count */
#define KIND(meta) (((meta) & KMASK) >> KSHIFT)
#define GLIBC_KIND_OFF 16
/* robust, priority inherit / protect, process-shared: glibc's */
#define PASS_KINDS (16 | 32 | 64 | 128)

enum { K_NORMAL = 0, K_RECURSIVE = 1, K_ERRORCHECK = 2, K_ADAPTIVE = 3 };

DEFREAL(pthread_mutex_init);
DEFREAL(pthread_mutex_destroy);
DEFREAL(pthread_mutex_lock);
DEFREAL(pthread_mutex_trylock);
DEFREAL(pthread_mutex_unlock);
DEFREAL(pthread_mutex_timedlock);
DEFREAL(pthread_mutex_clocklock);
DEFREAL(pthread_mutex_consistent);
DEFREAL(pthread_mutex_getprioceiling);
DEFREAL(pthread_mutex_setprioceiling);
DEFREAL(pthread_mutexattr_gettype);
DEFREAL(pthread_mutexattr_getpshared);
DEFREAL(pthread_mutexattr_getrobust);
DEFREAL(pthread_mutexattr_getprotocol);

static inline _Atomic uint32_t *metap(struct pmx *p)
{
	return (_Atomic uint32_t *)(void *)&p->wm._pad;
}

static inline _Atomic int64_t *ownerp(struct pmx *p)
{
	return (_Atomic int64_t *)(void *)&p->owner;
}

/* Claim a fresh object, or wait for the caller that is claiming it.
 * Returns META, or 0 for a glibc object. */
static __attribute__((noinline)) uint32_t claim(struct pmx *p)
{
	_Atomic uint32_t *mp = metap(p);
	int *kp = (int *)(void *)((char *)p + GLIBC_KIND_OFF);
	for (;;) {
		uint32_t meta = atomic_load_explicit(mp, memory_order_acquire);
		if (meta & READY)
			return meta;
		if (meta & MOVING) {
			__builtin_ia32_pause();
			continue;
		}
		int kind = __atomic_load_n(kp, __ATOMIC_RELAXED);
		if (kind & PASS_KINDS)
			return 0;
		if (atomic_compare_exchange_weak_explicit(mp, &meta, MOVING, memory_order_acquire,
							  memory_order_relaxed)) {
			uint32_t ready = READY | ((uint32_t)kind & 3) << KSHIFT;
			/* the kind word (and glibc's spins) become _sema._head */
			__atomic_store_n((uint64_t *)(void *)kp, 0, __ATOMIC_RELAXED);
			atomic_store_explicit(ownerp(p), 0, memory_order_relaxed);
			atomic_store_explicit(mp, ready, memory_order_release);
			return ready;
		}
	}
}

static inline uint32_t mx_meta(struct pmx *p)
{
	uint32_t meta = atomic_load_explicit(metap(p), memory_order_acquire);
	if (likely(meta & READY))
		return meta;
	return claim(p);
}

weft_mutex_t *mx_weft(pthread_mutex_t *m)
{
	struct pmx *p = (struct pmx *)(void *)m;
	return mx_meta(p) ? &p->wm : NULL;
}

/* ---- init / destroy -------------------------------------------------------- */

int pmx_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
	int type = PTHREAD_MUTEX_DEFAULT, pshared = 0, robust = 0, proto = PTHREAD_PRIO_NONE;
	if (attr) {
		REAL(pthread_mutexattr_gettype)(attr, &type);
		REAL(pthread_mutexattr_getpshared)(attr, &pshared);
		REAL(pthread_mutexattr_getrobust)(attr, &robust);
		REAL(pthread_mutexattr_getprotocol)(attr, &proto);
	}
	if (pshared != PTHREAD_PROCESS_PRIVATE || robust || proto != PTHREAD_PRIO_NONE)
		return REAL(pthread_mutex_init)(m, attr); /* glibc zeroes our META */
	struct pmx *p = (struct pmx *)(void *)m;
	memset(p, 0, sizeof *p);
	atomic_store_explicit(metap(p), READY | ((uint32_t)type & 3) << KSHIFT,
			      memory_order_release);
	return 0;
}

int pmx_destroy(pthread_mutex_t *m)
{
	struct pmx *p = (struct pmx *)(void *)m;
	uint32_t meta = atomic_load_explicit(metap(p), memory_order_acquire);
	if (!(meta & READY)) {
		int kind = __atomic_load_n((int *)(void *)((char *)m + GLIBC_KIND_OFF), __ATOMIC_RELAXED);
		if (!(meta & MOVING) && (kind & PASS_KINDS))
			return REAL(pthread_mutex_destroy)(m);
		return 0; /* never used: nothing to undo */
	}
	if (__atomic_load_n(&p->wm._state, __ATOMIC_RELAXED) & 1)
		return EBUSY;
	/* back to what a static initialiser of this kind looks like */
	memset(p, 0, sizeof *p);
	__atomic_store_n((int *)(void *)((char *)m + GLIBC_KIND_OFF), (int)KIND(meta),
			 __ATOMIC_RELEASE);
	return 0;
}

/* ---- lock / unlock ---------------------------------------------------------- */

/* After taking the weft mutex: record ownership. */
static inline void took(struct pmx *p, uint32_t meta, int64_t me)
{
	atomic_store_explicit(ownerp(p), me, memory_order_relaxed);
	if (KIND(meta) == K_RECURSIVE)
		atomic_store_explicit(metap(p), (meta & ~CMASK) | 1, memory_order_relaxed);
}

/* A relock by the owner: 0 (recursive), or the error to return. */
static int relock(struct pmx *p, uint32_t meta, bool try)
{
	if (KIND(meta) == K_RECURSIVE) {
		uint32_t cur = atomic_load_explicit(metap(p), memory_order_relaxed);
		if ((cur & CMASK) == CMASK)
			return EAGAIN;
		atomic_store_explicit(metap(p), cur + 1, memory_order_relaxed);
		return 0;
	}
	return try ? EBUSY : EDEADLK;
}

static inline bool owned(uint32_t meta)
{
	return KIND(meta) == K_RECURSIVE || KIND(meta) == K_ERRORCHECK;
}

int pmx_lock(pthread_mutex_t *m)
{
	struct pmx *p = (struct pmx *)(void *)m;
	uint32_t meta = mx_meta(p);
	if (unlikely(!meta))
		return REAL(pthread_mutex_lock)(m);
	if (likely(!owned(meta))) {
		weft_mutex_lock(&p->wm);
		return 0;
	}
	int64_t me = shim_selfid();
	if (atomic_load_explicit(ownerp(p), memory_order_relaxed) == me)
		return relock(p, meta, false);
	weft_mutex_lock(&p->wm);
	took(p, meta, me);
	return 0;
}

int pmx_trylock(pthread_mutex_t *m)
{
	struct pmx *p = (struct pmx *)(void *)m;
	uint32_t meta = mx_meta(p);
	if (unlikely(!meta))
		return REAL(pthread_mutex_trylock)(m);
	int64_t me = owned(meta) ? shim_selfid() : 0;
	if (me && atomic_load_explicit(ownerp(p), memory_order_relaxed) == me)
		return relock(p, meta, true);
	int e = errno_get();
	if (weft_mutex_trylock(&p->wm) != 0) {
		errno_set(e);
		return EBUSY;
	}
	if (me)
		took(p, meta, me);
	return 0;
}

int pmx_unlock(pthread_mutex_t *m)
{
	struct pmx *p = (struct pmx *)(void *)m;
	uint32_t meta = mx_meta(p);
	if (unlikely(!meta))
		return REAL(pthread_mutex_unlock)(m);
	if (owned(meta)) {
		if (atomic_load_explicit(ownerp(p), memory_order_relaxed) != shim_selfid())
			return EPERM;
		if (KIND(meta) == K_RECURSIVE) {
			uint32_t cur = atomic_load_explicit(metap(p), memory_order_relaxed);
			if ((cur & CMASK) > 1) {
				atomic_store_explicit(metap(p), cur - 1, memory_order_relaxed);
				return 0;
			}
			atomic_store_explicit(metap(p), cur & ~CMASK, memory_order_relaxed);
		}
		atomic_store_explicit(ownerp(p), 0, memory_order_relaxed);
	}
	int e = errno_get();
	if (weft_mutex_unlock(&p->wm) != 0) {
		errno_set(e);
		return EPERM;
	}
	return 0;
}

/* Sleep for a polling wait: *delay doubles from 20 us to 1 ms, never
 * past what is left.  A G parks meanwhile. */
void shim_backoff(int64_t *delay, int64_t left)
{
	int64_t d = *delay < left ? *delay : left;
	if (d > 0)
		weft_sleep(d);
	*delay = *delay * 2 > 1000000 ? 1000000 : *delay * 2;
}

/* weft's mutex has no timed lock: try, then poll with backoff (the G
 * parks between tries) until the deadline. */
static int timedlock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime)
{
	int r = pmx_trylock(m);
	if (r != EBUSY)
		return r;
	if (!ts_ok(abstime))
		return EINVAL;
	int64_t delay = 20000;
	for (;;) {
		int64_t left = ts_until(clk, abstime);
		if (left <= 0)
			return ETIMEDOUT;
		shim_backoff(&delay, left);
		r = pmx_trylock(m);
		if (r != EBUSY)
			return r;
	}
}

int pmx_timedlock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime)
{
	struct pmx *p = (struct pmx *)(void *)m;
	uint32_t meta = mx_meta(p);
	if (!meta)
		return clk == CLOCK_REALTIME ? REAL(pthread_mutex_timedlock)(m, abstime)
					     : REAL(pthread_mutex_clocklock)(m, clk, abstime);
	if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
		return EINVAL;
	if (owned(meta) && atomic_load_explicit(ownerp(p), memory_order_relaxed) == shim_selfid())
		return relock(p, meta, false);
	return timedlock(m, clk, abstime);
}

/* Robustness and priority ceilings exist only for glibc's mutexes. */
HOOK int pthread_mutex_consistent(pthread_mutex_t *m)
{
	if (!FROM_SHIM() && mx_weft(m))
		return EINVAL;
	return REAL(pthread_mutex_consistent)(m);
}

HOOK int pthread_mutex_getprioceiling(const pthread_mutex_t *m, int *ceil)
{
	if (!FROM_SHIM() && mx_weft((pthread_mutex_t *)m))
		return EINVAL;
	return REAL(pthread_mutex_getprioceiling)(m, ceil);
}

HOOK int pthread_mutex_setprioceiling(pthread_mutex_t *m, int ceil, int *old)
{
	if (!FROM_SHIM() && mx_weft(m))
		return EINVAL;
	return REAL(pthread_mutex_setprioceiling)(m, ceil, old);
}

/* ---- for condition waits ------------------------------------------------------ */

int mx_release(pthread_mutex_t *m, uint32_t *saved)
{
	struct pmx *p = (struct pmx *)(void *)m;
	uint32_t meta = mx_meta(p);
	*saved = 0;
	if (!owned(meta))
		return 0;
	if (atomic_load_explicit(ownerp(p), memory_order_relaxed) != shim_selfid())
		return EPERM;
	uint32_t cur = atomic_load_explicit(metap(p), memory_order_relaxed);
	*saved = cur & CMASK;
	atomic_store_explicit(metap(p), cur & ~CMASK, memory_order_relaxed);
	atomic_store_explicit(ownerp(p), 0, memory_order_relaxed);
	return 0;
}

void mx_reacquire(pthread_mutex_t *m, uint32_t saved)
{
	struct pmx *p = (struct pmx *)(void *)m;
	uint32_t meta = mx_meta(p);
	if (!owned(meta))
		return;
	atomic_store_explicit(ownerp(p), shim_selfid(), memory_order_relaxed);
	if (saved)
		atomic_store_explicit(metap(p), (meta & ~CMASK) | saved, memory_order_relaxed);
}

/* ---- the interposed functions ------------------------------------------------- */

#define MX_HOOK(name, impl, params, args)              \
	HOOK int name params                           \
	{                                              \
		if (unlikely(FROM_SHIM()))             \
			return REAL(name) args;        \
		return impl args;                      \
	}

MX_HOOK(pthread_mutex_init, pmx_init, (pthread_mutex_t *m, const pthread_mutexattr_t *a), (m, a))
MX_HOOK(pthread_mutex_destroy, pmx_destroy, (pthread_mutex_t *m), (m))
MX_HOOK(pthread_mutex_lock, pmx_lock, (pthread_mutex_t *m), (m))
MX_HOOK(pthread_mutex_trylock, pmx_trylock, (pthread_mutex_t *m), (m))
MX_HOOK(pthread_mutex_unlock, pmx_unlock, (pthread_mutex_t *m), (m))

HOOK int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
	if (FROM_SHIM())
		return REAL(pthread_mutex_timedlock)(m, abstime);
	return pmx_timedlock(m, CLOCK_REALTIME, abstime);
}

HOOK int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime)
{
	if (FROM_SHIM())
		return REAL(pthread_mutex_clocklock)(m, clk, abstime);
	return pmx_timedlock(m, clk, abstime);
}

/* The legacy aliases some old libraries still call (glibc exports them). */
int __pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a);
int __pthread_mutex_destroy(pthread_mutex_t *m);
int __pthread_mutex_lock(pthread_mutex_t *m);
int __pthread_mutex_trylock(pthread_mutex_t *m);
int __pthread_mutex_unlock(pthread_mutex_t *m);
DEFREAL(__pthread_mutex_init);
DEFREAL(__pthread_mutex_destroy);
DEFREAL(__pthread_mutex_lock);
DEFREAL(__pthread_mutex_trylock);
DEFREAL(__pthread_mutex_unlock);
MX_HOOK(__pthread_mutex_init, pmx_init, (pthread_mutex_t *m, const pthread_mutexattr_t *a), (m, a))
MX_HOOK(__pthread_mutex_destroy, pmx_destroy, (pthread_mutex_t *m), (m))
MX_HOOK(__pthread_mutex_lock, pmx_lock, (pthread_mutex_t *m), (m))
MX_HOOK(__pthread_mutex_trylock, pmx_trylock, (pthread_mutex_t *m), (m))
MX_HOOK(__pthread_mutex_unlock, pmx_unlock, (pthread_mutex_t *m), (m))

/* ---- spin locks -------------------------------------------------------------------
 * The same int as glibc's (0 free, 1 held), so a process-shared one
 * still works with other processes.  On a G a spin that does not get
 * the lock soon yields: the holder may be a G waiting for this P. */

HOOK int pthread_spin_init(pthread_spinlock_t *l, int pshared)
{
	(void)pshared;
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
	return 0;
}

HOOK int pthread_spin_destroy(pthread_spinlock_t *l)
{
	(void)l;
	return 0;
}

HOOK int pthread_spin_trylock(pthread_spinlock_t *l)
{
	int z = 0;
	return __atomic_compare_exchange_n(l, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)
		       ? 0
		       : EBUSY;
}

HOOK int pthread_spin_lock(pthread_spinlock_t *l)
{
	for (unsigned i = 0;; i++) {
		int z = 0;
		if (__atomic_load_n(l, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(l, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 0;
		if (i < 100)
			__builtin_ia32_pause();
		else
			weft_yield(); /* a G lets others run; a thread sched_yield()s */
	}
}

HOOK int pthread_spin_unlock(pthread_spinlock_t *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
	return 0;
}
