/*
 * pthreads.c - a plain pthread program (it knows nothing of weft) that
 * exercises every pthread function the preload shim interposes.
 *
 *   pthreads CASE     runs one case; prints "ok CASE" and exits 0, or
 *                     prints what went wrong and exits 1
 *   pthreads list     prints the cases
 *
 * tests/test_preload.c runs each case under the shim (and natively, so
 * the program itself is known to be right).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);            \
		if (a_ != b_)                                                  \
			FAIL("%s == %lld, want %lld", #a, a_, b_);             \
	} while (0)

static void create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int e = pthread_create(t, NULL, fn, arg);
	if (e)
		FAIL("pthread_create: %s", strerror(e));
}

static void join(pthread_t t, void **ret)
{
	int e = pthread_join(t, ret);
	if (e)
		FAIL("pthread_join: %s", strerror(e));
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec in_ms(clockid_t clk, long ms)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

/* ---- a key set by a constructor, before main ---------------------------- */

static pthread_key_t ctor_key;
static int ctor_value = 42;

__attribute__((constructor)) static void ctor(void)
{
	pthread_key_create(&ctor_key, NULL);
	pthread_setspecific(ctor_key, &ctor_value);
}

/* ---- create, join, detach, exit, self ----------------------------------- */

static void *ret_arg(void *arg)
{
	return (char *)arg + 1;
}

static void case_create_join(void)
{
	pthread_t t[200];
	for (long i = 0; i < 200; i++)
		create(&t[i], ret_arg, (void *)(i * 2));
	for (long i = 0; i < 200; i++) {
		void *r;
		join(t[i], &r);
		CHECK_EQ((long)r, i * 2 + 1);
	}
	/* a join after the thread is long gone */
	pthread_t u;
	create(&u, ret_arg, NULL);
	usleep(20000);
	void *r;
	join(u, &r);
	CHECK(r == (void *)1);
	CHECK_EQ(pthread_join(pthread_self(), NULL), EDEADLK);
}

static sem_t detached_done;

static void *detached(void *arg)
{
	(void)arg;
	CHECK_EQ(pthread_detach(pthread_self()), 0);
	sem_post(&detached_done);
	return NULL;
}

static void *detached_attr(void *arg)
{
	(void)arg;
	sem_post(&detached_done);
	return NULL;
}

static void case_detach(void)
{
	sem_init(&detached_done, 0, 0);
	pthread_t t;
	for (int i = 0; i < 100; i++)
		create(&t, detached, NULL);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(pthread_create(&t, &a, detached_attr, NULL), 0);
	for (int i = 0; i < 200; i++)
		CHECK_EQ(sem_wait(&detached_done), 0);
	/* detach after exit, then join of a detached thread */
	pthread_t u;
	create(&u, ret_arg, NULL);
	usleep(20000);
	CHECK_EQ(pthread_detach(u), 0);
	pthread_t v;
	CHECK_EQ(pthread_create(&v, &a, ret_arg, NULL), 0);
	pthread_attr_destroy(&a);
}

static pthread_t self_seen[8];

static void *record_self(void *arg)
{
	self_seen[(long)arg] = pthread_self();
	return NULL;
}

static void case_self(void)
{
	pthread_t t[8];
	for (long i = 0; i < 8; i++)
		create(&t[i], record_self, (void *)i);
	for (int i = 0; i < 8; i++)
		join(t[i], NULL);
	pthread_t me = pthread_self();
	for (int i = 0; i < 8; i++) {
		CHECK(pthread_equal(t[i], self_seen[i]));
		CHECK(!pthread_equal(me, self_seen[i]));
		for (int j = 0; j < i; j++)
			CHECK(!pthread_equal(self_seen[j], self_seen[i]));
	}
	CHECK(pthread_equal(me, pthread_self()));
	CHECK_EQ(pthread_kill(me, 0), 0);
}

/* pthread_exit from deep inside, with cleanup handlers */
static int cleanup_log[4], ncleanup;

static void note_cleanup(void *arg)
{
	cleanup_log[ncleanup++] = (int)(long)arg;
}

static int deep_exit(volatile int depth)
{
	if (depth < 0)
		return 0;
	if (depth == 0)
		pthread_exit((void *)77);
	return deep_exit(depth - 1) + 1;
}

static void *exiter(void *arg)
{
	(void)arg;
	pthread_cleanup_push(note_cleanup, (void *)1);
	pthread_cleanup_push(note_cleanup, (void *)2);
	pthread_cleanup_push(note_cleanup, (void *)3);
	pthread_cleanup_pop(1); /* runs 3 now */
	usleep(1000);           /* may come back on another OS thread */
	deep_exit(10);
	pthread_cleanup_pop(0);
	pthread_cleanup_pop(0);
	return NULL;
}

static void case_exit(void)
{
	pthread_t t;
	void *r;
	create(&t, exiter, NULL);
	join(t, &r);
	CHECK(r == (void *)77);
	CHECK_EQ(ncleanup, 3);
	CHECK_EQ(cleanup_log[0], 3);
	CHECK_EQ(cleanup_log[1], 2);
	CHECK_EQ(cleanup_log[2], 1);
}

