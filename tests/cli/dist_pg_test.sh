#!/usr/bin/env bash
# smarm.pg groups across nodes through OTP's pg protocol, against a real BEAM node running
# pg:start_link() (Debian's erlang-nox), on 127.0.0.1 with a private epmd port, unique node
# names and bounded times: erl's pg:get_members(workers) sees a smarm-lua member, joins and
# leaves and deaths on either side are seen on the other, a smarm-lua actor sends to an
# Erlang member it found in the group, and the BEAM node's halt drops its members; then
# two smarm-lua nodes see each other's members and leaves.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

tag="p$$"
. tests/cli/dist/setup.sh

erlc -o "$TMP" tests/cli/dist/dist_pg_peer.erl

RUN_TIMEOUT=150 run_bg --sname "luaP$tag@localhost" --cookie "$cookie" tests/cli/dist/pg_node.lua
pids+=("$bg")
if ! AWAIT_TRIES=1200 await grep -q "ready" "$TMP/out"; then
   wait_bg || true
   status=${status:-0}
   fail "the smarm-lua node never came up ($(head -c 400 "$TMP/err"))"
   finish
fi
status=0 out=$(cat "$TMP/out") err=$(cat "$TMP/err")

timeout -k 5 120 erl -noshell -pa "$TMP" -sname "erlP$tag@localhost" -setcookie "$cookie" \
   -eval "dist_pg_peer:run(\"luaP$tag@localhost\")" >"$TMP/beam" 2>&1 || true
for c in connect erl_sees_lua_member dollar_group_stays_local lua_sees_erl_member lua_sends_to_erl_member \
   lua_picks_across_nodes lua_dispatches_across_nodes \
   lua_sees_erl_leave lua_leave_answered erl_sees_lua_leave erl_sees_lua_join \
   erl_sees_lua_death lua_sees_erl_rejoin; do
   grep -qx "OK $c" "$TMP/beam" || fail "pg: $c ($(grep " $c" "$TMP/beam" || head -c 600 "$TMP/beam"))"
done

AWAIT_TRIES=1200 await grep -qx "OK lua_drops_on_nodedown" "$TMP/out" ||
   fail "pg: the halted BEAM node's member stays ($(cat "$TMP/out"; head -c 400 "$TMP/err"))"

# two smarm-lua nodes: the same protocol between their scopes
set +e
timeout -k 5 60 "$SMARM_LUA" --sname "luaQ$tag@localhost" --cookie "$cookie" \
   tests/cli/dist/pg_peer.lua "luaP$tag@localhost" >"$TMP/outQ" 2>"$TMP/errQ"
set -e
for c in lua_connect lua_sees_lua_member lua_member_is_first_node first_sees_lua_member \
   first_sees_lua_leave; do
   grep -q "^OK $c" "$TMP/outQ" || fail "pg between smarm-lua nodes: $c ($(grep " $c" "$TMP/outQ" || head -c 600 "$TMP/errQ"))"
done
wait_bg || true

finish
