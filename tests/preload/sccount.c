/*
 * sccount.c - count the system calls a program and all its threads make
 * (a tiny `strace -c -f` for the tests: counts, not time).
 *
 *   sccount SPEC... -- argv...
 *
 * SPEC is a system call number, optionally with one argument that must
 * match: "72" counts every fcntl, "72:1=3" only those whose argument 1
 * (cmd) is 3 (F_GETFL); "all" counts every system call.  At the end it prints "sccount SPEC N" per SPEC
 * on stderr and exits as the program did (its exit code, or 128 + the
 * signal).  Threads (clone) are followed, and exec: so `sccount 72 --
 * weft run -- prog` counts prog under the shim.  Forked children are not.
 * Uses PTRACE_GET_SYSCALL_INFO (Linux 5.3) to tell entry from exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXSPEC 16

struct spec {
	const char *text; /* as given */
	long nr;          /* the system call's number, -1 any */
	int arg;          /* the argument that must match, -1 none */
	unsigned long val; /* ... its value */
	long count;       /* entries seen */
};

static int parse(struct spec *s, const char *t)
{
	char *e;
	s->text = t;
	s->arg = -1;
	s->count = 0;
	if (!strcmp(t, "all")) {
		s->nr = -1;
		return 0;
	}
	s->nr = strtol(t, &e, 0);
	if (e == t)
		return -1;
	if (*e == ':') {
		s->arg = (int)strtol(e + 1, &e, 0);
		if (*e != '=' || s->arg < 0 || s->arg > 5)
			return -1;
		s->val = strtoul(e + 1, &e, 0);
	}
	return *e ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct spec sp[MAXSPEC];
	int ns = 0, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (ns == MAXSPEC || parse(&sp[ns++], argv[i]) < 0) {
			fprintf(stderr, "sccount: bad spec %s\n", argv[i]);
			return 2;
		}
	if (i + 1 >= argc) {
		fprintf(stderr, "usage: sccount SPEC... -- argv...\n");
		return 2;
	}
	char **av = argv + i + 1;
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		execvp(av[0], av);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
		return 2;
	ptrace(PTRACE_SETOPTIONS, pid, 0,
	       PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC |
		       PTRACE_O_EXITKILL);
	ptrace(PTRACE_SYSCALL, pid, 0, 0);
	int code = 2;
	for (;;) {
		pid_t t = waitpid(-1, &st, __WALL);
		if (t < 0) {
			if (errno == EINTR)
				continue;
			break; /* ECHILD: all gone */
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (t == pid)
				code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			continue;
		}
		if (!WIFSTOPPED(st))
			continue;
		int sig = WSTOPSIG(st), inject = 0;
		if (sig == (SIGTRAP | 0x80)) {
			struct __ptrace_syscall_info si;
			if (ptrace(PTRACE_GET_SYSCALL_INFO, t, sizeof si, &si) > 0 &&
			    si.op == PTRACE_SYSCALL_INFO_ENTRY)
				for (int k = 0; k < ns; k++)
					if ((sp[k].nr < 0 || (long)si.entry.nr == sp[k].nr) &&
					    (sp[k].arg < 0 || si.entry.args[sp[k].arg] == sp[k].val))
						sp[k].count++;
		} else if (sig == SIGTRAP && (st >> 16) != 0) {
			/* a clone or exec event: nothing to deliver */
		} else if (sig != SIGSTOP) {
			inject = sig; /* the program's own signal */
		}
		ptrace(PTRACE_SYSCALL, t, 0, inject);
	}
	for (int k = 0; k < ns; k++)
		fprintf(stderr, "sccount %s %ld\n", sp[k].text, sp[k].count);
	return code;
}