/* main calls pthread_exit: the others finish, then the process exits 0 */
static void *late_writer(void *arg)
{
	(void)arg;
	usleep(100000);
	printf("ok main_exit\n");
	fflush(stdout);
	return NULL;
}

static void case_main_exit(void)
{
	pthread_t t;
	create(&t, late_writer, NULL);
	pthread_exit(NULL);
}

/* ---- once, keys ---------------------------------------------------------------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int once_runs, once_done;

static void once_init(void)
{
	usleep(20000); /* the others must wait for this */
	atomic_fetch_add(&once_runs, 1);
	atomic_store(&once_done, 1);
}

static void *once_user(void *arg)
{
	(void)arg;
	CHECK_EQ(pthread_once(&once, once_init), 0);
	CHECK(atomic_load(&once_done));
	return NULL;
}

static void case_once(void)
{
	pthread_t t[100];
	for (int i = 0; i < 100; i++)
		create(&t[i], once_user, NULL);
	for (int i = 0; i < 100; i++)
		join(t[i], NULL);
	CHECK_EQ(atomic_load(&once_runs), 1);
}

static pthread_key_t key, key2;
static atomic_long dtor_sum, dtor_calls;

static void key_dtor(void *v)
{
	atomic_fetch_add(&dtor_sum, (long)v);
	atomic_fetch_add(&dtor_calls, 1);
}

/* a destructor that sets a value again: run again, as glibc does */
static void key2_dtor(void *v)
{
	if ((long)v < 3)
		pthread_setspecific(key2, (void *)((long)v + 1));
	atomic_fetch_add(&dtor_calls, 100);
}

static void *key_user(void *arg)
{
	CHECK(pthread_getspecific(key) == NULL);
	CHECK_EQ(pthread_setspecific(key, arg), 0);
	for (int i = 0; i < 10; i++) {
		usleep(100); /* migrate */
		CHECK(pthread_getspecific(key) == arg);
	}
	CHECK(pthread_getspecific(ctor_key) == NULL);
	return NULL;
}

static void *key2_user(void *arg)
{
	(void)arg;
	pthread_setspecific(key2, (void *)1);
	return NULL;
}

static void case_keys(void)
{
	/* what a constructor set on the main thread is main's */
	CHECK(pthread_getspecific(ctor_key) == &ctor_value);
	CHECK_EQ(pthread_key_create(&key, key_dtor), 0);
	CHECK_EQ(pthread_setspecific(key, (void *)1000), 0);
	pthread_t t[50];
	long want = 0;
	for (long i = 0; i < 50; i++) {
		create(&t[i], key_user, (void *)(i + 1));
		want += i + 1;
	}
	for (int i = 0; i < 50; i++)
		join(t[i], NULL);
	CHECK_EQ(atomic_load(&dtor_sum), want);
	CHECK_EQ(atomic_load(&dtor_calls), 50);
	CHECK(pthread_getspecific(key) == (void *)1000);
	atomic_store(&dtor_calls, 0);
	CHECK_EQ(pthread_key_create(&key2, key2_dtor), 0);
	pthread_t u;
	create(&u, key2_user, NULL);
	join(u, NULL);
	CHECK_EQ(atomic_load(&dtor_calls), 300);
	/* a deleted key reads as unset, even if its number comes back */
	CHECK_EQ(pthread_key_delete(key), 0);
	pthread_key_t k3;
	CHECK_EQ(pthread_key_create(&k3, NULL), 0);
	CHECK(pthread_getspecific(k3) == NULL);
	CHECK_EQ(pthread_key_delete(k3), 0);
	CHECK_EQ(pthread_key_delete(key2), 0);
}

/* ---- names, attributes ------------------------------------------------------------ */

static void *namer(void *arg)
{
	(void)arg;
	char buf[32];
	CHECK_EQ(pthread_setname_np(pthread_self(), "worker-7"), 0);
	usleep(100);
	CHECK_EQ(pthread_getname_np(pthread_self(), buf, sizeof buf), 0);
	CHECK(!strcmp(buf, "worker-7"));
	return NULL;
}

static void case_names(void)
{
	pthread_t t;
	create(&t, namer, NULL);
	join(t, NULL);
	char buf[32];
	CHECK_EQ(pthread_setname_np(pthread_self(), "0123456789abcdefg"), ERANGE);
	CHECK_EQ(pthread_setname_np(pthread_self(), "main-thread"), 0);
	CHECK_EQ(pthread_getname_np(pthread_self(), buf, 4), ERANGE);
	CHECK_EQ(pthread_getname_np(pthread_self(), buf, sizeof buf), 0);
	CHECK(!strcmp(buf, "main-thread"));
}

/* Recurse depth frames of ~1 KiB; the lowest address reached. */
static uintptr_t stack_probe(int depth, uintptr_t lowest)
{
	volatile char pad[1024];
	pad[0] = (char)depth;
	uintptr_t here = (uintptr_t)pad;
	if (here < lowest)
		lowest = here;
	if (depth == 0)
		return lowest;
	return stack_probe(depth - 1, lowest) + (uintptr_t)(pad[0] & 0);
}

