/* Hot code reload for Lua: smarm.reload, smarm.code_version, smarm.on_reload, and the step an
 * actor runs at a safe point to take new versions (the Lua half is smarm.reload). */
#ifndef SMARM_LIB_RELOAD_LUA_H
#define SMARM_LIB_RELOAD_LUA_H

#include <lauxlib.h>

/* smarm.reload(module) -> version | nil, err; smarm.code_version(module) -> integer;
 * smarm.on_reload(fn) */
extern const luaL_Reg reload_lua_funcs[];
/* package.preload["smarm.reload.raw"]: loaded(), newest(name), version(name),
 * report(what, detail), patch(t, new [, undo]), behaviour() (a behaviour runs here: takes
 * go through the Lua half, loaded then) and changes (module -> version before, for the
 * behaviours' code_change) */
int reload_lua_open_raw(lua_State *L);
/* luavm_shared.take_reload: takes the newest version of every file module the state loaded
 * that was reloaded since (in place, then the on_reload hooks). */
int reload_lua_take(lua_State *L);

#endif
