"""Drives smarm-lua's shell through a pseudo-terminal, as a user at a keyboard would.

Usage: python3 tests/cli/shell_pty.py SMARM_LUA TMPDIR
Every wait is bounded; a failed expectation prints what the terminal showed."""
import os
import pty
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import time

SMARM = os.path.abspath(sys.argv[1])
TMP = sys.argv[2]
WAIT = 20  # seconds for one expectation: generous for a loaded CI box
failures = []


class Term:
    def __init__(self, *args, cwd=None):
        env = dict(os.environ, HOME=TMP, TERM="xterm", LANG="C.UTF-8")
        pid, fd = pty.fork()
        if pid == 0:
            if cwd:
                os.chdir(cwd)
            os.execve(SMARM, [SMARM] + list(args), env)
        self.pid, self.fd, self.seen, self.pos = pid, fd, b"", 0
        self.status = None

    def read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            return None
        if not data:
            return None
        self.seen += data
        return True

    def expect(self, pattern, what):
        """Waits until pattern (a regex on the text after the last match) shows."""
        rx = re.compile(pattern.encode())
        deadline = time.time() + WAIT
        while True:
            m = rx.search(self.seen, self.pos)
            if m:
                self.pos = m.end()
                return True
            left = deadline - time.time()
            if left <= 0 or self.read(min(left, 0.5)) is None and not rx.search(self.seen, self.pos):
                failures.append("%s: no /%s/ in:\n%s" % (what, pattern,
                                self.seen[self.pos:].decode(errors="replace")[-2000:]))
                return False

    def send(self, text):
        os.write(self.fd, text.encode())

    def line(self, text):
        self.send(text + "\r")

    def exited(self):
        if self.status is None:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
        return self.status is not None

    def wait(self, what):
        deadline = time.time() + WAIT
        while time.time() < deadline:
            self.read(0.1)
            if self.exited():
                return self.status
        failures.append("%s: still running" % what)
        self.kill()
        return None

    def kill(self):
        if not self.exited():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.status = -9


def check(cond, what):
    if not cond:
        failures.append(what)


def local_shell():
    t = Term("-S", "2")
    t.expect(r"> ", "the shell prompts")
    t.line("1+1")
    t.expect(r"\n2\r?\n", "an expression prints its value")
    t.line("1, 'two', nil")
    t.expect("1\ttwo\tnil", "several values are tab-separated")
    t.line("#'h\u00e9llo', 'h\u00e9llo'")
    t.expect("6\th\u00e9llo", "UTF-8 typed at the prompt reaches Lua as UTF-8 bytes")
    t.line("error('boom')")
    t.expect(r"shell:1: boom", "an error prints")
    t.expect(r"stack traceback", "an error prints its traceback")
    t.line("3*3")
    t.expect(r"\n9\r?\n", "the shell goes on after an error")
    t.line("for i = 1, 3 do")
    t.expect(r">> ", "an incomplete statement asks for more")
    t.line("  print(i * 10)")
    t.line("end")
    t.expect(r"10\r?\n20\r?\n30", "the multi-line chunk runs once complete")
    t.line("local x_completes_me = 'local'")
    t.line("local x = 41")
    t.line("x + 1")
    t.expect(r"\n42\r?\n", "a local persists to the next line")
    t.send("x_comp\t")
    t.expect(r"letes_me", "Tab completes a local")
    t.send(" .. ''\r")
    t.expect(r"\nlocal\r?\n", "the completed name evaluates")
    t.send("smarm.spawn_\t")
    t.expect(r"smarm.spawn_link  smarm.spawn_monitor  smarm.spawn_opt",
             "Tab lists the names a prefix may become")
    t.send("\x15")  # ^U: drop the line
    t.line("smarm.spawn_opt({name = 'pty_worker'}, function() require('smarm').recv() end)")
    t.line("i()")
    t.expect(r"pty_worker", "i() shows a spawned named actor")
    t.line("smarm.send(smarm.self(), {hello = 'there'})")
    t.line("flush()")
    t.expect(r'Shell got \{hello = "there"\}', "flush() prints the shell's inbox")
    t.line("while true do end")
    time.sleep(0.5)
    t.send("\x03")
    t.expect(r"interrupted", "Ctrl-C interrupts a running evaluation")
    t.expect(r"> ", "a prompt comes back after Ctrl-C")
    t.line("2+2")
    t.expect(r"\n4\r?\n", "the fresh evaluator evaluates")
    t.line("whereis_worker = smarm.whereis('pty_worker') ~= nil")
    t.line("whereis_worker")
    t.expect(r"\ntrue\r?\n", "the application's actors outlive an interrupt")
    t.send("\x04")
    check(t.wait("Ctrl-D leaves") == 0, "Ctrl-D leaves with status 0 (got %r)" % t.status)
    hist = os.path.join(TMP, ".smarm_lua_history")
    check(os.path.exists(hist) and "2+2" in open(hist, errors="replace").read(),
          "the history file under $HOME holds the lines")


def ctrl_c_twice():
    t = Term()
    t.expect(r"> ", "the shell prompts")
    t.send("\x03")
    t.expect(r"again", "one Ctrl-C at an empty prompt says how to leave")
    t.send("\x03")
    check(t.wait("two Ctrl-C leave") == 0, "two Ctrl-C leave with status 0 (got %r)" % t.status)


def after_app():
    app = os.path.join(TMP, "app.lua")
    with open(app, "w") as f:
        f.write("APP_VALUE = 'from the app'\n")
    t = Term("-i", app)
    t.expect(r"> ", "-i app.lua prompts after the app")
    t.line("APP_VALUE")
    t.expect(r"from the app", "-i app.lua: the app ran first")
    t.send("\x04")
    check(t.wait("-i leaves") == 0, "-i app.lua leaves with status 0")


