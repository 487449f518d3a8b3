/*
 * thread.c - pthreads as green threads: create, join, detach, exit,
 * self, names, attributes, keys, once, cleanup handlers.
 *
 * A G started by pthread_create (and the main G) has a struct gthr; its
 * pthread_t is the record's address.  Records come from one region of
 * our own, so "is this pthread_t a G's?" is a range check that never
 * touches a real thread's memory, and a G's handle can never equal a
 * real thread's.  A record lives until the thread has exited and been
 * joined or detached, as glibc's descriptors do, and is then reused.
 *
 * Keys are glibc's keys: pthread_key_create makes a real key (which a
 * plain thread uses as usual) and the same number indexes each G's own
 * values, so one key works on both.  A G's destructors run when it ends,
 * on the G, as glibc runs a thread's.
 *
 * The process ends with exit(0) when the last of its threads (the main
 * G, the other Gs, native threads) ends, as with glibc.
 */
#include "shim.h"

#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define KEYS_MAX PTHREAD_KEYS_MAX
#define KBLK 32 /* values per lazily made block */

struct kent {
	void *val;
	uint32_t seq; /* the key's seq when val was set */
};

enum {
	T_EXITED = 1,
	T_DETACHED = 2,
	T_JOINING = 4,
};

struct gthr {
	struct g *g;             /* while it runs */
	void *(*fn)(void *);
	void *arg;
	void *retval;
	_Atomic uint32_t flags;  /* T_* */
	uint32_t exiting;        /* pthread_exit is running the cleanup handlers */
	weft_sem_t done;         /* one unit when it has exited */
	char *stacklo, *stackhi;
	struct kent **keys;      /* KEYS_MAX / KBLK blocks, made on first set */
	__pthread_unwind_buf_t *cleanup; /* innermost pthread_cleanup_push */
	struct gthr *next;       /* free list */
	char name[16];
	uint64_t sigmask;        /* its creator's signal mask, for the new G */
};

/* ---- records ------------------------------------------------------------------- */

#define REGION (1UL << 34) /* address space for records (not memory) */
#define SLOT ((sizeof(struct gthr) + 63) & ~(size_t)63)

static char *gbase;
static _Atomic size_t gused;
static struct lock glock;
static struct gthr *gfree;

/* After a lazy start main's pthread_t stays what it was before main was
 * a G - glibc's, the real main thread's - and names the main G's record
 * (gthr_main_alias). */
static pthread_t mainalias;
static struct gthr *mainrec;
/* And the CPU clock id glibc gave main then (from its tid, the process
 * id), which names the main G's clock from then on (gthr_mainclock);
 * 0 none (an eager start, or a fork child, where it names no thread). */
static clockid_t mainclk;

/* Is *th a G's?  The main alias becomes its record's address. */
static inline bool is_gthr(pthread_t *th)
{
	if (unlikely(*th == mainalias) && mainrec) {
		*th = (pthread_t)mainrec;
		return true;
	}
	char *p = (char *)*th;
	size_t used = atomic_load_explicit(&gused, memory_order_acquire);
	return gbase && p >= gbase && p < gbase + used && (size_t)(p - gbase) % SLOT == 0;
}

