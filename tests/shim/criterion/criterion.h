/*
 * criterion.h - a stand-in for Criterion in ThreadSanitizer builds.
 *
 * Criterion cannot start under TSan: BoxFort maps its shared arena at a
 * random fixed address, which TSan refuses outside its application
 * ranges ("Could not initialize inheritable arena: Resource temporarily
 * unavailable", Snaipe/Criterion#274, open).  make test SAN=thread
 * therefore builds the suites with -Itests/shim, which finds this header
 * first: the same Test() and cr_assert* the suites use, each test run in
 * a forked child with its .timeout, as Criterion does.  Only what the
 * suites use is here.
 *
 *   test [--jobs N] [--filter GLOB] [--list]
 *   WEFT_TEST_SKIP=GLOB,GLOB    report these tests skipped (tests/tools.mk
 *                               says which cannot run under TSan, and why)
 *   WEFT_TEST_SLOW=N            stretch every .timeout N times (tests/runner.h:
 *                               by default the build's factor times the load)
 */
#ifndef WEFT_CRITERION_SHIM_H
#define WEFT_CRITERION_SHIM_H

#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../runner.h"

#ifdef WEFT_TSAN_SUPP
/* A suite run by hand (build/san-thread/tests/test_x --filter ...) gets
 * the options make test SAN=thread passes (tests/tools.mk), the
 * suppressions above all: without them every test whose child makes a
 * second OS thread fails on jemalloc's re-created mutexes in a fork
 * child, "double lock of a mutex" (tests/tsan.supp says why), which
 * reads like a bug of whatever the test checks.  TSAN_OPTIONS, read
 * after these, still overrides them.  (Blocking calls in Gs also want
 * libweft preloaded, as make test does: tests/tools.mk.) */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "halt_on_error=1:second_deadlock_stack=1:suppressions=" WEFT_TSAN_SUPP;
}
#endif

struct cri_test {
	const char *suite;
	const char *name;
	void (*fn)(void);
	int timeout;              /* seconds, 0 none */
	void (*init)(void);       /* before the test */
	void (*fini)(void);       /* after it, passed or failed */
	struct cri_test *next;
};

static struct cri_test *cri_tests;
static struct cri_test *cri_current; /* in a test's child */

#define CRI_SKIP_STATUS 77

#define Test(S, N, ...)                                                                    \
	static void S##__##N##__impl(void);                                                \
	static struct cri_test S##__##N##__desc = { .suite = #S, .name = #N,               \
						    .fn = S##__##N##__impl, __VA_ARGS__ }; \
	__attribute__((constructor)) static void S##__##N##__reg(void)                     \
	{                                                                                  \
		struct cri_test **pp = &cri_tests;                                         \
		while (*pp)                                                                \
			pp = &(*pp)->next;                                                 \
		*pp = &S##__##N##__desc;                                                   \
	}                                                                                  \
	static void S##__##N##__impl(void)

static int cri_expect_failed; /* a cr_expect* failed: the test fails at its end */

static void cri_vreport(const char *file, int line, const char *what, const char *fmt, va_list ap)
{
	fprintf(stderr, "[----] %s:%d: Assertion Failed\n[----]   %s\n", file, line, what);
	if (strcmp(fmt, " ") != 0) { /* " " + the test's message, if any */
		fprintf(stderr, "[----]   ");
		vfprintf(stderr, fmt, ap);
		fprintf(stderr, "\n");
	}
	fflush(NULL);
}

static __attribute__((noreturn, format(printf, 4, 5), unused)) void
cri_fail(const char *file, int line, const char *what, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cri_vreport(file, line, what, fmt, ap);
	va_end(ap);
	if (cri_current && cri_current->fini) {
		struct cri_test *t = cri_current;
		cri_current = NULL; /* a failure in fini ends it */
		t->fini();
	}
	fflush(NULL);
	_exit(1);
}

static __attribute__((format(printf, 4, 5), unused)) void
cri_expect_fail(const char *file, int line, const char *what, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cri_vreport(file, line, what, fmt, ap);
	va_end(ap);
	cri_expect_failed = 1;
}

#define cr_assert(cond, ...)                                                               \
	do {                                                                               \
		if (!(cond))                                                               \
			cri_fail(__FILE__, __LINE__, "The expression " #cond " is false.",  \
				 " " __VA_ARGS__);                                         \
	} while (0)
#define cri_cmp(a, op, b, ...)                                                             \
	do {                                                                               \
		if (!((a)op(b)))                                                           \
			cri_fail(__FILE__, __LINE__, "The expression " #a " " #op " " #b   \
				 " is false.", " " __VA_ARGS__);                           \
	} while (0)
#define cr_expect(cond, ...)                                                               \
	do {                                                                               \
		if (!(cond))                                                               \
			cri_expect_fail(__FILE__, __LINE__, "The expression " #cond        \
					" is false.", " " __VA_ARGS__);                    \
	} while (0)
#define cri_ecmp(a, op, b, ...) cr_expect((a)op(b), __VA_ARGS__)
#define cri_str(a, op, b) (strcmp((a), (b)) op 0)
#define cr_assert_str_eq(a, b, ...) cr_assert(cri_str(a, ==, b), __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) cr_assert(cri_str(a, !=, b), __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) cr_expect(cri_str(a, ==, b), __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...) cr_expect(cri_str(a, !=, b), __VA_ARGS__)
#define cr_expect_eq(a, b, ...) cri_ecmp(a, ==, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) cri_ecmp(a, !=, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) cri_ecmp(a, <, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) cri_ecmp(a, <=, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) cri_ecmp(a, >, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) cri_ecmp(a, >=, b, __VA_ARGS__)
#define cr_expect_null(p, ...) cri_ecmp((const void *)(p), ==, NULL, __VA_ARGS__)
#define cr_expect_not_null(p, ...) cri_ecmp((const void *)(p), !=, NULL, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cri_cmp(a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cri_cmp(a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cri_cmp(a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cri_cmp(a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cri_cmp(a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cri_cmp(a, >=, b, __VA_ARGS__)
#define cr_assert_null(p, ...) cri_cmp((const void *)(p), ==, NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cri_cmp((const void *)(p), !=, NULL, __VA_ARGS__)
/* cr_log_info: a line on stderr, as Criterion's "[----]" info lines */
#define cr_log_info(...)                                                                   \
	do {                                                                               \
		fprintf(stderr, "[----] ");                                                \
		fprintf(stderr, __VA_ARGS__);                                              \
		fprintf(stderr, "\n");                                                     \
	} while (0)

