/*
 * tls.c - a thread-local storage block and thread control block (TCB)
 * of its own for a G that stands for a thread (WEFT_TLS=thread).
 *
 * Without it a G borrows the TLS of whichever OS thread runs it: errno's
 * address, __thread and C++ thread_local variables, glibc's own
 * per-thread state (stdio lock owner, malloc tcache, THREAD_SELF) are
 * shared by the Gs of an M and change under a G that migrates.  With it
 * the G carries a block laid out as glibc lays out a new thread's
 * (nptl/allocatestack.c, x86-64 TLS variant II: the TCB - glibc's struct
 * pthread - at the thread pointer, the static TLS blocks of the loaded
 * modules just below it), and the switch points the FS base at the TCB
 * of whichever context runs (proc.c: gswitch_inl, tls_loadfs).
 *
 * glibc does the module work: _dl_get_tls_static_info gives the size and
 * alignment of the static TLS area with the TCB, _dl_allocate_tls(tcb)
 * makes the dtv and copies every module's TLS image into the block, and
 * _dl_deallocate_tls(tcb, false) frees the dtv and the dynamic (dlopen'ed
 * module) blocks.  The TCB fields glibc reads through %fs are set as
 * pthread_create sets them: the header (tcb/self, dtv, multiple_threads,
 * stack and pointer guard copied from the creating thread), tid (a stable
 * number of the G's, never a real thread's), specific[0] (the first key
 * block), the rseq area's cpu_id (-2, "not registered": sched_getcpu then
 * asks the vDSO instead of reading a value that belongs to another
 * thread).  struct pthread's size and the tid/specific offsets come from
 * the descriptors libc exports for libthread_db (_thread_db_*); the header
 * offsets are x86-64 ABI (gcc reads the canary at %fs:0x28).  Anything
 * missing: `weft: ...` once and shared TLS.
 *
 * The block lives in an interleaved slot, its TCB in the dead jemalloc
 * state of its neighbour's ("the interleaved slots" below: a stride of
 * ~2.9-3.2 KiB a block), or, where the program's TLS does not allow that, at
 * the top of the G's own stack (gstart reserves it, as glibc does).
 *
 * The runtime's own thread-locals stay right whatever FS points at: tls_m
 * is initial-exec, at the same offset from the thread pointer in every
 * block, and the switch writes the M into the next G's block before it
 * loads the FS base (a signal at any instruction sees the right M).
 * Under the shim the scheduler context (g0) keeps the last G's block
 * loaded, which another M may then run its G on: see "the scheduler
 * keeps the G's block" below for what keeps that right.
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "runtime.h"
#include "sanitizer.h"
#include "sys.h"

#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif

/* tcbhead_t (sysdeps/x86_64/nptl/tls.h): offsets fixed by the ABI. */
enum {
	TCB_TCB = 0x00,      /* void *tcb: the TCB itself */
	TCB_DTV = 0x08,      /* dtv_t *dtv */
	TCB_SELF = 0x10,     /* struct pthread *self */
	TCB_MULTI = 0x18,    /* int multiple_threads */
	TCB_GSCOPE = 0x1c,   /* int gscope_flag */
	TCB_COPY_LO = 0x20,  /* sysinfo, stack_guard (0x28), pointer_guard (0x30), */
	TCB_COPY_HI = 0x50,  /* vgetcpu cache, feature_1 (CET): copied */
};

struct tlsinfo tlsinfo;

/* jemalloc's thread state (alloc.c): it must never come to life in a
 * G's block.  The first bytes of a pristine block's copy (the module's
 * TLS image: they hold its state and its link in jemalloc's list of
 * threads) are kept, and every block is checked against them when it is
 * freed. */
extern __thread char je_tsd_tls;
extern __thread char weft_tlspad[512]; /* alloc.c: dead bytes right above it */
enum { JETSD_CHECK = 512 };
static char jetsd_image[JETSD_CHECK];
static _Atomic int jetsd_state; /* 0 none, 1 being taken, 2 taken */

/* glibc malloc's per-thread cache (malloc/malloc.c: the TLS variable
 * tcache, a tcache_perthread_struct from the thread's arena).  A thread's
 * is freed by its exit (tcache_thread_shutdown, from start_thread), which
 * glibc does not export; a G's block would leak it (~2.8 KiB per ended
 * thread with its cached chunks).  Instead an ended G's cache goes to a
 * pool and the next G's block starts with it: a cache belongs to one
 * thread at a time, and glibc frees a cached chunk into whichever arena
 * it came from, so a cache can move between threads.  The variable's
 * offset is found once by watching a fresh block make its cache
 * (tcache_probe); without it, no recycling. */
static long tc_off;        /* tcache's offset from the thread pointer, 0: unknown */
struct lock tcpool_lock; /* not static: tls_forkchild */
static void **tcpool;      /* ended Gs' caches (tcpool_lock) */
static size_t ntcpool, tcpool_cap;
static void tcache_probe(void);

static void *(*dl_allocate_tls)(void *mem);
static void (*dl_deallocate_tls)(void *tcb, bool dealloc_tcb);
static void (*call_tls_dtors)(void);
static void (*ctype_init)(void); /* __ctype_init: the locale's ctype pointers in TLS */

/* One field descriptor of libthread_db's: { bits, count, offset }. */
static long tdb_off(const char *name, unsigned bits)
{
	const uint32_t *d = dlvsym(RTLD_DEFAULT, name, "GLIBC_PRIVATE");
	if (!d || d[0] != bits)
		return -1;
	return d[2];
}

static uintptr_t tp_self(void)
{
	uintptr_t tp;
	__asm__ volatile("mov %%fs:0, %0" : "=r"(tp)); /* not moved across an FS load */
	return tp;
}

/* ---- how much of the static TLS area a block needs ------------------------
 *
 * glibc's static TLS area (_dl_get_tls_static_info) is the loaded
 * modules' blocks plus a surplus (~1.7 KiB: glibc.rtld.optional_static_tls
 * and room per namespace) kept for libraries dlopen'ed later with
 * initial-exec TLS.  A G's block holds only what the modules loaded so far
 * use (the lowest module block, from the thread pointer, found with
 * dl_iterate_phdr's dlpi_tls_data of this thread): the surplus would be
 * most of a page per thread that nothing writes.  A module that takes
 * static TLS later (dlopen, rare: glibc refuses most) is seen by the count
 * of loaded objects at the next G's start; from then on new Gs' blocks are
 * separate allocations of the whole area (tls_gbegin). */
struct tlsused {
	uintptr_t tp;  /* this thread's thread pointer */
	size_t area;   /* the whole static area below it (no TCB) */
	size_t used;   /* out: bytes below tp the modules use */
	unsigned long long adds; /* out: dlpi_adds (objects ever loaded) */
	bool first;    /* stop after the first object (adds only) */
};

