/* Selective receive: the inbox scanned in arrival order without taking what does not match.
 * The C half gives Lua a cursor over the inbox (lua/smarm/selective.lua drives it) and keeps
 * the values of scanned messages decoded, so a message a match kept is decoded once. */
#ifndef SMARM_LIB_RECV_LUA_H
#define SMARM_LIB_RECV_LUA_H

#include "core/actor.h"

typedef struct lua_State lua_State;

/* Takes m, just removed from a's inbox (recv, select's inbox arm): counts and traces it,
 * lets a host's fd follow, pushes its value (the cached one if a scan decoded it) and frees
 * it. Raises as luavm_take does. */
void recv_lua_take(actor *a, lua_State *L, struct msg *m, const char *fname);

/* package.preload["smarm.selective.raw"]: mark, begin, next, take, wait, deadline. */
int recv_lua_open(lua_State *L);

#endif
