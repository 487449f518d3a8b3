/*
 * hook.h - what the interposed libc calls share (docs/hooks.md).
 *
 * Every hook decides first whether it may park:
 *   - not on a G (a plain thread, sysmon, an M's scheduler context), the
 *     runtime not started, the G inside the runtime (rtdepth > 0) or in a
 *     call bracketed by entersyscall: the real libc function, unchanged;
 *   - on a G: the call is tried without blocking and the G parks on the
 *     netpoller until the fd is ready, then tries again.  The try is per
 *     call (MSG_DONTWAIT on a socket, RWF_NOWAIT on a pipe, else a zero-
 *     timeout poll(2) then the call under entersyscall): weft never sets
 *     O_NONBLOCK on a file, so what it does not intercept (stdio's
 *     internal reads, raw syscall(), an exec'd child) sees the file as
 *     the program made it.
 *
 * errno: glibc declares __errno_location const, so the compiler may keep
 * its result in a register across a call that parks the G and resumes it
 * on another OS thread.  Hooks therefore touch errno only through
 * errno_get/errno_set (opaque calls), and set it last.
 */
#ifndef WEFT_HOOK_H
#define WEFT_HOOK_H

#undef _FORTIFY_SOURCE
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "../runtime/runtime.h"
#include "../runtime/netpoll.h"

#define HOOK __attribute__((visibility("default")))

/* ---- the real functions ---------------------------------------------- */

/* Resolve name with dlsym(RTLD_NEXT) once and cache it in *slot. */
void *hook_resolve(void *_Atomic *slot, const char *name) HIDDEN;

/* Every real function's slot and name, in the section weft_hookreal
 * (DEFREAL), so that the runtime's start resolves them all at once
 * (hook_resolve_all): dlsym takes glibc's dl_load_lock, which a G holds
 * through a dlopen's constructors and relocation, and may hold while it
 * blocks; a G whose first call of a hooked function came then waited for
 * it, and the holder perhaps for that G.  The slot is in the record, not
 * in .bss: every record's name is relocated as the library loads, so
 * their pages are written (private) from the start, and a process that
 * resolves a few hooks before the runtime starts (a shell, /bin/true's
 * pthread_create in the shim's constructor) takes no page fault for the
 * slots - in .bss each first use of a page cost one or two. */
struct hookreal {
	void *_Atomic slot; /* the real <fn>, NULL until resolved */
	const char *name;   /* "<fn>" */
};
void hook_resolve_all(void) HIDDEN;

#define DEFREAL(fn)                                                            \
	static struct hookreal hookreal_##fn                                   \
		__attribute__((used, section("weft_hookreal"), aligned(8))) = { \
			NULL, #fn                                              \
		}
#define REAL(fn) ((__typeof__(&fn))hook_real(&hookreal_##fn.slot, #fn))

static inline void *hook_real(void *_Atomic *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	return likely(p != NULL) ? p : hook_resolve(slot, name);
}

/* ---- errno ------------------------------------------------------------- */

/* errno through opaque calls (runtime/lock.c): never a cached &errno */
static inline int errno_get(void)
{
	return rt_geterrno();
}

static inline void errno_set(int e)
{
	rt_seterrno(e);
}

/* The preload shim's: a call failed with EPIPE or EFBIG, whose signal
 * the kernel may have left pending on this OS thread for a G that blocks
 * it (signal.c sig_err).  NULL linked.  Every hooked call that can fail
 * so tells it, on the OS thread that made the call: sysret, blk_exit
 * (by errno) and IO_SIMPLE's IO_PASS (errsig). */
extern void (*hook_sigerr)(int e) HIDDEN;

static inline bool sigerr_e(int e)
{
	return unlikely(e == EPIPE || e == EFBIG) && hook_sigerr;
}

/* A raw result (value or -errno) as libc returns it. */
static inline long sysret(long r)
{
	if (r < 0 && r > -4096) {
		if (sigerr_e((int)-r))
			hook_sigerr((int)-r);
		errno_set((int)-r);
		return -1;
	}
	return r;
}

/* A libc result (-1 and errno): tell hook_sigerr of EPIPE / EFBIG. */
static inline long errsig(long r)
{
	if (unlikely(r == -1)) {
		int e = errno_get();
		if (sigerr_e(e)) {
			hook_sigerr(e);
			errno_set(e);
		}
	}
	return r;
}

/* ---- may this call park? ---------------------------------------------- */

static inline bool rt_started(void)
{
	return atomic_load_explicit(&sched_started, memory_order_relaxed) != 0;
}

