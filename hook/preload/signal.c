/*
 * signal.c - signal masks and signal waits for Gs.
 *
 * A G moves between OS threads, so a per-thread signal mask means
 * nothing for it.  Under the shim the program has one mask, P, as a
 * single-threaded process does, and the OS threads are arranged so the
 * kernel's choices match it:
 *
 *   - the real main thread (idle since main became a G; "the signal
 *     thread") carries P: a process-directed signal that P lets through
 *     is handled there - never on an M in the middle of the scheduler;
 *   - every runtime thread (Ms, sysmon, the dumper) blocks all
 *     asynchronous signals; only faults, SIGPIPE / SIGXFSZ (sent to the
 *     thread that wrote, blocked as P says) and the runtime's own SIGURG
 *     reach them;
 *   - sigprocmask / pthread_sigmask on a G change P and the signal
 *     thread's mask (and the Ms' SIGPIPE / SIGXFSZ bits), and return
 *     once the signal thread has it.
 *
 * A signal P blocks stays pending for the process, as it would.  Calls
 * that unblock signals while they wait see it: sigsuspend and sigwait*
 * run for real on their M; pselect / ppoll / epoll_pwait with a mask
 * park the G, so a watcher G parked on a signalfd for P's signals kicks
 * every G parked on an fd when one arrives, and their retry (a zero
 * timeout call with the caller's mask) takes the signal: EINTR, with the
 * handler run, as without weft.  pause() returns once a handler has run
 * on the signal thread.
 *
 * Threads change masks with SIGWEFT (a real-time signal the shim keeps
 * for itself): its handler sets the mask the thread returns to.
 */
#include "shim.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <ucontext.h>
#include <linux/futex.h>

#define SIGWEFT (SIGRTMAX - 3)

static bool active;            /* the signal thread runs */
static struct lock plock;      /* changes of P */
static sigset_t P;             /* the program's mask (plock) */
static _Atomic uint64_t pbits; /* P's signals 1..64, read without a lock (handlers) */
static _Atomic uint64_t pgen;  /* bumped with every change of P */
static _Atomic uint64_t applied; /* pgen the signal thread runs with */
static _Atomic int sigtid;     /* the signal thread */
static _Atomic uint32_t hgen;  /* handlers run on the signal thread (futex word) */
static int sfd = -1;           /* signalfd on P's catchable signals */
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

/* What an M runs with: every asynchronous signal blocked.  No lock: a
 * SIGWEFT handler computes it. */
static void m_mask(sigset_t *m)
{
	uint64_t p = atomic_load_explicit(&pbits, memory_order_acquire);
	sigemptyset(m);
	for (int s = 1; s < NSIG; s++)
		if (async_sig(s) || ((s == SIGPIPE || s == SIGXFSZ) && s <= 64 &&
				     (p & (1ULL << (s - 1)))))
			sigaddset(m, s);
}

/* What the signal thread runs with: P. */
static void st_mask(sigset_t *m)
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
	(void)si;
	int e = errno_get();
	ucontext_t *uc = ucv;
	if (gettid_() == atomic_load(&sigtid)) {
		/* pgen before pbits: setp stores pbits, then bumps pgen, so
		 * the mask read after seeing g is g's or a newer one, and
		 * 'applied = g' never claims a mask older than g */
		uint64_t g = atomic_load(&pgen);
		st_mask(&uc->uc_sigmask);
		atomic_store(&applied, g);
		weftsig = 1;
	} else {
		m_mask(&uc->uc_sigmask);
	}
	errno_set(e);
}

static void install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_weft;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGWEFT, &sa, NULL);
}

/* SIGWEFT to a thread, its handler in place: code that resets every
 * handler with raw system calls (as Python's subprocess child does)
 * must not turn it into a killer. */
static void tell(int tid)
{
	struct sigaction cur;
	if (sigaction(SIGWEFT, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) ||
	    cur.sa_sigaction != on_weft)
		install();
	if (tid > 0)
		(void)sys3(SYS_tgkill, getpid(), tid, SIGWEFT);
}

/* ---- runtime threads ----------------------------------------------------------- */

/* rt_pthread_create: the runtime's threads start with asynchronous
 * signals blocked (the dumper, which asks for all, keeps all). */
int sig_rt_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	sigset_t want, old;
	REAL(pthread_sigmask)(SIG_SETMASK, NULL, &old);
	if (sigismember(&old, SIGWEFT))
		want = old; /* the dumper, made with everything blocked: so be it */
	else
		m_mask(&want);
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

