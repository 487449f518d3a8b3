/*
 * sigintr.c - signal handlers interrupting blocking calls, and signals
 * for one thread, in a plain threaded program; the output must be the
 * same with and without weft.
 *
 * sigintr CASE: prints one line per check ("ok ..." or "FAIL ...") and
 * exits 0 if all held.  Cases: read, accept, poll, sleep, nanosleep,
 * sem, compute, spin, spin_libc, alarm_spin, longjmp, restart, kill_accept,
 * kill_tls, kill_waitpid, tgkill, masks, pipe_flips, pipe_mixed, pipe_nb,
 * pipe_allblock, xfsz, handler_mask, idle_block, jump_mask,
 * pipe_handler_park, storm, sigwait, sigwait_busy, cancel, handler_gone;
 * and gone_dfl_self, gone_dfl_out, which end killed by SIGUSR2;
 * pipe_reraise, which ends killed by SIGPIPE.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static atomic_int handled;
static pthread_t handler_self[64];
static atomic_int nself;

static void on_sig(int s)
{
	if (alarm_early(s))
		return; /* came before its call: armed again (check.h) */
	int i = atomic_fetch_add(&handled, 1);
	if (i < 64)
		handler_self[i] = pthread_self();
	atomic_fetch_add(&nself, 1);
}

static void catch(int s, int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sig;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(s, &sa, NULL);
}

/* SIGALRM once, ms from now */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A TCP listener on a loopback port of the kernel's choosing. */
static int listen_loopback(void)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	bind(l, (struct sockaddr *)&a, sizeof a);
	listen(l, 8);
	return l;
}

static int kill_usr1(pthread_t t, int how)
{
	(void)how;
	return pthread_kill(t, SIGUSR1);
}

/* Start fn in a thread, wait until it says *ready, then every 20 ms send
 * it a signal (send(t, how), until one fails) until it says *done: the
 * first may come before it is in its call.  Returns it, joined. */
static pthread_t signal_until_done(void *(*fn)(void *), void *arg, atomic_int *ready,
				   atomic_int *done, int (*send)(pthread_t, int), int how)
{
	pthread_t t;
	pthread_create(&t, NULL, fn, arg);
	while (!*ready)
		usleep(1000);
	while (!*done) {
		usleep(20000);
		if (!*done && send(t, how) != 0)
			break;
	}
	pthread_join(t, NULL);
	return t;
}

/* ---- a handler without SA_RESTART interrupts the parked call ----------------------- */

static void case_read(void)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	catch(SIGALRM, 0);
	alarm_ms(100);
	char c;
	ssize_t n = INCALL(read(sv[0], &c, 1));
	say("read: -1 EINTR", n == -1 && errno_now() == EINTR);
	say("read: the handler ran once", handled == 1);
	/* a partial transfer returns its count: MSG_WAITALL after one byte */
	send(sv[1], "ab", 2, 0);
	alarm_ms(100);
	char buf[8];
	n = INCALL(recv(sv[0], buf, sizeof buf, MSG_WAITALL));
	say("recv MSG_WAITALL: the part it got", n == 2);
}

static void case_accept(void)
{
	int l = listen_loopback();
	catch(SIGALRM, 0);
	alarm_ms(100);
	int c = INCALL(accept(l, NULL, NULL));
	say("accept: -1 EINTR", c == -1 && errno_now() == EINTR);
	say("accept: the handler ran once", handled == 1);
}

static void case_poll(void)
{
	int p[2];
	if (pipe(p) != 0)
		exit(2);
	catch(SIGALRM, 0);
	alarm_ms(100);
	struct pollfd pf = { p[0], POLLIN, 0 };
	int r = INCALL(poll(&pf, 1, -1));
	say("poll: -1 EINTR", r == -1 && errno_now() == EINTR);
	alarm_ms(100);
	r = INCALL(poll(NULL, 0, 10000));
	say("poll without fds: -1 EINTR", r == -1 && errno_now() == EINTR);
	alarm_ms(100);
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	r = INCALL(select(p[0] + 1, &rs, NULL, NULL, NULL));
	say("select: -1 EINTR", r == -1 && errno_now() == EINTR);
	say("poll: the handler ran each time", handled == 3);
}

static void case_sleep(void)
{
	catch(SIGALRM, 0);
	alarm_ms(1000);
	unsigned left = INCALL(sleep(5));
	say("sleep: the seconds left", left >= 3 && left <= 4);
	alarm_ms(100);
	int r = INCALL(usleep(5000000));
	say("usleep: -1 EINTR", r == -1 && errno_now() == EINTR);
}

static void case_nanosleep(void)
{
	catch(SIGALRM, 0);
	alarm_ms(200);
	struct timespec req = { 3, 0 }, rem = { 0, 0 };
	double t0 = now();
	int r = INCALL(nanosleep(&req, &rem));
	double took = now() - t0, left = rem.tv_sec + rem.tv_nsec / 1e9;
	say("nanosleep: -1 EINTR", r == -1 && errno_now() == EINTR);
	say("nanosleep: the remainder", left > 0 && left <= 3 - took + 0.05 && left >= 3 - took - 0.5);
	alarm_ms(200);
	rem = (struct timespec){ 0, 0 };
	r = INCALL(clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem));
	say("clock_nanosleep: EINTR and a remainder", r == EINTR && rem.tv_sec + rem.tv_nsec > 0);
}

static void case_sem(void)
{
	sem_t s;
	sem_init(&s, 0, 0);
	catch(SIGALRM, 0);
	alarm_ms(100);
	int r = INCALL(sem_wait(&s));
	say("sem_wait: -1 EINTR", r == -1 && errno_now() == EINTR);
	say("sem_wait: the handler ran", handled == 1);
}

/* a main that computes until its handler says stop, and one that waits
 * in a join */
static void *joinee(void *arg)
{
	(void)arg;
	while (handled < 2)
		usleep(1000);
	return NULL;
}

static void case_compute(void)
{
	catch(SIGALRM, 0);
	alarm_ms(100);
	volatile unsigned long x = 0;
	alarm_incall = 1; /* the loop is the call */
	while (handled < 1)
		x++;
	alarm_incall = 0;
	alarm_armed = 0;
	say("a handler stops a computing main", x > 0);
	pthread_t t;
	pthread_create(&t, NULL, joinee, NULL);
	alarm_ms(100);
	INCALL(pthread_join(t, NULL));
	say("a handler runs while main waits in a join", handled == 2);
}

/* ---- a thread that computes takes its signal at once --------------------------------- */

static volatile sig_atomic_t spin_flag;
static atomic_int spin_ready;
static pthread_t spin_ran_on;

static void on_spin(int s)
{
	(void)s;
	spin_ran_on = pthread_self();
	spin_flag = 1;
}

static void *spinner(void *arg)
{
	(void)arg;
	spin_ready = 1;
	while (!spin_flag) /* no call at all: only a handler run here ends it */
		;
	return NULL;
}

static void *spinner_libc(void *arg)
{
	(void)arg;
	spin_ready = 1;
	while (!spin_flag) /* most of its time in the C library */
		(void)getppid();
	return NULL;
}

