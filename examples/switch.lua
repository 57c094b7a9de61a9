-- The Switch machine (examples/lib/switch_machine.lua) run as a gen_statem: flip it on,
-- send an event that keeps the state, flip it off, and check the end state.
--   build/smarm-lua examples/switch.lua
local gen_statem = require "smarm.gen_statem"

local sw = assert(gen_statem.start("lib.switch_machine", nil, { name = "switch" }))
gen_statem.cast("switch", "flip") -- off -> on: an enter call, a flip
gen_statem.cast("switch", "stay") -- stays on: no enter call
gen_statem.cast("switch", "flip") -- on -> off: an enter call
local s = assert(gen_statem.call("switch", "get"))
print(string.format("state=%s flips=%d enters=%d", s.state, s.flips, s.enters))
assert(s.state == "off" and s.flips == 1 and s.enters == 3, "unexpected end state")
gen_statem.stop(sw)
