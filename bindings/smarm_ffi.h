/* The C functions Lua reaches through the LuaJIT FFI. scripts/gen-cdef turns
 * this header into the cdefs that lua/smarm/ffi.lua loads: edit only here.
 * Plain declarations only (ffi.cdef does not expand macros). */
#ifndef SMARM_FFI_H
#define SMARM_FFI_H

#include <stdint.h>

typedef struct smarm_actor_info {
    uint64_t pid;
    uint64_t parent;
    int32_t state;         /* 1 queued, 2 running, 3 running (woken), 4 parked */
    uint32_t mailbox;      /* queued messages */
    uint64_t memory;       /* bytes held by its Lua state */
    uint64_t parks;        /* times it waited */
    uint64_t yields;       /* times it yielded */
    uint64_t messages_in;  /* messages received */
    uint64_t stack_reserve;/* bytes of its C stack, 0 while parked without one */
    uint64_t stack_guard;
    uint64_t timeslices;    /* times it was switched in */
    uint64_t migrations;    /* times it resumed on another scheduler thread */
    uint64_t preempt_hook;  /* preempted in interpreted code (count hook) */
    uint64_t preempt_jit;   /* preempted in JIT-compiled code (signal-driven switch) */
    uint64_t preempt_safe;  /* preempted at a runtime safe point */
    uint64_t max_heap;      /* 0 = unlimited */
    uint32_t links;         /* linked actors */
    uint32_t monitors;      /* monitors watching it */
    int32_t trapping;       /* 1 if it traps exits */
    char name[64];          /* its registered name, "" if none (truncated) */
} smarm_actor_info;

/* Fills out for a live pid of the caller's runtime; 0, or -1 if pid is not alive. */
int smarm_ffi_actor_info(uint64_t pid, smarm_actor_info *out);
/* Writes up to max live pids into out; returns how many were written. */
uint32_t smarm_ffi_pids(uint64_t *out, uint32_t max);
/* Live actors of the caller's runtime. */
int64_t smarm_ffi_actor_count(void);

#endif
