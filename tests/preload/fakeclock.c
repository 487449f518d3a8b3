/*
 * fakeclock.c - a program run with a clock interposer preloaded
 * (tests/preload/lib/fakeclock.c, standing in for libfaketime; under
 * weft run after the shim, as `weft run -- faketime ...` has it): it sees
 * the interposer's clocks, and its timed waits on deadlines made from
 * them last as long as they say.  Under weft the shim's clock_gettime
 * went to the kernel's clock (the program saw today's date, not the one
 * faketime gave), and its waits are weft's own, which must measure the
 * program's deadlines against the program's clocks.  Elapsed time is read
 * with a raw system call, which no interposer sees.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static long raw_clock(clockid_t c, struct timespec *ts)
{
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"((long)SYS_clock_gettime), "D"((long)c), "S"(ts)
			 : "rcx", "r11", "memory");
	return r;
}

static double raw_now(void)
{
	struct timespec ts;
	raw_clock(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The program's clock c, 200 ms on. */
static struct timespec soon(clockid_t c)
{
	struct timespec ts;
	CHECK(clock_gettime(c, &ts) == 0);
	ts.tv_nsec += 200000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

/* A 200 ms wait took about that: not ended at once (a deadline taken as
 * a year past), not 1,000 s or a year (one taken as far ahead). */
static void lasted(const char *what, double t0, int r, int want)
{
	double el = raw_now() - t0;
	say(what, r == want && el >= 0.15 && el < 60);
	if (!(r == want && el >= 0.15 && el < 60))
		printf("  %s: returned %d (want %d) after %.3f s\n", what, r, want, el);
}

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static sem_t holding, release;

static void *holder(void *arg)
{
	pthread_mutex_lock(&held);
	sem_post(&holding);
	while (sem_wait(&release) != 0)
		;
	pthread_mutex_unlock(&held);
	return arg;
}

int main(void)
{
	sem_init(&holding, 0, 0);
	sem_init(&release, 0, 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, holder, NULL) == 0); /* under weft: main a G */
	while (sem_wait(&holding) != 0)
		;

	struct timespec prog, kern;
	CHECK(clock_gettime(CLOCK_REALTIME, &prog) == 0 && raw_clock(CLOCK_REALTIME, &kern) == 0);
	long d = (long)(kern.tv_sec - prog.tv_sec);
	say("the wall clock is the interposer's (a year behind)", d > 365L * 86400 - 60 && d < 365L * 86400 + 60);
	CHECK(clock_gettime(CLOCK_MONOTONIC, &prog) == 0 && raw_clock(CLOCK_MONOTONIC, &kern) == 0);
	d = (long)(prog.tv_sec - kern.tv_sec);
	say("the monotonic clock is the interposer's (1,000 s ahead)", d > 990 && d < 1010);

	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	struct timespec ts = soon(CLOCK_REALTIME);
	double t0 = raw_now();
	pthread_mutex_lock(&mu);
	int r;
	while ((r = pthread_cond_timedwait(&cv, &mu, &ts)) == 0)
		;
	pthread_mutex_unlock(&mu);
	lasted("pthread_cond_timedwait on the wall clock", t0, r, ETIMEDOUT);

	sem_t s;
	sem_init(&s, 0, 0);
	ts = soon(CLOCK_REALTIME);
	t0 = raw_now();
	while ((r = sem_timedwait(&s, &ts)) != 0 && errno == EINTR)
		;
	lasted("sem_timedwait", t0, r == 0 ? 0 : errno, ETIMEDOUT);

	ts = soon(CLOCK_REALTIME);
	t0 = raw_now();
	r = pthread_mutex_timedlock(&held, &ts);
	lasted("pthread_mutex_timedlock", t0, r, ETIMEDOUT);

	ts = soon(CLOCK_REALTIME);
	t0 = raw_now();
	while ((r = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL)) == EINTR)
		;
	lasted("clock_nanosleep to a wall-clock time", t0, r, 0);

	ts = soon(CLOCK_MONOTONIC);
	t0 = raw_now();
	while ((r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR)
		;
	lasted("clock_nanosleep to a monotonic time", t0, r, 0);

	sem_post(&release);
	CHECK(pthread_join(t, NULL) == 0);
	return failures ? 1 : 0;
}
