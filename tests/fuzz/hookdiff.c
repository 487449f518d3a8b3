/*
 * hookdiff.c - differential fuzzer for weft's I/O hooks (libFuzzer).
 *
 * A fuzz input decodes to a short program of fd operations (see enum op).
 * The program runs in this process:
 *   - by a plain thread calling glibc's own functions (found with dlsym
 *     on libc.so.6, so weft's hooks are bypassed altogether): the thread
 *     that calls LLVMFuzzerTestOneInput;
 *   - by a G calling the hooked names (weft's hooks are linked into this
 *     executable, tests/fuzz/fuzz.mk), kept across inputs, as is the
 *     runtime (libFuzzer's persistent mode).
 * Every return value, errno, byte received, poll/select/epoll result and,
 * at the end, the F_GETFL of every fd still open goes into a trace.  When
 * the two traces differ, each run is made once more: if the two libc
 * runs differ the input is timing-dependent and dropped; if the second
 * weft run still differs from the second libc run, the fuzzer abort()s
 * with both traces printed: a finding, saved by libFuzzer as crash-*.
 * After every input the process must have the fds (below 256 each
 * time, all of them every 1024th input) and live Gs it had before: a
 * leak is a finding too.
 *
 * Determinism.  Operations run one at a time, in program order, on the
 * run's coordinator (the operation's task bit is no longer used: which
 * thread makes a call does not change its answer).  An operation that
 * could block is only made when it cannot hang: the interpreter asks
 * first (poll with timeout 0, FIONREAD, SO_RCVTIMEO/SO_SNDTIMEO) through
 * the same functions under test, and records the answer; one that would
 * block with no timeout is skipped (recorded as such).  The one place two
 * threads run at once is OP_PAIR: the coordinator makes a blocking call
 * on an fd that is not ready and a partner (a thread, or a G, kept
 * across inputs) does exactly one thing (write <= 1 KiB, shutdown,
 * close, eventfd write, timerfd arm) that makes it ready, once the call
 * is blocked: the partner watches for it (the thread's state in /proc,
 * the G's status: tests/fuzz/gstate.c), not a sleep.  The outcome does
 * not depend on that order; the order makes the park-and-wake path the
 * one taken.  A blocked call still blocked 10 s after its partner acted
 * is a finding (a lost wakeup), as is a weft run that takes 20 s.
 * Timeouts are 1 us where the call takes microseconds (ppoll, select,
 * epoll_pwait2); a call that waits out a millisecond or more (a socket
 * timeout, which the kernel rounds up to a jiffy; poll and epoll_wait's
 * 1 ms with HOOKDIFF_SLOW=2) is allowed once per program, so that an
 * input runs in well under a millisecond.  Where the kernel itself is not
 * deterministic the program is kept away: no fill-until-EAGAIN on TCP
 * (ACK timing), epoll on TCP level-triggered (an edge can come from a
 * late ACK), a timerfd's expiry count recorded as "at least one", fd
 * numbers not recorded (weft's own threads open /proc files for a
 * moment).
 *
 * Known (open) findings (docs/reliability.md) are steered around unless
 * HOOKDIFF_KNOWN=0 (mask_known); none is open now.
 *
 *   build/fuzz/hookdiff CORPUS_DIR tests/fuzz/corpus   (make fuzz)
 *   build/fuzz/hookdiff crash-XXXX                     replay one input
 *   HOOKDIFF_VERBOSE=1 ...                             print every trace
 *   HOOKDIFF_SLOW=N ...                                N slow calls a program (1)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

#include "piperoom.h"

/* ---- the functions under test: glibc's or weft's ------------------------ */

struct fns {
	int (*socketpair)(int, int, int, int[2]);
	int (*pipe2)(int[2], int);
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*eventfd)(unsigned, int);
	int (*timerfd_create)(int, int);
	int (*timerfd_settime)(int, int, const struct itimerspec *, struct itimerspec *);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*shutdown)(int, int);
	int (*close)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *,
			    const sigset_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
};

#define FNS_LIST(X)                                                                          \
	X(socketpair) X(pipe2) X(socket) X(bind) X(listen) X(connect) X(accept4)            \
	X(getsockname) X(eventfd) X(timerfd_create) X(timerfd_settime) X(read) X(readv)    \
	X(recv) X(recvfrom) X(recvmsg) X(write) X(writev) X(send) X(sendto) X(sendmsg) X(shutdown) X(close) X(dup) X(dup2) X(dup3)     \
	X(fcntl) X(ioctl) X(poll) X(ppoll) X(select) X(epoll_create1) X(epoll_ctl)          \
	X(epoll_wait) X(epoll_pwait2) X(setsockopt) X(getsockopt)

static struct fns weftfns = {
#define X(n) .n = (void *)n,
	FNS_LIST(X)
#undef X
};
static struct fns libcfns;

static void load_libc(void)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	if (!h) {
		fprintf(stderr, "hookdiff: dlopen libc.so.6: %s\n", dlerror());
		abort();
	}
