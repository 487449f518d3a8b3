/*
 * splitstack.c - segmented G stacks for code built with gcc -fsplit-stack.
 *
 * A function compiled with -fsplit-stack starts by comparing its stack
 * pointer (less its frame) with a limit kept in the thread control block
 * (%fs:0x70 on x86-64); below it, it calls libgcc's __morestack, which
 * links a new segment to the list of this thread's segments and runs the
 * function there.  When a call into code built without -fsplit-stack
 * (libc, or libweft itself) is linked with gold, gold rewrites the
 * caller's check so that it demands about 1 MiB of room
 * (__morestack_non_split): code that cannot grow its stack always gets
 * plenty.  libgcc keeps the segment list, the current segment and the
 * limit per thread, and lets a coroutine runtime swap them as a void
 * *context[10] (__splitstack_getcontext/setcontext, as gccgo does).
 *
 * Here a segmented G owns such a context (g->splitctx): the switch saves
 * the leaving G's and installs the entering G's (sanitizer.h,
 * split_switch).  Every other context - g0 and guarded Gs - runs with
 * the all-zero context, whose limit 0 never triggers __morestack: a
 * guarded G running split-stack code behaves exactly as without it
 * (fixed stack, guard page).  Each M installs the zero context when it
 * starts.
 *
 * The first segment.  libgcc would mmap it (one system call and, with
 * its header at the bottom and frames at the top, two resident pages per
 * G).  Instead it is a slot carved from a large mapping of weft's own,
 * in libgcc's segment format: the 56-byte segment header sits just below
 * the slot's usable bytes, which puts it in the top page of the slot
 * below - a page that is resident anyway - together with the context
 * array.  So a fresh G touches one page, and 100,000 of them take a
 * handful of mappings (splitchunk below).  By default the first segment
 * is large in address space (SPLIT_DEFAULT, 1 MiB + 64 KiB, committed
 * only where touched): then a call into libweft or libc from shallow
 * user code finds the room gold demands without a new segment, so a
 * parked segmented G costs one page, as a guarded one does.  attr.stack_size (>= 16 KiB) asks for a
 * smaller first segment; such a G gets its ~1 MiB segment from libgcc at
 * its first call into non-split code.  Segments beyond the first come
 * from libgcc (__morestack) and go back to it.
 *
 * Reuse.  When a G exits, the segments libgcc added go back to it
 * (munmap) and the first segment stays with the dead G for the next G
 * made from its descriptor, as a guarded stack does.  (Keeping libgcc's
 * segments too would save a small-first-segment G an mmap, but a dead G
 * would then hold on to every page its deepest call touched.)  When
 * proc.c gives the stack up (stackfree), the slot returns to its class's
 * free list, past SPLIT_POOL_BUDGET free slots without its pages.
 *
 * Only libweft_split (built with -DWEFT_SPLITSTACK) has any of this; in
 * libweft segmented requests get guarded stacks.  libweft_split itself is
 * not compiled with -fsplit-stack: calls into it are calls into non-split
 * code, which is what keeps the runtime and libc safe on small segments.
 * The __splitstack_* functions are weak references that bind to the copy
 * of libgcc's generic-morestack.o in the split-stack executable (its
 * per-thread variables must be the very ones __morestack uses); in a
 * program not built with -fsplit-stack they are absent and segmented
 * requests get guarded stacks.
 *
 * libgcc internals relied on (checked once at start, else segmented
 * requests fall back to guarded stacks with a warning): the segment
 * header is 56 bytes {prev, next, size, old_stack, dynamic_allocation,
 * free_dynamic_allocation, extra}, and context[0] is the segment list.
 * The switch (sanitizer.h) reads and writes the current segment and the
 * segment list through libgcc's exported per-thread variables and the
 * limit at %fs:0x70 (the x86-64 split-stack ABI); if those cannot be
 * found and checked against __splitstack_getcontext, it calls libgcc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime.h"
#include "sanitizer.h"

int splitstack_prepare(struct g *gp, const weft_attr_t *attr) HIDDEN;
void splitstack_free(struct stack *s) HIDDEN;

static struct p *curp(void)
{
	struct m *m = getm();
	return m && m->curg ? m->p : NULL;
}

/* A guarded stack of the size asked for (0: WEFT_STACK_SIZE), taken
 * when the G first runs (proc.c gstart); the descriptor may still hold a
 * dead G's segmented stack. */