static int tlsused_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct tlsused *u = arg;
	(void)size;
	u->adds = info->dlpi_adds;
	if (u->first)
		return 1;
	uintptr_t b = (uintptr_t)info->dlpi_tls_data;
	/* a static block lies below tp; dynamic ones (dlopen, allocated by
	 * __tls_get_addr) anywhere else, or not yet (NULL) */
	if (b && b < u->tp && u->tp - b <= u->area && u->tp - b > u->used)
		u->used = u->tp - b;
	return 0;
}

/* Objects loaded since the start (dlpi_adds): one callback. */
static unsigned long long tls_adds(void)
{
	struct tlsused u = { .first = true };
	dl_iterate_phdr(tlsused_cb, &u);
	return u.adds;
}

static _Atomic unsigned long long tls_adds0; /* dlpi_adds when the used size was taken */
static _Atomic bool tls_grown;       /* static TLS taken by a later dlopen: whole-area blocks */

/* ---- the interleaved slots ------------------------------------------------
 *
 * The runtime's own jemalloc keeps its thread state (je_tsd_tls, 2,632
 * bytes, the shim's .tdata) in static TLS, between the program's TLS and
 * libc's (module order: the program, the preloaded shim, then the
 * libraries the program needs).  A G's block never uses it: the
 * invariant is that jemalloc runs only on an OS thread's own TLS (alloc.c
 * loads the M's FS base around each call; fork runs on the M's TCB,
 * tls_forkenter).  At its stack top a block is the TCB (2.3 KiB), the
 * top part of the static area, the dead tsd and libc's part below it:
 * 5.1 KiB, two pages or three with the stack's first frames.
 *
 * So Gs' blocks are laid in a row of slots, each the next one's stride S
 * below the last, S no larger than the dead part (the tsd and alloc.c's
 * weft_tlspad right above it, 3,152 bytes): a slot's TCB and top part lie
 * in the dead part of the slot above it, and its part below the tsd in
 * that of the slot below it.  With H the top part (TCB and everything from
 * the dead part up), J the dead part and L the part below it, slot i+1's
 * top part fits in slot i's dead part when H <= S <= J, slot i's bottom
 * part in slot i+1's when L <= S <= J, and slot i+2's top part stays below
 * slot i's bottom part when 2S >= H + J + L.  A block then costs S bytes
 * (2,944 for a C program with 80 bytes of TLS whose only library TLS is
 * libc's) apart from its stack, which is the stack a G with shared TLS
 * has.  Programs with more TLS above or below the dead part (H + L > J,
 * about 700 bytes of TLS besides the TCB and the runtime's) keep the
 * blocks at the stack top.  A slot's
 * tsd bytes are its neighbours': nothing may write there through a G's
 * block (the invariant above), nor zero or copy them (slot_clear,
 * scratch_alloc).  The resolver state goes into struct pthread's own res
 * (glibc's place for a thread's), whose offset a thread glibc makes shows
 * (res_probe).
 */
enum { SLOTS_PER_CHUNK = 64 }; /* slots per mapping (the row's length) */
static struct lock slotlock;   /* slotfree; not static data of a fork child's */
static char *slotfree;         /* free slots' TCBs, linked through their first word */

/* jemalloc's tsd: the module whose TLS block starts with je_tsd_tls gives
 * its .tdata size (the tsd; weft's own thread-locals are its .tbss). */
struct jemod {
	uintptr_t tsd;  /* &je_tsd_tls on this thread */
	size_t size;    /* out: the module's initialised TLS (p_filesz), 0 if not found */
};

#undef p_type /* resolv.h's name for __p_type, not the ELF field */

static int jemod_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct jemod *j = arg;
	(void)size;
	if ((uintptr_t)info->dlpi_tls_data != j->tsd)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS)
			j->size = info->dlpi_phdr[i].p_filesz;
	return 1;
}

/* A thread glibc made: where its __resp points (its struct pthread's res). */
struct resprobe {
	intptr_t resp_off;       /* __resp from the thread pointer */
	size_t tcbsize;          /* sizeof(struct pthread) */
	_Atomic uint32_t done;   /* 0 waiting, 1 + off, or ~0u: not inside */
};

static void *resprobe_fn(void *arg)
{
	struct resprobe *r = arg;
	uintptr_t tp = tp_self();
	uintptr_t res = *(uintptr_t *)(tp + r->resp_off);
	uint32_t v = ~0u;
	if (res > tp && res + sizeof(struct __res_state) <= tp + r->tcbsize)
		v = (uint32_t)(res - tp) + 1;
	/* release: the creator reads v and nothing else of ours */
	atomic_store_explicit(&r->done, v, memory_order_release);
	sys3(SYS_futex, &r->done, FUTEX_WAKE_PRIVATE, 1);
	return NULL;
}

/* offsetof(struct pthread, res), which libthread_db does not describe:
 * one short thread of glibc's (rt_pthread_create, as for an M) shows it.
 * -1 if it cannot be made. */
extern int (*rt_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static long res_probe(intptr_t resp_off, size_t tcbsize)
{
	static struct resprobe r; /* once (tls_init); static: the thread's wake
				   * may come after the creator has gone on */
	r.resp_off = resp_off;
	r.tcbsize = tcbsize;
	atomic_store_explicit(&r.done, 0, memory_order_relaxed);
	pthread_attr_t a;
	pthread_t t;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 << 10);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	int e = rt_pthread_create(&t, &a, resprobe_fn, &r);
	pthread_attr_destroy(&a);
	if (e != 0)
		return -1;
	uint32_t v;
	/* acquire: pairs with resprobe_fn's release */
	while ((v = atomic_load_explicit(&r.done, memory_order_acquire)) == 0)
		sys4(SYS_futex, &r.done, FUTEX_WAIT_PRIVATE, 0, NULL);
	return v == ~0u ? -1 : (long)v - 1;
}

/* A free slot's TCB, or NULL (ENOMEM).  A new row is mapped when none is
 * free: its slots' TCBs from the top down, the first stride-aligned one
 * tcbsize below the mapping's end, the last slot's bottom part above its
 * start.  Rows are never unmapped; a freed slot goes back to the list. */
static char *slot_get(void)
{
	lock(&slotlock);
	char *tcb = slotfree;
	if (tcb) {
		slotfree = *(char **)tcb;
		unlock(&slotlock);
		return tcb;
	}
	unlock(&slotlock);
	size_t s = tlsinfo.slot;
	size_t len = tlsinfo.tcbsize + tlsinfo.align + (SLOTS_PER_CHUNK - 1) * s + tlsinfo.used;
	len = (len + 4095) & ~(size_t)4095;
	long r = rawsyscall6(SYS_mmap, 0, (long)len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r < 0 && r > -4096)
		return NULL;
	char *top = (char *)(((uintptr_t)r + len - tlsinfo.tcbsize) & ~(uintptr_t)(tlsinfo.align - 1));
	/* slot 0 is this G's; the rest go to the list, slot 1 first out */
	lock(&slotlock);
	for (size_t i = SLOTS_PER_CHUNK - 1; i >= 1; i--) {
		char *t = top - i * s;
		*(char **)t = slotfree;
		slotfree = t;
	}
	unlock(&slotlock);
	return top;
}