/* ---- the watcher: a G parked on the signalfd ----------------------------------------- */

static void kick_one(int fd, struct pd *d, void *arg)
{
	(void)arg;
	if (fd != sfd && __atomic_load_n(&d->waiters.head, __ATOMIC_RELAXED))
		pd_kick(d, PD_READ | PD_WRITE);
}

/* Every G parked on an fd retries its call. */
static void kick_all(void)
{
	pd_foreach(kick_one, NULL);
}

static void watcher(void *arg)
{
	(void)arg;
	struct pd *d = pd_get(sfd);
	if (!d || pd_init(d, sfd) != 0 || pd_register(d, sfd) != 0)
		return;
	for (;;) {
		struct pollreq r;
		r.d = d;
		r.seq = atomic_load_explicit(&d->seq, memory_order_acquire);
		r.mask = PD_READ;
		pd_snap(&r);
		if (pd_wait(&r, 1, -1, W_POLL) == -EBADF)
			return;
		kick_all();
	}
}

/* The catchable signals of P: what pending ones the watcher hears of. */
static void sfd_update(void)
{
	if (sfd < 0)
		return;
	sigset_t m;
	st_mask(&m);
	for (int s = 1; s < NSIG; s++)
		if (!async_sig(s))
			sigdelset(&m, s);
	(void)sys4(SYS_signalfd4, sfd, &m, 8, 0);
}

