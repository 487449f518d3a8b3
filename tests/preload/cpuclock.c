/*
 * cpuclock.c - a thread's CPU-time clock (plain pthreads, knows nothing
 * of weft; tests/test_preload_cpuclock.c runs it natively and under the
 * shim).  Each case prints "ok" lines that must be the same both ways.
 *
 *   alternate  a spinner and a sleeper: each one's CLOCK_THREAD_CPUTIME_ID
 *              moves by its own work (the sleeper's barely), never back,
 *              and the threads' clocks add up to no more than the
 *              process's CPU time; getrusage(RUSAGE_THREAD) agrees
 *   migrate    4 threads that burn and sleep in turn: none sees its clock
 *              go back (they move between OS threads on 2 Ps)
 *   other      pthread_getcpuclockid of another thread reads its clock
 *              from here: it moves while that thread spins, stands still
 *              while it waits; of itself, the same clock as
 *              CLOCK_THREAD_CPUTIME_ID; clock_getres 1 ns
 *   mainfirst  main's clock keeps what main spent before its first thread,
 *              and the clock id main got then is still its clock after
 *   fork       a forked child's thread clock starts again from 0 and moves on
 *   timer      timer_create on the thread's CPU clock: prints the result
 *              (native: ok; weft: ENOTSUP, docs/preload.md)
 *   pingpong [0|1]  not a test: ns per hand-off between two threads on a
 *              mutex and cond, 1: each read its clock first (under weft,
 *              its clock is then kept: the cost of a kept G's switch)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define MS 1000000LL

static int64_t clk(clockid_t c)
{
	struct timespec ts;
	CHECK(clock_gettime(c, &ts) == 0);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t self_cpu(void)
{
	return clk(CLOCK_THREAD_CPUTIME_ID);
}

/* Burn ns of this thread's CPU time; the clock never goes back meanwhile. */
static void burn(int64_t ns)
{
	int64_t t0 = self_cpu(), last = t0;
	volatile uint64_t x = 0;
	while (last - t0 < ns) {
		for (int i = 0; i < 20000; i++)
			x += (uint64_t)i * i;
		int64_t t = self_cpu();
		if (t < last)
			FAIL("thread clock went back: %lld -> %lld", (long long)last, (long long)t);
		last = t;
	}
	(void)x; /* read: clang's -Wunused-but-set-variable counts += as no use */
}

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static int64_t rusage_ns(void)
{
	struct rusage ru;
	CHECK(getrusage(RUSAGE_THREAD, &ru) == 0);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

/* ---- alternate ------------------------------------------------------------------------ */

static atomic_int stop;
static atomic_int chunks;   /* the spinner's 2 ms chunks so far */
static int naps;            /* the sleeper's */
static int64_t spun, slept; /* each thread's clock moved by this much */
static int64_t sleptru;     /* the sleeper's getrusage(RUSAGE_THREAD) moved by this much */

static void *spinner(void *arg)
{
	(void)arg;
	int64_t t0 = self_cpu();
	while (!atomic_load(&stop)) {
		burn(2 * MS);
		atomic_fetch_add(&chunks, 1);
		nap_us(100); /* lets the sleeper run on 1 P */
	}
	spun = self_cpu() - t0;
	int64_t ru = rusage_ns();
	if (ru > self_cpu() + 2 * MS) /* rusage is in us, and read before */
		FAIL("spinner: rusage %lld > clock %lld", (long long)ru, (long long)self_cpu());
	if (ru < spun / 2)
		FAIL("spinner: rusage %lld, clock moved %lld", (long long)ru, (long long)spun);
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	int64_t t0 = self_cpu(), last = t0, r0 = rusage_ns();
	/* 40 naps at least, and until the spinner has burned 20 ms (however
	 * little CPU a loaded machine gives it) */
	for (naps = 0; naps < 40 || atomic_load(&chunks) < 10; naps++) {
		nap_us(5000);
		int64_t t = self_cpu();
		if (t < last)
			FAIL("sleeper: clock went back");
		last = t;
	}
	slept = last - t0;
	sleptru = rusage_ns() - r0;
	return NULL;
}

static void alternate(void)
{
	int64_t p0 = clk(CLOCK_PROCESS_CPUTIME_ID);
	pthread_t a, b;
	CHECK(pthread_create(&a, NULL, spinner, NULL) == 0);
	CHECK(pthread_create(&b, NULL, sleeper, NULL) == 0);
	CHECK(pthread_join(b, NULL) == 0);
	atomic_store(&stop, 1);
	CHECK(pthread_join(a, NULL) == 0);
	int64_t proc = clk(CLOCK_PROCESS_CPUTIME_ID) - p0;
	/* the spinner burned 10 chunks of 2 ms at least; the sleeper's own
	 * work is a few calls per nap, far below 1 ms of CPU each (the
	 * spinner burned ~2 ms between two of its naps) */
	if (spun < 20 * MS)
		FAIL("spinner's clock moved %lld ns only", (long long)spun);
	if (slept > naps * MS)
		FAIL("sleeper's clock moved %lld ns in %d naps, the spinner's %lld: it counts "
		     "others' work",
		     (long long)slept, naps, (long long)spun);
	if (sleptru > naps * MS + MS) /* in us */
		FAIL("sleeper's rusage moved %lld ns in %d naps, the spinner's clock %lld",
		     (long long)sleptru, naps, (long long)spun);
	if (spun + slept > proc)
		FAIL("threads' clocks %lld + %lld > the process's CPU time %lld", (long long)spun,
		     (long long)slept, (long long)proc);
	printf("alternate: ok\n");
}

/* ---- migrate -------------------------------------------------------------------------- */

static void *migrant(void *arg)
{
	(void)arg;
	int64_t last = self_cpu();
	for (int i = 0; i < 60; i++) {
		burn(MS / 2);
		nap_us(200 + 100 * (i % 3)); /* parks: may come back on another OS thread */
		int64_t t = self_cpu();
		if (t < last)
			FAIL("migrant: clock went back %lld -> %lld after a sleep", (long long)last,
			     (long long)t);
		last = t;
	}
	return NULL;
}

static void migrate(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, migrant, NULL) == 0);
	for (int i = 0; i < 4; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	printf("migrate: ok\n");
}

