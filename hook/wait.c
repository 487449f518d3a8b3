/*
 * wait.c - waiting for many fds or for time: poll, __poll, ppoll,
 * select, pselect, epoll_wait, epoll_pwait, epoll_pwait2, the fortified
 * __poll_chk and __ppoll_chk; sleep, usleep, nanosleep, clock_nanosleep.
 *
 * On a G, a wait with a timeout first asks the kernel without waiting;
 * if nothing is ready it parks on every fd and the timer together
 * (pd_wait), and asks again when any of them fires.  The signal mask
 * of ppoll/pselect/epoll_pwait applies to those non-blocking asks.  A
 * signal handler run for the parked G (under the shim) ends the wait
 * with EINTR; these calls are never restarted (signal(7)), and sleep
 * returns the seconds left, the nanosleeps the time left.
 */
#include "hook.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

extern void __chk_fail(void) __attribute__((noreturn));
int __poll(struct pollfd *fds, nfds_t n, int timeout);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *ss,
		size_t fdslen);

DEFREAL(poll);
DEFREAL(ppoll);
DEFREAL(select);
DEFREAL(pselect);
DEFREAL(epoll_wait);
DEFREAL(epoll_pwait);
DEFREAL(epoll_pwait2);
DEFREAL(sleep);
DEFREAL(usleep);
DEFREAL(nanosleep);
DEFREAL(clock_nanosleep);

#define KSIGSET 8 /* the kernel's sigset_t size */
#define NS 1000000000LL

static bool ts_valid(const struct timespec *ts)
{
	return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < NS;
}

static int64_t ts_ns(const struct timespec *ts)
{
	if (ts->tv_sec >= INT64_MAX / NS - 1)
		return INT64_MAX / 2;
	return (int64_t)ts->tv_sec * NS + ts->tv_nsec;
}

static int64_t deadline_in(int64_t ns)
{
	return ns >= INT64_MAX / 2 ? -1 : nanotime() + ns;
}

/* A timespec that libc should handle itself: a bad one, or zero (no wait). */
static bool ts_nowait(const struct timespec *ts)
{
	return ts && (!ts_valid(ts) || ts_ns(ts) == 0);
}

/* The time left until deadline as a timeout, NULL for none. */
static struct timespec *ts_left(int64_t deadline, struct timespec *ts)
{
	if (deadline < 0)
		return NULL;
	int64_t left = deadline - nanotime();
	left = left > 0 ? left : 0;
	*ts = (struct timespec){ left / NS, left % NS };
	return ts;
}

/* ---- the set of fds a G waits on ---------------------------------------- */

struct fdset {
	struct pollreq *r;
	int n, cap;
	bool unpollable; /* an fd beyond the descriptor table */
	struct pollreq small[8];
};

static void fdset_init(struct fdset *s, size_t max)
{
	s->n = 0;
	s->unpollable = false;
	s->cap = max <= 8 ? 8 : (int)max;
	s->r = max <= 8 ? s->small : rtalloc(max * sizeof *s->r);
	if (!s->r)
		fatal("out of memory for a poll set");
}

static void fdset_free(struct fdset *s)
{
	if (s->r != s->small)
		rtfree(s->r);
}

/* Add fd for dirs, registering it with epoll.  An fd epoll refuses is a
 * regular file (always ready) or a bad fd (reported by the kernel's
 * answer): nothing to wait for. */
static void fdset_add(struct fdset *s, int fd, unsigned dirs)
{
	if (fd < 0)
		return;
	struct pd *d = pd_get(fd);
	if (!d) {
		s->unpollable = true;
		return;
	}
	if (pd_register(d, fd) < 0)
		return;
	struct pollreq *r = &s->r[s->n++];
	r->d = d;
	r->seq = atomic_load_explicit(&d->seq, memory_order_acquire);
	r->mask = dirs;
	pd_snap(r);
}

