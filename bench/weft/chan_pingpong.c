/*
 * chan_pingpong - round trip over two unbuffered channels on one P, the
 * peer of bench/go/chanpingpong.go.
 *
 *   chan_pingpong [N]     QUICK=1 in the environment shrinks N.
 *
 * Output: weft_chan_pingpong_ns=<ns per round trip> n=<N>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"

static weft_chan_t *ping, *pong;
static long n = 5000000;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void echo(void *arg)
{
	(void)arg;
	long v;
	while (weft_chan_recv(ping, &v) == 1)
		weft_chan_send(pong, &v);
	weft_chan_close(pong);
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	ping = weft_chan_make(sizeof(long), 0);
	pong = weft_chan_make(sizeof(long), 0);
	if (!ping || !pong || weft_go(echo, NULL) < 0)
		return 1;
	double t0 = now_s();
	for (long i = 0; i < n; i++) {
		long v = i;
		weft_chan_send(ping, &v);
		if (weft_chan_recv(pong, &v) != 1 || v != i) {
			fprintf(stderr, "chan_pingpong: got %ld, want %ld\n", v, i);
			return 1;
		}
	}
	double el = now_s() - t0;
	weft_chan_close(ping);
	long v;
	weft_chan_recv(pong, &v);
	printf("weft_chan_pingpong_ns=%.1f n=%ld\n", el * 1e9 / (double)n, n);
	return 0;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("QUICK");
	if (argc > 1)
		n = atol(argv[1]);
	else if (quick && !strcmp(quick, "1"))
		n = 200000;
	weft_maxprocs(1);
	return weft_main(run, argc, argv);
}
