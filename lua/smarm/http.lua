--- smarm.http: an HTTP/1.1 server with one actor per connection, and a small client.
--
--   http.serve(opts) -> server | nil, err        server:port(), server:close(), server.pid
--   start = { "smarm.http", "run", opts }        the same server as a supervisor child
--   require(opts.handler).handle(req) -> status, headers, body
--   http.request(method, url [, headers [, body [, timeout]]]) -> status, headers, body
--
-- The acceptor actor owns the listening socket and hands each accepted socket to a new
-- connection actor as a spawn argument. A connection actor reads requests (keep-alive,
-- pipelined requests answered in order), calls the handler module in its own state and
-- writes the responses (smarm.http_conn, all a connection actor loads). Parsing is
-- smarm.http_parse (LPeg).
local smarm = require "smarm"
local parse = require "smarm.http_parse"

local concat, sub, lower, format = table.concat, string.sub, string.lower, string.format
local type, tostring, pairs, ipairs = type, tostring, pairs, ipairs

local M = {}

--- run reports its own start to a supervisor (smarm.proc), once it listens.
M.init_ack = { run = true }

local conn = require "smarm.http_conn"

--- Reason phrases by status.
M.reasons = conn.reasons

--- Builds one response as a string (see smarm.http_conn.response).
M.response = conn.response

--- Serves one connection until it closes (see smarm.http_conn.connection).
M.connection = conn.connection

local is_token, is_field_value = parse.is_token, parse.is_field_value

local DEFAULTS = {
   host = "127.0.0.1",
   port = 0,
   max_connections = 10000,
   max_header_bytes = 8192,
   max_body_bytes = 1024 * 1024,
   idle_timeout = 60,
   request_timeout = 30,
}

-- Checks serve/run options; returns a fresh table with the defaults filled in.
local function check_opts(opts, fname)
   if type(opts) ~= "table" then
      error(format("%s: opts must be a table, got %s", fname, type(opts)), 3)
   end
   local o = {}
   for k, v in pairs(DEFAULTS) do o[k] = v end
   for k, v in pairs(opts) do
      if DEFAULTS[k] == nil and k ~= "handler" and k ~= "name" then
         error(format("%s: unknown option %s", fname, tostring(k)), 3)
      end
      o[k] = v
   end
   if type(o.handler) ~= "string" then
      error(format("%s: opts.handler must be a module name, got %s", fname, type(o.handler)), 3)
   end
   if type(o.host) ~= "string" then
      error(format("%s: opts.host must be a string, got %s", fname, type(o.host)), 3)
   end
   local port = o.port
   if type(port) ~= "number" or port % 1 ~= 0 or port < 0 or port > 65535 then
      error(format("%s: opts.port must be an integer from 0 to 65535, got %s", fname,
         tostring(port)), 3)
   end
   for _, k in ipairs({ "max_connections", "max_header_bytes", "max_body_bytes" }) do
      local v = o[k]
      if type(v) ~= "number" or v % 1 ~= 0 or v < 1 then
         error(format("%s: opts.%s must be a positive integer, got %s", fname, k,
            tostring(v)), 3)
      end
   end
   for _, k in ipairs({ "idle_timeout", "request_timeout" }) do
      local v = o[k]
      if type(v) ~= "number" or v ~= v or v <= 0 then
         error(format("%s: opts.%s must be a positive number of seconds, got %s", fname, k,
            tostring(v)), 3)
      end
   end
   if o.name ~= nil and type(o.name) ~= "string" then
      error(format("%s: opts.name must be a string, got %s", fname, type(o.name)), 3)
   end
   return o
end
-- Acceptor ------------------------------------------------------------------------------

