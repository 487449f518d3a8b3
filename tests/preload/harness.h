/*
 * harness.h - for the test_preload* suites: find the shim, the launcher
 * and the test programs, and run a command (with or without the shim)
 * collecting its status, stdout, stderr and time.
 *
 * Paths come from where libweft.so was loaded from (BUILD/lib): the
 * shim beside it, the launcher in BUILD/bin, the test programs (built
 * by tests/preload.mk) in BUILD/tests/preload.  PRELOAD_SRCDIR is the
 * source directory (tests/preload).  Under SAN=address or SAN=thread every
 * test is skipped (see h_paths); SAN=undefined runs them.
 */
#ifndef WEFT_PRELOAD_HARNESS_H
#define WEFT_PRELOAD_HARNESS_H

#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

#include "../runner.h"

#ifndef PRELOAD_SRCDIR
#define PRELOAD_SRCDIR "tests/preload"
#endif
#ifndef PRELOAD_SAN
#define PRELOAD_SAN ""
#endif

static char h_lib[PATH_MAX];        /* BUILD/lib */
static char h_shim[PATH_MAX + 64];  /* BUILD/lib/libweft_preload.so */
static char h_weft[PATH_MAX + 64];  /* BUILD/bin/weft */
static char h_preload_env[3 * PATH_MAX]; /* LD_PRELOAD for the shim (+ ASan first) */

static __attribute__((unused)) void h_paths(void)
{
	/* A shim built with ASan or TSan cannot be preloaded into a program
	 * built without: its runtime must come first and own every thread,
	 * and green threads are not threads to it. */
	if (strstr(PRELOAD_SAN, "address") || strstr(PRELOAD_SAN, "thread"))
		cr_skip_test("SAN=%s: the sanitized shim cannot be preloaded into plain programs",
			     PRELOAD_SAN);
	if (h_lib[0])
		return;
	Dl_info di;
	cr_assert(dladdr((void *)weft_self, &di) && di.dli_fname, "where is libweft.so?");
	char *real = realpath(di.dli_fname, NULL);
	cr_assert(real);
	snprintf(h_lib, sizeof h_lib, "%s", real);
	free(real);
	*strrchr(h_lib, '/') = 0;
	snprintf(h_shim, sizeof h_shim, "%s/libweft_preload.so", h_lib);
	snprintf(h_weft, sizeof h_weft, "%s/../bin/weft", h_lib);
	cr_assert(access(h_shim, R_OK) == 0, "no %s", h_shim);
	cr_assert(access(h_weft, X_OK) == 0, "no %s", h_weft);
	/* a sanitizer build of the shim needs its runtime loaded first */
	h_preload_env[0] = 0;
	if (strstr(PRELOAD_SAN, "address")) {
		FILE *p = popen("${CC:-cc} -print-file-name=libasan.so", "r");
		char asan[PATH_MAX] = "";
		if (p && fgets(asan, sizeof asan, p))
			asan[strcspn(asan, "\n")] = 0;
		if (p)
			pclose(p);
		snprintf(h_preload_env, sizeof h_preload_env, "%s:", asan);
	}
	strncat(h_preload_env, h_shim, sizeof h_preload_env - strlen(h_preload_env) - 1);
}

/* BUILD/tests/preload/name */
static __attribute__((unused)) const char *h_prog(const char *name)
{
	static char path[8][PATH_MAX + 64];
	static int next;
	h_paths();
	char *p = path[next++ % 8];
	snprintf(p, PATH_MAX + 64, "%s/../tests/preload/%.40s", h_lib, name);
	cr_assert(access(p, X_OK) == 0, "no test program %s (tests/preload.mk builds it)", p);
	return p;
}

struct hrun {
	int status;
	double secs;
	size_t nout;
	char out[1 << 20];
	char err[1 << 16];
};

/* Run argv with env changes ("NAME=value" sets, "NAME" unsets), in dir
 * (NULL: here).  Kills it after timeout_s * test_slow() (a hang detector). */
