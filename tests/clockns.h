/* tests/clockns.h -- a clock read as nanoseconds and nanoseconds as a
 * timespec, for the tests that set or compare clocks: test_clock.c (linked)
 * and tests/preload/clockreal.c (a plain program run under the shim). */
#ifndef WEFT_TESTS_CLOCKNS_H
#define WEFT_TESTS_CLOCKNS_H

#include <stdint.h>
#include <time.h>

#define NS 1000000000LL

static inline int64_t now(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * NS + t.tv_nsec;
}

static inline struct timespec ts(int64_t ns)
{
	return (struct timespec){ ns / NS, ns % NS };
}

#endif
