#!/usr/bin/env bash
# `ninja install` puts the binary, libsmarm (archive, shared library with its soname),
# smarm.h with the LuaJIT headers and smarm.pc under $DESTDIR$PREFIX; a host program built
# with `pkg-config --cflags --libs smarm` against that tree runs, and so does the
# embedding example (examples/embed/game.c), linked both shared and static.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

builddir=$(dirname "$SMARM_LUA")
ninja_file=build.ninja
[ "$builddir" = build ] || ninja_file=$builddir/build.ninja
CC=${CC:-cc}
# shellcheck disable=SC2034  # read by fail (lib.sh)
status=0 out='' err=''

# a prefix of our own, no DESTDIR
prefix=$TMP/prefix
PREFIX=$prefix ninja -f "$ninja_file" install >/dev/null
for f in bin/smarm-lua lib/libsmarm.a lib/libsmarm.so lib/libsmarm.so.0 lib/pkgconfig/smarm.pc \
   include/smarm/smarm.h include/smarm/lua.h include/smarm/lauxlib.h include/smarm/luaconf.h \
   include/smarm/luajit.h include/smarm/lualib.h; do
   [ -e "$prefix/$f" ] || fail "installed $f"
done
[ -L "$prefix/lib/libsmarm.so.0" ] || fail "libsmarm.so.0 is a link to the versioned file"
# outputs go through variables: with pipefail, a grep -q that leaves early can fail the pipe
dyn=$(readelf -d "$prefix/lib/libsmarm.so")
grep -q 'SONAME.*\[libsmarm\.so\.0\]' <<<"$dyn" || fail "libsmarm.so has the soname libsmarm.so.0"
ran=$("$prefix/bin/smarm-lua" -e 'print("installed binary runs")' || true)
grep -q "installed binary runs" <<<"$ran" ||
   fail "the installed smarm-lua runs (the Lua library is compiled in)"

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
pkg-config --exists smarm || fail "pkg-config finds smarm"

cat >"$TMP/host.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <lauxlib.h>
#include <smarm.h>

static int twice(lua_State *L)
{
    lua_pushnumber(L, 2 * luaL_checknumber(L, 1));
    return 1;
}

static int open_hostlib(lua_State *L)
{
    lua_newtable(L);
    lua_pushcfunction(L, twice);
    lua_setfield(L, -2, "twice");
    return 1;
}

int main(void)
{
    smarm_runtime *rt;
    if (smarm_runtime_new(NULL, &rt) != 0)
        return 1;
    smarm_preload(rt, "hostlib", open_hostlib);
    if (smarm_start(rt, NULL, 0, NULL) != 0)
        return 1;
    smarm_host *h = smarm_host_open(rt);
    lua_State *L = smarm_host_lua(h);
    if (luaL_dostring(L, "local s = require 'smarm'\n"
                         "local to = s.spawn(function(h) local s = require 'smarm';"
                         " s.send(h, require('hostlib').twice(tonumber(s.recv()))) end, s.self())\n"
                         "return to") != 0)
        return 1;
    uint64_t pid = (uint64_t)lua_tonumber(L, -1);
    lua_settop(L, 0);
    smarm_send_string(rt, pid, "21", 2);
    if (luaL_dostring(L, "return require('smarm').recv(5)") != 0)
        return 1;
    printf("host got %g\n", lua_tonumber(L, -1));
    smarm_host_close(h);
    int status;
    smarm_stop(rt, 1, &status);
    smarm_runtime_free(rt);
    printf("host stopped with status %d\n", status);
    return 0;
}
C
# shellcheck disable=SC2046
"$CC" -o "$TMP/host" "$TMP/host.c" $(pkg-config --cflags --libs smarm) ||
   fail "a host builds with pkg-config --cflags --libs smarm"
host_out=$(LD_LIBRARY_PATH=$prefix/lib timeout 60 "$TMP/host" 2>&1) || fail "the host runs: $host_out"
grep -q "host got 42" <<<"$host_out" || fail "the actor used the host's C function: $host_out"
grep -q "status 0" <<<"$host_out" || fail "the host stopped the runtime: $host_out"
linked=$(LD_LIBRARY_PATH=$prefix/lib ldd "$TMP/host")
grep -q "libsmarm.so.0 => $prefix/lib" <<<"$linked" || fail "the host links libsmarm.so.0"

