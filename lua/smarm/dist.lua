--- smarm.dist: this node in an Erlang cluster, over the Erlang distribution protocol.
--
-- One actor, the net kernel (registered "$dist"), listens for peers, holds the epmd
-- registration and knows the connections; each connection is an actor (registered
-- "$dist:" .. node) that owns its socket: it writes the packets senders encode (in their
-- own actors) and reads the peer's, delivering them here. Everything waits on the network
-- poller through smarm.net, so no scheduler thread blocks in a read.
--
-- Remote pids are interned values (light userdata); a local pid goes to another node as
-- dist.export(pid) (smarm.send and the gen_server bridge do this for the pids they put on
-- the wire themselves). Links and monitors of remote pids go through a small proxy actor
-- on this node, linked to (or monitored by) the caller, which ends with the remote
-- reason, or "noconnection" when the connection goes.
local smarm = require "smarm"
local raw = require "smarm.dist.raw"
local net = require "smarm.net"
local bit = require "bit"

local M = {}

local KERNEL = "$dist"
local CONN = "$dist:"

local atom, tuple, is_tuple = raw.atom, raw.tuple, raw.is_tuple
local atom_name = raw.atom_name

-- Control message operations (the distribution protocol's numbers).
local LINK, SEND, EXIT, REG_SEND, EXIT2 = 1, 2, 3, 6, 8
local MONITOR_P, DEMONITOR_P, MONITOR_P_EXIT, SEND_SENDER = 19, 20, 21, 22
local UNLINK_ID, UNLINK_ID_ACK = 35, 36

-- The capabilities this node announces (DFLAG_*): extended references and pids (V4_NC:
-- 32-bit pid fields), monitors by pid and by name, UTF-8 atoms, maps, big creation, the
-- OTP 23 handshake and unlink ids; no atom cache, no fragments.
local FLAGS = 0x1 + 0x4 + 0x8 + 0x10 + 0x20 + 0x80 + 0x100 + 0x200 + 0x400 + 0x800
   + 0x1000 + 0x4000 + 0x10000 + 0x20000 + 0x40000 + 0x80000 + 0x100000 + 0x1000000
   + 0x2000000 + 0x400000000

local TICK = 15 -- seconds between ticks on a quiet connection (net_ticktime 60 / 4)
local HANDSHAKE_TIMEOUT = 10

-- ---------------------------------------------------------------------------------------
-- bytes

local function u16(n) return string.char(bit.band(bit.rshift(n, 8), 255), bit.band(n, 255)) end
local function u32(n)
   n = n % 4294967296
   return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
      math.floor(n / 256) % 256, n % 256)
end
local function u64(n) return u32(math.floor(n / 4294967296)) .. u32(n % 4294967296) end
local function get16(s, i) return s:byte(i) * 256 + s:byte(i + 1) end
local function get32(s, i)
   return ((s:byte(i) * 256 + s:byte(i + 1)) * 256 + s:byte(i + 2)) * 256 + s:byte(i + 3)
end

local function log(fmt, ...)
   io.stderr:write("smarm dist: ", string.format(fmt, ...), "\n")
end

-- ---------------------------------------------------------------------------------------
-- names and pids

--- This node's name ("name@host"), or "nonode@nohost" when it is not distributed.
function M.node() return (raw.node()) or "nonode@nohost" end

local function alive() return raw.node() ~= nil end

--- A local pid as a term for another node (a remote-pid value naming this node).
function M.export(pid)
   if type(pid) ~= "number" then return pid end
   return raw.export(pid)
end

