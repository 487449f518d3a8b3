/*
 * tls.c - thread-local state that must follow the thread, not the OS
 * thread it happens to run on: a plain pthread program, built with gcc
 * -O2 (and -fstack-protector-all, tests/preload.mk), that knows nothing
 * of weft.  Under weft each thread is a G that parks in the blocking
 * calls below and may come back on another OS thread (WEFT_TLS=thread
 * gives it TLS of its own; WEFT_TLS=shared shows what goes wrong).
 *
 *   tls errno [R]  errno = 0; n = read(); if (errno) ...  (gcc keeps &errno)
 *   tls eagain [R] while read() < 0 && errno == EAGAIN: park, retry
 *                  (20 pairs of threads, R rounds each; default 5,000:
 *                  100,000 reads)
 *   tls var        a __thread int per thread, across 100 blocking calls
 *                  (and main sees what a constructor left in its own)
 *   tls flock      flockfile held across a blocking call: no interleaving
 *   tls self       pthread_self() kept across a blocking call
 *   tls dlopen     a dlopen'ed library's __thread variable per thread
 *   tls dlopen_ie  the same, initial-exec (static TLS), dlopen'ed after
 *                  the first thread
 *   tls guard      stack protector and setjmp/longjmp (pointer guard)
 *   tls libc       glibc's per-thread state a new thread gets: the locale's
 *                  ctype tables (printf("%f"), toupper), the resolver state
 *   tls mleak      10 rounds of 1,000 threads that malloc and free: glibc's
 *                  heap in use (mallinfo2) grows by < 2 MiB from the first
 *                  round to the last (a thread's malloc cache is given back)
 *   tls nap [R]    one thread naps R times (50 us), alone: errno and a
 *                  __thread value stay its own
 *   tls naps [R]   the same, three threads at once
 *   tls rss [N]    N threads (default 2,000) parked in a pipe read: prints
 *                  "rss per_thread=B" (VmRSS grown from before the first
 *                  thread to all parked, over N); the test compares modes
 *   tls churn [R]  R rounds (default 100) of 1,000 short threads that use
 *                  what the runtime allocates for a thread (a key's value,
 *                  a timed sleep, a contended mutex) and end
 *
 * Each prints "<name> wrong=N ..." and exits 0 if N == 0.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <resolv.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_long wrong, total;
static atomic_int stop;

static void bad(const char *fmt, long a, long b)
{
	if (atomic_fetch_add(&wrong, 1) < 5) {
		fprintf(stderr, fmt, a, b);
		fputc('\n', stderr);
	}
}

/* Threads that keep setting errno to junk on whatever OS thread runs them. */
static void *junk(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		errno = EIO;
		usleep(20);
		errno = EIO;
	}
	return NULL;
}

static pthread_t junks[8];

static void junk_start(void)
{
	for (int i = 0; i < 8; i++)
		pthread_create(&junks[i], NULL, junk, NULL);
}

static void junk_stop(void)
{
	atomic_store(&stop, 1);
	for (int i = 0; i < 8; i++)
		pthread_join(junks[i], NULL);
}

/* ---- errno = 0; read(); if (errno) ------------------------------------------- */

struct pair {
	int rd, wr;
	int rounds;
};

/* The writer answers each request byte after a short park, so every read
 * of the reader parks. */
static void *echo_writer(void *arg)
{
	struct pair *p = arg;
	char c;
	for (int i = 0; i < p->rounds; i++) {
		if (read(p->wr, &c, 1) != 1)
			break;
		usleep(20); /* the reader finds nothing yet */
		if (write(p->wr, &c, 1) != 1)
			break;
	}
	return NULL;
}

static void *errno_reader(void *arg)
{
	struct pair *p = arg;
	char c = 'x';
	for (int i = 0; i < p->rounds; i++) {
		if (write(p->rd, &c, 1) != 1)
			abort();
		errno = 0;
		ssize_t n = read(p->rd, &c, 1); /* parks; may come back elsewhere */
		if (errno != 0)
			bad("read returned %ld but errno is %ld", (long)n, errno);
		atomic_fetch_add(&total, 1);
	}
	return NULL;
}

