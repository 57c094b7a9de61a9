#!/usr/bin/env bash
# An actor that cannot have a C stack (here: the address space is limited with RLIMIT_AS)
# ends with reason "no_stack" and one line naming it; the runtime does not abort, the
# actor's Lua state is closed (its finalizers run), and the rest carries on.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/nostack.lua" <<'LUA'
local s = require "smarm"
local ffi = require "ffi"
ffi.cdef [[
struct smarm_test_rlimit { unsigned long cur, max; };
int setrlimit(int resource, const struct smarm_test_rlimit *rl);
]]
local RLIMIT_AS, MiB = 9, 1024 * 1024

-- the address space in use, plus headroom (the hard limit stays unlimited)
local function limit_as(headroom)
   local vm = tonumber(io.open("/proc/self/status"):read("*a"):match("VmSize:%s*(%d+) kB"))
   local rl = ffi.new("struct smarm_test_rlimit", vm * 1024 + headroom, ffi.cast("unsigned long", -1))
   assert(ffi.C.setrlimit(RLIMIT_AS, rl) == 0)
end
local function unlimit()
   local inf = ffi.cast("unsigned long", -1)
   assert(ffi.C.setrlimit(RLIMIT_AS, ffi.new("struct smarm_test_rlimit", inf, inf)) == 0)
end

local function idler(parent)
   local sm = require "smarm"
   -- a finalizer: it runs when the state is closed, whichever way the actor ends
   local p = newproxy(true)
   getmetatable(p).__gc = function() sm.send(parent, "finalized") end
   _G.keep = p
   sm.send(parent, "ready")
   sm.recv() -- parks by yielding its coroutine: holds no C stack while it waits
   sm.send(parent, "resumed")
end

-- warm up every scheduler, then leave 256 MiB of address space
for _ = 1, 20 do
   s.spawn(function(parent) require("smarm").send(parent, "warm") end, s.self())
end
for _ = 1, 20 do assert(s.recv(10) == "warm") end
local a, amon = s.spawn_opt({ stack = 128 * MiB, monitor = true }, idler, s.self())
local b, bmon = s.spawn_opt({ stack = 128 * MiB, monitor = true }, idler, s.self())
assert(s.recv(10) == "ready" and s.recv(10) == "ready")
limit_as(256 * MiB)

-- 1. no stack for its first run
local _, mon = s.spawn_opt({ stack = 1024 * MiB, monitor = true }, function() end)
print("first run:", mon:recv(10).reason)

-- 2. no stack to resume a parked actor: it ends, its state closed on a reserve stack
limit_as(48 * MiB)
s.send(a, "wake up")
print("resume:", amon:recv(10).reason, s.recv(10))

-- 3. killed while parked, with no stack to be had: the kill's reason stands
s.kill(b)
print("kill:", bmon:recv(10).reason, s.recv(10))

-- 4. the rest carries on
unlimit()
local c = s.spawn_opt({ stack = 128 * MiB }, idler, s.self())
assert(s.recv(10) == "ready")
s.send(c, "go")
print("after:", s.recv(10), s.recv(10))
LUA

run -S 2 "$TMP/nostack.lua"
expect_status 0 "actors without a stack end, the runtime does not"
expect_out "first run:	no_stack" "no stack for the first run: reason no_stack"
expect_out "resume:	no_stack	finalized" "no stack to resume: reason no_stack, the state closed"
expect_out "kill:	killed	finalized" "a kill of an actor without a stack keeps its reason"
expect_out "after:	resumed	finalized" "stacks are had again once there is room"
grep -qE "^smarm: actor <0\.[0-9]+\.[0-9]+> cannot have a C stack \(1073741824 bytes, guard [0-9]+ bytes\): Cannot allocate memory; it ends with reason no_stack$" <<<"$err" \
   || fail "a line names the actor, its stack and the errno text"
[ "$(grep -c "cannot have a C stack" <<<"$err")" -eq 2 ] || fail "one line per actor without a stack"

finish