/* ROUNDS times: a thread spins until its SIGUSR1 handler (sent by
 * pthread_kill from main) sets the flag; the handler ran on it */
static void spin_rounds(void *(*fn)(void *), int rounds, const char *what)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_spin;
	sigaction(SIGUSR1, &sa, NULL);
	int on_it = 0;
	for (int r = 0; r < rounds; r++) {
		spin_flag = 0;
		spin_ready = 0;
		pthread_t t;
		pthread_create(&t, NULL, fn, NULL);
		while (!spin_ready)
			usleep(1000);
		if (r % 2)
			usleep(1000 * (r % 7)); /* now and then well into its loop */
		pthread_kill(t, SIGUSR1);
		pthread_join(t, NULL);
		on_it += pthread_equal(spin_ran_on, t) != 0;
	}
	char line[128];
	snprintf(line, sizeof line, "%s: pthread_kill stops it %d times, the handler on it", what,
		 rounds);
	say(line, on_it == rounds);
}

static void case_spin(void)
{
	spin_rounds(spinner, 100, "spin");
}

static void case_spin_libc(void)
{
	spin_rounds(spinner_libc, 20, "spin calling getppid");
}

/* the process's SIGALRM, when the one thread that takes it computes */
static void *alarm_spinner(void *arg)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	return spinner(arg);
}

static void case_alarm_spin(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_spin;
	sigaction(SIGALRM, &sa, NULL);
	sigset_t s, old;
	sigemptyset(&s);
	sigaddset(&s, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &s, &old); /* main (waiting in join) does not take it */
	pthread_t t;
	pthread_create(&t, NULL, alarm_spinner, NULL);
	while (!spin_ready)
		usleep(1000);
	alarm_ms(100);
	pthread_join(t, NULL);
	say("alarm: the one thread that takes SIGALRM computes; its handler stops it", spin_flag);
	say("alarm: the handler ran on it", pthread_equal(spin_ran_on, t));
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- a handler that leaves with siglongjmp (the old timeout idiom) ------------------------ */

static sigjmp_buf jb;
static jmp_buf jb0;

static void on_jump(int s)
{
	(void)s;
	siglongjmp(jb, 1);
}

static void on_jump0(int s)
{
	(void)s;
	longjmp(jb0, 1);
}

static void case_longjmp(void)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_jump;
	sigaction(SIGALRM, &sa, NULL);
	volatile int timeouts = 0;
	char c;
	for (volatile int i = 0; i < 3; i++) {
		if (sigsetjmp(jb, 1) == 0) {
			alarm_ms(50);
			(void)read(sv[0], &c, 1);
		} else {
			timeouts++;
		}
	}
	sigset_t m;
	pthread_sigmask(SIG_SETMASK, NULL, &m);
	say("siglongjmp out of a handler: three timeouts", timeouts == 3);
	say("siglongjmp: the saved mask is back", !sigismember(&m, SIGALRM));
	sa.sa_handler = on_jump0;
	sigaction(SIGALRM, &sa, NULL);
	if (setjmp(jb0) == 0) {
		alarm_ms(50);
		(void)read(sv[0], &c, 1);
	}
	pthread_sigmask(SIG_SETMASK, NULL, &m);
	say("longjmp without a saved mask: the signal stays blocked", sigismember(&m, SIGALRM));
}

/* ---- SA_RESTART: read goes on, poll does not --------------------------------------- */

static int restart_fd;

static void *late_writer(void *arg)
{
	(void)arg;
	while (handled < 1) /* after the signal has been handled */
		usleep(1000);
	usleep(20000);
	(void)write(restart_fd, "x", 1);
	return NULL;
}

static void case_restart(void)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	restart_fd = sv[1];
	catch(SIGALRM, SA_RESTART);
	pthread_t t;
	pthread_create(&t, NULL, late_writer, NULL);
	alarm_ms(100);
	char c = 0;
	ssize_t n = INCALL(read(sv[0], &c, 1));
	say("SA_RESTART: read goes on to its byte", n == 1 && c == 'x' && handled == 1);
	pthread_join(t, NULL);
	alarm_ms(100);
	struct pollfd pf = { sv[0], POLLIN, 0 };
	int r = INCALL(poll(&pf, 1, -1));
	say("SA_RESTART: poll is not restarted", r == -1 && errno_now() == EINTR && handled == 2);
}

/* ---- pthread_kill wakes a worker in accept; its handler runs on it -------------------- */

static atomic_int worker_ready, worker_done;
static int listener;

static void *acceptor(void *arg)
{
	(void)arg;
	worker_ready = 1;
	int c = accept(listener, NULL, NULL);
	int e = errno_now();
	worker_done = c == -1 && e == EINTR ? 1 : 2;
	return NULL;
}

static void case_kill_accept(void)
{
	listener = listen_loopback();
	catch(SIGUSR1, 0);
	pthread_t t = signal_until_done(acceptor, NULL, &worker_ready, &worker_done, kill_usr1, 0);
	say("pthread_kill: accept -1 EINTR", worker_done == 1);
	int n = handled, mine = 1;
	for (int i = 0; i < n && i < 64; i++)
		mine &= pthread_equal(handler_self[i], t);
	say("pthread_kill: the handler ran on the worker", n >= 1 && mine);
}

/* the handler sees the thread's own thread-local variables (run under
 * weft with WEFT_TLS=thread: with shared TLS it sees its OS thread's) */
static __thread int tls_mine;
static atomic_int tls_seen[4];

static void on_tls(int s)
{
	(void)s;
	for (int i = 0; i < 4; i++) {
		int z = 0;
		if (atomic_compare_exchange_strong(&tls_seen[i], &z, tls_mine))
			break;
	}
}

static void *tls_acceptor(void *arg)
{
	tls_mine = (int)(long)arg;
	return acceptor(arg);
}

static void case_kill_tls(void)
{
	listener = listen_loopback();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_tls;
	sigaction(SIGUSR1, &sa, NULL);
	tls_mine = 1;
	signal_until_done(tls_acceptor, (void *)77L, &worker_ready, &worker_done, kill_usr1, 0);
	say("kill_tls: accept -1 EINTR", worker_done == 1);
	say("kill_tls: the handler read the worker's __thread", tls_seen[0] == 77);
}

/* ---- gettid and tgkill: a thread's id, and a signal to it ------------------------------------ */

static atomic_int tid_worker, tid_ready, tid_result, tid_stable;
static int tid_fd;
static pthread_t tid_ran_on;

static void on_tid(int s)
{
	(void)s;
	tid_ran_on = pthread_self();
}

static void *tid_reader(void *arg)
{
	(void)arg;
	pid_t me = gettid();
	int same = (pid_t)syscall(SYS_gettid) == me;
	for (int i = 0; i < 20; i++) /* parks: may go on on another OS thread */
		usleep(1000);
	same &= gettid() == me;
	tid_stable = same;
	tid_worker = me;
	tid_ready = 1;
	char c;
	ssize_t n = read(tid_fd, &c, 1);
	tid_result = n == -1 && errno_now() == EINTR ? 1 : 2;
	return NULL;
}

/* SIGUSR1 to the reader by its thread id; how: 0 tgkill(), 1
 * syscall(SYS_tgkill), 2 syscall(SYS_tkill).  The first call checks it
 * is alive (signal 0). */