static void slot_put(char *tcb)
{
	lock(&slotlock);
	*(char **)tcb = slotfree;
	slotfree = tcb;
	unlock(&slotlock);
}

/* Zero a slot's own bytes (a freed slot is dirty): its top part and its
 * part below the tsd, never the tsd, which is its neighbours'. */
static void slot_clear(char *tcb)
{
	memset(tcb - tlsinfo.jehi, 0, tlsinfo.jehi + tlsinfo.tcbsize);
	memset(tcb - tlsinfo.used, 0, tlsinfo.used - tlsinfo.jelo);
}

/* The slot stride for ti (its used, tcbsize, align, jehi, jelo set), or
 * 0 when the blocks cannot interleave (see above). */
static size_t slot_stride(const struct tlsinfo *ti)
{
	if (!ti->jelo || ti->jelo > ti->used)
		return 0;
	size_t h = ti->tcbsize + ti->jehi, j = ti->jelo - ti->jehi, l = ti->used - ti->jelo;
	size_t s = (h + j + l + 1) / 2;
	if (s < h)
		s = h;
	if (s < l)
		s = l;
	s = (s + ti->align - 1) & ~(ti->align - 1);
	return s <= j ? s : 0;
}

/* Resolve glibc's entry points once.  False (with a warning) when
 * anything is missing: the caller stays in shared mode. */
bool tls_init(void)
{
	static _Atomic int state; /* 0 not tried, 1 ok, 2 unavailable */
	int s = atomic_load_explicit(&state, memory_order_acquire);
	if (s)
		return s == 1;
	struct tlsinfo ti = { 0 };
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
	/* the sanitizers keep each thread's state in its TLS */
	warn("WEFT_TLS=thread: not in a sanitizer build: green threads share their OS thread's "
	     "thread-local storage");
	atomic_store_explicit(&state, 2, memory_order_release);
	return false;
#endif
	void (*static_info)(size_t *, size_t *) =
		(void (*)(size_t *, size_t *))dlvsym(RTLD_DEFAULT, "_dl_get_tls_static_info",
						     "GLIBC_PRIVATE");
	dl_allocate_tls = (void *(*)(void *))dlvsym(RTLD_DEFAULT, "_dl_allocate_tls", "GLIBC_PRIVATE");
	dl_deallocate_tls =
		(void (*)(void *, bool))dlvsym(RTLD_DEFAULT, "_dl_deallocate_tls", "GLIBC_PRIVATE");
	call_tls_dtors = (void (*)(void))dlvsym(RTLD_DEFAULT, "__call_tls_dtors", "GLIBC_PRIVATE");
	ctype_init = (void (*)(void))dlvsym(RTLD_DEFAULT, "__ctype_init", "GLIBC_PRIVATE");
	/* a TLS symbol: this thread's instance */
	char *resp = dlvsym(RTLD_DEFAULT, "__resp", "GLIBC_PRIVATE");
	const uint32_t *szp = dlvsym(RTLD_DEFAULT, "_thread_db_sizeof_pthread", "GLIBC_PRIVATE");
	const long *rseq_off = dlsym(RTLD_DEFAULT, "__rseq_offset");
	const unsigned *rseq_size = dlsym(RTLD_DEFAULT, "__rseq_size");
	ti.off_tid = tdb_off("_thread_db_pthread_tid", 32);
	ti.off_specific = tdb_off("_thread_db_pthread_specific", 32 * 64);
	ti.off_list = tdb_off("_thread_db_pthread_list", 128);
	const char *missing = !static_info ? "_dl_get_tls_static_info"
			      : !dl_allocate_tls ? "_dl_allocate_tls"
			      : !dl_deallocate_tls ? "_dl_deallocate_tls"
			      : !call_tls_dtors ? "__call_tls_dtors"
			      : !ctype_init ? "__ctype_init"
			      : !resp ? "__resp"
			      : !szp ? "_thread_db_sizeof_pthread"
			      : ti.off_tid < 0 ? "_thread_db_pthread_tid"
			      : ti.off_specific < 0 ? "_thread_db_pthread_specific"
			      : ti.off_list < 0 ? "_thread_db_pthread_list"
						    : NULL;
	if (!missing) {
		static_info(&ti.size, &ti.align);
		ti.tcbsize = *szp;
		if (ti.align < 16 || (ti.align & (ti.align - 1)) || ti.tcbsize < TCB_COPY_HI ||
		    ti.size < ti.tcbsize || (size_t)ti.off_specific < 32 * 16 ||
		    (size_t)ti.off_specific + 32 * 8 > ti.tcbsize || (size_t)ti.off_tid + 4 > ti.tcbsize ||
		    (size_t)ti.off_list + 16 > ti.tcbsize)
			missing = "a plausible struct pthread layout";
	}
	if (missing) {
		warn("WEFT_TLS=thread: this libc has no %s: green threads share their OS thread's "
		     "thread-local storage",
		     missing);
		atomic_store_explicit(&state, 2, memory_order_release);
		return false;
	}
	/* the rseq area is inside struct pthread when the kernel took it */
	ti.off_rseq = -1;
	if (rseq_off && rseq_size && *rseq_size >= 8 && *rseq_off > 0 &&
	    (size_t)*rseq_off + 8 <= ti.tcbsize)
		ti.off_rseq = *rseq_off;
	/* robust_head, which libthread_db does not describe: an empty list
	 * points to itself and is followed by futex_offset, the same in
	 * every thread (glibc sets both at thread start) */
	ti.off_robust = -1;
	const char *cur = (const char *)tp_self();
	for (size_t x = 8; x + 24 <= ti.tcbsize; x += 8)
		if (*(const uintptr_t *)(cur + x) == (uintptr_t)(cur + x) &&
		    *(const long *)(cur + x + 8) == -32) {
			ti.off_robust = (long)x;
			break;
		}
	if (ti.off_robust < 0) {
		warn("WEFT_TLS=thread: cannot find glibc's robust mutex list in struct pthread: "
		     "green threads share their OS thread's thread-local storage");
		atomic_store_explicit(&state, 2, memory_order_release);
		return false;
	}
	ti.tls_m_off = (intptr_t)&tls_m - (intptr_t)tp_self();
	ti.jetsd_off = (intptr_t)&je_tsd_tls - (intptr_t)tp_self();
	ti.resp_off = (intptr_t)resp - (intptr_t)tp_self();
	/* the whole static TLS area below the TCB, with room to align it
	 * down, and the thread's resolver state below that; 16-aligned: the
	 * real main thread's fresh block and, after a dlopen took static TLS,
	 * new Gs' blocks */
	ti.fullreserve = (ti.size + ti.align + sizeof(struct __res_state) + 15) & ~(size_t)15;
	/* a G's block at its stack top: the TCB, the static TLS the modules
	 * use, no surplus; the resolver state inside jemalloc's tsd, which
	 * is dead in a G's block (see jetsd_image), past the bytes checked
	 * there.  je_tsd_tls is jemalloc's only TLS variable (.tdata, 2,632
	 * bytes in jemalloc 5.3) and weft's own are .tbss, laid out after it:
	 * tls_m's distance bounds its size from below. */
	struct tlsused u = { .tp = tp_self(), .area = ti.size - ti.tcbsize };
	dl_iterate_phdr(tlsused_cb, &u);
	atomic_store_explicit(&tls_adds0, u.adds, memory_order_relaxed);
	ti.used = u.used ? u.used : u.area;
	ti.resdead = ti.tls_m_off - ti.jetsd_off >=
		     (intptr_t)(JETSD_CHECK + 16 + sizeof(struct __res_state));
	ti.reserve = (ti.tcbsize + ti.used + ti.align +
		      (ti.resdead ? 0 : sizeof(struct __res_state)) + 15) & ~(size_t)15;
	if (ti.reserve > ti.fullreserve)
		ti.reserve = ti.fullreserve;
	ti.fsgsbase = (getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE) != 0;
	/* without wrfsbase every switch between Gs with blocks of their own
	 * is an arch_prctl (~3.6 us, 20-30 us of server CPU a switch on a
	 * PVM guest): a turn then costs more than the wait it saves
	 * (docs/benchmarks.md, MariaDB, session 11), so none by default */
	if (!ti.fsgsbase && !weftenv.turn_set)
		weftenv.turn_ns = 0;
	/* the interleaved slots, when the layout allows them */
	struct jemod jm = { .tsd = (uintptr_t)&je_tsd_tls };
	dl_iterate_phdr(jemod_cb, &jm);
	if (jm.size && jm.tsd < u.tp && u.tp - jm.tsd > jm.size) {
		ti.jelo = u.tp - jm.tsd;
		ti.jehi = ti.jelo - jm.size;
		/* and alloc.c's pad, if the linker put it right above */
		uintptr_t pad = (uintptr_t)weft_tlspad, end = jm.tsd + jm.size;
		if (pad >= end && pad - end < 64 && pad + sizeof weft_tlspad < u.tp)
			ti.jehi = u.tp - (pad + sizeof weft_tlspad);
	}
	ti.off_res = -1;
	if (!weftenv.notlsslot && slot_stride(&ti) &&
	    (ti.off_res = res_probe(ti.resp_off, ti.tcbsize)) >= 0) {
		ti.slot = slot_stride(&ti);
		ti.reserve = 0; /* nothing at the stack top */
		ti.resdead = false;
	}
	tlsinfo = ti;
	tcache_probe();
	rt_swslow_set(SW_TLS); /* a G may have a block of its own from now on */
	atomic_store_explicit(&state, 1, memory_order_release);
	return true;
}

