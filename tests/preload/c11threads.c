/*
 * c11threads.c - C11 <threads.h>: threads, mutexes, conditions,
 * thread-specific storage, call_once, thrd_sleep.  Prints "ok c11" and
 * the number of OS threads while 500 threads wait.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>

#include "check.h"

static mtx_t mu;
static cnd_t cv;
static int waiting, go;
static long counter;
static tss_t key;
static atomic_int dtors, onces;
static once_flag once = ONCE_FLAG_INIT;

static void dtor(void *v)
{
	(void)v;
	atomic_fetch_add(&dtors, 1);
}

static void init_once(void)
{
	atomic_fetch_add(&onces, 1);
}

static int worker(void *arg)
{
	call_once(&once, init_once);
	CHECK(tss_set(key, arg) == thrd_success);
	CHECK(mtx_lock(&mu) == thrd_success);
	counter++;
	waiting++;
	while (!go)
		CHECK(cnd_wait(&cv, &mu) == thrd_success);
	CHECK(mtx_unlock(&mu) == thrd_success);
	struct timespec d = { 0, 1000000 };
	CHECK(thrd_sleep(&d, NULL) == 0);
	CHECK(tss_get(key) == arg);
	return (int)(long)arg;
}

int main(void)
{
	CHECK(mtx_init(&mu, mtx_plain | mtx_timed) == thrd_success);
	CHECK(cnd_init(&cv) == thrd_success);
	CHECK(tss_create(&key, dtor) == thrd_success);
	thrd_t t[500];
	for (long i = 0; i < 500; i++)
		CHECK(thrd_create(&t[i], worker, (void *)(i + 1)) == thrd_success);
	for (;;) {
		mtx_lock(&mu);
		int n = waiting;
		mtx_unlock(&mu);
		if (n == 500)
			break;
		thrd_yield();
	}
	printf("os_threads=%d\n", os_threads());
	mtx_lock(&mu);
	go = 1;
	cnd_broadcast(&cv);
	mtx_unlock(&mu);
	for (long i = 0; i < 500; i++) {
		int r;
		CHECK(thrd_join(t[i], &r) == thrd_success);
		CHECK(r == i + 1);
	}
	CHECK(counter == 500);
	CHECK(atomic_load(&onces) == 1);
	CHECK(atomic_load(&dtors) == 500);
	mtx_t rec;
	CHECK(mtx_init(&rec, mtx_recursive) == thrd_success);
	CHECK(mtx_lock(&rec) == thrd_success);
	CHECK(mtx_trylock(&rec) == thrd_success);
	CHECK(mtx_unlock(&rec) == thrd_success);
	CHECK(mtx_unlock(&rec) == thrd_success);
	struct timespec ts;
	timespec_get(&ts, TIME_UTC);
	ts.tv_nsec += 20000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	mtx_lock(&mu);
	CHECK(cnd_timedwait(&cv, &mu, &ts) == thrd_timedout);
	mtx_unlock(&mu);
	mtx_destroy(&rec);
	tss_delete(key);
	printf("ok c11\n");
	return 0;
}