static int guarded_prepare(struct g *gp, size_t size)
{
	gp->splitctx = NULL;
	struct p *pp = curp();
	if (gp->stack.lo)
		stackfree(pp, &gp->stack);
	gp->stackwant = size;
	return stack_ready(pp, size);
}

#ifndef WEFT_SPLITSTACK

/* libweft: every G gets a guarded stack. */
int splitstack_prepare(struct g *gp, const weft_attr_t *attr)
{
	return guarded_prepare(gp, attr ? attr->stack_size : 0);
}

void splitstack_free(struct stack *s)
{
	(void)s;
}

#else /* WEFT_SPLITSTACK */

#include <dlfcn.h>

#define PAGE 4096UL
#define SPLIT_DEFAULT ((1UL << 20) + (64UL << 10)) /* bytes of a first segment, header included */
#define SPLIT_MIN (16UL << 10)
#define SPLIT_POOL_BUDGET 1024   /* free slots kept with their pages, per class */
#define SPLIT_CHUNK (256UL << 20) /* address space per mapping */
#define SPLIT_CHUNK_SLOTS 256
#define NSPLITCLASSES 8

/* libgcc's struct stack_segment (generic-morestack.c) */
struct seghdr {
	struct seghdr *prev;
	struct seghdr *next;
	size_t size;      /* usable bytes, just above the header */
	void *old_stack;
	struct dynblock *dyn;
	struct dynblock *freedyn;
	void *extra;
};
/* libgcc's struct dynamic_allocation_blocks (alloca beyond a segment) */
struct dynblock {
	struct dynblock *next;
	size_t size;
	void *block;
};

/* A chunk: one mapping of equal slots, a page multiple each.  A slot is
 * [record | segment header | usable bytes], and slots start SLOTHEAD
 * bytes below a page boundary: the usable bytes start on a page, and
 * the record and header of slot k+1 end slot k's top page, just above
 * the first frames of slot k's G.  A parked G with a shallow stack
 * keeps one page resident.
 *   base: [..pad..rec0 hdr0|usable 0 ... rec1 hdr1|usable 1 ... rec2 ...
 *                          ^ page                      ^ page
 */
struct splitchunk {
	char *base;
	size_t len;
	struct splitclass *cls;
	struct splitchunk *next, *prev; /* cls->partial: chunks with a slot to give */
	uint32_t nslots;
	uint32_t ncarved;          /* slots handed out at least once */
	uint32_t nfree;            /* entries in freeidx */
	bool onlist;
	uint8_t *used;             /* per slot: in use */
	uint32_t *freeidx;         /* free slot indices */
};

struct splitrec {
	void *ctx[10];             /* libgcc split-stack context: g->splitctx */
	struct splitchunk *chunk;
	uint32_t slot;
};
#define SLOTHEAD 160            /* record + header below the usable bytes, 16-aligned */

struct splitclass {
	size_t slotlen;            /* key: the size asked for, page multiple */
	uint32_t nslots;           /* per chunk */
	struct splitchunk *partial;
	int64_t nfree;             /* free slots in this class */
};

static struct lock splitlock;
static struct splitclass classes[NSPLITCLASSES];
static int nclasses;
static _Atomic int splitstate;  /* 0 unchecked, 1 usable, -1 unusable */
static size_t defusable;
static void (*libc_free)(void *); /* the program's free, for libgcc's alloca blocks */

void *splitstack_zeroctx[10] HIDDEN; /* g0 and guarded Gs: limit 0, no segments */

extern void *__splitstack_makecontext(size_t, void *[10], size_t *) __attribute__((weak));
extern void *__splitstack_resetcontext(void *[10], size_t *) __attribute__((weak));
extern void __splitstack_releasecontext(void *[10]) __attribute__((weak));
extern void __splitstack_block_signals_context(void *[10], int *, int *) __attribute__((weak));

static struct splitrec *slotrec(struct splitchunk *c, uint32_t i)
{
	return (struct splitrec *)(c->base + PAGE - SLOTHEAD + (size_t)i * c->cls->slotlen);
}