/* Load the FS base of this OS thread. */
void tls_setfs(uintptr_t base)
{
	if (tlsinfo.fsgsbase) {
		__asm__ volatile("wrfsbase %0" ::"r"(base) : "memory");
		return;
	}
	long r = rawsyscall6(SYS_arch_prctl, ARCH_SET_FS, (long)base, 0, 0, 0, 0);
	if (r != 0)
		fatal("arch_prctl(ARCH_SET_FS): error %ld", -r);
}

/* The thread pointer of this OS thread (what %fs points at). */
uintptr_t tls_current(void)
{
	return tp_self();
}

/* A stable tid for a G: never a real thread's (those are below 2^22),
 * within FUTEX_TID_MASK, positive. */
static int gtid(struct g *gp)
{
	return (int)((1u << 29) | ((uint64_t)gp->id & ((1u << 29) - 1)));
}

/* The TCB address of a block whose reserve ends at hi. */
static char *tcb_at(char *hi)
{
	return (char *)(((uintptr_t)hi - tlsinfo.tcbsize) & ~(uintptr_t)(tlsinfo.align - 1));
}

/* Fill the zeroed block [hi - reserve, hi) as pthread_create and
 * start_thread do; glibc's dtv and module images by _dl_allocate_tls.
 * Returns the TCB, or NULL on ENOMEM.  (__ctype_init, which start_thread
 * also runs, must run on the block: tls_adopt.) */
static bool scratch_alloc(char *tcb, size_t room, bool slot, bool *toosmall);

/* dtv_t (glibc's dl-tls.h): the TCB's dtv field points at dtv[1]'s
 * place: [-1] its length, [0] its generation, [i] module i's block. */
typedef union {
	size_t counter;
	struct {
		void *val;
		void *to_free;
	} pointer;
} dtv_t;

static char *block_fill_at(char *hi, size_t reserve, int tid, bool resdead, bool viascratch,
			   bool slot, bool *toosmall)
{
	char *tcb = tcb_at(hi);
	char *cur = (char *)tp_self();
	if (viascratch ? !scratch_alloc(tcb, slot ? tlsinfo.used : (size_t)(tcb - (hi - reserve)),
					slot, toosmall)
		       : !dl_allocate_tls(tcb))
		return NULL;
	if (viascratch && *toosmall)
		return NULL;
	*(void **)(tcb + TCB_TCB) = tcb;
	*(void **)(tcb + TCB_SELF) = tcb;
	*(int *)(tcb + TCB_MULTI) = 1; /* Gs run in parallel: never "single-threaded" */
	*(int *)(tcb + TCB_GSCOPE) = 0;
	memcpy(tcb + TCB_COPY_LO, cur + TCB_COPY_LO, TCB_COPY_HI - TCB_COPY_LO);
	*(int *)(tcb + tlsinfo.off_tid) = tid;
	/* robust_head: an empty list (itself), futex_offset as glibc sets it;
	 * the kernel is not told (set_robust_list is per OS thread) */
	*(void **)(tcb + tlsinfo.off_robust) = tcb + tlsinfo.off_robust;
	*(long *)(tcb + tlsinfo.off_robust + 8) = -32;
	/* list: linked to itself, in no list of glibc's (a list_del is harmless) */
	*(void **)(tcb + tlsinfo.off_list) = tcb + tlsinfo.off_list;
	*(void **)(tcb + tlsinfo.off_list + 8) = tcb + tlsinfo.off_list;
	/* specific[0] = specific_1stblock, the 32 key slots just before it */
	*(void **)(tcb + tlsinfo.off_specific) = tcb + tlsinfo.off_specific - 32 * 16;
	if (tlsinfo.off_rseq > 0)
		*(int32_t *)(tcb + tlsinfo.off_rseq + 4) = -2; /* RSEQ_CPU_ID_REGISTRATION_FAILED */
	/* __resp: the resolver state (glibc points it at struct pthread's
	 * res, whose offset it does not say): in jemalloc's tsd, which no
	 * G's block uses, past the bytes tls_gfree checks and zeroed (glibc
	 * copied jemalloc's image there), or at the bottom of the reserve */
	char *res = hi - reserve;
	if (slot) {
		res = tcb + tlsinfo.off_res; /* glibc's place: zeroed with the TCB */
	} else if (resdead) {
		res = (char *)(((uintptr_t)tcb + (uintptr_t)tlsinfo.jetsd_off + JETSD_CHECK + 15) &
			       ~(uintptr_t)15);
		memset(res, 0, sizeof(struct __res_state));
	}
	*(void **)(tcb + tlsinfo.resp_off) = res;
	return tcb;
}

