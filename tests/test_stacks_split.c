/*
 * test_stacks_split.c - segmented stacks: libweft_split with code built
 * with gcc -fsplit-stack and linked with gold (runtime/splitstack.mk).
 *
 * Deep recursion from the smallest first segment, 100,000 parked
 * segmented Gs, segmented and guarded Gs in one program, channels and
 * hooked calls from segmented Gs, libc (printf, getaddrinfo, qsort)
 * from them, segments reused rather than leaked, segmented Gs moving
 * between OS threads mid-recursion.
 *
 * A sanitizer build has no split-stack variant: this suite is then
 * built against libweft with WEFT_NO_SPLIT and skips itself.
 *
 * Recursive helpers here call nothing built without -fsplit-stack: gold
 * makes a split-stack function that calls non-split code (libc, weft)
 * demand ~1 MiB of free stack on entry, which a recursion would pay at
 * every level.  Such calls sit in small noinline helpers instead.
 */
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "check.h"

#ifdef WEFT_NO_SPLIT

Test(stacks_split, skipped)
{
	cr_skip_test("no split-stack variant in this build (sanitizers)");
}

#else

#define KiB 1024L
#define MiB (1024L * 1024)

/* The split-stack limit of the running context (libgcc keeps it at
 * %fs:0x70): 0 on guarded Gs and g0, inside the stack on segmented Gs. */
static uintptr_t splitlimit(void)
{
	uintptr_t v;
	__asm__ volatile("movq %%fs:0x70, %0" : "=r"(v));
	return v;
}

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	size_t n = strlen(key);
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, key, n))
			kb = atol(line + n);
	if (f)
		fclose(f);
	return kb;
}

static long nmaps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	long n = 0;
	int c;
	while (f && (c = fgetc(f)) != EOF)
		n += c == '\n';
	if (f)
		fclose(f);
	return n;
}

static weft_attr_t seg_attr(size_t size)
{
	weft_attr_t a;
	memset(&a, 0, sizeof a);
	a.stack_kind = WEFT_STACK_SEGMENTED;
	a.stack_size = size;
	return a;
}

static weft_attr_t guard_attr(size_t size)
{
	weft_attr_t a;
	memset(&a, 0, sizeof a);
	a.stack_kind = WEFT_STACK_GUARDED;
	a.stack_size = size;
	return a;
}

/* ~1 KiB per level, pure split-stack code; returns n * 3 */
static __attribute__((noinline)) long down(long n)
{
	volatile char pad[1000];
	pad[0] = 1;
	pad[999] = 2;
	if (n == 0)
		return 0;
	return down(n - 1) + pad[0] + pad[999];
}

/* the same, calling hook(level) every 'every' levels */
static void (*volatile hookfn)(long level);
static __attribute__((noinline)) long down_hook(long n, long every)
{
	volatile char pad[1000];
	pad[0] = 1;
	pad[999] = 2;
	if (n == 0)
		return 0;
	if (n % every == 0)
		hookfn(n);
	return down_hook(n - 1, every) + pad[0] + pad[999];
}

/* ---- which Gs are segmented ---------------------------------------------- */

struct kindres {
	uintptr_t limit;
	uintptr_t sp;
	weft_wg_t *wg;
};

static void report_limit(void *arg)
{
	struct kindres *r = arg;
	volatile char here;
	r->limit = splitlimit();
	r->sp = (uintptr_t)&here;
	weft_wg_done(r->wg);
}

static int kinds_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_wg_t wg = WEFT_WG_INIT;
	struct kindres seg = { .wg = &wg }, guard = { .wg = &wg }, dflt = { .wg = &wg };
	weft_attr_t s = seg_attr(0), g = guard_attr(0);
	weft_wg_add(&wg, 3);
	CHECK(weft_go_attr(&s, report_limit, &seg) > 0);
	CHECK(weft_go_attr(&g, report_limit, &guard) > 0);
	CHECK(weft_go(report_limit, &dflt) > 0);
	weft_wg_wait(&wg);
	/* segmented: a limit below the stack pointer, within the first segment */
	CHECK(seg.limit != 0 && seg.limit < seg.sp && seg.sp - seg.limit < 2 * MiB);
	CHECK(guard.limit == 0);
	CHECK(dflt.limit == 0); /* WEFT_STACK unset: guarded */
	CHECK(splitlimit() == 0); /* the main G is guarded */
	return 0;
}

