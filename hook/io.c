/*
 * io.c - reading and writing: read, readv, recv, recvfrom, recvmsg,
 * recvmmsg, write, writev, send, sendto, sendmsg, sendmmsg, and the
 * fortified __read_chk, __recv_chk, __recvfrom_chk.
 *
 * A read returns what one blocking read would: whatever is there once
 * something is.  A write on a file the program sees as blocking returns
 * only when all of it is written (or on an error or SO_SNDTIMEO after a
 * part, with the part's length), as the kernel's blocking write does.
 */
#include "hook.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

extern void __chk_fail(void) __attribute__((noreturn));
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);

DEFREAL(read);
DEFREAL(readv);
DEFREAL(recv);
DEFREAL(recvfrom);
DEFREAL(recvmsg);
DEFREAL(recvmmsg);
DEFREAL(write);
DEFREAL(writev);
DEFREAL(send);
DEFREAL(sendto);
DEFREAL(sendmsg);
DEFREAL(sendmmsg);

/* MSG_DONTWAIT asks for one non-blocking try: the program's answer (and
 * a G's safepoint, as a call on a file it made non-blocking: MariaDB's
 * vio reads and writes its blocking sockets so, polling on EAGAIN). */
static int io_begin_flags(struct io *io, int fd, unsigned dir, int flags)
{
	if (flags & MSG_DONTWAIT) {
		struct g *gp = rt_started() ? hook_g() : NULL;
		if (gp) {
			hook_safepoint(gp);
			if (dir == PD_WRITE)
				hook_sent(gp);
		}
		return IO_PASS;
	}
	return io_begin(io, fd, dir);
}

/* MSG_WAITALL only waits for more on a stream socket. */
static bool is_stream(int fd)
{
	int type = 0;
	socklen_t len = sizeof type;
	return sys5(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
	       type == SOCK_STREAM;
}

static size_t iovlen(const struct iovec *iov, int cnt)
{
	size_t n = 0;
	for (int i = 0; i < cnt && iov; i++)
		n += iov[i].iov_len;
	return n;
}

/* TCP (PD_DRAINOK on a socket: a short read empties it). */
static bool is_tcp(const struct io *io)
{
	uint32_t f = atomic_load_explicit(&io->r.d->flags, memory_order_relaxed);
	return (f & (PD_SOCK | PD_DRAINOK)) == (PD_SOCK | PD_DRAINOK);
}

/* A blocking receive of 0 bytes on TCP waits for data (or SO_RCVTIMEO)
 * and then returns 0 without taking any, even at the timeout: for
 * tcp_recvmsg the one pass of its loop is done (fuzzer finding 7).  Its
 * non-blocking try says EAGAIN.  (A unix stream socket says EAGAIN at
 * the timeout: the ordinary drivers.) */
static long tcp_recv0(struct io *io, const struct sc *s)
{
	for (;;) {
		io_snap(io, false);
		long r = io_try(io, s);
		if (r != -EAGAIN)
			return r;
		r = io_wait(io);
		if (r == -EAGAIN && io->expired)
			return 0;
		if (r < 0)
			return r;
	}
}

/* ---- reading ------------------------------------------------------------ */

static ssize_t do_read(int fd, void *buf, size_t n)
{
	struct io io;
	IO_SIMPLE_RECV(io_begin(&io, fd, PD_READ), REAL(read)(fd, buf, n));
	struct sc s = SC(SYS_read, fd, (long)buf, (long)n);
	return sysret(hook_recvd(io_once(&io, &s, n, true)));
}

HOOK ssize_t read(int fd, void *buf, size_t n)
{
	return do_read(fd, buf, n);
}

HOOK ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return do_read(fd, buf, n);
}

HOOK ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	struct io io;
	IO_SIMPLE_RECV(io_begin(&io, fd, PD_READ), REAL(readv)(fd, iov, cnt));
	struct sc s = SC(SYS_readv, fd, (long)iov, cnt);
	return sysret(hook_recvd(io_once(&io, &s, iovlen(iov, cnt), true)));
}

static ssize_t do_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
			   socklen_t *alen, bool isfrom)
{
	struct io io;
	int mode = io_begin_flags(&io, fd, PD_READ, flags);
	if (isfrom)
		IO_SIMPLE_RECV(mode, REAL(recvfrom)(fd, buf, n, flags, addr, alen));
	else
		IO_SIMPLE_RECV(mode, REAL(recv)(fd, buf, n, flags));
	struct sc s = SC(SYS_recvfrom, fd, (long)buf, (long)n, flags, (long)addr, (long)alen);
	if (n == 0 && is_tcp(&io))
		return sysret(tcp_recv0(&io, &s));
	/* MSG_PEEK never consumes: one peek that finds data is the answer
	 * (filling the buffer from repeated peeks would copy the same bytes
	 * again) */
	if ((flags & (MSG_WAITALL | MSG_PEEK)) == MSG_WAITALL && is_stream(fd))
		return sysret(io_all(&io, &s, n));
	/* a plain recv drains like a read - on a socket: on any other file
	 * it fails at once (ENOTSOCK) and must not wait first because a
	 * read left it empty (fuzzer finding 12) */
	return sysret(hook_recvd(io_once(&io, &s, n, flags == 0 && (io.kind & PD_SOCK))));
}

HOOK ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	return do_recvfrom(fd, buf, n, flags, NULL, NULL, false);
}

HOOK ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		__chk_fail();
	return do_recvfrom(fd, buf, n, flags, NULL, NULL, false);
}

HOOK ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
		      socklen_t *alen)
{
	return do_recvfrom(fd, buf, n, flags, addr, alen, true);
}

