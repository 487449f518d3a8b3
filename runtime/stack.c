/*
 * stack.c - G stacks: mmap'd, lazily committed, pooled, overflow-checked.
 *
 * Stacks are carved from chunks: one mmap holds many equal slots.  Only
 * the top page of each slot is committed up front (MADV_POPULATE_WRITE,
 * ~0.7 us here versus 11-21 us for a first-touch fault), for every slot
 * of a chunk when the chunk is mapped; the rest costs memory only once
 * touched.
 *
 * Overflow is never silent.  Every guard page splits a mapping, and the
 * kernel allows vm.max_map_count (65530) mappings per process, so:
 *   guard chunk:  [guard|stack][guard|stack]...   while the budget lasts
 *   marked chunk: the same, each guard a marker (MADV_GUARD_INSTALL,
 *                 Linux 6.13: in the page-table entry, splitting nothing,
 *                 copied to a fork child, kept through MADV_DONTNEED),
 *                 afterwards, where the kernel has them
 *   canary chunk: [guard][stack|c][stack|c]...    afterwards, elsewhere
 * In a canary chunk the CANARY bytes c above each stack are the canary of
 * the stack above (which grows down into them); they live in a page that
 * is resident anyway, so they cost no memory, and they are checked every
 * time the G switches out.  The first slot of a canary chunk sits
 * on the chunk's guard page.  A guard-page hit is caught by the SIGSEGV
 * handler running on the M's signal stack.
 *
 * A G takes its stack when it first runs, not when it is made (proc.c
 * gstart), and gives it back when it ends: a G that has not started costs
 * its descriptor only, and a loop that spawns thousands of short Gs runs
 * them on a few warm stacks.  weft_go only checks that the pool can give
 * one (stack_ready), so it can still fail with ENOMEM.  Free stacks go
 * to a per-P cache (default size only), used as a stack: its top is the
 * one a G of this P ran on last, still in the CPU's caches and TLB; a
 * full cache gives its oldest half back to the chunks.  When more than POOL_BUDGET stacks are free, a freed
 * stack's pages below its top page go back to the kernel at once, and
 * sysmon's scavenger unmaps chunks whose slots are all free.  (Dead Gs keep
 * their stacks for reuse, up to GFREE_GLOBAL_STACKS in proc.c.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "runtime.h"
#include "sys.h"

#define PAGE 4096UL
#define CANARY 64            /* bytes at a slot's top guarding the slot above */
#define GUARD_CHUNK_SLOTS 16
#define CANARY_CHUNK_SLOTS 256
#define POOL_BUDGET 4096     /* free stacks kept with their pages */
#define NCLASSES 8           /* distinct stack sizes pooled */
#define ALTSTACK (64 * 1024)

struct stackchunk {
	char *base;                  /* the mapping */
	size_t len;                  /* its length */
	size_t slotlen;              /* bytes per slot (incl. guard page if any) */
	struct stackpool *pool;      /* size class it belongs to */
	uint32_t nslots;             /* capacity */
	uint32_t ncarved;            /* slots handed out at least once */
	uint32_t nfree;              /* entries in freeidx */
	uint8_t kind;                /* STACK_GUARD or STACK_CANARY */
	bool marked;                 /* guard pages are markers, not mappings:
	                              * the chunk took nothing of guard_budget */
	bool onlist;                 /* on pool->partial */
	bool populated;              /* every slot's top committed at map time
	                              * (populatetops): freshslot needs no madvise */
	struct stackchunk *next, *prev; /* pool->partial: chunks with a slot to give */
	uint32_t freeidx[];          /* free slot indices */
};

struct stackpool {
	size_t usable;               /* usable bytes of each stack (key) */
	struct stackchunk *partial;  /* chunks that can give a slot */
	int64_t nfree;               /* free stacks in this class */
	_Atomic int64_t navail;      /* slots to give without a new mapping (free
	                              * or never carved); written under stacklock,
	                              * read without it by stack_ready */
};

struct lock stacklock;               /* pools, chunks, budgets (fork.c clears it) */
static struct stackpool pools[NCLASSES];
static int npools;
static long guard_budget;            /* mprotect-guarded stacks we may still map */
static int guardmarks;               /* 1 guard markers work, -1 they do not (or
                                      * WEFT_DEBUG=guardmarks=0), 0 not yet tried */
static uint64_t canaryval;           /* per-process random canary word */
static size_t defusable;             /* default usable size */
static struct stackpool *_Atomic defpool; /* the default size's class, once made */

