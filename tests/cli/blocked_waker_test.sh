#!/usr/bin/env bash
# An actor woken by an actor that then blocks in a C call (here io.read on a
# stdin that stays open) still runs: the wake put it in the blocked scheduler's
# runnext slot, and the watchdog hands it to the other scheduler.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# The reader busies its scheduler long enough for the other one to go to sleep,
# then wakes the root and starts reading.
cat >"$TMP/waker.lua" <<'LUA'
local s = require "smarm"
s.spawn(function(root)
   local smarm = require "smarm"
   local t = smarm.now()
   while smarm.now() - t < 0.1 do end
   smarm.send(root, "reading")
   io.read()
end, s.self())
s.recv()
print("root woke")
io.stdout:flush()
LUA

for _ in 1 2 3; do
   hold_stdin
   STDIN="$TMP/fifo" RUN_TIMEOUT=30 run_bg -S 2 "$TMP/waker.lua"
   woke=no
   await grep -q "root woke" "$TMP/out" && woke=yes
   # end the read: the run ends once the reader returns (or the timeout fires)
   release_stdin
   wait_bg
   [ "$woke" = yes ] || fail "the root woken by the reader ran while the reader was blocked"
   expect_status 0 "the run ended normally"
done

finish