static void watcher_start(void)
{
	sigset_t m;
	sigemptyset(&m);
	long fd = sys4(SYS_signalfd4, -1, &m, 8, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		return;
	sfd = rt_fdhigh((int)fd); /* out of the way of programs' low fd numbers */
	sfd_update();
	weft_attr_t a = { .stack_size = 64 * 1024, .name = "weft signals" };
	if (weft_go_attr(&a, watcher, NULL) < 0)
		warn("cannot start the signal watcher: signal waits with a mask may not wake");
}

/* ---- the signal thread ------------------------------------------------------------------ */

/* The real main thread from now on: carry P, take signals, wait. */
_Noreturn void sig_thread(void)
{
	for (;;) {
		uint32_t h = atomic_load(&hgen);
		long r = sys4(SYS_futex, &hgen, FUTEX_WAIT_PRIVATE, h, NULL);
		if (r == -EINTR) {
			/* a handler ran here, or SIGWEFT brought a new mask */
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

/* Called on the real main thread before main's G starts. */
void sig_start(void)
{
	install();
	REAL(pthread_sigmask)(SIG_SETMASK, NULL, &P);
	sigdelset(&P, SIGWEFT);
	atomic_store(&pbits, tobits(&P));
	REAL(pthread_sigmask)(SIG_SETMASK, &P, NULL);
	atomic_store(&sigtid, gettid_());
	/* Ms made before now (runtime start) got P: give them theirs */
	for (struct m *m = atomic_load(&allm); m; m = m->alllink)
		if (m->tid)
			tell(m->tid);
	watcher_start();
	active = true;
}

/* Child of fork: a new signal thread (the old one is not in the child).
 * The watcher G starts with the child's first mask change: most
 * children exec at once. */
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
	atomic_store(&sigtid, 0);
	atomic_store(&applied, 0);
	if (sfd >= 0) { /* the watcher G did not survive the fork */
		(void)sys3(SYS_close, sfd, 0, 0);
		sfd = -1;
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

/* ---- masks for Gs ------------------------------------------------------------------------- */

static bool on_g(void)
{
	return active && getg();
}

/* Change P; 0 or an error number. */
static int setp(int how, const sigset_t *set, sigset_t *old)
{
	if (set && how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK)
		return EINVAL;
	lock(&plock);
	sigset_t was = P, now = P;
	if (set) {
		if (how == SIG_BLOCK)
			sigorset(&now, &P, set);
		else if (how == SIG_SETMASK)
			now = *set;
		else
			for (int s = 1; s < NSIG; s++)
				if (sigismember(set, s))
					sigdelset(&now, s);
		/* as glibc: never the unblockable ones, glibc's, or ours */
		sigdelset(&now, SIGKILL);
		sigdelset(&now, SIGSTOP);
		sigdelset(&now, SIGWEFT);
		for (int s = SIGSYS + 1; s < SIGRTMIN; s++)
			sigdelset(&now, s);
	}
	bool changed = memcmp(&was, &now, sizeof now) != 0;
	uint64_t g = 0;
	if (changed) {
		P = now;
		atomic_store_explicit(&pbits, tobits(&now), memory_order_release);
		g = atomic_fetch_add(&pgen, 1) + 1;
	}
	unlock(&plock);
	if (old)
		*old = was;
	if (!changed)
		return 0;
	if (watcher_wanted) {
		watcher_wanted = false;
		watcher_start();
	}
	sfd_update();
	if (sigismember(&was, SIGPIPE) != sigismember(&now, SIGPIPE) ||
	    sigismember(&was, SIGXFSZ) != sigismember(&now, SIGXFSZ)) {
		/* Every M, this one too (the handler runs before tgkill
		 * returns), takes its mask from pbits in its SIGWEFT handler,
		 * as pbits is then.  Each M gets a SIGWEFT sent after the
		 * last change's store, so the last change wins on every M; a
		 * mask computed here and set directly could land after the
		 * handler of a newer change had run on this M. */
		for (struct m *m = atomic_load(&allm); m; m = m->alllink)
			if (m->tid)
				tell(m->tid);
	}
	/* as the kernel: a signal unblocked now is handled before we return */
	int e = errno_get();
	weft_mutex_lock(&smu);
	while (atomic_load(&applied) < g) {
		tell(atomic_load(&sigtid));
		weft_cond_timedwait(&scv, &smu, 2000000);
	}
	weft_mutex_unlock(&smu);
	errno_set(e);
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

/* The mask a real call on this M should use instead of P's. */
void sig_use_p(sigset_t *saved)
{
	weft_lock_thread(); /* the mask is this OS thread's: stay on it */
	sigset_t m;
	st_mask(&m);
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

/* ---- waiting for signals ---------------------------------------------------------------- */

DEFREAL(sigsuspend);
DEFREAL(pause);
DEFREAL(sigwait);
DEFREAL(sigwaitinfo);
DEFREAL(sigtimedwait);
DEFREAL(raise);

/* Park until a handler has run on the signal thread. */
static void wait_handler(uint32_t since)
{
	int e = errno_get();
	weft_mutex_lock(&smu);
	while (atomic_load(&hgen) == since)
		weft_cond_wait(&scv, &smu);
	weft_mutex_unlock(&smu);
	errno_set(e);
}

HOOK int pause(void)
{
	if (!on_g())
		return REAL(pause)();
	wait_handler(atomic_load(&hgen));
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
	st_mask(&p);
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
	wait_handler(atomic_load(&hgen));
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

HOOK int sigwait(const sigset_t *set, int *sig)
{
	return SIGWAIT_CALL(REAL(sigwait)(set, sig));
}

HOOK int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	return SIGWAIT_CALL(REAL(sigwaitinfo)(set, info));
}

HOOK int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	return SIGWAIT_CALL(REAL(sigtimedwait)(set, info, ts));
}

DEFREAL(kill);

/* A signal sent to this process from a G.  Single-threaded, the kernel
 * would deliver it to the sender before kill returns.  A fault-like one
 * (SIGSEGV from kill, SIGABRT...) goes to this OS thread, which takes
 * those; an asynchronous one goes to the process, and if P lets it
 * through to a handler we wait until the signal thread has run it. */
static int self_signal(int sig)
{
	if (sig == 0 || sig == SIGKILL || sig == SIGSTOP)
		return REAL(kill)(getpid(), sig);
	if (!async_sig(sig))
		return (int)sysret(sys3(SYS_tgkill, getpid(), gettid_(), sig));
	struct sigaction sa;
	sigset_t p;
	st_mask(&p);
	bool handled = sigaction(sig, NULL, &sa) == 0 &&
		       ((sa.sa_flags & SA_SIGINFO) ? sa.sa_sigaction != NULL
						   : sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
	uint32_t h = atomic_load(&hgen);
	if (REAL(kill)(getpid(), sig) != 0)
		return -1;
	if (handled && !sigismember(&p, sig))
		wait_handler(h);
	return 0;
}

HOOK int raise(int sig)
{
	if (!on_g())
		return REAL(raise)(sig);
	return self_signal(sig);
}

HOOK int kill(pid_t pid, int sig)
{
	if (!on_g() || pid != getpid())
		return REAL(kill)(pid, sig);
	return self_signal(sig);
}