static struct seghdr *rechdr(struct splitrec *r)
{
	return (struct seghdr *)((char *)r + SLOTHEAD - sizeof(struct seghdr));
}

/* Is libgcc's split-stack support here and laid out as we expect? */
static bool splitcheck(void)
{
	if (!__splitstack_makecontext || !__splitstack_resetcontext || !__splitstack_getcontext ||
	    !__splitstack_setcontext || !__splitstack_releasecontext ||
	    !__splitstack_block_signals_context)
		return false; /* not a -fsplit-stack program */
	void *ctx[10];
	size_t sz = 0, sz2 = 0;
	char *p = __splitstack_makecontext(0, ctx, &sz);
	if (!p)
		return false;
	struct seghdr *h = ctx[0];
	bool ok = (char *)h + sizeof *h == p && ctx[1] == (void *)h && h->size == sz &&
		  !h->prev && !h->next && __splitstack_resetcontext(ctx, &sz2) == p && sz2 == sz &&
		  ctx[0] == (void *)h && ctx[3] > (void *)p && ctx[3] < (void *)(p + sz);
	__splitstack_releasecontext(ctx);
	if (!ok)
		warn("libgcc's split-stack layout is not the one weft knows: "
		     "segmented green threads get guarded stacks");
	return ok;
}

ptrdiff_t splitstack_tls_segs HIDDEN, splitstack_tls_cur HIDDEN;

/* libgcc's per-thread segment list and current segment, in the
 * executable's static TLS ("shared by all split stack code across shared
 * library boundaries", so exported).  Weak: in a program without
 * -fsplit-stack they resolve to offset 0, which no TLS variable has. */
extern __thread void *__morestack_segments __attribute__((weak, tls_model("initial-exec")));
extern __thread void *__morestack_current_segment
	__attribute__((weak, tls_model("initial-exec")));

/* Where those are, as offsets from the thread pointer, for split_switch
 * to save and restore them inline (the executable's TLS is static: the
 * same offset in every thread).  Checked against __splitstack_getcontext
 * both ways; if anything disagrees, switches call libgcc instead. */
static void tlsfind(void)
{
	char *tp;
	__asm__("movq %%fs:0, %0" : "=r"(tp));
	char *segs = (char *)&__morestack_segments;
	char *cur = (char *)&__morestack_current_segment;
	if (segs == tp || cur == tp)
		return;
	void *ctx[10], *guard;
	__splitstack_getcontext(ctx);
	__asm__ volatile("movq %%fs:0x70, %0" : "=r"(guard));
	if (ctx[0] != *(void **)segs || ctx[1] != *(void **)cur || ctx[3] != guard)
		return;
	/* and the other way: a change made through the offsets is what
	 * libgcc then reads */
	void *save[10];
	__splitstack_getcontext(save);
	*(void **)(tp + (cur - tp)) = (void *)save;
	__splitstack_getcontext(ctx);
	bool ok = ctx[1] == (void *)save;
	__splitstack_setcontext(save);
	if (!ok)
		return;
	splitstack_tls_segs = segs - tp;
	splitstack_tls_cur = cur - tp;
}

static bool splitusable(void)
{
	int s = atomic_load_explicit(&splitstate, memory_order_acquire);
	if (likely(s != 0))
		return s > 0;
	lock(&splitlock);
	s = atomic_load_explicit(&splitstate, memory_order_relaxed);
	if (s == 0) {
		defusable = SPLIT_DEFAULT;
		/* an explicit WEFT_STACK_SIZE sizes first segments too */
		const char *e = getenv("WEFT_STACK_SIZE");
		if (e && *e && weftenv.stacksize >= SPLIT_MIN)
			defusable = (weftenv.stacksize + PAGE - 1) & ~(PAGE - 1);
		libc_free = (void (*)(void *))dlsym(RTLD_DEFAULT, "free");
		s = splitcheck() && libc_free ? 1 : -1;
		if (s > 0)
			tlsfind();
		atomic_store_explicit(&splitstate, s, memory_order_release);
	}
	unlock(&splitlock);
	return s > 0;
}