static void *attr_user(void *arg)
{
	size_t want = (size_t)arg;
	pthread_attr_t a;
	CHECK_EQ(pthread_getattr_np(pthread_self(), &a), 0);
	void *lo;
	size_t sz;
	CHECK_EQ(pthread_attr_getstack(&a, &lo, &sz), 0);
	int ds;
	CHECK_EQ(pthread_attr_getdetachstate(&a, &ds), 0);
	CHECK_EQ(ds, PTHREAD_CREATE_JOINABLE);
	pthread_attr_destroy(&a);
	char here;
	CHECK((char *)lo < &here && &here < (char *)lo + sz);
	CHECK(sz >= want);
	/* use most of it: 3/4 of the requested size in 1 KiB frames */
	uintptr_t lowest = stack_probe((int)(want * 3 / 4 / 1100), (uintptr_t)&here);
	CHECK(lowest >= (uintptr_t)lo);
	return NULL;
}

static void case_attr(void)
{
	size_t sizes[] = { 64 * 1024, 1 << 20, 8 << 20 };
	for (int i = 0; i < 3; i++) {
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, sizes[i]);
		pthread_t t;
		CHECK_EQ(pthread_create(&t, &a, attr_user, (void *)sizes[i]), 0);
		join(t, NULL);
		pthread_attr_destroy(&a);
	}
	/* main's stack: what RLIMIT_STACK gives a main thread */
	struct rlimit rl;
	getrlimit(RLIMIT_STACK, &rl);
	pthread_attr_t a;
	CHECK_EQ(pthread_getattr_np(pthread_self(), &a), 0);
	void *lo;
	size_t sz;
	CHECK_EQ(pthread_attr_getstack(&a, &lo, &sz), 0);
	pthread_attr_destroy(&a);
	if (rl.rlim_cur != RLIM_INFINITY)
		CHECK(sz + 4 * 4096 >= rl.rlim_cur);
	uintptr_t lowest = stack_probe(4096, (uintptr_t)&a); /* ~4.5 MiB deep */
	CHECK(lowest >= (uintptr_t)lo);
}

/* ---- mutexes ------------------------------------------------------------------------ */

static pthread_mutex_t counter_mu = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *incrementer(void *arg)
{
	long n = (long)arg;
	for (long i = 0; i < n; i++) {
		CHECK_EQ(pthread_mutex_lock(&counter_mu), 0);
		long c = counter;
		if (i % 64 == 0)
			sched_yield();
		counter = c + 1;
		CHECK_EQ(pthread_mutex_unlock(&counter_mu), 0);
	}
	return NULL;
}

static void case_mutex_contention(void)
{
	enum { N = 1000, EACH = 200 };
	pthread_t *t = calloc(N, sizeof *t);
	for (int i = 0; i < N; i++)
		create(&t[i], incrementer, (void *)(long)EACH);
	for (int i = 0; i < N; i++)
		join(t[i], NULL);
	CHECK_EQ(counter, (long)N * EACH);
	free(t);
}

/* 8 threads take one mutex 25 times each and hold it 1.5 ms, so every
 * waiter waits over 1 ms.  Prints how often the holder saw bit 2 of the
 * object's first word set: glibc's __lock (0, 1 or 2) never has it; under
 * weft it is the weft mutex's hand-off (starving) bit (hook/preload/
 * mutex.c keeps the weft state word at offset 0). */
static pthread_mutex_t hand = PTHREAD_MUTEX_INITIALIZER;
static _Atomic long handoffs;

static void *hand_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 25; i++) {
		pthread_mutex_lock(&hand);
		if (__atomic_load_n((int *)(void *)&hand, __ATOMIC_RELAXED) & 4)
			handoffs++;
		usleep(1500);
		pthread_mutex_unlock(&hand);
	}
	return NULL;
}

static void case_mutex_handoff(void)
{
	pthread_t t[8];
	for (int i = 0; i < 8; i++)
		create(&t[i], hand_thread, NULL);
	for (int i = 0; i < 8; i++)
		join(t[i], NULL);
	printf("handoffs=%ld\n", (long)handoffs);
}

static pthread_mutex_t rec = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t ec = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t plain = PTHREAD_MUTEX_INITIALIZER;

static void *other_side(void *arg)
{
	(void)arg;
	CHECK_EQ(pthread_mutex_trylock(&rec), EBUSY);
	CHECK_EQ(pthread_mutex_unlock(&rec), EPERM);
	CHECK_EQ(pthread_mutex_trylock(&ec), EBUSY);
	CHECK_EQ(pthread_mutex_unlock(&ec), EPERM);
	CHECK_EQ(pthread_mutex_trylock(&plain), EBUSY);
	return NULL;
}

