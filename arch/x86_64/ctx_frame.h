/*
 * ctx_frame.h - layout of a switched-out context on x86-64 (SysV).
 * weft_ctx_switch leaves this frame at the saved sp, lowest address first.
 */
#ifndef WEFT_ARCH_X86_64_CTX_FRAME_H
#define WEFT_ARCH_X86_64_CTX_FRAME_H

#include <stdint.h>

struct ctx_frame {
	uint32_t mxcsr;  /* SSE control/status: rounding mode, exception masks */
	uint16_t fpucw;  /* x87 control word: precision and rounding */
	uint16_t pad;
	uint64_t r15;
	uint64_t r14;
	uint64_t r13;
	uint64_t r12;
	uint64_t rbx;
	uint64_t rbp;    /* frame pointer: 0 in a fresh context ends backtraces */
	uint64_t rip;    /* where the switch returns to */
};

#define CTX_FRAME_BYTES 64 /* sizeof(struct ctx_frame) */

/* Stack pointer of the switched-out code once the frame is popped. */
static inline uint64_t ctx_frame_sp(void *sp)
{
	return (uint64_t)(uintptr_t)sp + CTX_FRAME_BYTES;
}

/* Spin-wait hint: tells the core we are in a busy-wait loop. */
static inline void cpu_relax(void)
{
	__asm__ volatile("pause" ::: "memory");
}

#endif
