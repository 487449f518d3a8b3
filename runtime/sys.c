/*
 * sys.c - the C library functions the runtime needs that are not system
 * calls, resolved once, bypassing weft's own hooks (sys.h says why).
 *
 * Which definition.  The runtime's objects are linked into libweft.so
 * (with hook/, which defines none of these names) and into the preload
 * shim libweft_preload.so (with hook/preload/, which defines every one of
 * them).  The function wanted is the one the program would reach if weft interposed
 * nothing: the first definition in the global scope (glibc's, or a
 * sanitizer's interceptor in front of it, which must see the runtime's
 * threads) - unless that first definition is in the very object this
 * code is in, the shim, and then the next one after it (RTLD_NEXT).
 * dlsym(RTLD_NEXT) alone would be wrong inside libweft.so: it skips
 * whatever precedes libweft.so, a sanitizer runtime included; a pointer
 * the shim sets would leave libweft.so's default naming the hooked
 * symbol.  Unversioned lookups give each name's default version, the one
 * a link against glibc binds.
 *
 * All are resolved together at the first call of any (the runtime's
 * start, through sys_pthread_once), never in a signal handler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>

#include "runtime.h"
#include "sys.h"

static struct {
	int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	void (*pthread_exit)(void *);
	pthread_t (*pthread_self)(void);
	int (*pthread_getattr_np)(pthread_t, pthread_attr_t *);
	int (*pthread_once)(pthread_once_t *, void (*)(void));
	int (*sigaction)(int, const struct sigaction *, struct sigaction *);
	int (*posix_spawnp)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			    const posix_spawnattr_t *, char *const[], char *const[]);
} libc;
/* 1 once every libc field is set: release after the stores, acquire
 * before the loads.  Two threads may both resolve; they store the same. */
static _Atomic int resolved;

/* The definition of name the program would reach without weft. */
static void *libcsym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	Dl_info at, self;
	if (!p || (dladdr(p, &at) && dladdr((void *)libcsym, &self) &&
		   at.dli_fbase == self.dli_fbase))
		p = dlsym(RTLD_NEXT, name); /* ours: the shim's hook */
	if (!p)
		fatal("cannot find the C library's %s", name);
	return p;
}

static void resolve(void)
{
	if (atomic_load_explicit(&resolved, memory_order_acquire))
		return;
	libc.pthread_create = libcsym("pthread_create");
	libc.pthread_exit = libcsym("pthread_exit");
	libc.pthread_self = libcsym("pthread_self");
	libc.pthread_getattr_np = libcsym("pthread_getattr_np");
	libc.pthread_once = libcsym("pthread_once");
	libc.sigaction = libcsym("sigaction");
	libc.posix_spawnp = libcsym("posix_spawnp");
	atomic_store_explicit(&resolved, 1, memory_order_release);
}

/* The runtime's out-of-line raw system call (sys6 is inline). */
long rawsyscall6(long n, long a, long b, long c, long d, long e, long f)
{
	return sys6(n, a, b, c, d, e, f);
}

int sys_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	resolve();
	return libc.pthread_create(t, a, fn, arg);
}

_Noreturn void sys_pthread_exit(void *ret)
{
	resolve();
	libc.pthread_exit(ret);
	__builtin_unreachable();
}

pthread_t sys_pthread_self(void)
{
	resolve();
	return libc.pthread_self();
}

int sys_pthread_getattr_np(pthread_t t, pthread_attr_t *a)
{
	resolve();
	return libc.pthread_getattr_np(t, a);
}

int sys_pthread_once(pthread_once_t *o, void (*fn)(void))
{
	resolve();
	return libc.pthread_once(o, fn);
}

int sys_sigaction(int sig, const struct sigaction *sa, struct sigaction *old)
{
	resolve();
	return libc.sigaction(sig, sa, old);
}

int sys_posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	resolve();
	return libc.posix_spawnp(pid, file, fa, attr, argv, envp);
}