static void case_mutex_kinds(void)
{
	CHECK_EQ(pthread_mutex_lock(&rec), 0);
	CHECK_EQ(pthread_mutex_lock(&rec), 0);
	CHECK_EQ(pthread_mutex_trylock(&rec), 0);
	CHECK_EQ(pthread_mutex_lock(&ec), 0);
	CHECK_EQ(pthread_mutex_lock(&ec), EDEADLK);
	CHECK_EQ(pthread_mutex_trylock(&ec), EBUSY);
	CHECK_EQ(pthread_mutex_lock(&plain), 0);
	usleep(1000);
	pthread_t t;
	create(&t, other_side, NULL);
	join(t, NULL);
	CHECK_EQ(pthread_mutex_unlock(&rec), 0);
	CHECK_EQ(pthread_mutex_unlock(&rec), 0);
	CHECK_EQ(pthread_mutex_unlock(&rec), 0);
	CHECK_EQ(pthread_mutex_unlock(&rec), EPERM);
	CHECK_EQ(pthread_mutex_unlock(&ec), 0);
	CHECK_EQ(pthread_mutex_unlock(&ec), EPERM);
	CHECK_EQ(pthread_mutex_destroy(&plain), EBUSY);
	CHECK_EQ(pthread_mutex_unlock(&plain), 0);
	CHECK_EQ(pthread_mutex_destroy(&plain), 0);

	/* initialised at run time, each kind */
	int kinds[] = { PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE, PTHREAD_MUTEX_ERRORCHECK,
			PTHREAD_MUTEX_DEFAULT };
	for (int i = 0; i < 4; i++) {
		pthread_mutexattr_t a;
		pthread_mutexattr_init(&a);
		pthread_mutexattr_settype(&a, kinds[i]);
		pthread_mutex_t m;
		memset(&m, 0xa5, sizeof m); /* init must not care what was there */
		CHECK_EQ(pthread_mutex_init(&m, &a), 0);
		pthread_mutexattr_destroy(&a);
		CHECK_EQ(pthread_mutex_lock(&m), 0);
		if (kinds[i] == PTHREAD_MUTEX_RECURSIVE) {
			CHECK_EQ(pthread_mutex_lock(&m), 0);
			CHECK_EQ(pthread_mutex_unlock(&m), 0);
		}
		if (kinds[i] == PTHREAD_MUTEX_ERRORCHECK)
			CHECK_EQ(pthread_mutex_lock(&m), EDEADLK);
		CHECK_EQ(pthread_mutex_trylock(&m), kinds[i] == PTHREAD_MUTEX_RECURSIVE ? 0 : EBUSY);
		if (kinds[i] == PTHREAD_MUTEX_RECURSIVE)
			CHECK_EQ(pthread_mutex_unlock(&m), 0);
		CHECK_EQ(pthread_mutex_unlock(&m), 0);
		CHECK_EQ(pthread_mutex_destroy(&m), 0);
	}
}

static pthread_mutex_t tmu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int tmu_held, tmu_release;

/* Holds tmu until told to let go (not for a fixed time: on a loaded
 * machine the waits below may start late). */
static void *hold_tmu(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&tmu);
	atomic_store(&tmu_held, 1);
	while (!atomic_load(&tmu_release))
		usleep(1000);
	pthread_mutex_unlock(&tmu);
	return NULL;
}

static void case_mutex_timed(void)
{
	pthread_t t;
	create(&t, hold_tmu, NULL);
	while (!atomic_load(&tmu_held))
		usleep(1000);
	int64_t t0 = now_ns();
	struct timespec ts = in_ms(CLOCK_REALTIME, 50);
	CHECK_EQ(pthread_mutex_timedlock(&tmu, &ts), ETIMEDOUT);
	int64_t waited = now_ns() - t0;
	CHECK(waited >= 45000000 && waited < 2000000000); /* never early; late only by load */
	ts = in_ms(CLOCK_MONOTONIC, 30);
	CHECK_EQ(pthread_mutex_clocklock(&tmu, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
	atomic_store(&tmu_release, 1);
	t0 = now_ns();
	ts = in_ms(CLOCK_REALTIME, 2000);
	CHECK_EQ(pthread_mutex_timedlock(&tmu, &ts), 0);
	CHECK(now_ns() - t0 < 1000000000);
	CHECK_EQ(pthread_mutex_unlock(&tmu), 0);
	join(t, NULL);
	ts.tv_nsec = -1;
	CHECK_EQ(pthread_mutex_timedlock(&tmu, &ts), 0); /* free: no check needed */
	CHECK_EQ(pthread_mutex_unlock(&tmu), 0);
}

/* ---- condition variables ---------------------------------------------------------------- */

#define QCAP 16
static struct {
	pthread_mutex_t mu;
	pthread_cond_t notempty, notfull;
	long buf[QCAP];
	int head, len;
} q = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, { 0 }, 0, 0 };

enum { PRODUCERS = 8, CONSUMERS = 8, ITEMS = 20000 };
static atomic_long consumed_sum;

static void *producer(void *arg)
{
	long base = (long)arg * ITEMS;
	for (long i = 1; i <= ITEMS; i++) {
		pthread_mutex_lock(&q.mu);
		while (q.len == QCAP)
			pthread_cond_wait(&q.notfull, &q.mu);
		q.buf[(q.head + q.len++) % QCAP] = base + i;
		pthread_cond_signal(&q.notempty);
		pthread_mutex_unlock(&q.mu);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	long sum = 0;
	for (int i = 0; i < PRODUCERS * ITEMS / CONSUMERS; i++) {
		pthread_mutex_lock(&q.mu);
		while (q.len == 0)
			pthread_cond_wait(&q.notempty, &q.mu);
		sum += q.buf[q.head];
		q.head = (q.head + 1) % QCAP;
		q.len--;
		pthread_cond_signal(&q.notfull);
		pthread_mutex_unlock(&q.mu);
	}
	atomic_fetch_add(&consumed_sum, sum);
	return NULL;
}

static void case_cond_pc(void)
{
	pthread_t p[PRODUCERS], c[CONSUMERS];
	for (long i = 0; i < CONSUMERS; i++)
		create(&c[i], consumer, NULL);
	for (long i = 0; i < PRODUCERS; i++)
		create(&p[i], producer, (void *)i);
	for (int i = 0; i < PRODUCERS; i++)
		join(p[i], NULL);
	for (int i = 0; i < CONSUMERS; i++)
		join(c[i], NULL);
	long want = 0;
	for (long i = 0; i < PRODUCERS; i++)
		want += ITEMS * (i * ITEMS) + (long)ITEMS * (ITEMS + 1) / 2;
	CHECK_EQ(atomic_load(&consumed_sum), want);
}

static pthread_mutex_t bmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bcv = PTHREAD_COND_INITIALIZER;
static int go_flag, waiting;

static void *bwaiter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&bmu);
	waiting++;
	while (!go_flag)
		pthread_cond_wait(&bcv, &bmu);
	waiting--;
	pthread_mutex_unlock(&bmu);
	return NULL;
}

