/*
 * dump.c - weft_dump and SIGQUIT: every G with its state, wait reason
 * and backtrace, as Go's goroutine dump:
 *
 *   green thread 17 [chan receive, 3 minutes]:
 *   weft_chan_recv()
 *   	runtime/chan.c:262 (libweft.so+0x17f1d)
 *   consumer()
 *   	/src/app.c:40 (app+0x1a2d)
 *
 * A backtrace must be taken while the stack holds still, but Gs migrate
 * and Ms keep running.  So a dump first freezes the world: it sends
 * SIGURG to every M, whose handler publishes its signal context and
 * waits until the dump thaws it.  With every M stopped no G can start
 * or stop running, so a switched-out G's saved frame is stable and a
 * running G is walked from its M's signal context.  The snapshot (pcs
 * only) is taken under that freeze; symbolising and printing come after
 * the thaw.
 *
 * SIGQUIT's handler only wakes the dumper thread, which prints the dump
 * to stderr and exits with status 2 as Go does (WEFT_DEBUG=sigquit=
 * continue keeps running).  A dump interrupts the blocking system call
 * of a G that is in one (EINTR where SA_RESTART does not apply).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "diag.h"
#include "sys.h"

/* ---- freezing the Ms ------------------------------------------------------- */

enum { FZ_ASKED = 1, FZ_HELD = 2, FZ_GONE = 3 };

struct frozen {
	struct m *m;
	_Atomic uint32_t state;
	ucontext_t *uc;   /* while FZ_HELD: where the thread was stopped */
	uintptr_t sp, pc; /* from uc */
};

static struct {
	struct frozen *slots;        /* grown under dumplock, never freed */
	int32_t cap;
	_Atomic int32_t n;           /* slots a handler may claim */
	_Atomic uint32_t thaw;       /* futex word: 0 frozen, 1 thawed */
} fz;

static struct lock dumplock;     /* one dump at a time */

/* 1 from the start of a freeze to its thaw (a futex word).  An M whose
 * thread starts meanwhile was not asked to stop (it was not on allm yet,
 * or had no tid to signal), so it waits in dump_mstart before it runs
 * any G.  seq_cst here, on allm and on m->tid: freeze sets it before it
 * reads allm and the tids, and an M is on allm before its thread runs,
 * which stores its tid and then reads this; so either freeze signals the
 * M, or the M sees the flag. */
static _Atomic uint32_t dumping;
static struct sigaction oldurg;

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return sys4(SYS_futex, w, op, val, ts);
}

static void chainurg(int sig, siginfo_t *si, void *uc)
{
	if (oldurg.sa_flags & SA_SIGINFO) {
		if (oldurg.sa_sigaction)
			oldurg.sa_sigaction(sig, si, uc);
	} else if (oldurg.sa_handler != SIG_DFL && oldurg.sa_handler != SIG_IGN) {
		oldurg.sa_handler(sig);
	}
}

/* SIGURG: a dump asked this M to hold still, or it is someone else's. */
static void onurg(int sig, siginfo_t *si, void *ucv)
{
	int e = errno;
	struct m *m = getm();
	struct frozen *f = NULL;
	/* a kernel wait of this M ends (kwait.c); a kick is not the program's */
	bool kick = kwait_onsignal(si, ucv);
	/* acquire: the slot's m and state were written before n */
	int32_t n = m ? atomic_load_explicit(&fz.n, memory_order_acquire) : 0;
	for (int32_t i = 0; i < n; i++) {
		if (fz.slots[i].m == m &&
		    atomic_load_explicit(&fz.slots[i].state, memory_order_acquire) == FZ_ASKED) {
			f = &fz.slots[i];
			break;
		}
	}
	if (!f) {
		if (!kick)
			chainurg(sig, si, ucv);
		if (errno != e) /* a scheduler's kept block is a running G's (tls.c) */
			errno = e;
		return;
	}
	ucontext_t *uc = ucv;
	f->uc = uc;
	f->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	f->pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	/* release: the context is published before the dumper reads it */
	atomic_store_explicit(&f->state, FZ_HELD, memory_order_release);
	while (atomic_load_explicit(&fz.thaw, memory_order_acquire) == 0)
		futex(&fz.thaw, FUTEX_WAIT_PRIVATE, 0, NULL);
	atomic_store_explicit(&f->state, FZ_GONE, memory_order_release);
	if (errno != e)
		errno = e;
}