static void availadd(struct stackpool *sp, int64_t d) /* stacklock held */
{
	atomic_store_explicit(&sp->navail, atomic_load_explicit(&sp->navail, memory_order_relaxed) + d,
			      memory_order_relaxed);
}

void stackinit(void)
{
	defusable = (weftenv.stacksize + PAGE - 1) & ~(PAGE - 1);
	/* each guarded stack costs two mappings; leave half the budget to
	 * the program, jemalloc and canary chunks */
	long maxmaps = 65530;
	int fd = (int)sys_open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char buf[32], *end;
		long n = sys_read(fd, buf, sizeof buf - 1);
		sys_close(fd);
		buf[n > 0 ? n : 0] = 0;
		long v = strtol(buf, &end, 10);
		if (end != buf)
			maxmaps = v;
	}
	guard_budget = maxmaps / 4;
	if (weftenv.noguardmarks)
		guardmarks = -1;
	const uint8_t *r = (const uint8_t *)getauxval(AT_RANDOM);
	if (r)
		memcpy(&canaryval, r + 8, sizeof canaryval);
	canaryval ^= (uint64_t)nanotime() * 0x9e3779b97f4a7c15ULL;
	canaryval |= 1; /* never all zero: a fresh page reads as zero */
}

/* The size the stack was asked for (its class), which is what the
 * program configured; a canary-chunk stack has up to a page more. */
size_t stacksize(const struct stack *s)
{
	if (s->kind == STACK_SEGMENTED || !s->chunk)
		return (size_t)(s->hi - s->lo);
	return s->chunk->pool->usable;
}

static void writecanary(char *lo)
{
	uint64_t *w = (uint64_t *)(lo - CANARY);
	for (int i = 0; i < CANARY / 8; i++)
		w[i] = canaryval;
}

bool stackcanary_ok(const struct stack *s)
{
	const uint64_t *w = (const uint64_t *)(s->lo - CANARY);
	/* the word nearest the stack is hit first; check two for safety */
	return w[CANARY / 8 - 1] == canaryval && w[0] == canaryval;
}

static struct stackpool *poolfor(size_t usable)
{
	for (int i = 0; i < npools; i++)
		if (pools[i].usable == usable)
			return &pools[i];
	if (npools == NCLASSES)
		return NULL;
	pools[npools].usable = usable;
	if (usable == defusable) /* release: stack_ready reads the class unlocked */
		atomic_store_explicit(&defpool, &pools[npools], memory_order_release);
	return &pools[npools++];
}

static void listadd(struct stackpool *sp, struct stackchunk *c)
{
	c->prev = NULL;
	c->next = sp->partial;
	if (sp->partial)
		sp->partial->prev = c;
	sp->partial = c;
	c->onlist = true;
}

static void listdel(struct stackpool *sp, struct stackchunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		sp->partial = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->onlist = false;
}

/* A new chunk for class sp; called with stacklock held.
 *   guard chunk:  [guard page | usable] x n              (slot = PAGE + usable)
 *   canary chunk: [guard page] [stack ... | canary] x n  (slot = usable + PAGE)
 * In a canary chunk a stack runs from the bottom of its slot to CANARY
 * bytes below the top; those CANARY bytes are the canary of the next
 * stack, which starts right there: an overflow of k+1 hits them first.
 * Slots are page multiples so that a stack's top frames and the canary
 * above it share one page: one resident page per fresh stack. */
static void freshslot(struct stack *s);
static void slotbounds(struct stackchunk *c, uint32_t i, struct stack *s);
static void toprange(const struct stack *s, char **from, size_t *len);

/* Commit the top pages of a new chunk's n slots in one system call:
 * process_madvise(2) on this process (PIDFD_SELF, Linux 6.14; any advice
 * on one's own process since 6.13) takes a vector of ranges, so 256
 * scattered top pages cost one call instead of 256 (each ~1 us of
 * system-call overhead here on top of ~0.4 us of populating).  On an
 * older kernel the call fails once and freshslot populates slot by
 * slot, as before. */
#define PIDFD_SELF_PROCESS (-10001) /* linux/pidfd.h PIDFD_SELF_THREAD_GROUP */
#define POPULATE_IOV 256            /* <= IOV_MAX (1024) */
static _Atomic bool vpopulate_broken; /* the call failed: don't ask again */

