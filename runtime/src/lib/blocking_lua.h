/* smarm.blocking: a call that may block its OS thread, made off the schedulers. */
#ifndef SMARM_LIB_BLOCKING_LUA_H
#define SMARM_LIB_BLOCKING_LUA_H

typedef struct lua_State lua_State;

int blocking_lua_call(lua_State *L);

#endif
