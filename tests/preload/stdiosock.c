/*
 * stdiosock.c - stdio on sockets and pipes (issue 12 item 3): a plain
 * pthread program, built without weft.
 *
 *   stdiosock server N [-q]   a thread-per-connection server on fdopen
 *                             (fgets on "r", fputs/fflush on "w" over a
 *                             dup, C's idiom for a socket); N clients each
 *                             send half a line, wait until every server
 *                             is in fgets, then the rest and a 20,000-byte
 *                             line; every byte of the echo is checked
 *   stdiosock getline N [-q]  N readers, getline over fdopen'd pipes and
 *                             socketpairs, lines up to 200,000 bytes
 *                             written in 999-byte pieces (many reads each)
 *   stdiosock fread N [-q]    N readers, fread of exact sizes (1 byte to
 *                             100,000) over sockets, then EOF
 *   stdiosock slowwriter N [-q]  N writers, fprintf + fflush of 2 MB each
 *                             into a socket nobody reads until every
 *                             writer is stuck in it
 *   stdiosock popen N [-q]    N threads, each fgets from popen("read a
 *                             line from a pipe; echo it") and pclose
 *   stdiosock misc            fileno, ftell, fdopen's mode check, setvbuf
 *                             (unbuffered, line), fscanf, ungetc, _unlocked
 *                             calls, flockfile between threads, fclose
 *                             closing the fd and failing when its flush
 *                             does, popen "w"
 *
 *   stdiosock errpipe N       N threads log lines to stderr, a pipe their
 *                             parent drains only once every writer is
 *                             stuck in it: every line whole and once
 *   stdiosock errorder        stderr's calls (fprintf, fputs, perror, warn,
 *                             psignal, error, setvbuf, wide) with stdout on
 *                             one pipe, fd 2 dup2'd over and closed: all
 *                             that came, for comparing with a native run
 *
 * Each case prints "ok CASE" and, unless -q, " max_threads=T
 * waiting_threads=W": the most OS threads (/proc/self/task) seen while it
 * ran, sampled every ms by a thread of its own, and the count once every
 * thread of the case has waited in stdio for 30 samples (an event count,
 * not a sleep that must be long enough; a thread blocked in the kernel
 * is still there then, a spare the runtime lent for a moment has gone).
 * Then it lets them go.  Exits 1 with "FAIL ..." on any difference.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <locale.h>
#include <wchar.h>
#include <err.h>
#include <error.h>
#include <stdarg.h>
#include <stdint.h>

#include "check.h"

/* ---- the thread counter and the gate ---------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long ticks;       /* samples taken */
static int max_threads;  /* most OS threads seen */
static int last;         /* the latest sample */
static int waited;       /* the sample after 30 with every thread waiting */
static bool stop;        /* the sampler ends */
static int entered;      /* threads that reached the point they wait at */
static bool gate;        /* they may go on */

static int count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;
	CHECK(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void *sampler(void *arg)
{
	(void)arg;
	for (;;) {
		int n = count_tasks();
		pthread_mutex_lock(&mu);
		if (n > max_threads)
			max_threads = n;
		last = n;
		ticks++;
		pthread_cond_broadcast(&cv);
		bool s = stop;
		pthread_mutex_unlock(&mu);
		if (s)
			return NULL;
		usleep(1000);
	}
}

/* One more thread is at its waiting point. */
static void arrive(void)
{
	pthread_mutex_lock(&mu);
	entered++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void wait_gate(void)
{
	pthread_mutex_lock(&mu);
	while (!gate)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

/* Wait until n threads arrived, then 30 samples more, then open the gate. */
static void open_gate(int n)
{
	pthread_mutex_lock(&mu);
	while (entered < n)
		pthread_cond_wait(&cv, &mu);
	long t = ticks + 30;
	while (ticks < t)
		pthread_cond_wait(&cv, &mu);
	waited = last;
	gate = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

/* Byte j of line (or record) i. */
static char pat(int i, long j)
{
	return (char)('a' + (i * 7 + j) % 26);
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		CHECK(k > 0);
		p += k;
		n -= (size_t)k;
	}
}

static void read_all(int fd, char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = read(fd, p, n);
		CHECK(k > 0);
		p += k;
		n -= (size_t)k;
	}
}

/* ---- server: fdopen/fgets/fputs/fflush per connection ---------------------------- */

static int port;

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	FILE *f = fdopen(fd, "r"), *o = fdopen(dup(fd), "w");
	CHECK(f && o);
	CHECK(fileno(f) == fd);
	char line[4096];
	arrive(); /* about to wait in fgets for the rest of a line */
	while (fgets(line, sizeof line, f)) {
		CHECK(fputs(line, o) >= 0);
		CHECK(fflush(o) == 0);
	}
	CHECK(feof(f) && !ferror(f));
	CHECK(fclose(o) == 0);
	CHECK(fclose(f) == 0);
	return NULL;
}

static void *client(void *arg)
{
	int id = (int)(intptr_t)arg;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
	char head[64], tail[] = " part two\n";
	int hn = snprintf(head, sizeof head, "client %d part one", id);
	size_t ln = 20000, total = (size_t)hn + strlen(tail) + ln;
	char *out = malloc(total), *in = malloc(total);
	CHECK(out && in);
	memcpy(out, head, (size_t)hn);
	memcpy(out + hn, tail, strlen(tail));
	for (size_t j = 0; j < ln - 1; j++)
		out[(size_t)hn + strlen(tail) + j] = pat(id, (long)j);
	out[total - 1] = '\n';
	write_all(fd, out, (size_t)hn);
	arrive();
	wait_gate();
	write_all(fd, out + hn, total - (size_t)hn);
	read_all(fd, in, total);
	CHECK(memcmp(in, out, total) == 0);
	CHECK(shutdown(fd, SHUT_WR) == 0);
	char c;
	CHECK(read(fd, &c, 1) == 0); /* the server's fclose */
	close(fd);
	free(out);
	free(in);
	return NULL;
}

static int server_case(int n)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(lfd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(listen(lfd, 4096) == 0);
	CHECK(getsockname(lfd, (struct sockaddr *)&a, &len) == 0);
	port = ntohs(a.sin_port);
	pthread_t *c = calloc((size_t)n, sizeof *c), *s = calloc((size_t)n, sizeof *s);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&c[i], NULL, client, (void *)(intptr_t)i) == 0);
	for (int i = 0; i < n; i++) {
		int fd = accept(lfd, NULL, NULL);
		CHECK(fd >= 0);
		CHECK(pthread_create(&s[i], NULL, serve, (void *)(intptr_t)fd) == 0);
	}
	open_gate(2 * n);
	for (int i = 0; i < n; i++) {
		pthread_join(c[i], NULL);
		pthread_join(s[i], NULL);
	}
	close(lfd);
	return 0;
}

