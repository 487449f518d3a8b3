/*
 * loaderlock.c - who holds glibc's loader TLS lock (dl_load_tls_lock).
 *
 * glibc's pthread_create allocates the new thread's TLS under that lock
 * (elf/dl-tls.c _dl_allocate_tls_init), and so does weft for a G's
 * block (tls.c).  dlopen holds it while it maps and relocates a library
 * (elf/dl-open.c dl_open_worker), which runs the library's IFUNC
 * resolvers: program code, which may make a thread and wait for it.
 * Natively that works because the lock is recursive and pthread_create
 * runs on the thread that holds it.  Under weft the holder is a G, which
 * may park or block in the kernel while the runtime makes an M (an OS
 * thread: glibc's pthread_create) or starts another G: waiting for the
 * lock then waits for a G that cannot run (docs/design.md "A G inside
 * dlopen").  The runtime asks here first.
 *
 * glibc exports no way to ask, so the lock is found once: _rtld_global
 * (ld.so, GLIBC_PRIVATE) holds dl_load_lock, dl_load_write_lock and
 * dl_load_tls_lock side by side (2.35 and later: ldsodefs.h), all
 * recursive pthread mutexes.  dl_iterate_phdr holds the write lock while
 * it calls back; the mutex whose count rises by one in a nested call,
 * owned by this thread's tid, is it, and the TLS lock is the next one.
 * Anything that does not look so (another layout, an older glibc)
 * leaves the lock unknown: the runtime then behaves as before.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "sys.h"

/* glibc's recursive mutex, as laid out on x86-64 (pthreadtypes-arch.h,
 * struct __pthread_mutex_s) */
struct gmutex {
	int lock;          /* the futex word */
	unsigned count;    /* recursion depth */
	int owner;         /* holder's tid (struct pthread's), 0 free */
	unsigned nusers;   /* unused here */
	int kind;          /* PTHREAD_MUTEX_RECURSIVE_NP (1) for the loader's */
	short spins, elision;
	void *prev, *next; /* robust list, unused */
};
_Static_assert(sizeof(struct gmutex) == sizeof(pthread_mutex_t), "glibc mutex layout");

enum { KIND_RECURSIVE = 1 };

static struct gmutex *tlslock; /* dl_load_tls_lock, or NULL: unknown */

/* The probe's state: the scan of _rtld_global in the outer callback,
 * compared in the inner one. */
struct probe {
	struct gmutex *base; /* _rtld_global */
	size_t n;            /* whole mutexes that fit in it */
	int tid;             /* this thread's tid, as glibc's locks record it */
	unsigned *counts;    /* each candidate's count in the outer call */
	int depth;           /* callbacks in progress */
	struct gmutex *found;/* the write lock */
};

static long tidoff = -1; /* offsetof(struct pthread, tid), once known */

/* The tid glibc records as a lock's owner: struct pthread's, at the
 * thread pointer (libthread_db's descriptor says where); 0 unknown. */
static int selftid(void)
{
	if (tidoff < 0)
		return 0;
	uintptr_t tp;
	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return *(const int *)(tp + (uintptr_t)tidoff);
}

static int probe_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info, (void)size;
	struct probe *pr = arg;
	if (pr->depth++ == 0) {
		for (size_t i = 0; i < pr->n; i++)
			pr->counts[i] = pr->base[i].count;
		dl_iterate_phdr(probe_cb, pr); /* the write lock again: count + 1 */
	} else {
		for (size_t i = 0; i < pr->n && !pr->found; i++) {
			struct gmutex *mx = &pr->base[i];
			if (mx->owner == pr->tid && mx->kind == KIND_RECURSIVE &&
			    mx->count == pr->counts[i] + 1)
				pr->found = mx;
		}
	}
	pr->depth--;
	return 1; /* one object is enough */
}

/* Once, at the runtime's start (on the thread that starts it). */
void loaderlock_init(void)
{
	const char *v = gnu_get_libc_version();
	char *end;
	long major = strtol(v, &end, 10), minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
	if (major != 2 || minor < 35)
		return; /* no dl_load_tls_lock before 2.35 */
	const uint32_t *d = dlsym(RTLD_DEFAULT, "_thread_db_pthread_tid");
	void *g = dlsym(RTLD_DEFAULT, "_rtld_global");
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	if (!d || d[0] != 32 || !g || !dladdr1(g, &info, (void **)&sym, RTLD_DL_SYMENT) ||
	    !sym || sym->st_size < 3 * sizeof(struct gmutex))
		return;
	tidoff = d[2];
	size_t most = sym->st_size / sizeof(struct gmutex);
	unsigned *counts = rtalloc(most * sizeof *counts);
	if (!counts)
		return;
	struct probe pr = { .tid = selftid(), .counts = counts };
	struct gmutex *found = NULL;
	/* at each 8-byte offset (the struct's mutexes are 8-aligned) */
	for (size_t off = 0; off < sizeof(struct gmutex) && !found && pr.tid; off += 8) {
		pr.base = (struct gmutex *)((char *)g + off);
		pr.n = (sym->st_size - off) / sizeof(struct gmutex);
		pr.found = NULL;
		dl_iterate_phdr(probe_cb, &pr);
		found = pr.found;
	}
	rtfree(counts);
	/* its neighbours inside _rtld_global: dl_load_lock before, the TLS
	 * lock after, both recursive */
	if (!found || (char *)found < (char *)g + sizeof *found || found == pr.base + pr.n - 1 ||
	    found[1].kind != KIND_RECURSIVE || found[-1].kind != KIND_RECURSIVE)
		return;
	tlslock = &found[1];
}

/* Whether dl_load_tls_lock is held by another thread than this OS
 * thread on its own TLS (whose TCB records its kernel tid: an M or
 * sysmon, where newm calls glibc): taking it now would wait for the
 * holder.  A look, not a guarantee (another thread may take it just
 * after); false when the lock is unknown. */
bool loaderlock_other(void)
{
	if (!tlslock)
		return false;
	int o = __atomic_load_n(&tlslock->owner, __ATOMIC_RELAXED);
	return o != 0 && o != (int)sys_gettid();
}

/* Whether the running context (its TCB's tid) holds dl_load_tls_lock:
 * code that runs inside a dlopen's relocation (an IFUNC resolver). */
bool loaderlock_mine(void)
{
	if (!tlslock)
		return false;
	int o = __atomic_load_n(&tlslock->owner, __ATOMIC_RELAXED);
	return o != 0 && o == selftid();
}