static void h_run(struct hrun *r, const char *const argv[], const char *const env[], const char *dir,
		  int timeout_s)
{
	int op[2], ep[2];
	cr_assert(pipe2(op, O_CLOEXEC) == 0 && pipe2(ep, O_CLOEXEC) == 0);
	timeout_s *= test_slow();
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(op[1], 1);
		dup2(ep[1], 2);
		int devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, 0);
		setpgid(0, 0);
		for (int i = 0; env && env[i]; i++) {
			const char *eq = strchr(env[i], '=');
			if (eq) {
				char name[256];
				snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
				setenv(name, eq + 1, 1);
			} else {
				unsetenv(env[i]);
			}
		}
		if (dir && chdir(dir) != 0)
			_exit(126);
		/* a shell's background job inherits SIGINT and SIGQUIT ignored:
		 * the programs run with every disposition at its default */
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(op[1]);
	close(ep[1]);
	size_t n[2] = { 0, 0 };
	char *bufs[2] = { r->out, r->err };
	size_t caps[2] = { sizeof r->out, sizeof r->err };
	struct pollfd p[2] = { { op[0], POLLIN, 0 }, { ep[0], POLLIN, 0 } };
	int open_ = 2;
	bool killed = false;
	while (open_ > 0) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (el > timeout_s && !killed) {
			kill(-pid, SIGKILL);
			killed = true;
		}
		if (poll(p, 2, 100) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			char sink[4096];
			bool room = n[i] + 1 < caps[i];
			ssize_t k = read(p[i].fd, room ? bufs[i] + n[i] : sink,
					 room ? caps[i] - 1 - n[i] : sizeof sink);
			if (k <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open_--;
			} else if (room) {
				n[i] += (size_t)k;
			}
		}
	}
	r->out[n[0]] = 0;
	r->err[n[1]] = 0;
	r->nout = n[0];
	while (waitpid(pid, &r->status, 0) < 0 && errno == EINTR)
		;
	kill(-pid, SIGKILL); /* anything it left behind */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r->secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert(!killed, "%s timed out after %d s; stderr: %s", argv[0], timeout_s, r->err);
}

static __attribute__((unused)) bool h_asan(void)
{
	return strstr(PRELOAD_SAN, "address") != NULL;
}

/* h_shim_run: argv under the shim: "weft run [--procs N] argv..." (with
 * --no-children while h_nochildren is set).  In an ASan
 * build the ASan runtime must be the first library, ahead of the shim,
 * which the launcher cannot arrange: LD_PRELOAD is set directly. */
static bool h_nochildren;
static __attribute__((unused)) void h_shim_run(struct hrun *r, int procs, const char *const argv[], const char *const env[],
		   const char *dir, int timeout_s)
{
	h_paths();
	const char *a[64], *e[32];
	int k = 0, j = 0;
	char pr[16], pre[sizeof h_preload_env + 16], mp[32];
	snprintf(pr, sizeof pr, "%d", procs);
	if (h_asan()) {
		snprintf(pre, sizeof pre, "LD_PRELOAD=%s", h_preload_env);
		e[j++] = pre;
		if (procs > 0) {
			snprintf(mp, sizeof mp, "WEFT_MAXPROCS=%d", procs);
			e[j++] = mp;
		}
	} else {
		a[k++] = h_weft;
		a[k++] = "run";
		if (procs > 0) {
			a[k++] = "--procs";
			a[k++] = pr;
		}
		if (h_nochildren)
			a[k++] = "--no-children";
		a[k++] = "--";
	}
	for (int i = 0; argv[i] && k < 63; i++)
		a[k++] = argv[i];
	a[k] = NULL;
	for (int i = 0; env && env[i] && j < 31; i++)
		e[j++] = env[i];
	e[j] = NULL;
	h_run(r, a, e, dir, timeout_s);
}

/* Exit code, or 128 + signal. */
static __attribute__((unused)) int h_code(const struct hrun *r)
{
	return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + WTERMSIG(r->status);
}

/* Value of "key=" in text, or -1. */
static __attribute__((unused)) long h_field(const char *text, const char *key)
{
	char k[64];
	snprintf(k, sizeof k, "%s=", key);
	const char *p = strstr(text, k);
	return p ? strtol(p + strlen(k), NULL, 10) : -1;
}

/* Lines of s containing needle. */
static __attribute__((unused)) int h_count(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

#endif
