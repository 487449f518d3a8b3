/*
 * test_deadlock.c - "all green threads are asleep - deadlock!": reported
 * (exit status 2, with the dump) when nothing can ever run again, and
 * never when a G waits for something that can still happen: a plain
 * thread, a timer, a socket.  Each case runs in a forked child.
 */
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>

#include "check.h"

#define DEADLOCK_MSG "weft: fatal: all green threads are asleep - deadlock!"

static void expect_deadlock(struct child *c, const char *reason, const char *fn)
{
	cr_assert(WIFEXITED(c->status), "child did not exit (status %#x); stderr:\n%s", c->status,
		  c->err);
	cr_assert_eq(WEXITSTATUS(c->status), 2, "exit status %d; stderr:\n%s",
		     WEXITSTATUS(c->status), c->err);
	cr_assert(strstr(c->err, DEADLOCK_MSG), "no deadlock message; stderr:\n%s", c->err);
	if (reason)
		cr_assert(strstr(c->err, reason), "no \"%s\" in the dump:\n%s", reason, c->err);
	if (fn)
		cr_assert(strstr(c->err, fn), "no \"%s\" in the dump:\n%s", fn, c->err);
}

static void expect_clean_exit(struct child *c)
{
	cr_assert(WIFEXITED(c->status), "child did not exit (status %#x); stderr:\n%s", c->status,
		  c->err);
	cr_assert_eq(WEXITSTATUS(c->status), 0, "exit status %d; stderr:\n%s",
		     WEXITSTATUS(c->status), c->err);
	cr_assert(!strstr(c->err, "deadlock"), "false deadlock report:\n%s", c->err);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- real deadlocks ---------------------------------------------------- */

static weft_chan_t *dc;

static void forever_receiver(void *arg)
{
	(void)arg;
	int v;
	weft_chan_recv(dc, &v);
	NOTAIL();
}

static int chan_deadlock_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	dc = weft_chan_make(sizeof(int), 0);
	for (int i = 0; i < 3; i++)
		weft_go(forever_receiver, NULL);
	int v = 1;
	weft_chan_send(weft_chan_make(sizeof(int), 0), &v); /* nobody receives */
	return 0;
}

static int chan_deadlock(void)
{
	return weft_main(chan_deadlock_main, 0, NULL);
}

Test(deadlock, channels)
{
	struct child c;
	run_child(&c, NULL, chan_deadlock, 20);
	expect_deadlock(&c, "[chan receive]", "forever_receiver");
	cr_assert(strstr(c.err, "[chan send]"), "%s", c.err);
	cr_assert(strstr(c.err, "chan_deadlock_main"), "%s", c.err);
}

/* the classic: two Gs take two mutexes in opposite order */
static weft_mutex_t ma = WEFT_MUTEX_INIT, mb = WEFT_MUTEX_INIT;
static weft_wg_t both = WEFT_WG_INIT;

static void lock_ab(void *arg)
{
	(void)arg;
	weft_mutex_lock(&ma);
	weft_wg_done(&both);
	weft_wg_wait(&both);
	weft_mutex_lock(&mb);
	NOTAIL();
}

static void lock_ba(void *arg)
{
	(void)arg;
	weft_mutex_lock(&mb);
	weft_wg_done(&both);
	weft_wg_wait(&both);
	weft_mutex_lock(&ma);
	NOTAIL();
}

static int mutex_deadlock_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_wg_add(&both, 2);
	weft_go(lock_ab, NULL);
	weft_go(lock_ba, NULL);
	weft_select(NULL, 0, -1); /* select {} */
	return 0;
}

static int mutex_deadlock(void)
{
	return weft_main(mutex_deadlock_main, 0, NULL);
}

Test(deadlock, mutexes)
{
	struct child c;
	run_child(&c, NULL, mutex_deadlock, 20);
	expect_deadlock(&c, "[mutex]", "lock_ab");
	cr_assert(strstr(c.err, "lock_ba"), "%s", c.err);
	cr_assert(strstr(c.err, "[select (no cases)]"), "%s", c.err);
}