static int tid_alive;

static int tid_send(pthread_t t, int how)
{
	(void)t;
	pid_t tid = tid_worker;
	if (tid_alive < 0)
		tid_alive = tgkill(getpid(), tid, 0) == 0;
	return how == 0	  ? tgkill(getpid(), tid, SIGUSR1)
	       : how == 1 ? (int)syscall(SYS_tgkill, getpid(), tid, SIGUSR1)
			  : (int)syscall(SYS_tkill, tid, SIGUSR1);
}

static void tid_round(int how, const char *what)
{
	tid_ready = tid_result = 0;
	tid_ran_on = 0;
	tid_alive = -1;
	pthread_t t = signal_until_done(tid_reader, NULL, &tid_ready, &tid_result, tid_send, how);
	int alive = tid_alive == 1;
	char line[128];
	snprintf(line, sizeof line, "%s: read -1 EINTR, the handler on the thread", what);
	say(line, alive && tid_result == 1 && pthread_equal(tid_ran_on, t));
}

static void case_tgkill(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_tid;
	sigaction(SIGUSR1, &sa, NULL);
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	tid_fd = sv[0];
	say("gettid: main's is the process id", gettid() == getpid());
	say("gettid: syscall(SYS_gettid) agrees", (pid_t)syscall(SYS_gettid) == gettid());
	tid_round(0, "tgkill");
	say("gettid: a thread's is its own and stays the same",
	    tid_stable && tid_worker != getpid());
	pid_t first = tid_worker;
	tid_round(1, "syscall(SYS_tgkill)");
	say("gettid: another thread has another", tid_worker != first);
	tid_round(2, "syscall(SYS_tkill)");
	errno = 0;
	say("tgkill of a thread that has ended: ESRCH",
	    tgkill(getpid(), tid_worker, 0) == -1 && errno_now() == ESRCH);
}

/* pthread_kill to a thread blocked in waitpid (a call that blocks its OS
 * thread under weft too): -1 EINTR, the handler on it */
static atomic_int wp_ready, wp_result;
static pid_t wp_child;

static void *wp_waiter(void *arg)
{
	(void)arg;
	wp_ready = 1;
	int st;
	pid_t r = waitpid(wp_child, &st, 0);
	wp_result = r == -1 && errno_now() == EINTR ? 1 : 2;
	return NULL;
}

static void case_kill_waitpid(void)
{
	catch(SIGUSR1, 0);
	wp_child = fork();
	if (wp_child == 0) {
		sleep(30);
		_exit(0);
	}
	pthread_t t = signal_until_done(wp_waiter, NULL, &wp_ready, &wp_result, kill_usr1, 0);
	kill(wp_child, SIGKILL);
	waitpid(wp_child, NULL, 0);
	say("pthread_kill: waitpid -1 EINTR", wp_result == 1);
	int n = handled, mine = 1;
	for (int i = 0; i < n && i < 64; i++)
		mine &= pthread_equal(handler_self[i], t);
	say("pthread_kill: the handler ran on the waiter", n >= 1 && mine);
}

/* ---- per-thread masks: the one thread that takes it ---------------------------------------- */

#define NW 4
static int wpipe[NW][2];
static atomic_int wresult[NW];
static pthread_t wt[NW];
static atomic_int wready;

static void *masked_reader(void *arg)
{
	long i = (long)arg;
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	pthread_sigmask(i == 2 ? SIG_UNBLOCK : SIG_BLOCK, &s, NULL);
	wready++;
	char c;
	ssize_t n = read(wpipe[i][0], &c, 1);
	wresult[i] = n == 1 ? 1 : errno_now() == EINTR ? 2 : 3;
	return NULL;
}

static void case_masks(void)
{
	catch(SIGUSR2, 0);
	sigset_t s, old;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &s, &old); /* main blocks it: inherited */
	for (long i = 0; i < NW; i++) {
		if (pipe(wpipe[i]) != 0)
			exit(2);
		pthread_create(&wt[i], NULL, masked_reader, (void *)i);
	}
	while (wready < NW)
		usleep(1000);
	while (!wresult[2]) {
		usleep(20000);
		if (!wresult[2])
			kill(getpid(), SIGUSR2);
	}
	for (int i = 0; i < NW; i++)
		if (i != 2)
			(void)write(wpipe[i][1], "x", 1);
	for (int i = 0; i < NW; i++)
		pthread_join(wt[i], NULL);
	say("masks: the one thread that lets it through is interrupted", wresult[2] == 2);
	say("masks: the others read their byte",
	    wresult[0] == 1 && wresult[1] == 1 && wresult[3] == 1);
	int n = handled, mine = 1;
	for (int i = 0; i < n && i < 64; i++)
		mine &= pthread_equal(handler_self[i], wt[2]);
	say("masks: the handler ran on it", n >= 1 && mine);
	sigset_t m;
	pthread_sigmask(SIG_SETMASK, NULL, &m);
	say("masks: main's mask is its own", sigismember(&m, SIGUSR2));
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- SIGPIPE blocked again, a new thread writes at once ------------------------------------- */

/* ROUNDS times main lets SIGPIPE through and blocks it again (the OS
 * threads under the shim change their masks with it: every thread blocks
 * it again), then starts threads that write to a broken pipe at once,
 * beside two that compute (they block it too): every write fails with
 * EPIPE, as natively, and none kills the process. */
#define FLIP_ROUNDS 300
static atomic_int flips_stop;

static void *pipe_writer(void *arg)
{
	(void)arg;
	int q[2];
	if (pipe(q) != 0)
		return (void *)1L;
	close(q[0]);
	ssize_t n = write(q[1], "x", 1);
	long bad = !(n == -1 && errno_now() == EPIPE);
	close(q[1]);
	return (void *)bad;
}

static void *flip_spinner(void *arg)
{
	(void)arg;
	while (!flips_stop)
		;
	return NULL;
}

/* In a child (no core dump), a thread runs fn: the signal that killed the
 * child, 0 if it exited. */
static int thread_killed_by(void *(*fn)(void *))
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit no = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no);
		pthread_t t;
		pthread_create(&t, NULL, fn, NULL);
		pthread_join(t, NULL);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

/* rounds times four threads of fn, joined, beside two threads that
 * compute; before each round, if flip, main lets it through and blocks it
 * again.  The sum of what the four return. */
static long writers_beside_spinners(int rounds, void *(*fn)(void *), const sigset_t *flip)
{
	pthread_t sp[2], w[4];
	flips_stop = 0;
	for (int i = 0; i < 2; i++)
		pthread_create(&sp[i], NULL, flip_spinner, NULL);
	long bad = 0;
	for (int r = 0; r < rounds; r++) {
		if (flip) {
			sigprocmask(SIG_UNBLOCK, flip, NULL);
			sigprocmask(SIG_BLOCK, flip, NULL);
		}
		for (int i = 0; i < 4; i++)
			pthread_create(&w[i], NULL, fn, NULL);
		for (int i = 0; i < 4; i++) {
			void *res;
			pthread_join(w[i], &res);
			bad += (long)res;
		}
	}
	flips_stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(sp[i], NULL);
	return bad;
}

