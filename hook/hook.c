/*
 * hook.c - the machinery every hook uses: finding the real functions,
 * errno, trying a call without blocking, and the drivers that turn such
 * tries into a blocking call by parking the G.
 */
#include "hook.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* ---- the real functions ---------------------------------------------- */

static __thread int resolving;

STARTUP_TEXT void *hook_resolve(void *_Atomic *slot, const char *name)
{
	if (resolving)
		fatal("dlsym looked up %s while resolving another hooked call", name);
	resolving = 1;
	int e = errno_get();
	void *p = dlsym(RTLD_NEXT, name);
	errno_set(e);
	resolving = 0;
	if (!p)
		fatal("cannot find the real %s (dlsym RTLD_NEXT)", name);
	atomic_store_explicit(slot, p, memory_order_release);
	return p;
}

/* The runtime's start (runtime_init_once, on the thread that starts
 * it, before any G or M): every real function at once.  Invariant: no
 * G or M looks one up later (only plain threads before the start do),
 * so none waits in dlsym for a loader lock a G holds (hook.h).  A name
 * this libc lacks stays unresolved: hook_resolve says so if it is ever
 * called. */
extern struct hookreal __start_weft_hookreal[] HIDDEN, __stop_weft_hookreal[] HIDDEN;

STARTUP_TEXT void hook_resolve_all(void)
{
	int e = errno_get();
	for (struct hookreal *h = __start_weft_hookreal; h < __stop_weft_hookreal; h++) {
		if (atomic_load_explicit(&h->slot, memory_order_acquire))
			continue;
		void *p = dlsym(RTLD_NEXT, h->name);
		if (p)
			atomic_store_explicit(&h->slot, p, memory_order_release);
	}
	errno_set(e);
}

extern void (*rt_hookresolve)(void) HIDDEN;

/* The program's wall clock, for the runtime's deadlines on it
 * (rt_wallclock): clock_gettime as the program calls it - in libweft.so
 * the C library's (or an interposer's) through the PLT, in the shim its
 * own hook, which passes CLOCK_REALTIME on to the next definition. */
static int hook_wallclock(struct timespec *ts)
{
	return clock_gettime(CLOCK_REALTIME, ts);
}

/* The runtime calls hook_resolve_all through rt_hookresolve, and reads
 * the program's wall clock through rt_wallclock. */
__attribute__((constructor)) static void hook_resolve_register(void)
{
	rt_hookresolve = hook_resolve_all;
	rt_wallclock = hook_wallclock;
}

/* ---- blocking calls ------------------------------------------------------ */

/* The preload shim's: errno before the call, which runs with errno 0
 * so that blk_exit sees what the call itself set (an EPIPE left by an
 * older call must not cost a look at this thread's pending signals on
 * every blocking call after it).  Kept in the G (g->blkerrno), not the
 * OS thread: a SIGPIPE/SIGXFSZ handler that parks inside the call moves
 * the G on to another M (signal.c, kwrap). */
static inline void blk_save(void)
{
	struct g *gp;
	if (hook_sigerr && (gp = getg()) != NULL) {
		gp->blkerrno = errno_get();
		errno_set(0);
	}
}

void blk_enter(void)
{
	blk_save();
	entersyscall();
}

void blk_enter_long(void)
{
	blk_save();
	entersyscallblock();
}

void blk_exit(void)
{
	int e = errno_get();
	if (hook_sigerr) {
		struct g *gp = getg();
		if (e == 0 && gp) /* the call set none: the caller's errno as it was */
			errno_set(e = gp->blkerrno);
		else if (sigerr_e(e))
			/* a write that failed here (a file past RLIMIT_FSIZE,
			 * a pipe with no reader) left its SIGXFSZ / SIGPIPE
			 * pending on this OS thread if the G blocks it: the
			 * G's, before exitsyscall may move the G elsewhere */
			hook_sigerr(e);
	}
	exitsyscall();
	/* as the kernel on the way back from a call: the handlers of the
	 * signals sent to this G meanwhile (the preload shim's; a call a
	 * handler interrupted returns EINTR after them: sigasync.c) */
	struct g *gp = getg();
	if (unlikely(hook_sigrun != NULL) && gp &&
	    atomic_load_explicit(&gp->sigpend, memory_order_relaxed))
		(void)hook_sigrun();
	errno_set(e);
}

