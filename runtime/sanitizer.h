/*
 * sanitizer.h - what else must hear of a G switch: ASan, TSan, valgrind
 * and libgcc's split-stack state.  Compiled to nothing unless the build
 * enables them (make SAN=..., make VALGRIND=1, the libweft_split variant
 * with -DWEFT_SPLITSTACK).  Every switch announces itself: ASan must know
 * which stack is live (__sanitizer_start/finish_switch_fiber), TSan which
 * fiber runs, valgrind where the stacks are, and libgcc which segment
 * list and stack limit are current (splitstack.c).
 */
#ifndef WEFT_SANITIZER_H
#define WEFT_SANITIZER_H

#include "runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define WEFT_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define WEFT_TSAN 1
#endif
#endif

#ifdef WEFT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef WEFT_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif
#ifdef WEFT_VALGRIND
#include <valgrind/valgrind.h>
#endif

#ifdef WEFT_SPLITSTACK
/* libgcc (generic-morestack.c), in the -fsplit-stack executable; absent
 * (NULL) in a program built without it. */
void __splitstack_getcontext(void *ctx[10]) __attribute__((weak));
void __splitstack_setcontext(void *ctx[10]) __attribute__((weak));
void __splitstack_block_signals(int *new_, int *old) __attribute__((weak));
extern void *splitstack_zeroctx[10] HIDDEN; /* g0 and guarded Gs */
void splitstack_gdead(struct g *gp) HIDDEN;
/* Offsets from the thread pointer of libgcc's __morestack_segments and
 * __morestack_current_segment (static TLS of the executable), or 0 if
 * not found: then the switch goes through libgcc's functions. */
extern ptrdiff_t splitstack_tls_segs HIDDEN, splitstack_tls_cur HIDDEN;

static inline void **split_tls(ptrdiff_t off)
{
	char *tp;
	__asm__("movq %%fs:0, %0" : "=r"(tp));
	return (void **)(tp + off);
}

/* Only segmented Gs have a context of their own (g->splitctx); g0 and
 * guarded Gs share the zero one, which never changes.  Of the context,
 * only the current segment and the limit change while a G runs: its
 * segment list starts at its first segment for its whole life, and the
 * initial-stack and signal fields are the same for every context an M
 * runs (san_thread_start).  So the switch saves and installs just those,
 * inline; the context array stays one libgcc can read (slot 1 current
 * segment, slot 3 limit). */
static inline void split_switch(struct g *from, struct g *to)
{
	void **fc = from ? from->splitctx : NULL;
	void **tc = to ? to->splitctx : NULL;
	if (!fc && !tc)
		return;
	if (likely(splitstack_tls_cur != 0)) {
		if (fc) {
			fc[1] = *split_tls(splitstack_tls_cur);
			__asm__ volatile("movq %%fs:0x70, %0" : "=r"(fc[3]) : : "memory");
		}
		void **c = tc ? tc : splitstack_zeroctx;
		*split_tls(splitstack_tls_segs) = c[0];
		*split_tls(splitstack_tls_cur) = c[1];
		__asm__ volatile("movq %0, %%fs:0x70" : : "r"(c[3]) : "memory");
		return;
	}
	if (fc)
		__splitstack_getcontext(fc);
	__splitstack_setcontext(tc ? tc : splitstack_zeroctx);
}
#endif

static inline void san_thread_start(struct m *m)
{
	(void)m;
#ifdef WEFT_TSAN
	m->g0tsan = __tsan_get_current_fiber();
#endif
#ifdef WEFT_SPLITSTACK
	/* g0 runs no split-stack code: give it the zero context that guarded
	 * Gs share, instead of the limit glibc set for this thread's stack;
	 * and no sigprocmask around segment switches on this thread, as
	 * gccgo (docs/stacks.md) */
	if (__splitstack_setcontext && __splitstack_block_signals) {
		__splitstack_setcontext(splitstack_zeroctx);
		int dont_block = 0;
		__splitstack_block_signals(&dont_block, NULL);
	}
#endif
}

static inline void san_gcreate(struct g *gp)
{
	(void)gp;
	gp->asan_fake = NULL;
#ifdef WEFT_VALGRIND
	if (!gp->valgrind_id)
		gp->valgrind_id = VALGRIND_STACK_REGISTER(gp->stack.lo, gp->stack.hi);
#endif
}

static inline void san_gdestroy(struct g *gp)
{
	(void)gp;
#ifdef WEFT_ASAN
	/* a dead G never returned from its last frames, gentry down to the
	 * switch (its saved sp): unpoison their redzones for the next G to
	 * run on this stack */
	char *sp = gp->sp;
	if (sp >= gp->stack.lo && sp < gp->stack.hi)
		__asan_unpoison_memory_region(sp, (size_t)(gp->stack.hi - sp));
#endif
#ifdef WEFT_TSAN
	/* a dead G never returned from its frames: a new fiber for the next
	 * G made from this descriptor, or TSan's shadow stack would keep them */
	if (gp->tsan_fiber) {
		__tsan_destroy_fiber(gp->tsan_fiber);
		gp->tsan_fiber = NULL;
	}
#endif
#ifdef WEFT_SPLITSTACK
	if (gp->splitctx)
		splitstack_gdead(gp);
#endif
#ifdef WEFT_VALGRIND
	if (gp->valgrind_id) {
		VALGRIND_STACK_DEREGISTER(gp->valgrind_id);
		gp->valgrind_id = 0;
	}
#endif
}

/* Before weft_ctx_switch from 'from' (NULL: g0) to 'to' (NULL: g0). */
static inline void san_switch_start(struct m *m, struct g *from, struct g *to)
{
	(void)m, (void)from, (void)to;
#ifdef WEFT_ASAN
	void **save = from ? &from->asan_fake : &m->g0asan_fake;
	if (from && atomic_load_explicit(&from->status, memory_order_relaxed) == G_DEAD)
		save = NULL; /* never resumed: let ASan drop its fake stack */
	const void *lo = to ? (const void *)to->stack.lo : m->g0lo;
	size_t sz = to ? (size_t)(to->stack.hi - to->stack.lo)
		       : (size_t)((char *)m->g0hi - (char *)m->g0lo);
	__sanitizer_start_switch_fiber(save, lo, sz);
#endif
#ifdef WEFT_TSAN
	/* A G becomes a TSan fiber when it first runs, and stops being one
	 * when it ends (san_gdestroy): TSan counts fibers against its limit of
	 * 8128 threads, so Gs that are queued but not started hold none.
	 * The new fiber starts from the clock of the context switching to it,
	 * which the run queue has ordered after the G's creator. */
	void *fiber = m->g0tsan;
	if (to) {
		if (!to->tsan_fiber)
			to->tsan_fiber = __tsan_create_fiber(0);
		fiber = to->tsan_fiber;
	}
	__tsan_switch_to_fiber(fiber, 0);
#endif
#ifdef WEFT_SPLITSTACK
	split_switch(from, to);
#endif
}

/* Right after a switch, in the context that was resumed ('self', NULL: g0). */
static inline void san_switch_finish(struct m *m, struct g *self)
{
	(void)m, (void)self;
#ifdef WEFT_ASAN
	__sanitizer_finish_switch_fiber(self ? self->asan_fake : m->g0asan_fake, NULL, NULL);
#endif
}

#endif