static int run_pairs(void *(*reader)(void *), int npairs, int rounds)
{
	pthread_t r[64], w[64];
	struct pair p[64];
	for (int i = 0; i < npairs; i++) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			return 2;
		p[i] = (struct pair){ sv[0], sv[1], rounds };
		pthread_create(&w[i], NULL, echo_writer, &p[i]);
		pthread_create(&r[i], NULL, reader, &p[i]);
	}
	for (int i = 0; i < npairs; i++) {
		pthread_join(r[i], NULL);
		pthread_join(w[i], NULL);
	}
	return 0;
}

/* ---- while (read() < 0 && errno == EAGAIN) --------------------------------- */

static void *eagain_reader(void *arg)
{
	struct pair *p = arg;
	char c = 'x';
	fcntl(p->rd, F_SETFL, fcntl(p->rd, F_GETFL) | O_NONBLOCK);
	for (int i = 0; i < p->rounds; i++) {
		if (write(p->rd, &c, 1) != 1)
			abort();
		ssize_t n;
		while ((n = read(p->rd, &c, 1)) < 0 && errno == EAGAIN)
			usleep(50); /* parks; may come back elsewhere */
		if (n != 1)
			bad("read returned %ld, errno %ld", (long)n, errno);
		atomic_fetch_add(&total, 1);
	}
	return NULL;
}

/* ---- __thread int ------------------------------------------------------------ */

static __thread int tv;
static __thread char tbuf[64] = "initial";
static __thread int ctor_tv; /* set by a constructor, on the main thread */

__attribute__((constructor)) static void set_ctor_tv(void)
{
	ctor_tv = 77;
}

static void *var_thread(void *arg)
{
	int id = (int)(long)arg;
	if (tv != 0 || strcmp(tbuf, "initial") != 0)
		bad("thread %ld starts with tv=%ld", id, tv);
	tv = id;
	snprintf(tbuf, sizeof tbuf, "t%d", id);
	for (int i = 0; i < 100; i++) {
		usleep(1 + (i & 3)); /* parks */
		char want[64];
		snprintf(want, sizeof want, "t%d", id);
		if (tv != id || strcmp(tbuf, want) != 0)
			bad("thread %ld reads tv=%ld", id, tv);
		atomic_fetch_add(&total, 1);
	}
	return NULL;
}

static int run_var(void)
{
	enum { N = 1000 };
	if (ctor_tv != 77) /* main keeps the main thread's thread-locals */
		bad("main reads the constructor's __thread as %ld, want %ld", ctor_tv, 77);
	static pthread_t t[N];
	for (long i = 0; i < N; i++)
		if (pthread_create(&t[i], NULL, var_thread, (void *)(i + 1)) != 0)
			return 2;
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* ---- flockfile across a blocking call ------------------------------------------- */

static FILE *shared_file;

static void *flock_thread(void *arg)
{
	char tag = (char)(long)arg;
	/* the other thread, finding the FILE locked, blocks its OS thread
	 * in glibc's lock (not a call weft parks): few rounds */
	for (int i = 0; i < 50; i++) {
		flockfile(shared_file);
		fputc(tag, shared_file);
		usleep(1); /* parks holding the FILE's lock */
		fputc(tag, shared_file);
		funlockfile(shared_file);
		usleep(1);
	}
	return NULL;
}

static int run_flock(void)
{
	shared_file = tmpfile();
	if (!shared_file)
		return 2;
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, flock_thread, (void *)('a' + i));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	rewind(shared_file);
	int a, b;
	while ((a = fgetc(shared_file)) != EOF) {
		b = fgetc(shared_file);
		if (a != b)
			bad("interleaved: %c then %c", a, b);
		atomic_fetch_add(&total, 1);
	}
	return 0;
}

/* ---- pthread_self kept across a blocking call ----------------------------------- */

enum { NSELF = 200 };
static pthread_t selfs[NSELF];

