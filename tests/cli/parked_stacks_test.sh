#!/usr/bin/env bash
# 40,000 actors parked inside a coroutine each hold their own C stack at once: more than
# vm.max_map_count (65,530) / 2, the old limit of two mappings per stack. With stacks cut
# from chunks (MADV_GUARD_INSTALL guards, Linux 6.13+) they cost few mappings and all answer.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/parked.lua" <<'LUA'
local s = require "smarm"
local ffi = require "ffi"
ffi.cdef [[
void *mmap(void *addr, size_t len, int prot, int flags, int fd, long off);
int munmap(void *addr, size_t len);
int madvise(void *addr, size_t len, int advice);
]]
-- the probe the runtime makes: MADV_GUARD_INSTALL (102) on an anonymous mapping
local m = ffi.C.mmap(nil, 8192, 3, 0x22, -1, 0)
local supported = ffi.C.madvise(m, 4096, 102) == 0
ffi.C.munmap(m, 8192)
if not supported then
   print("skip: this kernel lacks MADV_GUARD_INSTALL (Linux 6.13+)")
   return
end

local function maps_lines()
   local n = 0
   for _ in io.lines("/proc/self/maps") do n = n + 1 end
   return n
end

local N = tonumber(arg[1])
local me = s.self()
local t0 = s.now()
local pids = {}
for i = 1, N do
   pids[i] = s.spawn(function(parent, id)
      local sm = require "smarm"
      sm.send(parent, id)
      -- a receive inside a coroutine parks holding the actor's C stack
      local go = coroutine.wrap(function() return sm.recv() end)()
      sm.send(parent, go + id)
   end, me, i)
end
for _ = 1, N do assert(s.recv(60), "an actor did not start") end
-- none can end before its message: all N hold a stack now, or are about to
local maps = maps_lines()
print(("parked %d actors in %.1f s, %d mappings"):format(N, s.now() - t0, maps))
for i = 1, N do s.send(pids[i], 1000000) end
local seen, count = {}, 0
for _ = 1, N do
   local v = assert(s.recv(60), "an actor did not answer")
   local id = v - 1000000
   assert(id >= 1 and id <= N and not seen[id], "a wrong or repeated answer")
   seen[id] = true
   count = count + 1
end
print(("answered %d, mappings %s"):format(count, maps < 20000 and "few" or "many"))
LUA

run -S 2 "$TMP/parked.lua" 40000
if grep -q "^skip:" <<<"$out"; then
   echo "$(basename "$0"): $out"
   exit 0
fi
echo "$out" | head -1
expect_status 0 "40,000 parked actors"
expect_out "answered 40000, mappings few" "every parked actor answers, and the stacks cost few mappings"
[ -z "$err" ] || fail "nothing on stderr"

finish
