#!/usr/bin/env bash
# smarm-lua --trace FILE: a small ring writes a Chrome trace-event file that parses and
# holds every kind of event (slices per scheduler with the actor's pid, spawns, exits,
# sends as flows, each finish after its start, parks and wakes); SIGUSR1 writes the file while the
# run goes on; a long run keeps at most a ring's worth of events per scheduler; a file
# that cannot be written is reported and the run goes on.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

check() { # check FILE PYTHON-ASSERTIONS: parses FILE as JSON into ev, runs the assertions
   timeout 60 python3 - "$1" "$2" <<'PY'
import json, sys, collections
doc = json.load(open(sys.argv[1]))
ev = doc["traceEvents"]
kinds = collections.Counter((e["ph"], e.get("cat")) for e in ev)
exec(sys.argv[2])
print("python: ok")
PY
}

run --trace "$TMP/ring.json" -S 2 tests/bench/ring.lua 10 3
expect_status 0 "the traced ring runs"
set +e
py=$(check "$TMP/ring.json" '
assert kinds[("X", "actor")] >= 30, kinds
assert kinds[("i", "spawn")] >= 9 and kinds[("i", "exit")] >= 10, kinds
assert kinds[("i", "wake")] >= 1 and kinds[("i", "park")] >= 10, kinds
assert kinds[("s", "message")] >= 30 and kinds[("f", "message")] >= 30, kinds
names = [e for e in ev if e["ph"] == "M" and e["name"] == "thread_name"]
# which schedulers ran something depends on the load: at least one did
assert any(e["args"]["name"].startswith("scheduler ") for e in names), names
for e in ev:
    if e["ph"] == "X":
        assert e["dur"] >= 0 and e["args"]["pid"] > 0 and e["name"].startswith("<0."), e
        assert e["args"]["left"] in ("park", "yield", "done", "blocking"), e
# a flow id is the message buffer, which later messages reuse: every finish has a start
# of its id before it
opened = collections.Counter()
for e in sorted((e for e in ev if e["ph"] in "sf"), key=lambda e: (e["ts"], e["ph"] == "f")):
    if e["ph"] == "s":
        opened[e["id"]] += 1
    else:
        assert opened[e["id"]] > 0, e
        opened[e["id"]] -= 1
sends = [e for e in ev if e["ph"] == "s"]
assert all(e["args"]["from"] != e["args"]["to"] for e in sends), sends[:3]
exits = [e for e in ev if e["ph"] == "i" and e["cat"] == "exit"]
assert all(e["args"]["reason"] == "normal" for e in exits), exits
' 2>&1)
set -e
grep -q "python: ok" <<<"$py" || { out=$py; fail "the trace of a small ring"; }

# a named actor keeps its name in the slices after it ended
run --trace "$TMP/named.json" -e 'local smarm = require "smarm"
local p = smarm.spawn(function() require("smarm").register("worker_x"); require("smarm").recv() end)
smarm.sleep(0.05); smarm.send(p, "go"); smarm.sleep(0.05)'
expect_status 0 "a traced -e run"
set +e
py=$(check "$TMP/named.json" '
assert any(e["ph"] == "X" and e["name"].endswith(" worker_x") for e in ev), ev' 2>&1)
set -e
grep -q "python: ok" <<<"$py" || { out=$py; fail "slices carry the name of an ended actor"; }

# SIGUSR1 writes the file while the run goes on
RUN_TIMEOUT=60 run_bg --trace "$TMP/live.json" -e 'local smarm = require "smarm"
for i = 1, 3 do smarm.spawn(function() require("smarm").sleep(0.01) end) end
print("up"); io.stdout:flush(); smarm.sleep(60)'
if await grep -q up "$TMP/out"; then
   sleep 0.2
   signal_bg USR1
   await test -s "$TMP/live.json" || fail "SIGUSR1 writes the trace"
   set +e
   py=$(check "$TMP/live.json" 'assert kinds[("i", "spawn")] >= 3 and kinds[("X", "actor")] >= 3, kinds' 2>&1)
   set -e
   grep -q "python: ok" <<<"$py" || { out=$py; fail "the trace written on SIGUSR1 parses"; }
else
   fail "the -e run never started"
fi
signal_bg TERM
wait_bg
expect_status 143 "a traced run ends on SIGTERM"

# bounded: 100,000 hops on one scheduler, at most a ring (65,536 events) of it kept
run --trace "$TMP/long.json" -S 1 tests/bench/ring.lua 100 1000
expect_status 0 "a long traced ring"
set +e
py=$(check "$TMP/long.json" '
per = collections.Counter(e.get("tid") for e in ev if e["ph"] != "M")
assert per[0] > 20000 and per[0] <= 65536, per' 2>&1)
set -e
grep -q "python: ok" <<<"$py" || { out=$py; fail "a ring bounds the events kept"; }

run --trace /nonexistent/dir/trace.json -e 'print("ran")'
expect_status 0 "a trace file that cannot be written does not stop the run"
expect_out "ran" "the run goes on without a trace"
expect_err "cannot write the trace to /nonexistent/dir/trace.json" "the bad trace file is reported"
finish
