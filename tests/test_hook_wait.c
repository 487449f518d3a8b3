/*
 * test_hook_wait.c - waiting on many fds and on time from Gs: poll,
 * ppoll, select, pselect, epoll_wait across many fds with timeouts, and
 * the precision of every sleep call.
 */
#include "test_hook.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>


#define NPIPES 500

static int rd[NPIPES], wr[NPIPES];

static void make_pipes(void)
{
	for (int i = 0; i < NPIPES; i++) {
		int p[2];
		CHECK(pipe(p) == 0);
		rd[i] = p[0];
		wr[i] = p[1];
	}
}

static void close_pipes(void)
{
	for (int i = 0; i < NPIPES; i++) {
		close(rd[i]);
		close(wr[i]);
	}
}

static void poke_later(void *arg)
{
	weft_sleep(30 * 1000000);
	CHECK(write((int)(intptr_t)arg, "!", 1) == 1);
}

G_TEST(hook_wait, poll_many_fds, 30)
{
	(void)argc, (void)argv;
	make_pipes();
	static struct pollfd p[NPIPES];
	for (int i = 0; i < NPIPES; i++)
		p[i] = (struct pollfd){ rd[i], POLLIN, 0 };
	/* nothing ready: the timeout */
	int64_t t0 = now_ns();
	CHECK(poll(p, NPIPES, 100) == 0);
	int64_t ms = ms_since(t0);
	CHECK(ms >= 95 && ms < 3000 * test_slow());
	/* one fd becomes ready while parked */
	weft_go(poke_later, (void *)(intptr_t)wr[337]);
	t0 = now_ns();
	CHECK(poll(p, NPIPES, 5000) == 1);
	CHECK(ms_since(t0) < 3000 * test_slow());
	for (int i = 0; i < NPIPES; i++)
		CHECK(p[i].revents == (i == 337 ? POLLIN : 0));
	/* ready before the call: no wait at all */
	CHECK(poll(p, NPIPES, -1) == 1);
	char c;
	CHECK(read(rd[337], &c, 1) == 1);
	/* writable ends, POLLOUT */
	static struct pollfd q[NPIPES];
	for (int i = 0; i < NPIPES; i++)
		q[i] = (struct pollfd){ wr[i], POLLOUT, 0 };
	CHECK(poll(q, NPIPES, 1000) == NPIPES);
	/* a closed peer: POLLHUP; a bad fd: POLLNVAL */
	close(wr[5]);
	struct pollfd h[2] = { { rd[5], POLLIN, 0 }, { 100000, POLLIN, 0 } };
	CHECK(poll(h, 2, 1000) == 2);
	CHECK(h[0].revents & POLLHUP);
	CHECK(h[1].revents & POLLNVAL);
	wr[5] = -1;
	p[5].fd = -1; /* negative fds are ignored */
	/* ppoll: timespec timeout */
	struct timespec ts = { 0, 50 * 1000000 };
	t0 = now_ns();
	CHECK(ppoll(p, NPIPES, &ts, NULL) == 0);
	CHECK(ms_since(t0) >= 45);
	/* no fds at all: a sleep */
	t0 = now_ns();
	CHECK(poll(NULL, 0, 30) == 0);
	CHECK(ms_since(t0) >= 25);
	close_pipes();
	return 0;
}

/* A G parked in poll wakes with POLLNVAL when another G closes the fd. */
static void close_later(void *arg)
{
	weft_sleep(20 * 1000000);
	close((int)(intptr_t)arg);
}

G_TEST(hook_wait, poll_fd_closed_while_parked, 20)
{
	(void)argc, (void)argv;
	int p[2];
	CHECK(pipe(p) == 0);
	struct pollfd f = { p[0], POLLIN, 0 };
	weft_go(close_later, (void *)(intptr_t)p[0]);
	CHECK(poll(&f, 1, 5000) == 1);
	CHECK(f.revents & POLLNVAL);
	close(p[1]);
	return 0;
}

G_TEST(hook_wait, select_many_fds, 30)
{
	(void)argc, (void)argv;
	make_pipes();
	int maxfd = 0;
	fd_set set;
	FD_ZERO(&set);
	for (int i = 0; i < NPIPES; i++) {
		FD_SET(rd[i], &set);
		maxfd = rd[i] > maxfd ? rd[i] : maxfd;
	}
	fd_set s = set;
	struct timeval tv = { 0, 100 * 1000 };
	int64_t t0 = now_ns();
	CHECK(select(maxfd + 1, &s, NULL, NULL, &tv) == 0);
	int64_t ms = ms_since(t0);
	CHECK(ms >= 95 && ms < 3000 * test_slow());
	CHECK(tv.tv_sec == 0 && tv.tv_usec == 0); /* Linux reports the time left */
	for (int i = 0; i < NPIPES; i++)
		CHECK(!FD_ISSET(rd[i], &s));

	weft_go(poke_later, (void *)(intptr_t)wr[111]);
	s = set;
	tv = (struct timeval){ 5, 0 };
	CHECK(select(maxfd + 1, &s, NULL, NULL, &tv) == 1);
	CHECK(FD_ISSET(rd[111], &s));
	CHECK(tv.tv_sec < 5);
	char c;
	CHECK(read(rd[111], &c, 1) == 1);

	/* pselect, and write sets */
	fd_set w;
	FD_ZERO(&w);
	FD_SET(wr[0], &w);
	s = set;
	struct timespec ts = { 1, 0 };
	CHECK(pselect(maxfd + 1, &s, &w, NULL, &ts, NULL) == 1);
	CHECK(FD_ISSET(wr[0], &w));
	/* select with no fds: a sleep */
	tv = (struct timeval){ 0, 30 * 1000 };
	t0 = now_ns();
	CHECK(select(0, NULL, NULL, NULL, &tv) == 0);
	CHECK(ms_since(t0) >= 25);
	close_pipes();
	return 0;
}