static void populatetops(struct stackchunk *c, uint32_t n)
{
	if (atomic_load_explicit(&vpopulate_broken, memory_order_relaxed))
		return;
	struct iovec iov[POPULATE_IOV];
	for (uint32_t i = 0; i < n;) {
		uint32_t k = 0;
		size_t want = 0;
		for (; i < n && k < POPULATE_IOV; i++, k++) {
			struct stack t;
			char *top;
			size_t len;
			slotbounds(c, i, &t);
			toprange(&t, &top, &len);
			iov[k].iov_base = top;
			iov[k].iov_len = len;
			want += len;
		}
		long r = sys5(SYS_process_madvise, PIDFD_SELF_PROCESS, (long)iov, k,
			      MADV_POPULATE_WRITE, 0);
		if (r < 0) {
			atomic_store_explicit(&vpopulate_broken, true, memory_order_relaxed);
			return;
		}
		/* a short count (it stops at the first range it could not do):
		 * freshslot's own madvise finishes the rest, one slot at a time */
		if ((size_t)r < want)
			return;
	}
	c->populated = true;
}

/* Guard markers on the n guard pages of a guard chunk (each slot's
 * first page), in one process_madvise call (PIDFD_SELF, 6.14) or else
 * one madvise each (6.13).  False if the kernel has none (or would not
 * make them).  stacklock held (guardmarks); only while guardmarks >= 0.
 *
 * Only once the mprotect budget is spent, instead of canary chunks: a
 * marker splits no mapping, but gdb's gcore, which reads a live
 * process's memory a mapping at a time through /proc/PID/mem, fails on
 * the marker and leaves the whole chunk's stacks out of the core (the
 * kernel's own core dumps are whole, a guard page read as zeros). */
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 /* linux/mman.h, Linux 6.13 */
#endif
static bool installmarks(char *base, uint32_t n, size_t slotlen)
{
	struct iovec iov[GUARD_CHUNK_SLOTS];
	long r = -1;
	if (n <= GUARD_CHUNK_SLOTS) {
		for (uint32_t i = 0; i < n; i++)
			iov[i] = (struct iovec){ base + i * slotlen, PAGE };
		r = sys5(SYS_process_madvise, PIDFD_SELF_PROCESS, (long)iov, n,
			 MADV_GUARD_INSTALL, 0);
	}
	if (r != (long)(n * PAGE))
		for (uint32_t i = 0; i < n; i++)
			if (sys3(SYS_madvise, (long)(base + i * slotlen), PAGE,
				 MADV_GUARD_INSTALL) != 0)
				return false; /* EINVAL: a kernel without them */
	guardmarks = 1;
	return true;
}

static struct stackchunk *newchunk(struct stackpool *sp)
{
	bool mprot = guard_budget >= GUARD_CHUNK_SLOTS;
	bool guard = mprot || guardmarks >= 0;
	uint32_t n = guard ? GUARD_CHUNK_SLOTS : CANARY_CHUNK_SLOTS;
	if (sp->usable >= (8UL << 20))
		n = guard ? 1 : 4; /* big stacks: don't reserve gigabytes at once */
	size_t slotlen = PAGE + sp->usable;
	size_t len = (guard ? 0 : PAGE) + (size_t)n * slotlen;
	len = (len + PAGE - 1) & ~(PAGE - 1);
	struct stackchunk *c = rtalloc(sizeof *c + n * sizeof(uint32_t));
	if (!c)
		return NULL;
	char *base = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (base == MAP_FAILED) {
		rtfree(c);
		errno = ENOMEM;
		return NULL;
	}
	c->marked = false;
	if (mprot) {
		for (uint32_t i = 0; i < n; i++)
			mprotect(base + i * slotlen, PAGE, PROT_NONE);
		guard_budget -= n;
	} else if (guard) {
		if (!installmarks(base, n, slotlen)) {
			/* no markers after all: canary chunks from now on */
			guardmarks = -1;
			munmap(base, len);
			rtfree(c);
			return newchunk(sp);
		}
		c->marked = true;
	} else {
		mprotect(base, PAGE, PROT_NONE);
	}
	c->base = base;
	c->len = len;
	c->slotlen = slotlen;
	c->pool = sp;
	c->nslots = n;
	c->kind = guard ? STACK_GUARD : STACK_CANARY;
	c->populated = false;
	/* commit every slot's top now, in one go, by the one thread that
	 * maps the chunk: Ms starting Gs on several Ps then take slots
	 * without system calls (each M populating its own slots made them
	 * contend inside the kernel: 1M parked Gs on 2 Ps 4.5 s -> 1.7-2.0 s).
	 * The chunk is ours alone until listadd, so stacklock is let go
	 * meanwhile (another M may map a chunk of its own: harmless). */
	unlock(&stacklock);
	populatetops(c, n);
	for (uint32_t i = 0; i < n; i++) {
		struct stack t;
		slotbounds(c, i, &t);
		freshslot(&t);
	}
	lock(&stacklock);
	listadd(sp, c);
	availadd(sp, n);
	return c;
}

