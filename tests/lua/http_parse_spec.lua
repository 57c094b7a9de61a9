-- smarm.http_parse (the LPeg grammars: request heads, every rejection class, header
-- limits, chunked bodies, pipelined and partial buffers, responses, URLs) and
-- smarm.http's connection loop and response writer driven by a fake socket.
local parse = require "smarm.http_parse"
local http = require "smarm.http"
local fake = require "support.fake_socket"

local MAX = 8192

local function head(s, max)
   return parse.request_head(s, 1, max or MAX)
end

-- Splits a byte stream of responses into {status, headers, body} tables.
local function responses(stream)
   local list, pos = {}, 1
   while pos <= #stream do
      local r, next = parse.response_head(stream, pos, 65536)
      assert(r, "unparsable response at byte " .. pos .. ": " .. stream:sub(pos, pos + 80))
      local len = r.length or 0
      r.body = stream:sub(next, next + len - 1)
      list[#list + 1] = r
      pos = next + len
   end
   return list
end

describe("http_parse.request_head", function()
   it("parses a request line, headers (lower-case names) and reports where it ended", function()
      local s = "GET /a/b%20c?x=1&y=%2F HTTP/1.1\r\nHost: example.com:8080\r\n" ..
         "User-Agent: t/1.0 (x)\r\nX-Empty:\r\nX-Pad: \t padded value \t\r\n\r\nNEXT"
      local req, next = head(s)
      assert.are.equal("GET", req.method)
      assert.are.equal("/a/b%20c", req.path)
      assert.are.equal("x=1&y=%2F", req.query)
      assert.are.equal(1.1, req.version)
      assert.are.same({ host = "example.com:8080", ["user-agent"] = "t/1.0 (x)",
         ["x-empty"] = "", ["x-pad"] = "padded value" }, req.headers)
      assert.are.equal("NEXT", s:sub(next))
      assert.is_nil(req.length)
      assert.is_nil(req.chunked)
   end)

   it("takes HTTP/1.0 without Host, an empty query and skips leading empty lines", function()
      local req, next = head("\r\n\r\nPOST /x? HTTP/1.0\r\n\r\n")
      assert.are.equal("POST", req.method)
      assert.are.equal("/x", req.path)
      assert.are.equal("", req.query)
      assert.are.equal(1.0, req.version)
      assert.are.equal(26, next)
      assert.are.equal("", head("GET / HTTP/1.0\r\n\r\n").query)
   end)

   it("takes the asterisk, absolute and authority forms of the target", function()
      assert.are.equal("*", head("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n").path)
      local r = head("GET http://h:1/p/q?z HTTP/1.1\r\nHost: h:1\r\n\r\n")
      assert.are.equal("/p/q", r.path)
      assert.are.equal("z", r.query)
      assert.are.equal("/", head("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n").path)
      assert.are.equal("h:443", head("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n").path)
   end)

   it("combines repeated fields with commas and keeps identical Content-Lengths", function()
      local r = head("GET / HTTP/1.1\r\nHost: h\r\nAccept: a\r\naccept: b\r\n" ..
         "Content-Length: 3\r\ncontent-length: 3\r\n\r\n")
      assert.are.equal("a, b", r.headers.accept)
      assert.are.equal(3, r.length)
   end)

   it("reads Content-Length and chunked framing", function()
      assert.are.equal(12, head("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\n").length)
      assert.are.equal(0, head("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n").length)
      assert.is_true(head("PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n")
         .chunked)
      assert.are.equal(math.huge,
         head("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n")
         .length)
   end)

   it("needs more bytes for an incomplete head, at every cut", function()
      local s = "POST /p?q HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n"
      for cut = 0, #s - 1 do
         local req, err = head(s:sub(1, cut))
         assert.is_nil(req, "cut " .. cut)
         assert.is_nil(err, "cut " .. cut)
      end
      assert.is_table(head(s))
   end)

   it("parses pipelined requests one after another from one buffer", function()
      local buf = ("GET /1 HTTP/1.1\r\nHost: h\r\n\r\n" ..
         "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc" ..
         "GET /3 HTTP/1.1\r\nHost: h\r\n\r\n")
      local pos, paths = 1, {}
      while pos <= #buf do
         local req, next = parse.request_head(buf, pos, MAX)
         assert.is_table(req)
         paths[#paths + 1] = req.path
         pos = next + (req.length or 0)
      end
      assert.are.same({ "/1", "/2", "/3" }, paths)
      assert.are.equal(#buf + 1, pos)
   end)

   local bad = {
      { "lower-case version", "GET / http/1.1\r\nHost: h\r\n\r\n" },
      { "no target", "GET HTTP/1.1\r\nHost: h\r\n\r\n" },
      { "two spaces", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n" },
      { "a space in the target", "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n" },
      { "a bad percent escape", "GET /%zz HTTP/1.1\r\nHost: h\r\n\r\n" },
      { "a fragment", "GET /a#f HTTP/1.1\r\nHost: h\r\n\r\n" },
      { "a bad method character", "G(T / HTTP/1.1\r\nHost: h\r\n\r\n" },
      { "space before the colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n" },
      { "an empty field name", "GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n" },
      { "obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n" },
      { "a control byte in a value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\1b\r\n\r\n" },
      { "a bare LF in a value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\nb\r\n\r\n" },
      { "no Host in 1.1", "GET / HTTP/1.1\r\n\r\n" },
      { "two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" },
      { "a bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n" },
      { "Content-Length with a sign", "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\n" },
      { "Content-Length as a list", "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 1\r\n\r\n" },
      { "two different Content-Lengths",
         "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n" },
      { "Content-Length with Transfer-Encoding",
         "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n" },
      { "Transfer-Encoding in HTTP/1.0", "GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" },
   }
   for _, case in ipairs(bad) do
      it("answers 400 to " .. case[1], function()
         local req, status = head(case[2])
         assert.is_nil(req)
         assert.are.equal(400, status)
      end)
   end

   it("answers 400 early: a bad request line, or a byte no request line has", function()
      assert.are.same({ nil, 400 }, { head("GET / HTTP/1.1 x\r\nHost: h\r\n") })
      assert.are.same({ nil, 400 }, { head("\22\3\1\0\xa5\1") }) -- a TLS hello
      assert.are.same({ nil, 400 }, { head("GET / HTTP/1.1\n") }) -- a bare LF
   end)

   it("answers 505 to another major version and 501 to other transfer codings", function()
      assert.are.same({ nil, 505 }, { head("GET / HTTP/2.0\r\nHost: h\r\n\r\n") })
      assert.are.equal(1.1, head("GET / HTTP/1.7\r\nHost: h\r\n\r\n").version)
      assert.are.same({ nil, 501 },
         { head("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") })
   end)

   it("answers 431 to a head over the limit, complete or not", function()
      local big = "GET / HTTP/1.1\r\nHost: h\r\nX: " .. ("v"):rep(200) .. "\r\n\r\n"
      assert.are.same({ nil, 431 }, { head(big, 100) })
      assert.are.same({ nil, 431 }, { head(big:sub(1, 150), 100) })
      assert.are.same({ nil, nil }, { head(big:sub(1, 90), 100) })
      assert.is_table(head(big, #big))
      assert.are.same({ nil, 431 }, { head(big, #big - 1) })
      -- the limit holds against many small fields too
      local many = { "GET / HTTP/1.1\r\nHost: h\r\n" }
      for i = 1, 3000 do many[#many + 1] = "a" .. i .. ":\r\n" end
      many[#many + 1] = "\r\n"
      assert.are.same({ nil, 431 }, { head(table.concat(many)) })
      assert.is_table(head(table.concat(many), 1e6))
   end)
end)

describe("http_parse.chunked", function()
   local function decode(s, max)
      return parse.chunked(parse.chunked_state(), s, 1, max or 1e6)
   end

   it("decodes chunks with extensions and trailers, and says where the body ended", function()
      local s = "5\r\nhello\r\n1;name=value;q=\"a \\\" b\"\r\n \r\nA\r\n0123456789\r\n" ..
         "0\r\nExpires: never\r\n\r\nNEXT"
      local body, next = decode(s)
      assert.are.equal("hello 0123456789", body)
      assert.are.equal("NEXT", s:sub(next))
      assert.are.same({ "", 6 }, { decode("0\r\n\r\nX") })
   end)

   it("decodes a body cut at every byte, fed piece by piece", function()
      local s = "3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\n"
      for cut = 1, #s - 1 do
         local st = parse.chunked_state()
         local body, err, consumed = parse.chunked(st, s:sub(1, cut), 1, 1e6)
         assert.is_nil(body, "cut " .. cut)
         assert.is_nil(err, "cut " .. cut)
         local rest = s:sub(consumed)
         body = parse.chunked(st, rest, 1, 1e6)
         assert.are.equal("abc0123456789abcdef", body, "cut " .. cut)
      end
   end)

   it("answers 400 to malformed chunks and 413 past the limit", function()
      assert.are.same({ nil, 400 }, { decode("x\r\n") })
      assert.are.same({ nil, 400 }, { decode("5\r\nhelloXY0\r\n\r\n") })
      assert.are.same({ nil, 400 }, { decode("-1\r\n") })
      assert.are.same({ nil, 400 }, { decode("5 x\r\nhello\r\n") })
      assert.are.same({ nil, 400 }, { decode("0\r\nBad Trailer\r\n\r\n") })
      assert.are.same({ nil, 400 }, { decode(("1"):rep(5000)) })
      assert.are.same({ nil, 413 }, { decode("b\r\nhello world\r\n0\r\n\r\n", 10) })
      assert.are.same({ nil, 413 }, { decode("fffffffffffffffffff\r\n") })
      assert.are.equal("hello world", decode("b\r\nhello world\r\n0\r\n\r\n", 11))
   end)
end)

describe("http_parse responses and URLs", function()
   it("parses a status line and headers", function()
      local r, next = parse.response_head("HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n" ..
         "X-A: 1\r\n\r\nabc", 1, 1000)
      assert.are.equal(404, r.status)
      assert.are.equal("Not Found", r.reason)
      assert.are.equal(3, r.length)
      assert.are.equal("1", r.headers["x-a"])
      assert.are.equal(54, next)
      assert.are.same({ nil, nil }, { parse.response_head("HTTP/1.1 200 OK\r\n", 1, 1000) })
      assert.are.same({ nil, "bad response" },
         { parse.response_head("HTTP/1.1 2000 OK\r\n\r\n", 1, 1000) })
   end)

   it("splits URLs", function()
      assert.are.same({ "127.0.0.1", 8080, "/a?b" }, { parse.url("http://127.0.0.1:8080/a?b") })
      assert.are.same({ "::1", 80, "/" }, { parse.url("http://[::1]") })
      assert.is_nil(parse.url("https://h/"))
      assert.is_nil(parse.url("http://h:99999/"))
      assert.is_nil(parse.url("http://h/a b"))
   end)
end)

describe("http.response", function()
   it("writes the status line, the handler's headers, Content-Length and the body", function()
      local s = assert(http.response(201, { ["X-List"] = { "a", "b" }, ["X-N"] = 7 }, "made"))
      local r = responses(s)[1]
      assert.are.equal(201, r.status)
      assert.are.equal("Created", r.reason)
      assert.are.equal("a, b", r.headers["x-list"])
      assert.are.equal("7", r.headers["x-n"])
      assert.are.equal("made", r.body)
      assert.is_string(r.headers.date)
   end)

   it("omits the body of HEAD, 204 and 304, and adds Connection when asked", function()
      local s = http.response(200, nil, "body", "close", true)
      assert.are.equal("", s:match("\r\n\r\n(.*)$"))
      assert.truthy(s:find("Content-Length: 4\r\n", 1, true))
      assert.truthy(s:find("Connection: close\r\n", 1, true))
      s = http.response(204, nil, "x")
      assert.falsy(s:find("Content-Length", 1, true))
      assert.are.equal("", s:match("\r\n\r\n(.*)$"))
   end)

   it("follows the handler's own Connection and Content-Length, over several headers", function()
      local s, closes = http.response(200, { A = "1", Connection = "Close", B = { "x", 2 },
         ["Content-Length"] = 3 }, "abc", "keep-alive")
      assert.is_true(closes)
      local _, nconn = s:gsub("\r\nConnection: ", "")
      assert.are.equal(1, nconn)
      local _, nlen = s:gsub("\r\nContent%-Length: ", "")
      assert.are.equal(1, nlen)
      local r = responses(s)[1]
      assert.are.equal("1", r.headers.a)
      assert.are.equal("x, 2", r.headers.b)
      assert.are.equal("abc", r.body)
      s, closes = http.response(200, { Connection = "keep-alive" }, "", "close")
      assert.is_false(closes)
      assert.falsy(s:find("close", 1, true))
      s, closes = http.response(200, { ["X-A"] = "a" }, "", "close")
      assert.is_true(closes)
      assert.truthy(s:find("\r\nConnection: close\r\n", 1, true))
      assert.same({ nil, "bad value for header L" },
         { http.response(200, { L = { "ok", "bad\n" } }, "") })
      assert.same({ nil, "bad header name 7" }, { http.response(200, { [7] = "v" }, "") })
   end)

   it("answers the same pieces with the same string, and any changed piece anew", function()
      local headers = { ["X-A"] = "a" }
      local first = assert(http.response(200, headers, "same"))
      assert.are.equal(first, http.response(200, headers, "same"))
      headers["X-A"] = "b" -- the same table, another value
      local changed = assert(http.response(200, headers, "same"))
      assert.truthy(changed:find("\r\nX-A: b\r\n", 1, true))
      assert.falsy(changed:find("X-A: a", 1, true))
      assert.are.equal("other", responses(http.response(200, headers, "other"))[1].body)
      assert.are.equal(404, responses(http.response(404, headers, "other"))[1].status)
      local s = http.response(200, headers, "other", "close")
      assert.truthy(s:find("\r\nConnection: close\r\n", 1, true))
      local big = string.rep("x", 5000) -- not kept: still whole
      assert.are.equal(big, responses(http.response(200, headers, big))[1].body)
      assert.are.equal(big, responses(http.response(200, headers, big))[1].body)
   end)

   it("refuses what cannot be sent: bad status, body, header names and values", function()
      assert.is_nil(http.response(99, nil, ""))
      assert.is_nil(http.response(200.5, nil, ""))
      assert.is_nil(http.response(200, nil, {}))
      assert.is_nil(http.response(200, { ["Bad Name"] = "v" }, ""))
      local resp, why = http.response(200, { X = "a\r\nInjected: 1" }, "")
      assert.is_nil(resp)
      assert.matches("bad value for header X", why)
   end)
end)

describe("http.connection over a fake socket", function()
   local opts = {
      handler = "support.http_handler", max_header_bytes = 1024, max_body_bytes = 64,
      idle_timeout = 0.5, request_timeout = 0.3,
   }

   local function serve(script, extra)
      local o = {}
      for k, v in pairs(opts) do o[k] = v end
      for k, v in pairs(extra or {}) do o[k] = v end
      local sock = fake.new(script)
      http.connection(sock, o)
      assert.is_true(sock.closed)
      assert.is_true(sock.options.nodelay)
      return responses(sock:output()), sock
   end

   it("answers pipelined requests in order, in one send", function()
      local rs, sock = serve({ "GET /echo?1 HTTP/1.1\r\nHost: h\r\n\r\n" ..
         "POST /echo?2 HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody" ..
         "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n" })
      assert.are.equal(3, #rs)
      assert.are.equal("1", rs[1].headers["x-query"])
      assert.are.equal("POST", rs[2].headers["x-method"])
      assert.are.equal("body", rs[2].body)
      assert.are.equal("hello\n", rs[3].body)
      assert.are.equal(1, #sock.sent)
   end)

   it("keeps the connection for requests split across reads, body included", function()
      local rs = serve({ "POST /echo HTTP/1.1\r\nHo", "st: h\r\nContent-Length: 5\r\n\r\nab",
         "cde", "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n" })
      assert.are.equal(2, #rs)
      assert.are.equal("abcde", rs[1].body)
      assert.are.equal("hello\n", rs[2].body)
   end)

   it("decodes a chunked body across reads", function()
      local rs = serve({ "POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
         "3\r\nab", "c\r\n2\r\nde\r\n0\r\n", "\r\n" })
      assert.are.equal("abcde", rs[1].body)
   end)

   it("answers 100 Continue before reading a body the client holds back", function()
      local _, sock = serve({ "POST /echo HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n" ..
         "Content-Length: 2\r\n\r\n", "hi" })
      assert.matches("^HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", sock:output())
   end)

   it("closes after HTTP/1.0 unless keep-alive, and when the handler says close", function()
      local rs = serve({ "GET /hello HTTP/1.0\r\n\r\nGET /hello HTTP/1.0\r\n\r\n" })
      assert.are.equal(1, #rs)
      assert.are.equal("close", rs[1].headers.connection)
      rs = serve({ "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" ..
         "GET /hello HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\nGET /hello HTTP/1.0\r\n\r\n" })
      assert.are.equal(2, #rs)
      assert.are.equal("keep-alive", rs[1].headers.connection)
      assert.are.equal("close", rs[2].headers.connection)
      rs = serve({ "GET /close HTTP/1.1\r\nHost: h\r\n\r\nGET /hello HTTP/1.1\r\nHost: h\r\n\r\n" })
      assert.are.equal(1, #rs)
      assert.are.equal("bye", rs[1].body)
   end)

   it("answers HEAD without a body", function()
      local _, sock = serve({ "HEAD /hello HTTP/1.1\r\nHost: h\r\n\r\n" })
      assert.matches("Content%-Length: 6\r\n\r\n$", sock:output())
   end)

   it("answers 400, 431, 413, 505, 501 and closes", function()
      local cases = {
         { 400, "GET / HTTP/1.1\r\nHost: h\r\nBad Header: x\r\n\r\nGET /hello HTTP/1.1\r\n\r\n" },
         { 431, "GET / HTTP/1.1\r\nHost: h\r\nX: " .. ("v"):rep(2000) .. "\r\n\r\n" },
         { 413, "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 65\r\n\r\n" },
         { 413, "POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" ..
            "40\r\n" .. ("x"):rep(64) .. "\r\n1\r\nx\r\n0\r\n\r\n" },
         { 505, "GET / HTTP/3.0\r\nHost: h\r\n\r\n" },
         { 501, "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: br\r\n\r\n" },
      }
      for _, c in ipairs(cases) do
         local rs = serve({ c[2] })
         assert.are.equal(1, #rs)
         assert.are.equal(c[1], rs[1].status)
         assert.are.equal("close", rs[1].headers.connection)
      end
   end)

   it("answers 408 to a request that trickles in past request_timeout", function()
      local script = {}
      local req = "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n"
      for i = 1, #req do
         script[#script + 1] = req:sub(i, i)
         script[#script + 1] = { sleep = 0.05 }
      end
      local t0 = require("smarm").now()
      local rs = serve(script)
      assert.are.equal(408, rs[1].status)
      assert.is_true(require("smarm").now() - t0 < 2)
   end)

   it("closes an idle connection after idle_timeout without answering", function()
      local rs, sock = serve({ "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n", { sleep = 5 } })
      assert.are.equal(1, #rs)
      assert.are.equal(1, #sock.sent)
   end)

   it("answers 500 to a handler error or a bad return, and reports it", function()
      local rs = serve({ "GET /boom HTTP/1.1\r\nHost: h\r\n\r\n" ..
         "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n" })
      assert.are.equal(1, #rs)
      assert.are.equal(500, rs[1].status)
      rs = serve({ "GET /badstatus HTTP/1.1\r\nHost: h\r\n\r\n" })
      assert.are.equal(500, rs[1].status)
      rs = serve({ "GET / HTTP/1.1\r\nHost: h\r\n\r\n" }, { handler = "no.such.module" })
      assert.are.equal(500, rs[1].status)
   end)
end)
