#!/usr/bin/env bash
# examples/http.lua serves hello and JSON over 127.0.0.1 (python3's http.client talks to
# it: keep-alive, a JSON POST, a bad one, a 404), and stops on SIGTERM; a handler error
# answers 500, prints a crash report in the runtime's format, and the server goes on.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

port_of() { sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$TMP/out" | head -1; }

RUN_TIMEOUT=60 run_bg examples/http.lua 0
if ! await grep -q "listening on" "$TMP/out"; then
   signal_bg KILL || true
   wait_bg
   fail "examples/http.lua never listened"
   finish
fi
port=$(port_of)

set +e
py_out=$(timeout 30 python3 - "$port" <<'PY' 2>&1
import http.client, json, sys
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
# three requests on one keep-alive connection
for _ in range(3):
    c.request("GET", "/")
    r = c.getresponse()
    body = r.read()
    assert r.status == 200 and body == b"hello\n", (r.status, body)
    assert r.getheader("Connection") is None
c.request("GET", "/json?x=1")
r = c.getresponse()
doc = json.loads(r.read())
assert r.status == 200 and r.getheader("Content-Type") == "application/json"
assert doc["message"] == "hello" and doc["query"] == "x=1", doc
c.request("POST", "/json", body=json.dumps({"a": 1, "b": [1, 2]}),
          headers={"Content-Type": "application/json"})
r = c.getresponse()
doc = json.loads(r.read())
assert r.status == 200 and doc["keys"] == 2 and doc["received"]["b"] == [1, 2], doc
c.request("POST", "/json", body="not json")
r = c.getresponse()
assert r.status == 400, r.status
r.read()
c.request("GET", "/nothing")
r = c.getresponse()
assert r.status == 404 and r.read() == b"not found\n"
print("python: ok")
PY
)
set -e
grep -q "python: ok" <<<"$py_out" || { status=running out=$py_out err=; fail "http example answers over HTTP/1.1"; }

signal_bg TERM
wait_bg
expect_status 143 "examples/http.lua ends on SIGTERM"

# A handler that raises: 500, a crash report, and the next request is served.
cat >"$TMP/boom_handler.lua" <<'LUA'
local M = {}
function M.handle(req)
   if req.path == "/boom" then error("handler blew up") end
   return 200, nil, "fine"
end
return M
LUA
cat >"$TMP/boom.lua" <<'LUA'
local http = require "smarm.http"
local s = assert(http.serve({ port = 0, handler = "boom_handler" }))
print("port " .. s:port())
io.stdout:flush()
require("smarm").recv()
LUA
RUN_TIMEOUT=60 run_bg "$TMP/boom.lua"
if await grep -q "^port " "$TMP/out"; then
   port=$(sed -n 's/^port //p' "$TMP/out")
   set +e
   py_out=$(timeout 30 python3 - "$port" <<'PY' 2>&1
import http.client, sys
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("GET", "/boom")
r = c.getresponse()
assert r.status == 500 and r.getheader("Connection") == "close", r.status
r.read()
c.close()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("GET", "/")
r = c.getresponse()
assert r.status == 200 and r.read() == b"fine"
print("python: ok")
PY
)
   set -e
   grep -q "python: ok" <<<"$py_out" || { status=running out=$py_out err=; fail "500 then the server goes on"; }
fi
signal_bg TERM
wait_bg
expect_err "crashed: " "a handler error is reported"
expect_err "boom_handler.lua:3: handler blew up" "the report names the error"
expect_err "stack traceback:" "the report has a traceback"
grep -qE '^smarm: actor <0\.[0-9]+\.[0-9]+> crashed: ' <<<"$err" \
   || fail "the report has the runtime's crash-report format"

finish
