/*
 * test_stacks.c - G stacks in libweft: sizes and kinds from weft_attr_t,
 * descriptors reused across sizes and kinds, segmented requests in a
 * library or program without split-stack support, and tools/weft-gdb.py
 * (tests/gdb/run.sh, gdb in batch mode).  The segmented stacks
 * themselves: test_stacks_split.c.  Overflow reports: test_sched.c.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"

#define KiB 1024L

/* ~1 KiB a level */
static __attribute__((noinline)) long down(long n)
{
	volatile char pad[1000];
	pad[0] = 1;
	pad[999] = 2;
	if (n == 0)
		return 0;
	return down(n - 1) + pad[0] + pad[999];
}

/* ---- weft_attr_t ------------------------------------------------------------ */

static void nop(void *arg)
{
	(void)arg;
}

Test(stacks, attr_errors)
{
	weft_attr_t a;
	memset(&a, 0, sizeof a);
	a.stack_size = 16 * KiB - 1;
	errno = 0;
	cr_assert_eq(weft_go_attr(&a, nop, NULL), -1);
	cr_assert_eq(errno, EINVAL);
	a.stack_size = (1UL << 30) + 1;
	errno = 0;
	cr_assert_eq(weft_go_attr(&a, nop, NULL), -1);
	cr_assert_eq(errno, EINVAL);
	a.stack_size = 0;
	a.stack_kind = WEFT_STACK_SEGMENTED + 1;
	errno = 0;
	cr_assert_eq(weft_go_attr(&a, nop, NULL), -1);
	cr_assert_eq(errno, EINVAL);
	a.stack_kind = -1;
	errno = 0;
	cr_assert_eq(weft_go_attr(&a, nop, NULL), -1);
	cr_assert_eq(errno, EINVAL);
}

/* ---- sizes and kinds, descriptors reused across them ------------------------------- */

struct sized {
	long levels;
	long result;
	weft_wg_t *wg;
};

static void sized_g(void *arg)
{
	struct sized *s = arg;
	s->result = down(s->levels);
	weft_wg_done(s->wg);
}

/* Each size holds a recursion of ~3/4 of it; a G made from a dead one's
 * descriptor must get the stack it asks for, not the one it finds. */
static int sizes_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	static const size_t sizes[] = { 16 * KiB, 64 * KiB, 0 /* 256K */, 1024 * KiB, 64 * KiB };
	static const int kinds[] = { WEFT_STACK_DEFAULT, WEFT_STACK_GUARDED, WEFT_STACK_SEGMENTED };
	enum { N = 3000 };
	static struct sized s[N];
	weft_wg_t wg = WEFT_WG_INIT;
	for (int round = 0; round < 3; round++) {
		weft_wg_add(&wg, N);
		for (int i = 0; i < N; i++) {
			size_t sz = sizes[(i + round) % 5];
			weft_attr_t a;
			memset(&a, 0, sizeof a);
			a.stack_size = sz;
			a.stack_kind = kinds[(i / 5 + round) % 3];
			s[i].levels = (long)((sz ? sz : 256 * KiB) * 3 / 4 / 1100);
			s[i].wg = &wg;
			CHECK(weft_go_attr(&a, sized_g, &s[i]) > 0);
		}
		weft_wg_wait(&wg);
		for (int i = 0; i < N; i++)
			CHECK(s[i].result == 3 * s[i].levels);
	}
	return 0;
}

Test(stacks, sizes_and_kinds_reused, .timeout = 60)
{
	run_main(sizes_body);
}

/* ---- a new chunk's stack tops are committed in one system call ---------------- */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* The runtime reaches madvise through the PLT, so this definition, in
 * the executable, takes its calls: populates are counted and every call
 * is passed on to the kernel. */
static _Atomic long populate_calls;

int madvise(void *addr, size_t len, int advice)
{
	if (advice == MADV_POPULATE_WRITE)
		atomic_fetch_add(&populate_calls, 1);
	return (int)syscall(SYS_madvise, addr, len, advice);
}

#define TOPS_GS 2000
static weft_wg_t tops_started = WEFT_WG_INIT, tops_release = WEFT_WG_INIT;
static long tops_calls;

static void tops_g(void *arg)
{
	(void)arg;
	weft_wg_done(&tops_started);
	weft_wg_wait(&tops_release); /* keeps its stack: the next G needs a fresh one */
}

static int tops_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_wg_add(&tops_release, 1);
	weft_wg_add(&tops_started, TOPS_GS);
	long before = atomic_load(&populate_calls);
	for (int i = 0; i < TOPS_GS; i++)
		CHECK(weft_go(tops_g, NULL) > 0);
	weft_wg_wait(&tops_started);
	tops_calls = atomic_load(&populate_calls) - before;
	weft_wg_done(&tops_release);
	return 0;
}

