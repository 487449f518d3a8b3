/*
 * epoll_echo -- hand-written single-threaded edge-triggered epoll echo
 * server: the "best case" peer in the echo benchmarks.
 *
 *   epoll_echo [PORT]      (0, the default, picks an ephemeral port)
 *
 * Prints "listening on PORT" once ready.  Every byte read is written back
 * exactly once.  When the socket will not take all of it, the rest is
 * parked in a per-connection buffer and the connection stops reading
 * until that buffer has drained (backpressure), so memory stays bounded.
 */
#define _GNU_SOURCE		/* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define BACKLOG 65535
#define BUF_SIZE (64 * 1024)

/* Output that the socket did not take yet; indexed by fd. */
struct pending {
	char *buf;
	size_t off, len;
};

static struct pending *pend;
static size_t npend;
static int epfd, lfd;
static char buf[BUF_SIZE];

static void drop(int fd)
{
	free(pend[fd].buf);
	memset(&pend[fd], 0, sizeof pend[fd]);
	close(fd);		/* also removes it from the epoll set */
}

/*
 * Write buf[0..len) to fd; whatever does not fit is stashed in pend[fd].
 * Returns -1 on a hard error, 1 if output is now pending, 0 if all sent.
 */
static int send_or_stash(int fd, const char *p, size_t len)
{
	struct pending *pd = &pend[fd];

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return -1;
		if (n < 0) {
			pd->buf = malloc(len);
			if (pd->buf == NULL)
				return -1;
			memcpy(pd->buf, p, len);
			pd->off = 0;
			pd->len = len;
			return 1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Flush stashed output.  Same return convention as send_or_stash(). */
static int flush(int fd)
{
	struct pending *pd = &pend[fd];

	while (pd->off < pd->len) {
		ssize_t n = write(fd, pd->buf + pd->off, pd->len - pd->off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 1 : -1;
		pd->off += (size_t)n;
	}
	free(pd->buf);
	memset(pd, 0, sizeof *pd);
	return 0;
}

/* Handle readiness on a client connection. */
static void serve(int fd, uint32_t ev)
{
	/* After a hangup, read until EOF rather than trust a short read. */
	int hup = (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
	int rc;

	if (pend[fd].buf != NULL) {
		rc = flush(fd);
		if (rc != 0) {
			if (rc < 0)
				drop(fd);
			return;	/* still blocked: wait for EPOLLOUT */
		}
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			drop(fd);	/* EOF or error */
			return;
		}
		rc = send_or_stash(fd, buf, (size_t)n);
		if (rc != 0) {
			if (rc < 0)
				drop(fd);
			return;
		}
		/*
		 * A short read means the receive queue is empty; with
		 * edge triggering, new data brings a new event.
		 */
		if ((size_t)n < sizeof buf && !hup)
			return;
	}
}

/*
 * Accept until EAGAIN.  Returns 1 if accepting had to stop for lack of
 * descriptors or memory, so the caller retries after a short sleep.
 */
static int accept_all(void)
{
	for (;;) {
		struct epoll_event ev;
		int one = 1;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EAGAIN)
				return 0;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				return 1;
			continue;	/* ECONNABORTED, EINTR, ... */
		}
		if ((size_t)fd >= npend) {
			/* Cannot happen with npend = RLIMIT_NOFILE. */
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
		ev.data.fd = fd;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			close(fd);
	}
}

int main(int argc, char **argv)
{
	struct epoll_event evs[256];
	struct sockaddr_in sa;
	struct rlimit rl;
	socklen_t len = sizeof sa;
	int port = argc > 1 ? atoi(argv[1]) : 0;
	int one = 1, retry = 0;

	signal(SIGPIPE, SIG_IGN);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	npend = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1 << 20) ?
		(1 << 20) : (size_t)rl.rlim_cur;
	pend = calloc(npend, sizeof *pend);

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (pend == NULL || lfd < 0 || epfd < 0) {
		perror("epoll_echo");
		return 1;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    listen(lfd, BACKLOG) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len) < 0) {
		perror("epoll_echo: listen");
		return 1;
	}
	evs[0].events = EPOLLIN | EPOLLET;
	evs[0].data.fd = lfd;
	epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &evs[0]);
	printf("listening on %d\n", ntohs(sa.sin_port));
	fflush(stdout);

	for (;;) {
		/* Out of fds: poll every 1 ms instead of spinning. */
		int i, n = epoll_wait(epfd, evs, 256, retry ? 1 : -1);

		if (retry)
			retry = accept_all();
		for (i = 0; i < n; i++) {
			if (evs[i].data.fd == lfd)
				retry = accept_all();
			else
				serve(evs[i].data.fd, evs[i].events);
		}
	}
}