/* Park until an fd in s fires or deadline: 1 (ask again), 0 (the
 * deadline has passed), -EINTR (a signal handler ran). */
static int fdset_wait(struct fdset *s, int64_t deadline)
{
	if (deadline >= 0 && nanotime() >= deadline)
		return 0;
	struct g *gp = getg();
	int r;
	intr_arm(gp);
	if (s->n == 0) {
		r = g_sleep_until(deadline); /* 0: the deadline */
	} else {
		r = pd_wait(s->r, s->n, deadline, W_POLL);
		r = r == -ETIMEDOUT ? 0 : r == -EINTR ? -EINTR : 1;
	}
	intr_disarm(gp);
	if (r == -EINTR && hook_eintr(false) == 0)
		r = 1; /* nothing ran: ask again */
	return r;
}

/* ---- waiting in the kernel (hook.c kwait_begin) ----------------------------- */

/* After a kernel wait that returned r: true if r is the call's answer
 * (ready fds, an error, or the deadline passed); false to look again (the
 * P's timer is due, the wait was asked to end, or an EINTR from a
 * runtime signal under the shim: SIGWEFT, SIGURG; a linked program's
 * EINTR is its own handler's, the answer, unless it was our kick's). */
static bool kwait_done(long r, int64_t deadline, bool kicked)
{
	if (r == -EINTR)
		return !hook_sigrun && !kicked;
	return r != 0 || (deadline >= 0 && nanotime() >= deadline);
}

/* The timespec for a kernel wait until the absolute until (-1: NULL). */
static struct timespec *ts_until(int64_t until, struct timespec *ts)
{
	return ts_left(until, ts);
}

/* ---- poll ----------------------------------------------------------------- */

static unsigned poll_dirs(short ev)
{
	unsigned d = 0;
	if (ev & (POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND | POLLRDHUP))
		d |= PD_READ;
	if (ev & (POLLOUT | POLLWRNORM | POLLWRBAND))
		d |= PD_WRITE;
	return d ? d : PD_READ; /* POLLERR/POLLHUP only: both count as read */
}

/* What poll answers from the event that woke a wait on one fd (below):
 * the bits weft's epoll registration reports, as epoll reports them.
 * Any other bit asked for (POLLRDNORM, POLLWRBAND...) is the kernel's. */
#define POLL_FROM_EVENT (POLLIN | POLLOUT | POLLPRI | POLLRDHUP | POLLERR | POLLHUP)
_Static_assert(POLLIN == EPOLLIN && POLLOUT == EPOLLOUT && POLLPRI == EPOLLPRI &&
		       POLLRDHUP == EPOLLRDHUP && POLLERR == EPOLLERR && POLLHUP == EPOLLHUP,
	       "poll and epoll bits differ");

/* poll/ppoll on a G that would wait: deadline absolute or -1.
 *
 * A wait on one fd, without a signal mask, woken by an event that the
 * netpoller's epoll_wait returned after this look began (pd_evmask), is
 * answered from that event's mask rather than by asking again: the mask
 * is the file's whole state at that moment (edge-triggered epoll polls
 * the file when its wait returns), a moment inside this call, which is
 * what poll answers natively too.  One ppoll less per park (apache's
 * lingering close).  Several fds are asked again: their states would
 * come from different moments. */
