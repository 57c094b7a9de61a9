#!/usr/bin/env bash
# Preemption with a single scheduler (-S 1): the preemption specs must hold when
# one hog could otherwise own the only scheduler thread; also with a short -T.
# The loops that spend their time in C (system calls, FFI calls, C work) run
# at -S 2 as well.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."

for opts in "-S 1" "-S 1 -T 1" "-S 2"; do
   filter=()
   [ "$opts" = "-S 2" ] && filter=(--filter "loops that spend their time in C")
   # shellcheck disable=SC2086
   set +e
   timeout 300 "$SMARM_LUA" $opts tests/lua/run.lua --output=plainTerminal "${filter[@]}" \
      tests/lua/preempt_spec.lua >"$TMP/out" 2>"$TMP/err"
   status=$?
   set -e
   out=$(cat "$TMP/out")
   err=$(cat "$TMP/err")
   expect_status 0 "preempt specs at $opts"
   expect_out " 0 failures" "preempt specs at $opts pass"
done

finish
