#!/usr/bin/env bash
# SIGINT/SIGTERM: the root is shut down politely (a trapping root hears it and
# cleans up) and the run exits with 128+signal; a second signal stops everything.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/polite.lua" <<'LUA'
local s = require "smarm"
local rx = s.trap_exit(true)
for _ = 1, 50 do s.spawn(function() require("smarm").recv() end) end
print("ready")
io.stdout:flush()
local sig = rx:recv()
s.sleep(0.1) -- a grace period's worth of cleanup
print("root shut down: " .. tostring(sig.reason))
io.stdout:flush()
LUA

cat >"$TMP/stubborn.lua" <<'LUA'
local s = require "smarm"
local rx = s.trap_exit(true)
print("ready")
io.stdout:flush()
while true do
   local sig = rx:recv()
   print("ignoring " .. tostring(sig.reason))
   io.stdout:flush()
end
LUA

cat >"$TMP/plain.lua" <<'LUA'
local s = require "smarm"
print("ready")
io.stdout:flush()
s.recv()
LUA

# start_and_signal SCRIPT SIGNAL [SECOND]: runs the script, sends the signal(s)
# once it printed "ready"; sets status/out/err
start_and_signal() {
   local script=$1 sig=$2 second=${3:-}
   timeout 60 "$SMARM_LUA" "$script" >"$TMP/out" 2>"$TMP/err" &
   local pid=$!
   for _ in $(seq 1 200); do
      grep -q ready "$TMP/out" 2>/dev/null && break
      sleep 0.05
   done
   # timeout(1) runs smarm-lua as its child: signal the child itself
   local child
   child=$(pgrep -P "$pid" || echo "$pid")
   kill -s "$sig" "$child"
   if [ -n "$second" ]; then
      sleep 0.3
      kill -s "$second" "$child"
   fi
   set +e
   wait "$pid"
   status=$?
   set -e
   out=$(cat "$TMP/out")
   err=$(cat "$TMP/err")
}

mkdir -p "$TMP/app"
cat >"$TMP/app/app.lua" <<'LUA'
local supervisor = require "smarm.supervisor"
print("ready")
io.stdout:flush()
supervisor.run({ strategy = "one_for_one", children = {
   { id = "worker", start = { "worker", "main" }, shutdown = 1 },
} })
print("tree stopped")
LUA
cat >"$TMP/app/worker.lua" <<'LUA'
local M = {}
function M.main()
   local s = require "smarm"
   local rx = s.trap_exit(true)
   local sig = rx:recv()
   print("worker heard " .. tostring(sig.reason))
   io.stdout:flush()
end
return M
LUA

start_and_signal "$TMP/app/app.lua" TERM
expect_status 143 "a supervised application stops on SIGTERM with 128+15"
expect_out "worker heard shutdown" "the supervisor shut its child down politely"
expect_out "tree stopped" "supervisor.run returned once the tree was down"
[ -z "$err" ] || fail "a polite shutdown prints nothing on stderr"

start_and_signal "$TMP/polite.lua" TERM
expect_status 143 "SIGTERM gives 128+15"
expect_out "root shut down: shutdown" "a trapping root hears the shutdown and finishes"

start_and_signal "$TMP/polite.lua" INT
expect_status 130 "SIGINT gives 128+2"
expect_out "root shut down: shutdown" "SIGINT shuts down politely too"

start_and_signal "$TMP/plain.lua" TERM
expect_status 143 "a root that does not trap is stopped"

start_and_signal "$TMP/stubborn.lua" INT INT
expect_status 130 "a second signal stops a root that ignores the first"
expect_out "ignoring shutdown" "the first signal reached the root"

finish
