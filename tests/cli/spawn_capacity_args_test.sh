#!/usr/bin/env bash
# A spawn refused for capacity leaves its arguments with the caller: a socket and a channel
# rx passed to try_spawn at a full actor slab stay usable by the spawner (the slot is
# reserved before the arguments are encoded, and encoding is what moves them).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

cat >"$TMP/full.lua" <<'LUA'
local smarm = require "smarm"
local net = require "smarm.net"
local server = assert(net.listen("127.0.0.1", 0))
local client = assert(net.connect("127.0.0.1", server:port(), 5))
local sock = assert(server:accept(5))
local tx, rx = smarm.channel()
-- fill the slab with actors that wait
local n = 0
while smarm.try_spawn(function() require("smarm").recv() end) do n = n + 1 end
print("filled", n > 0)
print("socket", smarm.try_spawn(function(s) s:close() end, sock))
print("rx", smarm.try_spawn(function(r) r:recv() end, rx))
print("spawn", pcall(smarm.spawn, function(s) s:close() end, sock))
-- both are still the spawner's
assert(sock:send("still mine\n", 5))
print("client got", client:recv("*l", 5))
tx:send("queued")
print("rx got", rx:recv(0))
os.exit(0)
LUA
run --max-actors 8 "$TMP/full.lua"
expect_status 0 "a full slab"
expect_out "filled	true" "the slab fills"
expect_out "socket	nil	at_capacity" "try_spawn with a socket at capacity"
expect_out "rx	nil	at_capacity" "try_spawn with an rx at capacity"
expect_out "spawn	false	" "spawn at capacity raises"
expect_out "client got	still mine" "the socket stays the spawner's"
expect_out "rx got	queued" "the rx stays the spawner's"
finish