static void *self_thread(void *arg)
{
	pthread_t *mine = &selfs[(long)arg];
	for (int i = 0; i < 100; i++) {
		pthread_t a = pthread_self();
		usleep(1);
		pthread_t b = pthread_self();
		if (!pthread_equal(a, b) || !pthread_equal(b, *mine))
			bad("pthread_self changed (%lx, %lx)", (long)a, (long)b);
		atomic_fetch_add(&total, 1);
	}
	return NULL;
}

static int run_self(void)
{
	for (long i = 0; i < NSELF; i++)
		pthread_create(&selfs[i], NULL, self_thread, (void *)i);
	for (int i = 0; i < NSELF; i++)
		pthread_join(selfs[i], NULL);
	return 0;
}

/* ---- a dlopen'ed library's __thread ------------------------------------------------- */

static int *(*mod_var)(void);
static unsigned char *(*mod_buf)(void); /* 1 KiB: 7, then zeros */

static void *dl_thread(void *arg)
{
	int id = (int)(long)arg;
	int *v = mod_var();
	unsigned char *b = mod_buf();
	if (*v != 42)
		bad("thread %ld: module TLS starts at %ld", id, *v);
	if (b[0] != 7 || b[1] || b[1023])
		bad("thread %ld: module TLS buffer starts with %ld", id, b[0]);
	*v = id;
	memset(b, id & 0xff, 1024);
	for (int i = 0; i < 50; i++) {
		usleep(1);
		if (*mod_var() != id || mod_var() != v)
			bad("thread %ld: module TLS reads %ld", id, *mod_var());
		if (b[0] != (id & 0xff) || b[1023] != (id & 0xff))
			bad("thread %ld: module TLS buffer reads %ld", id, b[1023]);
		atomic_fetch_add(&total, 1);
	}
	return NULL;
}

static void *noop_thread(void *arg)
{
	return arg;
}

/* lib: libtlsmod.so (dynamic TLS) or libtlsie.so (initial-exec: static
 * TLS, taken from glibc's surplus after threads - and the runtime -
 * started; each thread made after it has the module's TLS, as natively) */
static int run_dlopen(const char *self, const char *lib)
{
	char path[4096];
	const char *slash = strrchr(self, '/');
	int dir = slash ? (int)(slash + 1 - self) : 0;
	pthread_t t0;
	pthread_create(&t0, NULL, noop_thread, NULL);
	pthread_join(t0, NULL);
	snprintf(path, sizeof path, "%.*s%s", dir, self, lib);
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 2;
	}
	mod_var = (int *(*)(void))dlsym(h, "tlsmod_var");
	mod_buf = (unsigned char *(*)(void))dlsym(h, "tlsmod_buf");
	if (!mod_var || !mod_buf)
		return 2;
	enum { N = 200 };
	static pthread_t t[N];
	for (long i = 0; i < N; i++)
		pthread_create(&t[i], NULL, dl_thread, (void *)(i + 1));
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* ---- stack protector, setjmp/longjmp ------------------------------------------------- */

static __attribute__((noinline)) int guarded(int n)
{
	char buf[64];
	snprintf(buf, sizeof buf, "%d", n);
	usleep(1); /* parks inside a protected frame */
	return (int)strlen(buf);
}

static __attribute__((noinline)) void jumper(jmp_buf *env, int n)
{
	usleep(1);
	longjmp(*env, n); /* the saved sp/pc are mangled with the pointer guard */
}

static void *guard_thread(void *arg)
{
	(void)arg;
	for (int i = 1; i <= 100; i++) {
		if (guarded(i) < 1)
			bad("guarded(%ld) %ld", i, 0);
		jmp_buf env;
		volatile int got = setjmp(env);
		if (got == 0)
			jumper(&env, i);
		else if (got != i)
			bad("longjmp gave %ld, want %ld", got, i);
		atomic_fetch_add(&total, 1);
	}
	return NULL;
}

