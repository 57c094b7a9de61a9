#!/usr/bin/env bash
# SIGINT/SIGTERM/SIGHUP: the root is shut down politely (a trapping root hears it
# and cleans up) and the run exits with 128+signal; a second signal stops
# everything, at once even when an actor is inside a C call that cannot be
# stopped (a blocking read, os.execute).
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
   run_bg "$script"
   await grep -q ready "$TMP/out" || true
   signal_bg "$sig"
   if [ -n "$second" ]; then
      sleep 0.3
      signal_bg "$second" 2>/dev/null || true
   fi
   wait_bg
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

start_and_signal "$TMP/polite.lua" HUP
expect_status 129 "SIGHUP gives 128+1"
expect_out "root shut down: shutdown" "SIGHUP shuts down politely too"

start_and_signal "$TMP/stubborn.lua" HUP TERM
expect_status 129 "any second signal stops everything; the status is the first one's"
expect_out "ignoring shutdown" "the first signal reached the root"

# --- a second signal while an actor is inside a C call ---
# os.execute records the command's pid, so the test can end it afterwards (an
# actor's command is not the runtime's to kill).
cat >"$TMP/execute_root.lua" <<'LUA'
os.execute("echo $$ >" .. arg[1] .. "; exec sleep 60")
LUA
cat >"$TMP/execute_actor.lua" <<'LUA'
local s = require "smarm"
local rx = s.trap_exit(true)
s.spawn(function(pidfile)
   os.execute("echo $$ >" .. pidfile .. "; exec sleep 60")
end, arg[1])
while true do rx:recv() end -- ignores the first signal
LUA
# an actor blocked reading a stdin that stays open (a fifo the test holds)
cat >"$TMP/read_actor.lua" <<'LUA'
local s = require "smarm"
local rx = s.trap_exit(true)
s.spawn(function(pidfile)
   local f = assert(io.open(pidfile, "w"))
   f:write("reading\n")
   f:close()
   io.read()
end, arg[1])
while true do rx:recv() end
LUA

# stop_twice FIRST SECOND SCRIPT [options]: starts the script, which writes
# $TMP/pidfile once its actor is inside the C call; sends FIRST, then SECOND
# (and $THIRD right after it, if set); sets status, out, err and elapsed
# (seconds from the second signal to the end)
stop_twice() {
   local first=$1 second=$2
   shift 2
   rm -f "$TMP/pidfile"
   RUN_TIMEOUT=30 run_bg "$@" "$TMP/pidfile"
   await test -s "$TMP/pidfile" || true
   signal_bg "$first"
   sleep 0.3
   local t0
   t0=$(date +%s%N)
   signal_bg "$second" 2>/dev/null || true
   if [ -n "${THIRD:-}" ]; then signal_bg "$THIRD" 2>/dev/null || true; fi
   wait_bg
   elapsed=$((($(date +%s%N) - t0) / 1000000000))
   end_command
}

for opts in "" "-S 1"; do
   # shellcheck disable=SC2086
   stop_twice TERM TERM $opts "$TMP/execute_root.lua"
   expect_status 143 "root in os.execute ($opts): a second SIGTERM ends the process"
   [ "$elapsed" -le 10 ] || fail "root in os.execute ($opts): at once, not after the command"
   expect_err "cannot be stopped (its scheduler is inside a C call)" \
      "root in os.execute ($opts): stderr says why"
   grep -qE "actor <0\.0\.[0-9]+> cannot be stopped" <<<"$err" || fail "the line names the root"

   # shellcheck disable=SC2086
   stop_twice TERM TERM $opts "$TMP/execute_actor.lua"
   expect_status 143 "actor in os.execute ($opts): a second SIGTERM ends the process"
   [ "$elapsed" -le 10 ] || fail "actor in os.execute ($opts): at once, not after the command"
   grep -qE "actor <0\.1\.[0-9]+> cannot be stopped" <<<"$err" || fail "the line names the actor"
done

# a third signal right after the second exits at once, without waiting to see
# whether the actors stop (a different one: the same signal twice in a row may
# arrive as one)
THIRD=INT stop_twice TERM HUP "$TMP/execute_root.lua"
expect_status 143 "a third signal: 128+N of the first"
expect_err "smarm: a third signal: the process exits now" "a third signal does not wait"

hold_stdin
STDIN="$TMP/fifo" stop_twice INT INT "$TMP/read_actor.lua"
release_stdin
expect_status 130 "actor in io.read: a second SIGINT ends the process"
[ "$elapsed" -le 10 ] || fail "actor in io.read: at once"

finish
