/*
 * c11.c - C11 <threads.h> on the same footing as pthreads.
 *
 * glibc builds thrd_*, mtx_*, cnd_*, tss_* and call_once on its pthread
 * code with internal calls that never reach our pthread_* names, so they
 * are interposed here too and mapped onto the shim's pthread functions
 * (thrd_t is a pthread_t, mtx_t a pthread_mutex_t, cnd_t a
 * pthread_cond_t, tss_t a pthread_key_t, once_flag a pthread_once_t).
 */
#include "shim.h"

#include <threads.h>

static int thrd_err(int e)
{
	switch (e) {
	case 0: return thrd_success;
	case EBUSY: return thrd_busy;
	case ETIMEDOUT: return thrd_timedout;
	case ENOMEM: case EAGAIN: return thrd_nomem;
	default: return thrd_error;
	}
}

/* ---- threads ---------------------------------------------------------------- */

struct c11start {
	thrd_start_t fn;
	void *arg;
};

static void *c11_start(void *p)
{
	struct c11start s = *(struct c11start *)p;
	rtfree(p);
	return (void *)(intptr_t)s.fn(s.arg);
}

HOOK int thrd_create(thrd_t *thr, thrd_start_t fn, void *arg)
{
	struct c11start *s = rtalloc(sizeof *s);
	if (!s)
		return thrd_nomem;
	s->fn = fn;
	s->arg = arg;
	int e = shim_create((pthread_t *)thr, NULL, c11_start, s);
	if (e)
		rtfree(s);
	return thrd_err(e);
}

HOOK int thrd_join(thrd_t thr, int *res)
{
	void *r;
	int e = pthread_join((pthread_t)thr, &r);
	if (e == 0 && res)
		*res = (int)(intptr_t)r;
	return thrd_err(e);
}

HOOK int thrd_detach(thrd_t thr)
{
	return thrd_err(pthread_detach((pthread_t)thr));
}

HOOK thrd_t thrd_current(void)
{
	return (thrd_t)shim_self();
}

/* thrd_equal is not hooked: glibc's compares the values, as we would
 * (and defines it inline in <threads.h>, where clang refuses a second
 * definition with attributes). */

HOOK _Noreturn void thrd_exit(int res)
{
	shim_exit((void *)(intptr_t)res);
}

HOOK void thrd_yield(void)
{
	sched_yield(); /* thread.c: weft_yield on a G, else the kernel's */
}

/* glibc's goes to clock_nanosleep internally: through the hooked one */
HOOK int thrd_sleep(const struct timespec *d, struct timespec *rem)
{
	int r = nanosleep(d, rem);
	if (r == 0)
		return 0;
	return errno_get() == EINTR ? -1 : -2;
}

/* ---- mutexes and conditions --------------------------------------------------------- */

HOOK int mtx_init(mtx_t *m, int type)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, (type & mtx_recursive) ? PTHREAD_MUTEX_RECURSIVE
							 : PTHREAD_MUTEX_NORMAL);
	int e = pmx_init((pthread_mutex_t *)m, &a);
	pthread_mutexattr_destroy(&a);
	return thrd_err(e);
}

HOOK void mtx_destroy(mtx_t *m)
{
	pmx_destroy((pthread_mutex_t *)m);
}

HOOK int mtx_lock(mtx_t *m)
{
	return thrd_err(pmx_lock((pthread_mutex_t *)m));
}

HOOK int mtx_trylock(mtx_t *m)
{
	return thrd_err(pmx_trylock((pthread_mutex_t *)m));
}

HOOK int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict ts)
{
	return thrd_err(pmx_timedlock((pthread_mutex_t *)m, CLOCK_REALTIME, ts));
}

HOOK int mtx_unlock(mtx_t *m)
{
	return thrd_err(pmx_unlock((pthread_mutex_t *)m));
}

HOOK int cnd_init(cnd_t *c)
{
	return thrd_err(pcv_init((pthread_cond_t *)c, NULL));
}

HOOK void cnd_destroy(cnd_t *c)
{
	pcv_destroy((pthread_cond_t *)c);
}

HOOK int cnd_signal(cnd_t *c)
{
	return thrd_err(pcv_signal((pthread_cond_t *)c));
}

HOOK int cnd_broadcast(cnd_t *c)
{
	return thrd_err(pcv_broadcast((pthread_cond_t *)c));
}

HOOK int cnd_wait(cnd_t *c, mtx_t *m)
{
	return thrd_err(pcv_wait((pthread_cond_t *)c, (pthread_mutex_t *)m, -1, NULL));
}

HOOK int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict ts)
{
	return thrd_err(pcv_wait((pthread_cond_t *)c, (pthread_mutex_t *)m, CLOCK_REALTIME, ts));
}

/* ---- thread-specific storage, once ------------------------------------------------------ */

HOOK int tss_create(tss_t *key, tss_dtor_t dtor)
{
	return thrd_err(shim_key_create((pthread_key_t *)key, dtor));
}

HOOK void tss_delete(tss_t key)
{
	shim_key_delete((pthread_key_t)key);
}

HOOK void *tss_get(tss_t key)
{
	return shim_getspecific((pthread_key_t)key);
}

HOOK int tss_set(tss_t key, void *val)
{
	return thrd_err(shim_setspecific((pthread_key_t)key, (uintptr_t)val));
}

HOOK void call_once(once_flag *flag, void (*fn)(void))
{
	shim_once((pthread_once_t *)flag, fn);
}
