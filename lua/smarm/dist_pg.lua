--- smarm.dist_pg: smarm.pg groups across nodes, speaking OTP's pg protocol (OTP 23+).
--
-- A distributed node runs one scope actor registered "pg", as OTP's default scope is, so a
-- BEAM node's pg (and another smarm-lua node's scope) reaches it as {pg, Node}. The local
-- groups stay in the runtime's C table (smarm.pg's fast path); when the node is
-- distributed, smarm.pg.join/leave also tell the scope, which tells every peer scope, and
-- smarm.pg.members asks the scope for the members on other nodes.
--
-- The protocol, between scopes: on a new connection a scope sends {discover, Self} to
-- {pg, Node}; a scope that hears discover casts {sync, Self, [{Group, Pids}]} (a
-- gen_server cast: {'$gen_cast', {sync, ...}}, as OTP's scope takes it) with its
-- local memberships, and, for a peer it did not know, monitors it and sends discover back.
-- Joins and leaves go to every known peer as {join, Self, Group, Pids} and
-- {leave, Self, Pids, Groups}. A peer scope that goes (or whose node does) takes its
-- members with it. Group names are atoms on the wire: the Lua string "workers" is the atom
-- workers; groups that are not atoms on another node are not visible here.
local smarm = require "smarm"

local M = {}

local SCOPE = "pg"

-- Called by smarm.pg.join (C) after a local join, when the node is distributed.
function M.joined(group, pid)
   smarm.send(SCOPE, { op = "join", group = group, pid = pid })
end

-- Called by smarm.pg.leave (C) after a local leave removed a membership.
function M.left(group, pid)
   smarm.send(SCOPE, { op = "leave", group = group, pid = pid })
end

-- Called by smarm.pg.members (C): appends the members on other nodes to list t.
function M.members(group, t)
   if smarm.whereis(SCOPE) == smarm.self() then return t end
   local tx, rx = smarm.channel()
   if not smarm.send(SCOPE, { op = "members", group = group, tx = tx }) then return t end
   tx:release()
   local remote = rx:recv(5)
   for _, p in ipairs(remote or {}) do t[#t + 1] = p end
   return t
end

-- Called by the net kernel when a connection to node comes up.
function M.nodeup(node)
   smarm.send(SCOPE, { op = "nodeup", node = node })
end

local function scope_main(ready)
   local s = require "smarm"
   local d = require "smarm.dist"
   local r = require "smarm.dist.raw"
   local atom, tuple, is_tuple, atom_name = r.atom, r.tuple, r.is_tuple, r.atom_name
   local tag = require("smarm.gen").TAG
   if not s.register(SCOPE) then
      ready:send({ nil, "the name " .. SCOPE .. " is taken" })
      return
   end
   ready:send({ true })
   local me = d.export(s.self())
   local A_DISCOVER, A_SYNC = atom("discover"), atom("sync")
   local A_JOIN, A_LEAVE, A_CAST = atom("join"), atom("leave"), atom("$gen_cast")
   local groups = {}  -- groups[name] = array of local pids, one per membership
   local watched = {} -- watched[local pid] = true while a monitor of it is on downs
   -- the local members' down notices (shared monitors); its tx is kept so that it stays open
   local chan = { s.channel() }
   local downs = chan[2]
   local peers = {}   -- peers[peer scope] = { mon = mon, groups = { [name] = array of pids } }

   local function broadcast(msg)
      for peer in pairs(peers) do s.send(peer, msg) end
   end
   local function exported(pids)
      local t = {}
      for k, p in ipairs(pids) do t[k] = d.export(p) end
      return t
   end
   local function all_local()
      local t = {}
      for name, pids in pairs(groups) do
         if #pids > 0 then t[#t + 1] = tuple(atom(name), exported(pids)) end
      end
      return t
   end
   local function remove_one(list, p)
      for k = #list, 1, -1 do
         if list[k] == p then
            table.remove(list, k)
            return true
         end
      end
      return false
   end
   local function pid_list(v) -- a pid or a list of pids
      if type(v) == "table" and not is_tuple(v) then return v end
      return { v }
   end
   local function add_peer(peer)
      if not peers[peer] then peers[peer] = { mon = s.monitor(peer), groups = {} } end
      return peers[peer]
   end
   local function discover(peer)
      -- OTP's scope takes sync as a gen_server cast
      s.send(peer, tuple(A_CAST, tuple(A_SYNC, me, all_local())))
      if not peers[peer] then
         add_peer(peer)
         s.send(peer, tuple(A_DISCOVER, me))
      end
   end

   local function local_op(m)
      if m.op == "join" then
         local list = groups[m.group] or {}
         groups[m.group] = list
         list[#list + 1] = m.pid
         if not watched[m.pid] then
            watched[m.pid] = true
            s.monitor(m.pid, downs)
         end
         broadcast(tuple(A_JOIN, me, atom(m.group), { d.export(m.pid) }))
      elseif m.op == "leave" then
         if groups[m.group] and remove_one(groups[m.group], m.pid) then
            broadcast(tuple(A_LEAVE, me, { d.export(m.pid) }, { atom(m.group) }))
         end
      elseif m.op == "down" then -- a local member ended: all its memberships go
         watched[m.pid] = nil
         local left = {}
         for name, list in pairs(groups) do
            while remove_one(list, m.pid) do left[#left + 1] = atom(name) end
         end
         if #left > 0 then broadcast(tuple(A_LEAVE, me, { d.export(m.pid) }, left)) end
      elseif m.op == "nodeup" then
         s.send({ SCOPE, m.node }, tuple(A_DISCOVER, me))
      elseif m.op == "members" then
         local t = {}
         for _, peer in pairs(peers) do
            for _, p in ipairs(peer.groups[m.group] or {}) do t[#t + 1] = p end
         end
         m.tx:send(t)
      end
   end

   local function remote_op(m)
      local op, peer = m[1], m[2]
      if op == A_DISCOVER then
         discover(peer)
      elseif op == A_SYNC then
         local known = add_peer(peer)
         known.groups = {}
         for _, g in ipairs(type(m[3]) == "table" and m[3] or {}) do
            local name = is_tuple(g) and atom_name(g[1])
            if name then
               local list = {}
               for k, p in ipairs(pid_list(g[2])) do list[k] = p end
               known.groups[name] = list
            end
         end
      elseif op == A_JOIN then
         local known, name = peers[peer], atom_name(m[3])
         if known and name then
            local list = known.groups[name] or {}
            known.groups[name] = list
            for _, p in ipairs(pid_list(m[4])) do list[#list + 1] = p end
         end
      elseif op == A_LEAVE then
         local known = peers[peer]
         if known then
            for _, g in ipairs(pid_list(m[4])) do
               local list = known.groups[atom_name(g) or ""]
               if list then
                  for _, p in ipairs(pid_list(m[3])) do remove_one(list, p) end
               end
            end
         end
      end
   end

   while true do
      local arms, owners = { s.inbox, downs }, {}
      for peer, known in pairs(peers) do
         arms[#arms + 1] = known.mon
         owners[#arms] = peer
      end
      local i, m = s.select(arms)
      if i == 1 then
         -- a cast ({'$gen_cast', {sync, ...}}) arrives through the local cast protocol
         if type(m) == "table" and m[tag] == "cast" then m = m.msg end
         if is_tuple(m) then
            remote_op(m)
         elseif type(m) == "table" and m.op then
            local_op(m)
         end
      elseif i == 2 and m then
         local_op({ op = "down", pid = m.pid })
      elseif owners[i] then
         peers[owners[i]] = nil -- the peer scope (or its node) went: its members go
      end
   end
end

--- The body of the scope's actor (started by start; not for applications).
M.scope_main = scope_main

--- Starts the scope (the node's start does). -> true | nil, err
function M.start()
   local tx, rx = smarm.channel()
   smarm.spawn(function(...) return require("smarm.dist_pg").scope_main(...) end, tx)
   tx:release()
   local v, err = rx:recv(10)
   if not v then return nil, err end
   return v[1], v[2]
end

return M
