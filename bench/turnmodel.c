/*
 * turnmodel.c - a model of a thread-per-connection server's request
 * latency (docs/benchmarks.md, MariaDB, session 11): a plain pthread
 * program, run natively and under `weft run`.
 *
 *   turnmodel server SOCKET WORK_US
 *       one thread per connection on the Unix socket SOCKET: each request
 *       (8 bytes) is read as MariaDB reads, recv(MSG_DONTWAIT) then poll
 *       when nothing is there, answered after WORK_US microseconds of CPU
 *       (a calibrated loop), with send(MSG_DONTWAIT)
 *   turnmodel client SOCKET CONNS SECS
 *       CONNS connections, one thread each, closed loop (send a request,
 *       wait for its answer, send the next at once) for SECS seconds after
 *       a second of warm-up; prints requests/s and latency p50/p95/p99 us
 *
 * A client that answers at once makes the server's thread find its next
 * request there when it comes back to recv: the streak that turns
 * (docs/design.md, "Turns") cut short.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- server -------------------------------------------------------------- */

static volatile uint64_t sink;
static uint64_t spins_per_work;

static void work(uint64_t n)
{
	uint64_t x = sink;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	sink = x;
}

/* Loop iterations per WORK_US of this thread's CPU: the fastest of a few
 * tries (a loaded machine only makes a try look slower). */
static uint64_t calibrate(int64_t work_us)
{
	double best = 0;
	for (int t = 0; t < 5; t++) {
		int64_t c0 = thread_cpu_ns();
		work(2000000);
		double per_ns = 2000000.0 / (double)(thread_cpu_ns() - c0);
		if (per_ns > best)
			best = per_ns;
	}
	return (uint64_t)(best * (double)work_us * 1000.0);
}

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[64];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = { fd, POLLIN, 0 };
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				break;
			continue;
		}
		if (n <= 0)
			break;
		work(spins_per_work);
		if (send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n)
			break;
	}
	close(fd);
	return NULL;
}

static int server(const char *path, int64_t work_us)
{
	spins_per_work = calibrate(work_us);
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	unlink(path);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096)) {
		perror("turnmodel server");
		return 1;
	}
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("accept");
			return 1;
		}
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, serve, (void *)(intptr_t)fd)) {
			close(fd);
			perror("pthread_create");
		}
		pthread_attr_destroy(&at);
	}
}

/* ---- client -------------------------------------------------------------- */

static const char *sockpath;
static int64_t t_start, t_end; /* the measured window */
static pthread_barrier_t ready;

struct conn {
	pthread_t t;
	int64_t *lat; /* ns, in the window */
	size_t n, cap;
};

static void *drive(void *arg)
{
	struct conn *c = arg;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof a.sun_path, "%s", sockpath);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
		perror("connect");
		exit(1);
	}
	pthread_barrier_wait(&ready);
	char req[8] = "request", rep[8];
	for (;;) {
		int64_t t0 = now_ns();
		if (t0 >= t_end)
			break;
		if (send(fd, req, sizeof req, MSG_NOSIGNAL) != (ssize_t)sizeof req)
			exit(1);
		size_t got = 0;
		while (got < sizeof rep) {
			ssize_t r = recv(fd, rep + got, sizeof rep - got, 0);
			if (r <= 0)
				exit(1);
			got += (size_t)r;
		}
		if (t0 < t_start)
			continue;
		if (c->n == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 4096;
			c->lat = realloc(c->lat, c->cap * sizeof *c->lat);
			if (!c->lat)
				exit(1);
		}
		c->lat[c->n++] = now_ns() - t0;
	}
	close(fd);
	return NULL;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int client(const char *path, int conns, int secs)
{
	sockpath = path;
	struct conn *cs = calloc((size_t)conns, sizeof *cs);
	pthread_barrier_init(&ready, NULL, (unsigned)conns + 1);
	t_end = INT64_MAX;
	for (int i = 0; i < conns; i++)
		if (pthread_create(&cs[i].t, NULL, drive, &cs[i])) {
			perror("pthread_create");
			return 1;
		}
	t_start = now_ns() + 1000000000LL; /* set before the barrier releases them */
	t_end = t_start + (int64_t)secs * 1000000000LL;
	pthread_barrier_wait(&ready);
	size_t total = 0;
	for (int i = 0; i < conns; i++) {
		pthread_join(cs[i].t, NULL);
		total += cs[i].n;
	}
	int64_t *all = malloc((total ? total : 1) * sizeof *all);
	size_t k = 0;
	for (int i = 0; i < conns; i++) {
		memcpy(all + k, cs[i].lat, cs[i].n * sizeof *all);
		k += cs[i].n;
	}
	qsort(all, total, sizeof *all, cmp64);
	if (!total) {
		printf("0 requests\n");
		return 1;
	}
	double mean = 0;
	for (size_t i = 0; i < total; i++)
		mean += (double)all[i];
	mean /= (double)total;
	printf("%.0f %.0f %.0f %.0f %.0f\n", (double)total / secs, mean / 1e3,
	       (double)all[total / 2] / 1e3, (double)all[total * 95 / 100] / 1e3,
	       (double)all[total * 99 / 100] / 1e3);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(argv[2], atoll(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: turnmodel server SOCKET WORK_US | client SOCKET CONNS SECS\n");
	return 2;
}