static char *block_fill(char *hi, size_t reserve, int tid, bool resdead)
{
	return block_fill_at(hi, reserve, tid, resdead, false, false, NULL);
}

/* The TCB of a scratch block (its allocation: fullreserve + align). */
static char *scratch_tcb(char *scratch)
{
	return tcb_at((char *)(((uintptr_t)scratch + tlsinfo.fullreserve + tlsinfo.align) &
			       ~(uintptr_t)15));
}

/* The module TLS of a G's block at its stack top, made by glibc in this
 * M's scratch block and copied.  _dl_allocate_tls writes every static
 * module's image at its offset below the TCB; a module that took static
 * TLS after tls_grew looked (a dlopen counts its object after that look,
 * or is between mapping and relocating it: glibc holds its TLS lock
 * throughout, and _dl_allocate_tls waits for it) lies below the block,
 * and glibc wrote its image over the G's own frames just below it (the
 * flaky tls::dlopened_initial_exec_module: a SIGSEGV in 2-25 % of its
 * runs on 2 Ps, a return to address 0, in weft's signal router or
 * watcher G, whose first run came during the test's dlopen).  The
 * scratch block has the whole area; the dtv says where each module is,
 * and *toosmall (nothing copied, the dtv freed) when one is below room:
 * the caller makes the G a block of its own.  False on ENOMEM. */
static bool scratch_alloc(char *tcb, size_t room, bool slot, bool *toosmall)
{
	*toosmall = false;
	size_t area = tlsinfo.size - tlsinfo.tcbsize;
	/* taken off the M while in use: glibc's allocation may call a
	 * program's malloc, which may park this G, and another G may start
	 * on this M meanwhile (it makes a scratch block of its own) */
	struct m *m = getm();
	struct g *gp = m ? m->curg : NULL;
	char *scratch = gp ? gp->tlsprep : NULL;
	bool prep = scratch != NULL; /* filled on its maker (tls_gprep) */
	if (!prep) {
		scratch = m->tlsscratch;
		m->tlsscratch = NULL;
	}
	if (!scratch && !(scratch = rtalloc(tlsinfo.fullreserve + tlsinfo.align)))
		return false;
	char *stcb = scratch_tcb(scratch);
	bool ok = prep || dl_allocate_tls(stcb) != NULL;
	if (prep)
		gp->tlsprep = NULL;
	if (ok) {
		dtv_t *dtv = *(dtv_t **)(stcb + TCB_DTV);
		size_t need = 0;
		for (size_t i = 1; i <= dtv[-1].counter; i++) {
			char *v = dtv[i].pointer.val;
			if (v >= stcb - area && v < stcb && (size_t)(stcb - v) > need)
				need = (size_t)(stcb - v); /* a static module's block */
		}
		if (need > room && prep) {
			/* kept for the caller's block of its own */
			*toosmall = true;
			gp->tlsprep = scratch;
			return true;
		} else if (need > room) {
			*toosmall = true;
			dl_deallocate_tls(stcb, false);
		} else {
			if (!slot) {
				memcpy(tcb - need, stcb - need, need);
			} else {
				/* around the tsd, which is the neighbours' (the
				 * tsd's dtv entry points there: never used) */
				memcpy(tcb - tlsinfo.jehi, stcb - tlsinfo.jehi, tlsinfo.jehi);
				if (need > tlsinfo.jelo)
					memcpy(tcb - need, stcb - need, need - tlsinfo.jelo);
			}
			for (size_t i = 1; i <= dtv[-1].counter; i++) {
				char *v = dtv[i].pointer.val;
				if (v >= stcb - area && v < stcb)
					dtv[i].pointer.val = tcb - (stcb - v);
			}
			*(dtv_t **)(tcb + TCB_DTV) = dtv;
		}
	}
	m = getm(); /* this G may have moved */
	if (!m->tlsscratch)
		m->tlsscratch = scratch;
	else
		rtfree(scratch);
	return ok;
}

/* On the maker of gp (a G with its own TLS to come), which holds the
 * loader's TLS lock (an IFUNC resolver inside a dlopen makes a thread):
 * glibc fills gp's scratch block now, as its pthread_create would on
 * this thread, where the lock is recursive; gp, started, would wait for
 * the lock in _dl_allocate_tls until the dlopen ends, and the dlopen may
 * be waiting for gp.  Without memory gp does as any other G. */
void tls_gprep(struct g *gp)
{
	char *scratch = rtalloc(tlsinfo.fullreserve + tlsinfo.align);
	if (!scratch)
		return;
	int e = rt_geterrno();
	if (dl_allocate_tls(scratch_tcb(scratch)))
		gp->tlsprep = scratch;
	else
		rtfree(scratch);
	rt_seterrno(e);
}

/* Find glibc's tcache variable: make a block, run one __libc_malloc and
 * __libc_free on it, and look for the word that became a pointer to a
 * 640-byte tcache_perthread_struct chunk (size field 0x291) whose first
 * count is the one chunk just freed.  The block's cache goes to the pool. */
static void tcache_probe(void)
{
	static _Atomic int probed;
	if (atomic_exchange(&probed, 1))
		return;
	void *(*lmalloc)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "__libc_malloc");
	void (*lfree)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "__libc_free");
	if (!lmalloc || !lfree)
		return;
	size_t sz = tlsinfo.fullreserve + tlsinfo.align;
	char *mem = rtalloc(sz);
	if (!mem)
		return;
	char *hi = (char *)(((uintptr_t)mem + sz) & ~(uintptr_t)15);
	char *tcb = block_fill(hi, tlsinfo.fullreserve, (int)rawsyscall6(SYS_gettid, 0, 0, 0, 0, 0, 0),
			       false);
	if (!tcb) {
		rtfree(mem);
		return;
	}
	char *lo = tcb - (tlsinfo.size - tlsinfo.tcbsize);
	if (lo < mem)
		lo = mem;
	lo = (char *)(((uintptr_t)lo + 7) & ~(uintptr_t)7);
	size_t n = (size_t)(tcb - lo);
	char *before = rtalloc(n);
	if (before) {
		memcpy(before, lo, n);
		uintptr_t own = tp_self();
		struct m *m = getm();
		tls_setfs((uintptr_t)tcb); /* nothing here reads tls_m or parks */
		lfree(lmalloc(24));
		tls_setfs(own);
		if (m)
			m->fscur = own;
		for (size_t x = 0; x < n; x += 8) {
			uintptr_t v = *(uintptr_t *)(lo + x);
			if (v == *(uintptr_t *)(before + x) || (v & 15) || v < 4096)
				continue;
			/* the chunk header and first count of a cache, if it is one */
			if ((*(const size_t *)(v - 8) & ~(size_t)7) == 0x290 &&
			    *(const uint16_t *)v == 1) {
				tc_off = (long)((lo + x) - tcb);
				break;
			}
		}
		rtfree(before);
	}
	if (tc_off) {
		tcpool = rtalloc(64 * sizeof *tcpool);
		if (tcpool) {
			tcpool_cap = 64;
			tcpool[ntcpool++] = *(void **)(tcb + tc_off);
		}
	}
	dl_deallocate_tls(tcb, false);
	rtfree(mem);
}