#define X(n)                                                                  \
	if (!(libcfns.n = dlsym(h, #n))) {                                    \
		fprintf(stderr, "hookdiff: dlsym %s: %s\n", #n, dlerror());   \
		abort();                                                      \
	}
	FNS_LIST(X)
#undef X
}

/* ---- the program ----------------------------------------------------------- */

enum op {
	OP_SOCKETPAIR, OP_PIPE, OP_TCP, OP_EVENTFD, OP_TIMERFD, OP_READ, OP_WRITE, OP_SHUTDOWN,
	OP_CLOSE, OP_DUP, OP_FCNTL, OP_POLL, OP_SELECT, OP_EPOLL, OP_TIMEO, OP_PAIR, OP_FILL,
	OP_READ2, OP_WRITE2, OP_NOPS
};
static const char *const opname[] = {
	"socketpair", "pipe", "tcp", "eventfd", "timerfd", "read", "write", "shutdown",
	"close", "dup", "fcntl", "poll", "select", "epoll", "timeo", "pair", "fill",
	"read", "write",
};

#define MAXOPS 24
#define NARG 6
#define NSLOT 12
#define NFILE 32

struct insn {
	uint8_t op;     /* enum op */
	uint8_t task;   /* 0 A, 1 B */
	uint8_t a[NARG]; /* raw argument bytes, each op reads what it needs */
};

struct prog {
	int n;
	struct insn in[MAXOPS];
};

static void decode(const uint8_t *d, size_t sz, struct prog *p)
{
	size_t i = 0;
	p->n = 0;
	while (i < sz && p->n < MAXOPS) {
		struct insn *in = &p->in[p->n++];
		in->op = (d[i] & 0x7f) % OP_NOPS;
		in->task = d[i] >> 7;
		i++;
		for (int k = 0; k < NARG; k++)
			in->a[k] = i < sz ? d[i++] : 0;
	}
}

/* ---- the interpreter's model: slots (fds) and files ------------------------- */

enum kind { K_NONE, K_USTREAM, K_UDGRAM, K_USEQ, K_PIPER, K_PIPEW, K_TCP, K_EVENTFD, K_TIMERFD };

struct file {
	int kind;
	int peer;   /* file index of the other end, -1 */
	int refs;   /* open slots referring to it */
	int shutwr; /* shut down for writing (a datagram peer then never wakes) */
	long pages; /* a pipe's write end: at most this many pages hold data (piperoom.h) */
};

struct slot {
	int fd;     /* -1 closed; lastfd keeps the number */
	int lastfd;
	int file;
};

/* One trace record. */
struct rec {
	uint16_t step;
	uint16_t tag;
	int64_t v;
};

#define MAXREC 1024

struct run {
	const struct fns *f;
	int weft;                   /* ops run on Gs */
	struct slot slot[NSLOT];
	struct file file[NFILE];
	int nfile;
	unsigned wseq;              /* write pattern counter */
	int nrec;
	struct rec rec[MAXREC];
	uint8_t buf[2][1 << 17];    /* [0] the blocker's (every op), [1] the partner's */
	int slow;                   /* calls that wait out a timeout of 1 ms or more so far */
	unsigned fixed;             /* bit k: a dup2/dup3 onto 200 + k was made (closed at the end) */
	/* during a pair both sides record at once: each into its own list
	 * ([0] blocker, [1] partner), appended in that order afterwards */
	int inpair;
	int np[2];
	struct rec prec[2][64];
};

/* The partner of pairs, one per kind of run ([0] plain libc, [1] weft):
 * a plain thread or a G made once and kept across executions
 * (libFuzzer's persistent mode), like the run's own side, which is the
 * thread calling LLVMFuzzerTestOneInput (libc) or a G kept likewise
 * (weft).  A pair: the coordinator posts go, sets armed and makes its
 * blocking call, then posts ret; the partner waits until the coordinator
 * is blocked (in the kernel or parked), acts, and waits for ret. */
struct partner {
	weft_sem_t go;        /* a pair to serve (pl, step, r set) */
	weft_sem_t done;      /* served */
	weft_sem_t ret;       /* the blocked call returned */
	_Atomic int armed;    /* the coordinator is about to make the blocking call */
	_Atomic int returned; /* ... and it has returned */
	struct run *r;
	const struct pairplan *pl;
	int step;
	pthread_t th;         /* libc: the partner thread */
	int64_t gid;          /* weft: the partner G */
	void *blockg;         /* weft: the coordinator's G (hookdiff_gblocked) */
	int statfd;           /* libc: /proc/self/task/<coordinator>/stat */
	pid_t blocktid;       /* libc: the coordinator's thread */
};
static struct partner partners[2];

enum tag {
	T_RET = 1, T_ERR, T_DATA, T_SKIP, T_REV, T_BITS, T_FL, T_EV, T_FINALFL, T_PRE, T_CNT,
	T_HANG,
};
static const char *const tagname[] = {
	"", "ret", "errno", "datahash", "skip", "revents", "bits", "getfl", "events",
	"final_getfl", "pre", "count", "hang",
};

static void rec(struct run *r, int step, int tag, int64_t v)
{
	if (r->inpair) {
		const struct partner *pa = &partners[r->weft];
		int t = r->weft ? weft_self() == pa->gid : pthread_equal(pthread_self(), pa->th);
		if (r->np[t] < 64)
			r->prec[t][r->np[t]++] = (struct rec){ (uint16_t)step, (uint16_t)tag, v };
		return;
	}
	if (r->nrec < MAXREC)
		r->rec[r->nrec++] = (struct rec){ (uint16_t)step, (uint16_t)tag, v };
}

/* A call's result: the value, and errno when it failed. */
static long res(struct run *r, int step, long v)
{
	int e = errno;
	rec(r, step, T_RET, v < 0 ? -1 : v);
	if (v < 0)
		rec(r, step, T_ERR, e);
	return v;
}

/* A call that returns a new fd: whether it did, and errno, not the
 * number.  Which number is lowest and free depends on what other threads
 * hold at that moment: weft's own threads open /proc files for a moment
 * (sysmon asking whether an M sleeps in the kernel, the deadlock check
 * counting threads) while a run goes on, so the numbers differ between
 * runs without either being wrong.  A wrong fd would show in what the
 * later calls on it answer. */
static long resfd(struct run *r, int step, long fd)
{
	res(r, step, fd < 0 ? fd : 0);
	return fd;
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

/* Leave alone what triggers a known finding (HOOKDIFF_KNOWN=0: do not):
 * an open finding's steering tests it, then rec(r, step, T_SKIP, 3).  No
 * finding is open now. */
static int mask_known = 1;

static const size_t sizes[16] = { 0, 1, 3, 8, 17, 64, 511, 1024, 4096, 4097, 8192, 16384,
				  65536, 100000, 131072, 7 };

/* Slot number from an argument byte. */
static struct slot *slotof(struct run *r, uint8_t b)
{
	return &r->slot[b % NSLOT];
}

static int newfile(struct run *r, int kind)
{
	if (r->nfile >= NFILE)
		return -1;
	r->file[r->nfile] = (struct file){ kind, -1, 0, 0, 0 };
	return r->nfile++;
}

/* The first free slot, or -1. */
static int freeslot(struct run *r)
{
	for (int i = 0; i < NSLOT; i++)
		if (r->slot[i].fd < 0)
			return i;
	return -1;
}

static void setslot(struct run *r, int i, int fd, int file)
{
	r->slot[i].fd = fd;
	r->slot[i].lastfd = fd;
	r->slot[i].file = file;
	if (file >= 0)
		r->file[file].refs++;
}

static void dropslot(struct run *r, struct slot *s)
{
	if (s->fd >= 0 && s->file >= 0)
		r->file[s->file].refs--;
	s->fd = -1;
}

/* A pair of new fds into two free slots (closed again if there are none). */
static void addpair(struct run *r, int fds[2], int k0, int k1)
{
	int i = freeslot(r);
	if (i < 0) {
		r->f->close(fds[0]);
		r->f->close(fds[1]);
		return;
	}
	int f0 = newfile(r, k0);
	setslot(r, i, fds[0], f0);
	int j = freeslot(r);
	int f1 = newfile(r, k1);
	if (j < 0) {
		r->f->close(fds[1]);
		return;
	}
	setslot(r, j, fds[1], f1);
	if (f0 >= 0 && f1 >= 0) {
		r->file[f0].peer = f1;
		r->file[f1].peer = f0;
	}
}

static void addone(struct run *r, int fd, int kind)
{
	int i = freeslot(r);
	if (i < 0) {
		r->f->close(fd);
		return;
	}
	setslot(r, i, fd, newfile(r, kind));
}

static int kindof(struct run *r, struct slot *s)
{
	return s->fd >= 0 && s->file >= 0 ? r->file[s->file].kind : K_NONE;
}

static int is_sock(int k)
{
	return k == K_USTREAM || k == K_UDGRAM || k == K_USEQ || k == K_TCP;
}

/* An open slot on file f other than except, or NULL. */
static struct slot *slot_on(struct run *r, int f)
{
	for (int i = 0; i < NSLOT; i++)
		if (r->slot[i].fd >= 0 && r->slot[i].file == f)
			return &r->slot[i];
	return NULL;
}

/* ---- readiness questions (through the functions under test) ------------ */

static int ready(struct run *r, int fd, short ev)
{
	struct pollfd p = { fd, ev, 0 };
	int n = r->f->poll(&p, 1, 0);
	return n == 1 && (p.revents & (ev | POLLHUP | POLLERR | POLLNVAL));
}

static int nonblocking(struct run *r, int fd)
{
	int fl = r->f->fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_NONBLOCK);
}

static int has_timeo(struct run *r, int fd, int name)
{
	struct timeval tv = { 0, 0 };
	socklen_t len = sizeof tv;
	return r->f->getsockopt(fd, SOL_SOCKET, name, &tv, &len) == 0 && (tv.tv_sec || tv.tv_usec);
}

/* The bytes a write sends: byte i of the s-th pattern is
 * s * 131 + i * 7 + i / 256 (mod 256), i.e. pbase[i] + s * 131.  Made
 * eight bytes at a time (an add in each byte, no carry between them):
 * a byte loop over writes of up to 128 KiB was a few % of an
 * execution's CPU. */
static uint8_t pbase[1 << 17];

static void pattern_init(void)
{
	for (size_t i = 0; i < sizeof pbase; i++)
		pbase[i] = (uint8_t)(i * 7 + (i >> 8));
}

static void pattern(struct run *r, uint8_t *p, size_t n)
{
	uint8_t c = (uint8_t)(r->wseq++ * 131);
	const uint64_t hi = 0x8080808080808080ULL, cc = c * 0x0101010101010101ULL;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, pbase + i, 8);
		w = ((w & ~hi) + (cc & ~hi)) ^ ((w ^ cc) & hi);
		memcpy(p + i, &w, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)(pbase[i] + c);
}

/* A call that may wait out a timeout of a millisecond or more (poll and
 * epoll_wait count in ms, and the kernel rounds SO_RCVTIMEO/SO_SNDTIMEO
 * up to a jiffy, 4 ms here): one per program, so that an execution stays
 * well under a millisecond.  Decided by the program alone, so every run
 * of it decides the same. */
static int slow_budget = 1; /* HOOKDIFF_SLOW */
static long pagesize = 4096; /* sysconf(_SC_PAGESIZE), at start-up */

static int slow_ok(struct run *r)
{
	return r->slow++ < slow_budget;
}

/* A poll/select/epoll that may wait 1 ms: only with a budget of 2 or
 * more (the socket timeouts come first: they find what the kernel's
 * blocking path does differently). */
static int slow_ms(struct run *r)
{
	return slow_budget >= 2 && slow_ok(r);
}

/* ---- the operations ------------------------------------------------------------ */

/* read-class call on s: variant v (0 read, 1 readv, 2 recv), flags, n. */
static void do_read(struct run *r, int step, int t, struct slot *s, int v, int flags, size_t n)
{
	uint8_t *b = r->buf[t];
	long got;
	if (v == 1) {
		struct iovec iov[2] = { { b, n / 3 }, { b + n / 3, n - n / 3 } };
		got = r->f->readv(s->fd, iov, 2);
	} else if (v == 2) {
		got = r->f->recv(s->fd, b, n, flags);
	} else if (v == 3) {
		struct iovec iov[2] = { { b, n / 2 }, { b + n / 2, n - n / 2 } };
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
		got = r->f->recvmsg(s->fd, &mh, flags);
	} else if (v == 4) {
		got = r->f->recvfrom(s->fd, b, n, flags, NULL, NULL);
	} else {
		got = r->f->read(s->fd, b, n);
	}
	res(r, step, got);
	if (got > 0) {
		int k = kindof(r, s);
		if (k == K_TIMERFD && got == 8) /* the expiry count: normalise */
			rec(r, step, T_DATA, *(uint64_t *)b > 0);
		else
			rec(r, step, T_DATA, (int64_t)fnv(b, (size_t)got));
	}
}

static void do_write(struct run *r, int step, int t, struct slot *s, int v, int flags, size_t n)
{
	uint8_t *b = r->buf[t];
	int k = kindof(r, s);
	if (k == K_EVENTFD && n >= 8) {
		uint64_t val = (n == 8192) ? UINT64_MAX : (uint64_t)(r->wseq++ % 200);
		memcpy(b, &val, 8);
	} else {
		pattern(r, b, n);
	}
	long put;
	if (v == 1) {
		struct iovec iov[2] = { { b, n / 2 }, { b + n / 2, n - n / 2 } };
		put = r->f->writev(s->fd, iov, 2);
	} else if (v == 2) {
		put = r->f->send(s->fd, b, n, flags);
	} else if (v == 3) {
		struct iovec iov[2] = { { b, n / 3 }, { b + n / 3, n - n / 3 } };
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
		put = r->f->sendmsg(s->fd, &mh, flags);
	} else if (v == 4) {
		put = r->f->sendto(s->fd, b, n, flags, NULL, 0);
	} else {
		put = r->f->write(s->fd, b, n);
	}
	res(r, step, put);
	if (k == K_PIPEW) /* the pages it can have taken (piperoom.h) */
		r->file[s->file].pages += piperoom_write(pagesize, put);
}

static const int rflags[8] = { 0, MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, MSG_PEEK | MSG_DONTWAIT,
			       MSG_WAITALL | MSG_DONTWAIT, MSG_PEEK | MSG_WAITALL, 0 };

/* Would a read of n with these flags block forever here?  Recorded. */
static int read_would_hang(struct run *r, int step, struct slot *s, int v, int flags, size_t n)
{
	if (v < 2)
		flags = 0;
	if ((flags & MSG_DONTWAIT) || nonblocking(r, s->fd))
		return 0;
	int k = kindof(r, s);
	if (k == K_EVENTFD && n < 8)
		return 0; /* EINVAL at once */
	if (v >= 2 && !is_sock(k))
		return 0; /* recv, recvmsg, recvfrom: ENOTSOCK at once */
	/* read/readv of 0 return at once (sock_read_iter); recv of 0 waits */
	if (n == 0 && v < 2 && k != K_UDGRAM && k != K_USEQ)
		return 0;
	int rd = ready(r, s->fd, POLLIN | POLLRDHUP);
	/* MSG_WAITALL waits for all of it on a stream socket; a unix
	 * socket's peek does not, TCP's does */
	int all = (flags & MSG_WAITALL) &&
		  ((k == K_USTREAM && !(flags & MSG_PEEK)) || k == K_TCP);
	if (rd && all) {
		int q = 0;
		r->f->ioctl(s->fd, FIONREAD, &q);
		/* not all there, and no end of file coming */
		if ((size_t)q < n && !ready(r, s->fd, POLLRDHUP | POLLHUP))
			rd = 0;
	}
	rec(r, step, T_PRE, rd);
	if (rd)
		return 0;
	/* with SO_RCVTIMEO it ends at the timeout: the slow budget's */
	return !(is_sock(k) && has_timeo(r, s->fd, SO_RCVTIMEO) && slow_ok(r));
}

static int write_would_hang(struct run *r, int step, struct slot *s, int v, int flags, size_t n)
{
	if (v < 2)
		flags = 0;
	if ((flags & MSG_DONTWAIT) || nonblocking(r, s->fd))
		return 0;
	int k = kindof(r, s);
	if (v >= 2 && !is_sock(k))
		return 0; /* send, sendmsg, sendto: ENOTSOCK at once */
	int wr = ready(r, s->fd, POLLOUT) && n <= 4096;
	rec(r, step, T_PRE, wr);
	if (wr || k == K_EVENTFD)
		return 0;
	return !(is_sock(k) && has_timeo(r, s->fd, SO_SNDTIMEO) && slow_ok(r));
}

static void op_tcp(struct run *r, int step, uint8_t a0)
{
	const struct fns *f = r->f;
	int nb = (a0 & 1) ? SOCK_NONBLOCK : 0;
	int l = f->socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (resfd(r, step, l) < 0)
		return;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	int c = -1, s = -1;
	if (f->bind(l, (void *)&sa, len) == 0 && f->listen(l, 4) == 0 &&
	    f->getsockname(l, (void *)&sa, &len) == 0) {
		c = f->socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c >= 0 && res(r, step, f->connect(c, (void *)&sa, len)) == 0)
			s = f->accept4(l, NULL, NULL, nb | SOCK_CLOEXEC);
		resfd(r, step, s);
	}
	f->close(l);
	if (c >= 0 && s >= 0) {
		int fds[2] = { c, s };
		addpair(r, fds, K_TCP, K_TCP);
	} else {
		if (c >= 0)
			f->close(c);
		if (s >= 0)
			f->close(s);
	}
}