static void slotbounds(struct stackchunk *c, uint32_t i, struct stack *s)
{
	if (c->kind == STACK_GUARD) {
		s->lo = c->base + (size_t)i * c->slotlen + PAGE;
		s->hi = s->lo + c->pool->usable;
	} else {
		s->lo = c->base + PAGE + (size_t)i * c->slotlen;
		s->hi = s->lo + c->slotlen - CANARY;
	}
	s->chunk = c;
	s->slot = i;
	/* the first slot of a canary chunk sits on the chunk's guard page */
	s->kind = (c->kind == STACK_CANARY && i > 0) ? STACK_CANARY : STACK_GUARD;
}

/* The pages a fresh stack touches at once: its initial frames below hi
 * and (canary chunks) the canary just above it. */
static void toprange(const struct stack *s, char **from, size_t *len)
{
	struct stackchunk *c = s->chunk;
	char *a = (char *)((uintptr_t)(s->hi - 1024) & ~(PAGE - 1));
	char *top = s->hi + (c->kind == STACK_CANARY ? CANARY : 0);
	char *b = (char *)(((uintptr_t)top + PAGE - 1) & ~(PAGE - 1));
	if (b > c->base + c->len)
		b = c->base + c->len;
	*from = a;
	*len = (size_t)(b - a);
}

/* A never-used slot: commit its top (~0.7 us instead of a 11-21 us
 * fault) and write its canary. */
static void freshslot(struct stack *s)
{
	char *top;
	size_t len;
	toprange(s, &top, &len);
	if (!s->chunk->populated && madvise(top, len, MADV_POPULATE_WRITE) != 0)
		*(volatile char *)(s->hi - 1) = 0;
	if (s->kind == STACK_CANARY)
		writecanary(s->lo);
}

/* Take one stack of class sp; stacklock held (newchunk lets it go a
 * while). */
static int takeslot(struct stackpool *sp, struct stack *s)
{
	struct stackchunk *c = sp->partial;
	if (!c && !(c = newchunk(sp)))
		return -1;
	if (c->nfree > 0) {
		slotbounds(c, c->freeidx[--c->nfree], s);
		sp->nfree--;
	} else {
		slotbounds(c, c->ncarved++, s);
	}
	availadd(sp, -1);
	if (c->nfree == 0 && c->ncarved == c->nslots)
		listdel(sp, c);
	return 0;
}

/* Give one stack back to its chunk; stacklock held. */
static void putslot(struct stack *s)
{
	struct stackchunk *c = s->chunk;
	struct stackpool *sp = c->pool;
	c->freeidx[c->nfree++] = s->slot;
	sp->nfree++;
	availadd(sp, 1);
	if (!c->onlist)
		listadd(sp, c);
	if (sp->nfree <= POOL_BUDGET)
		return;
	/* keep the top pages: they hold the canary of the stack above.
	 * Skip the system call if the G was never switched out below them:
	 * stacks grow down contiguously, so it most likely touched nothing
	 * more (a deep excursion between two switches is not seen: its
	 * pages go back the next time this stack is freed deep) */
	char *top;
	size_t len;
	toprange(s, &top, &len);
	char *lo = (char *)(((uintptr_t)s->lo + PAGE - 1) & ~(PAGE - 1));
	if (top > lo && s->low < top)
		madvise(lo, top - lo, MADV_DONTNEED);
}

static int stackalloc1(struct p *pp, struct stack *s, size_t size);

/* sysmon, about once a second: while a pool holds more than its budget
 * of free stacks, unmap chunks whose slots are all free.  Done lazily, not
 * at free time, so that a program whose G count breathes (a burst every
 * few milliseconds) does not map and unmap the same chunks over and over.
 * Returns true if some pool is still over budget (call again later). */
