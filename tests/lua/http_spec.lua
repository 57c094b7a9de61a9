-- smarm.http end to end over 127.0.0.1: hello, keep-alive, pipelining order, chunked
-- bodies, 400/431/413, a slowloris cut by request_timeout, a client that stops reading cut by
-- idle_timeout, 500 with the server still serving, 503 past max_connections, the client,
-- server:close and a supervisor child.
-- Every wait is bounded.
local smarm = require "smarm"
local net = require "smarm.net"
local http = require "smarm.http"
local parse = require "smarm.http_parse"
local supervisor = require "smarm.supervisor"

local HANDLER = "support.http_handler"

local function serve(extra)
   local opts = { port = 0, handler = HANDLER }
   for k, v in pairs(extra or {}) do opts[k] = v end
   return assert(http.serve(opts))
end

local function connect(server)
   local sock = assert(net.connect("127.0.0.1", server:port(), 5))
   return sock
end

-- Reads responses off sock one after another (bytes past one response stay for the next).
local function reader(sock)
   local buf = ""
   return function(timeout)
      local deadline = smarm.now() + (timeout or 5)
      while true do
         local r, next = parse.response_head(buf, 1, 65536)
         if r then
            local len = r.length or 0
            while #buf - next + 1 < len do
               local d, err = sock:recv("*r", math.max(0, deadline - smarm.now()))
               if not d then return nil, err end
               buf = buf .. d
            end
            r.body = buf:sub(next, next + len - 1)
            buf = buf:sub(next + len)
            return r
         end
         assert(next == nil, next)
         local d, err = sock:recv("*r", math.max(0, deadline - smarm.now()))
         if not d then return nil, err end
         buf = buf .. d
      end
   end
end

-- Whether the server closed sock (reads reach the end within timeout).
local function closed_by_peer(sock, timeout)
   local deadline = smarm.now() + (timeout or 5)
   while smarm.now() < deadline do
      local d, err = sock:recv("*r", math.max(0, deadline - smarm.now()))
      if not d then return err == "closed" or err == "reset" end
   end
   return false
end

local function get(path)
   return ("GET %s HTTP/1.1\r\nHost: t\r\n\r\n"):format(path)
end

