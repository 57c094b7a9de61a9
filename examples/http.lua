-- http: an HTTP server under a supervisor. "/" answers hello, "/json" answers JSON
-- (GET) or echoes a JSON object (POST); the handler is examples/lib/http_app.lua.
-- Usage: smarm-lua examples/http.lua [port]   (default 8080; 0 picks a free port)
-- It serves until Ctrl-C (or SIGTERM), which stops the supervisor and the server.
local smarm = require "smarm"
local http = require "smarm.http"
local supervisor = require "smarm.supervisor"

local port = tonumber(arg[1] or "8080")
if not port or port % 1 ~= 0 or port < 0 or port > 65535 then
   error("port must be an integer from 0 to 65535, got " .. tostring(arg[1]), 0)
end

local sup = assert(supervisor.start_link({
   strategy = "one_for_one",
   children = {
      { id = "web", start = { "smarm.http", "run", {
         host = "127.0.0.1", port = port, handler = "lib.http_app", name = "web",
      } } },
   },
}))
print(("http: listening on http://127.0.0.1:%d/ (supervisor %s)"):format(
   assert(http.port("web")), smarm.pid_tostring(sup)))
io.stdout:flush()

-- the root waits; the first SIGINT/SIGTERM shuts it down, and its linked supervisor
-- with it
smarm.recv()