/* Arm a timerfd to expire once in ns (0 disarms). */
static int arm(struct run *r, int fd, long ns)
{
	struct itimerspec it = { { 0, 0 }, { ns / 1000000000L, ns % 1000000000L } };
	return r->f->timerfd_settime(fd, 0, &it, NULL);
}

static void op_timerfd(struct run *r, int step, uint8_t a0)
{
	int fl = ((a0 & 1) ? TFD_NONBLOCK : 0) | TFD_CLOEXEC;
	int fd = r->f->timerfd_create(CLOCK_MONOTONIC, fl);
	if (resfd(r, step, fd) < 0)
		return;
	if (a0 & 2) {
		/* expired before anything else happens: wait for it with the
		 * raw system call (not a question under test) */
		arm(r, fd, 1000);
		struct pollfd p = { fd, POLLIN, 0 };
		while (syscall(SYS_ppoll, &p, 1, NULL, NULL, 8) != 1)
			;
	}
	addone(r, fd, K_TIMERFD);
}

static void op_dup(struct run *r, int step, const uint8_t *a)
{
	struct slot *s = slotof(r, a[0]);
	const struct fns *f = r->f;
	int which = a[1] % 4;
	int fd = s->fd >= 0 ? s->fd : s->lastfd;
	if (fd < 0)
		return;
	if (s->fd < 0) /* a closed number: only while no slot took it again */
		for (int i = 0; i < NSLOT; i++)
			if (r->slot[i].fd == fd)
				return;
	if (which == 0) {
		int n = resfd(r, step, f->dup(fd));
		if (n >= 0) {
			int i = freeslot(r);
			if (i < 0 || s->fd < 0) {
				f->close(n);
			} else {
				setslot(r, i, n, s->file);
			}
		}
		return;
	}
	/* dup2/dup3 onto another slot's fd or a fixed number */
	struct slot *t = slotof(r, a[2]);
	int target = (a[2] & 0x80) ? 200 + (a[2] & 3) : (t->fd >= 0 ? t->fd : t->lastfd);
	if (target < 0)
		target = 200;
	int n;
	if (target >= 200 && target < 204)
		r->fixed |= 1u << (target - 200);
	if (which == 1)
		n = f->dup2(fd, target);
	else
		n = f->dup3(fd, target, (a[3] & 1) ? O_CLOEXEC : ((a[3] & 2) ? O_NONBLOCK : 0));
	res(r, step, n < 0 ? n : n == target);
	if (n < 0 || s->fd < 0 || n == fd)
		return;
	/* the target's slot now refers to s's file */
	for (int i = 0; i < NSLOT; i++)
		if (r->slot[i].fd == n)
			dropslot(r, &r->slot[i]);
	int i = freeslot(r);
	if (i < 0) {
		f->close(n);
		return;
	}
	setslot(r, i, n, s->file);
}

