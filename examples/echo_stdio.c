/*
 * echo_stdio -- classic thread-per-connection line echo server on stdio.
 *
 * Plain POSIX threads and blocking sockets: one detached pthread per
 * accepted connection, which wraps the socket in a FILE (fdopen "r+")
 * and echoes line by line with fgets, fputs and fflush until EOF or an
 * error.  It knows nothing
 * about weft: the stdio twin of echo_threads.c, the second row of
 * "make demo" (its load sends lines: loadgen -L).
 *
 * Usage: echo_stdio [PORT]    (PORT 0, the default, picks an ephemeral
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
#define LINE_MAX_ 4096

/* Per-connection thread: echo lines until EOF or error, then close.
 * One FILE for both directions ("r+", as such servers are usually
 * written): a line is read whole before it is answered, so the buffer
 * holds no unread input when output starts (glibc then needs no
 * seek between them), and fflush ends each answer before the next read. */
static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	FILE *f = fdopen(fd, "r+");
	char line[LINE_MAX_];

	if (f == NULL) {
		close(fd);
		return NULL;
	}
	while (fgets(line, sizeof line, f) != NULL) {
		if (fputs(line, f) == EOF || fflush(f) == EOF)
			break;
	}
	fclose(f);
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
		perror("echo_stdio: listen");
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
