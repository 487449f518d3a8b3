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
 * port).  Prints "listening on PORT" once it accepts connections.  The
 * listening and accepting (one thread per connection) is echo_server.h.
 */
#include "echo_server.h"

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

int main(int argc, char **argv)
{
	return echo_main("echo_stdio", serve, argc, argv);
}
