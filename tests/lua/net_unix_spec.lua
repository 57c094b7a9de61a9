-- smarm.net's Unix stream sockets: listen on a path (mode 0600), connect, echo, the paths
-- that are refused (a symlink, a file that is no socket, a socket in use) and the stale
-- socket of this user that is taken over, and bad arguments. Every wait is bounded.
local smarm = require "smarm"
local net = require "smarm.net"

local T = 5

local function fresh_dir()
   local base = os.tmpname()
   os.remove(base)
   assert(os.execute("mkdir -m 700 " .. base) == 0)
   return base
end

local function mode_of(path)
   local p = io.popen("stat -c %a " .. path)
   local m = p:read("*l")
   p:close()
   return m
end

describe("smarm.net Unix sockets", function()
   local dir
   before_each(function() dir = fresh_dir() end)
   after_each(function() os.execute("rm -rf " .. dir) end)

   it("listens with mode 0600, accepts, connects and echoes", function()
      local path = dir .. "/echo.sock"
      local srv = assert(net.listen_unix(path))
      assert.equals("600", mode_of(path))
      smarm.spawn(function(s)
         local c = s:accept(5)
         local line = c:recv("*l", 5)
         c:send("echo " .. line .. "\n")
         c:close()
      end, srv)
      local c = assert(net.connect_unix(path))
      assert.is_true(c:send("hello\n", T))
      assert.equals("echo hello", c:recv("*l", T))
      c:close()
   end)

   it("refuses a symbolic link and leaves its target alone", function()
      local path = dir .. "/link.sock"
      assert(os.execute("ln -s " .. dir .. "/target.sock " .. path) == 0)
      local srv, err = net.listen_unix(path)
      assert.is_nil(srv)
      assert.truthy(err:find("symbolic link", 1, true))
      assert.is_nil(io.open(dir .. "/target.sock"))
   end)

   it("refuses a path that is not a socket", function()
      local path = dir .. "/plain"
      io.open(path, "w"):close()
      local srv, err = net.listen_unix(path)
      assert.is_nil(srv)
      assert.truthy(err:find("not a socket", 1, true))
   end)

   it("refuses a socket something listens on, and takes over a stale one", function()
      local path = dir .. "/busy.sock"
      local first = assert(net.listen_unix(path))
      local srv, err = net.listen_unix(path)
      assert.is_nil(srv)
      assert.truthy(err:find("in use", 1, true))
      first:close()
      local again = assert(net.listen_unix(path))
      again:close()
   end)

   it("answers a connect to no socket with an error value", function()
      local c, err = net.connect_unix(dir .. "/none.sock")
      assert.is_nil(c)
      assert.is_string(err)
   end)

   it("raises on bad arguments", function()
      assert.has_error(function() net.listen_unix(42) end)
      assert.has_error(function() net.listen_unix("") end)
      assert.has_error(function() net.listen_unix(string.rep("x", 200)) end)
      assert.has_error(function() net.connect_unix(nil) end)
   end)
end)
