/*
 * signal.c - signals for Gs as for threads: a mask per G, handlers run
 * on the G a signal is for, EINTR for its parked call; and signal waits.
 *
 * The OS threads are arranged so that the kernel never runs a handler
 * of the program on a thread of its own choosing:
 *
 *   - every G of the program (main, every pthread) has its own mask
 *     (g->sigmask), inherited from its creator, changed by its own
 *     sigprocmask / pthread_sigmask.  P is what every one of them
 *     blocks (a table of the masks in use and how many Gs have each);
 *   - the real main thread (idle since main became a G; "the signal
 *     thread") blocks P and every signal with a handler (H), and keeps
 *     blocking one whose handler went (S: H and those; h_set_locked):
 *     it only ever takes a default action, as the kernel would in any
 *     thread;
 *   - every runtime thread (Ms, sysmon, the dumper) blocks all
 *     asynchronous signals; faults, SIGPIPE / SIGXFSZ (an M blocks them
 *     as the G it runs does, and those P has while it runs no G; the
 *     others block both) and the runtime's own SIGURG reach them;
 *   - a signal with a handler that some G lets through (H minus P)
 *     stays pending for the process until the router (a G parked on a
 *     signalfd for S minus P) reads it and gives it to one G that does
 *     not block it - main first, as the kernel prefers the main thread -
 *     then, by turns, the others; one of S without a handler now it
 *     drops or acts on as the kernel would (unhandled);
 *   - a signal for a G (routed, pthread_kill, pthread_sigqueue, raise)
 *     is pending on it (g->sigpend) until it runs the handler on its own
 *     stack: at once if it is the sender; else g_interrupt wakes it from
 *     an interruptible park (read, accept, poll, sleep, sem_wait ... see
 *     docs/preload.md), the handler runs and the call returns EINTR or
 *     goes on, as SA_RESTART and signal(7) say.  A G that is running
 *     is stopped where it is and runs it at once, or a call it is
 *     blocked in ends with EINTR (sigasync.c); one parked where a thread
 *     would not be interrupted either (a mutex, a join) runs it after
 *     it wakes (sigasync.c's rescan) or at its next interruptible call.
 *   - gettid on a G is its own stable number, and tgkill / tkill /
 *     syscall(SYS_tgkill) on it go to it (below).
 *
 * A signal P blocks stays pending for the process, as it would.  A
 * watcher G on a signalfd for P hears of each: Gs in sigwait* park until
 * it does and take it with a zero-timeout sigtimedwait; Gs in pselect /
 * ppoll / epoll_pwait with a mask park, and the watcher kicks every G
 * parked on an fd, so their retry (a zero-timeout call with the
 * caller's mask) takes it; a sigsuspend that opens one runs for real.
 *
 * Threads change masks with SIGWEFT (a real-time signal the shim keeps
 * for itself): its handler sets the mask the thread returns to.
 */
#include "shim.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <ucontext.h>
#include <linux/futex.h>

#define SIGWEFT (SIGRTMAX - 3)

static bool active;            /* the signal thread runs */
static struct lock plock;      /* the mask table, P, H; g->sigmask stores */
static _Atomic uint64_t pbits; /* P: signals 1..64 every G blocks (plock; read without) */
static _Atomic uint64_t hbits; /* H: signals with a handler that Gs take (plock) */
static _Atomic uint64_t sbits; /* S: what the signal thread blocks beyond P and the
				* router reads: H and every signal that had a
				* handler since (plock; grows only, see h_set_locked) */
static bool skeep = true;      /* S keeps what H loses (WEFT_DEBUG=sigkeep=0: S is H) */
static _Atomic uint64_t pgen;  /* bumped with every change of P */
static _Atomic uint64_t applied; /* pgen the signal thread runs with */
static _Atomic int sigtid;     /* the signal thread */
static _Atomic uint32_t hgen;  /* handlers run on the signal thread (futex word) */
static int sfd = -1;           /* signalfd on P's catchable signals */
static int rfd = -1;           /* signalfd on H minus P: what the router reads */
static struct pd *rpd;         /* its descriptor, once the router parks on it */
#define STALL_NS 50000000      /* see stall() */
#define STALL_AGAIN 1000000    /* look again at a stalled G that runs it itself (stall_take) */
static struct stall {
	struct g *g;  /* the G a process signal was given to, NULL none */
	int64_t when; /* the router runs it from then on */
} stalls[65];     /* ilock */
extern _Atomic uint32_t sig_execing;
static volatile sig_atomic_t weftsig; /* the signal thread got SIGWEFT */

static weft_mutex_t smu = WEFT_MUTEX_INIT;
static weft_cond_t scv = WEFT_COND_INIT; /* applied or hgen moved */

DEFREAL(pthread_sigmask);
DEFREAL(sigprocmask);
DEFREAL(pthread_create);

/* ---- the masks ------------------------------------------------------------------- */

static bool async_sig(int s)
{
	switch (s) {
	case SIGKILL: case SIGSTOP: /* cannot be blocked */
	case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP: case SIGSYS:
	case SIGABRT: /* faults and abort(): the thread's own */
	case SIGPIPE: case SIGXFSZ: /* sent to the thread that wrote */
	case SIGURG: /* the runtime's (dumps) */
		return false;
	}
	if (s == SIGWEFT || (s > SIGSYS && s < SIGRTMIN)) /* ours, glibc's */
		return false;
	return true;
}

static uint64_t tobits(const sigset_t *s)
{
	uint64_t b = 0;
	for (int i = 1; i <= 64 && i < NSIG; i++)
		if (sigismember(s, i))
			b |= 1ULL << (i - 1);
	return b;
}

static void frombits(uint64_t b, sigset_t *s)
{
	sigemptyset(s);
	for (int i = 1; i <= 64 && i < NSIG; i++)
		if (b & (1ULL << (i - 1)))
			sigaddset(s, i);
}

static uint64_t sigbit(int s)
{
	return s >= 1 && s <= 64 ? 1ULL << (s - 1) : 0;
}

/* Never blocked by a G: the unblockable ones, glibc's, ours. */
static uint64_t unblockable(void)
{
	uint64_t b = sigbit(SIGKILL) | sigbit(SIGSTOP) | sigbit(SIGWEFT);
	for (int s = SIGSYS + 1; s < SIGRTMIN; s++)
		b |= sigbit(s);
	return b;
}

/* The signals the kernel sends to the thread whose call caused them:
 * blocked in an M's kernel mask as the G it runs blocks them (rt_sigkbits,
 * proc.c sigk_switch). */
static uint64_t kbits(void)
{
	return sigbit(SIGPIPE) | sigbit(SIGXFSZ);
}

/* What a runtime thread runs with: every asynchronous signal blocked, and
 * of kbits() those in k (an M's: its m->sigk).  No lock: a SIGWEFT
 * handler computes it. */
static void rt_mask(sigset_t *m, uint64_t k)
{
	sigemptyset(m);
	for (int s = 1; s < NSIG; s++)
		if (async_sig(s) || (sigbit(s) & kbits() & k))
			sigaddset(m, s);
}

/* What this thread runs with (an M: its sigk). */
static void m_mask(sigset_t *m)
{
	struct m *mp = getm();
	rt_mask(m, mp ? atomic_load_explicit(&mp->sigk, memory_order_relaxed) : 0);
}

/* On an M running no program G (its scheduler, idle; a G of the shim's),
 * in its SIGWEFT handler: m->sigk gains what every program G blocks now
 * (rt_sigkidle), and the handler's return blocks it (m_mask).  Only adds:
 * a sigkswitch this interrupts is then the scheduler's (proc.c
 * sigk_switch with no program G), which only adds bits too, so the mask
 * it sets after we return still holds what m->sigk says.  One running a
 * program G has that G's already (every G blocks those). */
static _Atomic uint32_t idleack; /* bumped by an M that took rt_sigkidle (futex word) */
static _Atomic int idlewait;      /* Gs waiting on it in ms_idle */

static void m_idle(void)
{
	struct m *mp = getm();
	if (!mp)
		return;
	struct g *c = atomic_load_explicit(&mp->curg, memory_order_relaxed);
	if (c && c->sigon)
		return;
	uint64_t have = atomic_load_explicit(&mp->sigk, memory_order_relaxed);
	uint64_t add = atomic_load_explicit(&rt_sigkidle, memory_order_relaxed) & ~have;
	if (!add)
		return;
	atomic_store_explicit(&mp->sigk, have | add, memory_order_relaxed);
	/* told (ms_idle): this handler runs with kbits() blocked (install),
	 * and returns with them blocked, so the waiter may go on now */
	atomic_fetch_add(&idleack, 1);
	if (atomic_load(&idlewait))
		(void)sys4(SYS_futex, &idleack, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
}

/* What the signal thread runs with: P and S (handlers run on Gs, if the
 * router that gives them to Gs runs). */
static void st_mask(sigset_t *m)
{
	uint64_t h = rfd >= 0 ? atomic_load_explicit(&sbits, memory_order_acquire) : 0;
	frombits(atomic_load_explicit(&pbits, memory_order_acquire) | h, m);
	sigdelset(m, SIGWEFT);
}

/* P alone. */
static void p_mask(sigset_t *m)
{
	frombits(atomic_load_explicit(&pbits, memory_order_acquire), m);
	sigdelset(m, SIGWEFT);
}

static int gettid_(void)
{
	return (int)sys3(SYS_gettid, 0, 0, 0);
}

static void on_weft(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	int e = errno_get();
	ucontext_t *uc = ucv;
	/* a kick is sent to an M in a kernel wait, never to the signal
	 * thread: known without a gettid (kicks come with Gs readied while
	 * no P is idle, a system call each counted) */
	if (!kwait_iskick(si) && gettid_() == atomic_load(&sigtid)) {
		/* pgen before pbits: setp stores pbits, then bumps pgen, so
		 * the mask read after seeing g is g's or a newer one, and
		 * 'applied = g' never claims a mask older than g */
		uint64_t g = atomic_load(&pgen);
		st_mask(&uc->uc_sigmask);
		atomic_store(&applied, g);
		weftsig = 1;
		/* SIGWEFT is SA_RESTART, so a futex wait it interrupts is
		 * restarted, not ended with EINTR: moving the word makes
		 * the restarted wait return at once (sig_thread) */
		atomic_fetch_add(&hgen, 1);
	} else {
		m_idle();
		m_mask(&uc->uc_sigmask);
		(void)kwait_onsignal(si, uc); /* a kernel wait here ends (runtime/kwait.c) */
		async_check(uc); /* a G computing here with a signal to run */
	}
	/* only if changed: on a scheduler that kept a G's block (runtime/
	 * tls.c, g0keep) errno is that G's, which may run on another M */
	if (errno_get() != e)
		errno_set(e);
}

static void install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_weft;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	/* kbits() blocked while it runs: an idle M that lets SIGPIPE through
	 * is told to block it (m_idle), and must not take a process-directed
	 * one between the handler's start and its return (ms_idle's waiter
	 * goes on once m_idle has run) */
	frombits(kbits(), &sa.sa_mask);
	sigaction(SIGWEFT, &sa, NULL);
}

/* SIGWEFT to a thread, its handler in place: code that resets every
 * handler with raw system calls (as Python's subprocess child does)
 * must not turn it into a killer. */
void sig_tell(int tid)
{
	struct sigaction cur;
	if (sigaction(SIGWEFT, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) ||
	    cur.sa_sigaction != on_weft)
		install();
	if (tid > 0)
		(void)sys3(SYS_tgkill, getpid(), tid, SIGWEFT);
}
#define tell sig_tell

/* A kernel wait's kick (runtime/kwait.c) under the shim: SIGWEFT, whose
 * handler every M keeps (a program may install its own SIGURG handler,
 * which would then run on an M).  Without sig_tell's look at the
 * disposition first (a system call more per kick, and kicks come with
 * every G readied while no P is idle under load): the case it guards
 * against, a program that resets every handler by raw system calls, is
 * a fork child about to exec, with no other M to kick. */
