#!/usr/bin/env bash
# A C-stack overflow into an actor's guard page: one clear line naming the actor,
# then death by the fault's own signal; a larger stack makes the same code pass.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/deep.lua" <<'LUA'
local s = require "smarm"
local opts = { stack = tonumber(arg[1]) }
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

run "$TMP/deep.lua" 8388608
expect_status 0 "a larger stack"
expect_out "deep ok" "the same code passes with an 8 MiB stack"

finish
