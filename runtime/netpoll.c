/*
 * netpoll.c - the network poller: one edge-triggered epoll instance for
 * the whole process, and an eventfd to break a blocked epoll_wait.
 *
 * The scheduler calls netpoll(0) when it looks for work, and the one M
 * with nothing to do blocks in netpoll(delay) until the earliest timer
 * (sched.lastpoll == 0 while it does).  A G waiting for an fd parks on
 * its poll descriptor (pollfd.c / hook/); netpoll turns epoll events into
 * runnable Gs.  Every call here is a raw system call: the runtime must
 * never enter its own hooks, and errno stays untouched.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>

#include "runtime.h"
#include "netpoll.h"

int netpoll_epfd = -1;            /* the epoll instance */
int netpoll_breakfd = -1;         /* eventfd that breaks epoll_wait */
static _Atomic int32_t breaking;  /* a break is pending */
_Atomic uint64_t netpoll_gen;     /* epoll waits begun (netpoll.h) */
_Atomic int32_t netpollwaiters;   /* Gs parked on fds */

#define BREAK_TAG UINT64_MAX
#define CLOCK_TAG (UINT64_MAX - 1)

/* The clock watch (runtime.h): a timerfd on CLOCK_REALTIME armed, with
 * TFD_TIMER_CANCEL_ON_SET, at a time that never comes; the kernel makes
 * it readable, and its read fail with ECANCELED, whenever the wall clock
 * is set (clock_settime, settimeofday, adjtimex's steps; not the slewing
 * of adjtime/NTP, which moves both clocks alike).  The idea is systemd's
 * (sd-event's clock-change watch); Go has no wall-clock deadlines. */
/* Written by the maker (and a fork's child) before the timerfd is in the
 * epoll set, read by whichever M's netpoll sees its event: release and
 * acquire, since the epoll instance orders them only in the kernel (TSan
 * saw the read race with the maker's store). */
static _Atomic int clockfd = -1;
enum { CW_NONE, CW_MAKING, CW_MADE, CW_FAILED };
static _Atomic int clockstate; /* CW_*: made once, by the first caller */

/* Move one of the runtime's own fds (close-on-exec) out of the
 * program's way: to the first free number from 64 below the soft
 * RLIMIT_NOFILE, or below 1024 where the limit is higher (RT_FDCEIL).
 * Programs count on low numbers: the next open() returning the lowest
 * free fd, or fds they inherited being closed - GNU make checks whether
 * the jobserver fds in MAKEFLAGS are open, and pselect()s forever on
 * whatever now holds fd 3 if it is ours.  Not at the top of a high limit:
 * the kernel's fd table grows to the highest fd open (8 bytes a number,
 * rounded up to a power of two) and every fork and posix_spawn copies it
 * (dup_fd) - at 20,000 that was 100-300 us more per posix_spawn of a
 * program whose runtime had started, and at a limit of 1,048,576 (many
 * containers and systemd units) 8 MiB per process and per fork.  Returns
 * the new fd, or fd as it was. */
#define RT_FDCEIL 1024
int rt_fdhigh(int fd)
{
	struct rlimit rl;
	if (fd < 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 256)
		return fd;
	rlim_t top = rl.rlim_cur < RT_FDCEIL ? rl.rlim_cur : RT_FDCEIL;
	if (fd >= (long)(top - 64))
		return fd; /* the program has that many open: ours is out of the way */
	long hi = sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, (long)(top - 64));
	if (hi < 0)
		return fd;
	(void)sys3(SYS_close, fd, 0, 0);
	return (int)hi;
}

void netpollinit(void)
{
	long ep = sys3(SYS_epoll_create1, EPOLL_CLOEXEC, 0, 0);
	long bf = sys3(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK, 0);
	if (ep < 0 || bf < 0)
		fatal("netpollinit: %s", strerror((int)-(ep < 0 ? ep : bf)));
	ep = rt_fdhigh((int)ep);
	bf = rt_fdhigh((int)bf);
	netpoll_epfd = (int)ep;
	netpoll_breakfd = (int)bf;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = BREAK_TAG };
	long r = sys4(SYS_epoll_ctl, netpoll_epfd, EPOLL_CTL_ADD, netpoll_breakfd, &ev);
	if (r != 0)
		fatal("netpollinit: epoll_ctl: %s", strerror((int)-r));
}

bool netpollinited(void)
{
	return netpoll_epfd >= 0;
}

static long clockarm(void)
{
	/* 2^40 s after the epoch: never; only the cancellation matters */
	struct itimerspec it = { { 0, 0 }, { (time_t)1 << 40, 0 } };
	return sys4(SYS_timerfd_settime, atomic_load_explicit(&clockfd, memory_order_acquire),
		    TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &it, NULL);
}

