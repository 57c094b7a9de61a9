/* Process groups: a group name holds a multiset of members (pid, node,
 * incarnation); members leave when they die. */
#ifndef SMARM_PG_H
#define SMARM_PG_H

#include <stdint.h>

struct smarm_runtime;
struct actor;

int pg_init(struct smarm_runtime *rt);
void pg_free(struct smarm_runtime *rt);
/* Adds one membership of live pid: 0, -1 if pid is not alive, -2 out of memory. */
int pg_join(struct smarm_runtime *rt, const char *group, uint64_t pid);
/* Removes one membership; 1 if there was one. */
int pg_leave(struct smarm_runtime *rt, const char *group, uint64_t pid);
/* Writes up to max live members (one entry per membership); returns how many
 * there are in all (may exceed max). */
uint32_t pg_members(struct smarm_runtime *rt, const char *group, uint64_t *out, uint32_t max);
/* A live member picked at random, or 0. */
uint64_t pg_pick(struct smarm_runtime *rt, const char *group);
/* At a's death: every membership it held goes. */
void pg_finalize(struct smarm_runtime *rt, struct actor *a);

#endif
