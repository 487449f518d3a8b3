/*
 * netpoll.h - poll descriptors: the per-fd state Gs park on.
 *
 * netpoll.c owns the epoll instance; pollfd.c the descriptor table, the
 * park/ready protocol and close; hook/ the interposed libc calls that
 * use them (docs/hooks.md).
 *
 * One descriptor per fd number, never freed (a table of chunks indexed
 * by fd, read without a lock).  A descriptor lives through many files:
 * every close or new file at that number bumps its seq, and seq is also
 * in the epoll tag, so an event or a parked G from an earlier file can
 * never reach the next one.
 *
 * Readiness is a pair of event counters (rev, wev) bumped by netpoll
 * under the descriptor's lock.  A G reads the counter, tries its call,
 * and on EAGAIN parks until the counter moves: an event between the
 * try and the park is seen as a changed counter, never lost.
 */
#ifndef WEFT_NETPOLL_H
#define WEFT_NETPOLL_H

#include <errno.h>
#include <sys/syscall.h>

#include "runtime.h"
#include "sys.h" /* sys6: raw system calls */
#include "waitq.h"

extern int netpoll_epfd;
extern int netpoll_breakfd;

/* netpoll() hands each epoll event here: tag is what pollfd.c stored in
 * epoll_event.data.u64, gen the number of the epoll wait that returned
 * it (netpoll_gen); Gs made ready are pushed on *list (schedlink). */
void pollfd_event(uint64_t tag, uint32_t events, uint64_t gen, struct g **list);

/* The epoll waits of the netpoller made so far: each takes the next
 * number before its call (seq_cst), so an event from a wait numbered
 * above a value read earlier was harvested after that read. */
extern _Atomic uint64_t netpoll_gen;

/* ---- poll descriptors (pollfd.c) -------------------------------------- */

enum {
	PD_READ = 1,
	PD_WRITE = 2,
};

/* pd.flags: what weft knows about the file at this fd number now */
enum {
	PD_KNOWN = 1 << 0,   /* the fields below were worked out for this file */
	PD_REG = 1 << 1,     /* registered with the epoll instance */
	PD_SOCK = 1 << 2,    /* a socket: weft's tries are MSG_DONTWAIT calls */
	PD_USERNB = 1 << 3,  /* the file was O_NONBLOCK at generation nbgen (below) */
	PD_SYSCALL = 1 << 4, /* I/O blocks the thread, under entersyscall */
	PD_NOPOLL = 1 << 5,  /* epoll refuses it (regular file, directory) */
	PD_DRAINOK = 1 << 6, /* TCP or pipe: a short read empties it */
	PD_NODRAIN = 1 << 7, /* urgent data or hangup seen: no short-read shortcut */
	PD_CLOSING = 1 << 8, /* close in progress */
	PD_NOWAIT = 1 << 9,  /* not a socket: tries are preadv2/pwritev2(RWF_NOWAIT) */
	PD_WPOLL = 1 << 10,  /* PD_NOWAIT, but writes poll first (eventfd: EOPNOTSUPP) */
	PD_SOLE = 1 << 11,   /* made here (accept, socket), never dup'ed: see pd_closing */
	PD_EPOLL = 1 << 12,  /* a program's epoll fd (hook/wait.c): registered only
	                      * while a G may wait on it (pollfd_event) */
	PD_WCALL = 1 << 13,  /* PD_NOWAIT, but a write is the call itself under
	                      * entersyscall, one call, its answer the answer
	                      * (an eventfd: it waits only at 2^64-2) */
	PD_KWAIT = 1 << 14,  /* its last wait was a read or accept in the kernel
	                      * (hook.c io_kcall), not a park: like PD_EPOLL,
	                      * registered only while a G may park on it
	                      * (pollfd_event) */
	PD_KWIDLE = 1 << 15, /* PD_KWAIT, and one event found no G waiting: the
	                      * next such event takes it out of the epoll
	                      * instance (a connection with one exchange, then
	                      * closed, never leaves: no EPOLL_CTL_DEL) */
};
/* Files whose event with no G waiting takes them out of the epoll
 * instance (pollfd.c unwatch_locked): their waits are mostly made in the
 * kernel, on the waiting G's own M. */
#define PD_UNWATCH (PD_EPOLL | PD_KWAIT)
/* A pollable file that is neither PD_SOCK nor PD_NOWAIT (the kernel
 * refuses RWF_NOWAIT for it: inotify, ttys, named FIFOs...) is tried by
 * asking poll(2) with a zero timeout first, then making the call under
 * entersyscall.  weft never changes a file's O_NONBLOCK. */

