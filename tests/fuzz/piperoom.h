/*
 * piperoom.h - how many writes a pipe takes before one could block, from
 * what can be asked of it (its size, the bytes in it) and what was
 * written to it: the differential fuzzer's fills of a blocking pipe
 * (hookdiff.c op_fill) ask poll only past that.  Checked against the
 * kernel by tests/test_fuzz_piperoom.c.
 *
 * A pipe is a ring of pages (F_GETPIPE_SZ bytes of them); a write
 * blocks only when it needs a new page and all are taken.  A write of w
 * bytes takes at most ceil(w / page) new pages.  Equal writes of n bytes
 * (n at most a page) made one after the other with no read between, on
 * an anonymous pipe (not O_DIRECT: packet mode never merges), are
 * merged into the last page while they fit: floor(page / n) to a page,
 * so after i of them at most ceil(i / that) new pages.  The data already
 * in the pipe takes at most one page a byte and at most the pages its
 * writes can have taken.
 */
#ifndef WEFT_PIPEROOM_H
#define WEFT_PIPEROOM_H

#include <stddef.h>

/* Writes of n bytes (0 < n <= page) that cannot block: pipesz from
 * F_GETPIPE_SZ, bytes from FIONREAD, bound the pages the writes so far
 * can have taken (piperoom_write/piperoom_fill; 0 when bytes is 0).
 * 0 or less: ask before every write. */
static inline long piperoom(long pipesz, long page, long bytes, long bound, size_t n)
{
	if (page <= 0 || pipesz < page || bytes < 0 || n == 0 || (long)n > page)
		return 0;
	long pages = pipesz / page;
	long used = bytes < pages ? bytes : pages;
	if (bytes > 0 && bound < used)
		used = bound;
	if (bytes == 0)
		used = 0;
	long per = page / (long)n; /* writes per new page */
	/* before write i at most ceil(i / per) new pages were started:
	 * write i cannot block while used + that < pages */
	return (pages - used - 1) * per + 1;
}

/* The pages a write of w bytes can have taken. */
static inline long piperoom_write(long page, long w)
{
	return w > 0 ? (w + page - 1) / page : 0;
}

/* The pages i equal writes of n bytes in a row (a fill) can have taken,
 * one more for a last write a full non-blocking pipe cut short. */
static inline long piperoom_fill(long page, long i, size_t n)
{
	if (i <= 0)
		return 0;
	if ((long)n < page)
		return (i + page / (long)n - 1) / (page / (long)n) + 1;
	return i * (((long)n + page - 1) / page);
}

#endif
