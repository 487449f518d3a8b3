/*
 * realprogs.c - what real programs did under weft run that they do not
 * do natively, each reduced to a small plain threaded program (the
 * program it came from in each case's comment; docs/preload.md,
 * "Programs tried").  The output must be the same with and without weft.
 *
 * realprogs CASE [N]: prints one line per check ("ok ..." or "FAIL ...")
 * and exits 0 if all held.  Cases: itimer_sleep, pidfd_self, sigwait_kill,
 * sigwait_ignored, setxid, sigaction_raise, write_alarm, itimer_dfl,
 * yield_rendezvous, pending_unblocked.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static void *nop(void *arg)
{
	return arg;
}

/* One thread made and joined: under weft the runtime is running from
 * here on (main is a green thread on some OS thread). */
static void start_threads(void)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, nop, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
}

/* ---- itimer_sleep ------------------------------------------------------------------ */

static volatile sig_atomic_t alarms;

static void on_alarm(int s)
{
	(void)s;
	alarms++;
}

/* Python's test_signal (StressTest.test_stress_delivery_dependent): a
 * 1-10 us ITIMER_REAL, and the main thread waits for each SIGALRM in a
 * loop of 10 us nanosleeps.  Each sleep is a wait the signal interrupts
 * while its deadline is about due: under weft the G was resumed on two
 * OS threads at once within a few hundred rounds (a crash in the switch,
 * or the G left marked as inside the runtime, its signals never run: a
 * hang). */
static void itimer_sleep(int n)
{
	start_threads();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	unsigned seed = 1;
	for (int i = 0; i < n; i++) {
		struct itimerval it = { { 0, 0 }, { 0, 1 + rand_r(&seed) % 10 } };
		CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
		while (alarms <= i) {
			struct timespec ts = { 0, 10000 };
			nanosleep(&ts, NULL);
		}
	}
	printf("ok %d alarms, each taken while sleeping\n", (int)alarms);
}

/* ---- pidfd_self --------------------------------------------------------------------- */

static volatile sig_atomic_t usr1;

static void on_usr1(int s)
{
	(void)s;
	usr1++;
}

/* Python's test_signal (PidfdSignalTest): pidfd_send_signal of a signal
 * to its own process, through syscall(), on a pidfd and on a /proc/PID
 * directory: the handler has run when the call returns, as the kernel
 * runs it on the sending main thread.  Under weft it ran later, on the
 * router's next round (Python raised KeyboardInterrupt outside the
 * assertRaises block and the test run died of SIGINT). */
static void pidfd_self(void)
{
	start_threads();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	int fds[2];
	fds[0] = (int)syscall(SYS_pidfd_open, getpid(), 0);
	char proc[32];
	snprintf(proc, sizeof proc, "/proc/%d", (int)getpid());
	fds[1] = open(proc, O_DIRECTORY | O_RDONLY);
	CHECK(fds[0] >= 0 && fds[1] >= 0);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 100; i++) {
			int before = usr1;
			CHECK(syscall(SYS_pidfd_send_signal, fds[k], SIGUSR1, NULL, 0) == 0);
			if (usr1 != before + 1)
				FAIL("%s: the handler had not run when the call returned (round %d)",
				     k ? "/proc/PID" : "pidfd", i);
		}
	CHECK(syscall(SYS_pidfd_send_signal, fds[0], 0, NULL, 0) == 0);
	CHECK(syscall(SYS_pidfd_send_signal, -1, SIGUSR1, NULL, 0) == -1 && errno == EBADF);
	printf("ok 200 handlers run before pidfd_send_signal returned\n");
}

/* ---- sigwait_kill ---------------------------------------------------------------------- */

static void *sigwaiter(void *arg)
{
	sigset_t *set = arg;
	int sig = 0;
	CHECK(sigwait(set, &sig) == 0);
	return (void *)(long)sig;
}

