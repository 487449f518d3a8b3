/*
 * traceback.c - backtraces of green threads, and turning them into
 * function, file and line.
 *
 * Walking is libunwind's local unwinder (DWARF CFI), loaded with dlopen
 * when the runtime starts (tb_init; lazylib.c says why it is not
 * linked), started from:
 *   - a switched-out G: the frame weft_ctx_switch left at g->sp
 *     (arch/x86_64/ctx_frame.h) gives rip, rbp, and the sp once that
 *     frame is popped;
 *   - a running G: the ucontext of the signal that stopped its thread;
 *   - the caller: unw_getcontext.
 * The caller of the walk makes sure the stack does not change meanwhile
 * (dump.c stops every M first).
 *
 * Symbols come from addr2line (binutils), run once per module as a
 * helper that answers one address per line; without it, or without
 * debug info, a frame prints as module+offset, which addr2line or gdb
 * can resolve later.  All of this runs in the dump path only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "diag.h"
#include "sys.h"

/* ---- libunwind ------------------------------------------------------------- */

/* The names libunwind.h's macros give the local unwinder's calls
 * (_ULx86_64_step...), as dlsym wants them. */
#define UNWNAME_(x) #x
#define UNWNAME(x) UNWNAME_(x)

/* Its functions, set once by tb_init (before the runtime is marked
 * started, so before any dump); all NULL if it could not be loaded. */
static struct {
	int (*getcontext)(unw_context_t *);
	int (*init_local)(unw_cursor_t *, unw_context_t *);
	int (*init_local2)(unw_cursor_t *, unw_context_t *, int);
	int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
	int (*step)(unw_cursor_t *);
} unw;

void tb_init(void)
{
	if (unw.step || !lazylib_open(LAZY_UNWIND))
		return;
	void *gc = lazylib_sym(LAZY_UNWIND, UNWNAME(unw_tdep_getcontext));
	void *il = lazylib_sym(LAZY_UNWIND, UNWNAME(unw_init_local));
	void *il2 = lazylib_sym(LAZY_UNWIND, UNWNAME(unw_init_local2));
	void *gr = lazylib_sym(LAZY_UNWIND, UNWNAME(unw_get_reg));
	void *st = lazylib_sym(LAZY_UNWIND, UNWNAME(unw_step));
	if (!gc || !il || !il2 || !gr || !st) {
		warn("%s lacks the local unwinder: dumps without backtraces\n", "libunwind");
		return;
	}
	unw.getcontext = (int (*)(unw_context_t *))gc;
	unw.init_local = (int (*)(unw_cursor_t *, unw_context_t *))il;
	unw.init_local2 = (int (*)(unw_cursor_t *, unw_context_t *, int))il2;
	unw.get_reg = (int (*)(unw_cursor_t *, unw_regnum_t, unw_word_t *))gr;
	unw.step = (int (*)(unw_cursor_t *))st;
}

/* ---- walking ------------------------------------------------------------- */

