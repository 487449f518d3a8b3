/*
 * signals.c - signal masks, handlers and signal waits in a plain
 * threaded program; the output must be the same with and without weft.
 *
 * Prints one line per check; exits 0 if all held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static volatile sig_atomic_t got_usr1, got_chld, got_usr2;

static void on_usr1(int s)
{
	(void)s;
	got_usr1++;
}

static void on_chld(int s)
{
	(void)s;
	got_chld++;
}

static void on_usr2(int s)
{
	(void)s;
	got_usr2++;
}

static void *sender(void *arg)
{
	usleep(50000);
	kill(getpid(), (int)(long)arg);
	return NULL;
}

static void *sigwaiter(void *arg)
{
	sigset_t *set = arg;
	int sig = 0;
	int r = sigwait(set, &sig);
	return (void *)(long)(r == 0 ? sig : -1);
}

/* 50 writes to pipes nobody reads; returns how many did not fail with
 * EPIPE (SIGPIPE is blocked, or the process is dead) */
static void *broken_writer(void *arg)
{
	(void)arg;
	long bad = 0;
	for (int i = 0; i < 50; i++) {
		int q[2];
		if (pipe(q) != 0)
			return (void *)50L;
		close(q[0]);
		ssize_t n = write(q[1], "x", 1);
		if (n != -1 || errno_now() != EPIPE)
			bad++;
		close(q[1]);
		usleep(100);
	}
	return (void *)bad;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_chld;
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = on_usr2;
	sigaction(SIGUSR2, &sa, NULL);

	/* raise: the handler has run when it returns */
	raise(SIGUSR1);
	say("raise runs the handler before returning", got_usr1 == 1);

	/* pause returns once a handler ran */
	pthread_t t;
	pthread_create(&t, NULL, sender, (void *)(long)SIGUSR1);
	while (got_usr1 < 2)
		pause();
	pthread_join(t, NULL);
	say("pause wakes for a handler", got_usr1 == 2);

	/* blocked: pending until unblocked, then handled before
	 * sigprocmask returns */
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, &old);
	kill(getpid(), SIGUSR1);
	usleep(20000);
	say("a blocked signal waits", got_usr1 == 2);
	sigset_t pend;
	sigpending(&pend);
	say("it is pending", sigismember(&pend, SIGUSR1));
	sigprocmask(SIG_SETMASK, &old, NULL);
	say("unblocking runs it", got_usr1 == 3);
	sigset_t now;
	sigprocmask(SIG_SETMASK, NULL, &now);
	say("the mask reads back", !sigismember(&now, SIGUSR1));

	/* make's wait: SIGCHLD blocked, pselect unblocks it */
	sigset_t chld, empty;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigemptyset(&empty);
	sigprocmask(SIG_BLOCK, &chld, &old);
	int p[2];
	if (pipe(p) != 0)
		return 2;
	pid_t pid = fork();
	if (pid == 0)
		_exit(7);
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	int r = pselect(p[0] + 1, &rs, NULL, NULL, NULL, &empty);
	say("pselect with a mask wakes for SIGCHLD", r == -1 && errno_now() == EINTR && got_chld == 1);
	int st = 0;
	waitpid(pid, &st, 0);
	say("the child's status", WIFEXITED(st) && WEXITSTATUS(st) == 7);

	/* sigsuspend with SIGCHLD blocked otherwise */
	pid = fork();
	if (pid == 0)
		_exit(0);
	while (got_chld < 2)
		sigsuspend(&empty);
	say("sigsuspend wakes for SIGCHLD", got_chld == 2);
	waitpid(pid, &st, 0);
	sigprocmask(SIG_SETMASK, &old, NULL);

	/* a thread in sigwait takes a signal everybody blocks */
	sigset_t w;
	sigemptyset(&w);
	sigaddset(&w, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &w, &old);
	pthread_create(&t, NULL, sigwaiter, &w);
	usleep(20000);
	kill(getpid(), SIGUSR2);
	void *res;
	pthread_join(t, &res);
	say("sigwait takes it", (long)res == SIGUSR2 && got_usr2 == 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	/* a program it runs inherits the mask */
	sigprocmask(SIG_BLOCK, &usr1, &old);
	int gp[2];
	char line[128] = "";
	if (pipe(gp) == 0) {
		pid = fork();
		if (pid == 0) {
			dup2(gp[1], 1);
			execlp("grep", "grep", "SigBlk", "/proc/self/status", (char *)NULL);
			_exit(127);
		}
		close(gp[1]);
		ssize_t n = read(gp[0], line, sizeof line - 1);
		line[n > 0 ? n : 0] = 0;
		close(gp[0]);
		waitpid(pid, &st, 0);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	unsigned long long blk = 0;
	sscanf(line, "SigBlk: %llx", &blk);
	say("a child program inherits the mask", blk == (1ULL << (SIGUSR1 - 1)));

	/* SIGPIPE, left at its default, still kills a writer */
	pid = fork();
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		int q[2];
		if (pipe(q) != 0)
			_exit(1);
		close(q[0]);
		(void)write(q[1], "x", 1);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	say("SIGPIPE kills a writer", WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE);

	/* SIGPIPE blocked (left blocked to the end: a pending one must not
	 * be let loose): a write to a broken pipe fails with EPIPE, on
	 * whichever OS thread it is made */
	sigset_t pipeset;
	sigemptyset(&pipeset);
	sigaddset(&pipeset, SIGPIPE);
	sigprocmask(SIG_BLOCK, &pipeset, NULL);
	pthread_t bw[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&bw[i], NULL, broken_writer, NULL);
	long bad = 0;
	for (int i = 0; i < 8; i++) {
		pthread_join(bw[i], &res);
		bad += (long)res;
	}
	say("SIGPIPE blocked: EPIPE on every thread", bad == 0);
	return failures ? 1 : 0;
}
