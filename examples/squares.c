/* squares.c - the README's linked example: 100 Gs, one channel. */
#include <weft.h>
#include <stdio.h>

static weft_chan_t *results;

static void worker(void *arg)
{
	long n = (long)arg, sq = n * n;
	weft_sleep(1000000);              /* parks this G, not the thread */
	weft_chan_send(results, &sq);
}

static int run(int argc, char **argv)
{
	(void)argc, (void)argv;
	results = weft_chan_make(sizeof(long), 0);
	for (long i = 1; i <= 100; i++)
		weft_go(worker, (void *)i);   /* go worker(i) */
	long sum = 0, v;
	for (int i = 0; i < 100; i++) {
		weft_chan_recv(results, &v);
		sum += v;
	}
	printf("%ld\n", sum);
	return 0;
}

int main(int argc, char **argv) { return weft_main(run, argc, argv); }