static void kick(int tid)
{
	kwait_sigsend(tid, SIGWEFT);
}

/* ---- SIGPIPE and SIGXFSZ: the running G's, in its M's kernel mask ----------------- */

/* The kernel sends SIGPIPE (a write to a pipe or socket with no reader)
 * and SIGXFSZ (past RLIMIT_FSIZE) to the thread that made the call, and
 * acts on it there at once unless that thread blocks it.  So the kernel
 * mask of an M blocks them exactly as the G it runs does: one G may block
 * SIGPIPE around its writes while another dies of it.  The switch calls
 * sigkswitch when the next G's differ from the M's (proc.c sigk_switch),
 * a G's own mask change calls it for its M (sigk_self).
 *
 * A signal the kernel left pending on the M (a G that blocks it caused
 * it) belongs to that G: a hooked call that fails with EPIPE / EFBIG
 * hands it over at once (sig_err), pending on the G as on a thread.  One
 * caused through a path weft does not see is still pending when the M
 * next unblocks it: the G's if that G itself lets it through (sigk_self),
 * dropped if the M switches to another G that does, as a thread's
 * pending signals are when it ends, rather than acted on for a G that
 * never caused it.  A handler's sa_mask (g->sighold) counts as the G's
 * mask (run_one, jump_out). */

/* The s the kernel sent this thread for its own call, pending here,
 * taken (to *si if not NULL).  The kernel sends a write's SIGPIPE and
 * SIGXFSZ as if this process had (send_sig: SI_USER, our pid), and its
 * sigtimedwait takes the thread's own pending signals before the
 * process's; one from another process it took instead (kill: every G
 * blocks s, so it waits for the process) goes back where it was, pending
 * for the process with its siginfo (to our own pid, rt_sigqueueinfo may
 * carry any si_code). */
static bool take_mine(int s, siginfo_t *si)
{
	uint64_t pend = 0;
	if (sys3(SYS_rt_sigpending, &pend, 8, 0) != 0 || !(pend & sigbit(s)))
		return false;
	uint64_t set = sigbit(s);
	struct timespec zero = { 0, 0 };
	siginfo_t tmp;
	if (!si)
		si = &tmp;
	if (sys4(SYS_rt_sigtimedwait, &set, si, &zero, 8) != s)
		return false;
	long pid = sys3(SYS_getpid, 0, 0, 0);
	/* SI_TKILL from our pid: a tgkill to this very thread (raise while
	 * the G blocks s, as sort's SIGPIPE handler: SIG_DFL, raise): this
	 * thread's too.  rt_sigqueueinfo would not put it back anyway: the
	 * kernel refuses SI_TKILL unless the caller's tid is the pid. */
	if ((si->si_code == SI_USER || si->si_code == SI_TKILL) && si->si_pid == pid)
		return true;
	(void)sys3(SYS_rt_sigqueueinfo, pid, s, si);
	return false;
}

/* m's kernel mask and m->sigk become want (of kbits()); on m's thread. */
static void sigkswitch(struct m *m, uint64_t want)
{
	uint64_t have = atomic_load_explicit(&m->sigk, memory_order_relaxed);
	uint64_t on = want & ~have, off = have & ~want;
	/* what we let through: a pending one is the previous Gs' (above),
	 * taken while still blocked */
	for (uint64_t b = off; b; b &= b - 1)
		while (take_mine(__builtin_ctzll(b) + 1, NULL))
			;
	/* sigk first: a SIGWEFT handler that comes now returns to a mask
	 * made from it (on_weft), the same as the calls below make */
	atomic_store_explicit(&m->sigk, want, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	if (on)
		(void)sys4(SYS_rt_sigprocmask, SIG_BLOCK, &on, NULL, 8);
	if (off)
		(void)sys4(SYS_rt_sigprocmask, SIG_UNBLOCK, &off, NULL, 8);
}

static bool deliver(struct g *gp, int s, const siginfo_t *si, bool thr);

/* The running G's mask changed (its own call, a handler's sa_mask on and
 * off: run_one, jump_out): its M's kernel mask follows at once (no
 * preemption meanwhile: the mask is this thread's).  What it lets
 * through now that is pending on this thread was left by a call of its
 * own that weft did not see (a raw system call): as a thread's, the G's,
 * acted on by the caller as any pending signal it unblocks (setp), not
 * dropped as sigkswitch drops another G's. */
static void sigk_self(struct g *gp)
{
	if (!gp->sigon)
		return;
	struct m *m = rt_enter();
	uint64_t want = (atomic_load(&gp->sigmask) | atomic_load(&gp->sighold)) & kbits();
	uint64_t have = atomic_load_explicit(&m->sigk, memory_order_relaxed);
	for (uint64_t b = have & ~want; b; b &= b - 1) {
		int s = __builtin_ctzll(b) + 1;
		siginfo_t si;
		if (take_mine(s, &si))
			deliver(gp, s, &si, true);
	}
	if (want != have)
		sigkswitch(m, want);
	rt_leave();
}

/* A hooked call failed with e (hook.h hook_sigerr: sysret, errsig, and
 * blk_exit before exitsyscall, which may move the G to another M):
 * EPIPE's SIGPIPE, EFBIG's SIGXFSZ, if the G blocks it, is pending on
 * this thread: the G's now.  No rt_enter (blk_exit calls this in the
 * G's system call): the shim's own code is never stopped (sigasync.c)
 * and nothing here switches, so the M stays; deliver to the running G
 * only sets its bits. */
static void sig_err(int e)
{
	int s = e == EPIPE ? SIGPIPE : SIGXFSZ;
	struct g *gp = getg();
	struct m *m = getm();
	if (!active || !gp || !m || !gp->sigon ||
	    !(atomic_load_explicit(&m->sigk, memory_order_relaxed) & sigbit(s)))
		return;
	siginfo_t si;
	if (take_mine(s, &si))
		deliver(gp, s, &si, true);
}

/* ---- runtime threads ----------------------------------------------------------- */

/* A new M (rt_mstarted): it blocks kbits() until its first G lets them
 * through (proc.c sigk_switch), as an idle M blocks what every G blocks:
 * it may sit idle before it runs any G, and its tid is not yet there for
 * ms_idle.  sigk first: a SIGWEFT handler here meanwhile sets the same
 * mask (m_mask). */
static void m_started(void)
{
	struct m *mp = getm();
	if (mp)
		atomic_store_explicit(&mp->sigk, kbits(), memory_order_relaxed);
	sigset_t m;
	rt_mask(&m, mp ? kbits() : 0);
	REAL(pthread_sigmask)(SIG_SETMASK, &m, NULL);
}

/* rt_pthread_create: the runtime's threads start with asynchronous
 * signals blocked (the dumper, which asks for all, keeps all). */
int sig_rt_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	sigset_t want, old;
	REAL(pthread_sigmask)(SIG_SETMASK, NULL, &old);
	if (sigismember(&old, SIGWEFT))
		want = old; /* the dumper, made with everything blocked: so be it */
	else /* never let kbits() through there: sysmon and the like run no
	      * G, so they block them as an idle M does what every G blocks
	      * (m_idle), and one may be pending here (a G's that blocks
	      * it); a new M sets its own (m_started) */
		rt_mask(&want, kbits());
	/* an exec under way kills every other thread and makes clone fail
	 * meanwhile: wait for it to fail or succeed (then we are gone) */
	while (atomic_load(&sig_execing))
		sys4(SYS_futex, &sig_execing, FUTEX_WAIT_PRIVATE, 1, NULL);
	REAL(pthread_sigmask)(SIG_SETMASK, &want, NULL);
	int r;
	for (int tries = 0;; tries++) {
		r = REAL(pthread_create)(t, a, fn, arg);
		if (r != EAGAIN || tries == 100)
			break;
		struct timespec ts = { 0, 1000000 }; /* transient: back off 1 ms */
		sys3(SYS_nanosleep, &ts, NULL, 0);
	}
	REAL(pthread_sigmask)(SIG_SETMASK, &old, NULL);
	return r;
}

/* Around an exec: no new runtime thread meanwhile. */
_Atomic uint32_t sig_execing;

void sig_exec_begin(void)
{
	atomic_store(&sig_execing, 1);
}

