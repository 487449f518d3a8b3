/*
 * chan_buffered - producer -> consumer throughput over a buffered
 * channel (capacity 128) with 2 Ps, the peer of bench/go/chanbuf.go.
 *
 *   chan_buffered [N]     QUICK=1 in the environment shrinks N.
 *
 * Output: weft_chanbuf_msgs_per_sec=<rate> n=<N>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"

static weft_chan_t *ch, *done;
static long n = 20000000;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void consumer(void *arg)
{
	(void)arg;
	long v, sum = 0;
	while (weft_chan_recv(ch, &v) == 1)
		sum += v;
	weft_chan_send(done, &sum);
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	ch = weft_chan_make(sizeof(long), 128);
	done = weft_chan_make(sizeof(long), 0);
	if (!ch || !done || weft_go(consumer, NULL) < 0)
		return 1;
	double t0 = now_s();
	for (long i = 0; i < n; i++)
		weft_chan_send(ch, &i);
	weft_chan_close(ch);
	long sum;
	weft_chan_recv(done, &sum);
	double el = now_s() - t0;
	if (sum != (n - 1) * n / 2) {
		fprintf(stderr, "chan_buffered: sum %ld, want %ld\n", sum, (n - 1) * n / 2);
		return 1;
	}
	printf("weft_chanbuf_msgs_per_sec=%.0f n=%ld\n", (double)n / el, n);
	return 0;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	if (argc > 1)
		n = atol(argv[1]);
	else if (quick && !strcmp(quick, "1"))
		n = 500000;
	weft_maxprocs(2);
	return weft_main(run, argc, argv);
}
