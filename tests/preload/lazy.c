/*
 * lazy.c - a plain program for the shim's lazy start (docs/preload.md,
 * "Start-up"): what a program costs before it makes its first thread,
 * and that everything works across the moment it does.  Built without
 * weft; tests/test_preload_lazy.c runs it with and without the shim.
 *
 *   lazy plain     no thread ever: prints tasks= (its OS threads),
 *                  child_tasks= (those of a child it forked), maps= /
 *                  anon= (its mappings, all / anonymous) and rare_libs=
 *                  (mappings of libunwind, liblzma, libm) after using
 *                  what the shim hooks (a pipe, sleep, a mutex, a key, a
 *                  signal handler, fork)
 *   lazy threads   state made before the first thread (a held error-
 *                  checking mutex, a key, the signal mask, a handler)
 *                  holds after it; 200 threads then run (cond, mutex,
 *                  sleep, join); prints tasks= and unwind_maps= (those
 *                  of libunwind) at the end
 *   lazy forks     fork + exec before the first thread, then threads,
 *                  then fork (the child makes threads) and exec again
 *   lazy dump      a thread blocks in lazy_dump_worker, main raises
 *                  SIGQUIT: the shim's dump (stderr, exit 2) must show
 *                  that function in the thread's backtrace (libunwind is
 *                  loaded as the runtime starts, not linked)
 *   lazy vfork     vfork + exec before the first thread (the child
 *                  first writes a global and sets its mask, as a shell's
 *                  does): prints vfork_shared=1 if the parent sees the
 *                  write (a real vfork: the child ran on its memory);
 *                  then threads start, and vfork + exec once more
 *
 * With LAZY_CTOR_THREAD=1 a constructor makes a thread first.
 *
 * Prints "ok <case>" last on success; exits 1 with a message otherwise.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, "%s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, \
				errno);                                            \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

static int tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	CHECK(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Mappings in /proc/self/maps: all, anonymous ones (no path), and
 * those of libraries whose path has name in it (NULL: none asked). */
static void maps_of(int *all, int *anon, const char *name, int *named)
{
	FILE *f = fopen("/proc/self/maps", "r");
	CHECK(f);
	char line[512];
	*all = *anon = 0;
	if (named)
		*named = 0;
	while (fgets(line, sizeof line, f)) {
		(*all)++;
		if (name && strstr(line, name))
			(*named)++;
		/* address perms offset dev inode [path] */
		char *p = line;
		for (int field = 0; field < 5 && p; field++) {
			p = strchr(p, ' ');
			if (p)
				while (*p == ' ')
					p++;
		}
		if (!p || *p == '\n' || *p == 0)
			(*anon)++;
	}
	fclose(f);
}

static void maps(int *all, int *anon)
{
	maps_of(all, anon, NULL, NULL);
}

/* Mappings of the libraries weft uses only once its runtime runs
 * (libunwind for dumps, the liblzma it needs, libm). */
static int rare_libs(void)
{
	int all, anon, unw, lzma, m;
	maps_of(&all, &anon, "/libunwind", &unw);
	maps_of(&all, &anon, "/liblzma", &lzma);
	maps_of(&all, &anon, "/libm.so", &m);
	return unw + lzma + m;
}

static int unwind_maps(void)
{
	int all, anon, unw;
	maps_of(&all, &anon, "/libunwind", &unw);
	return unw;
}

static volatile sig_atomic_t got;
static void on_usr1(int s)
{
	(void)s;
	got++;
}

static void nap(long ns)
{
	struct timespec ts = { 0, ns };
	CHECK(nanosleep(&ts, NULL) == 0);
}

/* What an ordinary single-threaded program uses that the shim hooks;
 * the OS threads of a child it forks. */
static int use_hooks(void)
{
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "x", 1) == 1);
	char c;
	CHECK(read(p[0], &c, 1) == 1 && c == 'x');
	close(p[0]);
	close(p[1]);
	nap(1000000);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	CHECK(pthread_mutex_lock(&mu) == 0);
	CHECK(pthread_mutex_unlock(&mu) == 0);
	pthread_key_t k;
	CHECK(pthread_key_create(&k, NULL) == 0);
	CHECK(pthread_setspecific(k, &k) == 0 && pthread_getspecific(k) == &k);
	CHECK(signal(SIGUSR1, on_usr1) != SIG_ERR);
	CHECK(raise(SIGUSR1) == 0 && got == 1);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		nap(1000000);
		_exit(tasks());
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static int plain(void)
{
	int child = use_hooks();
	int all, anon;
	maps(&all, &anon);
	printf("tasks=%d\nchild_tasks=%d\nmaps=%d\nanon=%d\nrare_libs=%d\nok plain\n", tasks(),
	       child, all, anon, rare_libs());
	return 0;
}

/* ---- threads after state made without them ------------------------------------- */

static pthread_mutex_t held; /* error-checking, locked by main before any thread */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int arrived;
static pthread_key_t key;

#define NT 200

static void *worker(void *arg)
{
	long i = (long)arg;
	CHECK(pthread_getspecific(key) == NULL); /* main's value is main's */
	CHECK(pthread_setspecific(key, arg) == 0);
	CHECK(pthread_mutex_trylock(&held) == EBUSY);
	nap(1000000 + (i % 7) * 100000);
	CHECK(pthread_mutex_lock(&mu) == 0);
	if (++arrived == NT)
		CHECK(pthread_cond_broadcast(&cv) == 0);
	while (arrived < NT)
		CHECK(pthread_cond_wait(&cv, &mu) == 0);
	CHECK(pthread_mutex_unlock(&mu) == 0);
	CHECK(pthread_getspecific(key) == arg);
	return (void *)(i * 2);
}

