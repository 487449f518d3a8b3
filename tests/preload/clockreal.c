/*
 * clockreal.c - a real jump of the wall clock, forward and back, with
 * threads waiting for a time on it (tests/test_preload_clock.c runs it
 * natively and under the shim and compares).  A plain pthread program;
 * root (CAP_SYS_TIME) only.
 *
 *   clockreal fwd    the clock jumps 4 s forward past the waits'
 *                    deadline (3 s ahead): they end at once
 *   clockreal back   the clock jumps 5 s back before the deadline
 *                    (1.5 s ahead): they are still waiting 0.5 s past
 *                    it, and end when the clock is put right
 *
 * The clock is put right within the run: the offset of CLOCK_REALTIME
 * from CLOCK_MONOTONIC is read before the jump and set again after it
 * (clock_settime(monotonic now + offset)), so the net change is a few
 * microseconds.  Exit 77 if the clock cannot be set (not root).
 *
 * Waits to the same deadline on CLOCK_REALTIME, one per thread:
 * pthread_cond_timedwait, sem_timedwait, pthread_mutex_timedlock (main
 * holds the mutex), clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME).  And
 * two that must not move: a pthread_cond_timedwait on a CLOCK_MONOTONIC
 * cond to 20 s ahead (main signals it at the end: 0) and a relative
 * 1 s clock_nanosleep on CLOCK_MONOTONIC (rel=ok if it lasted at least
 * 1 s and, back, had ended when main looked at 2 s).
 *
 * Prints one line: fwd: "fwd rt_cond=110 sem=110 mutex=110 nanosleep=0
 * early=4 mono_cond=0 rel=ok" natively (110 is ETIMEDOUT; early: the
 * realtime waits that ended before their deadline on the real clock);
 * back: "back waiting=4 rt_cond=110 ..." (waiting: realtime waits not
 * over 0.5 s past their deadline while the clock was 5 s back).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "../clockns.h"

#define NRT 4 /* realtime waiters */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER; /* main's, for timedlock */
static pthread_cond_t rtcond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t monocond; /* CLOCK_MONOTONIC */
static pthread_cond_t readycv = PTHREAD_COND_INITIALIZER;
static int ready;     /* cond waiters in their wait (under mu) */
static int monowoken; /* main's signal for the monotonic waiter */
static sem_t sem;
static struct timespec deadline; /* on CLOCK_REALTIME, the real one */
static int64_t deadline_mono;    /* the same instant on CLOCK_MONOTONIC */
static atomic_int armed;         /* waiters about to wait */
static atomic_int rtdone;        /* realtime waits over */
static atomic_int early;         /* ... before deadline_mono */
static atomic_int reldone;
static int res_cond = -1, res_sem = -1, res_mutex = -1, res_sleep = -1, res_mono = -1;
static int rel_ok;

static void rt_over(void)
{
	atomic_fetch_add(&early, now(CLOCK_MONOTONIC) < deadline_mono);
	atomic_fetch_add(&rtdone, 1);
}

static void *w_cond(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	ready++;
	pthread_cond_broadcast(&readycv);
	int r = 0;
	while (r == 0) /* a spurious wake-up: on, to the same deadline */
		r = pthread_cond_timedwait(&rtcond, &mu, &deadline);
	res_cond = r;
	pthread_mutex_unlock(&mu);
	rt_over();
	return NULL;
}

static void *w_mono(void *arg)
{
	(void)arg;
	struct timespec dl = ts(now(CLOCK_MONOTONIC) + 20 * NS);
	pthread_mutex_lock(&mu);
	ready++;
	pthread_cond_broadcast(&readycv);
	int r = 0;
	while (!monowoken && r == 0)
		r = pthread_cond_timedwait(&monocond, &mu, &dl);
	res_mono = r;
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *w_sem(void *arg)
{
	(void)arg;
	atomic_fetch_add(&armed, 1);
	int r;
	while ((r = sem_timedwait(&sem, &deadline)) == -1 && errno == EINTR)
		;
	res_sem = r == 0 ? 0 : errno;
	rt_over();
	return NULL;
}

static void *w_mutex(void *arg)
{
	(void)arg;
	atomic_fetch_add(&armed, 1);
	int r = pthread_mutex_timedlock(&held, &deadline);
	if (r == 0)
		pthread_mutex_unlock(&held);
	res_mutex = r;
	rt_over();
	return NULL;
}

static void *w_sleep(void *arg)
{
	(void)arg;
	atomic_fetch_add(&armed, 1);
	int r;
	while ((r = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &deadline, NULL)) == EINTR)
		;
	res_sleep = r;
	rt_over();
	return NULL;
}