static long g_poll(struct pollfd *fds, nfds_t n, int64_t deadline, const sigset_t *ss)
{
	struct timespec zero = { 0, 0 };
	struct fdset s;
	fdset_init(&s, n);
	long r;
	int w = 1;
	bool kdone = false;
	struct g *gp = getg();
	bool kicked = false;
	for (;;) {
		int64_t until;
		if (kwait_begin(gp, ss, deadline, &until, &kicked)) {
			struct timespec kts;
			r = kwait_syscall(SYS_ppoll, (long)fds, (long)n, (long)ts_until(until, &kts), 0,
					  KSIGSET, 0);
			kwait_end(&kicked);
			if ((kdone = kwait_done(r, deadline, kicked)))
				break;
			continue;
		}
		kicked = false;
		/* before the look: an event numbered above it was seen after */
		uint64_t since = atomic_load(&netpoll_gen);
		s.n = 0;
		for (nfds_t i = 0; i < n; i++)
			fdset_add(&s, fds[i].fd, poll_dirs(fds[i].events));
		r = sys5(SYS_ppoll, fds, n, &zero, ss, KSIGSET);
		if (r != 0 || s.unpollable || (w = fdset_wait(&s, deadline)) <= 0)
			break;
		if (n == 1 && s.n == 1 && !ss && !(fds[0].events & ~POLL_FROM_EVENT)) {
			short rev = (short)(pd_evmask(&s.r[0], since) &
					    (uint32_t)(fds[0].events | POLLERR | POLLHUP));
			if (rev) {
				fds[0].revents = rev;
				r = 1;
				break;
			}
		}
	}
	if (kdone) {
		/* the kernel's answer */
	} else if (w < 0) {
		r = w;
	} else if (r == 0 && s.unpollable) { /* cannot park on it: block the thread */
		struct timespec ts;
		blk_enter();
		r = sys5(SYS_ppoll, fds, n, ts_left(deadline, &ts), ss, KSIGSET);
		blk_exit();
	} else if (r == 0) {
		r = sys5(SYS_ppoll, fds, n, &zero, ss, KSIGSET); /* timed out: last look */
	}
	fdset_free(&s);
	return r;
}

static int do_poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (timeout == 0 || !hook_g())
		return REAL(poll)(fds, n, timeout);
	int64_t deadline = timeout < 0 ? -1 : nanotime() + (int64_t)timeout * 1000000;
	return (int)sysret(g_poll(fds, n, deadline, NULL));
}

HOOK int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return do_poll(fds, n, timeout);
}

HOOK int __poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return do_poll(fds, n, timeout);
}

HOOK int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		__chk_fail();
	return do_poll(fds, n, timeout);
}

static int do_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *ss)
{
	if (ts_nowait(ts) || !hook_g())
		return REAL(ppoll)(fds, n, ts, ss);
	return (int)sysret(g_poll(fds, n, ts ? deadline_in(ts_ns(ts)) : -1, ss));
}

HOOK int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *ss)
{
	return do_ppoll(fds, n, ts, ss);
}

HOOK int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		     const sigset_t *ss, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		__chk_fail();
	return do_ppoll(fds, n, ts, ss);
}

/* ---- select ----------------------------------------------------------------- */

#define NFDBITS_ (8 * (int)sizeof(fd_mask))

static bool isset(const fd_set *s, int fd)
{
	return s && (s->fds_bits[fd / NFDBITS_] >> (fd % NFDBITS_)) & 1;
}

/* Put the caller's sets back as they were before the kernel wrote them. */
static void sets_restore(fd_set *sets[3], const char *copy, size_t bytes)
{
	for (int k = 0; k < 3; k++)
		if (sets[k])
			memcpy(sets[k], copy + k * bytes, bytes);
}

/* select/pselect on a G that would wait.  The sets are restored from a
 * copy before every ask, and written by the kernel's last answer. */
