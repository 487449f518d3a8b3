/*
 * futex.c - a program's own futex waits park the G (syscall(SYS_futex)).
 *
 * Programs that build their locks on futexes themselves call glibc's
 * syscall(SYS_futex, ...): InnoDB's srw_lock / ssux_lock (MariaDB 10.6
 * and later: every buffer-pool page latch, the lock and transaction
 * systems), libstdc++'s std::atomic<T>::wait, Rust's and other
 * runtimes' parking lots.  Passed to the kernel, each wait blocked the
 * OS thread of the G that made it, with the P: sysmon lent a spare P
 * after it saw the thread asleep, and a lock holder queued behind the
 * waiter on the same P waited for that first.  Under MariaDB at 512
 * connections that was hundreds of OS threads.
 *
 * So a private futex wait made by a G waits in a table of our own
 * instead, as the kernel's does (kernel/futex: a hash of buckets, each a
 * lock and a queue of waiters keyed by address): the G parks on the
 * runtime's one park/ready protocol (sema.c), and a wake readies it.
 * FUTEX_WAIT, FUTEX_WAIT_BITSET (absolute deadline, CLOCK_MONOTONIC or
 * FUTEX_CLOCK_REALTIME), FUTEX_WAKE, FUTEX_WAKE_BITSET, FUTEX_REQUEUE,
 * FUTEX_CMP_REQUEUE and FUTEX_WAKE_OP are done here; the priority-
 * inheritance operations and shared (not private) futexes, which may be
 * another process's, go to the kernel as before (a G's wait there under
 * entersyscall, so sysmon lends its P at once).
 *
 * Waits that still go to the kernel on a private futex (a plain thread:
 * main before the runtime starts, a thread of WEFT_PTHREADS=native is
 * never here; a call from a G inside the runtime) are counted
 * (nkernwait), and a wake that found fewer waiters here than it may
 * wake passes the rest to the kernel while any are counted, so no waiter
 * is missed.  What is not covered: a futex wake made with a raw syscall
 * instruction (not through syscall()) for a G waiting here, which this
 * table never sees (docs/preload.md).
 *
 * Ordering, as the kernel's: a waiter counts itself in its bucket
 * (nwait, seq_cst) and then reads the word under the bucket's lock; a
 * waker's caller changed the word, then the waker has a seq_cst fence
 * and reads nwait: either the waker sees the count and takes the lock
 * (then it finds the waiter queued, or the waiter, locking after it,
 * sees the new word), or the waiter reads the new word and does not
 * wait.  A wait returns 0 when woken, and may return 0 early (a signal
 * handler with SA_RESTART ran: a spurious wake-up, which futex callers
 * allow for), EAGAIN if the word was not val, ETIMEDOUT, EINTR.
 */
#include "shim.h"

#include <linux/futex.h>
#include <sys/syscall.h>

#include "../../runtime/waitq.h"

#define FBITS 10 /* 1,024 buckets */

struct fwaiter {
	struct waiter w;  /* first: the queue holds &fw->w */
	uint32_t *addr;   /* the futex word it waits on (bucket lock) */
	uint32_t bitset;  /* FUTEX_WAIT_BITSET's mask, ~0 for FUTEX_WAIT */
	struct fbucket *b; /* the bucket it is queued in (bucket lock; requeue moves it) */
};

struct fbucket {
	struct lock lock;       /* q */
	_Atomic uint32_t nwait; /* waiters queued or looking at their word: wakers
	                         * read it unlocked (see the ordering above) */
	struct waitq q;         /* struct fwaiter, oldest first */
} __attribute__((aligned(64)));

static struct fbucket ftab[1 << FBITS];
/* private futex waits passed to the kernel and not yet returned */
static _Atomic int32_t nkernwait;

static struct fbucket *bucket(const uint32_t *addr)
{
	uint64_t h = ((uintptr_t)addr >> 2) * 0x9e3779b97f4a7c15ull;
	return &ftab[h >> (64 - FBITS)];
}

static void bunlock(void *arg)
{
	unlock(&((struct fbucket *)arg)->lock);
}

static long kfutex(long a, long b, long c, long d, long e, long f)
{
	return sys6(SYS_futex, a, b, c, d, e, f);
}

/* A private wait passed to the kernel (counted: see nkernwait).  On a G
 * as a blocking call. */
static long kwait(long a, long b, long c, long d, long e, long f)
{
	atomic_fetch_add(&nkernwait, 1); /* seq_cst: before the kernel reads the word */
	struct g *gp = hook_g();
	if (gp)
		blk_enter();
	long r = kfutex(a, b, c, d, e, f);
	if (gp)
		blk_exit();
	atomic_fetch_sub(&nkernwait, 1);
	return r;
}

