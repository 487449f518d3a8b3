/*
 * fd.c - making, connecting, duplicating and closing fds: socket,
 * socketpair, pipe, pipe2, eventfd, accept, accept4, connect, shutdown,
 * close, fclose, dup, dup2, dup3, fcntl, fcntl64, ioctl, setsockopt,
 * getsockopt.
 *
 * Files are made exactly as the program asks: weft never sets
 * O_NONBLOCK (its tries are per call, hook.c io_try).  The descriptor of
 * a new file records its kind (socket, pipe) and whether the program
 * made it non-blocking; fcntl F_SETFL and ioctl FIONBIO keep that up.
 * close and dup2 onto an fd wake the Gs parked on it with EBADF before
 * the number can be reused.
 */
#include "hook.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

DEFREAL(socket);
DEFREAL(socketpair);
DEFREAL(pipe);
DEFREAL(pipe2);
DEFREAL(eventfd);
DEFREAL(accept);
DEFREAL(accept4);
DEFREAL(connect);
DEFREAL(shutdown);
DEFREAL(close);
DEFREAL(fclose);
DEFREAL(dup);
DEFREAL(dup2);
DEFREAL(dup3);
DEFREAL(fcntl);
DEFREAL(fcntl64);
DEFREAL(ioctl);
DEFREAL(setsockopt);
DEFREAL(getsockopt);

static uint32_t fdflags(struct pd *d)
{
	return d ? atomic_load_explicit(&d->flags, memory_order_acquire) : 0;
}

static bool is_tcp(int domain, int type, int proto)
{
	return (domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
	       (proto == 0 || proto == IPPROTO_TCP);
}

/* ---- making fds ------------------------------------------------------------ */

HOOK int socket(int domain, int type, int proto)
{
	uint32_t gen = atomic_load_explicit(&pd_forkgen, memory_order_acquire); /* pd_reset_sole */
	int fd = REAL(socket)(domain, type, proto);
	if (fd >= 0 && rt_started())
		pd_reset_sole(fd, PD_SOLE | newfd_flags(type & SOCK_NONBLOCK,
							PD_SOCK | (is_tcp(domain, type, proto) ?
									   PD_DRAINOK : 0)),
			      gen);
	return fd;
}

HOOK int socketpair(int domain, int type, int proto, int sv[2])
{
	int r = REAL(socketpair)(domain, type, proto, sv);
	if (r == 0 && rt_started()) {
		uint32_t f = newfd_flags(type & SOCK_NONBLOCK, PD_SOCK);
		pd_reset(sv[0], f);
		pd_reset(sv[1], f);
	}
	return r;
}

static int do_pipe2(int fds[2], int flags, bool is2)
{
	int r = is2 ? REAL(pipe2)(fds, flags) : REAL(pipe)(fds);
	if (r == 0 && rt_started()) {
		/* a packet-mode (O_DIRECT) pipe returns one write per read */
		uint32_t f = newfd_flags(flags & O_NONBLOCK,
					 PD_NOWAIT | (flags & O_DIRECT ? 0 : PD_DRAINOK));
		pd_reset(fds[0], f);
		pd_reset(fds[1], f);
	}
	return r;
}

HOOK int pipe(int fds[2])
{
	return do_pipe2(fds, 0, false);
}

HOOK int pipe2(int fds[2], int flags)
{
	return do_pipe2(fds, flags, true);
}

HOOK int eventfd(unsigned int initval, int flags)
{
	int fd = REAL(eventfd)(initval, flags);
	if (fd >= 0 && rt_started()) /* writes: the call itself (hook.c wcall_file) */
		pd_reset(fd, newfd_flags(flags & EFD_NONBLOCK, PD_NOWAIT | PD_WCALL));
	return fd;
}

/* ---- accept and connect ------------------------------------------------------ */

static int do_accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags, bool is4)
{
	struct io io;
	int mode = io_begin(&io, fd, PD_READ);
	int r;
	switch (mode) {
	case IO_BADF:
		return (int)sysret(-EBADF);
	case IO_PASS:
	case IO_SYSCALL:
		r = BLOCKING(mode == IO_SYSCALL,
			     is4 ? REAL(accept4)(fd, addr, alen, flags) : REAL(accept)(fd, addr, alen));
		if (r >= 0 && rt_started())
			pd_reset(r, 0);
		return r;
	}
	/* no per-call flag for accept: poll, then accept4 under entersyscall */
	struct sc s = SC(SYS_accept4, fd, (long)addr, (long)alen, flags);
	uint32_t gen = atomic_load_explicit(&pd_forkgen, memory_order_acquire); /* pd_reset_sole */
	long nfd = io_once(&io, &s, 0, false);
	if (nfd >= 0) {
		bool tcp = fdflags(io.r.d) & PD_DRAINOK; /* the listener is TCP */
		pd_reset_sole((int)nfd, PD_SOLE | newfd_flags(flags & SOCK_NONBLOCK,
							      PD_SOCK | (tcp ? PD_DRAINOK : 0)),
			      gen);
	}
	return (int)sysret(nfd);
}