static void case_pipe_flips(void)
{
	sigset_t ps;
	sigemptyset(&ps);
	sigaddset(&ps, SIGPIPE);
	sigprocmask(SIG_BLOCK, &ps, NULL);
	long bad = writers_beside_spinners(FLIP_ROUNDS, pipe_writer, &ps);
	say("pipe_flips: every write to a broken pipe fails with EPIPE", bad == 0);
}

/* libpq's way (pq_block_sigpipe / pq_reset_sigpipe) in threads of a
 * program that leaves SIGPIPE at its default everywhere else: block it in
 * this thread, write, see it pending (sigpending), take it (sigtimedwait),
 * restore the mask.  Beside two threads that compute with it let
 * through. */
static void *libpq_writer(void *arg)
{
	(void)arg;
	long bad = 0;
	sigset_t ps, old, pend;
	sigemptyset(&ps);
	sigaddset(&ps, SIGPIPE);
	struct timespec zero = { 0, 0 };
	for (int i = 0; i < 50; i++) {
		pthread_sigmask(SIG_BLOCK, &ps, &old);
		int q[2];
		if (pipe(q) != 0)
			return (void *)100L;
		close(q[0]);
		ssize_t n = write(q[1], "x", 1);
		bad += !(n == -1 && errno_now() == EPIPE);
		sigpending(&pend);
		bad += !sigismember(&pend, SIGPIPE);
		bad += sigtimedwait(&ps, NULL, &zero) != SIGPIPE;
		sigpending(&pend);
		bad += sigismember(&pend, SIGPIPE);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		close(q[1]);
	}
	return (void *)bad;
}

static void case_pipe_mixed(void)
{
	long bad = writers_beside_spinners(20, libpq_writer, NULL);
	say("pipe_mixed: blocked in the writing thread only, EPIPE and pending there", bad == 0);
	/* and a thread that lets it through still dies of it */
	say("pipe_mixed: a thread that lets it through dies of it",
	    thread_killed_by(pipe_writer) == SIGPIPE);
}

/* ---- SIGPIPE / SIGXFSZ pending on the thread whose call failed ------------------------------ */

/* n times: block s in this thread, fail() (the write that sends it),
 * then sleep a little (under weft the thread may go to another OS
 * thread, and its old one run a thread that lets s through), then s is
 * pending (sigpending) and sigtimedwait takes it; the mask back.  The
 * number of checks that did not hold. */
static long pending_rounds(int s, int n, bool (*fail)(void))
{
	long bad = 0;
	sigset_t ss, old, pend;
	sigemptyset(&ss);
	sigaddset(&ss, s);
	for (int i = 0; i < n; i++) {
		pthread_sigmask(SIG_BLOCK, &ss, &old);
		bad += !fail();
		usleep(200);
		sigpending(&pend);
		bad += !sigismember(&pend, s);
		struct timespec ts = { i & 1, 0 }; /* zero, one second */
		bad += sigtimedwait(&ss, NULL, &ts) != s;
		sigpending(&pend);
		bad += sigismember(&pend, s);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return bad;
}

/* A write to a non-blocking pipe with no reader (libpq's sockets are
 * non-blocking: the call is the real one, straight through): EPIPE. */
static bool nb_epipe(void)
{
	int q[2];
	if (pipe2(q, O_NONBLOCK) != 0)
		return false;
	close(q[0]);
	ssize_t n = write(q[1], "x", 1);
	bool ok = n == -1 && errno_now() == EPIPE;
	close(q[1]);
	return ok;
}

static void *nb_writer(void *arg)
{
	(void)arg;
	return (void *)pending_rounds(SIGPIPE, 20, nb_epipe);
}

/* pipe_mixed with a non-blocking pipe and a sleep after the write */
static void case_pipe_nb(void)
{
	long bad = writers_beside_spinners(5, nb_writer, NULL);
	say("pipe_nb: a non-blocking pipe's EPIPE, SIGPIPE pending on the writer after a sleep",
	    bad == 0);
}

/* A write to a pipe with no reader: EPIPE. */
static bool epipe(void)
{
	return pipe_writer(NULL) == NULL;
}

static void *allblock_writer(void *arg)
{
	(void)arg;
	return (void *)pending_rounds(SIGPIPE, 20, epipe);
}

/* Every thread blocks SIGPIPE (main did before making them): a write's
 * SIGPIPE is still the writer's alone, pending on it after a sleep, taken
 * by its sigtimedwait; and one sent to the process is the process's. */
static void case_pipe_allblock(void)
{
	sigset_t ps, old, pend;
	sigemptyset(&ps);
	sigaddset(&ps, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &ps, &old);
	long bad = writers_beside_spinners(5, allblock_writer, NULL);
	say("pipe_allblock: every thread blocks it, pending on the writer alone", bad == 0);
	kill(getpid(), SIGPIPE);
	sigpending(&pend);
	struct timespec sec = { 5, 0 };
	bool took = sigismember(&pend, SIGPIPE) && sigtimedwait(&ps, NULL, &sec) == SIGPIPE;
	say("pipe_allblock: kill to the process: pending, sigtimedwait takes it", took);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

#define XFSZ_LIMIT (1L << 20)
static int xfsz_fd = -1;

/* A write past RLIMIT_FSIZE: EFBIG. */
static bool past_limit(void)
{
	ssize_t n = pwrite(xfsz_fd, "x", 1, XFSZ_LIMIT);
	return n == -1 && errno_now() == EFBIG;
}

static void *xfsz_writer(void *arg)
{
	(void)arg;
	return (void *)pending_rounds(SIGXFSZ, 20, past_limit);
}

static void *xfsz_killed(void *arg)
{
	(void)arg;
	past_limit();
	return NULL;
}

/* RLIMIT_FSIZE: threads that block SIGXFSZ write past it (EFBIG, pending
 * on them, taken by sigtimedwait) beside two that compute and main, which
 * let it through; a thread that lets it through dies of it. */
static struct rlimit xfsz_was;

/* xfsz_fd, an unlinked file, and RLIMIT_FSIZE lowered to XFSZ_LIMIT
 * (xfsz_end puts it back); false, said as the case's failure, if not. */
static bool xfsz_begin(const char *name)
{
	char path[] = "/tmp/sigintr-xfsz-XXXXXX";
	xfsz_fd = mkstemp(path);
	if (xfsz_fd < 0) {
		say(name, false);
		return false;
	}
	unlink(path);
	struct rlimit lim;
	getrlimit(RLIMIT_FSIZE, &xfsz_was);
	lim = xfsz_was;
	lim.rlim_cur = XFSZ_LIMIT;
	if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
		say(name, false);
		close(xfsz_fd);
		return false;
	}
	return true;
}

static void xfsz_end(void)
{
	setrlimit(RLIMIT_FSIZE, &xfsz_was);
	close(xfsz_fd);
}

static void case_xfsz(void)
{
	if (!xfsz_begin("xfsz: a file and RLIMIT_FSIZE"))
		return;
	long bad = writers_beside_spinners(3, xfsz_writer, NULL);
	say("xfsz: EFBIG past RLIMIT_FSIZE, SIGXFSZ pending on the writer, sigtimedwait takes it",
	    bad == 0);
	fflush(stdout);
	say("xfsz: a thread that lets it through dies of it",
	    thread_killed_by(xfsz_killed) == SIGXFSZ);
	xfsz_end();
}

/* ---- a handler's sa_mask blocks SIGPIPE while it runs --------------------------------------- */

static atomic_long hm_bad;
static atomic_int hm_quiet;
static sigjmp_buf hm_env;
static atomic_int hm_jump;

/* SIGUSR1's, with SIGPIPE in sa_mask: its write to a broken pipe fails
 * with EPIPE, SIGPIPE pending meanwhile, taken here. */
static void on_usr1_write(int s)
{
	(void)s;
	int e = errno;
	if (hm_jump)
		siglongjmp(hm_env, 1);
	if (!hm_quiet) {
		sigset_t ps, pend;
		sigemptyset(&ps);
		sigaddset(&ps, SIGPIPE);
		struct timespec zero = { 0, 0 };
		int q[2];
		if (pipe(q) == 0) {
			close(q[0]);
			ssize_t n = write(q[1], "x", 1);
			hm_bad += !(n == -1 && errno == EPIPE);
			sigpending(&pend);
			hm_bad += !sigismember(&pend, SIGPIPE);
			hm_bad += sigtimedwait(&ps, NULL, &zero) != SIGPIPE;
			close(q[1]);
		} else {
			hm_bad += 100;
		}
	}
	errno = e;
}

static void *hm_raiser(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20; i++) {
		pthread_kill(pthread_self(), SIGUSR1);
		usleep(100);
	}
	return NULL;
}