static void case_cond_timed(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	pthread_mutex_lock(&m);
	int64_t t0 = now_ns();
	struct timespec ts = in_ms(CLOCK_REALTIME, 50);
	CHECK_EQ(pthread_cond_timedwait(&c, &m, &ts), ETIMEDOUT);
	CHECK(now_ns() - t0 >= 45000000);
	pthread_mutex_unlock(&m);
	CHECK_EQ(pthread_mutex_trylock(&m), 0); /* it was relocked and released */
	pthread_mutex_unlock(&m);

	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	CHECK_EQ(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), 0);
	pthread_cond_t mc;
	CHECK_EQ(pthread_cond_init(&mc, &ca), 0);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&m);
	t0 = now_ns();
	ts = in_ms(CLOCK_MONOTONIC, 40);
	CHECK_EQ(pthread_cond_timedwait(&mc, &m, &ts), ETIMEDOUT);
	int64_t w = now_ns() - t0;
	CHECK(w >= 35000000 && w < 1000000000);
	ts = in_ms(CLOCK_MONOTONIC, 20);
	CHECK_EQ(pthread_cond_clockwait(&mc, &m, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
	pthread_mutex_unlock(&m);
	CHECK_EQ(pthread_cond_destroy(&mc), 0);

	/* broadcast wakes them all */
	pthread_t t[100];
	for (int i = 0; i < 100; i++)
		create(&t[i], bwaiter, NULL);
	for (;;) {
		pthread_mutex_lock(&bmu);
		int n = waiting;
		pthread_mutex_unlock(&bmu);
		if (n == 100)
			break;
		usleep(1000);
	}
	pthread_mutex_lock(&bmu);
	go_flag = 1;
	pthread_cond_broadcast(&bcv);
	pthread_mutex_unlock(&bmu);
	for (int i = 0; i < 100; i++)
		join(t[i], NULL);
	CHECK_EQ(waiting, 0);

	/* with a recursive mutex held once */
	pthread_mutex_t rm = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
	pthread_mutex_lock(&rm);
	ts = in_ms(CLOCK_REALTIME, 10);
	CHECK_EQ(pthread_cond_timedwait(&c, &rm, &ts), ETIMEDOUT);
	CHECK_EQ(pthread_mutex_unlock(&rm), 0);
	CHECK_EQ(pthread_mutex_unlock(&rm), EPERM);
}

/* ---- rwlocks ---------------------------------------------------------------------------- */

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static atomic_int readers_in, writers_in;
static long shared_a, shared_b;

static void *rw_reader(void *arg)
{
	for (long i = 0; i < (long)arg; i++) {
		CHECK_EQ(pthread_rwlock_rdlock(&rw), 0);
		atomic_fetch_add(&readers_in, 1);
		CHECK_EQ(atomic_load(&writers_in), 0);
		CHECK_EQ(shared_a, shared_b);
		if (i % 16 == 0)
			usleep(10);
		atomic_fetch_sub(&readers_in, 1);
		CHECK_EQ(pthread_rwlock_unlock(&rw), 0);
	}
	return NULL;
}

static void *rw_writer(void *arg)
{
	for (long i = 0; i < (long)arg; i++) {
		CHECK_EQ(pthread_rwlock_wrlock(&rw), 0);
		CHECK_EQ(atomic_fetch_add(&writers_in, 1), 0);
		CHECK_EQ(atomic_load(&readers_in), 0);
		shared_a++;
		if (i % 8 == 0)
			usleep(10);
		shared_b++;
		atomic_fetch_sub(&writers_in, 1);
		CHECK_EQ(pthread_rwlock_unlock(&rw), 0);
	}
	return NULL;
}

static void *rw_try(void *arg)
{
	(void)arg;
	CHECK_EQ(pthread_rwlock_trywrlock(&rw), EBUSY);
	CHECK_EQ(pthread_rwlock_tryrdlock(&rw), 0);
	CHECK_EQ(pthread_rwlock_unlock(&rw), 0);
	struct timespec ts = in_ms(CLOCK_REALTIME, 30);
	CHECK_EQ(pthread_rwlock_timedwrlock(&rw, &ts), ETIMEDOUT);
	return NULL;
}

static void *rw_write_wait(void *arg)
{
	(void)arg;
	CHECK_EQ(pthread_rwlock_wrlock(&rw), 0);
	CHECK_EQ(pthread_rwlock_unlock(&rw), 0);
	return NULL;
}

static void case_rwlock(void)
{
	pthread_t r[40], w[4];
	for (int i = 0; i < 40; i++)
		create(&r[i], rw_reader, (void *)2000L);
	for (int i = 0; i < 4; i++)
		create(&w[i], rw_writer, (void *)1000L);
	for (int i = 0; i < 40; i++)
		join(r[i], NULL);
	for (int i = 0; i < 4; i++)
		join(w[i], NULL);
	CHECK_EQ(shared_a, 4000);
	CHECK_EQ(shared_b, 4000);

	CHECK_EQ(pthread_rwlock_rdlock(&rw), 0);
	pthread_t t;
	create(&t, rw_try, NULL);
	join(t, NULL);
	/* glibc's default prefers readers: a second read lock while a
	 * writer waits does not deadlock */
	create(&t, rw_write_wait, NULL);
	usleep(20000);
	CHECK_EQ(pthread_rwlock_rdlock(&rw), 0);
	CHECK_EQ(pthread_rwlock_unlock(&rw), 0);
	CHECK_EQ(pthread_rwlock_unlock(&rw), 0);
	join(t, NULL);
	CHECK_EQ(pthread_rwlock_wrlock(&rw), 0);
	CHECK_EQ(pthread_rwlock_wrlock(&rw), EDEADLK);
	CHECK_EQ(pthread_rwlock_rdlock(&rw), EDEADLK);
	CHECK_EQ(pthread_rwlock_unlock(&rw), 0);
	CHECK_EQ(pthread_rwlock_destroy(&rw), 0);

	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_t wl;
	CHECK_EQ(pthread_rwlock_init(&wl, &a), 0);
	pthread_rwlockattr_destroy(&a);
	CHECK_EQ(pthread_rwlock_rdlock(&wl), 0);
	CHECK_EQ(pthread_rwlock_unlock(&wl), 0);
	CHECK_EQ(pthread_rwlock_destroy(&wl), 0);
}

/* ---- barriers, spin locks, semaphores --------------------------------------------------------- */

static pthread_barrier_t bar;
static atomic_int serials, phase_count[10];

static void *bar_user(void *arg)
{
	(void)arg;
	for (int round = 0; round < 10; round++) {
		atomic_fetch_add(&phase_count[round], 1);
		int r = pthread_barrier_wait(&bar);
		CHECK(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD);
		if (r == PTHREAD_BARRIER_SERIAL_THREAD)
			atomic_fetch_add(&serials, 1);
		CHECK_EQ(atomic_load(&phase_count[round]), 32);
	}
	return NULL;
}

static void case_barrier(void)
{
	CHECK_EQ(pthread_barrier_init(&bar, NULL, 0), EINVAL);
	CHECK_EQ(pthread_barrier_init(&bar, NULL, 32), 0);
	pthread_t t[32];
	for (int i = 0; i < 32; i++)
		create(&t[i], bar_user, NULL);
	for (int i = 0; i < 32; i++)
		join(t[i], NULL);
	CHECK_EQ(atomic_load(&serials), 10);
	CHECK_EQ(pthread_barrier_destroy(&bar), 0);
}

static pthread_spinlock_t spin;
static long spin_count;

static void *spinner(void *arg)
{
	for (long i = 0; i < (long)arg; i++) {
		CHECK_EQ(pthread_spin_lock(&spin), 0);
		spin_count++;
		CHECK_EQ(pthread_spin_unlock(&spin), 0);
	}
	return NULL;
}

static void case_spin(void)
{
	CHECK_EQ(pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE), 0);
	pthread_t t[50];
	for (int i = 0; i < 50; i++)
		create(&t[i], spinner, (void *)2000L);
	for (int i = 0; i < 50; i++)
		join(t[i], NULL);
	CHECK_EQ(spin_count, 100000);
	CHECK_EQ(pthread_spin_lock(&spin), 0);
	CHECK_EQ(pthread_spin_trylock(&spin), EBUSY);
	CHECK_EQ(pthread_spin_unlock(&spin), 0);
	CHECK_EQ(pthread_spin_destroy(&spin), 0);
}

