/*
 * servers.c - what a server does per request, for counting the system
 * calls weft adds to it (tests/test_preload_calls.c runs it under
 * tests/preload/sccount natively and under weft run).  A plain program.
 *
 *   servers nbhints - like apache per connection: a new socket made
 *           non-blocking (F_GETFL, F_SETFL O_NONBLOCK), then a read on
 *           another, older non-blocking socket that has nothing (EAGAIN),
 *           ROUNDS times.  The program makes ROUNDS F_GETFL itself.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "check.h"

#define ROUNDS 200

static void case_nbhints(void)
{
	int old[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, old) == 0);
	int fl = fcntl(old[0], F_GETFL);
	CHECK(fl >= 0 && fcntl(old[0], F_SETFL, fl | O_NONBLOCK) == 0);
	char c;
	for (int i = 0; i < ROUNDS; i++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		fl = fcntl(sv[0], F_GETFL);
		CHECK(fl >= 0 && fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) == 0);
		errno = 0;
		CHECK(read(old[0], &c, 1) == -1 && errno == EAGAIN);
		errno = 0;
		CHECK(read(sv[0], &c, 1) == -1 && errno == EAGAIN);
		close(sv[0]);
		close(sv[1]);
	}
	/* made blocking again through a dup: the next read on the original
	 * must block as natively (here: find the byte written first) */
	int d = dup(old[0]);
	CHECK(d >= 0 && fcntl(d, F_SETFL, fl & ~O_NONBLOCK) == 0);
	CHECK(write(old[1], "x", 1) == 1);
	CHECK(read(old[0], &c, 1) == 1 && c == 'x');
	printf("nbhints: %d rounds\n", ROUNDS);
}

/* The case runs on a thread of its own: a program that never makes one
 * never starts weft's runtime (docs/preload.md). */
static void *run(void *arg)
{
	const char *name = arg;
	if (strcmp(name, "nbhints") == 0)
		case_nbhints();
	else
		FAIL("no case %s", name);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		FAIL("usage: servers CASE");
	pthread_t t;
	CHECK(pthread_create(&t, NULL, run, argv[1]) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	return 0;
}