void sig_exec_end(void)
{
	atomic_store(&sig_execing, 0);
	sys4(SYS_futex, &sig_execing, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
}

/* ---- the mask table: P is what every G blocks ------------------------------------------ */

struct mtab {
	uint64_t mask; /* a mask some Gs have */
	int64_t n;     /* how many (0: a free entry) */
};
static struct mtab *mt;   /* plock */
static int nmt, capmt;    /* entries used (some may have n 0), allocated */
static struct g *maing;   /* the main G: first choice for a process signal */
static uint64_t ppend;      /* routed when no G would take them (plock) */
static siginfo_t pinfo[65]; /* their siginfo (plock) */

/* plock held: n more (or fewer) Gs with mask. */
static void mt_add(uint64_t mask, int64_t n)
{
	int fr = -1;
	for (int i = 0; i < nmt; i++) {
		if (mt[i].n && mt[i].mask == mask) {
			mt[i].n += n;
			return;
		}
		if (!mt[i].n && fr < 0)
			fr = i;
	}
	if (n <= 0)
		return; /* not there: a fork child's reset table */
	if (fr < 0) {
		if (nmt == capmt) {
			int ncap = capmt ? capmt * 2 : 16;
			struct mtab *t = rtalloc((size_t)ncap * sizeof *t);
			if (!t)
				fatal("out of memory for the signal mask table");
			if (nmt)
				memcpy(t, mt, (size_t)nmt * sizeof *t);
			rtfree(mt);
			mt = t;
			capmt = ncap;
		}
		fr = nmt++;
	}
	mt[fr] = (struct mtab){ mask, n };
}

/* plock held: P from the table.  With no G yet, P stays as it was. */
static uint64_t mt_p(void)
{
	uint64_t p = ~0ULL;
	bool any = false;
	for (int i = 0; i < nmt; i++)
		if (mt[i].n > 0) {
			p &= mt[i].mask;
			any = true;
		}
	return any ? p : atomic_load_explicit(&pbits, memory_order_relaxed);
}

/* ---- the watcher: a G parked on the signalfd for P -------------------------------------- */

static void kick_one(int fd, struct pd *d, void *arg)
{
	(void)arg;
	if (fd != sfd && fd != rfd && __atomic_load_n(&d->waiters.head, __ATOMIC_RELAXED))
		pd_kick(d, PD_READ | PD_WRITE);
}

/* Every G parked on an fd retries its call. */
static void kick_all(void)
{
	pd_foreach(kick_one, NULL);
}

/* Park on fd until readable or before() says (-1: no deadline): false
 * once it is closed. */
static bool fd_park(struct pd *d, int64_t (*before)(void))
{
	struct pollreq r;
	r.d = d;
	r.seq = atomic_load_explicit(&d->seq, memory_order_acquire);
	r.mask = PD_READ;
	pd_snap(&r);
	int64_t deadline = before ? before() : -1;
	return pd_wait(&r, 1, deadline, W_POLL) != -EBADF;
}

static weft_mutex_t wmu = WEFT_MUTEX_INIT;
static weft_cond_t wcv = WEFT_COND_INIT; /* wgen moved */
static uint64_t wgen;                    /* signals of P the watcher heard of (wmu) */

/* What the watcher does for each event of sfd (and once at its start):
 * Gs in sigwait look again, Gs parked on fds retry.  Run by fd_park after
 * its snapshot of sfd's events: one that comes while this runs wakes the
 * next park.  (Run before the snapshot, as it was, an event between the
 * two was swallowed: a sigwait G that had looked just before the signal
 * came waited for good with the signal pending for the process -
 * signals::sigwait, 1 run in 30 under load.) */
static int64_t watcher_round(void)
{
	weft_mutex_lock(&wmu);
	wgen++;
	weft_cond_broadcast(&wcv);
	weft_mutex_unlock(&wmu);
	kick_all();
	return -1;
}

static void watcher(void *arg)
{
	(void)arg;
	struct pd *d = pd_get(sfd);
	if (!d || pd_init(d, sfd) != 0 || pd_register(d, sfd) != 0)
		return;
	while (fd_park(d, watcher_round))
		;
}

/* The catchable signals of P: what pending ones the watcher hears of. */
static void sfd_update(void)
{
	if (sfd < 0)
		return;
	sigset_t m;
	p_mask(&m);
	for (int s = 1; s < NSIG; s++)
		if (!async_sig(s))
			sigdelset(&m, s);
	(void)sys4(SYS_signalfd4, sfd, &m, 8, 0);
}

static int newsfd(void)
{
	sigset_t m;
	sigemptyset(&m);
	long fd = sys4(SYS_signalfd4, -1, &m, 8, SFD_CLOEXEC | SFD_NONBLOCK);
	return fd < 0 ? -1 : rt_fdhigh((int)fd); /* out of the way of programs' low fds */
}

static void watcher_start(void)
{
	if ((sfd = newsfd()) < 0)
		return;
	sfd_update();
	weft_attr_t a = { .stack_size = 64 * 1024, .name = "weft signals" };
	if (weft_go_attr(&a, watcher, NULL) < 0)
		warn("cannot start the signal watcher: signal waits with a mask may not wake");
}

/* ---- the router: process signals with a handler, to a G ------------------------------------ */

static weft_mutex_t rmu = WEFT_MUTEX_INIT; /* one reader of rfd routes at a time */
static void route(int sig, const siginfo_t *si);
static void unhandled(int s, const siginfo_t *si);

/* What the router takes: S minus P. */
static void rfd_update(void)
{
	if (rfd < 0)
		return;
	uint64_t b = atomic_load(&sbits) & ~atomic_load(&pbits);
	sigset_t m;
	frombits(b, &m);
	sigdelset(&m, SIGWEFT);
	(void)sys4(SYS_signalfd4, rfd, &m, 8, 0);
}

/* Read every pending signal of rfd and route it.  rmu held. */
static void rfd_drain(void)
{
	struct signalfd_siginfo ss[8];
	long n;
	while ((n = sys3(SYS_read, rfd, ss, sizeof ss)) > 0) {
		for (long i = 0; i < n / (long)sizeof ss[0]; i++) {
			siginfo_t si;
			memset(&si, 0, sizeof si);
			si.si_signo = (int)ss[i].ssi_signo;
			si.si_code = ss[i].ssi_code;
			si.si_errno = ss[i].ssi_errno;
			si.si_pid = (pid_t)ss[i].ssi_pid;
			si.si_uid = ss[i].ssi_uid;
			si.si_status = ss[i].ssi_status;
			si.si_value.sival_ptr = (void *)(uintptr_t)ss[i].ssi_ptr;
			if (atomic_load(&hbits) & sigbit(si.si_signo))
				route(si.si_signo, &si);
			else /* S minus H */
				unhandled(si.si_signo, &si);
		}
	}
}

static void drain_locked(void)
{
	weft_mutex_lock(&rmu);
	rfd_drain();
	weft_mutex_unlock(&rmu);
}

static int64_t run_stalled(void);

static int64_t router_round(void)
{
	drain_locked();
	int64_t a = run_stalled(), b = async_rescan();
	return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

void sig_router_poke(void)
{
	struct pd *d = rpd;
	if (d) /* the router recomputes its deadline */
		pd_kick(d, PD_READ);
}

static void router(void *arg)
{
	(void)arg;
	struct pd *d = pd_get(rfd);
	if (!d || pd_init(d, rfd) != 0 || pd_register(d, rfd) != 0)
		return;
	rpd = d;
	while (fd_park(d, router_round))
		;
}

static void router_start(void)
{
	if ((rfd = newsfd()) < 0)
		return;
	rfd_update();
	/* handlers may run on it (stall) */
	weft_attr_t a = { .stack_size = 256 * 1024, .name = "weft signal router" };
	if (weft_go_attr(&a, router, NULL) < 0) {
		warn("cannot start the signal router: handlers will run on the signal thread");
		(void)sys3(SYS_close, rfd, 0, 0);
		rfd = -1;
	}
}

/* ---- the signal thread ------------------------------------------------------------------ */

/* The real main thread from now on: carry P and H, take default actions, wait. */
_Noreturn void sig_thread(void)
{
	for (;;) {
		/* SIGWEFT's handler sets weftsig, then moves hgen: seen here
		 * before the wait, or the wait finds hgen moved (EAGAIN, also
		 * when it was restarted after the handler) - never slept
		 * through, which left a G in masks_apply to its 2 ms timeout
		 * for every sigaction */
		uint32_t h = atomic_load(&hgen);
		long r = weftsig ? 0 : sys4(SYS_futex, &hgen, FUTEX_WAIT_PRIVATE, h, NULL);
		if (weftsig || r == -EINTR) {
			/* SIGWEFT brought a new mask, or a handler ran here
			 * (one installed with a raw system call) */
			if (weftsig)
				weftsig = 0;
			else
				atomic_fetch_add(&hgen, 1);
			weft_mutex_lock(&smu);
			weft_cond_broadcast(&scv);
			weft_mutex_unlock(&smu);
		}
	}
}

/* A handler the program installed for s (not SIG_DFL, SIG_IGN)? */
static bool handled(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) ? sa->sa_sigaction != NULL
					   : sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

DEFREAL(sigaction);

/* ---- SIGPIPE / SIGXFSZ handlers: the kernel runs them on the M ------------------------------ */

/* The kernel runs a handler for SIGPIPE / SIGXFSZ on the thread whose
 * write failed, at once: on the M, on the G's stack, the signal (and
 * sa_mask) blocked in the M's kernel mask while it runs.  If it parked,
 * m->sigk did not say so, and the Gs run next on that M had the signal
 * blocked; its return (rt_sigreturn) put back the mask of the M it came
 * on, maybe on another.  So the program's handler for these two is kept
 * here (kact) and the kernel's is kwrap: on a program G running its own
 * code it makes m->sigk say what the kernel blocked, runs the handler
 * as routed signals run (run_one: g->sighold, followed by the M's kernel
 * mask wherever the G goes), and returns to the mask of the M it is on
 * then.  sigaction and the like show and keep the program's (kwrap_set),
 * as before; prog_action reads it. */
static struct lock klock;         /* kact's writers */
static struct sigaction kact[2];  /* the program's handler: SIGPIPE, SIGXFSZ */

static int kidx(int s)
{
	return s == SIGPIPE ? 0 : s == SIGXFSZ ? 1 : -1;
}

static void kwrap(int s, siginfo_t *si, void *ucv);

static bool is_kwrap(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == kwrap;
}

/* s's disposition as the program set it. */
static int prog_action(int s, struct sigaction *sa)
{
	int r = REAL(sigaction)(s, NULL, sa);
	if (r == 0 && kidx(s) >= 0 && is_kwrap(sa))
		*sa = kact[kidx(s)]; /* no lock: written before kwrap is put in */
	return r;
}

/* klock held: if s (SIGPIPE / SIGXFSZ) has a handler of the program's in
 * the kernel, kwrap in its place (its flags and mask; SA_RESETHAND is
 * run_one's). */
static void kwrap_put_locked(int s)
{
	struct sigaction cur;
	if (!active || REAL(sigaction)(s, NULL, &cur) != 0 || !handled(&cur) || is_kwrap(&cur))
		return;
	kact[kidx(s)] = cur;
	struct sigaction w = cur;
	w.sa_sigaction = kwrap;
	w.sa_flags = (cur.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
	(void)REAL(sigaction)(s, &w, NULL);
}

static void kwrap_put(int s)
{
	lock(&klock);
	kwrap_put_locked(s);
	unlock(&klock);
}

/* sigaction of SIGPIPE / SIGXFSZ: the program's old one, and kwrap for a
 * handler. */
static int kwrap_set(int s, const struct sigaction *act, struct sigaction *old)
{
	lock(&klock);
	struct sigaction prev;
	int r = prog_action(s, &prev);
	if (r == 0)
		r = REAL(sigaction)(s, act, NULL);
	if (r == 0)
		kwrap_put_locked(s);
	unlock(&klock);
	if (r == 0 && old)
		*old = prev;
	return r;
}

static int run_one(int s, const siginfo_t *sip, _Atomic uint64_t *hold, uint64_t mask);
static void sigk_self(struct g *gp);
static void m_mask(sigset_t *m);
static int sig_run(void);

/* m's G is inside a call under entersyscall (a file's write: its EFBIG's
 * SIGXFSZ comes here), between entersyscall's last store and
 * exitsyscall's first (program order on this thread: status, then
 * insyscall on the way in; the reverse on the way out), and not in a
 * kernel wait (entersyscallwait's bookkeeping is the M's). */
static bool in_call(struct m *m, struct g *gp)
{
	return atomic_load_explicit(&gp->status, memory_order_relaxed) == G_SYSCALL && m->p &&
	       atomic_load_explicit(&m->p->insyscall, memory_order_relaxed) == 1 &&
	       atomic_load_explicit(&m->kwait, memory_order_relaxed) == KW_NONE;
}

static void kwrap(int s, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	struct m *m = getm();
	struct g *gp = m ? atomic_load_explicit(&m->curg, memory_order_relaxed) : NULL;
	struct sigaction sa = kact[kidx(s)];
	bool call = active && gp && gp->sigon && gp->rtdepth == 0 && in_call(m, gp);
	if (call) {
		/* the handler is the G's code: it may park, so the G leaves
		 * the call first (its P back, as on the call's return), and
		 * goes back into it below, on whichever M it is on then */
		exitsyscall();
		m = getm();
	}
	if (active && gp && gp->sigon && gp->rtdepth == 0 &&
	    atomic_load_explicit(&gp->status, memory_order_relaxed) == G_RUNNING) {
		/* what the kernel blocked for it: in m->sigk too (this M's:
		 * nothing else writes it while its handler runs) */
		uint64_t add = (tobits(&sa.sa_mask) | ((sa.sa_flags & SA_NODEFER) ? 0 : sigbit(s))) &
			       kbits();
		atomic_store_explicit(&m->sigk, atomic_load_explicit(&m->sigk, memory_order_relaxed) | add,
				      memory_order_relaxed);
		(void)run_one(s, si, &gp->sighold, atomic_load(&gp->sigmask));
		sigk_self(gp); /* the G's own again on the M it runs on now */
		/* what the handler sent itself while blocked (raise: pending
		 * on the G now, sigk_self) is acted on as the kernel does at
		 * rt_sigreturn, before the failed call returns */
		sig_run();
		m_mask(&uc->uc_sigmask); /* and rt_sigreturn leaves that M so */
		if (call)
			entersyscall();
		return;
	}
	/* elsewhere (an M running no G, the signal thread, a G in a kernel
	 * wait or in weft's own code): as the kernel runs it */
	if (sa.sa_flags & SA_RESETHAND) {
		struct sigaction dfl;
		memset(&dfl, 0, sizeof dfl);
		dfl.sa_handler = SIG_DFL;
		(void)REAL(sigaction)(s, &dfl, NULL);
	}
	if (sa.sa_flags & SA_SIGINFO)
		sa.sa_sigaction(s, si, ucv);
	else if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN)
		sa.sa_handler(s);
}

/* H from the dispositions as they are now. */
static uint64_t h_scan(void)
{
	uint64_t h = 0;
	for (int s = 1; s <= 64 && s < NSIG; s++) {
		struct sigaction sa;
		if (async_sig(s) && REAL(sigaction)(s, NULL, &sa) == 0 && handled(&sa))
			h |= sigbit(s);
	}
	return h;
}

static int sig_run(void);

/* WEFT_DEBUG has word (a measurement's "before"; env.c accepts the word
 * and leaves it to the shim). */
static bool debug_word(const char *word)
{
	const char *d = getenv("WEFT_DEBUG");
	size_t n = strlen(word);
	for (const char *p = d; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, word, n) && (p[n] == 0 || p[n] == ','))
			return true;
	return false;
}

/* Called on the real main thread before main's G starts. */
void sig_start(void)
{
	install();
	__atomic_store_n(&rt_kicktid, kick, __ATOMIC_RELAXED);
	__atomic_store_n(&rt_sigkswitch, sigkswitch, __ATOMIC_RELAXED);
	__atomic_store_n(&rt_mstarted, m_started, __ATOMIC_RELAXED);
	async_init();
	sigset_t m;
	REAL(pthread_sigmask)(SIG_SETMASK, NULL, &m);
	atomic_store(&pbits, tobits(&m) & ~unblockable());
	atomic_store(&rt_sigkidle, atomic_load(&pbits) & kbits());
	skeep = !debug_word("sigkeep=0");
	atomic_store(&hbits, h_scan());
	atomic_store(&sbits, atomic_load(&hbits));
	st_mask(&m);
	REAL(pthread_sigmask)(SIG_SETMASK, &m, NULL);
	atomic_store(&sigtid, gettid_());
	/* Ms made before now (runtime start) got P: give them theirs */
	for (struct m *mp = atomic_load(&allm); mp; mp = mp->alllink)
		if (mp->tid)
			tell(mp->tid);
	watcher_start();
	router_start();
	/* and H, now that the router reads it: handlers installed before
	 * (constructors; main before a lazy start) must not run here */
	st_mask(&m);
	REAL(pthread_sigmask)(SIG_SETMASK, &m, NULL);
	hook_sigrun = sig_run;
	hook_sigerr = sig_err;
	cancel_start();
	active = true;
	kwrap_put(SIGPIPE); /* handlers put in before the runtime started */
	kwrap_put(SIGXFSZ);
	/* from the next switch on, the Gs' SIGPIPE / SIGXFSZ (main's: it is
	 * not running yet) */
	atomic_store(&rt_sigkbits, kbits());
	rt_swslow_set(SW_SIGK); /* the switch looks at rt_sigkbits from now on */
}

/* Child of fork: a new signal thread (the old one is not in the child).
 * The watcher and router Gs start with the child's first mask change:
 * most children exec at once. */
static bool watcher_wanted;

static void *sig_thread_child(void *arg)
{
	(void)arg;
	uint64_t g = atomic_load(&pgen);
	sigset_t m;
	st_mask(&m);
	atomic_store(&sigtid, gettid_());
	REAL(pthread_sigmask)(SIG_SETMASK, &m, NULL);
	atomic_store(&applied, g);
	sig_thread();
}

void sig_afterfork_child(void)
{
	if (!active)
		return;
	atomic_store(&plock.key, 0);
	smu = (weft_mutex_t)WEFT_MUTEX_INIT;
	scv = (weft_cond_t)WEFT_COND_INIT;
	rmu = (weft_mutex_t)WEFT_MUTEX_INIT;
	wmu = (weft_mutex_t)WEFT_MUTEX_INIT;
	wcv = (weft_cond_t)WEFT_COND_INIT;
	atomic_store(&sigtid, 0);
	atomic_store(&applied, 0);
	/* the forking G is the only thread: the table holds its mask alone;
	 * nothing is pending in a new process */
	struct g *gp = getg();
	nmt = 0;
	if (gp && gp->sigon) {
		mt_add(atomic_load(&gp->sigmask), 1);
		atomic_store(&gp->sigpend, 0);
		atomic_store(&gp->sigthr, 0);
	}
	maing = gp;
	ppend = 0;
	if (sfd >= 0) { /* the watcher and router Gs did not survive the fork */
		(void)sys3(SYS_close, sfd, 0, 0);
		sfd = -1;
		watcher_wanted = true;
	}
	rpd = NULL;
	memset(stalls, 0, sizeof stalls);
	async_afterfork_child();
	if (rfd >= 0) {
		(void)sys3(SYS_close, rfd, 0, 0);
		rfd = -1;
		watcher_wanted = true;
	}
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	sigset_t all, old;
	sigfillset(&all);
	REAL(pthread_sigmask)(SIG_SETMASK, &all, &old);
	if (REAL(pthread_create)(&t, &a, sig_thread_child, NULL) != 0) {
		/* no signal thread: this thread takes the signals */
		sigset_t m;
		st_mask(&m);
		old = m;
		atomic_store(&sigtid, gettid_());
		atomic_store(&applied, atomic_load(&pgen));
	}
	REAL(pthread_sigmask)(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
}

/* ---- P and H changed: every thread and signalfd in step ----------------------------------- */

static bool on_g(void)
{
	return active && getg();
}

/* plock held: P (and the generation) for what the table says now.
 * Returns the new generation, 0 if P did not change. */
static uint64_t p_set_locked(void)
{
	uint64_t np = mt_p() & ~unblockable();
	if (np == atomic_load_explicit(&pbits, memory_order_relaxed))
		return 0;
	atomic_store_explicit(&pbits, np, memory_order_release);
	/* seq_cst: before masks_apply reads the Ms' sigk (ms_idle) */
	atomic_store(&rt_sigkidle, np & kbits());
	return atomic_fetch_add(&pgen, 1) + 1;
}

/* plock held: H gains or loses s.  The new generation if S changed (the
 * signal thread's mask and the router's signalfd must follow), else 0.
 *
 * S is H and what H lost: a signal that had a handler stays blocked on
 * the signal thread and read by the router when it has none any more
 * (the router then does what the kernel would: unhandled()).  So a
 * program that puts a handler, then SIG_IGN or SIG_DFL, then the handler
 * again, by turns (CPython's signal.signal, shells around each child)
 * waits for the signal thread only the first time. */
static uint64_t h_set_locked(int s, bool on)
{
	uint64_t h = atomic_load_explicit(&hbits, memory_order_relaxed);
	uint64_t nh = on ? h | sigbit(s) : h & ~sigbit(s);
	if (nh != h)
		atomic_store_explicit(&hbits, nh, memory_order_release);
	uint64_t sb = atomic_load_explicit(&sbits, memory_order_relaxed);
	uint64_t ns = skeep ? sb | nh : nh;
	/* (a fork child's first change of H starts its router, as before) */
	if (ns == sb && !(nh != h && watcher_wanted))
		return 0;
	atomic_store_explicit(&sbits, ns, memory_order_release);
	return atomic_fetch_add(&pgen, 1) + 1;
}


static void ms_idle(bool wait);

/* After a change to generation g: the signalfds and the signal thread
 * (waited for on a G: as the kernel does, a signal unblocked now is acted
 * on before we return).  The Ms' kbits() follow the G they run, but
 * an M that runs none is told of P's (ms_idle, waited for on a G too).
 * pch: P changed (else S alone: the watcher's signalfd, on P, stays). */
static void masks_apply(uint64_t g, bool pch)
{
	if (!g)
		return;
	if (watcher_wanted) {
		watcher_wanted = false;
		watcher_start();
		router_start();
	}
	uint64_t p = atomic_load(&pbits);
	if (pch)
		ms_idle(on_g());
	if (pch)
		sfd_update();
	rfd_update();
	/* routed signals nobody would take that every G now blocks: back
	 * to the kernel, pending for the process (sigwait, sigpending) */
	lock(&plock);
	uint64_t back = ppend & p;
	ppend &= ~back;
	unlock(&plock);
	for (int s = 1; back; s++)
		if (back & sigbit(s)) {
			back &= ~sigbit(s);
			(void)sys3(SYS_kill, getpid(), s, 0);
		}
	if (!on_g())
		return;
	int e = errno_get();
	weft_mutex_lock(&smu);
	while (atomic_load(&applied) < g) {
		tell(atomic_load(&sigtid));
		weft_cond_timedwait(&scv, &smu, 100000000); /* a backstop: the signal thread wakes us */
	}
	weft_mutex_unlock(&smu);
	errno_set(e);
}

/* P changed: an M running no program G (idle: its last G, which let
 * SIGPIPE through, ended, or has since blocked it elsewhere) blocks what
 * every G blocks now, or a process-directed SIGPIPE could reach it and
 * kill the process where it stays pending natively.  Those whose sigk
 * lacks a bit of rt_sigkidle get SIGWEFT (m_idle, in its handler, adds it
 * if it runs no program G then; one that runs one has it already, or
 * gets it at its switch).  The Ms' sigk is read after the store of
 * rt_sigkidle (seq_cst): an M that read the older rt_sigkidle at its
 * switch to the scheduler has the older sigk, so is told; one that read
 * the newer has the bit. */
static void ms_idle(bool wait)
{
	/* Waited for on a G (masks_apply), as the signal thread is: the
	 * change comes from a thread that let SIGPIPE through and ended
	 * (sig_gend, before its joiner wakes) or blocked it, and a kill the
	 * program sends next must find it pending, not an M that still lets
	 * it through and dies of it (sigintr idle_block: 3 in 100 runs).  An
	 * M acknowledges in its handler (m_idle: idleack); one that does not
	 * within IDLE_RETELL_NS is told again (it may have been on its way
	 * to a switch that reads rt_sigkidle itself), and after IDLE_ROUNDS
	 * tellings (a thread stopped under a debugger) we go on. */
	enum { IDLE_RETELL_NS = 1000000, IDLE_ROUNDS = 1000 };
	for (int round = 0;; round++) {
		uint64_t idle = atomic_load(&rt_sigkidle);
		if (!idle)
			return;
		uint32_t seen = atomic_load(&idleack);
		bool lacking = false;
		/* our own M, if we are a program G: it follows our mask
		 * (setp, sig_gstart: sigk_self after this), as every G
		 * blocks P; its handler would not take rt_sigkidle (m_idle).
		 * If we move meanwhile, it switches, and so takes it. */
		struct g *self = getg();
		struct m *own = self && self->sigon ? getm() : NULL;
		for (struct m *mp = atomic_load(&allm); mp; mp = mp->alllink) {
			int tid = atomic_load(&mp->tid);
			if (tid && mp != own &&
			    (idle & ~atomic_load_explicit(&mp->sigk, memory_order_relaxed))) {
				tell(tid);
				lacking = true;
			}
		}
		if (!lacking || !wait || round == IDLE_ROUNDS)
			return;
		struct timespec ts = { 0, IDLE_RETELL_NS };
		atomic_fetch_add(&idlewait, 1);
		/* seq_cst both: m_idle bumps idleack, then reads idlewait; we
		 * count ourselves in, then read idleack (in the futex) */
		(void)sys4(SYS_futex, &idleack, FUTEX_WAIT_PRIVATE, seen, &ts);
		atomic_fetch_sub(&idlewait, 1);
	}
}

/* Gs in h_update: while one is, h_changed takes no short cut (below). */
static _Atomic int hbusy;

/* The disposition of s may have changed (sigaction, signal, ...): H from
 * the kernel's.  Asked again after a change, until H and the answer
 * agree: two Gs changing s at once each ask after their own change, but
 * the one whose (older) answer lands last in H would leave it wrong. */
static void h_update(int s)
{
	if (!active || s < 1 || s > 64 || !async_sig(s))
		return;
	atomic_fetch_add(&hbusy, 1);
	for (;;) {
		struct sigaction sa;
		if (REAL(sigaction)(s, NULL, &sa) != 0)
			break;
		lock(&plock);
		uint64_t g = h_set_locked(s, handled(&sa));
		unlock(&plock);
		if (!g)
			break;
		masks_apply(g, false);
	}
	atomic_fetch_sub(&hbusy, 1);
}

/* s's disposition was just set through a hook, on (a handler) or not:
 * nothing to do, not even a question to the kernel, if H says so
 * already - a handler replaced by another, SIG_IGN by SIG_IGN, a flags
 * change: as natively, one rt_sigaction in all.  Unless an h_update
 * runs: its question may have come before our change.  If hbusy is
 * read 0 here (seq_cst, after our rt_sigaction), any h_update that
 * starts later asks the kernel after our change and so writes H from
 * it; one that ended before wrote H before we read it. */
static void h_changed(int s, bool on)
{
	if (!active || s < 1 || s > 64 || !async_sig(s))
		return;
	if (!atomic_load(&hbusy) && !(atomic_load(&hbits) & sigbit(s)) == !on)
		return;
	h_update(s);
}

/* ---- Gs: their masks, and signals for them ------------------------------------------------- */

/* A thread of the program starts as gp, with its creator's mask. */
void sig_gstart(struct g *gp, uint64_t mask, bool ismain)
{
	mask &= ~unblockable();
	atomic_store(&gp->sigmask, mask);
	atomic_store(&gp->sighold, 0);
	atomic_store(&gp->sigpend, 0);
	atomic_store(&gp->sigthr, 0);
	lock(&plock);
	mt_add(mask, 1);
	gp->sigon = true;
	if (ismain)
		maing = gp;
	uint64_t g = p_set_locked();
	unlock(&plock);
	masks_apply(g, true);
	if (gp == getg()) /* it runs already: its M's mask at once */
		sigk_self(gp);
}

/* It ends: signals still pending on it are lost, as a thread's are. */
void sig_gend(struct g *gp)
{
	if (!gp->sigon)
		return;
	lock(&plock);
	mt_add(atomic_load(&gp->sigmask), -1);
	gp->sigon = false;
	if (maing == gp)
		maing = NULL;
	uint64_t g = p_set_locked();
	unlock(&plock);
	masks_apply(g, true);
}

/* The mask a new G gets: its creator's (a plain thread's own). */
uint64_t sig_inherit(void)
{
	struct g *gp = getg();
	if (gp && gp->sigon)
		return atomic_load(&gp->sigmask);
	sigset_t m;
	if (gp && active)
		p_mask(&m); /* a G of the runtime's: what every thread blocks */
	else
		REAL(pthread_sigmask)(SIG_SETMASK, NULL, &m);
	return tobits(&m);
}

static uint64_t g_blocked(struct g *gp)
{
	return atomic_load(&gp->sigmask) | atomic_load(&gp->sighold);
}

static struct lock ilock;     /* ginfo */
static siginfo_t ginfo[65];   /* the siginfo of the last signal of each number sent to a G */

/* s is pending on gp: if gp lets it through, its wait is interrupted.
 * true if gp runs it by itself soon: it is the caller, or it was parked
 * in an interruptible call and is woken. */
static bool deliver(struct g *gp, int s, const siginfo_t *si, bool thr)
{
	lock(&ilock);
	ginfo[s] = *si;
	unlock(&ilock);
	if (thr)
		atomic_fetch_or(&gp->sigthr, sigbit(s));
	else
		atomic_fetch_and(&gp->sigthr, ~sigbit(s));
	atomic_fetch_or(&gp->sigpend, sigbit(s));
	if (gp == getg())
		return true;
	if (g_blocked(gp) & sigbit(s))
		return false;
	if (g_interrupt(gp))
		return true;
	async_kick(gp); /* it runs, or is parked where a thread would not be interrupted */
	return false;
}

/* A process signal routed to a G that did not take it at once (it was
 * running, or parked where a thread is not interrupted): if it has not
 * run the handler STALL_NS later, the router runs it, as the kernel would
 * have run it on a thread at once.  One per signal number. */

static int64_t stall_ns(void)
{
	return weftenv.stall_ns >= 0 ? weftenv.stall_ns : STALL_NS;
}

static void stall(struct g *gp, int s)
{
	lock(&ilock);
	stalls[s] = (struct stall){ gp, nanotime() + stall_ns() };
	unlock(&ilock);
	if (rpd) /* the router recomputes its deadline */
		pd_kick(rpd, PD_READ);
}

struct pick {
	uint64_t bit;
	int64_t after;          /* the last G given a signal, by id */
	struct g *next, *first, *any;
};

static _Atomic int64_t lastpick;

/* forEachG: the first G after the last one picked (by id), or the first
 * of all, that takes bit and has nothing pending; else any that takes it. */
static void pick_one(struct g *gp, void *arg)
{
	struct pick *k = arg;
	if (!gp->sigon || atomic_load_explicit(&gp->status, memory_order_relaxed) == G_DEAD ||
	    (atomic_load(&gp->sigmask) & k->bit))
		return;
	if (atomic_load(&gp->sigpend) & k->bit) {
		if (!k->any)
			k->any = gp;
		return;
	}
	if (gp->id > k->after && (!k->next || gp->id < k->next->id))
		k->next = gp;
	if (!k->first || gp->id < k->first->id)
		k->first = gp;
}

/* A process-directed signal with a handler: to one G that takes it. */
static void route(int s, const siginfo_t *si)
{
	if (s < 1 || s > 64)
		return;
	uint64_t bit = sigbit(s);
	struct g *gp = NULL;
	lock(&plock);
	struct g *mg = maing;
	if (mg && mg->sigon && !(atomic_load(&mg->sigmask) & bit) &&
	    !(atomic_load(&mg->sigpend) & bit))
		gp = mg; /* as the kernel: the main thread if it can */
	unlock(&plock);
	if (!gp) {
		struct pick k = { bit, atomic_load(&lastpick), NULL, NULL, NULL };
		forEachG(pick_one, &k);
		gp = k.next ? k.next : k.first ? k.first : k.any;
		if (gp)
			atomic_store(&lastpick, gp->id);
	}
	if (!gp) { /* every G blocks it now: pending for the process */
		lock(&plock);
		bool inp = atomic_load(&pbits) & bit;
		if (!inp) { /* P is about to say so: masks_apply sends it back */
			ppend |= bit;
			pinfo[s] = *si;
		}
		unlock(&plock);
		if (inp) /* P says so: the kernel keeps it (rfd does not take it) */
			(void)sys3(SYS_kill, getpid(), s, 0);
		return;
	}
	if (!deliver(gp, s, si, false))
		stall(gp, s);
}

static int run_one(int s, const siginfo_t *sip, _Atomic uint64_t *hold, uint64_t mask);

/* A process signal with no handler now that the router read, or that a
 * G sent to the process (S minus H: it had one; the signal thread blocks
 * it): what the kernel would have done with it.  Pending for the process
 * if every G blocks it; to a G if it has a handler again (installed
 * since, or by a raw system call); else its disposition's action here,
 * on this thread: the default's (sig_default) or none (SIG_IGN). */
static void unhandled(int s, const siginfo_t *si)
{
	if (s < 1 || s > 64)
		return;
	if (atomic_load(&pbits) & sigbit(s)) { /* the kernel keeps it */
		(void)sys3(SYS_kill, getpid(), s, 0);
		return;
	}
	struct sigaction sa;
	if (REAL(sigaction)(s, NULL, &sa) == 0 && handled(&sa)) {
		route(s, si);
		return;
	}
	(void)run_one(s, si, NULL, 0);
}

/* A G takes the signals pending for the process that it lets through
 * (one at a time: a siginfo each is big for a small stack). */
static void take_ppend(struct g *gp)
{
	while (__atomic_load_n(&ppend, __ATOMIC_RELAXED)) {
		lock(&plock);
		uint64_t b = ppend & ~atomic_load(&gp->sigmask);
		int s = b ? __builtin_ctzll(b) + 1 : 0;
		siginfo_t si;
		if (s) {
			ppend &= ~sigbit(s);
			si = pinfo[s];
		}
		unlock(&plock);
		if (!s)
			return;
		deliver(gp, s, &si, false);
	}
}

/* Default action of s on this thread: unblocked here, sent here. */
static void sig_default(int s)
{
	switch (s) {
	case SIGCHLD: case SIGURG: case SIGWINCH: case SIGCONT:
		return; /* ignored by default */
	}
	sigset_t m, old;
	sigfillset(&m);
	sigdelset(&m, s);
	REAL(pthread_sigmask)(SIG_SETMASK, &m, &old);
	(void)sys3(SYS_tgkill, getpid(), gettid_(), s);
	REAL(pthread_sigmask)(SIG_SETMASK, &old, NULL);
}

/* Run s's handler here, on the running G (or thread), with hold as its
 * blocked set meanwhile (*hold, if not NULL, is what the G holds).
 * Returns -1 if no handler ran, else the handler's sa_flags. */
static int run_one(int s, const siginfo_t *sip, _Atomic uint64_t *hold, uint64_t mask)
{
	siginfo_t si = *sip;
	struct sigaction sa;
	if (prog_action(s, &sa) != 0)
		return -1;
	if (!handled(&sa)) {
		if (sa.sa_handler == SIG_DFL)
			sig_default(s);
		return -1;
	}
	uint64_t was = hold ? atomic_load(hold) : 0;
	uint64_t add = tobits(&sa.sa_mask) | ((sa.sa_flags & SA_NODEFER) ? 0 : sigbit(s));
	if (hold) {
		atomic_store(hold, was | (add & ~unblockable()));
		if (add & kbits()) /* its M's kernel mask too */
			sigk_self(getg());
	}
	if (sa.sa_flags & SA_RESETHAND) {
		struct sigaction dfl;
		memset(&dfl, 0, sizeof dfl);
		dfl.sa_handler = SIG_DFL;
		REAL(sigaction)(s, &dfl, NULL);
		h_update(s);
	}
	ucontext_t uc;
	memset(&uc, 0, sizeof uc);
	frombits(mask | was, &uc.uc_sigmask);
	int e = errno_get();
	if (sa.sa_flags & SA_SIGINFO)
		sa.sa_sigaction(s, &si, &uc);
	else
		sa.sa_handler(s);
	if (hold) {
		atomic_store(hold, was);
		if (add & kbits())
			sigk_self(getg());
	}
	errno_set(e);
	return sa.sa_flags;
}

static siginfo_t info_of(int s)
{
	lock(&ilock);
	siginfo_t si = ginfo[s];
	unlock(&ilock);
	return si;
}

/* Run the handlers of the signals pending on this G that it lets
 * through, on its stack, as the kernel would on its thread (hook_sigrun). */
static int sig_run(void)
{
	struct g *gp = getg();
	if (!gp || !gp->sigon)
		return 0;
	g_intr_take();
	int r = SIGRUN_RESTART;
	bool ran = false;
	for (;;) {
		uint64_t pend = atomic_load(&gp->sigpend) & ~g_blocked(gp);
		if (!pend)
			break;
		int s = __builtin_ctzll(pend) + 1;
		if (!(atomic_fetch_and(&gp->sigpend, ~sigbit(s)) & sigbit(s)))
			continue; /* the router took it (stall) */
		atomic_fetch_and(&gp->sigthr, ~sigbit(s));
		siginfo_t si = info_of(s);
		int f = run_one(s, &si, &gp->sighold, atomic_load(&gp->sigmask));
		if (f < 0)
			continue;
		ran = true;
		if (!(f & SA_RESTART))
			r &= ~SIGRUN_RESTART;
	}
	return ran ? r | SIGRUN_RAN : 0;
}

/* Does gp run on an OS thread that the kernel runs, or would if it had a
 * CPU (R)?  Then it takes its signal itself as that thread runs on
 * (sigasync.c stops it in user code; the router's rescan keeps asking):
 * as the kernel runs a handler on a thread when the thread next runs,
 * however loaded the machine.  Asleep in the kernel (S, D: a call weft
 * does not see, a futex inside libc), it cannot. */
static bool g_oncpu(struct g *gp)
{
	if (atomic_load_explicit(&gp->status, memory_order_relaxed) != G_RUNNING)
		return false;
	struct m *m = g_curm(gp);
	int tid = m ? atomic_load(&m->tid) : 0;
	return tid > 0 && rt_threadstate(tid) == 'R';
}

/* May the router run s, stalled on gp, itself?  Not when a wait of gp
 * is already ending for it (INTR_BOUND: its kernel wait was kicked, or it
 * was woken from its park or saw the request parking, and an M that has
 * not run since keeps it from the handler - a loaded machine): gp runs
 * the handler itself, and the call it waited in must then end with EINTR
 * (or restart) as a thread's call would; the router running it would
 * leave that call waiting on, for good in a poll(-1) (sigintr restart).
 * A request only asked for is withdrawn (ASKED -> NONE) as the router
 * takes the signal: the G's next wait does not end for a handler that ran
 * elsewhere.  None left (the G took it, in sig_run): the signal is its to
 * run, unless it blocks it now or sits parked or in a call that weft
 * cannot interrupt.  And never from a G whose thread runs (g_oncpu). */
static bool stall_take(struct g *gp, int s)
{
	if (g_oncpu(gp))
		return false;
	uint32_t v = INTR_ASKED;
	if (atomic_compare_exchange_strong(&gp->intrreq, &v, INTR_NONE))
		return true;
	if (v == INTR_BOUND)
		return false;
	uint32_t st = atomic_load_explicit(&gp->status, memory_order_relaxed);
	return st == G_WAITING || st == G_SYSCALL || (g_blocked(gp) & sigbit(s));
}

/* The router: run the stalled signals whose time has come; the earliest
 * time still to come, or -1. */
static int64_t run_stalled(void)
{
	int64_t now = nanotime(), next = -1;
	for (int s = 1; s <= 64; s++) {
		lock(&ilock);
		struct stall st = stalls[s];
		bool due = st.g && st.when <= now;
		if (due)
			stalls[s].g = NULL;
		unlock(&ilock);
		if (!st.g)
			continue;
		if (!due) {
			if (next < 0 || st.when < next)
				next = st.when;
			continue;
		}
		if (!(atomic_load(&st.g->sigpend) & sigbit(s)))
			continue; /* it took it */
		if (!stall_take(st.g, s)) {
			/* it runs it itself, soon: look again later */
			int64_t when = now + (stall_ns() > STALL_AGAIN ? stall_ns() : STALL_AGAIN);
			lock(&ilock);
			if (!stalls[s].g)
				stalls[s] = (struct stall){ st.g, when };
			unlock(&ilock);
			if (next < 0 || when < next)
				next = when;
			continue;
		}
		if (atomic_fetch_and(&st.g->sigpend, ~sigbit(s)) & sigbit(s)) {
			siginfo_t si = info_of(s);
			(void)run_one(s, &si, NULL, 0);
		}
	}
	return next;
}

/* A signal for one G (pthread_kill, pthread_sigqueue, raise): 0 or an
 * error number. */
int sig_send_g(struct g *gp, int s, int code, const union sigval *v)
{
	if (s < 0 || s >= NSIG || s > 64)
		return EINVAL;
	if (s == 0 || !gp)
		return 0;
	struct sigaction sa;
	if (prog_action(s, &sa) != 0)
		return EINVAL;
	/* an ignored signal is discarded - unless the G blocks it: Linux
	 * never discards a blocked signal (sig_ignored: its disposition may
	 * change before it is unblocked), so sigwait takes it; one still
	 * ignored when unblocked is dropped then (run_one) */
	if (sa.sa_handler == SIG_IGN && !(sa.sa_flags & SA_SIGINFO) &&
	    !(g_blocked(gp) & sigbit(s)))
		return 0;
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = s;
	si.si_code = code;
	si.si_pid = getpid();
	si.si_uid = getuid();
	if (v)
		si.si_value = *v;
	if (!handled(&sa) && !(g_blocked(gp) & sigbit(s))) {
		sig_default(s); /* the default action is the whole process's */
		return 0;
	}
	deliver(gp, s, &si, true);
	if (g_blocked(gp) & sigbit(s)) {
		/* it may be waiting for it in sigwait (parked on wcv, where
		 * a blocked signal's delivery does not interrupt it): look
		 * again (pbzip2 ends its sigwait thread with pthread_kill) */
		weft_mutex_lock(&wmu);
		wgen++;
		weft_cond_broadcast(&wcv);
		weft_mutex_unlock(&wmu);
	}
	if (gp == getg())
		sig_run();
	return 0;
}

/* ---- masks for Gs ------------------------------------------------------------------------- */

/* Change the running G's mask; 0 or an error number. */
static int setp(int how, const sigset_t *set, sigset_t *old)
{
	if (set && how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK)
		return EINVAL;
	struct g *gp = getg();
	uint64_t was = atomic_load(&gp->sigmask), now = was;
	if (old)
		frombits(was | atomic_load(&gp->sighold), old);
	if (set) {
		uint64_t b = tobits(set);
		now = how == SIG_BLOCK ? was | b : how == SIG_SETMASK ? b : was & ~b;
		now &= ~unblockable(); /* as glibc: never these */
	}
	if (now != was) {
		uint64_t g = 0;
		lock(&plock);
		if (gp->sigon) {
			mt_add(was, -1);
			mt_add(now, 1);
		}
		atomic_store(&gp->sigmask, now);
		if (gp->sigon)
			g = p_set_locked();
		unlock(&plock);
		masks_apply(g, true);
		if ((was ^ now) & kbits())
			sigk_self(gp);
		if (was & ~now) {
			/* as the kernel: what this unblocks is handled before we
			 * return: pending for the process (the router's or ours) */
			take_ppend(gp);
			if (rfd >= 0)
				drain_locked();
		}
	}
	sig_run();
	return 0;
}

HOOK int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	if (FROM_SHIM() || !on_g())
		return REAL(pthread_sigmask)(how, set, old);
	return setp(how, set, old);
}

HOOK int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	if (FROM_SHIM() || !on_g())
		return REAL(sigprocmask)(how, set, old);
	int e = setp(how, set, old);
	if (e) {
		errno_set(e);
		return -1;
	}
	return 0;
}

