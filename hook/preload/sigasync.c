/*
 * sigasync.c - a signal handler for a G that is computing runs at once,
 * on that G, in the middle of its computation, as the kernel runs one on
 * a thread.
 *
 * A signal for a G that is parked in an interruptible call wakes it
 * (signal.c, g_interrupt).  One for a G that runs user code cannot wait
 * for its next call: the G may never make one (`while (!flag) ;` with
 * the flag set by the handler).  So the sender finds the M that runs the
 * G and sends that OS thread SIGWEFT (the shim's own signal, which every
 * M takes); its handler (on_weft) calls async_check, which, if the M
 * still runs that G, in user code, with a signal pending that the G
 * lets through, makes the G call the handlers as it returns from the
 * signal: the interrupted RIP is kept in g->sigrip and the context's RIP
 * is pointed at sig_async_tramp, which saves every register (and the
 * FPU/vector state with xsave), calls sig_async - sig_run on the G's own
 * stack, an ordinary call from which the handler may park, call
 * anything, or run on another M - restores them all and jumps back, the
 * red zone untouched.  (Go's asynchronous preemption injects a call the
 * same way: runtime/signal_amd64.go pushCall.)
 *
 * Only user code is interrupted so: never the runtime (rtdepth > 0, a
 * G switch, the scheduler), never the shim's own code, nor the C library
 * or dynamic linker (the shim may be inside them holding its locks; a
 * thread of the program stopped in libc is the rare case, but for the
 * `ret` of a leaf system-call wrapper the program itself called:
 * libc_leaf), nor a split
 * stack.  The kernel's mask of an M never lets the program's signals in
 * (signal.c), so the G's own mask is the only one that counts: sig_run
 * runs only what the G lets through, and each pending bit is taken with
 * one atomic and, by the one that runs it, so a signal is never run
 * twice.
 *
 * A kick may miss: the G was in libc, or switched out meanwhile, or
 * switched in just after the sender looked at the Ms.  The router
 * (signal.c) therefore looks again (async_rescan) - 200 us later, then
 * backing off to 100 ms - at every G with a signal it lets through that
 * is still pending, and kicks again those that run, until none is left.
 */
#include "shim.h"

#include <cpuid.h>
#include <link.h>
#include <string.h>
#include <ucontext.h>

/* ---- where a G may be stopped ------------------------------------------------------ */

#define ASYNC_ROOM (8 * 1024) /* stack a G must have left (the saved state, sig_run) */

static struct span {
	uintptr_t lo, hi;
	bool libc;          /* the C library's (leaf system-call wrappers: libc_leaf) */
} notuser[32];      /* executable segments of the shim, libc, ld.so, the vDSO ... */
static int nnotuser; /* set once by async_init, before any kick */

static int note_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	const char *n = info->dlpi_name ? info->dlpi_name : "";
	static const char *const sys[] = { "/libc.so", "/ld-linux", "linux-vdso", "/libunwind",
					   "/liblzma", "/libgcc_s" };
	bool ours = false;
	for (size_t i = 0; i < sizeof sys / sizeof sys[0] && !ours; i++)
		ours = strstr(n, sys[i]) != NULL;
	bool libc = strstr(n, "/libc.so") != NULL;
	for (int i = 0; i < info->dlpi_phnum && !ours; i++) {
		/* the shim itself: its text holds __ehdr_start */
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		ours = ph->p_type == PT_LOAD && (uintptr_t)__ehdr_start >= lo &&
		       (uintptr_t)__ehdr_start < lo + ph->p_memsz;
	}
	if (!ours)
		return 0;
	for (int i = 0; i < info->dlpi_phnum && nnotuser < (int)(sizeof notuser / sizeof notuser[0]);
	     i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
			notuser[nnotuser++] = (struct span){ info->dlpi_addr + ph->p_vaddr,
							     info->dlpi_addr + ph->p_vaddr + ph->p_memsz,
							     libc };
	}
	return 0;
}

/* The saved state: xsave of x87, SSE, AVX and AVX-512 (mask 0xe7), in
 * an area of the size CPUID gives; fxsave (512 bytes) without xsave.
 * Read by sig_async_tramp. */
__attribute__((used)) HIDDEN uint32_t sig_xsize = 512;
__attribute__((used)) HIDDEN uint8_t sig_xsave;