/* After the handler (returned, or left with siglongjmp): SIGPIPE let
 * through again, a write to a broken pipe kills. */
static void *hm_after(void *arg)
{
	(void)arg;
	if (sigsetjmp(hm_env, 1) == 0)
		pthread_kill(pthread_self(), SIGUSR1);
	pipe_writer(NULL);
	return NULL;
}

static bool hm_killed(bool jump)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		hm_quiet = 1;
		hm_jump = jump;
		pthread_t t;
		pthread_create(&t, NULL, hm_after, NULL);
		pthread_join(t, NULL);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE;
}

static void case_handler_mask(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1_write;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGPIPE);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t sp[2], t[2];
	flips_stop = 0;
	for (int i = 0; i < 2; i++)
		pthread_create(&sp[i], NULL, flip_spinner, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, hm_raiser, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	flips_stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(sp[i], NULL);
	say("handler_mask: SIGPIPE in sa_mask: the handler's write fails with EPIPE, pending",
	    hm_bad == 0);
	say("handler_mask: after the handler returned, a write to a broken pipe kills",
	    hm_killed(false));
	say("handler_mask: after siglongjmp out of it, a write to a broken pipe kills",
	    hm_killed(true));
}

/* ---- every thread blocks SIGPIPE: a kill of it stays pending ------------------------------ */

static int ib_pipe[2];
static void from_outside(int s, int n);
#define IB_ROUNDS 8 /* idle_block's rounds */

/* SIGPIPE to this process 20 times: 10 from another process, 10 by kill. */
static void ib_kills(void)
{
	for (int i = 0; i < 10; i++) {
		from_outside(SIGPIPE, 1);
		kill(getpid(), SIGPIPE);
		usleep(1000);
	}
}

/* Lets SIGPIPE through while it computes, sleeps (parked) and sleeps in
 * a raw system call (which holds its OS thread: under weft its processor
 * goes on on another), then ends. */
static void *ib_opener(void *arg)
{
	(void)arg;
	sigset_t ps;
	sigemptyset(&ps);
	sigaddset(&ps, SIGPIPE);
	pthread_sigmask(SIG_UNBLOCK, &ps, NULL);
	for (int i = 0; i < 10; i++) {
		for (volatile int k = 0; k < 100000; k++)
			;
		usleep(300);
		struct timespec ts = { 0, 2000000 };
		syscall(SYS_nanosleep, &ts, NULL);
	}
	return NULL;
}

/* Blocks SIGPIPE (main's mask), parked in a read until main writes. */
static void *ib_parked(void *arg)
{
	(void)arg;
	char c;
	return (void *)(long)(read(ib_pipe[0], &c, 1) != 1);
}

/* main blocks SIGPIPE; four threads park with it blocked, while four
 * others let it through, run a while and end (IB_ROUNDS times, each
 * followed by the kills).  Then every thread blocks
 * it: 20 SIGPIPEs to the process (from another process and by kill())
 * stay pending for it (under
 * weft an OS thread left idle by a thread that let it through, before
 * signal.c m_idle / ms_idle, took it and the process died), shown by
 * sigpending and taken by sigtimedwait. */
static void case_idle_block(void)
{
	sigset_t ps, pend;
	sigemptyset(&ps);
	sigaddset(&ps, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &ps, NULL);
	if (pipe(ib_pipe) != 0) {
		say("idle_block: a pipe", false);
		return;
	}
	pthread_t pk[4], op[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&pk[i], NULL, ib_parked, NULL);
	/* rounds: each a race of the kills with the openers' ends (under
	 * weft, with their OS threads' masks) */
	int pending = 0, taken = 0, once = 0;
	for (int r = 0; r < IB_ROUNDS; r++) {
		for (int i = 0; i < 4; i++)
			pthread_create(&op[i], NULL, ib_opener, NULL);
		for (int i = 0; i < 4; i++)
			pthread_join(op[i], NULL);
		ib_kills();
		sigpending(&pend);
		pending += sigismember(&pend, SIGPIPE);
		struct timespec zero = { 0, 0 };
		taken += sigtimedwait(&ps, NULL, &zero) == SIGPIPE;
		sigpending(&pend);
		once += !sigismember(&pend, SIGPIPE);
	}
	say("idle_block: 20 kills of SIGPIPE every thread blocks: alive, pending",
	    pending == IB_ROUNDS);
	say("idle_block: sigtimedwait takes it", taken == IB_ROUNDS);
	say("idle_block: once", once == IB_ROUNDS);
	long bad = write(ib_pipe[1], "xxxx", 4) != 4;
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(pk[i], &r);
		bad += (long)r;
	}
	say("idle_block: the parked threads read", bad == 0);
	fflush(stdout);
	/* the opposite: one parked thread lets it through, a kill kills */
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit no = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no);
		if (pipe(ib_pipe) != 0)
			_exit(2);
		pthread_t t;
		pthread_create(&t, NULL, ib_opener, NULL);
		pthread_join(t, NULL);
		/* opener's mask, parked */
		pthread_sigmask(SIG_UNBLOCK, &ps, NULL);
		pthread_create(&t, NULL, ib_parked, NULL);
		pthread_sigmask(SIG_BLOCK, &ps, NULL);
		ib_kills();
		for (int i = 0; i < 300; i++) /* 30 s: killed long before */
			usleep(100000);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	say("idle_block: a parked thread lets it through: a kill kills",
	    WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE);
}

/* ---- siglongjmp puts back the saved mask of SIGPIPE ---------------------------------------- */

static __thread sigjmp_buf jm_env; /* each thread's own: two jump at once */

