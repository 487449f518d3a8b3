/*
 * hook.c - the machinery every hook uses: finding the real functions,
 * errno, and the drivers that turn a non-blocking call into a blocking
 * one by parking the G (or, on a plain thread, by poll(2)).
 */
#include "hook.h"

#include <dlfcn.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* ---- the real functions ---------------------------------------------- */

static __thread int resolving;

void *hook_resolve(void *_Atomic *slot, const char *name)
{
	if (resolving)
		fatal("dlsym looked up %s while resolving another hooked call", name);
	resolving = 1;
	int e = errno_get();
	void *p = dlsym(RTLD_NEXT, name);
	errno_set(e);
	resolving = 0;
	if (!p)
		fatal("cannot find the real %s (dlsym RTLD_NEXT)", name);
	atomic_store_explicit(slot, p, memory_order_release);
	return p;
}


/* ---- blocking calls ------------------------------------------------------ */

void blk_enter(void)
{
	entersyscall();
}

void blk_enter_long(void)
{
	entersyscallblock();
}

void blk_exit(void)
{
	int e = errno_get();
	exitsyscall();
	errno_set(e);
}

void g_sleep_until(int64_t deadline)
{
	struct waiter w;
	waiter_init(&w);
	while (waiter_block(&w, NULL, NULL, W_SLEEP, deadline))
		waiter_init(&w); /* nobody wakes a sleeper; be safe anyway */
}

uint32_t newfd_flags(bool ong, bool usernb, bool drainok)
{
	if (!ong)
		return 0; /* worked out on first use by a G */
	if (usernb)
		return PD_KNOWN | PD_USERNB;
	return PD_KNOWN | PD_NBSET | (drainok ? PD_DRAINOK : 0);
}

/* ---- deciding ------------------------------------------------------------- */

int io_begin(struct io *io, int fd, unsigned dir)
{
	if (fd < 0 || !rt_started())
		return IO_PASS;
	struct g *gp = hook_g();
	struct pd *d;
	int mode;
	if (!gp) {
		d = pd_lookup(fd);
		if (!d || (atomic_load_explicit(&d->flags, memory_order_acquire) &
			   (PD_NBSET | PD_USERNB | PD_CLOSING)) != PD_NBSET)
			return IO_PASS;
		mode = IO_EMUL;
	} else {
		d = pd_get(fd);
		if (!d)
			return IO_SYSCALL;
		uint32_t f = atomic_load_explicit(&d->flags, memory_order_acquire);
		if (unlikely(!(f & PD_KNOWN))) {
			if (pd_init(d, fd) < 0)
				return IO_PASS; /* let the real call report it */
			f = atomic_load_explicit(&d->flags, memory_order_acquire);
		}
		if (f & PD_CLOSING)
			return IO_BADF;
		if (f & PD_USERNB)
			return IO_PASS;
		if (f & PD_SYSCALL)
			return IO_SYSCALL;
		mode = IO_POLL;
	}
	io->fd = fd;
	io->mode = mode;
	io->deadline = INT64_MIN;
	io->r.d = d;
	io->r.seq = atomic_load_explicit(&d->seq, memory_order_acquire);
	io->r.mask = dir;
	return mode;
}

bool io_snap(struct io *io, bool drains)
{
	if (io->mode != IO_POLL)
		return false;
	pd_snap(&io->r);
	if (!drains)
		return false;
	struct pd *d = io->r.d;
	uint32_t f = atomic_load_explicit(&d->flags, memory_order_relaxed);
	return (f & (PD_DRAINOK | PD_NODRAIN)) == PD_DRAINOK &&
	       atomic_load_explicit(&d->rdrain, memory_order_relaxed) == io->r.rev + 1;
}

/* A short read (or none) on a stream that was not at EOF leaves it
 * empty: nothing more until the next read-side event. */
void io_drained(struct io *io, long r, size_t want)
{
	if (io->mode != IO_POLL || want == 0)
		return;
	struct pd *d = io->r.d;
	uint32_t f = atomic_load_explicit(&d->flags, memory_order_relaxed);
	if ((f & (PD_DRAINOK | PD_NODRAIN)) != PD_DRAINOK)
		return;
	if (r == -EAGAIN || (r > 0 && (size_t)r < want))
		atomic_store_explicit(&d->rdrain, io->r.rev + 1, memory_order_relaxed);
	else if (r > 0)
		atomic_store_explicit(&d->rdrain, 0, memory_order_relaxed);
}

/* ---- waiting -------------------------------------------------------------- */

static int64_t io_deadline(struct io *io)
{
	if (io->deadline == INT64_MIN) {
		struct pd *d = io->r.d;
		int64_t t = atomic_load_explicit(io->r.mask == PD_READ ? &d->rtimeo : &d->wtimeo,
						 memory_order_relaxed);
		io->deadline = t > 0 ? nanotime() + t : -1;
	}
	return io->deadline;
}