static struct gthr *gthr_alloc(void)
{
	lock(&glock);
	struct gthr *t = gfree;
	if (t) {
		gfree = t->next;
	} else {
		if (!gbase) {
			void *b = mmap(NULL, REGION, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (b == MAP_FAILED) {
				unlock(&glock);
				return NULL;
			}
			gbase = b;
		}
		size_t used = atomic_load_explicit(&gused, memory_order_relaxed);
		if (used + SLOT > REGION) {
			unlock(&glock);
			return NULL;
		}
		t = (struct gthr *)(void *)(gbase + used);
		atomic_store_explicit(&gused, used + SLOT, memory_order_release);
	}
	unlock(&glock);
	memset(t, 0, sizeof *t);
	return t;
}

static void keys_free(struct gthr *t);

static void gthr_free(struct gthr *t)
{
	keys_free(t);
	t->g = NULL;
	t->fn = NULL; /* a free record: no thread's (gthr_clock) */
	atomic_store_explicit(&t->flags, 0, memory_order_relaxed);
	lock(&glock);
	t->next = gfree;
	gfree = t;
	unlock(&glock);
}

/* ---- who is running ------------------------------------------------------------- */

static __thread int mytid __attribute__((tls_model("initial-exec")));
/* The main G after a lazy start keeps the identity main had as a plain
 * thread (-tid), so a lock it took then is still its own. */
static struct g *sidg;
static int64_t sidmain, sidnext;

int64_t shim_selfid(void)
{
	struct g *gp = getg();
	if (gp)
		return unlikely(gp == sidg) ? sidmain : gp->id;
	if (!mytid)
		mytid = (int)sys3(SYS_gettid, 0, 0, 0);
	return -(int64_t)mytid;
}

/* t is gp's from now on.  t->g last, with release: whoever sees it set
 * (tg_started) sees the rest, and the G's signal state (sig_gstart, made
 * before). */
static void gbind(struct gthr *t, struct g *gp)
{
	t->stacklo = gp->stack.lo;
	t->stackhi = gp->stack.hi;
	gp->tls = t;
	__atomic_store_n(&t->g, gp, __ATOMIC_RELEASE);
}

struct gthr *gthr_self(void)
{
	struct g *gp = getg();
	if (!gp)
		return NULL;
	struct gthr *t = gp->tls;
	if (likely(t))
		return t;
	/* a G we did not start: give it a detached record */
	t = gthr_alloc();
	if (!t)
		fatal("out of memory for a thread record");
	atomic_store_explicit(&t->flags, T_DETACHED, memory_order_relaxed);
	gbind(t, gp);
	return t;
}

/* ---- live threads ---------------------------------------------------------------------- */

/* main counts from the start: a thread a constructor makes and that ends
 * before main runs is not the last one */
static _Atomic long nlive = 1;

void gthr_live_add(long n)
{
	atomic_fetch_add(&nlive, n);
}

void gthr_live_done(void)
{
	if (atomic_fetch_sub(&nlive, 1) == 1)
		exit(0); /* the last thread: as glibc does */
}

/* ---- keys --------------------------------------------------------------------------------- */

struct keyslot {
	_Atomic uint32_t seq; /* odd while the key exists */
	void (*_Atomic dtor)(void *);
};
static struct keyslot keytab[KEYS_MAX];

DEFREAL(pthread_key_create);
DEFREAL(pthread_key_delete);
DEFREAL(pthread_getspecific);
DEFREAL(pthread_setspecific);

static inline bool key_live(pthread_key_t k, uint32_t *seq)
{
	if (k >= KEYS_MAX)
		return false;
	*seq = atomic_load_explicit(&keytab[k].seq, memory_order_acquire);
	return *seq & 1;
}

static struct kent *kent(struct gthr *t, pthread_key_t k, bool make)
{
	if (!t->keys) {
		if (!make)
			return NULL;
		t->keys = rtalloc(KEYS_MAX / KBLK * sizeof *t->keys);
		if (!t->keys)
			return NULL;
	}
	struct kent *b = t->keys[k / KBLK];
	if (!b) {
		if (!make)
			return NULL;
		b = t->keys[k / KBLK] = rtalloc(KBLK * sizeof *b);
		if (!b)
			return NULL;
	}
	return &b[k % KBLK];
}

static void keys_free(struct gthr *t)
{
	if (!t->keys)
		return;
	for (int i = 0; i < KEYS_MAX / KBLK; i++)
		rtfree(t->keys[i]);
	rtfree(t->keys);
	t->keys = NULL;
}

/* Run t's destructors as glibc does: up to PTHREAD_DESTRUCTOR_ITERATIONS
 * rounds while values remain. */
static void keys_run(struct gthr *t)
{
	for (int round = 0; t->keys && round < PTHREAD_DESTRUCTOR_ITERATIONS; round++) {
		bool any = false;
		for (pthread_key_t k = 0; k < KEYS_MAX; k++) {
			struct kent *e = t->keys[k / KBLK] ? &t->keys[k / KBLK][k % KBLK] : NULL;
			if (!e) {
				k += KBLK - 1;
				continue;
			}
			void *v = e->val;
			if (!v)
				continue;
			e->val = NULL;
			uint32_t seq;
			void (*d)(void *) = atomic_load_explicit(&keytab[k].dtor, memory_order_relaxed);
			if (key_live(k, &seq) && seq == e->seq && d) {
				d(v);
				any = true;
			}
		}
		if (!any)
			break;
	}
	keys_free(t);
}

int shim_key_create(pthread_key_t *key, void (*dtor)(void *))
{
	int r = REAL(pthread_key_create)(key, dtor);
	if (r)
		return r;
	pthread_key_t k = *key;
	if (k < KEYS_MAX) {
		atomic_store_explicit(&keytab[k].dtor, dtor, memory_order_relaxed);
		uint32_t s = atomic_load_explicit(&keytab[k].seq, memory_order_relaxed);
		atomic_store_explicit(&keytab[k].seq, (s | 1) + ((s & 1) ? 2 : 0), memory_order_release);
	}
	return 0;
}

HOOK int pthread_key_create(pthread_key_t *key, void (*dtor)(void *))
{
	if (FROM_SHIM())
		return REAL(pthread_key_create)(key, dtor);
	return shim_key_create(key, dtor);
}

HOOK int pthread_key_delete(pthread_key_t k)
{
	if (FROM_SHIM())
		return REAL(pthread_key_delete)(k);
	return shim_key_delete(k);
}

int shim_key_delete(pthread_key_t k)
{
	int r = REAL(pthread_key_delete)(k);
	if (r == 0 && k < KEYS_MAX) {
		uint32_t s = atomic_load_explicit(&keytab[k].seq, memory_order_relaxed);
		if (s & 1)
			atomic_store_explicit(&keytab[k].seq, s + 1, memory_order_release);
		atomic_store_explicit(&keytab[k].dtor, NULL, memory_order_relaxed);
	}
	return r;
}

void *shim_getspecific(pthread_key_t k)
{
	struct gthr *t = gthr_self();
	if (!t)
		return REAL(pthread_getspecific)(k);
	uint32_t seq;
	if (!key_live(k, &seq))
		return NULL;
	struct kent *e = kent(t, k, false);
	return e && e->seq == seq ? e->val : NULL;
}

int shim_setspecific(pthread_key_t k, uintptr_t v)
{
	struct gthr *t = gthr_self();
	if (!t)
		return REAL(pthread_setspecific)(k, (const void *)v);
	uint32_t seq;
	if (!key_live(k, &seq))
		return EINVAL;
	struct kent *e = kent(t, k, v != 0);
	if (!e)
		return v ? ENOMEM : 0;
	e->val = (void *)v;
	e->seq = seq;
	return 0;
}

HOOK void *pthread_getspecific(pthread_key_t k)
{
	if (FROM_SHIM())
		return REAL(pthread_getspecific)(k);
	return shim_getspecific(k);
}

HOOK int pthread_setspecific(pthread_key_t k, const void *v)
{
	if (FROM_SHIM())
		return REAL(pthread_setspecific)(k, v);
	return shim_setspecific(k, (uintptr_t)v);
}

/* old names some libraries still use */
int __pthread_key_create(pthread_key_t *key, void (*dtor)(void *));
void *__pthread_getspecific(pthread_key_t k);
int __pthread_setspecific(pthread_key_t k, const void *v);
DEFREAL(__pthread_key_create);
DEFREAL(__pthread_getspecific);
DEFREAL(__pthread_setspecific);

HOOK int __pthread_key_create(pthread_key_t *key, void (*dtor)(void *))
{
	if (FROM_SHIM())
		return REAL(__pthread_key_create)(key, dtor);
	return shim_key_create(key, dtor);
}

HOOK void *__pthread_getspecific(pthread_key_t k)
{
	if (FROM_SHIM())
		return REAL(__pthread_getspecific)(k);
	return shim_getspecific(k);
}

HOOK int __pthread_setspecific(pthread_key_t k, const void *v)
{
	if (FROM_SHIM())
		return REAL(__pthread_setspecific)(k, v);
	return shim_setspecific(k, (uintptr_t)v);
}

/* ---- the main G ------------------------------------------------------------------------------ */

/* Keys a constructor set on the real main thread belong to main: taken
 * there (gthr_main_keys), given to the main G (gthr_main_init). */
static struct kent *mainkeys;

void gthr_main_keys(void)
{
	for (pthread_key_t k = 0; k < KEYS_MAX; k++) {
		uint32_t seq;
		if (!key_live(k, &seq))
			continue;
		void *v = REAL(pthread_getspecific)(k);
		if (!v)
			continue;
		if (!mainkeys && !(mainkeys = rtalloc(KEYS_MAX * sizeof *mainkeys)))
			return;
		mainkeys[k].val = v;
		mainkeys[k].seq = seq;
	}
}

static pthread_t aliasnext;
DEFREAL(pthread_self);

void gthr_main_alias(void)
{
	sidnext = shim_selfid();
	aliasnext = REAL(pthread_self)();
}

void gthr_main_init(void)
{
	struct gthr *t = gthr_alloc();
	if (!t)
		fatal("out of memory for the main thread record");
	struct g *gp = getg();
	if (aliasnext) {
		sidmain = sidnext;
		sidg = gp;
		mainrec = t;
		mainalias = aliasnext;
		mainclk = (clockid_t)((~(unsigned)getpid() << 3) | 6); /* make_thread_cpuclock */
	}
	gbind(t, gp);
	sig_gstart(gp, sig_inherit(), true);
	for (pthread_key_t k = 0; mainkeys && k < KEYS_MAX; k++) {
		if (!mainkeys[k].val)
			continue;
		struct kent *e = kent(t, k, true);
		if (e)
			*e = mainkeys[k];
	}
	rtfree(mainkeys);
	mainkeys = NULL;
}

/* ---- exit ------------------------------------------------------------------------------------ */

static _Noreturn void gthr_exit(struct gthr *t, void *ret)
{
	t->retval = ret;
	struct g *gp = getg();
	tls_gdtors(gp); /* C++ thread_local, then keys (the block goes at the end) */
	keys_run(t);
	sig_gend(gp);
	gp->tls = NULL;
	t->g = NULL;
	uint32_t old = atomic_fetch_or(&t->flags, T_EXITED);
	if (old & T_DETACHED)
		gthr_free(t);
	else
		weft_sem_post(&t->done);
	gthr_live_done();
	weft_exit();
}

static void gthr_entry(void *arg)
{
	struct gthr *t = arg;
	sig_gstart(getg(), t->sigmask, false); /* before gbind: it clears pending signals */
	gbind(t, getg());
	gthr_exit(t, t->fn(t->arg));
}

DEFREAL(pthread_exit);

/* longjmp to a cleanup buffer (a __jmp_buf_tag prefix, mask not saved) */
extern void jump_cleanup(void *env, int val) __asm__("longjmp") __attribute__((noreturn));


HOOK _Noreturn void pthread_exit(void *ret)
{
	if (FROM_SHIM())
		REAL(pthread_exit)(ret);
	shim_exit(ret);
}

_Noreturn void shim_exit(void *ret)
{
	struct gthr *t = gthr_self();
	if (!t)
		REAL(pthread_exit)(ret);
	t->retval = ret;
	t->exiting = 1;
	if (t->cleanup) /* run the pthread_cleanup_push handlers, innermost first */
		jump_cleanup(t->cleanup->__cancel_jmp_buf, 1);
	gthr_exit(t, ret);
}

/* pthread_cleanup_push / pop (the C macros) register their buffer here;
 * on a G the list is the G's, not the OS thread's. */
void __pthread_register_cancel(__pthread_unwind_buf_t *buf);
void __pthread_unregister_cancel(__pthread_unwind_buf_t *buf);
void __pthread_register_cancel_defer(__pthread_unwind_buf_t *buf);
void __pthread_unregister_cancel_restore(__pthread_unwind_buf_t *buf);
void __pthread_unwind_next(__pthread_unwind_buf_t *buf) __attribute__((noreturn));
DEFREAL(__pthread_register_cancel);
DEFREAL(__pthread_unregister_cancel);
DEFREAL(__pthread_register_cancel_defer);
DEFREAL(__pthread_unregister_cancel_restore);
DEFREAL(__pthread_unwind_next);

#define PREV(buf) (*(__pthread_unwind_buf_t **)(void *)&(buf)->__pad[0])

static bool cleanup_push(__pthread_unwind_buf_t *buf)
{
	struct gthr *t = gthr_self();
	if (!t)
		return false;
	PREV(buf) = t->cleanup;
	t->cleanup = buf;
	return true;
}

static bool cleanup_pop(__pthread_unwind_buf_t *buf)
{
	struct gthr *t = gthr_self();
	if (!t)
		return false;
	t->cleanup = PREV(buf);
	return true;
}

HOOK void __pthread_register_cancel(__pthread_unwind_buf_t *buf)
{
	if (FROM_SHIM() || !cleanup_push(buf))
		REAL(__pthread_register_cancel)(buf);
}

HOOK void __pthread_unregister_cancel(__pthread_unwind_buf_t *buf)
{
	if (FROM_SHIM() || !cleanup_pop(buf))
		REAL(__pthread_unregister_cancel)(buf);
}

HOOK void __pthread_register_cancel_defer(__pthread_unwind_buf_t *buf)
{
	if (FROM_SHIM() || !cleanup_push(buf))
		REAL(__pthread_register_cancel_defer)(buf);
}

HOOK void __pthread_unregister_cancel_restore(__pthread_unwind_buf_t *buf)
{
	if (FROM_SHIM() || !cleanup_pop(buf))
		REAL(__pthread_unregister_cancel_restore)(buf);
}

/* A cleanup handler ran during pthread_exit: on to the next, or end. */
HOOK _Noreturn void __pthread_unwind_next(__pthread_unwind_buf_t *buf)
{
	struct gthr *t = FROM_SHIM() ? NULL : gthr_self();
	if (!t || !t->exiting)
		REAL(__pthread_unwind_next)(buf);
	__pthread_unwind_buf_t *next = PREV(buf);
	t->cleanup = next;
	if (next)
		jump_cleanup(next->__cancel_jmp_buf, 1);
	gthr_exit(t, t->retval);
}

/* ---- create -------------------------------------------------------------------------------- */

DEFREAL(pthread_create);
DEFREAL(pthread_attr_getdetachstate);
DEFREAL(pthread_attr_getstacksize);
DEFREAL(pthread_attr_getstackaddr);
DEFREAL(pthread_attr_init);
DEFREAL(pthread_attr_destroy);
DEFREAL(pthread_attr_setstack);
DEFREAL(pthread_attr_setstacksize);
DEFREAL(pthread_attr_setdetachstate);
DEFREAL(pthread_attr_setguardsize);

/* Where glibc keeps an attribute's stack size (0 = not set, default):
 * found once by setting a distinctive size and looking for it. */
static int ssoff = -2;

static void find_ssoff(void)
{
	pthread_attr_t a;
	REAL(pthread_attr_init)(&a);
	size_t mark = 0x7a5000;
	REAL(pthread_attr_setstacksize)(&a, mark);
	int off = -1;
	for (size_t i = 0; i + sizeof(size_t) <= sizeof a; i += sizeof(size_t)) {
		size_t v;
		memcpy(&v, (char *)&a + i, sizeof v);
		if (v == mark)
			off = off == -1 ? (int)i : -1;
	}
	REAL(pthread_attr_destroy)(&a);
	if (off >= 0) {
		REAL(pthread_attr_init)(&a);
		size_t v;
		memcpy(&v, (char *)&a + off, sizeof v);
		if (v != 0)
			off = -1;
		REAL(pthread_attr_destroy)(&a);
	}
	ssoff = off;
}

/* The stack size the attribute asks for, or 0 for "the default". */
static size_t attr_stacksize(const pthread_attr_t *attr)
{
	if (!attr)
		return 0;
	if (ssoff == -2)
		find_ssoff();
	size_t sz = 0;
	if (ssoff >= 0) {
		memcpy(&sz, (const char *)attr + ssoff, sizeof sz);
		return sz;
	}
	REAL(pthread_attr_getstacksize)(attr, &sz);
	return sz;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static bool attr_userstack(const pthread_attr_t *attr)
{
	void *addr = NULL;
	return attr && REAL(pthread_attr_getstackaddr)(attr, &addr) == 0 && addr != NULL;
}
#pragma GCC diagnostic pop

/* Native threads: counted among the live ones until their key says
 * they are gone. */
static pthread_key_t natkey;
static pthread_once_t natonce = PTHREAD_ONCE_INIT;
DEFREAL(pthread_once);

static void nat_gone(void *v)
{
	(void)v;
	gthr_live_done();
}

static void nat_keyinit(void)
{
	REAL(pthread_key_create)(&natkey, nat_gone);
}

struct natarg {
	void *(*fn)(void *);
	void *arg;
};

static void *nat_start(void *p)
{
	struct natarg a = *(struct natarg *)p;
	rtfree(p);
	REAL(pthread_setspecific)(natkey, (void *)1);
	return a.fn(a.arg);
}

static int native_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	REAL(pthread_once)(&natonce, nat_keyinit);
	struct natarg *a = rtalloc(sizeof *a);
	if (!a)
		return EAGAIN;
	a->fn = fn;
	a->arg = arg;
	gthr_live_add(1);
	int r = REAL(pthread_create)(th, attr, nat_start, a);
	if (r) {
		rtfree(a);
		atomic_fetch_sub(&nlive, 1);
	}
	return r;
}

static _Atomic int warned_userstack;

/* A stack size weft can pool: a power of two from 16 KiB to 1 GiB. */
static size_t gstack(size_t want)
{
	if (want == 0)
		return 0;
	size_t sz = 16 * 1024;
	while (sz < want && sz < (1UL << 30))
		sz <<= 1;
	return sz;
}

HOOK int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	if (FROM_SHIM())
		return REAL(pthread_create)(th, attr, fn, arg);
	return shim_create(th, attr, fn, arg);
}

