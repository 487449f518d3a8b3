/*
 * weft - run an unmodified program on weft's green threads.
 *
 *   weft run [--procs N] [--stack SIZE] [--no-children] [--] PROGRAM [ARGS...]
 *   weft version
 *   weft help
 *
 * "run" execs PROGRAM with libweft_preload.so added in front of
 * LD_PRELOAD (entries already there are kept) and WEFT_MAXPROCS /
 * WEFT_STACK_SIZE set from --procs / --stack.  The programs PROGRAM runs
 * in turn (a wrapper script's server, make's compilers) inherit that
 * environment and run under weft too, as nice or taskset cover a process
 * tree.  With --no-children what it changed is noted in WEFT_RUN_* so
 * that the shim puts the environment back for them: only PROGRAM runs
 * under weft.  PROGRAM replaces this process: its exit status, or the
 * signal that kills it, is the launcher's.
 *
 * The shim is looked for next to the launcher (BIN/../lib), as in the
 * build tree and after make install, then in WEFT_LIBDIR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef WEFT_LIBDIR
#define WEFT_LIBDIR "/usr/local/lib"
#endif
#define WEFT_VERSION "0.1.0"
#define SHIM "libweft_preload.so"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: weft run [--procs N] [--stack SIZE] [--no-children] [--] PROGRAM [ARGS...]\n"
		"       weft version\n"
		"       weft help\n"
		"\n"
		"Runs PROGRAM (an ordinary, unmodified binary) with its main and its\n"
		"pthreads as green threads: blocking calls park the thread instead of\n"
		"the OS thread.\n"
		"\n"
		"  --procs N     run green threads on N processors (WEFT_MAXPROCS, 1..1024;\n"
		"                default: the CPUs this process may use)\n"
		"  --stack SIZE  stack of a pthread created with the default size\n"
		"                (WEFT_STACK_SIZE: 16K..1G, e.g. 64K, 1M; default 256K)\n"
		"  --no-children only PROGRAM runs under weft: the programs it starts get\n"
		"                the environment as it was (by default they run under\n"
		"                weft too, with the same settings)\n"
		"\n"
		"Also read from the environment: WEFT_PTHREADS=native (pthreads stay real\n"
		"threads), WEFT_DEBUG.  See docs/preload.md.\n");
}

static _Noreturn void bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "weft: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	usage(stderr);
	exit(2);
}

/* The shim: BIN/../lib/SHIM for this binary, else WEFT_LIBDIR/SHIM. */
static char *find_shim(void)
{
	static char path[PATH_MAX + sizeof SHIM + 8];
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			snprintf(path, sizeof path, "%s/../lib/%s", exe, SHIM);
			char *real = realpath(path, NULL);
			if (real && access(real, R_OK) == 0) {
				snprintf(path, sizeof path, "%s", real);
				free(real);
				return path;
			}
			free(real);
		}
	}
	snprintf(path, sizeof path, "%s/%s", WEFT_LIBDIR, SHIM);
	if (access(path, R_OK) == 0)
		return path;
	fprintf(stderr, "weft: cannot find %s (looked next to the launcher and in %s)\n", SHIM,
		WEFT_LIBDIR);
	exit(127);
}

/* Set name=value; with note (--no-children), note the old value in
 * WEFT_RUN_<tag> for the shim to put back. */
static void setnoting(const char *name, const char *tag, const char *value, bool note)
{
	if (!note) {
		setenv(name, value, 1);
		return;
	}
	char key[64];
	snprintf(key, sizeof key, "WEFT_RUN_%s", tag);
	const char *old = getenv(name);
	if (!getenv(key)) { /* a nested weft run keeps the outermost */
		size_t len = old ? strlen(old) + 2 : 2;
		char *note = malloc(len);
		if (!note) {
			perror("weft");
			exit(127);
		}
		if (old)
			snprintf(note, len, "+%s", old);
		else
			snprintf(note, len, "-");
		setenv(key, note, 1);
		free(note);
	}
	setenv(name, value, 1);
}

static bool valid_procs(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	return !errno && end != s && !*end && v >= 1 && v <= 1024;
}

/* As the runtime parses WEFT_STACK_SIZE: digits, optional K/M/G[B|iB]. */
static bool valid_size(const char *s)
{
	char *end;
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned long long mul = 1;
	if (errno)
		return false;
	switch (*end) {
	case 'k': case 'K': mul = 1ULL << 10; end++; break;
	case 'm': case 'M': mul = 1ULL << 20; end++; break;
	case 'g': case 'G': mul = 1ULL << 30; end++; break;
	default: break;
	}
	if (mul > 1 && (!strcmp(end, "B") || !strcmp(end, "iB")))
		end += strlen(end);
	if (*end || v > (1ULL << 30) / mul)
		return false;
	v *= mul;
	return v >= 16 * 1024 && v <= (1ULL << 30);
}