G_TEST(hook_wait, epoll_wait_on_g, 30)
{
	(void)argc, (void)argv;
	make_pipes();
	int ep = epoll_create1(0);
	for (int i = 0; i < NPIPES; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, rd[i], &ev) == 0);
	}
	struct epoll_event evs[16];
	int64_t t0 = now_ns();
	CHECK(epoll_wait(ep, evs, 16, 100) == 0);
	CHECK(ms_since(t0) >= 95);
	weft_go(poke_later, (void *)(intptr_t)wr[42]);
	CHECK(epoll_wait(ep, evs, 16, 5000) == 1);
	CHECK(evs[0].data.u32 == 42);
	/* level-triggered: still ready, reported again at once */
	t0 = now_ns();
	CHECK(epoll_pwait(ep, evs, 16, -1, NULL) == 1);
	CHECK(ms_since(t0) < 1000 * test_slow());
	char c;
	CHECK(read(rd[42], &c, 1) == 1);
	struct timespec ts = { 0, 30 * 1000000 };
	CHECK(epoll_pwait2(ep, evs, 16, &ts, NULL) == 0);
	close(ep);
	close_pipes();
	return 0;
}

/* ---- sleep precision ----------------------------------------------------------- */

/* Sleeps at least ns, and not much more (a generous bound: a loaded
 * machine may run the woken G late). */
static void check_sleep(const char *what, int64_t ns, int64_t took)
{
	if (took < ns - 100000 || took > ns + 250 * 1000000LL * test_slow()) {
		fprintf(stderr, "%s: asked %lld ns, slept %lld ns\n", what, (long long)ns,
			(long long)took);
		CHECK(0);
	}
}

G_TEST(hook_wait, sleep_precision, 30)
{
	(void)argc, (void)argv;
	int64_t t0 = now_ns();
	CHECK(sleep(1) == 0);
	check_sleep("sleep", 1000000000, now_ns() - t0);

	t0 = now_ns();
	CHECK(usleep(20000) == 0);
	check_sleep("usleep", 20000000, now_ns() - t0);

	struct timespec ts = { 0, 5000000 }, rem = { 9, 9 };
	t0 = now_ns();
	CHECK(nanosleep(&ts, &rem) == 0);
	check_sleep("nanosleep", 5000000, now_ns() - t0);
	CHECK(rem.tv_sec == 0 && rem.tv_nsec == 0);

	t0 = now_ns();
	CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == 0);
	check_sleep("clock_nanosleep monotonic", 5000000, now_ns() - t0);

	t0 = now_ns();
	CHECK(clock_nanosleep(CLOCK_REALTIME, 0, &ts, NULL) == 0);
	check_sleep("clock_nanosleep realtime", 5000000, now_ns() - t0);

	struct timespec abs;
	clock_gettime(CLOCK_MONOTONIC, &abs);
	abs.tv_nsec += 7000000;
	if (abs.tv_nsec >= 1000000000) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000;
	}
	t0 = now_ns();
	CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL) == 0);
	check_sleep("clock_nanosleep monotonic abstime", 7000000, now_ns() - t0);

	clock_gettime(CLOCK_REALTIME, &abs);
	abs.tv_nsec += 7000000;
	if (abs.tv_nsec >= 1000000000) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000;
	}
	t0 = now_ns();
	CHECK(clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &abs, NULL) == 0);
	check_sleep("clock_nanosleep realtime abstime", 7000000, now_ns() - t0);

	/* a deadline already past returns at once; bad arguments as libc */
	clock_gettime(CLOCK_MONOTONIC, &abs);
	CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL) == 0);
	struct timespec bad = { 0, 1000000000 };
	CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL) == EINVAL);
	CHECK(nanosleep(&bad, NULL) == -1 && err() == EINVAL);
	return 0;
}

/* Sleeping Gs do not hold the one P: 2000 of them sleep 100 ms together.
 * The behaviour checked is that the sleeps overlap, whatever the speed:
 * a parked sleeper lets the P run the Gs queued behind it (up to a ring's
 * worth, 255), and its own wake-up joins the queue's tail, so many are
 * asleep at once.  A sleep that held the P would let one at a time. */
static _Atomic int woke, asleep, most_asleep;

static void nap(void *arg)
{
	(void)arg;
	int n = atomic_fetch_add(&asleep, 1) + 1;
	for (int m = atomic_load(&most_asleep); n > m;)
		if (atomic_compare_exchange_weak(&most_asleep, &m, n))
			break;
	usleep(100000);
	atomic_fetch_sub(&asleep, 1);
	atomic_fetch_add(&woke, 1);
}

G_TEST(hook_wait, many_sleepers_one_p, 30)
{
	(void)argc, (void)argv;
	int64_t t0 = now_ns();
	for (int i = 0; i < 2000; i++)
		weft_go(nap, NULL);
	while (atomic_load(&woke) < 2000)
		usleep(5000);
	int64_t ms = ms_since(t0);
	if (atomic_load(&most_asleep) < 50)
		fprintf(stderr, "at most %d Gs asleep at once\n", atomic_load(&most_asleep));
	CHECK(atomic_load(&most_asleep) >= 50);
	CHECK(ms >= 95);
	return 0;
}
