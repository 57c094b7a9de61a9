# Helpers for the end-to-end tests: run smarm-lua with a timeout and check what it did.
SMARM_LUA=${SMARM_LUA:-build/smarm-lua}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

# run CMD...: runs smarm-lua under a timeout (RUN_TIMEOUT seconds, default 60), stdin
# from $STDIN (default /dev/null); sets $status, $out, $err
run() {
   set +e
   timeout -k 5 "${RUN_TIMEOUT:-60}" "$SMARM_LUA" "$@" >"$TMP/out" 2>"$TMP/err" \
      <"${STDIN:-/dev/null}" 3>&-
   status=$?
   set -e
   out=$(cat "$TMP/out")
   err=$(cat "$TMP/err")
}

# run_bg CMD...: like run, in the background (its output goes to $TMP/out and $TMP/err,
# fresh files); then signal_bg and wait_bg
run_bg() {
   rm -f "$TMP/out" "$TMP/err"
   timeout -k 5 "${RUN_TIMEOUT:-60}" "$SMARM_LUA" "$@" >"$TMP/out" 2>"$TMP/err" \
      <"${STDIN:-/dev/null}" 3>&- &
   bg=$! bg_child=
}

# await TEST...: runs the command TEST every 50 ms until it succeeds, for up to 10 s
# (AWAIT_TRIES, default 200, times 50 ms); fails if it never did
await() {
   for _ in $(seq 1 "${AWAIT_TRIES:-200}"); do
      "$@" 2>/dev/null && return 0
      sleep 0.05
   done
   return 1
}

# signal_bg SIGNAL: sends SIGNAL to the smarm-lua of run_bg (timeout(1) runs it as its
# child: the child itself is signalled)
signal_bg() {
   [ -n "$bg_child" ] || bg_child=$(pgrep -P "$bg" || echo "$bg")
   kill -s "$1" "$bg_child"
}

# wait_bg: waits until the smarm-lua of run_bg has ended; sets $status, $out, $err
wait_bg() {
   set +e
   wait "$bg"
   status=$?
   set -e
   out=$(cat "$TMP/out")
   err=$(cat "$TMP/err")
}

# hold_stdin: a stdin that stays open, for STDIN=$TMP/fifo: a fifo this script holds
# open on fd 3 (read-write, so no open blocks); release_stdin closes it, which ends a
# read on it
hold_stdin() {
   [ -p "$TMP/fifo" ] || mkfifo "$TMP/fifo"
   exec 3<>"$TMP/fifo"
}
release_stdin() { exec 3>&-; }

# end_command: ends the command whose pid an actor wrote on the first line of
# $TMP/pidfile (os.execute's command is the actor's, and outlives the run)
end_command() {
   local cmd
   cmd=$(head -1 "$TMP/pidfile" 2>/dev/null || true)
   if [[ $cmd =~ ^[0-9]+$ ]]; then kill "$cmd" 2>/dev/null || true; fi
   rm -f "$TMP/pidfile"
}

fail() {
   echo "FAIL: $1"
   # (a test that fails before its first run has no status, out or err yet)
   echo "  status: ${status-}"
   echo "  stdout: ${out-}" | head -20
   echo "  stderr: ${err-}" | head -20
   failures=$((failures + 1))
}

expect_status() { [ "$status" -eq "$1" ] || fail "$2: expected status $1"; }
expect_out() { grep -qF -- "$1" <<<"$out" || fail "$2: stdout lacks '$1'"; }
expect_err() { grep -qF -- "$1" <<<"$err" || fail "$2: stderr lacks '$1'"; }

finish() {
   if [ "$failures" -gt 0 ]; then
      echo "$(basename "$0"): $failures failed"
      exit 1
   fi
   echo "$(basename "$0"): ok"
}

# http_helpers: writes $TMP/http_serve.lua (smarm-lua http_serve.lua HANDLER: an HTTP server
# on a free port with the handler module HANDLER from $TMP; prints "listening PORT", serves
# for up to 60 s) and $TMP/http_get.lua (returns get(sock, path): a keep-alive GET, the
# answer's body; stats(port): the body of /stats on a connection of its own; and client, the
# body of an actor holding one keep-alive connection), which a client script in $TMP loads
# with dofile(arg[0]:match("^(.*)/") .. "/http_get.lua")
http_helpers() {
   cat >"$TMP/http_serve.lua" <<'LUA'
local http = require "smarm.http"
local server = assert(http.serve({ port = 0, handler = arg[1] }))
print("listening " .. server:port())
io.stdout:flush()
require("smarm").recv(60)
LUA
   cat >"$TMP/http_get.lua" <<'LUA'
-- GET path on sock (keep-alive): the body
local function get(sock, path)
   assert(sock:send("GET " .. path .. " HTTP/1.1\r\nHost: t\r\n\r\n", 10))
   local len
   while true do
      local line = assert(sock:recv("*l", 10))
      if line == "" then break end
      local n = line:match("^[Cc]ontent%-[Ll]ength: *(%d+)")
      if n then len = tonumber(n) end
   end
   return assert(sock:recv(len, 10))
end

-- the body of /stats on the server at port
local function stats(port)
   local sock = assert(require("smarm.net").connect("127.0.0.1", port, 10))
   local body = get(sock, "/stats")
   sock:close()
   return body
end

-- An actor's body (no upvalues: get comes as its bytecode's string): one connection to p,
-- `rounds` requests for /, then "done" to parent, then a /work request and "done" whenever
-- the parent says "go", until it says something else.
local function client(get_code, p, rounds, parent)
   local s = require "smarm"
   local fetch = loadstring(get_code)
   local sock = assert(require("smarm.net").connect("127.0.0.1", p, 10))
   for _ = 1, rounds do fetch(sock, "/") end
   s.send(parent, "done")
   while s.recv(30) == "go" do
      fetch(sock, "/work")
      s.send(parent, "done")
   end
   sock:close()
end

return get, stats, client
LUA
}