int shim_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	shim_start();
	if (shim_native)
		return native_create(th, attr, fn, arg);
	if (attr_userstack(attr)) {
		shim_warn_once(&warned_userstack, "pthread_create with a stack of the caller's "
						  "own: that thread is a real OS thread");
		return native_create(th, attr, fn, arg);
	}
	int detach = PTHREAD_CREATE_JOINABLE;
	if (attr)
		REAL(pthread_attr_getdetachstate)(attr, &detach);
	struct gthr *t = gthr_alloc();
	if (!t)
		return EAGAIN;
	t->fn = fn;
	t->arg = arg;
	t->sigmask = sig_inherit();
	atomic_store_explicit(&t->flags, detach == PTHREAD_CREATE_DETACHED ? T_DETACHED : 0,
			      memory_order_relaxed);
	*th = (pthread_t)t; /* before it runs, as glibc */
	gthr_live_add(1);
	int e = errno_get();
	size_t want = attr_stacksize(attr);
	weft_attr_t wa = { .stack_size = gstack(want) };
	int64_t id = weft_go_attr(&wa, gthr_entry, t);
	if (id < 0 && want && weftenv.stacksize >= want) {
		wa.stack_size = 0; /* too many stack sizes: the default is big enough */
		id = weft_go_attr(&wa, gthr_entry, t);
	}
	errno_set(e);
	if (id < 0) {
		atomic_fetch_sub(&nlive, 1);
		gthr_free(t);
		return EAGAIN;
	}
	return 0;
}

