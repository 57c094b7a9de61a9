--- The connection side of smarm.http: the loop that serves one connection's requests
-- (keep-alive, pipelining, bodies, limits, timeouts, error answers) and the response
-- writer. A connection actor loads only this module (and smarm.http_parse), not the
-- acceptor's and the client's code, so each connection's state stays smaller.
local smarm = require "smarm"
local parse = require "smarm.http_parse"
local jit_opt = require("jit").opt

local concat, sub, lower, format = table.concat, string.sub, string.lower, string.format
local type, tostring, next = type, tostring, next

local M = {}

local REASONS = {
   [100] = "Continue", [101] = "Switching Protocols",
   [200] = "OK", [201] = "Created", [202] = "Accepted", [204] = "No Content",
   [206] = "Partial Content",
   [301] = "Moved Permanently", [302] = "Found", [303] = "See Other", [304] = "Not Modified",
   [307] = "Temporary Redirect", [308] = "Permanent Redirect",
   [400] = "Bad Request", [401] = "Unauthorized", [403] = "Forbidden", [404] = "Not Found",
   [405] = "Method Not Allowed", [408] = "Request Timeout", [409] = "Conflict",
   [410] = "Gone", [411] = "Length Required", [413] = "Content Too Large",
   [414] = "URI Too Long", [415] = "Unsupported Media Type", [422] = "Unprocessable Content",
   [429] = "Too Many Requests", [431] = "Request Header Fields Too Large",
   [500] = "Internal Server Error", [501] = "Not Implemented", [502] = "Bad Gateway",
   [503] = "Service Unavailable", [504] = "Gateway Timeout",
   [505] = "HTTP Version Not Supported",
}
M.reasons = REASONS
-- Responses -----------------------------------------------------------------------------

local status_lines = {}
local function status_line(status)
   local line = status_lines[status]
   if not line then
      line = format("HTTP/1.1 %d %s\r\n", status, REASONS[status] or "Unknown")
      status_lines[status] = line
   end
   return line
end

-- The Date line of the current second. A connection reads it when its bytes arrive, not
-- in the middle of a response: os.time is a C function, whose call in a compiled trace
-- is stitched (see "Connections" below). RFC 9110 section 6.6.1 lets the date be taken at
-- any time during the response's making.
local os_time, os_date = os.time, os.date
local date_at, date_line = -1, nil
-- the Date line of second t (formatted once per second)
local function date_of(t)
   date_at, date_line = t, os_date("!Date: %a, %d %b %Y %H:%M:%S GMT\r\n", t)
   return date_line
end
local function date_header()
   local t = os_time()
   if t ~= date_at then return date_of(t) end
   return date_line
end

local is_token, is_field_value = parse.is_token, parse.is_field_value
local has_token, lower_name = parse.has_token, parse.lower_name

-- "Name: value\r\n" lines already checked, by name then value: a handler sends the same
-- few headers with every response, so most lines are one lookup, not a check and four
-- pieces to join. Bounded: a server that sends ever-new values checks each.
local header_lines, header_line_count = {}, 0
-- and the lower-case forms of the names checked
local header_names, header_name_count = {}, 0
local MAX_HEADER_LINES = 1024

-- "Content-Length: n\r\n" for small n (most bodies are small)
local length_lines = {}
local MAX_LENGTH_LINE = 4096

