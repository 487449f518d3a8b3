/*
 * test_dump.c - weft_dump and SIGQUIT: every G with its state, its wait
 * reason and a symbolised backtrace naming its function, for parked Gs
 * (saved context) and running ones (signal context).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"

/* Each parks in a function of its own, and must not tail-call. */
static weft_chan_t *never, *never_s, *never_sel; /* nobody ever pairs with these */
static weft_mutex_t held = WEFT_MUTEX_INIT;
static weft_cond_t cond = WEFT_COND_INIT;
static weft_mutex_t condm = WEFT_MUTEX_INIT;
static weft_sem_t sem0 = WEFT_SEM_INIT(0);
static weft_rwlock_t wlocked = WEFT_RWLOCK_INIT;
static weft_wg_t parked_wg = WEFT_WG_INIT;
static _Atomic int spinning = 1; /* atomic: busy_loop reads it on another M */
static _Atomic int spun;          /* busy_loop has started */
static _Atomic int announced;     /* parkers about to park */

static void park_chan_recv(void *arg)
{
	(void)arg;
	atomic_fetch_add(&announced, 1);
	weft_chan_recv(never, NULL);
	NOTAIL();
}

static void park_chan_send(void *arg)
{
	(void)arg;
	atomic_fetch_add(&announced, 1);
	weft_chan_send(never_s, NULL);
	NOTAIL();
}

static void park_select(void *arg)
{
	(void)arg;
	atomic_fetch_add(&announced, 1);
	weft_case_t cs[2] = { { never_sel, WEFT_RECV, NULL, 0 }, { never_sel, WEFT_SEND, NULL, 0 } };
	weft_select(cs, 2, -1);
	NOTAIL();
}

static void park_mutex(void *arg)
{
	(void)arg;
	atomic_fetch_add(&announced, 1);
	weft_mutex_lock(&held);
	NOTAIL();
}

static void park_cond(void *arg)
{
	(void)arg;
	atomic_fetch_add(&announced, 1);
	weft_mutex_lock(&condm);
	weft_cond_wait(&cond, &condm);
	NOTAIL();
}

static void park_sem(void *arg)
{
	(void)arg;
	atomic_fetch_add(&announced, 1);
	weft_sem_wait(&sem0);
	NOTAIL();
}

static void park_rwlock(void *arg)
{
	(void)arg;
	atomic_fetch_add(&announced, 1);
	weft_rwlock_rdlock(&wlocked);
	NOTAIL();
}

static void park_sleep(void *arg)
{
	(void)arg;
	atomic_fetch_add(&announced, 1);
	weft_sleep(3600LL * 1000 * 1000 * 1000);
	NOTAIL();
}

static void park_waitgroup(void *arg)
{
	(void)arg;
	atomic_fetch_add(&announced, 1);
	weft_wg_wait(&parked_wg);
	NOTAIL();
}

/* Runs user code on its own M: caught by the dump's signal.  (Under TSan
 * too: TSan runs a signal's handler at the thread's next atomic
 * operation or intercepted call, and spinning is atomic.) */
static __attribute__((noinline)) void busy_loop(void *arg)
{
	(void)arg;
	atomic_store(&spun, 1);
	while (spinning)
		__asm__ volatile("pause");
}

struct parker {
	void (*fn)(void *);
	const char *name;   /* function name the dump must show */
	const char *reason; /* "[reason]" */
};

static const struct parker parkers[] = {
	{ park_chan_recv, "park_chan_recv", "[chan receive]" },
	{ park_chan_send, "park_chan_send", "[chan send]" },
	{ park_select, "park_select", "[select]" },
	{ park_mutex, "park_mutex", "[mutex]" },
	{ park_cond, "park_cond", "[cond wait]" },
	{ park_sem, "park_sem", "[semaphore]" },
	{ park_rwlock, "park_rwlock", "[rwlock read]" },
	{ park_sleep, "park_sleep", "[sleep]" },
	{ park_waitgroup, "park_waitgroup", "[wait group]" },
};
#define NPARKERS (sizeof parkers / sizeof parkers[0])