HOOK int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
	return do_accept4(fd, addr, alen, 0, false);
}

HOOK int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	return do_accept4(fd, addr, alen, flags, true);
}

/* One connect that does not wait.  connect has no per-call flag, so
 * this is the one place weft touches a file's O_NONBLOCK: set for the
 * length of this one system call on this thread and put back to exactly
 * what it was before the G parks (the connection goes on in the kernel
 * either way).  Another thread of the program reading F_GETFL during the
 * call itself would see it; nothing is left behind. */
static long connect_nb(int fd, const struct sockaddr *addr, socklen_t alen)
{
	long fl = sys3(SYS_fcntl, fd, F_GETFL, 0);
	if (fl < 0)
		return fl;
	long r = sys3(SYS_fcntl, fd, F_SETFL, fl | O_NONBLOCK);
	if (r < 0)
		return r;
	r = sys3(SYS_connect, fd, addr, alen);
	(void)sys3(SYS_fcntl, fd, F_SETFL, fl);
	return r;
}

/* A blocking AF_UNIX connect to a full backlog waits inside the kernel
 * for room that epoll cannot show: retry every millisecond until
 * SO_SNDTIMEO (then EAGAIN, as the kernel). */
static long connect_backoff(struct io *io, const struct sockaddr *addr, socklen_t alen)
{
	int64_t t = atomic_load_explicit(&io->r.d->wtimeo, memory_order_relaxed);
	int64_t deadline = t > 0 ? nanotime() + t : -1;
	long r;
	do {
		if (deadline >= 0 && nanotime() >= deadline)
			return -EAGAIN;
		if (io->mode == IO_POLL) {
			g_sleep_until(nanotime() + 1000000);
		} else {
			struct timespec ts = { 0, 1000000 };
			(void)sys3(SYS_nanosleep, &ts, 0, 0);
		}
		io_snap(io, false);
		r = connect_nb(io->fd, addr, alen);
	} while (r == -EAGAIN);
	return r;
}

/* Non-blocking connect, then wait until writable and read SO_ERROR;
 * getpeername tells a finished connection from a spurious wakeup
 * (ENOTCONN: still in progress).  SO_SNDTIMEO ends it with EINPROGRESS, as in the
 * kernel. */
