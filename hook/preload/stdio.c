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
 * O_APPEND, as fdopen does, and its buffer is the size fdopen's would
 * be (st_blksize: 4 KiB on a socket or pipe; glibc would give a cookie
 * FILE BUFSIZ), set with setvbuf and freed at close.  Difference: the
 * stream is byte-oriented only (fwide(f, 1) fails, wide reads and
 * writes return WEOF: glibc gives a cookie FILE no wide buffers).  A
 * mode fdopen gives meaning beyond r/w/a/+/b/x/e ("m", ",ccs=") gets
 * glibc's own fdopen.
 *
 * popen: glibc's popen makes the pipe, the child and the pclose that
 * waits; the FILE the program gets is a cookie FILE over the same fd,
 * whose close is glibc's pclose of the original (close the fd, wait for
 * the child): pclose and fclose of it return the child's status.
 *
 * Not covered: stdin/stdout/stderr (static FILEs glibc made before the
 * shim could act) and fopen of a FIFO by name - they block their OS
 * thread as before (docs/hooks.md "Calls weft does not see").
 */
#include "shim.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

DEFREAL(fdopen);
DEFREAL(pclose);

/* What a cookie FILE made here carries. */
struct sfile {
	int fd;     /* the file: FILE's _fileno, read/written/closed here */
	FILE *proc; /* popen: glibc's FILE over fd, pclose'd at close; else NULL */
	FILE *file; /* the cookie FILE itself (its lock, below) */
	char *buf;  /* its buffer, the size glibc's fdopen would take; freed at close */
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

/* glibc's cookie vtable, seen on the first FILE made here: a FILE with
 * it is a cookie FILE (ours, or the program's own fopencookie). */
static const void *_Atomic cookie_vtable;

/* struct _IO_FILE_plus: the vtable pointer follows the public FILE. */
static const void *vtable_of(FILE *f)
{
	const void *vt;
	memcpy(&vt, (const char *)f + sizeof(FILE), sizeof vt);
	return vt;
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
	struct iolock *l = lock_lend(s);
	size_t done = 0;
	while (done < n) {
		ssize_t r = write(s->fd, buf + done, n - done); /* weft's hook */
		if (r <= 0)
			break;
		done += (size_t)r;
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
	int e = errno_get();
	rtfree(s->buf); /* glibc is done with it: after this it only forgets it */
	rtfree(s);
	errno_set(e);
	return r;
}

static const cookie_io_functions_t s_funcs = { s_read, s_write, s_seek, s_close };

/* ---- making them -------------------------------------------------------------- */

/* fd is a socket, a pipe or a FIFO (the files epoll can wait on); *bufsz
 * the buffer glibc's fdopen would give it (_IO_file_doallocate:
 * st_blksize if smaller than BUFSIZ, 4 KiB on a socket or a pipe). */
static bool pollable(int fd, size_t *bufsz)
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

/* A cookie FILE over fd (proc: popen's FILE) with a bufsz buffer, or
 * NULL with errno set (ENOMEM). */
static FILE *wrap(int fd, const char *cmode, FILE *proc, size_t bufsz)
{
	struct sfile *s = rtalloc(sizeof *s);
	char *buf = rtalloc(bufsz);
	FILE *f = NULL;
	if (!s || !buf || !(f = fopencookie(s, cmode, s_funcs))) {
		rtfree(s);
		rtfree(buf);
		errno_set(ENOMEM);
		return NULL;
	}
	s->fd = fd;
	s->proc = proc;
	s->file = f;
	s->buf = buf;
	f->_fileno = fd; /* fileno() as fdopen's; glibc's cookie FILEs say -2 */
	/* glibc would give a cookie FILE BUFSIZ (it cannot stat it); the
	 * program may still setvbuf its own (before its first I/O) */
	setvbuf(f, buf, _IOFBF, bufsz);
	const void *vt = NULL;
	atomic_compare_exchange_strong(&cookie_vtable, &vt, vtable_of(f));
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
	return wrap(fd, cmode, NULL, bufsz);
}

/* fork.c's popen: glibc's FILE f over its pipe becomes a cookie FILE
 * over the same fd. */
FILE *stdio_popen(FILE *f, const char *mode)
{
	const char *cmode = simple_mode(mode);
	size_t bufsz;
	if (!f || !cmode || !pollable(fileno(f), &bufsz))
		return f;
	FILE *c = wrap(fileno(f), cmode, f, bufsz);
	return c ? c : f; /* out of memory: glibc's FILE, blocking as before */
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
