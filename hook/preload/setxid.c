/*
 * setxid.c - setuid, setgid, setgroups and the rest on every thread.
 *
 * Linux keeps credentials per OS thread; POSIX wants them per process.
 * glibc bridges the two (nptl/nptl_setxid.c): it marks every thread in
 * its lists except THREAD_SELF, sends each SIGSETXID, whose handler
 * makes the same system call there and clears the mark on its own
 * THREAD_SELF, and repeats until no marked thread is left.  Under the
 * shim a G's THREAD_SELF is a TCB of its own, not its OS thread's, and
 * the main G has the real main thread's: the OS thread the caller runs
 * on is marked and signalled as "another thread", its handler clears
 * the G's mark instead, and glibc signals it forever (a program that
 * drops privileges after starting threads spun at 100 % CPU; CPython's
 * test_subprocess test_extra_groups hung in its child's setgroups); the
 * real main thread is skipped.
 *
 * So these calls are made here, musl's way (src/unistd/setxid.c): the
 * calling thread first - if it fails, nothing else changed and that is
 * the answer; then every other OS thread of the process (/proc/self/
 * task: Ms, sysmon, the signal thread, the program's native threads)
 * gets SIGSETXID with our handler in place of glibc's for the while and
 * makes the same call, which cannot fail where it succeeded here (the
 * same credentials before).  A thread made meanwhile may have copied the
 * old ones: the list is read again until a pass finds none not done.  A
 * thread that ends before its handler runs is done.  Should the call
 * still fail on some thread the process is killed, as musl does: ids
 * that differ between threads are a security hole.
 *
 * Before the runtime has started (no thread but main), glibc's own.
 * initgroups is made here too (glibc's calls setgroups inside libc).
 * Not here: posix_spawn's POSIX_SPAWN_RESETIDS (it runs in a child
 * alone).
 */
#include "shim.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIGSETXID (__SIGRTMIN + 1) /* glibc's (nptl/pthreadP.h), unblockable through it */

/* The kernel's struct sigaction (rt_sigaction(2)). */
struct ksa {
	void *handler;        /* sa_sigaction */
	unsigned long flags;  /* SA_* with SA_RESTORER */
	void *restorer;       /* glibc's __restore_rt */
	unsigned long mask;   /* blocked while it runs */
};
#define SA_RESTORER_ 0x04000000

/* The call every thread makes, and who has made it.  One at a time
 * (xidlock); the handler reads it after the tgkill that sent it (the
 * kernel's signal delivery orders the two). */
static struct {
	long nr, a, b, c; /* the system call and its arguments */
	pid_t *tids;      /* the threads signalled, ntids of them */
	_Atomic int *done; /* done[i]: 1 once tids[i] made the call, 2 if it failed */
	int ntids;
	_Atomic uint32_t left; /* handlers still to run (futex word) */
} xc;

static _Atomic int xidlock; /* 0 free, 1 held: a spin with sleeps (rare, short) */

static void xid_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig, (void)ctx;
	if (si->si_code != SI_TKILL || si->si_pid != (pid_t)sys3(SYS_getpid, 0, 0, 0))
		return; /* not ours (glibc's check) */
	pid_t me = (pid_t)sys_gettid();
	for (int i = 0; i < xc.ntids; i++) {
		if (xc.tids[i] != me)
			continue;
		if (atomic_load_explicit(&xc.done[i], memory_order_relaxed))
			return; /* already (a second signal while this ran) */
		long r = sys3(xc.nr, xc.a, xc.b, xc.c); /* errno untouched: raw */
		/* release: the call made before the caller sees it done */
		atomic_store_explicit(&xc.done[i], r < 0 ? 2 : 1, memory_order_release);
		if (atomic_fetch_sub(&xc.left, 1) == 1)
			sys3(SYS_futex, &xc.left, FUTEX_WAKE_PRIVATE, 1);
		return;
	}
}

/* Is thread tid still alive? */
static bool alive(pid_t tid)
{
	return sys3(SYS_tgkill, sys3(SYS_getpid, 0, 0, 0), tid, 0) == 0;
}

/* The process's threads other than the caller not yet in xc.tids (done
 * or not), added there; how many were added. */
