-- The cost of a fresh shell evaluator (what Ctrl-C pays): spawn one, run its first chunk,
-- close its channel; N times in turn. Usage: build/smarm-lua tests/bench/shell_eval_boot.lua [N]
local smarm = require "smarm"
local N = math.floor(tonumber(arg[1]) or 200)
local t0 = smarm.now()
for _ = 1, N do
   local tx, rx = smarm.channel()
   smarm.spawn(function(session, chunks)
      require("smarm.shell_eval").run(session, chunks)
   end, smarm.self(), rx)
   tx:send({ seq = 1, code = "1" })
   while true do
      local m = smarm.recv(5)
      if type(m) == "table" and m.done then break end
      assert(m, "timeout")
   end
   tx:close()
end
print(string.format("fresh evaluator + first chunk: %.0f us", (smarm.now() - t0) / N * 1e6))
