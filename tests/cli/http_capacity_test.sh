#!/usr/bin/env bash
# smarm.http when the runtime's actor slab is full (--max-actors): the server keeps
# running and answers new connections 503 instead of spawning, then serves again once
# actors are free.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

cat >"$TMP/handler.lua" <<'LUA'
local M = {}
function M.handle() return 200, nil, "ok" end
return M
LUA
cat >"$TMP/full.lua" <<'LUA'
local smarm = require "smarm"
local http = require "smarm.http"
local net = require "smarm.net"
local parse = require "smarm.http_parse"
local server = assert(http.serve({ port = 0, handler = "handler" }))
-- fill the slab with actors that wait
local hogs = {}
while true do
   local pid = smarm.try_spawn(function() require("smarm").recv() end)
   if not pid then break end
   hogs[#hogs + 1] = pid
end
local function status()
   local sock = assert(net.connect("127.0.0.1", server:port(), 5))
   assert(sock:send("GET / HTTP/1.1\r\nHost: t\r\n\r\n", 5))
   local data, _, partial = sock:recv("*a", 5)
   data = data or partial or ""
   sock:close()
   local r = parse.response_head(data, 1, 4096)
   return r and r.status
end
local got503 = false
for _ = 1, 5 do
   if status() == 503 then got503 = true break end
end
print("full: " .. (got503 and "503" or "no 503"))
for _, pid in ipairs(hogs) do smarm.kill(pid) end
smarm.sleep(0.6)
print("freed: " .. tostring(status()))
LUA
run --max-actors 16 "$TMP/full.lua"
expect_status 0 "a full slab"
expect_out "full: 503" "a connection past the slab's capacity is answered 503"
expect_out "freed: 200" "the server serves again once actors are free"
finish
