/*
 * dlthread.c - threads made while a dlopen holds glibc's loader locks
 * (lib/dlthr.c: an IFUNC resolver, which runs while dlopen holds
 * dl_load_lock and dl_load_tls_lock, or a constructor, dl_load_lock
 * only).  A plain pthread program built with gcc -O2; natively each
 * case ends at once: pthread_create allocates the new thread's TLS on
 * the creating thread, which holds the locks (they are recursive).
 *
 *   dlthread MODE [early]   MODE as lib/dlthr.c (ifunc_join, ifunc_raw,
 *                           ctor_join, ctor_raw); early: a thread is made
 *                           and joined before the dlopen (under weft the
 *                           runtime then runs before it; else it starts
 *                           inside the library's code)
 *
 * Prints "dlthread MODE ran=N" and exits 0 if the library's thread ran.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void *noop(void *arg)
{
	return arg;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		FAIL("usage: dlthread MODE [early]");
	if (argc > 2 && !strcmp(argv[2], "early")) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, noop, NULL) == 0);
		CHECK(pthread_join(t, NULL) == 0);
	}
	CHECK(setenv("DLTHR", argv[1], 1) == 0);
	char path[4096];
	const char *slash = strrchr(argv[0], '/');
	int dir = slash ? (int)(slash + 1 - argv[0]) : 0;
	snprintf(path, sizeof path, "%.*slibdlthrb.so", dir, argv[0]);
	void *h = dlopen(path, RTLD_NOW);
	if (!h)
		FAIL("dlopen: %s", dlerror());
	int (*ran)(void) = (int (*)(void))dlsym(h, "dlthrb_ran");
	CHECK(ran != NULL);
	int n = ran();
	printf("dlthread %s ran=%d\n", argv[1], n);
	return n == 1 ? 0 : 1;
}