/* A new block starts with an ended G's malloc cache, if there is one. */
static void tcache_give(char *tcb)
{
	if (!tc_off)
		return;
	lock(&tcpool_lock);
	if (ntcpool)
		*(void **)(tcb + tc_off) = tcpool[--ntcpool];
	unlock(&tcpool_lock);
}

/* An ended G's block gives its malloc cache to the pool. */
static void tcache_take(char *tcb)
{
	if (!tc_off)
		return;
	void *tc = *(void **)(tcb + tc_off);
	if (!tc)
		return;
	lock(&tcpool_lock);
	if (ntcpool == tcpool_cap) {
		size_t cap = tcpool_cap ? tcpool_cap * 2 : 64;
		void **n = rtalloc(cap * sizeof *n); /* on the M's own TLS (alloc.c) */
		if (!n) {
			unlock(&tcpool_lock);
			return; /* no room: it leaks, as before */
		}
		memcpy(n, tcpool, ntcpool * sizeof *n);
		rtfree(tcpool);
		tcpool = n;
		tcpool_cap = cap;
	}
	tcpool[ntcpool++] = tc;
	unlock(&tcpool_lock);
}

/* ---- the scheduler keeps the G's block (g0keep) -------------------------
 *
 * With g0keep a G that switches to its M's scheduler context leaves its
 * block loaded (tls_loadfs does nothing for the scheduler), so the same
 * G coming back costs no FS load and another G one.  The scheduler then
 * runs on a block whose G it has released: another M may run that G on
 * the same block at the same time.  What keeps that right:
 *
 *   - getm() never trusts the block's tls_m slot: a G block's slot has
 *     its low bit set and the M comes from the GS base, set once per M
 *     (tls_mstart).  The stack-protector canary and pointer guard are the
 *     same in every block (block_fill copies them).
 *   - the scheduler context touches nothing else in the block: raw
 *     system calls only; what calls into glibc (pthread_create for a new
 *     M, the deadlock report, a new G's stack mapping, jemalloc) first
 *     moves to the M's own TLS (tls_ownenter, tls_ownfs).  errno in the
 *     block is the running G's alone.
 *   - signals: the shim's Ms block every asynchronous signal (a program's
 *     handler runs on its G), so only SIGWEFT, SIGURG (dumps) and faults
 *     reach a scheduler context, and their handlers leave errno alone or
 *     restore it only if they changed it.  Linked programs, whose Ms take
 *     any signal, keep the old rule (the scheduler on the M's own TLS).
 *   - a block is not freed while any M has it (m->fsblock): a dead G
 *     whose block another M still has waits in the limbo, and the M that
 *     moves off that block frees it (tls_fsblock).  At most one block per
 *     M waits there.
 */
_Atomic int32_t tls_nlimbo;
static struct lock limbolock;
static struct g *limbo; /* dead Gs, linked by schedlink (limbolock) */


/* Under the shim only (its Ms block asynchronous signals: hook/preload/
 * signal.c), with TLS blocks available, never under valgrind (which
 * need not know a GS base). */
void tls_g0keep_init(void)
{
	extern int rt_tls_default;
	bool ok = rt_tls_default && (weftenv.tls >= 0 ? weftenv.tls : 1) && tls_init();
#ifdef WEFT_VALGRIND
	ok = false;
#endif
	if (weftenv.nog0keep)
		ok = false;
	if (ok)
		rt_swslow_set(SW_TLS);
	tlsinfo.g0keep = ok;
}

/* On a new M, before it runs any G: the GS base names it (getm). */
void tls_mstart(struct m *m)
{
	if (!tlsinfo.g0keep)
		return;
	m->gsself = m;
	long r = rawsyscall6(SYS_arch_prctl, ARCH_SET_GS, (long)&m->gsself, 0, 0, 0, 0);
	if (r != 0)
		fatal("arch_prctl(ARCH_SET_GS): error %ld", -r);
}

/* Whether any M has block b. */
static bool heldbyanm(uintptr_t b)
{
	for (struct m *m = atomic_load(&allm); m; m = m->alllink)
		if (atomic_load(&m->fsblock) == b) /* seq_cst: see tls_fsblock */
			return true;
	return false;
}

/* Free the limbo's Gs that no M holds any more.  On an M with a P, on
 * the M's own TLS or a G's block that only this M runs. */
static void limbo_drain(void)
{
	struct g *done = NULL;
	lock(&limbolock);
	for (struct g **pp = &limbo; *pp;) {
		struct g *gp = *pp;
		if (heldbyanm((uintptr_t)gp->tcb)) {
			pp = &gp->schedlink;
			continue;
		}
		*pp = gp->schedlink;
		gp->schedlink = done;
		done = gp;
		atomic_fetch_sub(&tls_nlimbo, 1);
	}
	unlock(&limbolock);
	while (done) {
		struct g *gp = done;
		done = gp->schedlink;
		gfreedead(gp);
	}
}

/* m (this M) now has block b (0: none) for good: stored after the FS
 * load, seq_cst, then tls_nlimbo read (seq_cst): a Dekker pair with
 * tls_release, which counts a G into the limbo and then reads every
 * fsblock, so that either it sees this M off the block or this M sees
 * the G waiting and frees it. */
void tls_fsblock(struct m *m, uintptr_t b)
{
	if (atomic_load_explicit(&m->fsblock, memory_order_relaxed) != b)
		atomic_store(&m->fsblock, b);
	if (unlikely(atomic_load(&tls_nlimbo) != 0) && m->p)
		limbo_drain();
}

/* The scheduler context leaves a kept block for the M's own TLS. */
void tls_ownfs(struct m *m)
{
	if (m->fscur != m->fsbase) {
		m->fscur = m->fsbase;
		mtally(&m->nfsload);
		tls_setfs(m->fsbase);
	}
	if (tlsinfo.g0keep)
		tls_fsblock(m, 0);
}

/* A short stay on the M's own TLS (for glibc or jemalloc calls): returns
 * what to give back to tls_ownleave, 0 if nothing changed.  m->fsblock is
 * kept: the M comes back to the block. */
uintptr_t tls_ownenter(struct m *m)
{
	if (!m || likely(m->fscur == m->fsbase))
		return 0;
	uintptr_t fs = m->fscur;
	m->fscur = m->fsbase;
	mtally(&m->nfsload);
	tls_setfs(m->fsbase);
	return fs;
}

void tls_ownleave(struct m *m, uintptr_t fs)
{
	if (likely(!fs))
		return;
	m->fscur = fs;
	mtally(&m->nfsload);
	tls_setfs(fs);
}

/* gp (dead, its M switched away from it: after_gfput) gives its block
 * up.  True: free it now (gfreedead); false: another M still has it,
 * and it waits in the limbo for that M to move off. */
