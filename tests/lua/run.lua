-- Runs the busted specs inside smarm-lua: this file is the root actor, so every
-- spec runs in an actor and can spawn, send and receive.
--   build/smarm-lua tests/lua/run.lua [busted options] [paths]
package.path = "/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;" .. package.path
require "busted.runner"({ standalone = false })
