/*
 * parked.c - creation time and memory of N parked Gs, the peer of
 * bench/go/parked.go and bench/peers/pthread_parked.c.
 *
 *   parked [N] [wg|sleep]  default 1000000 wg; QUICK=1 in the env uses 100000.
 *
 * wg (default): starts N Gs that each check in on one wait group and then
 * park on another, waits until all have checked in, and reports the
 * creation time and the growth of VmRSS (/proc/self/status) per G; then
 * releases them all and waits for them to finish.
 *
 * sleep: the Gs check in and then park in weft_sleep(20 s) (each arms its
 * own timer); the program reports once all have checked in and exits
 * without waiting for them.
 *
 * Every run is a fresh process, so every stack, descriptor and timer of
 * the run is in memory mapped during the run: nothing comes from a pool
 * an earlier round filled, and the cost of the machine's first touch of
 * memory is in the figure.  So that it can be judged against the
 * machine's floors (bench/floors.c: a first-touched page, a bulk-populated
 * one, the first user write to a populated one), the line also gives the
 * page faults the process took per G, its user and system CPU time per G
 * (getrusage, all threads), and the most OS threads seen while spawning.
 *
 * Output: weft_parked_create_ns=<ns each, until all checked in>
 *         weft_parked_spawn_ns=<ns each, the spawn loop alone>
 *         weft_parked_rss_bytes=<bytes each> faults_per_g=<minor+major>
 *         user_ns_per_g=<> sys_ns_per_g=<> threads_max=<> procs=<>
 *         syscall_handoffs=<> hog_handoffs=<> (Ps lent around a stuck M) n=<N> mode=<wg|sleep>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "weft.h"

static long n = 1000000;
static int sleepmode;            /* park in weft_sleep rather than on a wait group */
static weft_wg_t started = WEFT_WG_INIT;
static weft_wg_t release = WEFT_WG_INIT;
static weft_wg_t finished = WEFT_WG_INIT;

static void parked(void *arg)
{
	(void)arg;
	weft_wg_done(&started);
	if (sleepmode) {
		weft_sleep(20 * 1000000000LL);
		return;
	}
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

static double tv_ns(struct timeval tv)
{
	return (double)tv.tv_sec * 1e9 + (double)tv.tv_usec * 1e3;
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	long made;
	int threads = 0;
	weft_stats_t st;
	struct rusage ru0, ru1;

	weft_wg_add(&release, 1);
	weft_wg_add(&started, n);
	weft_wg_add(&finished, n);
	long rss0 = vm_rss_kib();
	getrusage(RUSAGE_SELF, &ru0);
	double t0 = now_s();
	for (made = 0; made < n; made++) {
		if (weft_go(parked, NULL) < 0) {
			perror("parked: weft_go");
			break;
		}
		if (made % 1024 == 0 && weft_stats(&st) == 0 && st.threads > threads)
			threads = st.threads;
	}
	double spawned = now_s() - t0;
	if (made < n) {	/* account for the Gs we could not make */
		weft_wg_add(&started, made - n);
		weft_wg_add(&finished, made - n);
	}
	weft_wg_wait(&started);
	double el = now_s() - t0;
	getrusage(RUSAGE_SELF, &ru1);
	long rss1 = vm_rss_kib();
	weft_stats(&st);
	if (made == 0)
		return 1;
	double per = (double)made;
	printf("weft_parked_create_ns=%.1f weft_parked_spawn_ns=%.1f weft_parked_rss_bytes=%.0f "
	       "faults_per_g=%.3f user_ns_per_g=%.1f sys_ns_per_g=%.1f threads_max=%d procs=%d "
	       "syscall_handoffs=%lld hog_handoffs=%lld n=%ld mode=%s\n",
	       el * 1e9 / per, spawned * 1e9 / per, (double)(rss1 - rss0) * 1024 / per,
	       (double)((ru1.ru_minflt - ru0.ru_minflt) + (ru1.ru_majflt - ru0.ru_majflt)) / per,
	       (tv_ns(ru1.ru_utime) - tv_ns(ru0.ru_utime)) / per,
	       (tv_ns(ru1.ru_stime) - tv_ns(ru0.ru_stime)) / per, threads, weft_maxprocs(0),
	       (long long)st.syscall_handoffs, (long long)st.hog_handoffs, made,
	       sleepmode ? "sleep" : "wg");
	fflush(stdout);
	if (sleepmode)
		return made == n ? 0 : 1; /* the sleepers are left behind: the process ends */
	weft_wg_done(&release);
	weft_wg_wait(&finished);
	return made == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	if (argc > 1)
		n = atol(argv[1]);
	else if (quick && !strcmp(quick, "1"))
		n = 100000;
	if (argc > 2 && !strcmp(argv[2], "sleep"))
		sleepmode = 1;
	else if (argc > 2 && strcmp(argv[2], "wg")) {
		fprintf(stderr, "usage: parked [N] [wg|sleep]\n");
		return 2;
	}
	if (n < 1)
		n = 1;
	return weft_main(run, argc, argv);
}