describe("smarm.http", function()
   it("answers hello, and http.request reads it", function()
      local server = serve()
      local status, headers, body = http.request("GET",
         ("http://127.0.0.1:%d/hello"):format(server:port()), nil, nil, 5)
      assert.are.equal(200, status)
      assert.are.equal("hello\n", body)
      assert.are.equal("text/plain", headers["content-type"])
      assert.is_true(server:close())
   end)

   it("keeps a connection alive across requests", function()
      local server = serve()
      local sock = connect(server)
      local next = reader(sock)
      for i = 1, 5 do
         assert(sock:send(("GET /echo?%d HTTP/1.1\r\nHost: t\r\n\r\n"):format(i), 5))
         local r = assert(next())
         assert.are.equal(200, r.status)
         assert.are.equal(tostring(i), r.headers["x-query"])
      end
      sock:close()
      server:close()
   end)

   it("answers pipelined requests in order, a slow one first", function()
      local server = serve()
      local sock = connect(server)
      assert(sock:send(get("/slow?s=0.2") .. get("/echo?2") ..
         "POST /echo?3 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc" .. get("/hello"), 5))
      local next = reader(sock)
      assert.are.equal("slow", assert(next()).body)
      assert.are.equal("2", assert(next()).headers["x-query"])
      assert.are.equal("abc", assert(next()).body)
      assert.are.equal("hello\n", assert(next()).body)
      sock:close()
      server:close()
   end)

   it("reads a chunked request body sent in pieces", function()
      local server = serve()
      local sock = connect(server)
      assert(sock:send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" ..
         "6\r\nhello \r\n", 5))
      smarm.sleep(0.05)
      assert(sock:send("5;x=y\r\nworld\r\n0\r\nX-Trailer: 1\r\n\r\n", 5))
      local r = assert(reader(sock)())
      assert.are.equal(200, r.status)
      assert.are.equal("hello world", r.body)
      sock:close()
      server:close()
   end)

   it("answers 400, 431 and 413 and closes the connection", function()
      local server = serve({ max_header_bytes = 512, max_body_bytes = 100 })
      local cases = {
         { 400, "GET /a b HTTP/1.1\r\nHost: t\r\n\r\n" },
         { 400, "\22\3\1\2\0\1\0\1\252\3\3" },
         { 431, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: " .. ("x"):rep(600) .. "\r\n\r\n" },
         { 413, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 101\r\n\r\n" },
      }
      for _, c in ipairs(cases) do
         local sock = connect(server)
         assert(sock:send(c[2], 5))
         local r = assert(reader(sock)())
         assert.are.equal(c[1], r.status)
         assert.are.equal("close", r.headers.connection)
         assert.is_true(closed_by_peer(sock))
         sock:close()
      end
      server:close()
   end)

   it("cuts a slowloris client after request_timeout", function()
      local server = serve({ request_timeout = 0.5 })
      local sock = connect(server)
      local t0 = smarm.now()
      local req = get("/hello")
      -- a byte every 0.1 s, until the server answers
      local arms = { sock:readable() }
      for i = 1, #req do
         if not sock:send(req:sub(i, i), 1) then break end
         if smarm.select(arms, 0.1) then break end
      end
      local r = assert(reader(sock)(5))
      assert.are.equal(408, r.status)
      assert.is_true(smarm.now() - t0 < 3)
      assert.is_true(closed_by_peer(sock))
      sock:close()
      server:close()
   end)

   it("cuts a client that stops reading its answer after idle_timeout", function()
      -- the answer's sending and the wait for the next request are one turn: its timeout is
      -- the idle timeout, so a client that reads nothing does not hold the connection's
      -- actor in a send for ever
      local server = serve({ idle_timeout = 0.3 })
      local sock = connect(server)
      assert(sock:send(get("/big"), 5))
      smarm.sleep(1.5)
      local got, err = 0, nil
      local deadline = smarm.now() + 10
      while smarm.now() < deadline do
         local d, e = sock:recv("*r", 5)
         if not d then
            err = e
            break
         end
         got = got + #d
      end
      assert.is_truthy(err == "closed" or err == "reset", tostring(err))
      assert.is_true(got < 32 * 1024 * 1024, "the whole answer came: nothing cut it")
      sock:close()
      server:close()
   end)

   it("answers 500 when the handler raises, and goes on serving", function()
      local server = serve()
      local sock = connect(server)
      assert(sock:send(get("/boom"), 5))
      local r = assert(reader(sock)())
      assert.are.equal(500, r.status)
      assert.is_true(closed_by_peer(sock))
      sock:close()
      local status, _, body = http.request("GET",
         ("http://127.0.0.1:%d/hello"):format(server:port()), nil, nil, 5)
      assert.are.equal(200, status)
      assert.are.equal("hello\n", body)
      server:close()
   end)

   it("answers 503 past max_connections, and accepts again once one closes", function()
      local server = serve({ max_connections = 2 })
      local a, b = connect(server), connect(server)
      -- both are served (so both connection actors exist)
      for _, s in ipairs({ a, b }) do
         assert(s:send(get("/hello"), 5))
         assert.are.equal(200, assert(reader(s)()).status)
      end
      local c = connect(server)
      local r = assert(reader(c)())
      assert.are.equal(503, r.status)
      assert.is_true(closed_by_peer(c))
      c:close()
      a:close()
      -- a's actor ends once it sees the close; then a new connection is served
      local served = false
      for _ = 1, 50 do
         local d = connect(server)
         assert(d:send(get("/hello"), 5))
         local rd = reader(d)()
         d:close()
         if rd and rd.status == 200 then
            served = true
            break
         end
         smarm.sleep(0.05)
      end
      assert.is_true(served)
      b:close()
      server:close()
   end)

   it("reuses a connection actor for a later connection, and stops it with the server", function()
      local server = serve()
      local url = ("http://127.0.0.1:%d/pid"):format(server:port())
      local first = tonumber(select(3, http.request("GET", url, nil, nil, 5)))
      assert.is_number(first)
      local reused = false
      for _ = 1, 50 do
         smarm.sleep(0.02)
         if tonumber(select(3, http.request("GET", url, nil, nil, 5))) == first then
            reused = true
            break
         end
      end
      assert.is_true(reused)
      assert.is_table(smarm.info(first))
      assert.is_true(server:close())
      local gone = false
      for _ = 1, 100 do
         if smarm.info(first) == nil then
            gone = true
            break
         end
         smarm.sleep(0.02)
      end
      assert.is_true(gone)
   end)

   it("http.request sends headers and a body, and reports errors as values", function()
      local server = serve()
      local url = ("http://127.0.0.1:%d/echo?q=1"):format(server:port())
      local status, headers, body = http.request("PUT", url, { ["X-Test"] = "yes" }, "payload", 5)
      assert.are.equal(200, status)
      assert.are.equal("PUT", headers["x-method"])
      assert.are.equal("yes", headers["x-test"])
      assert.are.equal("q=1", headers["x-query"])
      assert.are.equal("payload", body)
      local s2, _, b2 = http.request("HEAD", ("http://127.0.0.1:%d/hello"):format(server:port()))
      assert.are.equal(200, s2)
      assert.are.equal("", b2)
      assert.are.equal(204, (http.request("GET",
         ("http://127.0.0.1:%d/nocontent"):format(server:port()))))
      local port = server:port()
      assert.is_true(server:close())
      local none, err = http.request("GET", ("http://127.0.0.1:%d/"):format(port), nil, nil, 2)
      assert.is_nil(none)
      assert.is_string(err)
      assert.are.same({ nil, "bad url: ftp://x/" }, { http.request("GET", "ftp://x/") })
      assert.has_error(function() http.request("GET", 7) end,
         "http.request: url must be a string, got number")
   end)

   it("checks its options", function()
      assert.has_error(function() http.serve({ port = 0 }) end,
         "http.serve: opts.handler must be a module name, got nil")
      assert.has_error(function() http.serve({ handler = "x", port = -1 }) end,
         "http.serve: opts.port must be an integer from 0 to 65535, got -1")
      assert.has_error(function() http.serve({ handler = "x", idle_timeout = 0 }) end,
         "http.serve: opts.idle_timeout must be a positive number of seconds, got 0")
      assert.has_error(function() http.serve({ handler = "x", nope = 1 }) end,
         "http.serve: unknown option nope")
      -- a port in use is an error value
      local server = serve()
      local again, err = http.serve({ port = server:port(), handler = HANDLER })
      assert.is_nil(again)
      assert.is_string(err)
      server:close()
   end)

   it("runs as a supervisor child, restarted when it dies", function()
      local sup = assert(supervisor.start_link({
         strategy = "one_for_one",
         children = {
            { id = "web", start = { "smarm.http", "run",
               { port = 0, handler = HANDLER, name = "http_spec_web" } } },
         },
      }))
      local function hello()
         local port = assert(http.port("http_spec_web", 5))
         return http.request("GET", ("http://127.0.0.1:%d/hello"):format(port), nil, nil, 5)
      end
      assert.are.equal(200, (hello()))
      local first = smarm.whereis("http_spec_web")
      smarm.kill(first)
      local restarted
      for _ = 1, 100 do
         restarted = smarm.whereis("http_spec_web")
         if restarted and restarted ~= first then break end
         smarm.sleep(0.02)
      end
      assert.are_not.equal(first, restarted)
      assert.are.equal(200, (hello()))
      -- stopping the tree stops the server, and its open connections
      local port = assert(http.port("http_spec_web", 5))
      local sock = assert(net.connect("127.0.0.1", port, 5))
      assert(sock:send(get("/hello"), 5))
      assert.are.equal(200, assert(reader(sock)()).status)
      smarm.unlink(sup)
      local mon = smarm.monitor(sup)
      smarm.shutdown(sup)
      assert.is_table(mon:recv(5))
      assert.is_nil(smarm.whereis("http_spec_web"))
      assert.is_true(closed_by_peer(sock))
      sock:close()
      assert.is_nil(net.connect("127.0.0.1", port, 2))
   end)
end)