static void on_jm(int s)
{
	(void)s;
	siglongjmp(jm_env, 1);
}

static bool pipe_blocked(void)
{
	sigset_t cur;
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	return sigismember(&cur, SIGPIPE);
}

/* sigsetjmp(env, 1) with SIGPIPE let through (or blocked), then the
 * other way, then a SIGUSR1 handler siglongjmps back: the saved mask is
 * back (glibc's siglongjmp restores the OS thread's mask, which under
 * weft, before signal.c jump_out applied it to the G, left the G's as
 * it was and its OS thread's kernel mask the saved one), and a write to
 * a broken pipe then fails with EPIPE, SIGPIPE pending, when blocked. */
static void *jm_thread(void *arg)
{
	(void)arg;
	long bad = 0;
	sigset_t ps, pend;
	sigemptyset(&ps);
	sigaddset(&ps, SIGPIPE);
	struct timespec zero = { 0, 0 };
	for (volatile int i = 0; i < 10; i++) {
		pthread_sigmask(SIG_UNBLOCK, &ps, NULL);
		if (sigsetjmp(jm_env, 1) == 0) {
			pthread_sigmask(SIG_BLOCK, &ps, NULL);
			pthread_kill(pthread_self(), SIGUSR1);
			bad += 100; /* not reached */
		}
		bad += pipe_blocked();
		pthread_sigmask(SIG_BLOCK, &ps, NULL);
		if (sigsetjmp(jm_env, 1) == 0) {
			pthread_sigmask(SIG_UNBLOCK, &ps, NULL);
			pthread_kill(pthread_self(), SIGUSR1);
			bad += 100;
		}
		bad += !pipe_blocked();
		bad += !epipe();
		sigpending(&pend);
		bad += !sigismember(&pend, SIGPIPE);
		bad += sigtimedwait(&ps, NULL, &zero) != SIGPIPE;
		usleep(100);
	}
	return (void *)bad;
}

/* let through by the saved mask: a write to a broken pipe kills */
static void *jm_killed(void *arg)
{
	(void)arg;
	sigset_t ps;
	sigemptyset(&ps);
	sigaddset(&ps, SIGPIPE);
	if (sigsetjmp(jm_env, 1) == 0) {
		pthread_sigmask(SIG_BLOCK, &ps, NULL);
		pthread_kill(pthread_self(), SIGUSR1);
	}
	pipe_writer(NULL);
	return NULL;
}

static void case_jump_mask(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_jm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t sp[2], t[2];
	flips_stop = 0;
	for (int i = 0; i < 2; i++)
		pthread_create(&sp[i], NULL, flip_spinner, NULL);
	long bad = 0;
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, jm_thread, NULL);
	for (int i = 0; i < 2; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (long)r;
	}
	flips_stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(sp[i], NULL);
	say("jump_mask: siglongjmp puts back the saved SIGPIPE, blocked or let through", bad == 0);
	say("jump_mask: let through by the saved mask, a write to a broken pipe kills",
	    thread_killed_by(jm_killed) == SIGPIPE);
}

/* ---- a SIGPIPE / SIGXFSZ handler that parks ------------------------------------------------ */

static int hp_sig;             /* SIGPIPE or SIGXFSZ */
static bool (*hp_fail)(void);  /* the write that sends it: epipe, past_limit */
static __thread int hp_ran;    /* the handler ran on this thread */
static __thread int hp_parker; /* and parks there */
static atomic_int hp_bad;

static bool sig_blocked(int s)
{
	sigset_t cur;
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	return sigismember(&cur, s);
}

static void on_sig_park(int s)
{
	int e = errno;
	hp_ran++;
	if (hp_parker) {
		for (int i = 0; i < 20; i++)
			usleep(1000);
		/* still blocked in here (no SA_NODEFER) */
		hp_bad += !sig_blocked(s);
	}
	errno = e;
}

/* Fails the write, its handler (which parks) runs, 5 times. */
static void *hp_parker_fn(void *arg)
{
	(void)arg;
	hp_parker = 1;
	long bad = 0;
	for (int i = 0; i < 5; i++) {
		bad += !hp_fail();
		bad += hp_ran != i + 1;
		bad += sig_blocked(hp_sig);
	}
	return (void *)bad;
}

/* Fails the write while the other's handler parks: its own handler runs
 * on it each time (before, under weft, on the OS thread where the parked
 * handler had left the signal blocked it did not: the error alone). */
static void *hp_writer(void *arg)
{
	(void)arg;
	long bad = 0;
	for (int i = 0; i < 40; i++) {
		bad += !hp_fail();
		bad += hp_ran != i + 1;
		bad += sig_blocked(hp_sig);
		usleep(200);
	}
	return (void *)bad;
}

/* s's handler parks in one thread while three others fail writes: every
 * write's handler runs on its writer, and the parked one still blocks s. */
static bool handler_park(int s, bool (*fail)(void))
{
	hp_sig = s;
	hp_fail = fail;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sig_park;
	sigemptyset(&sa.sa_mask);
	sigaction(s, &sa, NULL);
	pthread_t t[4];
	pthread_create(&t[0], NULL, hp_parker_fn, NULL);
	for (int i = 1; i < 4; i++)
		pthread_create(&t[i], NULL, hp_writer, NULL);
	long bad = 0;
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (long)r;
	}
	return bad == 0 && hp_bad == 0;
}

static void case_pipe_handler_park(void)
{
	say("pipe_handler_park: a SIGPIPE handler parks; every write's handler runs on its writer",
	    handler_park(SIGPIPE, epipe));
	struct sigaction q;
	sigaction(SIGPIPE, NULL, &q);
	say("pipe_handler_park: sigaction says the program's handler",
	    q.sa_handler == on_sig_park && !(q.sa_flags & SA_SIGINFO));
}

/* The same for SIGXFSZ: a file's write is made under entersyscall, so the
 * signal comes while the G is in the call, not running. */
static void case_xfsz_handler_park(void)
{
	if (!xfsz_begin("xfsz_handler_park: a file and RLIMIT_FSIZE"))
		return;
	say("xfsz_handler_park: a SIGXFSZ handler parks; every write's handler runs on its writer",
	    handler_park(SIGXFSZ, past_limit));
	xfsz_end();
}

/* ---- 1,000 readers, SIGALRM every millisecond -------------------------------------------- */

#define NR 1000
#define STORM_SECS 5
static int rs[NR][2];
static atomic_long eintrs, bytes;

/* reads until end of file (main closes its end after the storm) */
static void *storm_reader(void *arg)
{
	long i = (long)arg;
	long got = 0;
	char buf[64];
	for (;;) {
		ssize_t n = read(rs[i][0], buf, sizeof buf);
		if (n > 0)
			got += n;
		else if (n < 0 && errno_now() == EINTR)
			eintrs++;
		else
			break;
	}
	bytes += got;
	return NULL;
}