static bool async_on; /* async_init ran: kicks may be acted on */

void async_init(void)
{
	unsigned a, b, c, d;
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && __get_cpuid_max(0, NULL) >= 0xd) {
		__cpuid_count(0xd, 0, a, b, c, d);
		if (b >= 576) {
			sig_xsize = b;
			sig_xsave = 1;
		}
	}
	nnotuser = 0;
	dl_iterate_phdr(note_object, NULL);
	async_on = nnotuser > 0; /* the shim's own text at least: else never */
}

static bool user_code(uintptr_t rip)
{
	for (int i = 0; i < nnotuser; i++)
		if (rip >= notuser[i].lo && rip < notuser[i].hi)
			return false;
	return true;
}

/* Stopped on the `ret` right after the `syscall` of one of libc's leaf
 * wrappers (`mov $NR,%eax; syscall; ret`: getppid, getuid ...), which
 * the program's own code called: [sp] is the return address, in user
 * code.  The kernel would run the handler just here; so may we (nothing
 * of the shim's is on the way: a call from the shim would return into
 * the shim).  Without it a thread that spends its time in such calls -
 * `while (!flag) getppid();` - is almost never stopped in user code. */
static bool libc_leaf(uintptr_t rip, uintptr_t sp)
{
	bool inlibc = false;
	for (int i = 0; i < nnotuser && !inlibc; i++)
		inlibc = notuser[i].libc && rip >= notuser[i].lo + 2 && rip < notuser[i].hi;
	/* the three bytes lie in libc's text, which is mapped and readable */
	if (!inlibc || *(const uint8_t *)rip != 0xc3 || *(const uint16_t *)(rip - 2) != 0x050f)
		return false;
	return user_code(*(const uintptr_t *)sp);
}

/* ---- the injected call ------------------------------------------------------------- */

void sig_async_tramp(void) HIDDEN;
void sig_async(uintptr_t *ra) HIDDEN;

/*
 * Entered as the signal returns, with every register as the G had it
 * but RIP (kept in g->sigrip).  The frame, from the interrupted rsp
 * down: 128 bytes of red zone left alone, the return slot (filled by
 * sig_async from g->sigrip), flags, the 15 general registers, then the
 * xsave area, 64-aligned.  `ret $128` pops the return slot and the red
 * zone: rsp and rip are the G's again, with everything else restored.
 */
__asm__(".text\n"
	".p2align 4\n"
	".globl sig_async_tramp\n"
	".hidden sig_async_tramp\n"
	".type sig_async_tramp, @function\n"
	"sig_async_tramp:\n"
	".cfi_startproc simple\n"
	".cfi_signal_frame\n"
	".cfi_def_cfa %rsp, 0\n"
	"	lea -136(%rsp), %rsp\n" /* lea: the flags are still the G's */
	".cfi_adjust_cfa_offset 136\n"
	".cfi_offset 16, -136\n" /* the return address (rip) */
	"	pushfq\n"
	".cfi_adjust_cfa_offset 8\n"
	"	push %rax\n.cfi_adjust_cfa_offset 8\n"
	"	push %rcx\n.cfi_adjust_cfa_offset 8\n"
	"	push %rdx\n.cfi_adjust_cfa_offset 8\n"
	"	push %rbx\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %rbx, 0\n"
	"	push %rbp\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %rbp, 0\n"
	"	push %rsi\n.cfi_adjust_cfa_offset 8\n"
	"	push %rdi\n.cfi_adjust_cfa_offset 8\n"
	"	push %r8\n.cfi_adjust_cfa_offset 8\n"
	"	push %r9\n.cfi_adjust_cfa_offset 8\n"
	"	push %r10\n.cfi_adjust_cfa_offset 8\n"
	"	push %r11\n.cfi_adjust_cfa_offset 8\n"
	"	push %r12\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %r12, 0\n"
	"	push %r13\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %r13, 0\n"
	"	push %r14\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %r14, 0\n"
	"	push %r15\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %r15, 0\n"
	"	mov %rsp, %rbp\n"
	".cfi_def_cfa_register %rbp\n"
	"	mov sig_xsize(%rip), %eax\n"
	"	sub %rax, %rsp\n"
	"	and $-64, %rsp\n"
	"	cmpb $0, sig_xsave(%rip)\n"
	"	je 1f\n"
	"	xor %eax, %eax\n" /* the xsave header: xrstor faults on stale bytes */
	"	mov %rax, 512(%rsp)\n"
	"	mov %rax, 520(%rsp)\n"
	"	mov %rax, 528(%rsp)\n"
	"	mov %rax, 536(%rsp)\n"
	"	mov %rax, 544(%rsp)\n"
	"	mov %rax, 552(%rsp)\n"
	"	mov %rax, 560(%rsp)\n"
	"	mov %rax, 568(%rsp)\n"
	"	mov $0xe7, %eax\n"
	"	xor %edx, %edx\n"
	"	xsave64 (%rsp)\n"
	"	jmp 2f\n"
	"1:	fxsave64 (%rsp)\n"
	"2:	cld\n"
	"	lea 128(%rbp), %rdi\n"
	"	call sig_async\n"
	"	cmpb $0, sig_xsave(%rip)\n"
	"	je 3f\n"
	"	mov $0xe7, %eax\n"
	"	xor %edx, %edx\n"
	"	xrstor64 (%rsp)\n"
	"	jmp 4f\n"
	"3:	fxrstor64 (%rsp)\n"
	"4:	mov %rbp, %rsp\n"
	"	pop %r15\n"
	"	pop %r14\n"
	"	pop %r13\n"
	"	pop %r12\n"
	"	pop %r11\n"
	"	pop %r10\n"
	"	pop %r9\n"
	"	pop %r8\n"
	"	pop %rdi\n"
	"	pop %rsi\n"
	"	pop %rbp\n"
	"	pop %rbx\n"
	"	pop %rdx\n"
	"	pop %rcx\n"
	"	pop %rax\n"
	"	popfq\n"
	"	ret $128\n"
	".cfi_endproc\n"
	".size sig_async_tramp, .-sig_async_tramp\n");

