/* The smarm core functions of every actor state: spawn, send, recv and the rest of the
 * everyday calls (the classic C API). */
#ifndef SMARM_LIB_SMARM_LUA_H
#define SMARM_LIB_SMARM_LUA_H

#include <lauxlib.h>

struct spawn_opts;

/* spawn, try_spawn, spawn_opt, self, send, recv, yield, sleep, now, exit, pid_tostring,
 * blocking */
extern const luaL_Reg smarm_lua_funcs[];

/* smarm.spawn with options (fn at fidx, its arguments above it); returns what the Lua
 * function returns. */
int smarm_lua_spawn(lua_State *L, int fidx, struct spawn_opts *o, int try_mode, const char *fname);
/* smarm.send(dest, msg) on the stack. */
int smarm_lua_send(lua_State *L);

#endif
