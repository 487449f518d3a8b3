/*
 * kwait.c - a thread waiting in epoll_wait / poll / select for nothing:
 * it costs no wakeups while it waits, and a signal handler for it, or a
 * cancellation, ends the wait.  A plain pthread program; under weft the
 * waits are kernel waits (docs/hooks.md "Waiting in the kernel").
 *
 * kwait CASE: one line per check ("ok ..." or "FAIL ..."), then a line
 * "wakeups N" for the idle case; exit 0 if all held.  Cases:
 *   idle    - main waits 2.5 s in epoll_wait with nothing ready; the
 *             process's threads sleep (voluntary context switches
 *             summed over /proc/self/task, from 0.5 s in: fewer than 25)
 *   signal  - pthread_kill / SIGALRM to main blocked in epoll_wait, poll
 *             and select without a timeout: -1 EINTR, the handler ran
 *   cancel  - pthread_cancel of a thread blocked in epoll_wait and poll
 *   idle_signal - SIGALRM after main waited quietly in epoll_wait: -1 EINTR
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>

#include "check.h"

/* A thread that exits at once: the shim starts lazily, at the first
 * pthread_create; after it main runs as a green thread. */
static void *nothing(void *arg)
{
	return arg;
}

static void threads_on(void)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, nothing, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
}

/* Voluntary context switches of every thread of the process: how often
 * they went to sleep, i.e. were woken. */
static long wakeups(void)
{
	DIR *d = opendir("/proc/self/task");
	CHECK(d);
	long sum = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], line[256];
		snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; /* gone meanwhile */
		long v;
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
				sum += v;
		fclose(f);
	}
	closedir(d);
	return sum;
}

static void case_idle(void)
{
	threads_on();
	int ep = epoll_create1(0), p[2];
	CHECK(ep >= 0 && pipe(p) == 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = p[0] };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0);
	struct epoll_event out;
	/* settle: whatever the start left to do */
	CHECK(epoll_wait(ep, &out, 1, 500) == 0);
	long w0 = wakeups();
	CHECK(epoll_wait(ep, &out, 1, 2500) == 0);
	long w = wakeups() - w0;
	printf("wakeups %ld\n", w);
	/* natively 1-3 (the wait's own end, the /proc reads); under weft
	 * about 15 more (the settling wait's end woke the runtime's monitor,
	 * which watches for 50 ms before it sleeps); a runtime that polls
	 * every 20 ms makes 125 */
	say("idle: the threads sleep while main waits", w < 25);
}

static atomic_int handled;

static void on_sig(int s)
{
	if (alarm_early(s))
		return; /* came before its wait: armed again (check.h) */
	atomic_fetch_add(&handled, 1);
}

static pthread_t mainth;
static atomic_int kills; /* how many pthread_kills to send main: one per wait */

/* Sends main SIGUSR1 each time it is asked to, 50 ms later (main is
 * then in its wait, or about to be; a signal that comes first would make
 * natively a wait that never ends, so a late one is sent again every
 * 200 ms until main says it is out). */
static atomic_int out; /* main is out of the wait it was asked about */

static void *killer(void *arg)
{
	(void)arg;
	for (int n = 1; n <= 3; n++) {
		while (atomic_load(&kills) < n)
			usleep(1000);
		usleep(50000);
		while (!atomic_load(&out)) {
			pthread_kill(mainth, SIGUSR1);
			usleep(200000);
		}
	}
	return NULL;
}

static void catch(int s)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sig;
	sigemptyset(&sa.sa_mask);
	sigaction(s, &sa, NULL);
}

