/*
 * test_clock.c - a real jump of the wall clock in a linked program: a
 * G's clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME) (weft's hook,
 * hook/wait.c g_sleep_rt) ends when a jump forward passes its time and
 * waits on after a jump back, as a plain thread's (the kernel's) does in
 * the same process; a G's relative sleeps (weft_sleep, clock_nanosleep
 * on CLOCK_MONOTONIC) do not move.  (The preloaded waits, cond/sem/
 * mutex/clock_nanosleep, are tests/test_preload_clock.c.)
 *
 * The clock moves 4 s forward or 5 s back and is put right within the
 * test from its offset to CLOCK_MONOTONIC (net change: microseconds),
 * in a forked child (tests/test_hook.h); skipped without CAP_SYS_TIME.
 */
#include "test_hook.h"
#include "clocklock.h"
#include "clockns.h"

#include <time.h>


static char *env_procs2c[] = { "WEFT_MAXPROCS=2", NULL };

/* CLOCK_REALTIME to monotonic now + off: 0 or errno. */
static int setclock(int64_t off)
{
	struct timespec t = ts(now(CLOCK_MONOTONIC) + off);
	return clock_settime(CLOCK_REALTIME, &t) == 0 ? 0 : errno;
}

/* May this process set the clock?  (A set to what it reads.) */
static bool can_set_clock(void)
{
	return setclock(now(CLOCK_REALTIME) - now(CLOCK_MONOTONIC)) == 0;
}

static struct timespec deadline; /* on CLOCK_REALTIME */
static int64_t deadline_mono;    /* the same instant, monotonic */
static atomic_int armed, rtdone, early, relok;
static int res_g = -1, res_thread = -1;
static weft_wg_t wg = WEFT_WG_INIT;

static void rt_over(int *res, int r)
{
	*res = r;
	atomic_fetch_add(&early, now(CLOCK_MONOTONIC) < deadline_mono);
	atomic_fetch_add(&rtdone, 1);
}

static void g_rt(void *arg)
{
	(void)arg;
	atomic_fetch_add(&armed, 1);
	int r;
	while ((r = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &deadline, NULL)) == EINTR)
		;
	rt_over(&res_g, r);
	weft_wg_done(&wg);
}

static void *thread_rt(void *arg)
{
	(void)arg;
	atomic_fetch_add(&armed, 1);
	int r;
	while ((r = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &deadline, NULL)) == EINTR)
		;
	rt_over(&res_thread, r);
	return NULL;
}

/* 1 s by weft_sleep, then 1 s by clock_nanosleep(CLOCK_MONOTONIC): each
 * at least its second. */
static void g_rel(void *arg)
{
	(void)arg;
	atomic_fetch_add(&armed, 1);
	int64_t t0 = now(CLOCK_MONOTONIC);
	CHECK(weft_sleep(NS / 2) == 0);
	int64_t t1 = now(CLOCK_MONOTONIC);
	struct timespec half = { 0, NS / 2 };
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &half, &half) == EINTR)
		;
	int64_t t2 = now(CLOCK_MONOTONIC);
	atomic_store(&relok, t1 - t0 >= NS / 2 && t2 - t1 >= NS / 2);
	weft_wg_done(&wg);
}

/* Start the waiters to a deadline ahead on the wall clock; back once
 * each is at its call.  The clock's offset from the monotonic one. */
static int64_t start(int64_t ahead, pthread_t *t)
{
	clock_lock();
	int64_t off = now(CLOCK_REALTIME) - now(CLOCK_MONOTONIC);
	int64_t m0 = now(CLOCK_MONOTONIC);
	deadline = ts(m0 + off + ahead);
	deadline_mono = m0 + ahead;
	weft_wg_add(&wg, 2);
	weft_go(g_rt, NULL);
	weft_go(g_rel, NULL);
	CHECK(pthread_create(t, NULL, thread_rt, NULL) == 0);
	while (atomic_load(&armed) < 3)
		weft_yield();
	return off;
}

/* 4 s forward past a time 3 s ahead: both realtime sleeps end at once
 * (0, before that time on the real clock); the G's relative sleeps last
 * their time.  Before: the G's sleep was a duration and lasted its 3 s
 * (early=1). */
G_TEST_UNLESS(clock, linked_jump_forward, env_procs2c, 120, !can_set_clock(),
	      "cannot set CLOCK_REALTIME (not root, or no CAP_SYS_TIME)")
{
	(void)argc, (void)argv;
	pthread_t t;
	int64_t off = start(3 * NS, &t);
	CHECK(setclock(off + 4 * NS) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	while (atomic_load(&rtdone) < 2)
		weft_yield();
	CHECK(setclock(off) == 0);
	weft_wg_wait(&wg);
	if (res_g != 0 || res_thread != 0 || atomic_load(&early) != 2 || !atomic_load(&relok)) {
		fprintf(stderr, "G %d, thread %d, early %d, relative sleeps %s\n", res_g,
			res_thread, atomic_load(&early), atomic_load(&relok) ? "ok" : "BAD");
		CHECK(0);
	}
	return 0;
}

/* 5 s back before a time 1.5 s ahead: 0.5 s past that time (real
 * clock) neither realtime sleep has ended; both end once the clock is
 * put right; the relative sleeps (1 s) ended meanwhile. */
G_TEST_UNLESS(clock, linked_jump_back, env_procs2c, 120, !can_set_clock(),
	      "cannot set CLOCK_REALTIME (not root, or no CAP_SYS_TIME)")
{
	(void)argc, (void)argv;
	pthread_t t;
	int64_t off = start(3 * NS / 2, &t);
	CHECK(setclock(off - 5 * NS) == 0);
	int64_t left = deadline_mono + NS / 2 - now(CLOCK_MONOTONIC);
	if (left > 0)
		CHECK(weft_sleep(left) == 0);
	int waiting = 2 - atomic_load(&rtdone);
	int rel = atomic_load(&relok);
	CHECK(setclock(off) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	weft_wg_wait(&wg);
	if (waiting != 2 || res_g != 0 || res_thread != 0 || !rel) {
		fprintf(stderr, "still waiting %d of 2, G %d, thread %d, relative sleeps %s\n",
			waiting, res_g, res_thread, rel ? "ok" : "BAD");
		CHECK(0);
	}
	return 0;
}
