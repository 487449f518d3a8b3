/*
 * env.c - the WEFT_* environment variables, read once at start-up.
 * A bad value is reported once on stderr and the default is used.
 *
 *   WEFT_MAXPROCS    number of Ps, 1..1024 (default: CPUs this process may use)
 *   WEFT_STACK_SIZE  usable bytes per G stack, 16K..1G, with K/M/G suffixes (default 256K)
 *   WEFT_STACK       guarded | segmented (default guarded)
 *   WEFT_TLS         thread | shared: Gs get TLS of their own (default: shared)
 *   WEFT_MAXTHREADS  OS threads weft may make, 2..16384 (default 10000): past it,
 *                    fatal (threads blocked in calls weft does not see each hold one)
 *   WEFT_DEBUG       comma-separated: schedtrace=<ms>, sigquit=continue, g0keep=0, kwait=0 (a G's
 *                    poll/select/epoll_wait always parks, never waits in the kernel), stderr=0
 *                    (the shim leaves stderr glibc's: hook/preload/stdio.c), sigkeep=0 (the
 *                    shim's signal thread stops blocking a signal whose handler went:
 *                    hook/preload/signal.c), tlsslot=0 (a G's TLS block at its stack top,
 *                    not in the interleaved slots: runtime/tls.c), guardmarks=0 (guard
 *                    pages by mprotect, budgeted, then canaries, even where the kernel
 *                    has guard markers: runtime/stack.c), pollgap=<us> (a busy
 *                    P's scheduler polls the netpoller when the last poll is older than
 *                    this, default 1000; 0: only idle Ps and sysmon poll: runtime/proc.c),
 *                    turn=<us> (a G that received a request after sending gives way
 *                    once it has run this long, default TURN_US, 0 where a switch loads
 *                    FS with a system call; 0: never: proc.c rt_turn),
 *                    busydefer=<us> (the longest a G stuck in a call weft does not see
 *                    waits for a spare P while the process's CPUs are busy with its Ms;
 *                    default 0, no wait: sysmon.c cpusbusy),
 *                    lendlog=<n> (sysmon says on stderr why it lends a P, for its first n
 *                    lends: the kind, and the stuck thread's /proc syscall line)
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

struct weftenv weftenv;

/* WEFT_DEBUG=turn's default, in us (docs/design.md, "Turns"; chosen by
 * MariaDB's p95 and tps, docs/benchmarks.md, session 16).  Not where a
 * switch loads the FS base with a system call (per-G TLS without
 * FSGSBASE: tls.c turns it off unless asked for, turn_set). */
#define TURN_US 200

#define STACK_MIN (16 * 1024)
#define STACK_MAX (1024L * 1024 * 1024)