static int32_t countms(void)
{
	int32_t n = 0;
	for (struct m *m = atomic_load(&allm); m; m = m->alllink)
		n++;
	return n;
}

/* Before the freeze (may allocate): room for every M and a few more. */
static bool fzreserve(void)
{
	int32_t want = countms() + 8;
	if (want <= fz.cap)
		return true;
	struct frozen *s = rtalloc((size_t)want * sizeof *s);
	if (!s)
		return false;
	/* the old array may still be scanned by a late handler: keep it */
	fz.slots = s;
	fz.cap = want;
	return true;
}

static void sleepus(long us)
{
	struct timespec ts = { 0, us * 1000 };
	sys_nanosleep(&ts, NULL);
}

/* Stop every M but our own in its SIGURG handler; wait up to 200 ms.
 * sched.lock is held until the thaw: every M that went idle (stopm,
 * the netpoller) gave it up last, so what those Ms wrote happens before
 * the dump reads it even if they cannot take the signal at once (under
 * TSan, which runs the handler of a thread asleep in a raw system call
 * only once it wakes); and no idle M is handed a P meanwhile.  Taken
 * before the freeze, so no stopped M holds it. */
static void freeze(void)
{
	struct m *self = getm();
	int32_t k = 0;
	lock(&sched.lock);
	atomic_store(&fz.thaw, 0);
	atomic_store(&dumping, 1);
	for (struct m *m = atomic_load(&allm); m && k < fz.cap; m = m->alllink) {
		if (m == self)
			continue;
		fz.slots[k].m = m;
		fz.slots[k].uc = NULL;
		atomic_store_explicit(&fz.slots[k].state, FZ_ASKED, memory_order_relaxed);
		k++;
	}
	atomic_store_explicit(&fz.n, k, memory_order_release);
	pid_t pid = getpid();
	for (int32_t i = 0; i < k; i++) {
		int tid = atomic_load(&fz.slots[i].m->tid); /* seq_cst: see dumping */
		if (tid <= 0 || sys_tgkill(pid, tid, SIGURG) != 0)
			atomic_store(&fz.slots[i].state, FZ_GONE); /* not started, or gone */
	}
	for (int tries = 0; tries < 2000; tries++) {
		bool all = true;
		for (int32_t i = 0; i < k && all; i++)
			all = atomic_load(&fz.slots[i].state) != FZ_ASKED;
		if (all)
			return;
		sleepus(100);
	}
}

