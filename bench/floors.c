/*
 * floors.c - the machine's floors, measured in the same run as the
 * benchmarks (bench/run.py prints and stores them beside every result), so
 * that a figure can be read as a ratio to what this machine can do at all:
 *
 *   syscall_ns        a trivial system call (getppid through syscall(2))
 *   clock_ns          clock_gettime(CLOCK_MONOTONIC) through the vDSO
 *   fault_us          a first-touch page fault: one write to each page of
 *                     fresh anonymous memory, per page
 *   populate_us       the same pages populated in bulk by the kernel
 *                     (MADV_POPULATE_WRITE), per page
 *   touch_us          the first write from user space to a page populated
 *                     that way.  On a bare-metal or EPT guest this is a
 *                     cache miss; on a VM with shadow page tables (this
 *                     project's machines: a PVM guest) it is a fault the
 *                     guest never sees, as dear as fault_us: there, bulk
 *                     population saves nothing and a benchmark's cost is
 *                     the pages it touches first.
 *   scatter_us        touch_us for pages 256 KiB apart (a G stack's top
 *                     page each, as a parked G touches them): one guest
 *                     page-table page per 8 of them, where touch_us has
 *                     one per 512.  What a parked G cannot cost less than.
 *   fsload_ns         loading the FS base (a G's own TLS, on a switch to
 *                     it under the shim): wrfsbase where the kernel allows
 *                     it (fsgsbase=1, HWCAP2_FSGSBASE), else the system
 *                     call arch_prctl(ARCH_SET_FS) (fsgsbase=0), as
 *                     runtime/tls.c tls_setfs does.  The floor of what a
 *                     switch with per-G TLS costs over one without.
 *
 * Output: one line of key=value pairs.  Each figure is the fastest of many small
 * batches (the floor, not the mean: other load on a shared machine only
 * ever adds, and a batch that was not interrupted shows the cost itself).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <asm/prctl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define BATCHES 200
#define BATCH 500       /* calls per batch */
#define PAGES 64        /* pages per batch */

/* Per page, the fastest batch of PAGES fresh pages stride bytes apart
 * (written one by one, or populated in one call). */
static double pages_per(int populate, int touch, size_t stride)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t len = (size_t)PAGES * stride;
	double best = 1e9;
	for (int b = 0; b < BATCHES / 4; b++) {
		char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return -1;
		madvise(m, len, MADV_NOHUGEPAGE); /* one fault per 4 KiB page */
		if (touch)
			for (size_t i = 0; i < len; i += stride)
				if (madvise(m + i, pg, MADV_POPULATE_WRITE) != 0) {
					munmap(m, len);
					return -1;
				}
		double t = now();
		if (populate) {
			if (madvise(m, len, MADV_POPULATE_WRITE) != 0) {
				munmap(m, len);
				return -1;
			}
		} else {
			for (size_t i = 0; i < len; i += stride)
				((volatile char *)m)[i] = 1;
		}
		t = now() - t;
		munmap(m, len);
		best = t < best ? t : best;
	}
	return best / PAGES * 1e6;
}

#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif

/* One FS base load, the way the runtime does it here (its value
 * unchanged: this thread's own TLS stays). */
static void fsload(int wr, unsigned long base)
{
#if defined(__x86_64__)
	if (wr)
		__asm__ volatile("wrfsbase %0" ::"r"(base) : "memory");
	else
		syscall(SYS_arch_prctl, ARCH_SET_FS, base);
#else
	(void)wr;
	(void)base;
#endif
}

/* Per FS base load, the fastest batch; -1 where there is none (not x86-64). */
static double fsload_per(int *wr)
{
#if defined(__x86_64__)
	unsigned long base = 0;
	*wr = (getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE) != 0;
	syscall(SYS_arch_prctl, ARCH_GET_FS, &base);
	double best = 1e9;
	for (int b = 0; b < BATCHES; b++) {
		double t = now();
		for (int i = 0; i < BATCH; i++)
			fsload(*wr, base);
		t = (now() - t) / BATCH * 1e9;
		best = t < best ? t : best;
	}
	return best;
#else
	*wr = 0;
	return -1;
#endif
}

int main(void)
{
	double sc = 1e9, ck = 1e9;
	struct timespec ts;
	for (int b = 0; b < BATCHES; b++) {
		double t = now();
		for (int i = 0; i < BATCH; i++)
			syscall(SYS_getppid);
		t = (now() - t) / BATCH * 1e9;
		sc = t < sc ? t : sc;
		t = now();
		for (int i = 0; i < BATCH; i++)
			clock_gettime(CLOCK_MONOTONIC, &ts);
		t = (now() - t) / BATCH * 1e9;
		ck = t < ck ? t : ck;
	}
	long pg = sysconf(_SC_PAGESIZE);
	int wr;
	double fs = fsload_per(&wr);
	printf("syscall_ns=%.1f clock_ns=%.1f fault_us=%.2f populate_us=%.2f touch_us=%.2f "
	       "scatter_us=%.2f fsload_ns=%.1f fsgsbase=%d\n",
	       sc, ck, pages_per(0, 0, pg), pages_per(1, 0, pg), pages_per(0, 1, pg),
	       pages_per(0, 1, 256 * 1024), fs, wr);
	return 0;
}
