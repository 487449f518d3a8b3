/*
 * check.h - checks that may fail inside a green thread or a plain thread
 * (test_chan.c, test_sync.c, test_deadlock.c, test_dump.c).
 *
 * Criterion's cr_assert must not fail on a G's stack (it unwinds to the
 * test's own frame), so code running on Gs records failures here and
 * the test body asserts on the count once weft_main has returned.
 */
#ifndef WEFT_TEST_CHECK_H
#define WEFT_TEST_CHECK_H

#include <errno.h>

#include "helpers.h"

static int check_failures;

/* Record a failed condition (first few printed) and go on. */
#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			if (__atomic_fetch_add(&check_failures, 1, __ATOMIC_RELAXED) < 10)  \
				fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,    \
					__LINE__, #cond);                                  \
		}                                                                          \
	} while (0)

/* errno, read afresh: glibc declares __errno_location const, so the
 * compiler may reuse its result from before a call that parked the G and
 * resumed it on another OS thread, and read the old thread's errno. */
static __attribute__((noinline, unused)) int err(void)
{
	__asm__ volatile("" ::: "memory");
	return errno;
}

/* After a call that must show in a backtrace: keeps the compiler from
 * turning it into a tail call (which leaves the caller off the stack). */
#define NOTAIL() __asm__ volatile("" ::: "memory")

/* Run fn as the main G and assert that every CHECK passed. */
static inline void run_main(int (*fn)(int, char **))
{
	int r = weft_main(fn, 0, NULL);
	cr_assert_eq(r, 0, "main G returned %d", r);
	cr_assert_eq(__atomic_load_n(&check_failures, __ATOMIC_RELAXED), 0,
		     "%d checks failed (see stderr)", check_failures);
}

#endif
