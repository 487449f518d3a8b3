/*
 * sleep.c - CPU cost of timer wakeups, the peer of bench/go/sleep.go.
 *
 * G Gs (default 100,000) each call weft_sleep(MS milliseconds) in a loop
 * until D seconds have passed.  Reports the process's CPU time
 * (getrusage, user + system, from before the Gs are started) per wakeup.
 *
 *   sleep [G [D [MS]]]    defaults 100000, 5 s, 10 ms; QUICK=1 in the
 *                         env uses D = 0.5 s.
 *
 * Output: weft_sleep_cpu_us_per_wakeup=<us> wakeups=<N> gs=<G> secs=<s>
 *         cpu_secs=<s>
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "weft.h"

static long gs = 100000;
static double secs = 5, ms = 10;
static int64_t deadline;
static _Atomic int64_t wakeups;
static weft_wg_t wg = WEFT_WG_INIT;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void sleeper(void *arg)
{
	(void)arg;
	int64_t nap = (int64_t)(ms * 1e6), k = 0;
	while (now_ns() < deadline) {
		weft_sleep(nap);
		k++;
	}
	atomic_fetch_add(&wakeups, k);
	weft_wg_done(&wg);
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	double cpu0 = cpu_s();
	int64_t t0 = now_ns();
	deadline = t0 + (int64_t)(secs * 1e9);
	weft_wg_add(&wg, gs);
	for (long i = 0; i < gs; i++)
		if (weft_go(sleeper, NULL) < 0) {
			perror("sleep: weft_go");
			return 1;
		}
	weft_wg_wait(&wg);
	double el = (double)(now_ns() - t0) / 1e9;
	double cpu = cpu_s() - cpu0;
	int64_t w = atomic_load(&wakeups);
	printf("weft_sleep_cpu_us_per_wakeup=%.3f wakeups=%lld gs=%ld secs=%.2f cpu_secs=%.2f\n",
	       w > 0 ? cpu * 1e6 / (double)w : 0.0, (long long)w, gs, el, cpu);
	return 0;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	if (quick && !strcmp(quick, "1"))
		secs = 0.5;
	if (argc > 1)
		gs = atol(argv[1]);
	if (argc > 2)
		secs = atof(argv[2]);
	if (argc > 3)
		ms = atof(argv[3]);
	if (gs < 1 || secs <= 0 || ms < 0) {
		fprintf(stderr, "usage: sleep [GS [SECS [MS]]]\n");
		return 2;
	}
	return weft_main(run, argc, argv);
}