static sem_t items, slots;
static atomic_long sem_sum;

static void *sem_producer(void *arg)
{
	for (long i = 1; i <= (long)arg; i++) {
		CHECK_EQ(sem_wait(&slots), 0);
		atomic_fetch_add(&sem_sum, i);
		CHECK_EQ(sem_post(&items), 0);
	}
	return NULL;
}

static void *sem_consumer(void *arg)
{
	for (long i = 0; i < (long)arg; i++) {
		CHECK_EQ(sem_wait(&items), 0);
		CHECK_EQ(sem_post(&slots), 0);
	}
	return NULL;
}

static void case_sem(void)
{
	CHECK_EQ(sem_init(&items, 0, 0), 0);
	CHECK_EQ(sem_init(&slots, 0, 8), 0);
	pthread_t p[4], c[4];
	for (int i = 0; i < 4; i++) {
		create(&p[i], sem_producer, (void *)5000L);
		create(&c[i], sem_consumer, (void *)5000L);
	}
	for (int i = 0; i < 4; i++) {
		join(p[i], NULL);
		join(c[i], NULL);
	}
	CHECK_EQ(atomic_load(&sem_sum), 4L * 5000 * 5001 / 2);
	int v;
	CHECK_EQ(sem_getvalue(&slots, &v), 0);
	CHECK_EQ(v, 8);
	CHECK_EQ(sem_getvalue(&items, &v), 0);
	CHECK_EQ(v, 0);
	CHECK_EQ(sem_trywait(&items), -1);
	CHECK_EQ(errno_now(), EAGAIN);
	int64_t t0 = now_ns();
	struct timespec ts = in_ms(CLOCK_REALTIME, 40);
	CHECK_EQ(sem_timedwait(&items, &ts), -1);
	CHECK_EQ(errno_now(), ETIMEDOUT);
	CHECK(now_ns() - t0 >= 35000000);
	ts = in_ms(CLOCK_MONOTONIC, 10);
	CHECK_EQ(sem_clockwait(&items, CLOCK_MONOTONIC, &ts), -1);
	CHECK_EQ(errno_now(), ETIMEDOUT);
	CHECK_EQ(sem_post(&items), 0);
	CHECK_EQ(sem_timedwait(&items, &ts), 0);
	CHECK_EQ(sem_destroy(&items), 0);
	CHECK_EQ(sem_destroy(&slots), 0);
	CHECK_EQ(sem_init(&items, 0, (unsigned)SEM_VALUE_MAX + 1u), -1);
	CHECK_EQ(errno_now(), EINVAL);
}