/* ---- join / detach ------------------------------------------------------------------------------ */

DEFREAL(pthread_join);
DEFREAL(pthread_tryjoin_np);
DEFREAL(pthread_timedjoin_np);
DEFREAL(pthread_clockjoin_np);
DEFREAL(pthread_detach);

enum { J_WAIT, J_TRY, J_TIMED };

static int gjoin(struct gthr *t, void **ret, int mode, clockid_t clk, const struct timespec *abstime)
{
	if (t == gthr_self())
		return EDEADLK;
	uint32_t f = atomic_load(&t->flags);
	do {
		if (f & (T_DETACHED | T_JOINING))
			return EINVAL;
	} while (!atomic_compare_exchange_weak(&t->flags, &f, f | T_JOINING));
	int e = errno_get();
	bool got;
	if (mode == J_TRY) {
		got = weft_sem_trywait(&t->done) == 0;
	} else if (mode == J_TIMED) {
		got = weft_sem_trywait(&t->done) == 0;
		if (!got && ts_ok(abstime)) {
			int64_t ns = ts_wait_begin(clk, abstime);
			got = ns > 0 && weft_sem_timedwait(&t->done, ns) == 0;
			ts_wait_end();
		}
	} else {
		got = weft_sem_wait(&t->done) == 0;
	}
	errno_set(e);
	if (!got) {
		atomic_fetch_and(&t->flags, ~(uint32_t)T_JOINING);
		if (mode == J_TIMED && !ts_ok(abstime))
			return EINVAL;
		return mode == J_TRY ? EBUSY : ETIMEDOUT;
	}
	if (ret)
		*ret = t->retval;
	gthr_free(t);
	return 0;
}

