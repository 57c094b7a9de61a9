-- Helpers for the hot reload specs: module files written into a scratch directory, and
-- actor bodies that put that directory on their package.path before loading them.
local gen_server = require "smarm.gen_server"
local gen_statem = require "smarm.gen_statem"

local M = {}

--- A fresh scratch directory.
function M.dir()
   local d = os.tmpname()
   os.remove(d)
   assert(os.execute("mkdir -p " .. d) == 0)
   return d
end

--- Writes module name's source into dir.
function M.write(dir, name, src)
   local f = assert(io.open(dir .. "/" .. name .. ".lua", "w"))
   f:write(src)
   f:close()
end

--- Lets this actor require the modules in dir.
function M.use(dir)
   if not package.path:find(dir, 1, true) then
      package.path = dir .. "/?.lua;" .. package.path
   end
end

--- A gen_server over a module of dir, run inline (a supervisor child's function).
function M.serve(dir, module, args, opts)
   M.use(dir)
   return gen_server.run(module, args, opts or {})
end

--- A gen_statem over a module of dir, run inline.
function M.statem(dir, module, args, opts)
   M.use(dir)
   return gen_statem.run(module, args, opts or {})
end

return M