bool tls_release(struct g *gp)
{
	char *tcb = gp->tcb;
	if (!tlsinfo.g0keep ||
	    (!gp->tlsmem && !gp->tlsslot && (tcb < gp->stack.lo || tcb >= gp->stack.hi)))
		return true; /* the main thread's block is never freed */
	struct m *m = getm();
	if (m->fscur == (uintptr_t)tcb || atomic_load_explicit(&m->fsblock, memory_order_relaxed) ==
						      (uintptr_t)tcb)
		tls_ownfs(m); /* this M's scheduler kept it */
	if (!heldbyanm((uintptr_t)tcb))
		return true; /* nobody has it, and nobody can take it: its G is dead */
	lock(&limbolock);
	gp->schedlink = limbo;
	limbo = gp;
	atomic_fetch_add(&tls_nlimbo, 1); /* seq_cst, then the loads in limbo_drain */
	unlock(&limbolock);
	limbo_drain();
	return false;
}

/* The static TLS in use now, seen from a fresh block: an existing
 * thread's dtv may not cover a module dlopen'ed since (dlpi_tls_data is
 * then NULL), a block _dl_allocate_tls just made is current.  On the M's
 * own TLS; the block is loaded for the walk (with this M in its tls_m
 * slot and a real tid: glibc's loader lock is recursive, owned by tid).
 * False on ENOMEM. */
static bool used_fresh(struct tlsused *u)
{
	size_t sz = tlsinfo.fullreserve + tlsinfo.align;
	char *mem = rtalloc(sz);
	if (!mem)
		return false;
	char *hi = (char *)(((uintptr_t)mem + sz) & ~(uintptr_t)15);
	memset(hi - tlsinfo.fullreserve, 0, tlsinfo.fullreserve);
	char *tcb = block_fill(hi, tlsinfo.fullreserve, (int)rawsyscall6(SYS_gettid, 0, 0, 0, 0, 0, 0),
			       false);
	if (!tcb) {
		rtfree(mem);
		return false;
	}
	struct m *m = getm();
	*(struct m **)(tcb + tlsinfo.tls_m_off) = m ? tls_mslot(m) : NULL;
	uintptr_t own = tp_self();
	int e = rt_geterrno();
	tls_setfs((uintptr_t)tcb);
	u->tp = (uintptr_t)tcb;
	u->used = 0;
	dl_iterate_phdr(tlsused_cb, u);
	tls_setfs(own);
	rt_seterrno(e);
	if (m)
		m->fscur = own;
	dl_deallocate_tls(tcb, false);
	rtfree(mem);
	return true;
}

/* Whether a module loaded since tls_init took static TLS beyond what a
 * G's block at its stack top holds (then for good).  On the M's own TLS
 * (dl_iterate_phdr's lock is glibc's recursive one, owned by THREAD_SELF):
 * a G that has not built its block yet runs there.  One callback when
 * nothing was loaded since.  A dlopen that counts its object just after
 * this look and gives it static TLS before this G's _dl_allocate_tls is
 * caught by scratch_alloc, which sees every module's place first. */
static struct lock grewlock; /* dl_iterate_phdr calls; held across fork */

/* The shim's fork (atfork handlers): no G is inside dl_iterate_phdr when
 * the child is made.  glibc does not reset the loader's write lock in a
 * child, so a G of the parent caught there would leave it held, and the
 * child's first thread would wait for it for ever. */
void tls_forkprepare(void)
{
	lock(&grewlock);
}

void tls_forkdone(void) /* parent and child */
{
	unlock(&grewlock);
}

static void tls_grewwarn(void)
{
	static _Atomic int warned;
	if (!atomic_exchange(&warned, 1))
		warn("a library loaded at run time uses static TLS: threads started from now on "
		     "have TLS blocks of %zu bytes apart from their stacks",
		     tlsinfo.fullreserve);
}

static bool tls_grew(void)
{
	if (atomic_load_explicit(&tls_grown, memory_order_relaxed))
		return true;
	lock(&grewlock);
	/* acquire: pairs with the release below; tls_grown is stored first */
	if (likely(tls_adds() == atomic_load_explicit(&tls_adds0, memory_order_acquire))) {
		unlock(&grewlock);
		return atomic_load_explicit(&tls_grown, memory_order_relaxed);
	}
	struct tlsused u = { .area = tlsinfo.size - tlsinfo.tcbsize };
	if (!used_fresh(&u))
		u.used = u.area; /* no memory to look: assume the worst */
	if (u.used > tlsinfo.used) {
		atomic_store(&tls_grown, true);
		tls_grewwarn();
	}
	atomic_store_explicit(&tls_adds0, u.adds, memory_order_release);
	unlock(&grewlock);
	return atomic_load(&tls_grown);
}

/* The whole static TLS area in memory of its own, not at the stack top
 * (a module took static TLS since the reserve was sized): its end in *hi,
 * its size in *reserve.  NULL without memory. */
static char *block_alone(char **hi, size_t *reserve)
{
	size_t sz = tlsinfo.fullreserve + tlsinfo.align;
	char *mem = rtalloc(sz);
	if (mem) {
		*hi = (char *)(((uintptr_t)mem + sz) & ~(uintptr_t)15);
		*reserve = tlsinfo.fullreserve;
	}
	return mem;
}

/* On gp, running: build its block in a slot, or at its stack top (whose
 * tlsinfo.reserve bytes gstart left free), and switch to it.  On ENOMEM
 * the G keeps sharing its M's TLS (a warning once). */