int g_sleep_until(int64_t deadline)
{
	struct g *gp = getg();
	bool armed = gp->introk;
	struct waiter w;
	for (;;) {
		gp->introk = armed;
		waiter_init(&w);
		if (!waiter_block(&w, NULL, NULL, W_SLEEP, deadline))
			break;
		/* nobody wakes a sleeper; be safe anyway */
	}
	gp->introk = false;
	return armed && g_interrupted() ? -EINTR : 0;
}

/* ---- waiting in the kernel (hook.h) ---------------------------------------- */

bool kwait_begin(struct g *gp, const sigset_t *ss, int64_t deadline, int64_t *until,
		 bool *kicked)
{
	if (ss || weftenv.nokwait || *kicked)
		return false;
	if (hook_sigrun && atomic_load(&gp->intrreq))
		return false; /* asked for: the park runs it */
	*until = deadline;
	return entersyscallwait(until);
}

void kwait_end(bool *kicked)
{
	*kicked = exitsyscallwait(); /* errno: untouched by the raw call and by this */
}

int (*hook_sigrun)(void);
void (*hook_sigerr)(int e);
void (*hook_cancel)(void);

long hook_eintr(bool restartable)
{
	if (hook_cancel)
		hook_cancel();
	int r = hook_sigrun ? hook_sigrun() : 0;
	if (!(r & SIGRUN_RAN) || (restartable && (r & SIGRUN_RESTART)))
		return 0;
	return -EINTR;
}

uint32_t newfd_flags(bool usernb, uint32_t kind)
{
	if (usernb)
		return PD_KNOWN | PD_USERNB; /* its calls pass: kind worked out if it changes */
	return PD_KNOWN | kind;
}

/* ---- deciding ------------------------------------------------------------- */

/* The program's O_NONBLOCK is the open file's (F_GETFL): shared by every
 * fd dup'ed from it and changed through any of them (fuzzer finding 1),
 * by another process sharing the file, or by a raw system call.  weft
 * never changes it, so the kernel's answer is the truth; PD_USERNB is
 * only a hint per fd number (netpoll.h pd_nbgen) that spares the
 * question on the fast path: a file the hint calls non-blocking has its
 * calls passed to libc while no F_SETFL/FIONBIO has been made since, and
 * a file it calls blocking is asked again only when a try would block
 * (io_nonblock), where a G would park. */

/* d (fd) was non-blocking at generation gen: a hint for the calls to
 * come, unless the file changed (close, dup2 onto fd) since seq. */
static void nb_note(struct pd *d, uint32_t seq, uint32_t gen)
{
	lock(&d->lock);
	uint32_t f = atomic_load_explicit(&d->flags, memory_order_relaxed);
	if (atomic_load_explicit(&d->seq, memory_order_relaxed) == seq && (f & PD_KNOWN) &&
	    !(f & PD_CLOSING)) {
		atomic_store_explicit(&d->nbgen, gen, memory_order_relaxed);
		atomic_store_explicit(&d->flags, f | PD_USERNB, memory_order_release);
	}
	unlock(&d->lock);
}

/* f has PD_USERNB: is fd still non-blocking?  From the hint while it is
 * current, else from the kernel; a file made blocking meanwhile is
 * worked out afresh (pd_init). */
static bool nb_still(struct pd *d, int fd, uint32_t f)
{
	/* the generation before the question: a change made meanwhile
	 * leaves what is recorded stale, and so asked again next time */
	uint32_t gen = atomic_load_explicit(&pd_nbgen, memory_order_acquire);
	if (atomic_load_explicit(&d->nbgen, memory_order_relaxed) == gen)
		return true;
	long fl = sys3(SYS_fcntl, fd, F_GETFL, 0);
	if (fl < 0)
		return true; /* let the real call report it */
	if (fl & O_NONBLOCK) {
		nb_note(d, atomic_load_explicit(&d->seq, memory_order_acquire), gen);
		return true;
	}
	/* blocking now: pollable? kind? (lost a race with a close: the
	 * next file starts afresh anyway) */
	uint32_t want = f & (PD_REG | PD_NOPOLL | PD_NODRAIN);
	atomic_compare_exchange_strong(&d->flags, &f, want);
	return false;
}

bool io_nonblock(struct io *io)
{
	uint32_t gen = atomic_load_explicit(&pd_nbgen, memory_order_acquire);
	long fl = sys3(SYS_fcntl, io->fd, F_GETFL, 0);
	if (fl < 0 || !(fl & O_NONBLOCK))
		return false; /* (a bad fd: the next call says EBADF) */
	nb_note(io->r.d, io->r.seq, gen);
	return true;
}