/* A plain thread: poll(2) the fd until ready or the deadline. */
static long emul_wait(struct io *io, int64_t deadline)
{
	struct pollfd p = { io->fd, io->r.mask == PD_READ ? POLLIN : POLLOUT, 0 };
	for (;;) {
		int ms = -1;
		if (deadline >= 0) {
			int64_t left = deadline - nanotime();
			if (left <= 0)
				return -EAGAIN;
			ms = (int)((left + 999999) / 1000000);
		}
		long r = sys3(SYS_poll, &p, 1, ms);
		if (r > 0)
			return 0;
		if (r < 0 && r != -EINTR)
			return r;
	}
}

long io_wait(struct io *io)
{
	int64_t deadline = io_deadline(io);
	if (io->mode == IO_EMUL)
		return emul_wait(io, deadline);
	long r = pd_register(io->r.d, io->fd);
	if (r < 0)
		return r;
	int reason = io->r.mask == PD_READ ? W_IO_READ : W_IO_WRITE;
	r = pd_wait(&io->r, 1, deadline, reason);
	return r == -ETIMEDOUT ? -EAGAIN : r;
}

/* ---- drivers ---------------------------------------------------------------- */

long io_once(struct io *io, const struct sc *s, size_t want, bool drains)
{
	/* a read of 0 bytes never waits for data: always try it */
	drains = drains && want > 0;
	for (;;) {
		if (!io_snap(io, drains)) {
			long r = sc_do(s);
			if (drains)
				io_drained(io, r, want);
			if (r != -EAGAIN)
				return r;
		}
		long w = io_wait(io);
		if (w < 0)
			return w;
	}
}

long io_all(struct io *io, struct sc *s, size_t len)
{
	char *buf = (char *)s->a[1];
	size_t done = 0;
	for (;;) {
		io_snap(io, false);
		s->a[1] = (long)(buf + done);
		s->a[2] = (long)(len - done);
		long r = sc_do(s);
		if (r > 0) {
			done += (size_t)r;
			if (done >= len)
				return (long)done;
			continue;
		}
		if (r == 0)
			return (long)done; /* EOF, or nothing asked */
		if (r == -EAGAIN)
			r = io_wait(io);
		if (r < 0)
			return done ? (long)done : r;
	}
}

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t n = 0;
	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* Drop the first n bytes from the iovec *v[0..*cnt).  The caller's
 * array is never written: the first time an entry must be cut, the rest
 * is copied into own[] (or rtalloc'd, returned in *heap to free). */
static void iov_skip(struct iovec **v, int *cnt, size_t n, struct iovec *own, int ownmax,
		     bool *owned, struct iovec **heap)
{
	while (*cnt > 0 && n >= (*v)[0].iov_len) {
		n -= (*v)[0].iov_len;
		(*v)++;
		(*cnt)--;
	}
	if (*cnt == 0 || n == 0)
		return;
	if (!*owned) {
		struct iovec *c = own;
		if (*cnt > ownmax && !(c = *heap = rtalloc((size_t)*cnt * sizeof *c)))
			fatal("out of memory copying an iovec");
		memcpy(c, *v, (size_t)*cnt * sizeof *c);
		*v = c;
		*owned = true;
	}
	(*v)[0].iov_base = (char *)(*v)[0].iov_base + n;
	(*v)[0].iov_len -= n;
}

long io_allv(struct io *io, long nr, struct msghdr *msg, const struct iovec *iov, int cnt,
	     int flags)
{
	struct iovec own[16], *v = (struct iovec *)iov, *heap = NULL;
	bool owned = false;
	struct msghdr m;
	if (msg) {
		m = *msg;
		v = msg->msg_iov;
		cnt = (int)msg->msg_iovlen;
	}
	size_t total = iov_total(v, cnt), done = 0;
	long r;
	for (;;) {
		io_snap(io, false);
		if (msg) {
			m.msg_iov = v;
			m.msg_iovlen = (size_t)cnt;
			r = sys3(nr, io->fd, &m, flags);
		} else {
			r = sys3(nr, io->fd, v, cnt);
		}
		if (r > 0) {
			if (msg && done == 0) {
				/* names and ancillary data go with the first part */
				msg->msg_namelen = m.msg_namelen;
				msg->msg_controllen = m.msg_controllen;
				msg->msg_flags = m.msg_flags;
				m.msg_control = m.msg_name = NULL;
				m.msg_controllen = m.msg_namelen = 0;
			}
			done += (size_t)r;
			if (done >= total)
				break;
			iov_skip(&v, &cnt, (size_t)r, own, 16, &owned, &heap);
			continue;
		}
		if (r == 0)
			break; /* EOF, or nothing asked */
		if (r == -EAGAIN)
			r = io_wait(io);
		if (r < 0)
			break;
	}
	rtfree(heap);
	return done || r >= 0 ? (long)done : r;
}
