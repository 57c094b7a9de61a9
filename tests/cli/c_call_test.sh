#!/usr/bin/env bash
# The run ends when the root ends, even if an actor it left is inside a C call
# that does not return (a read on a stdin that stays open, os.execute): about a
# second after the root-exit sweep smarm-lua exits with the root's status,
# naming the actor on stderr, instead of waiting for the call.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# arg[1] = "after": the reader starts reading once the root has ended, so the
# only scheduler of -S 1 is the one stuck (no spare stands in: nothing waits);
# else the root ends a moment after the reader started reading
cat >"$TMP/read.lua" <<'LUA'
local s = require "smarm"
local after = arg[1] == "after"
s.spawn(function(root, after_root)
   local smarm = require "smarm"
   if after_root then smarm.monitor(root):recv() else smarm.send(root, "reading") end
   io.read()
end, s.self(), after)
if not after then
   s.recv()
   s.sleep(0.3)
end
print("root done")
if arg[2] == "crash" then error("root crash") end
LUA
cat >"$TMP/execute.lua" <<'LUA'
local s = require "smarm"
s.spawn(function(pidfile)
   os.execute("echo $$ >" .. pidfile .. "; exec sleep 60")
end, arg[1])
while not io.open(arg[1]) do s.sleep(0.01) end
s.sleep(0.1)
print("root done")
LUA

# a 30 s timeout rather than lib.sh's 60: the C calls last 60 s
RUN_TIMEOUT=30

# timed CMD...: runs smarm-lua with a timeout well below the C call's length;
# sets status, out, err and elapsed (seconds)
timed() {
   local t0
   t0=$(date +%s%N)
   run "$@"
   elapsed=$((($(date +%s%N) - t0) / 1000000000))
}
for opts in "" "-S 1"; do
   hold_stdin
   # shellcheck disable=SC2086
   STDIN="$TMP/fifo" timed $opts "$TMP/read.lua" "${opts:+after}"
   release_stdin
   expect_status 0 "io.read left behind ($opts): the root's status"
   expect_out "root done" "io.read left behind ($opts): the root ran"
   [ "$elapsed" -le 10 ] || fail "io.read left behind ($opts): exited in ${elapsed}s, not at once"
   grep -qE "smarm: actor <0\.1\.[0-9]+> is still inside a C call after the root-exit sweep" \
      <<<"$err" || fail "io.read left behind ($opts): stderr names the actor"
done

hold_stdin
STDIN="$TMP/fifo" timed "$TMP/read.lua" before crash
release_stdin
expect_status 1 "io.read left behind by a root that crashed: status 1"
expect_err "root crash" "the root's crash is reported"
[ "$elapsed" -le 10 ] || fail "io.read left behind by a crashed root: exited in ${elapsed}s"

# os.execute: the command is the actor's, and outlives the run (ended here)
timed "$TMP/execute.lua" "$TMP/pidfile"
end_command
expect_status 0 "os.execute left behind: the root's status"
[ "$elapsed" -le 10 ] || fail "os.execute left behind: exited in ${elapsed}s, not at once"

# one SIGTERM: the root stops politely, and the run ends without the actor
cat >"$TMP/term.lua" <<'LUA'
local s = require "smarm"
s.spawn(function(pidfile)
   os.execute("echo $$ >" .. pidfile .. "; exec sleep 60")
end, arg[1])
s.recv()
LUA
rm -f "$TMP/pidfile"
run_bg "$TMP/term.lua" "$TMP/pidfile"
await test -s "$TMP/pidfile" || true
t0=$(date +%s%N)
signal_bg TERM
wait_bg
elapsed=$((($(date +%s%N) - t0) / 1000000000))
end_command
expect_status 143 "one SIGTERM with an actor in os.execute: 128+15"
[ "$elapsed" -le 10 ] || fail "one SIGTERM with an actor in os.execute: exited in ${elapsed}s"

finish
