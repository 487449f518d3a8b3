/*
 * test_preload_tls.c - thread-local state follows the thread under the
 * shim with WEFT_TLS=thread (runtime/tls.c; the default under the shim).
 *
 * The programs (tests/preload/tls.c, tls_cxx.cc, built with gcc/g++ -O2
 * without weft) run natively first (so the program itself is right),
 * then under the shim on 1 and 2 Ps.  Each case fails under
 * WEFT_TLS=shared (Gs then share their OS thread's TLS; shown by
 * shared_mode_shares).
 */
#include "preload/harness.h"

static struct hrun R, N; /* under weft, native */
static const char *const thread_env[] = { "WEFT_TLS=thread", NULL };

/* Run "tls CASE" natively, then under the shim on 1 and 2 Ps, and
 * expect "<word> wrong=0".  rounds2: the case's rounds on 2 Ps, where
 * the Gs migrate (NULL: its default); 1 P and natively run fewer. */
static void tls_case(const char *cs, const char *rounds2, int timeout_s)
{
	const char *few = rounds2 ? "1000" : NULL;
	const char *a[] = { h_prog("tls"), cs, few, NULL };
	h_run(&N, a, NULL, NULL, timeout_s);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int procs = 1; procs <= 2; procs++) {
		a[2] = procs == 2 ? rounds2 : few;
		h_shim_run(&R, procs, a, thread_env, NULL, timeout_s);
		cr_expect_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect(strstr(R.out, "wrong=0 "), "procs %d: %s%s", procs, R.out, R.err);
	}
}

/* tests/preload/dlthread.c MODE: a library's code makes a thread while
 * the program's dlopen holds glibc's loader locks; natively, then on 1
 * and 2 Ps, with the runtime started before the dlopen (early) and
 * inside it; 5 more times on 2 Ps after an early start, where weft's
 * own signal Gs may first run during the dlopen (1 run in ~20 hung so
 * before tls_gbegin waited parked).  A hang is killed after 30 s
 * (h_run). */
static void dl_case(const char *mode)
{
	for (int early = 0; early <= 1; early++) {
		const char *a[] = { h_prog("dlthread"), mode, early ? "early" : NULL, NULL };
		h_run(&N, a, NULL, NULL, 30);
		cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
		for (int procs = 1; procs <= (early ? 7 : 2); procs++) {
			int np = procs < 2 ? procs : 2;
			h_shim_run(&R, np, a, NULL, NULL, 30);
			cr_expect_eq(h_code(&R), 0, "procs %d %s: %s%s", np, a[2] ? a[2] : "", R.out,
				     R.err);
			cr_expect(strstr(R.out, "ran=1"), "procs %d: %s", np, R.out);
		}
	}
}

/* An IFUNC resolver, run while dlopen relocates (glibc holds
 * dl_load_tls_lock), makes a thread and joins it: the new G's TLS is
 * filled on its maker, which holds the lock (tls_gprep), and no M is made
 * while it is held (newm).  Before: the G waited for the lock in
 * _dl_allocate_tls, and a new M in pthread_create, for ever. */
Test(tls, dlopen_ifunc_thread_joined, .timeout = 300)
{
	dl_case("ifunc_join");
}

/* The resolver makes a thread and waits for it in a raw read(2) that
 * blocks its OS thread: sysmon lends the P to the spare M made when the
 * thread was (mspare), as no M can be made until the dlopen ends. */
Test(tls, dlopen_ifunc_thread_while_blocked, .timeout = 300)
{
	dl_case("ifunc_raw");
}

/* A constructor (dl_load_lock only) does the same; its thread's first
 * call of pthread_getattr_np made the shim look up the real
 * pthread_attr_init with dlsym, which waited for dl_load_lock, held by
 * the constructor's G blocked in its read (ctor_raw hung on 1 and 2 Ps):
 * every real function is now looked up when the runtime starts
 * (hook_resolve_all). */
Test(tls, dlopen_constructor_thread, .timeout = 300)
{
	dl_case("ctor_join");
	dl_case("ctor_raw");
}

/* errno = 0; n = read(); if (errno): gcc -O2 keeps errno's address
 * across the read, in which the G parks; 100,000 reads on 2 Ps. */
Test(tls, errno_address_kept_across_read, .timeout = 900)
{
	tls_case("errno", "5000", 400);
}

/* while ((n = read()) < 0 && errno == EAGAIN) park and retry; 100,000
 * reads on 2 Ps. */
Test(tls, eagain_retry_loop, .timeout = 900)
{
	tls_case("eagain", "5000", 400);
}

/* A __thread int (and a __thread buffer with an initialiser) in 1,000
 * threads, each reading its own back across 100 blocking calls. */