int io_begin(struct io *io, int fd, unsigned dir)
{
	if (fd < 0 || !rt_started())
		return IO_PASS;
	struct g *gp = hook_g();
	if (!gp)
		return IO_PASS; /* a plain thread: the file blocks as the program made it */
	if (dir == PD_WRITE)
		hook_sent(gp);
	struct pd *d = pd_get(fd);
	if (!d)
		return IO_SYSCALL;
	uint32_t f = atomic_load_explicit(&d->flags, memory_order_acquire);
	if (unlikely(f & PD_USERNB) && !(f & PD_CLOSING)) {
		if (nb_still(d, fd, f)) {
			hook_safepoint(gp);
			return IO_PASS;
		}
		f = atomic_load_explicit(&d->flags, memory_order_acquire);
	}
	if (unlikely(!(f & PD_KNOWN))) {
		if (pd_init(d, fd) < 0)
			return IO_PASS; /* let the real call report it */
		f = atomic_load_explicit(&d->flags, memory_order_acquire);
		if (f & PD_USERNB)
			return IO_PASS;
	}
	if (f & PD_CLOSING)
		return IO_BADF;
	if (f & PD_SYSCALL)
		return IO_SYSCALL;
	io->fd = fd;
	io->mode = IO_POLL;
	io->kind = f & (PD_SOCK | PD_NOWAIT | PD_WPOLL | PD_WCALL);
	io->deadline = INT64_MIN;
	io->expired = false;
	io->r.d = d;
	io->r.seq = atomic_load_explicit(&d->seq, memory_order_acquire);
	io->r.mask = dir;
	return IO_POLL;
}

/* ---- trying without blocking ----------------------------------------------- */

/* A socket: the same call with MSG_DONTWAIT.  read and write on a socket
 * are recv and send with no flags (sock_read_iter), readv and writev
 * recvmsg and sendmsg; a read of nothing returns 0 without looking at
 * the socket (a zero-length recv would take a datagram). */
static long try_sock(const struct sc *s, bool *done)
{
	long fd = s->a[0];
	*done = true;
	switch (s->nr) {
	case SYS_read:
		if (s->a[2] == 0)
			return 0;
		return sys6(SYS_recvfrom, fd, s->a[1], s->a[2], MSG_DONTWAIT, 0, 0);
	case SYS_write:
		return sys6(SYS_sendto, fd, s->a[1], s->a[2], MSG_DONTWAIT, 0, 0);
	case SYS_readv:
	case SYS_writev: {
		struct msghdr m = { .msg_iov = (struct iovec *)s->a[1], .msg_iovlen = (size_t)s->a[2] };
		if (s->nr == SYS_readv) {
			size_t n = 0;
			for (long i = 0; i < s->a[2] && s->a[2] <= IOV_MAX; i++)
				n += m.msg_iov[i].iov_len;
			if (n == 0 && s->a[2] >= 0 && s->a[2] <= IOV_MAX)
				return 0;
			return sys3(SYS_recvmsg, fd, &m, MSG_DONTWAIT);
		}
		return sys3(SYS_sendmsg, fd, &m, MSG_DONTWAIT);
	}
	case SYS_recvfrom:
	case SYS_sendto:
	case SYS_recvmmsg:
	case SYS_sendmmsg:
		return sys6(s->nr, fd, s->a[1], s->a[2], s->a[3] | MSG_DONTWAIT, s->a[4], s->a[5]);
	case SYS_recvmsg:
	case SYS_sendmsg:
		return sys3(s->nr, fd, s->a[1], s->a[2] | MSG_DONTWAIT);
	}
	*done = false; /* accept4: no per-call flag */
	return 0;
}

/* Not a socket: preadv2/pwritev2 at the current position with
 * RWF_NOWAIT (pipes, eventfd and timerfd reads).  *done false when the
 * call has no such form. */
static long try_nowait(const struct sc *s, bool *done)
{
	struct iovec one = { (void *)s->a[1], (size_t)s->a[2] };
	*done = true;
	switch (s->nr) {
	case SYS_read:
		return sys6(SYS_preadv2, s->a[0], (long)&one, 1, -1, 0, RWF_NOWAIT);
	case SYS_write:
		return sys6(SYS_pwritev2, s->a[0], (long)&one, 1, -1, 0, RWF_NOWAIT);
	case SYS_readv:
		return sys6(SYS_preadv2, s->a[0], s->a[1], s->a[2], -1, 0, RWF_NOWAIT);
	case SYS_writev:
		return sys6(SYS_pwritev2, s->a[0], s->a[1], s->a[2], -1, 0, RWF_NOWAIT);
	}
	*done = false;
	return 0;
}

