/*
 * ctx_frame.h - the context switch of x86-64 (SysV), and the layout of
 * a switched-out context.
 *
 * The switch is inline assembly in the function that switches (proc.c
 * gswitch_inl), not a call: it tells the compiler that every register
 * but the stack and frame pointers is clobbered, so the compiler keeps
 * across it only what is live, in that function's own frame, and saves
 * the callee-saved registers once, in that function's prologue.  (An
 * assembly function had to save all six again, on top of its caller's
 * prologue: ~14 instructions a switch more, with the call and return.)
 * What the switch itself keeps on the stack being left is what the
 * compiler cannot: the frame pointer, where to resume, and the SSE and
 * x87 control words, which the ABI makes callee-saved.
 */
#ifndef WEFT_ARCH_X86_64_CTX_FRAME_H
#define WEFT_ARCH_X86_64_CTX_FRAME_H

#include <stdint.h>

/* A switched-out context: this frame at its saved sp, lowest address
 * first.  Its rbx and r12-r15 are wherever the compiler of the function
 * that switched put them (its prologue saved its caller's; the unwinder
 * finds them through that function's CFI from rip, the sp once this
 * frame is popped, and rbp). */
struct ctx_frame {
	uint32_t mxcsr;  /* SSE control/status: rounding mode, exception masks */
	uint16_t fpucw;  /* x87 control word: precision and rounding */
	uint16_t pad;    /* unused */
	uint64_t rip;    /* where it resumes: inside the switch that saved it
	                  * (in the function that switched), or weft_ctx_start */
	uint64_t rbp;    /* its frame pointer; in a fresh context, the entry
	                  * function weft_ctx_start calls */
};

#define CTX_FRAME_BYTES 24 /* sizeof(struct ctx_frame) */

/* Stack pointer of the switched-out code once the frame is popped. */
static inline uint64_t ctx_frame_sp(void *sp)
{
	return (uint64_t)(uintptr_t)sp + CTX_FRAME_BYTES;
}

/* The switch's code, wherever it was inlined, lies in ranges listed in
 * the section weft_ctxsw (each bound relative to where it is stored):
 * a thread stopped inside one has its stack half switched. */
struct ctx_range {
	int32_t lo; /* the first byte, from &lo */
	int32_t hi; /* one past the last, from &hi */
};

/* Save the running context, storing its sp in *save, and resume the one
 * whose sp is next, handing it pass.  Returns when someone switches back,
 * with the pass of that switch (a context resumed by weft_ctx_start gets
 * none).  Every register but rsp and rbp is clobbered, so the compiler
 * keeps nothing in one across the switch; rbp is pushed (it may be the
 * frame pointer, which an asm may not clobber), then the address to
 * resume at, by a call: the return stack buffer then predicts the ret
 * that resumes the next context, which comes back through the same site
 * (two Gs switching to each other from one place) - a push of the
 * address and a ret mispredict every time.  MXCSR and the x87 control
 * word are loaded only when they differ (a load stalls the pipeline).
 * The stack below rsp is written: no red zone may be in use, which holds
 * as every function that switches makes calls (the compilers use the red
 * zone in leaf functions only).  The x87 stack is empty and DF is clear
 * here, as at any call. */
static inline __attribute__((always_inline)) void *weft_ctx_switch(void **save, void *next,
								  void *pass)
{
	__asm__ volatile("0:\n\t"
			 "pushq	%%rbp\n\t"
			 "call	1f\n\t"
			 "popq	%%rbp\n\t" /* resumed here (ctx_frame.rip) */
			 "jmp	3f\n"
			 "1:\n\t"
			 "subq	$8, %%rsp\n\t"
			 "stmxcsr	(%%rsp)\n\t"
			 "fnstcw	4(%%rsp)\n\t"
			 "movl	(%%rsp), %%eax\n\t"
			 "movzwl	4(%%rsp), %%ecx\n\t"
			 "movq	%%rsp, (%[save])\n\t" /* publish our sp */
			 "movq	%[next], %%rsp\n\t"   /* on the next context's stack */
			 "cmpl	(%%rsp), %%eax\n\t"
			 "je	2f\n\t"
			 "ldmxcsr	(%%rsp)\n"
			 "2:\n\t"
			 "cmpw	4(%%rsp), %%cx\n\t"
			 "je	4f\n\t"
			 "fldcw	4(%%rsp)\n"
			 "4:\n\t"
			 "addq	$8, %%rsp\n\t"
			 "ret\n" /* into the next context's switch, or weft_ctx_start */
			 "3:\n\t"
			 ".pushsection weft_ctxsw, \"a\"\n\t"
			 ".balign 4\n\t"
			 ".long 0b - .\n\t"
			 ".long 3b - .\n\t"
			 ".popsection"
			 : [save] "+D"(save), [next] "+S"(next), "+d"(pass)
			 :
			 : "rax", "rbx", "rcx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
			   "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
			   "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
#ifdef __AVX512F__
			   "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
			   "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31",
			   "k1", "k2", "k3", "k4", "k5", "k6", "k7",
#endif
			   "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)",
			   "mm0", "mm1", "mm2", "mm3", "mm4", "mm5", "mm6", "mm7", "memory", "cc");
	return pass;
}

/* Spin-wait hint: tells the core we are in a busy-wait loop. */
static inline void cpu_relax(void)
{
	__asm__ volatile("pause" ::: "memory");
}

/* One more on a counter that only the calling thread writes, read by
 * others with relaxed loads: one unlocked add on memory (a relaxed load
 * and store of the new value, as one instruction; an aligned store, so a
 * reader sees the old or the new value whole). */
static inline void ctx_tally64(_Atomic uint64_t *c)
{
	__asm__ volatile("addq	$1, %0" : "+m"(*(uint64_t *)c));
}

static inline void ctx_tally32(_Atomic uint32_t *c)
{
	__asm__ volatile("addl	$1, %0" : "+m"(*(uint32_t *)c));
}

#endif