static struct splitclass *classfor(size_t slotlen)
{
	for (int i = 0; i < nclasses; i++)
		if (classes[i].slotlen == slotlen)
			return &classes[i];
	if (nclasses == NSPLITCLASSES)
		return NULL;
	struct splitclass *c = &classes[nclasses++];
	c->slotlen = slotlen;
	size_t n = SPLIT_CHUNK / c->slotlen;
	c->nslots = n < 1 ? 1 : n > SPLIT_CHUNK_SLOTS ? SPLIT_CHUNK_SLOTS : (uint32_t)n;
	return c;
}

static void listadd(struct splitclass *cls, struct splitchunk *c)
{
	c->prev = NULL;
	c->next = cls->partial;
	if (cls->partial)
		cls->partial->prev = c;
	cls->partial = c;
	c->onlist = true;
}

static void listdel(struct splitclass *cls, struct splitchunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		cls->partial = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->onlist = false;
}

static struct splitchunk *newchunk(struct splitclass *cls)
{
	uint32_t n = cls->nslots;
	struct splitchunk *c = rtalloc(sizeof *c + n * (sizeof(uint32_t) + 1));
	if (!c)
		return NULL;
	size_t len = PAGE + (size_t)n * cls->slotlen; /* a page multiple */
	char *base = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (base == MAP_FAILED) {
		rtfree(c);
		return NULL;
	}
	c->base = base;
	c->len = len;
	c->cls = cls;
	c->nslots = n;
	c->freeidx = (uint32_t *)(c + 1);
	c->used = (uint8_t *)(c->freeidx + n);
	listadd(cls, c);
	return c;
}

/* A slot of class cls, record and header written; splitlock held. */
static struct splitrec *takeslot(struct splitclass *cls)
{
	struct splitchunk *c = cls->partial;
	if (!c && !(c = newchunk(cls)))
		return NULL;
	uint32_t i;
	if (c->nfree > 0) {
		i = c->freeidx[--c->nfree];
		cls->nfree--;
	} else {
		i = c->ncarved++;
	}
	if (c->nfree == 0 && c->ncarved == c->nslots)
		listdel(cls, c);
	c->used[i] = 1;
	struct splitrec *r = slotrec(c, i);
	r->chunk = c;
	r->slot = i;
	struct seghdr *h = rechdr(r);
	memset(h, 0, sizeof *h);
	h->size = cls->slotlen - SLOTHEAD;
	/* the first frames go at the top: commit that page now (a fault costs
	 * far more than this) */
	char *top = (char *)(((uintptr_t)r + cls->slotlen - 1) & ~(PAGE - 1));
	if (madvise(top, PAGE, MADV_POPULATE_WRITE) != 0)
		*(volatile char *)((char *)r + cls->slotlen - 1) = 0;
	return r;
}

/* Slot i of c is free again; splitlock held.  Past the budget its pages
 * go back to the kernel - those it shares with a neighbour only if that
 * one is free too - and past twice the budget so does a free chunk. */
static void putslot(struct splitchunk *c, uint32_t i)
{
	struct splitclass *cls = c->cls;
	c->used[i] = 0;
	c->freeidx[c->nfree++] = i;
	cls->nfree++;
	if (!c->onlist)
		listadd(cls, c);
	if (cls->nfree <= SPLIT_POOL_BUDGET)
		return;
	if (c->nfree == c->ncarved && cls->nfree > 2 * SPLIT_POOL_BUDGET) {
		listdel(cls, c);
		cls->nfree -= c->nfree;
		munmap(c->base, c->len);
		rtfree(c);
		return;
	}
	uintptr_t a = (uintptr_t)slotrec(c, i), b = a + cls->slotlen;
	uintptr_t first = a & ~(PAGE - 1), last = (b + PAGE - 1) & ~(PAGE - 1);
	if (first < a && i > 0 && c->used[i - 1])
		first += PAGE;
	if (last > b && i + 1 < c->ncarved && c->used[i + 1])
		last -= PAGE;
	if (last > (uintptr_t)c->base + c->len)
		last = (uintptr_t)c->base + c->len;
	if (last > first)
		madvise((void *)first, last - first, MADV_DONTNEED);
}

/* Blocks alloca'd beyond a segment by frames that are all gone now:
 * let libgcc reuse (or free) them at the next alloca. */
