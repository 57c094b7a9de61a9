-- smarm.net: TCP on 127.0.0.1 and ::1, the recv patterns and their partial results,
-- timeouts, the error values (refused, closed, reset), half-close, options, argument
-- errors, sockets moving between actors (and closed when undelivered or when their actor
-- ends), select over sockets, UDP, and name resolution. Every wait is bounded.
local smarm = require "smarm"
local net = require "smarm.net"
local inbox = require "support.inbox"

local T = 5 -- the bound of every wait that should succeed

-- a connected pair on host: client, server-side socket, server
local function pair(host)
   local srv = assert(net.listen(host or "127.0.0.1", 0))
   local c = assert(net.connect(host or "127.0.0.1", srv:port(), T))
   local s = assert(srv:accept(T))
   return c, s, srv
end

local function err_of(f, ...)
   local ok, err = pcall(f, ...)
   assert(not ok, "expected an error")
   return tostring(err)
end

local function has(needle, s)
   assert(s:find(needle, 1, true), "expected «" .. needle .. "» in «" .. s .. "»")
end

local v6 = net.listen("::1", 0)
if v6 then
   v6:close()
else
   print("net_spec: no IPv6 on this machine (listen on ::1 failed): the ::1 cases are skipped")
end

describe("smarm.net TCP", function()
   for _, host in ipairs({ "127.0.0.1", "::1" }) do
      it("listens, accepts, connects and echoes on " .. host, function()
         if host == "::1" and not v6 then return end
         local srv = assert(net.listen(host, 0))
         local port = srv:port()
         assert.is_true(port > 0)
         smarm.spawn(function(h, p, parent)
            local n = require "smarm.net"
            local s = require "smarm"
            local c = assert(n.connect(h, p, 5))
            assert(c:send("ping\n"))
            s.send(parent, { echoed = c:recv("*l", 5), peer = { c:peer() } })
         end, host, port, smarm.self())
         local s = assert(srv:accept(T))
         local phost, pport = s:peer()
         assert.are.equal(host, phost)
         assert.is_true(pport > 0)
         assert.are.equal("ping", s:recv("*l", T))
         assert.is_true(s:send("pong\n"))
         local m = inbox.expect("echoed")
         assert.are.equal("pong", m.echoed)
         assert.are.same({ host, port }, m.peer)
         assert.is_true(s:fd() >= 0)
         s:close()
         srv:close()
      end)
   end

   it("reads n bytes, lines (\\n and \\r\\n), what is there, and all", function()
      local c, s, srv = pair()
      assert(c:send("abc\r\nline two\n\nrest"))
      assert.are.equal("ab", s:recv(2, T))
      assert.are.equal("c", s:recv("*l", T))
      assert.are.equal("line two", s:recv("*l", T))
      assert.are.equal("", s:recv("*l", T))
      assert.are.equal("", s:recv(0, T))
      assert.are.equal("rest", s:recv("*r", T))
      assert(c:send("tail and more"))
      c:close()
      assert.are.equal("tail and more", s:recv("*a", T))
      assert.are.same({ nil, "closed", "" }, { s:recv("*r", T) })
      s:close()
      srv:close()
   end)

   it("reads what came after a short read, by a poll and by a wait", function()
      -- a short read makes the next recv skip its syscall and arm the fd instead: the arm
      -- must report data already there, and a poll (timeout 0) must read for real
      local c, s, srv = pair()
      for i = 1, 50 do
         assert(c:send("a" .. i .. "\n"))
         assert.are.equal("a" .. i, s:recv("*l", T))
         assert(c:send("b" .. i .. "\n"))
         assert.are.equal("b" .. i, s:recv("*l", 0))
         assert(c:send("c" .. i .. "\n"))
         assert.are.equal("c" .. i, s:recv("*l", T))
         assert(c:send("d" .. i .. "\n"))
         assert.are.equal("d" .. i, s:recv("*l"))
      end
      c:close()
      s:close()
      srv:close()
   end)

   it("reads what is there alike with and without bytes read ahead", function()
      -- "*r" with nothing read ahead reads straight into the string it returns; after a
      -- line read that left bytes behind, it takes those first: both give every byte once,
      -- in order, as a poll and as a wait, up to the end of the stream
      local c, s, srv = pair()
      local big = {}
      for i = 1, 3000 do big[i] = ("%07d\n"):format(i) end
      big = table.concat(big) -- 24,000 bytes: more than one read
      for round = 1, 20 do
         assert(c:send("line " .. round .. "\nafter"))
         assert.are.equal("line " .. round, s:recv("*l", T))
         local got = s:recv("*r", T)
         if got ~= "after" then got = got .. assert(s:recv(5 - #got, T)) end
         assert.are.equal("after", got)
         assert(c:send("x" .. round))
         assert.are.equal("x" .. round, s:recv("*r", T))
         assert.are.same({ nil, "timeout", "" }, { s:recv("*r", 0) })
         assert(c:send(big))
         local parts, n = {}, 0
         while n < #big do
            local part = assert(s:recv("*r", round % 2 == 0 and T or 0.5))
            parts[#parts + 1] = part
            n = n + #part
         end
         assert.are.equal(big, table.concat(parts))
      end
      assert(c:send("last"))
      assert.are.equal("last", s:recv("*r", T))
      c:close()
      assert.are.same({ nil, "closed", "" }, { s:recv("*r", T) })
      assert.are.same({ nil, "closed", "" }, { s:recv("*r", 0) })
      s:close()
      srv:close()
   end)

   it("returns the partial data on a timeout and on the end of the stream", function()
      local c, s, srv = pair()
      assert(c:send("half a li"))
      local t0 = smarm.now()
      assert.are.same({ nil, "timeout", "half a li" }, { s:recv("*l", 0.05) })
      local dt = smarm.now() - t0
      assert.is_true(dt >= 0.04 and dt < 2, "recv timeout took " .. dt)
      assert(c:send("12345"))
      assert.are.same({ nil, "timeout", "12345" }, { s:recv(10, 0.05) })
      assert(c:send("xyz"))
      assert.are.same({ nil, "timeout", "xyz" }, { s:recv("*a", 0.05) })
      assert.are.same({ nil, "timeout", "" }, { s:recv("*r", 0) })
      assert(c:send("no newline"))
      c:close()
      assert.are.same({ nil, "closed", "no newline" }, { s:recv("*l", T) })
      assert.are.same({ nil, "closed", "" }, { s:recv(4, T) })
      s:close()
      srv:close()
   end)

   it("sends 4 MB to a slow reader, all of it in order", function()
      local c, s, srv = pair()
      local chunk = {}
      for i = 0, 255 do chunk[#chunk + 1] = string.char(i) end
      local payload = string.rep(table.concat(chunk), 4 * 4096) -- 4 MiB
      smarm.spawn(function(sock, parent, len)
         local sm = require "smarm"
         local parts, got = {}, 0
         while got < len do
            sm.sleep(0.002)
            local d = assert(sock:recv(math.min(256 * 1024, len - got), 10))
            parts[#parts + 1] = d
            got = got + #d
         end
         sm.send(parent, { read = table.concat(parts) })
      end, s, smarm.self(), #payload)
      assert.is_true(c:send(payload, 30))
      local m = inbox.expect("read", 30)
      assert.is_true(m.read == payload, "the payload arrived changed")
      c:close()
      srv:close()
   end)

   it("times out a send that finds no room", function()
      local c, s, srv = pair()
      local big = string.rep("x", 64 * 1024 * 1024)
      local ok, err, sent = c:send(big, 0.1)
      assert.is_nil(ok)
      assert.are.equal("timeout", err)
      assert.is_true(sent > 0 and sent < #big)
      c:close()
      s:close()
      srv:close()
   end)

   it("sends then reads in one sendrecv turn, a big send waiting for room first", function()
      local c, s, srv = pair()
      -- the peer answers each whole request with its length
      smarm.spawn(function(sock, lens)
         for _, len in ipairs(lens) do
            local got = assert(sock:recv(len, 10))
            assert(sock:send(#got .. "\n"))
         end
      end, s, { 5, 4 * 1024 * 1024 })
      assert.are.equal("5\n", c:sendrecv("hello", T))
      -- 4 MiB cannot go out before the peer reads: the turn waits for room, then for bytes
      local big = string.rep("y", 4 * 1024 * 1024)
      assert.are.equal(#big .. "\n", c:sendrecv(big, 30))
      c:close()
      srv:close()
   end)

   it("gives sendrecv's errors as values: closed, timeout, and raises on bad arguments",
      function()
         local c, s, srv = pair()
         -- the peer reads the request and answers nothing: the read part times out
         assert.are.same({ nil, "timeout" }, { c:sendrecv("ping", 0.05) })
         assert.are.equal("ping", s:recv(4, T))
         -- bytes there already: a poll (timeout 0) sends and reads them
         assert(s:send("pong"))
         smarm.sleep(0.02)
         assert.are.equal("pong", c:sendrecv("x", 0))
         -- the peer closes: the read part ends with closed
         s:close()
         local ok, err = c:sendrecv("y", T)
         assert.is_nil(ok)
         assert.is_truthy(err == "closed" or err == "reset", err)
         c:close()
         assert.are.same({ nil, "closed" }, { c:sendrecv("z", T) })
         has("sock:sendrecv: data must be a string", err_of(c.sendrecv, c, 1))
         has("sock:sendrecv: a socket expected", err_of(c.sendrecv, {}, "x"))
         has("sock:sendrecv: timeout must", err_of(c.sendrecv, c, "x", "soon"))
         srv:close()
      end)

   it("times out accept, and polls with 0", function()
      local srv = assert(net.listen("127.0.0.1", 0))
      local t0 = smarm.now()
      assert.are.same({ nil, "timeout" }, { srv:accept(0.05) })
      assert.is_true(smarm.now() - t0 >= 0.04)
      assert.are.same({ nil, "timeout" }, { srv:accept(0) })
      srv:close()
   end)

   it("times out a connect that gets no answer (a server whose backlog is full)", function()
      local srv = assert(net.listen("127.0.0.1", 0, { backlog = 0 }))
      local held, c, err = {}, nil, nil
      for _ = 1, 20 do
         local t0 = smarm.now()
         c, err = net.connect("127.0.0.1", srv:port(), 0.1)
         if not c then
            local dt = smarm.now() - t0
            assert.is_true(dt >= 0.09 and dt < 2, "connect timeout took " .. dt)
            break
         end
         held[#held + 1] = c
      end
      assert.are.same({ nil, "timeout" }, { c, err })
      for _, x in ipairs(held) do x:close() end
      srv:close()
   end)

   it("says refused for a port just closed", function()
      local srv = assert(net.listen("127.0.0.1", 0))
      local port = srv:port()
      srv:close()
      assert.are.same({ nil, "refused" }, { net.connect("127.0.0.1", port, T) })
      if v6 then
         srv = assert(net.listen("::1", 0))
         port = srv:port()
         srv:close()
         assert.are.same({ nil, "refused" }, { net.connect("::1", port, T) })
      end
   end)

   it("says closed for a closed socket and server, and closing twice is fine", function()
      local c, s, srv = pair()
      c:close()
      c:close()
      assert.are.same({ nil, "closed", "" }, { c:recv("*l", T) })
      assert.are.same({ nil, "closed", 0 }, { c:send("x") })
      assert.are.same({ nil, "closed" }, { c:peer() })
      assert.are.same({ nil, "closed" }, { c:setoption("nodelay", true) })
      assert.are.equal(-1, c:fd())
      assert.are.equal("socket (closed)", tostring(c))
      srv:close()
      assert.are.same({ nil, "closed" }, { srv:accept(T) })
      assert.are.same({ nil, "closed" }, { srv:port() })
      s:close()
   end)

   it("wakes a blocked accept with closed when the listening socket is shut down", function()
      -- only the owner holds the object; another actor reaches the fd through the FFI
      local srv = assert(net.listen("127.0.0.1", 0))
      smarm.spawn(function(fd)
         local ffi = require "ffi"
         ffi.cdef "int shutdown(int, int);"
         require("smarm").sleep(0.05)
         assert(ffi.C.shutdown(fd, 2) == 0)
      end, srv:fd())
      assert.are.same({ nil, "closed" }, { srv:accept(T) })
      srv:close()
   end)

   it("says reset when the peer resets, and closed when writing to a closed peer", function()
      local c, s, srv = pair()
      assert(s:setoption("linger", 0))
      s:close() -- with linger 0: a reset
      assert.are.same({ nil, "reset", "" }, { c:recv("*r", T) })
      c:close()
      c = assert(net.connect("127.0.0.1", srv:port(), T))
      s = assert(srv:accept(T))
      s:close()
      -- the first write may still go out; the peer answers it with a reset
      local ok, err
      for _ = 1, 50 do
         ok, err = c:send(string.rep("y", 65536), T)
         if not ok then break end
         smarm.sleep(0.01)
      end
      assert.is_nil(ok)
      assert.is_true(err == "reset" or err == "closed", "send error " .. tostring(err))
      c:close()
      srv:close()
   end)

   it("reads the end of the stream that came with the last bytes, without waiting", function()
      -- the reader waits first, so the edge that wakes it (data and the peer's close at
      -- once) is taken before its read; that read is short, and the next recv used to skip
      -- its system call and wait for an edge that never came, until its timeout
      local c, s, srv = pair()
      for i = 1, 3 do
         local writer = smarm.spawn(function(sock, text)
            local smarm_ = require "smarm"
            smarm_.sleep(0.02)
            assert(sock:send(text))
            sock:close()
         end, s, "answer " .. i)
         assert(writer)
         assert.are.equal("answer " .. i, c:recv("*r", T))
         -- the old wait ended at the timeout (or at some later event), with the same
         -- result: seconds against a sanity bound of 2 s (the read takes microseconds)
         local t0 = smarm.now()
         assert.are.same({ nil, "closed", "" }, { c:recv("*r", 20) })
         assert.is_true(smarm.now() - t0 < 2, "the end of the stream waited for an edge")
         c:close()
         if i < 3 then
            c = assert(net.connect("127.0.0.1", srv:port(), T))
            s = assert(srv:accept(T))
         end
      end
      srv:close()
   end)

   it("half-closes: the peer reads the end and can still answer", function()
      local c, s, srv = pair()
      assert(c:send("request"))
      assert.is_true(c:shutdown("send"))
      assert.are.equal("request", s:recv("*a", T))
      assert(s:send("answer"))
      s:close()
      assert.are.equal("answer", c:recv("*a", T))
      assert.are.same({ nil, "closed", "" }, { c:recv("*l", T) })
      c:close()
      srv:close()
   end)

   it("sets each option, and refuses an unknown one", function()
      local c, s, srv = pair()
      assert.is_true(c:setoption("nodelay", true))
      assert.is_true(c:setoption("keepalive", true))
      assert.is_true(c:setoption("reuseaddr", true))
      assert.is_true(c:setoption("linger", 1))
      assert.is_true(c:setoption("linger", false))
      assert.is_true(srv:setoption("reuseaddr", true))
      has("unknown option bogus", err_of(c.setoption, c, "bogus", true))
      has("nodelay takes a boolean", err_of(c.setoption, c, "nodelay", 1))
      has("linger takes seconds", err_of(c.setoption, c, "linger", -1))
      c:close()
      s:close()
      srv:close()
   end)

   it("raises on bad arguments, naming the call", function()
      local c, s, srv = pair()
      has("net.listen: host must be", err_of(net.listen, 1, 0))
      has("net.listen: port must be an integer", err_of(net.listen, "127.0.0.1", 70000))
      has("net.connect: port must be a number", err_of(net.connect, "127.0.0.1", "x"))
      has("net.connect: timeout must be", err_of(net.connect, "127.0.0.1", 1, -1))
      has("net.listen: opts must be a table", err_of(net.listen, "127.0.0.1", 0, 5))
      has("sock:recv: bad pattern", err_of(c.recv, c, "*x"))
      has("sock:recv: a byte count", err_of(c.recv, c, -1))
      has("sock:recv: timeout must not be negative", err_of(c.recv, c, 1, -1))
      has("sock:send: data must be a string", err_of(c.send, c, {}))
      has("server:accept: a server expected, got socket", err_of(srv.accept, c))
      has("sock:recv: a socket expected, got string", err_of(c.recv, "x"))
      -- (the checks read the stack directly: a pattern is the exact two bytes, no number
      -- is taken for a string or a string for a number)
      has("sock:recv: bad pattern", err_of(c.recv, c, "*rx"))
      has("sock:recv: bad pattern", err_of(c.recv, c, "5"))
      has("sock:recv: timeout must be a number of seconds, got string", err_of(c.recv, c, 1, "1"))
      has("sock:send: data must be a string, got number", err_of(c.send, c, 5))
      has("sock:send: a socket expected, got table", err_of(c.send, {}, "x"))
      has("sock:recv: a socket expected, got userdata", err_of(c.recv, io.stdout, 1))
      has("u:sendto: 300.1.1.1 is not an IPv4 or IPv6 address",
         err_of(function()
            local u = assert(net.udp())
            return u:sendto("x", "300.1.1.1", 1)
         end))
      has("net.resolve: host must be", err_of(net.resolve, nil))
      c:close()
      s:close()
      srv:close()
   end)

   it("gives a name's addresses, and connects by name", function()
      local addrs = assert(net.resolve("localhost"))
      local seen = {}
      for _, a in ipairs(addrs) do seen[a] = true end
      assert.is_true(seen["127.0.0.1"] or seen["::1"], "localhost resolved to " .. #addrs)
      assert.are.same({ "::1" }, net.resolve("::1"))
      local r, err = net.resolve("no-such-host.invalid")
      assert.is_nil(r)
      assert.are.equal("string", type(err))
      local srv = assert(net.listen("127.0.0.1", 0))
      local c = assert(net.connect("localhost", srv:port(), T))
      local s = assert(srv:accept(T))
      assert(c:send("by name\n"))
      assert.are.equal("by name", s:recv("*l", T))
      c:close()
      s:close()
      srv:close()
   end)
end)

describe("smarm.net sockets between actors", function()
   it("moves a socket in a message, with the bytes read ahead", function()
      local c, s, srv = pair()
      assert(c:send("first\nsecond\n"))
      assert.are.equal("first", s:recv("*l", T))
      local pid = smarm.spawn(function()
         local sm = require "smarm"
         local m = sm.recv(10)
         local line = m.sock:recv("*l", 5)
         assert(m.sock:send("from the new owner\n"))
         sm.send(m.parent, { line = line })
      end)
      assert.is_true(smarm.send(pid, { sock = s, parent = smarm.self() }))
      has("this socket was sent to another actor", err_of(s.recv, s, "*l"))
      has("this socket was sent to another actor", err_of(s.close, s))
      assert.are.equal("second", inbox.expect("line").line)
      assert.are.equal("from the new owner", c:recv("*l", T))
      has("cannot send a socket that was closed or sent",
         err_of(smarm.send, smarm.self(), s))
      -- refused sends take nothing: the socket stays usable
      has("cannot send the same socket twice", err_of(smarm.send, smarm.self(), { c, c }))
      has("cannot send a function", err_of(smarm.send, smarm.self(), { c, print }))
      assert.is_true(c:setoption("nodelay", true))
      c:close()
      has("cannot send a socket that was closed", err_of(smarm.send, smarm.self(), c))
      srv:close()
   end)

   it("moves a server as a spawn argument", function()
      local srv = assert(net.listen("127.0.0.1", 0))
      local port = srv:port()
      smarm.spawn(function(server)
         local sock = assert(server:accept(5))
         assert(sock:send("served\n"))
         sock:close()
      end, srv)
      has("this server was sent to another actor", err_of(srv.accept, srv))
      local c = assert(net.connect("127.0.0.1", port, T))
      assert.are.equal("served", c:recv("*l", T))
      c:close()
   end)

   it("closes a socket whose message is never delivered", function()
      local c, s, srv = pair()
      local pid = smarm.spawn(function() end)
      assert.is_true(inbox.wait_dead(pid))
      assert.are.same({ nil, "dead" }, { smarm.send(pid, { s }) })
      -- the fd went with the dropped message: the peer reads the end of the stream
      assert.are.same({ nil, "closed", "" }, { c:recv("*r", T) })
      c:close()
      srv:close()
   end)

   it("closes an actor's sockets when it crashes or is killed", function()
      local parent = smarm.self()
      local crasher = smarm.spawn(function(p)
         local sm = require "smarm"
         local server = assert(require("smarm.net").listen("127.0.0.1", 0))
         sm.send(p, { port = server:port() })
         sm.recv(10)
         error("crashing on purpose (expected)")
      end, parent)
      local port = inbox.expect("port").port
      smarm.send(crasher, "go")
      assert.is_true(inbox.wait_dead(crasher))
      assert.are.same({ nil, "refused" }, { net.connect("127.0.0.1", port, T) })

      local srv = assert(net.listen("127.0.0.1", 0))
      local holder = smarm.spawn(function(p, pt)
         local sm = require "smarm"
         local c = assert(require("smarm.net").connect("127.0.0.1", pt, 5))
         sm.send(p, { connected = true })
         c:recv("*a") -- parks on its fd until killed
      end, parent, srv:port())
      local s = assert(srv:accept(T))
      inbox.expect("connected")
      smarm.kill(holder)
      assert.is_true(inbox.wait_dead(holder))
      assert.are.same({ nil, "closed", "" }, { s:recv("*r", T) })
      s:close()
      srv:close()
   end)

   it("costs only the killed handlers when handlers die mid-transfer", function()
      local srv = assert(net.listen("127.0.0.1", 0, { backlog = 128 }))
      local N = 40
      local handlers, clients = {}, {}
      for i = 1, N do
         clients[i] = assert(net.connect("127.0.0.1", srv:port(), T))
         handlers[i] = smarm.spawn(function(sock)
            while true do
               local l = sock:recv("*l")
               if not l then return end
               assert(sock:send(l .. "\n"))
            end
         end, assert(srv:accept(T)))
      end
      for round = 1, 20 do
         for i = 1, N do
            local c = clients[i]
            if c then
               local ok, err = c:send(round .. "\n", T)
               local line
               if ok then line, err = c:recv("*l", T) end
               if i % 2 == 0 and round > 10 then
                  -- killed: the peer sees the end (or a reset), never a hang
                  assert.is_true(err == "closed" or err == "reset", "client " .. i .. ": " ..
                     tostring(err))
                  c:close()
                  clients[i] = nil
               else
                  assert.are.equal(tostring(round), line)
               end
            end
         end
         if round == 10 then
            for i = 2, N, 2 do smarm.kill(handlers[i]) end
            for i = 2, N, 2 do assert.is_true(inbox.wait_dead(handlers[i])) end
         end
      end
      for i = 1, N, 2 do clients[i]:close() end
      srv:close()
   end)

   it("closes an actor's sockets when it ends past max_heap", function()
      local srv = assert(net.listen("127.0.0.1", 0))
      local pid, mon = smarm.spawn_opt({ max_heap = 4 * 1024 * 1024, monitor = true },
         function(p, pt)
            local sm = require "smarm"
            local c = assert(require("smarm.net").connect("127.0.0.1", pt, 5))
            sm.send(p, { connected = true })
            sm.recv(10)
            local hog = {}
            for i = 1, 1e8 do hog[i] = { i } end
            c:send(tostring(#hog)) -- never reached
         end, smarm.self(), srv:port())
      local s = assert(srv:accept(T))
      inbox.expect("connected")
      smarm.send(pid, "hog")
      local down = assert(mon:recv(T), "no down notice")
      assert.are.equal("memory", down.reason)
      assert.are.same({ nil, "closed", "" }, { s:recv("*r", T) })
      s:close()
      srv:close()
   end)

   it("closes a socket in a cancelled send_after", function()
      local c, s, srv = pair()
      local timer = smarm.send_after(60, smarm.self(), { sock = s })
      assert.is_true(smarm.cancel_timer(timer))
      assert.are.same({ nil, "closed", "" }, { c:recv("*r", T) })
      c:close()
      srv:close()
   end)
end)

describe("smarm.net and select", function()
   it("selects over sockets, channels and the inbox", function()
      local c, s, srv = pair()
      local tx, rx = smarm.channel()
      local arms = { s:readable(), rx, smarm.inbox }
      assert.are.same({ nil, "timeout" }, { smarm.select(arms, 0.02) })
      tx:send("chan")
      assert.are.same({ 2, "chan" }, { smarm.select(arms, T) })
      smarm.send(smarm.self(), "mail")
      assert.are.same({ 3, "mail" }, { smarm.select(arms, T) })
      -- a wake from the network poller while parked
      local carm = c:readable()
      smarm.spawn(function(sock)
         require("smarm").sleep(0.02)
         sock:send("data\n")
      end, c)
      local i, v = smarm.select(arms, T)
      assert.are.equal(1, i)
      assert.are.equal(s, v)
      assert.are.equal("data", s:recv("*l", T))
      -- read-ahead bytes make the arm ready with nothing left in the kernel
      local c2 = assert(net.connect("127.0.0.1", srv:port(), T))
      local s2 = assert(srv:accept(T))
      assert(c2:send("a\nb\n"))
      assert.are.equal("a", s2:recv("*l", T))
      assert.are.same({ 1, s2 }, { smarm.select({ s2:readable() }, 0) })
      -- acceptable
      local aarm = srv:acceptable()
      assert.are.same({ nil, "timeout" }, { smarm.select({ aarm }, 0.02) })
      local c3 = assert(net.connect("127.0.0.1", srv:port(), T))
      assert.are.same({ 1, srv }, { smarm.select({ aarm }, T) })
      local s3 = assert(srv:accept(0))
      for _, x in ipairs({ c2, s2, c3, s3, s, srv }) do x:close() end
      has("arm 1 is of a socket sent to another actor", err_of(smarm.select, { carm }))
      has("readable: this socket was sent to another actor", err_of(c.readable, c))
   end)
end)

describe("smarm.net UDP", function()
   for _, host in ipairs({ "127.0.0.1", "::1" }) do
      it("sends and receives datagrams on " .. host, function()
         if host == "::1" and not v6 then return end
         local a = assert(net.udp(host, 0))
         local b = assert(net.udp(host, 0))
         assert.is_true(a:port() > 0)
         assert.is_true(b:sendto("hello", host, a:port()))
         local data, from, port = a:recvfrom(T)
         assert.are.equal("hello", data)
         assert.are.equal(host, from)
         assert.are.equal(b:port(), port)
         assert.are.same({ nil, "timeout" }, { a:recvfrom(0.02) })
         -- an unbound socket reaches either family
         local u = assert(net.udp())
         assert.is_true(u:sendto("from unbound", host, a:port()))
         assert.are.equal("from unbound", (a:recvfrom(T)))
         -- select
         assert(b:sendto("sel", host, a:port()))
         assert.are.same({ 1, a }, { smarm.select({ a:readable() }, T) })
         assert.are.equal("sel", (a:recvfrom(0)))
         for _, x in ipairs({ a, b, u }) do x:close() end
         assert.are.same({ nil, "closed" }, { a:recvfrom(0) })
      end)
   end
end)