-- The body of a connection actor (no upvalues: it runs in a fresh state). After its
-- first connection it offers itself to the acceptor for another one: loading the modules
-- into a fresh state costs far more than a connection itself.
local function connection_main(sock, o, acceptor_pid)
   local s = require "smarm"
   local http = require "smarm.http_conn"
   -- the offer is the same message every time (send copies it)
   local offer = { http_idle = s.self() }
   while true do
      http.connection(sock, o)
      sock = nil
      -- a connection that held a big body leaves garbage behind
      if collectgarbage("count") > 1024 then collectgarbage() end
      if not s.send(acceptor_pid, offer) then return end
      repeat
         local m = s.recv()
         -- (_G.type: this module's local type would be an upvalue)
         if _G.type(m) == "table" then
            if m.http_exit then return end
            sock = m.http_sock
         end
      until sock
   end
end

-- The acceptor's answer when it cannot take a connection. It must not wait on the
-- client: it drops what the request has sent so far (closing with unread bytes would
-- reset the connection, and the client could lose the answer) and closes.
local function reject(sock)
   sock:send(M.response(503, { ["Content-Type"] = "text/plain" },
      "Service Unavailable\n", "close"), 1)
   sock:shutdown("send")
   sock:recv("*r", 0)
   sock:close()
end

-- most idle connection actors kept for later connections
local MAX_IDLE = 256

-- Listens and accepts until shut down. report(ok, port_or_err) tells the starter.
local function acceptor(o, report)
   local net = require "smarm.net"
   if o.name then
      local ok, err = smarm.register(o.name)
      if not ok then
         report(false, "name " .. o.name .. " " .. tostring(err))
         return nil, err
      end
   end
   local server, err = net.listen(o.host, o.port)
   if not server then
      report(false, err)
      return nil, err
   end
   -- accepted sockets inherit TCP_NODELAY from the listening one (Linux): a connection
   -- then need not set it itself (one syscall less per connection)
   if server:setoption("nodelay", true) then o.nodelay_set = true end
   local port = server:port()
   local self = smarm.self()
   -- "$": a group of this node only, even when it is distributed
   local group = format("$smarm.http %s", smarm.pid_tostring(self))
   local members, join, send, recv = smarm.pg.members, smarm.pg.join, smarm.send, smarm.recv
   -- busy: connections being served (an estimate, recounted at the limit); idle: a stack
   -- of connection actors waiting for another connection
   local busy, max = 0, o.max_connections
   local idle, nidle = {}, 0
   local max_idle = math.min(MAX_IDLE, max)
   local trap = smarm.trap_exit(true)
   local arms = { server:acceptable(), trap, smarm.inbox }
   report(true, port)

   local function stop(reason)
      server:close()
      for _, pid in ipairs(members(group)) do smarm.shutdown(pid) end
      smarm.exit(reason)
   end

   -- a message in the inbox: a connection actor offering itself, a port query, a stop
   local function inbox_msg(v)
      if type(v) ~= "table" then return end
      if v.http_idle then
         busy = busy > 0 and busy - 1 or 0
         if nidle < max_idle then
            nidle = nidle + 1
            idle[nidle] = v.http_idle
         else
            send(v.http_idle, { http_exit = true })
         end
      elseif v.http_port then
         v.http_port:send(port)
      elseif v.http_stop then
         return stop("normal")
      end
   end

   -- the message that hands a socket over, one table for all (send copies it, and moves
   -- the socket); false, not nil, keeps its key in the constructor's template
   local hand = { http_sock = false }

   local function dispatch(sock)
      -- while connections keep coming, select keeps finding the server ready first: the
      -- offers of actors that finished are taken here, or each connection would spawn
      if nidle == 0 then
         local m = recv(0)
         while m ~= nil do
            inbox_msg(m)
            if nidle > 0 then break end
            m = recv(0)
         end
      end
      -- the count is recounted (dead members leave the group) only at the limit
      if busy >= max then busy = #members(group) - nidle end
      if busy >= max then return reject(sock) end
      if nidle > 0 then
         local pid = idle[nidle]
         idle[nidle] = nil
         nidle = nidle - 1
         -- a message to an actor that died takes the socket with it: the client sees
         -- the connection close (an idle actor dies only when killed from outside)
         hand.http_sock = sock
         if send(pid, hand) then busy = busy + 1 end
         hand.http_sock = false
         return
      end
      -- at a full actor slab the socket is still ours (try_spawn refuses before it
      -- takes its arguments): the client gets its 503
      local pid = smarm.try_spawn(connection_main, sock, o, self)
      if not pid then return reject(sock) end
      join(group, pid)
      busy = busy + 1
   end

   while true do
      local i, v = smarm.select(arms)
      if i == 1 then
         while true do
            local sock, aerr = server:accept(0)
            if not sock then
               if aerr == "closed" then return stop("closed") end
               break
            end
            dispatch(sock)
         end
      elseif i == 2 then
         -- shut down (or the parent ended): stop accepting, close the connections
         return stop(v.reason)
      else
         inbox_msg(v)
      end
   end
end

--- A supervisor child: { "smarm.http", "run", opts }. Listens, reports the start,
-- then serves until shut down. opts.name registers the acceptor (see http.port).
function M.run(opts)
   local o = check_opts(opts, "http.run")
   local proc = require "smarm.proc"
   return acceptor(o, function(ok, why)
      if ok then
         proc.started(true)
      else
         proc.started(false, why)
      end
   end)
end

local function acceptor_main(tx, o)
   return require("smarm.http").serve_acceptor(tx, o)
end

function M.serve_acceptor(tx, o)
   return acceptor(o, function(ok, v)
      tx:send(ok and { port = v } or { err = v })
      tx:release()
   end)
end

local Server = {}
local server_mt = { __index = Server }

--- The port the server listens on.
function Server:port()
   return self.port_number
end

--- Stops the server: no more connections are accepted and the open ones are closed.
-- Returns once the acceptor has ended (the port is free again).
function Server:close(timeout)
   local mon = smarm.monitor(self.pid)
   smarm.shutdown(self.pid)
   local down = mon:recv(timeout or 5)
   return down ~= nil
end

--- Starts a server in a new actor (not linked to the caller).
-- @return server | nil, err (the listen failed: address in use, ...)
function M.serve(opts)
   local o = check_opts(opts, "http.serve")
   local tx, rx = smarm.channel()
   local pid, mon = smarm.spawn_monitor(acceptor_main, tx, o)
   tx:release()
   local i, v = smarm.select({ rx, mon }, 30)
   if i == 1 and type(v) == "table" and v.port then
      smarm.demonitor(mon)
      return setmetatable({ pid = pid, port_number = v.port }, server_mt)
   end
   if i == 1 then
      mon:recv(5)
      return nil, v and v.err or "closed"
   elseif i == 2 then
      return nil, "server ended: " .. tostring(v.reason)
   end
   smarm.kill(pid)
   return nil, "timeout"
end

--- The port of a running server, by its acceptor's pid or registered name.
-- @return port | nil, "dead" | "unresolved" | "timeout"
function M.port(server, timeout)
   local tx, rx = smarm.channel()
   local ok, err = smarm.send(server, { http_port = tx })
   tx:release()
   if not ok then return nil, err end
   return rx:recv(timeout or 5)
end

-- Client --------------------------------------------------------------------------------

--- Sends one request over a fresh connection and reads the response.
-- @param method "GET", "POST", ...
-- @param url http://host[:port][/path][?query]
-- @param headers nil or {name = value}
-- @param body nil or a string (sent with Content-Length)
-- @param timeout seconds for the whole exchange (default 30)
-- @return status, headers (lower-case names), body | nil, err
function M.request(method, url, headers, body, timeout)
   if type(method) ~= "string" or not is_token(method) then
      error("http.request: method must be a token, got " .. tostring(method), 2)
   end
   if type(url) ~= "string" then
      error("http.request: url must be a string, got " .. type(url), 2)
   end
   if body ~= nil and type(body) ~= "string" then
      error("http.request: body must be a string, got " .. type(body), 2)
   end
   if headers ~= nil and type(headers) ~= "table" then
      error("http.request: headers must be a table, got " .. type(headers), 2)
   end
   local host, port, target = parse.url(url)
   if not host then return nil, "bad url: " .. url end
   local net = require "smarm.net"
   local deadline = smarm.now() + (timeout or 30)
   local function left() return math.max(deadline - smarm.now(), 0) end

   local out, n = { method, " ", target, " HTTP/1.1\r\n" }, 4
   local given = {}
   for k, v in pairs(headers or {}) do
      v = tostring(v)
      if type(k) ~= "string" or not is_token(k) or not is_field_value(v) then
         error("http.request: bad header " .. tostring(k), 2)
      end
      given[lower(k)] = true
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = k, ": ", v, "\r\n"
      n = n + 4
   end
   if not given.host then
      out[n + 1] = "Host: " .. host .. (port == 80 and "" or ":" .. port) .. "\r\n"
      n = n + 1
   end
   if body and not given["content-length"] then
      out[n + 1] = "Content-Length: " .. #body .. "\r\n"
      n = n + 1
   end
   if not given.connection then
      out[n + 1] = "Connection: close\r\n"
      n = n + 1
   end
   out[n + 1] = "\r\n"
   out[n + 2] = body or ""

   local sock, err = net.connect(host, port, left())
   if not sock then return nil, err end
   local ok
   ok, err = sock:send(concat(out), left())
   if not ok then
      sock:close()
      return nil, err
   end
   local buf, pos = "", 1
   -- an error ends the request: the connection is closed and the error returned
   local function fail(e)
      sock:close()
      return nil, e
   end
   local function more()
      local data, e = sock:recv("*r", left())
      if not data then return nil, e end
      buf = sub(buf, pos) .. data
      pos = 1
      return true
   end
   local resp, x
   while true do
      resp, x = parse.response_head(buf, pos, 65536)
      if resp then
         -- an interim 1xx response is skipped
         if resp.status >= 200 or resp.status == 101 then break end
         pos = x
      elseif x then
         return fail(x)
      else
         local got, e = more()
         if not got then return fail(e) end
      end
   end
   pos = x
   local rbody
   local status = resp.status
   if method == "HEAD" or status == 204 or status == 304 or status < 200 then
      rbody = ""
   elseif resp.chunked then
      local st = parse.chunked_state()
      while true do
         local b, y, consumed = parse.chunked(st, buf, pos, math.huge)
         if b then
            rbody = b
            break
         end
         if y then
            return fail("bad chunked body")
         end
         pos = consumed
         local got, e = more()
         if not got then return fail(e) end
      end
   elseif resp.length then
      local have = #buf - pos + 1
      if have >= resp.length then
         rbody = sub(buf, pos, pos + resp.length - 1)
      else
         local rest, e = sock:recv(resp.length - have, left())
         if not rest then return fail(e) end
         rbody = sub(buf, pos) .. rest
      end
   else
      -- delimited by the close
      local rest, e, partial = sock:recv("*a", left())
      rest = rest or partial
      if not rest then return fail(e) end
      rbody = sub(buf, pos) .. rest
   end
   sock:close()
   return status, resp.headers, rbody
end

return M