/* The call s itself, under entersyscall.  Its EPIPE / EFBIG reaches the
 * shim here, on the OS thread that made it (sc_do sets no errno for
 * blk_exit to see; the caller's sysret may run on another M). */
static long sc_blocking(const struct sc *s)
{
	blk_enter();
	long r = sc_do(s);
	if (unlikely(r == -EPIPE || r == -EFBIG) && hook_sigerr)
		hook_sigerr((int)-r);
	blk_exit();
	return r;
}

/* A file whose writes refuse RWF_NOWAIT (EOPNOTSUPP) and need no poll
 * for room: an eventfd, whose write waits only while the counter would
 * pass 0xfffffffffffffffe (eventfd(2)), which practically never happens,
 * and a fanotify group, whose write (a permission answer) never waits and
 * whose poll never reports POLLOUT - a write that waited for it would park
 * for good, and the thread blocked in open(2) for the answer with it.
 * Their writes are made as the program made them, under entersyscall: one
 * system call, and should one ever wait, sysmon hands the P on as for any
 * blocking call.  Not so for the other files that refuse RWF_NOWAIT
 * writes: a named FIFO or a tty waits for room (full pipe buffer, a
 * stopped terminal), so they keep the poll (PD_WPOLL).  The kind is the
 * kernel's name for the file (anon_inode_getfd's name: fs/eventfd.c,
 * fs/notify/fanotify/fanotify_user.c); without /proc the answer is no:
 * slower for an eventfd, and a fanotify answer parks as before. */
