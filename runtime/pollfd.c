/*
 * pollfd.c - poll descriptors: what weft knows about each fd, and the
 * park/ready protocol between Gs that wait on fds and the netpoller.
 *
 * The table is a fixed array of chunk pointers, each chunk 1024
 * descriptors made on first use and never freed, so a lookup is two
 * loads and no lock, and a descriptor's address never changes.
 *
 * Waiting (pd_wait) follows Go's netpollblock with sema.c's waiter
 * protocol: the G records the event counters before its call, and once
 * it is off its stack (waiter_block's unlockf) queues itself on each
 * descriptor under that descriptor's lock, unless a counter moved, the
 * file changed (seq) or it is closing, in which case it readies itself
 * at once.  Wakers (events, close, shutdown) claim waiters under the
 * lock, so exactly one of event, close and deadline ends a wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "runtime.h"
#include "netpoll.h"

#define CHUNK_SHIFT 10
#define CHUNK (1 << CHUNK_SHIFT)
#define NCHUNKS 4096 /* fds below 4M have a descriptor */

static struct pd *_Atomic pdtab[NCHUNKS];

_Atomic uint32_t pd_nbgen = 1; /* 0 is never current: a fresh descriptor's nbgen */
_Atomic uint32_t pd_timeogen = 1; /* likewise for timeogen */
_Atomic uint32_t pd_forkgen;      /* shares of every file so far (netpoll.h) */
bool pd_soletrust;                /* the shim sees every share (netpoll.h pd_sole) */

void pd_shared(void)
{
	/* seq_cst RMW (a full barrier), before the sharing call: whatever
	 * the other side then does to a file, a G that hears of it (through
	 * the kernel or the program's own synchronisation) reads the new
	 * generation in pd_sole and asks the kernel */
	atomic_fetch_add(&pd_forkgen, 1);
}

struct pd *pd_lookup(int fd)
{
	if ((unsigned)fd >= (unsigned)NCHUNKS * CHUNK)
		return NULL;
	struct pd *c = atomic_load_explicit(&pdtab[fd >> CHUNK_SHIFT], memory_order_acquire);
	return c ? &c[fd & (CHUNK - 1)] : NULL;
}

void pd_foreach(void (*fn)(int fd, struct pd *d, void *arg), void *arg)
{
	for (int i = 0; i < NCHUNKS; i++) {
		struct pd *c = atomic_load_explicit(&pdtab[i], memory_order_acquire);
		for (int j = 0; c && j < CHUNK; j++)
			fn(i * CHUNK + j, &c[j], arg);
	}
}

struct pd *pd_get(int fd)
{
	if ((unsigned)fd >= (unsigned)NCHUNKS * CHUNK)
		return NULL;
	struct pd *_Atomic *slot = &pdtab[fd >> CHUNK_SHIFT];
	struct pd *c = atomic_load_explicit(slot, memory_order_acquire);
	if (unlikely(!c)) {
		/* libc's mmap (weft does not hook it): sanitizers see it */
		size_t sz = CHUNK * sizeof(struct pd);
		int e = errno;
		void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			errno = e;
			return NULL;
		}
		struct pd *want = NULL;
		if (atomic_compare_exchange_strong_explicit(slot, &want, (struct pd *)p,
							    memory_order_acq_rel,
							    memory_order_acquire)) {
			c = p;
		} else {
			munmap(p, sz);
			c = want;
		}
		errno = e;
	}
	return &c[fd & (CHUNK - 1)];
}

static uint32_t pdflags(struct pd *d)
{
	return atomic_load_explicit(&d->flags, memory_order_acquire);
}

static void setflags(struct pd *d, uint32_t f)
{
	atomic_store_explicit(&d->flags, f, memory_order_release);
}

/* A new file or a close: no old wait or event may match any more. */
static uint32_t bumpseq(struct pd *d)
{
	uint32_t s = atomic_load_explicit(&d->seq, memory_order_relaxed) + 1;
	if (s == 0)
		s = 1;
	atomic_store_explicit(&d->seq, s, memory_order_release);
	return s;
}

/* ---- waiters (d->lock held; queues from waitq.h) ----------------------- */

/* Take every waiter that wants one of dirs; the Gs whose wait this ends
 * go on *list.  A waiter whose claim fails was timed out or woken by
 * another fd of the same poll: it only leaves the queue. */
static void takewaiters(struct pd *d, unsigned dirs, struct g **list)
{
	struct waiter *w = d->waiters.head;
	while (w) {
		struct waiter *next = w->next;
		if (w->ticket & dirs) {
			struct g *gp = w->g;
			waitq_remove(&d->waiters, w);
			if (waiter_claim(w)) {
				gp->schedlink = *list;
				*list = gp;
			}
		}
		w = next;
	}
}

