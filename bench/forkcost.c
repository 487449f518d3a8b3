/*
 * forkcost.c - what a fork costs a threaded program: makes one thread
 * (under `weft run` that starts the runtime: docs/preload.md, fork and
 * exec), then forks N children that _exit at once and waits for each.
 * Plain pthread code, built without weft; bench/fork.py runs it natively
 * and under `weft run` side by side.
 *
 *   forkcost [N] [exec]   exec: the child execs /bin/true instead
 *
 * Output: one line, "fork_us=... wait_us=... total_us=..." per child: the
 * parent's fork() call, then its waitpid until the child is gone.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *nothing(void *arg)
{
	return arg;
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 300;
	int ex = argc > 2 && !strcmp(argv[2], "exec");
	if (n < 1)
		n = 1;
	pthread_t t;
	if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0) {
		fprintf(stderr, "forkcost: pthread_create failed\n");
		return 1;
	}
	double forked = 0, waited = 0;
	for (int i = 0; i < n; i++) {
		double a = now_us();
		pid_t pid = fork();
		if (pid == 0) {
			if (ex)
				execl("/bin/true", "true", (char *)NULL);
			_exit(0);
		}
		double b = now_us();
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "forkcost: child %d failed\n", i);
			return 1;
		}
		forked += b - a;
		waited += now_us() - b;
	}
	printf("fork_us=%.1f wait_us=%.1f total_us=%.1f\n", forked / n, waited / n,
	       (forked + waited) / n);
	return 0;
}
