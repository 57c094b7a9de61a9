#!/usr/bin/env bash
# A scheduler stuck inside a C call that no signal interrupts (os.execute, a blocking read)
# hands its work to a spare scheduler thread: with -S 1 another actor's 10 ms sleeps keep
# finishing while the call runs, instead of all waiting for it; and once the call has
# returned the spare retires, so an idle runtime stays idle.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RUN_TIMEOUT=30

# the root counts 10 ms sleeps until the other actor's plain os.execute("sleep 0.5") is
# over; without a hand-off the only scheduler is held for the whole call: 0 or 1 ticks
cat >"$TMP/execute.lua" <<'LUA'
local s = require "smarm"
s.spawn(function(root)
   local smarm = require "smarm"
   smarm.send(root, "started")
   os.execute("sleep 0.5")
   smarm.send(root, "done")
end, s.self())
assert(s.recv(5) == "started")
local ticks, worst = 0, 0
repeat
   local t = s.now()
   s.sleep(0.01)
   worst = math.max(worst, s.now() - t)
   ticks = ticks + 1
until s.recv(0) == "done"
print(string.format("ticks %d worst %.1f ms", ticks, worst * 1000))
-- idle afterwards: the spare has retired, nothing polls (the CPU this costs is measured)
s.sleep(tonumber(arg[1]) or 0)
LUA
TIMEFORMAT='%U %S'
{ cpu=$( { time timeout 30 "$SMARM_LUA" -S 1 "$TMP/execute.lua" 2 >"$TMP/out" 2>"$TMP/err"; } 2>&1 ); } || true
out=$(cat "$TMP/out") err=$(cat "$TMP/err") status=0
ticks=$(sed -n 's/^ticks \([0-9]*\).*/\1/p' <<<"$out")
[ "${ticks:-0}" -ge 5 ] || fail "-S 1 os.execute: the sleeping actor ticked ${ticks:-0} times"
echo "-S 1, a 0.5 s os.execute beside 10 ms sleeps: $out"
read -r user sys <<<"$cpu"
cpu_ms=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%d", (u + s) * 1000 }')
# the call's half second and 2 s idle after it: a spare that stayed awake would poll
[ "$cpu_ms" -lt 200 ] || fail "-S 1 os.execute then idle: ${cpu_ms} ms of CPU"

# two actors in plain os.execute calls at once, a spare each; the root still ticks
cat >"$TMP/two.lua" <<'LUA'
local s = require "smarm"
for _ = 1, 2 do
   s.spawn(function(root)
      local smarm = require "smarm"
      smarm.send(root, "started")
      os.execute("sleep 0.5")
      smarm.send(root, "done")
   end, s.self())
end
assert(s.recv(5) == "started" and s.recv(5) == "started")
local ticks, done = 0, 0
repeat
   s.sleep(0.01)
   ticks = ticks + 1
   if s.recv(0) == "done" then done = done + 1 end
until done == 2 or ticks > 1000
print("ticks " .. ticks)
LUA
run -S 1 "$TMP/two.lua"
expect_status 0 "-S 1, two os.execute calls: status"
ticks=$(sed -n 's/^ticks //p' <<<"$out")
[ "${ticks:-0}" -ge 5 ] || fail "-S 1, two os.execute calls: the root ticked ${ticks:-0} times"

# a blocking read: the reader holds the only scheduler until a line comes; meanwhile the
# root ticks, then writes the line itself (through the fifo the reader reads)
cat >"$TMP/read.lua" <<'LUA'
local s = require "smarm"
s.spawn(function(root)
   local smarm = require "smarm"
   smarm.send(root, "reading")
   smarm.send(root, io.read() or "eof")
end, s.self())
assert(s.recv(5) == "reading")
local ticks = 0
for _ = 1, 20 do
   s.sleep(0.01)
   ticks = ticks + 1
end
local f = assert(io.open(arg[1], "w"))
f:write("line\n")
f:close()
print("ticks " .. ticks .. " read " .. tostring(s.recv(5)))
LUA
hold_stdin
STDIN="$TMP/fifo" run -S 1 "$TMP/read.lua" "$TMP/fifo"
release_stdin
expect_status 0 "-S 1 io.read: status"
expect_out "ticks 20 read line" "-S 1 io.read: the root ticked while the reader waited"

finish
