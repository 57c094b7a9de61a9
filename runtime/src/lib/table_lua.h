/* smarm.table (require "smarm.table", or the smarm.table field): shared tables. */
#ifndef SMARM_LIB_TABLE_LUA_H
#define SMARM_LIB_TABLE_LUA_H

#include <lua.h>

/* The module's opener (a package.preload entry). */
int table_lua_open(lua_State *L);

#endif