HOOK int pthread_join(pthread_t th, void **ret)
{
	if (!is_gthr(&th))
		return REAL(pthread_join)(th, ret);
	return gjoin((struct gthr *)th, ret, J_WAIT, CLOCK_REALTIME, NULL);
}

HOOK int pthread_tryjoin_np(pthread_t th, void **ret)
{
	if (!is_gthr(&th))
		return REAL(pthread_tryjoin_np)(th, ret);
	return gjoin((struct gthr *)th, ret, J_TRY, CLOCK_REALTIME, NULL);
}

HOOK int pthread_timedjoin_np(pthread_t th, void **ret, const struct timespec *abstime)
{
	if (!is_gthr(&th))
		return REAL(pthread_timedjoin_np)(th, ret, abstime);
	if (!abstime)
		return gjoin((struct gthr *)th, ret, J_WAIT, CLOCK_REALTIME, NULL);
	return gjoin((struct gthr *)th, ret, J_TIMED, CLOCK_REALTIME, abstime);
}

HOOK int pthread_clockjoin_np(pthread_t th, void **ret, clockid_t clk, const struct timespec *abstime)
{
	if (!is_gthr(&th))
		return REAL(pthread_clockjoin_np)(th, ret, clk, abstime);
	if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
		return EINVAL;
	if (!abstime)
		return gjoin((struct gthr *)th, ret, J_WAIT, clk, NULL);
	return gjoin((struct gthr *)th, ret, J_TIMED, clk, abstime);
}

