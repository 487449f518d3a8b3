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
 * No kick outlives its wait.  A kick's signal sent just as the wait
 * ended on its own would otherwise land later, in whatever the M runs
 * next: a linked program's own blocking call that is not restarted
 * (a raw syscall(SYS_ppoll), nanosleep, a static library's read) would
 * return an EINTR nobody asked for, and its SIGURG handler would run for
 * nothing.  So (kwait_kick, kwait_leave): an asker moves the word
 * KW_WAIT -> KW_KICK (one asker per wait wins), sends, then stores
 * KW_SENT; the waiter leaving its wait waits while the word is KW_KICK,
 * and after KW_SENT makes one more system call (rt_sigpending), on whose
 * return the kernel delivers the signal, queued on the thread since the
 * asker's tgkill returned.  The handler knows a kick by its siginfo
 * (SI_QUEUE with kick_mark: kwait_sigsend), whatever the word says by
 * then, and keeps it from the program's handler.  Under TSan, which
 * runs a handler later, at its next intercepted call, the delivery is
 * TSan's and the handler runs later: still not in a program's call, and
 * still known as a kick.  What is left: a linked program that blocks
 * SIGURG on its thread keeps the kick pending (the wait is not ended by
 * it: sysmon's backstop), until it unblocks it; then the handler takes
 * it, without EINTR unless the unblocking is a wait's own mask (ppoll,
 * pselect, sigsuspend) - and a program's SIGURG queued while a kick is
 * pending is merged with it by the kernel (one of a standard signal is
 * pending at most), as Go's preemption signal is.
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
#include <string.h>
#include <time.h>
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

/* A kick's mark: its siginfo says SI_QUEUE, from this process, with
 * this address as its value (a program's sigqueue would have to guess
 * it).  rt_tgsigqueueinfo to our own process may carry any negative
 * si_code (the kernel refuses that only across processes). */
static const char kick_mark;

/* This process's pid as the last kick found it (0: not yet).  Kept
 * rather than asked per kick (a getpid per kick: 0.1 system calls per
 * request in apache).  A child of fork - made by any path, a raw clone
 * too - starts with its parent's: the kernel refuses that pair (the
 * child's thread is not in the parent's thread group: ESRCH, nothing
 * sent), and the kick asks again.  Relaxed: any value read is either
 * right or refused. */
static _Atomic int kick_pid;

void kwait_sigsend(int tid, int sig)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = sig;
	si.si_code = SI_QUEUE;
	si.si_value.sival_ptr = (void *)&kick_mark;
	int pid = atomic_load_explicit(&kick_pid, memory_order_relaxed);
	for (int fresh = pid == 0;; fresh = 1) {
		if (fresh) {
			int now = (int)sys3(SYS_getpid, 0, 0, 0);
			if (now == pid) /* the pid was right: tid has gone */
				return;
			pid = now;
			atomic_store_explicit(&kick_pid, pid, memory_order_relaxed);
		}
		si.si_pid = pid;
		if (sys4(SYS_rt_tgsigqueueinfo, pid, tid, sig, &si) != -ESRCH || fresh)
			return;
	}
}

bool kwait_iskick(const void *siv)
{
	const siginfo_t *si = siv;
	return si && si->si_code == SI_QUEUE && si->si_value.sival_ptr == (void *)&kick_mark;
}

/* The signal a kick sends: SIGURG (dump.c's handler calls
 * kwait_onsignal); the shim sets its own sender (SIGWEFT). */
static void kick_urg(int tid)
{
	kwait_sigsend(tid, SIGURG);
}
void (*rt_kicktid)(int tid) = kick_urg;

bool kwait_onsignal(void *siv, void *ucv)
{
	bool kick = kwait_iskick(siv);
	struct m *m = getm();
	if (!m)
		return kick;
	int32_t kw = atomic_load_explicit(&m->kwait, memory_order_relaxed);
	if (kw == KW_NONE)
		return kick;
	/* this thread's own wait: asked to end.  Not over KW_KICK or
	 * KW_SENT: the waiter must still wait for that kick's signal */
	int32_t want = KW_WAIT;
	atomic_compare_exchange_strong(&m->kwait, &want, KW_STOP);
	ucontext_t *uc = ucv;
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	if (pc >= (uintptr_t)weft_kwait_begin && pc < (uintptr_t)weft_kwait_end)
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)weft_kwait_cancel;
	return kick;
}

/* m->kwait is KW_KICK, ours: send the kick, then say it is sent. */
static void kick_send(struct m *m)
{
	int tid = atomic_load_explicit(&m->tid, memory_order_relaxed);
	if (unlikely(weftenv.kickdelay_ns > 0)) {
		/* tests: the asker is slow (preempted here, on a loaded
		 * machine), and the wait ends on its own meanwhile */
		struct timespec ts = { 0, (long)weftenv.kickdelay_ns };
		(void)sys3(SYS_nanosleep, &ts, NULL, 0);
	}
	int32_t to = KW_STOP;
	if (tid > 0) {
		void (*kick)(int) = __atomic_load_n(&rt_kicktid, __ATOMIC_RELAXED);
		kick(tid);
		to = KW_SENT;
	}
	/* release: the signal is queued on the thread (tgkill returned)
	 * before the waiter, which waits while KW_KICK, sees KW_SENT */
	atomic_store_explicit(&m->kwait, to, memory_order_release);
}

bool kwait_kick(struct m *m)
{
	int32_t want = KW_WAIT;
	if (!atomic_compare_exchange_strong(&m->kwait, &want, KW_KICK))
		return false;
	kick_send(m);
	atomic_fetch_add_explicit(&sched.nkwaitkick, 1, memory_order_relaxed);
	return true;
}

bool kwait_rekick(struct m *m)
{
	int32_t want = KW_SENT;
	if (!atomic_compare_exchange_strong(&m->kwait, &want, KW_KICK))
		return false;
	kick_send(m);
	return true;
}

bool kwait_leave(struct m *m)
{
	int32_t kw;
	for (int spins = 0;; spins++) {
		kw = atomic_load_explicit(&m->kwait, memory_order_acquire);
		if (kw == KW_KICK) {
			/* an asker between its ask and its signal: not
			 * without it (it would come later).  It runs on
			 * another thread, maybe not now on a loaded machine */
			if (spins < 64)
				__builtin_ia32_pause();
			else
				(void)sys3(SYS_sched_yield, 0, 0, 0);
			continue;
		}
		/* KW_WAIT -> KW_NONE here races an asker's KW_WAIT -> KW_KICK:
		 * one wins; the loser of ours looks again */
		if (atomic_compare_exchange_strong(&m->kwait, &kw, KW_NONE))
			break;
	}
	if (kw == KW_SENT) {
		/* the kick is queued on this thread, or was delivered: a
		 * system call's return delivers it now if it is not blocked
		 * (its handler takes it as a kick: kwait_onsignal), rather
		 * than in the program's next call */
		uint64_t pend;
		(void)sys3(SYS_rt_sigpending, &pend, sizeof pend, 0);
	}
	return kw != KW_WAIT;
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

bool kwait_kickg(struct g *gp)
{
	struct m *m = g_curm(gp);
	if (!m)
		return false;
	if (kwait_kick(m))
		return true;
	/* KW_KICK, KW_SENT, KW_STOP: its wait ends anyway, and the G parks
	 * once (kwait_end), seeing the request */
	return atomic_load(&m->kwait) != KW_NONE;
}