/* The G's header line, then its function before the next header. */
static bool shows(const char *dump, const char *reason, const char *fn)
{
	for (const char *p = dump; (p = strstr(p, reason)); p++) {
		const char *next = strstr(p, "green thread ");
		const char *f = strstr(p, fn);
		if (f && (!next || f < next))
			return true;
	}
	return false;
}

/* Wait until n parkers have parked: each announces itself just before
 * its parking call, and once all have, a P other than ours that is idle
 * with nothing queued anywhere means none is still on its way.  (Not by
 * dumping until they show: a dump racing Gs that switch is what TSan
 * cannot follow, tests/tools.mk.) */
static void await_parked(int n)
{
	for (;;) {
		weft_stats_t st;
		weft_stats(&st);
		if (atomic_load(&announced) >= n && st.idle_procs >= st.procs - 1 &&
		    st.global_runq == 0)
			return;
		weft_sleep(1000 * 1000);
	}
}

static void await_spun(void)
{
	while (!atomic_load(&spun))
		weft_sleep(1000 * 1000);
}

/* Start every parker and wait until all are parked. */
static void start_parkers(void)
{
	never = weft_chan_make(0, 0);
	never_s = weft_chan_make(0, 0);
	never_sel = weft_chan_make(0, 0);
	weft_mutex_lock(&held);
	weft_rwlock_wrlock(&wlocked);
	weft_wg_add(&parked_wg, 1);
	for (size_t i = 0; i < NPARKERS; i++)
		weft_go(parkers[i].fn, NULL);
	await_parked((int)NPARKERS);
}

static char *dumped;

static int dump_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(2);
	start_parkers();
	weft_attr_t a = { .name = "spinner" };
	weft_go_attr(&a, busy_loop, NULL);
	await_spun();
	size_t len;
	FILE *f = open_memstream(&dumped, &len);
	weft_dump(f);
	fclose(f);
	spinning = 0;
	return 0;
}

Test(dump, every_g_with_reason_and_function, .timeout = 60)
{
	run_main(dump_main);
	cr_assert_not_null(dumped);
	for (size_t i = 0; i < NPARKERS; i++)
		cr_assert(shows(dumped, parkers[i].reason, parkers[i].name),
			  "no %s in %s in the dump:\n%s", parkers[i].name, parkers[i].reason, dumped);
	/* the API call the G is parked in, and where */
	cr_assert(strstr(dumped, "weft_chan_recv()"), "%s", dumped);
	cr_assert(strstr(dumped, "test_dump.c:"), "no file:line in\n%s", dumped);
	/* the G asking, and one running on another M (signal context) */
	cr_assert(shows(dumped, "[running]:", "dump_main"), "%s", dumped);
	cr_assert(shows(dumped, "[running] spinner:", "busy_loop"), "%s", dumped);
	free(dumped);
}

/* ---- SIGQUIT -------------------------------------------------------------- */

/* SIGQUIT to the whole process, as from a terminal, while the caller
 * parks.  Under TSan, a plain thread raises it in itself 20 ms later: the
 * kernel gives a process-wide signal to the main thread, here asleep in a
 * raw futex call until the test ends, and TSan runs a handler only when
 * the thread next makes an atomic operation or an intercepted call; a
 * signal a thread sends itself it handles at once. */
static void *sigquit_later(void *arg)
{
	(void)arg;
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	raise(SIGQUIT);
	return NULL;
}

static void sigquit_self(void)
{
	if (!TEST_TSAN) {
		kill(getpid(), SIGQUIT);
		return;
	}
	pthread_t t;
	pthread_create(&t, NULL, sigquit_later, NULL);
	pthread_detach(t);
}

static int quit_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(2);
	start_parkers();
	weft_go(busy_loop, NULL);
	await_spun();
	sigquit_self();
	weft_sleep(5LL * 1000 * 1000 * 1000); /* the dump exits the process first */
	spinning = 0;
	return 0;
}

static int quit_child(void)
{
	signal(SIGQUIT, SIG_DFL); /* the test runner may have it ignored */
	printf("before\n");
	return weft_main(quit_main, 0, NULL);
}