static int run_guard(void)
{
	enum { N = 100 };
	static pthread_t t[N];
	for (int i = 0; i < N; i++)
		pthread_create(&t[i], NULL, guard_thread, NULL);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* ---- glibc's per-thread initialisation (__ctype_init, __resp) ------------------------ */

static void *libc_thread(void *arg)
{
	int id = (int)(long)arg;
	for (int i = 0; i < 20; i++) {
		char buf[64];
		snprintf(buf, sizeof buf, "%.2f", id + 0.25);
		char want[64];
		snprintf(want, sizeof want, "%d.25", id);
		if (strcmp(buf, want) != 0 || toupper('q') != 'Q' || !isalpha('z') ||
		    strtod("2.5", NULL) != 2.5)
			bad("thread %ld: ctype/printf wrong (%ld)", id, i);
		if (res_init() != 0 || __res_state() == NULL)
			bad("thread %ld: res_init failed (%ld)", id, i);
		usleep(1);
		atomic_fetch_add(&total, 1);
	}
	return NULL;
}

static int run_libc(void)
{
	enum { N = 100 };
	static pthread_t t[N];
	for (long i = 0; i < N; i++)
		pthread_create(&t[i], NULL, libc_thread, (void *)i);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* ---- many short threads: the runtime allocates and frees for each ------------------- */

static pthread_key_t churn_key;
static pthread_mutex_t churn_mu = PTHREAD_MUTEX_INITIALIZER;
static long churn_count;

static void *churn_thread(void *arg)
{
	long id = (long)arg;
	/* a key's value: the runtime's per-thread key table */
	pthread_setspecific(churn_key, (void *)(id + 1));
	/* a timed park: the runtime's timer for this thread */
	struct timespec ts = { 0, 1000 };
	nanosleep(&ts, NULL);
	pthread_mutex_lock(&churn_mu);
	churn_count++;
	pthread_mutex_unlock(&churn_mu);
	if (pthread_getspecific(churn_key) != (void *)(id + 1))
		bad("thread %ld: key value %ld", id, (long)pthread_getspecific(churn_key));
	atomic_fetch_add(&total, 1);
	return NULL;
}

static int run_churn(int rounds)
{
	enum { N = 1000 };
	static pthread_t t[N];
	pthread_key_create(&churn_key, NULL);
	for (int r = 0; r < rounds; r++) {
		for (long i = 0; i < N; i++)
			pthread_create(&t[i], NULL, churn_thread, (void *)i);
		for (int i = 0; i < N; i++)
			pthread_join(t[i], NULL);
	}
	if (churn_count != (long)rounds * N)
		bad("count %ld, want %ld", churn_count, (long)rounds * N);
	return 0;
}

/* ---- glibc's per-thread malloc cache, given back when a thread ends ------------------- */

static void *mleak_thread(void *arg)
{
	(void)arg;
	void *a = malloc(100), *b = malloc(1000), *c = malloc(200);
	usleep(1);
	free(a);
	free(b);
	free(c);
	atomic_fetch_add(&total, 1);
	return NULL;
}

/* ---- one thread that naps, alone ------------------------------------------ */

/* Each nap parks the thread with nothing else to run: its G goes to the
 * scheduler and comes back on the same M.  errno and a __thread value
 * stay its own across (the scheduler keeps the G's block loaded). */
static __thread long nap_tv;

static void *nap_thread(void *arg)
{
	long n = (long)arg;
	nap_tv = 7;
	for (long i = 0; i < n; i++) {
		errno = 77;
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
		if (errno != 77)
			bad("nap %ld: errno %ld", i, errno);
		if (nap_tv != 7 + i)
			bad("nap %ld: __thread value %ld", i, nap_tv);
		nap_tv++;
		atomic_fetch_add(&total, 1);
	}
	return NULL;
}

static int run_nap(int rounds)
{
	pthread_t t;
	pthread_create(&t, NULL, nap_thread, (void *)(long)rounds);
	pthread_join(t, NULL);
	return 0;
}

/* Three threads that nap together: with two Ps one M blocks in the
 * netpoller for the next nap's end while another finds nothing to run
 * and sleeps (stopm) with every P idle, on the block of the thread it
 * ran last (the deadlock check it makes there loads no other block). */
static int run_naps(int rounds)
{
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, nap_thread, (void *)(long)rounds);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static size_t inuse(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

static int run_mleak(void)
{
	enum { N = 1000, ROUNDS = 10 };
	static pthread_t t[N];
	size_t first = 0;
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < N; i++)
			pthread_create(&t[i], NULL, mleak_thread, NULL);
		for (int i = 0; i < N; i++)
			pthread_join(t[i], NULL);
		if (r == 0)
			first = inuse();
	}
	long grew = (long)inuse() - (long)first;
	printf("mleak grew=%ld\n", grew);
	if (grew > 2 << 20)
		bad("glibc's heap in use grew by %ld bytes over %ld threads", grew, (ROUNDS - 1) * N);
	return 0;
}

static int rss_pipe[2];
static atomic_int rss_parked;

static void *rss_thread(void *arg)
{
	char b;
	(void)arg;
	atomic_fetch_add(&rss_parked, 1);
	if (read(rss_pipe[0], &b, 1) != 1)
		bad("read %ld of %ld", 0, 1);
	return NULL;
}

static long vmrss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char l[256];
	long v = -1;
	while (f && fgets(l, sizeof l, f))
		if (!strncmp(l, "VmRSS:", 6))
			v = atol(l + 6);
	if (f)
		fclose(f);
	return v;
}