bool stack_scavenge(void)
{
	bool over = false;
	lock(&stacklock);
	for (int i = 0; i < npools; i++) {
		struct stackpool *sp = &pools[i];
		struct stackchunk *c = sp->partial;
		while (c && sp->nfree > POOL_BUDGET) {
			struct stackchunk *next = c->next;
			if (c->nfree == c->ncarved && c->ncarved > 0) {
				listdel(sp, c);
				sp->nfree -= c->nfree;
				availadd(sp, -(int64_t)(c->nfree + c->nslots - c->ncarved));
				if (c->kind == STACK_GUARD && !c->marked)
					guard_budget += c->nslots;
				munmap(c->base, c->len);
				rtfree(c);
			}
			c = next;
		}
		if (sp->nfree > POOL_BUDGET)
			over = true;
	}
	unlock(&stacklock);
	return over;
}

int stackalloc(struct p *pp, struct stack *s, size_t size)
{
	int r = stackalloc1(pp, s, size);
	if (r != 0 && stacks_reclaim()) /* out of memory: idle Ps' caches first */
		r = stackalloc1(pp, s, size);
	if (r == 0)
		s->low = s->hi;
	return r;
}

static int stackalloc1(struct p *pp, struct stack *s, size_t size)
{
	size_t usable = size ? (size + 15) & ~(size_t)15 : defusable;
	usable = (usable + PAGE - 1) & ~(PAGE - 1);
	if (pp && usable == defusable && pp->nstackcache > 0) {
		*s = pp->stackcache[--pp->nstackcache];
		return 0;
	}
	lock(&stacklock);
	struct stackpool *sp = poolfor(usable);
	int r = -1;
	if (sp) {
		r = takeslot(sp, s);
		/* refill this P's cache in one go, with used slots only (fresh
		 * ones stay in their chunk for whichever P needs them) */
		while (r == 0 && pp && usable == defusable && pp->nstackcache < 16 &&
		       (sp->partial && sp->partial->nfree > 0))
			takeslot(sp, &pp->stackcache[pp->nstackcache++]);
	} else {
		errno = ENOMEM; /* too many distinct sizes: refuse rather than leak maps */
	}
	unlock(&stacklock);
	return r;
}

/* weft_go: will a stack of this size be there when the G first runs?
 * A warm one in pp's cache, a free slot, or a chunk mapped now.  0, or -1
 * with errno ENOMEM.  (Nothing is reserved: a G that then finds memory
 * exhausted at its first run is fatal, as an allocation failure in Go.) */