static void case_storm(void)
{
	catch(SIGALRM, 0);
	sigset_t s, old;
	sigemptyset(&s);
	sigaddset(&s, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &s, &old); /* the readers take it */
	static pthread_t t[NR];
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	for (long i = 0; i < NR; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, rs[i]) != 0)
			exit(2);
		pthread_sigmask(SIG_UNBLOCK, &s, NULL);
		pthread_create(&t[i], &a, storm_reader, (void *)i);
		pthread_sigmask(SIG_BLOCK, &s, NULL);
	}
	struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	/* a byte to each reader every 20 ms for 5 s, SIGALRM every 1 ms */
	long rounds = 0;
	double end = now() + STORM_SECS;
	while (now() < end) {
		for (int i = 0; i < NR; i++)
			if (write(rs[i][1], "x", 1) != 1)
				exit(3);
		rounds++;
		usleep(20000);
	}
	for (int i = 0; i < NR; i++)
		close(rs[i][1]);
	for (int i = 0; i < NR; i++)
		pthread_join(t[i], NULL);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	say("storm: every byte read", bytes == (long)NR * rounds);
	say("storm: handlers ran", handled > 0);
	say("storm: every EINTR had its handler", eintrs <= handled);
	if (getenv("SIGINTR_VERBOSE"))
		fprintf(stderr, "rounds %ld handled %d eintrs %ld\n", rounds, (int)handled,
			(long)eintrs);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- sigwait in threads of their own, many others busy ------------------------------------------ */

#define NBUSY 1000
#define NWAIT 50
static atomic_int stop, waited, waiting;

static void *busy(void *arg)
{
	(void)arg;
	volatile unsigned long x = 0;
	while (!stop) { /* compute a little, sleep a little */
		for (int i = 0; i < 10000; i++)
			x++;
		usleep(10000);
	}
	return NULL;
}

static void *waiter(void *arg)
{
	sigset_t *set = arg;
	int sig = 0;
	waiting++;
	if (sigwait(set, &sig) == 0 && sig == SIGUSR1)
		waited++;
	return NULL;
}

/* SIGUSR1 in *set, blocked in this thread and so in every thread it
 * makes; *a gives them small stacks (thousands of them). */
static void sigwait_setup(sigset_t *set, pthread_attr_t *a)
{
	sigemptyset(set);
	sigaddset(set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	pthread_attr_init(a);
	pthread_attr_setstacksize(a, 64 * 1024);
}

static void case_sigwait(void)
{
	static sigset_t set;
	pthread_attr_t a;
	sigwait_setup(&set, &a);
	static pthread_t b[NBUSY], w[NWAIT];
	for (int i = 0; i < NWAIT; i++)
		pthread_create(&w[i], &a, waiter, &set);
	for (int i = 0; i < NBUSY; i++)
		pthread_create(&b[i], &a, busy, NULL);
	while (waiting < NWAIT)
		usleep(1000);
	usleep(50000); /* into sigwait, most likely: the count is only reported */
	fprintf(stderr, "threads_in_sigwait=%d\n", os_threads());
	for (int i = 0; i < NWAIT; i++) {
		kill(getpid(), SIGUSR1);
		while (waited <= i)
			usleep(1000);
	}
	for (int i = 0; i < NWAIT; i++)
		pthread_join(w[i], NULL);
	stop = 1;
	for (int i = 0; i < NBUSY; i++)
		pthread_join(b[i], NULL);
	say("sigwait: 50 threads took one each", waited == NWAIT);
}

/* one thread dedicated to sigwait (the common server pattern) while
 * 10,000 others compute and sleep */
#define NBUSY2 10000
#define NSIGS 100
static atomic_int got2;

/* A thread that takes n SIGUSR1s in sigwait, counting them in *got. */
struct sigwaitjob {
	sigset_t *set;
	int n;
	atomic_int *got;
};

static void *sigwaiter(void *arg)
{
	struct sigwaitjob *j = arg;
	for (int i = 0; i < j->n; i++) {
		int sig = 0;
		if (sigwait(j->set, &sig) == 0 && sig == SIGUSR1)
			(*j->got)++;
	}
	return NULL;
}

static void *busy2(void *arg)
{
	(void)arg;
	volatile unsigned long x = 0;
	while (!stop) { /* ~10% of a CPU for all 10,000 */
		for (int i = 0; i < 2000; i++)
			x++;
		usleep(100000);
	}
	return NULL;
}

static void case_sigwait_busy(void)
{
	static sigset_t set;
	pthread_attr_t a;
	sigwait_setup(&set, &a);
	static pthread_t b[NBUSY2];
	pthread_t w;
	static struct sigwaitjob j = { &set, NSIGS, &got2 };
	pthread_create(&w, &a, sigwaiter, &j);
	int made = 0;
	for (int i = 0; i < NBUSY2; i++)
		made += pthread_create(&b[i], &a, busy2, NULL) == 0;
	for (int i = 0; i < NSIGS; i++) { /* one at a time: standard signals do not queue */
		kill(getpid(), SIGUSR1);
		while (got2 <= i)
			usleep(1000);
	}
	pthread_join(w, NULL);
	stop = 1;
	for (int i = 0; i < made; i++)
		pthread_join(b[i], NULL);
	say("sigwait_busy: 10,000 busy threads made", made == NBUSY2);
	say("sigwait_busy: the signal thread took every one", got2 == NSIGS);
}

/* one thread in sigwait, round after round: main sends the next signal
 * only once the last was taken, while 200 others compute and sleep - a
 * signal that comes just after the waiter looked must still wake it */
#define NROUNDS 3000
static atomic_int got3;

static void case_sigwait_rounds(void)
{
	static sigset_t set;
	pthread_attr_t a;
	sigwait_setup(&set, &a);
	static pthread_t b[200];
	pthread_t w;
	for (int i = 0; i < 200; i++)
		pthread_create(&b[i], &a, busy, NULL);
	static struct sigwaitjob j = { &set, NROUNDS, &got3 };
	pthread_create(&w, &a, sigwaiter, &j);
	for (int i = 0; i < NROUNDS; i++) {
		kill(getpid(), SIGUSR1);
		while (got3 <= i)
			usleep(50);
	}
	pthread_join(w, NULL);
	stop = 1;
	for (int i = 0; i < 200; i++)
		pthread_join(b[i], NULL);
	say("sigwait_rounds: every signal taken", got3 == NROUNDS);
}

/* ---- pthread_cancel: a parked thread unwinds ------------------------------------------------- */

static atomic_int cleaned, started2, slept;
static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ccv = PTHREAD_COND_INITIALIZER;
static int cfd;

static void cleanup(void *arg)
{
	cleaned += (int)(long)arg;
}

static void unlock_cleanup(void *arg)
{
	pthread_mutex_unlock(arg);
	cleaned += 10;
}

static void *cancel_reader(void *arg)
{
	(void)arg;
	char c;
	pthread_cleanup_push(cleanup, (void *)1L);
	started2 = 1;
	for (;;)
		(void)read(cfd, &c, 1);
	pthread_cleanup_pop(0);
	return NULL;
}

static void *cancel_waiter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&cmu);
	pthread_cleanup_push(unlock_cleanup, &cmu);
	started2 = 1;
	for (;;)
		pthread_cond_wait(&ccv, &cmu);
	pthread_cleanup_pop(1);
	return NULL;
}