/* Memory per parked thread: its stack's touched pages, its TLS block
 * (at its stack top under weft), glibc's dtv for it. */
static int run_rss(int n)
{
	pthread_t *t = calloc((size_t)n, sizeof *t);
	if (!t || pipe(rss_pipe))
		return 2;
	long r0 = vmrss_kib();
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, rss_thread, NULL))
			return 2;
	while (atomic_load(&rss_parked) < n)
		usleep(1000);
	usleep(50000); /* the last ones into their read */
	long r1 = vmrss_kib();
	printf("rss per_thread=%ld\n", (r1 - r0) * 1024 / n);
	char b[64] = { 0 };
	for (int left = n; left > 0;) {
		ssize_t w = write(rss_pipe[1], b, left < 64 ? (size_t)left : 64);
		if (w <= 0)
			return 2;
		left -= (int)w;
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	atomic_fetch_add(&total, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *c = argv[1];
	int rc;
	int rounds = argc > 2 ? atoi(argv[2]) : 5000;
	if (rounds < 1 || rounds > 1000000)
		return 2;
	if (!strcmp(c, "errno")) {
		junk_start();
		rc = run_pairs(errno_reader, 20, rounds);
		junk_stop();
	} else if (!strcmp(c, "eagain")) {
		junk_start();
		rc = run_pairs(eagain_reader, 20, rounds);
		junk_stop();
	} else if (!strcmp(c, "var")) {
		rc = run_var();
	} else if (!strcmp(c, "flock")) {
		rc = run_flock();
	} else if (!strcmp(c, "self")) {
		rc = run_self();
	} else if (!strcmp(c, "dlopen")) {
		rc = run_dlopen(argv[0], "libtlsmod.so");
	} else if (!strcmp(c, "dlopen_ie")) {
		rc = run_dlopen(argv[0], "libtlsie.so");
	} else if (!strcmp(c, "guard")) {
		rc = run_guard();
	} else if (!strcmp(c, "libc")) {
		rc = run_libc();
	} else if (!strcmp(c, "mleak")) {
		rc = run_mleak();
	} else if (!strcmp(c, "nap")) {
		rc = run_nap(rounds);
	} else if (!strcmp(c, "naps")) {
		rc = run_naps(rounds);
	} else if (!strcmp(c, "rss")) {
		rc = run_rss(argc > 2 ? rounds : 2000);
	} else if (!strcmp(c, "churn")) {
		rc = run_churn(argc > 2 ? rounds : 100);
	} else {
		return 2;
	}
	if (rc)
		return rc;
	printf("%s wrong=%ld total=%ld\n", c, atomic_load(&wrong), atomic_load(&total));
	return atomic_load(&wrong) == 0 ? 0 : 1;
}
