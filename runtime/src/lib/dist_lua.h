/* The C half of the Erlang distribution (lua/smarm/dist.lua is the rest): the external term
 * format both ways (through erl_interface's ei), atoms and tuples as Lua values, remote pids,
 * and MD5 for the handshake. Module "smarm.dist.raw"; smarm.atom and friends are a group of
 * the smarm table; smarm.send/link/monitor hand a remote pid to dist.lua (lib_forward). */
#ifndef SMARM_LIB_DIST_LUA_H
#define SMARM_LIB_DIST_LUA_H

#include <stddef.h>
#include <stdint.h>

#include <lauxlib.h>

/* package.preload["smarm.dist.raw"] */
int dist_lua_open(lua_State *L);
/* smarm.atom, smarm.tuple, smarm.is_atom, smarm.is_tuple, smarm.node, smarm.nodes,
 * smarm.connect, smarm.monitor_node */
extern const luaL_Reg dist_lua_funcs[];
/* Whether the value at idx is a remote pid (or a {name, node} pair when pairs is set). */
int dist_lua_is_remote(lua_State *L, int idx, int pairs);

/* The local pid the value at idx stands for if it is a pid of this node as dist.export marks
 * it (of this run of the node), else 0: every function taking a pid takes that mark too. */
uint64_t dist_lua_own_pid(lua_State *L, int idx);

/* Whether this node is distributed (cheap: smarm.pg's fast path asks it). */
int dist_lua_alive(void);
/* Calls require("smarm.dist_pg")[fn] with the nargs values on top of the stack (popped),
 * keeping nres results: smarm.pg's hooks when this node is distributed. */
void dist_lua_pg_call(lua_State *L, const char *fn, int nargs, int nres);

/* Whether smarm.demonitor must call dist_lua_demonitored (cheap: the node is alive, or a
 * monitor of a name of this node was made). */
int dist_lua_hooks_demonitor(void);
/* After smarm.demonitor removed a monitor of target: if this actor's smarm.dist holds target
 * as the proxy of a remote monitor, the proxy is told (it demonitors on the peer and ends). */
void dist_lua_demonitored(lua_State *L, uint64_t target);

void dist_md5(const void *data, size_t n, unsigned char out[16]);

#endif
