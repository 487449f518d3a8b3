/*
 * siglat.c - signals to threads, timed: a plain pthread program, run
 * natively and under the shim (docs/preload.md, Signals; make bench runs
 * it both ways, bench/run.py "signals"):
 *
 *   make $(BUILD)/bench/siglat
 *   build/bench/siglat; build/bin/weft run --procs 2 -- build/bench/siglat
 *
 *   parked    pthread_kill to the start of the handler on a thread parked
 *             in read() (the handler ends the read with EINTR);
 *   spinning  the same on a thread computing in `while (!flag) ;`;
 *   pingpong  a byte back and forth between two threads over a socket
 *             pair, ns per round trip, with no handler installed, then
 *             with one installed (never sent): what signal support costs
 *             calls that block when nothing is sent.
 *
 *   sigaction (`siglat sigaction`, alone): ns per sigaction call that
 *             replaces one handler by another (1,000,000 calls), and
 *             per call that puts a handler, then SIG_IGN (20,000):
 *             what interpreters and shells do around each child.
 *
 * `siglat pingpong` runs the last alone.  N (1,000) rounds of each; prints medians and 90th percentiles, then one line
 * of key=value pairs (us, ns) for bench/run.py.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define N 1000
#define PINGS 20000

static atomic_long t1;
static atomic_int ready;
static volatile sig_atomic_t hits; /* handlers run */
static int sv[2], pp[2];

static long now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void on_usr1(int s)
{
	(void)s;
	atomic_store(&t1, now());
	hits++;
	(void)!write(pp[1], "x", 1);
}

static void *parked(void *arg)
{
	(void)arg;
	char c;
	for (;;) {
		ready = 1;
		(void)!read(sv[0], &c, 1); /* EINTR each round */
	}
	return NULL;
}

static void *spinning(void *arg)
{
	(void)arg;
	for (;;) {
		sig_atomic_t seen = hits;
		ready = 1;
		while (hits == seen)
			;
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : x > y;
}

/* N rounds of pthread_kill to t; sorted into d */
static void rounds(pthread_t t, long *d, long settle_us)
{
	for (int i = 0; i < N; i++) {
		while (!ready)
			usleep(100);
		usleep(settle_us); /* into read, or well into the loop */
		ready = 0;
		t1 = 0;
		long t0 = now();
		pthread_kill(t, SIGUSR1);
		char c;
		(void)!read(pp[0], &c, 1);
		d[i] = t1 - t0;
	}
	qsort(d, N, sizeof d[0], cmp);
}

static void *ponger(void *arg)
{
	(void)arg;
	char c;
	while (read(sv[1], &c, 1) == 1)
		if (write(sv[1], &c, 1) != 1)
			break;
	return NULL;
}

/* ns per round trip, the median of 5 batches */
static long pingpong(void)
{
	long b[5];
	for (int k = 0; k < 5; k++) {
		long t0 = now();
		char c = 'x';
		for (int i = 0; i < PINGS / 5; i++)
			if (write(sv[0], &c, 1) != 1 || read(sv[0], &c, 1) != 1)
				exit(1);
		b[k] = (now() - t0) / (PINGS / 5);
	}
	qsort(b, 5, sizeof b[0], cmp);
	return b[2];
}

static void on_other(int s)
{
	(void)s;
}

static void *nothing(void *arg)
{
	return arg;
}

/* ns per sigaction call: n calls setting a, then b, by turns */
static long sa_loop(const struct sigaction *a, const struct sigaction *b, long n)
{
	long t0 = now();
	for (long i = 0; i < n; i += 2)
		if (sigaction(SIGUSR1, a, NULL) != 0 || sigaction(SIGUSR1, b, NULL) != 0)
			exit(1);
	return (now() - t0) / n;
}

/* `siglat sigaction`: on a thread's return the runtime runs (a program
 * with no thread never starts it) */
static int sigaction_costs(void)
{
	pthread_t t;
	pthread_create(&t, NULL, nothing, NULL);
	pthread_join(t, NULL);
	struct sigaction a, b, ign;
	memset(&a, 0, sizeof a);
	a.sa_handler = on_usr1;
	b = a;
	b.sa_handler = on_other;
	ign = a;
	ign.sa_handler = SIG_IGN;
	long replace = sa_loop(&a, &b, 1000000);
	long toggle = sa_loop(&a, &ign, 20000);
	printf("sigaction_replace_ns=%ld sigaction_toggle_ns=%ld\n", replace, toggle);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "sigaction") == 0)
		return sigaction_costs();
	bool only_ping = argc > 1 && strcmp(argv[1], "pingpong") == 0;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(pp) != 0)
		return 1;
	/* no handler yet: the calls as they cost without signals */
	pthread_t po;
	pthread_create(&po, NULL, ponger, NULL);
	long ping0 = pingpong();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	long ping1 = pingpong();
	shutdown(sv[0], SHUT_WR); /* the ponger ends */
	pthread_join(po, NULL);
	close(sv[0]);
	close(sv[1]);
	if (only_ping) { /* `siglat pingpong`: that part alone */
		printf("pingpong_nohandler_ns=%ld pingpong_handler_ns=%ld\n", ping0, ping1);
		return 0;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;

	static long dp[N], ds[N];
	pthread_t t;
	pthread_create(&t, NULL, parked, NULL);
	rounds(t, dp, 200);
	/* the parked thread stays in read; a second one spins */
	ready = 0;
	pthread_create(&t, NULL, spinning, NULL);
	rounds(t, ds, 100);
	printf("pthread_kill to handler start, parked in read: median %.1f us, p90 %.1f us, "
	       "p99 %.1f us\n",
	       dp[N / 2] / 1e3, dp[N * 9 / 10] / 1e3, dp[N * 99 / 100] / 1e3);
	printf("pthread_kill to handler start, computing: median %.1f us, p90 %.1f us, "
	       "p99 %.1f us\n",
	       ds[N / 2] / 1e3, ds[N * 9 / 10] / 1e3, ds[N * 99 / 100] / 1e3);
	printf("read/write round trip between two threads: %ld ns with no handler, %ld ns with "
	       "one installed\n",
	       ping0, ping1);
	printf("parked_median_us=%.2f parked_p90_us=%.2f spin_median_us=%.2f spin_p90_us=%.2f "
	       "pingpong_nohandler_ns=%ld pingpong_handler_ns=%ld\n",
	       dp[N / 2] / 1e3, dp[N * 9 / 10] / 1e3, ds[N / 2] / 1e3, ds[N * 9 / 10] / 1e3, ping0,
	       ping1);
	fflush(stdout);
	_exit(0); /* the two threads never end */
}
