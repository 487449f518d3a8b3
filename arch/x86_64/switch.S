/*
 * switch.S - context switch for x86-64, System V ABI.
 *
 * Only what the ABI says a callee must preserve is saved: rbx, rbp,
 * r12-r15, the stack pointer, MXCSR's control bits and the x87 control
 * word.  Everything else is caller-saved, and the call to
 * weft_ctx_switch already told the compiler so.  The x87 stack is empty
 * and DF is clear at any call, so neither needs saving.  The saved sp
 * stays 16-byte aligned.  Frame layout: arch/x86_64/ctx_frame.h.
 */
	.text

/* void weft_ctx_switch(void **save (rdi), void *next (rsi)) */
	.globl	weft_ctx_switch
	.hidden	weft_ctx_switch
	.type	weft_ctx_switch, @function
	.p2align 4
weft_ctx_switch:
	.cfi_startproc
	endbr64
	pushq	%rbp		/* frame pointer */
	pushq	%rbx		/* callee-saved */
	pushq	%r12		/* callee-saved */
	pushq	%r13		/* callee-saved */
	pushq	%r14		/* callee-saved */
	pushq	%r15		/* callee-saved */
	subq	$8, %rsp
	stmxcsr	(%rsp)		/* SSE rounding mode and exception masks */
	fnstcw	4(%rsp)		/* x87 precision and rounding control */
	movl	(%rsp), %eax	/* ours, to compare (rax, rcx: caller-saved) */
	movzwl	4(%rsp), %ecx
	movq	%rsp, (%rdi)	/* publish the old context's sp */
	movq	%rsi, %rsp	/* now on the next context's stack */
	/* Loading MXCSR or the x87 CW stalls the pipeline; nearly every
	 * context has the same values, so load only what differs. */
	cmpl	(%rsp), %eax
	jne	.Lload_mxcsr
.Lmxcsr_done:
	cmpw	4(%rsp), %cx
	jne	.Lload_fpucw
.Lfpucw_done:
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	ret			/* to where the next context called us, or ctx_start */
.Lload_mxcsr:
	ldmxcsr	(%rsp)
	jmp	.Lmxcsr_done
.Lload_fpucw:
	fldcw	4(%rsp)
	jmp	.Lfpucw_done
	.cfi_endproc
	.size	weft_ctx_switch, .-weft_ctx_switch

/* void *weft_ctx_make(void *hi (rdi), void (*entry)(void) (rsi))
 * Builds a frame that weft_ctx_switch pops into weft_ctx_start. */
	.globl	weft_ctx_make
	.hidden	weft_ctx_make
	.type	weft_ctx_make, @function
	.p2align 4
weft_ctx_make:
	.cfi_startproc
	endbr64
	andq	$-16, %rdi		/* SysV: 16-byte aligned stack */
	leaq	-64(%rdi), %rax		/* the frame (ctx_frame.h) */
	movl	$0x1f80, (%rax)		/* default MXCSR: all exceptions masked */
	movw	$0x037f, 4(%rax)	/* default x87 CW: extended precision */
	movw	$0, 6(%rax)
	movq	$0, 8(%rax)		/* r15 */
	movq	$0, 16(%rax)		/* r14 */
	movq	$0, 24(%rax)		/* r13 */
	movq	%rsi, 32(%rax)		/* r12 = entry */
	movq	$0, 40(%rax)		/* rbx */
	movq	$0, 48(%rax)		/* rbp = 0: backtraces stop here */
	leaq	weft_ctx_start(%rip), %rdx
	movq	%rdx, 56(%rax)		/* rip */
	ret
	.cfi_endproc
	.size	weft_ctx_make, .-weft_ctx_make

/* First code of every context: rsp == hi, 16-byte aligned.  Calls
 * entry(), which must not return; if it does, trap rather than run off
 * the top of the stack. */
	.type	weft_ctx_start, @function
	.p2align 4
weft_ctx_start:
	.cfi_startproc
	.cfi_undefined rip		/* outermost frame for unwinders */
	xorl	%ebp, %ebp
	callq	*%r12
	ud2
	.cfi_endproc
	.size	weft_ctx_start, .-weft_ctx_start

	.section .note.GNU-stack,"",@progbits

/* CET: indirect-branch tracking is fine (every entry point starts with
 * endbr64), but not shadow stacks: weft_ctx_switch returns on another
 * stack than it was called on, which a shadow stack would refuse.  So
 * this object marks IBT only, and so does every library linked with it
 * (the linker ANDs the markings). */
	.section .note.gnu.property,"a"
	.p2align 3
	.long	4		/* name size */
	.long	16		/* descriptor size */
	.long	5		/* NT_GNU_PROPERTY_TYPE_0 */
	.asciz	"GNU"
	.long	0xc0000002	/* GNU_PROPERTY_X86_FEATURE_1_AND */
	.long	4		/* data size */
	.long	1		/* GNU_PROPERTY_X86_FEATURE_1_IBT */
	.p2align 3
