#!/usr/bin/env bash
# smarm-lua's exit statuses, crash reports, arg, -e, -v, -h.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/ok.lua" <<'LUA'
print("args", select("#", ...), arg[0] ~= nil, arg[1], arg[2])
LUA
run "$TMP/ok.lua" one two
expect_status 0 "normal root exit"
expect_out "args	2	true	one	two" "arg and ... hold the script's arguments"

cat >"$TMP/crash.lua" <<'LUA'
local function inner() error("boom in inner") end
inner()
LUA
run "$TMP/crash.lua"
expect_status 1 "root crash"
expect_err "crashed: " "crash report names the crash"
expect_err "boom in inner" "crash report has the error"
expect_err "stack traceback:" "crash report has a traceback"
expect_err "in function 'inner'" "traceback names the function"
grep -qE "actor <0\.[0-9]+\.[0-9]+>" <<<"$err" || fail "crash report names the pid"

printf 'this is not lua' >"$TMP/syntax.lua"
run "$TMP/syntax.lua"
expect_status 1 "syntax error"
expect_err "syntax.lua" "syntax error names the file"

run "$TMP/missing.lua"
expect_status 1 "missing file"
expect_err "missing.lua" "missing file is named"

run -e 'require("smarm").exit("bad thing")'
expect_status 1 "abnormal smarm.exit"
expect_err "bad thing" "exit reason is reported"

run -e 'require("smarm").exit()'
expect_status 0 "smarm.exit() is normal"
[ -z "$err" ] || fail "a normal exit prints nothing on stderr"

run -e 'print(arg[1], ...)' x y
expect_status 0 "-e runs code"
expect_out "x	x	y" "-e passes arguments"

run -e 'local s = require "smarm"
local child = s.spawn(function() error("child fails") end)
s.sleep(0.05)
print("root still here")'
expect_status 0 "a crashing child does not fail the root"
expect_out "root still here" "root survives a child crash"
expect_err "child fails" "child crash reported"

run -v
expect_status 0 "-v"
expect_out "smarm-lua" "-v prints the name"

run -h
expect_status 0 "-h"
expect_out "usage: smarm-lua" "-h prints usage"

run --bogus
expect_status 2 "unknown option"
expect_err "unknown option --bogus" "unknown option named"

run -S 0 -e 'print(1)'
expect_status 2 "bad -S"

run -S 1 -e 'local s = require "smarm"
for i = 1, 10 do s.spawn(function(p, i) require("smarm").send(p, i) end, s.self(), i) end
local sum = 0
for _ = 1, 10 do sum = sum + s.recv() end
print("sum", sum)'
expect_status 0 "-S 1"
expect_out "sum	55" "-S 1 runs everything on one scheduler"

run --max-actors 4 -e 'local s = require "smarm"
local pids = {}
for i = 1, 10 do
  local p, err = s.try_spawn(function() require("smarm").recv() end)
  if not p then print("refused", i, err) break end
  pids[#pids + 1] = p
end
local ok, err = pcall(s.spawn, function() end)
print("spawn", ok, err)'
expect_status 0 "at capacity"
expect_out "refused	4	at_capacity" "try_spawn refuses past max_actors (root holds one slot)"
expect_out "at capacity (max_actors = 4)" "spawn raises a clear error at capacity"

# numeric options: whole numbers where a count is meant, bounds printed in full
run -S 1.5 -e 'print(1)'
expect_status 2 "-S 1.5"
expect_err "-S needs a whole number between 1 and 64" "-S 1.5 is refused"
run --max-actors 99999999999 -e 'print(1)'
expect_status 2 "--max-actors too large"
expect_err "--max-actors needs a whole number between 1 and 16777216" "the bound is printed in full"

finish
