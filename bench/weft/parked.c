/*
 * parked.c - creation time and memory of N parked Gs, the peer of
 * bench/go/parked.go and bench/peers/pthread_parked.c.
 *
 *   parked [N]            default 1000000; QUICK=1 in the env uses 100000.
 *
 * Starts N Gs that each check in on one wait group and then park on
 * another, waits until all have checked in, and reports the creation
 * time and the growth of VmRSS (/proc/self/status) per G.  Then releases
 * them all and waits for them to finish.
 *
 * Output: weft_parked_create_ns=<ns each> weft_parked_rss_bytes=<bytes each> n=<N>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"

static long n = 1000000;
static weft_wg_t started = WEFT_WG_INIT;
static weft_wg_t release = WEFT_WG_INIT;
static weft_wg_t finished = WEFT_WG_INIT;

static void parked(void *arg)
{
	(void)arg;
	weft_wg_done(&started);
	weft_wg_wait(&release);
	weft_wg_done(&finished);
}

/* Resident set size in KiB, or -1. */
static long vm_rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	long made;

	weft_wg_add(&release, 1);
	weft_wg_add(&started, n);
	weft_wg_add(&finished, n);
	long rss0 = vm_rss_kib();
	double t0 = now_s();
	for (made = 0; made < n; made++)
		if (weft_go(parked, NULL) < 0) {
			perror("parked: weft_go");
			break;
		}
	if (made < n) {	/* account for the Gs we could not make */
		weft_wg_add(&started, made - n);
		weft_wg_add(&finished, made - n);
	}
	weft_wg_wait(&started);
	double el = now_s() - t0;
	long rss1 = vm_rss_kib();
	weft_wg_done(&release);
	weft_wg_wait(&finished);
	if (made == 0)
		return 1;
	printf("weft_parked_create_ns=%.1f weft_parked_rss_bytes=%.0f n=%ld\n",
	       el * 1e9 / (double)made, (double)(rss1 - rss0) * 1024 / (double)made, made);
	return made == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	if (argc > 1)
		n = atol(argv[1]);
	else if (quick && !strcmp(quick, "1"))
		n = 100000;
	if (n < 1)
		n = 1;
	return weft_main(run, argc, argv);
}
