/* An actor's links (actor_exit's links array) with an index once they are many, so that a
 * supervisor of 100,000 linked children adds, finds and removes one in O(1). Under the
 * actor's cold lock, as every use of its links (core/exit.c). */
#ifndef SMARM_CORE_LINKSET_H
#define SMARM_CORE_LINKSET_H

#include <stdint.h>

struct actor;

/* 0 (added, or already there), or -1 when out of memory. */
int linkset_add(struct actor *a, uint64_t pid);
/* Removes pid if it is there. */
void linkset_remove(struct actor *a, uint64_t pid);
/* Frees the index (the links array itself is the caller's). */
void linkset_drop_index(struct actor *a);

#endif