static void thaw(void)
{
	int32_t k = atomic_load(&fz.n);
	atomic_store_explicit(&fz.n, 0, memory_order_release); /* no new claims */
	atomic_store_explicit(&fz.thaw, 1, memory_order_release);
	futex(&fz.thaw, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
	atomic_store(&dumping, 0);
	futex(&dumping, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
	/* wait for the held ones to leave before the slots are reused */
	for (int tries = 0; tries < 10000; tries++) {
		bool all = true;
		for (int32_t i = 0; i < k && all; i++)
			all = atomic_load(&fz.slots[i].state) != FZ_HELD;
		if (all)
			break;
		sleepus(100);
	}
	unlock(&sched.lock);
}

/* The frozen M whose stack pointer is inside gp's stack, if any. */
static struct frozen *onstack(struct g *gp)
{
	int32_t k = atomic_load(&fz.n);
	for (int32_t i = 0; i < k; i++) {
		struct frozen *f = &fz.slots[i];
		if (atomic_load_explicit(&f->state, memory_order_acquire) == FZ_HELD &&
		    f->sp >= (uintptr_t)gp->stack.lo && f->sp < (uintptr_t)gp->stack.hi)
			return f;
	}
	return NULL;
}

/* The ranges of the inlined switches (arch/ctx.h), which the linker
 * gathers into the section weft_ctxsw of this library. */
extern const struct ctx_range __start_weft_ctxsw[] HIDDEN;
extern const struct ctx_range __stop_weft_ctxsw[] HIDDEN;

/* Inside a switch the stack is half switched and the CFI of the function
 * it is inlined in does not describe its pushes: no unwinding from there. */
static bool inswitch(uintptr_t pc)
{
	for (const struct ctx_range *r = __start_weft_ctxsw; r < __stop_weft_ctxsw; r++)
		if (pc >= (uintptr_t)&r->lo + r->lo && pc < (uintptr_t)&r->hi + r->hi)
			return true;
	return false;
}

/* ---- the snapshot ------------------------------------------------------------ */

enum { ST_FRAMES, ST_NOTCAPTURED, ST_SWITCHING, ST_NOTSTARTED };

struct gsnap {
	int64_t id;
	uint32_t status;
	uint8_t reason;
	uint8_t how;        /* ST_* */
	int64_t waitsince;
	char name[48];
	struct tb tb;
};

struct snapctx {
	struct gsnap *s;
	size_t n, cap, more;
	bool frozen;
};

static void snapstack(struct g *gp, struct gsnap *s)
{
	s->how = ST_FRAMES;
	s->tb.n = 0;
	if (gp == getg()) {
		tb_here(&s->tb); /* the G asking for the dump */
		return;
	}
	struct frozen *f = onstack(gp);
	if (f) {
		if (inswitch(f->pc))
			s->how = ST_SWITCHING;
		else
			tb_from_ucontext(f->uc, &s->tb);
		return;
	}
	if (s->status == G_RUNNING || s->status == G_SYSCALL) {
		s->how = ST_NOTCAPTURED; /* its M did not stop in time */
		return;
	}
	if (!gp->sp) {
		s->how = ST_NOTSTARTED; /* no stack or frame until it first runs */
		return;
	}
	tb_from_frame(gp->sp, &s->tb);
}

/* forEachG callback, allglock held (so no frozen M holds it). */
static void snapone(struct g *gp, void *arg)
{
	struct snapctx *c = arg;
	/* acquire: pairs with weft_go_attr's release, for id and name */
	uint32_t st = atomic_load_explicit(&gp->status, memory_order_acquire);
	if (st == G_IDLE || st == G_DEAD)
		return;
	if (!c->frozen) {
		freeze();
		c->frozen = true;
		st = atomic_load_explicit(&gp->status, memory_order_acquire);
		if (st == G_IDLE || st == G_DEAD)
			return;
	}
	if (c->n == c->cap) {
		c->more++;
		return;
	}
	struct gsnap *s = &c->s[c->n++];
	s->id = gp->id;
	s->status = st;
	s->reason = atomic_load_explicit(&gp->waitreason, memory_order_relaxed);
	s->waitsince = atomic_load_explicit(&gp->waitsince, memory_order_relaxed);
	s->name[0] = 0;
	if (gp->name)
		snprintf(s->name, sizeof s->name, "%s", gp->name);
	snapstack(gp, s);
}

static void countone(struct g *gp, void *arg)
{
	(void)gp;
	(*(size_t *)arg)++;
}

/* ---- printing ------------------------------------------------------------------ */

static const char *statename(const struct gsnap *s)
{
	switch (s->status) {
	case G_RUNNABLE: return "runnable";
	case G_RUNNING: return "running";
	case G_SYSCALL: return "syscall";
	case G_WAITING: return s->reason < W_NREASONS ? waitreasons[s->reason] : "waiting";
	default: return "?";
	}
}

static void printone(const struct gsnap *s, FILE *out)
{
	fprintf(out, "green thread %lld [%s", (long long)s->id, statename(s));
	if (s->status == G_WAITING && s->waitsince) {
		int64_t min = (atomic_load(&coarsenow) - s->waitsince) / 60000000000LL;
		if (min >= 1)
			fprintf(out, ", %lld minutes", (long long)min);
	}
	fprintf(out, "]%s%s:\n", s->name[0] ? " " : "", s->name);
	if (s->how == ST_SWITCHING)
		fprintf(out, "\t(switching; no backtrace)\n");
	else if (s->how == ST_NOTCAPTURED)
		fprintf(out, "\t(running on another thread; no backtrace)\n");
	else if (s->how == ST_NOTSTARTED)
		fprintf(out, "\t(not started yet)\n");
	else
		tb_print(&s->tb, out);
	fprintf(out, "\n");
}

static void dump_locked(FILE *out)
{
	size_t count = 0;
	forEachG(countone, &count);
	struct snapctx c = { NULL, 0, count + 64, 0, false };
	c.s = rtalloc(c.cap * sizeof *c.s);
	if (!c.s || !fzreserve()) {
		fprintf(out, "weft: no memory for a dump of %zu green threads\n", count);
		rtfree(c.s);
		return;
	}
	forEachG(snapone, &c);
	if (c.frozen)
		thaw();
	for (size_t i = 0; i < c.n; i++)
		printone(&c.s[i], out);
	if (c.more)
		fprintf(out, "...%zu more green threads started during the dump...\n\n", c.more);
	tb_symclose();
	rtfree(c.s);
	fflush(out);
}

void weft_dump(FILE *out)
{
	if (!out)
		out = stderr;
	if (!atomic_load(&sched_started))
		return;
	/* inside the runtime: hooked libc calls go straight to libc, and
	 * the P stays ours while the world is frozen */
	rt_enter();
	/* on the M's own TLS: the backtrace printer uses plain malloc,
	 * jemalloc's inside libweft, whose thread state must never be made
	 * in a G's block (alloc.c) */
	tls_forkenter();
	lock(&dumplock);
	dump_locked(out);
	unlock(&dumplock);
	tls_forkleave();
	rt_leave();
}

/* ---- SIGQUIT ---------------------------------------------------------------------- */

static _Atomic uint32_t quitreq; /* futex word: 1 when a SIGQUIT waits to be dumped */
static _Atomic int32_t ndumpers;

static void onquit(int sig)
{
	(void)sig;
	int e = errno;
	uint32_t zero = 0;
	if (atomic_compare_exchange_strong(&quitreq, &zero, 1))
		futex(&quitreq, FUTEX_WAKE_PRIVATE, 1, NULL);
	errno = e;
}

static void *dumper(void *arg)
{
	(void)arg;
	for (;;) {
		while (atomic_load(&quitreq) == 0)
			futex(&quitreq, FUTEX_WAIT_PRIVATE, 0, NULL);
		fprintf(stderr, "SIGQUIT: quit\n\n");
		weft_dump(stderr);
		if (!weftenv.sigquit_continue)
			_exit(2);
		atomic_store(&quitreq, 0);
	}
	return NULL;
}

int dump_nthreads(void)
{
	return atomic_load(&ndumpers);
}

/* A new M, before it runs anything: wait for a dump in progress. */
void dump_mstart(void)
{
	while (atomic_load(&dumping)) /* seq_cst: see dumping */
		futex(&dumping, FUTEX_WAIT_PRIVATE, 1, NULL);
}

/* A child of fork has no dumper thread (fork.c), and no dump going on. */
void dump_afterfork_child(void)
{
	atomic_store(&ndumpers, 0);
	atomic_store(&dumping, 0);
}

void dump_init(void)
{
	extern int (*rt_pthread_create)(pthread_t *, const pthread_attr_t *,
					void *(*)(void *), void *);
	tb_init(); /* libunwind, now: a dump may come where dlopen cannot */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sa.sa_sigaction = onurg;
	sys_sigaction(SIGURG, &sa, &oldurg);

	/* SIGQUIT: only if nobody else handles or ignores it */
	struct sigaction old;
	if (sys_sigaction(SIGQUIT, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
	    (old.sa_flags & SA_SIGINFO))
		return;
	/* the dumper takes no signals: SIGQUIT and SIGURG go to others */
	sigset_t all, prev;
	sigfillset(&all);
	sys_sigprocmask(SIG_SETMASK, &all, &prev);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 * 1024);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	int e = rt_pthread_create(&t, &a, dumper, NULL);
	pthread_attr_destroy(&a);
	sys_sigprocmask(SIG_SETMASK, &prev, NULL);
	if (e != 0) {
		warn("cannot start the dump thread: SIGQUIT keeps its default action");
		return;
	}
	atomic_store(&ndumpers, 1);
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sa.sa_handler = onquit;
	sys_sigaction(SIGQUIT, &sa, NULL);
}
