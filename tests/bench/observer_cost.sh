#!/usr/bin/env bash
# observer_cost: CPU an idle examples/supervision.lua uses in 20 s, without the observer and
# with it while a client asks for what the page asks for every second (/api/snapshot,
# /api/tree, /api/schedulers). Usage: tests/bench/observer_cost.sh   (from the repository)
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${SECS:-20}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

measure() {
   local app poller=
   if [ "$1" = observer ]; then
      build/smarm-lua --observer 127.0.0.1:0 examples/supervision.lua 100000 1 >/dev/null 2>"$TMP/err" &
      app=$!
      for _ in $(seq 1 100); do grep -q "kill token" "$TMP/err" && break; sleep 0.05; done
      port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$TMP/err" | head -1)
      python3 - "$port" "$SECS" <<'PY' &
import http.client, sys, time
port, end = int(sys.argv[1]), time.time() + float(sys.argv[2])
while time.time() < end:
    for p in ("/api/snapshot", "/api/tree", "/api/schedulers"):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", p)
        c.getresponse().read()
        c.close()
    time.sleep(1)
PY
      poller=$!
   else
      build/smarm-lua examples/supervision.lua 100000 1 >/dev/null 2>&1 &
      app=$!
      sleep 0.5
   fi
   local before after
   before=$(cpu_ticks "$app")
   sleep "$SECS"
   after=$(cpu_ticks "$app")
   [ -z "$poller" ] || wait "$poller" || true
   kill "$app"
   wait "$app" 2>/dev/null || true
   echo "RESULT $1 cpu_seconds=$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" \
      'BEGIN { printf "%.2f", t / hz }') in ${SECS} s"
}

measure plain
measure observer