HOOK int pthread_detach(pthread_t th)
{
	if (!is_gthr(&th))
		return REAL(pthread_detach)(th);
	struct gthr *t = (struct gthr *)th;
	uint32_t old = atomic_fetch_or(&t->flags, T_DETACHED);
	if (old & (T_DETACHED | T_JOINING))
		return EINVAL;
	if (old & T_EXITED)
		gthr_free(t);
	return 0;
}

/* ---- self, attributes, names ----------------------------------------------------------------- */

DEFREAL(pthread_getattr_np);
DEFREAL(pthread_setname_np);
DEFREAL(pthread_getname_np);

HOOK pthread_t pthread_self(void)
{
	if (FROM_SHIM())
		return REAL(pthread_self)();
	return shim_self();
}

pthread_t shim_self(void)
{
	struct gthr *t = gthr_self();
	if (!t)
		return REAL(pthread_self)(); /* main too, before its G */
	return unlikely(t == mainrec) ? mainalias : (pthread_t)t;
}

HOOK int pthread_getattr_np(pthread_t th, pthread_attr_t *attr)
{
	if (!is_gthr(&th))
		return REAL(pthread_getattr_np)(th, attr);
	struct gthr *t = (struct gthr *)th;
	int r = REAL(pthread_attr_init)(attr);
	if (r)
		return r;
	if (t->stacklo)
		REAL(pthread_attr_setstack)(attr, t->stacklo, (size_t)(t->stackhi - t->stacklo));
	uint32_t f = atomic_load(&t->flags);
	REAL(pthread_attr_setdetachstate)(attr, (f & T_DETACHED) ? PTHREAD_CREATE_DETACHED
								 : PTHREAD_CREATE_JOINABLE);
	REAL(pthread_attr_setguardsize)(attr, 4096);
	return 0;
}

HOOK int pthread_setname_np(pthread_t th, const char *name)
{
	if (!is_gthr(&th))
		return REAL(pthread_setname_np)(th, name);
	size_t n = strlen(name);
	if (n > 15)
		return ERANGE;
	struct gthr *t = (struct gthr *)th;
	memcpy(t->name, name, n + 1);
	return 0;
}

HOOK int pthread_getname_np(pthread_t th, char *buf, size_t len)
{
	if (!is_gthr(&th))
		return REAL(pthread_getname_np)(th, buf, len);
	struct gthr *t = (struct gthr *)th;
	char name[16];
	if (t->name[0])
		memcpy(name, t->name, sizeof name);
	else
		snprintf(name, sizeof name, "%s", program_invocation_short_name);
	size_t n = strlen(name);
	if (len < n + 1)
		return ERANGE;
	memcpy(buf, name, n + 1);
	return 0;
}

/* ---- what a G cannot do ----------------------------------------------------------------------- */