static void op_fcntl(struct run *r, int step, const uint8_t *a)
{
	struct slot *s = slotof(r, a[0]);
	int fd = s->fd >= 0 ? s->fd : s->lastfd;
	if (fd < 0)
		return;
	const struct fns *f = r->f;
	int fl = f->fcntl(fd, F_GETFL);
	res(r, step, fl);
	int mode = a[1] % 5;
	switch (mode) {
	case 0:
		break;
	case 1:
		res(r, step, f->fcntl(fd, F_SETFL, fl | O_NONBLOCK));
		break;
	case 2:
		res(r, step, f->fcntl(fd, F_SETFL, fl & ~O_NONBLOCK));
		break;
	case 3: {
		int on = a[2] & 1;
		res(r, step, f->ioctl(fd, FIONBIO, &on));
		break;
	}
	case 4:
		res(r, step, f->fcntl(fd, F_GETFD));
		res(r, step, f->fcntl(fd, F_SETFD, a[2] & 1));
		break;
	}
	rec(r, step, T_FL, f->fcntl(fd, F_GETFL));
}

static const short pev[8] = { POLLIN, POLLOUT, POLLIN | POLLOUT, POLLPRI, POLLRDHUP | POLLIN, 0,
			      POLLIN | POLLOUT | POLLRDHUP, POLLOUT | POLLPRI };
/* Timeouts of poll, select, epoll (a[4] & 3): 0; 1 us (ppoll,
 * epoll_pwait2, select); 1 ms (poll, epoll_wait: their unit), only
 * with HOOKDIFF_SLOW=2 or more (else 0: a call that times out gives the
 * same answer whatever the timeout, only the cost differs, and weft
 * turns both into the same deadline); 0 again (ppoll and epoll_pwait2
 * with a zero timespec, select with a zero timeval). */
enum { TMO_ZERO, TMO_US, TMO_MS, TMO_ZERO2 };

/* ppoll/epoll_pwait2's timespec for the us and zero cases. */
static const struct timespec tmo_ts[4] = { { 0, 0 }, { 0, 1000 }, { 0, 0 }, { 0, 0 } };

static void op_poll(struct run *r, int step, const uint8_t *a)
{
	struct pollfd p[3];
	int n = 1 + a[0] % 3;
	for (int i = 0; i < n; i++) {
		struct slot *s = slotof(r, a[1 + i]);
		p[i] = (struct pollfd){ s->fd >= 0 ? s->fd : s->lastfd, pev[(a[1 + i] >> 4) & 7], 0 };
	}
	int m = a[4] & 3;
	if (m == TMO_MS && !slow_ms(r))
		m = TMO_ZERO;
	if (m == TMO_US || m == TMO_ZERO2)
		res(r, step, r->f->ppoll(p, (nfds_t)n, &tmo_ts[m], NULL));
	else
		res(r, step, r->f->poll(p, (nfds_t)n, m == TMO_MS ? 1 : 0));
	for (int i = 0; i < n; i++)
		rec(r, step, T_REV, p[i].revents);
}

static void op_select(struct run *r, int step, const uint8_t *a)
{
	fd_set rs, ws, es;
	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_ZERO(&es);
	int maxfd = -1, n = 1 + a[0] % 3;
	int fds[3];
	for (int i = 0; i < n; i++) {
		struct slot *s = slotof(r, a[1 + i]);
		int fd = fds[i] = s->fd;
		if (fd < 0 || fd >= FD_SETSIZE)
			continue;
		int e = (a[1 + i] >> 4) & 7;
		if (e & 1)
			FD_SET(fd, &rs);
		if (e & 2)
			FD_SET(fd, &ws);
		if (e & 4)
			FD_SET(fd, &es);
		if (fd > maxfd)
			maxfd = fd;
	}
	struct timeval tv = { 0, (a[4] & 3) == TMO_US ? 1 : 0 };
	if ((a[4] & 3) == TMO_MS && slow_ms(r))
		tv.tv_usec = 1000;
	res(r, step, r->f->select(maxfd + 1, &rs, &ws, &es, &tv));
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0 && fds[i] < FD_SETSIZE)
			rec(r, step, T_BITS,
			    FD_ISSET(fds[i], &rs) | FD_ISSET(fds[i], &ws) << 1 |
				    FD_ISSET(fds[i], &es) << 2);
}

static const uint32_t eev[8] = { EPOLLIN, EPOLLOUT, EPOLLIN | EPOLLOUT, EPOLLIN | EPOLLET,
				 EPOLLIN | EPOLLRDHUP, EPOLLOUT | EPOLLET, EPOLLIN | EPOLLONESHOT,
				 EPOLLIN | EPOLLOUT | EPOLLPRI };

static void op_epoll(struct run *r, int step, const uint8_t *a)
{
	const struct fns *f = r->f;
	int ep = f->epoll_create1(EPOLL_CLOEXEC);
	if (resfd(r, step, ep) < 0)
		return;
	int n = 1 + a[0] % 3;
	for (int i = 0; i < n; i++) {
		struct slot *s = slotof(r, a[1 + i]);
		struct epoll_event ev = { .events = eev[(a[1 + i] >> 4) & 7], .data.u32 = (uint32_t)i };
		/* an edge on TCP can come from the peer's ACK, whenever the
		 * kernel gets to it: level-triggered there */
		if (kindof(r, s) == K_TCP)
			ev.events &= ~(uint32_t)(EPOLLET | EPOLLONESHOT);
		res(r, step, f->epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev));
	}
	for (int round = 0; round < 1 + (a[5] & 1); round++) {
		struct epoll_event out[8];
		int m = a[4] & 3, got;
		if (m == TMO_MS && !slow_ms(r))
			m = TMO_ZERO;
		if (m == TMO_US || m == TMO_ZERO2)
			got = f->epoll_pwait2(ep, out, 8, &tmo_ts[m], NULL);
		else
			got = f->epoll_wait(ep, out, 8, m == TMO_MS ? 1 : 0);
		res(r, step, got);
		int64_t evs[3] = { 0, 0, 0 }; /* by case: the kernel's order is not ours */
		for (int i = 0; i < got; i++)
			if (out[i].data.u32 < 3)
				evs[out[i].data.u32] = out[i].events | (1LL << 32);
		for (int i = 0; i < n; i++)
			rec(r, step, T_EV, evs[i]);
	}
	f->close(ep);
}

