/*
 * futex.c - a program's own futexes, through glibc's syscall(SYS_futex,
 * ...), as InnoDB's srw_lock (MariaDB 10.6+) and libstdc++'s
 * std::atomic::wait use them.  Knows nothing of weft.
 *
 *   futex park [N]    N threads (default 200) wait on one word; once all
 *                     have said so, main prints "os_threads=K" (natively
 *                     N + 1; under weft the waits park, and K stays
 *                     near the Ps), then wakes them all
 *   futex lock [N R]  a futex mutex (Drepper's "mutex 2") taken R times
 *                     by each of N threads around a plain increment: the
 *                     sum is N * R; "os_threads_max=K" sampled meanwhile
 *   futex ops         the calls' results: EAGAIN, ETIMEDOUT (relative,
 *                     absolute on CLOCK_MONOTONIC and CLOCK_REALTIME),
 *                     EINVAL, bitsets, FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP
 *                     (the same lines natively and under weft)
 *
 * Prints "ok ..." or "FAIL ..." lines; exits 0 if all held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static long fx(_Atomic uint32_t *a, int op, uint32_t v, const struct timespec *ts, _Atomic uint32_t *a2,
	       uint32_t v3)
{
	return syscall(SYS_futex, a, op, v, ts, a2, v3);
}

static void nap(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	nanosleep(&ts, NULL);
}

/* ---- park: many threads waiting on one word ------------------------------------------ */

static _Atomic uint32_t gate;
static atomic_int waiting, leftw;

