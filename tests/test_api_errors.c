/*
 * test_api_errors.c - bad input to the public API (include/weft.h) is an
 * error, never a crash: one test per row of the table in docs/api.md
 * ("Bad input").  Each body runs twice, on the test's plain thread and
 * then as a G, since every call works from both.  What Go makes a panic
 * (a negative wait group counter) is "weft: fatal: ..." in a child.
 */
#include "check.h"

#include <pthread.h>
#include <stdint.h>

/* Run body on this plain thread, then as the main G. */
#define API_TEST(name)                                         \
	static int name##_body(int argc, char **argv);         \
	Test(api_errors, name, .timeout = 60)                  \
	{                                                      \
		name##_body(0, NULL);                          \
		run_main(name##_body);                         \
	}                                                      \
	static int name##_body(int argc, char **argv)

/* Expect -1 with errno e. */
#define FAILS(call, e) CHECK((call) == -1 && err() == (e))

static void nothing(void *arg)
{
	(void)arg;
}

static int once_runs;
static void once_fn(void)
{
	once_runs++;
}

/* ---- green threads ------------------------------------------------------ */

API_TEST(go_null_fn)
{
	(void)argc, (void)argv;
	FAILS(weft_go(NULL, NULL), EINVAL);
	FAILS(weft_go_attr(NULL, NULL, NULL), EINVAL);
	return 0;
}

API_TEST(go_attr_bad_stack)
{
	(void)argc, (void)argv;
	weft_attr_t a = { .stack_size = 1000 };
	FAILS(weft_go_attr(&a, nothing, NULL), EINVAL);
	a.stack_size = (size_t)1 << 40;
	FAILS(weft_go_attr(&a, nothing, NULL), EINVAL);
	a = (weft_attr_t){ .stack_kind = 7 };
	FAILS(weft_go_attr(&a, nothing, NULL), EINVAL);
	a.stack_kind = -1;
	FAILS(weft_go_attr(&a, nothing, NULL), EINVAL);
	return 0;
}

Test(api_errors, main_null_fn)
{
	FAILS(weft_main(NULL, 0, NULL), EINVAL);
	cr_assert_eq(check_failures, 0);
}

API_TEST(sleep_negative)
{
	(void)argc, (void)argv;
	FAILS(weft_sleep(-1), EINVAL);
	FAILS(weft_sleep(INT64_MIN), EINVAL);
	return 0;
}

API_TEST(maxprocs_out_of_range)
{
	(void)argc, (void)argv;
	FAILS(weft_maxprocs(-1), EINVAL);
	FAILS(weft_maxprocs(1025), EINVAL);
	CHECK(weft_maxprocs(0) >= 1);
	return 0;
}

API_TEST(unpaired_thread_and_blocking_calls)
{
	(void)argc, (void)argv;
	weft_unlock_thread(); /* no lock to undo: no effect */
	weft_blocking_exit(); /* no enter: no effect */
	CHECK(weft_sleep(1000) == 0); /* and the caller goes on */
	return 0;
}

API_TEST(stats_null)
{
	(void)argc, (void)argv;
	FAILS(weft_stats(NULL), EINVAL);
	return 0;
}

/* weft_stats_sized: a size below the first version's is EINVAL and
 * nothing is written; a size beyond this library's struct (a program
 * built with a later header) gets the fields it knows and zeros after. */
API_TEST(stats_sized_bad_size)
{
	(void)argc, (void)argv;
	struct {
		weft_stats_t st;
		unsigned char later[24]; /* fields of a later version */
	} x;
	memset(&x, 0xa5, sizeof x);
	FAILS(weft_stats_sized(&x.st, 63), EINVAL);
	FAILS(weft_stats_sized(&x.st, 0), EINVAL);
	FAILS(weft_stats_sized(NULL, sizeof x.st), EINVAL);
	CHECK(x.st.procs == (int)0xa5a5a5a5); /* untouched */
	CHECK(weft_stats_sized(&x.st, sizeof x) == 0);
	CHECK(x.st.procs >= 1 && x.st.threads >= 1);
	CHECK(x.st.sysmon_wakeups >= 0 && x.st.sysmon_wakeups != (int64_t)0xa5a5a5a5a5a5a5a5);
	for (size_t i = 0; i < sizeof x.later; i++)
		CHECK(x.later[i] == 0);
	/* the header's weft_stats passes this struct's size: the last
	 * field is written, nothing after it */
	memset(&x, 0xa5, sizeof x);
	CHECK(weft_stats(&x.st) == 0);
	CHECK(x.st.sysmon_wakeups != (int64_t)0xa5a5a5a5a5a5a5a5);
	CHECK(x.st.thread_state_reads != (int64_t)0xa5a5a5a5a5a5a5a5);
	for (size_t i = 0; i < sizeof x.later; i++)
		CHECK(x.later[i] == 0xa5);
	return 0;
}

/* ---- wait group ------------------------------------------------------------ */

API_TEST(wg_null)
{
	(void)argc, (void)argv;
	errno = 0;
	weft_wg_add(NULL, 1);
	CHECK(err() == EINVAL);
	errno = 0;
	weft_wg_done(NULL);
	CHECK(err() == EINVAL);
	errno = 0;
	weft_wg_wait(NULL); /* returns, does not park */
	CHECK(err() == EINVAL);
	return 0;
}

static int wg_negative_child(void)
{
	weft_wg_t wg = WEFT_WG_INIT;
	weft_wg_add(&wg, 1);
	weft_wg_done(&wg);
	weft_wg_done(&wg); /* below zero */
	return 0;
}

Test(api_errors, wg_negative_counter_is_fatal, .timeout = 60)
{
	static struct child c;
	run_child(&c, NULL, wg_negative_child, 30);
	cr_assert(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT, "status %#x, stderr: %s",
		  c.status, c.err);
	cr_assert(strstr(c.err, "weft: fatal: negative wait group counter"), "stderr: %s", c.err);
}

static int wg_delta_child(void)
{
	weft_wg_t wg = WEFT_WG_INIT;
	weft_wg_add(&wg, (int64_t)1 << 40);
	return 0;
}

Test(api_errors, wg_delta_out_of_range_is_fatal, .timeout = 60)
{
	static struct child c;
	run_child(&c, NULL, wg_delta_child, 30);
	cr_assert(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT, "status %#x, stderr: %s",
		  c.status, c.err);
	cr_assert(strstr(c.err, "weft: fatal: weft_wg_add: delta"), "stderr: %s", c.err);
}

/* ---- channels --------------------------------------------------------------- */

API_TEST(chan_make_overflow)
{
	(void)argc, (void)argv;
	errno = 0;
	CHECK(weft_chan_make(SIZE_MAX, 1) == NULL && err() == EINVAL);
	CHECK(weft_chan_make(8, SIZE_MAX / 4) == NULL && err() == EINVAL);
	return 0;
}

API_TEST(chan_null)
{
	(void)argc, (void)argv;
	int v = 0;
	FAILS(weft_chan_send(NULL, &v), EINVAL);
	FAILS(weft_chan_recv(NULL, &v), EINVAL);
	FAILS(weft_chan_trysend(NULL, &v), EINVAL);
	FAILS(weft_chan_tryrecv(NULL, &v), EINVAL);
	FAILS(weft_chan_close(NULL), EINVAL);
	CHECK(weft_chan_len(NULL) == 0 && weft_chan_cap(NULL) == 0);
	weft_chan_free(NULL);
	return 0;
}

API_TEST(chan_send_null_elem)
{
	(void)argc, (void)argv;
	weft_chan_t *c = weft_chan_make(sizeof(int), 1);
	weft_chan_t *u = weft_chan_make(sizeof(int), 0);
	FAILS(weft_chan_send(c, NULL), EINVAL);
	FAILS(weft_chan_trysend(c, NULL), EINVAL);
	FAILS(weft_chan_send(u, NULL), EINVAL);
	weft_case_t cs = { c, WEFT_SEND, NULL, 0 };
	FAILS(weft_select(&cs, 1, 0), EINVAL);
	CHECK(weft_chan_len(c) == 0);
	/* elem_size 0: NULL is fine */
	weft_chan_t *z = weft_chan_make(0, 1);
	CHECK(weft_chan_send(z, NULL) == 0);
	CHECK(weft_chan_recv(z, NULL) == 1);
	weft_chan_free(z);
	weft_chan_free(u);
	weft_chan_free(c);
	return 0;
}

API_TEST(chan_double_close)
{
	(void)argc, (void)argv;
	weft_chan_t *c = weft_chan_make(sizeof(int), 2);
	CHECK(weft_chan_close(c) == 0);
	FAILS(weft_chan_close(c), EPIPE);
	weft_chan_free(c);
	return 0;
}

API_TEST(chan_send_on_closed)
{
	(void)argc, (void)argv;
	for (size_t cap = 0; cap < 2; cap++) {
		weft_chan_t *c = weft_chan_make(sizeof(int), cap);
		int v = 7;
		CHECK(weft_chan_close(c) == 0);
		FAILS(weft_chan_send(c, &v), EPIPE);
		FAILS(weft_chan_trysend(c, &v), EPIPE);
		CHECK(weft_chan_recv(c, &v) == 0 && v == 0);
		CHECK(weft_chan_tryrecv(c, &v) == 0);
		weft_case_t cs = { c, WEFT_SEND, &v, 0 };
		CHECK(weft_select(&cs, 1, 0) == 0 && cs.ok == -1);
		weft_chan_free(c);
	}
	return 0;
}

API_TEST(chan_freed)
{
	(void)argc, (void)argv;
	weft_chan_t *c = weft_chan_make(sizeof(int), 4);
	weft_chan_free(c);
	/* the freed memory still says so (nothing was allocated since) */
	int v = 1;
	FAILS(weft_chan_send(c, &v), EINVAL);
	FAILS(weft_chan_recv(c, &v), EINVAL);
	FAILS(weft_chan_close(c), EINVAL);
	CHECK(weft_chan_len(c) == 0 && weft_chan_cap(c) == 0);
	weft_case_t cs = { c, WEFT_RECV, &v, 0 };
	FAILS(weft_select(&cs, 1, 0), EINVAL);
	errno = 0;
	weft_chan_free(c); /* freed twice: an error, not a corrupted heap */
	CHECK(err() == EINVAL);
	return 0;
}

API_TEST(chan_never_made)
{
	(void)argc, (void)argv;
	uint64_t junk[64] = { 0 }; /* not a channel */
	weft_chan_t *c = (weft_chan_t *)junk;
	int v = 1;
	FAILS(weft_chan_send(c, &v), EINVAL);
	FAILS(weft_chan_tryrecv(c, &v), EINVAL);
	FAILS(weft_chan_close(c), EINVAL);
	return 0;
}

API_TEST(select_bad_args)
{
	(void)argc, (void)argv;
	weft_chan_t *c = weft_chan_make(sizeof(int), 1);
	int v = 0;
	FAILS(weft_select(NULL, 2, 0), EINVAL);
	weft_case_t bad = { c, 3, &v, 0 };
	FAILS(weft_select(&bad, 1, 0), EINVAL);
	weft_case_t ok = { c, WEFT_RECV, &v, 0 };
	FAILS(weft_select(&ok, 65537, 0), EINVAL);
	FAILS(weft_select(&ok, 1, -2), EINVAL);
	/* a nil channel is not an error: it never fires */
	weft_case_t nil = { NULL, WEFT_RECV, &v, 0 };
	FAILS(weft_select(&nil, 1, 0), ETIMEDOUT);
	weft_chan_free(c);
	return 0;
}

/* ---- mutex ------------------------------------------------------------------ */

API_TEST(mutex_null)
{
	(void)argc, (void)argv;
	FAILS(weft_mutex_lock(NULL), EINVAL);
	FAILS(weft_mutex_trylock(NULL), EINVAL);
	FAILS(weft_mutex_unlock(NULL), EINVAL);
	return 0;
}

API_TEST(mutex_unlock_unlocked)
{
	(void)argc, (void)argv;
	weft_mutex_t m = WEFT_MUTEX_INIT;
	FAILS(weft_mutex_unlock(&m), EPERM);
	CHECK(weft_mutex_lock(&m) == 0);
	CHECK(weft_mutex_unlock(&m) == 0);
	FAILS(weft_mutex_unlock(&m), EPERM); /* twice */
	/* the state was left alone: it still works */
	CHECK(weft_mutex_trylock(&m) == 0);
	FAILS(weft_mutex_trylock(&m), EBUSY);
	CHECK(weft_mutex_unlock(&m) == 0);
	return 0;
}

/* ---- rwlock ------------------------------------------------------------------ */

API_TEST(rwlock_null)
{
	(void)argc, (void)argv;
	FAILS(weft_rwlock_rdlock(NULL), EINVAL);
	FAILS(weft_rwlock_tryrdlock(NULL), EINVAL);
	FAILS(weft_rwlock_rdunlock(NULL), EINVAL);
	FAILS(weft_rwlock_wrlock(NULL), EINVAL);
	FAILS(weft_rwlock_trywrlock(NULL), EINVAL);
	FAILS(weft_rwlock_wrunlock(NULL), EINVAL);
	return 0;
}

API_TEST(rwlock_unlock_not_held)
{
	(void)argc, (void)argv;
	weft_rwlock_t l = WEFT_RWLOCK_INIT;
	FAILS(weft_rwlock_rdunlock(&l), EPERM);
	FAILS(weft_rwlock_wrunlock(&l), EPERM);
	CHECK(weft_rwlock_rdlock(&l) == 0);
	FAILS(weft_rwlock_wrunlock(&l), EPERM); /* held, but not that way */
	CHECK(weft_rwlock_rdunlock(&l) == 0);
	CHECK(weft_rwlock_wrlock(&l) == 0);
	FAILS(weft_rwlock_rdunlock(&l), EPERM);
	CHECK(weft_rwlock_wrunlock(&l) == 0);
	/* left consistent */
	CHECK(weft_rwlock_trywrlock(&l) == 0);
	CHECK(weft_rwlock_wrunlock(&l) == 0);
	CHECK(weft_rwlock_tryrdlock(&l) == 0);
	CHECK(weft_rwlock_rdunlock(&l) == 0);
	return 0;
}

/* ---- cond --------------------------------------------------------------------- */

API_TEST(cond_null)
{
	(void)argc, (void)argv;
	weft_cond_t c = WEFT_COND_INIT;
	weft_mutex_t m = WEFT_MUTEX_INIT;
	CHECK(weft_mutex_lock(&m) == 0);
	FAILS(weft_cond_wait(NULL, &m), EINVAL);
	FAILS(weft_cond_wait(&c, NULL), EINVAL);
	FAILS(weft_cond_timedwait(NULL, &m, 1000), EINVAL);
	FAILS(weft_cond_timedwait(&c, NULL, 1000), EINVAL);
	FAILS(weft_cond_signal(NULL), EINVAL);
	FAILS(weft_cond_broadcast(NULL), EINVAL);
	CHECK(weft_mutex_unlock(&m) == 0); /* still held after the errors */
	return 0;
}

API_TEST(cond_wait_mutex_not_locked)
{
	(void)argc, (void)argv;
	weft_cond_t c = WEFT_COND_INIT;
	weft_mutex_t m = WEFT_MUTEX_INIT;
	FAILS(weft_cond_wait(&c, &m), EPERM);
	FAILS(weft_cond_timedwait(&c, &m, 1000), EPERM);
	CHECK(weft_mutex_lock(&m) == 0);
	FAILS(weft_cond_timedwait(&c, &m, -1), EINVAL);
	CHECK(weft_mutex_unlock(&m) == 0);
	return 0;
}

/* ---- semaphore ------------------------------------------------------------------ */

API_TEST(sem_null)
{
	(void)argc, (void)argv;
	FAILS(weft_sem_wait(NULL), EINVAL);
	FAILS(weft_sem_trywait(NULL), EINVAL);
	FAILS(weft_sem_timedwait(NULL, 1000), EINVAL);
	FAILS(weft_sem_post(NULL), EINVAL);
	errno = 0;
	CHECK(weft_sem_value(NULL) == 0 && err() == EINVAL);
	return 0;
}

API_TEST(sem_bad_values)
{
	(void)argc, (void)argv;
	weft_sem_t s = WEFT_SEM_INIT(UINT32_MAX);
	FAILS(weft_sem_post(&s), EOVERFLOW);
	CHECK(weft_sem_value(&s) == UINT32_MAX);
	FAILS(weft_sem_timedwait(&s, -1), EINVAL);
	return 0;
}

/* ---- once ------------------------------------------------------------------------- */

API_TEST(once_null)
{
	(void)argc, (void)argv;
	weft_once_t o = WEFT_ONCE_INIT;
	errno = 0;
	weft_once(NULL, once_fn);
	CHECK(err() == EINVAL);
	errno = 0;
	weft_once(&o, NULL);
	CHECK(err() == EINVAL);
	int before = once_runs;
	weft_once(&o, once_fn); /* the NULL call did not use it up */
	CHECK(once_runs == before + 1);
	return 0;
}
