#!/usr/bin/env bash
# runtime/src's layers call only downward (scripts/check-layers reads the built objects with
# nm and the #include lines): the release build must have no upward tie, and ties planted
# in a copy of a layer must each be found.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

status=0
out=$(scripts/check-layers 2>&1) || status=$?
err=""
expect_status 0 "the release build"
expect_out "every tie downward" "the release build"

# plant: a base file that includes lua.h and calls LuaJIT and a core function; a core file
# that includes a lib header and calls a lib function
mkdir -p "$TMP/src/base" "$TMP/src/core" "$TMP/src/io" "$TMP/src/vm" "$TMP/src/lib" \
    "$TMP/obj/base" "$TMP/obj/core" "$TMP/obj/io" "$TMP/obj/vm" "$TMP/obj/lib"
cat >"$TMP/src/base/planted.c" <<'C'
#include <lua.h>
void sched_wake_planted(void);
void planted_base(lua_State *L) { lua_pushnil(L); sched_wake_planted(); }
C
cat >"$TMP/src/core/planted_core.c" <<'C'
#include "lib/planted_lib.h"
void lib_planted(void);
void sched_wake_planted(void) { lib_planted(); }
C
cat >"$TMP/src/lib/planted_lib.c" <<'C'
void lib_planted(void) {}
C
# an io file (between core and vm) that includes lua.h and calls a vm function
cat >"$TMP/src/io/planted_io.c" <<'C'
#include <lua.h>
void vm_planted(void);
void io_planted(void) { vm_planted(); }
C
cat >"$TMP/src/vm/planted_vm.c" <<'C'
void vm_planted(void) {}
C
cat >"$TMP/src/lib/sched.h" <<'C'
C
: >"$TMP/src/lib/planted_lib.h"
for f in base/planted core/planted_core io/planted_io vm/planted_vm lib/planted_lib; do
    cc -c -Ibuild/deps/luajit/src -I"$TMP/src" "$TMP/src/$f.c" -o "$TMP/obj/$f.o"
done
status=0
out=$(scripts/check-layers --objdir "$TMP/obj" --srcdir "$TMP/src" 2>&1) || status=$?
expect_status 1 "planted ties"
expect_out "(base) references LuaJIT's lua_pushnil" "a base object calling LuaJIT"
expect_out "(base) references sched_wake_planted" "a base object calling core"
expect_out "(core) references lib_planted" "a core object calling lib"
expect_out "(base) includes a Lua header" "a base file including lua.h"
expect_out "(io) references vm_planted" "an io object calling vm"
expect_out "(io) includes a Lua header" "an io file including lua.h"
expect_out "(core) includes #include \"lib/planted_lib.h\"" "a core file including a lib header"
expect_out "lib/sched.h has the name of" "a header shadowing <sched.h>"
finish
