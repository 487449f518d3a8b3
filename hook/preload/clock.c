/*
 * clock.c - a thread's CPU-time clock, for a thread that is a G.
 *
 * CLOCK_THREAD_CPUTIME_ID on a G, and the clock id pthread_getcpuclockid
 * gives for a G (thread.c: a kind no kernel clock has), read the G's own
 * clock (runtime/cpuclock.c: the CPU time of the Ms while it ran on
 * them), wherever the reader runs.  Every other clock goes on to the
 * next definition, as any interposer passes a call on: the C library's,
 * or another interposer's preloaded after the shim (libfaketime: a
 * program under `weft run -- faketime ...` sees the time it was given).
 * The shim's own readings of the program's clocks (a timed wait's
 * deadline: ts_until, the wall clock rt_realtime) come here too, so they
 * measure the program's deadlines against the clock it made them from.
 * The runtime and its jemalloc read the vDSO's (rt_clock_gettime).
 *
 *   clock_gettime, clock_getres   the G's clock, resolution 1 ns
 *   getrusage(RUSAGE_THREAD)      ru_utime + ru_stime is the G's clock
 *   timer_create                  ENOTSUP on a G's clock (as POSIX lets
 *                                 it answer for a CPU-time clock)
 *   clock_nanosleep               EINVAL, unchanged (hook/wait.c sends
 *                                 it to the kernel, which refuses both)
 */
#include "shim.h"

#include <sys/resource.h>

/* Is clk a G's clock (the caller's CLOCK_THREAD_CPUTIME_ID on a G of
 * the program, or a G's id)?  Then its reading in *ns, or an error
 * number; -1 if not (the kernel's clock). */
static int gclock(clockid_t clk, int64_t *ns)
{
	struct g *gp;
	if (clk == CLOCK_THREAD_CPUTIME_ID) {
		gp = getg();
		if (!gp || !gp->sigon)
			return -1; /* a plain thread's own */
	} else if (!gthr_isclock(clk)) {
		gp = gthr_mainclock(clk);
		if (!gp)
			return -1;
	} else {
		int e = gthr_clock(clk, &gp);
		if (e)
			return e;
	}
	*ns = gp ? gcpu_read(gp) : 0; /* not started yet: 0 */
	return *ns < 0 ? EINVAL : 0;
}

/* Only a negative id or CLOCK_THREAD_CPUTIME_ID may be a G's. */
#define MAYBE_G(clk) unlikely((clk) < 0 || (clk) == CLOCK_THREAD_CPUTIME_ID)

DEFREAL(clock_gettime);

HOOK int clock_gettime(clockid_t clk, struct timespec *ts)
{
	int64_t ns;
	int e = MAYBE_G(clk) ? gclock(clk, &ns) : -1;
	if (likely(e < 0))
		return REAL(clock_gettime)(clk, ts);
	if (e) {
		errno_set(e);
		return -1;
	}
	*ts = (struct timespec){ ns / NS_PER_S, ns % NS_PER_S };
	return 0;
}

DEFREAL(clock_getres);

HOOK int clock_getres(clockid_t clk, struct timespec *res)
{
	int64_t ns;
	int e = MAYBE_G(clk) ? gclock(clk, &ns) : -1;
	if (e < 0)
		return REAL(clock_getres)(clk, res);
	if (e) {
		errno_set(e);
		return -1;
	}
	if (res)
		*res = (struct timespec){ 0, 1 }; /* as the kernel's CPU clocks */
	return 0;
}

DEFREAL(getrusage);

/* RUSAGE_THREAD on a G: its clock, split between user and system time
 * in the proportion of the OS thread's own (the kernel splits its
 * sum_exec_runtime by sampled ticks the same way); the other fields are
 * the OS thread's. */
HOOK int getrusage(int who, struct rusage *ru)
{
	int r = REAL(getrusage)(who, ru);
	struct g *gp;
	if (r != 0 || who != RUSAGE_THREAD || !(gp = getg()) || !gp->sigon)
		return r;
	int64_t ns = gcpu_read(gp);
	if (ns < 0)
		return r;
	int64_t u = (int64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec;
	int64_t s = (int64_t)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
	int64_t us = ns / 1000;
	int64_t gu = u + s > 0 ? (int64_t)((__int128)us * u / (u + s)) : us;
	ru->ru_utime = (struct timeval){ gu / 1000000, gu % 1000000 };
	ru->ru_stime = (struct timeval){ (us - gu) / 1000000, (us - gu) % 1000000 };
	return 0;
}

DEFREAL(timer_create);

/* A timer on a G's CPU clock would need the switch to arm and disarm it
 * on each M: not done.  ENOTSUP, which POSIX names for "no timer on this
 * CPU-time clock"; on a plain thread's own clock, the kernel's timer. */
HOOK int timer_create(clockid_t clk, struct sigevent *sev, timer_t *timer)
{
	if (likely(!MAYBE_G(clk)))
		return REAL(timer_create)(clk, sev, timer);
	struct g *gp = getg();
	if (clk == CLOCK_THREAD_CPUTIME_ID ? !gp || !gp->sigon : !gthr_isclock(clk))
		return REAL(timer_create)(clk, sev, timer);
	errno_set(ENOTSUP);
	return -1;
}
