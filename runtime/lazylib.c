/*
 * lazylib.c - the libraries weft uses only on rare paths, loaded when
 * the runtime starts instead of with weft.
 *
 * Under `weft run` every process of the tree loads the shim, and most
 * of them (a shell, make, the compilers, sed) never make a thread, so
 * never start the runtime.  Each library the shim names as NEEDED costs
 * every one of them its mappings, its relocations, its constructors and
 * a dozen page faults, which on a paravirtualised VM cost more than the
 * rest of a small program's start (docs/preload.md, Start-up).  Two
 * libraries serve only rare paths:
 *
 *   - libunwind (and the liblzma it needs): the backtraces of weft_dump,
 *     SIGQUIT and the fatal reports (traceback.c);
 *   - libm: exp, log and round for jemalloc's heap profiling, off unless
 *     MALLOC_CONF turns it on; its backtraces take _Unwind_Backtrace and
 *     _Unwind_GetIP, which libunwind provides.
 *
 * So neither is linked.  Both are opened with dlopen, RTLD_LOCAL (their
 * symbols never join the program's), from a plain context: libunwind
 * when the runtime starts (dump_init calls tb_init), since a dump comes
 * only after that and may come from a crashing process where dlopen is
 * not safe; libm when the runtime starts if jemalloc's profiling is on
 * (allocinit).  The forwarders below give jemalloc's references a
 * definition: they find the real function at their first call, loading
 * the library then if nothing loaded it before (profiling on before the
 * runtime started).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <gnu/lib-names.h>
#include <stdint.h>

#include "runtime.h"

/* libunwind's soname (libunwind-dev's libunwind.so links to it) */
#ifndef WEFT_UNWIND_SONAME
#define WEFT_UNWIND_SONAME "libunwind.so.8"
#endif

struct lazylib {
	const char *soname;   /* what dlopen is given */
	void *_Atomic handle; /* NULL until loaded */
	_Atomic int failed;   /* dlopen refused: said once, never tried again */
};

static struct lazylib libs[] = {
	[LAZY_UNWIND] = { .soname = WEFT_UNWIND_SONAME },
	[LAZY_M] = { .soname = LIBM_SO },
};

void *lazylib_open(enum lazylib_id id)
{
	struct lazylib *l = &libs[id];
	/* acquire: pairs with the release below (the handle is dlopen's,
	 * complete before it is published) */
	void *h = atomic_load_explicit(&l->handle, memory_order_acquire);
	if (h || atomic_load_explicit(&l->failed, memory_order_relaxed))
		return h;
	/* two threads may both get here: dlopen counts references, and
	 * either handle is the same library */
	h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		if (!atomic_exchange(&l->failed, 1))
			warn("cannot load %s: %s\n", l->soname, dlerror());
		return NULL;
	}
	atomic_store_explicit(&l->handle, h, memory_order_release);
	return h;
}

void *lazylib_sym(enum lazylib_id id, const char *name)
{
	void *h = lazylib_open(id);
	return h ? dlsym(h, name) : NULL;
}

/* ---- what jemalloc (linked in) calls ------------------------------------------ */

/* *slot, or name from library id, found now; fatal if it is nowhere
 * (jemalloc has no way to fail these calls). */
static void *forward(void *_Atomic *slot, enum lazylib_id id, const char *name)
{
	/* acquire/release: as for the handle above */
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	if (p)
		return p;
	p = lazylib_sym(id, name);
	if (!p)
		fatal("%s from %s, for jemalloc's heap profiling, cannot be found", name,
		      libs[id].soname);
	atomic_store_explicit(slot, p, memory_order_release);
	return p;
}

double exp(double x);
double log(double x);
double round(double x);
int _Unwind_Backtrace(int (*fn)(void *, void *), void *arg);
uintptr_t _Unwind_GetIP(void *ctx);

double exp(double x)
{
	static void *_Atomic f;
	return ((double (*)(double))forward(&f, LAZY_M, "exp"))(x);
}

double log(double x)
{
	static void *_Atomic f;
	return ((double (*)(double))forward(&f, LAZY_M, "log"))(x);
}

double round(double x)
{
	static void *_Atomic f;
	return ((double (*)(double))forward(&f, LAZY_M, "round"))(x);
}

/* libgcc's unwinder interface, as libunwind provides it (the return is
 * an enum _Unwind_Reason_Code, an int) */
int _Unwind_Backtrace(int (*fn)(void *, void *), void *arg)
{
	static void *_Atomic f;
	return ((int (*)(int (*)(void *, void *), void *))forward(&f, LAZY_UNWIND,
								 "_Unwind_Backtrace"))(fn, arg);
}

uintptr_t _Unwind_GetIP(void *ctx)
{
	static void *_Atomic f;
	return ((uintptr_t(*)(void *))forward(&f, LAZY_UNWIND, "_Unwind_GetIP"))(ctx);
}