struct pd {
	struct lock lock;         /* waiters, seq, flags changes, epoll_ctl */
	_Atomic uint32_t seq;     /* bumped for every new file or close */
	_Atomic uint32_t flags;   /* PD_* */
	_Atomic uint32_t rev;     /* read-side events seen */
	_Atomic uint32_t wev;     /* write-side events seen */
	_Atomic uint32_t rdrain;  /* rev + 1 when a read found it empty, else 0 */
	_Atomic uint32_t nbgen;   /* pd_nbgen when PD_USERNB was last seen true */
	_Atomic uint32_t forkgen; /* pd_forkgen when this file was made (PD_SOLE) */
	_Atomic int64_t rtimeo;   /* SO_RCVTIMEO in ns, 0 none */
	_Atomic int64_t wtimeo;   /* SO_SNDTIMEO in ns, 0 none */
	_Atomic uint32_t timeogen; /* pd_timeogen when rtimeo/wtimeo were read, 0 never */
	_Atomic uint32_t evmask;  /* the last event's epoll mask (0: none since the file) */
	_Atomic uint64_t evgen;   /* netpoll_gen of the wait that returned it */
	struct waitq waiters;     /* parked Gs, FIFO; waiter.ticket = PD_READ|PD_WRITE wanted */
	_Atomic int32_t nkw;      /* Gs reading or accepting on it in the kernel now (hook.c
	                           * io_kcall, their M's kwpd): a close asks their waits to end */
} __attribute__((aligned(64)));

/* O_NONBLOCK belongs to the open file, shared by every dup of it and
 * changed through any of them; PD_USERNB is a hint per fd number, good
 * while d->nbgen == pd_nbgen.  Every F_SETFL or FIONBIO the program makes
 * bumps pd_nbgen (hook/fd.c), so a hint older than the last change is
 * asked of the kernel (F_GETFL) again before it is used. */
extern _Atomic uint32_t pd_nbgen;

/* A file made by the program in this process (accept, socket: PD_SOLE),
 * never dup'ed and with nothing since it was made that may let another
 * fd or process reach it (pd_forkgen, which pd_shared bumps: a fork;
 * under the shim also a spawn, an fd sent with SCM_RIGHTS, a raw fcntl,
 * ioctl or dup made through syscall()), is closed for good by its close:
 * the kernel then drops its epoll registration itself, and pd_closing
 * makes no EPOLL_CTL_DEL.  Only a hint there: a file that lives on
 * elsewhere (a raw dup or clone weft does not see) keeps a stale
 * registration, whose events the seq in their tag discards
 * (pollfd_event): a wakeup of the netpoller each, no wrong answer. */
extern _Atomic uint32_t pd_forkgen;
/* Every file made so far may be reached from elsewhere from now on.
 * Called before the call that shares them (a seq_cst RMW): a G that
 * learns of what the other side did with a file afterwards sees the
 * bump (pd_sole). */
void pd_shared(void);

/* Under the shim (set at its start), which sees every call that shares
 * a file (pd_shared), a PD_SOLE file is reached only through its one fd
 * number in this process, so its O_NONBLOCK changes only through the
 * program's fcntl F_SETFL / ioctl FIONBIO on that fd, which the hooks
 * record (PD_USERNB, hook/fd.c): a try of it that would block needs no
 * F_GETFL before the G parks (hook.c io_wait; one system call per park,
 * a third of an echo server's per message).  What weft cannot see is
 * left: an inline-assembly system call (not syscall()) that sets the
 * flag, another process taking the fd with pidfd_getfd, a raw clone
 * sharing the fd table, and a file made while a fork ran whose child
 * sets its flag and says so before the fork's caller is back from it
 * (pd_shared runs again then).  Linked programs (fork, spawn and
 * syscall() not hooked) always ask. */
extern bool pd_soletrust;
static inline bool pd_sole(struct pd *d)
{
	return pd_soletrust &&
	       (atomic_load_explicit(&d->flags, memory_order_acquire) & PD_SOLE) &&
	       atomic_load_explicit(&d->forkgen, memory_order_relaxed) ==
		       atomic_load_explicit(&pd_forkgen, memory_order_acquire);
}

/* SO_RCVTIMEO/SO_SNDTIMEO belong to the socket too, shared by its dups:
 * rtimeo/wtimeo are good while d->timeogen == pd_timeogen, which every
 * timeout the program sets bumps (hook/fd.c); a stale pair is read from
 * the kernel again (pd_sockopt_ns) before a wait uses it (fuzzer finding
 * 14: a timeout set through a dup, a wait on the original forever). */
