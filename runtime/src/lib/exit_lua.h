/* The Lua face of exits, names and process groups. */
#ifndef SMARM_EXIT_LUA_H
#define SMARM_EXIT_LUA_H

typedef struct lua_State lua_State;

/* Sets the functions (and the pg subtable) on the table at index t. */
void exit_lua_register(lua_State *L, int t);

#endif