# the game linked statically against libsmarm.a (no LD_LIBRARY_PATH): the whole archive,
# its symbols exported (the Lua library reaches its C half through ffi.C)
# shellcheck disable=SC2046
"$CC" -o "$TMP/game_static" examples/embed/game.c $(pkg-config --cflags smarm) -Wl,-E \
   -Wl,--whole-archive "$prefix/lib/libsmarm.a" -Wl,--no-whole-archive -lm -ldl -lpthread ||
   fail "the game builds against libsmarm.a"
game_out=$(timeout 120 "$TMP/game_static" examples/embed 20 8 2>/dev/null || true)
grep -q "root status 0" <<<"$game_out" || fail "the static game runs"

# the embedding example, built against the installed tree
# shellcheck disable=SC2046
"$CC" -O2 -o "$TMP/game" examples/embed/game.c $(pkg-config --cflags --libs smarm) ||
   fail "examples/embed/game.c builds"
set +e
game_out=$(LD_LIBRARY_PATH=$prefix/lib timeout 120 "$TMP/game" examples/embed 50 30 2>"$TMP/game_err")
game_status=$?
set -e
[ "$game_status" = 0 ] || fail "the game ends with status 0 ($game_status): $game_out $(cat "$TMP/game_err")"
grep -q "npc1 crashed at frame 15 and was restarted" <<<"$game_out" || fail "the crashed NPC is restarted: $game_out"
grep -qE "^replies [0-9]+ of [0-9]+ within their frame; engine.step called [1-9][0-9]* times" \
   <<<"$game_out" || fail "the NPCs call the host's C function: $game_out"
grep -qE "^RESULT npcs=50 us_per_frame=[0-9.]+" <<<"$game_out" || fail "the game reports its frame time"
grep -q "npc1: told to crash" "$TMP/game_err" || fail "the crash is reported on stderr"

# a C++ host: lua.hpp gives the Lua API C linkage, smarm.h has its own guards
if command -v c++ >/dev/null; then
   cat >"$TMP/host.cpp" <<'CPP'
#include <lua.hpp>
#include <smarm.h>
int main()
{
    smarm_runtime *rt = nullptr;
    if (smarm_runtime_new(nullptr, &rt) != 0 || smarm_start(rt, nullptr, 0, nullptr) != 0)
        return 1;
    smarm_host *h = smarm_host_open(rt);
    int ok = luaL_dostring(smarm_host_lua(h), "return require('smarm').self()") == 0 &&
             lua_tonumber(smarm_host_lua(h), -1) == (lua_Number)smarm_host_pid(h);
    smarm_host_close(h);
    smarm_stop(rt, 1, nullptr);
    smarm_runtime_free(rt);
    return ok ? 0 : 1;
}
CPP
   # shellcheck disable=SC2046
   c++ -o "$TMP/hostxx" "$TMP/host.cpp" $(pkg-config --cflags --libs smarm) ||
      fail "a C++ host builds"
   LD_LIBRARY_PATH=$prefix/lib timeout 60 "$TMP/hostxx" || fail "the C++ host runs"
fi

# DESTDIR: the same tree under a staging root, the prefix written into smarm.pc
stage=$TMP/stage
DESTDIR=$stage PREFIX=/opt/smarm ninja -f "$ninja_file" install >/dev/null
[ -e "$stage/opt/smarm/lib/libsmarm.so.0" ] || fail "DESTDIR stages under \$DESTDIR\$PREFIX"
grep -qx "prefix=/opt/smarm" "$stage/opt/smarm/lib/pkgconfig/smarm.pc" ||
   fail "smarm.pc names the final prefix, not the staging root"
cflags=$(PKG_CONFIG_PATH=$stage/opt/smarm/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage \
   pkg-config --cflags smarm)
# shellcheck disable=SC2086
"$CC" -fsyntax-only $cflags -x c - <<<'#include <smarm.h>
int main(void) { return smarm_host_fd(0) < 0 ? 0 : 1; }' || fail "the staged headers compile"

finish