static bool wcall_file(int fd)
{
	static const char *const want[] = { "anon_inode:[eventfd]", "anon_inode:[fanotify]" };
	char path[48] = "/proc/thread-self/fd/", dig[12], buf[32];
	size_t n = strlen(path), k = 0;
	unsigned v = (unsigned)fd;
	do
		dig[k++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (k > 0)
		path[n++] = dig[--k];
	path[n] = 0;
	long r = sys4(SYS_readlinkat, AT_FDCWD, path, buf, sizeof buf);
	for (size_t i = 0; r > 0 && i < sizeof want / sizeof want[0]; i++)
		if ((size_t)r == strlen(want[i]) && memcmp(buf, want[i], (size_t)r) == 0)
			return true;
	return false;
}

/* What a write to this file needs, learnt once (the hint stays with the
 * fd): PD_WCALL (wcall_file) or PD_WPOLL. */
static uint32_t wkind_learn(struct io *io)
{
	uint32_t k = wcall_file(io->fd) ? PD_WCALL : PD_WPOLL;
	atomic_fetch_or(&io->r.d->flags, k);
	io->kind |= k;
	return k;
}

/* Anything else: ask poll(2) without waiting, then make the call under
 * entersyscall.  If another thread takes what poll saw first, the call
 * blocks its OS thread (the P moves on after 20 us), as it would
 * natively.  A write that poll calls not ready on a file whose kind is not
 * known yet (its reads refused RWF_NOWAIT, so its writes were never
 * tried) asks wcall_file first: a fanotify group never reports POLLOUT. */
static long try_check(struct io *io, const struct sc *s)
{
	struct pollfd p = { io->fd, io->r.mask == PD_READ ? POLLIN : POLLOUT, 0 };
	long r = sys3(SYS_poll, &p, 1, 0);
	if (r < 0)
		return r;
	if (r == 0) {
		bool unknown = io->r.mask == PD_WRITE && !(io->kind & (PD_WPOLL | PD_SOCK));
		if (!unknown || wkind_learn(io) != PD_WCALL)
			return -EAGAIN;
	}
	return sc_blocking(s);
}

/* A write to a PD_WCALL file (above): the call itself. */
static bool wcall(const struct io *io)
{
	return io->r.mask == PD_WRITE && (io->kind & PD_WCALL);
}

/* A read/write/readv/writev of 0 bytes.  The kernel answers it at once
 * on every file weft polls - read(2) asks the file (a socket's read_iter
 * returns 0, a timerfd or eventfd says EINVAL), readv/writev return 0
 * without asking it - while weft's tries would not: preadv2 answers 0
 * without asking, a readiness check waits for data nobody asked for, and
 * a writev turned into sendmsg sends an empty datagram (fuzzer findings 8
 * and 9).  So it is made as the program made it. */
static bool zerolen(const struct sc *s)
{
	switch (s->nr) {
	case SYS_read:
	case SYS_write:
		return s->a[2] == 0;
	case SYS_readv:
	case SYS_writev: {
		const struct iovec *iov = (const struct iovec *)s->a[1];
		if (s->a[2] <= 0 || s->a[2] > IOV_MAX || !iov)
			return true; /* the kernel's EINVAL/EFAULT, at once */
		for (long i = 0; i < s->a[2]; i++)
			if (iov[i].iov_len)
				return false;
		return true;
	}
	}
	return false;
}

/* A call only a socket answers (recv, send, accept...).  On any other
 * file the kernel refuses it at once (ENOTSOCK), while weft's readiness
 * check would wait for data first (fuzzer finding 10: recvmsg on an
 * empty eventfd parked forever). */
static bool sockcall(const struct sc *s)
{
	switch (s->nr) {
	case SYS_recvfrom:
	case SYS_sendto:
	case SYS_recvmsg:
	case SYS_sendmsg:
	case SYS_recvmmsg:
	case SYS_sendmmsg:
	case SYS_accept4:
		return true;
	}
	return false;
}

/* A read on a socket whose try said EAGAIN after a hangup was seen
 * (PD_NODRAIN).  A datagram socket shut for reading answers a blocking
 * read with 0 (its wait sees the shutdown) but a non-blocking one with
 * EAGAIN (fuzzer finding 4), and no further event comes: once poll says
 * POLLRDHUP, make the blocking call itself, which cannot wait for
 * anything more (a stream socket in that state answers 0 to both). */
static long try_hup(struct io *io, const struct sc *s)
{
	struct pollfd p = { io->fd, POLLRDHUP, 0 };
	if (sys3(SYS_poll, &p, 1, 0) != 1 || !(p.revents & POLLRDHUP))
		return -EAGAIN;
	return sc_blocking(s);
}

long io_try(struct io *io, const struct sc *s)
{
	bool done = false;
	long r = 0;
	if (zerolen(s) || (!(io->kind & PD_SOCK) && sockcall(s)) || wcall(io)) {
		/* the call itself, under entersyscall all the same */
		return sc_blocking(s);
	}
	if (io->kind & PD_SOCK) {
		r = try_sock(s, &done);
		if (done && r == -EAGAIN && io->r.mask == PD_READ &&
		    (atomic_load_explicit(&io->r.d->flags, memory_order_acquire) & PD_NODRAIN))
			r = try_hup(io, s);
	} else if ((io->kind & PD_NOWAIT) && !(io->r.mask == PD_WRITE && (io->kind & PD_WPOLL))) {
		r = try_nowait(s, &done);
		if (done && r == -EOPNOTSUPP) {
			/* the kernel does not honour RWF_NOWAIT for this file
			 * (named FIFO, tty, inotify) or for its writes only
			 * (eventfd): poll first from now on, in that direction
			 * only (an eventfd's reads keep asking the file, which
			 * refuses a short read at once: fuzzer finding 11), or
			 * for an eventfd's or a fanotify group's writes make
			 * the call (wcall_file).
			 * Should the fd have been closed and reused meanwhile,
			 * the new file gets a wrong hint: PD_WPOLL costs a
			 * poll, PD_WCALL a blocked OS thread, never a result. */
			uint32_t drop = 0;
			if (io->r.mask == PD_WRITE)
				drop = wkind_learn(io);
			else {
				atomic_fetch_and(&io->r.d->flags, ~(uint32_t)PD_NOWAIT);
				io->kind = 0;
			}
			if (drop == PD_WCALL)
				r = sc_blocking(s);
			else
				done = false;
		}
	}
	return done ? r : try_check(io, s);
}

bool io_snap(struct io *io, bool drains)
{
	if (io->mode != IO_POLL)
		return false;
	pd_snap(&io->r);
	if (!drains)
		return false;
	struct pd *d = io->r.d;
	uint32_t f = atomic_load_explicit(&d->flags, memory_order_relaxed);
	return (f & (PD_DRAINOK | PD_NODRAIN)) == PD_DRAINOK &&
	       atomic_load_explicit(&d->rdrain, memory_order_relaxed) == io->r.rev + 1;
}

/* A short read (or none) on a stream that was not at EOF leaves it
 * empty: nothing more until the next read-side event. */
void io_drained(struct io *io, long r, size_t want)
{
	if (io->mode != IO_POLL || want == 0)
		return;
	struct pd *d = io->r.d;
	uint32_t f = atomic_load_explicit(&d->flags, memory_order_relaxed);
	if ((f & (PD_DRAINOK | PD_NODRAIN)) != PD_DRAINOK)
		return;
	if (r == -EAGAIN || (r > 0 && (size_t)r < want))
		atomic_store_explicit(&d->rdrain, io->r.rev + 1, memory_order_relaxed);
	else if (r > 0)
		atomic_store_explicit(&d->rdrain, 0, memory_order_relaxed);
}

/* ---- waiting -------------------------------------------------------------- */

static int64_t io_deadline(struct io *io)
{
	if (io->deadline == INT64_MIN) {
		struct pd *d = io->r.d;
		uint32_t gen = atomic_load_explicit(&pd_timeogen, memory_order_acquire);
		if ((io->kind & PD_SOCK) &&
		    atomic_load_explicit(&d->timeogen, memory_order_relaxed) != gen) {
			/* a timeout set since (perhaps through a dup), or a new
			 * file's (an accepted socket inherits its listener's) */
			atomic_store_explicit(&d->rtimeo, pd_sockopt_ns(io->fd, SO_RCVTIMEO),
					      memory_order_relaxed);
			atomic_store_explicit(&d->wtimeo, pd_sockopt_ns(io->fd, SO_SNDTIMEO),
					      memory_order_relaxed);
			atomic_store_explicit(&d->timeogen, gen, memory_order_relaxed);
		}
		int64_t t = atomic_load_explicit(io->r.mask == PD_READ ? &d->rtimeo : &d->wtimeo,
						 memory_order_relaxed);
		io->deadline = t > 0 ? nanotime() + t : -1;
	}
	return io->deadline;
}

long io_wait(struct io *io)
{
	/* a would-block try on a file the program made non-blocking
	 * (perhaps through a dup, or another process): its answer is
	 * EAGAIN, now.  Not asked of a file only this fd reaches (under
	 * the shim: runtime/netpoll.h pd_sole), whose flag the hooks saw
	 * set if it was */
	if (!pd_sole(io->r.d) && io_nonblock(io))
		return -EAGAIN;
	int64_t deadline = io_deadline(io);
	pd_unmarkkwait(io->r.d); /* waited for by a park now: stays watched */
	long r = pd_register(io->r.d, io->fd);
	if (r < 0)
		return r;
	int reason = io->r.mask == PD_READ ? W_IO_READ : W_IO_WRITE;
	struct g *gp = getg();
	intr_arm(gp);
	r = pd_wait(&io->r, 1, deadline, reason);
	intr_disarm(gp);
	if (r == -EINTR) /* a socket timeout makes it never restarted (signal(7)) */
		return hook_eintr(deadline < 0); /* 0: the caller retries its call */
	if (r == -ETIMEDOUT) {
		/* A socket read's timeout may win the race with the
		 * netpoller's first event, a hangup that was there all along:
		 * a datagram socket shut for reading answers a blocking read
		 * with 0 at once, timeout or not (fuzzer finding 13, a 1 us
		 * SO_RCVTIMEO).  If poll says so now, that is the event: try
		 * once more (try_hup makes the call).  Once per call: the
		 * deadline has passed, a second timeout is the answer. */
		bool again = !io->expired && io->r.mask == PD_READ && (io->kind & PD_SOCK);
		io->expired = true;
		if (again) {
			struct pollfd p = { io->fd, POLLRDHUP, 0 };
			if (sys3(SYS_poll, &p, 1, 0) == 1 && (p.revents & POLLRDHUP)) {
				atomic_fetch_or(&io->r.d->flags, PD_NODRAIN);
				return 0;
			}
		}
		return -EAGAIN;
	}
	return r;
}

/* ---- waiting in the kernel ------------------------------------------------------ */

/* May s, about to park, be made in the kernel as the program made it
 * instead (io_kcall)?  A read-side call that one blocking system call
 * answers whole: read, readv, recvfrom (a recv with MSG_DONTWAIT never
 * gets here), recvmsg, accept4.  Not a write: a blocking write returns
 * only when all of it is written, which weft does by parts (io_all). */
static bool kcall_ok(const struct io *io, const struct sc *s)
{
	if (io->r.mask != PD_READ)
		return false;
	switch (s->nr) {
	case SYS_read:
	case SYS_readv:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_accept4:
		return true;
	}
	return false;
}

/* The call s made as it is, waiting in the kernel on this M while the
 * G's P has nothing else to run (kwait_begin, docs/hooks.md "Waiting in
 * the kernel"): true with *out its answer, false to park instead (the P
 * is wanted, a signal or a cancellation for the G, a timer of the P
 * pending: a read takes no timeout).  The file's flags are the
 * program's, so this is the program's own blocking call: a blocking
 * read returns what it read or fails having read nothing, so the kick
 * that ends the wait (EINTR; with SA_RESTART too: the kernel's restart
 * rewinds into kwait_syscall's window, which answers EINTR) loses no
 * byte, and the park that follows retries the call (io_once).  An
 * EAGAIN is the kernel's answer too: the file is non-blocking after all
 * (remembered as a hint: io_nonblock), or its SO_RCVTIMEO passed. */
static bool io_kcall(struct io *io, const struct sc *s, bool *kicked, long *out)
{
	struct g *gp = getg();
	for (;;) {
		int64_t until;
		if (!kwait_begin(gp, NULL, KWAIT_NOBOUND, &until, kicked))
			return false;
		int64_t t0 = nanotime();
		struct pd *d = io->r.d;
		struct m *m = getm();
		/* before the call: an event that finds no G parked on the
		 * file takes it out of weft's epoll instance (pollfd.c) */
		pd_markkwait(d);
		/* a close of the file asks this wait to end (pollfd.c
		 * kickkw): say so (seq_cst add), then look whether it is
		 * closed already (seq_cst loads) */
		atomic_store_explicit(&m->kwpd, d, memory_order_relaxed);
		atomic_fetch_add(&d->nkw, 1);
		bool gone = atomic_load(&d->seq) != io->r.seq || (atomic_load(&d->flags) & PD_CLOSING);
		long r = gone ? -EINTR : kwait_syscall(s->nr, s->a[0], s->a[1], s->a[2], s->a[3], s->a[4], s->a[5]);
		atomic_fetch_sub(&d->nkw, 1);
		atomic_store_explicit(&m->kwpd, NULL, memory_order_relaxed);
		kwait_end(kicked);
		if (gone)
			return false; /* the park answers EBADF (io_wait) */
		if (r == -EINTR && *kicked) {
			/* the park's SO_RCVTIMEO deadline counts from the call */
			if (io->deadline == INT64_MIN && io_deadline(io) >= 0)
				io->deadline -= nanotime() - t0;
			return false;
		}
		if (r == -EINTR && hook_sigrun)
			continue; /* a runtime signal on this M under the shim: not the program's */
		if (r == -EAGAIN)
			(void)io_nonblock(io);
		*out = r;
		return true;
	}
}

/* ---- drivers ---------------------------------------------------------------- */

long io_once(struct io *io, const struct sc *s, size_t want, bool drains)
{
	/* a read of 0 bytes never waits for data: always try it */
	drains = drains && want > 0;
	bool kok = kcall_ok(io, s), kicked = false;
	/* where weft's try is a readiness check and then the call (try_check:
	 * accept4, a tty or a named FIFO), the kernel's blocking call is one
	 * system call where the try is two: with nothing else for the P to
	 * run, that first */
	bool kfirst = kok && (s->nr == SYS_accept4 || !(io->kind & (PD_SOCK | PD_NOWAIT)));
	for (;;) {
		long r;
		if (kfirst && io_kcall(io, s, &kicked, &r)) {
			if (drains)
				io_drained(io, r, want);
			return r;
		}
		if (!io_snap(io, drains)) {
			r = io_try(io, s);
			if (drains)
				io_drained(io, r, want);
			if (r != -EAGAIN)
				return r;
		}
		/* nothing there (or a short read left it empty): the G would
		 * park; with nothing else for its P, the call waits in the
		 * kernel instead (an idle thread-per-connection server: the
		 * read and the write per message, as natively) */
		if (kok && !kfirst && io_kcall(io, s, &kicked, &r)) {
			if (drains)
				io_drained(io, r, want);
			return r;
		}
		long w = io_wait(io);
		kicked = false;
		if (w < 0)
			return w;
	}
}

/* A socket that has moved part of a call's bytes and now holds an
 * error (POLLERR: a reset, an ICMP error).  The kernel's own loop for a
 * blocking send or a recv with MSG_WAITALL returns what it moved then and
 * leaves the error for the next call (tcp_sendmsg's do_error,
 * tcp_recvmsg's break once copied); the next try of weft's loop would
 * take it instead (sock_error) and return the count, so the program never
 * saw the reset: its next read said 0, end of file (fuzzer finding 15).
 * Only sockets: a pipe whose reader went away mid-write sends SIGPIPE
 * from within that very call natively, which the try still does. */
static bool part_then_error(const struct io *io, size_t done)
{
	if (!done || !(io->kind & PD_SOCK))
		return false;
	struct pollfd p = { io->fd, 0, 0 };
	return sys3(SYS_poll, &p, 1, 0) == 1 && (p.revents & POLLERR);
}

long io_all(struct io *io, struct sc *s, size_t len)
{
	char *buf = (char *)s->a[1];
	size_t done = 0;
	for (;;) {
		if (part_then_error(io, done))
			return (long)done;
		io_snap(io, false);
		s->a[1] = (long)(buf + done);
		s->a[2] = (long)(len - done);
		long r = io_try(io, s);
		if (r > 0 && (io->kind & PD_WCALL))
			return (long)(done + (size_t)r); /* one call: an eventfd takes 8 of 16 */
		if (r > 0) {
			done += (size_t)r;
			if (done >= len)
				return (long)done;
			continue;
		}
		if (r == 0)
			return (long)done; /* EOF, or nothing asked */
		if (r == -EAGAIN)
			r = io_wait(io);
		if (r < 0)
			return done ? (long)done : r;
	}
}

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t n = 0;
	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* Drop the first n bytes from the iovec *v[0..*cnt).  The caller's
 * array is never written: the first time an entry must be cut, the rest
 * is copied into own[] (or rtalloc'd, returned in *heap to free). */
static void iov_skip(struct iovec **v, int *cnt, size_t n, struct iovec *own, int ownmax,
		     bool *owned, struct iovec **heap)
{
	while (*cnt > 0 && n >= (*v)[0].iov_len) {
		n -= (*v)[0].iov_len;
		(*v)++;
		(*cnt)--;
	}
	if (*cnt == 0 || n == 0)
		return;
	if (!*owned) {
		struct iovec *c = own;
		if (*cnt > ownmax && !(c = *heap = rtalloc((size_t)*cnt * sizeof *c)))
			fatal("out of memory copying an iovec");
		memcpy(c, *v, (size_t)*cnt * sizeof *c);
		*v = c;
		*owned = true;
	}
	(*v)[0].iov_base = (char *)(*v)[0].iov_base + n;
	(*v)[0].iov_len -= n;
}

long io_allv(struct io *io, long nr, struct msghdr *msg, const struct iovec *iov, int cnt,
	     int flags)
{
	struct iovec own[16], *v = (struct iovec *)iov, *heap = NULL;
	bool owned = false;
	struct msghdr m;
	if (msg) {
		m = *msg;
		v = msg->msg_iov;
		cnt = (int)msg->msg_iovlen;
	}
	size_t total = iov_total(v, cnt), done = 0;
	long r = 0;
	for (;;) {
		if (part_then_error(io, done))
			break;
		io_snap(io, false);
		if (msg) {
			m.msg_iov = v;
			m.msg_iovlen = (size_t)cnt;
			struct sc s = SC(nr, io->fd, (long)&m, flags);
			r = io_try(io, &s);
		} else {
			struct sc s = SC(nr, io->fd, (long)v, cnt);
			r = io_try(io, &s);
		}
		if (r > 0) {
			if (msg && done == 0) {
				/* names and ancillary data go with the first part */
				msg->msg_namelen = m.msg_namelen;
				msg->msg_controllen = m.msg_controllen;
				msg->msg_flags = m.msg_flags;
				m.msg_control = m.msg_name = NULL;
				m.msg_controllen = m.msg_namelen = 0;
			}
			done += (size_t)r;
			if (done >= total || (io->kind & PD_WCALL))
				break; /* PD_WCALL: one call, as io_all */
			iov_skip(&v, &cnt, (size_t)r, own, 16, &owned, &heap);
			continue;
		}
		if (r == 0)
			break; /* EOF, or nothing asked */
		if (r == -EAGAIN)
			r = io_wait(io);
		if (r < 0)
			break;
	}
	rtfree(heap);
	return done || r >= 0 ? (long)done : r;
}