Test(stacks_split, kinds)
{
	run_main(kinds_body);
}

static int env_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_wg_t wg = WEFT_WG_INIT;
	struct kindres d = { .wg = &wg }, g = { .wg = &wg };
	weft_attr_t ga = guard_attr(0);
	weft_wg_add(&wg, 2);
	weft_go(report_limit, &d);
	weft_go_attr(&ga, report_limit, &g);
	weft_wg_wait(&wg);
	if (splitlimit() == 0)
		return 10; /* the main G follows WEFT_STACK too */
	if (d.limit == 0 || d.limit >= d.sp)
		return 11;
	if (g.limit != 0)
		return 12; /* an explicit kind wins */
	return 0;
}

static int env_child(void)
{
	return weft_main(env_body, 0, NULL);
}

Test(stacks_split, weft_stack_env, .timeout = 30)
{
	char *env[] = { "WEFT_STACK=segmented", NULL };
	struct child c;
	run_child(&c, env, env_child, 20);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "status %#x: %s", c.status,
		  c.err);
}

/* ---- 100 MB of frames from the smallest first segment --------------------------- */

struct deep {
	long levels;
	long result;
	uintptr_t limit0;
	weft_wg_t *wg;
};

static void deep_g(void *arg)
{
	struct deep *d = arg;
	d->limit0 = splitlimit();
	d->result = down(d->levels);
	weft_wg_done(d->wg);
}

static long run_deep(size_t first, long levels)
{
	weft_wg_t wg = WEFT_WG_INIT;
	struct deep d = { .levels = levels, .wg = &wg };
	weft_attr_t a = seg_attr(first);
	weft_wg_add(&wg, 1);
	CHECK(weft_go_attr(&a, deep_g, &d) > 0);
	weft_wg_wait(&wg);
	CHECK(d.limit0 != 0);
	return d.result;
}

/* RSS once it has come down below limit (a G's exit, munmapping its
 * thousands of segments, finishes after weft_wg_done); at most 5 s times
 * test_slow() (a busy machine runs that exit late) */
static long settled_rss(long limit)
{
	long rss = status_kb("VmRSS:");
	for (int i = 0; i < 500 * test_slow() && rss > limit; i++) {
		weft_sleep(10 * 1000 * 1000);
		rss = status_kb("VmRSS:");
	}
	return rss;
}

static int deep_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	const long levels = 100 * 1000; /* ~100 MB of frames */
	long rss0 = status_kb("VmRSS:"), maps[4], rss[4], threads[4];
	for (int i = 0; i < 4; i++) {
		CHECK(run_deep(16 * KiB, levels) == 3 * levels);
		rss[i] = settled_rss(rss0 + 16 * 1024);
		maps[i] = nmaps();
		threads[i] = status_kb("Threads:");
	}
	fprintf(stderr, "deep: mappings %ld %ld %ld %ld, RSS %ld -> %ld %ld %ld %ld KiB, peak %ld KiB\n",
		maps[0], maps[1], maps[2], maps[3], rss0, rss[0], rss[1], rss[2], rss[3],
		status_kb("VmHWM:"));
	/* 100 MB of frames were there, and went back: no memory or mappings
	 * piling up */
	CHECK(status_kb("VmHWM:") > rss0 + 100 * 1024);
	for (int i = 0; i < 4; i++)
		CHECK(rss[i] <= rss0 + 16 * 1024);
	/* (an OS thread started meanwhile - a spare P lent on a busy
	 * machine - brings its stack, guard and malloc arena: up to 6) */
	CHECK(maps[3] <= maps[0] + 8 + 6 * (threads[3] > threads[0] ? threads[3] - threads[0] : 0));
	/* the default first segment, and a large one */
	CHECK(run_deep(0, levels) == 3 * levels);
	CHECK(run_deep(4 * MiB, levels) == 3 * levels);
	return 0;
}

Test(stacks_split, deep_recursion_100mb, .timeout = 120)
{
	run_main(deep_body);
}

/* ---- 100,000 parked segmented Gs ---------------------------------------------- */

