/*
 * libfakeclock.so - a stand-in for libfaketime (tests/test_preload_clock.c,
 * tests/preload/fakeclock.c): preloaded, it shows the program a wall
 * clock a year behind the kernel's and a monotonic clock 1,000 s ahead,
 * and - as libfaketime does - takes the program's absolute deadlines on
 * either back to the kernel's clocks in the timed waits it wraps.  Each
 * call goes on to the next definition (dlsym RTLD_NEXT).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#define WALL_SHIFT (-365LL * 86400) /* seconds added to CLOCK_REALTIME */
#define MONO_SHIFT 1000LL           /* and to CLOCK_MONOTONIC */

static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

static long long shift(clockid_t c)
{
	return c == CLOCK_REALTIME ? WALL_SHIFT : c == CLOCK_MONOTONIC ? MONO_SHIFT : 0;
}

/* The kernel's time for the program's deadline ts on clock c. */
static struct timespec real_at(clockid_t c, const struct timespec *ts)
{
	struct timespec r = *ts;
	r.tv_sec -= shift(c);
	return r;
}

int clock_gettime(clockid_t c, struct timespec *ts)
{
	static int (*f)(clockid_t, struct timespec *);
	if (!f)
		f = (int (*)(clockid_t, struct timespec *))next("clock_gettime");
	int r = f(c, ts);
	if (r == 0)
		ts->tv_sec += shift(c);
	return r;
}

int pthread_cond_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *ts)
{
	static int (*f)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
	if (!f)
		f = (int (*)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *))next(
			"pthread_cond_timedwait");
	struct timespec r = real_at(CLOCK_REALTIME, ts); /* the programs here use the default clock */
	return f(cv, mu, &r);
}

int sem_timedwait(sem_t *s, const struct timespec *ts)
{
	static int (*f)(sem_t *, const struct timespec *);
	if (!f)
		f = (int (*)(sem_t *, const struct timespec *))next("sem_timedwait");
	struct timespec r = real_at(CLOCK_REALTIME, ts);
	return f(s, &r);
}

int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *ts)
{
	static int (*f)(pthread_mutex_t *, const struct timespec *);
	if (!f)
		f = (int (*)(pthread_mutex_t *, const struct timespec *))next("pthread_mutex_timedlock");
	struct timespec r = real_at(CLOCK_REALTIME, ts);
	return f(m, &r);
}

int clock_nanosleep(clockid_t c, int flags, const struct timespec *ts, struct timespec *rem)
{
	static int (*f)(clockid_t, int, const struct timespec *, struct timespec *);
	if (!f)
		f = (int (*)(clockid_t, int, const struct timespec *, struct timespec *))next(
			"clock_nanosleep");
	if (!(flags & TIMER_ABSTIME))
		return f(c, flags, ts, rem);
	struct timespec r = real_at(c, ts);
	return f(c, flags, &r, rem);
}