void tls_gbegin(struct g *gp)
{
	static _Atomic int warned;
	char *hi = gp->stack.hi, *mem = NULL, *slot = NULL;
	size_t reserve = tlsinfo.reserve;
	bool resdead = tlsinfo.resdead;
	/* Another thread holds the loader's TLS lock (a dlopen relocates:
	 * loaderlock.c), which _dl_allocate_tls takes: wait parked, not in
	 * glibc's lock, which would hold this M and its P while the holder,
	 * a G, may wait for a G that only they would run (weft's own signal
	 * Gs, first run during a resolver's wait, took both Ms of 2 Ps, and
	 * the one the resolver waited for had none).  A G its holder made
	 * has its block filled already (tls_gprep). */
	if (!gp->tlsprep)
		for (int64_t ns = 50000; unlikely(loaderlock_other()); ns = ns < 5000000 ? 2 * ns : ns)
			weft_sleep(ns);
	/* a prepared block (tls_gprep) shows where every module is: no
	 * look at the loader, whose lock its maker may hold */
	if (unlikely(!gp->tlsprep && tls_grew())) {
		/* the stack top has no room for what a later dlopen took */
		if (!(mem = block_alone(&hi, &reserve)))
			goto nomem;
		resdead = false;
	} else if (tlsinfo.slot) {
		if (!(slot = slot_get()))
			goto nomem;
		hi = slot + tlsinfo.tcbsize; /* tcb_at(hi) is the slot's TCB */
		slot_clear(slot);
	}
	if (!slot)
		memset(hi - reserve, 0, reserve); /* a reused stack is dirty */
	bool toosmall = false;
	char *tcb = block_fill_at(hi, reserve, gtid(gp), resdead, !mem, slot != NULL, &toosmall);
	if (toosmall) {
		/* a module took static TLS since tls_grew looked: the whole
		 * area, on its own, from now on (tls_grew says so once) */
		atomic_store(&tls_grown, true);
		tls_grewwarn();
		if (slot)
			slot_put(slot);
		slot = NULL;
		if (!(mem = block_alone(&hi, &reserve)))
			goto nomem;
		resdead = false;
		memset(hi - reserve, 0, reserve);
		/* the whole area: a prepared scratch block fits */
		tcb = gp->tlsprep ? block_fill_at(hi, reserve, gtid(gp), resdead, true, false, &toosmall)
				  : block_fill(hi, reserve, gtid(gp), resdead);
	}
	if (!tcb) {
		if (slot)
			slot_put(slot);
		rtfree(mem);
nomem:
		if (!atomic_exchange(&warned, 1))
			warn("no memory for a green thread's TLS: it shares its OS thread's");
		return;
	}
	gp->tlsmem = mem;
	gp->tlsslot = slot != NULL;
	/* a slot's tsd bytes are its neighbours': only a block of the G's
	 * own has jemalloc's pristine image to keep */
	if (!slot && atomic_load_explicit(&jetsd_state, memory_order_acquire) != 2) {
		int z = 0;
		if (atomic_compare_exchange_strong(&jetsd_state, &z, 1)) {
			memcpy(jetsd_image, tcb + tlsinfo.jetsd_off, JETSD_CHECK);
			atomic_store_explicit(&jetsd_state, 2, memory_order_release);
		}
	}
	tcache_give(tcb);
	tls_adopt(gp, tcb);
	ctype_init();
}

/* Make tcb gp's TCB and load it; gp is running.  No switch can come in
 * between: nothing here parks. */
void tls_adopt(struct g *gp, void *tcb)
{
	struct m *m = getm();
	/* errno moves with the G into the new block (through calls the
	 * compiler cannot merge: errno's address changes here) */
	int e = rt_geterrno();
	*(struct m **)((char *)tcb + tlsinfo.tls_m_off) = tls_mslot(m);
	rt_swslow_set(SW_TLS); /* before the switch away from gp: on this thread */
	gp->tcb = tcb;
	m->fscur = (uintptr_t)tcb;
	mtally(&m->nfsload);
	tls_setfs((uintptr_t)tcb);
	rt_seterrno(e);
	if (tlsinfo.g0keep)
		tls_fsblock(m, (uintptr_t)tcb);
}

/* gp (running) ends its thread life: C++ thread_local destructors on
 * its own TLS (glibc's start_thread runs them first, before the key
 * destructors), then nothing. */
void tls_gdtors(struct g *gp)
{
	if (gp->tcb)
		call_tls_dtors();
}

/* gp (dead, switched away from: after_gfput) gives its block up: the
 * dtv and the dynamic blocks are freed, on the next context's TLS (the
 * G's own malloc cache dies with it).  Its last code ran on the block,
 * so ending costs no FS load of its own. */
void tls_gfree(struct g *gp)
{
	char *tcb = gp->tcb;
	gp->tcb = NULL;
	/* a block at its stack top or of its own (tlsmem); not one it
	 * adopted (the main thread's) */
	void *mem = gp->tlsmem;
	bool slot = gp->tlsslot;
	gp->tlsmem = NULL;
	gp->tlsslot = false;
	if (!mem && !slot && (tcb < gp->stack.lo || tcb >= gp->stack.hi))
		return;
	if (!slot && atomic_load_explicit(&jetsd_state, memory_order_acquire) == 2 &&
	    memcmp(tcb + tlsinfo.jetsd_off, jetsd_image, JETSD_CHECK) != 0)
		fatal("green thread %lld: the runtime's allocator state (jemalloc's tsd) lived in "
		      "its TLS block",
		      (long long)gp->id);
	tcache_take(tcb);
	dl_deallocate_tls(tcb, false);
	if (slot)
		slot_put(tcb);
	else
		rtfree(mem);
}

/* fork from a G with its own TCB runs on its M's: glibc's fork (child
 * side: reclaim_stacks) takes THREAD_SELF for the thread that forks and
 * every other thread it knows for dead, and would give the M's own stack,
 * on which the child's scheduler runs, to the next pthread_create.  The
 * G runs as a shared-TLS G in between (it may park in an atfork handler
 * and resume on another M: that M then forks). */
void tls_forkenter(void)
{
	struct g *gp = getg();
	if (!gp || !gp->tcb)
		return;
	struct m *m = getm();
	int e = rt_geterrno();
	gp->tcbfork = gp->tcb;
	gp->tcb = NULL;
	m->fscur = m->fsbase;
	tls_setfs(m->fsbase);
	rt_seterrno(e);
}

/* In a fork child (fork.c, every other thread gone): the pool's lock
 * may have been held by one of them, and the pool mid-change.  Start
 * with an empty one (the caches in it leak, once). */
void tls_forkchild(void)
{
	atomic_store_explicit(&tcpool_lock.key, 0, memory_order_relaxed);
	tcpool = NULL;
	ntcpool = tcpool_cap = 0;
	/* the limbo's Gs are frozen with every other G (their stacks leak,
	 * once); the Ms that held their blocks are gone */
	atomic_store_explicit(&slotlock.key, 0, memory_order_relaxed); /* the list stays */
	atomic_store_explicit(&limbolock.key, 0, memory_order_relaxed);
	limbo = NULL;
	atomic_store(&tls_nlimbo, 0);
}

void tls_forkleave(void)
{
	struct g *gp = getg();
	if (!gp || !gp->tcbfork)
		return;
	void *tcb = gp->tcbfork;
	gp->tcbfork = NULL;
	tls_adopt(gp, tcb);
}

/* The real main thread hands its TLS and TCB to the main G and moves to
 * a fresh block (it never ends).  Returns its old TCB, or NULL
 * (ENOMEM: nothing changed). */
void *tls_movemain(void)
{
	size_t sz = tlsinfo.fullreserve + tlsinfo.align;
	char *mem = rtalloc(sz); /* never freed: the main thread never ends */
	if (!mem)
		return NULL;
	char *hi = (char *)(((uintptr_t)mem + sz) & ~(uintptr_t)15);
	/* the whole area, and jemalloc may run on this thread's block */
	char *tcb = block_fill(hi, tlsinfo.fullreserve, (int)rawsyscall6(SYS_gettid, 0, 0, 0, 0, 0, 0),
			       false);
	if (!tcb) {
		rtfree(mem);
		return NULL;
	}
	void *old = (void *)tp_self();
	int e = rt_geterrno();
	rt_swslow_set(SW_TLS);
	tls_setfs((uintptr_t)tcb);
	rt_seterrno(e);
	ctype_init();
	return old;
}
