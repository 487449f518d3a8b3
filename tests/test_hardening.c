/*
 * test_hardening.c - the hardened build (issue 15): every library and the
 * launcher carry Debian's hardening (full RELRO, immediate binding,
 * stack protector, fortified calls, no executable stack), G stacks are
 * never executable, and weft run refuses a program that the dynamic
 * linker would run without the shim (set-user-ID to someone else).
 */
#include "helpers.h"

#include <stdatomic.h>
#include <sys/stat.h>

#ifndef WEFT_LIBDIR
#error "built by the Makefile with -DWEFT_LIBDIR, -DWEFT_BINDIR"
#endif

#if defined(__SANITIZE_ADDRESS__) || TEST_TSAN
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static int sh(const char *fmt, const char *arg)
{
	char cmd[8192];
	snprintf(cmd, sizeof cmd, fmt, arg, arg, arg);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void hardened(const char *path)
{
	cr_assert_eq(access(path, F_OK), 0, "%s was not built", path);
	cr_assert_eq(sh("readelf -lW %s | grep -q GNU_RELRO", path), 0, "%s: no RELRO", path);
	cr_assert_eq(sh("readelf -dW %s | grep -Eq 'BIND_NOW|FLAGS_1.*NOW'", path), 0,
		     "%s: not linked with -z now", path);
	cr_assert_eq(sh("readelf -lW %s | grep GNU_STACK | grep -qv RWE", path), 0,
		     "%s: executable stack", path);
	cr_assert_eq(sh("nm -D %s | grep -q __stack_chk_fail", path), 0,
		     "%s: no stack protector", path);
#ifndef __SANITIZE_ADDRESS__
	if (!TEST_TSAN)
		cr_assert_eq(sh("nm -D %s | grep -Eq '__[a-z]+_chk@'", path), 0,
			     "%s: no fortified calls", path);
#endif
}

Test(hardening, libweft)
{
	hardened(WEFT_LIBDIR "/libweft.so");
}

Test(hardening, preload_shim)
{
	hardened(WEFT_LIBDIR "/libweft_preload.so");
}

Test(hardening, launcher)
{
	hardened(WEFT_BINDIR "/weft");
	cr_assert_eq(sh("readelf -hW %s | grep -q 'DYN '", WEFT_BINDIR "/weft"), 0,
		     "the launcher is not a PIE");
}

/* ---- G stacks are not executable ------------------------------------------------ */

static char maps_perm[8];

static void perms_of(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	maps_perm[0] = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char perm[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 && addr >= lo && addr < hi) {
			strcpy(maps_perm, perm);
			break;
		}
	}
	if (f)
		fclose(f);
}

static void stack_perms(void *arg)
{
	volatile char here = 0;
	(void)here;
	perms_of((uintptr_t)&here);
	atomic_store((_Atomic int *)arg, 1);
}

Test(hardening, g_stacks_not_executable)
{
	weft_attr_t small = { .stack_size = 64 << 10 };
	for (int kind = 0; kind < 2; kind++) {
		_Atomic int done = 0;
		if (kind == 0)
			cr_assert_gt(weft_go(stack_perms, (void *)&done), 0);
		else
			cr_assert_gt(weft_go_attr(&small, stack_perms, (void *)&done), 0);
		while (!atomic_load(&done))
			weft_yield();
		cr_assert_neq(maps_perm[0], 0, "the G's stack is in no mapping");
		cr_assert_eq(maps_perm[2], '-', "a G stack is executable: %s", maps_perm);
		cr_assert_eq(maps_perm[0], 'r');
		cr_assert_eq(maps_perm[1], 'w');
	}
}

/* ---- weft run and set-user-ID programs -------------------------------------------- */

Test(hardening, run_refuses_setuid_program)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to make a set-user-ID file owned by someone else");
	char dir[] = "/tmp/weft-suid-XXXXXX", prog[64], cmd[512];
	cr_assert_not_null(mkdtemp(dir));
	chmod(dir, 0755);
	snprintf(prog, sizeof prog, "%s/true", dir);
	snprintf(cmd, sizeof cmd, "cp /bin/true %s && chown 65534 %s && chmod 4755 %s", prog, prog,
		 prog);
	cr_assert_eq(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "%s/weft run -- %s 2>%s/err", WEFT_BINDIR, prog, dir);
	int st = system(cmd);
	snprintf(cmd, sizeof cmd, "grep -q 'set-user-ID.*refusing' %s/err", dir);
	int said = system(cmd);
	/* the same program without the bit runs */
	snprintf(cmd, sizeof cmd, "chmod 0755 %s && %s/weft run -- %s", prog, WEFT_BINDIR, prog);
	int plain = system(cmd);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	(void)system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 126, "weft run of a set-user-ID program: %d",
		  st);
	cr_assert_eq(said, 0, "no clear message");
	/* (a sanitizer build's shim cannot be preloaded into a plain program) */
	cr_assert(plain == 0 || SANITIZED, "weft run of the same program without the bit failed");
}
