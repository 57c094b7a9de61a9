-- http_hello: the server side of `scripts/bench http`: smarm.http answering "hello\n" to
-- every request (the handler is http_hello_handler.lua beside this file), until killed.
-- Usage: smarm-lua -S 2 http_hello.lua PORT   prints "listening PORT" once it accepts
local http = require "smarm.http"
local port = math.floor(tonumber(arg[1]) or 8080)
local server = assert(http.serve({ port = port, handler = "http_hello_handler" }))
print("listening " .. server:port())
io.stdout:flush()
require("smarm").recv()