#define cr_skip_test(...)                                                                  \
	do {                                                                               \
		fprintf(stderr, "[----] skipped: " __VA_ARGS__);                           \
		fprintf(stderr, "\n");                                                     \
		fflush(NULL);                                                              \
		_exit(CRI_SKIP_STATUS);                                                    \
	} while (0)

struct cri_run {
	struct cri_test *t;
	pid_t pid;
	struct timespec start;
};

static double cri_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* returns 0 passed, 1 failed, 2 crashed, 3 skipped */
static int cri_report(struct cri_run *r, int status)
{
	char id[256];
	snprintf(id, sizeof id, "%s::%s", r->t->suite, r->t->name);
	double secs = cri_since(&r->start);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		fprintf(stderr, "[PASS] %s: (%.2fs)\n", id, secs);
		return 0;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == CRI_SKIP_STATUS) {
		fprintf(stderr, "[SKIP] %s\n", id);
		return 3;
	}
	if (WIFEXITED(status)) {
		fprintf(stderr, "[FAIL] %s: (%.2fs) exit status %d\n", id, secs,
			WEXITSTATUS(status));
		return 1;
	}
	fprintf(stderr, "[----] %s: %s\n[FAIL] %s: CRASH! (%.2fs)\n", id,
		WTERMSIG(status) == SIGALRM ? "Timed out" : strsignal(WTERMSIG(status)), id,
		secs);
	return 2;
}

static int cri_skipped(const char *id)
{
	const char *env = getenv("WEFT_TEST_SKIP");
	char buf[1024];
	if (!env)
		return 0;
	snprintf(buf, sizeof buf, "%s", env);
	for (char *save = NULL, *g = strtok_r(buf, " ,", &save); g; g = strtok_r(NULL, " ,", &save))
		if (fnmatch(g, id, 0) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int jobs = 1;
	const char *filter = NULL;
	for (int i = 1; i < argc; i++) {
		if ((!strcmp(argv[i], "--jobs") || !strcmp(argv[i], "-j")) && i + 1 < argc)
			jobs = atoi(argv[++i]);
		else if (!strncmp(argv[i], "--jobs=", 7))
			jobs = atoi(argv[i] + 7);
		else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
			filter = argv[++i];
		else if (!strncmp(argv[i], "--filter=", 9))
			filter = argv[i] + 9;
		else if (!strcmp(argv[i], "--list")) {
			for (struct cri_test *t = cri_tests; t; t = t->next)
				printf("%s/%s\n", t->suite, t->name);
			return 0;
		}
	}
	if (jobs < 1)
		jobs = 1;
	/* make test SAN=thread preloads libweft into this process only
	 * (tests/tools.mk): programs the tests run are not built for TSan */
	if (getenv("WEFT_TEST_UNSET_PRELOAD")) {
		unsetenv("LD_PRELOAD");
		unsetenv("WEFT_TEST_UNSET_PRELOAD");
	}
	struct cri_run *runs = calloc((size_t)jobs, sizeof *runs);
	int counts[4] = { 0, 0, 0, 0 }, running = 0, scale = test_slow();
	if (scale > 1)
		fprintf(stderr, "[----] time bounds x%d (WEFT_TEST_SLOW, tests/runner.h)\n", scale);
	struct cri_test *t = cri_tests;
	for (;;) {
		while (t && running < jobs) {
			char id[256];
			snprintf(id, sizeof id, "%s/%s", t->suite, t->name);
			if (filter && fnmatch(filter, id, 0) != 0) {
				t = t->next;
				continue;
			}
			if (cri_skipped(id)) {
				fprintf(stderr, "[SKIP] %s::%s: WEFT_TEST_SKIP\n", t->suite, t->name);
				counts[3]++;
				t = t->next;
				continue;
			}
			int slot = 0;
			while (runs[slot].t)
				slot++;
			fflush(NULL);
			pid_t pid = fork();
			if (pid < 0) {
				perror("fork");
				return 2;
			}
			if (pid == 0) {
				if (t->timeout)
					alarm((unsigned)(t->timeout * scale));
				cri_current = t;
				if (t->init)
					t->init();
				t->fn();
				cri_current = NULL;
				if (t->fini)
					t->fini();
				fflush(NULL);
				_exit(cri_expect_failed);
			}
			runs[slot].t = t;
			runs[slot].pid = pid;
			clock_gettime(CLOCK_MONOTONIC, &runs[slot].start);
			running++;
			t = t->next;
		}
		if (!running)
			break;
		int status;
		pid_t pid = wait(&status);
		if (pid < 0)
			break;
		for (int i = 0; i < jobs; i++)
			if (runs[i].t && runs[i].pid == pid) {
				counts[cri_report(&runs[i], status)]++;
				runs[i].t = NULL;
				running--;
			}
	}
	fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: %d\n",
		counts[0] + counts[1] + counts[2], counts[0], counts[1], counts[2]);
	free(runs);
	return counts[1] || counts[2] ? 1 : 0;
}

#endif