static void *cancel_later(void *arg)
{
	(void)arg;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	started2 = 1;
	while (!slept) /* cancelled meanwhile: not acted on */
		usleep(2000);
	int old = -1;
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
	cleaned = old == PTHREAD_CANCEL_DISABLE ? 100 : -1;
	pthread_testcancel();
	cleaned = -2;
	return NULL;
}

static void run_cancel(void *(*fn)(void *), int want, const char *what)
{
	pthread_t t;
	void *ret = NULL;
	cleaned = started2 = slept = 0;
	pthread_create(&t, NULL, fn, NULL);
	while (!started2)
		usleep(1000);
	usleep(20000);
	pthread_cancel(t);
	usleep(20000);
	slept = 1;
	pthread_join(t, &ret);
	char line[128];
	snprintf(line, sizeof line, "%s: cancelled, cleanup ran", what);
	say(line, ret == PTHREAD_CANCELED && cleaned == want);
}

static void case_cancel(void)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	cfd = sv[0];
	run_cancel(cancel_reader, 1, "read");
	run_cancel(cancel_waiter, 10, "cond_wait");
	say("cond_wait: the mutex is free after", pthread_mutex_trylock(&cmu) == 0);
	pthread_mutex_unlock(&cmu);
	run_cancel(cancel_later, 100, "disabled, then testcancel");
}

/* ---- a signal whose handler went: SIG_IGN drops it, SIG_DFL acts -------------------- */

static void *nothing(void *arg)
{
	return arg;
}

/* A process of its own sends s to this one n times, and is waited for. */
static void from_outside(int s, int n)
{
	pid_t me = getpid(), c = fork();
	if (c == 0) {
		for (int i = 0; i < n; i++)
			kill(me, s);
		_exit(0);
	}
	int st;
	waitpid(c, &st, 0);
}

/* SIGUSR1 with a handler (run once), then SIG_IGN, then sent 50 times by
 * another process and 50 by this one: dropped; the handler back: it runs
 * again.  (Under weft the signal thread keeps blocking a signal that had
 * a handler, and the router does what the kernel would: signal.c,
 * unhandled.) */
static void case_handler_gone(void)
{
	pthread_t t;
	pthread_create(&t, NULL, nothing, NULL);
	pthread_join(t, NULL);
	catch(SIGUSR1, 0);
	kill(getpid(), SIGUSR1);
	say("handler: ran once", atomic_load(&handled) == 1);
	signal(SIGUSR1, SIG_IGN);
	from_outside(SIGUSR1, 50);
	for (int i = 0; i < 50; i++)
		kill(getpid(), SIGUSR1);
	raise(SIGUSR1);
	say("SIG_IGN: 101 dropped, still here", atomic_load(&handled) == 1);
	catch(SIGUSR1, 0);
	kill(getpid(), SIGUSR1);
	say("handler again: ran", atomic_load(&handled) == 2);
}

/* SIGUSR2 with a handler, then SIG_DFL, then sent (by this process, or
 * another): killed by it, as natively, never past the wait. */
static void gone_dfl(bool self)
{
	pthread_t t;
	pthread_create(&t, NULL, nothing, NULL);
	pthread_join(t, NULL);
	catch(SIGUSR2, 0);
	raise(SIGUSR2);
	say("handler: ran once", atomic_load(&handled) == 1);
	signal(SIGUSR2, SIG_DFL);
	say("SIG_DFL put back", 1);
	if (self)
		kill(getpid(), SIGUSR2);
	else
		from_outside(SIGUSR2, 1);
	for (int i = 0; i < 300; i++) /* 30 s: killed long before */
		usleep(100000);
	say("SIG_DFL: killed by SIGUSR2", 0);
}

static void case_gone_dfl_self(void)
{
	gone_dfl(true);
}

static void case_gone_dfl_out(void)
{
	gone_dfl(false);
}

/* A SIGPIPE handler that puts SIG_DFL back and raises it again (as
 * sort's and other coreutils' do): the raise stays pending while the
 * handler blocks SIGPIPE and kills the process when it returns, before
 * the write that failed does.  On a thread other than main (main waits
 * in waitpid, which keeps its OS thread, so the writer runs on an OS
 * thread whose tid is not the pid).  The child ends when we do: EOF on
 * its pipe. */
static int rr_pipe[2];

static void rr_handler(int s)
{
	signal(s, SIG_DFL);
	raise(s);
}

static void *rr_writer(void *arg)
{
	(void)arg;
	int p[2];
	if (pipe(p) != 0)
		return NULL;
	close(p[0]);
	ssize_t n = write(p[1], "x", 1);
	say("pipe_reraise: killed by the raise in the handler", n == 1 && 0);
	close(rr_pipe[1]); /* the child ends: main goes on */
	return NULL;
}

static void case_pipe_reraise(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = rr_handler;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT); /* sort's has more than SIGPIPE */
	sigaction(SIGPIPE, &sa, NULL);
	if (pipe(rr_pipe) != 0)
		return;
	pid_t c = fork();
	if (c == 0) {
		char b;
		close(rr_pipe[1]);
		while (read(rr_pipe[0], &b, 1) > 0)
			;
		_exit(0);
	}
	close(rr_pipe[0]);
	say("pipe_reraise: SIGPIPE handler in", 1);
	pthread_t t;
	pthread_create(&t, NULL, rr_writer, NULL);
	waitpid(c, NULL, 0);
	pthread_join(t, NULL);
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "read", case_read },
	{ "accept", case_accept },
	{ "poll", case_poll },
	{ "sleep", case_sleep },
	{ "nanosleep", case_nanosleep },
	{ "sem", case_sem },
	{ "compute", case_compute },
	{ "spin", case_spin },
	{ "spin_libc", case_spin_libc },
	{ "alarm_spin", case_alarm_spin },
	{ "longjmp", case_longjmp },
	{ "restart", case_restart },
	{ "kill_accept", case_kill_accept },
	{ "kill_tls", case_kill_tls },
	{ "kill_waitpid", case_kill_waitpid },
	{ "tgkill", case_tgkill },
	{ "masks", case_masks },
	{ "pipe_flips", case_pipe_flips },
	{ "pipe_mixed", case_pipe_mixed },
	{ "pipe_nb", case_pipe_nb },
	{ "pipe_allblock", case_pipe_allblock },
	{ "xfsz", case_xfsz },
	{ "handler_mask", case_handler_mask },
	{ "idle_block", case_idle_block },
	{ "jump_mask", case_jump_mask },
	{ "pipe_handler_park", case_pipe_handler_park },
	{ "xfsz_handler_park", case_xfsz_handler_park },
	{ "storm", case_storm },
	{ "sigwait", case_sigwait },
	{ "sigwait_busy", case_sigwait_busy },
	{ "sigwait_rounds", case_sigwait_rounds },
	{ "cancel", case_cancel },
	{ "handler_gone", case_handler_gone },
	{ "gone_dfl_self", case_gone_dfl_self },
	{ "pipe_reraise", case_pipe_reraise },
	{ "gone_dfl_out", case_gone_dfl_out },
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sigintr CASE\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (strcmp(argv[1], cases[i].name) == 0) {
			cases[i].fn();
			return failures ? 1 : 0;
		}
	fprintf(stderr, "sigintr: no case %s\n", argv[1]);
	return 2;
}
