#!/usr/bin/env bash
# smarm.blocking with one scheduler: a call that blocks its OS thread (os.execute) leaves
# the scheduler to the other actors; --blocking-threads bounds the calls made at once; and
# a run whose root has ended does not wait for a call that never returns.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RUN_TIMEOUT=30

# the root ticks 10 ms sleeps while another actor sits in a 0.5 s os.execute; made in
# place, the call would hold the only scheduler (until a spare stood in for it)
cat >"$TMP/tick.lua" <<'LUA'
local s = require "smarm"
local child = s.spawn(function(root)
   local smarm = require "smarm"
   smarm.send(root, "started")
   local ok = smarm.blocking(os.execute, "sleep 0.5")
   smarm.send(root, ok and "done" or "failed")
end, s.self())
assert(s.recv(5) == "started")
s.sleep(0.05)
-- on a pool thread, not stuck in a scheduler (which a spare would then stand in for)
print("state " .. tostring((s.info(child) or {}).state))
local ticks = 0
while true do
   local m = s.recv(0)
   if m then
      print("call " .. m)
      break
   end
   s.sleep(0.01)
   ticks = ticks + 1
end
print("ticks " .. ticks)
LUA
run -S 1 "$TMP/tick.lua"
expect_status 0 "-S 1 tick: status"
expect_out "call done" "-S 1 tick: the blocking call returned"
expect_out "state blocking" "-S 1 tick: the caller's state during the call"
ticks=$(sed -n 's/^ticks //p' <<<"$out")
[ "${ticks:-0}" -ge 10 ] || fail "-S 1 tick: the root ticked ${ticks:-0} times during the call"
echo "ticks during a 0.5 s smarm.blocking(os.execute) with -S 1: $ticks"

# --blocking-threads 1: three 0.2 s calls take turns on the one thread
cat >"$TMP/three.lua" <<'LUA'
local s = require "smarm"
local t0 = s.now()
for _ = 1, 3 do
   s.spawn(function(root)
      local smarm = require "smarm"
      smarm.blocking(os.execute, "sleep 0.2")
      smarm.send(root, "done")
   end, s.self())
end
for _ = 1, 3 do assert(s.recv(10) == "done") end
print(string.format("elapsed %.2f", s.now() - t0))
LUA
run --blocking-threads 1 "$TMP/three.lua"
expect_status 0 "--blocking-threads 1: status"
elapsed=$(sed -n 's/^elapsed //p' <<<"$out")
awk -v e="${elapsed:-0}" 'BEGIN { exit !(e >= 0.55) }' ||
   fail "--blocking-threads 1: three 0.2 s calls ended in ${elapsed:-?} s, so not one at a time"
run --blocking-threads 0 -e "print(1)"
expect_status 2 "--blocking-threads 0 is refused"
expect_err "--blocking-threads needs a whole number" "--blocking-threads 0: the message"

# a call that never returns (a read on a stdin that stays open) after the root ended: the
# sweep cannot stop it, and about a second later the run ends without it
cat >"$TMP/read.lua" <<'LUA'
local s = require "smarm"
s.spawn(function(root)
   local smarm = require "smarm"
   -- said from inside the call: a stop that came before the call began would end the
   -- actor without it
   smarm.blocking(function(to)
      smarm.send(to, "reading")
      return io.read()
   end, root)
end, s.self())
assert(s.recv(5) == "reading")
print("root done")
LUA
for opts in "-S 1" "-S 2"; do
   hold_stdin
   t0=$(date +%s%N)
   # shellcheck disable=SC2086
   STDIN="$TMP/fifo" run $opts "$TMP/read.lua"
   elapsed=$((($(date +%s%N) - t0) / 1000000000))
   release_stdin
   expect_status 0 "smarm.blocking(io.read) left behind ($opts): the root's status"
   expect_out "root done" "smarm.blocking(io.read) left behind ($opts): the root ran"
   [ "$elapsed" -le 10 ] || fail "smarm.blocking(io.read) left behind ($opts): took ${elapsed}s"
   grep -qE "smarm: actor <0\.1\.[0-9]+> is still inside smarm.blocking" <<<"$err" ||
      fail "smarm.blocking(io.read) left behind ($opts): stderr names the actor"
done

# one SIGTERM while an actor sits in a long call: the root stops, the run ends without it
cat >"$TMP/term.lua" <<'LUA'
local s = require "smarm"
s.spawn(function(pidfile)
   require("smarm").blocking(os.execute, "echo $$ >" .. pidfile .. "; exec sleep 60")
end, arg[1])
s.recv()
LUA
rm -f "$TMP/pidfile"
run_bg -S 1 "$TMP/term.lua" "$TMP/pidfile"
await test -s "$TMP/pidfile" || true
t0=$(date +%s%N)
signal_bg TERM
wait_bg
elapsed=$((($(date +%s%N) - t0) / 1000000000))
end_command
expect_status 143 "one SIGTERM with an actor in smarm.blocking: 128+15"
[ "$elapsed" -le 10 ] || fail "one SIGTERM with an actor in smarm.blocking: took ${elapsed}s"

# the root itself in a read that does not return: the first SIGTERM's stop waits for the
# call; the second ends the run without it
cat >"$TMP/root_read.lua" <<'LUA'
local s = require "smarm"
print("reading")
io.stdout:flush()
s.blocking(io.read)
LUA
hold_stdin
STDIN="$TMP/fifo" run_bg "$TMP/root_read.lua"
await grep -q reading "$TMP/out" || true
t0=$(date +%s%N)
signal_bg TERM
sleep 0.2
signal_bg TERM
wait_bg
elapsed=$((($(date +%s%N) - t0) / 1000000000))
release_stdin
expect_status 143 "two SIGTERMs, the root in smarm.blocking(io.read): 128+15"
[ "$elapsed" -le 10 ] || fail "two SIGTERMs, the root in smarm.blocking(io.read): took ${elapsed}s"
expect_err "is still inside smarm.blocking" "two SIGTERMs: stderr names the root"

finish
