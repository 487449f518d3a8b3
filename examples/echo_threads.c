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
 * port).  Prints "listening on PORT" once it accepts connections.  The
 * listening and accepting (one thread per connection) is echo_server.h.
 */
#include "echo_server.h"

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

int main(int argc, char **argv)
{
	return echo_main("echo_threads", serve, argc, argv);
}