static void *parker(void *arg)
{
	(void)arg;
	atomic_fetch_add(&waiting, 1);
	while (atomic_load(&gate) == 0)
		fx(&gate, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	atomic_fetch_add(&leftw, 1);
	return NULL;
}

static int run_park(int n)
{
	pthread_t *t = calloc((size_t)n, sizeof *t);
	CHECK(t);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, parker, NULL) == 0);
	while (atomic_load(&waiting) < n)
		nap(1000);
	printf("os_threads=%d\n", os_threads());
	atomic_store(&gate, 1);
	fx(&gate, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	for (int i = 0; i < n; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	say("park: every waiter woke", atomic_load(&leftw) == n);
	free(t);
	return failures;
}

/* ---- lock: a futex mutex under contention ---------------------------------------------- */

/* 0 free, 1 held, 2 held with waiters (Drepper, "Futexes Are Tricky") */
static _Atomic uint32_t mx;
static long counter;
static int rounds;
static atomic_int running;

static void mlock(void)
{
	uint32_t c = 0;
	if (atomic_compare_exchange_strong(&mx, &c, 1))
		return;
	if (c != 2)
		c = atomic_exchange(&mx, 2);
	while (c != 0) {
		fx(&mx, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
		c = atomic_exchange(&mx, 2);
	}
}

static void munlock(void)
{
	if (atomic_fetch_sub(&mx, 1) != 1) {
		atomic_store(&mx, 0);
		fx(&mx, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
}

static void *locker(void *arg)
{
	(void)arg;
	for (int i = 0; i < rounds; i++) {
		mlock();
		long v = counter;
		if (i % 64 == 0)
			sched_yield(); /* held across a switch now and then */
		counter = v + 1;
		munlock();
	}
	atomic_fetch_sub(&running, 1);
	return NULL;
}

static int run_lock(int n, int r)
{
	rounds = r;
	atomic_store(&running, n);
	pthread_t *t = calloc((size_t)n, sizeof *t);
	CHECK(t);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, locker, NULL) == 0);
	int most = 0;
	while (atomic_load(&running) > 0) {
		int k = os_threads();
		if (k > most)
			most = k;
		nap(1000);
	}
	for (int i = 0; i < n; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	printf("os_threads_max=%d\n", most);
	char what[64];
	snprintf(what, sizeof what, "lock: counter %ld of %ld", counter, (long)n * r);
	say(what, counter == (long)n * r);
	free(t);
	return failures;
}

/* ---- ops: the calls' results ------------------------------------------------------------- */

static _Atomic uint32_t w1, w2;
static atomic_int inwait;

static struct timespec after_ms(clockid_t clk, long ms)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	ts.tv_nsec += ms * 1000000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	return ts;
}

static long err(long r)
{
	return r < 0 ? -errno_now() : r;
}

/* Waits on w1 while it is 0 (FUTEX_WAIT, bitset 1 with FUTEX_WAIT_BITSET
 * when arg says so), counting itself in inwait first. */
static void *w1waiter(void *arg)
{
	atomic_fetch_add(&inwait, 1);
	while (atomic_load(&w1) == 0) {
		if (arg)
			fx(&w1, FUTEX_WAIT_BITSET_PRIVATE, 0, NULL, NULL, 1);
		else
			fx(&w1, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	}
	return NULL;
}

static void *w2waiter(void *arg)
{
	(void)arg;
	atomic_fetch_add(&inwait, 1);
	while (atomic_load(&w2) == 0)
		fx(&w2, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	return NULL;
}

enum { NW = 20 };

static void start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	atomic_store(&inwait, 0);
	for (int i = 0; i < NW; i++)
		CHECK(pthread_create(&t[i], NULL, fn, arg) == 0);
	while (atomic_load(&inwait) < NW)
		nap(1000);
	nap(20000); /* most are in their wait by now; the rest see the word */
}

static void joinall(pthread_t *t)
{
	for (int i = 0; i < NW; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
}

static int run_ops(void)
{
	/* a thread first: under weft the runtime runs from here on */
	pthread_t t[NW];
	start(t, w1waiter, NULL);
	atomic_store(&w1, 1);
	say("wake returns at most the waiters", err(fx(&w1, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0)) <= NW);
	joinall(t);

	atomic_store(&w1, 5);
	say("wait on a changed word: EAGAIN", err(fx(&w1, FUTEX_WAIT_PRIVATE, 4, NULL, NULL, 0)) == -EAGAIN);
	struct timespec rel = { 0, 20 * 1000000 };
	say("relative timeout: ETIMEDOUT", err(fx(&w1, FUTEX_WAIT_PRIVATE, 5, &rel, NULL, 0)) == -ETIMEDOUT);
	struct timespec am = after_ms(CLOCK_MONOTONIC, 20);
	say("absolute CLOCK_MONOTONIC timeout: ETIMEDOUT",
	    err(fx(&w1, FUTEX_WAIT_BITSET_PRIVATE, 5, &am, NULL, FUTEX_BITSET_MATCH_ANY)) == -ETIMEDOUT);
	struct timespec ar = after_ms(CLOCK_REALTIME, 20);
	say("absolute CLOCK_REALTIME timeout: ETIMEDOUT",
	    err(fx(&w1, FUTEX_WAIT_BITSET_PRIVATE | FUTEX_CLOCK_REALTIME, 5, &ar, NULL,
		   FUTEX_BITSET_MATCH_ANY)) == -ETIMEDOUT);
	struct timespec past = { 1, 0 };
	say("a deadline passed: ETIMEDOUT",
	    err(fx(&w1, FUTEX_WAIT_BITSET_PRIVATE, 5, &past, NULL, FUTEX_BITSET_MATCH_ANY)) == -ETIMEDOUT);
	struct timespec bad = { 0, 1000000000 };
	say("bad timespec: EINVAL", err(fx(&w1, FUTEX_WAIT_PRIVATE, 5, &bad, NULL, 0)) == -EINVAL);
	say("wait with bitset 0: EINVAL",
	    err(fx(&w1, FUTEX_WAIT_BITSET_PRIVATE, 5, NULL, NULL, 0)) == -EINVAL);
	say("wake with bitset 0: EINVAL", err(fx(&w1, FUTEX_WAKE_BITSET_PRIVATE, 1, NULL, NULL, 0)) == -EINVAL);
	say("wake with nobody waiting: 0", err(fx(&w1, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0)) == 0);

	/* a bitset wake that misses the waiters' bit wakes none of them */
	atomic_store(&w1, 0);
	start(t, w1waiter, (void *)1);
	say("bitset wake of another bit: 0",
	    err(fx(&w1, FUTEX_WAKE_BITSET_PRIVATE, INT_MAX, NULL, NULL, 2)) == 0);
	atomic_store(&w1, 1);
	long k = err(fx(&w1, FUTEX_WAKE_BITSET_PRIVATE, INT_MAX, NULL, NULL, 1));
	say("bitset wake of their bit", k >= 0 && k <= NW);
	joinall(t);

	/* FUTEX_CMP_REQUEUE: a wrong value is EAGAIN; the waiters of w1 move
	 * to w2 and a wake of w2 ends them */
	atomic_store(&w1, 0);
	atomic_store(&w2, 0);
	start(t, w1waiter, NULL);
	say("cmp_requeue with a changed word: EAGAIN",
	    err(fx(&w1, FUTEX_CMP_REQUEUE_PRIVATE, 0, (struct timespec *)(long)INT_MAX, &w2, 7)) == -EAGAIN);
	k = err(fx(&w1, FUTEX_CMP_REQUEUE_PRIVATE, 0, (struct timespec *)(long)INT_MAX, &w2, 0));
	say("cmp_requeue moves the waiters", k >= 0 && k <= NW);
	atomic_store(&w1, 1);
	say("a wake of w1 after: none there (or a late one)",
	    err(fx(&w1, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0)) <= NW - k);
	fx(&w2, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	joinall(t);

	/* FUTEX_WAKE_OP: w2 = 1, and its waiters woken because it was 0 */
	atomic_store(&w2, 0);
	start(t, w2waiter, NULL);
	k = err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, (struct timespec *)(long)INT_MAX, &w2,
		   FUTEX_OP(FUTEX_OP_SET, 1, FUTEX_OP_CMP_EQ, 0)));
	say("wake_op sets the word", atomic_load(&w2) == 1 && k >= 0 && k <= NW);
	joinall(t);
	k = err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, (struct timespec *)(long)1, &w2,
		   FUTEX_OP(FUTEX_OP_ADD, 2, FUTEX_OP_CMP_GT, 5)));
	say("wake_op adds", atomic_load(&w2) == 3 && k == 0);
	return failures;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *c = argc > 1 ? argv[1] : "";
	if (!strcmp(c, "park"))
		return run_park(argc > 2 ? atoi(argv[2]) : 200) ? 1 : 0;
	if (!strcmp(c, "lock"))
		return run_lock(argc > 2 ? atoi(argv[2]) : 32, argc > 3 ? atoi(argv[3]) : 2000) ? 1 : 0;
	if (!strcmp(c, "ops"))
		return run_ops() ? 1 : 0;
	return 2;
}