DEFREAL(pthread_cancel);
DEFREAL(pthread_kill);
DEFREAL(pthread_sigqueue);
DEFREAL(pthread_getschedparam);
DEFREAL(pthread_setschedparam);
DEFREAL(pthread_setschedprio);
DEFREAL(pthread_getaffinity_np);
DEFREAL(pthread_setaffinity_np);
DEFREAL(pthread_getcpuclockid);

static _Atomic int warned_sched, warned_affinity;

static bool exited(pthread_t th)
{
	return atomic_load(&((struct gthr *)th)->flags) & T_EXITED;
}

/* th's G, once it has started: a thread made a moment ago may not have
 * run yet (its G binds th when it first runs, gthr_entry), and a signal
 * or a cancel for it must not be lost - natively it is pending on the new
 * thread before it runs - so let it start (it is runnable: a G yields to
 * it, a plain thread gives up its CPU).  NULL once it has exited (not
 * joined yet: nothing to do, as glibc).  A G descriptor is never freed:
 * check it is still th's. */
static struct g *tg_started(pthread_t th)
{
	struct gthr *t = (struct gthr *)th;
	for (;;) {
		struct g *gp = __atomic_load_n(&t->g, __ATOMIC_ACQUIRE);
		if (exited(th))
			return NULL;
		if (gp)
			return gp->tls == t ? gp : NULL;
		if (hook_g())
			weft_yield();
		else
			sys3(SYS_sched_yield, 0, 0, 0);
	}
}

HOOK int pthread_cancel(pthread_t th)
{
	if (!is_gthr(&th))
		return REAL(pthread_cancel)(th);
	struct g *gp = tg_started(th);
	return gp ? cancel_g(gp) : 0;
}

/* A signal for a G: pending on it until it runs the handler (signal.c).
 * One that has exited takes none (0, as glibc says for a thread that
 * has exited but is not joined yet). */
static int gkill(pthread_t th, int sig, int code, const union sigval *v)
{
	if (sig == 0)
		return exited(th) ? ESRCH : 0;
	struct g *gp = tg_started(th);
	return gp ? sig_send_g(gp, sig, code, v) : 0;
}

HOOK int pthread_kill(pthread_t th, int sig)
{
	if (!is_gthr(&th))
		return REAL(pthread_kill)(th, sig);
	return gkill(th, sig, SI_TKILL, NULL);
}

HOOK int pthread_sigqueue(pthread_t th, int sig, const union sigval val)
{
	if (!is_gthr(&th))
		return REAL(pthread_sigqueue)(th, sig, val);
	return gkill(th, sig, SI_QUEUE, &val);
}

HOOK int pthread_getschedparam(pthread_t th, int *policy, struct sched_param *param)
{
	if (!is_gthr(&th))
		return REAL(pthread_getschedparam)(th, policy, param);
	*policy = SCHED_OTHER;
	param->sched_priority = 0;
	return 0;
}

HOOK int pthread_setschedparam(pthread_t th, int policy, const struct sched_param *param)
{
	if (!is_gthr(&th))
		return REAL(pthread_setschedparam)(th, policy, param);
	if (policy == SCHED_OTHER && param->sched_priority == 0)
		return 0;
	shim_warn_once(&warned_sched, "green threads have no scheduling policy of their own "
				      "(pthread_setschedparam returns ENOTSUP)");
	return ENOTSUP;
}

HOOK int pthread_setschedprio(pthread_t th, int prio)
{
	if (!is_gthr(&th))
		return REAL(pthread_setschedprio)(th, prio);
	if (prio == 0)
		return 0;
	shim_warn_once(&warned_sched, "green threads have no scheduling policy of their own "
				      "(pthread_setschedparam returns ENOTSUP)");
	return ENOTSUP;
}

/* The calling thread goes to the end of the queue of those that want a
 * CPU: on a G, its P's run queue (weft_yield).  The kernel's call
 * would give up only the OS thread's time slice, and the P with it
 * stays the G's: a G spinning on sched_yield for another thread to act
 * kept that thread's G from running wherever every P had such a
 * spinner (haproxy's `show threads`: every thread's SIGURG handler spins
 * so until all have arrived; hung on 1 and 2 Ps -
 * real::sched_yield_lets_other_gs_run).  A plain thread, a G inside the
 * runtime or in a call: the kernel's. */
HOOK int sched_yield(void)
{
	if (hook_g())
		weft_yield();
	else
		sys3(SYS_sched_yield, 0, 0, 0);
	return 0;
}

HOOK int pthread_getaffinity_np(pthread_t th, size_t size, cpu_set_t *set)
{
	if (!is_gthr(&th))
		return REAL(pthread_getaffinity_np)(th, size, set);
	return sched_getaffinity(0, size, set) == 0 ? 0 : errno_get();
}

HOOK int pthread_setaffinity_np(pthread_t th, size_t size, const cpu_set_t *set)
{
	if (!is_gthr(&th))
		return REAL(pthread_setaffinity_np)(th, size, set);
	shim_warn_once(&warned_affinity, "CPU affinity of a green thread is ignored "
					 "(it runs on whichever OS thread is free)");
	return 0;
}

