/*
 * block.c - calls that cannot be made non-blocking: opening, file I/O
 * at an offset, syncing, stat, and the resolver.  On a G they run under
 * entersyscall (the resolver under entersyscallblock: it hands the P on
 * at once), so other Gs keep running while the OS thread waits; the
 * call itself, its result and its errno are libc's.
 * docs/hooks.md has the measurement behind entersyscall rather than a
 * thread pool for regular files.
 */
#include "hook.h"

#include <fcntl.h>
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

BLOCKING_HOOK(int, fsync, (int fd), (fd))
BLOCKING_HOOK(int, fdatasync, (int fd), (fd))

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

#define RESOLVER_HOOK(ret, name, params, args)                 \
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

RESOLVER_HOOK(int, getaddrinfo,
	      (const char *node, const char *service, const struct addrinfo *hints,
	       struct addrinfo **res),
	      (node, service, hints, res))
RESOLVER_HOOK(int, getnameinfo,
	      (const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
	       char *serv, socklen_t servlen, int flags),
	      (sa, salen, host, hostlen, serv, servlen, flags))
RESOLVER_HOOK(struct hostent *, gethostbyname, (const char *name), (name))
RESOLVER_HOOK(int, gethostbyname_r,
	      (const char *name, struct hostent *ret, char *buf, size_t buflen,
	       struct hostent **result, int *h_errnop),
	      (name, ret, buf, buflen, result, h_errnop))
RESOLVER_HOOK(int, gethostbyname2_r,
	      (const char *name, int af, struct hostent *ret, char *buf, size_t buflen,
	       struct hostent **result, int *h_errnop),
	      (name, af, ret, buf, buflen, result, h_errnop))
RESOLVER_HOOK(int, gethostbyaddr_r,
	      (const void *addr, socklen_t len, int type, struct hostent *ret, char *buf,
	       size_t buflen, struct hostent **result, int *h_errnop),
	      (addr, len, type, ret, buf, buflen, result, h_errnop))
