#!/usr/bin/env bash
# The Erlang distribution against a real BEAM node (Debian's erlang-nox), all on 127.0.0.1
# ("name@localhost") with a private epmd port, unique node names and bounded times:
# - a smarm-lua node starts epmd itself when none runs, as erl does;
# - BEAM -> smarm-lua: ping, send both ways, gen_server:call/cast answered by a Lua
#   gen_server, terms and refs and pids round trip, monitor and link of Lua actors,
#   100,000 messages in order;
# - smarm-lua -> BEAM and smarm-lua -> smarm-lua: call/cast, 100,000 messages each way,
#   remote pids as values, monitors of {name, node} (down notices naming {name, node},
#   noproc, demonitor), remote monitor and link ending with "noconnection" when the
#   BEAM node halts, monitor_node;
# - a BEAM node with the wrong cookie is refused, and the refusal logged.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

# usage errors need no BEAM
run --sname
expect_status 2 "--sname without a name"
expect_err "--sname needs an argument" "the missing name is named"
run --sname "bad@host.with.dots" -e 'print(1)'
expect_status 1 "a short name with a dotted host"
expect_err "use --name" "the dotted host points to --name"

tag="t$$"
. tests/cli/dist/setup.sh

erlc -o "$TMP" tests/cli/dist/dist_peer.erl
# erl -noshell with a bounded life; its output to a file
beam() { # beam LOGFILE ARGS...
   local log=$1
   shift
   timeout -k 5 120 erl -noshell -pa "$TMP" "$@" >"$log" 2>&1 &
   pids+=($!)
}

# 1. the first smarm-lua node (it starts epmd on the private port)
RUN_TIMEOUT=150 run_bg --sname "luaA$tag@localhost" --cookie "$cookie" tests/cli/dist/server.lua
pids+=("$bg")
if ! AWAIT_TRIES=1200 await grep -q "ready" "$TMP/out"; then
   wait_bg || true
   fail "the smarm-lua node never came up"
   finish
fi
status=0 out=$(cat "$TMP/out") err=$(cat "$TMP/err")
expect_out "ready luaA$tag@localhost" "node() names the node"
epmd -names 2>/dev/null | grep -q "luaA$tag" || fail "epmd does not list the node"

# 2. BEAM against it
timeout -k 5 120 erl -noshell -pa "$TMP" -sname "erlA$tag@localhost" -setcookie "$cookie" \
   -eval "dist_peer:against_lua('luaA$tag@localhost')" >"$TMP/beamA" 2>&1 || true
for c in ping send_both_ways call cast_then_call terms ref_round_trip pid_round_trip \
   remote_pid monitor_lua link_lua monitor_noproc 100k_to_lua; do
   grep -qx "OK $c" "$TMP/beamA" || fail "BEAM -> smarm-lua: $c ($(grep " $c" "$TMP/beamA" || cat "$TMP/beamA" | head -5))"
done

# 3. a wrong cookie is refused and logged
timeout -k 5 60 erl -noshell -pa "$TMP" -sname "erlW$tag@localhost" -setcookie wrong \
   -eval "dist_peer:wrong_cookie('luaA$tag@localhost')" >"$TMP/beamW" 2>&1 || true
grep -qx "OK wrong_cookie_refused" "$TMP/beamW" || fail "a wrong cookie was not refused ($(cat "$TMP/beamW" | head -3))"
await grep -q "erlW$tag@localhost refused: wrong cookie" "$TMP/err" ||
   fail "the refusal of erlW was not logged"

# 4. a BEAM node serving kv, and a second smarm-lua node against both
beam "$TMP/beamS" -sname "erlS$tag@localhost" -setcookie "$cookie" -eval "dist_peer:serve()"
AWAIT_TRIES=1200 await grep -q ready "$TMP/beamS" || fail "the serving BEAM node never came up"
set +e
timeout -k 5 150 "$SMARM_LUA" --sname "luaB$tag" --cookie "$cookie" tests/cli/dist/client.lua \
   "erlS$tag@localhost" "luaA$tag@localhost" >"$TMP/outB" 2>"$TMP/errB"
set -e
for c in connect nodes call_beam_put cast_then_call_beam terms_beam call_noproc \
   100k_to_beam connect_lua send_lua_both_ways call_lua 100k_to_lua remote_pid_value \
   remote_monitor_exit remote_link_exit_from remote_unlink remote_demonitor \
   remote_exit_signal_from remote_incoming_link_from remote_name_monitor \
   remote_name_monitor_noproc remote_name_monitor_noproc_lua bad_node_name exported_local_pid \
   own_pid_comes_back exported_local_pid_everywhere gen_server_this_node remote_monitor_noconnection \
   remote_link_noconnection remote_name_monitor_noconnection monitor_node; do
   grep -q "^OK $c" "$TMP/outB" || fail "smarm-lua -> BEAM/smarm-lua: $c ($(grep " $c" "$TMP/outB" || head -c 600 "$TMP/errB"))"
done

# the first node was told to stop by the client
wait_bg
expect_out "stopped	true" "the first node stopped on the client's message"

# 5. examples/cluster: an Erlang shell's calls answered by the Lua kv server
RUN_TIMEOUT=60 run_bg --sname "luaK$tag@localhost" --cookie "$cookie" examples/cluster/node.lua 30
kv_bg=$bg
pids+=("$kv_bg")
if AWAIT_TRIES=1200 await grep -q "kv is up" "$TMP/out"; then
   timeout -k 5 60 erl -noshell -sname "erlK$tag@localhost" -setcookie "$cookie" -eval "
      N = 'luaK$tag@localhost',
      ok = gen_server:call({kv, N}, {put, color, <<\"blue\">>}),
      <<\"blue\">> = gen_server:call({kv, N}, {get, color}),
      [color] = gen_server:call({kv, N}, keys),
      gen_server:cast({kv, N}, {delete, color}),
      undefined = gen_server:call({kv, N}, {get, color}),
      {kv, N} ! {self(), ping},
      receive {pong, N} -> io:format(\"OK example~n\") after 5000 -> timeout end,
      halt()." >"$TMP/beamK" 2>&1 || true
   grep -qx "OK example" "$TMP/beamK" || fail "examples/cluster from erl ($(head -c 400 "$TMP/beamK"))"
else
   fail "examples/cluster/node.lua never came up"
fi
kill "$kv_bg" 2>/dev/null || true

finish
