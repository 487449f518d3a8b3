/*
 * preload.c - start-up of an unmodified program under the shim.
 *
 * __libc_start_main is interposed: glibc runs the program's constructors
 * on the real main thread as usual, then calls our main, which starts
 * the runtime and runs the program's main as the first G, with a stack
 * as large as RLIMIT_STACK gives a main thread (committed only as it is
 * touched).  main's return value goes to exit() on that G.  The real
 * main thread then only waits (it is no M) and takes the process's
 * signals (signal.c).
 *
 * Lazy start.  A program that never makes a thread should cost what it
 * costs natively (shells, make and the short children they run all
 * inherit the shim).  So main first runs as it would natively: on the
 * real main thread, on the process stack, with no runtime - no OS
 * thread, no P, no stack pool, no netpoller.  A hook called there is a
 * plain thread's call (a blocking read just blocks: main is the only
 * thread).  The first call that needs a G (pthread_create, thrd_create)
 * starts the runtime and turns the running
 * main into the main G (rt_adopt): the same stack and frames, the same
 * TLS rules as an eager start; the real main thread moves to a small
 * stack of its own and becomes the signal thread, as it is with an eager
 * start.  WEFT_START=eager (and WEFT_PTHREADS=native) start everything
 * before main instead, with main on a stack from the runtime.
 *
 * Environment.  weft run records what it changed in WEFT_RUN_* (each
 * "+value" or "-" for unset); the shim puts LD_PRELOAD back at once and
 * WEFT_MAXPROCS / WEFT_STACK_SIZE once the runtime has read them, so
 * programs this one runs see the environment exactly as the user set it.
 */
#include "shim.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

bool shim_native STARTUP_DATA;
_Atomic bool shim_mainplain STARTUP_DATA;