/* Whether a kernel wake may find someone (after the caller's fence). */
static bool kwaiters(void)
{
	return atomic_load(&nkernwait) != 0;
}

/* Take up to n waiters on addr whose bitset meets bits off bucket b
 * (locked) into *wake (linked by next); returns how many. */
static int take(struct fbucket *b, uint32_t *addr, uint32_t bits, int n, struct waiter **wake)
{
	int k = 0;
	struct waiter *w = b->q.head;
	while (w && k < n) {
		struct waiter *next = w->next;
		struct fwaiter *fw = (struct fwaiter *)w;
		if (fw->addr == addr && (fw->bitset & bits)) {
			waitq_remove(&b->q, w);
			atomic_fetch_sub_explicit(&b->nwait, 1, memory_order_relaxed);
			if (waiter_claim(w)) {
				w->next = *wake;
				*wake = w;
				k++;
			}
		}
		w = next;
	}
	return k;
}

/* Move up to n waiters on addr from b1 to addr2 in b2 (both locked). */
static int move(struct fbucket *b1, uint32_t *addr, struct fbucket *b2, uint32_t *addr2, int n)
{
	int k = 0;
	struct waiter *w = b1->q.head;
	while (w && k < n) {
		struct waiter *next = w->next;
		struct fwaiter *fw = (struct fwaiter *)w;
		if (fw->addr == addr) {
			fw->addr = addr2;
			if (b1 != b2) {
				/* counted in b2 before it leaves b1: a waker of
				 * addr2 may read b2's count unlocked now */
				atomic_fetch_add(&b2->nwait, 1);
				waitq_remove(&b1->q, w);
				atomic_fetch_sub_explicit(&b1->nwait, 1, memory_order_relaxed);
				waitq_push(&b2->q, w);
				__atomic_store_n(&fw->b, b2, __ATOMIC_RELEASE); /* gwait's unlocked look */
			}
			k++;
		}
		w = next;
	}
	return k;
}

/* Both buckets locked, in address order (once if the same). */
static void lock2(struct fbucket *b1, struct fbucket *b2)
{
	if (b1 == b2) {
		lock(&b1->lock);
	} else if (b1 < b2) {
		lock(&b1->lock);
		lock(&b2->lock);
	} else {
		lock(&b2->lock);
		lock(&b1->lock);
	}
}

static void unlock2(struct fbucket *b1, struct fbucket *b2)
{
	unlock(&b1->lock);
	if (b2 != b1)
		unlock(&b2->lock);
}

/* The deadline of a wait: -1 none, else absolute nanotime; -EINVAL for
 * a bad timespec, -ETIMEDOUT if it has passed.  abs: FUTEX_WAIT_BITSET's
 * absolute time on clk; else a duration. */
static int64_t deadline_of(const struct timespec *ts, bool abs, clockid_t clk)
{
	if (!ts)
		return -1;
	if (ts->tv_nsec < 0 || ts->tv_nsec >= NS_PER_S || ts->tv_sec < 0)
		return -EINVAL;
	int64_t left = abs ? ts_wait_begin(clk, ts)
			   : (ts->tv_sec >= INT64_MAX / NS_PER_S - 1
				      ? INT64_MAX / 2
				      : (int64_t)ts->tv_sec * NS_PER_S + ts->tv_nsec);
	if (left <= 0) {
		if (abs)
			ts_wait_end();
		return -ETIMEDOUT;
	}
	if (left > INT64_MAX / 4)
		left = INT64_MAX / 4;
	return nanotime() + left;
}

/* A G's wait on addr while it holds val.  0 (woken, or spuriously),
 * -EAGAIN, -ETIMEDOUT, -EINTR, -EINVAL. */