static void walk(unw_cursor_t *cur, struct tb *t)
{
	t->n = 0;
	do {
		unw_word_t ip;
		if (unw.get_reg(cur, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		t->pc[t->n++] = (uintptr_t)ip;
	} while (t->n < TB_MAXFRAMES && unw.step(cur) > 0);
}

void tb_from_frame(void *sp, struct tb *t)
{
	const struct ctx_frame *f = sp;
	unw_context_t uc;
	memset(&uc, 0, sizeof uc);
	greg_t *r = uc.uc_mcontext.gregs;
	r[REG_RIP] = (greg_t)f->rip;
	r[REG_RSP] = (greg_t)ctx_frame_sp(sp);
	/* rbx and r12-r15 are not in the frame: the switch clobbers them,
	 * so the function it is inlined in saved its caller's in its
	 * prologue, where its CFI finds them (left 0 here) */
	r[REG_RBP] = (greg_t)f->rbp;
	unw_cursor_t cur;
	t->n = 0;
	t->exact0 = false; /* rip is the return address of the switch's call */
	if (unw.step && unw.init_local(&cur, &uc) == 0)
		walk(&cur, t);
}

void tb_from_ucontext(void *uc, struct tb *t)
{
	unw_cursor_t cur;
	t->n = 0;
	t->exact0 = true;
	if (unw.step && unw.init_local2(&cur, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) == 0)
		walk(&cur, t);
}

void tb_here(struct tb *t)
{
	unw_context_t uc;
	unw_cursor_t cur;
	t->n = 0;
	t->exact0 = false;
	if (unw.step && unw.getcontext(&uc) == 0 && unw.init_local(&cur, &uc) == 0)
		walk(&cur, t);
}

/* ---- addr2line helpers ------------------------------------------------------ */

#define MAXMODS 32
#define A2L_TIMEOUT_MS 5000

struct a2l {
	char *path;    /* module file */
	pid_t pid;     /* 0: not started, -1: unusable */
	int in, out;   /* our ends: write addresses, read answers */
	char buf[4096];
	size_t len;    /* buffered answer bytes */
};

static struct a2l mods[MAXMODS];
static int nmods;

/* strdup with our own malloc: inside libweft malloc/free are the
 * private jemalloc's, while libc's strdup would use libc's malloc. */
static char *sdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}

/* The environment without LD_PRELOAD: addr2line should not run weft. */
static char **cleanenv(void)
{
	extern char **environ;
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = malloc((n + 1) * sizeof *env);
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
			env[k++] = environ[i];
	env[k] = NULL;
	return env;
}

static void a2l_start(struct a2l *a)
{
	int in[2], out[2];
	a->pid = -1;
	if (sys_pipe2(in, O_CLOEXEC) != 0)
		return;
	if (sys_pipe2(out, O_CLOEXEC) != 0) {
		sys_close(in[0]);
		sys_close(in[1]);
		return;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	char *argv[] = { "addr2line", "-f", "-e", a->path, NULL };
	char **env = cleanenv();
	pid_t pid;
	int e = env ? sys_posix_spawnp(&pid, "addr2line", &fa, NULL, argv, env) : ENOMEM;
	free(env);
	posix_spawn_file_actions_destroy(&fa);
	sys_close(in[0]);
	sys_close(out[1]);
	if (e != 0) {
		sys_close(in[1]);
		sys_close(out[0]);
		return;
	}
	a->pid = pid;
	a->in = in[1];
	a->out = out[0];
	a->len = 0;
}

static void a2l_stop(struct a2l *a)
{
	if (a->pid > 0) {
		sys_close(a->in);
		sys_close(a->out);
		sys_kill(a->pid, SIGKILL);
		while (sys_waitpid(a->pid, NULL, 0) == -EINTR)
			;
	}
	a->pid = -1;
}

/* One answer line (without the newline) into line; false on failure. */
static bool a2l_line(struct a2l *a, char *line, size_t cap)
{
	for (;;) {
		char *nl = memchr(a->buf, '\n', a->len);
		if (nl) {
			size_t n = (size_t)(nl - a->buf);
			size_t c = n < cap - 1 ? n : cap - 1;
			memcpy(line, a->buf, c);
			line[c] = 0;
			a->len -= n + 1;
			memmove(a->buf, nl + 1, a->len);
			return true;
		}
		if (a->len == sizeof a->buf)
			a->len = 0; /* an absurdly long line: drop it */
		struct pollfd p = { a->out, POLLIN, 0 };
		if (sys_poll(&p, 1, A2L_TIMEOUT_MS) <= 0)
			return false;
		ssize_t r = sys_read(a->out, a->buf + a->len, sizeof a->buf - a->len);
		if (r <= 0) {
			if (r == -EINTR)
				continue;
			return false;
		}
		a->len += (size_t)r;
	}
}

/* write(2) that cannot kill us with SIGPIPE if the helper died. */
static ssize_t writequiet(int fd, const void *buf, size_t n)
{
	sigset_t pipeset, old;
	sigemptyset(&pipeset);
	sigaddset(&pipeset, SIGPIPE);
	sys_sigprocmask(SIG_BLOCK, &pipeset, &old);
	ssize_t r = sys_write(fd, buf, n);
	if (r == -EPIPE) {
		struct timespec zero = { 0, 0 };
		sys_sigtimedwait(&pipeset, NULL, &zero); /* drop the SIGPIPE we caused */
	}
	sys_sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}

/* Ask the helper for module-relative address addr: function name and
 * "file:line".  False if there is no helper or it failed. */
static bool a2l_query(struct a2l *a, uintptr_t addr, char *fn, size_t fncap, char *loc,
		      size_t loccap)
{
	if (a->pid == 0)
		a2l_start(a);
	if (a->pid < 0)
		return false;
	char q[32];
	int n = snprintf(q, sizeof q, "0x%lx\n", (unsigned long)addr);
	if (writequiet(a->in, q, (size_t)n) != n || !a2l_line(a, fn, fncap) ||
	    !a2l_line(a, loc, loccap)) {
		a2l_stop(a);
		return false;
	}
	return true;
}

static struct a2l *modfor(const char *path)
{
	for (int i = 0; i < nmods; i++)
		if (!strcmp(mods[i].path, path))
			return &mods[i];
	if (nmods == MAXMODS)
		return NULL;
	struct a2l *a = &mods[nmods];
	a->path = sdup(path);
	if (!a->path)
		return NULL;
	a->pid = 0;
	nmods++;
	return a;
}

/* ---- symbol cache ------------------------------------------------------------- */

struct sym {
	uintptr_t pc;       /* 0: empty slot */
	char *fn;           /* function name, or NULL */
	char *loc;          /* "file:line", or NULL */
	const char *module; /* base name of the module */
	uintptr_t off;      /* pc - module base */
};

static struct sym *cache;
static size_t cachecap, cachelen;

static struct sym *cacheslot(uintptr_t pc)
{
	if (cachelen * 2 >= cachecap) {
		size_t ncap = cachecap ? cachecap * 2 : 1024;
		struct sym *n = calloc(ncap, sizeof *n);
		if (!n)
			return NULL;
		for (size_t i = 0; i < cachecap; i++) {
			if (!cache[i].pc)
				continue;
			size_t j = (cache[i].pc * 0x9e3779b97f4a7c15ULL >> 20) & (ncap - 1);
			while (n[j].pc)
				j = (j + 1) & (ncap - 1);
			n[j] = cache[i];
		}
		free(cache);
		cache = n;
		cachecap = ncap;
	}
	size_t j = (pc * 0x9e3779b97f4a7c15ULL >> 20) & (cachecap - 1);
	while (cache[j].pc && cache[j].pc != pc)
		j = (j + 1) & (cachecap - 1);
	return &cache[j];
}

/* The running program's file (static: module names point into it). */
static const char *exepath(void)
{
	static char exe[4096];
	if (!exe[0]) {
		ssize_t r = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (r <= 0)
			r = snprintf(exe, sizeof exe, "?");
		exe[r] = 0;
	}
	return exe;
}

/* Is the module loaded at base position-independent (addresses given to
 * addr2line relative to base), or a fixed executable (absolute)? */
static bool relocatable(const void *base)
{
	const Elf64_Ehdr *eh = base;
	return eh->e_type == ET_DYN;
}

static bool useful(const char *s)
{
	return s[0] && strncmp(s, "??", 2) != 0;
}

/* Symbolise one pc (a code address; the caller has already stepped a
 * return address back into its call instruction). */
static const struct sym *symbolise(uintptr_t pc)
{
	struct sym *s = cacheslot(pc);
	if (!s)
		return NULL;
	if (s->pc == pc)
		return s;
	s->pc = pc;
	cachelen++;
	Dl_info di;
	if (!dladdr((void *)pc, &di) || !di.dli_fname) {
		s->module = "?";
		s->off = pc;
		return s;
	}
	const char *slash = strrchr(di.dli_fname, '/');
	s->module = slash ? slash + 1 : di.dli_fname;
	s->off = pc - (uintptr_t)di.dli_fbase;
	/* the main program's dli_fname may be "" or argv[0]-relative */
	const char *path = di.dli_fname;
	if (!path[0] || !strchr(path, '/')) {
		path = exepath();
		slash = strrchr(path, '/');
		s->module = slash ? slash + 1 : path;
	}
	char fn[512], loc[1024];
	struct a2l *a = modfor(path);
	uintptr_t q = relocatable(di.dli_fbase) ? s->off : pc;
	if (a && a2l_query(a, q, fn, sizeof fn, loc, sizeof loc)) {
		if (useful(fn))
			s->fn = sdup(fn);
		char *disc = strstr(loc, " (discriminator");
		if (disc)
			*disc = 0;
		size_t n = strlen(loc);
		if (useful(loc) && !strstr(loc, ":?") && !(n >= 2 && !strcmp(loc + n - 2, ":0")))
			s->loc = sdup(loc);
	}
	if (!s->fn && di.dli_sname)
		s->fn = sdup(di.dli_sname);
	return s;
}

void tb_symclose(void)
{
	for (int i = 0; i < nmods; i++) {
		a2l_stop(&mods[i]);
		free(mods[i].path);
	}
	nmods = 0;
	for (size_t i = 0; i < cachecap; i++) {
		free(cache[i].fn);
		free(cache[i].loc);
	}
	free(cache);
	cache = NULL;
	cachecap = cachelen = 0;
}

/* ---- printing ------------------------------------------------------------------- */

/* The main program's module name from dladdr: "" or not a path. */
static bool mainmodule(const char *fname)
{
	return !fname || !fname[0] || !strchr(fname, '/');
}

/* weft's own code, if it is a shared object (in a static build it
 * cannot be told from the program's by address: nothing is trimmed
 * but the G's entry frames, by name). */
static bool internal(uintptr_t pc)
{
	static const void *base;
	static int shared = -1;
	Dl_info di;
	if (shared < 0) {
		shared = dladdr((void *)tb_print, &di) && !mainmodule(di.dli_fname);
		base = shared ? di.dli_fbase : NULL;
	}
	return shared && dladdr((void *)pc, &di) && di.dli_fbase == base;
}

static bool isentry(const char *fn)
{
	return fn && (!strcmp(fn, "gentry") || !strcmp(fn, "weft_ctx_start") ||
		      !strcmp(fn, "mainwrap"));
}

void tb_print(const struct tb *t, FILE *out)
{
	const struct sym *s[TB_MAXFRAMES];
	int n = t->n;
	for (int i = 0; i < n; i++) {
		/* a return address points after the call: look up the call */
		uintptr_t pc = t->pc[i] - (i == 0 && t->exact0 ? 0 : 1);
		s[i] = symbolise(pc);
	}
	/* as Go hides runtime.gopark and friends: of the runtime's frames
	 * on top, keep only the outermost (the API call, weft_chan_recv),
	 * and drop the G's entry frames at the bottom */
	int first = 0, last = n;
	while (first < n && internal(t->pc[first]))
		first++;
	if (first == n) {
		first = 0; /* all runtime (a tail call hid the caller): show it all */
	} else {
		if (first > 0)
			first--;
		while (last > first + 1 && internal(t->pc[last - 1]))
			last--;
	}
	while (last > first + 1 && s[last - 1] && isentry(s[last - 1]->fn))
		last--;
	n = last;
	if (n == 0)
		fprintf(out, unw.step ? "\t(no frames)\n" : "\t(no backtrace: libunwind not loaded)\n");
	for (int i = first; i < n; i++) {
		if (!s[i]) {
			fprintf(out, "?()\n\t?+%#lx\n", (unsigned long)t->pc[i]);
			continue;
		}
		fprintf(out, "%s()\n", s[i]->fn ? s[i]->fn : "?");
		if (s[i]->loc)
			fprintf(out, "\t%s (%s+%#lx)\n", s[i]->loc, s[i]->module,
				(unsigned long)s[i]->off);
		else
			fprintf(out, "\t%s+%#lx\n", s[i]->module, (unsigned long)s[i]->off);
	}
	if (t->n == TB_MAXFRAMES)
		fprintf(out, "...additional frames elided...\n");
}