static void *w_rel(void *arg)
{
	(void)arg;
	atomic_fetch_add(&armed, 1);
	int64_t t0 = now(CLOCK_MONOTONIC);
	struct timespec one = { 1, 0 };
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &one, &one) == EINTR)
		;
	rel_ok = now(CLOCK_MONOTONIC) - t0 >= NS;
	atomic_store(&reldone, 1);
	return NULL;
}

/* CLOCK_REALTIME set to monotonic now + off: 0, or EPERM. */
static int setclock(int64_t off)
{
	struct timespec t = ts(now(CLOCK_MONOTONIC) + off);
	return clock_settime(CLOCK_REALTIME, &t) == 0 ? 0 : errno;
}

static void sleep_until_mono(int64_t t)
{
	struct timespec at = ts(t);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
		;
}

int main(int argc, char **argv)
{
	int fwd = argc > 1 && !strcmp(argv[1], "fwd");
	if (argc < 2 || (!fwd && strcmp(argv[1], "back"))) {
		fprintf(stderr, "usage: clockreal fwd|back\n");
		return 2;
	}
	/* the clock as it is, then a set that changes nothing: may we? */
	int64_t off = now(CLOCK_REALTIME) - now(CLOCK_MONOTONIC);
	int e = setclock(off);
	if (e == EPERM) {
		printf("cannot set the clock\n");
		return 77;
	}
	CHECK(e == 0);
	pthread_condattr_t ca;
	CHECK(pthread_condattr_init(&ca) == 0);
	CHECK(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0);
	CHECK(pthread_cond_init(&monocond, &ca) == 0);
	CHECK(sem_init(&sem, 0, 0) == 0);
	CHECK(pthread_mutex_lock(&held) == 0);

	int64_t ahead = fwd ? 3 * NS : 3 * NS / 2;
	int64_t m0 = now(CLOCK_MONOTONIC);
	deadline = ts(m0 + off + ahead);
	deadline_mono = m0 + ahead;
	void *(*fns[])(void *) = { w_cond, w_mono, w_sem, w_mutex, w_sleep, w_rel };
	enum { NW = sizeof fns / sizeof fns[0] };
	pthread_t t[NW];
	for (int i = 0; i < NW; i++)
		CHECK(pthread_create(&t[i], NULL, fns[i], NULL) == 0);
	/* the cond waiters are in their wait once they let go of mu; the
	 * others are at their call (a wait begun after the jump ends the
	 * same way: the deadline is then behind the clock, or ahead) */
	pthread_mutex_lock(&mu);
	while (ready < 2)
		pthread_cond_wait(&readycv, &mu);
	pthread_mutex_unlock(&mu);
	while (atomic_load(&armed) < NW - 2)
		sched_yield();

	int waiting = -1;
	if (fwd) {
		CHECK(setclock(off + 4 * NS) == 0);
		/* the realtime waits end now: the clock is past them */
		for (int i = 0; i < NW; i++)
			if (fns[i] != w_mono && fns[i] != w_rel)
				CHECK(pthread_join(t[i], NULL) == 0);
		CHECK(setclock(off) == 0);
	} else {
		CHECK(setclock(off - 5 * NS) == 0);
		/* 0.5 s past the deadline on the real clock; 4.5 s before
		 * it on the clock as set */
		sleep_until_mono(deadline_mono + NS / 2);
		waiting = NRT - atomic_load(&rtdone);
		int rel = atomic_load(&reldone);
		CHECK(setclock(off) == 0);
		rel_ok = rel_ok && rel;
		for (int i = 0; i < NW; i++)
			if (fns[i] != w_mono && fns[i] != w_rel)
				CHECK(pthread_join(t[i], NULL) == 0);
	}
	pthread_mutex_unlock(&held);
	pthread_mutex_lock(&mu);
	monowoken = 1;
	pthread_cond_signal(&monocond);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < NW; i++)
		if (fns[i] == w_mono || fns[i] == w_rel)
			CHECK(pthread_join(t[i], NULL) == 0);
	if (fwd)
		printf("fwd rt_cond=%d sem=%d mutex=%d nanosleep=%d early=%d mono_cond=%d rel=%s\n",
		       res_cond, res_sem, res_mutex, res_sleep, atomic_load(&early), res_mono,
		       rel_ok ? "ok" : "BAD");
	else
		printf("back waiting=%d rt_cond=%d sem=%d mutex=%d nanosleep=%d mono_cond=%d rel=%s\n",
		       waiting, res_cond, res_sem, res_mutex, res_sleep, res_mono,
		       rel_ok ? "ok" : "BAD");
	return 0;
}