/* ---- other ---------------------------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase; /* 1: the worker spins; 2: it waits; 3: it ends */
static atomic_llong workerown; /* the worker's own reading, after its spin */

static void *worker(void *arg)
{
	(void)arg;
	while (atomic_load(&stop) == 0)
		burn(MS / 4);
	atomic_store(&workerown, self_cpu());
	pthread_mutex_lock(&mu);
	phase = 2;
	pthread_cond_broadcast(&cv);
	while (phase != 3)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void other(void)
{
	clockid_t me, it;
	CHECK(pthread_getcpuclockid(pthread_self(), &me) == 0);
	if (me == CLOCK_THREAD_CPUTIME_ID)
		FAIL("my clock id is CLOCK_THREAD_CPUTIME_ID");
	int64_t a = clk(me), b = self_cpu(), c = clk(me);
	if (!(a <= b && b <= c))
		FAIL("own clock by id %lld, by CLOCK_THREAD_CPUTIME_ID %lld, by id %lld",
		     (long long)a, (long long)b, (long long)c);

	pthread_t w;
	CHECK(pthread_create(&w, NULL, worker, NULL) == 0);
	CHECK(pthread_getcpuclockid(w, &it) == 0);
	if (it == me || it == CLOCK_THREAD_CPUTIME_ID)
		FAIL("the worker's clock id is mine");
	struct timespec res;
	CHECK(clock_getres(it, &res) == 0);
	if (res.tv_sec != 0 || res.tv_nsec != 1)
		FAIL("resolution %ld.%09ld", (long)res.tv_sec, res.tv_nsec);
	/* it moves while the worker spins (read from here, never back) */
	int64_t first = clk(it), last = first;
	while (last - first < 20 * MS) {
		nap_us(1000);
		int64_t t = clk(it);
		if (t < last)
			FAIL("worker's clock read from main went back");
		last = t;
	}
	atomic_store(&stop, 1);
	pthread_mutex_lock(&mu);
	while (phase != 2)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	/* it stands still while the worker waits */
	int64_t w1 = clk(it);
	if (w1 < atomic_load(&workerown))
		FAIL("worker's clock from here %lld < its own reading %lld", (long long)w1,
		     (long long)atomic_load(&workerown));
	burn(10 * MS);
	nap_us(10000);
	int64_t w2 = clk(it);
	if (w2 - w1 > MS)
		FAIL("worker's clock moved %lld ns while it waited", (long long)(w2 - w1));
	pthread_mutex_lock(&mu);
	phase = 3;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	CHECK(pthread_join(w, NULL) == 0);
	printf("other: ok\n");
}

/* ---- mainfirst, fork, timer ----------------------------------------------------------- */

static void *noop(void *arg)
{
	return arg;
}

static void mainfirst(void)
{
	burn(30 * MS);
	clockid_t me;
	CHECK(pthread_getcpuclockid(pthread_self(), &me) == 0);
	int64_t before = self_cpu();
	pthread_t t;
	CHECK(pthread_create(&t, NULL, noop, NULL) == 0); /* weft: main becomes a thread of its */
	int64_t after = self_cpu();
	if (after < before)
		FAIL("main's clock went back at its first thread: %lld -> %lld", (long long)before,
		     (long long)after);
	/* the id main had before its first thread is still its clock */
	int64_t a = clk(me);
	burn(20 * MS);
	int64_t b = clk(me);
	if (a < before || b - a < 20 * MS)
		FAIL("main's clock id from before its first thread: %lld, then %lld after 20 ms of "
		     "work (its clock before: %lld)",
		     (long long)a, (long long)b, (long long)before);
	CHECK(pthread_join(t, NULL) == 0);
	if (self_cpu() < after)
		FAIL("main's clock went back after a join");
	printf("mainfirst: ok\n");
}

static void *forker(void *arg)
{
	(void)arg;
	burn(30 * MS);
	int64_t mine = self_cpu();
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int64_t a = self_cpu();
		if (a >= mine)
			FAIL("child's clock %lld did not start again (parent's %lld)", (long long)a,
			     (long long)mine);
		burn(5 * MS);
		if (self_cpu() < a + 5 * MS)
			FAIL("child's clock did not move on");
		_exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		FAIL("child failed: %#x", st);
	if (self_cpu() < mine)
		FAIL("parent's clock went back");
	return NULL;
}

static void forkcase(void)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, forker, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	printf("fork: ok\n");
}