Test(tls, thread_variable_per_thread, .timeout = 300)
{
	tls_case("var", NULL, 120);
}

/* C++ thread_local with a constructor and destructor in 1,000 threads:
 * each built once and destroyed once, on its own thread. */
Test(tls, cxx_thread_local_ctor_dtor, .timeout = 300)
{
	const char *a[] = { h_prog("tls_cxx"), NULL };
	h_run(&N, a, NULL, NULL, 120);
	cr_assert_eq(h_code(&N), 0, "natively: %s%s", N.out, N.err);
	for (int procs = 1; procs <= 2; procs++) {
		h_shim_run(&R, procs, a, thread_env, NULL, 120);
		cr_expect_eq(h_code(&R), 0, "procs %d: %s%s", procs, R.out, R.err);
		cr_expect(strstr(R.out, "ctors=1000 dtors=1000 wrong=0"), "procs %d: %s", procs, R.out);
	}
}

/* flockfile held across a blocking call: the FILE's owner is the
 * thread (glibc records its TCB), so two threads never interleave. */
Test(tls, flockfile_across_a_park, .timeout = 300)
{
	tls_case("flock", NULL, 120);
}

/* pthread_self() (const: the compiler may keep it) across a park. */
Test(tls, pthread_self_kept, .timeout = 300)
{
	tls_case("self", NULL, 120);
}

/* A dlopen'ed library's __thread (dynamic TLS through the dtv). */
Test(tls, dlopened_module_thread_variable, .timeout = 300)
{
	tls_case("dlopen", NULL, 120);
}

/* A library with initial-exec TLS dlopen'ed once threads run: glibc
 * puts its block in the static surplus, which a G's block at its stack
 * top no longer holds; the threads made after it get blocks of the whole
 * area apart from their stacks (a warning says so once), each with the
 * module's initial value (without that, glibc wrote the module's image
 * over the new thread's own frames). */
Test(tls, dlopened_initial_exec_module, .timeout = 600)
{
	tls_case("dlopen_ie", NULL, 120);
	cr_expect(strstr(R.err, "uses static TLS"), "%s", R.err);
	/* and a G whose first run comes while the dlopen runs (weft's signal
	 * router or watcher, started with the first thread, on a busy
	 * machine): glibc waited in _dl_allocate_tls for the dlopen to end
	 * and then wrote the new module's image below the G's block, over
	 * its own frames (a SIGSEGV, a return to 0, in 2-25 % of the runs on
	 * 2 Ps; runtime/tls.c scratch_alloc).  Ten more runs on 2 Ps. */
	const char *a[] = { h_prog("tls"), "dlopen_ie", NULL };
	for (int i = 0; i < 10; i++) {
		h_shim_run(&R, 2, a, thread_env, NULL, 120);
		cr_assert_eq(h_code(&R), 0, "run %d: %s%s", i, R.out, R.err);
		cr_assert(strstr(R.out, "wrong=0 "), "run %d: %s%s", i, R.out, R.err);
		cr_assert(strstr(R.err, "uses static TLS"), "run %d: %s", i, R.err);
	}
}

/* -fstack-protector-all (the canary at %fs:0x28) and setjmp/longjmp
 * (pointers mangled with the guard at %fs:0x30) in Gs that park. */
Test(tls, stack_protector_and_setjmp, .timeout = 300)
{
	tls_case("guard", NULL, 120);
}

/* What glibc's start_thread sets up in a new thread's TLS: the locale's
 * ctype pointers (printf("%f"), toupper) and the resolver state. */
Test(tls, libc_thread_state, .timeout = 300)
{
	tls_case("libc", NULL, 120);
}

/* 20,000 short threads on 4 Ps that make the runtime allocate (a key's
 * value, a timer, a contended mutex).  The runtime's allocator (jemalloc)
 * keeps its thread state in TLS: run on a G's block it made one there,
 * linked into jemalloc's list of threads, and the list pointed into freed
 * stacks once the Gs ended (a crash in je_tsd_state_set about once in 60
 * runs of pthreads mutex_contention).  Now it only runs on an OS thread's
 * own TLS, and every block is checked when it is freed: the old code
 * dies at the first thread's end with "weft: fatal: ... jemalloc's
 * tsd". */
Test(tls, runtime_allocator_never_in_a_thread_block, .timeout = 300)
{
	const char *a[] = { h_prog("tls"), "churn", "20", NULL };
	h_shim_run(&R, 4, a, thread_env, NULL, 240);
	cr_expect_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_expect(strstr(R.out, "churn wrong=0 total=20000"), "%s%s", R.out, R.err);
	cr_expect(!strstr(R.err, "weft: fatal"), "%s", R.err);
}

