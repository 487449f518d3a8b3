/*
 * test_abi.c - a program built against an older include/weft.h keeps
 * working with this library (docs/api.md, "Binary compatibility").
 *
 * Compiled against tests/abi/weft_stats_v1.h, the header before
 * weft_stats_t grew three fields, and not against weft.h: this is the
 * binary such a program is.  Its call to weft_stats must fill its 64-byte
 * struct with the right values and write nothing after it (before the
 * sized entry point, the library wrote 88 bytes and the caller's next
 * variables were overwritten).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "abi/weft_stats_v1.h"

#define CANARY 0x5a5a5a5a5a5a5a5aULL

static void sleeper(void *arg)
{
	(void)arg;
	weft_sleep(3600LL * 1000000000); /* live until the test's process ends */
}

Test(abi, stats_v1_binary_no_overwrite, .timeout = 60)
{
	setenv("WEFT_MAXPROCS", "3", 1); /* read when the runtime starts, below */
	struct {
		weft_stats_t st;
		uint64_t canary[4]; /* what follows the caller's struct */
	} x;
	memset(&x.st, 0xff, sizeof x.st);
	for (int i = 0; i < 4; i++)
		x.canary[i] = CANARY;
	for (int i = 0; i < 3; i++)
		cr_assert_gt(weft_go(sleeper, NULL), 0);
	cr_assert_eq(weft_stats(&x.st), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(x.canary[i], CANARY, "weft_stats wrote past the caller's struct "
						  "(canary %d: %#llx)", i, (unsigned long long)x.canary[i]);
	cr_assert_eq(x.st.procs, 3);
	cr_assert(x.st.idle_procs >= 0 && x.st.idle_procs <= 3, "idle_procs %d", x.st.idle_procs);
	cr_assert(x.st.threads >= 1 && x.st.threads < 64, "threads %d", x.st.threads);
	cr_assert(x.st.idle_threads >= 0 && x.st.spinning_threads >= 0 && x.st.global_runq >= 0);
	cr_assert(x.st.gs >= 3 && x.st.gs < 64, "gs %lld", (long long)x.st.gs);
	cr_assert(x.st.syscall_handoffs >= 0 && x.st.hog_handoffs >= 0 && x.st.preempts >= 0 &&
		  x.st.timers_rescued >= 0);
	cr_assert_eq(weft_stats(NULL), -1);
}