static int threads(void)
{
	pthread_mutexattr_t a;
	CHECK(pthread_mutexattr_init(&a) == 0);
	CHECK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK) == 0);
	CHECK(pthread_mutex_init(&held, &a) == 0);
	CHECK(pthread_mutex_lock(&held) == 0);
	CHECK(pthread_key_create(&key, NULL) == 0);
	CHECK(pthread_setspecific(key, &key) == 0);
	CHECK(signal(SIGUSR1, on_usr1) != SIG_ERR);
	sigset_t s, old;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	CHECK(pthread_sigmask(SIG_BLOCK, &s, NULL) == 0);
	int tasks0 = tasks();

	pthread_t t[NT];
	for (long i = 0; i < NT; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
	/* main's state, as it was before the first thread */
	CHECK(pthread_getspecific(key) == &key);
	CHECK(pthread_mutex_lock(&held) == EDEADLK); /* still main's */
	CHECK(pthread_sigmask(SIG_BLOCK, NULL, &old) == 0 && sigismember(&old, SIGUSR2));
	CHECK(pthread_equal(pthread_self(), pthread_self()));
	for (long i = 0; i < NT; i++) {
		void *r;
		CHECK(pthread_join(t[i], &r) == 0 && r == (void *)(i * 2));
	}
	CHECK(pthread_mutex_unlock(&held) == 0);
	CHECK(raise(SIGUSR1) == 0 && got == 1);
	printf("tasks0=%d\ntasks=%d\nunwind_maps=%d\nok threads\n", tasks0, tasks(),
	       unwind_maps());
	return 0;
}

/* ---- fork and exec before and after -------------------------------------------- */

static void *twice(void *arg)
{
	return (void *)((long)arg * 2);
}

/* Start n threads, join them: 0 if all came back right. */
static int spawn_join(int n)
{
	for (long i = 0; i < n; i++) {
		pthread_t t;
		void *r;
		if (pthread_create(&t, NULL, twice, (void *)i) || pthread_join(t, &r) ||
		    r != (void *)(i * 2))
			return 1;
	}
	return 0;
}

/* fork a child that runs 'threads' threads then execs echo: its status. */
static void fork_exec(int threads_, const char *word)
{
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (spawn_join(threads_))
			_exit(3);
		execlp("echo", "echo", word, (char *)NULL);
		_exit(127);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int forks(void)
{
	fork_exec(0, "before");
	fork_exec(10, "child-threads-before");
	CHECK(system("echo system-before") == 0);
	CHECK(spawn_join(10) == 0);
	fork_exec(0, "after");
	fork_exec(10, "child-threads-after");
	CHECK(system("echo system-after") == 0);
	printf("ok forks\n");
	return 0;
}

/* ---- vfork ---------------------------------------------------------------------- */

static volatile pid_t vforked; /* written by a vfork child */

/* vfork, write vforked, set the mask and exec true, as dash does: was
 * the child's write seen here (the child ran on this memory)? */
static int vfork_exec(void)
{
	vforked = 0;
	pid_t pid = vfork();
	CHECK(pid >= 0);
	if (pid == 0) {
		vforked = getpid();
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execlp("true", "true", (char *)NULL);
		_exit(127);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return vforked == pid;
}

static int vforks(void)
{
	int shared = vfork_exec();
	CHECK(vfork_exec() == shared);
	/* the first threads start the runtime: an exec in a vfork child
	 * before must have left nothing behind that holds them up */
	CHECK(spawn_join(10) == 0);
	(void)vfork_exec();
	CHECK(spawn_join(10) == 0);
	printf("vfork_shared=%d\nok vfork\n", shared);
	return 0;
}

/* ---- a dump ---------------------------------------------------------------------- */

static int dump_pipe[2], dump_ready[2];

/* Not static: its name is what the dump must show. */
__attribute__((noinline)) void *lazy_dump_worker(void *arg)
{
	char c = 'r';
	CHECK(write(dump_ready[1], &c, 1) == 1);
	CHECK(read(dump_pipe[0], &c, 1) >= 0); /* never written: parks */
	return arg;
}

static int dump(void)
{
	CHECK(pipe(dump_pipe) == 0 && pipe(dump_ready) == 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, lazy_dump_worker, NULL) == 0);
	char c;
	CHECK(read(dump_ready[0], &c, 1) == 1);
	fflush(stdout);
	raise(SIGQUIT); /* the dump, then exit 2 */
	nap(100000000);
	for (;;)
		pause();
}

/* LAZY_CTOR_THREAD=1: a constructor makes (and joins) a thread, as some
 * libraries do, so the runtime is up before main. */
static void *ctor_thread(void *arg)
{
	return arg;
}

__attribute__((constructor)) static void ctor(void)
{
	const char *e = getenv("LAZY_CTOR_THREAD");
	if (!e || strcmp(e, "1"))
		return;
	static int token;
	pthread_t t;
	void *r;
	CHECK(pthread_create(&t, NULL, ctor_thread, &token) == 0);
	CHECK(pthread_join(t, &r) == 0 && r == &token);
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	if (!strcmp(c, "plain"))
		return plain();
	if (!strcmp(c, "threads"))
		return threads();
	if (!strcmp(c, "forks"))
		return forks();
	if (!strcmp(c, "vfork"))
		return vforks();
	if (!strcmp(c, "dump"))
		return dump();
	fprintf(stderr, "usage: lazy plain|threads|forks|vfork|dump\n");
	return 2;
}