static long gwait(struct g *gp, uint32_t *addr, uint32_t val, const struct timespec *ts, bool abs,
		  clockid_t clk, uint32_t bits)
{
	int64_t deadline = deadline_of(ts, abs, clk);
	if (deadline == -ETIMEDOUT) /* as the kernel: the word first */
		return __atomic_load_n(addr, __ATOMIC_RELAXED) != val ? -EAGAIN : -ETIMEDOUT;
	if (deadline < -1)
		return deadline;
	struct fbucket *b = bucket(addr);
	struct fwaiter fw = { .addr = addr, .bitset = bits, .b = b };
	intr_arm(gp);
	rt_enter();
	atomic_fetch_add(&b->nwait, 1); /* seq_cst: before the word is read */
	lock(&b->lock);
	if (__atomic_load_n(addr, __ATOMIC_RELAXED) != val) {
		atomic_fetch_sub_explicit(&b->nwait, 1, memory_order_relaxed);
		unlock(&b->lock);
		rt_leave();
		intr_disarm(gp);
		if (ts && abs)
			ts_wait_end();
		return -EAGAIN;
	}
	waiter_init(&fw.w);
	waitq_push(&b->q, &fw.w);
	bool got = waiter_block(&fw.w, bunlock, b, W_FUTEX, deadline);
	if (!got) {
		/* timed out or interrupted: nobody claimed it, but a requeue
		 * may have moved it to another bucket (fw.b, read under its
		 * lock: a mover holds it) */
		for (;;) {
			struct fbucket *fb = __atomic_load_n(&fw.b, __ATOMIC_ACQUIRE);
			lock(&fb->lock);
			if (fw.b != fb) {
				unlock(&fb->lock);
				continue;
			}
			if (fw.w.queued) {
				waitq_remove(&fb->q, &fw.w);
				atomic_fetch_sub_explicit(&fb->nwait, 1, memory_order_relaxed);
			}
			unlock(&fb->lock);
			break;
		}
	}
	rt_leave();
	intr_disarm(gp);
	if (ts && abs)
		ts_wait_end();
	if (got)
		return 0;
	if (!g_interrupted())
		return -ETIMEDOUT;
	/* a signal for the G: its handlers run here, as on the way back
	 * from the kernel's wait; with SA_RESTART a spurious wake-up (the
	 * caller looks at its word again), else EINTR.  Not a cancellation
	 * point (syscall() is none). */
	int r = hook_sigrun ? hook_sigrun() : 0;
	return (r & SIGRUN_RAN) && !(r & SIGRUN_RESTART) ? -EINTR : 0;
}

/* Wake up to n (at least one, as the kernel) waiters on addr. */
static long gwake(uint32_t *addr, int n, uint32_t bits, long a, long op, long f)
{
	if (n <= 0)
		n = 1;
	struct fbucket *b = bucket(addr);
	struct waiter *wake = NULL;
	int k = 0;
	atomic_thread_fence(memory_order_seq_cst); /* the caller's word, then nwait */
	if (atomic_load_explicit(&b->nwait, memory_order_relaxed) != 0) {
		rt_enter();
		lock(&b->lock);
		k = take(b, addr, bits, n, &wake);
		unlock(&b->lock);
		waiters_wake(wake);
		rt_leave();
	}
	if (k < n && kwaiters()) {
		long r = kfutex(a, op, n - k, 0, 0, f);
		if (r > 0)
			k += (int)r;
	}
	return k;
}

/* FUTEX_REQUEUE / FUTEX_CMP_REQUEUE (cmp: *addr must be val3). */
static long grequeue(uint32_t *addr, int nwake, int nmove, uint32_t *addr2, bool cmp, uint32_t val3,
		     long op)
{
	if (nwake < 0 || nmove < 0)
		return -EINVAL;
	struct fbucket *b1 = bucket(addr), *b2 = bucket(addr2);
	struct waiter *wake = NULL;
	int k = 0;
	atomic_thread_fence(memory_order_seq_cst);
	if (cmp || atomic_load_explicit(&b1->nwait, memory_order_relaxed) != 0) {
		rt_enter();
		lock2(b1, b2);
		if (cmp && __atomic_load_n(addr, __ATOMIC_RELAXED) != val3) {
			unlock2(b1, b2);
			rt_leave();
			return -EAGAIN;
		}
		k = take(b1, addr, ~0u, nwake, &wake);
		k += move(b1, addr, b2, addr2, nmove);
		unlock2(b1, b2);
		waiters_wake(wake);
		rt_leave();
	}
	if (kwaiters()) {
		long r = kfutex((long)addr, op, nwake, nmove, (long)addr2, (long)val3);
		if (r > 0)
			k += (int)r;
	}
	return k; /* woken and requeued, as the kernel's futex_requeue counts for both */
}

/* FUTEX_WAKE_OP: *addr2 changed by the encoded operation, up to n on
 * addr woken, and up to n2 on addr2 if the old *addr2 passes the
 * encoded comparison. */