/* pbzip2: a thread sigwaits for the termination signals (all threads
 * block them); at the end main wakes it with pthread_kill and joins it.
 * Under weft the signal was left pending on the parked G and the join
 * never returned (its output was complete, it never exited).  Then n
 * rounds more with 0-190 us between the create and the kill, so that
 * some land while the thread is on its way into sigwait: one landing
 * between its look at the G's pending signals and its reading of the
 * watcher's generation was missed by both, and the sigwait waited for
 * good (hook/preload/signal.c, g_sigwait). */
static void sigwait_kill(int n)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGTERM);
	CHECK(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0);
	for (int i = 0; i < 20 + n; i++) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, sigwaiter, &set) == 0);
		/* let it reach sigwait: either way it must end */
		struct timespec ts = { 0, i < 20 ? 20000000 : (i % 20) * 10000 };
		nanosleep(&ts, NULL);
		CHECK(pthread_kill(t, SIGQUIT) == 0);
		void *r;
		CHECK(pthread_join(t, &r) == 0);
		if ((long)r != SIGQUIT)
			FAIL("sigwait gave %ld", (long)r);
	}
	printf("ok %d threads in sigwait woken by pthread_kill\n", 20 + n);
}

/* ---- sigwait_ignored ------------------------------------------------------------------- */

/* A signal that is blocked and ignored is still queued by Linux (a
 * blocked signal is never discarded: its disposition may change before
 * it is unblocked), so sigwait, sigtimedwait and a signalfd take it.
 * Seen under weft: a program in sigwait for a pthread_kill'd SIGQUIT
 * that the shell had left ignored waited for good.  All threads block
 * the signals (as the kernel needs for kill: it looks at the main
 * thread's mask) before any is made. */
static sigset_t igset;

static void *igwaiter(void *arg)
{
	(void)arg;
	int sig = 0;
	CHECK(sigwait(&igset, &sig) == 0);
	return (void *)(long)sig;
}

static int igtimedwait(void)
{
	struct timespec ts = { 30, 0 }; /* a hang detector: it is pending already */
	return sigtimedwait(&igset, NULL, &ts);
}

static void sigwait_ignored(void)
{
	sigemptyset(&igset);
	sigaddset(&igset, SIGQUIT);
	sigaddset(&igset, SIGUSR1);
	CHECK(signal(SIGQUIT, SIG_IGN) != SIG_ERR);
	CHECK(signal(SIGUSR1, SIG_IGN) != SIG_ERR);
	CHECK(pthread_sigmask(SIG_BLOCK, &igset, NULL) == 0);
	start_threads();
	int sig = 0;
	/* raise: to this thread */
	CHECK(raise(SIGQUIT) == 0);
	CHECK(sigwait(&igset, &sig) == 0 && sig == SIGQUIT);
	/* kill: to the process, taken by this thread */
	CHECK(kill(getpid(), SIGUSR1) == 0);
	CHECK(sigwait(&igset, &sig) == 0 && sig == SIGUSR1);
	/* sigtimedwait, pending before it */
	CHECK(kill(getpid(), SIGQUIT) == 0);
	CHECK(igtimedwait() == SIGQUIT);
	CHECK(pthread_kill(pthread_self(), SIGUSR1) == 0);
	CHECK(igtimedwait() == SIGUSR1);
	/* pthread_kill to a thread in sigwait, and kill to the process with
	 * another thread in sigwait */
	for (int i = 0; i < 10; i++) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, igwaiter, NULL) == 0);
		struct timespec ts = { 0, 5000000 }; /* let it reach sigwait: either way it must end */
		nanosleep(&ts, NULL);
		if (i % 2)
			CHECK(pthread_kill(t, SIGQUIT) == 0);
		else
			CHECK(kill(getpid(), SIGQUIT) == 0);
		void *r;
		CHECK(pthread_join(t, &r) == 0);
		if ((long)r != SIGQUIT)
			FAIL("round %d: sigwait gave %ld", i, (long)r);
	}
	/* a signalfd reads it */
	int fd = signalfd(-1, &igset, SFD_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(kill(getpid(), SIGUSR1) == 0);
	struct signalfd_siginfo si;
	CHECK(read(fd, &si, sizeof si) == (ssize_t)sizeof si && si.ssi_signo == SIGUSR1);
	close(fd);
	/* nothing left over */
	sigset_t pend;
	CHECK(sigpending(&pend) == 0);
	CHECK(!sigismember(&pend, SIGQUIT) && !sigismember(&pend, SIGUSR1));
	printf("sigwait_ignored: ok\n");
}

