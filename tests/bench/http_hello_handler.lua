-- The handler of http_hello.lua: what OpenResty's `ngx.say("hello")` answers.
local M = {}
local HEADERS = { ["Content-Type"] = "text/plain" }
function M.handle()
   return 200, HEADERS, "hello\n"
end
return M
