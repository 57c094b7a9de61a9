--- The shell's evaluator: an actor that runs the chunks a session (smarm.shell) sends it on
-- a channel, prints the values of expressions, keeps the chunks' locals from one line to
-- the next, and has the helpers Erlang users type (help() lists them). What it prints goes
-- to the session as {from = pid, o = text}; {from = pid, done = seq} ends each request. Its
-- inbox is the user's: flush() shows what arrived there.
local smarm = require "smarm"
local pretty = require "smarm.shell_pretty"

local M = {}

local session, me

local function out(text)
   smarm.send(session, { from = me, o = text })
end

local function print_values(...)
   local n = select("#", ...)
   local parts = {}
   for k = 1, n do
      parts[k] = tostring((select(k, ...)))
   end
   out(table.concat(parts, "\t") .. "\n")
end

-- ---- locals that persist: `local x = 1` on one line, `x` on the next ----

local declared, locals = {}, {}

-- chunks run with this table as their environment: a declared local first, then _G
local env = setmetatable({}, {
   __index = function(_, k)
      if declared[k] then return locals[k] end
      return _G[k]
   end,
   __newindex = function(_, k, v)
      if declared[k] then locals[k] = v else _G[k] = v end
   end,
})

local IDENT = "^[%a_][%w_]*$"

--- `local a, b = ...` at the start of a chunk as `a, b = ...` with a and b declared, and
-- `local function f` as `f = function`; nil when the chunk does not start so.
local function rewrite_local(text)
   local lead, name, rest = text:match("^(%s*)local%s+function%s+([%a_][%w_]*)(.*)$")
   if name then return lead .. name .. " = function" .. rest, { name } end
   local list
   lead, list, rest = text:match("^(%s*)local[ \t]+([%a_][%w_ \t,]*)(.*)$")
   if not list then return nil end
   local names = {}
   for part in (list .. ","):gmatch("([^,]*),") do
      local nm = part:match("^%s*(.-)%s*$")
      if not nm:match(IDENT) then return nil end
      names[#names + 1] = nm
   end
   local target = table.concat(names, ", ")
   if rest:match("^%s*=") then return lead .. target .. " " .. rest, names end
   return lead .. target .. " = nil" .. rest, names
end

--- The chunk's function: an expression (its values are printed) or statements.
local function compile(text)
   if text:sub(1, 1) == "=" then text = text:sub(2) end
   -- the values pass through select so that the expression is no tail call: an error
   -- raised in it keeps its line
   local f = loadstring("return select(1, " .. text .. "\n)", "=shell")
   if f then return f, true end
   local rewritten, names = rewrite_local(text)
   if rewritten then
      f = loadstring(rewritten, "=shell")
      if f then
         for _, nm in ipairs(names) do declared[nm] = true end
         return f, false
      end
   end
   local err
   f, err = loadstring(text, "=shell")
   return f, false, err
end

-- the traceback down to the chunk: the shell's own frames say nothing to the user
local function traceback(e)
   local tb = debug.traceback(tostring(e), 2)
   local cut = tb:find("\n%s*%[C%]: in function 'xpcall'")
   tb = cut and tb:sub(1, cut - 1) or tb
   return (tb:gsub("\n%s*%[builtin#%d+%]:[^\n]*", ""))
end

local function pack(...)
   return select("#", ...), { ... }
end

--- Runs the app of `smarm-lua -i app.lua` in this state: its globals become the shell's.
local function run_app(app)
   _G.arg = app.args
   local f, err = loadfile(app.file)
   if not f then
      out(err .. "\n")
      return
   end
   local ok, e = xpcall(f, traceback, unpack(app.args))
   if not ok then out(tostring(e) .. "\n") end
end

local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function",
   "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until",
   "while" }

--- The completions of word ("pri", "smarm.sp", "t.x:me"): whole words, sorted.
local function completions(word)
   local path, sep, part = word:match("^(.-)([%.:])([%w_]*)$")
   local names, seen = {}, {}
   local function add(k, prefix)
      if type(k) == "string" and k:sub(1, #part) == part and k:match("^[%a_][%w_]*$")
         and not seen[k] then
         seen[k] = true
         names[#names + 1] = prefix .. k
      end
   end
   if not path then
      part = word
      for k in pairs(declared) do add(k, "") end
      for k in pairs(_G) do add(k, "") end
      for _, k in ipairs(KEYWORDS) do add(k, "") end
   else
      local t = env
      for key in path:gmatch("[^%.:]+") do
         if type(t) ~= "table" then return {} end
         t = t[key]
      end
      local prefix = path .. sep
      if type(t) == "string" then t = string end -- s:upper
      local depth = 0
      while type(t) == "table" and depth < 4 do -- the table, then its __index tables
         local mt = getmetatable(t)
         if type(mt) == "table" and type(rawget(mt, "__index")) == "function" then
            -- a table that fills itself on a miss (the smarm table does) fills up
            pcall(function() return t[" complete"] end)
         end
         for k in pairs(t) do add(k, prefix) end
         mt = getmetatable(t)
         t = type(mt) == "table" and rawget(mt, "__index") or nil
         depth = depth + 1
      end
   end
   table.sort(names)
   return names
end

--- One request: {code = text}, {complete = word} or {file = path, args = {...}} (the app).
local function eval(req)
   if req.complete then
      local ok, names = pcall(completions, req.complete)
      smarm.send(session, { from = me, seq = req.seq, names = ok and names or {} })
      return
   end
   if req.file then return run_app(req) end
   local text = req.code
   local f, is_expr, err = compile(text)
   if not f then
      out(err .. "\n")
      return
   end
   setfenv(f, env)
   local n, res = pack(xpcall(f, traceback))
   if not res[1] then
      out(tostring(res[2]) .. "\n")
      return
   end
   if is_expr and n > 1 then
      local parts = {}
      for k = 2, n do
         parts[k - 1] = pretty.value(res[k], true)
      end
      out(table.concat(parts, "\t") .. "\n")
   end
end

--- Runs chunks from rx until it closes.
-- @param session_pid where output goes
-- @param rx the channel the chunks come on
function M.run(session_pid, rx)
   session, me = session_pid, smarm.self()
   _G.print = print_values
   require("smarm.shell_helpers").install(_G, out)
   while true do
      local req = rx:recv()
      if req == nil then return end
      eval(req)
      smarm.send(session, { from = me, done = req.seq })
   end
end

return M
