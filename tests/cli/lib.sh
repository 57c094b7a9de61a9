# Helpers for the end-to-end tests: run smarm-lua with a timeout and check what it did.
SMARM_LUA=${SMARM_LUA:-build/smarm-lua}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

# run CMD...: runs smarm-lua under a timeout; sets $status, $out, $err
run() {
   set +e
   timeout 60 "$SMARM_LUA" "$@" >"$TMP/out" 2>"$TMP/err"
   status=$?
   set -e
   out=$(cat "$TMP/out")
   err=$(cat "$TMP/err")
}

fail() {
   echo "FAIL: $1"
   echo "  status: $status"
   echo "  stdout: $out" | head -20
   echo "  stderr: $err" | head -20
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
