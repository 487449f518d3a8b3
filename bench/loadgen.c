/*
 * loadgen -- closed-loop TCP echo load generator (single thread, epoll).
 *
 *   loadgen -p PORT [-c CONNS] [-d SECONDS] [-s MSGSIZE] [-w WARMUP]
 *           [-P SERVER_PID] [-L]
 *
 * Ramp-up: opens CONNS connections to 127.0.0.1:PORT; each sends one
 * probe message as soon as it connects and then idles once the probe is
 * echoed.  At most RAMP connections are "in flight" (connecting, or
 * waiting for the probe's echo) at any time, which keeps the server's
 * accept queue from overflowing.  Failed connects are retried a few
 * times; the whole ramp-up is bounded by CONNECT_BUDGET_NS.
 *
 * Load: then every live connection loops: send one MSGSIZE-byte message
 * whose content depends on (connection, sequence number), wait for the
 * whole echo, verify every byte, record the round-trip time, repeat.
 * WARMUP seconds unmeasured, then SECONDS measured; it prints one line:
 *
 *   conns=N connected=N msgs=N secs=S msgs_per_sec=R p50_us=L p99_us=L
 *   p999_us=L max_us=L mismatched_bytes=N errors=N client_cpu_us=N
 *
 * client_cpu_us is loadgen's own CPU time over the measured interval: if
 * it is close to secs * 1e6, the load generator itself was the limit.
 * -L: each message is a line (its last byte '\n', no other, and no NUL),
 * for servers that read with fgets and write with fputs.
 * Defaults: 100 connections, 5 s, 64-byte messages, 1 s warm-up.
 * connected counts connections that completed a first echo.
 *
 * With -P, it also samples the server process exactly at the start and
 * end of the measured interval (before any connection is closed) and
 * appends:  server_cpu_us=N server_threads=N server_vmhwm_kib=N
 * (CPU = utime + stime of the whole process from /proc/PID/stat.)
 *
 * Exit status is 0 only if every connection connected, at least one
 * message was echoed, no byte mismatched and no connection failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL
#define RAMP 256		/* max connections not yet proven alive */
#define MAX_TRIES 5		/* connect attempts per connection */
#define CONNECT_BUDGET_NS (30 * NS)	/* whole ramp-up phase */
#define MAX_MSG (1 << 20)	/* largest -s */
#define SCRATCH (64 * 1024)	/* read buffer */
#define PROC_BAD (-1.0)

enum { C_IDLE, C_WAIT, C_CONNECTING, C_RUNNING, C_DEAD };

struct conn {
	int fd;
	uint8_t state;
	uint8_t tries;
	uint8_t alive;		/* first echo received */
	uint32_t seq;		/* sequence number of current message */
	uint32_t sent;		/* bytes of current message written */
	uint32_t rcvd;		/* bytes of current message echoed */
	int64_t t_send;		/* when the current message was started */
	int64_t retry_at;	/* C_WAIT: earliest reconnect time */
};

/*
 * Latency histogram, log-linear: values below 2^SUB_BITS ns get their own
 * bucket, above that each power of two is split into 2^SUB_BITS linear
 * sub-buckets (relative error < 1/2^SUB_BITS).
 */
#define SUB_BITS 5
#define SUB (1 << SUB_BITS)
#define NBUCKETS ((64 - SUB_BITS + 1) * SUB)

static uint64_t hist[NBUCKETS];
static uint64_t hist_n, hist_max;

static int bucket_of(uint64_t v)
{
	int e;

	if (v < SUB)
		return (int)v;
	e = 63 - __builtin_clzll(v);
	return (e - SUB_BITS + 1) * SUB + (int)((v >> (e - SUB_BITS)) & (SUB - 1));
}

/* Midpoint of bucket i, in ns. */
static double bucket_mid(int i)
{
	int e, sub;

	if (i < SUB)
		return i;
	e = i / SUB + SUB_BITS - 1;
	sub = i % SUB;
	return (double)((uint64_t)(SUB + sub) << (e - SUB_BITS)) +
	       (double)(1ULL << (e - SUB_BITS)) / 2;
}

