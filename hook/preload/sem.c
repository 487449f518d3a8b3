/*
 * sem.c - POSIX unnamed semaphores (sem_init with pshared 0) on weft's
 * semaphore; process-shared and named (sem_open) ones stay glibc's.
 *
 * A sem_t is 32 bytes: weft_sem_t in bytes 0..24, and a magic word at
 * offset 28 that glibc never writes for its own (sem_open zeroes the
 * tail; a pshared sem_init here clears it first).  Like glibc's, these
 * return -1 with errno on failure, EINTR when a signal handler without
 * SA_RESTART ran for the waiting G (with SA_RESTART the wait goes on).
 */
#include "shim.h"

#include <limits.h>
#include <string.h>

#define SEM_MAGIC 0x77656674u /* "weft" */

struct psem {
	weft_sem_t ws;
	uint32_t pad;
	uint32_t magic;
};
_Static_assert(sizeof(struct psem) == sizeof(sem_t), "sem_t size");

DEFREAL(sem_init);
DEFREAL(sem_destroy);
DEFREAL(sem_wait);
DEFREAL(sem_trywait);
DEFREAL(sem_timedwait);
DEFREAL(sem_clockwait);
DEFREAL(sem_post);
DEFREAL(sem_getvalue);

static inline weft_sem_t *ours(sem_t *s)
{
	struct psem *p = (struct psem *)(void *)s;
	return __atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) == SEM_MAGIC ? &p->ws : NULL;
}

static int fail(int e)
{
	errno_set(e);
	return -1;
}

HOOK int sem_init(sem_t *s, int pshared, unsigned value)
{
	struct psem *p = (struct psem *)(void *)s;
	if (pshared) {
		__atomic_store_n(&p->magic, 0, __ATOMIC_RELAXED);
		return REAL(sem_init)(s, pshared, value);
	}
	if (value > SEM_VALUE_MAX)
		return fail(EINVAL);
	memset(p, 0, sizeof *p);
	p->ws._count = value;
	__atomic_store_n(&p->magic, SEM_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

HOOK int sem_destroy(sem_t *s)
{
	weft_sem_t *w = ours(s);
	if (!w)
		return REAL(sem_destroy)(s);
	__atomic_store_n(&((struct psem *)(void *)s)->magic, 0, __ATOMIC_RELEASE);
	return 0;
}

/* A plain thread's (main before a lazy start, a thread of glibc's):
 * interrupted by a signal handler, as glibc's sem_wait is - a timed wait
 * (the untimed one never returns but woken) that gives up on EINTR. */
static int plainwait(weft_sem_t *w, int64_t ns)
{
	note_introk = true;
	note_intr = false;
	int r = weft_sem_timedwait(w, ns < 0 ? INT64_MAX / 4 : ns);
	note_introk = false;
	if (r == 0)
		return 0;
	return fail(note_intr ? EINTR : ETIMEDOUT);
}

/* An interruptible wait: 0, -1 (ETIMEDOUT, or EINTR). */
static int semwait(weft_sem_t *w, int64_t ns)
{
	struct g *gp = hook_g();
	if (!gp)
		return plainwait(w, ns);
	for (;;) {
		if (gp)
			intr_arm(gp);
		int r = ns < 0 ? weft_sem_wait(w) : weft_sem_timedwait(w, ns);
		if (gp)
			intr_disarm(gp);
		if (r == 0)
			return 0;
		if (!gp || !g_interrupted())
			return fail(ETIMEDOUT);
		if (hook_eintr(true) != 0)
			return fail(EINTR);
		if (ns >= 0)
			return fail(ETIMEDOUT); /* restart with the time left: the caller's loop */
	}
}

HOOK int sem_wait(sem_t *s)
{
	weft_sem_t *w = ours(s);
	if (!w)
		return REAL(sem_wait)(s);
	int e = errno_get();
	if (semwait(w, -1) != 0)
		return -1;
	errno_set(e);
	return 0;
}

HOOK int sem_trywait(sem_t *s)
{
	weft_sem_t *w = ours(s);
	if (!w)
		return REAL(sem_trywait)(s);
	int e = errno_get();
	if (weft_sem_trywait(w) != 0)
		return fail(EAGAIN);
	errno_set(e);
	return 0;
}

static int timedwait(weft_sem_t *w, clockid_t clk, const struct timespec *abstime)
{
	int e = errno_get();
	if (weft_sem_trywait(w) == 0) {
		errno_set(e);
		return 0;
	}
	if (!ts_ok(abstime))
		return fail(EINVAL);
	for (;;) {
		int64_t ns = ts_wait_begin(clk, abstime);
		if (ns <= 0) {
			ts_wait_end();
			return fail(ETIMEDOUT);
		}
		int r = semwait(w, ns);
		ts_wait_end();
		if (r == 0)
			break;
		if (errno_get() == EINTR)
			return -1;
		if (ts_until(clk, abstime) <= 0)
			return -1; /* ETIMEDOUT */
		/* a handler with SA_RESTART ran: wait on, to the same time */
	}
	errno_set(e);
	return 0;
}

HOOK int sem_timedwait(sem_t *s, const struct timespec *abstime)
{
	weft_sem_t *w = ours(s);
	if (!w)
		return REAL(sem_timedwait)(s, abstime);
	return timedwait(w, CLOCK_REALTIME, abstime);
}

HOOK int sem_clockwait(sem_t *s, clockid_t clk, const struct timespec *abstime)
{
	weft_sem_t *w = ours(s);
	if (!w)
		return REAL(sem_clockwait)(s, clk, abstime);
	if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
		return fail(EINVAL);
	return timedwait(w, clk, abstime);
}

HOOK int sem_post(sem_t *s)
{
	weft_sem_t *w = ours(s);
	if (!w)
		return REAL(sem_post)(s);
	if (weft_sem_value(w) >= SEM_VALUE_MAX)
		return fail(EOVERFLOW);
	int e = errno_get();
	if (weft_sem_post(w) != 0)
		return fail(EOVERFLOW);
	errno_set(e);
	return 0;
}

HOOK int sem_getvalue(sem_t *s, int *val)
{
	weft_sem_t *w = ours(s);
	if (!w)
		return REAL(sem_getvalue)(s, val);
	*val = (int)weft_sem_value(w);
	return 0;
}