int stack_ready(struct p *pp, size_t size)
{
	size_t usable = size ? (size + 15) & ~(size_t)15 : defusable;
	usable = (usable + PAGE - 1) & ~(PAGE - 1);
	if (pp && usable == defusable && pp->nstackcache > 0)
		return 0;
	/* without the lock, which the Gs starting on other Ps take: a hint
	 * (a slot seen here may be gone when the G starts; then gstart
	 * maps a chunk) */
	struct stackpool *dp = atomic_load_explicit(&defpool, memory_order_acquire);
	if (usable == defusable && dp && atomic_load_explicit(&dp->navail, memory_order_relaxed) > 0)
		return 0;
	lock(&stacklock);
	struct stackpool *sp = poolfor(usable);
	bool ok = sp && (sp->partial || newchunk(sp));
	unlock(&stacklock);
	if (!ok && sp && stacks_reclaim()) { /* out of memory: idle Ps' caches */
		lock(&stacklock);
		ok = sp->partial != NULL;
		unlock(&stacklock);
	}
	if (!ok) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* pp retires (a spare put away) or sits idle while memory is out
 * (stacks_reclaim); sched.lock held: stacklock nests inside it, never
 * the other way.  Its whole cache back to the pool, where any P
 * finds it (stack_ready sees navail) and sysmon's scavenge may unmap it.
 * Its waiters, if any, are not woken here (stackwait_run takes
 * sched.lock): the next stack freed anywhere wakes them. */
static void cacheput(struct p *pp, int32_t n);

void stackcache_flush(struct p *pp)
{
	if (pp->nstackcache > 0)
		cacheput(pp, pp->nstackcache);
}

/* The n oldest stacks of pp's cache back to the pool (all of them:
 * stackcache_flush; half when it is full: stackfree). */
static void cacheput(struct p *pp, int32_t n)
{
	lock(&stacklock);
	for (int32_t i = 0; i < n; i++)
		putslot(&pp->stackcache[i]);
	unlock(&stacklock);
	pp->nstackcache -= n;
	memmove(pp->stackcache, pp->stackcache + n, pp->nstackcache * sizeof pp->stackcache[0]);
}

void splitstack_free(struct stack *s); /* splitstack.c */

void stackfree(struct p *pp, struct stack *s)
{
	if (!s->lo)
		return;
	if (s->kind == STACK_SEGMENTED) {
		splitstack_free(s);
		return;
	}
	if (pp && stacksize(s) == defusable) {
		if (pp->nstackcache == (int32_t)(sizeof pp->stackcache / sizeof pp->stackcache[0]))
			cacheput(pp, pp->nstackcache / 2);
		pp->stackcache[pp->nstackcache++] = *s; /* the warmest: on top */
		s->lo = s->hi = NULL;
		stackwait_wake(pp);
		return;
	}
	lock(&stacklock);
	putslot(s);
	unlock(&stacklock);
	s->lo = s->hi = NULL;
	stackwait_wake(NULL);
}

/* ---- overflow reporting ---------------------------------------------- */

static void fmtsize(size_t n, char *buf, size_t len)
{
	if (n % (1UL << 20) == 0)
		snprintf(buf, len, "%zuM", n >> 20);
	else if (n % 1024 == 0)
		snprintf(buf, len, "%zuK", n >> 10);
	else
		snprintf(buf, len, "%zu-byte", n);
}

void stack_overflow(struct g *gp)
{
	char sz[32];
	fmtsize(stacksize(&gp->stack), sz, sizeof sz);
	fatal("green thread %lld overflowed its %s stack (raise WEFT_STACK_SIZE)",
	      (long long)gp->id, sz);
}

static struct sigaction oldsegv, oldbus;

static void onfault(int sig, siginfo_t *si, void *uc)
{
	struct g *gp = getg();
	if (gp && gp->stack.kind != STACK_SEGMENTED) {
		char *a = si->si_addr;
		char *sp = NULL;
#if defined(__x86_64__)
		sp = (char *)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RSP];
#endif
		/* a hit on the guard page just below the stack, or (canary
		 * stacks, whose overflow runs on through the stacks below
		 * until it meets a guard page) a stack pointer below it */
		if ((a < gp->stack.lo && a >= gp->stack.lo - PAGE) ||
		    (sp && sp < gp->stack.lo && sp >= gp->stack.lo - (1L << 30)))
			stack_overflow(gp);
	}
	/* A canary stack that overflowed may have smashed a neighbour, which
	 * then crashed on some M: if a running G's canary is broken, it is
	 * the culprit.  (Racy reads, but we are about to die anyway.) */
	for (struct m *mp = atomic_load(&allm); mp; mp = mp->alllink) {
		struct g *g1 = atomic_load_explicit(&mp->curg, memory_order_relaxed);
		if (g1 && g1->stack.kind == STACK_CANARY && !stackcanary_ok(&g1->stack))
			stack_overflow(g1);
	}
	struct sigaction *old = sig == SIGSEGV ? &oldsegv : &oldbus;
	if (old->sa_flags & SA_SIGINFO) {
		old->sa_sigaction(sig, si, uc);
		return;
	}
	if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
		return;
	}
	/* default action: re-fault with the default disposition; a signal
	 * sent by kill() (no fault to repeat) is sent again */
	sys_sigdfl(sig);
	if (si->si_code <= 0)
		sys_tgkill(getpid(), sys_gettid(), sig);
}

/* A retiring M's signal stack: off for its thread, then unmapped. */
void stack_sigaltstack_free(struct m *m)
{
	if (!m->altstack)
		return;
	stack_t ss = { .ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE };
	if (sigaltstack(&ss, NULL) == 0) /* fails only on it: never from mexit */
		munmap(m->altstack, ALTSTACK);
	m->altstack = NULL;
}

/* Give this M a signal stack so that a guard-page hit can be reported
 * (the faulting stack has no room left), and install the handler once. */
void stack_sigaltstack(struct m *m)
{
	static _Atomic int installed;
	if (!m->altstack) {
		m->altstack = mmap(NULL, ALTSTACK, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m->altstack == MAP_FAILED) {
			m->altstack = NULL;
			return;
		}
	}
	stack_t ss = { .ss_sp = m->altstack, .ss_size = ALTSTACK, .ss_flags = 0 };
	sigaltstack(&ss, NULL);
	if (atomic_exchange(&installed, 1) == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = onfault;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		sys_sigaction(SIGSEGV, &sa, &oldsegv);
		sys_sigaction(SIGBUS, &sa, &oldbus);
	}
}
