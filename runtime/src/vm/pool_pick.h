/* Which scheduler's pool of reset states a spawn takes one from, or an ending actor's state
 * goes to (vm/luavm.c, "The state pool" in docs/DESIGN.md): the caller's own if it can, else
 * the first other one that can. */
#ifndef SMARM_VM_POOL_PICK_H
#define SMARM_VM_POOL_PICK_H

#include <stdint.h>

/* Whether a pool holding n states (at most cap) can give one (take) or take one. */
static inline int pool_can(uint32_t n, int take, uint32_t cap) { return take ? n > 0 : n < cap; }

/* n[0, used): the states each pool holds; own: the caller's; take: a state is wanted (else
 * room for one, a pool holding at most cap). The pool's index, or -1 when none can. */
static inline int pool_pick(const uint32_t *n, int used, int own, int take, uint32_t cap)
{
    if (own >= 0 && own < used && pool_can(n[own], take, cap))
        return own;
    for (int i = 0; i < used; i++)
        if (i != own && pool_can(n[i], take, cap))
            return i;
    return -1;
}

#endif
