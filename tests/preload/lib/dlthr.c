/*
 * dlthr.c - a library that tests/preload/dlthread.c dlopens: its code
 * runs while glibc's dlopen holds the loader's locks, and makes threads
 * there.  What it does is read from the environment (DLTHR, set by the
 * program before its dlopen):
 *
 *   ifunc_join  an IFUNC resolver (run during relocation: dlopen holds
 *               dl_load_lock and dl_load_tls_lock) makes a thread and
 *               joins it
 *   ifunc_raw   the resolver makes a thread that writes to a pipe and
 *               waits for it in a raw read(2) (syscall(): a call nothing
 *               sees, which blocks the OS thread); the thread first asks
 *               for its attributes (pthread_getattr_np), a call made
 *               nowhere before
 *   ctor_join   a constructor (dl_load_lock held) makes a thread, joins it
 *   ctor_raw    a constructor, as ifunc_raw
 *
 * dlthr_ran() tells how many threads ran (each adds one).  It is the
 * IFUNC: lib/dlthrb.c uses it, so its resolver runs while the program's
 * dlopen of libdlthrb.so relocates that library (this one, its
 * dependency, is relocated first: its own calls work by then).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_int ran;
static int pfd[2];

static void *adder(void *arg)
{
	atomic_fetch_add(&ran, 1);
	return arg;
}

static void *writer(void *arg)
{
	atomic_fetch_add(&ran, 1);
	/* a call the program makes here for the first time (a preloaded
	 * library that resolves its real functions on first use asks dlsym,
	 * which waits for dl_load_lock) */
	pthread_attr_t a;
	if (pthread_getattr_np(pthread_self(), &a) != 0 || pthread_attr_destroy(&a) != 0)
		abort();
	char c = 'x';
	if (write(pfd[1], &c, 1) != 1)
		abort();
	return arg;
}

/* What the library's code does while dlopen holds the locks. */
static void inside(const char *how)
{
	const char *mode = getenv("DLTHR");
	if (!mode || strncmp(mode, how, strlen(how)) != 0)
		return;
	const char *what = mode + strlen(how);
	pthread_t t;
	if (!strcmp(what, "join")) {
		if (pthread_create(&t, NULL, adder, NULL) != 0)
			abort();
	} else if (!strcmp(what, "raw")) {
		if (pipe(pfd) != 0 || pthread_create(&t, NULL, writer, NULL) != 0)
			abort();
		char c;
		if (syscall(SYS_read, pfd[0], &c, 1) != 1)
			abort();
		close(pfd[0]);
		close(pfd[1]);
	} else {
		abort();
	}
	pthread_join(t, NULL);
}

static int impl(void)
{
	return atomic_load(&ran);
}

__attribute__((used)) static int (*resolve(void))(void)
{
	inside("ifunc_");
	return impl;
}

int dlthr_ran(void) __attribute__((ifunc("resolve")));

__attribute__((constructor)) static void ctor(void)
{
	inside("ctor_");
}
