/* The smarm table of an actor state, and the one place its functions are listed. A state
 * starts with an empty table whose __index fills it: a core function is put in on its first
 * read (a typical actor uses two or three, and every field made at spawn costs a closure and
 * an interned name in each new state); a name of another group puts that whole group in;
 * any other name loads the Lua half of the library (smarm.introspection) once, after which
 * the table is complete and the __index goes. */
#include "lib/init.h"

#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "lib/args.h"
#include "lib/chan_lua.h"
#include "lib/dist_lua.h"
#include "lib/exit_lua.h"
#include "lib/net_lua.h"
#include "lib/recv_lua.h"
#include "lib/reload_lua.h"
#include "lib/smarm_lua.h"
#include "lib/sup_child_lua.h"
#include "lib/table_lua.h"
#include "lib/timer_lua.h"
#include "vm/luavm.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

typedef struct lib_group {
    const luaL_Reg *funcs;
    const char *const *fields;               /* names of its other fields, NULL-terminated */
    void (*set_fields)(lua_State *L, int t); /* puts those fields into the table at t */
} lib_group;

static const char *const chan_fields[] = {"inbox", NULL};
static const char *const exit_fields[] = {"pg", NULL};
static const char *const no_fields[] = {NULL};

static const lib_group groups[] = {
    {chan_lua_funcs, chan_fields, chan_lua_fields}, /* channel, select, inbox */
    {timer_lua_funcs, no_fields, NULL},             /* send_after, cancel_timer */
    {exit_lua_funcs, exit_fields, exit_lua_fields}, /* links, monitors, exits, names, pg */
    {reload_lua_funcs, no_fields, NULL},            /* reload, code_version, on_reload */
    {dist_lua_funcs, no_fields, NULL},              /* atoms, tuples, nodes */
};
#define NGROUPS (sizeof groups / sizeof groups[0])

static const char smarm_key = 's';

static int has_field(lua_State *L, int t, const char *name)
{
    lua_pushstring(L, name);
    lua_rawget(L, t);
    int present = !lua_isnil(L, -1);
    lua_pop(L, 1);
    return present;
}

static void put_funcs(lua_State *L, int t, const luaL_Reg *r)
{
    for (; r->name; r++) {
        if (has_field(L, t, r->name))
            continue;
        lua_pushstring(L, r->name);
        lua_pushcfunction(L, r->func);
        lua_rawset(L, t);
    }
}

static void put_group(lua_State *L, int t, const lib_group *g)
{
    if (has_field(L, t, g->funcs[0].name))
        return;
    put_funcs(L, t, g->funcs);
    if (g->set_fields)
        g->set_fields(L, t);
}

static int group_has(const lib_group *g, const char *k)
{
    for (const luaL_Reg *r = g->funcs; r->name; r++)
        if (strcmp(k, r->name) == 0)
            return 1;
    for (const char *const *f = g->fields; *f; f++)
        if (strcmp(k, *f) == 0)
            return 1;
    return 0;
}

/* Loads the Lua half of the library, copies its fields in, completes the table. */
static void complete(lua_State *L, int t)
{
    lib_require(L, "smarm.introspection");
    if (lua_type(L, -1) == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_rawset(L, t);
        }
    }
    lua_pop(L, 1);
    /* with no __index left, every function must be in the table */
    put_funcs(L, t, smarm_lua_funcs);
    for (size_t i = 0; i < NGROUPS; i++)
        put_group(L, t, &groups[i]);
    lua_getmetatable(L, t);
    lua_pushnil(L);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

static int smarm_index(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *k = lua_tostring(L, 2);
        for (const luaL_Reg *r = smarm_lua_funcs; r->name; r++) {
            if (strcmp(k, r->name) == 0) {
                lua_pushcfunction(L, r->func);
                lua_pushvalue(L, 2);
                lua_pushvalue(L, -2);
                lua_rawset(L, 1);
                return 1;
            }
        }
        for (size_t i = 0; i < NGROUPS; i++) {
            if (group_has(&groups[i], k)) {
                put_group(L, 1, &groups[i]);
                lua_pushvalue(L, 2);
                lua_rawget(L, 1);
                return 1;
            }
        }
    }
    complete(L, 1);
    lua_pushvalue(L, 2);
    lua_rawget(L, 1);
    return 1;
}

static const luaL_Reg preloads[] = {
    {"smarm.net.raw", net_lua_open},
    {"smarm.table", table_lua_open},
    {"smarm.reload.raw", reload_lua_open_raw},
    {"smarm.selective.raw", recv_lua_open},
    {"smarm.dist.raw", dist_lua_open},
    {"smarm.chan.raw", chan_lua_open_raw},
    {"smarm.supervisor.child_start", sup_child_lua_open},
    {NULL, NULL},
};
const luaL_Reg *const lib_preloads = preloads;

void lib_push_smarm(lua_State *L)
{
    if (luavm_registry_get(L, &smarm_key))
        return;
    lua_createtable(L, 0, 4);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, smarm_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    luavm_registry_keep(L, &smarm_key);
}

LUA_UNWOUND_END
