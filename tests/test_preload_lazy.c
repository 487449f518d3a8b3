/*
 * test_preload_lazy.c - the shim's lazy start (docs/preload.md,
 * "Start-up"): a program that never makes a thread runs as it would
 * natively - one OS thread, a few more mappings (the shim's libraries) -
 * and one that makes threads later still gets green threads, with the
 * state main made before them intact; fork and exec work before and
 * after.  tests/preload/lazy.c is the program, run natively and under
 * `weft run`.
 */
#include "preload/harness.h"

static struct hrun R, N; /* under weft, native */

/* Extra mappings the shim may add to a program that makes no thread:
 * its own (libweft_preload: 5; it names no library but libc, which the
 * program has anyway) and a few anonymous ones (jemalloc's first chunk,
 * .bss).  An eager start adds ~85 anonymous ones (Ms' stacks and signal
 * stacks, the stack pool, the thread-record region, glibc's per-thread
 * arenas); libunwind, liblzma and libm, once linked, added 18. */
#define EXTRA_MAPS 12
#define EXTRA_ANON 8

static void plain_under(int procs, const char *const env[])
{
	const char *a[] = { h_prog("lazy"), "plain", NULL };
	h_run(&N, a, NULL, NULL, 30);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	cr_assert_eq(h_field(N.out, "tasks"), 1, "%s", N.out);
	h_shim_run(&R, procs, a, env, NULL, 30);
	cr_assert_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_expect_eq(h_field(R.out, "tasks"), 1, "OS threads of a program that makes none: %s",
		     R.out);
	cr_expect_eq(h_field(R.out, "child_tasks"), 1, "OS threads of its forked child: %s", R.out);
	long maps = h_field(R.out, "maps"), nmaps = h_field(N.out, "maps");
	long anon = h_field(R.out, "anon"), nanon = h_field(N.out, "anon");
	cr_expect(maps <= nmaps + EXTRA_MAPS, "%ld mappings under weft, %ld natively", maps, nmaps);
	cr_expect(anon <= nanon + EXTRA_ANON, "%ld anonymous mappings under weft, %ld natively", anon,
		  nanon);
	/* libunwind (and its liblzma) and libm wait for the runtime:
	 * lazylib.c */
	cr_expect_eq(h_field(R.out, "rare_libs"), h_field(N.out, "rare_libs"),
		     "mappings of libunwind, liblzma and libm under weft: %s", R.out);
}

Test(lazy, no_thread_no_runtime, .timeout = 120)
{
	plain_under(2, NULL);
	plain_under(1, (const char *[]){ "WEFT_TLS=thread", NULL });
}

/* Every program a shell runs under `weft run` (the shell itself too)
 * that makes no thread runs on one OS thread. */
Test(lazy, shell_children_stay_single_threaded, .timeout = 120)
{
	const char *a[] = { "sh", "-c",
			    "grep Threads /proc/$$/status; for i in 1 2 3; do "
			    "sh -c 'grep Threads /proc/$$/status'; done",
			    NULL };
	h_shim_run(&R, 2, a, NULL, NULL, 30);
	cr_assert_eq(h_code(&R), 0, "%s", R.err);
	cr_expect_str_eq(R.out, "Threads:\t1\nThreads:\t1\nThreads:\t1\nThreads:\t1\n");
}

/* Threads made after main ran alone: green threads on a bounded number
 * of OS threads, and main's mutex, key value, mask and handler as they
 * were. */
static void threads_under(int procs, const char *const env[])
{
	const char *a[] = { h_prog("lazy"), "threads", NULL };
	h_shim_run(&R, procs, a, env, NULL, 60);
	cr_assert_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
	cr_expect_eq(h_field(R.out, "tasks0"), 1, "before the first thread: %s", R.out);
	long t = h_field(R.out, "tasks");
	/* Ms (procs + spares lent while threads sleep), sysmon, the
	 * signal thread: far below the program's 200 threads */
	cr_expect(t >= 2 && t <= procs + 12, "procs %d: %ld OS threads for 200 threads", procs, t);
	/* the runtime loaded the unwinder as it started: a dump needs no
	 * dlopen then (it may come from a crashing process) */
	cr_expect(h_field(R.out, "unwind_maps") > 0, "libunwind once the runtime runs: %s", R.out);
	cr_expect(strstr(R.out, "ok threads\n"), "%s", R.out);
}

Test(lazy, threads_after_a_lazy_start, .timeout = 240)
{
	const char *a[] = { h_prog("lazy"), "threads", NULL };
	h_run(&N, a, NULL, NULL, 60);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	threads_under(1, NULL);
	threads_under(2, NULL);
	threads_under(2, (const char *[]){ "WEFT_TLS=thread", NULL });
}

/* fork + exec, system, and forked children that make threads: before
 * the first thread and after it; the same output as natively. */
Test(lazy, fork_exec_before_and_after, .timeout = 240)
{
	const char *a[] = { h_prog("lazy"), "forks", NULL };
	h_run(&N, a, NULL, NULL, 60);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int procs = 1; procs <= 2; procs++) {
		h_shim_run(&R, procs, a, NULL, NULL, 60);
		cr_expect_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect_str_eq(R.out, N.out, "procs %d", procs);
	}
}