/* On the G, as an ordinary call from where it was stopped: its return
 * address first (nothing can stop it again before: this is the shim's
 * code), then the handlers it lets through. */
void sig_async(uintptr_t *ra)
{
	struct g *gp = getg();
	*ra = gp->sigrip;
	int e = errno_get();
	(void)hook_sigrun();
	errno_set(e);
}

/* The kernel's struct sigaction (rt_sigaction), read in a handler. */
struct ksigaction {
	void *handler;      /* SIG_DFL 0, SIG_IGN 1, else a function */
	unsigned long flags; /* SA_* */
	void *restorer;
	uint64_t mask;
};

/* A G blocked in a system call (G_SYSCALL: a call the shim makes under
 * entersyscall - accept on a listening socket another process took the
 * connection from, a file read, waitpid ...) with a signal sent to it
 * (pthread_kill, tgkill ...) to run whose handler has no SA_RESTART: natively the call ends with EINTR.  SIGWEFT
 * (SA_RESTART) stopped it and the kernel means to restart it - RIP is
 * back on the `syscall` instruction - so skip that and make it return
 * -EINTR instead; the G runs the handler on its way out (blk_exit).  (If
 * it had not entered the kernel yet, the call ends the same way: the
 * signal came first.)  With SA_RESTART the call goes on, as natively;
 * the handler then runs when it returns. */
static void syscall_eintr(ucontext_t *uc, uint64_t pend)
{
	uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	/* (two bytes at rip: not across a page end, which may be the last) */
	if (rip < 4096 || (rip & 4095) == 4095 || *(const uint16_t *)rip != 0x050f) /* syscall */
		return;
	bool restart = true;
	for (int s = 1; s <= 64 && restart; s++) {
		struct ksigaction k;
		if ((pend & (1ULL << (s - 1))) && sys4(SYS_rt_sigaction, s, 0, (long)&k, 8) == 0 &&
		    (uintptr_t)k.handler > 1 && !(k.flags & SA_RESTART))
			restart = false;
	}
	if (restart)
		return;
	uc->uc_mcontext.gregs[REG_RAX] = -EINTR;
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(rip + 2);
}

/* In the SIGWEFT handler of an M (not the signal thread): make the G it
 * runs take its signals now, if it may. */
