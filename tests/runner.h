/*
 * runner.h - what every suite's test runner does besides running tests:
 * stretch time bounds by test_slow(), and name each skipped test.
 *
 * test_slow(): how much slower than a quiet native run this run may be.
 *
 * Tests assert behaviour, not speed.  The time bounds left in tests/ are
 * hang detectors (a test's timeout, a child's alarm, "a 100 ms poll
 * returned within 3 s"), and each is multiplied by test_slow() so that it
 * holds on a slower build and on a busy machine alike:
 *
 *   WEFT_TEST_SLOW=N   N (a positive integer), as given;
 *   otherwise          the build's own factor - ThreadSanitizer 10,
 *                      valgrind 20, AddressSanitizer 3, else 1 - times the
 *                      machine's load per CPU (the 1-minute load average
 *                      over the online CPUs, rounded up, at least 1).
 *
 * The factor is worked out once, by the first process of a run that asks
 * (the test runner: its report hook below, or the Criterion stand-in's
 * main), and exported as WEFT_TEST_SLOW, so that the runner's timeouts and
 * those of the test's own children agree (an outer timeout stays longer
 * than the inner one it guards).  Speed figures belong in bench/.
 *
 * Skips: Criterion counts a skipped test nowhere in its summary, so the
 * runner prints "[SKIP] suite::name: why" for each, which
 * scripts/runtests.sh counts into its closing line: a test that cannot
 * run here (no gdb, no curl, a sanitizer build) is never silent.
 */
#ifndef WEFT_TEST_RUNNER_H
#define WEFT_TEST_RUNNER_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define TEST_SLOW_BUILD 10
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_SLOW_BUILD 10
#endif
#endif
#if !defined(TEST_SLOW_BUILD) && defined(WEFT_VALGRIND)
#define TEST_SLOW_BUILD 20 /* memcheck runs one thread at a time, ~30x slower */
#endif
#if !defined(TEST_SLOW_BUILD) && defined(__SANITIZE_ADDRESS__)
#define TEST_SLOW_BUILD 3
#endif
#if !defined(TEST_SLOW_BUILD) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_SLOW_BUILD 3
#endif
#endif
#ifndef TEST_SLOW_BUILD
#define TEST_SLOW_BUILD 1
#endif

/* The load average per CPU, rounded up, at least 1. */
static inline int test_load_factor(void)
{
	double load = 0;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &load) != 1)
			load = 0;
		fclose(f);
	}
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 1)
		cpus = 1;
	int k = (int)(load / cpus + 0.999);
	return k < 1 ? 1 : k;
}

static __attribute__((unused)) int test_slow(void)
{
	static int k;
	if (k)
		return k;
	const char *s = getenv("WEFT_TEST_SLOW");
	int v = s ? atoi(s) : 0;
	if (s && v < 1)
		fprintf(stderr, "weft: WEFT_TEST_SLOW=%s is not a positive integer; ignored\n", s);
	if (v < 1) {
		v = TEST_SLOW_BUILD * test_load_factor();
		char buf[16];
		snprintf(buf, sizeof buf, "%d", v);
		setenv("WEFT_TEST_SLOW", buf, 1);
	}
	k = v;
	return k;
}

/* Criterion applies each test's .timeout in the runner: stretch them all
 * there, before the first test starts.  (The stand-in for Criterion,
 * tests/shim, does the same in its main.) */
#if !defined(WEFT_CRITERION_SHIM_H) && defined(CRITERION_H_)
#include <criterion/hooks.h>
#include <criterion/internal/ordered-set.h>

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	int k = test_slow();
	FOREACH_SET(struct criterion_suite_set *s, set->suites)
	{
		FOREACH_SET(struct criterion_test *t, s->tests)
		{
			if (t->data && t->data->timeout > 0)
				t->data->timeout *= k;
		}
	}
	if (k > 1)
		fprintf(stderr, "[----] time bounds x%d (WEFT_TEST_SLOW, tests/runner.h)\n", k);
}

ReportHook(POST_TEST)(struct criterion_test_stats *st)
{
	if (st->test_status == CR_STATUS_SKIPPED)
		fprintf(stderr, "[SKIP] %s::%s: %s\n", st->test->category, st->test->name,
			st->message ? st->message : "skipped");
}
#endif

#endif
