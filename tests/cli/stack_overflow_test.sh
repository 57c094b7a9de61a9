#!/usr/bin/env bash
# A C-stack overflow into an actor's guard ends that actor alone, with reason
# stack_overflow and one line naming it: nested gsub callbacks, nested coroutines and
# require recursion, at the default stack and with the smallest guard spawn_opt allows;
# the runtime goes on (more actors overflow and others run); the same code passes with a
# larger stack; a one-page guard is refused at the call.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/deep.lua" <<'LUA'
local s = require "smarm"
local kind, stack, guard = arg[1], tonumber(arg[2]), tonumber(arg[3])
local bodies = {
   -- every level re-enters Lua from C (a gsub callback): the C stack grows each time
   gsub = function(parent)
      local function deep(n)
         if n == 0 then return "" end
         return (string.gsub("x", "x", function() return deep(n - 1) end))
      end
      local ok, err = pcall(deep, 150)
      require("smarm").send(parent, ok and "deep ok" or ("deep failed: " .. tostring(err)))
   end,
   coroutine = function(parent)
      local function nest(n)
         if n == 0 then return "deep ok" end
         local _, v = coroutine.resume(coroutine.create(nest), n - 1)
         return v
      end
      require("smarm").send(parent, nest(200000))
   end,
   require = function(parent)
      for i = 1, 100000 do
         package.preload["r" .. i] = function() return require("r" .. (i + 1)) end
      end
      package.preload["r100001"] = function() return "deep ok" end
      require("smarm").send(parent, require "r1")
   end,
}
-- three in a row: each overflow leaves the runtime able to run the next
for _ = 1, 3 do
   local _, mon = s.spawn_opt({ stack = stack, guard = guard, monitor = true }, bodies[kind],
      s.self())
   local down = mon:recv(60)
   print(down and down.reason, s.recv(0) or "no message")
end
-- the runtime still runs ordinary actors
s.spawn(function(p) require("smarm").send(p, "still running") end, s.self())
print(s.recv(10))
LUA

# expect_overflowed KIND WHAT [STACK GUARD]
expect_overflowed() {
   local kind=$1 what=$2 shape=$3
   run "$TMP/deep.lua" "$kind" "${@:4}"
   expect_status 0 "$what"
   [ "$(grep -c "^stack_overflow	no message$" <<<"$out")" -eq 3 ] \
      || fail "$what: three actors end with reason stack_overflow (got: $out)"
   expect_out "still running" "$what: the runtime goes on"
   grep -qE "smarm: actor <0\.[0-9]+\.[0-9]+> overflowed its C stack \($shape\); it ends with reason stack_overflow" <<<"$err" \
      || fail "$what: the line names the actor, its stack and the reason (stderr: $err)"
   [ "$(grep -c overflowed <<<"$err")" -eq 3 ] || fail "$what: one line per overflow"
}

expect_overflowed gsub "nested gsub callbacks" "reserve 65536 bytes, guard 65536 bytes"
expect_overflowed coroutine "nested coroutines" "reserve 65536 bytes, guard 65536 bytes"
expect_overflowed require "require recursion" "reserve 65536 bytes, guard 65536 bytes"
# the smallest guard: a gsub frame (an 8 KiB buffer) cannot step over it
expect_overflowed gsub "smallest guard" "reserve 65536 bytes, guard 16384 bytes" 65536 16384

# a one-page guard is refused: one gsub frame would step over it undiagnosed
run "$TMP/deep.lua" gsub 65536 4096
expect_status 1 "one-page guard"
expect_err "smarm.spawn_opt: guard must be a whole number of bytes from 16384" "one-page guard: refused at the call"

run "$TMP/deep.lua" gsub 8388608
expect_status 0 "a larger stack"
[ "$(grep -c "^normal	deep ok$" <<<"$out")" -eq 3 ] || fail "the same code passes with an 8 MiB stack (got: $out)"

finish
