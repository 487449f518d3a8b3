/*
 * stdio.c - FILEs over sockets and pipes park the G (issue 12 item 3).
 *
 * glibc's stdio reads and writes a FILE through its own internal read
 * and write (_IO_file_read, _IO_new_file_write), which no shim can
 * interpose: on a socket they block the OS thread (correct, since weft
 * never changes a file's flags, but one OS thread per waiting FILE).
 * What glibc does let a program choose is the FILE's I/O functions:
 * fopencookie(3).  So fdopen on a socket, a pipe or a FIFO returns a
 * cookie FILE whose read, write, seek and close are the plain calls on
 * the fd - read and write through weft's hooks, which park a G and are
 * libc's own on any other thread.  Everything above them is glibc's own
 * code, unchanged: the buffering (setvbuf, line and unbuffered modes),
 * fgets, getline, getdelim, fread, fgetc/getc (the macros and inlines
 * too: they fall to __uflow, which calls the FILE's read), fscanf and
 * the whole scanf family, ungetc, fputs, fputc, fwrite, fprintf, the
 * _unlocked variants, fflush, ftell (ESPIPE), fileno, flockfile.
 *
 * The cookie FILE is made to look like fdopen's: its _fileno is the fd
 * (fileno() works, fclose closes the fd; glibc's cookie FILEs say -2),
 * the mode is checked against the fd's access mode and "a" sets
 * O_APPEND, as fdopen does, its buffer is the size fdopen's would be
 * (st_blksize: 4 KiB on a socket or pipe; glibc would give a cookie FILE
 * BUFSIZ) and glibc's own, and it has a wide-character area as fdopen's
 * FILE has (glibc gives a cookie FILE none: byte-only): wide calls work,
 * through glibc's wide file FILE, blocking the OS thread as natively.  A
 * mode fdopen gives meaning beyond r/w/a/+/b/x/e ("m", ",ccs=") gets
 * glibc's own fdopen.
 *
 * popen: glibc's popen makes the pipe, the child and the pclose that
 * waits; the FILE the program gets is a cookie FILE over the same fd,
 * whose close is glibc's pclose of the original (close the fd, wait for
 * the child): pclose and fclose of it return the child's status.
 *
 * Also: fopen of a FIFO by name, stdin, stdout and stderr when they are
 * sockets, pipes or FIFOs (replaced at the shim's start; stderr stays
 * unbuffered), freopen of a FILE made here.  Not: freopen of a FIFO by
 * name (docs/hooks.md).
 */
#include "shim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

DEFREAL(fdopen);
DEFREAL(pclose);

/* glibc's struct _IO_wide_data (libio/libio.h), which a FILE's public
 * _wide_data points to: 0xe0 bytes of wide-character buffer pointers,
 * conversion states and iconv steps, all NULL/zero in an unused one, then
 * the wide vtable.  Only its size and the vtable's offset are used here,
 * and both are checked against glibc's own stdout (layout_ok). */
struct wdata {
	char area[0xe0];    /* glibc's: zero until the FILE turns wide */
	const void *vtable; /* _wide_vtable: &_IO_wfile_jumps, as fdopen's */
};

/* glibc's FILE flags (libio/libio.h): a buffer the program gave (glibc
 * does not free it); an unbuffered stream. */
#define IO_USER_BUF 0x0001
#define IO_UNBUFFERED 0x0002

/* What a cookie FILE made here carries. */
struct sfile {
	int fd;         /* the file: FILE's _fileno, read/written/closed here */
	bool plain;     /* freopen made the FILE a plain file FILE: only wd in use */
	FILE *proc;     /* popen: glibc's FILE over fd, pclose'd at close; else NULL */
	FILE *file;     /* the cookie FILE itself (its lock, below) */
	FILE **std;     /* &stdin or &stdout if it stands for one (stdio_std), else NULL */
	FILE *orig;     /* then glibc's static FILE it stands in for */
	bool fixed;     /* a std stream's record (stdsfile), never freed */
	struct wdata wd; /* its wide-character area (fdopen's FILEs have one) */
};

