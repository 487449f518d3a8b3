/*
 * test_preload_corpus.c - do no harm: ordinary programs give the same
 * output and exit status with and without the shim.
 *
 * Each command runs natively, then with LD_PRELOAD set to the shim (so
 * every process of a pipeline, and every program they start, runs under
 * weft), and for some through "weft run".  stdout and the exit status
 * must be identical, and nothing may be said on stderr that was not.
 */
#include "preload/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

static struct hrun R, N;
static char dir[64];

/* A scratch directory with big.txt (7 MB of numbers). */
static void scratch(bool big)
{
	snprintf(dir, sizeof dir, "/tmp/weft-corpus-XXXXXX");
	cr_assert(mkdtemp(dir));
	if (big) {
		char cmd[256];
		snprintf(cmd, sizeof cmd, "cd %s && seq 1 1000000 > big.txt", dir);
		cr_assert(system(cmd) == 0);
	}
}

static void cleanup(void)
{
	if (!dir[0])
		return;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	(void)system(cmd);
}

/* sh -c script: natively, with LD_PRELOAD, and (launcher) weft run. */
static void same(const char *script, bool launcher, int timeout_s)
{
	h_paths();
	const char *a[] = { "sh", "-c", script, NULL };
	h_run(&N, a, NULL, dir[0] ? dir : NULL, timeout_s);
	char pre[sizeof h_preload_env + 16];
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s", h_preload_env);
	const char *procs[] = { "WEFT_MAXPROCS=1", "WEFT_MAXPROCS=4", "WEFT_MAXPROCS=2" };
	for (int i = 0; i < (launcher && !h_asan() ? 2 : 3); i++) {
		h_run(&R, a, (const char *[]){ pre, procs[i], NULL }, dir[0] ? dir : NULL, timeout_s);
		cr_expect_eq(R.status, N.status, "%s (%s): status %d, natively %d\nstderr: %s", script,
			     procs[i], R.status, N.status, R.err);
		cr_expect(R.nout == N.nout && !memcmp(R.out, N.out, N.nout),
			  "%s (%s): stdout differs:\n%.2000s\n--- natively:\n%.2000s", script, procs[i],
			  R.out, N.out);
		cr_expect_str_eq(R.err, N.err, "%s (%s)", script, procs[i]);
	}
	if (launcher && !h_asan()) {
		h_shim_run(&R, 2, a, NULL, dir[0] ? dir : NULL, timeout_s);
		cr_expect_eq(R.status, N.status, "%s (weft run): status %d, natively %d\nstderr: %s",
			     script, R.status, N.status, R.err);
		cr_expect(R.nout == N.nout && !memcmp(R.out, N.out, N.nout),
			  "%s (weft run): stdout differs:\n%.2000s", script, R.out);
	}
}

Test(corpus, shell_pipelines, .timeout = 120, .fini = cleanup)
{
	scratch(false);
	same("seq 100000 | sort -n | tail -1", true, 60);
	same("seq 1 50000 | awk '{s += $1} END {print s}' | tr 0-9 a-j; echo status $?", true, 60);
	same("(for i in 1 2 3; do (echo sub $i; sleep 0.01) & done; wait) | sort; echo done | cat",
	     false, 60);
	same("yes weft | head -c 3000000 | wc -c; seq 1000000 | head -1", true, 60);
	same("exit 3", true, 10);
	same("sh -c 'kill -TERM $$'; echo after $?", false, 10);
}

Test(corpus, coreutils_on_large_files, .timeout = 300, .fini = cleanup)
{
	scratch(true);
	same("wc -l big.txt; md5sum big.txt; sha256sum < big.txt", true, 60);
	same("sort -rn big.txt | head -3; sort -n -S 1M big.txt | md5sum", true, 120);
	same("cut -c1-3 big.txt | sort | uniq -c | sort -rn | head -5", false, 120);
	same("tr 0-9 a-j < big.txt | md5sum; grep -c 99 big.txt; tail -c 100 big.txt | od -c | "
	     "head -3",
	     false, 60);
	same("cp big.txt c.txt && cmp big.txt c.txt && echo same; split -l 300000 big.txt part. && "
	     "cat part.* | md5sum && ls part.* | wc -l; rm -f c.txt part.*",
	     false, 60);
	same("dd if=big.txt bs=64k 2>/dev/null | md5sum; dd if=/dev/zero bs=1M count=20 2>/dev/null "
	     "| wc -c",
	     false, 60);
}

Test(corpus, gzip, .timeout = 300, .fini = cleanup)
{
	scratch(true);
	same("gzip -c big.txt > big.gz && gunzip -c big.gz | md5sum && gzip -t big.gz && echo ok; "
	     "gzip -dc big.gz | gzip -1 | gunzip | wc -l; rm -f big.gz",
	     true, 120);
}