#define NPARK 100000
static weft_wg_t park_started = WEFT_WG_INIT, park_release = WEFT_WG_INIT,
		 park_done = WEFT_WG_INIT;
static _Atomic long park_sum;

static void parker(void *arg)
{
	weft_wg_done(&park_started);
	weft_wg_wait(&park_release);
	atomic_fetch_add(&park_sum, (long)(uintptr_t)arg);
	weft_wg_done(&park_done);
}

static int park_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_attr_t a = seg_attr(0);
	long maps0 = nmaps(), rss0 = status_kb("VmRSS:");
	weft_wg_add(&park_release, 1);
	weft_wg_add(&park_started, NPARK);
	weft_wg_add(&park_done, NPARK);
	for (long i = 0; i < NPARK; i++)
		if (weft_go_attr(&a, parker, (void *)(uintptr_t)i) < 0) {
			CHECK(!"weft_go_attr");
			return 1;
		}
	weft_wg_wait(&park_started);
	long maps1 = nmaps(), rss1 = status_kb("VmRSS:");
	long per_g = (rss1 - rss0) * 1024 / NPARK;
	fprintf(stderr, "100000 parked segmented Gs: %ld bytes RSS each, %ld -> %ld mappings\n",
		per_g, maps0, maps1);
	/* far below vm.max_map_count (65530) */
	CHECK(maps1 - maps0 < 5000);
	/* one page of stack and a descriptor, as a guarded G */
	CHECK(per_g < 8 * 1024);
	weft_wg_done(&park_release);
	weft_wg_wait(&park_done);
	CHECK(atomic_load(&park_sum) == (long)NPARK * (NPARK - 1) / 2);
	return 0;
}

Test(stacks_split, parked_100k, .timeout = 120)
{
	run_main(park_body);
}

/* ---- segmented and guarded Gs together ------------------------------------------ */

#define RING 400
#define LAPS 20
static weft_chan_t *ring[RING];
static weft_wg_t ring_wg = WEFT_WG_INIT;

/* Each G passes a token to the next; the segmented ones recurse deeper
 * than a 64K guarded stack could at every hop. */
static void ring_g(void *arg)
{
	long i = (long)(uintptr_t)arg;
	bool segmented = splitlimit() != 0;
	CHECK(segmented == (i % 2 == 0));
	for (int lap = 0; lap < LAPS; lap++) {
		long tok;
		if (weft_chan_recv(ring[i], &tok) != 1) {
			CHECK(!"recv");
			break;
		}
		long levels = segmented ? 300 + tok % 200 : 20;
		CHECK(down(levels) == 3 * levels);
		tok++;
		if (weft_chan_send(ring[(i + 1) % RING], &tok) != 0)
			CHECK(!"send");
	}
	weft_wg_done(&ring_wg);
}

static int mixed_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (int i = 0; i < RING; i++)
		ring[i] = weft_chan_make(sizeof(long), 1);
	weft_attr_t s = seg_attr(16 * KiB), g = guard_attr(64 * KiB);
	weft_wg_add(&ring_wg, RING);
	for (long i = 0; i < RING; i++)
		CHECK(weft_go_attr(i % 2 == 0 ? &s : &g, ring_g, (void *)(uintptr_t)i) > 0);
	long tok = 0;
	CHECK(weft_chan_send(ring[0], &tok) == 0);
	weft_wg_wait(&ring_wg);
	/* the token went round LAPS times; the last send sits in ring[0] */
	CHECK(weft_chan_recv(ring[0], &tok) == 1 && tok == (long)RING * LAPS);
	return 0;
}

Test(stacks_split, mixed_segmented_guarded, .timeout = 60)
{
	run_main(mixed_body);
}

static int mixed_procs_child(void)
{
	int r = weft_main(mixed_body, 0, NULL);
	return r ? r : check_failures ? 20 : 0;
}

Test(stacks_split, mixed_four_threads, .timeout = 60)
{
	char *env[] = { "WEFT_MAXPROCS=4", NULL };
	struct child c;
	run_child(&c, env, mixed_procs_child, 50);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "status %#x: %s", c.status,
		  c.err);
}

/* A guarded G keeps its guard page in a split-stack program: its limit
 * is 0, so split-stack code never grows it, and an overflow is reported. */