static int cpus_available(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0) {
		int n = CPU_COUNT(&set);
		if (n > 0)
			return n > MAXPROCS ? MAXPROCS : n;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (n > MAXPROCS ? MAXPROCS : (int)n) : 1;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* "262144", "64K", "64k", "1M", "8M", "1G", optional trailing "B"/"iB" */
int parse_size(const char *s, size_t *out)
{
	char *end;
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned long long mul = 1;
	switch (*end) {
	case 'k': case 'K': mul = 1ULL << 10; end++; break;
	case 'm': case 'M': mul = 1ULL << 20; end++; break;
	case 'g': case 'G': mul = 1ULL << 30; end++; break;
	default: break;
	}
	if (mul > 1 && (!strcmp(end, "iB") || !strcmp(end, "B")))
		end += strlen(end);
	if (*end || v > (~0ULL) / mul)
		return -1;
	*out = (size_t)(v * mul);
	return 0;
}

static void debugopts(const char *s)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long v;
		if (!strncmp(tok, "schedtrace=", 11)) {
			if (parse_int(tok + 11, 1, 3600000, &v) == 0)
				weftenv.schedtrace_ms = v;
			else
				warn("ignoring WEFT_DEBUG %s: want schedtrace=<ms>, 1..3600000", tok);
		} else if (!strcmp(tok, "sigquit=continue")) {
			weftenv.sigquit_continue = true;
		} else if (!strcmp(tok, "sigquit=exit")) {
			weftenv.sigquit_continue = false;
		} else if (!strcmp(tok, "kwait=0") || !strcmp(tok, "kwait=1")) {
			weftenv.nokwait = tok[6] == '0';
		} else if (!strcmp(tok, "g0keep=0") || !strcmp(tok, "g0keep=1")) {
			weftenv.nog0keep = tok[7] == '0';
		} else if (!strcmp(tok, "tlsslot=0") || !strcmp(tok, "tlsslot=1")) {
			weftenv.notlsslot = tok[8] == '0';
		} else if (!strcmp(tok, "guardmarks=0") || !strcmp(tok, "guardmarks=1")) {
			weftenv.noguardmarks = tok[11] == '0';
		} else if (!strcmp(tok, "stderr=0") || !strcmp(tok, "stderr=1")) {
			/* the shim's: stderr stays glibc's (hook/preload/stdio.c) */
		} else if (!strcmp(tok, "sigkeep=0") || !strcmp(tok, "sigkeep=1")) {
			/* the shim's: hook/preload/signal.c, sig_start */
		} else if (!strncmp(tok, "kickdelay=", 10)) {
			if (parse_int(tok + 10, 0, 1000000, &v) == 0)
				weftenv.kickdelay_ns = (int64_t)v * 1000;
			else
				warn("ignoring WEFT_DEBUG %s: want kickdelay=<us>, 0..1000000", tok);
		} else if (!strncmp(tok, "stall=", 6)) {
			if (parse_int(tok + 6, 0, 10000000, &v) == 0)
				weftenv.stall_ns = (int64_t)v * 1000;
			else
				warn("ignoring WEFT_DEBUG %s: want stall=<us>, 0..10000000", tok);
		} else if (!strncmp(tok, "pollgap=", 8)) {
			if (parse_int(tok + 8, 0, 1000000, &v) == 0)
				weftenv.pollgap_ns = (int64_t)v * 1000;
			else
				warn("ignoring WEFT_DEBUG %s: want pollgap=<us>, 0..1000000", tok);
		} else if (!strncmp(tok, "turn=", 5)) {
			if (parse_int(tok + 5, 0, 1000000, &v) == 0) {
				weftenv.turn_ns = (int64_t)v * 1000;
				weftenv.turn_set = true;
			} else
				warn("ignoring WEFT_DEBUG %s: want turn=<us>, 0..1000000", tok);
		} else if (!strncmp(tok, "busydefer=", 10)) {
			if (parse_int(tok + 10, 0, 1000000, &v) == 0)
				weftenv.busydefer_ns = (int64_t)v * 1000;
			else
				warn("ignoring WEFT_DEBUG %s: want busydefer=<us>, 0..1000000", tok);
		} else if (!strncmp(tok, "lendlog=", 8)) {
			if (parse_int(tok + 8, 0, 1000000, &v) == 0)
				weftenv.lendlog = (int)v;
			else
				warn("ignoring WEFT_DEBUG %s: want lendlog=<n>, 0..1000000", tok);
		} else if (!strncmp(tok, "clockset=", 9)) {
			if (parse_int(tok + 9, -86400, 86400, &v) == 0)
				weftenv.clockset_ns = (int64_t)v * 1000000000;
			else
				warn("ignoring WEFT_DEBUG %s: want clockset=<seconds>, -86400..86400",
				     tok);
		} else {
			warn("ignoring WEFT_DEBUG %s: want schedtrace=<ms>, sigquit=continue, kwait=0, "
			     "g0keep=0, tlsslot=0, guardmarks=0, kickdelay=<us>, stall=<us>, pollgap=<us>, turn=<us>, "
			     "busydefer=<us>, lendlog=<n> or clockset=<s>",
			     tok);
		}
	}
}

int envmaxprocs(void)
{
	if (weftenv.maxprocs <= 0)
		weftenv.maxprocs = cpus_available();
	return weftenv.maxprocs;
}

STARTUP_TEXT void envinit(void)
{
	/* once: the preload shim reads it before the runtime starts */
	static bool done;
	if (done)
		return;
	done = true;
	weftenv.maxprocs = 0; /* envmaxprocs */
	weftenv.stacksize = 256 * 1024;
	weftenv.stackkind = WEFT_STACK_GUARDED;
	weftenv.stall_ns = -1;
	weftenv.pollgap_ns = 1000 * 1000;
	weftenv.turn_ns = TURN_US * 1000;

	const char *s = getenv("WEFT_MAXPROCS");
	long v;
	if (s && *s) {
		if (parse_int(s, 1, MAXPROCS, &v) == 0)
			weftenv.maxprocs = (int)v;
		else
			warn("ignoring WEFT_MAXPROCS=%s: want an integer 1..%d", s, MAXPROCS);
	}
	s = getenv("WEFT_STACK_SIZE");
	if (s && *s) {
		size_t sz;
		if (parse_size(s, &sz) == 0 && sz >= STACK_MIN && sz <= (size_t)STACK_MAX)
			weftenv.stacksize = sz;
		else
			warn("ignoring WEFT_STACK_SIZE=%s: want a size 16K..1G such as 64K, 1M or 8M", s);
	}
	s = getenv("WEFT_STACK");
	if (s && *s) {
		if (!strcmp(s, "guarded"))
			weftenv.stackkind = WEFT_STACK_GUARDED;
		else if (!strcmp(s, "segmented"))
			weftenv.stackkind = WEFT_STACK_SEGMENTED;
		else
			warn("ignoring WEFT_STACK=%s: want guarded or segmented", s);
	}
	weftenv.tls = -1;
	s = getenv("WEFT_TLS");
	if (s && *s) {
		if (!strcmp(s, "thread"))
			weftenv.tls = 1;
		else if (!strcmp(s, "shared"))
			weftenv.tls = 0;
		else
			warn("ignoring WEFT_TLS=%s: want thread or shared", s);
	}
	weftenv.maxthreads = 10000;
	s = getenv("WEFT_MAXTHREADS");
	if (s && *s) {
		if (parse_int(s, 2, MAXTHREADS_MAX, &v) == 0)
			weftenv.maxthreads = (int)v;
		else
			warn("ignoring WEFT_MAXTHREADS=%s: want an integer 2..%d", s, MAXTHREADS_MAX);
	}
	s = getenv("WEFT_DEBUG");
	if (s && *s)
		debugopts(s);
}
