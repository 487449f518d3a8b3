/*
 * soakclient.c - the client side of the soak (make soak, docs/reliability.md).
 *
 * Plain pthreads and non-blocking sockets; knows nothing of weft.  THREADS
 * workers each open a TCP connection to an echo server, run one scenario
 * on it, and open the next, until BYTES bytes have come back verified:
 *
 *   normal     messages of 1 B .. 1 MiB (log-uniform sizes) written and
 *              read back concurrently, then close
 *   halfclose  the same, then shutdown(SHUT_WR): every byte must still
 *              come back, then end of file
 *   abort      close with SO_LINGER 0 (an RST) part-way through a message
 *   stall      stop reading for 100-400 ms half-way (the server's writes
 *              block and park), then go on
 *   idle       connect and say nothing for 50-200 ms first
 *
 * Every byte is checked: the stream a connection sends is a function of
 * (connection id, offset), and what comes back must be that stream, in
 * order, in full (abort: the part received so far).  A wrong byte is
 * "mismatched", a stream that ends early "lost", one that goes on past
 * what was sent "extra".
 *
 * With --pid the server is sampled every 2 s: VmRSS and open fds from
 * /proc, live Gs from the last "gs=" of its WEFT_DEBUG=schedtrace output
 * (--trace FILE).  At the end, once every connection is closed, the fd
 * and G counts must come back to what they were before the first
 * connection, and RSS must be within --rss-tol percent of its value after
 * warm-up (the first quarter of the bytes).
 *
 *   soakclient --port P --bytes N [--threads T] [--pid PID --trace FILE]
 *              [--rss-tol PCT] [--label NAME]
 * Exit 0 when every check held; 1 otherwise.  One summary line on stdout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)
#define STUCK_MS 60000 /* no progress at all for this long: a hang */

static int port;
static long long target;
static int nthreads = 16;
static int spid;
static const char *tracefile;
static double rsstol = 10;
static const char *label = "soak";

static _Atomic long long verified, sentb;
static _Atomic long conns, nnormal, nhalf, nabort, nstall, nidle;
static _Atomic long mismatched, lost, extra, stuck, connerr;
static _Atomic int stop;
static _Atomic uint64_t nextid;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The byte stream of connection k: 8 bytes per mix(). */
static void fill(uint64_t k, uint64_t off, uint8_t *p, size_t n)
{
	uint64_t w = UINT64_MAX, cur = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t o = off + i;
		if ((o >> 3) != w) {
			w = o >> 3;
			cur = mix(k * 0x100000001b3ULL ^ w);
		}
		p[i] = (uint8_t)(cur >> ((o & 7) * 8));
	}
}

/* Bytes of p[0..n) that differ from the stream at off. */
static long check(uint64_t k, uint64_t off, const uint8_t *p, size_t n)
{
	uint64_t w = UINT64_MAX, cur = 0;
	long bad = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t o = off + i;
		if ((o >> 3) != w) {
			w = o >> 3;
			cur = mix(k * 0x100000001b3ULL ^ w);
		}
		bad += p[i] != (uint8_t)(cur >> ((o & 7) * 8));
	}
	return bad;
}

/* xorshift per thread */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 1 B .. 1 MiB, log-uniform */
static size_t msgsize(uint64_t *s)
{
	int bits = (int)(rnd(s) % 21); /* 2^0 .. 2^20 */
	size_t lo = (size_t)1 << bits, v = lo + rnd(s) % lo;
	return v > ((size_t)1 << 20) ? (size_t)1 << 20 : v;
}

enum { S_NORMAL, S_HALF, S_ABORT, S_STALL, S_IDLE };