bool netpoll_watchclock(void)
{
	int st = atomic_load_explicit(&clockstate, memory_order_acquire);
	if (st == CW_MADE)
		return true;
	if (st == CW_FAILED)
		return false;
	int none = CW_NONE;
	if (!atomic_compare_exchange_strong(&clockstate, &none, CW_MAKING)) {
		/* another thread is making it: a moment's wait */
		while ((st = atomic_load(&clockstate)) == CW_MAKING)
			osyield();
		return st == CW_MADE;
	}
	long fd = sys3(SYS_timerfd_create, CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK, 0);
	long r = fd;
	if (fd >= 0) {
		int cfd = rt_fdhigh((int)fd);
		atomic_store_explicit(&clockfd, cfd, memory_order_release);
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = CLOCK_TAG };
		r = clockarm();
		if (r == 0)
			r = sys4(SYS_epoll_ctl, netpoll_epfd, EPOLL_CTL_ADD, cfd, &ev);
		if (r != 0) {
			(void)sys3(SYS_close, cfd, 0, 0);
			atomic_store_explicit(&clockfd, -1, memory_order_relaxed);
		}
	}
	if (r != 0) {
		warn("cannot watch the wall clock (%s): a pthread_cond_timedwait, sem_timedwait... "
		     "deadline on CLOCK_REALTIME is a duration from when the wait begins",
		     strerror((int)-r));
		atomic_store(&clockstate, CW_FAILED);
		return false;
	}
	/* release: clockfd is set before anyone reads CW_MADE */
	atomic_store_explicit(&clockstate, CW_MADE, memory_order_release);
	return true;
}

bool netpoll_clockwatched(void)
{
	return atomic_load_explicit(&clockstate, memory_order_relaxed) == CW_MADE;
}

void netpoll_clockfork(void)
{
	/* the parent's timerfd is shared with it; the new epoll instance
	 * gets a watch of its own at the child's next realtime deadline */
	if (atomic_load(&clockstate) == CW_MADE)
		(void)sys3(SYS_close, atomic_load_explicit(&clockfd, memory_order_relaxed), 0, 0);
	atomic_store_explicit(&clockfd, -1, memory_order_relaxed);
	atomic_store(&clockstate, CW_NONE);
}

/* The clock watch is readable: ECANCELED means the wall clock was set.
 * Several Ms may poll at once; one reads the cancellation, the others
 * EAGAIN. */
static void clockevent(void)
{
	uint64_t v;
	long r = sys3(SYS_read, atomic_load_explicit(&clockfd, memory_order_acquire), &v, sizeof v);
	if (r == -ECANCELED) {
		int64_t skew = weftenv.clockset_ns;
		if (skew)
			atomic_fetch_add(&rtskew, skew);
		(void)clockarm();
		timers_clockset();
	} else if (r == sizeof v) {
		(void)clockarm(); /* the year 36812 came */
	}
}

/* Wake the M blocked in netpoll, if any.  One pending write is enough. */
void netpollbreak(void)
{
	int32_t zero = 0;
	if (!atomic_compare_exchange_strong(&breaking, &zero, 1))
		return;
	uint64_t one = 1;
	while (sys3(SYS_write, netpoll_breakfd, &one, sizeof one) == -EINTR)
		;
}

/* epoll_wait with a nanosecond timeout (epoll_pwait2, Linux 5.11). */
static long epwait(struct epoll_event *evs, int n, int64_t delay)
{
	static int nopwait2;
	atomic_fetch_add_explicit(&sched.nnetpoll, 1, memory_order_relaxed);
	if (delay > 0 && !nopwait2) {
		struct timespec ts = { delay / 1000000000, delay % 1000000000 };
		long r = sys6(SYS_epoll_pwait2, netpoll_epfd, (long)evs, n, (long)&ts, 0, 0);
		if (r != -ENOSYS)
			return r;
		nopwait2 = 1;
	}
	int ms = delay < 0 ? -1 : (int)((delay + 999999) / 1000000);
	return sys4(SYS_epoll_wait, netpoll_epfd, evs, n, ms);
}

static struct g *reverse(struct g *list)
{
	struct g *out = NULL;
	while (list) {
		struct g *next = list->schedlink;
		list->schedlink = out;
		out = list;
		list = next;
	}
	return out;
}

/* Poll for ready fds; delay < 0 blocks, 0 does not, > 0 waits up to
 * delay ns.  Returns the Gs made ready, linked through schedlink. */
struct g *netpoll(int64_t delay)
{
	struct epoll_event evs[128];
	struct g *list = NULL;
	/* seq_cst: a G's earlier read of the counter comes before this
	 * number is taken, and so before the wait (pd_evmask) */
	uint64_t gen = atomic_fetch_add(&netpoll_gen, 1) + 1;
	long n = epwait(evs, 128, delay);
	for (long i = 0; i < n; i++) {
		uint64_t tag = evs[i].data.u64;
		if (tag == CLOCK_TAG) {
			clockevent();
			continue;
		}
		if (tag == BREAK_TAG) {
			uint64_t v;
			(void)sys3(SYS_read, netpoll_breakfd, &v, sizeof v);
			atomic_store(&breaking, 0);
			continue;
		}
		pollfd_event(tag, evs[i].events, gen, &list);
	}
	return reverse(list); /* run them in the order the events came */
}
