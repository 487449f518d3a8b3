/*
 * fork.c - fork, exec and child processes under the shim.
 *
 * fork: an atfork child handler (registered once the runtime is up, so
 * after jemalloc's own) rebuilds the runtime in the child: one M (the
 * forking thread), the forking G the only thread (runtime/fork.c).
 *
 * vfork: glibc's until the runtime starts, fork after.  A vfork child
 * runs on our memory and stack until it execs or exits.  Before the
 * runtime starts every hook is the plain call and writes nothing of
 * weft's (fd.c, signal.c: all behind rt_started() or the router being
 * active; exec below), so the child may run them as it runs libc's:
 * that is what keeps the children of a shell or make under `weft run`
 * as cheap as natively (no copied page tables, no copy-on-write faults
 * in the child or in the parent afterwards; docs/preload.md, Start-up).
 * Once the runtime runs, the hooks a child would run (dup2, close,
 * sigprocmask) would rewrite the parent's scheduler and fd state: fork.
 *
 * exec and spawn: run with the program's signal mask.  Nothing else to
 * undo: weft never changes a file's O_NONBLOCK (hook.c io_try), so a
 * program started from here inherits its files as the program made them.
 *
 * wait*: blocking calls, run under entersyscall on a G.
 */
#include "shim.h"

#include <alloca.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

void runtime_afterfork_child(void) HIDDEN;

static void atfork_prepare(void)
{
	/* every file is the child's too (runtime/netpoll.h), from before
	 * the child can touch one: in parent and child; again after (a
	 * file another thread made meanwhile) */
	pd_shared();
	tls_forkprepare(); /* no G inside glibc's dl_iterate_phdr (tls.c) */
	tls_forkenter();   /* glibc's fork must see the OS thread's own TCB */
}

static void atfork_parent(void)
{
	tls_forkleave();
	tls_forkdone();
	pd_shared(); /* and a file made while the fork ran (pd_reset_sole) */
}

static void atfork_child(void)
{
	runtime_afterfork_child();
	gthr_afterfork_child();
	sig_afterfork_child();
	tls_forkleave();
	tls_forkdone();
}

void shim_fork_init(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* vfork and __vfork, in assembly: a function that called glibc's vfork
 * and returned would leave the child, and then the parent, returning
 * through a frame the child has since overwritten (the stack is shared).
 * So the stub asks vfork_target where to go and jumps there with the
 * caller's return address still on top of the stack, as if the caller
 * had called it directly: glibc's vfork keeps that address in a
 * register across the system call, as it must. */
DEFREAL(vfork);

static pid_t vfork_fork(void)
{
	return fork();
}

void *vfork_target(void) HIDDEN __attribute__((used));
void *vfork_target(void)
{
	if (!rt_started())
		return (void *)REAL(vfork);
	return (void *)vfork_fork;
}

__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	".globl __vfork\n"
	".type __vfork, @function\n"
	".p2align 4\n"
	"vfork:\n"
	"__vfork:\n"
#ifdef __CET__
	"endbr64\n"
#endif
	"sub $8, %rsp\n" /* the call below with the stack 16-aligned */
	"call vfork_target\n"
	"add $8, %rsp\n"
	"jmp *%rax\n"
	".size vfork, .-vfork\n"
	".size __vfork, .-__vfork\n");

/* ---- exec ---------------------------------------------------------------------------- */

DEFREAL(execve);
DEFREAL(execv);
DEFREAL(execvp);
DEFREAL(execvpe);
DEFREAL(fexecve);
DEFREAL(execveat);

/* Run call with the program's signal mask on this thread (an M blocks
 * asynchronous signals; the new program or child inherits the mask). */
#define WITH_P(type, call)                                      \
	({                                                      \
		sigset_t saved_;                                \
		bool p_ = sig_active();                         \
		if (p_)                                         \
			sig_use_p(&saved_);                     \
		type r_ = (call);                               \
		if (p_) {                                       \
			int e_ = errno_get();                   \
			sig_restore(&saved_);                   \
			errno_set(e_);                          \
		}                                               \
		r_;                                             \
	})

/* An exec: with the program's mask, and no runtime thread started while
 * it runs.  Before the runtime starts there is no such thread, and the
 * caller may be the child of a real vfork, on our memory: a flag set
 * here would stay set in the parent after the child's exec. */
#define EXEC(call)                                              \
	({                                                      \
		bool rt_ = rt_started();                        \
		if (rt_)                                        \
			sig_exec_begin();                       \
		int x_ = WITH_P(int, call);                     \
		int xe_ = errno_get();                          \
		if (rt_)                                        \
			sig_exec_end();                         \
		errno_set(xe_);                                 \
		x_;                                             \
	})

HOOK int execve(const char *path, char *const argv[], char *const envp[])
{
	return EXEC(REAL(execve)(path, argv, envp));
}

HOOK int execv(const char *path, char *const argv[])
{
	return EXEC(REAL(execv)(path, argv));
}

HOOK int execvp(const char *file, char *const argv[])
{
	return EXEC(REAL(execvp)(file, argv));
}

HOOK int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return EXEC(REAL(execvpe)(file, argv, envp));
}