/* SO_RCVTIMEO/SO_SNDTIMEO (us): the kernel rounds any of them up to a
 * jiffy (4 ms with HZ=250), weft waits what the program set; a call that
 * times out answers the same either way */
static const long timeos[4] = { 0, 1, 10, 100 };

static void op_timeo(struct run *r, int step, const uint8_t *a)
{
	struct slot *s = slotof(r, a[0]);
	if (s->fd < 0)
		return;
	int name = (a[1] & 1) ? SO_SNDTIMEO : SO_RCVTIMEO;
	struct timeval tv = { 0, timeos[(a[1] >> 1) & 3] };
	res(r, step, r->f->setsockopt(s->fd, SOL_SOCKET, name, &tv, sizeof tv));
	struct timeval got = { 0, 0 };
	socklen_t len = sizeof got;
	res(r, step, r->f->getsockopt(s->fd, SOL_SOCKET, name, &got, &len));
	rec(r, step, T_RET, got.tv_sec || got.tv_usec);
}

/* How many writes of n (<= 4096) bytes the blocking pipe s, written by
 * nothing else meanwhile, takes before one could block (piperoom.h):
 * asked of the pipe once, so that a fill need not poll before every
 * write.  Past the count the fill asks poll as before. */
static long pipe_room(struct run *r, struct slot *s, size_t n)
{
	int sz = r->f->fcntl(s->fd, F_GETPIPE_SZ), q = 0;
	if (sz < 0 || r->f->ioctl(s->fd, FIONREAD, &q) != 0)
		return 0;
	struct file *fi = &r->file[s->file];
	if (q == 0)
		fi->pages = 0; /* empty: no page held */
	return piperoom(sz, pagesize, q, fi->pages, n);
}

/* Fill s's direction until it would block: non-blocking tries. */
static void op_fill(struct run *r, int step, const uint8_t *a)
{
	struct slot *s = slotof(r, a[0]);
	int k = kindof(r, s);
	/* not TCP: how much a TCP connection takes before EAGAIN depends on
	 * when its ACKs and window updates run, not only on the program */
	if (k == K_NONE || k == K_EVENTFD || k == K_TIMERFD || k == K_PIPER || k == K_TCP)
		return;
	size_t n = sizes[a[1] & 15];
	if (n == 0)
		n = 1;
	int i, last = 0, err = 0;
	long total = 0;
	uint8_t *b = r->buf[0];
	/* asked once, not before every write (a system call each): nothing
	 * else runs during the loop to change the file's mode, and a weft
	 * that changed it underneath still shows, in the final F_GETFL and
	 * in what later calls on the fd answer */
	int nb = !is_sock(k) && nonblocking(r, s->fd);
	long room = 0; /* blocking pipe: writes known not to block without asking */
	if (!is_sock(k) && !nb && n <= 4096)
		room = pipe_room(r, s, n);
	for (i = 0; i < 256; i++) {
		pattern(r, b, n);
		long w;
		if (is_sock(k)) {
			w = r->f->send(s->fd, b, n, MSG_DONTWAIT);
		} else if (nb) {
			w = r->f->write(s->fd, b, n);
		} else {
			/* a blocking pipe: only while there is room, known
			 * from the start or, past that, asked before each write */
			if (n > 4096 || (i >= room && !ready(r, s->fd, POLLOUT)))
				break;
			w = r->f->write(s->fd, b, n);
		}
		if (w < 0) {
			err = errno;
			break;
		}
		total += w;
		last = (int)w;
	}
	if (k == K_PIPEW) /* the pages this fill can have taken (piperoom.h) */
		r->file[s->file].pages += piperoom_fill(pagesize, i, n);
	rec(r, step, T_CNT, total);
	rec(r, step, T_RET, last);
	rec(r, step, T_ERR, err);
}

/* ---- OP_PAIR: a blocking call met by the other task ----------------------------- */

enum { PA_READ, PA_RECV, PA_POLL, PA_SELECT, PA_EPOLL, PA_NA };

struct pairplan {
	int kind;        /* PA_* */
	struct slot *s;  /* the blocked call's fd */
	int flags;       /* recv flags */
	size_t n;
	int act;         /* partner: 0 write, 1 write+shutdown, 2 shutdown, 3 close, 4 eventfd, 5 arm */
	struct slot *p;  /* the partner's fd */
	size_t m;        /* bytes the partner writes */
};

/* The coordinator is about to make its blocking call: from here the
 * partner looks for it blocked. */
static void armed(struct run *r)
{
	atomic_store(&partners[r->weft].armed, 1);
}

static void pair_block(struct run *r, int step, int t, const struct pairplan *pl)
{
	struct slot *s = pl->s;
	switch (pl->kind) {
	case PA_READ:
		armed(r);
		do_read(r, step, t, s, 0, 0, pl->n);
		break;
	case PA_RECV:
		armed(r);
		do_read(r, step, t, s, 2, pl->flags, pl->n);
		break;
	case PA_POLL: {
		struct pollfd p = { s->fd, POLLIN, 0 };
		armed(r);
		res(r, step, r->f->poll(&p, 1, 10000));
		rec(r, step, T_REV, p.revents & ~POLLRDHUP);
		break;
	}
	case PA_SELECT: {
		fd_set rs;
		FD_ZERO(&rs);
		FD_SET(s->fd, &rs);
		struct timeval tv = { 10, 0 };
		armed(r);
		res(r, step, r->f->select(s->fd + 1, &rs, NULL, NULL, &tv));
		rec(r, step, T_BITS, FD_ISSET(s->fd, &rs));
		break;
	}
	case PA_EPOLL: {
		int ep = r->f->epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 7 };
		r->f->epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
		struct epoll_event out;
		armed(r);
		res(r, step, r->f->epoll_wait(ep, &out, 1, 10000));
		rec(r, step, T_EV, out.events & EPOLLIN);
		r->f->close(ep);
		break;
	}
	}
}

static void pair_partner(struct run *r, int step, int t, const struct pairplan *pl)
{
	struct slot *p = pl->p;
	switch (pl->act) {
	case 0:
	case 1:
		do_write(r, step, t, p, 0, 0, pl->m);
		if (pl->act == 1)
			res(r, step, r->f->shutdown(p->fd, SHUT_WR));
		break;
	case 2:
		res(r, step, r->f->shutdown(p->fd, SHUT_WR));
		break;
	case 3:
		res(r, step, r->f->close(p->fd));
		dropslot(r, p);
		break;
	case 4: {
		uint64_t v = 1 + pl->m % 100;
		res(r, step, r->f->write(p->fd, &v, 8));
		break;
	}
	case 5:
		res(r, step, arm(r, p->fd, 1000)); /* 1 us: the waiter is blocked already */
		break;
	}
}

