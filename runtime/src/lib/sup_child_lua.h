/* The start of a supervisor's child, in the child's own state. */
#ifndef SMARM_LIB_SUP_CHILD_LUA_H
#define SMARM_LIB_SUP_CHILD_LUA_H

#include <lua.h>

/* package.preload["smarm.supervisor.child_start"]: the function
 * start(ack, sup, init_ack, mod, fname) -> f that smarm.supervisor's child body calls. */
int sup_child_lua_open(lua_State *L);

#endif
