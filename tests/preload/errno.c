/*
 * errno.c - errno after blocking calls that fail, in the plain style
 * (read errno right after the call, in a loop), compiled with -O2.
 *
 * THREADS pthreads each loop over calls that block and then fail with
 * a known errno - read with SO_RCVTIMEO (EAGAIN), connect to a closed
 * port (ECONNREFUSED), write to a closed peer (EPIPE), read of a bad fd
 * (EBADF) - and check errno each time.  Other threads set errno to junk
 * meanwhile on whatever OS thread they run on.  Under weft each thread
 * is a G that parks in those calls and may come back on another OS
 * thread; the program counts how often (/proc/thread-self changed).
 *
 * Prints "iterations=N errno_mismatches=M migrations=K"; exit 0 if M == 0.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#define THREADS 64
#define ROUNDS 150

static atomic_long iterations, mismatches, migrations;
static atomic_int stop;
static int closed_port;

/* The OS thread this runs on: /proc/thread-self names it ("PID/task/TID")
 * - not gettid(), which under weft is the thread's own stable number. */
static int tid(void)
{
	char link[64];
	ssize_t n = readlink("/proc/thread-self", link, sizeof link - 1);
	if (n <= 0)
		return -1;
	link[n] = 0;
	char *slash = strrchr(link, '/');
	return slash ? atoi(slash + 1) : -1;
}

static void bad(const char *what, int got, int want)
{
	if (atomic_fetch_add(&mismatches, 1) < 10)
		fprintf(stderr, "%s: errno %d, want %d\n", what, got, want);
}

static void *worker(void *arg)
{
	(void)arg;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
		perror("socketpair");
		exit(2);
	}
	struct timeval tv = { 0, 300 }; /* 0.3 ms receive timeout */
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)closed_port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	char buf[16];
	for (int r = 0; r < ROUNDS; r++) {
		int before = tid();

		/* blocks 0.3 ms (parks), then fails */
		ssize_t n = read(sv[0], buf, sizeof buf);
		if (n < 0 && errno == EAGAIN)
			atomic_fetch_add(&iterations, 1);
		else
			bad("read with SO_RCVTIMEO", n < 0 ? errno : 0, EAGAIN);

		int c = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(c, (struct sockaddr *)&sa, sizeof sa) < 0 && errno == ECONNREFUSED)
			atomic_fetch_add(&iterations, 1);
		else
			bad("connect to a closed port", errno, ECONNREFUSED);
		close(c);

		usleep(100); /* parks: a chance to come back elsewhere */
		if (read(-1, buf, 1) < 0 && errno == EBADF)
			atomic_fetch_add(&iterations, 1);
		else
			bad("read(-1)", errno, EBADF);

		if (tid() != before)
			atomic_fetch_add(&migrations, 1);
	}
	/* the peer goes away: writes fail with EPIPE (SIGPIPE ignored) */
	close(sv[1]);
	for (int r = 0; r < 20; r++) {
		usleep(50);
		if (write(sv[0], "x", 1) < 0 && errno == EPIPE)
			atomic_fetch_add(&iterations, 1);
		else
			bad("write to a closed peer", errno, EPIPE);
	}
	close(sv[0]);
	return NULL;
}

/* Leaves other errno values on whatever OS thread it runs on, through
 * calls that fail (libc sets errno on the thread it runs on).  Not by
 * "errno = X" around a blocking call: gcc would keep errno's address
 * from before the call and write another thread's errno after it
 * (docs/preload.md). */
static void *junk(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		(void)open("/nonexistent/weft", O_RDONLY); /* ENOENT */
		usleep(50);
		(void)lseek(0, 0, 12345); /* EINVAL */
		sched_yield();
		(void)mkdir("/", 0); /* EEXIST */
	}
	return NULL;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	/* a port nobody listens on: one below the kernel's ephemeral range
	 * that binds now, closed again.  Not one the kernel picks (bind to
	 * port 0): the next bind(0) or connect of any process may get it -
	 * a fuzzer beside the suite listened on it and closed with this
	 * test's connection queued, and connect said ECONNRESET twice
	 * (fresh-check, session 15) */
	int lo = 32768, hi = 60999;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		if (fscanf(f, "%d %d", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	for (int port = lo - 1; port > 1024 && !closed_port; port--) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(s, (struct sockaddr *)&sa, sizeof sa) == 0)
			closed_port = port;
		close(s);
	}
	if (!closed_port) {
		fprintf(stderr, "no free port below %d\n", lo);
		return 2;
	}

	pthread_t w[THREADS], j[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&j[i], NULL, junk, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&w[i], NULL, worker, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(w[i], NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(j[i], NULL);
	printf("iterations=%ld errno_mismatches=%ld migrations=%ld\n", atomic_load(&iterations),
	       atomic_load(&mismatches), atomic_load(&migrations));
	return atomic_load(&mismatches) ? 1 : 0;
}
