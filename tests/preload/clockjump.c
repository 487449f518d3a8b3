/*
 * clockjump.c - waits with deadlines on CLOCK_REALTIME end when the wall
 * clock is set past them; waits on CLOCK_MONOTONIC do not move
 * (tests/test_preload_clock.c).  A plain pthread program.
 *
 * The machine's clock must not move (others share it), so the program
 * sets CLOCK_REALTIME to the time it reads (clock_settime(now): a jump
 * of a few microseconds back, which the kernel reports as a clock set
 * all the same) and the test runs it under WEFT_DEBUG=clockset=3600,
 * which makes weft's wall clock one hour later at each set reported:
 * what a real jump forward would do, with the kernel's real report.
 * (Natively the realtime waits would last their 20 s: no knob.)
 *
 *   clockjump            the waits below; exit 0, 77 when not root
 *   clockjump settime    only the no-op clock_settime (exit 0 or 77)
 *
 * Waits: a cond_timedwait on a default (realtime) cond, one on a cond
 * with CLOCK_MONOTONIC, a sem_timedwait and a pthread_timedjoin_np, each
 * to 20 s from now.  Prints "rt_cond=<errno> mono_cond=<errno> sem=<errno>
 * join=<errno> early=<n>", early counting the realtime waits that ended
 * before their deadline on the real clock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define WAIT_S 20

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rtcond = PTHREAD_COND_INITIALIZER; /* CLOCK_REALTIME */
static pthread_cond_t monocond;                         /* CLOCK_MONOTONIC */
static pthread_cond_t readycv = PTHREAD_COND_INITIALIZER;
static int ready;       /* waiters in their cond wait (under mu) */
static int monowoken;   /* main's signal for the monotonic waiter */
static sem_t sem;
static struct timespec rtdeadline; /* on the real CLOCK_REALTIME */
static int rt_res = -1, mono_res = -1, sem_res = -1;
static int early;

static struct timespec in(clockid_t c, int s)
{
	struct timespec t;
	clock_gettime(c, &t);
	t.tv_sec += s;
	return t;
}

/* Did the wait end before rtdeadline on the real clock? */
static int before_deadline(void)
{
	struct timespec now;
	syscall(SYS_clock_gettime, CLOCK_REALTIME, &now); /* the kernel's, no vDSO games */
	return now.tv_sec < rtdeadline.tv_sec ||
	       (now.tv_sec == rtdeadline.tv_sec && now.tv_nsec < rtdeadline.tv_nsec);
}

static void *rt_waiter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	ready++;
	pthread_cond_signal(&readycv);
	int r = 0;
	while (r == 0) /* a spurious wake-up: wait on, to the same deadline */
		r = pthread_cond_timedwait(&rtcond, &mu, &rtdeadline);
	rt_res = r;
	early += r == ETIMEDOUT && before_deadline();
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *mono_waiter(void *arg)
{
	(void)arg;
	struct timespec dl = in(CLOCK_MONOTONIC, WAIT_S);
	pthread_mutex_lock(&mu);
	ready++;
	pthread_cond_signal(&readycv);
	int r = 0;
	while (!monowoken && r == 0)
		r = pthread_cond_timedwait(&monocond, &mu, &dl);
	mono_res = r;
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *sem_waiter(void *arg)
{
	(void)arg;
	int r;
	while ((r = sem_timedwait(&sem, &rtdeadline)) == -1 && errno == EINTR)
		;
	sem_res = r == 0 ? 0 : errno;
	pthread_mutex_lock(&mu);
	early += sem_res == ETIMEDOUT && before_deadline();
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	sem_wait(&sem); /* posted at the end */
	return NULL;
}

/* CLOCK_REALTIME set to what it reads: 0, or 77 when not allowed. */
static int settime_now(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (clock_settime(CLOCK_REALTIME, &now) != 0) {
		if (errno == EPERM)
			return 77;
		FAIL("clock_settime: %s", strerror(errno));
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "settime"))
		return settime_now();
	pthread_condattr_t ca;
	CHECK(pthread_condattr_init(&ca) == 0);
	CHECK(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0);
	CHECK(pthread_cond_init(&monocond, &ca) == 0);
	CHECK(sem_init(&sem, 0, 0) == 0);
	rtdeadline = in(CLOCK_REALTIME, WAIT_S);

	pthread_t rt, mono, sw, sl;
	CHECK(pthread_create(&rt, NULL, rt_waiter, NULL) == 0);
	CHECK(pthread_create(&mono, NULL, mono_waiter, NULL) == 0);
	CHECK(pthread_create(&sl, NULL, sleeper, NULL) == 0);
	/* both cond waiters are in their wait once they let go of mu */
	pthread_mutex_lock(&mu);
	while (ready < 2)
		pthread_cond_wait(&readycv, &mu);
	pthread_mutex_unlock(&mu);
	CHECK(pthread_create(&sw, NULL, sem_waiter, NULL) == 0);

	int st = settime_now();
	if (st == 77) {
		printf("not root: cannot set the clock\n");
		return 77;
	}
	/* the realtime waits end now (under weft's knob: an hour has passed) */
	void *ret;
	int join = pthread_timedjoin_np(sl, &ret, &rtdeadline);
	CHECK(pthread_join(rt, NULL) == 0);
	CHECK(pthread_join(sw, NULL) == 0);
	early += join == ETIMEDOUT && before_deadline();
	/* the monotonic one has not moved: it is still waiting, for us */
	pthread_mutex_lock(&mu);
	monowoken = 1;
	pthread_cond_signal(&monocond);
	pthread_mutex_unlock(&mu);
	CHECK(pthread_join(mono, NULL) == 0);
	sem_post(&sem);
	if (join == ETIMEDOUT)
		CHECK(pthread_join(sl, NULL) == 0);
	printf("rt_cond=%d mono_cond=%d sem=%d join=%d early=%d\n", rt_res, mono_res, sem_res, join,
	       early);
	return 0;
}