extern _Atomic uint32_t pd_timeogen;
int64_t pd_sockopt_ns(int fd, int name); /* SO_RCVTIMEO/SO_SNDTIMEO in ns, 0 none */

/* The descriptor of fd: pd_lookup never allocates (NULL if there is none
 * yet), pd_get makes its chunk.  NULL for a negative or huge fd. */
struct pd *pd_lookup(int fd);
/* fn(fd, d, arg) for every descriptor in the table (chunks made so far;
 * an entry may never have been used). */
void pd_foreach(void (*fn)(int fd, struct pd *d, void *arg), void *arg);
struct pd *pd_get(int fd);

/* A new file now sits at fd (socket, accept, pipe, open, dup...): forget
 * the old one (its waiters get EBADF) and start from flags. */
void pd_reset(int fd, uint32_t flags);
/* The same for a PD_SOLE file, with pd_forkgen as read before the call
 * that made it (a fork or spawn under way then may have given the child
 * the new file: pd_shared runs again after those, so the file is not
 * taken for sole). */
void pd_reset_sole(int fd, uint32_t flags, uint32_t forkgen);
/* fd was duplicated to newfd: newfd shares the file and its modes. */
void pd_dup(int oldfd, int newfd);
/* close(fd) is about to happen: wake its waiters with EBADF, drop the
 * epoll registration.  Returns the seq to hand to pd_closed after the
 * real close, or 0 when fd had no state. */
uint32_t pd_closing(int fd);
void pd_closed(int fd, uint32_t seq);
/* Treat as an event in dirs (shutdown): parked Gs retry their call. */
void pd_kick(struct pd *d, unsigned dirs);

/* Work out what the file at fd is (first use on a G): the program's
 * blocking mode (read, never changed), pollability, kind, socket
 * timeouts.  0 or -errno. */
int pd_init(struct pd *d, int fd);
/* Register fd with the epoll instance once.  0 or -errno (-EPERM: the
 * file cannot be polled). */
int pd_register(struct pd *d, int fd);
/* d is a program's epoll fd a G waits on (epoll_wait's hook): PD_EPOLL. */
void pd_markepoll(struct pd *d);
/* A G waits for d's file in the kernel in a read or an accept: PD_KWAIT.
 * pd_unmarkkwait: a G parks on it (hook.c io_wait), so its events have
 * a waiter to wake again, and an idle one leaves the file watched (a busy
 * server's connection would otherwise leave and rejoin the epoll
 * instance per message: an EPOLL_CTL_DEL and an ADD). */
void pd_markkwait(struct pd *d);
void pd_unmarkkwait(struct pd *d);

/* One fd a G waits on.  Fill d, seq, mask; pd_snap records the event
 * counters before the call whose EAGAIN leads to the wait. */
struct pollreq {
	struct pd *d;
	uint32_t seq;    /* the descriptor's seq when the operation began */
	uint32_t mask;   /* PD_READ | PD_WRITE */
	uint32_t rev, wev;
	struct waiter w;
};

static inline void pd_snap(struct pollreq *r)
{
	r->rev = atomic_load_explicit(&r->d->rev, memory_order_acquire);
	r->wev = atomic_load_explicit(&r->d->wev, memory_order_acquire);
}

/* Park the running G until an event on any of r[0..n) after its snap,
 * a close, or deadline (absolute nanotime, -1 none).  0 (retry the
 * call), -ETIMEDOUT, -EINTR (g_interrupt, if g->introk was set), or
 * -EBADF (an fd was closed).  reason: W_IO_*. */
int pd_wait(struct pollreq *r, int n, int64_t deadline, int reason);

/* After a wait on r alone: the epoll mask of the file's latest event if
 * the netpoller's wait that returned it was numbered above since (a
 * netpoll_gen read before the caller's own look at the file) and the
 * file is still r's, else 0.  An edge-triggered epoll_wait reports the
 * file's whole ready mask (for the registered EPOLLIN, EPOLLOUT,
 * EPOLLRDHUP, EPOLLPRI, and EPOLLERR, EPOLLHUP) as it is when the wait
 * returns, so such a mask is the file's state at a moment after since:
 * what a poll(2) made then would have answered (hook/wait.c). */
uint32_t pd_evmask(struct pollreq *r, uint64_t since);

#endif