/* Plan a pair, or return 0 when this one cannot be made safe. */
static int pair_plan(struct run *r, int step, const uint8_t *a, struct pairplan *pl)
{
	struct slot *s = slotof(r, a[0]);
	int k = kindof(r, s);
	if (k == K_NONE || k == K_PIPEW || nonblocking(r, s->fd) || s->fd >= FD_SETSIZE)
		return 0;
	if (ready(r, s->fd, POLLIN | POLLRDHUP))
		return 0; /* it would not block: not a pair */
	*pl = (struct pairplan){ .kind = a[1] % PA_NA, .s = s, .n = sizes[a[2] & 15],
				 .flags = rflags[(a[2] >> 4) & 7] & ~MSG_DONTWAIT, .m = 1 + a[3] * 4 };
	if (pl->kind == PA_RECV && !is_sock(k))
		pl->kind = PA_READ;
	if (pl->n == 0)
		pl->n = 1;
	if (k == K_EVENTFD || k == K_TIMERFD) {
		pl->p = s;
		pl->act = k == K_EVENTFD ? 4 : 5;
		if (pl->kind == PA_RECV || pl->n < 8)
			pl->kind = PA_READ, pl->n = 8;
		return 1;
	}
	/* a socket or a pipe's read end: the other end must be open */
	int pf = r->file[s->file].peer;
	if (pf < 0 || !(pl->p = slot_on(r, pf)))
		return 0;
	/* blocked with a timeout of its own: not a pair */
	if (is_sock(k) && has_timeo(r, s->fd, SO_RCVTIMEO))
		return 0;
	pl->act = (a[4] >> 1) % 4;
	if (k == K_UDGRAM && r->file[pf].shutwr)
		return 0; /* the partner cannot send, and nothing else ends the wait */
	if (k == K_UDGRAM)
		pl->act = 0; /* only data ends a datagram wait */
	if (k == K_PIPER && (pl->act == 1 || pl->act == 2))
		pl->act = 0;
	if (pl->act == 3 && r->file[pf].refs != 1)
		pl->act = 0; /* another fd keeps the end open */
	/* the partner's write must not block, nor arrive in pieces */
	if (pl->act <= 1 && !ready(r, pl->p->fd, POLLOUT))
		return 0;
	/* one event for the waits: data or the end, not both */
	if (pl->kind >= PA_POLL && pl->act == 1)
		pl->act = 0;
	/* MSG_WAITALL for more than comes: the end must come too */
	if (pl->kind == PA_RECV && (pl->flags & MSG_WAITALL) && pl->n > pl->m &&
	    (k == K_USTREAM || k == K_TCP) && pl->act == 0)
		pl->act = 1;
	if (pl->kind == PA_RECV && (pl->flags & MSG_WAITALL) && (pl->flags & MSG_PEEK) &&
	    pl->n > pl->m)
		pl->flags &= ~MSG_WAITALL; /* a peek never ends with the data short */
	rec(r, step, T_PRE, pl->kind * 16 + pl->act);
	return 1;
}

/* ---- running a program -------------------------------------------------------- */

static void exec1(struct run *r, int step, int t, const struct insn *in)
{
	const uint8_t *a = in->a;
	const struct fns *f = r->f;
	switch (in->op) {
	case OP_SOCKETPAIR: {
		static const int ty[3] = { SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET };
		static const int kk[3] = { K_USTREAM, K_UDGRAM, K_USEQ };
		int i = a[0] % 3, fds[2];
		int fl = ((a[1] & 1) ? SOCK_NONBLOCK : 0) | SOCK_CLOEXEC;
		if (res(r, step, f->socketpair(AF_UNIX, ty[i] | fl, 0, fds)) == 0)
			addpair(r, fds, kk[i], kk[i]);
		break;
	}
	case OP_PIPE: {
		int fds[2];
		int fl = ((a[0] & 1) ? O_NONBLOCK : 0) | O_CLOEXEC;
		if (res(r, step, f->pipe2(fds, fl)) == 0)
			addpair(r, fds, K_PIPER, K_PIPEW);
		break;
	}
	case OP_TCP:
		op_tcp(r, step, a[0]);
		break;
	case OP_EVENTFD: {
		int fl = ((a[0] & 1) ? EFD_NONBLOCK : 0) | ((a[0] & 2) ? EFD_SEMAPHORE : 0) |
			 EFD_CLOEXEC;
		int fd = f->eventfd(a[1] & 3, fl);
		if (resfd(r, step, fd) >= 0)
			addone(r, fd, K_EVENTFD);
		break;
	}
	case OP_TIMERFD:
		op_timerfd(r, step, a[0]);
		break;
	case OP_READ:
	case OP_READ2: {
		struct slot *s = slotof(r, a[0]);
		if (s->fd < 0)
			break;
		int v = a[1] % 3, fl = rflags[(a[1] >> 2) & 7];
		if (a[3] & 1)
			v = 3 + ((a[3] >> 1) & 1); /* recvmsg, recvfrom */
		size_t n = sizes[a[2] & 15];
		if (read_would_hang(r, step, s, v, fl, n)) {
			rec(r, step, T_SKIP, 1);
			break;
		}
		do_read(r, step, t, s, v, fl, n);
		break;
	}
	case OP_WRITE:
	case OP_WRITE2: {
		struct slot *s = slotof(r, a[0]);
		if (s->fd < 0)
			break;
		int v = a[1] % 3;
		int fl = (a[1] & 4) ? MSG_DONTWAIT : 0;
		if (a[3] & 1)
			v = 3 + ((a[3] >> 1) & 1); /* sendmsg, sendto */
		size_t n = sizes[a[2] & 15];
		if (write_would_hang(r, step, s, v, fl, n)) {
			rec(r, step, T_SKIP, 1);
			break;
		}
		do_write(r, step, t, s, v, fl, n);
		break;
	}
	case OP_SHUTDOWN: {
		struct slot *s = slotof(r, a[0]);
		if (s->fd >= 0 && res(r, step, f->shutdown(s->fd, a[1] % 3)) == 0 &&
		    a[1] % 3 != SHUT_RD)
			r->file[s->file].shutwr = 1;
		break;
	}
	case OP_CLOSE: {
		struct slot *s = slotof(r, a[0]);
		if (s->fd >= 0) {
			res(r, step, f->close(s->fd));
			dropslot(r, s);
		} else if (a[1] & 1 && s->lastfd >= 0) {
			/* a closed number, if nothing took it since */
			int taken = 0;
			for (int i = 0; i < NSLOT; i++)
				taken |= r->slot[i].fd == s->lastfd;
			if (!taken)
				res(r, step, f->close(s->lastfd));
		}
		break;
	}
	case OP_DUP:
		op_dup(r, step, a);
		break;
	case OP_FCNTL:
		op_fcntl(r, step, a);
		break;
	case OP_POLL:
		op_poll(r, step, a);
		break;
	case OP_SELECT:
		op_select(r, step, a);
		break;
	case OP_EPOLL:
		op_epoll(r, step, a);
		break;
	case OP_TIMEO:
		op_timeo(r, step, a);
		break;
	case OP_FILL:
		op_fill(r, step, a);
		break;
	}
}

/* ---- the partner, and knowing that the coordinator is blocked ------------------- */

/* tests/fuzz/gstate.c, linked into weft's objects: the running G, and
 * whether a G is stopped in a wait (parked, or in a blocking call). */
void *hookdiff_g(void);
int hookdiff_gblocked(void *g);

/* Is the plain thread whose /proc/self/task/<tid>/stat is open on fd
 * asleep (state S: in the blocking call, since it set armed just
 * before)? */
static int tid_sleeping(int fd)
{
	char b[256];
	ssize_t n = pread(fd, b, sizeof b - 1, 0);
	if (n <= 0)
		return 1; /* cannot tell: go on (the outcome is the same) */
	b[n] = 0;
	const char *e = strrchr(b, ')'); /* "pid (comm) S ..." */
	return e && e[1] == ' ' && e[2] == 'S';
}

/* Wait until the coordinator is blocked in its call, or its call has
 * returned already (a call that should have blocked and did not: the
 * trace says so).  This orders the partner's action after the block
 * by an event, not a sleep; the outcome is the same either way (the
 * pair is planned so), but the interesting path - a parked G woken by
 * the partner's action - is taken every time. */
static void wait_blocked(struct partner *pa, int weft)
{
	while (!atomic_load(&pa->armed))
		weft ? weft_yield() : (void)sched_yield();
	for (long i = 0; !atomic_load(&pa->returned); i++) {
		if (weft ? hookdiff_gblocked(pa->blockg) : tid_sleeping(pa->statfd))
			return;
		if (i > 1000000) /* a scheduler that never runs it: go on */
			return;
		weft ? weft_yield() : (void)sched_yield();
	}
}

/* Wait for the next input.  With a timeout: a G waiting with a timer
 * keeps the runtime's deadlock check from counting threads in /proc
 * after every run (all Gs parked, with plain threads about). */
