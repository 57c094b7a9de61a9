-- What the ticker actor of the hot reload example prints. Edit line() while the example
-- runs under --watch: the ticker's loop calls the new one from its next tick.
local M = {}

function M.line(count)
   return string.format("tick: the count is %d", count) -- try: another wording
end

return M