static int dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		close(fd);
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* One connection, one scenario. */
static void session(uint64_t *seed, uint8_t *wbuf, uint8_t *rbuf)
{
	int sc = (int)(rnd(seed) % 100);
	sc = sc < 45 ? S_NORMAL : sc < 65 ? S_HALF : sc < 80 ? S_ABORT : sc < 92 ? S_STALL : S_IDLE;
	uint64_t k = atomic_fetch_add(&nextid, 1) + 1;
	int fd = dial();
	if (fd < 0) {
		atomic_fetch_add(&connerr, 1);
		usleep(10000);
		return;
	}
	atomic_fetch_add(&conns, 1);
	int nmsg = 1 + (int)(rnd(seed) % 8);
	size_t sizes[8];
	uint64_t total = 0;
	for (int i = 0; i < nmsg; i++)
		total += sizes[i] = msgsize(seed);
	uint64_t abort_at = sc == S_ABORT ? rnd(seed) % total : UINT64_MAX;
	int64_t stall_from = -1, stall_until = -1;
	if (sc == S_IDLE)
		usleep((useconds_t)(50000 + rnd(seed) % 150000));
	uint64_t sent = 0, rcvd = 0;
	int m = 0;
	size_t moff = 0; /* offset in message m */
	int64_t last = now_ms();
	int shut = 0;
	for (;;) {
		if (sent >= abort_at) {
			struct linger lg = { 1, 0 };
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
			close(fd);
			atomic_fetch_add(&nabort, 1);
			return;
		}
		if (sc == S_HALF && sent == total && !shut) {
			shutdown(fd, SHUT_WR);
			shut = 1;
		}
		if (rcvd == total && (sc != S_HALF))
			break;
		int64_t t = now_ms();
		if (sc == S_STALL && stall_from < 0 && sent >= total / 2) {
			stall_from = t;
			stall_until = t + 100 + (int64_t)(rnd(seed) % 300);
		}
		int stalled = stall_until > t;
		struct pollfd p = { fd, 0, 0 };
		if (!stalled)
			p.events |= POLLIN;
		if (sent < total)
			p.events |= POLLOUT;
		int wait = stalled ? (int)(stall_until - t) : 1000;
		int n = p.events ? poll(&p, 1, wait) : (usleep((useconds_t)wait * 1000), 0);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0) {
			if (!stalled && now_ms() - last > STUCK_MS) {
				atomic_fetch_add(&stuck, 1);
				fprintf(stderr, "%s: conn %llu stuck: sent %llu of %llu, received %llu\n",
					label, (unsigned long long)k, (unsigned long long)sent,
					(unsigned long long)total, (unsigned long long)rcvd);
				break;
			}
			continue;
		}
		if ((p.revents & POLLOUT) && sent < total) {
			size_t want = sizes[m] - moff;
			if (want > CHUNK)
				want = CHUNK;
			if (abort_at != UINT64_MAX && sent + want > abort_at)
				want = (size_t)(abort_at - sent) + 1;
			fill(k, sent, wbuf, want);
			ssize_t w = write(fd, wbuf, want);
			if (w > 0) {
				sent += (uint64_t)w;
				atomic_fetch_add(&sentb, w);
				moff += (size_t)w;
				if (moff == sizes[m]) {
					m++;
					moff = 0;
				}
				last = now_ms();
			} else if (w < 0 && errno != EAGAIN) {
				atomic_fetch_add(&lost, 1);
				fprintf(stderr, "%s: conn %llu write: %s\n", label,
					(unsigned long long)k, strerror(errno));
				break;
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = read(fd, rbuf, CHUNK);
			if (r > 0) {
				uint64_t room = rcvd < sent ? sent - rcvd : 0;
				if ((uint64_t)r > room) {
					atomic_fetch_add(&extra, (long)((uint64_t)r - room));
					r = (ssize_t)room;
				}
				long bad = check(k, rcvd, rbuf, (size_t)r);
				if (bad) {
					atomic_fetch_add(&mismatched, bad);
					fprintf(stderr, "%s: conn %llu: %ld bytes wrong at %llu\n", label,
						(unsigned long long)k, bad, (unsigned long long)rcvd);
				}
				rcvd += (uint64_t)r;
				atomic_fetch_add(&verified, r - bad);
				last = now_ms();
			} else if (r == 0) {
				if (sc == S_HALF && rcvd == total) { /* the end after everything */
					atomic_fetch_add(&nhalf, 1);
					close(fd);
					return;
				}
				atomic_fetch_add(&lost, 1);
				fprintf(stderr, "%s: conn %llu: end of file after %llu of %llu bytes\n",
					label, (unsigned long long)k, (unsigned long long)rcvd,
					(unsigned long long)total);
				break;
			} else if (errno != EAGAIN) {
				atomic_fetch_add(&lost, 1);
				fprintf(stderr, "%s: conn %llu read: %s\n", label, (unsigned long long)k,
					strerror(errno));
				break;
			}
		}
	}
	if (rcvd == total && sc != S_HALF)
		atomic_fetch_add(sc == S_STALL ? &nstall : sc == S_IDLE ? &nidle : &nnormal, 1);
	close(fd);
}

static void *worker(void *arg)
{
	uint64_t seed = mix((uint64_t)(uintptr_t)arg + 1) | 1;
	uint8_t *wbuf = malloc(CHUNK), *rbuf = malloc(CHUNK);
	while (!atomic_load(&stop) && atomic_load(&verified) < target)
		session(&seed, wbuf, rbuf);
	free(wbuf);
	free(rbuf);
	return NULL;
}

/* ---- the server's figures ------------------------------------------------ */

static long rss_kib(void)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", spid);
	FILE *f = fopen(path, "r");
	long v = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6))
			v = atol(line + 6);
	fclose(f);
	return v;
}

static int nfds(void)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd", spid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Live Gs: the last "gs=N" the server's schedtrace printed. */
static long live_gs(void)
{
	if (!tracefile)
		return -1;
	FILE *f = fopen(tracefile, "r");
	if (!f)
		return -1;
	char line[1024];
	long v = -1;
	while (fgets(line, sizeof line, f)) {
		char *p = strstr(line, " gs=");
		if (p)
			v = atol(p + 4);
	}
	fclose(f);
	return v;
}

