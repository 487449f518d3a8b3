/*
 * forks.c - fork, exec and child processes from a plain pthread program.
 *
 *   forks exec        fork + exec, vfork + exec; the child's environment
 *   forks spawn_gs    fork while threads run; the child starts threads,
 *                     locks, sleeps, forks again
 *   forks pipes       a child (fork+exec, posix_spawn, popen, system)
 *                     writing 2 MB into a pipe this program reads slowly
 *   forks watch       a child makes no thread of weft's until it makes a
 *                     thread of its own (weft's sysmon comes with it); then
 *                     a CPU hog and a thread blocked in a raw system call
 *                     do not keep its main thread from running
 *
 * Prints "ok CASE" and exits 0, or says what failed and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "check.h"

static int wait_ok(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			FAIL("waitpid: %s", strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Read all of fd; returns bytes and puts the first ones in buf. */
static size_t slurp(int fd, char *buf, size_t cap, int slow)
{
	size_t total = 0;
	char tmp[4096];
	for (;;) {
		if (slow)
			usleep(200);
		ssize_t n = read(fd, tmp, sizeof tmp);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			FAIL("read: %s", strerror(errno));
		if (n == 0)
			return total;
		if (total < cap)
			memcpy(buf + total, tmp, (size_t)n < cap - total ? (size_t)n : cap - total);
		total += (size_t)n;
	}
}

/* ---- exec ----------------------------------------------------------------- */

static void case_exec(void)
{
	int p[2];
	CHECK(pipe(p) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl("/bin/sh", "sh", "-c", "echo \"exec [${LD_PRELOAD-unset}]\"", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[4096] = { 0 };
	slurp(p[0], buf, sizeof buf - 1, 0);
	close(p[0]);
	CHECK(wait_ok(pid) == 0);
	/* the environment the user gave (see the test: LD_PRELOAD of the
	 * user's own, or unset) */
	const char *want = getenv("FORKS_WANT_PRELOAD");
	char line[4200];
	snprintf(line, sizeof line, "exec [%s]\n", want ? want : "unset");
	if (strcmp(buf, line))
		FAIL("child said %s, want %s", buf, line);

	pid = vfork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execlp("true", "true", (char *)NULL);
		_exit(127);
	}
	CHECK(wait_ok(pid) == 0);
	pid = fork();
	if (pid == 0) {
		execlp("false", "false", (char *)NULL);
		_exit(127);
	}
	CHECK(wait_ok(pid) == 1);
}

/* ---- threads in the parent and in the child ----------------------------------------- */

static atomic_int stop;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* the parent's busy threads */
static long busy_count;
/* The children's own.  A mutex that another thread holds, or is being
 * handed, at the moment of fork stays so in the child for good (POSIX;
 * natively too), so a child must not lock mu. */
static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static long count;

static void *busy(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		pthread_mutex_lock(&mu);
		busy_count++;
		pthread_mutex_unlock(&mu);
		usleep(10);
	}
	return NULL;
}

static void *child_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++) {
		usleep(1000);
		pthread_mutex_lock(&cmu);
		count++;
		pthread_mutex_unlock(&cmu);
	}
	return NULL;
}

/* In a child: 100 threads, each sleeps and counts 10 times. */
static int child_body(int depth)
{
	pthread_mutex_lock(&cmu);
	count = 0;
	pthread_mutex_unlock(&cmu);
	pthread_t t[100];
	for (int i = 0; i < 100; i++)
		if (pthread_create(&t[i], NULL, child_worker, NULL) != 0)
			return 10;
	for (int i = 0; i < 100; i++)
		if (pthread_join(t[i], NULL) != 0)
			return 11;
	if (count != 1000)
		return 12;
	if (depth > 0) {
		pid_t pid = fork();
		if (pid < 0)
			return 13;
		if (pid == 0)
			_exit(child_body(depth - 1));
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
			return 14;
		if (WEXITSTATUS(st))
			return WEXITSTATUS(st);
	}
	return 0;
}

static void case_spawn_gs(void)
{
	pthread_t b[8];
	for (int i = 0; i < 8; i++)
		CHECK(pthread_create(&b[i], NULL, busy, NULL) == 0);
	for (int round = 0; round < 10; round++) {
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			exit(child_body(2)); /* exit: atexit handlers, stdio */
		int rc = wait_ok(pid);
		if (rc)
			FAIL("round %d: child exited %d", round, rc);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 8; i++)
		CHECK(pthread_join(b[i], NULL) == 0);
	CHECK(busy_count > 0);
	/* a child whose main thread returns while others still run */
	pid_t pid = fork();
	if (pid == 0) {
		pthread_t t;
		pthread_create(&t, NULL, child_worker, NULL);
		pthread_detach(t);
		pthread_exit(NULL);
	}
	CHECK(wait_ok(pid) == 0);
}