/* glibc's malloc cache of an ended thread (its TLS variable tcache, a
 * 640-byte struct and the chunks it holds) goes to the next thread: 9,000
 * threads that malloc and free grow glibc's heap in use by < 2 MiB (it
 * grew by ~8 MB, ~900 bytes a thread, when each block's cache leaked). */
Test(tls, malloc_cache_given_back, .timeout = 300)
{
	tls_case("mleak", NULL, 120);
}

/* The last value of key=N in text (schedtrace prints a line a period). */
static long last_field(const char *text, const char *key)
{
	long v = -1;
	char k[64];
	snprintf(k, sizeof k, " %s=", key);
	for (const char *p = text; (p = strstr(p, k)); p += strlen(k))
		v = strtol(p + strlen(k), NULL, 10);
	return v;
}

/* The scheduler keeps the G's block (runtime/tls.c, g0keep): a thread
 * that naps alone on 1 P goes G -> scheduler -> the same G at each nap,
 * and that costs no FS base load (it cost two: the scheduler ran on the
 * M's own TLS).  schedtrace's switches=G->G/G->sched/sched->G and
 * fsloads=N, read at its last line; errno and a __thread value stay the
 * thread's across every nap.  WEFT_DEBUG=g0keep=0 is the control. */
Test(tls, scheduler_keeps_the_block, .timeout = 300)
{
	const char *a[] = { h_prog("tls"), "nap", "4000", NULL };
	const char *env[] = { "WEFT_DEBUG=schedtrace=20", NULL };
	h_shim_run(&R, 1, a, env, NULL, 240);
	cr_assert_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_expect(strstr(R.out, "nap wrong=0 total=4000"), "%s%s", R.out, R.err);
	long fs = last_field(R.err, "fsloads");
	/* switches=A/B/C: B, G -> scheduler, on the last line */
	const char *last = NULL;
	for (const char *p = R.err; (p = strstr(p, " switches=")); p++)
		last = p;
	const char *sl = last ? strchr(last, '/') : NULL;
	long gs0 = sl ? strtol(sl + 1, NULL, 10) : -1;
	cr_assert(fs >= 0 && gs0 >= 0, "no schedtrace counts: %s", R.err);
	/* each nap is one trip through the scheduler; a few loads for the
	 * thread's start and the main G's join */
	cr_expect(gs0 >= 1000, "only %ld trips through the scheduler: %s", gs0, R.err);
	cr_expect(fs < gs0 / 10, "%ld FS loads for %ld trips through the scheduler", fs, gs0);

	const char *env0[] = { "WEFT_DEBUG=schedtrace=20,g0keep=0", NULL };
	h_shim_run(&R, 1, a, env0, NULL, 240);
	cr_assert_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_expect(strstr(R.out, "nap wrong=0 total=4000"), "%s%s", R.out, R.err);
	fs = last_field(R.err, "fsloads");
	cr_expect(fs >= 2 * 1000, "g0keep=0: %ld FS loads: %s", fs, R.err);
}

/* The switch counts of schedtrace's last line: G->G, G->scheduler,
 * scheduler->G. */
static bool last_switches(const char *text, long sw[3])
{
	const char *last = NULL;
	for (const char *p = text; (p = strstr(p, " switches=")); p++)
		last = p;
	if (!last)
		return false;
	char *e;
	sw[0] = strtol(last + 10, &e, 10);
	sw[1] = *e == '/' ? strtol(e + 1, &e, 10) : -1;
	sw[2] = *e == '/' ? strtol(e + 1, &e, 10) : -1;
	return sw[1] >= 0 && sw[2] >= 0;
}

/* An M that goes to sleep with every P idle makes the deadlock check
 * (stopm) on the block its scheduler kept: it loaded the M's own TLS
 * for it and the block back, two FS loads per sleep (29% of a preloaded
 * memcached's arch_prctl).  Three threads napping on two Ps: every FS
 * load is now a switch into a G (at most one each, plus a few for the
 * threads' start and the joins); before, 9,157 and 9,474 loads for
 * 6,006 and 5,989 switches into a G. */
Test(tls, idle_m_deadlock_check_loads_no_block, .timeout = 300)
{
	const char *a[] = { h_prog("tls"), "naps", "2000", NULL };
	const char *env[] = { "WEFT_DEBUG=schedtrace=20", NULL };
	h_shim_run(&R, 2, a, env, NULL, 240);
	cr_assert_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_expect(strstr(R.out, "naps wrong=0 total=6000"), "%s%s", R.out, R.err);
	long fs = last_field(R.err, "fsloads"), sw[3];
	cr_assert(fs >= 0 && last_switches(R.err, sw), "no schedtrace counts: %s", R.err);
	long into = sw[0] + sw[2];
	cr_expect(into >= 1000, "only %ld switches into a G: %s", into, R.err);
	cr_expect(fs <= into + 50, "%ld FS loads for %ld switches into a G", fs, into);
}

