--- The Switch machine of examples/lib/switch_machine.lua, loaded from there for the specs.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
return dofile(here .. "../../../examples/lib/switch_machine.lua")