/* Wait for a fresh schedtrace line (printed every second). */
static long live_gs_fresh(void)
{
	usleep(1200000);
	return live_gs();
}

static void usage(void)
{
	fprintf(stderr, "usage: soakclient --port P --bytes N [--threads T] [--pid PID "
			"--trace FILE] [--rss-tol PCT] [--label NAME]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", 1, 0, 'p' }, { "bytes", 1, 0, 'b' }, { "threads", 1, 0, 't' },
		{ "pid", 1, 0, 'P' },  { "trace", 1, 0, 'T' }, { "rss-tol", 1, 0, 'r' },
		{ "label", 1, 0, 'l' }, { 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p': port = atoi(optarg); break;
		case 'b': target = atoll(optarg); break;
		case 't': nthreads = atoi(optarg); break;
		case 'P': spid = atoi(optarg); break;
		case 'T': tracefile = optarg; break;
		case 'r': rsstol = atof(optarg); break;
		case 'l': label = optarg; break;
		default: usage();
		}
	}
	if (port <= 0 || target <= 0 || nthreads <= 0)
		usage();
	signal(SIGPIPE, SIG_IGN);

	/* the baseline is the server's idle state once it has served one
	 * connection: a preloaded server starts weft's runtime (its epoll and
	 * eventfds, the signal router G) at its first pthread_create, not
	 * before (the lazy start, docs/preload.md) */
	if (spid) {
		int w = dial();
		if (w >= 0)
			close(w);
	}
	long gs0 = spid ? live_gs_fresh() : -1;
	int fd0 = spid ? nfds() : -1;
	long rss0 = spid ? rss_kib() : -1, rsswarm = -1, rssmax = rss0;
	int fdmax = fd0;
	int64_t t0 = now_ms();

	pthread_t *th = calloc((size_t)nthreads, sizeof *th);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
	int64_t lastprint = t0;
	for (int tick = 1; atomic_load(&verified) < target; tick++) {
		usleep(200000);
		if (atomic_load(&stuck) || atomic_load(&mismatched) > 1000000)
			break;
		if (tick % 10)
			continue; /* the server is sampled every 2 s */
		if (spid) {
			long r = rss_kib();
			int f = nfds();
			if (r > rssmax)
				rssmax = r;
			if (f > fdmax)
				fdmax = f;
			if (rsswarm < 0 && atomic_load(&verified) >= target / 4)
				rsswarm = r;
		}
		if (now_ms() - lastprint >= 10000) {
			lastprint = now_ms();
			fprintf(stderr, "%s: %.2f GiB verified, %ld connections, %.0f s\n", label,
				(double)atomic_load(&verified) / (1 << 30), atomic_load(&conns),
				(double)(lastprint - t0) / 1000);
		}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	double secs = (double)(now_ms() - t0) / 1000;

	/* every connection is closed: the server's fds and Gs must come back */
	int fd1 = -1;
	long gs1 = -1, rss1 = -1;
	if (spid) {
		for (int i = 0; i < 30; i++) {
			fd1 = nfds();
			gs1 = live_gs_fresh();
			if (fd1 <= fd0 && gs1 <= gs0)
				break;
		}
		rss1 = rss_kib();
	}
	if (rsswarm < 0)
		rsswarm = rss1;
	double growth = rsswarm > 0 ? 100.0 * (double)(rss1 - rsswarm) / (double)rsswarm : 0;
	long bad = atomic_load(&mismatched) + atomic_load(&lost) + atomic_load(&extra) +
		   atomic_load(&stuck);
	int fail = bad != 0 || (spid && (fd1 > fd0 || gs1 > gs0 || growth > rsstol));
	printf("%-16s %6.2f GiB in %5.0f s (%4.0f MiB/s)  conns %6ld (normal %ld half %ld abort %ld "
	       "stall %ld idle %ld, connect errors %ld)  mismatched %ld lost %ld extra %ld stuck %ld"
	       "  fds %d->%d (max %d)  gs %ld->%ld  rss KiB start %ld warm %ld max %ld end %ld "
	       "(%+.1f%%)  %s\n",
	       label, (double)atomic_load(&verified) / (1 << 30), secs,
	       (double)atomic_load(&verified) / (1 << 20) / secs, atomic_load(&conns),
	       atomic_load(&nnormal), atomic_load(&nhalf), atomic_load(&nabort),
	       atomic_load(&nstall), atomic_load(&nidle), atomic_load(&connerr),
	       atomic_load(&mismatched), atomic_load(&lost), atomic_load(&extra),
	       atomic_load(&stuck), fd0, fd1, fdmax, gs0, gs1, rss0, rsswarm, rssmax, rss1, growth,
	       fail ? "FAIL" : "ok");
	return fail;
}
