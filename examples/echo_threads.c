/*
 * echo_threads -- classic thread-per-connection TCP echo server.
 *
 * Plain POSIX threads and blocking sockets: one detached pthread per
 * accepted connection, each reading and writing back exactly the bytes
 * it receives until EOF or an error.  It knows nothing about weft; it is
 * the "unmodified pthread program" that weft's LD_PRELOAD shim is meant
 * to run as green threads, and the naive peer in the echo benchmarks.
 *
 * Usage: echo_threads [PORT]    (PORT 0, the default, picks an ephemeral
 * port).  Prints "listening on PORT" once it accepts connections.
 */
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
#define BUF_SIZE 4096

/* Write all of buf[0..len), retrying on partial writes and EINTR. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Per-connection thread: echo until EOF or error, then close. */
static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[BUF_SIZE];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (write_all(fd, buf, (size_t)n) < 0)
			break;
	}
	close(fd);
	return NULL;
}

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

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	pthread_attr_t attr;
	int port = argc > 1 ? atoi(argv[1]) : 0;
	int lfd;

	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(port);
	if (lfd < 0) {
		perror("echo_threads: listen");
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