static void wait_input(weft_sem_t *s)
{
	while (weft_sem_timedwait(s, 3600LL * 1000000000) != 0)
		;
}

static void partner_loop(struct partner *pa, int weft)
{
	for (;;) {
		if (weft)
			wait_input(&pa->go);
		else
			weft_sem_wait(&pa->go);
		struct run *r = pa->r;
		wait_blocked(pa, weft);
		pair_partner(r, pa->step, 1, pa->pl);
		/* a call still blocked 10 s after its partner acted is a lost
		 * wakeup (weft), or the interpreter's model of the fds is
		 * wrong (libc) */
		if (weft_sem_timedwait(&pa->ret, 10LL * 1000000000) != 0) {
			fprintf(stderr, "hookdiff: FINDING: %s run: the blocked call of step %d "
					"hangs (lost wakeup?)\n",
				weft ? "weft" : "libc", pa->step);
			abort();
		}
		weft_sem_post(&pa->done);
	}
}

static void *partner_thread(void *arg)
{
	partner_loop(arg, 0);
	return NULL;
}

static void partner_g(void *arg)
{
	partner_loop(arg, 1);
}

/* A pair on the coordinator's side: the partner acts once our call is
 * blocked; both sides' records go into the trace in a fixed order. */
static void run_pair(struct run *r, int step, const struct pairplan *pl)
{
	struct partner *pa = &partners[r->weft];
	pa->r = r;
	pa->pl = pl;
	pa->step = step;
	atomic_store(&pa->armed, 0);
	atomic_store(&pa->returned, 0);
	r->np[0] = r->np[1] = 0;
	r->inpair = 1;
	if (r->weft)
		pa->blockg = hookdiff_g();
	weft_sem_post(&pa->go);
	pair_block(r, step, 0, pl);
	atomic_store(&pa->returned, 1);
	weft_sem_post(&pa->ret);
	weft_sem_wait(&pa->done);
	r->inpair = 0;
	for (int k = 0; k < r->np[0]; k++)
		rec(r, step, r->prec[0][k].tag, r->prec[0][k].v);
	for (int k = 0; k < r->np[1]; k++)
		rec(r, step, r->prec[1][k].tag, r->prec[1][k].v + (1LL << 40));
}

/* ---- running a program -------------------------------------------------------- */

/* Every operation but a pair's partner runs on the coordinator, one at
 * a time in program order: which thread or G makes a call on an fd
 * does not change its answer (fds, their modes and timeouts belong to
 * the process), so only a pair needs a second one.  The task bit of an
 * operation is kept in the format but no longer used. */
static void run_prog(struct run *r, const struct prog *pg)
{
	for (int i = 0; i < pg->n; i++) {
		const struct insn *in = &pg->in[i];
		if (in->op == OP_PAIR) {
			struct pairplan pl;
			if (!pair_plan(r, i, in->a, &pl)) {
				rec(r, i, T_SKIP, 2);
				continue;
			}
			run_pair(r, i, &pl);
			continue;
		}
		exec1(r, i, 0, in);
	}
	/* the final view of every fd still open */
	for (int i = 0; i < NSLOT; i++) {
		struct slot *s = &r->slot[i];
		if (s->fd >= 0) {
			rec(r, 999, T_FINALFL, r->f->fcntl(s->fd, F_GETFL));
			r->f->close(s->fd);
			dropslot(r, s);
		}
	}
	for (int k = 0; k < 4; k++)
		if (r->fixed & 1u << k)
			r->f->close(200 + k); /* dup2 targets outside the slots */
}

static void run_init(struct run *r, const struct fns *f, int weft)
{
	r->f = f;
	r->weft = weft;
	r->nfile = 0;
	r->wseq = 0;
	r->nrec = 0;
	r->slow = 0;
	r->fixed = 0;
	r->inpair = 0;
	for (int i = 0; i < NSLOT; i++)
		r->slot[i] = (struct slot){ -1, -1, -1 };
}

/* The libc partner watches this thread (the one that runs inputs). */
static void watch_coordinator(void)
{
	struct partner *pa = &partners[0];
	static __thread pid_t tid; /* this thread's, asked once */
	if (!tid)
		tid = gettid();
	if (pa->blocktid == tid)
		return;
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
	if (pa->statfd > 0)
		close(pa->statfd);
	pa->statfd = open(path, O_RDONLY | O_CLOEXEC);
	pa->blocktid = tid;
}

/* The libc run: on the thread calling LLVMFuzzerTestOneInput. */
static void run_libc(struct run *r, const struct prog *pg)
{
	watch_coordinator(); /* opened at start-up; again only if the thread changed */
	run_init(r, &libcfns, 0);
	run_prog(r, pg);
}

/* The weft run: on the coordinator G, kept across executions. */
static struct {
	weft_sem_t go, done;
	struct run *r;
	const struct prog *pg;
} coord;

static void coord_g(void *arg)
{
	(void)arg;
	for (;;) {
		wait_input(&coord.go);
		run_init(coord.r, &weftfns, 1);
		run_prog(coord.r, coord.pg);
		weft_sem_post(&coord.done);
	}
}

static void run_weft(struct run *r, const struct prog *pg)
{
	coord.r = r;
	coord.pg = pg;
	weft_sem_post(&coord.go);
	/* the partner catches a pair's blocked call after 10 s; this any
	 * other call that hangs (one the interpreter judged would not block),
	 * or a coordinator that never gets a P again.  A run takes ms. */
	if (weft_sem_timedwait(&coord.done, 20LL * 1000000000) != 0) {
		fprintf(stderr, "hookdiff: FINDING: weft run did not finish in 20 s (a call hangs?)\n");
		weft_dump(NULL);
		abort();
	}
}

/* Start the partners and the coordinator G, once. */
static void start_tasks(void)
{
	for (int k = 0; k < 2; k++) {
		partners[k].go = (weft_sem_t)WEFT_SEM_INIT(0);
		partners[k].done = (weft_sem_t)WEFT_SEM_INIT(0);
		partners[k].ret = (weft_sem_t)WEFT_SEM_INIT(0);
	}
	coord.go = (weft_sem_t)WEFT_SEM_INIT(0);
	coord.done = (weft_sem_t)WEFT_SEM_INIT(0);
	if (pthread_create(&partners[0].th, NULL, partner_thread, &partners[0]) != 0)
		abort();
	partners[1].gid = weft_go(partner_g, &partners[1]);
	if (partners[1].gid < 0 || weft_go(coord_g, NULL) < 0)
		abort();
}

/* ---- comparing -------------------------------------------------------------------- */

static int same(const struct run *a, const struct run *b)
{
	if (a->nrec != b->nrec)
		return 0;
	return memcmp(a->rec, b->rec, sizeof a->rec[0] * (size_t)a->nrec) == 0;
}

static void dumptrace(const char *name, const struct run *r, const struct prog *pg)
{
	fprintf(stderr, "--- %s trace (%d records)\n", name, r->nrec);
	int last = -1;
	for (int i = 0; i < r->nrec; i++) {
		const struct rec *c = &r->rec[i];
		if (c->step != last && c->step < pg->n) {
			const struct insn *in = &pg->in[c->step];
			fprintf(stderr, "  #%d %c %s(%u,%u,%u,%u,%u,%u)\n", c->step, 'A' + in->task,
				opname[in->op], in->a[0], in->a[1], in->a[2], in->a[3], in->a[4],
				in->a[5]);
		}
		last = c->step;
		if (c->tag == T_ERR)
			fprintf(stderr, "      %s %s\n", tagname[c->tag], strerrorname_np((int)c->v));
		else
			fprintf(stderr, "      %s %lld (%#llx)\n", tagname[c->tag], (long long)c->v,
				(long long)c->v);
	}
}

