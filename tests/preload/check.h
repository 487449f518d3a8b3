/*
 * check.h - FAIL and CHECK for the plain programs in tests/preload/: say
 * where and what failed on stdout ("FAIL func:line: ..."), then exit 1
 * at once (_exit: no atexit handlers, no stdio flush of other threads'
 * half-written lines; stdout is flushed first).  say() for the programs
 * that go on after a failed check and count them (failures: the exit
 * status), errno_now() to read errno after a call, and os_threads() the
 * process's OS threads.  Nothing here knows weft.
 */
#ifndef PRELOAD_CHECK_H
#define PRELOAD_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
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

#endif
