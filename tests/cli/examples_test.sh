#!/usr/bin/env bash
# The examples run to a normal end with small sizes and print what they should;
# scripts/example names the available examples when asked for an unknown one.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

run examples/hello.lua
expect_status 0 "hello"
expect_out "spawning 3 greeters" "hello spawns its greeters"
expect_out 'ada <0.' "hello prints a greeter's pid"
expect_out 'you said "hi grace"' "a greeter answers what it was sent"
expect_out "recv(0.01) ->	nil	timeout" "an empty inbox times out with nil, \"timeout\""
expect_out "3 greeters replied" "every greeter replied"

run examples/hello.lua alice bob
expect_status 0 "hello with names"
expect_out 'you said "hi bob"' "hello greets the names given"
expect_out "2 greeters replied" "one greeter per name"

run examples/ring.lua 50 4
expect_status 0 "ring"
expect_out "ring: 50 actors, 4 laps" "ring reads N and M from its arguments"
expect_out "200 hops in " "ring counts N * M hops"
grep -qE "^200 hops in [0-9.]+ ms: [0-9]+ ns per hop$" <<<"$out" || fail "ring prints ns per hop"

run -S 1 examples/ring.lua 3 1
expect_status 0 "ring on one scheduler"
expect_out "3 hops in " "a small ring on one scheduler"

run examples/ring.lua 0
expect_status 1 "ring with a bad size"
expect_err "N (actors) must be a positive integer" "ring names the bad argument"

run examples/switch.lua
expect_status 0 "switch"
expect_out "state=off flips=1 enters=3" "the Switch machine ends in the spec's state"

run examples/hot_reload/main.lua 0.3 0.05
expect_status 0 "hot_reload"
expect_out "tick: the count is 3" "hot_reload's ticker reads the counter"

run examples/supervision.lua
expect_status 0 "supervision"
expect_out "supervisor stopped:" "the supervision example shuts its tree down and ends"
expect_err "flaky: job" "the flaky worker's crashes are reported"

# Unknown names fail before any set-up or build work is done.
set +e
scripts/example no_such_example >"$TMP/out" 2>"$TMP/err"
status=$?
set -e
out=$(cat "$TMP/out")
err=$(cat "$TMP/err")
expect_status 2 "scripts/example with an unknown name"
expect_err "no example named 'no_such_example'" "the unknown name is reported"
expect_err "examples: chat hello http ring supervision switch" "the available examples are listed"

finish
