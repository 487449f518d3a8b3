/*
 * forkspare.c - fork from a thread that runs while the main thread
 * spins, then sleep in the child.  Run under the shim with one P: the
 * spinning main thread is a hog, sysmon lends a spare P, the other
 * thread runs on it and forks there, and the child's runtime goes on with
 * that spare and its P 0 idle.  Two threads of the child then take turns
 * sleeping, so that timers land on both Ps.  (A timer left on the idle one
 * once waited for a spinning M that the idle count forbade, and the child
 * polled with a 0 delay forever: a python subprocess child hung so.)
 *
 *   forkspare [ROUNDS]
 *
 * Prints "ok forkspare" and exits 0, or says what failed and exits 1;
 * a child that hangs is the test harness's to kill.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static _Atomic int forked; /* the forking thread ran: the main one may stop spinning */
static int rounds = 200;

static void nap(long us)
{
	struct timespec ts = { 0, us * 1000 };
	nanosleep(&ts, NULL);
}

static void *sleeper(void *arg)
{
	long us = (long)arg;
	for (int i = 0; i < rounds; i++)
		nap(us);
	return NULL;
}

static int child(void)
{
	pthread_t a, b;
	if (pthread_create(&a, NULL, sleeper, (void *)300L) ||
	    pthread_create(&b, NULL, sleeper, (void *)700L))
		return 2;
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}

static void *forker(void *arg)
{
	(void)arg;
	pid_t pid = fork();
	if (pid == 0)
		_exit(child());
	atomic_store(&forked, 1);
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return (void *)1L;
	return (void *)(long)(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atoi(argv[1]);
	pthread_t t;
	if (pthread_create(&t, NULL, forker, NULL)) {
		printf("FAIL pthread_create\n");
		return 1;
	}
	/* a hog: no call at all until the other thread has forked */
	while (!atomic_load_explicit(&forked, memory_order_relaxed))
		;
	void *r;
	pthread_join(t, &r);
	if (r) {
		printf("FAIL the child failed\n");
		return 1;
	}
	printf("ok forkspare\n");
	return 0;
}