static long g_select(int nfds, fd_set *rs, fd_set *ws, fd_set *es, int64_t deadline,
		     const sigset_t *ss)
{
	size_t bytes = (size_t)(nfds + NFDBITS_ - 1) / NFDBITS_ * sizeof(fd_mask);
	fd_set *sets[3] = { rs, ws, es };
	char small[3 * sizeof(fd_set)];
	char *copy = bytes <= sizeof(fd_set) ? small : rtalloc(3 * bytes);
	if (!copy)
		fatal("out of memory for a select set");
	for (int k = 0; k < 3; k++)
		if (sets[k])
			memcpy(copy + k * bytes, sets[k], bytes);
	struct fdset s;
	fdset_init(&s, (size_t)nfds);
	struct timespec zero = { 0, 0 };
	struct { const sigset_t *ss; size_t len; } sig = { ss, KSIGSET };
	long r;
	int w = 1;
	bool kdone = false;
	struct g *gp = getg();
	bool kicked = false;
	for (;;) {
		int64_t until;
		if (kwait_begin(gp, ss, deadline, &until, &kicked)) {
			struct timespec kts;
			sets_restore(sets, copy, bytes);
			r = kwait_syscall(SYS_pselect6, nfds, (long)rs, (long)ws, (long)es,
					  (long)ts_until(until, &kts), 0);
			kwait_end(&kicked);
			if ((kdone = kwait_done(r, deadline, kicked)))
				break;
			continue;
		}
		kicked = false;
		/* the sets as the caller gave them: an earlier ask or kernel
		 * wait that found nothing has cleared them */
		sets_restore(sets, copy, bytes);
		s.n = 0;
		for (int fd = 0; fd < nfds; fd++) {
			unsigned dirs = (isset(rs, fd) || isset(es, fd) ? PD_READ : 0) |
					(isset(ws, fd) ? PD_WRITE : 0);
			if (dirs)
				fdset_add(&s, fd, dirs);
		}
		r = sys6(SYS_pselect6, nfds, (long)rs, (long)ws, (long)es, (long)&zero, (long)&sig);
		if (r != 0 || s.unpollable || (w = fdset_wait(&s, deadline)) <= 0)
			break;
	}
	if (kdone) {
		/* the kernel's answer, sets written by it */
	} else if (w < 0) { /* EINTR: the sets as the caller gave them, as the kernel leaves them */
		sets_restore(sets, copy, bytes);
		r = w;
	} else if (r == 0) { /* last look; or, if an fd cannot be parked on, block the thread */
		struct timespec ts, *tp = s.unpollable ? ts_left(deadline, &ts) : &zero;
		sets_restore(sets, copy, bytes);
		if (s.unpollable)
			blk_enter();
		r = sys6(SYS_pselect6, nfds, (long)rs, (long)ws, (long)es, (long)tp, (long)&sig);
		if (s.unpollable)
			blk_exit();
	}
	fdset_free(&s);
	if (copy != small)
		rtfree(copy);
	return r;
}

HOOK int select(int nfds, fd_set *rs, fd_set *ws, fd_set *es, struct timeval *tv)
{
	if ((tv && ((tv->tv_sec == 0 && tv->tv_usec == 0) || tv->tv_sec < 0 || tv->tv_usec < 0 ||
		    tv->tv_usec >= 1000000)) ||
	    nfds < 0 || !hook_g())
		return REAL(select)(nfds, rs, ws, es, tv);
	int64_t deadline = -1;
	if (tv)
		deadline = deadline_in(tv->tv_sec >= INT64_MAX / NS - 1
					       ? INT64_MAX / 2
					       : (int64_t)tv->tv_sec * NS + tv->tv_usec * 1000);
	long r = g_select(nfds, rs, ws, es, deadline, NULL);
	if (tv && deadline >= 0) { /* Linux reports the time left */
		int64_t left = deadline - nanotime();
		left = left > 0 ? left : 0;
		tv->tv_sec = left / NS;
		tv->tv_usec = left % NS / 1000;
	}
	return (int)sysret(r);
}

HOOK int pselect(int nfds, fd_set *rs, fd_set *ws, fd_set *es, const struct timespec *ts,
		 const sigset_t *ss)
{
	if (ts_nowait(ts) || nfds < 0 || !hook_g())
		return REAL(pselect)(nfds, rs, ws, es, ts, ss);
	return (int)sysret(g_select(nfds, rs, ws, es, ts ? deadline_in(ts_ns(ts)) : -1, ss));
}

/* ---- epoll_wait ----------------------------------------------------------------- */