/* ---- one object, Gs and a real thread --------------------------------------------------------
 * A thread created with a stack of the caller's own is a real OS thread
 * even under the shim: it and the Gs share a mutex, a cond, a sem. */

static pthread_mutex_t mix_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mix_cv = PTHREAD_COND_INITIALIZER;
static sem_t mix_sem;
static long mix_count, mix_turn;

static void *mix_worker(void *arg)
{
	long id = (long)arg;
	for (int i = 0; i < 2000; i++) {
		pthread_mutex_lock(&mix_mu);
		mix_count++;
		pthread_mutex_unlock(&mix_mu);
	}
	/* take turns through the cond: 0, 1, 2, ... */
	for (int r = 0; r < 20; r++) {
		pthread_mutex_lock(&mix_mu);
		while (mix_turn % 5 != id)
			pthread_cond_wait(&mix_cv, &mix_mu);
		mix_turn++;
		pthread_cond_broadcast(&mix_cv);
		pthread_mutex_unlock(&mix_mu);
	}
	sem_post(&mix_sem);
	return NULL;
}

static void case_mixed(void)
{
	sem_init(&mix_sem, 0, 0);
	size_t ssz = 256 * 1024;
	void *stk = mmap(NULL, ssz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(stk != MAP_FAILED);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstack(&a, stk, ssz);
	pthread_t t[5];
	CHECK_EQ(pthread_create(&t[0], &a, mix_worker, (void *)0L), 0);
	pthread_attr_destroy(&a);
	for (long i = 1; i < 5; i++)
		create(&t[i], mix_worker, (void *)i);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(sem_wait(&mix_sem), 0);
	for (int i = 0; i < 5; i++)
		join(t[i], NULL);
	CHECK_EQ(mix_count, 10000);
	CHECK_EQ(mix_turn, 100);
}

/* ---- process-shared and robust: glibc's ---------------------------------------------------------- */

struct shm {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	sem_t sem;
	int flag;
	long count;
};

static void case_pshared(void)
{
	struct shm *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			     -1, 0);
	CHECK(s != MAP_FAILED);
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	CHECK_EQ(pthread_mutex_init(&s->mu, &ma), 0);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	CHECK_EQ(pthread_cond_init(&s->cv, &ca), 0);
	CHECK_EQ(sem_init(&s->sem, 1, 0), 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 10000; i++) {
			pthread_mutex_lock(&s->mu);
			s->count++;
			pthread_mutex_unlock(&s->mu);
		}
		pthread_mutex_lock(&s->mu);
		s->flag = 1;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
		sem_post(&s->sem);
		_exit(0);
	}
	for (int i = 0; i < 10000; i++) {
		pthread_mutex_lock(&s->mu);
		s->count++;
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_lock(&s->mu);
	while (!s->flag)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	CHECK_EQ(sem_wait(&s->sem), 0);
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(s->count, 20000);

	/* robust: the owner dies, the next locker hears EOWNERDEAD */
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_PRIVATE);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_t rm;
	CHECK_EQ(pthread_mutex_init(&rm, &ma), 0);
	pthread_mutexattr_destroy(&ma);
	CHECK_EQ(pthread_mutex_lock(&rm), 0);
	CHECK_EQ(pthread_mutex_unlock(&rm), 0);
	CHECK_EQ(pthread_mutex_destroy(&rm), 0);
}

/* ---- what a G cannot do, and how many OS threads ---------------------------------------------------- */