/* The old BSD and System V mask calls (glibc runs them on its own
 * sigprocmask, out of our reach); dash clears its mask with sigsetmask. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int bsd_mask(int how, int mask)
{
	sigset_t set, old;
	sigemptyset(&set);
	for (int s = 1; s <= 32; s++)
		if ((unsigned)mask & (1u << (s - 1)))
			sigaddset(&set, s);
	setp(how, &set, &old);
	unsigned r = 0;
	for (int s = 1; s <= 32; s++)
		if (sigismember(&old, s))
			r |= 1u << (s - 1);
	return (int)r;
}

DEFREAL(sigsetmask);
DEFREAL(sigblock);
DEFREAL(siggetmask);
DEFREAL(sighold);
DEFREAL(sigrelse);

HOOK int sigsetmask(int mask)
{
	if (!on_g())
		return REAL(sigsetmask)(mask);
	return bsd_mask(SIG_SETMASK, mask);
}

HOOK int sigblock(int mask)
{
	if (!on_g())
		return REAL(sigblock)(mask);
	return bsd_mask(SIG_BLOCK, mask);
}

HOOK int siggetmask(void)
{
	if (!on_g())
		return REAL(siggetmask)();
	return bsd_mask(SIG_BLOCK, 0);
}

static int sysv_mask(int how, int sig)
{
	if (sig <= 0 || sig >= NSIG) {
		errno_set(EINVAL);
		return -1;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	setp(how, &set, NULL);
	return 0;
}

HOOK int sighold(int sig)
{
	if (!on_g())
		return REAL(sighold)(sig);
	return sysv_mask(SIG_BLOCK, sig);
}

HOOK int sigrelse(int sig)
{
	if (!on_g())
		return REAL(sigrelse)(sig);
	return sysv_mask(SIG_UNBLOCK, sig);
}
#pragma GCC diagnostic pop

/* The mask a real call on this M should use: the G's own (a child or a
 * new program inherits the caller's, as from a thread). */