static void hist_add(uint64_t v)
{
	hist[bucket_of(v)]++;
	hist_n++;
	if (v > hist_max)
		hist_max = v;
}

/* p-quantile (0 < p <= 1) in microseconds. */
static double hist_pct(double p)
{
	uint64_t want = (uint64_t)(p * (double)hist_n + 0.999999), acc = 0;
	int i;

	if (hist_n == 0)
		return 0;
	if (want < 1)
		want = 1;
	for (i = 0; i < NBUCKETS; i++) {
		acc += hist[i];
		if (acc >= want)
			break;
	}
	/* A bucket's midpoint can lie above the largest sample. */
	if (i == NBUCKETS || bucket_mid(i) > (double)hist_max)
		return (double)hist_max / 1000.0;
	return bucket_mid(i) / 1000.0;
}

static struct conn *conns;
static int nconns, msgsize = 64, port;
static int lines; /* -L: messages are lines */
static int epfd, inflight, nstarted, nwaiting;
static uint64_t connected, errors, mismatched, msgs;
static int measuring;
static unsigned char txbuf[MAX_MSG], want[SCRATCH], rxbuf[SCRATCH];

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * NS + ts.tv_nsec;
}

/*
 * Byte i of message seq on connection id: a cheap mix so that every
 * connection and every message carries different content.
 */
static void fill(unsigned char *p, uint32_t id, uint32_t seq,
		 uint32_t off, uint32_t len)
{
	uint32_t x = (id + 1) * 0x9E3779B1u ^ (seq + 1) * 0x85EBCA77u;
	uint32_t i;

	for (i = off; i < off + len; i++) {
		unsigned char b = (unsigned char)((x >> (8 * (i & 3))) + (i >> 2));
		if (lines)
			b = i == (uint32_t)msgsize - 1 ? '\n' : b == '\n' ? 'n' : b == 0 ? '0' : b;
		*p++ = b;
	}
}

/* Give up on a connection for good and count it as an error. */
static void kill_conn(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->state == C_CONNECTING ||
	    (c->state == C_RUNNING && !c->alive))
		inflight--;
	if (c->state == C_WAIT)
		nwaiting--;
	c->state = C_DEAD;
	errors++;
}

/* Start (or restart) a non-blocking connect. */
static void start_connect(struct conn *c)
{
	struct sockaddr_in sa;
	struct epoll_event ev;
	int one = 1;

	if (c->state == C_WAIT)
		nwaiting--;
	c->tries++;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		perror("loadgen: socket");
		c->state = C_DEAD;
		errors++;
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->state = C_CONNECTING;
	inflight++;
	ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
	ev.data.ptr = c;
	epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev);
	/*
	 * Any failure other than EINPROGRESS (e.g. ECONNREFUSED) also shows
	 * up as EPOLLERR/EPOLLHUP and is handled in on_event().
	 */
	(void)connect(c->fd, (struct sockaddr *)&sa, sizeof sa);
}

/* Connect failed: back off and retry, or give up. */
static void connect_failed(struct conn *c, int64_t now)
{
	close(c->fd);
	c->fd = -1;
	inflight--;
	if (c->tries >= MAX_TRIES) {
		c->state = C_DEAD;
		errors++;
		return;
	}
	c->state = C_WAIT;
	nwaiting++;
	c->retry_at = now + (int64_t)c->tries * 50 * 1000 * 1000;
}

