/* The Lua face of exits, names and process groups. */
#ifndef SMARM_LIB_EXIT_LUA_H
#define SMARM_LIB_EXIT_LUA_H

#include <lauxlib.h>

/* link, unlink, spawn_link, spawn_monitor, monitor, demonitor, trap_exit, kill, shutdown,
 * terminal_reason, register, unregister, whereis */
extern const luaL_Reg exit_lua_funcs[];
/* Puts the smarm.pg subtable into the smarm table at t. */
void exit_lua_fields(lua_State *L, int t);

#endif