def remote_shells():
    sock = os.path.join(TMP, "chat.sock")
    app = subprocess.Popen([SMARM, "--shell-socket", sock, "examples/chat.lua", "0"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        deadline = time.time() + WAIT
        while not os.path.exists(sock) and time.time() < deadline:
            time.sleep(0.05)
        if not os.path.exists(sock):
            failures.append("--shell-socket: no socket at %s" % sock)
            return
        mode = stat.S_IMODE(os.lstat(sock).st_mode)
        check(mode == 0o600, "the shell socket has mode 0600 (got %o)" % mode)
        a = Term("--remsh", sock)
        b = Term("--remsh", sock)
        a.expect(r"> ", "remsh prompts")
        b.expect(r"> ", "a second remsh at once prompts")
        a.line("shared = 'set by a'")
        b.line("#smarm.snapshot() > 2")
        b.expect(r"\ntrue\r?\n", "remsh evaluates inside the app (its actors)")
        a.line("i()")
        a.expect(r"actors", "i() in a remote shell")
        a.send("\x04")
        check(a.wait("remsh detaches") == 0, "remsh detaches with status 0")
        b.line("1+2")
        b.expect(r"\n3\r?\n", "the other shell goes on after one detaches")
        b.line("while true do end")
        time.sleep(0.5)
        b.send("\x03")
        b.expect(r"interrupted", "Ctrl-C interrupts a remote evaluation")
        b.line("5*5")
        b.expect(r"\n25\r?\n", "the remote shell goes on after Ctrl-C")
        b.send("\x04")
        check(b.wait("the second remsh detaches") == 0, "the second remsh detaches")
        time.sleep(0.2)
        check(app.poll() is None, "detaching leaves the application running")
        reload_remote(sock)
    finally:
        app.terminate()
        try:
            app.wait(WAIT)
        except subprocess.TimeoutExpired:
            app.kill()


def reload_remote(sock):
    c = Term("--remsh", sock)
    c.expect(r"> ", "remsh prompts")
    c.line("type(smarm.reload)")
    c.expect(r"\n(function|nil)\r?\n", "remsh tells whether smarm.reload exists")
    has = b"function" in c.seen[-200:]
    c.send("\x04")
    c.wait("remsh detaches")
    if not has:
        print("shell_pty: reload from a remote shell: skipped (smarm.reload is not in this build)")
        return
    d = os.path.join(TMP, "reloadapp")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "greet.lua"), "w") as f:
        f.write("local M = {}\nfunction M.text() return 'version one' end\nreturn M\n")
    with open(os.path.join(d, "app.lua"), "w") as f:
        f.write("local smarm = require 'smarm'\n"
                "smarm.register('greeter')\n"
                "while true do\n"
                "   local m = smarm.recv()\n"
                "   smarm.send(m.from, require('greet').text())\n"
                "end\n")
    rsock = os.path.join(TMP, "reload.sock")
    app = subprocess.Popen([SMARM, "--shell-socket", rsock, os.path.join(d, "app.lua")],
                           stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + WAIT
        while not os.path.exists(rsock) and time.time() < deadline:
            time.sleep(0.05)
        r = Term("--remsh", rsock)
        r.expect(r"> ", "remsh prompts")
        r.line("smarm.send('greeter', {from = smarm.self()})")
        r.line("smarm.recv(5)")
        r.expect(r"version one", "the app answers with its first version")
        with open(os.path.join(d, "greet.lua"), "w") as f:
            f.write("local M = {}\nfunction M.text() return 'version two' end\nreturn M\n")
        r.line("reload('greet')")
        r.expect(r"\n1\r?\n", "reload answers the new version")
        r.line("smarm.send('greeter', {from = smarm.self()})")
        r.line("smarm.recv(5)")
        r.expect(r"version two", "reload from the remote shell changes the app's behaviour")
        r.send("\x04")
        r.wait("remsh detaches")
    finally:
        app.terminate()
        app.wait(WAIT)


def refused_paths():
    target = os.path.join(TMP, "someone_elses.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(target)
    s.close()
    if os.geteuid() == 0:
        os.chown(target, 65534, 65534)
        r = subprocess.run([SMARM, "--shell-socket", target, "-e", "print('ran')"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT)
        check(r.returncode == 1 and b"owned by uid 65534" in r.stderr
              and b"ran" not in r.stdout,
              "a socket path of another user is refused: %r" % (r,))
        check(os.path.exists(target) and os.lstat(target).st_uid == 65534,
              "the other user's path is left alone")
    else:
        print("shell_pty: wrong-owner path: skipped (needs root to make another user's file)")
    link = os.path.join(TMP, "link.sock")
    os.symlink(os.path.join(TMP, "elsewhere.sock"), link)
    r = subprocess.run([SMARM, "--shell-socket", link, "-e", "print('ran')"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT)
    check(r.returncode == 1 and b"symbolic link" in r.stderr
          and not os.path.exists(os.path.join(TMP, "elsewhere.sock")),
          "a symlink is not followed: %r" % (r,))


for test in (local_shell, ctrl_c_twice, after_app, remote_shells, refused_paths):
    before = len(failures)
    try:
        test()
    except Exception as e:  # a broken test is a failure, not a crash of the driver
        failures.append("%s: %r" % (test.__name__, e))
    status = "ok" if len(failures) == before else "FAILED"
    print("shell_pty: %s: %s" % (test.__name__, status))

for f in failures:
    print("FAIL: " + f)
sys.exit(1 if failures else 0)
