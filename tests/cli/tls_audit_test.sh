#!/usr/bin/env bash
# No function of the built binary keeps a thread-local address across a call that may switch
# the actor to another thread, beyond the reviewed ones below (scripts/tls-audit reads the
# machine code: release builds are link-time optimized, so inlining crosses files); and a
# planted function that does is found.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
status=0

# Reviewed: each makes its thread-pointer address and uses it before any call listed for it
# can run Lua code or switch, or the call cannot do either.
#   encode_nested       the message block (base/blocks.h), taken after the encode; then
#                       lua_gettop, and luaL_error, which does not return
#   ljx_arena_new       LuaJIT's allocator set-up: no Lua code runs
#   ljx_registry_set    the registry hints (vm/ljx.c): table stores run no Lua code
#   luavm_registry_keep, luavm_registry_set
#                       ljx_registry_set inlined (LuaJIT's C is link-time optimized too)
#   modcache_push_loaded, l_raw_loaded
#                       the same hints, looked up before lua_newtable and made again after
#                       it (its collector step, placed at the function's end, returns to
#                       the table's creation); kept only across lj_lightud_intern,
#                       lj_tab_set and a stack growth, which run no Lua code
#   registry_get_slow   the same, and a stack growth
#   luavm_boot          the new-state reserve, used only inside new_state, before the boot's
#                       protected call (vm/luavm.c)
#   pick_across         a per-thread random state, read before lua_pushnumber/lua_rawgeti,
#                       which run no collector step
#   recv_any            the receive scratch buffer and its busy flag (lib/net_tcp.c): the
#                       bytes are copied before lua_pushlstring's collector step
reviewed="encode_nested ljx_arena_new ljx_registry_set registry_get_slow luavm_boot
pick_across recv_any luavm_registry_keep luavm_registry_set modcache_push_loaded l_raw_loaded"

out=$(scripts/tls-audit "$SMARM_LUA")
while IFS= read -r line; do
    [ -n "$line" ] || continue
    fn=${line%%:*}
    grep -qw -- "$fn" <<<"$reviewed" ||
        fail "a thread-local address kept across a call that may switch, not reviewed: $line"
done <<<"$out"

# plant: a thread-local's address taken, a Lua call, then the address used again
cat >"$TMP/planted.c" <<'C'
#include <lua.h>
__thread int planted_tls[4];
void planted_keep(lua_State *L, int i)
{
    int *p = &planted_tls[i & 3];
    *p = 1;
    lua_pushnil(L);
    *p = 2;
}
C
cc -O2 -fPIC -shared -Ibuild/deps/luajit/src "$TMP/planted.c" -o "$TMP/planted.so"
out=$(scripts/tls-audit "$TMP/planted.so")
expect_out "planted_keep: lua_pushnil" "a planted address kept across a Lua call"
finish