static void case_signal(void)
{
	threads_on();
	catch(SIGUSR1);
	catch(SIGALRM);
	mainth = pthread_self();
	int ep = epoll_create1(0), p[2];
	CHECK(ep >= 0 && pipe(p) == 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = p[0] };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0);
	pthread_t k;
	CHECK(pthread_create(&k, NULL, killer, NULL) == 0);

	struct epoll_event e;
	atomic_store(&out, 0);
	atomic_store(&kills, 1);
	int r = epoll_wait(ep, &e, 1, -1);
	atomic_store(&out, 1);
	say("epoll_wait: pthread_kill, -1 EINTR", r == -1 && errno_now() == EINTR);

	struct pollfd pf = { p[0], POLLIN, 0 };
	atomic_store(&out, 0);
	atomic_store(&kills, 2);
	r = poll(&pf, 1, -1);
	atomic_store(&out, 1);
	say("poll: pthread_kill, -1 EINTR", r == -1 && errno_now() == EINTR);

	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	atomic_store(&out, 0);
	atomic_store(&kills, 3);
	r = select(p[0] + 1, &rs, NULL, NULL, NULL);
	atomic_store(&out, 1);
	say("select: pthread_kill, -1 EINTR", r == -1 && errno_now() == EINTR);
	CHECK(pthread_join(k, NULL) == 0);

	/* the process's own signal, routed to main */
	int before = atomic_load(&handled);
	alarm_ms(100);
	r = INCALL(epoll_wait(ep, &e, 1, -1));
	say("epoll_wait: SIGALRM, -1 EINTR", r == -1 && errno_now() == EINTR);
	say("the handler ran for each", atomic_load(&handled) >= 4 && atomic_load(&handled) > before);
}

/* A process signal after main has waited quietly for a while (the
 * runtime's monitor asleep by then): its handler runs on main, whose
 * epoll_wait ends with EINTR.  Its router parked on the netpoller must
 * still be woken by someone. */
static void case_idle_signal(void)
{
	threads_on();
	catch(SIGALRM);
	int ep = epoll_create1(0), p[2];
	CHECK(ep >= 0 && pipe(p) == 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = p[0] };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0);
	struct epoll_event e;
	CHECK(epoll_wait(ep, &e, 1, 300) == 0);
	alarm_ms(500);
	int r = INCALL(epoll_wait(ep, &e, 1, -1));
	say("idle, then SIGALRM: -1 EINTR", r == -1 && errno_now() == EINTR);
	say("the handler ran", atomic_load(&handled) == 1);
}

static atomic_int waiting;

static void *epoll_forever(void *arg)
{
	int ep = *(int *)arg;
	struct epoll_event e;
	atomic_store(&waiting, 1);
	epoll_wait(ep, &e, 1, -1); /* a cancellation point */
	return (void *)2;
}

static void *poll_forever(void *arg)
{
	struct pollfd pf = { *(int *)arg, POLLIN, 0 };
	atomic_store(&waiting, 1);
	poll(&pf, 1, -1);
	return (void *)2;
}

static void cancel_one(void *(*fn)(void *), int *arg, const char *what)
{
	pthread_t t;
	void *ret = NULL;
	atomic_store(&waiting, 0);
	CHECK(pthread_create(&t, NULL, fn, arg) == 0);
	while (!atomic_load(&waiting))
		usleep(1000);
	usleep(50000); /* in its wait by now, most likely; else at its start */
	CHECK(pthread_cancel(t) == 0);
	CHECK(pthread_join(t, &ret) == 0);
	char line[128];
	snprintf(line, sizeof line, "%s: cancelled", what);
	say(line, ret == PTHREAD_CANCELED);
}

static void case_cancel(void)
{
	threads_on();
	int ep = epoll_create1(0), p[2];
	CHECK(ep >= 0 && pipe(p) == 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = p[0] };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0);
	cancel_one(epoll_forever, &ep, "epoll_wait");
	cancel_one(poll_forever, &p[0], "poll");
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "idle", case_idle },
	{ "signal", case_signal },
	{ "cancel", case_cancel },
	{ "idle_signal", case_idle_signal },
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: kwait CASE\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (strcmp(argv[1], cases[i].name) == 0) {
			cases[i].fn();
			return failures ? 1 : 0;
		}
	fprintf(stderr, "kwait: no case %s\n", argv[1]);
	return 2;
}