/* epoll_wait in the kernel until the absolute until (-1: none), to the
 * nanosecond where the kernel has epoll_pwait2 (5.11); a kernel wait's
 * call (kwait_syscall). */
static long epwait_until(int epfd, struct epoll_event *evs, int max, int64_t until)
{
	static _Atomic int nopwait2;
	if (until >= 0 && !atomic_load_explicit(&nopwait2, memory_order_relaxed)) {
		struct timespec ts;
		long r = kwait_syscall(SYS_epoll_pwait2, epfd, (long)evs, max,
				       (long)ts_until(until, &ts), 0, KSIGSET);
		if (r != -ENOSYS)
			return r;
		atomic_store_explicit(&nopwait2, 1, memory_order_relaxed);
	}
	int ms = -1;
	if (until >= 0) {
		int64_t left = until - nanotime();
		ms = left > 0 ? (int)((left + 999999) / 1000000) : 0;
	}
	return kwait_syscall(SYS_epoll_pwait, epfd, (long)evs, max, ms, 0, KSIGSET);
}

/* The program's epoll fd is itself pollable: park on it.  Or, when the
 * G's P has nothing else to do, wait in the kernel (kwait_begin). */
static long g_epoll(int epfd, struct epoll_event *evs, int max, int64_t deadline,
		    const sigset_t *ss)
{
	struct fdset s;
	fdset_init(&s, 1);
	long r;
	int w = 1;
	bool kdone = false;
	struct g *gp = getg();
	bool kicked = false;
	for (;;) {
		int64_t until;
		if (kwait_begin(gp, ss, deadline, &until, &kicked)) {
			r = epwait_until(epfd, evs, max, until);
			kwait_end(&kicked);
			if ((kdone = kwait_done(r, deadline, kicked)))
				break;
			continue;
		}
		kicked = false;
		s.n = 0;
		fdset_add(&s, epfd, PD_READ);
		if (s.n == 1) /* registered only while a G may park on it (pollfd.c) */
			pd_markepoll(s.r[0].d);
		r = sys6(SYS_epoll_pwait, epfd, (long)evs, max, 0, (long)ss, KSIGSET);
		if (r != 0 || s.unpollable || (w = fdset_wait(&s, deadline)) <= 0)
			break;
	}
	if (kdone) {
		/* the kernel's answer */
	} else if (w < 0) {
		r = w;
	} else if (r == 0 && s.unpollable) {
		int ms = -1;
		if (deadline >= 0) {
			int64_t left = deadline - nanotime();
			ms = left > 0 ? (int)((left + 999999) / 1000000) : 0;
		}
		blk_enter();
		r = sys6(SYS_epoll_pwait, epfd, (long)evs, max, ms, (long)ss, KSIGSET);
		blk_exit();
	}
	fdset_free(&s);
	return r;
}

HOOK int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	if (timeout == 0 || !hook_g())
		return REAL(epoll_wait)(epfd, evs, max, timeout);
	int64_t deadline = timeout < 0 ? -1 : nanotime() + (int64_t)timeout * 1000000;
	return (int)sysret(g_epoll(epfd, evs, max, deadline, NULL));
}

HOOK int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout, const sigset_t *ss)
{
	if (timeout == 0 || !hook_g())
		return REAL(epoll_pwait)(epfd, evs, max, timeout, ss);
	int64_t deadline = timeout < 0 ? -1 : nanotime() + (int64_t)timeout * 1000000;
	return (int)sysret(g_epoll(epfd, evs, max, deadline, ss));
}

HOOK int epoll_pwait2(int epfd, struct epoll_event *evs, int max, const struct timespec *ts,
		      const sigset_t *ss)
{
	if (ts_nowait(ts) || !hook_g())
		return REAL(epoll_pwait2)(epfd, evs, max, ts, ss);
	return (int)sysret(g_epoll(epfd, evs, max, ts ? deadline_in(ts_ns(ts)) : -1, ss));
}

/* ---- sleeping ------------------------------------------------------------------- */