/* Write as much of the current message as the socket takes. */
static int pump_out(struct conn *c)
{
	while (c->sent < (uint32_t)msgsize) {
		uint32_t len = (uint32_t)msgsize - c->sent;
		ssize_t n;

		fill(txbuf, (uint32_t)(c - conns), c->seq, c->sent, len);
		n = write(c->fd, txbuf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		c->sent += (uint32_t)n;
	}
	return 0;
}

static int send_next(struct conn *c, int64_t now)
{
	c->seq++;
	c->sent = 0;
	c->rcvd = 0;
	c->t_send = now;
	return pump_out(c);
}

/* Verify n freshly read bytes against what this message should hold. */
static void check(struct conn *c, const unsigned char *p, uint32_t n)
{
	uint32_t i;

	fill(want, (uint32_t)(c - conns), c->seq, c->rcvd, n);
	if (memcmp(p, want, n) == 0)
		return;
	for (i = 0; i < n; i++)
		mismatched += p[i] != want[i];
}

/* Read the echo; on a complete message record it and send the next. */
static int pump_in(struct conn *c, int hup)
{
	for (;;) {
		ssize_t n = read(c->fd, rxbuf, sizeof rxbuf);
		uint32_t take, off = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		if (n == 0)
			return -1;	/* server closed on us */
		while (off < (uint32_t)n) {
			take = (uint32_t)n - off;
			if (take > c->sent - c->rcvd)
				take = c->sent - c->rcvd;
			if (take == 0) {
				/* Bytes we never sent: all wrong. */
				mismatched += (uint32_t)n - off;
				break;
			}
			check(c, rxbuf + off, take);
			c->rcvd += take;
			off += take;
			if (c->rcvd == (uint32_t)msgsize) {
				int64_t t = now_ns();

				if (!c->alive) {
					/* Probe echoed: idle until all are up. */
					c->alive = 1;
					inflight--;
					connected++;
					continue;
				}
				if (measuring) {
					msgs++;
					hist_add((uint64_t)(t - c->t_send));
				}
				if (send_next(c, t) < 0)
					return -1;
			}
		}
		/*
		 * A short read means the receive queue is drained and new
		 * data brings a new edge; after a hangup read on to EOF.
		 */
		if ((size_t)n < sizeof rxbuf && !hup)
			return 0;
	}
}

static void on_event(struct conn *c, uint32_t ev, int64_t now)
{
	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof err;

		if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err != 0 || (ev & (EPOLLERR | EPOLLHUP))) {
			connect_failed(c, now);
			return;
		}
		c->state = C_RUNNING;
		if (send_next(c, now) < 0)
			kill_conn(c);
		return;
	}
	if (c->state != C_RUNNING)
		return;
	if ((ev & EPOLLOUT) && c->sent < (uint32_t)msgsize &&
	    pump_out(c) < 0) {
		kill_conn(c);
		return;
	}
	if ((ev & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) &&
	    pump_in(c, (ev & (EPOLLRDHUP | EPOLLERR | EPOLLHUP)) != 0) < 0)
		kill_conn(c);
}

/* Launch new or retried connects while under the ramp limit. */
static void ramp(int64_t now)
{
	int i;

	for (i = 0; nwaiting > 0 && i < nstarted && inflight < RAMP; i++)
		if (conns[i].state == C_WAIT && conns[i].retry_at <= now)
			start_connect(&conns[i]);
	while (nstarted < nconns && inflight < RAMP)
		start_connect(&conns[nstarted++]);
}

static void usage(void)
{
	fprintf(stderr, "usage: loadgen -p PORT [-c CONNS] [-d SECONDS] "
		"[-s MSGSIZE] [-w WARMUP_SECONDS] [-P SERVER_PID] [-L]\n");
	exit(2);
}

/* Our own user + system CPU time in microseconds. */
static double self_cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* utime + stime of process pid in microseconds, or PROC_BAD. */
static double proc_cpu_us(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return PROC_BAD;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return PROC_BAD;
	buf[n] = 0;
	/* comm may contain spaces; fields restart after the last ')'. */
	p = strrchr(buf, ')');
	if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u "
				"%*u %*u %llu %llu", &ut, &st) != 2)
		return PROC_BAD;
	return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

