/* The smarm table of an actor state: built empty, filled on first read of each name. */
#ifndef SMARM_LIB_INIT_H
#define SMARM_LIB_INIT_H

typedef struct lua_State lua_State;

/* Pushes the state's smarm table, building it on first use (require "smarm"). */
void lib_push_smarm(lua_State *L);
/* The library's C modules, for package.preload (luavm_shared.preloads). */
struct luaL_Reg;
extern const struct luaL_Reg *const lib_preloads;

#endif
