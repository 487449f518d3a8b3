/*
 * ctx.h - the whole interface between runtime/ and arch/<cpu>/.
 *
 * A context is just a saved stack pointer: everything else a switch must
 * keep (callee-saved registers, FP control state) is on the stack being
 * left.  To port weft, implement in arch/<cpu>/ctx_frame.h the inline
 * switch
 *
 *     void *weft_ctx_switch(void **save, void *next, void *pass);
 *
 * (save the running context, storing its sp in *save, and resume the
 * context whose sp is next, handing it pass; returns when someone
 * switches back, with the pass of that switch), the frame accessors and
 * the table of ranges its code occupies (struct ctx_range, section
 * weft_ctxsw), and in arch/<cpu>/switch.S the two symbols below.
 */
#ifndef WEFT_ARCH_CTX_H
#define WEFT_ARCH_CTX_H

#include <stdint.h>

/* Prepare a fresh context at the top of a stack (hi, 16-byte aligned):
 * the first switch to the returned sp calls entry(), which must never
 * return.  Writes only the top CTX_FRAME_BYTES below hi. */
void *weft_ctx_make(void *hi, void (*entry)(void));

#if defined(__x86_64__)
#include "x86_64/ctx_frame.h"
#elif defined(__aarch64__)
#error "arch/aarch64 is not written yet: port arch/x86_64/switch.S"
#else
#error "unsupported CPU"
#endif

#endif