static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;
static int park_go, parked;

static void *parker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&park_mu);
	parked++;
	while (!park_go)
		pthread_cond_wait(&park_cv, &park_mu);
	pthread_mutex_unlock(&park_mu);
	return NULL;
}

/* Prints the OS thread count while 1000 threads wait on a cond. */
static void case_threads(void)
{
	pthread_t *t = calloc(1000, sizeof *t);
	for (int i = 0; i < 1000; i++)
		create(&t[i], parker, NULL);
	for (;;) {
		pthread_mutex_lock(&park_mu);
		int n = parked;
		pthread_mutex_unlock(&park_mu);
		if (n == 1000)
			break;
		usleep(1000);
	}
	printf("os_threads=%d\n", os_threads());
	pthread_mutex_lock(&park_mu);
	park_go = 1;
	pthread_cond_broadcast(&park_cv);
	pthread_mutex_unlock(&park_mu);
	for (int i = 0; i < 1000; i++)
		join(t[i], NULL);
	free(t);
}

static void *idle_thread(void *arg)
{
	(void)arg;
	usleep(50000);
	return NULL;
}

/* Prints pthread_kill's and pthread_cancel's answers. */
static void on_usr1(int sig)
{
	(void)sig;
}

static void case_cancel(void)
{
	signal(SIGUSR1, on_usr1);
	pthread_t t;
	create(&t, idle_thread, NULL);
	int k0 = pthread_kill(t, 0);
	int k = pthread_kill(t, SIGUSR1);
	int c = pthread_cancel(t);
	int c2 = pthread_cancel(t);
	join(t, NULL);
	printf("cancel=%s kill0=%d kill=%s cancel2=%s\n", c ? strerrorname_np(c) : "0", k0,
	       k ? strerrorname_np(k) : "0", c2 ? strerrorname_np(c2) : "0");
}

/* A call weft does not hook (a raw system call) blocks its OS thread;
 * the other threads keep running meanwhile (sysmon hands the processor
 * on).  The blocker reads a pipe with a raw read(2) that only the ticker
 * releases, after 50 ticks of a hooked sleep: if the blocked thread held
 * on to the processor, the ticker would never run and the case would
 * hang (the test's time bound).  An event, not a race with a clock: a
 * loaded machine only makes it slower. */
static atomic_int ticks, blocker_in;
static int unhooked_pipe[2];

static void *blocker(void *arg)
{
	(void)arg;
	char c;
	atomic_store(&blocker_in, 1);
	long n = syscall(SYS_read, unhooked_pipe[0], &c, 1);
	return (void *)(intptr_t)n;
}

static void *ticker(void *arg)
{
	(void)arg;
	while (atomic_load(&ticks) < 50) {
		atomic_fetch_add(&ticks, 1);
		usleep(1000);
	}
	syscall(SYS_write, unhooked_pipe[1], "x", 1);
	return NULL;
}

static void case_unhooked(void)
{
	pthread_t b, t;
	void *r;
	CHECK(pipe(unhooked_pipe) == 0);
	create(&b, blocker, NULL);
	while (!atomic_load(&blocker_in))
		usleep(1000);
	usleep(20000); /* most likely in its system call by now (either way right) */
	create(&t, ticker, NULL);
	join(b, &r);
	join(t, NULL);
	printf("ticks=%d read=%ld\n", atomic_load(&ticks), (long)(intptr_t)r);
	CHECK((intptr_t)r == 1);
}

/* Is weft underneath?  A test-only look (the program needs no weft). */
static void case_procs(void)
{
	int (*maxprocs)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "weft_maxprocs");
	if (maxprocs)
		printf("procs=%d\n", maxprocs(0));
	else
		printf("procs=none\n");
}

struct tcase {
	const char *name;
	void (*fn)(void);
};

static const struct tcase cases[] = {
	{ "create_join", case_create_join },
	{ "detach", case_detach },
	{ "self", case_self },
	{ "exit", case_exit },
	{ "main_exit", case_main_exit },
	{ "once", case_once },
	{ "keys", case_keys },
	{ "names", case_names },
	{ "attr", case_attr },
	{ "mutex_contention", case_mutex_contention },
	{ "mutex_kinds", case_mutex_kinds },
	{ "mutex_handoff", case_mutex_handoff },
	{ "mutex_timed", case_mutex_timed },
	{ "cond_pc", case_cond_pc },
	{ "cond_timed", case_cond_timed },
	{ "rwlock", case_rwlock },
	{ "barrier", case_barrier },
	{ "spin", case_spin },
	{ "sem", case_sem },
	{ "mixed", case_mixed },
	{ "pshared", case_pshared },
	{ "threads", case_threads },
	{ "cancel", case_cancel },
	{ "procs", case_procs },
	{ "unhooked", case_unhooked },
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: pthreads CASE|list\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (!strcmp(argv[1], "list")) {
			printf("%s\n", cases[i].name);
			continue;
		}
		if (strcmp(argv[1], cases[i].name))
			continue;
		cases[i].fn();
		printf("ok %s\n", cases[i].name);
		return 0;
	}
	if (!strcmp(argv[1], "list"))
		return 0;
	fprintf(stderr, "pthreads: no case %s\n", argv[1]);
	return 2;
}
