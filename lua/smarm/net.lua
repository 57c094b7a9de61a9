--- smarm.net: TCP and UDP sockets for actors. A call that would block parks only the
-- calling actor (a scheduler polling the network wakes it when its fd is ready); errors are
-- values: "timeout", "closed", "refused", "reset" or the OS's text. The socket objects and their
-- methods are C (smarm.net.raw); this module adds names (resolution, trying each address)
-- and argument checks.
local smarm = require "smarm"
local raw = require "smarm.net.raw"

local M = {}

local function check_host(host, fname)
   if type(host) ~= "string" or host == "" then
      error(fname .. ": host must be a non-empty string, got " .. type(host), 3)
   end
end

local function check_timeout(t, fname)
   if t ~= nil and (type(t) ~= "number" or t ~= t or t < 0) then
      error(fname .. ": timeout must be a number of seconds >= 0, got " .. tostring(t), 3)
   end
end

--- The addresses of name: {"127.0.0.1", "::1", ...} | nil, err. An address literal is
-- returned as is, without a lookup.
function M.resolve(name)
   check_host(name, "net.resolve")
   if raw.is_literal(name) then return { name } end
   -- getaddrinfo blocks its thread: it runs on a pool thread, never a scheduler
   return smarm.blocking(raw.resolve, name)
end

--- A TCP server on host:port (port 0: a free one; host "*": every IPv4 address, "::":
-- every address). opts: backlog (511), reuseport (false). -> server | nil, err
function M.listen(host, port, opts)
   check_host(host, "net.listen")
   raw.check_port(port, "net.listen")
   if opts ~= nil and type(opts) ~= "table" then
      error("net.listen: opts must be a table, got " .. type(opts), 2)
   end
   opts = opts or {}
   local backlog = opts.backlog or 511
   if type(backlog) ~= "number" or backlog < 0 then
      error("net.listen: backlog must be a number >= 0, got " .. tostring(backlog), 2)
   end
   local addrs, err = M.resolve(host)
   if not addrs then return nil, err end
   if #addrs == 0 then return nil, "no address for " .. host end
   return raw.listen(addrs[1], port, backlog, opts.reuseport and true or false)
end

--- A TCP connection to host:port, trying each address of a name in turn until one
-- answers; timeout (seconds, nil = the OS's) covers all of them. -> sock | nil, err
function M.connect(host, port, timeout)
   check_host(host, "net.connect")
   raw.check_port(port, "net.connect")
   check_timeout(timeout, "net.connect")
   local deadline = timeout and smarm.now() + timeout
   local addrs, err = M.resolve(host)
   if not addrs then return nil, err end
   if #addrs == 0 then return nil, "no address for " .. host end
   for _, addr in ipairs(addrs) do
      local left = deadline and math.max(0, deadline - smarm.now())
      local sock
      sock, err = raw.connect(addr, port, left)
      if sock then return sock end
      if err == "timeout" then break end
   end
   return nil, err
end

--- A stream server on the Unix socket path, made with mode 0600 (only this user may
-- connect). A path that exists is taken over only if it is a stale socket of this user: a
-- symbolic link, another kind of file, another user's path or a socket something still
-- listens on is refused. -> server | nil, err
function M.listen_unix(path, opts)
   if type(path) ~= "string" or path == "" then
      error("net.listen_unix: path must be a non-empty string, got " .. type(path), 2)
   end
   if opts ~= nil and type(opts) ~= "table" then
      error("net.listen_unix: opts must be a table, got " .. type(opts), 2)
   end
   return raw.listen_unix(path, opts and opts.backlog or 16)
end

--- A stream connection to the Unix socket at path. -> sock | nil, err
function M.connect_unix(path)
   if type(path) ~= "string" or path == "" then
      error("net.connect_unix: path must be a non-empty string, got " .. type(path), 2)
   end
   return raw.connect_unix(path)
end

--- A UDP socket, bound to host:port if given (host a literal or a name), else unbound
-- (the first sendto picks a port). -> u | nil, err
function M.udp(host, port)
   if host == nil then return raw.udp() end
   check_host(host, "net.udp")
   raw.check_port(port, "net.udp")
   local addrs, err = M.resolve(host)
   if not addrs then return nil, err end
   if #addrs == 0 then return nil, "no address for " .. host end
   return raw.udp(addrs[1], port)
end

return M
