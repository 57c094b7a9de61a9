/* See lua_pair_helper.h. */
#include "lua_pair_helper.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

/* From LuaJIT's lualib.h (runtime/src/lualib.h shadows it on the include path). */
LUALIB_API int luaopen_base(lua_State *L);
LUALIB_API int luaopen_string(lua_State *L);
LUALIB_API int luaopen_table(lua_State *L);
LUALIB_API int luaopen_math(lua_State *L);
LUALIB_API void luaL_openlibs(lua_State *L);

lua_pair *lua_pair_new(lua_State *dst, const char *deq_src)
{
    lua_pair *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->src = luaL_newstate();
    luaL_openlibs(f->src);
    f->dst = dst;
    if (luaL_dostring(f->dst, deq_src) != 0)
        fail_msg("deq: %s", lua_tostring(f->dst, -1));
    wire_buf_init(&f->buf);
    return f;
}

void lua_pair_free(lua_pair *f)
{
    lua_close(f->src);
    lua_close(f->dst);
    wire_buf_free(&f->buf);
    free(f);
}

static void open_lib(lua_State *L, lua_CFunction f)
{
    lua_pushcfunction(L, f);
    lua_call(L, 0, 0);
}

lua_State *lua_pair_plain_receiver(void)
{
    lua_State *L = luaL_newstate();
    open_lib(L, luaopen_base);
    open_lib(L, luaopen_string);
    open_lib(L, luaopen_table);
    open_lib(L, luaopen_math);
    return L;
}

void push_expr(lua_State *L, const char *expr)
{
    char chunk[8192];
    snprintf(chunk, sizeof chunk, "return %s", expr);
    if (luaL_dostring(L, chunk) != 0)
        fail_msg("%s: %s", expr, lua_tostring(L, -1));
}

void lua_pair_expect_got(lua_pair *f, const char *expr, const char *what)
{
    lua_setglobal(f->dst, "got");
    char chunk[8192];
    snprintf(chunk, sizeof chunk, "return deq(got, %s)", expr);
    if (luaL_dostring(f->dst, chunk) != 0)
        fail_msg("%s: %s", what, lua_tostring(f->dst, -1));
    if (!lua_toboolean(f->dst, -1))
        fail_msg("round trip changed %s", what);
    lua_pop(f->dst, 1);
}

void lua_pack_top(lua_State *L, int n)
{
    int t = lua_gettop(L) - n + 1;
    lua_createtable(L, n, 0);
    lua_insert(L, t);
    for (int k = n; k >= 1; k--)
        lua_rawseti(L, t, k);
}

void lua_check_true(lua_State *L, const char *code)
{
    if (luaL_dostring(L, code) != 0)
        fail_msg("%s: %s", code, lua_tostring(L, -1));
    if (!lua_toboolean(L, -1))
        fail_msg("check failed: %s", code);
    lua_pop(L, 1);
}
