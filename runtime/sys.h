/*
 * sys.h - the runtime's own system-call layer.
 *
 * The runtime never calls a name that hook/ or hook/preload/ defines.
 * The runtime is linked into the same shared object as the hooks
 * (libweft.so: runtime/ + hook/; libweft_preload.so: runtime/ + hook/ +
 * hook/preload/), whose definitions are global, so a call to read() or
 * pthread_create() from runtime/ would bind to the hook, not the C
 * library, and rely on the hook's "am I on a G" test to pass it on.
 * Instead, as Go's runtime does (sys_linux_amd64.s), the runtime makes
 * its system calls itself (below), and reaches the few C library
 * functions it needs that are not system calls - making and ending an
 * OS thread, signal dispositions, spawning addr2line - through pointers
 * resolved once (sys.c).  scripts/check-layering.sh, run by
 * tests/test_link.c, fails the build's tests on any such call.
 *
 * Every raw call returns the result or -errno and never touches errno:
 * the caller tests the return value, and the program's errno survives.
 * A raw call is not a cancellation point.
 */
#ifndef WEFT_SYS_H
#define WEFT_SYS_H

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <time.h>

/* ---- raw system calls --------------------------------------------------- */

/* Returns the result, or -errno; errno is untouched. */
static inline long sys6(long n, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
#else
#error "weft: raw system calls are only written for x86-64"
#endif
}
#define sys3(n, a, b, c) sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define sys5(n, a, b, c, d, e) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

/* The kernel's sigset_t: 64 signals, not glibc's 1024 bits. */
#define SYS_SIGSETSIZE 8

/* Named raw calls, each -errno on failure. */
static inline long sys_open(const char *path, int flags)
{
	return sys4(SYS_openat, AT_FDCWD, path, flags, 0);
}
static inline long sys_read(int fd, void *buf, size_t n)
{
	return sys3(SYS_read, fd, buf, n);
}
static inline long sys_write(int fd, const void *buf, size_t n)
{
	return sys3(SYS_write, fd, buf, n);
}
static inline long sys_close(int fd)
{
	return sys3(SYS_close, fd, 0, 0);
}
static inline long sys_pipe2(int fds[2], int flags)
{
	return sys3(SYS_pipe2, fds, flags, 0);
}
static inline long sys_poll(struct pollfd *p, nfds_t n, int ms)
{
	return sys3(SYS_poll, p, n, ms);
}
static inline long sys_kill(pid_t pid, int sig)
{
	return sys3(SYS_kill, pid, sig, 0);
}
static inline long sys_gettid(void)
{
	return sys3(SYS_gettid, 0, 0, 0);
}
static inline long sys_tgkill(pid_t pid, long tid, int sig)
{
	return sys3(SYS_tgkill, pid, tid, sig);
}
static inline long sys_waitpid(pid_t pid, int *status, int options)
{
	return sys4(SYS_wait4, pid, status, options, 0);
}
static inline long sys_pause(void)
{
	return sys3(SYS_pause, 0, 0, 0);
}
static inline long sys_nanosleep(const struct timespec *ts, struct timespec *left)
{
	return sys3(SYS_nanosleep, ts, left, 0);
}
/* -errno, unlike clock_nanosleep(3), which returns the error number */
static inline long sys_clock_nanosleep(clockid_t c, int flags, const struct timespec *ts,
				       struct timespec *left)
{
	return sys4(SYS_clock_nanosleep, c, flags, ts, left);
}
/* The calling thread's own mask (glibc's sigfillset leaves out its
 * internal signals, as pthread_sigmask would). */
static inline long sys_sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	return sys4(SYS_rt_sigprocmask, how, set, old, SYS_SIGSETSIZE);
}
static inline long sys_sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	return sys4(SYS_rt_sigtimedwait, set, info, ts, SYS_SIGSETSIZE);
}
/* Default disposition for sig (safe in a signal handler: a handler
 * needs glibc's restorer, SIG_DFL does not). */
static inline long sys_sigdfl(int sig)
{
	struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } k = { 0 };
	return sys4(SYS_rt_sigaction, sig, &k, 0, SYS_SIGSETSIZE);
}

/* ---- C library functions that are not system calls (sys.c) ---------------- */

/* glibc's own, as the program would reach it if weft interposed nothing
 * (a sanitizer's interceptor in front of glibc included); the return
 * value and errno as glibc's. */
int sys_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
_Noreturn void sys_pthread_exit(void *ret);
pthread_t sys_pthread_self(void);
int sys_pthread_getattr_np(pthread_t t, pthread_attr_t *a);
int sys_pthread_once(pthread_once_t *o, void (*fn)(void));
int sys_sigaction(int sig, const struct sigaction *sa, struct sigaction *old);
int sys_posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		     const posix_spawnattr_t *attr, char *const argv[], char *const envp[]);

#endif
