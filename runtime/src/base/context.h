/* Context switch between C stacks: the register save/restore lives in context_<arch>.S. */
#ifndef SMARM_CONTEXT_H
#define SMARM_CONTEXT_H

/* Saves the callee-saved registers (and the FP control words) on the current
 * stack, stores the stack pointer in *save_sp, loads load_sp and restores what
 * a previous ctx_switch (or ctx_make) left there. Returns when someone switches back.
 * The FP control words (rounding, precision, exception masks, flush-to-zero) are each
 * context's own; MXCSR's sticky exception flags are not kept apart when its control bits
 * are the same on both sides. */
void ctx_switch(void **save_sp, void *load_sp);

/* Prepares a fresh stack whose top is stack_top (16-byte aligned) so that the
 * first ctx_switch into the returned sp calls entry(arg). entry must never
 * return; its frame ends the unwind chain (CFI marks the return address undefined). */
void *ctx_make(void *stack_top, void (*entry)(void *), void *arg);

#endif
