# Sourced by the distribution tests after tests/cli/lib.sh, with $tag set: skips the test
# without erl/erlc; gives it a private epmd port, a cookie, the pids array its background
# processes go in, and a cleanup (on exit) that kills them and stops that epmd.
if ! command -v erl >/dev/null || ! command -v erlc >/dev/null; then
   echo "$(basename "$0"): skipped (no erl/erlc; scripts/setup installs erlang-nox)"
   exit 0
fi

export ERL_EPMD_PORT=$((20000 + RANDOM % 20000))
cookie="c$RANDOM$RANDOM"
pids=()
cleanup() {
   for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
   # epmd refuses to stop while nodes are registered: wait for them to go
   for _ in $(seq 1 100); do
      epmd -names 2>/dev/null | grep -q "^name " || break
      sleep 0.1
   done
   epmd -kill >/dev/null 2>&1 || true
   rm -rf "$TMP"
}
trap cleanup EXIT
