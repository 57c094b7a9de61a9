#!/usr/bin/env bash
# A C-stack overflow into an actor's guard page: one clear line naming the actor,
# then death by the fault's own signal, also with the smallest guard spawn_opt allows;
# a larger stack makes the same code pass.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/deep.lua" <<'LUA'
local s = require "smarm"
local opts = { stack = tonumber(arg[1]), guard = tonumber(arg[2]) }
s.spawn_opt(opts, function(parent)
   -- every level re-enters Lua from C (a gsub callback): C stack grows each time
   local function deep(n)
      if n == 0 then return "" end
      return (string.gsub("x", "x", function() return deep(n - 1) end))
   end
   local ok, err = pcall(deep, 150)
   require("smarm").send(parent, ok and "deep ok" or ("deep failed: " .. tostring(err)))
end, s.self())
print(s.recv(30))
LUA

run "$TMP/deep.lua"
[ "$status" -eq 139 ] || [ "$status" -eq 135 ] || fail "overflow: expected death by SIGSEGV (139), got $status"
grep -qE "smarm: actor <0\.[0-9]+\.[0-9]+> overflowed its C stack \(reserve [0-9]+ bytes, guard [0-9]+ bytes\)" <<<"$err" \
   || fail "overflow: the diagnostic line names the actor and its stack"
[ "$(grep -c overflowed <<<"$err")" -eq 1 ] || fail "overflow: exactly one diagnostic line"

# a one-page guard is refused: one gsub frame would step over it undiagnosed
run "$TMP/deep.lua" 65536 4096
expect_status 1 "one-page guard"
expect_err "smarm.spawn_opt: guard must be a whole number of bytes from 16384" "one-page guard: refused at the call"

# the smallest guard: a gsub frame (an 8 KiB buffer) cannot step over it
run "$TMP/deep.lua" 65536 16384
[ "$status" -eq 139 ] || [ "$status" -eq 135 ] || fail "smallest guard: expected death by SIGSEGV (139), got $status"
grep -qE "smarm: actor <0\.[0-9]+\.[0-9]+> overflowed its C stack \(reserve 65536 bytes, guard 16384 bytes\)" <<<"$err" \
   || fail "smallest guard: the overflow is diagnosed"

run "$TMP/deep.lua" 8388608
expect_status 0 "a larger stack"
expect_out "deep ok" "the same code passes with an 8 MiB stack"

finish
