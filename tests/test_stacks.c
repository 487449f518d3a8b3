/*
 * test_stacks.c - G stacks in libweft: sizes and kinds from weft_attr_t,
 * descriptors reused across sizes and kinds, segmented requests in a
 * library or program without split-stack support, and tools/weft-gdb.py
 * (tests/gdb/run.sh, gdb in batch mode).  The segmented stacks
 * themselves: test_stacks_split.c.  Overflow reports: test_sched.c.
 */
#include <errno.h>
#include <stdint.h>

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