static void dynreap(struct seghdr *h)
{
	if (!h->dyn)
		return;
	struct dynblock **pp = &h->dyn;
	while (*pp)
		pp = &(*pp)->next;
	*pp = h->freedyn;
	h->freedyn = h->dyn;
	h->dyn = NULL;
}

/* Give libgcc back the segments after h, the first. */
static void releaseafter(struct seghdr *h)
{
	if (!h->next)
		return;
	void *tmp[10];
	memset(tmp, 0, sizeof tmp);
	tmp[0] = h->next;
	h->next = NULL;
	__splitstack_releasecontext(tmp);
}

/* Make r's context that of an empty stack: only the first segment, which
 * is current, with its limit set. */
static void resetrec(struct splitrec *r)
{
	struct seghdr *h = rechdr(r);
	h->prev = NULL;
	h->old_stack = NULL;
	dynreap(h);
	releaseafter(h);
	memset(r->ctx, 0, sizeof r->ctx);
	r->ctx[0] = h;
	size_t sz;
	__splitstack_resetcontext(r->ctx, &sz);
	int dont_block = 0; /* no sigprocmask per segment, as gccgo: see docs/stacks.md */
	__splitstack_block_signals_context(r->ctx, &dont_block, NULL);
}

/* A first segment as a stack for proc.c: the whole slot of 'size' bytes
 * (record and header at the bottom), so that stacksize() is what was
 * asked for. */
static int splitalloc(struct stack *s, size_t size)
{
	lock(&splitlock);
	struct splitclass *cls = classfor(size);
	struct splitrec *r = cls ? takeslot(cls) : NULL;
	unlock(&splitlock);
	if (!r) {
		errno = ENOMEM;
		return -1;
	}
	resetrec(r);
	s->lo = (char *)r;
	s->hi = s->lo + size;
	s->chunk = (struct stackchunk *)(void *)r;
	s->slot = 0;
	s->kind = STACK_SEGMENTED;
	return 0;
}

/* The blocks libgcc malloc'd for alloca beyond h: the slot goes back to
 * the pool, whose pages may be discarded. */
static void dynfree(struct seghdr *h)
{
	struct dynblock *lists[2] = { h->dyn, h->freedyn };
	for (int k = 0; k < 2; k++)
		for (struct dynblock *b = lists[k], *next; b; b = next) {
			next = b->next;
			libc_free(b->block);
			libc_free(b);
		}
	h->dyn = h->freedyn = NULL;
}

void splitstack_free(struct stack *s)
{
	struct splitrec *r = (struct splitrec *)(void *)s->chunk;
	struct seghdr *h = rechdr(r);
	releaseafter(h);
	dynfree(h);
	lock(&splitlock);
	putslot(r->chunk, r->slot);
	unlock(&splitlock);
	s->lo = s->hi = NULL;
	s->chunk = NULL;
	s->kind = STACK_GUARD;
}

/* weft_go_attr, before the G's first frame is built: give gp the kind
 * and size of stack attr (or WEFT_STACK, WEFT_STACK_SIZE) asks for. */
int splitstack_prepare(struct g *gp, const weft_attr_t *attr)
{
	int kind = attr && attr->stack_kind ? attr->stack_kind : weftenv.stackkind;
	size_t size = attr ? attr->stack_size : 0;
	if (kind != WEFT_STACK_SEGMENTED || !splitusable())
		return guarded_prepare(gp, size);
	size_t want = size ? (size + PAGE - 1) & ~(PAGE - 1) : defusable;
	if (gp->stack.kind == STACK_SEGMENTED && stacksize(&gp->stack) == want) {
		gp->splitctx = ((struct splitrec *)(void *)gp->stack.chunk)->ctx; /* reset at exit */
		return 0;
	}
	struct stack s;
	if (splitalloc(&s, want) != 0)
		return -1;
	if (gp->stack.lo)
		stackfree(curp(), &gp->stack);
	gp->stack = s;
	gp->splitctx = ((struct splitrec *)(void *)s.chunk)->ctx;
	return 0;
}

/* The G died (san_gdestroy): empty its stack for the next G. */
void splitstack_gdead(struct g *gp)
{
	resetrec((struct splitrec *)(void *)gp->stack.chunk);
}

#endif /* WEFT_SPLITSTACK */
