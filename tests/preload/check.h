/*
 * check.h - FAIL and CHECK for the plain programs in tests/preload/: say
 * where and what failed on stdout ("FAIL func:line: ..."), then exit 1
 * at once (_exit: no atexit handlers, no stdio flush of other threads'
 * half-written lines; stdout is flushed first).  say() for the programs
 * that go on after a failed check and count them (failures: the exit
 * status), errno_now() to read errno after a call, and os_threads() the
 * process's OS threads, alarm_ms / INCALL / alarm_early for an alarm
 * that is to interrupt a call.  Nothing here knows weft.
 */
#ifndef PRELOAD_CHECK_H
#define PRELOAD_CHECK_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define FAIL(...)                                                       \
	do {                                                            \
		printf("FAIL %s:%d: ", __func__, __LINE__);             \
		printf(__VA_ARGS__);                                    \
		printf("\n");                                           \
		fflush(stdout);                                         \
		_exit(1);                                               \
	} while (0)
#define CHECK(c)                                                        \
	do {                                                            \
		if (!(c))                                               \
			FAIL("%s (errno %d %s)", #c, errno, strerror(errno)); \
	} while (0)

/* The checks that failed so far (say). */
static int failures __attribute__((unused));

/* "ok what" or "FAIL what" on stdout (flushed: a crash after it keeps
 * the line); a failure is counted, and the program goes on. */
static __attribute__((unused)) void say(const char *what, int ok)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	fflush(stdout);
	if (!ok)
		failures++;
}

/* errno read where the compiler cannot keep its address from before
 * a call (see docs/preload.md): opaque, as gcc's noipa. */
static __attribute__((noinline, unused)) int errno_now(void)
{
	__asm__ volatile("" ::: "memory");
	return errno;
}

/* The process's OS threads (/proc/self/status), -1 if unreadable. */
static __attribute__((unused)) int os_threads(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	int n = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/* An alarm for a call it is to interrupt: a case arms a one-shot
 * SIGALRM (alarm_ms), then makes the call (INCALL(call)).  On a loaded
 * machine the timer can fire before the call has begun, which natively
 * too leaves the call blocked for good; so the program's SIGALRM
 * handler first asks alarm_early(sig), which arms the timer again for
 * such an alarm and says not to count it: the signal that counts finds
 * the call under way.  The window left (between INCALL's flag and the
 * call) is a few instructions against the alarm's tens of ms.  A case
 * whose "call" is a loop sets alarm_incall around it itself. */
static volatile sig_atomic_t alarm_armed __attribute__((unused));  /* armed; its call has not ended */
static volatile sig_atomic_t alarm_incall __attribute__((unused)); /* the call is (about to be) under way */
static long alarm_last_ms __attribute__((unused));

static __attribute__((unused)) void alarm_ms(long ms)
{
	struct itimerval it = { { 0, 0 }, { ms / 1000, ms % 1000 * 1000 } };
	alarm_last_ms = ms;
	alarm_incall = 0;
	alarm_armed = 1;
	setitimer(ITIMER_REAL, &it, NULL);
}

#define INCALL(call)                                      \
	({                                                \
		alarm_incall = 1;                         \
		__typeof__(call) r_ = (call);             \
		alarm_incall = 0;                         \
		alarm_armed = 0;                          \
		r_;                                       \
	})

/* In a SIGALRM handler, first: 1 if this alarm came before its call
 * began (armed again; the handler returns without counting it). */
static __attribute__((unused)) int alarm_early(int sig)
{
	if (sig != SIGALRM || !alarm_armed || alarm_incall)
		return 0;
	int e = errno;
	alarm_ms(alarm_last_ms);
	errno = e;
	return 1;
}

#endif
