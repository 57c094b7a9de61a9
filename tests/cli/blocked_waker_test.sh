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

# stdin: a fifo the test holds open (fd 3, read-write, so no open blocks)
mkfifo "$TMP/fifo"
for _ in 1 2 3; do
   exec 3<>"$TMP/fifo"
   rm -f "$TMP/out"
   timeout -k 5 30 "$SMARM_LUA" -S 2 "$TMP/waker.lua" <"$TMP/fifo" >"$TMP/out" 2>"$TMP/err" 3>&- &
   tpid=$!
   woke=no
   for _ in $(seq 1 200); do
      if grep -q "root woke" "$TMP/out" 2>/dev/null; then
         woke=yes
         break
      fi
      sleep 0.05
   done
   # end the read: the run ends once the reader returns (or the timeout fires)
   exec 3>&-
   set +e
   wait "$tpid"
   status=$?
   set -e
   out=$(cat "$TMP/out") err=$(cat "$TMP/err")
   [ "$woke" = yes ] || fail "the root woken by the reader ran while the reader was blocked"
   expect_status 0 "the run ended normally"
done

finish