/* Before the runtime starts, vfork is glibc's: the child runs on the
 * parent's memory (its write is seen), which spares a shell's children
 * the page-table copy and copy-on-write faults of a fork; the exec it
 * makes leaves nothing that holds up the runtime's start after it.
 * Once threads run, vfork is fork and still works. */
Test(lazy, vfork_before_the_runtime, .timeout = 120)
{
	const char *a[] = { h_prog("lazy"), "vfork", NULL };
	h_run(&N, a, NULL, NULL, 60);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	cr_assert_eq(h_field(N.out, "vfork_shared"), 1, "natively: %s", N.out);
	for (int procs = 1; procs <= 2; procs++) {
		h_shim_run(&R, procs, a, NULL, NULL, 60);
		cr_assert_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect_eq(h_field(R.out, "vfork_shared"), 1,
			     "procs %d: a vfork before the first thread is a real one: %s", procs,
			     R.out);
		cr_expect(strstr(R.out, "ok vfork\n"), "%s", R.out);
	}
}

/* A dump (SIGQUIT) in a preloaded program still has backtraces:
 * libunwind is no longer linked but loaded as the runtime starts
 * (runtime/lazylib.c), before any dump can come. */
Test(lazy, dump_has_backtraces, .timeout = 120)
{
	const char *a[] = { h_prog("lazy"), "dump", NULL };
	h_shim_run(&R, 2, a, NULL, NULL, 60);
	cr_assert(WIFEXITED(R.status) && WEXITSTATUS(R.status) == 2, "status %#x: %s%s", R.status,
		  R.out, R.err);
	cr_expect(strstr(R.err, "SIGQUIT: quit"), "%s", R.err);
	cr_expect(strstr(R.err, "lazy_dump_worker()"), "the thread's frame in the dump: %s",
		  R.err);
	cr_expect(!strstr(R.err, "no backtrace"), "%s", R.err);
}

/* Minor page faults of argv and every process it waited for (wait4's
 * rusage counts the whole tree). */
static long tree_minflt(const char *const argv[])
{
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);
		dup2(devnull, 0);
		dup2(devnull, 1);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st;
	struct rusage ru;
	while (wait4(pid, &st, 0, &ru) < 0)
		cr_assert_eq(errno, EINTR);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exited %#x", argv[0], st);
	return ru.ru_minflt;
}

/* What a shell's children cost under weft run, in page faults, which
 * on this VM cost tens of microseconds each and dominate a short
 * process's start (docs/preload.md, Start-up): a shimmed process that
 * makes no thread may fault PER_PROCESS more times than natively (~18
 * now; 41 with libunwind, liblzma and libm linked), and a shell's child
 * nothing more (~37 when vfork was fork).  The counts vary by a few
 * from run to run: the least of three runs on each side. */
#define CHILDREN 20
#define PER_PROCESS 30

Test(lazy, shell_children_page_faults, .timeout = 240)
{
	if (PRELOAD_SAN[0])
		cr_skip_test("sanitizer build: its runtime's faults would be counted");
	h_paths();
	char loop[256];
	snprintf(loop, sizeof loop, "i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done",
		 CHILDREN);
	const char *nat[] = { "sh", "-c", loop, NULL };
	const char *wr[] = { h_weft, "run", "--", "sh", "-c", loop, NULL };
	long n = -1, w = -1;
	for (int round = 0; round < 3; round++) {
		long a = tree_minflt(nat), b = tree_minflt(wr);
		n = n < 0 || a < n ? a : n;
		w = w < 0 || b < w ? b : w;
	}
	/* the shell and its children, and the launcher (one more process) */
	long extra = w - n, allowed = (CHILDREN + 2) * PER_PROCESS;
	cr_log_info("sh -c '%d x /bin/true': %ld page faults natively, %ld under weft run", CHILDREN,
		    n, w);
	cr_expect(extra <= allowed,
		  "%ld more page faults under weft run than natively (%ld, %ld), want <= %ld "
		  "(%d per process)",
		  extra, n, w, allowed, PER_PROCESS);
}

/* A constructor that makes a thread starts the runtime before main:
 * main is then a G from the start, and all the rest holds. */
Test(lazy, constructor_makes_a_thread, .timeout = 120)
{
	const char *a[] = { h_prog("lazy"), "threads", NULL };
	h_shim_run(&R, 2, a, (const char *[]){ "LAZY_CTOR_THREAD=1", NULL }, NULL, 60);
	cr_assert_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_expect(h_field(R.out, "tasks0") > 1, "%s", R.out);
	cr_expect(strstr(R.out, "ok threads\n"), "%s", R.out);
}

/* WEFT_START=eager: the runtime before main, as before (the switch back). */
Test(lazy, eager_start_still_works, .timeout = 120)
{
	const char *a[] = { h_prog("lazy"), "threads", NULL };
	h_shim_run(&R, 2, a, (const char *[]){ "WEFT_START=eager", NULL }, NULL, 60);
	cr_assert_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_expect(h_field(R.out, "tasks0") > 1, "eager: the runtime's threads before main's first: %s",
		  R.out);
	cr_expect(strstr(R.out, "ok threads\n"), "%s", R.out);
}
