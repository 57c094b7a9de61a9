-- hello: the root actor spawns a few greeters, greets each, and prints their replies.
-- Usage: smarm-lua examples/hello.lua [name ...]   (default names: ada grace barbara)

-- A greeter: waits for {from = pid, text = ...} and answers with a greeting of its own.
-- Spawned functions have no upvalues, so it requires smarm itself.
local function greeter(name)
   local smarm = require "smarm"
   local m = smarm.recv()
   smarm.send(m.from, {
      name = name,
      text = ("%s %s: hello %s, you said %q"):format(
         name, smarm.pid_tostring(smarm.self()), smarm.pid_tostring(m.from), m.text),
   })
end

-- Required below the actor body so the body cannot capture it as an upvalue.
local smarm = require "smarm"

local names = { ... }
if #names == 0 then
   names = { "ada", "grace", "barbara" }
end

local me = smarm.self()
print(("root %s: spawning %d greeters"):format(smarm.pid_tostring(me), #names))
local pids = {}
for i, name in ipairs(names) do
   pids[i] = smarm.spawn(greeter, name)
end
for i, pid in ipairs(pids) do
   smarm.send(pid, { from = me, text = "hi " .. names[i] })
end

-- Replies arrive in whatever order the greeters ran; sort them for a stable output.
local replies = {}
for _ = 1, #names do
   local m, err = smarm.recv(5)
   if not m then
      error("hello: a greeter did not answer: " .. err)
   end
   replies[#replies + 1] = m
end
table.sort(replies, function(a, b) return a.name < b.name end)
for _, m in ipairs(replies) do
   print(m.text)
end

-- An expected outcome is a return value, not an error: nobody sends us anything now.
print("recv(0.01) ->", smarm.recv(0.01))
print(("%d greeters replied"):format(#replies))