/* The G that may park here, or NULL for straight through. */
static inline struct g *hook_g(void)
{
	struct m *m = getm();
	if (!m)
		return NULL;
	struct g *gp = m->curg;
	if (!gp || gp->rtdepth > 0 ||
	    atomic_load_explicit(&gp->status, memory_order_relaxed) == G_SYSCALL)
		return NULL;
	return gp;
}

/* A G about to make a call that will not park (its fd is one the program
 * made non-blocking): a point where it takes what sysmon asked of its P,
 * as at any runtime call - a yield (PF_PREEMPT: its slice is over and Gs
 * wait) or the return of a spare lent around it (PF_LENT).  A G serving a
 * client that always answers in time never parks (each recv finds the
 * next request) and would otherwise run on until it does, while sysmon
 * took it for C code that never calls in and lent a spare P (an OS
 * thread) around it.  One relaxed load when nothing was asked. */
static inline void hook_safepoint(struct g *gp)
{
	struct m *m = getm();
	if (unlikely(atomic_load_explicit(&m->p->flags, memory_order_relaxed))) {
		rt_enter_g(m, gp);
		rt_leave_g(m, gp);
	}
}

/* Turns (proc.c rt_turn): a G that sends marks it; a receive that then
 * brings data is a request boundary of a server's connection, where a G
 * that has held its P for the quantum gives way.  The hooks' one check on
 * a receive's fast path is the load of the quantum (turns off, the
 * default: no G looked at, no call); a send stores the flag. */
static inline void hook_sent(struct g *gp)
{
	gp->turnsent = true;
}

static inline long hook_recvd(long r)
{
	if (r > 0 && unlikely(weftenv.turn_ns)) {
		struct g *gp = getg();
		if (gp && gp->turnsent)
			rt_turn(getm(), gp);
	}
	return r;
}

/* A call that blocks the OS thread: after 20 us sysmon has another M
 * run the other Gs; at once for calls known to block long (resolver). */
void blk_enter(void) HIDDEN;
void blk_enter_long(void) HIDDEN;
void blk_exit(void) HIDDEN; /* keeps errno */

/* Run call with the P free to move on; on a plain thread just call. */
#define BLOCKING(ong, call)                              \
	({                                               \
		bool ong_ = (ong);                       \
		if (ong_)                                \
			blk_enter();                     \
		__typeof__(call) r_ = (call);            \
		if (ong_)                                \
			blk_exit();                      \
		r_;                                      \
	})

/* ---- waiting in the kernel ------------------------------------------------ */

/* Wait in the real call on this M rather than park (entersyscallwait):
 * true (in a syscall bracket; kwait_end after the call, made with
 * kwait_syscall) with *until the absolute time to be back from the
 * kernel by, -1 none; a call that takes no timeout (read, accept)
 * passes deadline KWAIT_NOBOUND and is refused while the P has a timer.
 * Not with a signal mask for the wait: under the shim an M must keep
 * blocking the signals the shim routes, so only the non-blocking asks
 * apply a mask.  A G made runnable that the P could run, or a signal
 * handler or a cancellation for this G, ends the wait (runtime/kwait.c);
 * the G then parks once (*kicked, which makes the next kwait_begin
 * refuse), which lets its P run the scheduler, or runs the handler.
 * docs/hooks.md, "Waiting in the kernel". */
bool kwait_begin(struct g *gp, const sigset_t *ss, int64_t deadline, int64_t *until,
		 bool *kicked) HIDDEN;
/* After the kernel wait's call: *kicked if it was asked to end.  errno
 * untouched. */
void kwait_end(bool *kicked) HIDDEN;

/* ---- fd operations ------------------------------------------------------ */

enum {
	IO_PASS,    /* the real libc function, as is */
	IO_SYSCALL, /* the real function under entersyscall (files, std fds) */
	IO_BADF,    /* the fd is being closed: EBADF */
	IO_POLL,    /* on a G: tries without blocking, park on EAGAIN */
};

struct io {
	int fd;
	int mode;           /* IO_POLL once io_begin says so */
	uint32_t kind;      /* PD_SOCK, PD_NOWAIT (PD_WPOLL, PD_WCALL) or 0 (poll first): how to try */
	int64_t deadline;   /* absolute, -1 none; INT64_MIN until the first wait */
	bool expired;       /* the last io_wait ended at the deadline */
	struct pollreq r;   /* r.mask is the direction */
};

/* How to do an operation on fd in direction dir (PD_READ/PD_WRITE). */
int io_begin(struct io *io, int fd, unsigned dir) HIDDEN;
/* Before each try: record the event counters.  For a read (drains) on
 * a TCP socket or pipe that a short read left empty, true means "do not
 * try, wait first": nothing has arrived since. */
