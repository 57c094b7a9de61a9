--- How the shell shows values: strings as they are at the top (as the Lua prompt does) and
-- quoted inside tables; tables inline, or one field a line when that would be long; at
-- most a few levels and items deep, and a table seen before as <cycle>.
local M = {}

local MAX_DEPTH, MAX_ITEMS, WIDE = 4, 40, 100

local function key_text(k)
   if type(k) == "string" and k:match("^[%a_][%w_]*$") then return k end
   return "[" .. (type(k) == "string" and string.format("%q", k) or tostring(k)) .. "]"
end

local function sorted_keys(t)
   local keys, n = {}, #t
   for k in pairs(t) do
      if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then
         keys[#keys + 1] = k
      end
   end
   table.sort(keys, function(a, b)
      local ta, tb = type(a), type(b)
      if ta ~= tb then return ta < tb end
      if ta == "number" or ta == "string" then return a < b end
      return tostring(a) < tostring(b)
   end)
   return keys, n
end

local render

local function fields(t, depth, seen)
   local keys, n = sorted_keys(t)
   local items = {}
   for k = 1, n do
      if #items >= MAX_ITEMS then break end
      items[#items + 1] = render(t[k], depth + 1, seen)
   end
   for _, k in ipairs(keys) do
      if #items >= MAX_ITEMS then break end
      items[#items + 1] = key_text(k) .. " = " .. render(t[k], depth + 1, seen)
   end
   local more = n + #keys - #items
   if more > 0 then items[#items + 1] = "... (" .. more .. " more)" end
   return items
end

function render(v, depth, seen)
   local tv = type(v)
   if tv == "string" then return string.format("%q", v) end
   if tv ~= "table" then return tostring(v) end
   if seen[v] then return "<cycle>" end
   if depth >= MAX_DEPTH then return "{...}" end
   local mt = getmetatable(v)
   if type(mt) == "table" and rawget(mt, "__tostring") then return tostring(v) end
   seen[v] = true
   local items = fields(v, depth, seen)
   seen[v] = nil
   if #items == 0 then return "{}" end
   return "{" .. table.concat(items, ", ") .. "}"
end

--- The text of v. top: a string is shown as it is, and a long table one field a line.
function M.value(v, top)
   if top and type(v) == "string" then return v end
   local line = render(v, 0, {})
   if not top or type(v) ~= "table" or #line <= WIDE or line == "<cycle>" then return line end
   local items = fields(v, 0, { [v] = true })
   return "{\n  " .. table.concat(items, ",\n  ") .. "\n}"
end

return M