/* ---- setxid ----------------------------------------------------------------------------- */

static pthread_mutex_t xmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t xcv = PTHREAD_COND_INITIALIZER;
static int xready;
static bool xgo;

static void *xwaiter(void *arg)
{
	pthread_mutex_lock(&xmu);
	xready++;
	pthread_cond_broadcast(&xcv);
	while (!xgo)
		pthread_cond_wait(&xcv, &xmu);
	pthread_mutex_unlock(&xmu);
	return arg;
}

/* Every OS thread of the process has uid, gid and (if ng >= 0) the one
 * supplementary group g (/proc/self/task/T/status: four ids each). */
static void same_ids_everywhere(uid_t uid, gid_t gid, int ng, gid_t g)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;
	CHECK(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], line[512];
		snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; /* ended */
		unsigned u[4], gg[4];
		int have = 0;
		while (fgets(line, sizeof line, f)) {
			if (sscanf(line, "Uid: %u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4) {
				for (int i = 0; i < 4; i++)
					if (u[i] != uid)
						FAIL("thread %s: uid %u, not %u", e->d_name, u[i], (unsigned)uid);
				have++;
			} else if (sscanf(line, "Gid: %u %u %u %u", &gg[0], &gg[1], &gg[2], &gg[3]) == 4) {
				for (int i = 0; i < 4; i++)
					if (gg[i] != gid)
						FAIL("thread %s: gid %u, not %u", e->d_name, gg[i], (unsigned)gid);
				have++;
			} else if (ng >= 0 && !strncmp(line, "Groups:", 7)) {
				unsigned x;
				int k = sscanf(line + 7, "%u", &x);
				if (ng == 0 ? k == 1 : k != 1 || x != g)
					FAIL("thread %s: %s", e->d_name, line);
			}
		}
		fclose(f);
		CHECK(have == 2);
		n++;
	}
	closedir(d);
	CHECK(n >= 1);
}

/* The ids changed by the calling thread, then on every thread: as root
 * to nobody (65534), groups included; else to the ids it has (the
 * calls still reach every thread). */
static void drop_ids(bool root)
{
	if (root) {
		gid_t g = 65534;
		CHECK(initgroups("nobody", 65534) == 0); /* glibc's calls setgroups inside */
		CHECK(setgroups(1, &g) == 0);
		CHECK(setresgid(65534, 65534, 65534) == 0);
		CHECK(setgid(65534) == 0);
		CHECK(setegid(65534) == 0);
		CHECK(setregid(65534, 65534) == 0);
		CHECK(setresuid(65534, 65534, 65534) == 0);
		CHECK(setuid(65534) == 0 && seteuid(65534) == 0 && setreuid(65534, 65534) == 0);
		errno = 0;
		CHECK(setuid(0) == -1 && errno == EPERM); /* a failure changes nothing */
		same_ids_everywhere(65534, 65534, 1, 65534);
	} else {
		uid_t u = getuid();
		gid_t g = getgid();
		CHECK(setgid(g) == 0 && setregid(g, g) == 0 && setresgid(g, g, g) == 0);
		CHECK(setuid(u) == 0 && setreuid(u, u) == 0 && setresuid(u, u, u) == 0);
		same_ids_everywhere(u, g, -1, 0);
	}
}

/* CPython's test_subprocess test_extra_groups (setgroups in the child of
 * a threaded process, before exec), and daemons dropping root after
 * their threads started: glibc changes the ids on every thread by
 * signalling each, and under weft it signalled its own OS thread forever
 * (a G's THREAD_SELF is not its OS thread's).  N threads wait; a child
 * of fork drops its ids, then this process. */