HOOK ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
			    struct sockaddr *addr, socklen_t *alen)
{
	if (n > buflen)
		__chk_fail();
	return do_recvfrom(fd, buf, n, flags, addr, alen, true);
}

HOOK ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct io io;
	IO_SIMPLE_RECV(io_begin_flags(&io, fd, PD_READ, flags), REAL(recvmsg)(fd, msg, flags));
	if (msg && iovlen(msg->msg_iov, (int)msg->msg_iovlen) == 0 && is_tcp(&io)) {
		struct sc s = SC(SYS_recvmsg, fd, (long)msg, flags);
		return sysret(tcp_recv0(&io, &s));
	}
	if ((flags & (MSG_WAITALL | MSG_PEEK)) == MSG_WAITALL && is_stream(fd))
		return sysret(io_allv(&io, SYS_recvmsg, msg, NULL, 0, flags));
	struct sc s = SC(SYS_recvmsg, fd, (long)msg, flags);
	return sysret(hook_recvd(io_once(&io, &s, 0, false)));
}

/* Blocking recvmmsg: wait for the first message (SO_RCVTIMEO); then,
 * unless MSG_WAITFORONE, for all vlen until timeout (checked, as the
 * kernel does, only once a message has come). */
HOOK int recvmmsg(int fd, struct mmsghdr *v, unsigned int vlen, int flags,
		  struct timespec *timeout)
{
	struct io io;
	IO_SIMPLE(io_begin_flags(&io, fd, PD_READ, flags),
		  REAL(recvmmsg)(fd, v, vlen, flags, timeout));
	int64_t end = -1;
	if (timeout)
		end = nanotime() + (int64_t)timeout->tv_sec * 1000000000 + timeout->tv_nsec;
	unsigned got = 0;
	for (;;) {
		io_snap(&io, false);
		struct sc s = SC(SYS_recvmmsg, fd, (long)(v + got), vlen - got, flags & ~MSG_WAITFORONE, 0);
		long r = io_try(&io, &s);
		if (r > 0) {
			got += (unsigned)r;
			if (got == vlen || (flags & MSG_WAITFORONE) || (end >= 0 && nanotime() >= end))
				return (int)got;
			continue;
		}
		if (r == 0)
			return (int)got;
		if (r == -EAGAIN) {
			if (got)
				io.deadline = end;
			r = io_wait(&io);
		}
		if (r < 0)
			return got ? (int)got : (int)sysret(r);
	}
}

/* ---- writing ------------------------------------------------------------ */

HOOK ssize_t write(int fd, const void *buf, size_t n)
{
	struct io io;
	IO_SIMPLE(io_begin(&io, fd, PD_WRITE), REAL(write)(fd, buf, n));
	struct sc s = SC(SYS_write, fd, (long)buf, (long)n);
	return sysret(io_all(&io, &s, n));
}

HOOK ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct io io;
	IO_SIMPLE(io_begin(&io, fd, PD_WRITE), REAL(writev)(fd, iov, cnt));
	return sysret(io_allv(&io, SYS_writev, NULL, iov, cnt, 0));
}

static ssize_t do_sendto(int fd, const void *buf, size_t n, int flags,
			 const struct sockaddr *addr, socklen_t alen, bool isto)
{
	struct io io;
	int mode = io_begin_flags(&io, fd, PD_WRITE, flags);
	if (isto)
		IO_SIMPLE(mode, REAL(sendto)(fd, buf, n, flags, addr, alen));
	else
		IO_SIMPLE(mode, REAL(send)(fd, buf, n, flags));
	struct sc s = SC(SYS_sendto, fd, (long)buf, (long)n, flags, (long)addr, alen);
	return sysret(io_all(&io, &s, n));
}

HOOK ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	return do_sendto(fd, buf, n, flags, NULL, 0, false);
}

HOOK ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr,
		    socklen_t alen)
{
	return do_sendto(fd, buf, n, flags, addr, alen, true);
}

/* A message with ancillary data may carry fds (SCM_RIGHTS): their files
 * are the receiver's too (runtime/netpoll.h pd_sole).  The control data
 * itself is not looked into: any counts.  A call passed to libc as it
 * is counts too: there msg is not read (the kernel answers EFAULT for a
 * bad one, weft must not fault on it). */
HOOK ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct io io;
	int mode = io_begin_flags(&io, fd, PD_WRITE, flags);
	if (rt_started() && (mode != IO_POLL || (msg && msg->msg_controllen)))
		pd_shared();
	IO_SIMPLE(mode, REAL(sendmsg)(fd, msg, flags));
	struct msghdr m = *msg; /* io_allv writes back lengths: not to the caller's */
	return sysret(io_allv(&io, SYS_sendmsg, &m, NULL, 0, flags));
}

/* Blocking sendmmsg: all vlen messages, parking while the socket is full. */
HOOK int sendmmsg(int fd, struct mmsghdr *v, unsigned int vlen, int flags)
{
	/* may carry fds, like sendmsg; the vector not looked into either */
	if (vlen && rt_started())
		pd_shared();
	struct io io;
	IO_SIMPLE(io_begin_flags(&io, fd, PD_WRITE, flags), REAL(sendmmsg)(fd, v, vlen, flags));
	unsigned sent = 0;
	for (;;) {
		io_snap(&io, false);
		struct sc s = SC(SYS_sendmmsg, fd, (long)(v + sent), vlen - sent, flags);
		long r = io_try(&io, &s);
		if (r > 0) {
			sent += (unsigned)r;
			if (sent >= vlen)
				return (int)sent;
			continue;
		}
		if (r == 0)
			return (int)sent;
		if (r == -EAGAIN)
			r = io_wait(&io);
		if (r < 0)
			return sent ? (int)sent : (int)sysret(r);
	}
}