/* Sleep ns on a G: 0, or -EINTR (a signal handler ran) with the time
 * left in *left. */
static int g_sleep_ns(int64_t ns, int64_t *left)
{
	if (ns <= 0) {
		weft_yield();
		return 0;
	}
	int64_t start = nanotime(), deadline = deadline_in(ns);
	struct g *gp = getg();
	for (;;) {
		intr_arm(gp);
		if (g_sleep_until(deadline) == 0)
			return 0;
		if (hook_eintr(false) != 0)
			break;
	}
	int64_t l = ns - (nanotime() - start);
	*left = l > 0 ? l : 0;
	return -EINTR;
}

/* Sleep on a G until the wall clock (CLOCK_REALTIME) reads at: 0, or
 * EINTR (a signal handler ran).  As the kernel's own sleep to a time on
 * that clock, a set of the clock moves the end (g_rtdeadline: the timer
 * is placed again from at): a jump forward past at ends it at once, a
 * jump back makes it longer.  (Converted to a duration, as before, it
 * ignored both.) */
static int g_sleep_rt(int64_t at)
{
	struct g *gp = getg();
	for (;;) {
		g_rtdeadline(at); /* before the clock is read: see timer.c */
		int64_t left = at - rt_realtime();
		if (left <= 0) {
			g_rtdeadline(0);
			return 0;
		}
		intr_arm(gp);
		int r = g_sleep_until(deadline_in(left));
		g_rtdeadline(0);
		/* 0: the timer fired, or the clock was set; look again (no
		 * clock watch: the wall clock may not be there yet) */
		if (r != 0 && hook_eintr(false) != 0)
			return EINTR;
	}
}

HOOK unsigned int sleep(unsigned int s)
{
	if (!hook_g())
		return REAL(sleep)(s);
	int64_t left;
	if (g_sleep_ns((int64_t)s * NS, &left) == 0)
		return 0;
	return (unsigned)(left / NS); /* whole seconds, as glibc's */
}

HOOK int usleep(useconds_t us)
{
	if (!hook_g())
		return REAL(usleep)(us);
	int64_t left;
	return g_sleep_ns((int64_t)us * 1000, &left) == 0 ? 0 : (int)sysret(-EINTR);
}

HOOK int nanosleep(const struct timespec *req, struct timespec *rem)
{
	if (!hook_g() || !req || !ts_valid(req))
		return REAL(nanosleep)(req, rem);
	int64_t left = 0;
	int r = g_sleep_ns(ts_ns(req), &left);
	if (rem)
		*rem = (struct timespec){ left / NS, left % NS };
	return r == 0 ? 0 : (int)sysret(r);
}

/* Clocks a G can sleep on: converted to a monotonic deadline. */
static bool sleepable(clockid_t clk)
{
	return clk == CLOCK_MONOTONIC || clk == CLOCK_REALTIME || clk == CLOCK_BOOTTIME ||
	       clk == CLOCK_TAI;
}

HOOK int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req,
			 struct timespec *rem)
{
	struct g *gp = hook_g();
	if (!gp || !req || !ts_valid(req))
		return REAL(clock_nanosleep)(clk, flags, req, rem);
	if (!sleepable(clk)) /* CPU-time clocks and the like: the thread sleeps */
		return BLOCKING(true, REAL(clock_nanosleep)(clk, flags, req, rem));
	int64_t ns = ts_ns(req);
	if ((flags & TIMER_ABSTIME) && clk == CLOCK_REALTIME)
		return g_sleep_rt(ns);
	if (flags & TIMER_ABSTIME) {
		struct timespec now;
		clock_gettime(clk, &now);
		ns -= ts_ns(&now);
		if (ns <= 0)
			return 0;
	}
	int64_t left = 0;
	int r = g_sleep_ns(ns, &left);
	if (rem && !(flags & TIMER_ABSTIME))
		*rem = (struct timespec){ left / NS, left % NS };
	return -r;
}
