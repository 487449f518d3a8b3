/*
 * fileio -- regular-file I/O from many Gs: is entersyscall (what weft's
 * hooks do) or a small blocking thread pool the better way to keep the
 * other Gs running while a G waits on a file?
 *
 *   fileio MODE WORKLOAD [GS] [SECS] [DIR]
 *     MODE      syscall  pread/fdatasync as the hooks run them: under
 *                        entersyscall, sysmon hands the P on after 20 us
 *               pool     the G hands the call to one of 4 plain threads
 *                        over a weft channel and parks for the answer
 *               inline   raw syscall(2), no hook: the M just blocks
 *     WORKLOAD  read     4 KiB preads at random offsets of a 64 MiB
 *                        file in the page cache
 *               sync     each G: 4 KiB pwrite + fdatasync of its own file
 *     GS        green threads (default 64), SECS run time (default 2),
 *     DIR       where the files go (default /var/tmp)
 *
 * Prints: mode=M workload=W gs=N ops=N ops_per_sec=R cpu_us_per_op=C
 *         threads=T handoffs=H
 * (threads: OS threads the runtime made, + the pool's; handoffs: Ps
 * sysmon took from Ms blocked in a call.)  Run with WEFT_MAXPROCS=1.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

#define FILE_SIZE (64 << 20)
#define BLOCK 4096
#define POOL 4

enum { M_SYSCALL, M_POOL, M_INLINE };
enum { W_READ, W_SYNC };

static int mode, workload, ngs = 64;
static double secs = 2;
static const char *dir = "/var/tmp";
static int readfd;
static _Atomic int stop;
static _Atomic long ops;
static weft_chan_t *jobs;

struct job {
	int op; /* W_READ or W_SYNC */
	int fd;
	char *buf;
	off_t off;
	long result;
	weft_chan_t *reply;
};

static long do_op(int op, int fd, char *buf, off_t off)
{
	if (op == W_READ)
		return pread(fd, buf, BLOCK, off);
	if (pwrite(fd, buf, BLOCK, 0) != BLOCK)
		return -1;
	return fdatasync(fd);
}

static long do_raw(int op, int fd, char *buf, off_t off)
{
	if (op == W_READ)
		return syscall(SYS_pread64, fd, buf, BLOCK, off);
	if (syscall(SYS_pwrite64, fd, buf, BLOCK, 0) != BLOCK)
		return -1;
	return syscall(SYS_fdatasync, fd);
}

static void *pool_thread(void *arg)
{
	(void)arg;
	struct job *j;
	while (weft_chan_recv(jobs, &j) == 1) {
		j->result = do_op(j->op, j->fd, j->buf, j->off);
		weft_chan_send(j->reply, &j);
	}
	return NULL;
}

static long run_op(struct job *j)
{
	switch (mode) {
	case M_SYSCALL:
		return do_op(j->op, j->fd, j->buf, j->off);
	case M_INLINE:
		return do_raw(j->op, j->fd, j->buf, j->off);
	default:
		weft_chan_send(jobs, &j);
		weft_chan_recv(j->reply, &j);
		return j->result;
	}
}

static void worker(void *arg)
{
	weft_wg_t *wg = arg;
	char buf[BLOCK];
	memset(buf, 'w', sizeof buf);
	struct job j = { .op = workload, .buf = buf, .reply = weft_chan_make(sizeof(void *), 1) };
	char path[256];
	if (workload == W_SYNC) {
		snprintf(path, sizeof path, "%s/weft-fileio-%d-%p", dir, (int)getpid(), (void *)&j);
		j.fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	} else {
		j.fd = readfd;
	}
	uint64_t x = (uintptr_t)&j | 1;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		j.off = (off_t)(x % (FILE_SIZE / BLOCK)) * BLOCK;
		if (run_op(&j) < 0) {
			perror("fileio: op");
			exit(1);
		}
		atomic_fetch_add_explicit(&ops, 1, memory_order_relaxed);
	}
	if (workload == W_SYNC) {
		close(j.fd);
		unlink(path);
	}
	weft_chan_free(j.reply);
	weft_wg_done(wg);
}

static double cpu_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void make_read_file(void)
{
	char path[256];
	snprintf(path, sizeof path, "%s/weft-fileio-%d", dir, (int)getpid());
	readfd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	unlink(path);
	char *b = malloc(1 << 20);
	memset(b, 'r', 1 << 20);
	for (int i = 0; i < FILE_SIZE >> 20; i++)
		if (write(readfd, b, 1 << 20) != 1 << 20) {
			perror("fileio: write");
			exit(1);
		}
	for (off_t o = 0; o < FILE_SIZE; o += 1 << 20) /* into the page cache */
		if (pread(readfd, b, 1 << 20, o) != 1 << 20)
			exit(1);
	free(b);
}

/* A plain thread ends the run: no G timer, which Gs that never yield
 * (inline mode) could starve. */
static void *stopper(void *arg)
{
	(void)arg;
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, 1);
	return NULL;
}

static int bench(int argc, char **argv)
{
	(void)argc, (void)argv;
	if (workload == W_READ)
		make_read_file();
	pthread_t pool[POOL];
	if (mode == M_POOL) {
		jobs = weft_chan_make(sizeof(void *), 1024);
		for (int i = 0; i < POOL; i++)
			pthread_create(&pool[i], NULL, pool_thread, NULL);
	}
	weft_wg_t wg = WEFT_WG_INIT;
	weft_wg_add(&wg, ngs);
	double c0 = cpu_now(), t0 = wall_now();
	pthread_t timer;
	pthread_create(&timer, NULL, stopper, NULL);
	for (int i = 0; i < ngs; i++)
		weft_go(worker, &wg);
	weft_wg_wait(&wg);
	pthread_join(timer, NULL);
	double c1 = cpu_now(), t1 = wall_now();
	weft_stats_t st;
	weft_stats(&st);
	long n = atomic_load(&ops);
	static const char *mn[] = { "syscall", "pool", "inline" };
	static const char *wn[] = { "read", "sync" };
	printf("mode=%s workload=%s gs=%d ops=%ld ops_per_sec=%.0f cpu_us_per_op=%.2f "
	       "threads=%d handoffs=%lld\n",
	       mn[mode], wn[workload], ngs, n, n / (t1 - t0), (c1 - c0) * 1e6 / (n ? n : 1),
	       st.threads + (mode == M_POOL ? POOL : 0), (long long)st.syscall_handoffs);
	if (mode == M_POOL) {
		weft_chan_close(jobs);
		for (int i = 0; i < POOL; i++)
			pthread_join(pool[i], NULL);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fileio syscall|pool|inline read|sync [GS] [SECS] [DIR]\n");
		return 2;
	}
	mode = !strcmp(argv[1], "pool") ? M_POOL : !strcmp(argv[1], "inline") ? M_INLINE : M_SYSCALL;
	workload = !strcmp(argv[2], "sync") ? W_SYNC : W_READ;
	if (argc > 3)
		ngs = atoi(argv[3]);
	if (argc > 4)
		secs = atof(argv[4]);
	if (argc > 5)
		dir = argv[5];
	return weft_main(bench, argc, argv);
}