/* ---- what watches the child's threads ---------------------------------------------- */

static atomic_int hogstop;

static void *hog(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&hogstop, memory_order_relaxed))
		;
	return NULL;
}

static void *rawread(void *arg)
{
	char c;
	/* not a call weft sees: it blocks this thread's M in the kernel */
	return (void *)(long)syscall(SYS_read, *(int *)arg, &c, 1);
}

static int child_watch(void)
{
	/* the forking thread and the shim's signal thread, natively 1: no
	 * sysmon while the child has one thread */
	int n = os_threads();
	if (n < 1 || n > 2)
		return 20;
	/* a hog: this thread's sleep ends while it spins, and with one P
	 * only sysmon's preemption lets it run again to stop it */
	pthread_t t;
	if (pthread_create(&t, NULL, hog, NULL) != 0)
		return 21;
	usleep(2000);
	atomic_store(&hogstop, 1);
	if (pthread_join(t, NULL) != 0)
		return 22;
	/* a thread stuck in the kernel holds its P until sysmon lends it */
	int p[2];
	if (pipe(p) != 0)
		return 23;
	if (pthread_create(&t, NULL, rawread, &p[0]) != 0)
		return 24;
	usleep(2000);
	if (write(p[1], "x", 1) != 1)
		return 25;
	void *r;
	if (pthread_join(t, &r) != 0 || (long)r != 1)
		return 26;
	return 0;
}

static void case_watch(void)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, child_worker, NULL) == 0); /* the runtime runs */
	CHECK(pthread_join(t, NULL) == 0);
	for (int round = 0; round < 3; round++) {
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(child_watch());
		int rc = wait_ok(pid);
		if (rc)
			FAIL("round %d: child exited %d", round, rc);
	}
}

/* ---- children writing into a pipe we read slowly ----------------------------------------- */

#define BIG "2000000"

static void check_big(int fd, pid_t pid, const char *how)
{
	char buf[16];
	size_t n = slurp(fd, buf, sizeof buf, 1);
	close(fd);
	int rc = pid > 0 ? wait_ok(pid) : 0;
	if (n != 2000000 || rc != 0)
		FAIL("%s: read %zu bytes, child status %d", how, n, rc);
}

static void case_pipes(void)
{
	/* fork + exec: the write end is the child's stdout */
	int p[2];
	CHECK(pipe(p) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execlp("head", "head", "-c", BIG, "/dev/zero", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	check_big(p[0], pid, "fork+exec");

	/* posix_spawn with a dup2 file action */
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	char *argv[] = { "head", "-c", BIG, "/dev/zero", NULL };
	CHECK(posix_spawnp(&pid, "head", &fa, NULL, argv, environ) == 0);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	check_big(p[0], pid, "posix_spawn");

	/* popen */
	FILE *f = popen("head -c " BIG " /dev/zero", "r");
	CHECK(f != NULL);
	char buf[65536];
	size_t total = 0, n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
		total += n;
		usleep(200);
	}
	int st = pclose(f);
	if (total != 2000000 || !WIFEXITED(st) || WEXITSTATUS(st))
		FAIL("popen: read %zu, status %d", total, st);

	/* system, with an inherited pipe as stdout */
	CHECK(pipe(p) == 0);
	int saved = dup(1);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(p[1]);
		char b[16];
		size_t got = slurp(p[0], b, sizeof b, 1);
		_exit(got == 2000000 ? 0 : 1);
	}
	close(p[0]);
	dup2(p[1], 1);
	close(p[1]);
	int rc = system("head -c " BIG " /dev/zero");
	dup2(saved, 1);
	close(saved);
	if (rc != 0)
		FAIL("system: %d", rc);
	if (wait_ok(pid) != 0)
		FAIL("system: the reader did not get all of it");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "exec"))
		case_exec();
	else if (!strcmp(argv[1], "spawn_gs"))
		case_spawn_gs();
	else if (!strcmp(argv[1], "pipes"))
		case_pipes();
	else if (!strcmp(argv[1], "watch"))
		case_watch();
	else
		return 2;
	printf("ok %s\n", argv[1]);
	return 0;
}
