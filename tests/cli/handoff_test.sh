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
-- idle afterwards: the spare has retired, nothing polls (its thread's wakes are counted)
io.stdout:flush()
s.sleep(tonumber(arg[1]) or 0)
LUA
# the root prints its ticks, flushes, and idles 3 s: meanwhile the spare thread, which stood
# in during the call, must be asleep (it would wake every millisecond had it not retired)
run_bg -S 1 "$TMP/execute.lua" 3
await grep -q '^ticks' "$TMP/out" || fail "-S 1 os.execute: no ticks line"
sleep 0.3
spare_switches() {
   local t
   for t in /proc/"$(pgrep -P "$bg" || echo "$bg")"/task/*; do
      if [ "$(cat "$t/comm" 2>/dev/null)" = smarm-spare0 ]; then
         # the thread may end between the two reads
         sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' "$t/status" 2>/dev/null || echo none
         return
      fi
   done
   echo none
}
before=$(spare_switches)
sleep 1
after=$(spare_switches)
wait_bg
expect_status 0 "-S 1 os.execute: status"
ticks=$(sed -n 's/^ticks \([0-9]*\).*/\1/p' <<<"$out")
[ "${ticks:-0}" -ge 5 ] || fail "-S 1 os.execute: the sleeping actor ticked ${ticks:-0} times"
echo "-S 1, a 0.5 s os.execute beside 10 ms sleeps: $out"
if [ "$before" = none ] || [ "$after" = none ]; then
   fail "-S 1 os.execute: no spare thread (smarm-spare0) stood in"
elif [ $((after - before)) -gt 50 ]; then
   fail "-S 1 os.execute then idle: the spare woke $((after - before)) times in 1 s"
fi

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