static void *timerthr(void *arg)
{
	(void)arg;
	timer_t tm;
	struct sigevent sev = { .sigev_notify = SIGEV_NONE };
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &tm) == 0) {
		printf("timer: ok\n");
		timer_delete(tm);
	} else {
		printf("timer: %s\n", strerror(errno));
	}
	return NULL;
}

static void timercase(void)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, timerthr, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
}

/* ---- pingpong (a measurement) ------------------------------------------------------- */

static long turn, rounds = 100000;
static int track;

static void *side(void *arg)
{
	long me = (long)arg;
	if (track)
		(void)self_cpu();
	pthread_mutex_lock(&mu);
	for (long i = 0; i < rounds; i++) {
		while ((turn & 1) != me)
			pthread_cond_wait(&cv, &mu);
		turn++;
		pthread_cond_signal(&cv);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void pingpong(int tr)
{
	track = tr;
	int64_t t0 = clk(CLOCK_MONOTONIC);
	pthread_t a, b;
	CHECK(pthread_create(&a, NULL, side, (void *)0L) == 0);
	CHECK(pthread_create(&b, NULL, side, (void *)1L) == 0);
	CHECK(pthread_join(a, NULL) == 0);
	CHECK(pthread_join(b, NULL) == 0);
	printf("pingpong track=%d ns_per_handoff=%.0f\n", tr,
	       (double)(clk(CLOCK_MONOTONIC) - t0) / (2.0 * rounds));
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	if (!strcmp(c, "alternate"))
		alternate();
	else if (!strcmp(c, "migrate"))
		migrate();
	else if (!strcmp(c, "other"))
		other();
	else if (!strcmp(c, "mainfirst"))
		mainfirst();
	else if (!strcmp(c, "fork"))
		forkcase();
	else if (!strcmp(c, "timer"))
		timercase();
	else if (!strcmp(c, "pingpong"))
		pingpong(argc > 2 ? atoi(argv[2]) : 0);
	else
		FAIL("usage: cpuclock alternate|migrate|other|mainfirst|fork|timer|pingpong [0|1]");
	fflush(stdout);
	return 0;
}
