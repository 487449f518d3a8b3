/*
 * splitstack_rss.c - memory of a parked G by stack kind: N Gs parked on a
 * wait group at once; resident memory (RSS), page tables and mappings
 * they add, per G.  Built with -fsplit-stack against libweft_split
 * (bench/splitstack.mk).
 *
 *   splitstack_rss [n] [kind] [first-segment-bytes]
 *   kind: guarded | segmented (default: both, and segmented with a
 *   16 KiB first segment)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"

static long n = 100000;
static weft_wg_t started = WEFT_WG_INIT, release = WEFT_WG_INIT, done = WEFT_WG_INIT;

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, key, strlen(key)))
			kb = atol(line + strlen(key));
	if (f)
		fclose(f);
	return kb;
}

static long nmaps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	long k = 0;
	int c;
	while (f && (c = fgetc(f)) != EOF)
		k += c == '\n';
	if (f)
		fclose(f);
	return k;
}

/* a little stack in use, as a G parked in real code would have */
static __attribute__((noinline)) void parked(int depth)
{
	char frame[256];
	frame[0] = (char)depth;
	__asm__ volatile("" : : "r"(frame) : "memory");
	if (depth > 0) {
		parked(depth - 1);
		return;
	}
	weft_wg_done(&started);
	weft_wg_wait(&release);
}

static void body(void *arg)
{
	(void)arg;
	parked(4);
	weft_wg_done(&done);
}

static void measure(const char *label, int kind, size_t size)
{
	weft_attr_t a;
	memset(&a, 0, sizeof a);
	a.stack_kind = kind;
	a.stack_size = size;
	long rss0 = status_kb("VmRSS:"), pte0 = status_kb("VmPTE:"), m0 = nmaps();
	weft_wg_add(&release, 1);
	weft_wg_add(&started, n);
	weft_wg_add(&done, n);
	for (long i = 0; i < n; i++)
		if (weft_go_attr(&a, body, NULL) < 0) {
			perror("weft_go_attr");
			exit(1);
		}
	weft_wg_wait(&started);
	long rss1 = status_kb("VmRSS:"), pte1 = status_kb("VmPTE:"), m1 = nmaps();
	printf("splitstack_rss kind=%s n=%ld rss_per_g=%.0f pte_per_g=%.0f maps_added=%ld\n", label,
	       n, (rss1 - rss0) * 1024.0 / n, (pte1 - pte0) * 1024.0 / n, m1 - m0);
	fflush(stdout);
	weft_wg_done(&release);
	weft_wg_wait(&done);
}

static int run(int argc, char **argv)
{
	if (argc > 2) {
		int kind = !strcmp(argv[2], "segmented") ? WEFT_STACK_SEGMENTED : WEFT_STACK_GUARDED;
		measure(argv[2], kind, argc > 3 ? (size_t)atol(argv[3]) : 0);
		return 0;
	}
	/* each in a fresh process: no descriptors or stacks left from another */
	(void)argv;
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv("QUICK"))
		n = 20000;
	if (argc > 1)
		n = atol(argv[1]);
	if (argc > 2)
		return weft_main(run, argc, argv);
	char cmd[4096];
	const char *self = argv[0];
	const char *kinds[] = { "guarded", "segmented", "segmented 16384" };
	for (int i = 0; i < 3; i++) {
		snprintf(cmd, sizeof cmd, "%s %ld %s", self, n, kinds[i]);
		if (system(cmd) != 0)
			return 1;
	}
	return 0;
}