static void readylist(struct g *list)
{
	while (list) {
		struct g *gp = list;
		list = gp->schedlink;
		gp->schedlink = NULL;
		goready(gp);
	}
}

/* d->lock held: count an event in dirs and take the waiters it ends. */
static void event_locked(struct pd *d, unsigned dirs, struct g **list)
{
	/* only ever written under d->lock: no locked RMW needed */
	if (dirs & PD_READ)
		atomic_store_explicit(&d->rev, atomic_load_explicit(&d->rev, memory_order_relaxed) + 1,
				      memory_order_release);
	if (dirs & PD_WRITE)
		atomic_store_explicit(&d->wev, atomic_load_explicit(&d->wev, memory_order_relaxed) + 1,
				      memory_order_release);
	if (!waitq_empty(&d->waiters))
		takewaiters(d, dirs, list);
}

/* d->lock held; d is a program's epoll fd (PD_EPOLL), or a file a G
 * reads or accepts on waiting in the kernel (PD_KWAIT), that had an
 * event with no G waiting on it.  Its G waits for it in the kernel on
 * its own M (hook/wait.c, hook.c io_kcall; docs/hooks.md "Waiting in the
 * kernel") or is busy, and each of its events would wake an M blocked
 * in the netpoller for nothing (one epoll_wait and a thread switch per
 * wakeup of the loop: redis under weft run, when its first wait had
 * parked; a thread-per-connection server's every message).  So it
 * leaves the epoll instance until a G parks on it again: pd_register
 * adds it back, and a G that registered before this and parks after it
 * is woken at once (changed: no PD_REG), to register again. */
static void unwatch_locked(struct pd *d, int fd)
{
	struct epoll_event ev = { 0 };
	(void)sys4(SYS_epoll_ctl, netpoll_epfd, EPOLL_CTL_DEL, fd, &ev);
	setflags(d, pdflags(d) & ~(uint32_t)(PD_REG | PD_KWIDLE));
}

/* Set flag (PD_EPOLL, PD_KWAIT) on d's file, once. */
static void markunwatch(struct pd *d, uint32_t flag)
{
	if (pdflags(d) & flag)
		return;
	lock(&d->lock);
	if (!(pdflags(d) & PD_CLOSING))
		setflags(d, pdflags(d) | flag);
	unlock(&d->lock);
}

void pd_markepoll(struct pd *d)
{
	markunwatch(d, PD_EPOLL);
}

void pd_markkwait(struct pd *d)
{
	markunwatch(d, PD_KWAIT);
}

void pd_unmarkkwait(struct pd *d)
{
	if (!(pdflags(d) & PD_KWAIT))
		return;
	lock(&d->lock);
	setflags(d, pdflags(d) & ~(uint32_t)(PD_KWAIT | PD_KWIDLE));
	unlock(&d->lock);
}

