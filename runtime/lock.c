/*
 * lock.c - the runtime's own low-level blocking: futex mutexes for short
 * critical sections, one-shot notes for sleeping OS threads, the clock,
 * and fatal errors.  Nothing here parks a G: these block the OS thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "sys.h"

/* Whether a signal handler interrupted the wait. */
static bool futexwait(_Atomic uint32_t *addr, uint32_t val, const struct timespec *ts)
{
	/* sys4 returns -errno and leaves errno alone */
	return sys4(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, ts) == -EINTR;
}

__thread bool note_introk __attribute__((tls_model("initial-exec")));
__thread bool note_intr __attribute__((tls_model("initial-exec")));

static void futexwake(_Atomic uint32_t *addr, int n)
{
	sys3(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n);
}


/* Drepper's three-state futex mutex: 0 free, 1 held, 2 held and someone
 * may sleep.  acquire on taking, release on giving back. */
void lock(struct lock *l)
{
	uint32_t c = 0;
	if (atomic_compare_exchange_strong_explicit(&l->key, &c, 1, memory_order_acquire,
						    memory_order_relaxed))
		return;
	for (int i = 0; i < 100; i++) {
		cpu_relax();
		c = 0;
		if (atomic_load_explicit(&l->key, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(&l->key, &c, 1, memory_order_acquire,
							  memory_order_relaxed))
			return;
	}
	struct m *m = getm();
	if (m)
		atomic_fetch_add_explicit(&m->lockwait, 1, memory_order_relaxed);
	while (atomic_exchange_explicit(&l->key, 2, memory_order_acquire) != 0)
		futexwait(&l->key, 2, NULL);
	if (m)
		atomic_fetch_sub_explicit(&m->lockwait, 1, memory_order_relaxed);
}

void unlock(struct lock *l)
{
	if (atomic_exchange_explicit(&l->key, 0, memory_order_release) == 2)
		futexwake(&l->key, 1);
}

/* Spin lock on a plain word inside public types (weft_wg_t). */
void spinlock(uint32_t *w)
{
	_Atomic uint32_t *l = (_Atomic uint32_t *)w;
	lock((struct lock *)l);
}

void spinunlock(uint32_t *w)
{
	unlock((struct lock *)w);
}

/* Notes: 0 armed, 1 woken, 2 the sleeper is (about to be) in the kernel.
 * The sleeper spins briefly before it sleeps, and the waker makes a
 * system call only for a sleeper that really sleeps: an M going idle is
 * very often woken again within microseconds (a G spawned, a peer
 * readied), and a futex wake costs the waker ~2-5 us on this kind of VM.
 * Not on a process that may use one CPU only (taskset): the waker would
 * have to run on the CPU the sleeper spins on, so every spin runs out
 * and takes its 20 us from the process's only CPU (Go spins only with
 * ncpu > 1). */
#define NOTE_SPIN_NS 20000

void noteclear(struct note *n)
{
	atomic_store_explicit(&n->key, 0, memory_order_relaxed);
}

/* release: what the waker wrote before waking is visible to the sleeper. */
void notewakeup(struct note *n)
{
	uint32_t old = atomic_exchange_explicit(&n->key, 1, memory_order_release);
	if (old == 1)
		fatal("notewakeup: double wakeup");
	if (old == 2)
		futexwake(&n->key, 1);
}

static bool notespin(struct note *n, int64_t limit)
{
	if (ncpu() <= 1)
		return false;
	int64_t end = nanotime() + (limit < NOTE_SPIN_NS ? limit : NOTE_SPIN_NS);
	for (int i = 1;; i++) {
		if (atomic_load_explicit(&n->key, memory_order_acquire) == 1)
			return true;
		cpu_relax();
		if ((i & 63) == 0 && nanotime() >= end)
			return false;
	}
}

void notesleep(struct note *n)
{
	if (notespin(n, NOTE_SPIN_NS))
		return;
	uint32_t zero = 0;
	atomic_compare_exchange_strong_explicit(&n->key, &zero, 2, memory_order_acquire,
						memory_order_acquire);
	while (atomic_load_explicit(&n->key, memory_order_acquire) != 1)
		futexwait(&n->key, 2, NULL);
}

bool notetsleep(struct note *n, int64_t ns)
{
	if (ns < 0) {
		notesleep(n);
		return true;
	}
	int64_t deadline = nanotime() + ns;
	if (notespin(n, ns))
		return true;
	uint32_t zero = 0;
	atomic_compare_exchange_strong_explicit(&n->key, &zero, 2, memory_order_acquire,
						memory_order_acquire);
	while (atomic_load_explicit(&n->key, memory_order_acquire) != 1) {
		int64_t left = deadline - nanotime();
		if (left <= 0)
			return false;
		struct timespec ts = { left / 1000000000, left % 1000000000 };
		if (futexwait(&n->key, 2, &ts) && note_introk) {
			note_intr = true;
			return false;
		}
	}
	return true;
}

/* Opaque to the optimiser (gcc's noipa, which clang lacks, spelled
 * portably): never inlined, and the empty asm with a memory clobber keeps
 * interprocedural analysis from finding them pure, so no caller reuses an
 * errno address or value from before a switch. */
/* in STARTUP_TEXT: hook_resolve, run as every process starts, calls them */
STARTUP_TEXT __attribute__((noinline)) int rt_geterrno(void)
{
	__asm__ volatile("" ::: "memory");
	return errno;
}

STARTUP_TEXT __attribute__((noinline)) void rt_seterrno(int e)
{
	__asm__ volatile("" ::: "memory");
	errno = e;
}

int64_t nanotime(void)
{
	struct timespec ts;
	rt_clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void osyield(void)
{
	(void)sys3(SYS_sched_yield, 0, 0, 0);
}

static void vsay(const char *prefix, const char *fmt, va_list ap)
{
	char buf[512];
	int n = snprintf(buf, sizeof buf, "%s", prefix);
	n += vsnprintf(buf + n, sizeof buf - n, fmt, ap);
	if (n > (int)sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	/* raw write: stdio may be locked by the thread that failed */
	(void)sys_write(2, buf, n);
}

void warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("weft: ", fmt, ap);
	va_end(ap);
}

void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("weft: fatal: ", fmt, ap);
	va_end(ap);
	abort();
}