HOOK int fexecve(int fd, char *const argv[], char *const envp[])
{
	return EXEC(REAL(fexecve)(fd, argv, envp));
}

HOOK int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	return EXEC(REAL(execveat)(dirfd, path, argv, envp, flags));
}

/* execl and friends: glibc's call execve internally, so gather the
 * arguments and go through the hooks above. */
#define GATHER(first, argv, envp_out)                                   \
	do {                                                            \
		va_list ap;                                             \
		size_t n = 1;                                           \
		va_start(ap, first);                                    \
		while (va_arg(ap, char *))                              \
			n++;                                            \
		va_end(ap);                                             \
		argv = alloca((n + 1) * sizeof(char *));                \
		argv[0] = (char *)(first);                              \
		va_start(ap, first);                                    \
		for (size_t i = 1; i <= n; i++)                         \
			argv[i] = i < n ? va_arg(ap, char *) : NULL;    \
		if (i_want_envp)                                        \
			(void)va_arg(ap, char *), envp_out = va_arg(ap, char **); \
		va_end(ap);                                             \
	} while (0)

HOOK int execl(const char *path, const char *arg, ...)
{
	char **argv, **envp = NULL;
	const bool i_want_envp = false;
	GATHER(arg, argv, envp);
	(void)envp;
	return execv(path, argv);
}

HOOK int execlp(const char *file, const char *arg, ...)
{
	char **argv, **envp = NULL;
	const bool i_want_envp = false;
	GATHER(arg, argv, envp);
	(void)envp;
	return execvp(file, argv);
}

HOOK int execle(const char *path, const char *arg, ...)
{
	char **argv, **envp = NULL;
	const bool i_want_envp = true;
	GATHER(arg, argv, envp);
	return execve(path, argv, envp);
}

/* ---- spawn ------------------------------------------------------------------------------ */

DEFREAL(posix_spawn);
DEFREAL(posix_spawnp);
DEFREAL(system);
DEFREAL(popen);
DEFREAL(pclose);

/* A spawned child inherits the files not marked close-on-exec, shared
 * with us: every file may be reached from elsewhere from now on
 * (pd_shared, before the child exists, and after, for a file another
 * thread made meanwhile: pd_reset_sole).  Not before the runtime starts:
 * there are no records yet, and the caller may be a real vfork child
 * (above), whose writes would stay in the parent. */
static void spawn_shares(void)
{
	if (rt_started())
		pd_shared();
}

HOOK int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	spawn_shares();
	int r = WITH_P(int, REAL(posix_spawn)(pid, path, fa, attr, argv, envp));
	spawn_shares();
	return r;
}

HOOK int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		      const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	spawn_shares();
	int r = WITH_P(int, REAL(posix_spawnp)(pid, file, fa, attr, argv, envp));
	spawn_shares();
	return r;
}

HOOK int system(const char *cmd)
{
	spawn_shares();
	int r = WITH_P(int, BLOCKING(hook_g() != NULL, REAL(system)(cmd)));
	spawn_shares();
	return r;
}

HOOK FILE *popen(const char *cmd, const char *mode)
{
	spawn_shares();
	FILE *f = WITH_P(FILE *, REAL(popen)(cmd, mode));
	spawn_shares();
	return stdio_popen(f, mode);
}

HOOK int pclose(FILE *f)
{
	if (stdio_parks(f))
		return fclose(f); /* glibc's pclose is fclose; fd.c's flushes parking */
	return BLOCKING(hook_g() != NULL, REAL(pclose)(f));
}

/* ---- ptrace ------------------------------------------------------------------------------
 * A tracer and its tracee are OS threads: a G that uses ptrace keeps its
 * OS thread from then on (as Go's LockOSThread), so every request comes
 * from the thread that attached. */

DEFREAL(ptrace);

HOOK long ptrace(enum __ptrace_request req, ...)
{
	va_list ap;
	va_start(ap, req);
	pid_t pid = va_arg(ap, pid_t);
	void *addr = va_arg(ap, void *);
	void *data = va_arg(ap, void *);
	va_end(ap);
	struct g *gp = hook_g();
	if (gp && !gp->lockedm)
		weft_lock_thread();
	return REAL(ptrace)(req, pid, addr, data);
}

/* ---- waiting for children --------------------------------------------------------------- */

DEFREAL(wait);
DEFREAL(waitpid);
DEFREAL(waitid);
DEFREAL(wait3);
DEFREAL(wait4);

HOOK pid_t wait(int *status)
{
	return BLOCKING(hook_g() != NULL, REAL(wait)(status));
}

HOOK pid_t waitpid(pid_t pid, int *status, int options)
{
	return BLOCKING(hook_g() != NULL && !(options & WNOHANG), REAL(waitpid)(pid, status, options));
}

HOOK int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
	return BLOCKING(hook_g() != NULL && !(options & WNOHANG),
			REAL(waitid)(idtype, id, info, options));
}

HOOK pid_t wait3(int *status, int options, struct rusage *ru)
{
	return BLOCKING(hook_g() != NULL && !(options & WNOHANG), REAL(wait3)(status, options, ru));
}

HOOK pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	return BLOCKING(hook_g() != NULL && !(options & WNOHANG),
			REAL(wait4)(pid, status, options, ru));
}
