/*
 * switch.S - fresh contexts for x86-64, System V ABI.
 *
 * The switch itself is inline assembly (ctx_frame.h: weft_ctx_switch),
 * in the function that switches.  A fresh context is the frame that
 * switch pops (ctx_frame.h), made so that its ret enters weft_ctx_start
 * with the stack's top 16-byte aligned and the entry function above it.
 */
	.text

/* void *weft_ctx_make(void *hi (rdi), void (*entry)(void) (rsi)) */
	.globl	weft_ctx_make
	.hidden	weft_ctx_make
	.type	weft_ctx_make, @function
	.p2align 4
weft_ctx_make:
	.cfi_startproc
	endbr64
	andq	$-16, %rdi		/* SysV: 16-byte aligned stack */
	leaq	-24(%rdi), %rax		/* the frame (ctx_frame.h) */
	movl	$0x1f80, (%rax)		/* default MXCSR: all exceptions masked */
	movw	$0x037f, 4(%rax)	/* default x87 CW: extended precision */
	movw	$0, 6(%rax)
	leaq	weft_ctx_start(%rip), %rdx
	movq	%rdx, 8(%rax)		/* rip: the switch's ret goes there */
	movq	%rsi, 16(%rax)		/* (rbp) the entry, for weft_ctx_start */
	ret
	.cfi_endproc
	.size	weft_ctx_make, .-weft_ctx_make

/* First code of every context, entered by a switch's ret: the entry is
 * at rsp, below hi.  Calls it with rsp == hi, 16-byte aligned, and rbp 0
 * (backtraces stop here); it must not return; if it does, trap rather
 * than run off the top of the stack. */
	.type	weft_ctx_start, @function
	.p2align 4
weft_ctx_start:
	.cfi_startproc
	.cfi_undefined rip		/* outermost frame for unwinders */
	popq	%rax
	xorl	%ebp, %ebp
	callq	*%rax
	ud2
	.cfi_endproc
	.size	weft_ctx_start, .-weft_ctx_start

	.section .note.GNU-stack,"",@progbits

/* CET: indirect-branch tracking is fine (every entry point starts with
 * endbr64; the switch enters a context by ret, not an indirect jump),
 * but not shadow stacks: the switch returns on another stack than it was
 * called on, which a shadow stack would refuse.  So
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
