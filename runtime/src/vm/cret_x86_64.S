/* The switch point of a C function preempted while called from Lua (see body_preempt):
 * the signal handler replaced the return address of that call with body_cret_tramp, so
 * the C function's `ret` lands here, with rsp where its caller expects it. Every register
 * is kept (compiled code keeps values in vector registers across a few of LuaJIT's own
 * helpers), body_cret_switch puts the original address back in the slot just popped and
 * may switch the actor out, and the final `ret` goes where the C function would have. */

    .text

/* Frame, from rbp upward: saved rbp, r11..r8, rdi, rsi, rdx, rcx, rax, flags, then the
 * slot (88(%rbp)) that ends up holding the original return address. Vector registers
 * sit below rbp, 16-aligned. */
    .globl body_cret_tramp
    .type body_cret_tramp, @function
    .p2align 4
body_cret_tramp:
    .cfi_startproc
    .cfi_def_cfa %rsp, 0
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    pushfq
    .cfi_adjust_cfa_offset 8
    pushq %rax
    .cfi_adjust_cfa_offset 8
    pushq %rcx
    .cfi_adjust_cfa_offset 8
    pushq %rdx
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %r8
    .cfi_adjust_cfa_offset 8
    pushq %r9
    .cfi_adjust_cfa_offset 8
    pushq %r10
    .cfi_adjust_cfa_offset 8
    pushq %r11
    .cfi_adjust_cfa_offset 8
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    movq %rsp, %rbp
    /* CFA = the slot + 8: backtraces taken during the switch go on through the caller */
    .cfi_def_cfa %rbp, 96
    andq $-16, %rsp
    subq $256, %rsp
    movdqa %xmm0, 0(%rsp)
    movdqa %xmm1, 16(%rsp)
    movdqa %xmm2, 32(%rsp)
    movdqa %xmm3, 48(%rsp)
    movdqa %xmm4, 64(%rsp)
    movdqa %xmm5, 80(%rsp)
    movdqa %xmm6, 96(%rsp)
    movdqa %xmm7, 112(%rsp)
    movdqa %xmm8, 128(%rsp)
    movdqa %xmm9, 144(%rsp)
    movdqa %xmm10, 160(%rsp)
    movdqa %xmm11, 176(%rsp)
    movdqa %xmm12, 192(%rsp)
    movdqa %xmm13, 208(%rsp)
    movdqa %xmm14, 224(%rsp)
    movdqa %xmm15, 240(%rsp)
    cld
    leaq 88(%rbp), %rdi
    call body_cret_switch
    movdqa 0(%rsp), %xmm0
    movdqa 16(%rsp), %xmm1
    movdqa 32(%rsp), %xmm2
    movdqa 48(%rsp), %xmm3
    movdqa 64(%rsp), %xmm4
    movdqa 80(%rsp), %xmm5
    movdqa 96(%rsp), %xmm6
    movdqa 112(%rsp), %xmm7
    movdqa 128(%rsp), %xmm8
    movdqa 144(%rsp), %xmm9
    movdqa 160(%rsp), %xmm10
    movdqa 176(%rsp), %xmm11
    movdqa 192(%rsp), %xmm12
    movdqa 208(%rsp), %xmm13
    movdqa 224(%rsp), %xmm14
    movdqa 240(%rsp), %xmm15
    movq %rbp, %rsp
    popq %rbp
    .cfi_def_cfa %rsp, 88
    .cfi_restore %rbp
    popq %r11
    .cfi_adjust_cfa_offset -8
    popq %r10
    .cfi_adjust_cfa_offset -8
    popq %r9
    .cfi_adjust_cfa_offset -8
    popq %r8
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdx
    .cfi_adjust_cfa_offset -8
    popq %rcx
    .cfi_adjust_cfa_offset -8
    popq %rax
    .cfi_adjust_cfa_offset -8
    popfq
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .size body_cret_tramp, .-body_cret_tramp

    .section .note.GNU-stack,"",@progbits
