/*
 * pthread_pingpong -- round trip between two threads that block, with a
 * raw futex and with a mutex + condition variable.
 *
 *   pthread_pingpong [N]   default 500000 round trips;
 *                          QUICK=1 in the env uses 5000.
 *
 * Prints: pthread_futex_pingpong_ns=<ns> pthread_condvar_pingpong_ns=<ns> n=<N>
 * (nanoseconds per round trip; each round trip is two wakeups).
 */
#define _GNU_SOURCE		/* syscall */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long n;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --- raw futex: turn says whose move it is (0 main, 1 partner) --- */

static _Atomic int turn;

static void futex_wait(_Atomic int *addr, int val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Wait until turn == me, then hand the turn to the other side. */
static void futex_step(int me)
{
	while (atomic_load(&turn) != me)
		futex_wait(&turn, !me);
	atomic_store(&turn, !me);
	futex_wake(&turn);
}

static void *futex_partner(void *arg)
{
	long i;

	for (i = 0; i < n; i++)
		futex_step(1);
	return arg;
}

/* --- mutex + condvar, same protocol --- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int cturn;

static void cond_step(int me)
{
	pthread_mutex_lock(&mu);
	while (cturn != me)
		pthread_cond_wait(&cv, &mu);
	cturn = !me;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

static void *cond_partner(void *arg)
{
	long i;

	for (i = 0; i < n; i++)
		cond_step(1);
	return arg;
}

static double run(void *(*partner)(void *), void (*step)(int))
{
	pthread_t t;
	double t0;
	long i;

	if (pthread_create(&t, NULL, partner, NULL) != 0) {
		fprintf(stderr, "pthread_pingpong: pthread_create failed\n");
		exit(1);
	}
	t0 = now_s();
	for (i = 0; i < n; i++)
		step(0);
	/* Wait for the partner's last hand-back. */
	pthread_join(t, NULL);
	return (now_s() - t0) * 1e9 / (double)n;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	double f, c;

	n = argc > 1 ? atol(argv[1]) : 500000;
	if (quick != NULL && strcmp(quick, "1") == 0)
		n = 5000;
	if (n <= 0)
		n = 1;
	f = run(futex_partner, futex_step);
	c = run(cond_partner, cond_step);
	printf("pthread_futex_pingpong_ns=%.0f pthread_condvar_pingpong_ns=%.0f "
	       "n=%ld\n", f, c, n);
	return 0;
}
