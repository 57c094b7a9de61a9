#!/usr/bin/env bash
# Embedding benchmark: examples/embed/game.c against this checkout's build (static
# libsmarm.a), at 60 Hz with 100 and 1,000 NPCs; prints the host-side time per frame
# (sending every NPC its frame message and gathering the replies, not the sleep to the
# next frame). Standalone: scripts/bench compares smarm-lua programs with BEAM twins, and
# this has no twin.
#   tests/bench/embed_frames.sh [FRAMES=600] [NPCS...=100 1000]
set -euo pipefail
cd "$(dirname "$0")/../.."
frames=${1:-600}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100 1000)
ninja build/libsmarm.a build/smarm-lua >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# static: the whole archive, exported (the Lua library reaches its C half through ffi.C)
cc -O2 -o "$tmp/game" examples/embed/game.c -Iruntime/include -Ibuild/deps/luajit/src \
   -Wl,-E -Wl,--whole-archive build/libsmarm.a -Wl,--no-whole-archive -lm -ldl -lpthread
for n in "${sizes[@]}"; do
   out=$(timeout 300 "$tmp/game" examples/embed "$n" "$frames" 2>/dev/null)
   grep -E "^(frames|replies|host time)" <<<"$out" | sed "s/^/$n NPCs: /"
   grep "^RESULT" <<<"$out" | sed 's/^RESULT/BENCH name=embed_frames/'
   # the same exchange between a root actor and plain actors, for comparison
   timeout 300 build/smarm-lua tests/bench/embed_frames_root.lua "$n" "$frames"
done
