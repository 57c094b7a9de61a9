#!/usr/bin/env bash
# The signals smarm-lua handles besides SIGINT/SIGTERM (signal_test.sh), and the
# ones it leaves alone: SIGPIPE fails the write in the actor that made it;
# SIGUSR1 prints a snapshot of the actors and the run goes on; SIGUSR2, SIGALRM,
# SIGPROF and SIGVTALRM keep their default action.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# --- SIGPIPE: stdout is a pipe whose reader has gone ---
cat >"$TMP/pipe.lua" <<'LUA'
local s = require "smarm"
local _, mon = s.spawn_monitor(function(parent)
   local smarm = require "smarm"
   local chunk = string.rep("x", 65536)
   for _ = 1, 10000 do
      local ok, err = io.stdout:write(chunk)
      if not ok then
         smarm.send(parent, err)
         return
      end
      io.stdout:flush()
   end
   smarm.send(parent, "no error")
end, s.self())
io.stderr:write("writer: ", tostring(s.recv(30)), "\n")
io.stderr:write("writer ended: ", tostring(mon:recv(30).reason), "\n")
LUA
set +e
timeout 60 "$SMARM_LUA" "$TMP/pipe.lua" 2>"$TMP/err" | head -c 10 >/dev/null
status=${PIPESTATUS[0]}
set -e
out="" err=$(cat "$TMP/err")
expect_status 0 "a write to a closed pipe does not kill the process"
expect_err "writer: Broken pipe" "the actor's write failed with EPIPE"
expect_err "writer ended: normal" "the writer went on and ended normally"

# a command an actor runs has SIGPIPE's default action: `yes` dies of it quietly
# (with SIGPIPE ignored it would complain "yes: standard output: Broken pipe")
run -e 'require("smarm").spawn(function() os.execute("yes | head -c 1 >/dev/null") end)'
expect_status 0 "a pipeline in os.execute"
grep -q "yes:" <<<"$err" && fail "a command run by an actor has SIGPIPE's default action"

# --- SIGUSR1: a snapshot on stderr, and the run goes on ---
cat >"$TMP/snap.lua" <<'LUA'
local s = require "smarm"
local pid = s.spawn(function()
   local smarm = require "smarm"
   smarm.register("sleeper")
   smarm.sleep(60)
end)
s.sleep(0.05)
for i = 1, 3 do s.send(pid, i) end
print("ready " .. s.pid_tostring(pid) .. " " .. s.pid_tostring(s.self()))
io.stdout:flush()
s.recv()
LUA
run_bg "$TMP/snap.lua"
await grep -q ready "$TMP/out" || true
signal_bg USR1
await grep -q root "$TMP/err" || true
await grep -q sleeper "$TMP/err" || true
signal_bg TERM
wait_bg
read -r _ sleeper root <<<"$out"
expect_status 143 "SIGUSR1 does not end the run (SIGTERM does, afterwards)"
expect_err "smarm: snapshot: 2 actors" "the snapshot counts the actors"
grep -qE "^smarm:   $sleeper parked mailbox=3 memory=[0-9]+ name=sleeper$" <<<"$err" \
   || fail "the snapshot has a line for the sleeper: state, mailbox, memory, name"
grep -qE "^smarm:   $root [a-z]+ mailbox=0 memory=[0-9]+ root$" <<<"$err" \
   || fail "the snapshot marks the root"

# --- the signals left at their default action: the process ends with 128+N ---
for sig in USR2:140 ALRM:142 PROF:155 VTALRM:154; do
   name=${sig%%:*} want=${sig##*:}
   run_bg -e 'print("ready") io.stdout:flush() require("smarm").recv()'
   await grep -q ready "$TMP/out" || true
   signal_bg "$name"
   wait_bg
   expect_status "$want" "SIG$name keeps its default action"
done

finish
