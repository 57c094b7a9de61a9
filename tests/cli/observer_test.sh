#!/usr/bin/env bash
# smarm-lua --observer: examples/supervision.lua with the observer on 127.0.0.1. The JSON
# endpoints show its tree and actors (the observer's own marked), /metrics is Prometheus
# text, the kill endpoint refuses a request without the token printed on stderr and kills
# with it (the supervisor restarts the child, and the tree shows the new pid), and headless
# Chromium renders the page: the tree and the actor table appear, the page refreshes
# itself, and a second load after a restart shows the new child. A taken port or a bad
# address is reported and the app runs without its observer.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

# the flaky worker crashes every 3 s (every third 1 s job): within the supervisor's limit
RUN_TIMEOUT=120 run_bg --observer 127.0.0.1:0 examples/supervision.lua 1000 1
if ! await grep -q "kill token" "$TMP/err"; then
   signal_bg KILL || true
   wait_bg
   fail "the observer never said where it listens"
   finish
fi
port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$TMP/err" | head -1)
token=$(sed -n 's/.*kill token: \([0-9a-f]*\).*/\1/p' "$TMP/err" | head -1)
[ ${#token} -eq 32 ] || fail "a 32-digit kill token is printed (got '$token')"

set +e
py_out=$(timeout 60 python3 - "$port" "$token" <<'PY' 2>&1
import http.client, json, sys, time
port, token = int(sys.argv[1]), sys.argv[2]

def req(method, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), body

def find(nodes, pred):
    for n in nodes:
        if pred(n):
            return n
        f = find(n["children"], pred)
        if f:
            return f

def tree():
    st, ct, body = req("GET", "/api/tree")
    assert st == 200 and ct == "application/json", (st, ct)
    return json.loads(body)["tree"]

st, ct, body = req("GET", "/api/snapshot")
assert st == 200 and ct == "application/json", (st, ct)
actors = json.loads(body)["actors"]
names = {a.get("name") for a in actors}
assert {"watcher", "ticker", "flaky", "smarm_observer"} <= names, names
for a in actors:
    for k in ("pid", "state", "mailbox", "memory", "slices", "messages_in", "messages_out"):
        assert k in a, (k, a)
    assert a["observer"] == (a.get("name") == "smarm_observer" or a["observer"]), a
own = [a for a in actors if a["observer"]]
assert any(a.get("name") == "smarm_observer" for a in own), own
assert not any(a.get("name") in ("watcher", "ticker", "flaky") for a in own), own
ticker = next(a for a in actors if a.get("name") == "ticker")
assert ticker["current"].startswith("examples/lib/supervision_worker.lua:"), ticker

t = tree()
sup = find(t, lambda n: n["type"] == "supervisor")
assert sup, t
kids = {c["id"]: c for c in sup["children"]}
assert set(kids) == {"ticker", "flaky"}, kids
assert all(c["type"] == "worker" for c in kids.values()), kids
flaky = kids["flaky"]["pid"]

st, ct, body = req("GET", "/api/schedulers")
sched = json.loads(body)
assert st == 200 and sched["interval"] == 1 and len(sched["history"]) >= 1, sched
assert all(0 <= u <= 1 for h in sched["history"] for u in h), sched

st, ct, body = req("GET", "/api/actor?pid=%d" % flaky)
info = json.loads(body)
assert st == 200 and info["pid"] == flaky and "high_water" in info["stack"], info

st, ct, body = req("GET", "/metrics")
text = body.decode()
assert st == 200 and ct.startswith("text/plain"), (st, ct)
for m in ("smarm_actors_alive", "smarm_actors_spawned_total", "smarm_messages_sent_total",
          'smarm_actors_exited_total{reason="error"}', "smarm_run_queue_length",
          'smarm_scheduler_busy_seconds_total{scheduler="0"}', "smarm_timers_pending",
          "smarm_memory_bytes", "smarm_gc_bytes", "smarm_backlogs_shared_total",
          "smarm_backlogs_kept_total", "smarm_cpu_room"):
    line = next((l for l in text.splitlines() if l.startswith(m + " ")), None)
    assert line, (m, text)
    float(line.split()[-1])
alive = int(next(l for l in text.splitlines() if l.startswith("smarm_actors_alive ")).split()[1])
assert alive >= 5, alive

# the kill endpoint: refused without the token, with a wrong one, and as a GET
path = "/api/kill?pid=%d" % flaky
assert req("POST", path)[0] == 403
assert req("POST", path, {"X-Smarm-Token": "0" * 32})[0] == 403
assert req("GET", path, {"X-Smarm-Token": token})[0] == 405
assert find(tree(), lambda n: n["pid"] == flaky), "a refused kill killed"
assert req("GET", "/nothing")[0] == 404
st, _, body = req("POST", path, {"X-Smarm-Token": token})
assert st == 200, (st, body)
for _ in range(100):
    again = find(tree(), lambda n: n.get("id") == "flaky")
    if again and again["pid"] != flaky:
        break
    time.sleep(0.05)
assert again and again["pid"] != flaky, "the killed child came back under a new pid"
assert not find(tree(), lambda n: n["pid"] == flaky)
print("python: ok")
PY
)
set -e
grep -q "python: ok" <<<"$py_out" || { status=running out=$py_out err=$(cat "$TMP/err"); fail "observer JSON, metrics and kill"; }

# The page in headless Chromium: --dump-dom after the page's own refreshes (virtual time)
dom() {
   local profile
   profile=$(mktemp -d)
   timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
      --disable-background-networking --disable-component-update --disable-sync \
      --user-data-dir="$profile" --virtual-time-budget=3000 --dump-dom \
      "http://127.0.0.1:$port/" 2>/dev/null || true
   rm -rf "$profile"
}
flaky_pid() { grep -o 'data-pid="[0-9]*" data-id="flaky"' <<<"$1" | head -1 | grep -o '[0-9]*' | head -1; }
if command -v chromium >/dev/null; then
   page=$(dom)
   grep -q 'data-id="ticker" data-type="worker"' <<<"$page" || { out=$page; fail "the page shows the ticker worker in the tree"; }
   grep -q 'data-type="supervisor"' <<<"$page" || { out=$page; fail "the page shows the supervisor"; }
   grep -q 'b-observer' <<<"$page" || { out=$page; fail "the page marks the observer's actors"; }
   grep -Eq '<td[^>]*>flaky</td>' <<<"$page" || { out=$page; fail "the actor table lists flaky"; }
   grep -Eq 'data-refreshes="[1-9]' <<<"$page" || { out=$page; fail "the page refreshes itself"; }
   grep -q 'data-sched="0"' <<<"$page" || { out=$page; fail "the page charts scheduler 0"; }
   first=$(flaky_pid "$page")
   [ -n "$first" ] || fail "the page shows flaky's pid"
   # a restart (a kill through the API), then the page shows the new child
   timeout 20 python3 -c '
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
c.request("POST", "/api/kill?pid=" + sys.argv[2], headers={"X-Smarm-Token": sys.argv[3]})
# 404: it crashed and was restarted by itself meanwhile (every 3 s)
assert c.getresponse().status in (200, 404)' "$port" "$first" "$token" || fail "the kill with the token"
   second=
   for _ in 1 2 3; do
      page=$(dom)
      second=$(flaky_pid "$page")
      [ -n "$second" ] && [ "$second" != "$first" ] && break
   done
   [ -n "$second" ] && [ "$second" != "$first" ] || fail "the page shows flaky's new pid after a restart ($first, then '$second')"
else
   fail "chromium is not installed (scripts/setup installs it)"
fi

# the port is taken now: the second observer says so, and its app runs anyway
# (its own output files: the app in the background still writes to those of run_bg)
set +e
timeout -k 5 60 "$SMARM_LUA" --observer "127.0.0.1:$port" \
   -e 'require("smarm").sleep(0.5) print("ran")' >"$TMP/out2" 2>"$TMP/err2" </dev/null
status=$?
set -e
out=$(cat "$TMP/out2")
err=$(cat "$TMP/err2")
expect_status 0 "an observer that cannot listen does not stop the app"
expect_out "ran" "the app runs without its observer"
expect_err "smarm observer: cannot listen on 127.0.0.1:$port" "the taken port is reported"

signal_bg TERM
wait_bg
expect_status 143 "the app with its observer ends on SIGTERM"

run --observer "no-port" -e 'require("smarm").sleep(0.5) print("ran")'
expect_status 0 "a bad observer address does not stop the app"
expect_err "bad observer address no-port ([HOST:]PORT expected)" "a bad address is named"
run --observer
expect_status 2 "--observer without an address is a usage error"
finish
