#!/usr/bin/env bash
# --watch: a module file under the app's directory (here in a subdirectory) that is
# written in place or renamed over is reloaded into the running actors, and reported on
# stderr with its version; a file that does not compile is rejected (its line named) and
# the old code goes on running.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mkdir -p "$TMP/app/lib"
cat >"$TMP/app/app.lua" <<'LUA'
local smarm = require "smarm"
local greet = require "lib.greet"
local stop = arg[1]
for _ = 1, 2000 do -- bounded: 2000 ticks of 20 ms
   print(greet.msg())
   io.stdout:flush()
   local f = io.open(stop)
   if f then
      f:close()
      return
   end
   smarm.sleep(0.02)
end
LUA
version() {
   printf 'local M = {}\nfunction M.msg() return "%s" end\nreturn M\n' "$1"
}
version one >"$TMP/app/lib/greet.lua"

last_line_is() { [ "$(tail -1 "$TMP/out")" = "$1" ]; }

run_bg --watch "$TMP/app/app.lua" "$TMP/stop"
await last_line_is one || fail "the app did not start"
# written in place
version two >"$TMP/app/lib/greet.lua"
await last_line_is two || fail "a write was not picked up"
await grep -q "reloaded lib.greet (.*greet.lua): version 1" "$TMP/err" ||
   fail "the write's reload was not reported"
# a temporary file renamed over the module (how many editors save)
version three >"$TMP/app/lib/greet.lua.tmp"
mv "$TMP/app/lib/greet.lua.tmp" "$TMP/app/lib/greet.lua"
await last_line_is three || fail "a rename-over was not picked up"
await grep -q "reloaded lib.greet (.*greet.lua): version 2" "$TMP/err" ||
   fail "the rename's reload was not reported"
# a broken save: rejected with its line, the old code keeps running
printf 'local M = {}\nfunction M.msg() return "four"\nreturn M\n' >"$TMP/app/lib/greet.lua.tmp"
mv "$TMP/app/lib/greet.lua.tmp" "$TMP/app/lib/greet.lua"
await grep -q "rejected .*greet.lua (lib.greet stays at version 2): .*greet.lua:3:" "$TMP/err" ||
   fail "the broken file was not reported with its line"
sleep 0.2
last_line_is three || fail "the broken file changed the running code"
touch "$TMP/stop"
wait_bg
[ "$status" = 0 ] || fail "the app did not end normally"

# the hot_reload example, edited as its README section says: the count is kept
cp -r "$(dirname "$0")/../../examples/hot_reload" "$TMP/hot"
run_bg --watch "$TMP/hot/main.lua" 20 0.05
await grep -q "the count is 3$" "$TMP/out" || fail "the example did not tick"
sed -i 's/state.count + 1 end/state.count + 10 end/' "$TMP/hot/counter.lua"
await grep -q "counter: code_change from version 0, count [0-9]* kept" "$TMP/out" ||
   fail "the counter did not convert its state"
sed -i 's/tick: the count is/tock: the count is now/' "$TMP/hot/ticker.lua"
await grep -q "ticker: took ticker version 1" "$TMP/out" || fail "the ticker did not take v1"
await grep -q "tock: the count is now" "$TMP/out" || fail "the ticker's new line did not show"
# counts after the change go up by 10 from the kept count (never back to a small one)
kept=$(grep -m1 -o "count [0-9]* kept" "$TMP/out" | grep -o "[0-9]*")
first_new=$(grep -m1 -o "tock: the count is now [0-9]*" "$TMP/out" | grep -o "[0-9]*$")
[ "$first_new" -gt "$kept" ] || fail "the count was not kept ($kept, then $first_new)"
signal_bg INT
wait_bg

[ "$failures" = 0 ] && echo "watch: ok"
exit "$failures"