static void guarded_overflow(void *arg)
{
	(void)arg;
	down(1000 * 1000);
}

static int guarded_overflow_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_attr_t g = guard_attr(64 * KiB);
	weft_go_attr(&g, guarded_overflow, NULL);
	weft_sleep(5LL * 1000 * 1000 * 1000);
	return 0;
}

static int guarded_overflow_child(void)
{
	return weft_main(guarded_overflow_body, 0, NULL);
}

Test(stacks_split, guarded_overflow_reported, .timeout = 30)
{
	struct child c;
	run_child(&c, NULL, guarded_overflow_child, 20);
	cr_assert(!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0, "survived an overflow");
	cr_assert(strstr(c.err, "overflowed its 64K stack"), "stderr: %s", c.err);
}

/* ---- channels, locks, sleeps and hooked calls from segmented Gs ------------------- */

static weft_mutex_t mu = WEFT_MUTEX_INIT;
static long shared_counter;

/* Everything that parks, deep in a recursion (so on a libgcc segment). */
static int pipes[2];

static __attribute__((noinline)) void park_everything(long level)
{
	char c = (char)level;
	weft_mutex_lock(&mu);
	shared_counter++;
	weft_mutex_unlock(&mu);
	CHECK(weft_sleep(100 * 1000) == 0);
	struct timespec ts = { 0, 100 * 1000 };
	CHECK(nanosleep(&ts, NULL) == 0 || err() == EINTR); /* hooked: parks */
	CHECK(write(pipes[1], &c, 1) == 1);
	char back;
	CHECK(read(pipes[0], &back, 1) == 1); /* hooked: parks while empty */
}

static weft_wg_t hooks_wg = WEFT_WG_INIT, ponger_wg = WEFT_WG_INIT;

static void hooks_g(void *arg)
{
	(void)arg;
	CHECK(down_hook(400, 50) == 3 * 400);
	weft_wg_done(&hooks_wg);
}

static weft_chan_t *pp_a, *pp_b;

static void pinger(void *arg)
{
	(void)arg;
	for (long i = 0; i < 2000; i++) {
		CHECK(weft_chan_send(pp_a, &i) == 0);
		long v;
		CHECK(weft_chan_recv(pp_b, &v) == 1 && v == i + 1);
	}
	weft_wg_done(&hooks_wg);
}

static void ponger(void *arg)
{
	(void)arg;
	long v;
	while (weft_chan_recv(pp_a, &v) == 1) {
		v++;
		CHECK(weft_chan_send(pp_b, &v) == 0);
	}
	weft_wg_done(&ponger_wg);
}

static int hooks_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	CHECK(pipe(pipes) == 0);
	hookfn = park_everything;
	weft_attr_t s = seg_attr(16 * KiB), d = seg_attr(0);
	pp_a = weft_chan_make(sizeof(long), 0);
	pp_b = weft_chan_make(sizeof(long), 0);
	weft_wg_add(&hooks_wg, 9);
	weft_wg_add(&ponger_wg, 1);
	for (int i = 0; i < 8; i++)
		CHECK(weft_go_attr(i % 2 ? &s : &d, hooks_g, NULL) > 0);
	CHECK(weft_go_attr(&s, pinger, NULL) > 0);
	CHECK(weft_go_attr(&d, ponger, NULL) > 0);
	weft_wg_wait(&hooks_wg);
	weft_chan_close(pp_a); /* the ponger ends */
	weft_wg_wait(&ponger_wg);
	CHECK(shared_counter == 8 * (400 / 50));
	close(pipes[0]);
	close(pipes[1]);
	return 0;
}

Test(stacks_split, chan_sync_hooks, .timeout = 60)
{
	run_main(hooks_body);
}

/* ---- libc from segmented Gs ------------------------------------------------------- */

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

static __attribute__((noinline)) void use_libc(long level)
{
	char buf[256];
	snprintf(buf, sizeof buf, "level %ld %.3f %s", level, level / 7.0, "x");
	CHECK(strncmp(buf, "level ", 6) == 0);
	printf("segmented G at level %ld says hello\n", level);
	fflush(stdout);
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	int e = getaddrinfo("localhost", "80", &hints, &res);
	CHECK(e == 0 && res);
	if (!e)
		freeaddrinfo(res);
	long v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	qsort(v, 64, sizeof v[0], cmp_long); /* libc calling back into split code */
	for (int i = 0; i < 64; i++)
		CHECK(v[i] == i);
}

