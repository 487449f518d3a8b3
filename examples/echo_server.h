/*
 * echo_server.h -- the skeleton the thread-per-connection echo examples
 * share (echo_threads.c, echo_stdio.c): listen on 127.0.0.1:PORT, print
 * "listening on PORT", then accept forever and give each connection a
 * detached pthread with a 64 KiB stack running the example's serve(fd).
 * Plain POSIX: nothing here knows weft.
 *
 * Usage of an example: NAME [PORT]   (PORT 0, the default, picks an
 * ephemeral port).
 */
#ifndef ECHO_SERVER_H
#define ECHO_SERVER_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STACK_SIZE (64 * 1024)
#define BACKLOG 65535

static int listen_on(int port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    listen(fd, BACKLOG) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Back off briefly when out of descriptors or memory instead of spinning. */
static void backoff(void)
{
	struct timespec ts = { 0, 1000 * 1000 };

	nanosleep(&ts, NULL);
}

/* The example's main: serve each accepted connection (its fd as the
 * argument) on a thread of its own, forever. */
static int echo_main(const char *name, void *(*serve)(void *), int argc, char **argv)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	pthread_attr_t attr;
	int port = argc > 1 ? atoi(argv[1]) : 0;
	int lfd;

	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(port);
	if (lfd < 0) {
		fprintf(stderr, "%s: listen: %s\n", name, strerror(errno));
		return 1;
	}
	getsockname(lfd, (struct sockaddr *)&sa, &len);
	printf("listening on %d\n", ntohs(sa.sin_port));
	fflush(stdout);

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);

	for (;;) {
		pthread_t t;
		int one = 1;
		int fd = accept(lfd, NULL, NULL);
		int rc;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				backoff();
			/* EINTR, ECONNABORTED etc.: just retry. */
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		rc = pthread_create(&t, &attr, serve, (void *)(intptr_t)fd);
		if (rc != 0) {
			/* No thread for it: drop the connection, pause. */
			close(fd);
			backoff();
		}
	}
}

#endif