Test(dump, sigquit_dumps_and_exits_2, .timeout = 60)
{
	struct child c;
	run_child(&c, NULL, quit_child, 30);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 2, "status %#x, stderr:\n%s",
		  c.status, c.err);
	cr_assert(strstr(c.err, "SIGQUIT: quit"), "%s", c.err);
	for (size_t i = 0; i < NPARKERS; i++)
		cr_assert(shows(c.err, parkers[i].reason, parkers[i].name),
			  "no %s in %s in the dump:\n%s", parkers[i].name, parkers[i].reason, c.err);
	cr_assert(shows(c.err, "[running]:", "busy_loop"), "%s", c.err);
	/* the dump may catch quit_main still in kill() or already asleep */
	cr_assert(shows(c.err, "[sleep]:", "quit_main") ||
			  shows(c.err, "[running]:", "sigquit_self"),
		  "%s", c.err);
}

/* The child's stderr is a file while it runs, so that it can see its
 * own dump arrive; copied to the real stderr at the end. */
static bool stderr_shows(const char *reason, const char *fn)
{
	static char buf[65536];
	ssize_t n = pread(2, buf, sizeof buf - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	return shows(buf, reason, fn);
}

static int quit_continue_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	never = weft_chan_make(0, 0);
	weft_go(park_chan_recv, NULL);
	await_parked(1);
	sigquit_self();
	/* the dump printed by the signal, then on as before */
	while (!stderr_shows("[chan receive]:", "park_chan_recv"))
		weft_sleep(1000 * 1000);
	printf("still here\n");
	return 0;
}

static int quit_continue_child(void)
{
	signal(SIGQUIT, SIG_DFL);
	FILE *tmp = tmpfile();
	int realerr = dup(2);
	if (!tmp || realerr < 0 || dup2(fileno(tmp), 2) < 0)
		return 90;
	int r = weft_main(quit_continue_main, 0, NULL);
	char buf[4096];
	ssize_t n;
	for (off_t off = 0; (n = pread(2, buf, sizeof buf, off)) > 0; off += n)
		if (write(realerr, buf, (size_t)n) != n)
			return 91;
	return r;
}

Test(dump, sigquit_continue_keeps_running, .timeout = 60)
{
	struct child c;
	char *env[] = { "WEFT_DEBUG=sigquit=continue", NULL };
	run_child(&c, env, quit_continue_child, 30);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "status %#x, stderr:\n%s",
		  c.status, c.err);
	cr_assert(shows(c.err, "[chan receive]:", "park_chan_recv"), "%s", c.err);
	cr_assert(strstr(c.out, "still here"), "stdout: %s", c.out);
}

/* A dump from a plain thread while Gs park and wake all the time: the
 * freeze must keep every backtrace consistent (no crash, all listed). */
static weft_chan_t *pp_a, *pp_b;
static _Atomic int churn = 1;

static void pinger(void *arg)
{
	(void)arg;
	while (churn) {
		weft_chan_send(pp_a, NULL);
		weft_chan_recv(pp_b, NULL);
	}
}

static void ponger(void *arg)
{
	(void)arg;
	for (;;) {
		weft_chan_recv(pp_a, NULL);
		weft_chan_send(pp_b, NULL);
	}
}

static void *dumper_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20; i++) {
		char *buf;
		size_t len;
		FILE *f = open_memstream(&buf, &len);
		weft_dump(f);
		fclose(f);
		CHECK(strstr(buf, "green thread ") != NULL);
		free(buf);
	}
	return NULL;
}

static int churn_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(2);
	pp_a = weft_chan_make(0, 0);
	pp_b = weft_chan_make(0, 0);
	for (int i = 0; i < 4; i++)
		weft_go(ponger, NULL);
	for (int i = 0; i < 4; i++)
		weft_go(pinger, NULL);
	pthread_t t;
	pthread_create(&t, NULL, dumper_thread, NULL);
	pthread_join(t, NULL);
	churn = 0;
	return 0;
}

Test(dump, while_gs_switch, .timeout = 60)
{
	run_main(churn_main);
}