static void setxid_case(int n)
{
	bool root = geteuid() == 0;
	pthread_t *t = calloc((size_t)n, sizeof *t);
	CHECK(t);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, xwaiter, NULL) == 0);
	pthread_mutex_lock(&xmu);
	while (xready < n)
		pthread_cond_wait(&xcv, &xmu);
	pthread_mutex_unlock(&xmu);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		drop_ids(root);
		_exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		FAIL("the child: status %d", st);
	drop_ids(root);
	pthread_mutex_lock(&xmu);
	xgo = true;
	pthread_cond_broadcast(&xcv);
	pthread_mutex_unlock(&xmu);
	for (int i = 0; i < n; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	free(t);
	printf("ok ids changed on every thread, %d threads, in a child and here\n", n);
}

/* ---- sigaction_raise ---------------------------------------------------------------------
 * CPython's test_signal test_stress_modifying_handlers: one thread
 * raises SIGUSR1 in a loop while main switches its disposition between
 * a handler and SIG_IGN.  Natively 4,000 sigaction calls take 0.03 s;
 * under weft run --procs 2 they took 6-25 s: each sigaction waits for
 * the signal thread to take the new dispositions (hook/preload/signal.c
 * masks_apply), and the signal thread, woken by an SA_RESTART signal,
 * slept on in its restarted futex wait, so every sigaction waited out
 * the 2 ms backstop (now 100 ms: a lost wake-up is then a timeout of
 * the test, not a slow pass).  Prints "ok" when done. */
static atomic_int sr_stop, sr_sent;

static void sr_handler(int s)
{
	(void)s;
}

static void *sr_raiser(void *arg)
{
	(void)arg;
	while (!atomic_load(&sr_stop)) {
		raise(SIGUSR1);
		atomic_fetch_add(&sr_sent, 1);
	}
	return NULL;
}

static void sigaction_raise(int n)
{
	struct sigaction on, off;
	memset(&on, 0, sizeof on);
	on.sa_handler = sr_handler;
	memset(&off, 0, sizeof off);
	off.sa_handler = SIG_IGN;
	CHECK(sigaction(SIGUSR1, &on, NULL) == 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, sr_raiser, NULL) == 0);
	for (int i = 0; i < n; i++)
		CHECK(sigaction(SIGUSR1, &on, NULL) == 0 && sigaction(SIGUSR1, &off, NULL) == 0);
	atomic_store(&sr_stop, 1);
	CHECK(pthread_join(t, NULL) == 0);
	printf("ok %d sigaction pairs while a thread raised the signal\n", n);
}

/* ---- write_alarm -------------------------------------------------------------------------
 * CPython's test_io (SignalsTest.check_interrupted_write_retry): main
 * writes 4 MiB + 1 into a pipe nobody reads; SIGALRM (a handler without
 * SA_RESTART) cuts the first write short (one pipe's worth written), its
 * handler arms a second alarm, which makes the next write fail with
 * EINTR, and that handler starts a reader (select with a 1 s timeout,
 * 1 KiB reads) that lets the write finish.  A thread that blocks every
 * signal waits meanwhile (regrtest's faulthandler watchdog).  Prints
 * what each write returned. */
static volatile sig_atomic_t wa_alarm;
static int wa_fd;
static atomic_int wa_done;
static atomic_long wa_read;
static sem_t wa_wd;

static void wa_on_alarm(int s)
{
	(void)s;
	wa_alarm = 1;
}

static void *wa_reader(void *arg)
{
	char buf[1024];
	while (!atomic_load(&wa_done))
		for (;;) {
			fd_set rs;
			FD_ZERO(&rs);
			FD_SET(wa_fd, &rs);
			struct timeval tv = { 1, 0 };
			int n = select(wa_fd + 1, &rs, NULL, NULL, &tv);
			CHECK(n >= 0);
			if (n == 0)
				break;
			ssize_t k = read(wa_fd, buf, sizeof buf);
			CHECK(k > 0);
			atomic_fetch_add(&wa_read, k);
		}
	return arg;
}

