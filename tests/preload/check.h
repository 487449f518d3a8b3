/*
 * check.h - FAIL and CHECK for the plain programs in tests/preload/: say
 * where and what failed on stdout ("FAIL func:line: ..."), then exit 1
 * at once (_exit: no atexit handlers, no stdio flush of other threads'
 * half-written lines; stdout is flushed first).  Nothing here knows weft.
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

#endif
