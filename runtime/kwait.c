/*
 * kwait.c - ending a kernel wait.
 *
 * A G whose P has nothing else to run waits for its fds in the kernel,
 * on its own M, holding its P (entersyscallwait, proc.c; the hooks in
 * hook/wait.c).  Three things must be able to end such a wait before its
 * fds or its deadline do:
 *
 *   - a G made runnable that the P could run: the readier (wakep) finds
 *     no idle P and no spinning M and asks one kernel wait to end; the
 *     waiting G then parks on the netpoller instead and its P runs the
 *     scheduler (sysmon asks too, as a backstop, rather than lend a
 *     spare P: the thread count stays WEFT_MAXPROCS + the Ms in other
 *     blocking calls);
 *   - a signal handler or a cancellation for the waiting G (the shim's
 *     g_interrupt): the G parks instead, and the park runs it;
 *   - sysmon's going to sleep for good while every P is idle or waits
 *     in the kernel (nothing to end: the wait's exit wakes sysmon).
 *
 * "Asking" is m->kwait going KW_WAIT -> KW_STOP and a signal sent to the
 * M's thread (kwait_kick): SIGURG, whose handler the runtime installs
 * (dump.c), or under the shim its own SIGWEFT (rt_kicktid).  The system
 * call itself is made by kwait_syscall below, which looks at m->kwait
 * one instruction before the `syscall`; the signal handler
 * (kwait_onsignal) sets KW_STOP and, if the thread was stopped between
 * that look and the `syscall` instruction, moves it on to the -EINTR
 * exit.  So a signal handled on the M at any time after the wait said
 * KW_WAIT ends it: before the look (the look sees KW_STOP), inside the
 * window (moved to the exit), in the kernel (the call returns EINTR: it
 * is never restarted while a handler runs: signal(7)), or after it
 * returned (nothing to end).  This is musl's cancellation-point idea
 * (__syscall_cp_asm and the handler's pc test) applied to waking a
 * thread rather than cancelling it.
 *
 * Memory order: the waiter stores KW_WAIT and adds to sched.nkwait
 * (seq_cst) before it reads its run queues, intrreq and flags; a readier
 * stores its G, then (seq_cst fence) reads sched.nkwait and the Ms'
 * kwait: either the waiter sees the G, or the readier sees KW_WAIT and
 * asks.  g_interrupt stores intrreq (seq_cst) before it reads kwait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <ucontext.h>

#include "runtime.h"
#include "sys.h"

/* long weft_kwait_sc(_Atomic int32_t *kw, long nr, long a, long b, long c,
 *                    long d, long e, long f): nr(a..f) if *kw is still
 * KW_WAIT just before the call, else -EINTR.  The labels bound the
 * window kwait_onsignal tests. */
__asm__(".text\n"
	".globl weft_kwait_sc\n"
	".hidden weft_kwait_sc\n"
	".type weft_kwait_sc, @function\n"
	".p2align 4\n"
	"weft_kwait_sc:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	movq %rdi, %r11\n"      /* kw */
	"	movq %rsi, %rax\n"      /* nr */
	"	movq %rdx, %rdi\n"      /* a */
	"	movq %rcx, %rsi\n"      /* b */
	"	movq %r8, %rdx\n"       /* c */
	"	movq %r9, %r10\n"       /* d */
	"	movq 8(%rsp), %r8\n"    /* e */
	"	movq 16(%rsp), %r9\n"   /* f */
	"weft_kwait_begin:\n"
	"	cmpl $1, (%r11)\n"      /* KW_WAIT */
	"	jne weft_kwait_cancel\n"
	"	syscall\n"
	"weft_kwait_end:\n"
	"	ret\n"
	"weft_kwait_cancel:\n"
	"	movq $-4, %rax\n"       /* -EINTR */
	"	ret\n"
	"	.cfi_endproc\n"
	".size weft_kwait_sc, .-weft_kwait_sc\n");

long weft_kwait_sc(_Atomic int32_t *kw, long nr, long a, long b, long c, long d, long e,
		   long f) HIDDEN;
extern const char weft_kwait_begin[] HIDDEN, weft_kwait_end[] HIDDEN,
	weft_kwait_cancel[] HIDDEN;

_Static_assert(KW_WAIT == 1, "weft_kwait_sc compares with 1");
_Static_assert(EINTR == 4, "weft_kwait_sc returns -4");

long kwait_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
	return weft_kwait_sc(&getm()->kwait, nr, a, b, c, d, e, f);
}

/* The signal a kick sends: SIGURG (dump.c's handler calls
 * kwait_onsignal); the shim sets its own sender (SIGWEFT). */
static void kick_urg(int tid)
{
	(void)sys3(SYS_tgkill, sys3(SYS_getpid, 0, 0, 0), tid, SIGURG);
}
void (*rt_kicktid)(int tid) = kick_urg;

bool kwait_onsignal(void *ucv)
{
	struct m *m = getm();
	if (!m)
		return false;
	int32_t kw = atomic_load_explicit(&m->kwait, memory_order_relaxed);
	if (kw == KW_NONE)
		return false;
	/* this thread's own word: the waiter reads it after we return */
	atomic_store_explicit(&m->kwait, KW_STOP, memory_order_relaxed);
	ucontext_t *uc = ucv;
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	if (pc >= (uintptr_t)weft_kwait_begin && pc < (uintptr_t)weft_kwait_end)
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)weft_kwait_cancel;
	return kw == KW_STOP;
}

bool kwait_kick(struct m *m)
{
	int32_t want = KW_WAIT;
	if (!atomic_compare_exchange_strong(&m->kwait, &want, KW_STOP))
		return false;
	int tid = atomic_load_explicit(&m->tid, memory_order_relaxed);
	/* not if it is back already: a signal that comes after the wait
	 * (this window is not closed, only narrowed) is harmless - it ends
	 * the M's next kernel wait, which waits again; a blocking call it
	 * interrupts restarts (SA_RESTART) - but stray all the same (in a
	 * linked program the SIGURG handler the program had then runs) */
	void (*kick)(int) = __atomic_load_n(&rt_kicktid, __ATOMIC_RELAXED);
	if (tid > 0 && atomic_load(&m->kwait) == KW_STOP)
		kick(tid);
	atomic_fetch_add_explicit(&sched.nkwaitkick, 1, memory_order_relaxed);
	return true;
}

void kwait_wakeone(void)
{
	/* seq_cst: our G's store before the loads (see the top) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&sched.nkwait, memory_order_relaxed) == 0 ||
	    atomic_load(&sched.nmspinning) != 0 || atomic_load(&sched.npidle) != 0)
		return;
	int32_t nps = atomic_load_explicit(&nallp, memory_order_acquire);
	for (int32_t i = 0; i < nps; i++) {
		struct p *pp = allp[i];
		if (PSTATUS(atomic_load_explicit(&pp->state, memory_order_relaxed)) != P_RUNNING)
			continue;
		/* relaxed: its owner writes it; Ms are never freed, and a stale
		 * M is not in a kernel wait for this P or ends one harmlessly */
		struct m *m = __atomic_load_n(&pp->m, __ATOMIC_RELAXED);
		if (m && atomic_load(&m->kwait) == KW_WAIT && kwait_kick(m))
			return;
	}
}

void kwait_kickg(struct g *gp)
{
	for (struct m *m = atomic_load(&allm); m; m = m->alllink)
		if (atomic_load_explicit(&m->curg, memory_order_relaxed) == gp) {
			kwait_kick(m);
			return;
		}
}