void pollfd_event(uint64_t tag, uint32_t events, uint64_t gen, struct g **list)
{
	int fd = (int)(uint32_t)tag;
	struct pd *d = pd_lookup(fd);
	if (!d)
		return;
	unsigned dirs = 0;
	if (events & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		dirs |= PD_READ;
	if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		dirs |= PD_WRITE;
	lock(&d->lock);
	if (atomic_load_explicit(&d->seq, memory_order_relaxed) == (uint32_t)(tag >> 32)) {
		/* urgent data ends a read short; a short read may have
		 * taken the FIN (or met the error) that this event reports,
		 * and no further event would come: read until EOF from now */
		if (events & (EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			setflags(d, pdflags(d) | PD_NODRAIN);
		/* written and read under d->lock only (pd_evmask) */
		atomic_store_explicit(&d->evmask, events, memory_order_relaxed);
		atomic_store_explicit(&d->evgen, gen, memory_order_relaxed);
		bool idle = waitq_empty(&d->waiters);
		event_locked(d, dirs, list);
		uint32_t f = pdflags(d);
		if (idle && (f & PD_UNWATCH) && (f & PD_REG)) {
			/* a kernel reader's file at its second such event:
			 * a short exchange before a close costs no DEL */
			if ((f & PD_EPOLL) || (f & PD_KWIDLE))
				unwatch_locked(d, fd);
			else
				setflags(d, f | PD_KWIDLE);
		}
	}
	unlock(&d->lock);
}

void pd_kick(struct pd *d, unsigned dirs)
{
	struct g *list = NULL;
	lock(&d->lock);
	event_locked(d, dirs, &list);
	unlock(&d->lock);
	readylist(list);
}

/* ---- new files, dup, close -------------------------------------------- */

/* d->lock held: a new file (or none) at this number from now on. */
static void newfile_locked(struct pd *d, uint32_t flags, struct g **list)
{
	takewaiters(d, PD_READ | PD_WRITE, list);
	bumpseq(d);
	setflags(d, flags);
	atomic_store_explicit(&d->rdrain, 0, memory_order_relaxed);
	atomic_store_explicit(&d->evmask, 0, memory_order_relaxed); /* the old file's */
	atomic_store_explicit(&d->rtimeo, 0, memory_order_relaxed);
	atomic_store_explicit(&d->wtimeo, 0, memory_order_relaxed);
}

static void reset(int fd, uint32_t flags, int64_t rtimeo, int64_t wtimeo, uint32_t nbgen,
		  uint32_t forkgen)
{
	struct pd *d = pd_get(fd);
	if (!d)
		return;
	struct g *list = NULL;
	lock(&d->lock);
	newfile_locked(d, flags, &list);
	atomic_store_explicit(&d->rtimeo, rtimeo, memory_order_relaxed);
	atomic_store_explicit(&d->wtimeo, wtimeo, memory_order_relaxed);
	atomic_store_explicit(&d->timeogen, 0, memory_order_relaxed); /* asked at the first wait */
	atomic_store_explicit(&d->nbgen, nbgen, memory_order_relaxed);
	atomic_store_explicit(&d->forkgen, forkgen, memory_order_relaxed);
	unlock(&d->lock);
	readylist(list);
}

void pd_reset(int fd, uint32_t flags)
{
	pd_reset_sole(fd, flags, atomic_load_explicit(&pd_forkgen, memory_order_acquire));
}

void pd_reset_sole(int fd, uint32_t flags, uint32_t forkgen)
{
	/* a file just made: its O_NONBLOCK is the one it was made with */
	reset(fd, flags, 0, 0, atomic_load_explicit(&pd_nbgen, memory_order_acquire), forkgen);
}

/* What a duplicate shares with its original: the file and its modes;
 * not the epoll registration, which is per fd number. */
#define PD_SHARED                                                                          \
	(PD_KNOWN | PD_SOCK | PD_NOWAIT | PD_WPOLL | PD_WCALL | PD_USERNB | PD_SYSCALL |   \
	 PD_NOPOLL | PD_DRAINOK | PD_NODRAIN)

void pd_dup(int oldfd, int newfd)
{
	struct pd *o = pd_lookup(oldfd);
	if (o && (pdflags(o) & PD_SOLE)) { /* two fds on the file now (PD_SHARED lacks it) */
		lock(&o->lock); /* flags change under it (setflags) */
		setflags(o, pdflags(o) & ~(uint32_t)PD_SOLE);
		unlock(&o->lock);
	}
	uint32_t f = o ? pdflags(o) & PD_SHARED : 0;
	int64_t rt = o ? atomic_load_explicit(&o->rtimeo, memory_order_relaxed) : 0;
	int64_t wt = o ? atomic_load_explicit(&o->wtimeo, memory_order_relaxed) : 0;
	uint32_t gen = o ? atomic_load_explicit(&o->nbgen, memory_order_relaxed) : 0;
	reset(newfd, f, rt, wt, gen, atomic_load_explicit(&pd_forkgen, memory_order_acquire));
}

/* The file of d is being closed: ask the kernel waits of the Gs that
 * read or accept on it (hook.c io_kcall) to end.  Natively a read goes
 * on after another thread's close, but a G parked on the file is woken
 * with EBADF (below), and so is one waiting in the kernel: its park
 * after the kick finds the file gone.  The seq_cst fence orders our seq
 * store (newfile_locked) before the load of nkw; a waiter adds to nkw
 * (seq_cst) before it looks at seq: either it sees the close and does
 * not wait, or we see it here. */
static void kickkw(struct pd *d)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&d->nkw) == 0)
		return;
	for (struct m *m = atomic_load(&allm); m; m = m->alllink)
		if (atomic_load(&m->kwpd) == d)
			(void)kwait_kick(m);
}

