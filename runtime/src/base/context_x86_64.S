/* x86-64 SysV context switch: callee-saved registers and FP control words on the stack,
 * and the entry trampoline of a fresh stack, which ends the unwind chain. */

/* Saved frame, from the saved sp upward (64 bytes, so the saved sp is 16-aligned):
 *   0: MXCSR (4 bytes) and x87 control word (2 bytes)
 *   8: r15  16: r14  24: r13  32: r12  40: rbx  48: rbp  56: return address */

    .text

/* void ctx_switch(void **save_sp, void *load_sp) */
    .globl ctx_switch
    .type ctx_switch, @function
    .p2align 4
ctx_switch:
    .cfi_startproc
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbx, 0
    pushq %r12
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r12, 0
    pushq %r13
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r13, 0
    pushq %r14
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r14, 0
    pushq %r15
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r15, 0
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movl (%rsp), %eax
    movzwl 4(%rsp), %ecx

    movq %rsp, (%rdi)
    movq %rsi, %rsp

    /* Now on the other stack: the CFI above describes its frame equally well. Each control
     * word is loaded only when the other context's differs from this one's (they are
     * almost always the same): ldmxcsr and fldcw are microcoded, and with them a switch
     * held back the misses that a woken actor's first steps start (a ring of 1,000 actors:
     * 3% of a hop). MXCSR is compared on its control bits: when only its sticky exception
     * flags differ, they carry over. */
    movl (%rsp), %edx
    xorl %eax, %edx
    testl $0xffc0, %edx
    jz 1f
    ldmxcsr (%rsp)
1:
    cmpw 4(%rsp), %cx
    je 2f
    fldcw 4(%rsp)
2:
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %r15
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r15
    popq %r14
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r14
    popq %r13
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r13
    popq %r12
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r12
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    popq %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
    ret
    .cfi_endproc
    .size ctx_switch, .-ctx_switch

/* void *ctx_make(void *stack_top, void (*entry)(void *), void *arg)
 * Builds a saved frame whose return address is ctx_trampoline, with entry in r12 and
 * arg in r13, rbp zero (frame-pointer walks stop) and the caller's FP control words
 * (MXCSR without its sticky exception flags). The trampoline runs with rsp = top - 16. */
    .globl ctx_make
    .type ctx_make, @function
    .p2align 4
ctx_make:
    .cfi_startproc
    movq %rdi, %rax
    andq $-16, %rax                 /* top, 16-aligned */
    subq $80, %rax                  /* 64-byte frame + 16 bytes above it; rax = saved sp */
    movq $0, 72(%rax)               /* the slot above the return address: a null "caller" */
    movq $0, 64(%rax)
    leaq ctx_trampoline(%rip), %rcx
    movq %rcx, 56(%rax)             /* return address */
    movq $0, 48(%rax)               /* rbp */
    movq $0, 40(%rax)               /* rbx */
    movq %rsi, 32(%rax)             /* r12 = entry */
    movq %rdx, 24(%rax)             /* r13 = arg */
    movq $0, 16(%rax)               /* r14 */
    movq $0, 8(%rax)                /* r15 */
    stmxcsr (%rax)
    andl $0xffffffc0, (%rax)        /* drop the sticky exception flags */
    fnstcw 4(%rax)
    movw $0, 6(%rax)
    ret
    .cfi_endproc
    .size ctx_make, .-ctx_make

/* First code run on a fresh stack (entered by ctx_switch's ret, rsp 16-aligned, so entry
 * sees rsp+8 16-aligned as the ABI requires). The return address is undefined: unwinders
 * (libgcc, LuaJIT's error unwinding, gdb, backtrace()) stop here. The nop keeps
 * "return address - 1" lookups inside this FDE. */
    .type ctx_trampoline, @function
    .p2align 4
    .cfi_startproc
    .cfi_undefined %rip
    nop
ctx_trampoline:
    movq %r13, %rdi
    callq *%r12
    /* entry must never return */
    callq abort@PLT
    ud2
    .cfi_endproc
    .size ctx_trampoline, .-ctx_trampoline

    .section .note.GNU-stack,"",@progbits
