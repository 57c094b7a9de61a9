/* send_after / cancel_timer for Lua. */
#ifndef SMARM_LIB_TIMER_LUA_H
#define SMARM_LIB_TIMER_LUA_H

#include <lauxlib.h>

/* smarm.send_after(seconds, dest, msg) -> timer; smarm.cancel_timer(timer) -> boolean */
extern const luaL_Reg timer_lua_funcs[];

#endif