static void dumpdiff(const struct run *a, const struct run *b, const struct prog *pg)
{
	int i = 0;
	while (i < a->nrec && i < b->nrec && !memcmp(&a->rec[i], &b->rec[i], sizeof a->rec[i]))
		i++;
	fprintf(stderr, "hookdiff: first difference at record %d (step %d)\n", i,
		i < a->nrec ? a->rec[i].step : (i < b->nrec ? b->rec[i].step : -1));
	dumptrace("libc", a, pg);
	dumptrace("weft", b, pg);
}

static struct run runs[4];
static int verbose;
static long nondet, unconfirmed, execs;
static int fddir = -1; /* /proc/self/fd, kept open */

/* Open fds in this process (getdents64 on /proc/self/fd: a few us). */
static int count_fds(void)
{
	char b[4096];
	int n = 0;
	lseek(fddir, 0, SEEK_SET);
	for (;;) {
		long got = syscall(SYS_getdents64, fddir, b, sizeof b);
		if (got <= 0)
			break;
		for (long off = 0; off < got;) {
			unsigned short reclen;
			memcpy(&reclen, b + off + 16, sizeof reclen); /* d_reclen */
			const char *name = b + off + 19;               /* d_name */
			n += name[0] != '.';
			off += reclen;
		}
	}
	return n;
}

/* On a finding: what the open fds are. */
static void dumpfds(void)
{
	for (int fd = 0; fd < 1 << 16; fd++) {
		char path[64], what[256];
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, what, sizeof what - 1);
		if (n < 0)
			continue;
		what[n] = 0;
		fprintf(stderr, "  fd %d -> %s\n", fd, what);
	}
}

/* Open fds below 256, where every fd a program makes is (the lowest free
 * numbers: a program holds at most 12 slots and a few fds for a moment;
 * dup2 targets are 200-203): one poll, which says POLLNVAL for a closed
 * one.  count_fds walks the whole table (up to the runtime's own fds
 * near RLIMIT_NOFILE: thousands of slots), too slow for every input; it
 * runs every 1024th. */
#define LOWFDS 256
static int count_low_fds(void)
{
	static struct pollfd p[LOWFDS];
	for (int i = 0; i < LOWFDS; i++)
		p[i] = (struct pollfd){ i, 0, 0 };
	if (libcfns.poll(p, LOWFDS, 0) < 0)
		return -1;
	int n = 0;
	for (int i = 0; i < LOWFDS; i++)
		n += !(p[i].revents & POLLNVAL);
	return n;
}

static int64_t live_gs(void)
{
	weft_stats_t st;
	return weft_stats(&st) == 0 ? st.gs : -1;
}

/* HOOKDIFF_PIN (default 1): the process runs on one CPU, one of those
 * it may use, taken with a lock file so that the jobs of `make fuzz
 * FUZZ_JOBS=N` take one each (a second process finding every CPU taken
 * shares the one its pid chooses).  Done before the runtime starts, so
 * it sees one CPU: one P, so the partner G waits for the coordinator's
 * call by running the coordinator itself (weft_yield) instead of
 * spinning on a second P, and no M or thread spins before it sleeps
 * (runtime/lock.c spins only with more than one CPU).  About half of an
 * execution's CPU was those spins (docs/reliability.md).  The libFuzzer
 * parent of -jobs/-fork (it only waits for its children) is not pinned. */
static void pin_one_cpu(int argc, char **argv)
{
	const char *e = getenv("HOOKDIFF_PIN");
	if (e && *e == '0')
		return;
	for (int i = 1; i < argc; i++)
		if ((!strncmp(argv[i], "-jobs=", 6) || !strncmp(argv[i], "-fork=", 6)) &&
		    atoi(argv[i] + 6) > 0)
			return;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) <= 1)
		return;
	int cpus[CPU_SETSIZE], n = 0;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	const char *tmp = getenv("TMPDIR");
	int cpu = cpus[getpid() % n];
	for (int k = 0; k < n; k++) {
		char path[4200];
		snprintf(path, sizeof path, "%s/hookdiff-cpu%d.lock", tmp && *tmp ? tmp : "/tmp",
			 cpus[k]);
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			cpu = cpus[k]; /* held (fd kept open) until the process ends */
			break;
		}
		close(fd);
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		perror("hookdiff: sched_setaffinity");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	pin_one_cpu(*argc, *argv);
	load_libc();
	pagesize = sysconf(_SC_PAGESIZE);
	pattern_init();
	signal(SIGPIPE, SIG_IGN);
	verbose = getenv("HOOKDIFF_VERBOSE") != NULL;
	const char *k = getenv("HOOKDIFF_KNOWN");
	mask_known = !(k && *k == '0');
	const char *sl = getenv("HOOKDIFF_SLOW");
	if (sl && *sl)
		slow_budget = atoi(sl);
	fddir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fddir < 0)
		abort();
	start_tasks(); /* and so the runtime */
	watch_coordinator();
	/* The runtime makes its netpoller (an epoll fd, an eventfd) when a
	 * G first waits for an fd: do that before any fd is counted.  A
	 * socketpair, then a read, a poll and an epoll_wait each met by a
	 * write of the partner. */
	static const uint8_t warm[] = { OP_SOCKETPAIR, 0, 0, 0, 0, 0, 0,
					OP_PAIR, 0, PA_READ, 7, 10, 0, 0,
					OP_PAIR, 0, PA_POLL, 7, 10, 0, 0,
					OP_PAIR, 0, PA_EPOLL, 7, 10, 0, 0 };
	struct prog pg;
	decode(warm, sizeof warm, &pg);
	run_libc(&runs[0], &pg);
	run_weft(&runs[2], &pg);
	return 0;
}

/* One input: the libc run, the weft run, and only on a difference a
 * second of each (the first libc run against the second says whether
 * the input is timing-dependent; a difference that holds is a finding).
 * Then the leak check: the process has the fds and live Gs it had
 * before the input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prog pg;
	decode(data, size, &pg);
	execs++;
	int (*count)(void) = execs % 1024 == 0 ? count_fds : count_low_fds;
	int fds0 = count();
	int64_t gs0 = live_gs();
	int verdict = 0;
	run_libc(&runs[0], &pg);
	run_weft(&runs[2], &pg);
	if (verbose)
		dumpdiff(&runs[0], &runs[2], &pg);
	if (!same(&runs[0], &runs[2])) {
		run_libc(&runs[1], &pg);
		if (!same(&runs[0], &runs[1])) {
			/* timing-dependent on plain libc: no verdict */
			if (++nondet % 100 == 1 || verbose)
				fprintf(stderr, "hookdiff: %ld of %ld inputs timing-dependent on libc\n",
					nondet, execs);
			if (verbose)
				dumpdiff(&runs[0], &runs[1], &pg);
			verdict = -1; /* not added to the corpus */
		} else {
			run_weft(&runs[3], &pg);
			if (!same(&runs[1], &runs[3])) {
				fprintf(stderr, "hookdiff: FINDING: weft differs from libc\n");
				dumpdiff(&runs[1], &runs[3], &pg);
				fprintf(stderr, "open fds:\n");
				dumpfds();
				abort();
			}
			if (++unconfirmed % 100 == 1 || verbose)
				fprintf(stderr, "hookdiff: %ld of %ld inputs differed once on weft, "
						"not again\n",
					unconfirmed, execs);
		}
	}
	int fds1 = count();
	int64_t gs1 = live_gs();
	/* sysmon opens /proc/self/task/N/stat for a moment (is an M asleep
	 * in the kernel?): a count one higher, before or after, may be
	 * that; a leak stays */
	for (int i = 0; i < 1000 && (fds1 > fds0 || gs1 != gs0); i++) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
		fds1 = count();
		gs1 = live_gs();
	}
	if (fds1 > fds0 || gs1 != gs0) {
		fprintf(stderr, "hookdiff: FINDING: leak: %d fds and %lld live Gs before the input, "
				"%d and %lld after\n",
			fds0, (long long)gs0, fds1, (long long)gs1);
		dumptrace("weft", &runs[2], &pg);
		fprintf(stderr, "open fds:\n");
		dumpfds();
		abort();
	}
	return verdict;
}