uint32_t pd_closing(int fd)
{
	struct pd *d = pd_lookup(fd);
	if (!d || pdflags(d) == 0)
		return 0; /* nothing known: nobody can be parked on it */
	struct g *list = NULL;
	lock(&d->lock);
	/* a sole file's registration goes with its last reference, which
	 * this close is (netpoll.h pd_forkgen): no EPOLL_CTL_DEL, 1 call
	 * less per connection a server closes */
	uint32_t f = pdflags(d);
	if ((f & PD_REG) && (!(f & PD_SOLE) || atomic_load_explicit(&d->forkgen, memory_order_relaxed) !=
							   atomic_load_explicit(&pd_forkgen, memory_order_relaxed))) {
		struct epoll_event ev = { 0 };
		(void)sys4(SYS_epoll_ctl, netpoll_epfd, EPOLL_CTL_DEL, fd, &ev);
	}
	newfile_locked(d, PD_CLOSING, &list);
	uint32_t seq = atomic_load_explicit(&d->seq, memory_order_relaxed);
	unlock(&d->lock);
	readylist(list);
	kickkw(d);
	return seq;
}

void pd_closed(int fd, uint32_t seq)
{
	struct pd *d = pd_lookup(fd);
	if (!d || !seq)
		return;
	lock(&d->lock);
	if (atomic_load_explicit(&d->seq, memory_order_relaxed) == seq)
		setflags(d, 0); /* unless a new file was made there meanwhile */
	unlock(&d->lock);
}

/* ---- first use --------------------------------------------------------- */

/* d->lock held. */
static int register_locked(struct pd *d, int fd)
{
	uint32_t f = pdflags(d);
	if (f & PD_REG)
		return 0;
	if (f & PD_NOPOLL)
		return -EPERM;
	if (f & PD_CLOSING)
		return -EBADF;
	uint64_t seq = atomic_load_explicit(&d->seq, memory_order_relaxed);
	struct epoll_event ev = {
		.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET,
		.data.u64 = seq << 32 | (uint32_t)fd,
	};
	long r = sys4(SYS_epoll_ctl, netpoll_epfd, EPOLL_CTL_ADD, fd, &ev);
	if (r == -EEXIST)
		r = sys4(SYS_epoll_ctl, netpoll_epfd, EPOLL_CTL_MOD, fd, &ev);
	if (r == 0)
		setflags(d, f | PD_REG);
	else if (r == -EPERM)
		setflags(d, f | PD_NOPOLL);
	return (int)r;
}

int pd_register(struct pd *d, int fd)
{
	if (pdflags(d) & PD_REG)
		return 0;
	lock(&d->lock);
	int r = register_locked(d, fd);
	unlock(&d->lock);
	return r;
}