/* "--opt value" or "--opt=value": the value, advancing *i; NULL if not opt. */
static const char *optval(int argc, char **argv, int *i, const char *opt)
{
	size_t n = strlen(opt);
	const char *a = argv[*i];
	if (strncmp(a, opt, n))
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n])
		return NULL;
	if (*i + 1 >= argc)
		bad("%s needs a value", opt);
	return argv[++*i];
}

/* PROGRAM as execvp finds it, into buf; NULL if it is not found. */
static const char *lookup(const char *prog, char *buf, size_t len)
{
	if (strchr(prog, '/'))
		return prog;
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path;; p++) {
		const char *e = strchrnul(p, ':');
		int n = snprintf(buf, len, "%.*s%s%s", (int)(e - p), p, e > p ? "/" : "", prog);
		if (n > 0 && (size_t)n < len && access(buf, X_OK) == 0)
			return buf;
		if (!*e)
			return NULL;
		p = e;
	}
}

/* Would the kernel run PROGRAM in secure mode (AT_SECURE: set-user-ID or
 * set-group-ID to someone else, or file capabilities)?  Then the dynamic
 * linker drops LD_PRELOAD and the program would run without weft,
 * silently: refuse instead. */
static bool secure_exec(const char *prog)
{
	char buf[PATH_MAX];
	const char *path = lookup(prog, buf, sizeof buf);
	struct stat st;
	if (!path || stat(path, &st) != 0)
		return false; /* execvp reports it */
	if ((st.st_mode & S_ISUID) && st.st_uid != getuid())
		return true;
	if ((st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP) && st.st_gid != getgid())
		return true;
	return getxattr(path, "security.capability", NULL, 0) > 0;
}

static int run(int argc, char **argv)
{
	const char *procs = NULL, *stack = NULL;
	bool nochildren = false;
	int i = 0;
	for (; i < argc; i++) {
		const char *a = argv[i], *v;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || !a[1])
			break;
		if (!strcmp(a, "--no-children")) {
			nochildren = true;
		} else if ((v = optval(argc, argv, &i, "--procs"))) {
			if (!valid_procs(v))
				bad("bad --procs %s: want an integer 1..1024", v);
			procs = v;
		} else if ((v = optval(argc, argv, &i, "--stack"))) {
			if (!valid_size(v))
				bad("bad --stack %s: want a size 16K..1G such as 64K, 1M", v);
			stack = v;
		} else {
			bad("unknown option %s", a);
		}
	}
	if (i >= argc)
		bad("%s", "run: no PROGRAM");
	char **prog = argv + i;
	if (secure_exec(prog[0])) {
		fprintf(stderr,
			"weft: %s is set-user-ID, set-group-ID or has file capabilities: the "
			"dynamic linker would ignore the shim and run it without weft; refusing "
			"(run it as its owner, or a copy without those bits)\n",
			prog[0]);
		return 126;
	}

	const char *shim = find_shim();
	const char *old = getenv("LD_PRELOAD");
	char *pre;
	if (old && strstr(old, shim)) {
		pre = strdup(old); /* a nested run (a child of one): once is enough */
	} else if (old && *old) {
		size_t len = strlen(shim) + strlen(old) + 2;
		pre = malloc(len);
		if (!pre) {
			perror("weft");
			return 127;
		}
		snprintf(pre, len, "%s:%s", shim, old);
	} else {
		pre = strdup(shim);
	}
	setnoting("LD_PRELOAD", "LD_PRELOAD", pre, nochildren);
	free(pre);
	if (procs)
		setnoting("WEFT_MAXPROCS", "MAXPROCS", procs, nochildren);
	if (stack)
		setnoting("WEFT_STACK_SIZE", "STACK_SIZE", stack, nochildren);

	execvp(prog[0], prog);
	int e = errno;
	fprintf(stderr, "weft: cannot run %s: %s\n", prog[0], strerror(e));
	return e == ENOENT ? 127 : 126;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "run"))
		return run(argc - 2, argv + 2);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("weft %s\n", WEFT_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		usage(stdout);
		return 0;
	}
	bad("unknown command %s", cmd);
}