/* A G's CPU-time clock id (runtime/cpuclock.c keeps the clock).  glibc
 * makes a thread's from its tid, (~tid << 3) | CPUCLOCK_PERTHREAD |
 * CPUCLOCK_SCHED (kernel-posix-cpu-timers.h), which a G's tid (2^29 + id)
 * does not fit.  A G's is (~slot << 3) | 7, slot its record's index:
 * "a clockid is invalid if bits 2, 1, and 0 are all set" (the kernel's
 * linux/posix-timers.h; it answers EINVAL), so no kernel clock id has
 * them, and the
 * clock_gettime hook (clock.c) tells them from every real one.  The
 * index is below 2^27 (REGION / SLOT), so the id is negative, as a CPU
 * clock's is. */
#define GCLOCK_KIND 7

HOOK int pthread_getcpuclockid(pthread_t th, clockid_t *clk)
{
	if (!is_gthr(&th))
		return REAL(pthread_getcpuclockid)(th, clk);
	if (exited(th))
		return ESRCH; /* as glibc's for a thread whose tid is gone */
	uint32_t slot = (uint32_t)(((char *)th - gbase) / SLOT);
	*clk = (clockid_t)((~slot << 3) | GCLOCK_KIND);
	return 0;
}

bool gthr_isclock(clockid_t clk)
{
	return clk < 0 && (clk & 7) == GCLOCK_KIND;
}

struct g *gthr_mainclock(clockid_t clk)
{
	return mainclk && clk == mainclk ? mainrec->g : NULL;
}

int gthr_clock(clockid_t clk, struct g **gpp)
{
	*gpp = NULL;
	size_t off = (size_t)((uint32_t)~(uint32_t)clk >> 3) * SLOT;
	/* acquire: pairs with gthr_alloc's release, the record is made */
	if (!gthr_isclock(clk) || !gbase || off >= atomic_load_explicit(&gused, memory_order_acquire))
		return EINVAL;
	struct gthr *t = (struct gthr *)(void *)(gbase + off);
	if (exited((pthread_t)t) || (!t->g && !t->fn))
		return EINVAL; /* over, or a free record */
	struct g *gp = t->g; /* a G descriptor is never freed: check it is still t's */
	if (gp && gp->tls != t)
		return EINVAL;
	*gpp = gp; /* NULL: made, not started yet */
	return 0;
}

/* ---- once ---------------------------------------------------------------------------------------- */

/* 0 new, 1 running, 2 done; waiters for any once sleep on one cond. */
static weft_mutex_t oncem = WEFT_MUTEX_INIT;
static weft_cond_t oncec = WEFT_COND_INIT;

int shim_once(pthread_once_t *o, void (*fn)(void))
{
	if (likely(__atomic_load_n(o, __ATOMIC_ACQUIRE) == 2))
		return 0;
	int z = 0;
	if (__atomic_compare_exchange_n(o, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
		fn();
		weft_mutex_lock(&oncem);
		__atomic_store_n(o, 2, __ATOMIC_RELEASE);
		weft_cond_broadcast(&oncec);
		weft_mutex_unlock(&oncem);
		return 0;
	}
	int e = errno_get();
	weft_mutex_lock(&oncem);
	while (__atomic_load_n(o, __ATOMIC_ACQUIRE) != 2)
		weft_cond_wait(&oncec, &oncem);
	weft_mutex_unlock(&oncem);
	errno_set(e);
	return 0;
}

HOOK int pthread_once(pthread_once_t *o, void (*fn)(void))
{
	if (FROM_SHIM())
		return REAL(pthread_once)(o, fn);
	return shim_once(o, fn);
}

int __pthread_once(pthread_once_t *o, void (*fn)(void));
DEFREAL(__pthread_once);

HOOK int __pthread_once(pthread_once_t *o, void (*fn)(void))
{
	if (FROM_SHIM())
		return REAL(__pthread_once)(o, fn);
	return shim_once(o, fn);
}

/* ---- fork -------------------------------------------------------------------------------------- */

void gthr_afterfork_child(void)
{
	/* the forking thread is the only one left; another may have held
	 * these when the process forked */
	atomic_store(&glock.key, 0);
	atomic_store(&nlive, 1);
	mainclk = 0; /* main's old id names the parent's thread */
	oncem = (weft_mutex_t)WEFT_MUTEX_INIT;
	oncec = (weft_cond_t)WEFT_COND_INIT;
}

/* A G that ends without gthr_exit (weft_exit): drop its record. */
void gthr_gexit(struct g *gp)
{
	sig_gend(gp);
	struct gthr *t = gp->tls;
	if (!t)
		return;
	gp->tls = NULL;
	keys_free(t);
	uint32_t old = atomic_fetch_or(&t->flags, T_EXITED);
	if (old & T_DETACHED)
		gthr_free(t);
	else
		weft_sem_post(&t->done);
}
