#!/usr/bin/env bash
# The interactive shell: driven through a pseudo-terminal by tests/cli/shell_pty.py (local
# shell, Ctrl-C, -i app.lua, --shell-socket and --remsh, refused socket paths), and the
# modes that need no terminal: `smarm-lua -` and a shell whose input is a pipe.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

printf 'print("from stdin", 1 + 2)\nprint(arg[1])\n' >"$TMP/chunk.lua"
STDIN=$TMP/chunk.lua run - x
expect_status 0 "smarm-lua - runs standard input"
expect_out "from stdin	3" "smarm-lua - runs the chunk read from standard input"
grep -qF "> " <<<"$out" && fail "smarm-lua - prints no prompt when stdin is not a terminal"

STDIN=/dev/null run
expect_status 2 "no file and no terminal is a usage error"
expect_err "usage: smarm-lua" "no file and no terminal prints the usage"

printf 'local x = 20\nx + 22\nfor i = 1, 2 do\nprint("line", i)\nend\nerror("oops")\n"still here"\n' \
   >"$TMP/lines"
STDIN=$TMP/lines run -i
expect_status 0 "a shell on a pipe ends at its end"
expect_out "42" "a piped shell evaluates and keeps locals"
expect_out "line	2" "a piped shell runs multi-line chunks"
expect_out "shell:1: oops" "a piped shell prints errors"
expect_out "still here" "a piped shell goes on after an error"

printf 'kill(smarm.self())\n2 + 2\n' >"$TMP/lines"
STDIN=$TMP/lines run -i
expect_out "the evaluator ended (killed)" "a killed evaluator is reported"
expect_out "4" "a fresh evaluator takes the next line after the evaluator was killed"

run --remsh "$TMP/nothing.sock"
expect_status 1 "--remsh to no socket fails"
expect_err "nothing.sock" "--remsh names the path it could not reach"

# a remote shell driven through a pipe (as a script would), into an app that waits
printf 'local smarm = require "smarm"\nsmarm.register("app_main")\nsmarm.recv()\n' >"$TMP/app.lua"
run_bg --shell-socket "$TMP/app.sock" "$TMP/app.lua"
await test -S "$TMP/app.sock" || fail "--shell-socket makes its socket"
printf 'smarm.whereis("app_main") ~= nil\nlocal n = 6\nn * 7\n' | \
   timeout 20 "$SMARM_LUA" --remsh "$TMP/app.sock" >"$TMP/remsh_out" 2>&1 || true
grep -qx "true" "$TMP/remsh_out" || fail "a piped remsh evaluates inside the app: $(cat "$TMP/remsh_out")"
grep -qx "42" "$TMP/remsh_out" || fail "a piped remsh keeps locals: $(cat "$TMP/remsh_out")"
kill -0 "$bg" 2>/dev/null || fail "the app runs on after the remote shell left"
signal_bg TERM
wait_bg
expect_status 143 "the app with a shell socket stops on SIGTERM"

if timeout -k 5 300 python3 tests/cli/shell_pty.py "$SMARM_LUA" "$TMP"; then :; else
   status=$? out= err=
   fail "the pseudo-terminal tests (tests/cli/shell_pty.py)"
fi
finish