static long gwakeop(uint32_t *addr, int n, int n2, uint32_t *addr2, uint32_t enc, long priv)
{
	int opc = (enc >> 28) & 7, cmp = (enc >> 24) & 15;
	uint32_t oparg = (enc >> 12) & 0xfff, cmparg = enc & 0xfff;
	if (enc & (8u << 28)) /* FUTEX_OP_OPARG_SHIFT */
		oparg = oparg >= 32 ? 0 : 1u << oparg;
	else if (oparg & 0x800)
		oparg |= 0xfffff000u; /* sign-extended, as the kernel */
	if (cmparg & 0x800)
		cmparg |= 0xfffff000u;
	struct fbucket *b1 = bucket(addr), *b2 = bucket(addr2);
	struct waiter *wake = NULL;
	rt_enter();
	lock2(b1, b2);
	uint32_t old;
	switch (opc) {
	case FUTEX_OP_SET: old = __atomic_exchange_n(addr2, oparg, __ATOMIC_SEQ_CST); break;
	case FUTEX_OP_ADD: old = __atomic_fetch_add(addr2, oparg, __ATOMIC_SEQ_CST); break;
	case FUTEX_OP_OR: old = __atomic_fetch_or(addr2, oparg, __ATOMIC_SEQ_CST); break;
	case FUTEX_OP_ANDN: old = __atomic_fetch_and(addr2, ~oparg, __ATOMIC_SEQ_CST); break;
	case FUTEX_OP_XOR: old = __atomic_fetch_xor(addr2, oparg, __ATOMIC_SEQ_CST); break;
	default:
		unlock2(b1, b2);
		rt_leave();
		return -ENOSYS;
	}
	bool yes;
	switch (cmp) {
	case FUTEX_OP_CMP_EQ: yes = (int32_t)old == (int32_t)cmparg; break;
	case FUTEX_OP_CMP_NE: yes = (int32_t)old != (int32_t)cmparg; break;
	case FUTEX_OP_CMP_LT: yes = (int32_t)old < (int32_t)cmparg; break;
	case FUTEX_OP_CMP_LE: yes = (int32_t)old <= (int32_t)cmparg; break;
	case FUTEX_OP_CMP_GT: yes = (int32_t)old > (int32_t)cmparg; break;
	case FUTEX_OP_CMP_GE: yes = (int32_t)old >= (int32_t)cmparg; break;
	default: yes = false; break; /* the kernel: ENOSYS, after the op */
	}
	int k = take(b1, addr, ~0u, n <= 0 ? 1 : n, &wake);
	if (yes)
		k += take(b2, addr2, ~0u, n2 <= 0 ? 1 : n2, &wake);
	unlock2(b1, b2);
	waiters_wake(wake);
	rt_leave();
	if (kwaiters()) {
		long r = kfutex((long)addr, FUTEX_WAKE | priv, n, 0, 0, 0);
		if (r > 0)
			k += (int)r;
		if (yes && (r = kfutex((long)addr2, FUTEX_WAKE | priv, n2, 0, 0, 0)) > 0)
			k += (int)r;
	}
	return k;
}

long futex_syscall(bool fromshim, long a, long b, long c, long d, long e, long f)
{
	int cmd = (int)b & FUTEX_CMD_MASK;
	bool priv = (b & FUTEX_PRIVATE_FLAG) != 0;
	bool wait = cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET;
	struct g *gp = hook_g();
	if (fromshim || shim_native || !priv) {
		/* glibc's or another process's: the kernel's, a G's wait as a
		 * blocking call */
		if (!wait || !gp)
			return wait && priv ? kwait(a, b, c, d, e, f) : kfutex(a, b, c, d, e, f);
		blk_enter();
		long r = kfutex(a, b, c, d, e, f);
		blk_exit();
		return r;
	}
	uint32_t *addr = (uint32_t *)a;
	long realtime = b & FUTEX_CLOCK_REALTIME;
	switch (cmd) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET: {
		uint32_t bits = cmd == FUTEX_WAIT ? ~0u : (uint32_t)f;
		if (!bits)
			return -EINVAL;
		if (!gp)
			return kwait(a, b, c, d, e, f);
		return gwait(gp, addr, (uint32_t)c, (const struct timespec *)d, cmd == FUTEX_WAIT_BITSET,
			     realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC, bits);
	}
	case FUTEX_WAKE:
	case FUTEX_WAKE_BITSET: {
		uint32_t bits = cmd == FUTEX_WAKE ? ~0u : (uint32_t)f;
		if (!bits || realtime)
			return realtime ? -ENOSYS : -EINVAL;
		return gwake(addr, (int)c, bits, a, b, f);
	}
	case FUTEX_REQUEUE:
	case FUTEX_CMP_REQUEUE:
		if (realtime)
			return -ENOSYS;
		return grequeue(addr, (int)c, (int)d, (uint32_t *)e, cmd == FUTEX_CMP_REQUEUE,
				(uint32_t)f, b);
	case FUTEX_WAKE_OP:
		if (realtime)
			return -ENOSYS;
		return gwakeop(addr, (int)c, (int)d, (uint32_t *)e, (uint32_t)f, FUTEX_PRIVATE_FLAG);
	default:
		/* priority inheritance (the word holds a real tid) and the
		 * rest: the kernel's */
		if (gp && (cmd == FUTEX_LOCK_PI || cmd == FUTEX_LOCK_PI2 || cmd == FUTEX_WAIT_REQUEUE_PI)) {
			blk_enter();
			long r = kfutex(a, b, c, d, e, f);
			blk_exit();
			return r;
		}
		return kfutex(a, b, c, d, e, f);
	}
}