static weft_mutex_t cm = WEFT_MUTEX_INIT;
static weft_cond_t cv = WEFT_COND_INIT;
static weft_sem_t sem = WEFT_SEM_INIT(0);
static weft_rwlock_t rw = WEFT_RWLOCK_INIT;

static void cond_waiter(void *arg)
{
	(void)arg;
	weft_mutex_lock(&cm);
	weft_cond_wait(&cv, &cm);
	NOTAIL();
}

static void sem_waiter(void *arg)
{
	(void)arg;
	weft_sem_wait(&sem);
	NOTAIL();
}

static void reader_behind_writer(void *arg)
{
	(void)arg;
	weft_rwlock_rdlock(&rw);
	NOTAIL();
}

static int sync_deadlock_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_go(cond_waiter, NULL);
	weft_go(sem_waiter, NULL);
	weft_rwlock_wrlock(&rw);
	weft_go(reader_behind_writer, NULL);
	weft_wg_t wg = WEFT_WG_INIT;
	weft_wg_add(&wg, 1);
	weft_wg_wait(&wg); /* nobody calls done */
	return 0;
}

static int sync_deadlock(void)
{
	return weft_main(sync_deadlock_main, 0, NULL);
}

Test(deadlock, cond_sem_rwlock_waitgroup)
{
	struct child c;
	run_child(&c, NULL, sync_deadlock, 20);
	expect_deadlock(&c, "[cond wait]", "cond_waiter");
	cr_assert(strstr(c.err, "[semaphore]"), "%s", c.err);
	cr_assert(strstr(c.err, "[rwlock read]"), "%s", c.err);
	cr_assert(strstr(c.err, "[wait group]"), "%s", c.err);
}

/* A plain thread blocked on a channel cannot wake anyone either: the
 * check runs when the thread blocks after the Gs went to sleep. */
static weft_chan_t *pc1, *pc2;

static void g_waits_for_thread(void *arg)
{
	(void)arg;
	weft_chan_recv(pc1, NULL);
	NOTAIL();
}

static int thread_and_g_deadlock(void)
{
	pc1 = weft_chan_make(0, 0);
	pc2 = weft_chan_make(0, 0);
	weft_go(g_waits_for_thread, NULL);
	sleep_ms(50); /* the G parks and every M goes idle first */
	weft_chan_recv(pc2, NULL); /* this thread blocks for good too */
	return 0;
}

Test(deadlock, plain_thread_blocked_too)
{
	struct child c;
	run_child(&c, NULL, thread_and_g_deadlock, 20);
	expect_deadlock(&c, "[chan receive]", "g_waits_for_thread");
}

/* ---- not deadlocks ------------------------------------------------------- */

/* A G waits for a plain thread that is busy (sleeping in nanosleep). */
static weft_chan_t *tc;

static void *late_sender(void *arg)
{
	(void)arg;
	sleep_ms(300);
	weft_chan_send(tc, NULL);
	return NULL;
}

static int waits_for_thread_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	tc = weft_chan_make(0, 0);
	pthread_t t;
	pthread_create(&t, NULL, late_sender, NULL);
	weft_chan_recv(tc, NULL);
	pthread_join(t, NULL);
	return 0;
}

static int waits_for_thread(void)
{
	return weft_main(waits_for_thread_main, 0, NULL);
}

Test(not_deadlock, g_waits_for_plain_thread)
{
	struct child c;
	run_child(&c, NULL, waits_for_thread, 20);
	expect_clean_exit(&c);
}

/* A thread computing (never blocking) before it sends. */
static void *busy_sender(void *arg)
{
	(void)arg;
	int64_t end = now_ns() + 300 * 1000 * 1000;
	while (now_ns() < end)
		;
	weft_chan_send(tc, NULL);
	return NULL;
}

static int waits_for_busy_thread_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	tc = weft_chan_make(0, 0);
	pthread_t t;
	pthread_create(&t, NULL, busy_sender, NULL);
	weft_chan_recv(tc, NULL);
	pthread_join(t, NULL);
	return 0;
}

static int waits_for_busy_thread(void)
{
	return weft_main(waits_for_busy_thread_main, 0, NULL);
}

Test(not_deadlock, g_waits_for_busy_thread)
{
	struct child c;
	run_child(&c, NULL, waits_for_busy_thread, 20);
	expect_clean_exit(&c);
}