/* ---- getline: long lines over pipes and socketpairs ------------------------------- */

static const long lens[] = { 1, 100, 5000, 8191, 8192, 8193, 70000, 200000, 3, 0 };
#define NLENS (sizeof lens / sizeof lens[0])

/* Line i of pair id: lens[i] bytes of pattern, then '\n'. */
static void *line_writer(void *arg)
{
	int fd = (int)(intptr_t)arg >> 8, id = (int)(intptr_t)arg & 0xff;
	char piece[999];
	bool half = false;
	for (size_t i = 0; i < NLENS; i++) {
		long len = lens[i] + 1, off = 0;
		while (off < len) {
			long k = len - off < (long)sizeof piece ? len - off : (long)sizeof piece;
			for (long j = 0; j < k; j++)
				piece[j] = off + j == len - 1 ? '\n' : pat(id + (int)i, off + j);
			write_all(fd, piece, (size_t)k);
			off += k;
			if (!half && i == 3 && off >= 999) {
				half = true; /* the reader waits in getline for the rest */
				arrive();
				wait_gate();
			}
		}
	}
	close(fd);
	return NULL;
}

static void *line_reader(void *arg)
{
	int fd = (int)(intptr_t)arg >> 8, id = (int)(intptr_t)arg & 0xff;
	FILE *f = fdopen(fd, "r");
	CHECK(f);
	char *line = NULL;
	size_t cap = 0;
	for (size_t i = 0; i < NLENS; i++) {
		ssize_t r = getline(&line, &cap, f);
		if (r != lens[i] + 1)
			FAIL("pair %d line %zu: getline %zd, want %ld", id, i, r, lens[i] + 1);
		for (long j = 0; j < lens[i]; j++)
			if (line[j] != pat(id + (int)i, j))
				FAIL("pair %d line %zu byte %ld", id, i, j);
		CHECK(line[lens[i]] == '\n');
	}
	CHECK(getline(&line, &cap, f) == -1 && feof(f) && !ferror(f));
	free(line);
	CHECK(fclose(f) == 0);
	return NULL;
}

/* n pairs of threads, reader(read end | id) and writer(write end | id),
 * over a socket pair each (every other one a pipe when pipes is set),
 * started together at the gate and joined. */
static int pairs_case(int n, bool pipes, void *(*reader)(void *), void *(*writer)(void *))
{
	pthread_t *t = calloc(2 * (size_t)n, sizeof *t);
	for (int i = 0; i < n; i++) {
		int p[2];
		if (pipes && i % 2 == 0)
			CHECK(pipe(p) == 0);
		else
			CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, p) == 0);
		int id = i & 0xff;
		CHECK(pthread_create(&t[2 * i], NULL, reader, (void *)(intptr_t)(p[0] << 8 | id)) == 0);
		CHECK(pthread_create(&t[2 * i + 1], NULL, writer, (void *)(intptr_t)(p[1] << 8 | id)) == 0);
	}
	open_gate(n);
	for (int i = 0; i < 2 * n; i++)
		pthread_join(t[i], NULL);
	free(t);
	return 0;
}

static int getline_case(int n)
{
	return pairs_case(n, true, line_reader, line_writer);
}

/* ---- fread: exact sizes ---------------------------------------------------------- */

static const long recs[] = { 1, 7, 4096, 8192, 8193, 100000, 3, 65536, 2 };
#define NRECS (sizeof recs / sizeof recs[0])

static void *rec_writer(void *arg)
{
	int fd = (int)(intptr_t)arg >> 8, id = (int)(intptr_t)arg & 0xff;
	char piece[333];
	for (size_t i = 0; i < NRECS; i++) {
		for (long off = 0; off < recs[i];) {
			long k = recs[i] - off < (long)sizeof piece ? recs[i] - off : (long)sizeof piece;
			for (long j = 0; j < k; j++)
				piece[j] = pat(id + (int)i, off + j);
			write_all(fd, piece, (size_t)k);
			off += k;
			if (i == 5 && off == 333) { /* the reader waits in fread for the rest */
				arrive();
				wait_gate();
			}
		}
	}
	close(fd);
	return NULL;
}

static void *rec_reader(void *arg)
{
	int fd = (int)(intptr_t)arg >> 8, id = (int)(intptr_t)arg & 0xff;
	FILE *f = fdopen(fd, "r");
	CHECK(f);
	char *buf = malloc(100000);
	CHECK(buf);
	for (size_t i = 0; i < NRECS; i++) {
		size_t r = i % 2 ? fread(buf, (size_t)recs[i], 1, f) * (size_t)recs[i]
				 : fread(buf, 1, (size_t)recs[i], f);
		if (r != (size_t)recs[i])
			FAIL("pair %d record %zu: fread %zu, want %ld", id, i, r, recs[i]);
		for (long j = 0; j < recs[i]; j++)
			if (buf[j] != pat(id + (int)i, j))
				FAIL("pair %d record %zu byte %ld", id, i, j);
	}
	CHECK(fread(buf, 1, 10, f) == 0 && feof(f) && !ferror(f));
	CHECK(fgetc(f) == EOF);
	free(buf);
	CHECK(fclose(f) == 0);
	return NULL;
}

static int fread_case(int n)
{
	return pairs_case(n, false, rec_reader, rec_writer);
}

/* ---- fprintf + fflush into a socket nobody reads yet -------------------------------- */

#define SLOW_LINES 20000 /* ~2 MB per writer */