--- The local pid (a number) for a pid of this node as export marks it; v itself for anything
-- else (a number, another node's pid): one value per pid, for == and table keys.
M.unexport = raw.unexport

-- The local number of p when p is a pid of this node as it is now (dist.export's value, or
-- one that came back from another node inside an opaque term); false for a pid of an
-- earlier run of this node's name (a pid that cannot be alive); nil for another node's.
local function local_of(p)
   local node, num, serial, creation = raw.pid_info(p)
   local me, my_creation = raw.node()
   if node == nil or node ~= me then return nil end
   if creation ~= my_creation then return false end
   return serial * 16777216 + num
end

--- "<N.ID.SERIAL>" for a remote pid, N numbering its node in this process; a pid of this
-- node prints as the local one does ("<0.ID.SERIAL>").
function M.pid_tostring(p)
   local n_local = local_of(p)
   if n_local then return smarm.pid_tostring(n_local) end
   local _, num, serial, _, n = raw.pid_info(p)
   return string.format("<%d.%d.%d>", n, num, serial)
end

local function node_of(dest)
   if type(dest) == "table" then
      local node = dest[2]
      return type(node) == "string" and node or atom_name(node)
   end
   return (raw.pid_info(dest))
end

local ref_count = 0
--- A new reference of this node (an opaque term), for call tags and monitors.
function M.make_ref()
   local name, creation = raw.node()
   ref_count = ref_count + 1
   local t = smarm.now()
   local node = raw.encode(atom(name)):sub(2)
   return { [atom("$term")] = string.char(90) .. u16(3) .. node .. u32(creation)
      .. u32(ref_count % 262144) .. u32(smarm.self() % 4294967296)
      .. u32(math.floor(t * 1e6) % 4294967296) }
end

-- ---------------------------------------------------------------------------------------
-- the kernel's requests (from any actor)

local function kernel_call(req, timeout)
   if not alive() then return nil, "not_alive" end
   local tx, rx = smarm.channel()
   req.from = tx
   if not smarm.send(KERNEL, req) then return nil, "not_alive" end
   tx:release()
   local v, err = rx:recv(timeout)
   if not v then return nil, err end
   return v[1], v[2]
end

--- Connects to node (as net_kernel:connect_node). -> true | nil, err
function M.connect(node)
   if type(node) ~= "string" or not node:find("@", 1, true) then
      error("smarm.connect: a node name \"name@host\" expected, got " .. tostring(node), 2)
   end
   if node == M.node() then return true end
   if smarm.whereis(CONN .. node) then return true end
   return kernel_call({ op = "connect", node = node })
end

--- The connected nodes.
function M.nodes()
   if not alive() then return {} end
   return (kernel_call({ op = "nodes" })) or {}
end

--- A monitor of node: one notice {node = node, reason = "noconnection"} on the returned
-- receiver when the connection goes (at once if it cannot be made).
function M.monitor_node(node)
   if type(node) ~= "string" then
      error("smarm.monitor_node: a node name expected, got " .. type(node), 2)
   end
   local tx, rx = smarm.channel()
   local ok = M.connect(node)
   if not ok or not smarm.send(KERNEL, { op = "monitor_node", node = node, tx = tx }) then
      tx:send({ node = node, reason = "noconnection" })
   end
   return rx
end

-- ---------------------------------------------------------------------------------------
-- sending

local function conn_for(node)
   if smarm.whereis(CONN .. node) then return CONN .. node end
   local ok = kernel_call({ op = "connect", node = node })
   if ok then return CONN .. node end
end

local function encode_send(dest, msg)
   if type(dest) == "table" then
      local name = dest[1]
      if type(name) == "string" then name = atom(name) end
      return "p" .. raw.encode(tuple(REG_SEND, raw.export(smarm.self()), atom(""), name), msg)
   end
   return "p" .. raw.encode(tuple(SEND, atom(""), dest), msg)
end

--- smarm.send for a remote pid or {name, node}: true (delivery is not confirmed, as in
-- Erlang), or nil, "noconnection" when the node cannot be reached.
function M.send(dest, msg)
   local node = node_of(dest)
   if node == M.node() then
      if type(dest) == "table" then
         local name = dest[1]
         return smarm.send(type(name) == "string" and name or atom_name(name), msg)
      end
      local n = local_of(dest)
      if not n then return nil, "dead" end -- a pid of an earlier run of this node
      return smarm.send(n, msg)
   end
   if not alive() then return nil, "not_alive" end
   local packet = encode_send(dest, msg)
   local conn = conn_for(node)
   if not conn or not smarm.send(conn, packet) then return nil, "noconnection" end
   return true
end

-- ---------------------------------------------------------------------------------------
-- gen_server across nodes

local function is_dest(dest)
   return raw.pid_info(dest) ~= nil or (type(dest) == "table" and dest[2] ~= nil
      and (type(dest[2]) == "string" or atom_name(dest[2]) ~= nil))
end
M.is_dest = is_dest

-- For a dest of this node (a pid dist.export marked, or {name, this node}): its local pid
-- or name, or false for a pid of an earlier run of this node; nil for another node's.
local function local_dest(dest)
   if type(dest) == "table" then
      if node_of(dest) ~= M.node() then return nil end
      return type(dest[1]) == "string" and dest[1] or atom_name(dest[1])
   end
   return local_of(dest)
end

--- gen_server.call to a remote server (an OTP gen_server or a smarm-lua one): the request
-- goes as {'$gen_call', {From, Tag}, Req} from a helper actor that waits for {Tag, Reply}.
-- A server of this node named so is called through the local protocol.
-- -> reply | nil, "timeout" | "noconnection"
function M.gen_call(dest, request, timeout)
   local here = local_dest(dest)
   if here ~= nil then
      if not here then return nil, "noproc" end
      return require("smarm.gen").call(here, request, timeout or math.huge, "gen_server.call")
   end
   if not alive() then return nil, "not_alive" end
   local tx, rx = smarm.channel()
   smarm.spawn(function(to, req, reply_tx, wait)
      local s = require "smarm"
      local d = require "smarm.dist"
      local r = require "smarm.dist.raw"
      local tag = d.make_ref()
      -- the server's monitor tells a name nobody holds, a server that dies, a lost node
      local ok, mon = pcall(d.monitor, to)
      if not ok then
         reply_tx:send({ false, "noconnection" })
         return
      end
      local err
      ok, err = d.send(to, r.tuple(r.atom("$gen_call"), r.tuple(d.export(s.self()), tag), req))
      if not ok then
         reply_tx:send({ false, err })
         return
      end
      local want = tag[r.atom("$term")]
      local deadline = wait and s.now() + wait + 1
      while true do
         -- it gives up shortly after the caller (whose late reply then goes nowhere)
         local i, m = s.select({ s.inbox, mon }, deadline and math.max(0, deadline - s.now()))
         if i == nil then return end
         if i == 2 then
            local why = m and m.reason
            reply_tx:send({ false, (why == "noproc" or why == "noconnection") and why
               or "server_down" })
            return
         end
         if r.is_tuple(m) and type(m[1]) == "table" and m[1][r.atom("$term")] == want then
            reply_tx:send({ true, m[2] })
            return
         end
      end
   end, dest, request, tx, timeout)
   tx:release()
   local v, err = rx:recv(timeout)
   if not v then return nil, err == "closed" and "noconnection" or err end
   if not v[1] then return nil, v[2] end
   return v[2]
end

--- gen_server.cast to a remote server. -> true | nil, "noconnection"
function M.gen_cast(dest, msg)
   local here = local_dest(dest)
   if here ~= nil then
      if not here then return nil, "noproc" end
      return require("smarm.gen").cast(here, msg, "gen_server.cast")
   end
   return M.send(dest, tuple(atom("$gen_cast"), msg))
end

-- An OTP call or cast arriving for local dest (a pid or a name): answered through the
-- local gen_server protocol by a helper actor. Returns true if msg was one.
local GEN_CALL, GEN_CAST = atom("$gen_call"), atom("$gen_cast")
local function deliver_gen(dest, msg)
   if not is_tuple(msg) then return false end
   if msg[1] == GEN_CAST and #msg == 2 then
      require("smarm.gen").cast(dest, msg[2], "gen_server.cast")
      return true
   end
   if msg[1] ~= GEN_CALL or #msg ~= 3 or not is_tuple(msg[2]) then return false end
   local from = msg[2]
   smarm.spawn(function(to, req, caller, tag)
      local s = require "smarm"
      local gen = require "smarm.gen"
      local r = require "smarm.dist.raw"
      local ok, reply, err = pcall(gen.call, to, req, math.huge, "gen_server.call")
      if not ok or (reply == nil and err) then return end -- the caller times out, as in OTP
      s.send(caller, r.tuple(tag, reply))
   end, dest, msg[3], from[1], from[2])
   return true
end

-- ---------------------------------------------------------------------------------------
-- links and monitors of remote pids: proxies
--
-- A proxy is a local actor standing in for the remote process: it carries the remote pid as
-- its alias (raw.set_alias), so the exit signal or down notice its end produces names the
-- remote pid (sig.from == rp, down.pid == rp), as a link or monitor between local actors
-- would. The functions below are spawned, so they take everything as arguments.

-- The proxy of a link between local actor lp and remote pid rp, for a link made here and
-- for one a remote process made to lp (incoming: it links lp itself). Linked to lp, trapping
-- exits, watching lp (a link does not signal a normal end) and the connection: it ends with
-- the remote reason (lp then gets it over the link), with "noconnection" when the
-- connection goes, or tells the peer when lp ends.
local function link_proxy(lp, rp, conn, incoming)
   local s = require "smarm"
   local r = require "smarm.dist.raw"
   local d = require "smarm.dist"
   r.set_alias(rp)
   local trap = s.trap_exit(true)
   local function tell_peer(why)
      s.send(conn, "p" .. r.encode(r.tuple(3, d.export(lp), rp,
         type(why) == "string" and r.atom(why) or why)))
   end
   if incoming then
      s.link(lp)
      local dead = s.terminal_reason(lp)
      if dead then -- it ended before the link: the peer hears how
         tell_peer(dead)
         s.send(conn, { op = "unlinked", lp = lp, rp = rp })
         return
      end
   end
   local lmon = s.monitor(lp)
   local cmon = s.monitor(conn)
   while true do
      local i, v = s.select({ trap, lmon, cmon, s.inbox })
      if i == 1 or i == 2 then -- lp ended: tell the peer
         tell_peer(v.reason)
         s.send(conn, { op = "unlinked", lp = lp, rp = rp })
         return
      elseif i == 3 then
         s.exit("noconnection")
      elseif type(v) == "table" and v.op == "exit" then
         local why = r.atom_name(v.reason) or v.reason
         if why == "normal" then return end -- as between local actors: no signal
         s.exit(why)
      elseif type(v) == "table" and v.op == "unlink" then
         s.unlink(lp)
         return
      end
   end
end

-- The proxy of a monitor of remote pid (or name's atom) rp by local actor lp: lp monitors
-- it; it ends with the remote reason ("noconnection" when the connection goes), or, when lp
-- ends, asks the peer to drop the monitor (lp's demonitor does that itself). Its notice
-- names rp, or the tuple {name, node} for a monitor by name (as Erlang's 'DOWN' names
-- {Name, Node}).
local function monitor_proxy(lp, rp, ref, conn, name, node)
   local s = require "smarm"
   local r = require "smarm.dist.raw"
   local d = require "smarm.dist"
   if name then r.set_alias(name, node) else r.set_alias(rp) end
   local cmon = s.monitor(conn)
   local lmon = s.monitor(lp)
   while true do
      local i, v = s.select({ cmon, lmon, s.inbox })
      if i == 1 then s.exit("noconnection") end
      if i == 2 then -- lp ended: the peer drops the monitor
         s.send(conn, "p" .. r.encode(r.tuple(20, d.export(lp), rp, ref)))
         s.send(conn, { op = "demonitor", ref = ref })
         return
      end
      if type(v) == "table" and v.op == "demonitor" then return end -- lp told the peer
      if type(v) == "table" and v.op == "down" then
         local why = r.atom_name(v.reason) or v.reason
         s.exit(why == "normal" and "normal" or why)
      end
   end
end

-- An actor that ends at once with reason, named in its notice as remote pid a, or as the
-- tuple {a, b} when a is a name and b its node.
local function unreachable(reason, a, b)
   require("smarm.dist.raw").set_alias(a, b)
   require("smarm").exit(reason)
end

-- The proxy of a monitor of {name, node} by local actor lp where node is this node and target
-- the actor name stood for when lp asked (nil: none): it ends with target's reason ("noproc"
-- if none), named {name, node} in its notice, or quietly when lp ends or demonitors.
local function name_proxy(lp, target, name, node)
   local s = require "smarm"
   require("smarm.dist.raw").set_alias(name, node)
   if not target then s.exit("noproc") end
   local tmon = s.monitor(target)
   local lmon = s.monitor(lp)
   local i, v = s.select({ tmon, lmon, s.inbox })
   if i == 1 then
      -- it may have ended between the caller's look-up and this monitor
      s.exit(v.reason == "noproc" and s.terminal_reason(target) or v.reason)
   end
end

-- This actor's proxies (each actor has its own copy of this module): link_proxies[rp] =
-- proxy, monitor_proxies[proxy] = what its demonitor tells the connection (true for a proxy
-- of a name of this node). Entries of ended proxies are swept as they pile up.
local link_proxies, monitor_proxies = {}, {}
local proxies_count, proxies_sweep_at = 0, 64

local function note_proxy()
   proxies_count = proxies_count + 1
   if proxies_count < proxies_sweep_at then return end
   proxies_count = 0
   for rp, p in pairs(link_proxies) do
      if smarm.terminal_reason(p) then
         link_proxies[rp] = nil
      else
         proxies_count = proxies_count + 1
      end
   end
   for p in pairs(monitor_proxies) do
      if smarm.terminal_reason(p) then
         monitor_proxies[p] = nil
      else
         proxies_count = proxies_count + 1
      end
   end
   proxies_sweep_at = math.max(64, 2 * proxies_count)
end

--- smarm.link for a remote pid: idempotent, as a local link.
function M.link(rp)
   local n = local_of(rp)
   if n then return smarm.link(n) end
   if n == false then -- as a link to a dead pid
      smarm.spawn_link(unreachable, "noproc", rp)
      return true
   end
   local p = link_proxies[rp]
   if p and not smarm.terminal_reason(p) then return true end
   local conn = conn_for(node_of(rp))
   local self = smarm.self()
   if not conn then
      -- as a link to a dead pid: an exit signal from rp with reason "noconnection"
      smarm.spawn_link(unreachable, "noconnection", rp)
      return true
   end
   local proxy = smarm.spawn_link(link_proxy, self, rp, smarm.whereis(conn), false)
   link_proxies[rp] = proxy
   note_proxy()
   -- from here, so that it goes before anything this actor sends rp next
   smarm.send(conn, { op = "link", proxy = proxy, lp = self, rp = rp })
   return true
end

--- smarm.unlink for a remote pid: no signal of that link reaches this actor after it returns
-- (one already queued on a trap_exit channel stays, as in Erlang).
function M.unlink(rp)
   local n = local_of(rp)
   if n then return smarm.unlink(n) end
   local p = link_proxies[rp]
   link_proxies[rp] = nil
   if p then smarm.unlink(p) end
   local conn = smarm.whereis(CONN .. (node_of(rp) or ""))
   if conn then smarm.send(conn, { op = "unlink", lp = smarm.self(), rp = rp }) end
   return true
end

--- smarm.monitor for a remote pid or {name, node}: a monitor of a proxy whose down notice
-- names what was monitored (the remote pid, or the tuple {name, node} of two strings) and
-- carries the remote reason: "noproc" for a name nobody holds, "noconnection" when the node
-- cannot be reached or the connection goes.
function M.monitor(rp)
   local pid = raw.pid_info(rp) and rp or nil
   local name, node
   if not pid then
      name, node = rp[1], node_of(rp)
      name = type(name) == "string" and name or atom_name(name)
      if not name then
         error("smarm.monitor: {name, node} with a string or atom name expected, got a "
            .. type(rp[1]) .. " name", 2)
      end
   end
   local n = pid and local_of(pid)
   if n then return smarm.monitor(n) end
   if n == false then return select(2, smarm.spawn_monitor(unreachable, "noproc", pid)) end
   local proxy, mon
   if name and node == M.node() then
      raw.hook_demonitor()
      proxy, mon = smarm.spawn_monitor(name_proxy, smarm.self(), smarm.whereis(name), name,
         node)
      monitor_proxies[proxy] = true
      note_proxy()
      return mon
   end
   local conn = conn_for(node or node_of(pid))
   if not conn then
      return select(2, smarm.spawn_monitor(unreachable, "noconnection", pid or name, node))
   end
   local ref = M.make_ref()
   local target = pid or atom(name)
   proxy, mon = smarm.spawn_monitor(monitor_proxy, smarm.self(), target, ref,
      smarm.whereis(conn), name, node)
   monitor_proxies[proxy] = { conn = conn, target = target, ref = ref }
   note_proxy()
   -- from here, so that the request goes before anything this actor sends rp next
   smarm.send(conn, { op = "monitor", proxy = proxy, ref = ref })
   smarm.send(conn, "p" .. raw.encode(tuple(MONITOR_P, M.export(smarm.self()), target, ref)))
   return mon
end

--- Called by smarm.demonitor (lib/dist_lua.c) after it removed a monitor of pid: for a remote
-- monitor's proxy, the caller asks the peer to drop it; the proxy ends.
function M.demonitored(pid)
   local m = monitor_proxies[pid]
   if not m then return end
   monitor_proxies[pid] = nil
   if m ~= true then
      -- from here, so that the peer drops the monitor before anything this actor sends next
      smarm.send(m.conn, "p" .. raw.encode(tuple(DEMONITOR_P, M.export(smarm.self()), m.target,
         m.ref)))
      smarm.send(m.conn, { op = "demonitor", ref = m.ref })
   end
   smarm.send(pid, { op = "demonitor" })
end

-- ---------------------------------------------------------------------------------------
-- the handshake

local function send_hs(sock, body) return sock:send(u16(#body) .. body) end

local function recv_hs(sock)
   local n, err = sock:recv(2, HANDSHAKE_TIMEOUT)
   if not n then return nil, err end
   return sock:recv(get16(n, 1), HANDSHAKE_TIMEOUT)
end

local function digest(cookie, challenge)
   return raw.md5(cookie .. string.format("%u", challenge))
end

local function challenge() return math.random(0, 4294967295) end

local function name_msg(tag, flags, extra, name, creation)
   return tag .. u64(flags) .. extra .. u32(creation) .. u16(#name) .. name
end

-- Outgoing: -> true | nil, err
local function handshake_out(sock, cookie, me, creation)
   send_hs(sock, name_msg("N", FLAGS, "", me, creation))
   local st, err = recv_hs(sock)
   if not st then return nil, err end
   if st:sub(1, 1) ~= "s" or (st:sub(2) ~= "ok" and st:sub(2) ~= "ok_simultaneous") then
      return nil, "refused (" .. st:sub(2) .. ")"
   end
   local ch
   ch, err = recv_hs(sock)
   if not ch then return nil, err end
   if ch:sub(1, 1) ~= "N" or #ch < 19 then return nil, "bad challenge" end
   local theirs = get32(ch, 10)
   local mine = challenge()
   send_hs(sock, "r" .. u32(mine) .. digest(cookie, theirs))
   local ack
   ack, err = recv_hs(sock)
   if not ack then return nil, err == "closed" and "refused (wrong cookie?)" or err end
   if ack:sub(1, 1) ~= "a" or ack:sub(2) ~= digest(cookie, mine) then
      return nil, "the peer's cookie digest is wrong"
   end
   return true
end

-- Incoming: -> peer name | nil, err
local function handshake_in(sock, cookie, me, creation)
   local nm, err = recv_hs(sock)
   if not nm then return nil, err end
   if nm:sub(1, 1) ~= "N" or #nm < 15 then
      return nil, "unsupported handshake (version 6 expected)"
   end
   local nlen = get16(nm, 14)
   local peer = nm:sub(16, 15 + nlen)
   if smarm.whereis(CONN .. peer) then
      send_hs(sock, "salive")
      return nil, "already connected to " .. peer
   end
   send_hs(sock, "sok")
   local mine = challenge()
   send_hs(sock, name_msg("N", FLAGS, u32(mine), me, creation))
   local rep
   rep, err = recv_hs(sock)
   if not rep then return nil, err end
   if rep:sub(1, 1) ~= "r" or #rep ~= 21 or rep:sub(6) ~= digest(cookie, mine) then
      return nil, "connection attempt from node " .. peer .. " refused: wrong cookie"
   end
   send_hs(sock, "a" .. digest(cookie, get32(rep, 2)))
   return peer
end

-- ---------------------------------------------------------------------------------------
-- epmd

local EPMD_PORT = tonumber(os.getenv("ERL_EPMD_PORT") or "") or 4369

local function epmd_connect()
   local sock = net.connect("127.0.0.1", EPMD_PORT, 5)
   if sock then return sock end
   -- as erl does: start it
   smarm.blocking(os.execute, "epmd -daemon >/dev/null 2>&1")
   for _ = 1, 50 do
      sock = net.connect("127.0.0.1", EPMD_PORT, 5)
      if sock then return sock end
      smarm.sleep(0.1)
   end
   return nil, "cannot reach epmd on port " .. EPMD_PORT
end

-- -> sock (held open: the registration lasts as long as it), creation | nil, err
local function epmd_register(alive_name, port)
   local sock, err = epmd_connect()
   if not sock then return nil, err end
   local req = string.char(120) .. u16(port) .. string.char(77, 0) .. u16(6) .. u16(6)
      .. u16(#alive_name) .. alive_name .. u16(0)
   sock:send(u16(#req) .. req)
   local r = sock:recv(2, 5)
   if not r then return nil, "epmd did not answer" end
   if r:byte(1) == 118 then -- ALIVE2_X_RESP
      local rest = sock:recv(4, 5)
      if r:byte(2) ~= 0 or not rest then return nil, "epmd refused the name " .. alive_name end
      return sock, get32(rest, 1)
   elseif r:byte(1) == 121 then
      local rest = sock:recv(2, 5)
      if r:byte(2) ~= 0 or not rest then return nil, "epmd refused the name " .. alive_name end
      return sock, get16(rest, 1)
   end
   return nil, "epmd answered something unexpected"
end

-- The port node listens on. -> port | nil, err
local function epmd_port(host, alive_name)
   local sock, err = net.connect(host, EPMD_PORT, 5)
   if not sock then return nil, "no epmd on " .. host .. " (" .. tostring(err) .. ")" end
   local req = string.char(122) .. alive_name
   sock:send(u16(#req) .. req)
   local r = sock:recv(2, 5)
   if not r or r:byte(1) ~= 119 or r:byte(2) ~= 0 then
      sock:close()
      return nil, "no node " .. alive_name .. " on " .. host
   end
   local p = sock:recv(2, 5)
   sock:close()
   if not p then return nil, "epmd closed" end
   return get16(p, 1)
end

-- ---------------------------------------------------------------------------------------
-- a connection

local function to_local(p)
   if type(p) == "number" then return p end
   return nil
end

-- Erlang's exit(Pid, Reason) from remote process rp to local actor lp: smarm.exit(lp,
-- reason) from an actor named rp, so a trapping lp gets {from = rp, reason = reason}.
local function signal_from(rp, lp, reason)
   local s = require "smarm"
   local r = require "smarm.dist.raw"
   r.set_alias(rp)
   s.exit(lp, r.atom_name(reason) or reason)
end

-- Runs a connection after its handshake: registered as CONN .. peer until it ends.
local function run_conn(sock, peer)
   sock:setoption("nodelay", true)
   local links = {}    -- links[rp][lp] = proxy pid
   local monitors = {} -- monitors[ref bytes] = proxy pid
   local served = {}   -- served[ref bytes] = local monitor proxy for a remote watcher
   local TERM = atom("$term")
   local last_out = smarm.now()
   local out = {}
   local function flush()
      if #out == 0 then return true end
      local ok, err = sock:send(table.concat(out))
      out = {}
      last_out = smarm.now()
      if not ok then
         log("connection to %s lost (%s)", peer, tostring(err))
         return false
      end
      return true
   end
   local function queue(body)
      out[#out + 1] = u32(#body) .. body
   end
   local function control(ctl, msg)
      if msg == nil then queue("p" .. raw.encode(ctl)) else queue("p" .. raw.encode(ctl, msg)) end
   end

   local function deliver(to, msg)
      if deliver_gen(to, msg) then return end
      smarm.send(to, msg)
   end

   local function handle(body)
      if body:byte(1) ~= 112 then return end
      local ctl, pos = raw.decode(body, 2)
      if not ctl then
         log("dropped a message from %s: %s", peer, tostring(pos))
         return
      end
      local op = ctl[1]
      local msg, err
      if pos <= #body then
         msg, err = raw.decode(body, pos)
         if type(err) == "string" then
            log("dropped a message from %s: %s", peer, err)
            return
         end
      end
      if op == SEND or op == SEND_SENDER then
         local to = to_local(ctl[3])
         if to then deliver(to, msg) end
      elseif op == REG_SEND then
         local name = atom_name(ctl[4])
         if name == "net_kernel" and is_tuple(msg) and msg[1] == GEN_CALL then
            -- net_adm:ping and friends ask the peer's net_kernel: this node is up
            control(tuple(SEND, atom(""), msg[2][1]), tuple(msg[2][2], atom("yes")))
         elseif name then
            deliver(name, msg)
         end
      elseif op == LINK then
         local lp = to_local(ctl[3])
         if lp then
            local from = ctl[2]
            links[from] = links[from] or {}
            links[from][lp] = smarm.spawn(link_proxy, lp, from, smarm.self(), true)
         end
      elseif op == EXIT then -- a linked remote process ended
         local lp = to_local(ctl[3])
         local byr = links[ctl[2]]
         if lp and byr and byr[lp] then
            smarm.send(byr[lp], { op = "exit", reason = ctl[4] })
            byr[lp] = nil
         end
      elseif op == EXIT2 then -- exit(Pid, Reason): a signal from the remote process
         local lp = to_local(ctl[3])
         if lp then smarm.spawn(signal_from, ctl[2], lp, ctl[4]) end
      elseif op == UNLINK_ID then
         local lp = to_local(ctl[4])
         local byr = links[ctl[3]]
         if lp and byr and byr[lp] then
            smarm.send(byr[lp], { op = "unlink" })
            byr[lp] = nil
         end
         control(tuple(UNLINK_ID_ACK, ctl[2], ctl[4], ctl[3]))
      elseif op == MONITOR_P then
         local target = ctl[3]
         local lp = type(target) == "number" and target
            or (atom_name(target) and smarm.whereis(atom_name(target)))
         local ref = ctl[4]
         if not lp and atom_name(target) == "net_kernel" then
            return -- answered above, and up while the connection is
         elseif not lp then
            control(tuple(MONITOR_P_EXIT, target, ctl[2], ref, atom("noproc")))
         else
            served[ref[TERM]] = smarm.spawn(function(lpid, target_term, watcher, r_, conn)
               local s = require "smarm"
               local r = require "smarm.dist.raw"
               local mon = s.monitor(lpid)
               local cmon = s.monitor(conn)
               local i, v = s.select({ mon, cmon, s.inbox })
               if i == 1 then
                  local why = v.reason
                  if why == "noproc" then why = s.terminal_reason(lpid) or why end
                  s.send(conn, "p" .. r.encode(r.tuple(21, target_term, watcher, r_,
                     type(why) == "string" and r.atom(why) or why)))
               end
            end, lp, type(target) == "number" and M.export(target) or target, ctl[2], ref,
               smarm.self())
         end
      elseif op == DEMONITOR_P then
         local p = served[ctl[4][TERM]]
         served[ctl[4][TERM]] = nil
         if p then smarm.send(p, "stop") end
      elseif op == MONITOR_P_EXIT then
         local key = ctl[4][TERM]
         local p = monitors[key]
         monitors[key] = nil
         if p then smarm.send(p, { op = "down", reason = ctl[5] }) end
      end
   end

   local function local_op(m)
      if m.op == "link" then
         links[m.rp] = links[m.rp] or {}
         if not links[m.rp][m.lp] then
            control(tuple(LINK, M.export(m.lp), m.rp))
         end
         links[m.rp][m.lp] = m.proxy
      elseif m.op == "unlinked" then
         if links[m.rp] then links[m.rp][m.lp] = nil end
      elseif m.op == "unlink" then
         local p = links[m.rp] and links[m.rp][m.lp]
         if p then
            links[m.rp][m.lp] = nil
            smarm.send(p, { op = "unlink" })
            control(tuple(UNLINK_ID, math.random(1, 2 ^ 30), M.export(m.lp), m.rp))
         end
      elseif m.op == "monitor" then
         monitors[m.ref[TERM]] = m.proxy
      elseif m.op == "demonitor" then
         monitors[m.ref[TERM]] = nil
      end
   end

   local readable = sock:readable()
   local last_in = smarm.now()
   while true do
      -- wake by the next tick due, whatever else comes meanwhile
      local i, v = smarm.select({ readable, smarm.inbox },
         math.max(0, last_out + TICK - smarm.now()))
      if i == 1 then
         last_in = smarm.now()
         local hdr, err = sock:recv(4)
         if not hdr then
            if err ~= "closed" then log("connection to %s lost (%s)", peer, tostring(err)) end
            return
         end
         local n = get32(hdr, 1)
         if n > 0 then
            local body
            body, err = sock:recv(n, 60)
            if not body then
               log("connection to %s closed (%s)", peer, tostring(err))
               return
            end
            handle(body)
         end
      elseif i == 2 then
         -- drain the inbox into one write
         local m = v
         local count = 0
         repeat
            if type(m) == "string" then
               out[#out + 1] = u32(#m) .. m
            elseif type(m) == "table" then
               local_op(m)
            end
            count = count + 1
            if count >= 256 then break end
            m = smarm.recv(0)
         until m == nil
      end
      local now = smarm.now()
      if now - last_in > 4 * TICK then -- as net_ticktime: a silent peer is gone
         log("connection to %s lost (no tick for %d s)", peer, 4 * TICK)
         return
      end
      if #out == 0 and now - last_out >= TICK then out[1] = u32(0) end
      if not flush() then return end
   end
end

-- Spawned per connection: the handshake, then the connection. Incoming when sock is given
-- (peer nil), outgoing when peer is.
local function conn_actor(kernel, cookie, me, creation, sock, peer)
   local s = smarm
   local name, err
   if sock then
      name, err = handshake_in(sock, cookie, me, creation)
      if not name then
         log("%s", err)
         sock:close()
         return
      end
   else
      local host = peer:match("^[^@]+@(.+)$")
      if not host then
         err = "not a node name (name@host): " .. peer
      else
         -- an error here must still answer the callers waiting on the kernel
         local ok, port, perr = pcall(epmd_port, host, peer:match("^(.-)@"))
         if ok then err = perr else port, err = nil, port end
         if port then
            ok, sock, err = pcall(net.connect, host, port, 5)
            if not ok then sock, err = nil, sock end
         end
      end
      if sock then
         local ok
         ok, err = handshake_out(sock, cookie, me, creation)
         if not ok then sock:close() end
         if ok then name = peer end
      end
      if not name then
         s.send(kernel, { op = "failed", node = peer, err = err })
         return
      end
   end
   if not s.register("$dist:" .. name) then
      sock:close()
      if peer then s.send(kernel, { op = "failed", node = peer, err = "already connected" }) end
      return
   end
   s.send(kernel, { op = "up", node = name, pid = s.self() })
   run_conn(sock, name)
end

--- The body of a connection's actor (started by the net kernel; not for applications).
M.conn_main = conn_actor

-- ---------------------------------------------------------------------------------------
-- the net kernel

local function start_conn(...)
   return require("smarm.dist").conn_main(...)
end

local function kernel(ready, me, cookie, alive_name)
   local s = smarm
   local server, err = net.listen("*", 0)
   if not server then
      ready:send({ nil, "cannot listen: " .. tostring(err) })
      return
   end
   local epmd, creation = epmd_register(alive_name, server:port())
   if not epmd then
      ready:send({ nil, creation })
      return
   end
   raw.set_node(me, creation)
   s.register("$dist")
   ready:send({ true })
   local conns, waiting, node_mons, pending = {}, {}, {}, {}
   local function reply_all(node, ...)
      for _, tx in ipairs(waiting[node] or {}) do tx:send({ ... }) end
      waiting[node] = nil
   end
   local acceptable = server:acceptable()
   local watch = {}
   while true do
      local arms = { acceptable, s.inbox }
      local owners = {}
      for node, mon in pairs(watch) do
         arms[#arms + 1] = mon
         owners[#arms] = node
      end
      local i, v = s.select(arms)
      if i == 1 then
         local sock = server:accept()
         if sock then s.spawn(start_conn, s.self(), cookie, me, creation, sock, nil) end
      elseif i == 2 then
         local m = v
         if m.op == "connect" then
            if conns[m.node] then
               m.from:send({ true })
            else
               waiting[m.node] = waiting[m.node] or {}
               table.insert(waiting[m.node], m.from)
               if not pending[m.node] then
                  pending[m.node] = true
                  s.spawn(start_conn, s.self(), cookie, me, creation, nil, m.node)
               end
            end
         elseif m.op == "up" then
            conns[m.node] = m.pid
            watch[m.node] = s.monitor(m.pid)
            pending[m.node] = nil
            reply_all(m.node, true)
            require("smarm.dist_pg").nodeup(m.node) -- the pg scope discovers the peer's
         elseif m.op == "failed" then
            pending[m.node] = nil
            reply_all(m.node, nil, m.err)
         elseif m.op == "nodes" then
            local list = {}
            for node in pairs(conns) do list[#list + 1] = node end
            table.sort(list)
            m.from:send({ list })
         elseif m.op == "monitor_node" then
            if conns[m.node] then
               node_mons[m.node] = node_mons[m.node] or {}
               table.insert(node_mons[m.node], m.tx)
            else
               m.tx:send({ node = m.node, reason = "noconnection" })
            end
         end
      elseif owners[i] then
         local node = owners[i]
         conns[node], watch[node] = nil, nil
         for _, tx in ipairs(node_mons[node] or {}) do
            tx:send({ node = node, reason = "noconnection" })
         end
         node_mons[node] = nil
      end
   end
end

--- The body of the net kernel's actor (started by start; not for applications).
M.kernel_main = kernel

local function short_host()
   local h = io.popen and io.popen("hostname 2>/dev/null")
   local name = h and h:read("*l")
   if h then h:close() end
   return (name or "localhost"):match("^[^.]+")
end

local function read_cookie()
   local home = os.getenv("HOME") or "."
   local path = home .. "/.erlang.cookie"
   local f = io.open(path, "r")
   if f then
      local c = f:read("*l")
      f:close()
      if c and c ~= "" then return c end
   end
   -- as erl does: a random cookie of 20 capital letters, readable by the owner only
   local t = {}
   for k = 1, 20 do t[k] = string.char(math.random(65, 90)) end
   local c = table.concat(t)
   f = io.open(path, "w")
   if not f then return c end
   f:write(c)
   f:close()
   os.execute("chmod 400 '" .. path:gsub("'", "'\\''") .. "'")
   return c
end

--- Makes this node alive. opts: name ("name" or "name@host"), longnames (bool), cookie
-- (default: ~/.erlang.cookie, created if missing). -> true | nil, err
function M.start(opts)
   if alive() then return nil, "already alive" end
   math.randomseed(os.time() + smarm.self() + math.floor(smarm.now() * 1e6) % 1000000)
   local name = opts.name
   local alive_name, host = name:match("^(.-)@(.+)$")
   if not alive_name then
      alive_name = name
      host = opts.longnames and "127.0.0.1" or short_host()
   end
   if alive_name == "" then return nil, "empty node name" end
   if not opts.longnames and host:find(".", 1, true) then
      return nil, "--sname host parts have no dots (use --name)"
   end
   local cookie = opts.cookie or smarm.blocking(read_cookie)
   local tx, rx = smarm.channel()
   smarm.spawn(function(...) return require("smarm.dist").kernel_main(...) end, tx,
      alive_name .. "@" .. host, cookie, alive_name)
   tx:release()
   local v, err = rx:recv(30)
   if not v then return nil, err end
   if not v[1] then return nil, v[2] end
   -- the pg scope, so that process groups are seen across nodes
   return require("smarm.dist_pg").start()
end

--- The command line's --sname/--name/--cookie: starts the node or exits with status 1.
function M.start_cli(name, longnames, cookie)
   local ok, err = M.start({ name = name, longnames = longnames, cookie = cookie })
   if not ok then
      io.stderr:write("smarm-lua: cannot start the node " .. name .. ": " .. tostring(err) .. "\n")
      os.exit(1)
   end
end

return M