/* glibc's recursive FILE lock (sysdeps/nptl/stdio-lock.h), which a FILE's
 * public _lock points to. */
struct iolock {
	int lock;    /* the futex: 0 free, 1 held, 2 held with waiters */
	int cnt;     /* recursion count */
	void *owner; /* THREAD_SELF of the holder (the TCB's self, %fs:0x10) */
};

static void *thread_self(void)
{
	void *p;
	__asm__ volatile("mov %%fs:0x10, %0" : "=r"(p));
	return p;
}

/*
 * glibc calls the cookie functions with the FILE locked, and lets a
 * thread whose THREAD_SELF is the owner in again without waiting.  With
 * shared TLS (WEFT_TLS=shared) THREAD_SELF is the OS thread's, so while
 * the G parks in read or write another G on the same OS thread would
 * walk into the FILE it holds.  So around a park the owner is the G
 * itself (no thread's TCB): another G or thread waits on the lock's
 * futex, as a thread would natively, and the G takes it back under the
 * THREAD_SELF of the OS thread it resumes on.  Only the holder writes
 * owner; others compare it with their own THREAD_SELF (plain loads in
 * glibc: relaxed stores suffice).
 */
static struct iolock *lock_lend(struct sfile *s)
{
	struct g *gp = hook_g();
	struct iolock *l = gp && s->file ? (struct iolock *)s->file->_lock : NULL;
	if (!l || __atomic_load_n(&l->owner, __ATOMIC_RELAXED) != thread_self())
		return NULL;
	__atomic_store_n(&l->owner, (void *)gp, __ATOMIC_RELAXED);
	return l;
}

static void lock_back(struct iolock *l)
{
	if (l)
		__atomic_store_n(&l->owner, thread_self(), __ATOMIC_RELAXED);
}

/*
 * A FILE many threads write - stderr above all - has a second problem:
 * while the G parks holding the lock, every other thread that calls
 * into the FILE waits for it in glibc's own lock code, a futex system
 * call no hook sees: one OS thread blocked per waiting writer (50
 * threads logging into a full pipe: 56-65 OS threads with the lock
 * only lent, procs + 8 with it let go).  So a write that may park lets
 * the lock go first and takes it back after, when that cannot change
 * what any call writes (droppable, lock_drop):
 *   - a write of up to PIPE_BUF bytes that finds a pipe or FIFO full:
 *     such a write is whole or not at all, so no other call's bytes can
 *     come between its own (a longer one, or one on a socket, which may
 *     be cut anywhere, parks holding the lock);
 *   - the lock is held once (cnt 1): one stdio call, not a program's
 *     flockfile around several (warn, a caller's own) - those park
 *     holding it, their output kept together as natively;
 *   - the bytes are not in the FILE's buffer (another call would reuse
 *     it): glibc writes an unbuffered stream's call from its own buffer
 *     (vfprintf's helper, the caller's string), a fputc from the FILE's
 *     one-byte buffer (that one keeps the lock), and a full buffer
 *     from the buffer (kept);
 *   - nothing waits in the buffer (the calls in between would go first).
 * glibc updates the FILE only after the write returns (new_do_write:
 * the pointers go back to the buffer's start, as they already are), so
 * a call that ran in between leaves it as it found it.  What changes is
 * only which of two threads' calls comes first, which the lock never
 * fixed.
 * A thread cancelled in the write exits without the lock, as glibc's
 * cleanup would leave it.
 */

/* The lock taken back (lock_drop let it go): glibc's trylock (0 -> 1),
 * the G sleeping between tries: the holder may be a G parked on a full
 * pipe, and glibc's wait would block the OS thread.  A thread waiting in
 * glibc's lock set it to 2 and is woken by the holder's unlock, or
 * sets 2 again after this took it: no wake is lost. */