static int slow_line(char *buf, size_t cap, int id, int i)
{
	return snprintf(buf, cap, "writer %d line %d %.*s\n", id, i, 60 + i % 37,
			"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijkl");
}

static void *slow_writer(void *arg)
{
	int fd = (int)(intptr_t)arg >> 8, id = (int)(intptr_t)arg & 0xff;
	FILE *f = fdopen(fd, "w");
	CHECK(f);
	arrive(); /* the socket fills up: fprintf/fflush wait for the reader */
	for (int i = 0; i < SLOW_LINES; i++) {
		CHECK(fprintf(f, "writer %d line %d %.*s\n", id, i, 60 + i % 37,
			      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijkl") > 0);
		if (i % 100 == 99)
			CHECK(fflush(f) == 0);
	}
	CHECK(fclose(f) == 0);
	return NULL;
}

static void *slow_reader(void *arg)
{
	int fd = (int)(intptr_t)arg >> 8, id = (int)(intptr_t)arg & 0xff;
	wait_gate();
	char want[256], got[256];
	for (int i = 0; i < SLOW_LINES; i++) {
		int k = slow_line(want, sizeof want, id, i);
		read_all(fd, got, (size_t)k);
		if (memcmp(got, want, (size_t)k))
			FAIL("writer %d line %d", id, i);
	}
	CHECK(read(fd, got, 1) == 0);
	close(fd);
	return NULL;
}

static int slowwriter_case(int n)
{
	return pairs_case(n, false, slow_reader, slow_writer);
}

/* ---- popen ------------------------------------------------------------------------- */

static int *popen_w; /* the write end of each child's input pipe */

static FILE **popen_f; /* each reader's popen'd FILE */

static void *popen_reader(void *arg)
{
	int id = (int)(intptr_t)arg;
	FILE *f = popen_f[id];
	char line[128], want[64];
	arrive(); /* fgets waits for the child, which waits for main */
	CHECK(fgets(line, sizeof line, f));
	snprintf(want, sizeof want, "hello %d\n", id);
	if (strcmp(line, want))
		FAIL("popen %d: got %s", id, line);
	CHECK(!fgets(line, sizeof line, f) && feof(f));
	int st = pclose(f);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return NULL;
}

static int popen_case(int n)
{
	pthread_t *t = calloc((size_t)n, sizeof *t);
	popen_w = calloc((size_t)n, sizeof *popen_w);
	popen_f = calloc((size_t)n, sizeof *popen_f);
	/* one child at a time (making children is not what is measured) */
	for (int i = 0; i < n; i++) {
		int p[2];
		char cmd[128];
		CHECK(pipe2(p, O_CLOEXEC) == 0);
		CHECK(fcntl(p[0], F_SETFD, 0) == 0);
		snprintf(cmd, sizeof cmd, "read l </dev/fd/%d; echo \"$l\"", p[0]);
		popen_w[i] = p[1];
		CHECK(popen_f[i] = popen(cmd, "r"));
		CHECK(fileno(popen_f[i]) >= 0);
		close(p[0]); /* the child has it */
	}
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, popen_reader, (void *)(intptr_t)i) == 0);
	open_gate(n);
	for (int i = 0; i < n; i++) {
		char l[64];
		int k = snprintf(l, sizeof l, "hello %d\n", i);
		write_all(popen_w[i], l, (size_t)k);
		close(popen_w[i]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* ---- the rest of the interface ------------------------------------------------------ */

/* errno_now(): check.h */

static FILE *shared;

static void *locker(void *arg)
{
	const char *a = arg;
	for (int i = 0; i < 300; i++) {
		flockfile(shared);
		for (int j = 0; j < 10; j++)
			CHECK(fputc_unlocked(a[0], shared) != EOF);
		CHECK(fputs("-", shared) >= 0);
		for (int j = 0; j < 10; j++)
			CHECK(putc(a[0], shared) != EOF);
		CHECK(fputc('\n', shared) != EOF);
		CHECK(fflush_unlocked(shared) == 0);
		funlockfile(shared);
	}
	return NULL;
}

static int misc_case(void)
{
	int sv[2], p[2];
	char buf[256];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	FILE *f = fdopen(sv[0], "r+");
	CHECK(f && fileno(f) == sv[0]);
	CHECK(ftell(f) == -1 && errno_now() == ESPIPE);

	/* fdopen's mode against the fd's */
	CHECK(pipe(p) == 0);
	CHECK(!fdopen(p[0], "w") && errno_now() == EINVAL);
	CHECK(!fdopen(p[1], "r+") && errno_now() == EINVAL);

	/* unbuffered: each call writes */
	CHECK(setvbuf(f, NULL, _IONBF, 0) == 0);
	CHECK(fputs("abc", f) >= 0);
	read_all(sv[1], buf, 3);
	CHECK(!memcmp(buf, "abc", 3));
	/* line-buffered: up to the newline, the rest at fflush */
	FILE *g = fdopen(dup(sv[0]), "w");
	CHECK(g);
	static char lb[64];
	CHECK(setvbuf(g, lb, _IOLBF, sizeof lb) == 0);
	CHECK(fprintf(g, "x=%d\ny", 42) > 0);
	read_all(sv[1], buf, 5);
	CHECK(!memcmp(buf, "x=42\n", 5));
	CHECK(fflush(g) == 0);
	read_all(sv[1], buf, 1);
	CHECK(buf[0] == 'y');
	CHECK(fclose(g) == 0);

	/* reading: fscanf, getc/ungetc, the _unlocked calls */
	write_all(sv[1], "12 34 hello\nAB", 14);
	int x, y;
	char w[16];
	CHECK(fscanf(f, "%d %d %15s", &x, &y, w) == 3 && x == 12 && y == 34 && !strcmp(w, "hello"));
	CHECK(getc(f) == '\n');
	CHECK(fgetc_unlocked(f) == 'A');
	CHECK(ungetc('Z', f) == 'Z');
	CHECK(getc_unlocked(f) == 'Z');
	CHECK(fgetc(f) == 'B');
	CHECK(shutdown(sv[1], SHUT_WR) == 0);
	CHECK(getc(f) == EOF && feof(f));
	clearerr(f);

	/* flockfile keeps two threads' lines whole */
	shared = f;
	pthread_t t1, t2;
	CHECK(pthread_create(&t1, NULL, locker, "a") == 0);
	CHECK(pthread_create(&t2, NULL, locker, "b") == 0);
	FILE *in = fdopen(sv[1], "r");
	CHECK(in);
	for (int i = 0; i < 600; i++) {
		CHECK(fgets(buf, sizeof buf, in));
		CHECK(strlen(buf) == 22);
		for (int j = 0; j < 21; j++)
			CHECK(j == 10 ? buf[j] == '-' : buf[j] == buf[0]);
	}
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);

	/* fclose closes the fd */
	CHECK(fclose(f) == 0); /* the last reference to sv[0]: the peer sees EOF */
	CHECK(!fgets(buf, sizeof buf, in) && feof(in));
	CHECK(fclose(in) == 0);

	/* a flush that fails at fclose makes fclose fail */
	signal(SIGPIPE, SIG_IGN);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	FILE *dead = fdopen(sv[0], "w");
	CHECK(dead);
	close(sv[1]);
	CHECK(fputs("lost", dead) >= 0);
	CHECK(fclose(dead) == EOF && errno_now() == EPIPE);

	/* popen "w": all of it reaches the child */
	char path[] = "/tmp/stdiosock.XXXXXX", cmd[64];
	int tfd = mkstemp(path);
	CHECK(tfd >= 0);
	close(tfd);
	snprintf(cmd, sizeof cmd, "cat > %s", path);
	FILE *pw = popen(cmd, "w");
	CHECK(pw);
	for (int i = 0; i < 20000; i++)
		CHECK(fprintf(pw, "%d\n", i) > 0);
	int st = pclose(pw);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	FILE *rf = fopen(path, "r");
	CHECK(rf);
	for (int i = 0; i < 20000; i++) {
		int v;
		CHECK(fscanf(rf, "%d", &v) == 1 && v == i);
	}
	fclose(rf);
	unlink(path);
	return 0;
}

/* ---- stdin and stdout over pipes (the std streams the shim replaces) ------------------ */

/* A case that runs on a thread of its own (a G under the shim), not main. */
static int in_thread(void *(*fn)(void *))
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, fn, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	return 0;
}

/* OS threads of this process now in system call nr with fd for its first
 * argument (/proc/self/task/T/syscall: "nr arg1 ...", or "running"). */
static int in_syscall(long nr, long fd)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;
	CHECK(d);
	while ((e = readdir(d))) {
		char path[300], buf[256];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/syscall", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; /* the thread ended */
		long a, b;
		if (fgets(buf, sizeof buf, f) && sscanf(buf, "%ld %lx", &a, &b) == 2 && a == nr &&
		    b == fd)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

#define STD_IN_LINES 300    /* lines main's parent writes to the child's stdin */
#define STD_OUT_LINES 2000  /* lines of 1,000 bytes the child prints */
#define STD_WORKERS 20      /* threads that work while those two wait */

/* Line i of the child's stdin: (i * 37) % 5000 bytes, then '\n'. */
static size_t std_in_len(int i)
{
	return (size_t)(i * 37) % 5000;
}

static void *std_reader(void *arg)
{
	(void)arg;
	char *line = NULL;
	size_t cap = 0;
	arrive(); /* about to wait in getline(stdin) */
	for (int i = 0; i < STD_IN_LINES; i++) {
		ssize_t k = getline(&line, &cap, stdin);
		size_t n = std_in_len(i);
		CHECK(k == (ssize_t)n + 1 && line[n] == '\n');
		for (size_t j = 0; j < n; j++)
			CHECK(line[j] == pat(i, (long)j));
	}
	CHECK(getline(&line, &cap, stdin) == -1 && feof(stdin));
	free(line);
	return NULL;
}

static void *std_writer(void *arg)
{
	(void)arg;
	char row[1001];
	arrive(); /* about to print 2 MB that nobody reads yet */
	for (int i = 0; i < STD_OUT_LINES; i++) {
		for (int j = 0; j < 1000; j++)
			row[j] = pat(i, j);
		row[1000] = 0;
		CHECK(printf("%s\n", row) == 1001);
	}
	CHECK(fflush(stdout) == 0);
	return NULL;
}

/* Token passing between two threads over pipes: the scheduler's work. */
static void *std_worker(void *arg)
{
	int *p = arg; /* p[0] read, p[1] write */
	char c;
	for (int i = 0; i < 200; i++) {
		CHECK(read(p[0], &c, 1) == 1);
		CHECK(write(p[1], &c, 1) == 1);
	}
	return NULL;
}

/* The child, stdin and stdout pipes, fd 3 a pipe to its parent: one
 * thread reads stdin, one prints 2 MB to stdout, while neither has any
 * to read or room to write, STD_WORKERS threads pass tokens; then "inread=R
 * inwrite=W waiting_threads=T" on fd 3 - the OS threads blocked in
 * read(0) and write(1) (under the shim: none, the two park) - and they
 * go on once the parent writes and reads. */
static int stdchild_case(void)
{
	pthread_t r, w, wk[STD_WORKERS];
	int pp[STD_WORKERS][2][2];
	CHECK(pthread_create(&r, NULL, std_reader, NULL) == 0);
	CHECK(pthread_create(&w, NULL, std_writer, NULL) == 0);
	open_gate(2); /* both wait, 30 samples on */
	int inread = in_syscall(0, 0), inwrite = in_syscall(1, 1);
	int waiting = waited;
	for (int i = 0; i < STD_WORKERS; i++) {
		CHECK(pipe(pp[i][0]) == 0 && pipe(pp[i][1]) == 0);
		int *a = malloc(2 * sizeof(int)), *b = malloc(2 * sizeof(int));
		CHECK(a && b);
		a[0] = pp[i][0][0], a[1] = pp[i][1][1]; /* reads ring 0, writes ring 1 */
		b[0] = pp[i][1][0], b[1] = pp[i][0][1];
		CHECK(pthread_create(&wk[i], NULL, std_worker, a) == 0);
		CHECK(write(pp[i][0][1], "t", 1) == 1);
		pthread_t t;
		CHECK(pthread_create(&t, NULL, std_worker, b) == 0);
		CHECK(pthread_join(t, NULL) == 0);
	}
	for (int i = 0; i < STD_WORKERS; i++)
		CHECK(pthread_join(wk[i], NULL) == 0);
	/* the workers are done while stdin and stdout still wait */
	CHECK(in_syscall(0, 0) == inread);
	char msg[128];
	int k = snprintf(msg, sizeof msg, "inread=%d inwrite=%d waiting_threads=%d\n", inread, inwrite,
			 waiting);
	write_all(3, msg, (size_t)k);
	close(3);
	CHECK(pthread_join(r, NULL) == 0);
	CHECK(pthread_join(w, NULL) == 0);
	return 0;
}

static int std_inw; /* the child's stdin, written by std_feed */

static void *std_feed(void *arg)
{
	(void)arg;
	char *line = malloc(5001);
	CHECK(line);
	for (int i = 0; i < STD_IN_LINES; i++) {
		size_t n = std_in_len(i);
		for (size_t j = 0; j < n; j++)
			line[j] = pat(i, (long)j);
		line[n] = '\n';
		write_all(std_inw, line, n + 1);
	}
	close(std_inw);
	free(line);
	return NULL;
}

/* The parent: runs this program's "stdchild" with pipes for stdin, stdout
 * and fd 3 (under the shim the child is under it too), reads its report,
 * then feeds its stdin and checks every byte of its stdout. */
static int std_case(void)
{
	int in[2], out[2], ctl[2]; /* close-on-exec: the child keeps only 0, 1, 3 */
	CHECK(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 && pipe2(ctl, O_CLOEXEC) == 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(ctl[1], 3) < 0)
			_exit(126);
		execl("/proc/self/exe", "stdiosock", "stdchild", "1", "-q", (char *)NULL);
		_exit(127);
	}
	close(in[0]), close(out[1]), close(ctl[1]);
	char rep[128];
	size_t got = 0;
	ssize_t k;
	while (got < sizeof rep - 1 && (k = read(ctl[0], rep + got, sizeof rep - 1 - got)) > 0)
		got += (size_t)k;
	rep[got] = 0;
	close(ctl[0]);
	CHECK(strchr(rep, '\n'));
	std_inw = in[1];
	pthread_t t;
	CHECK(pthread_create(&t, NULL, std_feed, NULL) == 0);
	char row[1001];
	for (int i = 0; i < STD_OUT_LINES; i++) {
		read_all(out[0], row, sizeof row);
		for (int j = 0; j < 1000; j++)
			CHECK(row[j] == pat(i, j));
		CHECK(row[1000] == '\n');
	}
	char c;
	CHECK(read(out[0], &c, 1) == 0);
	close(out[0]);
	CHECK(pthread_join(t, NULL) == 0);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("%s", rep); /* the child's figures, then "ok std" */
	return 0;
}

/* ---- stdout's buffering and order, as natively ------------------------------------------
 * Printed from a thread: stdio calls of every kind mixed with the
 * program's own write(1, ...), in each buffering mode, and 3,000 lines
 * across many buffer flushes: the test compares every byte with a native
 * run (a fully buffered pipe flushes at 4,096 bytes; line buffering or
 * another size would move the W lines). */
static void *order_thread(void *arg)
{
	(void)arg;
	printf("fwide %d\n", fwide(stdout, 0));
	printf("a %d\n", 1);
	write(1, "W1\n", 3);
	puts("b");
	putchar('c');
	putchar_unlocked('\n');
	fputs("d\n", stdout);
	fwrite("e\n", 1, 2, stdout);
	write(1, "W2\n", 3);
	fflush(stdout);
	write(1, "W3\n", 3);
	for (int i = 0; i < 3000; i++) {
		printf("line %d %.*s\n", i, i % 50, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
		if (i % 97 == 0)
			write(1, "W\n", 2);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("f\n");
	write(1, "W4\n", 3);
	printf("g");
	write(1, "W5\n", 3);
	printf("\n");
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("h");
	write(1, "W6\n", 3);
	fprintf(stderr, "to stderr %d\n", 7);
	printf("last, flushed by exit\n");
	return NULL;
}

/* The same with wide output on stdout (fwide, wprintf, putwchar). */
static void *wideout_thread(void *arg)
{
	(void)arg;
	CHECK(setlocale(LC_ALL, "C.UTF-8"));
	write(1, "W0\n", 3);
	CHECK(fwide(stdout, 1) > 0);
	for (int i = 0; i < 2000; i++) {
		wprintf(L"ligne %d \u00e9t\u00e9 %ls\n", i, L"\u20ac\u00fc");
		if (i % 101 == 0)
			write(1, "W\n", 2);
	}
	putwchar(L'\u00e9');
	putwchar(L'\n');
	CHECK(fwide(stdout, 0) > 0);
	return NULL;
}

/* ---- stderr over a pipe a slow reader drains ------------------------------------------
 * The program logs from many threads to stderr, which a supervisor (here
 * the parent) reads slowly: every writer soon finds the pipe full. */

#define ERR_LINES 60 /* lines per writer, up to ~3,000 bytes each */

/* Line i of writer id: "T<id> L<i> " then (id * 131 + i * 977) % 3000
 * pattern bytes and '\n' - at most PIPE_BUF, so one write natively. */
static int err_line(char *buf, size_t cap, int id, int i)
{
	int k = snprintf(buf, cap, "T%03d L%04d ", id, i);
	int n = (id * 131 + i * 977) % 3000;
	for (int j = 0; j < n; j++)
		buf[k + j] = pat(id + i, j);
	buf[k + n] = '\n';
	buf[k + n + 1] = 0;
	return k + n + 1;
}

static int err_vprint(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfprintf(stderr, fmt, ap);
	va_end(ap);
	return r;
}

static void *err_writer(void *arg)
{
	int id = (int)(intptr_t)arg;
	char line[4096];
	arrive(); /* about to log into a pipe that fills and is not read yet */
	for (int i = 0; i < ERR_LINES; i++) {
		int k = err_line(line, sizeof line, id, i);
		switch (i % 4) { /* one write per call natively, each way */
		case 0:
			CHECK(fprintf(stderr, "%s", line) == k);
			break;
		case 1:
			CHECK(fputs(line, stderr) >= 0);
			break;
		case 2:
			CHECK(fwrite(line, 1, (size_t)k, stderr) == (size_t)k);
			break;
		default:
			CHECK(err_vprint("T%03d %.*s", id, k - 5, line + 5) == k);
		}
	}
	return NULL;
}

/* The child: stderr a pipe nobody reads yet, fd 3 a pipe to its parent;
 * n threads log ERR_LINES lines each; once all are stuck, "inwrite=W
 * waiting_threads=T" on fd 3 (natively W = n: an OS thread blocked in
 * write(2) per writer; under the shim none, they park). */
static int errchild_case(int n)
{
	pthread_t *t = calloc((size_t)n, sizeof *t);
	CHECK(t);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, err_writer, (void *)(intptr_t)i) == 0);
	open_gate(n);
	char msg[128];
	int k = snprintf(msg, sizeof msg, "inwrite=%d waiting_threads=%d\n", in_syscall(1, 2), waited);
	write_all(3, msg, (size_t)k);
	close(3);
	for (int i = 0; i < n; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	free(t);
	return 0;
}

/* The parent: runs "errchild n" with stderr and fd 3 pipes, reads its
 * report, then drains its stderr 509 bytes at a time and checks it: every
 * line whole (in any order between writers, in order for each) and every
 * byte there once. */
static int errpipe_case(int n)
{
	int err[2], ctl[2];
	CHECK(pipe2(err, O_CLOEXEC) == 0 && pipe2(ctl, O_CLOEXEC) == 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (dup2(err[1], 2) < 0 || dup2(ctl[1], 3) < 0)
			_exit(126);
		char ns[16];
		snprintf(ns, sizeof ns, "%d", n);
		execl("/proc/self/exe", "stdiosock", "errchild", ns, "-q", (char *)NULL);
		_exit(127);
	}
	close(err[1]), close(ctl[1]);
	char rep[128];
	size_t got = 0;
	ssize_t k;
	while (got < sizeof rep - 1 && (k = read(ctl[0], rep + got, sizeof rep - 1 - got)) > 0)
		got += (size_t)k;
	rep[got] = 0;
	close(ctl[0]);
	CHECK(strchr(rep, '\n'));
	size_t cap = (size_t)n * ERR_LINES * 3100, len = 0;
	char *all = malloc(cap + 1);
	CHECK(all);
	while ((k = read(err[0], all + len, cap - len < 509 ? cap - len : 509)) > 0)
		len += (size_t)k;
	CHECK(k == 0);
	all[len] = 0;
	close(err[0]);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	int *next = calloc((size_t)n, sizeof *next); /* each writer's next line */
	char want[4096];
	CHECK(next);
	for (char *p = all; p < all + len;) {
		int id, i;
		if (sscanf(p, "T%d L%d ", &id, &i) != 2 || id < 0 || id >= n)
			FAIL("stderr at byte %zu: %.40s", (size_t)(p - all), p);
		if (i != next[id])
			FAIL("writer %d: line %d where %d was due", id, i, next[id]);
		int w = err_line(want, sizeof want, id, i);
		if ((size_t)w > len - (size_t)(p - all) || memcmp(p, want, (size_t)w))
			FAIL("writer %d line %d not whole: %.60s", id, i, p);
		next[id]++;
		p += w;
	}
	for (int id = 0; id < n; id++)
		if (next[id] != ERR_LINES)
			FAIL("writer %d: %d lines of %d", id, next[id], ERR_LINES);
	free(next);
	free(all);
	printf("%s", rep); /* the child's figures, then "ok errpipe" */
	return 0;
}

/* ---- stderr's calls, order with stdout, and fd 2 changed under it ----------------------
 * Run with stdout and stderr on one pipe (2>&1), from a thread; the
 * parent copies what came to its stdout, which the test compares byte
 * for byte with a native run. */
static void *errorder_thread(void *arg)
{
	(void)arg;
	printf("fwide %d unbuffered %d\n", fwide(stderr, 0), stderr->_flags & 2);
	fprintf(stderr, "e1 %d\n", 1);
	printf("o1\n"); /* buffered: comes at the flush */
	write(2, "W1\n", 3);
	fputs("e2\n", stderr);
	fputc('e', stderr);
	putc('3', stderr);
	fwrite("\n", 1, 1, stderr);
	err_vprint("e4 %s\n", "vfprintf");
	errno = ENOENT;
	perror("perror");
	perror(NULL);
	errno = EACCES;
	warn("warn %d", 5);
	warnx("warnx %d", 6);
	psignal(SIGTERM, "psignal");
	error(0, EPIPE, "error %d", 7); /* flushes stdout first */
	printf("o2 ");
	fflush(stdout);
	/* other buffering, set by the program */
	setvbuf(stderr, NULL, _IOLBF, 0);
	fprintf(stderr, "lb-a ");
	write(2, "W2\n", 3);
	fprintf(stderr, "lb-b\n");
	static char buf[64];
	setvbuf(stderr, buf, _IOFBF, sizeof buf);
	for (int i = 0; i < 20; i++)
		fprintf(stderr, "fb %d\n", i);
	write(2, "W3\n", 3);
	fflush(stderr);
	setvbuf(stderr, NULL, _IONBF, 0);
	fprintf(stderr, "nb %s\n", "again");
	/* fd 2 made a file, then closed: as natively */
	char path[] = "/tmp/stdiosock-errXXXXXX";
	int fd = mkstemp(path), save = dup(2);
	CHECK(fd >= 0 && save >= 0);
	CHECK(dup2(fd, 2) == 2);
	fprintf(stderr, "into the file %d\n", 8);
	perror("perror to the file");
	char fb[256] = { 0 };
	CHECK(pread(fd, fb, sizeof fb - 1, 0) > 0);
	printf("file: %s", fb);
	close(2);
	errno = 0;
	int r = fprintf(stderr, "to nowhere\n");
	printf("closed: r=%d errno=%d ferror=%d\n", r, errno, ferror(stderr) != 0);
	clearerr(stderr);
	CHECK(dup2(save, 2) == 2);
	close(save), close(fd), unlink(path);
	fprintf(stderr, "back %d\n", 9);
	printf("o3\n");
	return NULL;
}

/* A fresh stderr made wide: wide calls, perror and psignal on it. */
static void *errwide_thread(void *arg)
{
	(void)arg;
	CHECK(setlocale(LC_ALL, "C.UTF-8"));
	printf("fwide %d\n", fwide(stderr, 0));
	fflush(stdout);
	CHECK(fwprintf(stderr, L"wide %d \u00e9t\u00e9\n", 10) > 0);
	printf("fwide %d byte call %d\n", fwide(stderr, 0), fprintf(stderr, "refused\n"));
	fflush(stdout);
	CHECK(fputws(L"wide again \u20ac\n", stderr) >= 0);
	CHECK(fputwc(L'\u00fc', stderr) == L'\u00fc' && fputwc(L'\n', stderr) == L'\n');
	errno = ENOENT;
	perror("wide perror");
	psignal(SIGINT, "wide psignal");
	printf("o4\n");
	return NULL;
}

/* A fresh stderr's first call perror: glibc tries a FILE of its own over
 * a dup of fd 2 (perror must not orient stderr) - "w+" on a pipe's write
 * end fails, so it writes through stderr. */
static void *errperror_thread(void *arg)
{
	(void)arg;
	errno = ENOENT;
	perror("first perror");
	printf("fwide %d\n", fwide(stderr, 0));
	return NULL;
}

static void errorder_one(const char *what);

/* The parent: this program's "errorderchild WHAT" with fd 1 and 2 one
 * pipe, for WHAT bytes, wide, perror; what came, on stdout. */
static int errorder_case(void)
{
	for (int i = 0; i < 3; i++)
		errorder_one((const char *[]){ "bytes", "wide", "perror" }[i]);
	return 0;
}

static void errorder_one(const char *what)
{
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
			_exit(126);
		execl("/proc/self/exe", "stdiosock", "errorderchild", what, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[4096];
	ssize_t k;
	while ((k = read(p[0], buf, sizeof buf)) > 0)
		write_all(1, buf, (size_t)k);
	CHECK(k == 0);
	close(p[0]);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	printf("child %s: exited %d status %d\n", what, WIFEXITED(st), WEXITSTATUS(st));
}

/* ---- fopen of a FIFO by name -------------------------------------------------------- */

static char fifodir[64];
static int *fifo_w; /* each FIFO's write end, opened O_RDWR first (no wait) */

static void fifo_path(char *buf, size_t cap, int i)
{
	snprintf(buf, cap, "%s/f%d", fifodir, i);
}

static void *fifo_reader(void *arg)
{
	int id = (int)(intptr_t)arg;
	char path[96], line[256], want[256];
	fifo_path(path, sizeof path, id);
	FILE *f = fopen(path, "r");
	CHECK(f && fileno(f) >= 0);
	arrive(); /* about to wait in fgets */
	for (int i = 0; i < 20; i++) {
		snprintf(want, sizeof want, "fifo %d line %d %.*s\n", id, i, i * 7, fifodir);
		CHECK(fgets(line, sizeof line, f) && !strcmp(line, want));
	}
	CHECK(!fgets(line, sizeof line, f) && feof(f));
	CHECK(fclose(f) == 0);
	return NULL;
}

static int fifo_case(int n)
{
	strcpy(fifodir, "/tmp/weft-fifo.XXXXXX");
	CHECK(mkdtemp(fifodir));
	fifo_w = calloc((size_t)n, sizeof *fifo_w);
	pthread_t *t = calloc((size_t)n, sizeof *t);
	CHECK(fifo_w && t);
	for (int i = 0; i < n; i++) {
		char path[96];
		fifo_path(path, sizeof path, i);
		CHECK(mkfifo(path, 0600) == 0);
		CHECK((fifo_w[i] = open(path, O_RDWR)) >= 0);
		CHECK(pthread_create(&t[i], NULL, fifo_reader, (void *)(intptr_t)i) == 0);
	}
	open_gate(n);
	for (int i = 0; i < n; i++) {
		char line[256];
		for (int j = 0; j < 20; j++) {
			int k = snprintf(line, sizeof line, "fifo %d line %d %.*s\n", i, j, j * 7, fifodir);
			write_all(fifo_w[i], line, (size_t)k);
		}
		close(fifo_w[i]); /* the last writer: the reader sees EOF */
	}
	for (int i = 0; i < n; i++) {
		char path[96];
		CHECK(pthread_join(t[i], NULL) == 0);
		fifo_path(path, sizeof path, i);
		unlink(path);
	}
	rmdir(fifodir);
	return 0;
}

/* ---- freopen and wide characters on FILEs over sockets ------------------------------ */

/* The whole of path, NUL-terminated, in buf. */
static void slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	size_t got = 0;
	ssize_t k;
	while (got < cap - 1 && (k = read(fd, buf + got, cap - 1 - got)) > 0)
		got += (size_t)k;
	buf[got] = 0;
	close(fd);
}

static void *reopen_thread(void *arg)
{
	(void)arg;
	char path[] = "/tmp/weft-reopen.XXXXXX", buf[256];
	CHECK(setlocale(LC_ALL, "C.UTF-8"));
	int tfd = mkstemp(path);
	CHECK(tfd >= 0);
	close(tfd);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);

	/* freopen flushes to the socket, then the fd is the file's */
	FILE *f = fdopen(sv[0], "w");
	CHECK(f && fputs("before\n", f) >= 0);
	CHECK(freopen(path, "w", f) == f);
	CHECK(read(sv[1], buf, sizeof buf) == 7 && !memcmp(buf, "before\n", 7));
	CHECK(fileno(f) == sv[0]);
	CHECK(fwide(f, 0) == 0);
	CHECK(fputs("in the file\n", f) >= 0);
	CHECK(fclose(f) == 0);
	slurp(path, buf, sizeof buf);
	CHECK(!strcmp(buf, "in the file\n"));

	/* wide after freopen */
	close(sv[1]);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	f = fdopen(sv[0], "w");
	CHECK(f && freopen(path, "w", f) == f);
	CHECK(fwide(f, 1) > 0);
	CHECK(fputws(L"wide \u00e9\n", f) >= 0);
	CHECK(fclose(f) == 0);
	slurp(path, buf, sizeof buf);
	CHECK(!strcmp(buf, "wide \xc3\xa9\n"));

	/* many, for a leak to show in a long run */
	for (int i = 0; i < 200; i++) {
		int p[2];
		CHECK(pipe(p) == 0);
		FILE *g = fdopen(p[1], "w");
		CHECK(g && freopen("/dev/null", "w", g) == g);
		CHECK(fclose(g) == 0);
		close(p[0]);
	}

	/* stdout freopen'd to a file, closed, used after: in a child */
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (freopen(path, "w", stdout) != stdout)
			_exit(3);
		printf("child to file\n");
		if (fclose(stdout) != 0)
			_exit(4);
		printf("after fclose\n"); /* goes nowhere, harms nothing */
		exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	slurp(path, buf, sizeof buf);
	CHECK(!strcmp(buf, "child to file\n"));
	unlink(path);
	close(sv[1]);
	return NULL;
}

static void *wide_thread(void *arg)
{
	(void)arg;
	CHECK(setlocale(LC_ALL, "C.UTF-8"));
	int sv[2];
	wchar_t wb[64];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	FILE *w = fdopen(sv[0], "w"), *r = fdopen(sv[1], "r");
	CHECK(w && r);
	CHECK(fwide(w, 0) == 0 && fwide(r, 0) == 0);
	CHECK(fputws(L"h\u00e9llo w\u00f6rld\n", w) >= 0);
	CHECK(fputwc(L'\u20ac', w) == L'\u20ac');
	CHECK(fwprintf(w, L"%d %ls\n", 42, L"\u00fc") > 0);
	CHECK(fflush(w) == 0);
	CHECK(fwide(w, 0) > 0);
	CHECK(fgetws(wb, 64, r) && !wcscmp(wb, L"h\u00e9llo w\u00f6rld\n"));
	CHECK(fgetwc(r) == L'\u20ac');
	int v;
	CHECK(fwscanf(r, L"%d %ls", &v, wb) == 2 && v == 42 && !wcscmp(wb, L"\u00fc"));
	CHECK(fgetwc(r) == L'\n');
	CHECK(ungetwc(L'x', r) == L'x' && fgetwc(r) == L'x');
	/* a byte stream stays one */
	FILE *b = fdopen(dup(sv[0]), "w");
	CHECK(b && fputs("x", b) >= 0 && fwide(b, 1) < 0);
	CHECK(fputwc(L'y', b) == WEOF);
	CHECK(fclose(b) == 0);
	CHECK(fclose(w) == 0); /* EOF for r, after b's x */
	CHECK(fgetwc(r) == L'x' && fgetwc(r) == WEOF && feof(r));
	CHECK(fclose(r) == 0);
	/* popen's FILEs are byte-only, as glibc's */
	FILE *p = popen("cat >/dev/null; exit 5", "w");
	CHECK(p && fwide(p, 1) < 0 && fputws(L"\u00e9\n", p) < 0 && fputs("b\n", p) >= 0);
	int st = pclose(p);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 5);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		goto usage;
	const char *c = argv[1];
	int n = argc > 2 ? atoi(argv[2]) : 0;
	bool quiet = argc > 3 && !strcmp(argv[3], "-q");
	pthread_t s;
	CHECK(pthread_create(&s, NULL, sampler, NULL) == 0);
	int r;
	if (!strcmp(c, "server") && n > 0)
		r = server_case(n);
	else if (!strcmp(c, "getline") && n > 0 && n <= 255)
		r = getline_case(n);
	else if (!strcmp(c, "fread") && n > 0 && n <= 255)
		r = fread_case(n);
	else if (!strcmp(c, "slowwriter") && n > 0 && n <= 255)
		r = slowwriter_case(n);
	else if (!strcmp(c, "popen") && n > 0)
		r = popen_case(n);
	else if (!strcmp(c, "misc"))
		r = misc_case();
	else if (!strcmp(c, "std"))
		r = std_case();
	else if (!strcmp(c, "stdchild"))
		r = stdchild_case();
	else if (!strcmp(c, "order"))
		r = in_thread(order_thread);
	else if (!strcmp(c, "wideout"))
		r = in_thread(wideout_thread);
	else if (!strcmp(c, "errpipe") && n > 0)
		r = errpipe_case(n);
	else if (!strcmp(c, "errchild") && n > 0)
		r = errchild_case(n);
	else if (!strcmp(c, "errorder"))
		r = errorder_case();
	else if (!strcmp(c, "errorderchild") && argc > 2)
		r = in_thread(!strcmp(argv[2], "wide")	   ? errwide_thread
			      : !strcmp(argv[2], "perror") ? errperror_thread
							   : errorder_thread);
	else if (!strcmp(c, "fifo") && n > 0)
		r = fifo_case(n);
	else if (!strcmp(c, "reopen"))
		r = in_thread(reopen_thread);
	else if (!strcmp(c, "wide"))
		r = in_thread(wide_thread);
	else
		goto usage;
	pthread_mutex_lock(&mu);
	stop = true;
	pthread_mutex_unlock(&mu);
	pthread_join(s, NULL);
	if (!strcmp(c, "order") || !strcmp(c, "wideout") || !strcmp(c, "errorderchild") ||
	    !strcmp(c, "errorder"))
		return r; /* their output is compared whole */
	if (!strcmp(c, "stdchild") || !strcmp(c, "errchild"))
		return r; /* its stdout is its parent's to check */
	if (quiet)
		printf("ok %s\n", c);
	else
		printf("ok %s max_threads=%d waiting_threads=%d\n", c, max_threads, waited);
	return r;
usage:
	fprintf(stderr, "usage: stdiosock server|getline|fread|slowwriter|popen|fifo N [-q] | "
			"misc|std|order|wideout|reopen|wide|errorder | errpipe N\n");
	return 2;
}