static weft_wg_t libc_wg = WEFT_WG_INIT;

static void libc_g(void *arg)
{
	(void)arg;
	CHECK(down_hook(300, 100) == 3 * 300);
	use_libc(0);
	weft_wg_done(&libc_wg);
}

static int libc_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	hookfn = use_libc;
	weft_attr_t s = seg_attr(16 * KiB), d = seg_attr(0);
	weft_wg_add(&libc_wg, 4);
	for (int i = 0; i < 4; i++)
		CHECK(weft_go_attr(i % 2 ? &s : &d, libc_g, NULL) > 0);
	weft_wg_wait(&libc_wg);
	return check_failures ? 30 : 0;
}

static int libc_child(void)
{
	return weft_main(libc_body, 0, NULL);
}

Test(stacks_split, libc_printf_getaddrinfo, .timeout = 60)
{
	struct child c;
	run_child(&c, NULL, libc_child, 50);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "status %#x: %s", c.status,
		  c.err);
	cr_assert(strstr(c.out, "segmented G at level 300 says hello"), "stdout: %s", c.out);
	cr_assert(strstr(c.out, "segmented G at level 0 says hello"), "stdout: %s", c.out);
}

/* ---- segments are reused, not leaked ------------------------------------------------ */

static weft_wg_t churn_wg = WEFT_WG_INIT;

static void churn_g(void *arg)
{
	long levels = (long)(uintptr_t)arg;
	CHECK(down(levels) == 3 * levels);
	weft_wg_done(&churn_wg);
}

static void churn_exit_g(void *arg)
{
	(void)arg;
	weft_wg_done(&churn_wg);
	down_hook(200, 200); /* weft_exit from a libgcc segment */
	CHECK(!"weft_exit returned");
}

static __attribute__((noinline)) void exit_now(long level)
{
	(void)level;
	weft_exit();
}

#define NROUNDS 12
#define PERROUND 5000
#define PERBATCH 250 /* Gs alive at once: at most two batches */

static int churn_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	hookfn = exit_now;
	weft_attr_t s = seg_attr(16 * KiB), d = seg_attr(0);
	long maps[NROUNDS], rss[NROUNDS], vm[NROUNDS], threads[NROUNDS];
	for (int round = 0; round < NROUNDS; round++) {
		/* in batches, so that how many Gs - each with its first
		 * segment - are alive at once does not depend on how the
		 * machine schedules us (a busy one lends Ps, and a spawner
		 * then runs far ahead of its Gs) */
		for (long i = 0; i < PERROUND; i++) {
			if (i % PERBATCH == 0) {
				if (i)
					weft_wg_wait(&churn_wg);
				weft_wg_add(&churn_wg, PERBATCH);
			}
			/* small first segments recurse into libgcc's segments,
			 * default ones stay in their first */
			bool small = i % 3 != 0;
			void (*fn)(void *) = small && i % 10 == 1 ? churn_exit_g : churn_g;
			long levels = small ? i % 97 * 3 : i % 13;
			CHECK(weft_go_attr(small ? &s : &d, fn, (void *)(uintptr_t)levels) > 0);
		}
		weft_wg_wait(&churn_wg);
		weft_sleep(50 * 1000 * 1000); /* the last exits finish */
		rss[round] = status_kb("VmRSS:");
		vm[round] = status_kb("VmSize:");
		maps[round] = nmaps();
		weft_stats_t st;
		weft_stats(&st);
		threads[round] = st.threads;
	}
	/* once the pools of dead Gs are full, nothing grows but the odd OS
	 * thread that sysmon starts while an M sits in munmap or is not run
	 * by a busy machine (each up to 8 MiB of stack and 64 MiB of glibc
	 * malloc arena of address space, a few mappings), and at most one
	 * more chunk of first segments
	 * (SPLIT_CHUNK, 256 MiB).  Leaked segments would be 1 MiB each,
	 * thousands per round; leaked first segments a chunk per 256. */
	fprintf(stderr, "churn: rounds 5..11: %ld..%ld mappings, RSS %ld..%ld KiB, "
		"address space %ld..%ld KiB, threads %ld..%ld\n", maps[5], maps[11], rss[5],
		rss[11], vm[5], vm[11], threads[5], threads[11]);
	long newthreads = threads[11] > threads[5] ? threads[11] - threads[5] : 0;
	CHECK(vm[11] <= vm[5] + 256 * 1024 + newthreads * 80 * 1024);
	CHECK(rss[11] <= rss[5] + 16 * 1024);
	CHECK(maps[11] <= maps[5] + 64 + 4 * newthreads);
	return 0;
}