/* A thread that waits with a timeout will wake and then send. */
static void *timed_then_send(void *arg)
{
	(void)arg;
	weft_chan_t *never = weft_chan_make(0, 0);
	weft_case_t cs = { never, WEFT_RECV, NULL, 0 };
	weft_select(&cs, 1, 300 * 1000 * 1000); /* times out */
	weft_chan_send(tc, NULL);
	return NULL;
}

static int waits_for_timed_thread_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	tc = weft_chan_make(0, 0);
	pthread_t t;
	pthread_create(&t, NULL, timed_then_send, NULL);
	weft_chan_recv(tc, NULL);
	pthread_join(t, NULL);
	return 0;
}

static int waits_for_timed_thread(void)
{
	return weft_main(waits_for_timed_thread_main, 0, NULL);
}

Test(not_deadlock, g_waits_for_thread_with_timeout)
{
	struct child c;
	run_child(&c, NULL, waits_for_timed_thread, 20);
	expect_clean_exit(&c);
}

/* Gs wait for one that sleeps (a timer), and for a select timeout. */
static void sleeper_sends(void *arg)
{
	(void)arg;
	weft_sleep(300 * 1000 * 1000);
	weft_chan_send(tc, NULL);
}

static void timeout_then_close(void *arg)
{
	weft_chan_t *done = arg;
	weft_chan_t *never = weft_chan_make(0, 0);
	weft_case_t cs = { never, WEFT_RECV, NULL, 0 };
	weft_select(&cs, 1, 200 * 1000 * 1000);
	weft_chan_close(done);
}

static int waits_for_timer_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	tc = weft_chan_make(0, 0);
	weft_chan_t *done = weft_chan_make(0, 0);
	weft_go(sleeper_sends, NULL);
	weft_go(timeout_then_close, done);
	weft_chan_recv(done, NULL);
	weft_chan_recv(tc, NULL);
	return 0;
}

static int waits_for_timer(void)
{
	return weft_main(waits_for_timer_main, 0, NULL);
}

Test(not_deadlock, gs_wait_for_timers)
{
	struct child c;
	run_child(&c, NULL, waits_for_timer, 20);
	expect_clean_exit(&c);
}

/* A G reads a socket whose other end another process writes later. */
static int sock[2];

static void socket_reader(void *arg)
{
	char b;
	ssize_t r = read(sock[0], &b, 1);
	weft_chan_send(arg, &(int){ r == 1 && b == 'x' });
}

static int waits_for_socket_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_chan_t *res = weft_chan_make(sizeof(int), 0);
	weft_go(socket_reader, res);
	int ok = 0;
	weft_chan_recv(res, &ok);
	return ok ? 0 : 1;
}

static int waits_for_socket(void)
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sock) != 0)
		return 3;
	pid_t pid = fork(); /* before the runtime starts: no threads yet */
	if (pid == 0) {
		sleep_ms(300);
		ssize_t w = write(sock[1], "x", 1);
		_exit(w == 1 ? 0 : 1);
	}
	int r = weft_main(waits_for_socket_main, 0, NULL);
	waitpid(pid, NULL, 0);
	return r;
}

Test(not_deadlock, g_waits_for_socket)
{
	struct child c;
	run_child(&c, NULL, waits_for_socket, 20);
	expect_clean_exit(&c);
}

/* Nothing runs, but a plain thread still can: the runtime is idle
 * while main() computes, then main() sends to a parked G. */
static void parked_until_main_sends(void *arg)
{
	(void)arg;
	weft_chan_recv(tc, NULL);
	weft_chan_close(tc);
}

static int main_thread_busy(void)
{
	tc = weft_chan_make(0, 0);
	weft_go(parked_until_main_sends, NULL);
	int64_t end = now_ns() + 300 * 1000 * 1000;
	while (now_ns() < end)
		;
	weft_chan_send(tc, NULL);
	return weft_chan_recv(tc, NULL) == 0 ? 0 : 1; /* closed by the G */
}

Test(not_deadlock, main_thread_outside_the_runtime)
{
	struct child c;
	run_child(&c, NULL, main_thread_busy, 20);
	expect_clean_exit(&c);
}