static long connect_wait(struct io *io, const struct sockaddr *addr, socklen_t alen)
{
	int fd = io->fd;
	io_snap(io, false);
	long r = connect_nb(fd, addr, alen);
	if (r == -EAGAIN && !io_nonblock(io))
		r = connect_backoff(io, addr, alen);
	while (r == -EINPROGRESS || r == -EALREADY) {
		long w = io_wait(io);
		if (w < 0)
			return w == -EAGAIN ? -EINPROGRESS : w;
		int err = 0;
		socklen_t len = sizeof err;
		w = sys5(SYS_getsockopt, fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (w < 0)
			return w;
		if (err)
			return -err;
		/* connected, or a wakeup ahead of the handshake: a peer
		 * name tells (one call; a second connect would be four
		 * with its O_NONBLOCK set and put back) */
		struct sockaddr_storage peer;
		socklen_t plen = sizeof peer;
		io_snap(io, false); /* before the look: a later event is kept */
		w = sys3(SYS_getpeername, fd, &peer, &plen);
		if (w != -ENOTCONN)
			return w < 0 ? w : 0;
		r = -EALREADY;
	}
	return r;
}

HOOK int connect(int fd, const struct sockaddr *addr, socklen_t alen)
{
	struct io io;
	IO_SIMPLE(io_begin(&io, fd, PD_WRITE), REAL(connect)(fd, addr, alen));
	return (int)sysret(connect_wait(&io, addr, alen));
}

HOOK int shutdown(int fd, int how)
{
	int r = REAL(shutdown)(fd, how);
	struct pd *d;
	if (r == 0 && rt_started() && (d = pd_lookup(fd)) && fdflags(d))
		pd_kick(d, PD_READ | PD_WRITE); /* parked Gs retry: EOF or EPIPE */
	return r;
}

/* ---- closing ---------------------------------------------------------------- */

static bool internal_fd(int fd)
{
	return fd >= 0 && (fd == netpoll_epfd || fd == netpoll_breakfd);
}

HOOK int close(int fd)
{
	if (!rt_started())
		return REAL(close)(fd);
	if (internal_fd(fd))
		return (int)sysret(-EBADF);
	struct pd *d = pd_lookup(fd);
	bool polled = fdflags(d) & PD_REG;
	uint32_t seq = pd_closing(fd);
	int r = BLOCKING(!polled && hook_g(), REAL(close)(fd));
	pd_closed(fd, seq);
	return r;
}

/* The preload shim's stdio (hook/preload/stdio.c); absent in libweft.
 * stdio_preclose: on a G, flush a FILE whose writes park before fclose
 * runs under entersyscall (0, or EOF with errno).  stdio_detach: on any
 * thread, what the shim must free once glibc's fclose is done (a FILE of
 * its own that glibc turned into one of its plain ones), or NULL;
 * stdio_release frees it and gives fclose's result. */
int stdio_preclose(FILE *f) __attribute__((weak)) HIDDEN;
void *stdio_detach(FILE *f) __attribute__((weak)) HIDDEN;
int stdio_release(void *rec, int r) __attribute__((weak)) HIDDEN;

HOOK int fclose(FILE *f)
{
	void *rec = stdio_detach && f ? stdio_detach(f) : NULL;
	if (!rt_started() || !f) {
		int r = REAL(fclose)(f);
		return rec ? stdio_release(rec, r) : r;
	}
	bool flushfail = false;
	int ferr = 0;
	if (stdio_preclose && hook_g() && stdio_preclose(f) != 0) {
		flushfail = true;
		ferr = errno_get();
	}
	int fd = fileno(f);
	uint32_t seq = fd >= 0 ? pd_closing(fd) : 0;
	int r = BLOCKING(hook_g() != NULL, REAL(fclose)(f)); /* flushes: may block */
	pd_closed(fd, seq);
	if (flushfail && r == 0) { /* the flush failed: so does fclose, as natively */
		errno_set(ferr);
		r = EOF;
	}
	return rec ? stdio_release(rec, r) : r;
}

/* ---- duplicating -------------------------------------------------------------- */

HOOK int dup(int fd)
{
	int r = REAL(dup)(fd);
	if (r >= 0 && rt_started())
		pd_dup(fd, r);
	return r;
}

/* dup2/dup3 close newfd first: its waiters get EBADF.  Check oldfd
 * and dup3's flags first so a failing call leaves newfd alone. */
static int do_dup3(int oldfd, int newfd, int flags, bool is3)
{
	if (!rt_started() || oldfd == newfd || newfd < 0 || (is3 && (flags & ~O_CLOEXEC)) ||
	    sys3(SYS_fcntl, oldfd, F_GETFD, 0) < 0)
		return is3 ? REAL(dup3)(oldfd, newfd, flags) : REAL(dup2)(oldfd, newfd);
	if (internal_fd(newfd))
		return (int)sysret(-EBADF);
	uint32_t seq = pd_closing(newfd);
	int r = is3 ? REAL(dup3)(oldfd, newfd, flags) : REAL(dup2)(oldfd, newfd);
	if (r >= 0)
		pd_dup(oldfd, newfd);
	else
		pd_closed(newfd, seq);
	return r;
}

HOOK int dup2(int oldfd, int newfd)
{
	return do_dup3(oldfd, newfd, 0, false);
}

HOOK int dup3(int oldfd, int newfd, int flags)
{
	return do_dup3(oldfd, newfd, flags, true);
}

/* ---- modes -------------------------------------------------------------------- */

/* The program set or cleared O_NONBLOCK on fd's file (F_SETFL, FIONBIO).
 * Non-blocking: its calls pass from now on.  Blocking again: worked out
 * afresh at next use (pd_init: pollable? kind?), and every other fd's
 * hint is stale (hook.c io_begin asks the kernel again).  Lost a race
 * with a close: fine, the next file starts afresh anyway. */
static void setmode(int fd, bool nb)
{
	if (!rt_started())
		return;
	/* Made blocking: every other fd on the same open file (a dup)
	 * changed with it, so every hint is stale from now on (netpoll.h
	 * pd_nbgen).  Made non-blocking: no hint is wrong - a hint says
	 * "non-blocking" (PD_USERNB) or nothing, and a file the record
	 * calls blocking is asked again before a G parks on it
	 * (io_nonblock) - so the generation stays: a server that sets
	 * O_NONBLOCK on every accepted socket (apache) would otherwise
	 * send every other fd's next call to F_GETFL (1 more system call
	 * per request) */
	uint32_t gen = nb ? atomic_load_explicit(&pd_nbgen, memory_order_acquire)
			  : atomic_fetch_add_explicit(&pd_nbgen, 1, memory_order_acq_rel) + 1;
	struct pd *d = pd_lookup(fd);
	uint32_t f = fdflags(d);
	if (!(f & PD_KNOWN))
		return;
	if (nb) {
		lock(&d->lock);
		f = fdflags(d);
		if (f & PD_KNOWN) {
			atomic_store_explicit(&d->nbgen, gen, memory_order_relaxed);
			atomic_store_explicit(&d->flags, f | PD_USERNB, memory_order_release);
		}
		unlock(&d->lock);
		return;
	}
	if (f & PD_USERNB)
		atomic_compare_exchange_strong(&d->flags, &f, f & (PD_REG | PD_NOPOLL | PD_NODRAIN));
}

static int do_fcntl(int fd, int cmd, long arg, int (*real)(int, int, ...))
{
	int r;
	switch (cmd) {
	case F_SETFL:
		r = real(fd, cmd, arg);
		if (r == 0)
			setmode(fd, arg & O_NONBLOCK);
		return r;
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		r = real(fd, cmd, arg);
		if (r >= 0 && rt_started())
			pd_dup(fd, r);
		return r;
	case F_SETLKW:
	case F_OFD_SETLKW:
		return BLOCKING(hook_g() != NULL, real(fd, cmd, arg));
	default:
		return real(fd, cmd, arg); /* F_GETFL: the kernel's flags are the program's */
	}
}

/* fcntl's third argument, an int or a pointer: read as a long. */
#define LONG_ARG(last)                          \
	({                                      \
		va_list ap;                     \
		va_start(ap, last);             \
		long a_ = va_arg(ap, long);     \
		va_end(ap);                     \
		a_;                             \
	})

HOOK int fcntl(int fd, int cmd, ...)
{
	return do_fcntl(fd, cmd, LONG_ARG(cmd), REAL(fcntl));
}

HOOK int fcntl64(int fd, int cmd, ...)
{
	return do_fcntl(fd, cmd, LONG_ARG(cmd), REAL(fcntl64));
}

HOOK int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	int r = REAL(ioctl)(fd, req, arg);
	if (req == FIONBIO && r == 0)
		setmode(fd, *(int *)arg != 0);
	return r;
}