Test(stacks_split, segments_reused, .timeout = 120)
{
	run_main(churn_body);
}

/* ---- migration between OS threads mid-recursion ----------------------------------- */

static weft_wg_t mig_wg = WEFT_WG_INIT;
static _Atomic int mig_moves;

static __attribute__((noinline)) void yield_here(long level)
{
	(void)level;
	long before = syscall(SYS_gettid); /* not pthread_self: it is const */
	weft_yield();
	if (syscall(SYS_gettid) != before)
		atomic_fetch_add(&mig_moves, 1);
}

static void mig_g(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20; i++)
		CHECK(down_hook(500, 25) == 3 * 500);
	weft_wg_done(&mig_wg);
}

static int mig_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	hookfn = yield_here;
	weft_attr_t s = seg_attr(16 * KiB);
	weft_wg_add(&mig_wg, 16);
	for (int i = 0; i < 16; i++)
		CHECK(weft_go_attr(&s, mig_g, NULL) > 0);
	weft_wg_wait(&mig_wg);
	return check_failures ? 40 : atomic_load(&mig_moves) > 0 ? 0 : 41;
}

static int mig_child(void)
{
	return weft_main(mig_body, 0, NULL);
}

Test(stacks_split, migrate_mid_recursion, .timeout = 60)
{
	char *env[] = { "WEFT_MAXPROCS=4", NULL };
	struct child c;
	run_child(&c, env, mig_child, 50);
	cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "status %#x: %s", c.status,
		  c.err);
}

/* ---- descriptors reused across kinds and sizes ----------------------------------- */

struct reuse {
	int kind;
	size_t size;
	long levels;
	int ok;
	weft_wg_t *wg;
};

static void reuse_g(void *arg)
{
	struct reuse *r = arg;
	uintptr_t lim = splitlimit();
	bool seg = lim != 0;
	r->ok = seg == (r->kind == WEFT_STACK_SEGMENTED) && down(r->levels) == 3 * r->levels;
	weft_wg_done(r->wg);
}

/* A dead G's descriptor goes to the next G whatever it asks for: each
 * must get the kind it asked for, and room for 3/4 of its size. */
static int reuse_body(int argc, char **argv)
{
	(void)argc, (void)argv;
	static const size_t sizes[] = { 16 * KiB, 0, 64 * KiB, 1 * MiB };
	static const int kinds[] = { WEFT_STACK_SEGMENTED, WEFT_STACK_GUARDED, WEFT_STACK_DEFAULT };
	enum { N = 3000 };
	static struct reuse r[N];
	weft_wg_t wg = WEFT_WG_INIT;
	for (int round = 0; round < 4; round++) {
		weft_wg_add(&wg, N);
		for (int i = 0; i < N; i++) {
			weft_attr_t a;
			memset(&a, 0, sizeof a);
			a.stack_size = sizes[(i + round) % 4];
			a.stack_kind = kinds[(i / 4 + round) % 3];
			r[i].kind = a.stack_kind;
			r[i].size = a.stack_size;
			size_t room = a.stack_size ? a.stack_size : 256 * KiB;
			/* segmented ones go deeper than their first segment */
			r[i].levels = (long)(room * 3 / 4 / 1100) *
				      (a.stack_kind == WEFT_STACK_SEGMENTED ? 3 : 1);
			r[i].wg = &wg;
			CHECK(weft_go_attr(&a, reuse_g, &r[i]) > 0);
		}
		weft_wg_wait(&wg);
		for (int i = 0; i < N; i++)
			CHECK(r[i].ok);
	}
	return 0;
}

Test(stacks_split, descriptors_reused_across_kinds, .timeout = 60)
{
	run_main(reuse_body);
}

#endif /* WEFT_NO_SPLIT */
