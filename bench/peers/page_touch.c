/*
 * page_touch -- the floor under parked-task creation, at the benchmark's scale.
 *
 *   page_touch N [STRIDE_KIB [THREADS]]    defaults: 256 KiB (weft's default
 *                                          stack slot), 2 threads (2 Ps)
 *
 * A parked weft G touches one fresh page of its own: its stack's top, one
 * stack slot (256 KiB) from the next G's.  This program does only that: it
 * maps N * STRIDE bytes (no huge pages) and writes one byte to the top page
 * of every slot, the slots split between THREADS threads, and reports the
 * wall time per page as parked's creation per task is reported.  No
 * scheduler, no descriptor, no allocator: what a parked task cannot cost
 * less than on this machine at this scale.  bench/floors.c measures the same
 * write on 64 pages (the fastest of many batches); at a million pages it
 * costs several times more on a VM with shadow page tables (the guest's
 * page-table pages, one per 8 slots, and the host's shadow of each).
 *
 * Prints: touch_ns_per_page=<wall ns> user_ns_per_page=<> sys_ns_per_page=<>
 *         faults_per_page=<> n=<N> stride_kib=<> threads=<>
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

struct part {
	char *base;    /* the first slot of this thread's share */
	long n;        /* slots in it */
	size_t stride; /* bytes per slot */
};

static void *touch(void *arg)
{
	struct part *pt = arg;

	for (long i = 0; i < pt->n; i++) /* the slot's top page, as a stack's */
		((volatile char *)pt->base)[(size_t)i * pt->stride + pt->stride - 64] = 1;
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double tv_s(struct timeval tv)
{
	return tv.tv_sec + tv.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	long kib = argc > 2 ? atol(argv[2]) : 256;
	int nt = argc > 3 ? atoi(argv[3]) : 2;

	if (n <= 0 || kib < 4 || kib % 4 != 0 || nt < 1 || nt > 64) {
		fprintf(stderr, "usage: page_touch N [STRIDE_KIB (multiple of 4)] [THREADS 1-64]\n");
		return 2;
	}
	size_t stride = (size_t)kib * 1024, len = (size_t)n * stride;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		perror("page_touch: mmap");
		return 1;
	}
	madvise(m, len, MADV_NOHUGEPAGE); /* one fault per 4 KiB page, as a stack's */

	struct part parts[64];
	pthread_t th[64];
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	double t = now_s();
	for (int i = 0; i < nt; i++) {
		long lo = n * i / nt, hi = n * (i + 1) / nt;
		parts[i] = (struct part){m + (size_t)lo * stride, hi - lo, stride};
		if (pthread_create(&th[i], NULL, touch, &parts[i]) != 0) {
			fprintf(stderr, "page_touch: pthread_create failed\n");
			return 1;
		}
	}
	for (int i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	t = now_s() - t;
	getrusage(RUSAGE_SELF, &r1);
	printf("touch_ns_per_page=%.1f user_ns_per_page=%.1f sys_ns_per_page=%.1f "
	       "faults_per_page=%.3f n=%ld stride_kib=%ld threads=%d\n",
	       t / n * 1e9, (tv_s(r1.ru_utime) - tv_s(r0.ru_utime)) / n * 1e9,
	       (tv_s(r1.ru_stime) - tv_s(r0.ru_stime)) / n * 1e9,
	       (double)(r1.ru_minflt - r0.ru_minflt) / n, n, kib, nt);
	munmap(m, len);
	return 0;
}