/* 2,000 parked Gs take 2,000 fresh stacks from 125 chunks: their top
 * pages are committed by one process_madvise per chunk (stack.c
 * populatetops), not by one madvise per stack (2,000 before).  The few
 * left are the runtime allocator's own populates (alloc.c). */
Test(stacks, chunk_tops_populated_in_one_call, .timeout = 60)
{
	char *pg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(pg != MAP_FAILED);
	struct iovec v = { pg, 4096 };
	if (syscall(SYS_process_madvise, -10001 /* PIDFD_SELF */, &v, 1, MADV_POPULATE_WRITE, 0) < 0)
		cr_skip_test("process_madvise(PIDFD_SELF, MADV_POPULATE_WRITE) not here (Linux < 6.14): "
			"stacks are populated one by one");
	munmap(pg, 4096);
	run_main(tops_body);
	cr_assert_lt(tops_calls, TOPS_GS / 10, "%ld populate calls for %d fresh stacks", tops_calls,
		     TOPS_GS);
}

/* Gs' frames at the same depth are not at the same address modulo 4096
 * (stackcolour, runtime.h): slots are a multiple of 4 KiB apart, and
 * without a colour each G's first frame is at its slot's top, so the
 * two Gs of a yield or a channel's two ends had every frame of their
 * switches 4K-aliased.  Gs alive together, on fresh slots of one chunk. */
#define COLOUR_GS 4
static uintptr_t colour_at[COLOUR_GS];
static weft_wg_t colour_wg = WEFT_WG_INIT;
static weft_chan_t *colour_end;

static __attribute__((noinline)) void colour_g(void *arg)
{
	volatile char here = 0;
	colour_at[(uintptr_t)arg] = (uintptr_t)&here;
	weft_wg_done(&colour_wg);
	weft_chan_recv(colour_end, NULL); /* alive until all have looked */
}

static int colour_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	colour_end = weft_chan_make(0, 0);
	weft_wg_add(&colour_wg, COLOUR_GS);
	for (uintptr_t i = 0; i < COLOUR_GS; i++)
		CHECK(weft_go(colour_g, (void *)i) > 0);
	weft_wg_wait(&colour_wg);
	weft_chan_close(colour_end);
	for (int i = 0; i < COLOUR_GS; i++)
		for (int j = 0; j < i; j++)
			CHECK((colour_at[i] & 4095) != (colour_at[j] & 4095));
	return 0;
}

Test(stacks, neighbours_frames_apart_mod_4k)
{
	run_main(colour_body);
}

/* In libweft (no split-stack support) a segmented request is served by
 * a guarded stack of the size asked for, or WEFT_STACK_SIZE. */
static int fallback_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_wg_t wg = WEFT_WG_INIT;
	struct sized big = { .levels = 200, .wg = &wg };
	weft_attr_t a;
	memset(&a, 0, sizeof a);
	a.stack_kind = WEFT_STACK_SEGMENTED;
	weft_wg_add(&wg, 1);
	CHECK(weft_go_attr(&a, sized_g, &big) > 0);
	weft_wg_wait(&wg);
	CHECK(big.result == 600);
	return 0;
}

Test(stacks, segmented_falls_back_to_guarded)
{
	run_main(fallback_body);
}

static int env_segmented_child(void)
{
	return weft_main(fallback_body, 0, NULL) || check_failures;
}

Test(stacks, weft_stack_segmented_env_in_libweft, .timeout = 30)
{
	char *env[] = { "WEFT_STACK=segmented", NULL };
	struct child c;
	run_child(&c, env, env_segmented_child, 20);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "status %#x: %s", c.status,
		  c.err);
}

/* ---- gdb: tools/weft-gdb.py --------------------------------------------------------- */

Test(stacks, gdb_info_weft_and_bt, .timeout = 300)
{
#if defined(WEFT_GDB_PROG) && defined(WEFT_SRCDIR)
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "sh %s/tests/gdb/run.sh %s %s", WEFT_SRCDIR, WEFT_GDB_PROG,
		 WEFT_GDB_PROG_SPLIT);
	int st = system(cmd);
	cr_assert(WIFEXITED(st), "run.sh: status %#x", st);
	if (WEXITSTATUS(st) == 77)
		cr_skip_test("gdb cannot run here");
	cr_assert_eq(WEXITSTATUS(st), 0, "tests/gdb/run.sh failed (output above)");
#else
	cr_skip_test("the gdb check runs in plain builds only (not SAN=, VALGRIND=)");
#endif
}
