/*
 * vdso.c - the runtime's clock: the kernel's vDSO clock_gettime, found
 * by the runtime itself.
 *
 * The preload shim interposes clock_gettime (a G's CPU-time clock,
 * hook/preload/clock.c), so the runtime may not call it by name
 * (sys.h): it reads the clocks as glibc does, through the vDSO the
 * kernel maps into every process (getauxval(AT_SYSINFO_EHDR)), whose
 * __vdso_clock_gettime answers the common clocks without a system call
 * and makes the call itself for the rest.  The symbol is found as Go's
 * runtime finds it (vdso_linux.go): the image's dynamic section gives
 * its symbol table, whose size is the chain count of its DT_HASH table.
 * No vDSO (valgrind hides it), or no symbol: the raw system call.
 *
 * The shim's clock_gettime hook calls rt_clock_gettime for every clock
 * it passes on, so the lookup runs at most once per process and does
 * not touch the C library's lazy binding (it may run inside jemalloc,
 * which reads the clock under its own locks).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>

#include "runtime.h"
#include "sys.h"

typedef long (*vdso_gettime_fn)(clockid_t, struct timespec *);

/* The vDSO's clock_gettime: NULL not looked up yet; vdso_none when there
 * is none (the system call then).  Relaxed: every thread that looks
 * finds the same address, so a race only repeats the look-up. */
static long vdso_none(clockid_t c, struct timespec *ts)
{
	return sys3(SYS_clock_gettime, c, ts, 0);
}
static _Atomic vdso_gettime_fn vdso_gettime;

/* The address of the vDSO's symbol name, or NULL. */
static void *vdso_sym(const char *name)
{
	uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
	if (!base)
		return NULL;
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		return NULL;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
	const ElfW(Dyn) *dyn = NULL;
	uintptr_t bias = 0;
	bool loaded = false;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !loaded) {
			/* link-time addresses + bias = where it is mapped */
			bias = base + ph[i].p_offset - ph[i].p_vaddr;
			loaded = true;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn = (const ElfW(Dyn) *)(base + ph[i].p_offset);
		}
	}
	if (!loaded || !dyn)
		return NULL;
	const char *strtab = NULL;
	const ElfW(Sym) *symtab = NULL;
	const Elf_Symndx *hash = NULL;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_STRTAB)
			strtab = (const char *)(bias + dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_SYMTAB)
			symtab = (const ElfW(Sym) *)(bias + dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_HASH)
			hash = (const Elf_Symndx *)(bias + dyn->d_un.d_ptr);
	}
	if (!strtab || !symtab || !hash)
		return NULL;
	Elf_Symndx nsym = hash[1]; /* nchain: one per symbol */
	for (Elf_Symndx i = 0; i < nsym; i++) {
		const ElfW(Sym) *s = &symtab[i];
		if (ELF64_ST_TYPE(s->st_info) == STT_FUNC && s->st_shndx != SHN_UNDEF &&
		    strcmp(strtab + s->st_name, name) == 0)
			return (void *)(bias + s->st_value);
	}
	return NULL;
}

int rt_clock_gettime(clockid_t c, struct timespec *ts)
{
	vdso_gettime_fn f = atomic_load_explicit(&vdso_gettime, memory_order_relaxed);
	if (unlikely(!f)) {
		f = (vdso_gettime_fn)vdso_sym("__vdso_clock_gettime");
		if (!f)
			f = vdso_none;
		atomic_store_explicit(&vdso_gettime, f, memory_order_relaxed);
	}
	return (int)f(c, ts);
}
