/*
 * realprogs.c - what real programs did under weft run that they do not
 * do natively, each reduced to a small plain threaded program (the
 * program it came from in each case's comment; docs/preload.md,
 * "Programs tried").  The output must be the same with and without weft.
 *
 * realprogs CASE [N]: prints one line per check ("ok ..." or "FAIL ...")
 * and exits 0 if all held.  Cases: itimer_sleep.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static void *nop(void *arg)
{
	return arg;
}

/* One thread made and joined: under weft the runtime is running from
 * here on (main is a green thread on some OS thread). */
static void start_threads(void)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, nop, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
}

/* ---- itimer_sleep ------------------------------------------------------------------ */

static volatile sig_atomic_t alarms;

static void on_alarm(int s)
{
	(void)s;
	alarms++;
}

/* Python's test_signal (StressTest.test_stress_delivery_dependent): a
 * 1-10 us ITIMER_REAL, and the main thread waits for each SIGALRM in a
 * loop of 10 us nanosleeps.  Each sleep is a wait the signal interrupts
 * while its deadline is about due: under weft the G was resumed on two
 * OS threads at once within a few hundred rounds (a crash in the switch,
 * or the G left marked as inside the runtime, its signals never run: a
 * hang). */
static void itimer_sleep(int n)
{
	start_threads();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	unsigned seed = 1;
	for (int i = 0; i < n; i++) {
		struct itimerval it = { { 0, 0 }, { 0, 1 + rand_r(&seed) % 10 } };
		CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
		while (alarms <= i) {
			struct timespec ts = { 0, 10000 };
			nanosleep(&ts, NULL);
		}
	}
	printf("ok %d alarms, each taken while sleeping\n", (int)alarms);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		FAIL("usage: realprogs CASE [N]");
	int n = argc > 2 ? atoi(argv[2]) : 0;
	if (!strcmp(argv[1], "itimer_sleep"))
		itimer_sleep(n > 0 ? n : 3000);
	else
		FAIL("no case %s", argv[1]);
	return 0;
}
