/* The actor body: what runs on an actor's C stack. Boots its state and resumes its
 * coroutine, parks a wait (by yielding the coroutine where it can, by switching stacks
 * where it cannot), yields from the preemption hook, closes a stopped actor, and turns how
 * the body ended into the actor's exit reason. The scheduler reaches these through the
 * hooks the runtime installs (core/runtime.h). */
#ifndef SMARM_VM_BODY_H
#define SMARM_VM_BODY_H

#include <stdint.h>

typedef struct lua_State lua_State;
struct actor;

/* The first switch-in of a fresh actor, and every resume of one parked by a coroutine
 * yield: runs its Lua until it parks, yields or ends. Never returns. */
void body_entry(struct actor *a);
/* The switch-in of a stopped actor: its frames are dropped, its state closed. Never returns. */
void body_stop_entry(struct actor *a);
/* From the preemption signal handler: 1 if pc lies in the actor's compiled code (and
 * may_switch): the handler switches it out at once; else arms a one-shot count hook that
 * yields at the next interpreted bytecode and, if a C function called from Lua runs, a
 * switch as it returns, and returns 0. sp: the interrupted stack pointer. Async-signal-safe. */
int body_preempt(struct actor *a, uintptr_t pc, uintptr_t sp, int may_switch);
/* actor_hooks.retune: arms the count hook that switches the state to LuaJIT's own JIT
 * parameters at its next interpreted bytecode (async-signal-safe). */
void body_retune(struct actor *a);

/* Blocks the calling actor from a C function called by Lua on coroutine L until cont (which
 * re-checks the wait's condition after every wake) pushes results. Returns what a
 * lua_CFunction must return: a coroutine park when L can yield (the actor then holds no C
 * stack), a stack park otherwise. cont returns -1 to keep waiting. */
int body_wait(lua_State *L, struct actor *a, int (*cont)(struct actor *, lua_State *));

/* smarm.blocking: moves the calling actor (its C stack with it) to a pool thread, where it
 * returns 1; the caller makes its call there and then calls body_blocking_leave, which
 * returns on a scheduler (or never: a stop that came meanwhile ends the actor there).
 * Returns 0 where the call must be made in place: already inside smarm.blocking, while the
 * actor ends, under a LuaJIT hook, or when no pool thread could be started. */
int body_blocking_enter(struct actor *a);
void body_blocking_leave(struct actor *a);

/* smarm.exit(value): raises the marker that ends the body with that value as its reason. */
int body_raise_exit(lua_State *L, int idx);

/* Makes in L what a body's smarm.exit would make there on first use (a pooled state's image
 * holds it, vm/luavm.c). */
void body_prepare_state(lua_State *L);

/* status values for body_finish beyond lua_resume's */
#define BODY_KILLED 100
#define BODY_ERROR_IN_CONT 101 /* a wait's continuation raised (on the coroutine) */

/* Records how the actor ended (a lua_resume status or BODY_*); an uncaught error is
 * printed with the pid and a traceback. */
void body_finish(struct actor *a, int status);

#endif
