/*
 * test_fuzz_piperoom.c - the differential fuzzer's model of a pipe's
 * room (tests/fuzz/piperoom.h) against the kernel: random histories of
 * writes, reads and fills on a pipe; before each fill, every write the
 * model says cannot block must find room (poll says POLLOUT and the
 * write, on a non-blocking pipe, takes all of it rather than EAGAIN).
 * A model that promised too much would hang the fuzzer's blocking
 * fills (docs/reliability.md, session 13).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fuzz/piperoom.h"

/* the fuzzer's write sizes (hookdiff.c sizes[]); fills of a blocking
 * pipe use those of at most 4096 bytes */
static const size_t wsizes[] = { 0, 1, 3, 7, 8, 17, 64, 511, 1024, 4096, 4097, 8192, 16384,
				 65536, 100000, 131072 };
#define NW (sizeof wsizes / sizeof wsizes[0])
#define NFILL 10 /* wsizes[1..9]: 1-4096 */

static char buf[1 << 17];

static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

/* A fill as the fuzzer makes it of a blocking pipe (writes that cannot
 * block by the model, then only while poll says there is room), here on
 * a non-blocking one so that a wrong promise fails instead of hanging.
 * Returns the writes made. */
static long fill_checked(int wr, long page, long *bound, size_t n, unsigned seed, int step)
{
	int q = -1;
	cr_assert_eq(ioctl(wr, FIONREAD, &q), 0);
	int sz = fcntl(wr, F_GETPIPE_SZ);
	cr_assert_gt(sz, 0);
	if (q == 0)
		*bound = 0;
	long room = piperoom(sz, page, q, *bound, n), i;
	for (i = 0; i < 256; i++) {
		struct pollfd pf = { wr, POLLOUT, 0 };
		int ready = poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT);
		if (i < room)
			cr_assert(ready, "seed %u step %d: write %ld of %zu bytes promised (room %ld; "
					 "%d bytes in a %d-byte pipe, bound %ld pages), poll says full",
				  seed, step, i, n, room, q, sz, *bound);
		else if (!ready)
			break;
		ssize_t w = write(wr, buf, n);
		cr_assert_eq(w, (ssize_t)n, "seed %u step %d: write %ld of %zu bytes (room %ld; "
					    "%d bytes in a %d-byte pipe, bound %ld pages) returned %zd",
			     seed, step, i, n, room, q, sz, *bound, w);
	}
	*bound += piperoom_fill(page, i, n);
	return i;
}

static void history(unsigned seed, int pipesz)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	if (pipesz)
		cr_assert_eq(fcntl(p[1], F_SETPIPE_SZ, pipesz), pipesz);
	long page = sysconf(_SC_PAGESIZE), bound = 0;
	unsigned s = seed;
	for (int step = 0; step < 24; step++) {
		size_t n = wsizes[rnd(&s) % NW];
		switch (rnd(&s) % 4) {
		case 0: { /* a write, as do_write (non-blocking: all, part or EAGAIN) */
			ssize_t w = write(p[1], buf, n);
			bound += piperoom_write(page, w);
			break;
		}
		case 1: /* a read of some of it */
			if (read(p[0], buf, n) < 0)
				cr_assert_eq(errno, EAGAIN);
			break;
		case 2: { /* a fill of a non-blocking pipe: until EAGAIN */
			long i;
			for (i = 0; i < 256; i++)
				if (write(p[1], buf, n ? n : 1) < 0)
					break;
			bound += piperoom_fill(page, i, n ? n : 1);
			break;
		}
		case 3: /* a fill of a blocking pipe */
			fill_checked(p[1], page, &bound, wsizes[1 + rnd(&s) % (NFILL - 1)], seed, step);
			break;
		}
	}
	close(p[0]);
	close(p[1]);
}

/* Many histories, on pipes of 1, 2, 4 and 16 pages. */
Test(fuzz_piperoom, promised_writes_never_block, .timeout = 120)
{
	static const int sizes[] = { 4096, 8192, 16384, 0 };
	for (unsigned seed = 1; seed <= 400; seed++)
		for (int k = 0; k < 4; k++)
			history(seed, sizes[k]);
}

/* The room is used: a fill of small writes into an empty pipe is
 * promised all of its 256 writes without a poll, and one of 4096-byte
 * writes one a page. */
Test(fuzz_piperoom, room_of_an_empty_pipe)
{
	cr_assert_geq(piperoom(65536, 4096, 0, 0, 7), 256);
	cr_assert_eq(piperoom(65536, 4096, 0, 0, 4096), 16);
	cr_assert_eq(piperoom(65536, 4096, 1792, 1, 7), 14 * 585 + 1);
	cr_assert_leq(piperoom(65536, 4096, 65536, 16, 1), 0);
}