static int add_threads(pid_t me, int *cap)
{
	int fd = (int)sys3(SYS_open, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		fatal("setxid: cannot read /proc/self/task (%d)", -fd);
	char buf[4096];
	int added = 0;
	long n;
	while ((n = sys3(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64 *e = (struct dirent64 *)(void *)(buf + off);
			off += e->d_reclen;
			pid_t tid = (pid_t)atol(e->d_name);
			bool known = tid <= 0 || tid == me;
			for (int i = 0; i < xc.ntids && !known; i++)
				known = xc.tids[i] == tid;
			if (known)
				continue;
			if (xc.ntids == *cap) {
				int nc = *cap ? 2 * *cap : 64;
				pid_t *t = rtalloc(sizeof *t * (size_t)nc);
				_Atomic int *d = rtalloc(sizeof *d * (size_t)nc);
				if (!t || !d)
					fatal("setxid: no memory for %d threads", nc);
				if (xc.ntids) {
					memcpy(t, xc.tids, sizeof *t * (size_t)xc.ntids);
					memcpy((void *)d, (void *)xc.done, sizeof *d * (size_t)xc.ntids);
				}
				rtfree(xc.tids);
				rtfree((void *)xc.done);
				xc.tids = t, xc.done = d, *cap = nc;
			}
			xc.tids[xc.ntids++] = tid;
			added++;
		}
	}
	sys3(SYS_close, fd, 0, 0);
	return added;
}

/* Signal the threads from index from on; wait until each has made the
 * call or is gone. */
static void run_on(int from)
{
	pid_t pid = (pid_t)sys3(SYS_getpid, 0, 0, 0);
	atomic_store(&xc.left, 0);
	for (int i = from; i < xc.ntids; i++) {
		atomic_fetch_add(&xc.left, 1);
		if (sys3(SYS_tgkill, pid, xc.tids[i], SIGSETXID) < 0) {
			atomic_store(&xc.done[i], 1); /* gone already */
			atomic_fetch_sub(&xc.left, 1);
		}
	}
	for (;;) {
		uint32_t l = atomic_load(&xc.left);
		if (l == 0)
			return;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		sys4(SYS_futex, &xc.left, FUTEX_WAIT_PRIVATE, l, &ts);
		/* a thread that ended with the signal pending never answers */
		for (int i = from; i < xc.ntids; i++)
			if (!atomic_load(&xc.done[i]) && !alive(xc.tids[i])) {
				int z = 0;
				if (atomic_compare_exchange_strong(&xc.done[i], &z, 1))
					atomic_fetch_sub(&xc.left, 1);
			}
	}
}

/* The call nr(a, b, c) on every thread: 0, or -1 with errno. */
static int setxid(long nr, long a, long b, long c)
{
	while (atomic_exchange_explicit(&xidlock, 1, memory_order_acquire))
		weft_sleep(100 * 1000);
	long r = sys3(nr, a, b, c); /* here first */
	if (r < 0) {
		atomic_store_explicit(&xidlock, 0, memory_order_release);
		return (int)sysret(r);
	}
	struct ksa ours = { 0 }, theirs;
	if (sys4(SYS_rt_sigaction, SIGSETXID, NULL, &theirs, SYS_SIGSETSIZE) < 0)
		fatal("setxid: cannot read SIGSETXID's action");
	struct ksa rest = theirs;
	if (!(rest.flags & SA_RESTORER_) &&
	    (sys4(SYS_rt_sigaction, SIGURG, NULL, &rest, SYS_SIGSETSIZE) < 0 ||
	     !(rest.flags & SA_RESTORER_)))
		fatal("setxid: no signal restorer to borrow");
	ours.handler = (void *)xid_handler;
	ours.flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_RESTORER_;
	ours.restorer = rest.restorer;
	ours.mask = 0;
	sys4(SYS_rt_sigaction, SIGSETXID, &ours, NULL, SYS_SIGSETSIZE);
	xc.nr = nr, xc.a = a, xc.b = b, xc.c = c;
	xc.ntids = 0;
	int cap = 0, from = 0;
	pid_t me = (pid_t)sys_gettid();
	while (add_threads(me, &cap) > 0) {
		run_on(from);
		from = xc.ntids;
	}
	bool failed = false;
	for (int i = 0; i < xc.ntids; i++)
		failed |= atomic_load(&xc.done[i]) == 2;
	sys4(SYS_rt_sigaction, SIGSETXID, &theirs, NULL, SYS_SIGSETSIZE);
	rtfree(xc.tids);
	rtfree((void *)xc.done);
	xc.tids = NULL, xc.done = NULL, xc.ntids = 0;
	if (failed) {
		/* some thread kept the old ids: nothing safe is left to do */
		static const char msg[] = "weft: fatal: setuid/setgid failed on one thread\n";
		sys3(SYS_write, 2, msg, sizeof msg - 1);
		sys3(SYS_kill, sys3(SYS_getpid, 0, 0, 0), SIGKILL, 0);
	}
	atomic_store_explicit(&xidlock, 0, memory_order_release);
	return 0;
}

/* Each: glibc's own while the runtime has not started (main is the
 * only thread) and under WEFT_PTHREADS=native (real TCBs everywhere);
 * else setxid with the system call glibc makes. */
DEFREAL(setuid);
DEFREAL(setgid);
DEFREAL(seteuid);
DEFREAL(setegid);
DEFREAL(setreuid);
DEFREAL(setregid);
DEFREAL(setresuid);
DEFREAL(setresgid);
DEFREAL(setgroups);

HOOK int setuid(uid_t u)
{
	if (!rt_started() || shim_native)
		return REAL(setuid)(u);
	return setxid(SYS_setuid, u, 0, 0);
}

HOOK int setgid(gid_t g)
{
	if (!rt_started() || shim_native)
		return REAL(setgid)(g);
	return setxid(SYS_setgid, g, 0, 0);
}

/* glibc: setresuid(-1, u, -1) */
HOOK int seteuid(uid_t u)
{
	if (!rt_started() || shim_native)
		return REAL(seteuid)(u);
	if (u == (uid_t)-1) {
		errno_set(EINVAL);
		return -1;
	}
	return setxid(SYS_setresuid, -1, u, -1);
}

HOOK int setegid(gid_t g)
{
	if (!rt_started() || shim_native)
		return REAL(setegid)(g);
	if (g == (gid_t)-1) {
		errno_set(EINVAL);
		return -1;
	}
	return setxid(SYS_setresgid, -1, g, -1);
}

HOOK int setreuid(uid_t r, uid_t e)
{
	if (!rt_started() || shim_native)
		return REAL(setreuid)(r, e);
	return setxid(SYS_setreuid, (int)r, (int)e, 0);
}

HOOK int setregid(gid_t r, gid_t e)
{
	if (!rt_started() || shim_native)
		return REAL(setregid)(r, e);
	return setxid(SYS_setregid, (int)r, (int)e, 0);
}

HOOK int setresuid(uid_t r, uid_t e, uid_t s)
{
	if (!rt_started() || shim_native)
		return REAL(setresuid)(r, e, s);
	return setxid(SYS_setresuid, (int)r, (int)e, (int)s);
}

HOOK int setresgid(gid_t r, gid_t e, gid_t s)
{
	if (!rt_started() || shim_native)
		return REAL(setresgid)(r, e, s);
	return setxid(SYS_setresgid, (int)r, (int)e, (int)s);
}

HOOK int setgroups(size_t n, const gid_t *g)
{
	if (!rt_started() || shim_native)
		return REAL(setgroups)(n, g);
	return setxid(SYS_setgroups, (long)n, (long)g, 0);
}

/* initgroups: glibc's calls its setgroups inside libc, where no hook
 * sees it; the same, with the list from getgrouplist (glibc's NSS
 * lookup) and setgroups above.  Apache's and cron's children call it
 * after fork, where the runtime is already up. */
DEFREAL(initgroups);

HOOK int initgroups(const char *user, gid_t group)
{
	if (!rt_started() || shim_native)
		return REAL(initgroups)(user, group);
	long max = sysconf(_SC_NGROUPS_MAX);
	int n = 64;
	for (;;) {
		gid_t *g = rtalloc(sizeof *g * (size_t)n);
		if (!g) {
			errno_set(ENOMEM);
			return -1;
		}
		int want = n;
		if (getgrouplist(user, group, g, &want) >= 0) {
			/* glibc gives setgroups at most NGROUPS_MAX of them */
			int r = setgroups(max > 0 && want > max ? (size_t)max : (size_t)want, g);
			int e = errno_get();
			rtfree(g);
			errno_set(e);
			return r;
		}
		rtfree(g);
		if (want <= n) { /* no count to grow to: glibc says so as ENOMEM */
			errno_set(ENOMEM);
			return -1;
		}
		n = want;
	}
}
