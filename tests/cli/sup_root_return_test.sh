#!/usr/bin/env bash
# The root returning after supervisor.start_link: the tree stops in order, each child
# with its shutdown grace, before the root-exit sweep.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mkdir -p "$TMP/app"
cat >"$TMP/app/slow_server.lua" <<'LUA'
-- a gen_server whose terminate takes 0.2 s, then says so on stdout
local smarm = require "smarm"
local M = {}
function M.init(name)
   require("smarm.gen_server").trap_exit()
   return { name = name }
end
function M.handle_call(_, _, s) return "reply", s.name, s end
function M.terminate(reason, s)
   smarm.sleep(0.2)
   io.stdout:write("terminated ", s.name, " ", tostring(reason), "\n")
   io.stdout:flush()
end
return M
LUA
cat >"$TMP/app/main.lua" <<'LUA'
local supervisor = require "smarm.supervisor"
local function child(name)
   return { id = name, start = { "smarm.gen_server", "run", "slow_server", name },
            shutdown = 2 }
end
local sup = assert(supervisor.start_link({ children = { child("first"), child("second") } }))
print("root returns", type(sup))
LUA
run "$TMP/app/main.lua"
expect_status 0 "the root returns normally"
expect_out "root returns	number" "the root ran"
expect_out "terminated second shutdown" "the last child's terminate finished"
expect_out "terminated first shutdown" "the first child's terminate finished"
# OTP order: the last started stops first
order=$(grep -o 'terminated [a-z]*' <<<"$out" | tr '\n' ' ')
[ "$order" = "terminated second terminated first " ] || fail "children stop last first ($order)"

finish