/* No WEFT_TLS: every thread its own TLS (the default under the shim). */
Test(tls, thread_is_the_default, .timeout = 120)
{
	const char *a[] = { h_prog("tls"), "var", NULL };
	h_shim_run(&R, 2, a, NULL, NULL, 60);
	cr_expect_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_expect(strstr(R.out, "var wrong=0 "), "%s%s", R.out, R.err);
}

/* WEFT_TLS=shared: the old behaviour, Gs share their OS thread's TLS
 * (so the cases above are real tests of the switch). */
Test(tls, shared_mode_shares, .timeout = 120)
{
	const char *env[] = { "WEFT_TLS=shared", NULL };
	const char *a[] = { h_prog("tls"), "var", NULL };
	h_shim_run(&R, 1, a, env, NULL, 60);
	cr_expect_eq(h_code(&R), 1, "%s%s", R.out, R.err);
	cr_expect(h_field(R.out, "wrong") > 0, "%s", R.out);
}

/* A bad WEFT_TLS: a warning, then the default (thread). */
Test(tls, bad_env_value, .timeout = 120)
{
	const char *env[] = { "WEFT_TLS=sometimes", NULL };
	const char *a[] = { h_prog("tls"), "var", NULL };
	h_shim_run(&R, 2, a, env, NULL, 60);
	cr_expect_eq(h_code(&R), 0, "%s%s", R.out, R.err);
	cr_expect(strstr(R.out, "var wrong=0 "), "%s%s", R.out, R.err);
	cr_expect(strstr(R.err, "weft: ignoring WEFT_TLS=sometimes: want thread or shared"), "%s",
		  R.err);
}

/* Memory per thread (issue 13: at most one page over shared TLS): a G's
 * block lies in an interleaved slot apart from its stack, its TCB and
 * the TLS above jemalloc's dead tsd in the tsd of the slot above, libc's
 * TLS in that of the slot below (runtime/tls.c, "the interleaved
 * slots"): 2,944 bytes a block for this program, with glibc's dtv (~300
 * bytes) on the heap.  2,000 threads parked in a read on 1 P, VmRSS
 * grown per thread, thread against shared: <= 4 KiB more (3.4-3.6 KiB);
 * 4.5 KiB with the blocks at the stack tops (5.2 KiB, one page or two,
 * as the stack's depth falls), 8.5 KiB before session 6. */
Test(tls, block_costs_at_most_a_page, .timeout = 300)
{
	const char *a[] = { h_prog("tls"), "rss", "2000", NULL };
	const char *shared[] = { "WEFT_TLS=shared", NULL };
	h_shim_run(&R, 1, a, shared, NULL, 120);
	cr_assert_eq(h_code(&R), 0, "shared: %s%s", R.out, R.err);
	long s = h_field(R.out, "per_thread");
	h_shim_run(&R, 1, a, thread_env, NULL, 120);
	cr_assert_eq(h_code(&R), 0, "thread: %s%s", R.out, R.err);
	long t = h_field(R.out, "per_thread");
	cr_assert(s > 0 && t > 0, "no figures: %ld %ld", s, t);
	cr_expect(t - s <= 4096, "%ld bytes per thread with TLS of its own, %ld shared: %ld more",
		  t, s, t - s);
}

/* The blocks at the stack tops (WEFT_DEBUG=tlsslot=0; what a program
 * whose TLS does not let the slots interleave gets) stay right: a
 * __thread variable per thread and glibc's own thread state, 1 and 2 Ps. */
Test(tls, stack_top_blocks, .timeout = 300)
{
	const char *env[] = { "WEFT_TLS=thread", "WEFT_DEBUG=tlsslot=0", NULL };
	const char *cases[] = { "var", "libc" };
	for (size_t c = 0; c < 2; c++) {
		const char *a[] = { h_prog("tls"), cases[c], NULL };
		for (int procs = 1; procs <= 2; procs++) {
			h_shim_run(&R, procs, a, env, NULL, 120);
			cr_expect_eq(h_code(&R), 0, "%s, procs %d: %s%s", cases[c], procs, R.out, R.err);
			cr_expect(strstr(R.out, "wrong=0 "), "%s, procs %d: %s%s", cases[c], procs, R.out,
				  R.err);
			cr_expect(!strstr(R.err, "ignoring WEFT_DEBUG"), "%s", R.err);
		}
	}
}