static void *wa_watchdog(void *arg)
{
	sigset_t all;
	sigfillset(&all);
	CHECK(pthread_sigmask(SIG_SETMASK, &all, NULL) == 0);
	struct timespec ts;
	CHECK(clock_gettime(CLOCK_REALTIME, &ts) == 0);
	ts.tv_sec += 3600;
	while (sem_timedwait(&wa_wd, &ts) != 0)
		CHECK(errno == EINTR);
	return arg;
}

static void wa_arm(int ms)
{
	struct itimerval it = { { 0, 0 }, { ms / 1000, ms % 1000 * 1000 } };
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
}

static void write_alarm(int ms)
{
	pthread_t wd, rd;
	CHECK(sem_init(&wa_wd, 0, 0) == 0);
	CHECK(pthread_create(&wd, NULL, wa_watchdog, NULL) == 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = wa_on_alarm;
	sa.sa_flags = SA_ONSTACK; /* as Python's */
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	int p[2];
	CHECK(pipe(p) == 0);
	wa_fd = p[0];
	size_t n = 4 * 1024 * 1024 + 1, done = 0;
	char *buf = malloc(n);
	CHECK(buf);
	memset(buf, 'x', n);
	wa_arm(ms);
	int phase = 0;
	while (done < n) {
		ssize_t k = write(p[1], buf + done, n - done);
		if (k < 0) {
			CHECK(errno == EINTR);
			printf("write: EINTR\n");
		} else {
			done += (size_t)k;
			printf("write: %s\n", done < n ? "short" : "the rest");
		}
		if (wa_alarm) {
			wa_alarm = 0;
			if (++phase == 1)
				wa_arm(ms);
			else if (phase == 2)
				CHECK(pthread_create(&rd, NULL, wa_reader, NULL) == 0);
		}
	}
	CHECK(phase == 2);
	atomic_store(&wa_done, 1);
	CHECK(pthread_join(rd, NULL) == 0);
	CHECK(atomic_load(&wa_read) == (long)n);
	CHECK(sem_post(&wa_wd) == 0 && pthread_join(wd, NULL) == 0);
	close(p[0]);
	close(p[1]);
	free(buf);
	printf("ok %zu bytes written and read\n", n);
}

/* ---- itimer_dfl ---------------------------------------------------------------------------
 * CPython's test_eintr (_test_eintr.py, every test's tearDown): a
 * SIGALRM handler and a periodic ITIMER_REAL while the test runs, then
 * setitimer(0) and the default disposition put back.  Natively no
 * SIGALRM is left to act after that: one that came before setitimer
 * returned was handled then (with the handler).  Under weft one still
 * on its way to the G (in the router's signalfd, or routed and not yet
 * run) met SIG_DFL and killed the process (exit code -14). */
static volatile sig_atomic_t id_alarms;

static void id_on_alarm(int s)
{
	(void)s;
	id_alarms++;
}

static void itimer_dfl(int n)
{
	start_threads();
	unsigned seed = 7;
	for (int i = 0; i < n; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = id_on_alarm;
		CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
		struct itimerval it = { { 0, 20 }, { 0, 20 } };
		CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
		int want = id_alarms + 1 + (int)(rand_r(&seed) % 3);
		while (id_alarms < want)
			(void)getppid(); /* where the signal comes back from a system call */
		struct itimerval off = { { 0, 0 }, { 0, 0 } };
		CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
		CHECK(signal(SIGALRM, SIG_DFL) != SIG_ERR);
	}
	printf("ok %d rounds: no SIGALRM acted on after its timer stopped\n", n);
}

/* ---- yield_rendezvous --------------------------------------------------------------------
 * haproxy's `show threads` (debug.c, ha_thread_dump_all_to_trash and
 * debug_handler): the thread serving the command sends SIGURG to every
 * other thread with pthread_kill, each of them sitting in epoll_wait,
 * then raises it to itself; every handler spins with sched_yield until
 * all the handlers have arrived, then they dump one after another.
 * Natively the kernel runs every spinning thread in turn.  Under weft a
 * G's sched_yield gave up only its OS thread's time slice, not its P:
 * two handlers spinning on 2 Ps (one on 1 P) kept the other Gs, their
 * handlers pending, from running, and haproxy hung for good.  T threads,
 * N rounds; each round's arrivals counted. */
#define YR_T 3 /* threads beside main, as haproxy's nbthread 4 */
static atomic_int yr_in;      /* handlers arrived so far, all rounds */
static atomic_int yr_target;  /* arrivals that end this round's spin */
static atomic_int yr_stop;    /* set when the threads are to leave */
static int yr_ep[YR_T];       /* each thread's epoll fd */
static int yr_pipe[2];        /* its read end in every epoll set: the end */

/* How a round spins: sched_yield, or its other names, which glibc
 * implements with the system call inside libc (past an interposed
 * sched_yield): C11's thrd_yield, and pthread_yield as binaries linked
 * before glibc 2.34 call it - a compat symbol now (pthread.h renames
 * the C name to sched_yield), bound here by version. */
int compat_pthread_yield(void) __asm__("pthread_yield");
__asm__(".symver pthread_yield, pthread_yield@GLIBC_2.2.5");
static void yr_sched(void) { sched_yield(); }
static void yr_pthread(void) { compat_pthread_yield(); }
static void yr_thrd(void) { thrd_yield(); }
static void (*yr_yield)(void) = yr_sched;

static void yr_handler(int s)
{
	(void)s;
	int saved = errno;
	int target = atomic_load(&yr_target); /* this round's: the next is set after it */
	atomic_fetch_add(&yr_in, 1);
	while (atomic_load(&yr_in) < target)
		yr_yield();
	errno = saved;
}

static void *yr_thread(void *arg)
{
	int ep = *(int *)arg;
	struct epoll_event ev;
	while (!atomic_load(&yr_stop)) {
		int n = epoll_wait(ep, &ev, 1, -1);
		CHECK(n == 1 || (n < 0 && errno == EINTR));
	}
	return NULL;
}

static void yield_rendezvous(int n)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = yr_handler;
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGURG, &sa, NULL) == 0);
	CHECK(pipe(yr_pipe) == 0);
	pthread_t t[YR_T];
	for (int i = 0; i < YR_T; i++) {
		yr_ep[i] = epoll_create1(0);
		CHECK(yr_ep[i] >= 0);
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = yr_pipe[0] };
		CHECK(epoll_ctl(yr_ep[i], EPOLL_CTL_ADD, yr_pipe[0], &ev) == 0);
		CHECK(pthread_create(&t[i], NULL, yr_thread, &yr_ep[i]) == 0);
	}
	for (int r = 0; r < n; r++) {
		atomic_store(&yr_target, (r + 1) * (YR_T + 1));
		for (int i = 0; i < YR_T; i++)
			CHECK(pthread_kill(t[i], SIGURG) == 0);
		CHECK(raise(SIGURG) == 0); /* returns once our handler has */
		while (atomic_load(&yr_in) < (r + 1) * (YR_T + 1))
			yr_yield();
	}
	atomic_store(&yr_stop, 1);
	CHECK(write(yr_pipe[1], "x", 1) == 1);
	for (int i = 0; i < YR_T; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	printf("ok %d rounds: %d handlers met spinning in sched_yield each round\n", n,
	       YR_T + 1);
}

