-- Checks of the errors the library raises for bad arguments.
local M = {}

--- The message of the error fn raises, without its position, which must be the line
-- fn is defined on (write fn on one line: function() api(bad) end).
function M.raised_here(fn)
   local ok, err = pcall(fn)
   if ok then error("no error raised", 2) end
   local info = debug.getinfo(fn, "S")
   local where, line, msg = tostring(err):match("^(.-):(%d+): (.*)$")
   if not where or info.short_src ~= where or tonumber(line) ~= info.linedefined then
      error(("not raised at %s:%d: %s"):format(info.short_src, info.linedefined, tostring(err)), 2)
   end
   return msg
end

return M