void async_check(ucontext_t *uc)
{
	struct m *m = getm();
	struct g *gp = m ? atomic_load_explicit(&m->curg, memory_order_relaxed) : NULL;
	uint64_t pend;
	if (!async_on || !gp || !gp->sigon ||
	    !(pend = atomic_load(&gp->sigpend) &
		     ~(atomic_load(&gp->sigmask) | atomic_load(&gp->sighold))))
		return;
	if (atomic_load_explicit(&gp->status, memory_order_relaxed) == G_SYSCALL) {
		/* only for a signal sent to this G itself: a process signal
		 * the router gives it comes later than the kernel would have
		 * given it, and would end a later call (a shell's next
		 * waitpid, for a SIGCHLD) that natively it never interrupts */
		if (pend & atomic_load(&gp->sigthr))
			syscall_eintr(uc, pend & atomic_load(&gp->sigthr));
		return;
	}
	/* the G's own fields, read on the M that runs it (this signal
	 * stopped it): as it left them */
	uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	if (atomic_load_explicit(&gp->status, memory_order_relaxed) != G_RUNNING ||
	    gp->rtdepth != 0 || gp->stack.kind == STACK_SEGMENTED || !gp->stack.lo ||
	    sp < (uintptr_t)gp->stack.lo + ASYNC_ROOM || sp > (uintptr_t)gp->stack.hi - 8 ||
	    !(user_code(rip) || libc_leaf(rip, sp)))
		return; /* not now: the router looks again (async_rescan) */
	gp->sigrip = rip;
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)sig_async_tramp;
}

/* ---- sending the kick, and looking again -------------------------------------------- */

#define RESCAN_FIRST 200000LL     /* ns */
#define RESCAN_MAX 100000000LL

static _Atomic int64_t rescan_at; /* when the router looks again; 0: no need */
static _Atomic int64_t rescan_gap; /* its back-off: 0 after a new kick */

/* Stop gp if it runs (on_weft on its M). */
static void g_tell(struct g *gp)
{
	struct m *m = g_curm(gp);
	int tid = m ? atomic_load(&m->tid) : 0;
	if (tid)
		sig_tell(tid);
}

/* gp does not take its signal at once: stop it if it runs (on_weft on
 * its M), and have the router look again later. */
void async_kick(struct g *gp)
{
	if (!async_on)
		return;
	g_tell(gp);
	atomic_store(&rescan_gap, 0);
	int64_t t = nanotime() + RESCAN_FIRST, cur = atomic_load(&rescan_at);
	while (cur == 0 || cur > t)
		if (atomic_compare_exchange_weak(&rescan_at, &cur, t)) {
			sig_router_poke();
			break;
		}
}

struct rescan {
	int pending; /* Gs with a signal they let through, not run yet */
};

static void rescan_one(struct g *gp, void *arg)
{
	struct rescan *r = arg;
	if (!gp->sigon || atomic_load_explicit(&gp->status, memory_order_relaxed) == G_DEAD ||
	    !(atomic_load(&gp->sigpend) & ~(atomic_load(&gp->sigmask) | atomic_load(&gp->sighold))))
		return;
	r->pending++;
	uint32_t st = atomic_load_explicit(&gp->status, memory_order_relaxed);
	if (st != G_RUNNING && st != G_SYSCALL)
		return; /* parked: g_interrupt's request waits for its next wait */
	g_tell(gp);
}

/* The router: kick again the Gs that still have a signal to run; the
 * time to look next, or -1. */
int64_t async_rescan(void)
{
	int64_t at = atomic_load(&rescan_at);
	if (!at)
		return -1;
	int64_t now = nanotime();
	if (at > now)
		return at;
	struct rescan r = { 0 };
	forEachG(rescan_one, &r);
	if (!r.pending) {
		atomic_store(&rescan_gap, 0);
		atomic_compare_exchange_strong(&rescan_at, &at, 0); /* a new kick keeps its own */
		return atomic_load(&rescan_at) ? atomic_load(&rescan_at) : -1;
	}
	int64_t gap = atomic_load(&rescan_gap);
	gap = gap ? gap * 2 : RESCAN_FIRST * 2;
	if (gap > RESCAN_MAX)
		gap = RESCAN_MAX;
	atomic_store(&rescan_gap, gap);
	int64_t next = now + gap;
	atomic_compare_exchange_strong(&rescan_at, &at, next);
	return atomic_load(&rescan_at);
}

/* Child of fork: the others Gs are gone. */
void async_afterfork_child(void)
{
	atomic_store(&rescan_at, 0);
	atomic_store(&rescan_gap, 0);
}