static void lock_retake(struct iolock *l)
{
	int64_t ns = 10000;
	for (;;) {
		int zero = 0;
		/* acquire: the FILE's state as the last holder left it */
		if (__atomic_compare_exchange_n(&l->lock, &zero, 1, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			break;
		weft_sleep(ns);
		if (ns < 1000000)
			ns *= 2;
	}
	__atomic_store_n(&l->owner, thread_self(), __ATOMIC_RELAXED);
	l->cnt = 1;
}

/* May a write of buf[0..n) on s let the FILE's lock go (the rules
 * above)?  On a G holding it once, nothing in the buffer, buf not in it. */
static bool droppable(struct sfile *s, const char *buf, size_t n)
{
	FILE *f = s->file;
	struct iolock *l = hook_g() && f ? (struct iolock *)f->_lock : NULL;
	return l && __atomic_load_n(&l->owner, __ATOMIC_RELAXED) == thread_self() && l->cnt == 1 &&
	       f->_IO_write_ptr == f->_IO_write_base &&
	       !(f->_IO_buf_base && buf < f->_IO_buf_end && buf + n > f->_IO_buf_base);
}

/* s's FILE lock let go (droppable said so), for lock_retake. */
static struct iolock *lock_drop(struct sfile *s)
{
	struct iolock *l = (struct iolock *)s->file->_lock;
	l->cnt = 0;
	__atomic_store_n(&l->owner, NULL, __ATOMIC_RELAXED);
	/* release: what this call did to the FILE before the next holder,
	 * as glibc's unlock; 2 means a thread may wait in the futex */
	if (__atomic_exchange_n(&l->lock, 0, __ATOMIC_RELEASE) > 1)
		sys3(SYS_futex, &l->lock, FUTEX_WAKE_PRIVATE, 1);
	return l;
}

/* glibc's cookie vtable, seen on the first FILE made here: a FILE with
 * it is a cookie FILE (ours, or the program's own fopencookie). */
static const void *_Atomic cookie_vtable STARTUP_DATA;

/* struct _IO_FILE_plus: the vtable pointer follows the public FILE. */
static const void *vtable_of(FILE *f)
{
	const void *vt;
	memcpy(&vt, (const char *)f + sizeof(FILE), sizeof vt);
	return vt;
}

/* ---- glibc's layout, checked --------------------------------------------------
 *
 * fopencookie's FILE is glibc's struct locked_FILE (libio/iofopncook.c):
 * struct _IO_cookie_file { struct _IO_FILE_plus; void *__cookie;
 * cookie_io_functions_t; } then the FILE's _IO_lock_t, which its _lock
 * points to.  So a FILE whose _lock is that far past it, and whose four
 * functions there are s_funcs, is one made here, whatever glibc has
 * since made of its vtable (wide, or freopen's plain file).  (glibc keeps
 * the functions mangled with its pointer guard: they are compared with
 * those of the first FILE made here.)  Both this and the wide area's
 * layout are checked once against the real thing (layout_check); if
 * either differs the FILEs made here are byte-only cookie FILEs as
 * before, and the std streams stay glibc's. */

/* What follows the struct _IO_FILE_plus in a cookie FILE. */
struct ctail {
	void *cookie;             /* __cookie: our struct sfile */
	cookie_io_functions_t fn; /* __io_functions */
};

#define CTAIL_OFF (sizeof(FILE) + sizeof(void *)) /* past the vtable */
#define CLOCK_OFF (CTAIL_OFF + sizeof(struct ctail))

extern const char _IO_wfile_jumps[];     /* glibc's wide file vtable (exported) */
extern FILE _IO_2_1_stdin_, _IO_2_1_stdout_, _IO_2_1_stderr_; /* what the std streams point to at first */

static _Atomic int layout STARTUP_DATA; /* 0 unchecked, 2 being checked, 1 as above, -1 not: byte-only */
/* The functions as glibc keeps them in each cookie FILE made here
 * (mangled with the process's pointer guard: the same in all of them). */
static cookie_io_functions_t s_fn;

/* Check once, on the first cookie FILE made here (s its record). */
static bool layout_check(FILE *f, struct sfile *s)
{
	int l = 0;
	if (!atomic_compare_exchange_strong(&layout, &l, 2)) { /* another checks */
		while ((l = atomic_load_explicit(&layout, memory_order_acquire)) == 2)
			sys3(SYS_sched_yield, 0, 0, 0);
		return l > 0;
	}
	struct ctail t;
	memcpy(&t, (const char *)f + CTAIL_OFF, sizeof t);
	const struct wdata *w = (const struct wdata *)(void *)_IO_2_1_stdout_._wide_data;
	bool ok = t.cookie == s &&
		  (const char *)f->_lock == (const char *)f + CLOCK_OFF && w &&
		  w->vtable == (const void *)_IO_wfile_jumps;
	if (!ok)
		warn("glibc's FILE layout is not the one known: stdio over sockets and pipes "
		     "is byte-only and stdin/stdout stay glibc's");
	s_fn = t.fn;
	/* release: ours() reads s_fn after seeing layout 1 */
	atomic_store_explicit(&layout, ok ? 1 : -1, memory_order_release);
	return ok;
}

/* f's record if f is a FILE made here (in whatever state glibc left its
 * vtable), else NULL. */
static struct sfile *ours(FILE *f)
{
	if (!f || atomic_load_explicit(&layout, memory_order_acquire) != 1 ||
	    (const char *)f->_lock != (const char *)f + CLOCK_OFF)
		return NULL;
	struct ctail t; /* inside fopencookie's FILE: its _lock says so */
	memcpy(&t, (const char *)f + CTAIL_OFF, sizeof t);
	return !memcmp(&t.fn, &s_fn, sizeof t.fn) ? t.cookie : NULL;
}

/* ---- the cookie functions ----------------------------------------------- */

static ssize_t s_read(void *c, char *buf, size_t n)
{
	struct sfile *s = c;
	struct iolock *l = lock_lend(s);
	ssize_t r = read(s->fd, buf, n); /* weft's hook: parks a G */
	lock_back(l);
	return r;
}

/* As glibc's _IO_new_file_write: until all is written or an error, and
 * the count written (glibc marks the FILE in error when it is short). */
static ssize_t s_write(void *c, const char *buf, size_t n)
{
	struct sfile *s = c;
	struct iolock *d = NULL, *l = NULL;
	size_t done = 0;
	if (n <= PIPE_BUF && droppable(s, buf, n)) {
		/* one try without waiting, with the lock (the hook's own first
		 * try on a pipe); only if it finds a pipe full is the lock let
		 * go: up to PIPE_BUF bytes are then written whole or not at
		 * all, so nobody's bytes can come between this call's */
		struct iovec v = { (void *)buf, n };
		long r = sys6(SYS_pwritev2, s->fd, (long)&v, 1, -1, 0, RWF_NOWAIT);
		struct stat st;
		if (r >= 0)
			done = (size_t)r; /* all; on another kind of file maybe a part */
		else if (r == -EAGAIN && sys3(SYS_fstat, s->fd, &st, 0) == 0 && S_ISFIFO(st.st_mode))
			d = lock_drop(s);
		else if (r == -EPIPE || r == -EFBIG) { /* its signal is sent: not twice */
			(void)sysret(r);
			return 0;
		} /* else (no such try on this file, ...): the hook's write says */
	}
	if (!d)
		l = lock_lend(s);
	while (done < n) {
		ssize_t r = write(s->fd, buf + done, n - done); /* weft's hook */
		if (r <= 0)
			break;
		done += (size_t)r;
	}
	if (d) {
		int e = errno_get();
		lock_retake(d);
		errno_set(e);
	}
	lock_back(l);
	return (ssize_t)done;
}

static int s_seek(void *c, off64_t *off, int whence)
{
	off64_t r = lseek64(((struct sfile *)c)->fd, *off, whence); /* ESPIPE here */
	if (r < 0)
		return -1;
	*off = r;
	return 0;
}

/* A std stream's FILE is gone (glibc frees it after this): stdin or
 * stdout points to glibc's static FILE again, closed as glibc's would
 * be by fclose (-1 for a descriptor: its calls fail with EBADF), so a
 * program using stdin/stdout after fclose finds no freed memory. */
static void std_gone(struct sfile *s)
{
	if (!s->std)
		return;
	s->orig->_fileno = -1;
	FILE *me = s->file;
	__atomic_compare_exchange_n(s->std, &me, s->orig, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* The record goes (after glibc is done with the FILE). */
static void sfree(struct sfile *s)
{
	std_gone(s);
	if (!s->fixed)
		rtfree(s);
}

/* fclose/pclose (under the fclose hook's bookkeeping and entersyscall). */
static int s_close(void *c)
{
	struct sfile *s = c;
	int r;
	if (s->proc) {
		r = REAL(pclose)(s->proc); /* closes fd, waits for the child */
	} else {
		r = (int)sysret(sys3(SYS_close, s->fd, 0, 0)); /* as _IO_file_close: not a cancellation point */
	}
	sfree(s);
	return r;
}

static const cookie_io_functions_t s_funcs = { s_read, s_write, s_seek, s_close };

/* ---- making them -------------------------------------------------------------- */

/* fd is a socket, a pipe or a FIFO (the files epoll can wait on); *bufsz
 * the buffer glibc's fdopen would give it (_IO_file_doallocate:
 * st_blksize if smaller than BUFSIZ, 4 KiB on a socket or a pipe). */
STARTUP_TEXT static bool pollable(int fd, size_t *bufsz)
{
	struct stat st;
	if (sys3(SYS_fstat, fd, &st, 0) < 0)
		return false;
	*bufsz = st.st_blksize > 0 && st.st_blksize < BUFSIZ ? (size_t)st.st_blksize : BUFSIZ;
	return S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode);
}

/* The mode for fopencookie if fdopen would read mode as one ("r", "w",
 * "a", then any of "+bxe"), else NULL: glibc's fdopen decides. */
static const char *simple_mode(const char *mode)
{
	if (!mode || !strchr("rwa", mode[0]))
		return NULL;
	bool plus = false;
	for (const char *p = mode + 1; *p; p++) {
		if (*p == '+')
			plus = true;
		else if (!strchr("bxe", *p))
			return NULL;
	}
	static const char *const modes[2][3] = { { "r", "w", "a" }, { "r+", "w+", "a+" } };
	return modes[plus][strchr("rwa", mode[0]) - "rwa"];
}

/* The program's malloc and free, which glibc's stdio calls (the shim's own
 * malloc is jemalloc's, private: glibc could not free what it gives). */
static void *_Atomic real_pmalloc STARTUP_DATA, *_Atomic real_pfree STARTUP_DATA;

static void *resolve_default(void *_Atomic *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	if (!p) {
		p = dlsym(RTLD_DEFAULT, name);
		if (!p)
			fatal("no %s in the process", name);
		atomic_store_explicit(slot, p, memory_order_release);
	}
	return p;
}

static void *prog_malloc(size_t n)
{
	return ((void *(*)(size_t))resolve_default(&real_pmalloc, "malloc"))(n);
}

static void prog_free(void *p)
{
	((void (*)(void *))resolve_default(&real_pfree, "free"))(p);
}

static FILE *wrap_in(struct sfile *s, int fd, const char *cmode, FILE *proc, size_t bufsz,
		     struct sfile **sp);

/* A cookie FILE over fd (proc: popen's FILE) with a bufsz buffer, or
 * unbuffered as glibc's stderr if bufsz is 0; NULL with errno set
 * (ENOMEM); *sp its record if sp. */
static FILE *wrap(int fd, const char *cmode, FILE *proc, size_t bufsz, struct sfile **sp)
{
	return wrap_in(rtalloc(sizeof(struct sfile)), fd, cmode, proc, bufsz, sp);
}

/* wrap with s for its record (zeroed; rtfree'd when done unless fixed). */
static FILE *wrap_in(struct sfile *s, int fd, const char *cmode, FILE *proc, size_t bufsz,
		     struct sfile **sp)
{
	char *buf = bufsz ? prog_malloc(bufsz) : NULL; /* glibc's to free, as its own */
	FILE *f = NULL;
	if (!s || (bufsz && !buf) || !(f = fopencookie(s, cmode, s_funcs))) {
		if (s && !s->fixed)
			rtfree(s);
		if (buf)
			prog_free(buf);
		errno_set(ENOMEM);
		return NULL;
	}
	s->fd = fd;
	s->proc = proc;
	s->file = f;
	f->_fileno = fd; /* fileno() as fdopen's; glibc's cookie FILEs say -2 */
	/* glibc would give a cookie FILE BUFSIZ (it cannot stat it): the
	 * buffer fdopen's would have, and then glibc's own, as if it had
	 * allocated it (_IO_USER_BUF off): freed when glibc lets it go (at
	 * close, freopen, a later setvbuf), and a wide stream's buffer sized
	 * as glibc sizes it for its own (BUFSIZ wide characters, where a
	 * user buffer's size would be taken) */
	if (bufsz) {
		setvbuf(f, buf, _IOFBF, bufsz);
		f->_flags &= ~IO_USER_BUF;
	} else {
		/* glibc's stderr as it starts (libio/stdfiles.c): unbuffered,
		 * no buffer yet - a byte stream takes the one-byte _shortbuf at
		 * its first call (so every call is one write of all it
		 * formatted), a wide one a buffer of its own, as glibc's does
		 * (_IO_doallocbuf, _IO_wdoallocbuf) */
		f->_flags |= IO_UNBUFFERED;
	}
	const void *vt = NULL;
	atomic_compare_exchange_strong(&cookie_vtable, &vt, vtable_of(f));
	if (layout_check(f, s) && !proc) {
		/* a wide area, as fdopen's FILE has (glibc's cookie FILEs have
		 * none and are byte-only: orientation -1, as popen's are): the
		 * stream starts unoriented; fwide(f, 1) or a wide call turns it
		 * into glibc's wide file FILE (_IO_wfile_jumps), whose reads and
		 * writes are glibc's own on the fd - they block the OS thread,
		 * as natively */
		s->wd.vtable = _IO_wfile_jumps;
		f->_wide_data = (struct _IO_wide_data *)(void *)&s->wd;
		f->_mode = 0;
	}
	if (sp)
		*sp = s;
	return f;
}

HOOK FILE *fdopen(int fd, const char *mode)
{
	const char *cmode = simple_mode(mode);
	size_t bufsz;
	if (FROM_SHIM() || !cmode || !pollable(fd, &bufsz))
		return REAL(fdopen)(fd, mode);
	/* what fdopen checks and does (libio/iofdopen.c) */
	long fl = sys3(SYS_fcntl, fd, F_GETFL, 0);
	if (fl < 0)
		return (FILE *)sysret(fl);
	bool rd = cmode[0] == 'r' || cmode[1] == '+', wr = cmode[0] != 'r' || cmode[1] == '+';
	if (((fl & O_ACCMODE) == O_RDONLY && wr) || ((fl & O_ACCMODE) == O_WRONLY && rd)) {
		errno_set(EINVAL);
		return NULL;
	}
	if (cmode[0] == 'a' && !(fl & O_APPEND)) {
		long r = sys3(SYS_fcntl, fd, F_SETFL, fl | O_APPEND);
		if (r < 0)
			return (FILE *)sysret(r);
	}
	return wrap(fd, cmode, NULL, bufsz, NULL);
}

/* fork.c's popen: glibc's FILE f over its pipe becomes a cookie FILE
 * over the same fd. */
FILE *stdio_popen(FILE *f, const char *mode)
{
	const char *cmode = simple_mode(mode);
	size_t bufsz;
	if (!f || !cmode || !pollable(fileno(f), &bufsz))
		return f;
	FILE *c = wrap(fileno(f), cmode, f, bufsz, NULL);
	return c ? c : f; /* out of memory: glibc's FILE, blocking as before */
}

/* ---- fopen of a FIFO by name ------------------------------------------------------
 * glibc's fopen opens the file (a FIFO's open waits for the other end
 * there, blocking the OS thread as natively: sysmon hands its P on) and
 * makes its FILE; on a FIFO that FILE gives way to a cookie FILE over
 * the same fd: with its _fileno -1 glibc's fclose frees it and closes
 * nothing.  One fstat per fopen of a simple mode. */

DEFREAL(fopen);
DEFREAL(fopen64);
DEFREAL(fclose);

static FILE *fopen_fifo(FILE *f, const char *mode)
{
	const char *cmode = simple_mode(mode);
	struct stat st;
	if (!f || !cmode || sys3(SYS_fstat, fileno(f), &st, 0) < 0 || !S_ISFIFO(st.st_mode))
		return f;
	size_t bufsz = st.st_blksize > 0 && st.st_blksize < BUFSIZ ? (size_t)st.st_blksize : BUFSIZ;
	int e = errno_get();
	FILE *c = wrap(fileno(f), cmode, NULL, bufsz, NULL);
	if (!c) {
		errno_set(e);
		return f; /* out of memory: glibc's FILE, blocking as before */
	}
	f->_fileno = -1; /* nothing read or written yet */
	(void)REAL(fclose)(f);
	errno_set(e);
	return c;
}

HOOK FILE *fopen(const char *path, const char *mode)
{
	FILE *f = REAL(fopen)(path, mode);
	return FROM_SHIM() || shim_native ? f : fopen_fifo(f, mode);
}

HOOK FILE *fopen64(const char *path, const char *mode)
{
	FILE *f = REAL(fopen64)(path, mode);
	return FROM_SHIM() || shim_native ? f : fopen_fifo(f, mode);
}

/* ---- stdin, stdout and stderr ----------------------------------------------------------
 * glibc's std streams are static FILEs (_IO_2_1_stdin_, ...) that read
 * and write through its internal calls.  At the shim's start, before the
 * program's constructors (C++'s iostreams take their values there), a
 * stream whose fd is a socket, a pipe or a FIFO gets a cookie FILE made
 * as fdopen's is, and the variable stdin/stdout/stderr (the one every
 * caller reads, the program's copy-relocated one and glibc's own
 * perror, err, warn, psignal and assert among them) points to it.
 * Only a stream glibc has not touched yet (no buffer, unoriented) is
 * replaced.
 *
 * stderr's stays unbuffered, as glibc's: each call is one write of all
 * it formatted (vfprintf formats an unbuffered stream's output in a
 * buffer of its own first), so lines reach a pipe whole and in the same
 * order with stdout's as natively; a G whose write finds the pipe full
 * parks instead of holding its OS thread (a logging program under a
 * supervisor that reads its stderr slowly).  The runtime's own messages
 * never use it (raw write(2)); its dumps do, from inside the runtime,
 * where the write is libc's own and blocks.  glibc's perror writes
 * through a FILE of its own over a dup of fd 2 when it can (a socket:
 * that one blocks the OS thread, as glibc's FILEs do); on a pipe's
 * write end it cannot and writes through stderr. */

/* The std streams' records: static, so that a process whose stream is
 * a pipe does not start the runtime's allocator in the shim's
 * constructor (~70 page faults in each of a shell's children). */
static struct sfile stdsfile[3] STARTUP_DATA;

STARTUP_TEXT static void std_one(FILE **var, FILE *orig, int fd, const char *mode, bool unbuffered)
{
	size_t bufsz;
	if (*var != orig || orig->_IO_buf_base || orig->_mode != 0 || !pollable(fd, &bufsz))
		return;
	struct sfile *s = &stdsfile[fd];
	s->fixed = true; /* not the allocator's to free */
	FILE *c = wrap_in(s, fd, mode, NULL, unbuffered ? 0 : bufsz, NULL);
	if (!c)
		return;
	if (atomic_load_explicit(&layout, memory_order_relaxed) <= 0) {
		s->fd = -1; /* glibc's layout unknown: leave it, closing nothing */
		(void)REAL(fclose)(c);
		return;
	}
	s->std = var;
	s->orig = orig;
	*var = c;
}

/* WEFT_DEBUG=stderr=0: stderr stays glibc's (a measurement's "before";
 * env.c accepts the word and leaves it to the shim, which reads it here
 * in its constructor, before the runtime reads WEFT_DEBUG). */
STARTUP_TEXT static bool stderr_off(void)
{
	const char *d = getenv("WEFT_DEBUG");
	size_t n = strlen("stderr=0");
	for (const char *p = d; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, "stderr=0", n) && (p[n] == 0 || p[n] == ','))
			return true;
	return false;
}

STARTUP_TEXT void stdio_std(void)
{
	if (shim_native)
		return;
	std_one(&stdin, &_IO_2_1_stdin_, 0, "r", false);
	std_one(&stdout, &_IO_2_1_stdout_, 1, "w", false);
	if (!stderr_off())
		std_one(&stderr, &_IO_2_1_stderr_, 2, "w", true);
}

/* ---- freopen -------------------------------------------------------------------------
 * glibc's freopen turns a cookie FILE into a plain file FILE in place
 * (it never calls the cookie's close: the new file is dup3'd onto the
 * fd), writing the wide area's vtable on the way - a fopencookie FILE
 * has none (its _wide_data is -1) and glibc's freopen crashes on it.
 * The FILEs made here have one, so glibc's freopen runs as on fdopen's
 * (and frees their buffer, glibc's); the record stays with the FILE for
 * its wide area until fclose (stdio_detach). */

DEFREAL(freopen);
DEFREAL(freopen64);

/* After glibc's freopen of f (s: ours(f) before it): the FILE is a plain
 * file FILE now, whatever r says (on failure glibc has closed it). */
static FILE *reopened(struct sfile *s, FILE *r)
{
	if (s)
		s->plain = true;
	return r;
}

HOOK FILE *freopen(const char *path, const char *mode, FILE *f)
{
	struct sfile *s = ours(f);
	return reopened(s, REAL(freopen)(path, mode, f));
}

HOOK FILE *freopen64(const char *path, const char *mode, FILE *f)
{
	struct sfile *s = ours(f);
	return reopened(s, REAL(freopen64)(path, mode, f));
}

/* ---- closing ------------------------------------------------------------------- */

bool stdio_parks(FILE *f)
{
	const void *vt = atomic_load_explicit(&cookie_vtable, memory_order_relaxed);
	return vt && f && vtable_of(f) == vt;
}

/* fd.c's fclose, on a G, before glibc's fclose runs under entersyscall:
 * flush here, where a full socket parks the G.  EOF (errno set) if the
 * flush failed: fclose must say so, though the data is gone by then. */
int stdio_preclose(FILE *f)
{
	/* only output waiting in the buffer: fflush on an input stream would
	 * lseek (ESPIPE), which fclose does not */
	if (!stdio_parks(f) || f->_IO_write_ptr <= f->_IO_write_base)
		return 0;
	return fflush(f);
}

/* fd.c's fclose, any thread, before glibc's fclose: the record of a FILE
 * made here that glibc no longer closes through s_close (freopen made it
 * a plain file FILE, or a wide call made it glibc's wide file FILE,
 * whose close is glibc's own close of the fd), for stdio_release after
 * glibc's fclose; else NULL.  (popen's FILEs are byte-only and freopen
 * crashes in glibc on them, as on glibc's own: never plain or wide.) */
void *stdio_detach(FILE *f)
{
	struct sfile *s = ours(f);
	return s && (s->plain || !stdio_parks(f)) ? s : NULL;
}

/* After glibc's fclose (its result r): the record goes. */
int stdio_release(void *rec, int r)
{
	sfree(rec);
	return r;
}
