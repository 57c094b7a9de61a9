-- The Date header of smarm.http's answers: an IMF-fixdate (RFC 9110 section 5.6.7) of the
-- second the request's bytes were read, on every answer of a keep-alive connection, and a
-- new one once the second has changed (the line is made once per second and kept; the
-- connection's loop tests the second inline). Every wait is bounded.
local smarm = require "smarm"
local http = require "smarm.http"
local keepalive = require "support.keepalive"

-- A keep-alive client on one connection: get() -> the Date header of an answer to GET /
local function client(port)
   local get_answer, sock = keepalive.client(port)
   local function get()
      local status, headers = get_answer("/")
      assert(status == 200, status)
      return headers.date
   end
   return get, sock
end

local IMF = "^%a%a%a, %d%d %a%a%a %d%d%d%d %d%d:%d%d:%d%d GMT$"
local function imf(t) return os.date("!%a, %d %b %Y %H:%M:%S GMT", t) end

describe("smarm.http Date header", function()
   it("is the current second's IMF-fixdate and changes with the second", function()
      local server = assert(http.serve({ port = 0, handler = "support.http_traces" }))
      local get, sock = client(server:port())
      -- enough requests for the connection's loop to compile (its trace holds the test)
      for _ = 1, 300 do
         local t0 = os.time()
         local date = get()
         local t1 = os.time()
         assert.is_string(date)
         assert(date:match(IMF), "not an IMF-fixdate: " .. date)
         assert(date == imf(t0) or date == imf(t1),
            string.format("Date %s is not of %s..%s", date, imf(t0), imf(t1)))
      end
      -- the next second: the same connection's answers carry it (within 3 s)
      local first = get()
      local until_t = smarm.now() + 3
      local later
      repeat
         smarm.sleep(0.05)
         later = get()
      until later ~= first or smarm.now() > until_t
      assert.are_not.equal(first, later, "the Date header stayed " .. first)
      local t = os.time()
      assert(later == imf(t) or later == imf(t - 1), "Date " .. later .. " is not of now")
      sock:close()
      server:close()
   end)
end)
