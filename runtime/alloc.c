/*
 * alloc.c - memory for the runtime's own objects (G descriptors, timers,
 * fd descriptors, channels).  It comes from jemalloc's explicit API, from
 * jemalloc's arena 0 with weft's extent hooks, through one thread cache
 * per P: like Go's mcache, allocation is P-local and needs no lock.  The host program's
 * malloc is not touched: jemalloc is linked in privately (its malloc
 * symbols are hidden in libweft), and weft never calls plain malloc.
 *
 * The arena's memory is populated (MADV_POPULATE_WRITE) as jemalloc
 * commits it: on this kind of VM a first-touch page fault costs 11-21 us,
 * a populated page ~0.7 us, and a million descriptors would otherwise
 * spend seconds in page faults.  jemalloc maps address space ahead in
 * ever larger extents and commits from them only what it hands out
 * (ext_commit), so the rest costs no memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime.h"

/* Thread-local bytes nothing uses, right above jemalloc's tsd (its only
 * TLS variable, the library's .tdata): this is the first .tbss of the
 * library (alloc.c links first).  They widen the tsd's dead place in a
 * G's block, so that blocks interleave (tls.c, "the interleaved slots")
 * also in programs with a few hundred bytes of TLS of their own.  An OS
 * thread's block has them too: 512 bytes, zeroed as glibc makes it. */
__thread char weft_tlspad[512] __attribute__((tls_model("initial-exec")));

/* Address space for jemalloc.  Nothing is populated here: most of what
 * jemalloc maps it does not use yet (it grows in ever larger extents, and
 * an arena's metadata block is 2 MiB of which a few pages are used).
 * Asked for uncommitted memory (*commit false, the extents it grows into),
 * we say so, and jemalloc commits each piece before using it: ext_commit
 * populates exactly that.  Asked for committed memory (metadata), the
 * mapping is usable as it is; its pages fault in as they are touched. */
static void *ext_alloc(extent_hooks_t *h, void *addr, size_t size, size_t align,
		       bool *zero, bool *commit, unsigned ind)
{
	(void)h;
	(void)ind;
	(void)commit; /* as asked: committed or not, it is mapped read-write */
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	if (addr) {
		void *p = mmap(addr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		if (p != addr) {
			munmap(p, size);
			return NULL;
		}
		*zero = true;
		return p;
	}
	/* over-map, then trim to the alignment jemalloc asks for */
	size_t len = size + (align > 4096 ? align : 0);
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	char *a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	if (a > p)
		munmap(p, a - p);
	if (p + len > a + size)
		munmap(a + size, p + len - (a + size));
	*zero = true;
	return a;
}

/* jemalloc is about to use [addr+off, +len): populate it (best effort: an
 * unpopulated page just faults in).  Never fails. */
static bool ext_commit(extent_hooks_t *h, void *addr, size_t size, size_t off, size_t len,
		       unsigned ind)
{
	(void)h;
	(void)size;
	(void)ind;
	madvise((char *)addr + off, len, MADV_POPULATE_WRITE);
	return false;
}

static bool ext_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned ind)
{
	(void)h;
	(void)committed;
	(void)ind;
	return munmap(addr, size) != 0;
}

static void ext_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned ind)
{
	(void)h;
	(void)committed;
	(void)ind;
	munmap(addr, size);
}

static bool ext_purge(extent_hooks_t *h, void *addr, size_t size, size_t off, size_t len,
		      unsigned ind)
{
	(void)h;
	(void)size;
	(void)ind;
	return madvise((char *)addr + off, len, MADV_DONTNEED) != 0;
}

/* Our mappings are plain anonymous memory: any split or merge is fine. */
static bool ext_split(extent_hooks_t *h, void *addr, size_t size, size_t a, size_t b,
		      bool committed, unsigned ind)
{
	(void)h, (void)addr, (void)size, (void)a, (void)b, (void)committed, (void)ind;
	return false;
}

static bool ext_merge(extent_hooks_t *h, void *a, size_t asz, void *b, size_t bsz,
		      bool committed, unsigned ind)
{
	(void)h, (void)a, (void)asz, (void)b, (void)bsz, (void)committed, (void)ind;
	return false;
}

static extent_hooks_t hooks = {
	.alloc = ext_alloc,
	.dalloc = ext_dalloc,
	.destroy = ext_destroy,
	.commit = ext_commit,
	.purge_forced = ext_purge,
	.split = ext_split,
	.merge = ext_merge,
};