int64_t pd_sockopt_ns(int fd, int name)
{
	struct timeval tv = { 0, 0 };
	socklen_t len = sizeof tv;
	if (sys5(SYS_getsockopt, fd, SOL_SOCKET, name, &tv, &len) != 0)
		return 0;
	return (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
}

/* Kind and timeouts of a pollable file: how weft tries a call on it
 * without blocking (docs/hooks.md, "Trying without blocking"). */
static uint32_t probe(struct pd *d, int fd, long fl)
{
	int proto = 0;
	socklen_t len = sizeof proto;
	long r = sys5(SYS_getsockopt, fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len);
	if (r == 0) {
		/* the generation first: a timeout set after it is read again */
		uint32_t gen = atomic_load_explicit(&pd_timeogen, memory_order_acquire);
		atomic_store_explicit(&d->rtimeo, pd_sockopt_ns(fd, SO_RCVTIMEO), memory_order_relaxed);
		atomic_store_explicit(&d->wtimeo, pd_sockopt_ns(fd, SO_SNDTIMEO), memory_order_relaxed);
		atomic_store_explicit(&d->timeogen, gen, memory_order_relaxed);
		return PD_SOCK | (proto == IPPROTO_TCP ? PD_DRAINOK : 0);
	}
	/* anything else: RWF_NOWAIT until the kernel says EOPNOTSUPP */
	struct stat st;
	if (sys3(SYS_fstat, fd, &st, 0) == 0 && S_ISFIFO(st.st_mode) && !(fl & O_DIRECT))
		return PD_NOWAIT | PD_DRAINOK; /* a packet-mode pipe returns one write per read */
	return PD_NOWAIT;
}

int pd_init(struct pd *d, int fd)
{
	lock(&d->lock);
	uint32_t f = pdflags(d);
	int r = 0;
	if (f & PD_KNOWN)
		goto out;
	if (f & PD_CLOSING) {
		r = -EBADF;
		goto out;
	}
	/* the generation before the question: a change made meanwhile
	 * leaves the answer stale, and so asked again */
	uint32_t gen = atomic_load_explicit(&pd_nbgen, memory_order_acquire);
	long fl = sys3(SYS_fcntl, fd, F_GETFL, 0);
	if (fl < 0) {
		r = (int)fl;
		goto out;
	}
	if (fl & O_NONBLOCK) {
		/* the program's own non-blocking file: its calls pass
		 * through; worked out again if it makes it blocking */
		f |= PD_KNOWN | PD_USERNB;
		atomic_store_explicit(&d->nbgen, gen, memory_order_relaxed);
	} else {
		r = register_locked(d, fd);
		f = pdflags(d);
		if (r == -EPERM) {
			f |= PD_KNOWN | PD_SYSCALL;
			r = 0;
		} else if (r == 0) {
			f |= PD_KNOWN | probe(d, fd, fl);
		}
	}
	setflags(d, f);
out:
	unlock(&d->lock);
	return r;
}

/* ---- waiting ------------------------------------------------------------ */

struct waitctx {
	struct pollreq *r;
	int n;
	_Atomic int busy; /* the commit still reads r; the G may not return */
};

/* d->lock held: has r's wait already ended? */
static bool changed(struct pollreq *r)
{
	struct pd *d = r->d;
	if (atomic_load_explicit(&d->seq, memory_order_relaxed) != r->seq ||
	    (pdflags(d) & PD_CLOSING))
		return true;
	/* an epoll fd or a kernel waiter's file taken out of the epoll
	 * instance since the G registered it (unwatch_locked): it would
	 * wait unwatched */
	if ((pdflags(d) & PD_UNWATCH) && !(pdflags(d) & PD_REG))
		return true;
	if ((r->mask & PD_READ) && atomic_load_explicit(&d->rev, memory_order_relaxed) != r->rev)
		return true;
	return (r->mask & PD_WRITE) && atomic_load_explicit(&d->wev, memory_order_relaxed) != r->wev;
}

/* Runs once the G is off its stack: queue it on every descriptor, or
 * ready it at once if one of them has had an event since the snap. */
static void commit(void *arg)
{
	struct waitctx *c = arg;
	struct pollreq *r = c->r;
	bool stop = false;
	for (int i = 0; i < c->n && !stop; i++) {
		struct pd *d = r[i].d;
		lock(&d->lock);
		stop = changed(&r[i]);
		if (!stop)
			waitq_push(&d->waiters, &r[i].w);
		unlock(&d->lock);
	}
	if (stop && waiter_claim(&r[0].w))
		waiter_wake(&r[0].w);
	atomic_store_explicit(&c->busy, 0, memory_order_release);
}

int pd_wait(struct pollreq *r, int n, int64_t deadline, int reason)
{
	struct g *gp = getg();
	waiter_init(&r[0].w);
	r[0].w.ticket = r[0].mask;
	for (int i = 1; i < n; i++) {
		r[i].w = r[0].w; /* same G, same wait: one claim ends all */
		r[i].w.ticket = r[i].mask;
	}
	struct waitctx c = { r, n, 1 };
	atomic_fetch_add(&netpollwaiters, 1);
	atomic_store_explicit(&gp->blocking, 1, memory_order_relaxed); /* deadlock.c */
	bool woken = waiter_block(&r[0].w, commit, &c, reason, deadline);
	/* the commit, on the M we parked from, may still be running; if
	 * that thread lost its CPU there (a loaded machine), spinning would
	 * burn our whole time slice: give the CPU up after a little */
	for (int spin = 0; atomic_load_explicit(&c.busy, memory_order_acquire); spin++) {
		if (spin < 64)
			cpu_relax();
		else
			osyield();
	}
	atomic_store_explicit(&gp->blocking, 0, memory_order_relaxed);
	atomic_fetch_sub(&netpollwaiters, 1);
	int ret = woken ? 0 : g_interrupted() ? -EINTR : -ETIMEDOUT;
	for (int i = 0; i < n; i++) {
		struct pd *d = r[i].d;
		/* woken on its only fd: whoever claimed it took it off the
		 * queue (or the commit never queued it); nothing to undo */
		if (!(woken && n == 1)) {
			lock(&d->lock);
			if (r[i].w.queued)
				waitq_remove(&d->waiters, &r[i].w);
			unlock(&d->lock);
		}
		if (atomic_load_explicit(&d->seq, memory_order_acquire) != r[i].seq)
			ret = -EBADF;
	}
	return ret;
}

uint32_t pd_evmask(struct pollreq *r, uint64_t since)
{
	struct pd *d = r->d;
	uint32_t m = 0;
	lock(&d->lock);
	if (atomic_load_explicit(&d->seq, memory_order_relaxed) == r->seq &&
	    !(pdflags(d) & PD_CLOSING) &&
	    atomic_load_explicit(&d->evgen, memory_order_relaxed) > since)
		m = atomic_load_explicit(&d->evmask, memory_order_relaxed);
	unlock(&d->lock);
	return m;
}