-- The pieces of the response being built: response() runs to its end without yielding,
-- so one table serves every call (it stops growing at the largest response's count).
local pieces = {}

-- The line for name (a checked token): v (v a string or number) | nil (a bad value).
local function header_line(name, v)
   local lines = header_lines[name]
   local line = lines and lines[v]
   if line then return line end
   if type(v) == "number" then v = tostring(v) end
   if type(v) ~= "string" or not is_field_value(v) then return nil end
   line = name .. ": " .. v .. "\r\n"
   if header_line_count < MAX_HEADER_LINES and #line <= 256 then
      if not lines then
         lines = {}
         header_lines[name] = lines
      end
      lines[v] = line
      header_line_count = header_line_count + 1
   end
   return line
end

-- What the header lines of the response being built said (build runs to its end without
-- yielding): whether one was Content-Length, whether Connection says close, and the
-- Connection value still to add (nil once the headers had one).
local has_length, says_close, connection_to_add = false, false, nil

-- The line of one value v of header name (lname: its lower-case form) added to pieces
-- after n: n + 1 | nil (a bad value).
local function add_value(name, lname, v, n)
   local line = header_line(name, v)
   if not line then return nil end
   n = n + 1
   pieces[n] = line
   if lname == "connection" then
      connection_to_add = nil
      says_close = has_token(type(v) == "number" and tostring(v) or v, "close")
   end
   return n
end

-- The values list[i], list[i + 1]... of header name added after n: n | nil (a bad value).
local function add_list(name, lname, list, i, n)
   local v = list[i]
   if v == nil then return n end
   n = add_value(name, lname, v, n)
   if not n then return nil end
   return add_list(name, lname, list, i + 1, n)
end

-- The lines of headers from the pair name = value on (in the order of next), added to
-- pieces after n: n | nil, why. Tail calls rather than a loop: a response has one or a few
-- headers, and LuaJIT compiles no trace through a loop that ends after a pass or two (the
-- connection loop's trace was refused as "inner loop in root trace").
local function add_headers(headers, n, name, value)
   if name == nil then return n end
   local lname = header_names[name]
   if not lname then
      if type(name) ~= "string" or not is_token(name) then
         return nil, "bad header name " .. tostring(name)
      end
      lname = lower_name(name)
      if header_name_count < MAX_HEADER_LINES then
         header_names[name] = lname
         header_name_count = header_name_count + 1
      end
   end
   -- one value, or a list of them
   local m
   if type(value) == "table" then
      m = add_list(name, lname, value, 1, n)
   else
      m = add_value(name, lname, value, n)
   end
   if not m then return nil, "bad value for header " .. name end
   if lname == "content-length" then has_length = true end
   return add_headers(headers, m, next(headers, name))
end

-- The last response built and its pieces (the body last): a handler that answers the same
-- bytes again (the same status line, Date line, header lines and body: strings are interned,
-- so each comparison is one of addresses) gets the same string back, without a concat (a
-- copy, a new string to hash, and later one more to collect). Only small bodies: the pieces
-- keep the body alive until the next response.
local last_pieces, last_n, last_resp = {}, 0, nil
local MAX_KEPT_BODY = 1024

-- Whether pieces[i..n] are last_pieces[i..n] (tail calls: see add_headers).
local function same_pieces(i, n)
   if i > n then return true end
   if pieces[i] ~= last_pieces[i] then return false end
   return same_pieces(i + 1, n)
end

-- Copies pieces[i..n] to last_pieces.
local function keep_pieces(i, n)
   if i > n then return end
   last_pieces[i] = pieces[i]
   return keep_pieces(i + 1, n)
end

-- One response as a string (M.response), with date its Date line.
local function build(status, headers, body, connection, head, date)
   if type(status) ~= "number" or status % 1 ~= 0 or status < 100 or status > 999 then
      return nil, "status must be an integer from 100 to 999, got " .. tostring(status)
   end
   if body == nil then
      body = ""
   elseif type(body) ~= "string" then
      return nil, "body must be a string, got " .. type(body)
   end
   pieces[1], pieces[2] = status_line(status), date
   local n = 2
   has_length, says_close, connection_to_add = false, connection == "close", connection
   if headers ~= nil then
      if type(headers) ~= "table" then
         return nil, "headers must be a table, got " .. type(headers)
      end
      local why
      n, why = add_headers(headers, n, next(headers))
      if not n then return nil, why end
   end
   connection = connection_to_add
   -- no body for 1xx, 204 and 304 (RFC 9110 sections 6.4.1, 8.6)
   local bodiless = status < 200 or status == 204 or status == 304
   if not has_length and not bodiless then
      local len = #body
      local line = length_lines[len]
      if not line then
         line = "Content-Length: " .. len .. "\r\n"
         if len <= MAX_LENGTH_LINE then length_lines[len] = line end
      end
      n = n + 1
      pieces[n] = line
   end
   if connection then
      pieces[n + 1], pieces[n + 2], pieces[n + 3] = "Connection: ", connection, "\r\n"
      n = n + 3
   end
   n = n + 1
   pieces[n] = "\r\n"
   if head or bodiless then return concat(pieces, "", 1, n), says_close end
   n = n + 1
   pieces[n] = body
   if #body > MAX_KEPT_BODY then
      local resp = concat(pieces, "", 1, n)
      pieces[n] = false -- the table does not keep a big body alive
      return resp, says_close
   end
   if n == last_n and body == last_pieces[n] and same_pieces(1, n - 1) then
      return last_resp, says_close
   end
   local resp = concat(pieces, "", 1, n)
   keep_pieces(1, n)
   last_n, last_resp = n, resp
   return resp, says_close
end

--- Builds one response as a string.
-- @param status an integer from 100 to 999
-- @param headers nil or {name = value | {values...}}; values are strings or numbers
-- @param body a string (or nil: empty)
-- @param connection nil, or the Connection header to add ("close", "keep-alive") unless
--   headers have one
-- @param head true for a HEAD request: no body, but its Content-Length
-- @return the response, and true when its Connection header says close
--   | nil, why (the handler returned something that cannot be sent)
function M.response(status, headers, body, connection, head)
   return build(status, headers, body, connection, head, date_header())
end

-- Crash reports -------------------------------------------------------------------------

-- The runtime's crash-report format, for an error the connection caught to answer 500.
local function report_crash(tb)
   io.stderr:write("smarm: actor ", smarm.pid_tostring(smarm.self()), " crashed: ", tb, "\n")
   io.stderr:flush()
end

local function traceback(err)
   return debug.traceback(tostring(err), 2)
end

-- Connections ---------------------------------------------------------------------------

-- The socket calls of the connection loop (C functions) end the compiled trace they are
-- reached from: the interpreter makes the call and runs to the top of the loop, whose
-- trace starts again there. LuaJIT would otherwise "stitch" a call to a C function: end
-- the trace, make the call, and record a new trace from just after it. Stitched traces
-- are linked one after the other, and a chain of them ends only where it reaches an
-- existing loop or function trace; from a trace that starts in a callee (the head
-- parser's, which often compiles first) the chain could run around the connection loop
-- for ever, recording a new trace at each call until the machine code ran out, everything
-- was flushed and compiled again. LuaJIT does not stitch a call whose results go on as a
-- variable count (the next instruction would start the new trace with an unknown number
-- of values): hence through(...) around these calls.
local function through(...)
   return ...
end

local LINGER_SECONDS, LINGER_BYTES = 1, 1024 * 1024

-- Closes after an error answer: ends the sending side (the client reads the answer, then
-- the end) and reads and drops what the client still sends for a moment, so that closing
-- with unread bytes does not reset the connection before the client has read the answer.
local function linger_close(sock)
   sock:shutdown("send")
   local deadline, dropped = smarm.now() + LINGER_SECONDS, 0
   while dropped < LINGER_BYTES do
      local left = deadline - smarm.now()
      if left <= 0 then break end
      local data = sock:recv("*r", left)
      if not data then break end
      dropped = dropped + #data
   end
   sock:close()
end

--- Serves one connection until it closes (the body of a connection actor).
-- @param sock a connected socket (smarm.net)
-- @param o checked server options
function M.connection(sock, o)
   -- (unless the acceptor's listening socket gave it to every accepted one)
   if not o.nodelay_set then sock:setoption("nodelay", true) end
   -- A connection that serves keep-alive requests runs a hot loop: its state compiles
   -- loops at LuaJIT's own pace (56 iterations), not the runtime's (2000, for message loops
   -- that stay interpreted). Measured with callgrind under wrk -c32 at -S 2: about 7,000
   -- instructions per request at 2000 against 5,300 at 56 (see docs/DESIGN.md).
   -- (and it stitches traces around C calls as LuaJIT does, which the runtime's
   -- parameters avoid for short message loops)
   jit_opt.start("hotloop=56", "minstitch=0")
   local now = smarm.now
   -- the methods once, not through the socket's metatable on every request
   local send, recv, sendrecv = sock.send, sock.recv, sock.sendrecv
   if not sendrecv then -- (a stand-in socket with send and recv alone)
      sendrecv = function(s, data, timeout)
         local ok, err = send(s, data)
         if not ok then return nil, err end
         return recv(s, "*r", timeout)
      end
   end
   local buf, pos = "", 1
   local out, nout = {}, 0
   local max_head, max_body = o.max_header_bytes, o.max_body_bytes
   local idle_timeout, request_timeout = o.idle_timeout, o.request_timeout
   -- the Date line of the responses, as of the last bytes read
   local date

   -- (send and recv end the trace: see through above)
   local function flush()
      if nout == 0 then return true end
      local data = nout == 1 and out[1] or concat(out, "", 1, nout)
      nout = 0
      return through(send(sock, data))
   end

   -- reads more bytes into buf (sending what is queued first); nil, err at the deadline
   -- ("timeout") or when the peer went ("closed", ...). The wait between requests gives a
   -- timeout instead (it starts now: no clock reading).
   local function fill(deadline, timeout)
      local left = timeout or deadline - now()
      if left <= 0 then
         if nout > 0 and not flush() then return nil, "closed" end
         return nil, "timeout"
      end
      local data, err
      if nout > 0 then
         -- the responses queued and the read of the next bytes: one call (one C call from
         -- the loop's trace, one argument check, one wait)
         local out1 = nout == 1 and out[1] or concat(out, "", 1, nout)
         nout = 0
         data, err = through(sendrecv(sock, out1, left))
      else
         data, err = through(recv(sock, "*r", left))
      end
      if not data then return nil, err end
      -- (the clock read inline: this runs in the interpreter after a wake, where a call
      -- of a Lua function costs more than the test)
      local t = os_time()
      date = t == date_at and date_line or date_of(t)
      if pos > #buf then
         buf = data
      else
         buf = sub(buf, pos) .. data
      end
      pos = 1
      return true
   end

   -- an error answer, then the connection closes
   local function fail(status)
      nout = nout + 1
      out[nout] = M.response(status, { ["Content-Type"] = "text/plain" },
         REASONS[status] .. "\n", "close")
      if flush() then
         linger_close(sock)
      else
         sock:close()
      end
   end

   local ok, handler = pcall(require, o.handler)
   local handle = ok and type(handler) == "table" and handler.handle
   if type(handle) ~= "function" then
      report_crash(ok and ("http: module " .. o.handler .. " has no handle function")
         or tostring(handler))
      return fail(500)
   end

   -- between requests the idle timeout runs; from a request's first byte until its body
   -- is read, the request timeout. The wait for the next request is at the end of the
   -- loop, so that the loop's trace runs from the request in buf to that wait.
   if not fill(nil, idle_timeout) then return sock:close() end
   while true do
      -- the request's deadline, read from the clock only when the request has to wait
      -- (its first bytes came a moment ago: at the end of the previous pass, or with the
      -- previous request)
      local deadline
      -- (a loop entered only while the head is incomplete: LuaJIT compiles no trace
      -- through a loop that ends after its first pass, as one around this call did)
      local req, x = parse.request_head(buf, pos, max_head)
      while not (req or x) do
         deadline = deadline or now() + request_timeout
         local got, err = fill(deadline)
         if not got then
            if err == "timeout" then return fail(408) end
            return sock:close()
         end
         req, x = parse.request_head(buf, pos, max_head)
      end
      if not req then return fail(x) end
      pos = x

      local body = ""
      local length = req.length
      if length then
         if length > max_body then return fail(413) end
         local have = #buf - pos + 1
         if have >= length then
            body = sub(buf, pos, pos + length - 1)
            pos = pos + length
         else
            local expect = req.headers.expect
            if expect and lower(expect) == "100-continue" and req.version == 1.1 then
               nout = nout + 1
               out[nout] = "HTTP/1.1 100 Continue\r\n\r\n"
            end
            if nout > 0 and not flush() then return sock:close() end
            deadline = deadline or now() + request_timeout
            local left = deadline - now()
            local rest, err = nil, "timeout"
            if left > 0 then rest, err = sock:recv(length - have, left) end
            if not rest then
               if err == "timeout" then return fail(408) end
               return sock:close()
            end
            body = (have > 0 and sub(buf, pos) or "") .. rest
            buf, pos = "", 1
         end
      elseif req.chunked then
         local expect = req.headers.expect
         if expect and lower(expect) == "100-continue" and pos > #buf then
            nout = nout + 1
            out[nout] = "HTTP/1.1 100 Continue\r\n\r\n"
         end
         local st = parse.chunked_state()
         while true do
            local b, y, consumed = parse.chunked(st, buf, pos, max_body)
            if b then
               body, pos = b, y
               break
            end
            if y then return fail(y) end
            pos = consumed
            deadline = deadline or now() + request_timeout
            local got, err = fill(deadline)
            if not got then
               if err == "timeout" then return fail(408) end
               return sock:close()
            end
         end
      end
      req.body = body

      local conn = req.headers.connection
      local keep
      if req.version == 1.1 then
         keep = not (conn and has_token(conn, "close"))
      else
         keep = conn ~= nil and has_token(conn, "keep-alive")
      end

      local done, status, headers, rbody = xpcall(handle, traceback, req)
      local resp, closes
      if done then
         local connection = not keep and "close" or (req.version == 1.0 and "keep-alive" or nil)
         resp, closes = build(status, headers, rbody, connection, req.method == "HEAD", date)
         if not resp then
            report_crash(format("http: %s.handle returned a bad response: %s", o.handler,
               closes))
         end
      else
         report_crash(status)
      end
      if not resp then return fail(500) end
      nout = nout + 1
      out[nout] = resp
      if closes then
         flush()
         return sock:close()
      end
      if pos > #buf then
         -- the turn between keep-alive requests, fill's work inline (fewer interpreted
         -- bytecodes after the wait): the answers queued go out, the next bytes come in
         local data = through(sendrecv(sock, nout == 1 and resp or concat(out, "", 1, nout),
            idle_timeout))
         nout = 0
         if not data then return sock:close() end
         -- (the Date test inline, as in fill)
         local t = os_time()
         buf, pos, date = data, 1, t == date_at and date_line or date_of(t)
      end
   end
end

return M
