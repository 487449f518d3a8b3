/*
 * echo_server -- TCP echo server written as plain blocking code: one
 * green thread per connection, each reading and writing back what it
 * receives with ordinary read(2)/write(2) until EOF.  weft's hooks turn
 * every call that would block into a park on the netpoller.
 *
 * Usage: echo_server [PORT]    (0, the default, picks an ephemeral
 * port).  Prints "listening on PORT" once it accepts connections.
 * WEFT_MAXPROCS sets the number of Ps (compare with GOMAXPROCS).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weft.h"

#define STACK_SIZE (64 * 1024)
#define BUF_SIZE 4096

static void serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[BUF_SIZE];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		if (write(fd, buf, (size_t)n) != n) /* a blocking write writes it all */
			break;
	close(fd);
}

static int listen_on(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof a;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 65535) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		close(fd);
		return -1;
	}
	printf("listening on %d\n", ntohs(a.sin_port));
	fflush(stdout);
	return fd;
}

static int server(int argc, char **argv)
{
	int lfd = listen_on(argc > 1 ? atoi(argv[1]) : 0);
	if (lfd < 0) {
		perror("echo_server: listen");
		return 1;
	}
	weft_attr_t attr = { .stack_size = STACK_SIZE };
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			usleep(1000); /* out of fds or the like: back off */
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (weft_go_attr(&attr, serve, (void *)(intptr_t)fd) < 0)
			close(fd);
	}
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	return weft_main(server, argc, argv);
}
