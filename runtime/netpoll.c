/*
 * netpoll.c - the network poller: one edge-triggered epoll instance for
 * the whole process, and an eventfd to break a blocked epoll_wait.
 *
 * The scheduler calls netpoll(0) when it looks for work, and the one M
 * with nothing to do blocks in netpoll(delay) until the earliest timer
 * (sched.lastpoll == 0 while it does).  A G waiting for an fd parks on
 * its poll descriptor (pollfd.c / hook/); netpoll turns epoll events into
 * runnable Gs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "netpoll.h"

int netpoll_epfd = -1;           /* the epoll instance */
static int breakfd = -1;          /* eventfd that breaks epoll_wait */
static _Atomic int32_t breaking;  /* a break is pending */
_Atomic int32_t netpollwaiters;   /* Gs parked on fds */

#define BREAK_TAG UINT64_MAX

void netpollinit(void)
{
	netpoll_epfd = epoll_create1(EPOLL_CLOEXEC);
	breakfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (netpoll_epfd < 0 || breakfd < 0)
		fatal("netpollinit: %s", strerror(errno));
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = BREAK_TAG };
	if (epoll_ctl(netpoll_epfd, EPOLL_CTL_ADD, breakfd, &ev) != 0)
		fatal("netpollinit: epoll_ctl: %s", strerror(errno));
}

bool netpollinited(void)
{
	return netpoll_epfd >= 0;
}

/* Wake the M blocked in netpoll, if any.  One pending write is enough. */
void netpollbreak(void)
{
	int32_t zero = 0;
	if (!atomic_compare_exchange_strong(&breaking, &zero, 1))
		return;
	uint64_t one = 1;
	int e = errno;
	while (write(breakfd, &one, sizeof one) < 0 && errno == EINTR)
		;
	errno = e;
}

/* epoll_wait with a nanosecond timeout (epoll_pwait2, Linux 5.11). */
static int epwait(struct epoll_event *evs, int n, int64_t delay)
{
	static int nopwait2;
	if (delay > 0 && !nopwait2) {
		struct timespec ts = { delay / 1000000000, delay % 1000000000 };
		long r = syscall(SYS_epoll_pwait2, netpoll_epfd, evs, n, &ts, NULL, 0);
		if (r >= 0 || errno != ENOSYS)
			return (int)r;
		nopwait2 = 1;
	}
	int ms = delay < 0 ? -1 : (int)((delay + 999999) / 1000000);
	return epoll_wait(netpoll_epfd, evs, n, ms);
}

/* Poll for ready fds; delay < 0 blocks, 0 does not, > 0 waits up to
 * delay ns.  Returns the Gs made ready, linked through schedlink. */
struct g *netpoll(int64_t delay)
{
	struct epoll_event evs[128];
	struct g *list = NULL;
	int e = errno;
	int n = epwait(evs, 128, delay);
	if (n < 0) {
		errno = e;
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		uint64_t tag = evs[i].data.u64;
		if (tag == BREAK_TAG) {
			uint64_t v;
			ssize_t r = read(breakfd, &v, sizeof v);
			(void)r;
			atomic_store(&breaking, 0);
			continue;
		}
		pollfd_event(tag, evs[i].events, &list);
	}
	errno = e;
	return list;
}
