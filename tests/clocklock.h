/*
 * clocklock.h - the tests that set CLOCK_REALTIME take this lock first,
 * so two of them never move the clock at once (Criterion runs a binary's
 * tests two at a time, and test_clock and test_preload_clock each have
 * more than one: a jump back while another test's waits expect a jump
 * forward changes both outcomes).  An flock on a file in /tmp, held by
 * the test's own process until it exits.
 */
#ifndef WEFT_TESTS_CLOCKLOCK_H
#define WEFT_TESTS_CLOCKLOCK_H

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

static __attribute__((unused)) void clock_lock(void)
{
	int fd = open("/tmp/weft-tests-clock.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return; /* no lock: the tests may then disagree, never hang */
	while (flock(fd, LOCK_EX) != 0)
		;
	/* fd stays open: the lock is the process's until it exits */
}

#endif