void sig_use_p(sigset_t *saved)
{
	weft_lock_thread(); /* the mask is this OS thread's: stay on it */
	struct g *gp = getg();
	sigset_t m;
	if (gp->sigon)
		frombits(g_blocked(gp), &m);
	else
		p_mask(&m);
	sigdelset(&m, SIGWEFT);
	REAL(pthread_sigmask)(SIG_SETMASK, &m, saved);
}

void sig_restore(const sigset_t *saved)
{
	REAL(pthread_sigmask)(SIG_SETMASK, saved, NULL);
	weft_unlock_thread();
}

bool sig_active(void)
{
	return on_g();
}

/* ---- dispositions ------------------------------------------------------------------------ */

/* Before s's disposition changes on a G to a handler (on) or not: take
 * delivery of what is on its way, with the disposition it was sent for.
 * The kernel delivers a pending signal a thread lets through before any
 * system call of that thread returns, so by the time a program puts
 * SIG_DFL back (after stopping the timer that sends it) none is left to
 * act; under weft one could still be in the router's signalfd, or given
 * to this G and not yet run, and then met SIG_DFL: a SIGALRM killed
 * CPython's test_eintr (real::itimer_then_default).  The other way, one
 * sent while s was ignored (kept for the router: S, h_set_locked) must
 * be dropped, not meet the new handler.  A signal already given to
 * another G that has not run it yet is left to it, as a thread's pending
 * signal is.
 *
 * The signalfd is read (a system call) only when s gains or loses its
 * handler.  A handler replaced by another loses nothing: one still on
 * its way runs the new one, as natively a signal the kernel gave another
 * thread that had not taken it yet does (the kernel reads the handler
 * when it delivers).  Those already given to this G run the old one
 * either way (no system call: an atomic load). */
