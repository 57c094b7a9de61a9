#!/usr/bin/env bash
# examples/chat.lua: two clients in a room hear each other (python3 sockets over
# 127.0.0.1), /nick and /join work, and a client that stops reading is dropped while the
# room goes on. The server drops a client whose send has waited 5 s: a reader that keeps
# reading is never dropped, even on a slow (sanitizer) build or a host that stalls the VM
# for a moment (one CI run dropped the reading client with 3 s).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

RUN_TIMEOUT=90 run_bg examples/chat.lua 0 5
if ! await grep -q "listening on" "$TMP/out"; then
   signal_bg KILL || true
   wait_bg
   fail "examples/chat.lua never listened"
   finish
fi
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/out" | head -1)

set +e
py_out=$(timeout 60 python3 - "$port" <<'PY' 2>&1
import queue, socket, sys, threading
port = int(sys.argv[1])

class Client:
    # a reader thread keeps reading (unless quiet) and queues the lines
    def __init__(self, rcvbuf=None, quiet=False):
        self.s = socket.socket()
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(30)
        self.s.connect(("127.0.0.1", port))
        self.lines = queue.Queue()
        self.quiet = quiet
        threading.Thread(target=self.read, daemon=True).start()
    def read(self):
        buf = b""
        try:
            while True:
                d = self.s.recv(65536)
                if not d:
                    break
                buf += d
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self.lines.put(line.decode())
                    if self.quiet and "welcome" in line.decode():
                        return          # from now on it never reads
        except OSError:
            pass
        self.lines.put(None)
    def send(self, line):
        self.s.sendall(line.encode() + b"\n")
    def expect(self, text):
        # takes lines until one contains text (20 s in all)
        while True:
            line = self.lines.get(timeout=20)
            assert line is not None, "closed while waiting for %r" % text
            if text in line:
                return line

a = Client(); a.expect("welcome")
b = Client(); b.expect("welcome")
a.send("/nick alice"); b.send("/nick bob")
b.expect("is now alice")
a.send("hello room")
assert b.expect("hello room") == "alice: hello room"
b.send("/join other"); a.expect("bob: * left for other")
a.send("not for bob")
a.send("/join other"); b.expect("alice: * joined")
a.send("for bob"); assert b.expect("for bob") == "alice: for bob"
b.send("/who"); b.expect("* 2 in other")

# c joins and never reads, with a small receive window; alice floods the room
c = Client(rcvbuf=4096, quiet=True); c.expect("welcome")
c.send("/join other")
a.expect("* joined")
line = "x" * 1000
for i in range(6000):
    a.send("%d %s" % (i, line))
b.expect("5999 x")             # bob, who reads, gets all of it while c does not read
# the room keeps working after the flood
a.send("still here")
assert b.expect("still here") == "alice: still here"
b.expect("left (dropped")       # c's leaving is announced to the room
print("python: ok")
PY
)
set -e
if ! grep -q "python: ok" <<<"$py_out"; then
   # (what the server said: which client it dropped, and why)
   status=running out="$py_out" err="server: $(cat "$TMP/out")"
   fail "chat: rooms, nicks and a dropped slow reader"
fi

signal_bg TERM
wait_bg
expect_out "dropped" "the server reports the dropped client"
finish
