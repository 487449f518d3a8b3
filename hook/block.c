/*
 * block.c - calls that cannot be made non-blocking: opening, file I/O
 * at an offset, syncing, stat, and the resolver.  On a G they run under
 * entersyscall (syncing and the resolver under entersyscallblock: it
 * hands the P on at once, unless the resolver is asked about numbers
 * only), so other Gs keep
 * running while the OS thread waits; the
 * call itself, its result and its errno are libc's.
 * docs/hooks.md has the measurement behind entersyscall rather than a
 * thread pool for regular files.
 */
#include "hook.h"

#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

extern void __chk_fail(void) __attribute__((noreturn));
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);

/* A hook that runs the real call under entersyscall on a G. */
#define BLOCKING_HOOK(ret, name, params, args)                  \
	DEFREAL(name);                                          \
	HOOK ret name params                                    \
	{                                                       \
		return BLOCKING(hook_g() != NULL, REAL(name) args); \
	}

/* ---- opening: a new file at the returned fd --------------------------- */

static int opened(int fd)
{
	if (fd >= 0 && rt_started())
		pd_reset(fd, 0);
	return fd;
}

static bool has_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* open's optional third argument, present when flags say so. */
#define MODE_ARG(flags)                                        \
	({                                                     \
		mode_t m_ = 0;                                 \
		if (has_mode(flags)) {                         \
			va_list ap;                            \
			va_start(ap, flags);                   \
			m_ = va_arg(ap, mode_t);               \
			va_end(ap);                            \
		}                                              \
		m_;                                            \
	})

#define OPEN_HOOK(name)                                                             \
	DEFREAL(name);                                                              \
	HOOK int name(const char *path, int flags, ...)                             \
	{                                                                           \
		mode_t mode = MODE_ARG(flags);                                      \
		return opened(BLOCKING(hook_g() != NULL, REAL(name)(path, flags, mode))); \
	}

#define OPENAT_HOOK(name)                                                           \
	DEFREAL(name);                                                              \
	HOOK int name(int dirfd, const char *path, int flags, ...)                  \
	{                                                                           \
		mode_t mode = MODE_ARG(flags);                                      \
		return opened(BLOCKING(hook_g() != NULL,                            \
				       REAL(name)(dirfd, path, flags, mode)));      \
	}

OPEN_HOOK(open)
OPEN_HOOK(open64)
OPENAT_HOOK(openat)
OPENAT_HOOK(openat64)

DEFREAL(creat);
HOOK int creat(const char *path, mode_t mode)
{
	return opened(BLOCKING(hook_g() != NULL, REAL(creat)(path, mode)));
}

DEFREAL(creat64);
HOOK int creat64(const char *path, mode_t mode)
{
	return opened(BLOCKING(hook_g() != NULL, REAL(creat64)(path, mode)));
}

/* ---- I/O at an offset (files only: sockets and pipes give ESPIPE) ------ */

BLOCKING_HOOK(ssize_t, pread, (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off))
BLOCKING_HOOK(ssize_t, pread64, (int fd, void *buf, size_t n, off64_t off), (fd, buf, n, off))
BLOCKING_HOOK(ssize_t, pwrite, (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off))
BLOCKING_HOOK(ssize_t, pwrite64, (int fd, const void *buf, size_t n, off64_t off),
	      (fd, buf, n, off))
BLOCKING_HOOK(ssize_t, preadv, (int fd, const struct iovec *iov, int cnt, off_t off),
	      (fd, iov, cnt, off))
BLOCKING_HOOK(ssize_t, preadv64, (int fd, const struct iovec *iov, int cnt, off64_t off),
	      (fd, iov, cnt, off))
BLOCKING_HOOK(ssize_t, pwritev, (int fd, const struct iovec *iov, int cnt, off_t off),
	      (fd, iov, cnt, off))
BLOCKING_HOOK(ssize_t, pwritev64, (int fd, const struct iovec *iov, int cnt, off64_t off),
	      (fd, iov, cnt, off))

HOOK ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return pread(fd, buf, n, off);
}

HOOK ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return pread64(fd, buf, n, off);
}

/* A hook for a call known to block long: on a G it hands the P on at
 * once when Gs wait (entersyscallblock), not a sysmon round later. */
#define LONG_HOOK(ret, name, params, args)                     \
	DEFREAL(name);                                         \
	HOOK ret name params                                   \
	{                                                      \
		if (!hook_g())                                 \
			return REAL(name) args;                \
		blk_enter_long();                              \
		ret r = REAL(name) args;                       \
		blk_exit();                                    \
		return r;                                      \
	}