static void sig_settle(int s, bool on)
{
	if (!on_g() || s < 1 || s > 64 || !(atomic_load(&sbits) & sigbit(s)))
		return;
	struct g *gp = getg();
	if (!gp->sigon)
		return; /* a G of the runtime's */
	if (!(atomic_load(&hbits) & sigbit(s)) == on && rfd >= 0)
		drain_locked();
	if (atomic_load(&gp->sigpend) & ~g_blocked(gp))
		(void)sig_run();
}

HOOK int sigaction(int s, const struct sigaction *act, struct sigaction *old)
{
	if (kidx(s) >= 0 && active) /* (before the runtime starts: nothing wrapped) */
		return act ? kwrap_set(s, act, old) : old ? prog_action(s, old) : 0;
	if (!act) /* a question: the kernel's answer as it is */
		return REAL(sigaction)(s, NULL, old);
	bool on = handled(act);
	sig_settle(s, on);
	int r = REAL(sigaction)(s, act, old);
	if (r == 0)
		h_changed(s, on);
	return r;
}

/* glibc's signal(), sigset() ... call its sigaction inside libc, where
 * the hook above does not see them. */
typedef void (*sighandler_fn)(int);
DEFREAL(signal);
DEFREAL(sysv_signal);
DEFREAL(bsd_signal);
DEFREAL(sigset);
sighandler_fn __sysv_signal(int s, sighandler_fn h);
DEFREAL(__sysv_signal);

/* A handler, as handled() says of a struct sigaction. */
static bool handler_fn(sighandler_fn h)
{
	return h != SIG_DFL && h != SIG_IGN && h != SIG_ERR;
}

/* The old handler these return for SIGPIPE / SIGXFSZ: the program's. */
static sighandler_fn k_old(int s, sighandler_fn r, const struct sigaction *prev)
{
	if (kidx(s) < 0 || r == SIG_ERR || r != (sighandler_fn)(void (*)(void))kwrap)
		return r;
	return (prev->sa_flags & SA_SIGINFO) ? (sighandler_fn)(void (*)(void))prev->sa_sigaction
					     : prev->sa_handler;
}

