-- table: a shared table of K counters read and updated from 2 worker actors at once (run at
-- -S 2, so both schedulers hit it): first N lookups each, then N update_counter each, on
-- keys spread over the table. ns per operation = wall time / all workers' operations.
-- Usage: smarm-lua -S 2 table.lua [N=1000000] [K=1000]
--   prints RESULT lookup_ns=... update_ns=...

local n = math.floor(tonumber(arg[1]) or 1e6)
local k = math.floor(tonumber(arg[2]) or 1000)
local WORKERS = 2

-- Runs n operations of one kind and reports when done.
local function worker(parent, kind, count, keys, seed)
   local smarm = require "smarm"
   local t = smarm.table.open("bench")
   smarm.recv() -- the start signal, so both begin together
   local key = seed % keys + 1
   if kind == "lookup" then
      local sum = 0
      for _ = 1, count do
         sum = sum + t:lookup(key)
         key = key % keys + 1
      end
      assert(sum >= 0)
   else
      for _ = 1, count do
         t:update_counter(key, 1)
         key = key % keys + 1
      end
   end
   smarm.send(parent, "done")
end

local smarm = require "smarm"
local t = smarm.table.new("bench", { access = "public" })
for i = 1, k do
   t:insert(i, 0)
end

local function phase(kind)
   local pids = {}
   for w = 1, WORKERS do
      pids[w] = smarm.spawn(worker, smarm.self(), kind, n, k, w * 7919)
   end
   smarm.sleep(0.05) -- every worker has opened the table and waits
   local t0 = smarm.now()
   for w = 1, WORKERS do
      smarm.send(pids[w], "go")
   end
   for _ = 1, WORKERS do
      assert(smarm.recv() == "done")
   end
   return (smarm.now() - t0) * 1e9 / (n * WORKERS)
end

local lookup_ns = phase("lookup")
local update_ns = phase("update")
local total = t:foldl(function(_, v, acc) return acc + v end, 0)
assert(total == n * WORKERS, "lost updates: " .. total)
print(string.format("lookup: %d workers x %d in a table of %d: %.1f ns per lookup", WORKERS, n,
   k, lookup_ns))
print(string.format("update_counter: %d workers x %d: %.1f ns per update", WORKERS, n, update_ns))
print(string.format("RESULT lookup_ns=%.1f update_ns=%.1f", lookup_ns, update_ns))