/* ---- socket options ------------------------------------------------------------- */

#ifndef SO_RCVTIMEO_NEW
#define SO_RCVTIMEO_NEW 66
#define SO_SNDTIMEO_NEW 67
#endif

static int64_t timeo_ns(int name, const void *val, socklen_t len)
{
	int64_t s, us;
	if (name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW) {
		if (len < 16)
			return 0;
		const int64_t *v = val; /* struct __kernel_sock_timeval */
		s = v[0];
		us = v[1];
	} else {
		if (len < sizeof(struct timeval))
			return 0;
		const struct timeval *tv = val;
		s = tv->tv_sec;
		us = tv->tv_usec;
	}
	if (s < 0 || (s == 0 && us <= 0))
		return 0;
	return s > INT64_MAX / 2000000000 ? INT64_MAX / 2 : s * 1000000000 + us * 1000;
}

HOOK int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	int r = REAL(setsockopt)(fd, level, name, val, len);
	struct pd *d;
	bool timeo = level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_RCVTIMEO_NEW ||
					     name == SO_SNDTIMEO || name == SO_SNDTIMEO_NEW);
	if (r == 0 && timeo && rt_started()) /* every dup's record is stale (netpoll.h) */
		atomic_fetch_add_explicit(&pd_timeogen, 1, memory_order_acq_rel);
	if (r != 0 || !rt_started() || !(d = pd_lookup(fd)) || !(fdflags(d) & PD_KNOWN))
		return r; /* an unknown fd reads its timeouts at first use */
	if (level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_RCVTIMEO_NEW))
		atomic_store(&d->rtimeo, timeo_ns(name, val, len));
	else if (level == SOL_SOCKET && (name == SO_SNDTIMEO || name == SO_SNDTIMEO_NEW))
		atomic_store(&d->wtimeo, timeo_ns(name, val, len));
	else if (level == IPPROTO_TCP && name == TCP_ULP) /* kTLS reads end at records */
		atomic_fetch_or(&d->flags, PD_NODRAIN);
	return r;
}

/* The kernel holds every option the program set (timeouts included). */
HOOK int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return REAL(getsockopt)(fd, level, name, val, len);
}