bool io_snap(struct io *io, bool drains) HIDDEN;
/* After a read try that may drain: remember whether it left it empty. */
void io_drained(struct io *io, long r, size_t want) HIDDEN;
/* Wait until the fd may be ready.  0, -EAGAIN (the program made the
 * file non-blocking, or the deadline passed: SO_RCVTIMEO / SO_SNDTIMEO
 * or io->deadline, then io->expired), -EBADF (closed). */
long io_wait(struct io *io) HIDDEN;
/* After a try that would block: has the program made the file
 * non-blocking (F_GETFL, the file's own flag, maybe set through a dup)?
 * Remembers the answer as a hint for the calls to come (hook.c). */
bool io_nonblock(struct io *io) HIDDEN;

/* A system call with its arguments, retried by the drivers below. */
struct sc {
	long nr;
	long a[6];
};
#define SC(n, ...) ((struct sc){ (n), { __VA_ARGS__ } })

static inline long sc_do(const struct sc *s)
{
	return sys6(s->nr, s->a[0], s->a[1], s->a[2], s->a[3], s->a[4], s->a[5]);
}

/* One try of s that does not block: on a socket the call with
 * MSG_DONTWAIT (read/write/readv/writev become recvfrom/sendto/recvmsg/
 * sendmsg), on a pipe preadv2/pwritev2 with RWF_NOWAIT, else poll(2)
 * with a zero timeout and, if ready, the call under entersyscall (it may
 * still block if it loses a race: correct, only slower).  -EAGAIN when
 * it would block. */
long io_try(struct io *io, const struct sc *s) HIDDEN;

/* Try, wait on EAGAIN, try again: for calls that complete in one go. */
long io_once(struct io *io, const struct sc *s, size_t want, bool drains) HIDDEN;
/* Until len bytes are done (a[1] buffer, a[2] length): blocking writes,
 * MSG_WAITALL reads.  Returns the bytes done, or -errno if none. */
long io_all(struct io *io, struct sc *s, size_t len) HIDDEN;
/* The same over an iovec: msg != NULL for sendmsg/recvmsg (fd, msg,
 * flags), else readv/writev (fd, iov, cnt). */
long io_allv(struct io *io, long nr, struct msghdr *msg, const struct iovec *iov, int cnt,
	     int flags) HIDDEN;

/* Dispatch the modes that do not need the drivers; what passes straight
 * through goes by post (nothing, or hook_recvd). */
#define IO_SIMPLE_POST(mode, call, post)                              \
	do {                                                          \
		switch (mode) {                                       \
		case IO_PASS:                                         \
			return (__typeof__(call))post(errsig(call));  \
		case IO_SYSCALL:                                      \
			return BLOCKING(true, call);                  \
		case IO_BADF:                                         \
			return sysret(-EBADF);                        \
		}                                                     \
	} while (0)
#define IO_SIMPLE(mode, call) IO_SIMPLE_POST(mode, call, )
/* The same for a receive: data passed straight through is a receive too
 * (hook_recvd: a request boundary). */
#define IO_SIMPLE_RECV(mode, call) IO_SIMPLE_POST(mode, call, hook_recvd)

/* Flags for the descriptor of a file just created for the program:
 * kind is PD_SOCK or PD_NOWAIT, with PD_DRAINOK for TCP and pipes. */
uint32_t newfd_flags(bool usernb, uint32_t kind) HIDDEN;

/* Park the running G until deadline (absolute nanotime; -1 forever).
 * 0, or -EINTR if the sleep was armed (intr_arm) and interrupted. */
int g_sleep_until(int64_t deadline) HIDDEN;

/* ---- interruption by signals ------------------------------------------ */

/* The preload shim's: run the running G's deliverable signal handlers
 * (SIGRUN_* bits).  NULL in linked programs: nothing is interrupted. */
enum { SIGRUN_RAN = 1, SIGRUN_RESTART = 2 /* every one that ran had SA_RESTART */ };
extern int (*hook_sigrun)(void) HIDDEN;

/* Around a park that a signal handler may interrupt, as it would the
 * blocking system call (the next waiter_block takes the request). */
static inline void intr_arm(struct g *gp)
{
	if (unlikely(hook_sigrun != NULL))
		gp->introk = true;
}
static inline void intr_disarm(struct g *gp)
{
	gp->introk = false;
}
/* The preload shim's: exit the running G here if it has been cancelled
 * (pthread_cancel).  NULL in linked programs. */
extern void (*hook_cancel)(void) HIDDEN;
/* After an interrupted wait (a cancellation point): exit if cancelled;
 * run the handlers; 0 to go on waiting (nothing ran, or all SA_RESTART
 * and the call restartable), -EINTR. */
long hook_eintr(bool restartable) HIDDEN;

#endif