#define DISPOSITION(fn, s, h)                                      \
	({                                                         \
		bool on_ = handler_fn(h);                          \
		sig_settle((s), on_);                              \
		bool k_ = kidx(s) >= 0 && active;                  \
		struct sigaction p_;                               \
		memset(&p_, 0, sizeof p_);                         \
		if (k_)                                            \
			(void)prog_action((s), &p_);               \
		sighandler_fn r_ = REAL(fn)((s), (h));             \
		if (r_ != SIG_ERR)                                 \
			h_changed((s), on_);                       \
		if (k_ && r_ != SIG_ERR)                           \
			kwrap_put(s);                              \
		k_ ? k_old((s), r_, &p_) : r_;                     \
	})

HOOK sighandler_fn signal(int s, sighandler_fn h)
{
	return DISPOSITION(signal, s, h);
}

HOOK sighandler_fn sysv_signal(int s, sighandler_fn h)
{
	return DISPOSITION(sysv_signal, s, h);
}

HOOK sighandler_fn __sysv_signal(int s, sighandler_fn h)
{
	return DISPOSITION(__sysv_signal, s, h);
}

HOOK sighandler_fn bsd_signal(int s, sighandler_fn h)
{
	return DISPOSITION(bsd_signal, s, h);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
HOOK sighandler_fn sigset(int s, sighandler_fn h)
{
	if (h == SIG_HOLD) /* the mask, not the disposition */
		return REAL(sigset)(s, h);
	return DISPOSITION(sigset, s, h);
}
#pragma GCC diagnostic pop

/* ---- waiting for signals ---------------------------------------------------------------- */

DEFREAL(sigsuspend);
DEFREAL(pause);
DEFREAL(sigwait);
DEFREAL(sigwaitinfo);
DEFREAL(sigtimedwait);
DEFREAL(raise);

/* Park until a handler has run on this G (not a cancellation point
 * here: sigsuspend has a mask to put back). */
static void wait_handler(struct g *gp)
{
	do {
		intr_arm(gp);
		(void)g_sleep_until(-1);
	} while (!(sig_run() & SIGRUN_RAN));
}

HOOK int pause(void)
{
	if (!on_g())
		return REAL(pause)();
	wait_handler(getg());
	errno_set(EINTR);
	return -1;
}

HOOK int sigsuspend(const sigset_t *mask)
{
	if (!on_g())
		return REAL(sigsuspend)(mask);
	/* it lets through a signal P blocks: that one stays pending for
	 * the process, so this M takes it in a real sigsuspend */
	sigset_t p;
	p_mask(&p);
	bool opens = false;
	for (int s = 1; s < NSIG && !opens; s++)
		if (async_sig(s) && sigismember(&p, s) && !sigismember(mask, s))
			opens = true;
	if (opens) {
		/* SIGWEFT (a mask update for this M) must not end it early */
		sigset_t m = *mask;
		sigaddset(&m, SIGWEFT);
		return BLOCKING(true, REAL(sigsuspend)(&m));
	}
	/* the mask for the wait only (the table keeps the G's own: P does
	 * not change, this lets through nothing P blocks) */
	struct g *gp = getg();
	uint64_t was = atomic_load(&gp->sigmask);
	atomic_store(&gp->sigmask, tobits(mask) & ~unblockable());
	take_ppend(gp);
	wait_handler(gp);
	atomic_store(&gp->sigmask, was);
	errno_set(EINTR);
	return -1;
}

/* sigwait and friends take pending signals the program blocks (all
 * threads block them here): run for real, the P handed on meanwhile,
 * SIGWEFT held off (it would end them with EINTR). */
static void hold_weft(sigset_t *saved)
{
	sigset_t w;
	sigemptyset(&w);
	sigaddset(&w, SIGWEFT);
	REAL(pthread_sigmask)(SIG_BLOCK, &w, saved);
}

#define SIGWAIT_CALL(call)                                      \
	({                                                      \
		bool g_ = hook_g() != NULL;                     \
		sigset_t s_;                                    \
		if (g_) {                                       \
			weft_lock_thread();                     \
			hold_weft(&s_);                         \
		}                                               \
		int r_ = BLOCKING(g_, call);                    \
		if (g_) {                                       \
			int e_ = errno_get();                   \
			REAL(pthread_sigmask)(SIG_SETMASK, &s_, NULL); \
			weft_unlock_thread();                   \
			errno_set(e_);                          \
		}                                               \
		r_;                                             \
	})

/* sigwait* on a G, for a set of signals every G blocks (P) that the
 * watcher hears of: take one pending for this G or the process (a
 * zero-timeout sigtimedwait) or park until the watcher hears of one,
 * deadline passes (-EAGAIN) or, if eintr, a handler runs on this G
 * (-EINTR).  The signal number, or -errno; -ENOSYS: not for us. */
static int g_sigwait(const sigset_t *set, siginfo_t *info, int64_t deadline, bool eintr)
{
	struct g *gp = getg();
	uint64_t want = 0, p = atomic_load(&pbits);
	for (int s = 1; s <= 64; s++) /* the others (faults, ours) never come here */
		if (sigismember(set, s) && async_sig(s)) {
			if (!(p & sigbit(s)))
				return -ENOSYS;
			want |= sigbit(s);
		}
	if (!want || sfd < 0 || !gp->sigon)
		return -ENOSYS;
	sigset_t wset;
	frombits(want, &wset);
	set = &wset;
	siginfo_t si;
	for (;;) {
		/* wgen before the looks: a signal that comes after it moves
		 * wgen (sig_send_g: after its delivery to gp->sigpend; the
		 * watcher: after the kernel queued it), and one that came
		 * before is seen below.  Read after the look at sigpend, a
		 * pthread_kill between the two was in neither: the wait below
		 * was for good */
		weft_mutex_lock(&wmu);
		uint64_t gen = wgen;
		weft_mutex_unlock(&wmu);
		uint64_t mine = atomic_load(&gp->sigpend) & want;
		if (mine) { /* pending on this G (pthread_kill) */
			int s = __builtin_ctzll(mine) + 1;
			if (atomic_fetch_and(&gp->sigpend, ~sigbit(s)) & sigbit(s)) {
				atomic_fetch_and(&gp->sigthr, ~sigbit(s));
				if (info)
					*info = info_of(s);
				return s;
			}
			continue;
		}
		struct timespec zero = { 0, 0 };
		long r = sys4(SYS_rt_sigtimedwait, set, info ? info : &si, &zero, 8);
		if (r > 0)
			return (int)r;
		if (r != -EAGAIN && r != -EINTR)
			return (int)r;
		int w = 0;
		weft_mutex_lock(&wmu);
		intr_arm(gp);
		while (wgen == gen && w == 0) {
			if (deadline < 0) {
				w = weft_cond_wait(&wcv, &wmu);
			} else {
				int64_t left = deadline - nanotime();
				w = left > 0 ? weft_cond_timedwait(&wcv, &wmu, left) : -1;
			}
		}
		intr_disarm(gp);
		weft_mutex_unlock(&wmu);
		if (w == 0)
			continue; /* the watcher heard of one: look */
		if (deadline >= 0 && nanotime() >= deadline)
			return -EAGAIN;
		/* woken early: a handler to run */
		if (hook_eintr(false) != 0 && eintr)
			return -EINTR;
	}
}

/* A signal of set and kbits() pending on the running G (sig_err put it
 * there): the sigwait family takes it first, as from a thread.  0: none. */
static int take_gpend(const sigset_t *set, siginfo_t *info)
{
	struct g *gp = on_g() ? getg() : NULL;
	if (!gp || !gp->sigon)
		return 0;
	uint64_t mine = atomic_load(&gp->sigpend) & kbits();
	if (!mine)
		return 0;
	mine &= tobits(set);
	for (; mine; mine &= mine - 1) {
		int s = __builtin_ctzll(mine) + 1;
		if (atomic_fetch_and(&gp->sigpend, ~sigbit(s)) & sigbit(s)) {
			atomic_fetch_and(&gp->sigthr, ~sigbit(s));
			if (info)
				*info = info_of(s);
			return s;
		}
	}
	return 0;
}

HOOK int sigwait(const sigset_t *set, int *sig)
{
	int k = take_gpend(set, NULL);
	if (k) {
		*sig = k;
		return 0;
	}
	if (on_g() && hook_g()) {
		int r;
		while ((r = g_sigwait(set, NULL, -1, false)) == -EINTR)
			;
		if (r != -ENOSYS) {
			if (r < 0)
				return -r;
			*sig = r;
			return 0;
		}
	}
	return SIGWAIT_CALL(REAL(sigwait)(set, sig));
}

HOOK int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	int k = take_gpend(set, info);
	if (k)
		return k;
	if (on_g() && hook_g()) {
		int r = g_sigwait(set, info, -1, true);
		if (r != -ENOSYS)
			return (int)sysret(r);
	}
	return SIGWAIT_CALL(REAL(sigwaitinfo)(set, info));
}

HOOK int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	int k = take_gpend(set, info);
	if (k)
		return k;
	if (on_g() && hook_g() && ts && ts->tv_sec >= 0 && ts->tv_nsec >= 0 &&
	    ts->tv_nsec < 1000000000 && (ts->tv_sec || ts->tv_nsec)) {
		int64_t ns = ts->tv_sec > INT64_MAX / 2000000000 ? INT64_MAX / 2
								 : ts->tv_sec * 1000000000 + ts->tv_nsec;
		int r = g_sigwait(set, info, nanotime() + ns, true);
		if (r != -ENOSYS)
			return (int)sysret(r);
	}
	return SIGWAIT_CALL(REAL(sigtimedwait)(set, info, ts));
}

DEFREAL(sigpending);

/* The kernel's (this OS thread's and the process's), and the running G's
 * own: those sent to it that it blocks. */
HOOK int sigpending(sigset_t *set)
{
	int r = REAL(sigpending)(set);
	struct g *gp = on_g() ? getg() : NULL;
	if (r != 0 || FROM_SHIM() || !gp || !gp->sigon)
		return r;
	/* The kernel answers what is pending (for the thread or the
	 * process) and blocked by the caller - here the M, which blocks
	 * nearly every signal: a child's SIGCHLD sent to the M that forked,
	 * on its way to the signal thread, which ignores it, or a raw
	 * tgkill to the M.  The caller is the G: what it blocks. */
	uint64_t blocked = g_blocked(gp);
	frombits((tobits(set) | atomic_load(&gp->sigpend)) & blocked, set);
	return 0;
}

/* ---- sending --------------------------------------------------------------------------- */

DEFREAL(kill);

/* A signal sent to this process from a G.  One with a handler that some
 * G takes is routed here and now (the sender runs it before kill
 * returns if it is the one, as a single thread would), one that had a
 * handler (S) and has none now is acted on here and now (unhandled); a fault-like one
 * (SIGSEGV from kill, SIGABRT...) goes to this OS thread, which takes
 * those; any other goes to the process (the kernel's default action, or
 * pending while every G blocks it). */
static int self_signal(int sig)
{
	if (sig == 0 || sig == SIGKILL || sig == SIGSTOP)
		return REAL(kill)(getpid(), sig);
	if (sig < 0 || sig >= NSIG) {
		errno_set(EINVAL);
		return -1;
	}
	if (!async_sig(sig))
		return (int)sysret(sys3(SYS_tgkill, getpid(), gettid_(), sig));
	uint64_t bit = sigbit(sig);
	if (!(atomic_load(&sbits) & bit) || (atomic_load(&pbits) & bit))
		return REAL(kill)(getpid(), sig);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = sig;
	si.si_code = SI_USER;
	si.si_pid = getpid();
	si.si_uid = getuid();
	if (atomic_load(&hbits) & bit)
		route(sig, &si);
	else /* no handler, and the signal thread blocks it: here and now */
		unhandled(sig, &si);
	sig_run();
	return 0;
}