extern int (*rt_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
extern void (*rt_gexit_hook)(struct g *gp);
void gthr_gexit(struct g *gp) HIDDEN;
void shim_fork_init(void) HIDDEN;

void shim_warn_once(_Atomic int *flag, const char *fmt, ...)
{
	if (atomic_exchange(flag, 1))
		return;
	char buf[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	warn("%s", buf);
}

/* ---- environment ----------------------------------------------------------------- */

/* name from WEFT_RUN_<tag>: "+value" set it back, "-" unset it. */
STARTUP_TEXT static void restore(const char *name, const char *saved)
{
	const char *v = getenv(saved);
	if (!v)
		return;
	if (v[0] == '+')
		setenv(name, v + 1, 1);
	else
		unsetenv(name);
	unsetenv(saved);
}

/* ---- start-up ------------------------------------------------------------------------- */

DEFREAL(pthread_create);

static bool eager STARTUP_DATA; /* WEFT_START=eager: the runtime before main */

STARTUP_TEXT static void readenv(void)
{
	const char *p = getenv("WEFT_PTHREADS");
	if (p && *p) {
		if (!strcmp(p, "native"))
			shim_native = true;
		else if (strcmp(p, "green"))
			warn("ignoring WEFT_PTHREADS=%s: want green or native", p);
	}
	p = getenv("WEFT_START");
	if (p && *p) {
		if (!strcmp(p, "eager"))
			eager = true;
		else if (strcmp(p, "lazy"))
			warn("ignoring WEFT_START=%s: want lazy or eager", p);
	}
}

__attribute__((constructor)) static void shim_ctor(void)
{
	restore("LD_PRELOAD", "WEFT_RUN_LD_PRELOAD");
	readenv();
	/* resolve now, while nothing can recurse into us */
	(void)REAL(pthread_create);
	/* before the program's constructors take stdout (C++'s iostreams) */
	stdio_std();
}

static _Atomic int startstate STARTUP_DATA; /* 0 not yet, 1 starting, 2 up */
static void main_go(void);
static bool onmainstack(void);
static void mainbounds(void);

void shim_start(void)
{
	if (likely(atomic_load_explicit(&startstate, memory_order_acquire) == 2) &&
	    likely(!atomic_load_explicit(&shim_mainplain, memory_order_relaxed)))
		return;
	shim_rtstart();
	/* only main itself clears it (main_go): a true here on main's own
	 * stack is main asking for the first time */
	if (atomic_load_explicit(&shim_mainplain, memory_order_relaxed) && onmainstack())
		main_go();
}

/* The runtime (not main's G): once, any thread. */
void shim_rtstart(void)
{
	if (likely(atomic_load_explicit(&startstate, memory_order_acquire) == 2))
		return;
	int z = 0;
	if (!atomic_compare_exchange_strong(&startstate, &z, 1)) {
		while (atomic_load_explicit(&startstate, memory_order_acquire) != 2)
			sys3(SYS_sched_yield, 0, 0, 0);
		return;
	}
	/* the runtime's own threads must be real ones */
	rt_pthread_create = sig_rt_create;
	rt_gexit_hook = gthr_gexit;
	/* every thread its own TLS unless WEFT_TLS=shared (docs/preload.md);
	 * in native mode threads are real ones and have theirs anyway */
	rt_tls_default = !shim_native;
	rt_mutex_threadstarve = !shim_native; /* real threads: glibc's unfairness (sync.c) */
	/* the shim sees every call that shares a file (fork.c, signal.c's
	 * syscall, io.c's sendmsg): a sole file parks with no F_GETFL */
	pd_soletrust = true;
	mainbounds();
	runtime_ensure();
	shim_fork_init(); /* after the runtime: see fork.c */
	atomic_store_explicit(&startstate, 2, memory_order_release);
}

/* ---- main --------------------------------------------------------------------------------- */

static int (*real_main)(int, char **, char **) STARTUP_DATA;

struct mainctx {
	int argc;
	char **argv;
	char **envp;
	void *tcb; /* the real main thread's TCB, for the main G, or NULL */
};
static struct mainctx mainctx STARTUP_DATA;
/* The process stack, main's under a lazy start: mainhi from
 * __libc_start_main, mainlo once the runtime starts (mainbounds: a
 * getrlimit no process that never starts it needs).  Both NULL if the
 * runtime started before __libc_start_main (a library's constructor
 * made a thread): main is then never adopted. */
static char *mainlo STARTUP_DATA, *mainhi STARTUP_DATA;

/* What RLIMIT_STACK allows a main thread (1 GiB if unlimited). */
static size_t main_stack(void)
{
	struct rlimit rl;
	size_t sz = 8UL << 20;
	if (getrlimit(RLIMIT_STACK, &rl) == 0)
		sz = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1UL << 30) ? 1UL << 30
									   : (size_t)rl.rlim_cur;
	if (sz < 64 * 1024)
		sz = 64 * 1024;
	return sz & ~(size_t)4095;
}

static void main_g(void *arg)
{
	struct mainctx *c = arg;
	if (c->tcb)
		tls_adopt(getg(), c->tcb);
	gthr_main_init();
	if (shim_native)
		weft_lock_thread(); /* native: main keeps its OS thread (and __thread) too */
	exit(real_main(c->argc, c->argv, c->envp));
}

/* ---- lazy start -------------------------------------------------------------------------- */

#define SIGSTACK (256 * 1024) /* the signal thread's stack after main_go */

/* In shim_rtstart, once, before startstate is 2: whoever then reads
 * mainlo (onmainstack, main_go: after shim_rtstart) sees it. */
static void mainbounds(void)
{
	if (mainhi)
		mainlo = mainhi - main_stack();
}

/* Is the caller main, running on the process stack before its G? */
static bool onmainstack(void)
{
	char *sp = __builtin_frame_address(0);
	return mainlo && sp >= mainlo && sp < mainhi;
}

/* On the real main thread, in the first call that needs main to be a G:
 * as weft_main_shim does before an eager start, then the running main
 * becomes the main G (rt_adopt) and this thread the signal thread. */
static void main_go(void)
{
	char *alt = mmap(NULL, SIGSTACK, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (alt == MAP_FAILED)
		fatal("no memory for the signal thread's stack (%s)", strerror(errno_get()));
	(void)mprotect(alt, 4096, PROT_NONE); /* a guard page; without one it still runs */
	gthr_main_alias();
	gthr_main_keys();
	sig_start();
	void *tcb = NULL;
	if (!shim_native && (weftenv.tls >= 0 ? weftenv.tls : rt_tls_default) && tls_init())
		tcb = tls_movemain();
	if (rt_adopt("main", mainlo, mainhi, alt + SIGSTACK, sig_thread) < 0)
		fatal("no memory to make main a green thread");
	/* main, now the main G on an M */
	if (tcb)
		tls_adopt(getg(), tcb);
	gthr_main_init();
	atomic_store_explicit(&shim_mainplain, false, memory_order_relaxed);
}

STARTUP_TEXT static int weft_main_shim(int argc, char **argv, char **envp)
{
	mainctx = (struct mainctx){ argc, argv, envp, NULL };
	/* lazily - unless a constructor made a thread, which started the
	 * runtime already: then main is a G at once, as with an eager start */
	if (!eager && !shim_native && atomic_load_explicit(&startstate, memory_order_acquire) == 0) {
		envinit(); /* WEFT_* as the user set them, before they are put back */
		restore("WEFT_MAXPROCS", "WEFT_RUN_MAXPROCS");
		restore("WEFT_STACK_SIZE", "WEFT_RUN_STACK_SIZE");
		atomic_store_explicit(&shim_mainplain, true, memory_order_relaxed);
		return real_main(argc, argv, envp); /* exit() takes it, on whatever runs main */
	}
	shim_start();
	restore("WEFT_MAXPROCS", "WEFT_RUN_MAXPROCS");
	restore("WEFT_STACK_SIZE", "WEFT_RUN_STACK_SIZE");
	gthr_main_keys();
	sig_start();
	/* The main G takes the real main thread's TLS and TCB over, with
	 * whatever the constructors left there (__thread values, C++
	 * thread_local destructors, glibc's state), and the real main thread,
	 * which from now on only handles signals, moves to a fresh block. */
	weft_attr_t a = { .stack_size = main_stack(), .name = "main", .tls = WEFT_TLS_SHARED };
	if (!shim_native && (weftenv.tls >= 0 ? weftenv.tls : rt_tls_default) && tls_init())
		mainctx.tcb = tls_movemain();
	if (weft_go_attr(&a, main_g, &mainctx) < 0) {
		warn("cannot start main as a green thread (%s): running it on the main thread",
		     strerror(errno_get()));
		return real_main(argc, argv, envp);
	}
	sig_thread();
}

typedef int (*lsm_fn)(int (*)(int, char **, char **), int, char **, void (*)(void),
		      void (*)(void), void (*)(void), void *);

STARTUP_TEXT HOOK int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv,
			   void (*init)(void), void (*fini)(void), void (*rtld_fini)(void),
			   void *stack_end)
{
	static void *_Atomic real_lsm STARTUP_DATA;
	lsm_fn real = (lsm_fn)hook_real(&real_lsm, "__libc_start_main");
	real_main = main;
	/* main's frames are below stack_end; the process stack holds what
	 * RLIMIT_STACK allows below it */
	mainhi = (char *)(((uintptr_t)stack_end + 4095) & ~(uintptr_t)4095);
	return real(weft_main_shim, argc, argv, init, fini, rtld_fini, stack_end);
}