/* Python's test_signal, test_sigpending_empty right after a test that
 * ran a subprocess (procs 1, once in 11 runs): sigpending() said
 * SIGCHLD.  The kernel sends a child's SIGCHLD to the thread that
 * forked it - under weft an M, which blocks every signal - so it is not
 * discarded as an ignored one is natively but stays pending until the
 * signal thread takes (and ignores) it, and sigpending() on the M saw
 * it meanwhile.  The kernel's sigpending is what is pending AND blocked
 * by the caller; under weft the caller is the G (hook/preload/signal.c).
 * A signal sent to the M itself with a raw tgkill, which no hook sees,
 * stays pending on the M for good: the case that fails every run. */
static long raw3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}

static void pending_unblocked(int rounds)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, nop, NULL) == 0); /* main is a G from now on */
	CHECK(pthread_join(t, NULL) == 0);
	sigset_t pend;
	/* SIGWINCH (ignored by default, not blocked here) to this OS thread */
	CHECK(raw3(SYS_tgkill, getpid(), raw3(SYS_gettid, 0, 0, 0), SIGWINCH) == 0);
	CHECK(sigpending(&pend) == 0);
	CHECK(!sigismember(&pend, SIGWINCH));
	/* children's SIGCHLD, not blocked here */
	for (int i = 0; i < rounds; i++) {
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(0);
		int st;
		CHECK(waitpid(pid, &st, 0) == pid);
		CHECK(sigpending(&pend) == 0);
		if (sigismember(&pend, SIGCHLD))
			FAIL("round %d: SIGCHLD pending, not blocked", i);
	}
	/* what the caller blocks still shows, its own and the process's */
	sigset_t b;
	sigemptyset(&b);
	sigaddset(&b, SIGUSR1);
	sigaddset(&b, SIGUSR2);
	CHECK(pthread_sigmask(SIG_BLOCK, &b, NULL) == 0);
	CHECK(raise(SIGUSR1) == 0);
	CHECK(kill(getpid(), SIGUSR2) == 0);
	CHECK(sigpending(&pend) == 0);
	CHECK(sigismember(&pend, SIGUSR1) && sigismember(&pend, SIGUSR2));
	CHECK(!sigismember(&pend, SIGWINCH) && !sigismember(&pend, SIGCHLD));
	int s;
	CHECK(sigwait(&b, &s) == 0);
	CHECK(sigwait(&b, &s) == 0);
	CHECK(sigpending(&pend) == 0);
	CHECK(!sigismember(&pend, SIGUSR1) && !sigismember(&pend, SIGUSR2));
	printf("pending_unblocked: ok\n");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		FAIL("usage: realprogs CASE [N]");
	int n = argc > 2 ? atoi(argv[2]) : 0;
	if (!strcmp(argv[1], "itimer_sleep"))
		itimer_sleep(n > 0 ? n : 3000);
	else if (!strcmp(argv[1], "pidfd_self"))
		pidfd_self();
	else if (!strcmp(argv[1], "sigwait_kill"))
		sigwait_kill(n);
	else if (!strcmp(argv[1], "sigwait_ignored"))
		sigwait_ignored();
	else if (!strcmp(argv[1], "sigaction_raise"))
		sigaction_raise(n > 0 ? n : 2000);
	else if (!strcmp(argv[1], "setxid"))
		setxid_case(n > 0 ? n : 8);
	else if (!strcmp(argv[1], "itimer_dfl"))
		itimer_dfl(n > 0 ? n : 100);
	else if (!strcmp(argv[1], "yield_rendezvous"))
		yield_rendezvous(n > 0 ? n : 300);
	else if (!strcmp(argv[1], "yield_rendezvous_pthread"))
		yr_yield = yr_pthread, yield_rendezvous(n > 0 ? n : 300);
	else if (!strcmp(argv[1], "yield_rendezvous_thrd"))
		yr_yield = yr_thrd, yield_rendezvous(n > 0 ? n : 300);
	else if (!strcmp(argv[1], "write_alarm"))
		write_alarm(n > 0 ? n : 200);
	else if (!strcmp(argv[1], "pending_unblocked"))
		pending_unblocked(n > 0 ? n : 200);
	else
		FAIL("no case %s", argv[1]);
	return 0;
}