/* jemalloc keeps its per-thread state (tsd) in TLS, initial-exec: at a
 * fixed offset from the thread pointer.  Called while the FS base points
 * at a G's own block (tls.c), it would make a tsd in that block and link
 * it into its global list of threads; the block dies with the G's stack
 * and the list is left pointing into freed memory (it crashed in
 * je_tsd_state_set about once in 60 runs of 1,000 contending threads on
 * 4 Ps).  So jemalloc only ever runs on an OS thread's own TLS, whose
 * tsd lives as long as the thread and which glibc's key destructor
 * retires at thread exit: je_enter loads the M's own FS base around the
 * call when a G's block is loaded, je_leave loads the block back.  No
 * tsd ever exists in a G's block (tls_gfree checks).  The M's own TLS
 * has tls_m too, so a signal in between sees the right M.  Costs two FS
 * loads per runtime allocation on a G with its own TLS; the runtime
 * allocates per thread (key table, timer) and per object, not per call
 * on the paths a thread uses often. */
static uintptr_t je_enter(struct m *m)
{
	return tls_ownenter(m);
}

static void je_leave(struct m *m, uintptr_t fs)
{
	tls_ownleave(m, fs);
}

void allocinit(void)
{
	extent_hooks_t *hp = &hooks;
	struct m *m = getm();
	uintptr_t fs = je_enter(m);
	/* arena 0, jemalloc's first, with our hooks: no arena of our own.
	 * A second arena cost ~20 copy-on-write faults at every fork
	 * (jemalloc's fork handlers unlock, and in the child re-initialise,
	 * its ~45 mutexes, spread over ~10 pages: 138 -> 118 faults a fork)
	 * and ~56 KiB of resident memory.  Arena 0 holds only jemalloc's own
	 * metadata otherwise (tcache structures), extents that our hooks
	 * handle as jemalloc's default ones would (plain anonymous mmaps). */
	int r = mallctl("arena.0.extent_hooks", NULL, NULL, &hp, sizeof hp);
	/* heap profiling (MALLOC_CONF=prof:true) calls libm, which weft
	 * does not link: load it now, from this plain context (lazylib.c) */
	bool prof = false;
	size_t psz = sizeof prof;
	if (mallctl("opt.prof", &prof, &psz, NULL, 0) == 0 && prof)
		(void)lazylib_open(LAZY_M);
	je_leave(m, fs);
	if (r != 0)
		warn("jemalloc arena.0.extent_hooks failed; its memory faults in as touched");
}

/* Flags for the calling context: the P's cache if this M holds a P (it
 * alone uses it: a P is never taken from its M), else no cache. */
static int allocflags(struct m *m)
{
	int f = MALLOCX_ARENA(0); /* never an automatic arena (allocinit) */
	if (m && m->p)
		return f | MALLOCX_TCACHE(m->p->tcache);
	return f | MALLOCX_TCACHE_NONE;
}

unsigned rt_tcache_create(void)
{
	unsigned tc;
	size_t sz = sizeof tc;
	struct m *m = getm();
	uintptr_t fs = je_enter(m);
	int r = mallctl("tcache.create", &tc, &sz, NULL, 0);
	je_leave(m, fs);
	if (r != 0)
		fatal("jemalloc tcache.create failed");
	return tc;
}

/* No automatic thread cache: the runtime only uses the P's explicit
 * ones, so an OS thread's tsd is small and cheap to make. */
const char *malloc_conf = "tcache:false";

void *rtalloc(size_t size)
{
	return rtalloc_aligned(size, 0);
}

void *rtalloc_aligned(size_t size, size_t align)
{
	struct m *m = getm();
	uintptr_t fs = je_enter(m);
	int flags = allocflags(m) | MALLOCX_ZERO | (align ? MALLOCX_ALIGN(align) : 0);
	void *p = mallocx(size ? size : 1, flags);
	je_leave(m, fs);
	/* on the G's own TLS again; not from a scheduler context, which may
	 * have kept a block whose G runs on another M (tls.c, g0keep) */
	if (!p && (!m || m->curg))
		errno = ENOMEM;
	return p;
}

void rtfree(void *ptr)
{
	if (!ptr)
		return;
	struct m *m = getm();
	uintptr_t fs = je_enter(m);
	dallocx(ptr, allocflags(m));
	je_leave(m, fs);
}
