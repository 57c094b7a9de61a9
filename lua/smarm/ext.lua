--- Transitional: the runtime loads the Lua half of the smarm table by this name
-- (runtime/src/lualib.c); the module is smarm.introspection.
return require "smarm.introspection"