/* Syncing waits for the disk (ms here) whenever the file has anything
 * dirty: known to block long; a sync with nothing to write costs a
 * spare's wake-up more.  16 threads in pwrite + fsync (sysbench
 * fileio): 253-258k events in 4 s, against 203-220k under entersyscall
 * (docs/benchmarks.md, session 15). */
LONG_HOOK(int, fsync, (int fd), (fd))
LONG_HOOK(int, fdatasync, (int fd), (fd))

/* ---- stat ------------------------------------------------------------------ */

BLOCKING_HOOK(int, stat, (const char *path, struct stat *st), (path, st))
BLOCKING_HOOK(int, lstat, (const char *path, struct stat *st), (path, st))
BLOCKING_HOOK(int, fstat, (int fd, struct stat *st), (fd, st))
BLOCKING_HOOK(int, fstatat, (int dirfd, const char *path, struct stat *st, int flags),
	      (dirfd, path, st, flags))
BLOCKING_HOOK(int, stat64, (const char *path, struct stat64 *st), (path, st))
BLOCKING_HOOK(int, lstat64, (const char *path, struct stat64 *st), (path, st))
BLOCKING_HOOK(int, fstat64, (int fd, struct stat64 *st), (fd, st))
BLOCKING_HOOK(int, fstatat64, (int dirfd, const char *path, struct stat64 *st, int flags),
	      (dirfd, path, st, flags))
BLOCKING_HOOK(int, statx,
	      (int dirfd, const char *path, int flags, unsigned int mask, struct statx *st),
	      (dirfd, path, flags, mask, st))

/* ---- the resolver: known to block long, hand the P on at once ------------- */

/* Calls that name numeric addresses and ports only: glibc answers them
 * without a lookup or a file (a number is parsed or printed; at most a
 * netlink question to the kernel for AI_ADDRCONFIG, or an interface
 * name for an IPv6 scope), so they run on the G as they are.  A server
 * that names both ends of every connection this way (varnish's
 * VTCP_name: NI_NUMERICHOST | NI_NUMERICSERV) otherwise handed its P on
 * twice per connection, waking or making an M each time while other Gs
 * were runnable.  Anything else (a name, a service name, AI_CANONNAME,
 * IDN) may wait on DNS or NSS and keeps the hand-off. */
static bool numeric_node(const char *node)
{
	unsigned char a[16];
	return !node || inet_pton(AF_INET, node, a) == 1 || inet_pton(AF_INET6, node, a) == 1;
}

static bool numeric_service(const char *service)
{
	if (!service)
		return true;
	if (!*service)
		return false;
	for (const char *c = service; *c; c++)
		if (*c < '0' || *c > '9')
			return false;
	return true;
}

static bool gai_numeric(const char *node, const char *service, const struct addrinfo *hints)
{
	int f = hints ? hints->ai_flags : 0;
	if (f & (AI_CANONNAME | AI_IDN | AI_CANONIDN))
		return false;
	return ((f & AI_NUMERICHOST) || numeric_node(node)) &&
	       ((f & AI_NUMERICSERV) || numeric_service(service));
}

DEFREAL(getaddrinfo);
HOOK int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		     struct addrinfo **res)
{
	if (!hook_g() || gai_numeric(node, service, hints))
		return REAL(getaddrinfo)(node, service, hints, res);
	blk_enter_long();
	int r = REAL(getaddrinfo)(node, service, hints, res);
	blk_exit();
	return r;
}

DEFREAL(getnameinfo);
HOOK int getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
		     char *serv, socklen_t servlen, int flags)
{
	bool numeric = (!host || !hostlen || (flags & NI_NUMERICHOST)) &&
		       (!serv || !servlen || (flags & NI_NUMERICSERV));
	if (!hook_g() || numeric)
		return REAL(getnameinfo)(sa, salen, host, hostlen, serv, servlen, flags);
	blk_enter_long();
	int r = REAL(getnameinfo)(sa, salen, host, hostlen, serv, servlen, flags);
	blk_exit();
	return r;
}
LONG_HOOK(struct hostent *, gethostbyname, (const char *name), (name))
LONG_HOOK(int, gethostbyname_r,
	      (const char *name, struct hostent *ret, char *buf, size_t buflen,
	       struct hostent **result, int *h_errnop),
	      (name, ret, buf, buflen, result, h_errnop))
LONG_HOOK(int, gethostbyname2_r,
	      (const char *name, int af, struct hostent *ret, char *buf, size_t buflen,
	       struct hostent **result, int *h_errnop),
	      (name, af, ret, buf, buflen, result, h_errnop))
LONG_HOOK(int, gethostbyaddr_r,
	      (const void *addr, socklen_t len, int type, struct hostent *ret, char *buf,
	       size_t buflen, struct hostent **result, int *h_errnop),
	      (addr, len, type, ret, buf, buflen, result, h_errnop))