Test(corpus, python_threads_sockets_subprocess_sleep, .timeout = 300)
{
	if (access("/root/.pyenv/versions/3.11.7/bin/python3.11", X_OK) != 0 &&
	    system("command -v python3 >/dev/null 2>&1") != 0)
		cr_skip_test("no python3");
	char script[PATH_MAX + 256];
	/* the real interpreter, not a version manager's wrapper script */
	snprintf(script, sizeof script,
		 "py=$(python3 -c 'import sys; print(sys.executable)'); \"$py\" %s/corpus.py",
		 PRELOAD_SRCDIR);
	same(script, true, 120);
}

Test(corpus, make, .timeout = 300, .fini = cleanup)
{
	scratch(false);
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "cd %s && cat > Makefile <<'EOF'\n"
		 "WORDS := $(shell seq 1 50 | tr '\\n' ' ')\n"
		 "BIG := $(shell head -c 300000 /dev/zero | tr '\\0' a | wc -c)\n"
		 "all: out/sum out/big out/list\n"
		 "\t@cat out/sum out/big out/list | md5sum\n"
		 "out:\n\t@mkdir -p out\n"
		 "out/part%%: | out\n\t@sleep 0.02; echo part $* > $@\n"
		 "out/sum: $(patsubst %%,out/part%%,1 2 3 4 5 6 7 8 9 10 11 12) | out\n"
		 "\t@cat $^ | sort > $@\n"
		 "out/big: | out\n\t@echo big $(BIG) > $@\n"
		 "out/list: | out\n\t@echo $(WORDS) > $@\n"
		 "clean:\n\t@rm -rf out\n"
		 "EOF\n",
		 dir);
	cr_assert(system(cmd) == 0);
	same("make -s clean; make -s -j4; echo $?; make -s; echo $?; make -s clean", true, 60);
	same("make -s clean; make -s; make -s -j8 -B; make -s nonexistent; echo $?", true, 60);
}

/* ---- curl against a local server ------------------------------------------------------ */

static int srvfd = -1;

static void *http_server(void *arg)
{
	(void)arg;
	static char body[200000];
	for (size_t i = 0; i < sizeof body; i++)
		body[i] = (char)('a' + i % 26);
	for (;;) {
		int c = accept(srvfd, NULL, NULL);
		if (c < 0)
			return NULL;
		char req[4096];
		ssize_t n = read(c, req, sizeof req - 1);
		req[n > 0 ? n : 0] = 0;
		char head[256];
		bool found = strncmp(req, "GET / ", 6) == 0;
		int hl = snprintf(head, sizeof head,
				  "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
				  found ? "200 OK" : "404 Not Found", found ? sizeof body : (size_t)0);
		(void)write(c, head, (size_t)hl);
		for (size_t off = 0; found && off < sizeof body;) {
			ssize_t w = write(c, body + off, sizeof body - off);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
		close(c);
	}
}

Test(corpus, curl, .timeout = 120)
{
	if (system("command -v curl >/dev/null 2>&1") != 0)
		cr_skip_test("no curl");
	srvfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof sa;
	cr_assert(bind(srvfd, (struct sockaddr *)&sa, sizeof sa) == 0);
	cr_assert(listen(srvfd, 64) == 0);
	cr_assert(getsockname(srvfd, (struct sockaddr *)&sa, &len) == 0);
	pthread_t t;
	pthread_create(&t, NULL, http_server, NULL);
	char script[512];
	snprintf(script, sizeof script,
		 "u=http://127.0.0.1:%d; curl -s $u/ | md5sum; "
		 "curl -s -o /dev/null -w '%%{http_code} %%{size_download}\\n' $u/missing; "
		 "curl -s $u/ $u/ | wc -c; curl -sf $u/missing; echo $?",
		 ntohs(sa.sin_port));
	same(script, true, 60);
}

/* stdio on sockets, pipes and popen'd children (hook/preload/stdio.c:
 * fdopen and popen give FILEs whose reads and writes park the G): a
 * thread-per-connection fgets server, getline with long lines, fread of
 * exact sizes, fprintf to a slow reader, popen, and the rest of the
 * interface - the same output as natively. */
Test(corpus, stdio_over_sockets_and_pipes, .timeout = 300)
{
	char script[PATH_MAX * 6 + 256];
	const char *p = h_prog("stdiosock");
	snprintf(script, sizeof script,
		 "%s server 50 -q; %s getline 10 -q; %s fread 10 -q; %s slowwriter 4 -q; "
		 "%s popen 10 -q; %s misc 0 -q; echo $?",
		 p, p, p, p, p, p);
	same(script, true, 120);
}

/* What weft does not intercept sees the files as the program made them
 * (issue 12): a server talking through stdio on its sockets (glibc's
 * internal reads), and threads blocked in raw syscall(SYS_read) on
 * pipes, more than the runtime would lend spare capacity for hogs. */
Test(corpus, stdio_on_sockets_and_raw_syscalls, .timeout = 300)
{
	char script[PATH_MAX + 128];
	const char *p = h_prog("dnh");
	snprintf(script, sizeof script, "%s stdio 50; %s rawsys 100 -q; echo $?", p, p);
	same(script, true, 120);
}
