#!/usr/bin/env bash
# The run ends when the root ends, even if an actor it left is inside a C call
# that does not return (a read on a stdin that stays open, os.execute): about a
# second after the root-exit sweep smarm-lua exits with the root's status,
# naming the actor on stderr, instead of waiting for the call.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# arg[1] = "after": the reader starts reading once the root has ended (with -S 1
# a reader that started first would hold the only scheduler, and the root would
# never end); else the root ends a moment after the reader started reading
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

# run with a 30 s timeout rather than lib.sh's 60: the C calls last 60 s
run() {
   set +e
   timeout -k 5 30 "$SMARM_LUA" "$@" >"$TMP/out" 2>"$TMP/err" <"${STDIN:-/dev/null}" 3>&-
   status=$?
   set -e
   out=$(cat "$TMP/out")
   err=$(cat "$TMP/err")
}

# timed CMD...: runs smarm-lua with a timeout well below the C call's length;
# sets status, out, err and elapsed (seconds)
timed() {
   local t0
   t0=$(date +%s%N)
   run "$@"
   elapsed=$((($(date +%s%N) - t0) / 1000000000))
}
# a stdin that stays open: a fifo the test holds open on fd 3 (read-write, so
# no open blocks); closing fd 3 ends the read
mkfifo "$TMP/fifo"
open_stdin() { exec 3<>"$TMP/fifo"; }
close_stdin() { exec 3>&-; }
for opts in "" "-S 1"; do
   open_stdin
   # shellcheck disable=SC2086
   STDIN="$TMP/fifo" timed $opts "$TMP/read.lua" "${opts:+after}"
   close_stdin
   expect_status 0 "io.read left behind ($opts): the root's status"
   expect_out "root done" "io.read left behind ($opts): the root ran"
   [ "$elapsed" -le 10 ] || fail "io.read left behind ($opts): exited in ${elapsed}s, not at once"
   grep -qE "smarm: actor <0\.1\.[0-9]+> is still inside a C call after the root-exit sweep" \
      <<<"$err" || fail "io.read left behind ($opts): stderr names the actor"
done

open_stdin
STDIN="$TMP/fifo" timed "$TMP/read.lua" before crash
close_stdin
expect_status 1 "io.read left behind by a root that crashed: status 1"
expect_err "root crash" "the root's crash is reported"
[ "$elapsed" -le 10 ] || fail "io.read left behind by a crashed root: exited in ${elapsed}s"

# os.execute: the command is the actor's, and outlives the run (ended here)
end_command() {
   local cmd
   cmd=$(head -1 "$TMP/pidfile" 2>/dev/null || true)
   if [[ $cmd =~ ^[0-9]+$ ]]; then kill "$cmd" 2>/dev/null || true; fi
   rm -f "$TMP/pidfile"
}
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
timeout -k 5 30 "$SMARM_LUA" "$TMP/term.lua" "$TMP/pidfile" >"$TMP/out" 2>"$TMP/err" &
tpid=$!
for _ in $(seq 1 200); do
   [ -s "$TMP/pidfile" ] && break
   sleep 0.05
done
child=$(pgrep -P "$tpid" || echo "$tpid")
t0=$(date +%s%N)
kill -TERM "$child"
set +e
wait "$tpid"
status=$?
set -e
elapsed=$((($(date +%s%N) - t0) / 1000000000))
out=$(cat "$TMP/out") err=$(cat "$TMP/err")
end_command
expect_status 143 "one SIGTERM with an actor in os.execute: 128+15"
[ "$elapsed" -le 10 ] || fail "one SIGTERM with an actor in os.execute: exited in ${elapsed}s"

finish
