/* Two independent lua_States for the message tests (codec_test, flat_test): a sender with
 * every library and a receiver the test opens, a wire buffer between them, and the Lua
 * snippets both tests run on either side. */
#ifndef SMARM_TESTS_LUA_PAIR_HELPER_H
#define SMARM_TESTS_LUA_PAIR_HELPER_H

#include <lauxlib.h>

#include "base/wire.h"

typedef struct lua_pair {
    lua_State *src; /* the sender: all libraries */
    lua_State *dst; /* the receiver, as the test made it */
    wire_buf buf;
    char err[256];
} lua_pair;

/* A pair whose receiver is dst, with deq_src (Lua code defining deq) run in it. */
lua_pair *lua_pair_new(lua_State *dst, const char *deq_src);
void lua_pair_free(lua_pair *f);
/* A receiver with the base, string, table and math libraries only (never the FFI). */
lua_State *lua_pair_plain_receiver(void);
/* Pushes the value of the Lua expression expr in L. */
void push_expr(lua_State *L, const char *expr);
/* Runs code in L, which must return true. */
void lua_check_true(lua_State *L, const char *code);
/* Pops the value on top of the receiver's stack and checks that it equals the value of the
 * Lua expression expr there, by deq (what names it in a failure). */
void lua_pair_expect_got(lua_pair *f, const char *expr, const char *what);
/* Pops the n values on top of L into a new table (a list), which is pushed. */
void lua_pack_top(lua_State *L, int n);

#endif
