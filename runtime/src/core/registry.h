/* Names: a name resolves to one live actor; an actor holds at most one name. */
#ifndef SMARM_REGISTRY_H
#define SMARM_REGISTRY_H

#include <stdint.h>

struct smarm_runtime;
struct actor;

enum { REG_OK = 0, REG_TAKEN = -1, REG_DEAD = -2, REG_NAMED = -3, REG_NOMEM = -4 };

int registry_init(struct smarm_runtime *rt);
void registry_free(struct smarm_runtime *rt);
/* Binds name to live pid: REG_OK (also when already so bound), REG_TAKEN (another
 * live actor holds it), REG_DEAD (pid is not alive), REG_NAMED (pid has another name). */
int registry_register(struct smarm_runtime *rt, const char *name, uint64_t pid);
/* Binds name to a, an actor being spawned (before it can run): REG_OK,
 * REG_TAKEN or REG_NOMEM. */
int registry_register_spawning(struct smarm_runtime *rt, const char *name, struct actor *a);
/* Frees name; 1 if it was bound. */
int registry_unregister(struct smarm_runtime *rt, const char *name);
/* The live actor holding name, or 0 (a binding to a dead actor is dropped on contact). */
uint64_t registry_whereis(struct smarm_runtime *rt, const char *name);
/* At a's death: its name is released. */
void registry_finalize(struct smarm_runtime *rt, struct actor *a);
/* Copies a's name into buf (empty if none). */
void registry_name_of(struct smarm_runtime *rt, struct actor *a, char *buf, unsigned len);

#endif