/* A "Key:   value" number from /proc/pid/status, or -1. */
static long proc_status(int pid, const char *key)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			v = strtol(line + klen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	struct epoll_event evs[512];
	double secs = 5, warm = 1, elapsed, p50, p99, p999;
	int64_t t0, t_measure = 0, t_end = 0, now;	/* ns */
	double cpu0 = 0, cpu1 = 0, self0 = 0, self1 = 0;
	long threads = -1, hwm = -1;
	int opt, i, ok, spid = 0;

	nconns = 100;
	while ((opt = getopt(argc, argv, "p:c:d:s:w:P:L")) != -1) {
		switch (opt) {
		case 'p': port = atoi(optarg); break;
		case 'c': nconns = atoi(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 's': msgsize = atoi(optarg); break;
		case 'w': warm = atof(optarg); break;
		case 'P': spid = atoi(optarg); break;
		case 'L': lines = 1; break;
		default: usage();
		}
	}
	if (port <= 0 || port > 65535 || nconns <= 0 || secs <= 0 ||
	    warm < 0 || msgsize <= 0 || msgsize > MAX_MSG || spid < 0 ||
	    optind != argc)
		usage();

	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	conns = calloc((size_t)nconns, sizeof *conns);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (conns == NULL || epfd < 0) {
		perror("loadgen");
		return 1;
	}
	for (i = 0; i < nconns; i++)
		conns[i].fd = -1;

	/*
	 * Phases: ramp up (until every connection has echoed its probe or
	 * is dead for good, bounded by CONNECT_BUDGET_NS), then load: warm
	 * up until t_measure, measure until t_end.
	 */
	t0 = now_ns();
	for (;;) {
		int n;

		now = now_ns();
		if (t_measure == 0) {
			int busy = nstarted < nconns || inflight || nwaiting;

			if (busy && now - t0 < CONNECT_BUDGET_NS) {
				ramp(now);
			} else {
				/*
				 * Give up on stragglers, start the traffic
				 * and the warm-up.
				 */
				for (i = 0; i < nconns; i++) {
					struct conn *c = &conns[i];

					if (c->state != C_DEAD && !c->alive)
						kill_conn(c);
					else if (c->state == C_RUNNING &&
						 send_next(c, now) < 0)
						kill_conn(c);
				}
				nstarted = nconns;
				t_measure = now + (int64_t)(warm * NS);
			}
		}
		if (t_measure != 0 && !measuring && now >= t_measure) {
			measuring = 1;
			self0 = self_cpu_us();
			if (spid > 0)
				cpu0 = proc_cpu_us(spid);
			t_measure = now;
			t_end = now + (int64_t)(secs * NS);
		}
		if (measuring && now >= t_end) {
			self1 = self_cpu_us();
			if (spid > 0) {
				cpu1 = proc_cpu_us(spid);
				threads = proc_status(spid, "Threads");
				hwm = proc_status(spid, "VmHWM");
			}
			break;
		}
		n = epoll_wait(epfd, evs, 512, 10);
		for (i = 0; i < n; i++)
			on_event(evs[i].data.ptr, evs[i].events, now_ns());
	}
	elapsed = (double)(now - t_measure) / NS;

	for (i = 0; i < nconns; i++)
		if (conns[i].fd >= 0)
			close(conns[i].fd);

	p50 = hist_pct(0.50);
	p99 = hist_pct(0.99);
	p999 = hist_pct(0.999);
	printf("conns=%d connected=%" PRIu64 " msgs=%" PRIu64 " secs=%.2f "
	       "msgs_per_sec=%.0f p50_us=%.1f p99_us=%.1f p999_us=%.1f "
	       "max_us=%.1f mismatched_bytes=%" PRIu64 " errors=%" PRIu64
	       " client_cpu_us=%.0f",
	       nconns, connected, msgs, elapsed,
	       elapsed > 0 ? (double)msgs / elapsed : 0.0, p50, p99, p999,
	       (double)hist_max / 1000.0, mismatched, errors, self1 - self0);
	if (spid > 0)
		printf(" server_cpu_us=%.0f server_threads=%ld "
		       "server_vmhwm_kib=%ld",
		       cpu0 == PROC_BAD || cpu1 == PROC_BAD ? -1.0 : cpu1 - cpu0,
		       threads, hwm);
	printf("\n");
	ok = connected == (uint64_t)nconns && msgs > 0 && mismatched == 0 &&
	     errors == 0;
	return ok ? 0 : 1;
}
