/*
 * test_link.c - the libraries weft builds leave no symbol undefined that
 * their NEEDED libraries do not define (issue 11: a shim linked without
 * jemalloc failed every preloaded program with "symbol lookup error:
 * undefined symbol: mallctl").  The Makefile links with -z defs; this
 * checks the result, whatever linked it.
 */
#include "helpers.h"

#ifndef WEFT_LIBDIR
#error "built by the Makefile with -DWEFT_LIBDIR and -DWEFT_SRCDIR"
#endif

/* scripts/SCRIPT on the library NAME in WEFT_LIBDIR (one not built is
 * an error if must_exist): it must find nothing (what it lists is
 * printed above the failure). */
static void run_check(const char *script, const char *name, bool must_exist, const char *what)
{
	char lib[4096], cmd[8192];
	snprintf(lib, sizeof lib, "%s/%s", WEFT_LIBDIR, name);
	if (access(lib, F_OK) != 0) {
		cr_assert(!must_exist, "%s was not built", lib);
		return;
	}
	snprintf(cmd, sizeof cmd, "sh %s/scripts/%s %s", WEFT_SRCDIR, script, lib);
	int st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: %s (listed above)", lib, what);
}

static void check(const char *name, bool must_exist)
{
	run_check("check-undefined.sh", name, must_exist,
		  "undefined dynamic symbols no NEEDED library provides");
}

Test(link, libweft_no_undefined_symbols)
{
	check("libweft.so", true);
}

Test(link, preload_shim_no_undefined_symbols)
{
	check("libweft_preload.so", true);
}

Test(link, split_variant_no_undefined_symbols)
{
	check("libweft_split.so", false); /* not built with SAN= */
}

/* The checker itself must see a missing library: a shared object that
 * calls a function nobody defines. */
Test(link, checker_catches_a_missing_library)
{
	char dir[] = "/tmp/weft-link-XXXXXX", cmd[8192];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof cmd,
		 "cd %s && printf 'int weft_nowhere(void);\\nint f(void){return weft_nowhere();}\\n' >x.c && "
		 "cc -shared -fPIC -o x.so x.c && sh %s/scripts/check-undefined.sh x.so | "
		 "grep -q weft_nowhere",
		 dir, WEFT_SRCDIR);
	int st = system(cmd);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	(void)system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "check-undefined.sh missed weft_nowhere");
}

/* ---- layering: the runtime never goes through the interposer ---------------- */

/* No runtime object (build/obj/runtime, arch) calls a name a hook object
 * defines (issue 12 item 6): inside libweft.so and the shim such a call
 * binds to the hook.  runtime/sys.h is what the runtime uses instead. */
Test(link, runtime_calls_no_hooked_name)
{
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "sh %s/scripts/check-layering.sh %s/../obj", WEFT_SRCDIR,
		 WEFT_LIBDIR);
	int st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "runtime objects call names hook/ defines (listed above)");
}

/* The checker itself must see such a call: a runtime object calling read
 * next to a hook object defining it. */
Test(link, layering_checker_catches_a_hooked_call)
{
	char dir[] = "/tmp/weft-layer-XXXXXX", cmd[8192];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof cmd,
		 "cd %s && mkdir -p runtime hook/preload arch/x86_64 && "
		 "printf 'long read(int f, void *b, unsigned long n){(void)f;(void)b;return (long)n;}\\n' >h.c && "
		 "printf 'long read(int, void *, unsigned long);\\nlong f(void){return read(0, 0, 0);}\\n' >r.c && "
		 "cc -c h.c -o hook/h.o && cc -c r.c -o runtime/r.o && "
		 "! sh %s/scripts/check-layering.sh %s >out 2>&1 && grep -q 'runtime/r.o: read' out",
		 dir, WEFT_SRCDIR, dir);
	int st = system(cmd);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	(void)system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "check-layering.sh missed a call to read");
}

/* The libraries' calls of their own functions are bound when they are
 * linked (-Bsymbolic-functions), not by a symbol lookup at every load:
 * no dynamic relocation names a function the library defines (59 in
 * the shim without it, each a lookup in every process of a weft run
 * tree; docs/design.md, "Building").  Sanitizer builds keep them. */
static void selfbind(const char *name, bool must_exist)
{
	run_check("check-selfbind.sh", name, must_exist, "relocations against its own functions");
}

Test(link, own_calls_bound_at_link_time)
{
	if (WEFT_SAN[0])
		cr_skip_test("sanitizer build: linked without -Bsymbolic-functions");
	selfbind("libweft.so", true);
	selfbind("libweft_preload.so", true);
	selfbind("libweft_split.so", false);
}