HOOK int raise(int sig)
{
	struct g *gp = getg();
	if (!on_g() || !gp->sigon)
		return REAL(raise)(sig);
	if (sig > 0 && sig < NSIG && async_sig(sig) && (atomic_load(&hbits) & sigbit(sig))) {
		sig_send_g(gp, sig, SI_TKILL, NULL);
		return 0;
	}
	return self_signal(sig);
}

HOOK int kill(pid_t pid, int sig)
{
	if (!on_g() || pid != getpid())
		return REAL(kill)(pid, sig);
	/* SIGPIPE, SIGXFSZ the caller blocks: the process's, as natively
	 * (a thread that lets it through takes it - the signal thread if
	 * some G does: it blocks only P of these two - else pending for the
	 * process), not pending on this M, which drops it when it runs a G
	 * that lets it through (sigkswitch) */
	struct g *gp = getg();
	if ((sigbit(sig) & kbits()) && gp->sigon && (g_blocked(gp) & sigbit(sig)))
		return REAL(kill)(pid, sig);
	return self_signal(sig);
}

/* ---- pidfd_send_signal to this process ----------------------------------------------- */

/* Whether fd names this process: a pidfd (its fdinfo's "Pid:" line) or
 * a /proc/PID directory, which pidfd_send_signal takes too.  Raw calls:
 * nothing here may park or reach a hook. */
static bool pidfd_is_self(int fd)
{
	struct stat a, b;
	if (sys3(SYS_fstat, fd, &a, 0) != 0)
		return false;
	if (S_ISDIR(a.st_mode))
		return sys4(SYS_newfstatat, AT_FDCWD, "/proc/self", &b, 0) == 0 &&
		       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
	char path[48], buf[512];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	int f = (int)sys4(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (f < 0)
		return false;
	long n = sys3(SYS_read, f, buf, sizeof buf - 1);
	(void)sys3(SYS_close, f, 0, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	const char *p = strstr(buf, "\nPid:");
	return p && strtol(p + 5, NULL, 10) == getpid();
}

/* pidfd_send_signal: -1 if it is the kernel's to make, else its result.
 * One from a G to this process (no siginfo of the caller's, no flags) is
 * kill(getpid(), sig): routed here and now, and run before the call
 * returns if it is the sender's, as the kernel does for the main thread
 * (Python's test_signal: pidfd_send_signal of SIGINT to itself must
 * raise KeyboardInterrupt before the next statement). */
static int pidfd_signal(int fd, int sig, siginfo_t *info, unsigned int flags)
{
	if (FROM_SHIM() || !on_g() || info || flags || !pidfd_is_self(fd))
		return -1;
	return self_signal(sig) == 0 ? 0 : 1;
}

HOOK int pidfd_send_signal(int fd, int sig, siginfo_t *info, unsigned int flags)
{
	int r = pidfd_signal(fd, sig, info, flags);
	if (r >= 0)
		return r ? -1 : 0; /* self_signal set errno */
	return (int)sysret(sys4(SYS_pidfd_send_signal, fd, sig, info, flags));
}

/* ---- leaving a handler with longjmp -------------------------------------------------------- */

/* A handler run on a G blocks its signal (and sa_mask) in g->sighold
 * until it returns (run_one).  One that leaves with longjmp never
 * returns: as the kernel, the G's mask is then what the jump says - the
 * mask sigsetjmp saved, or, with no mask saved (setjmp), the mask as the
 * handler ran with it - and what it let through is run now, as the kernel
 * delivers it once glibc's siglongjmp has restored the mask.
 *
 * glibc's sigsetjmp saves its thread's kernel mask, with its own
 * sigprocmask (no PLT: out of our reach), and siglongjmp restores it so:
 * on a G that is its M's mask, every asynchronous signal blocked, and of
 * SIGPIPE / SIGXFSZ the G's then (its M's follows it: m->sigk), maybe on
 * another M.  So with a mask saved, the G's mask becomes its own now
 * (less the handler's blocks) with kbits() as saved, through setp (P,
 * its M's kernel mask and m->sigk, what that lets through run), and the
 * jump is made with a copy whose __mask_was_saved is 0: glibc's would
 * put the saved kernel mask on this M behind m->sigk's back.  A copy
 * jumps as the original: glibc's siglongjmp reads the registers from it
 * and demangles them with the thread's pointer guard, never with the
 * buffer's address, and the unwinding of cleanups before the jump goes
 * by the saved stack pointer; the copy, in our frame, is read before
 * the stack moves.  A signal other than those two blocked or unblocked
 * between sigsetjmp and the jump keeps the G's mask as it is now: the
 * saved kernel mask does not say what the G's was.  true: jump with the
 * copy. */
static bool jump_out(struct __jmp_buf_tag *env)
{
	struct g *gp = getg();
	if (!on_g() || !gp->sigon)
		return false;
	uint64_t hold = atomic_load(&gp->sighold);
	sigset_t s;
	if (!env->__mask_was_saved) {
		if (!hold)
			return false;
		atomic_store(&gp->sighold, 0);
		frombits(hold, &s);
		setp(SIG_BLOCK, &s, NULL); /* runs what is let through now */
		return false;
	}
	uint64_t want = (atomic_load(&gp->sigmask) & ~kbits()) |
			(tobits(&env->__saved_mask) & kbits());
	frombits(want, &s);
	setp(SIG_SETMASK, &s, NULL); /* the handler's blocks still held */
	if (hold) {
		atomic_store(&gp->sighold, 0);
		if (hold & kbits()) /* its M's kernel mask too */
			sigk_self(gp);
		sig_run(); /* what the handler held back */
	}
	return true;
}

DEFREAL(siglongjmp);
DEFREAL(longjmp);
DEFREAL(_longjmp);
_Noreturn void __longjmp_chk(struct __jmp_buf_tag env[1], int val);
DEFREAL(__longjmp_chk);

/* Each jumps with env, or (jump_out true) with a copy whose
 * __mask_was_saved is 0. */
#define JUMP(real, env, val)                                  \
	do {                                                  \
		if (jump_out(env)) {                          \
			struct __jmp_buf_tag c_ = (env)[0];   \
			c_.__mask_was_saved = 0;              \
			REAL(real)(&c_, val);                 \
		}                                             \
		REAL(real)(env, val);                         \
	} while (0)

HOOK _Noreturn void siglongjmp(sigjmp_buf env, int val)
{
	JUMP(siglongjmp, env, val);
	__builtin_unreachable();
}

HOOK _Noreturn void longjmp(jmp_buf env, int val)
{
	JUMP(longjmp, env, val);
	__builtin_unreachable();
}

HOOK _Noreturn void _longjmp(jmp_buf env, int val)
{
	JUMP(_longjmp, env, val);
	__builtin_unreachable();
}

HOOK _Noreturn void __longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
	JUMP(__longjmp_chk, env, val);
	__builtin_unreachable();
}

/* ---- thread ids: gettid, tgkill, tkill ------------------------------------------------------ */

/* A thread of the program that is a G has a tid of its own, stable
 * wherever it runs: main's is the process id (as the kernel numbers the
 * main thread; in a fork child, the forking thread's is the child's),
 * every other's 2^29 + its G id (the number runtime/tls.c gives glibc in
 * a G's own TCB).  Real tids are below 2^22 (PID_MAX_LIMIT), so none is
 * ever a real thread's.  A tgkill / tkill to one goes to its G, as
 * pthread_kill does. */
#define GTID_BIT (1 << 29)

static int g_tid(struct g *gp)
{
	return gp == maing ? getpid() : (int)(GTID_BIT | ((uint64_t)gp->id & (GTID_BIT - 1)));
}

struct tidfind {
	int tid;
	struct g *g;
};

static void tid_one(struct g *gp, void *arg)
{
	struct tidfind *k = arg;
	if (!k->g && gp->sigon && gp != maing &&
	    atomic_load_explicit(&gp->status, memory_order_relaxed) != G_DEAD && g_tid(gp) == k->tid)
		k->g = gp;
}

/* The G whose tid is tid, or NULL (then it is a real thread's, or none). */
static struct g *g_of_tid(int tid)
{
	if (!active)
		return NULL;
	if (tid == getpid()) {
		lock(&plock);
		struct g *mg = maing && maing->sigon ? maing : NULL;
		unlock(&plock);
		return mg;
	}
	if (tid < GTID_BIT)
		return NULL;
	struct tidfind k = { tid, NULL };
	forEachG(tid_one, &k);
	return k.g;
}

/* tgkill on a G's tid: -1 if it is not one (the kernel's call then),
 * else 0 or an error number. */
static int g_tgkill(pid_t tgid, pid_t tid, int sig)
{
	if (tgid != getpid())
		return -1;
	struct g *gp = g_of_tid(tid);
	if (!gp)
		return -1;
	if (sig < 0 || sig >= NSIG || sig > 64)
		return EINVAL;
	return sig_send_g(gp, sig, SI_TKILL, NULL);
}

DEFREAL(gettid);
DEFREAL(tgkill);
DEFREAL(syscall);

HOOK pid_t gettid(void)
{
	struct g *gp = getg();
	if (!on_g() || !gp->sigon)
		return REAL(gettid)();
	return g_tid(gp);
}

HOOK int tgkill(pid_t tgid, pid_t tid, int sig)
{
	int e = FROM_SHIM() ? -1 : g_tgkill(tgid, tid, sig);
	if (e < 0)
		return REAL(tgkill)(tgid, tid, sig);
	if (e) {
		errno_set(e);
		return -1;
	}
	return 0;
}

/* A raw call that may change a file's O_NONBLOCK (F_SETFL, FIONBIO) or
 * reach a file through another fd number (dup, F_DUPFD, pidfd_getfd)
 * where the hooks do not see it. */
static bool raw_shares(long n, long b)
{
	switch (n) {
	case SYS_fcntl:
		return b == F_SETFL || b == F_DUPFD || b == F_DUPFD_CLOEXEC;
	case SYS_ioctl:
		return b == FIONBIO;
	case SYS_dup:
	case SYS_dup2:
	case SYS_dup3:
	case SYS_pidfd_getfd:
		return true;
	}
	return false;
}

/* syscall(2) itself, for the three calls above (a program that asks the
 * kernel for its tid directly must get the same number) and
 * pidfd_send_signal (Python makes it so); a raw fcntl, ioctl, dup or
 * pidfd_getfd may change a file's O_NONBLOCK or reach it through another
 * fd number, unseen by the hooks: every file is taken as shared from
 * then on (runtime/netpoll.h pd_sole); every other number goes
 * straight to glibc's.  glibc's syscall takes six
 * arguments whatever the call: so do we. */
HOOK long syscall(long n, ...)
{
	va_list ap;
	va_start(ap, n);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	if (raw_shares(n, b) && rt_started())
		pd_shared();
	if (n == SYS_futex) /* futex.c: a G's private futex waits park it */
		return sysret(futex_syscall(FROM_SHIM(), a, b, c, d, e, f));
	if (n == SYS_pidfd_send_signal && active) {
		int r = pidfd_signal((int)a, (int)b, (siginfo_t *)c, (unsigned int)d);
		if (r >= 0)
			return r ? -1 : 0;
	}
	if (!FROM_SHIM() && active && (n == SYS_gettid || n == SYS_tgkill || n == SYS_tkill)) {
		struct g *gp = getg();
		if (n == SYS_gettid && on_g() && gp->sigon)
			return g_tid(gp);
		int r = n == SYS_gettid ? -1
			: n == SYS_tgkill ? g_tgkill((pid_t)a, (pid_t)b, (int)c)
					  : g_tgkill(getpid(), (pid_t)a, (int)b);
		if (r == 0)
			return 0;
		if (r > 0) {
			errno_set(r);
			return -1;
		}
	}
	return REAL(syscall)(n, a, b, c, d, e, f);
}
