#!/usr/bin/env bash
# A fatal signal in an actor (a bad ffi.cast, abort(), a division trap, ...) still
# kills the process with that signal's own status, but first one line on stderr
# names the signal and the actor that was running.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# The root prints the pid of the actor that will crash, then waits for it; the
# actor runs arg[1] (Lua source) after a short sleep, so the pid is out first.
cat >"$TMP/crash.lua" <<'LUA'
local s = require "smarm"
local pid = s.spawn(function(code)
   local smarm = require "smarm"
   smarm.sleep(0.05)
   assert(loadstring(code))()
end, arg[1])
print(s.pid_tostring(pid))
io.stdout:flush()
s.sleep(30)
print("survived")
LUA

# crash_with CODE NAME STATUS: the process dies of signal NAME (status STATUS) and
# stderr names NAME and the pid the root printed
crash_with() {
   local code=$1 name=$2 want=$3
   run "$TMP/crash.lua" "$code"
   local pid
   pid=$(head -1 <<<"$out")
   [ "$status" -eq "$want" ] || fail "$name: expected death by $name (status $want)"
   grep -q "survived" <<<"$out" && fail "$name: the run went on"
   grep -qF "smarm: fatal signal $name" <<<"$err" || fail "$name: stderr names the signal"
   grep -qF "in actor $pid" <<<"$err" || fail "$name: stderr names the actor $pid"
   [ "$(grep -c 'fatal signal' <<<"$err")" -eq 1 ] || fail "$name: exactly one diagnostic line"
}

crash_with 'require("ffi").cast("int*", 0)[0] = 1' SIGSEGV 139
grep -qF "(address 0x0)" <<<"$err" || fail "SIGSEGV: the line gives the faulting address"
grep -qE "at pc 0x[0-9a-f]+" <<<"$err" || fail "SIGSEGV: the line gives the faulting instruction"
crash_with 'local ffi = require("ffi") ffi.cdef "void abort(void);" ffi.C.abort()' SIGABRT 134
crash_with 'local ffi = require("ffi") ffi.cdef "int raise(int);" ffi.C.raise(8)' SIGFPE 136
crash_with 'local ffi = require("ffi") ffi.cdef "int raise(int);" ffi.C.raise(4)' SIGILL 132
crash_with 'local ffi = require("ffi") ffi.cdef "int raise(int);" ffi.C.raise(7)' SIGBUS 135

# the guard-page overflow keeps its own line (stack_overflow_test.sh), and a crash
# in a plain Lua error is no fatal signal: no such line
run -e 'error("plain")'
expect_status 1 "a Lua error in the root"
grep -q "fatal signal" <<<"$err" && fail "a Lua error prints no fatal-signal line"

finish
