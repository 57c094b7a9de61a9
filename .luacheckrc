-- luacheck configuration (Debian's lua-check); run by scripts/test.
std = "luajit"
max_line_length = 100
codes = true

files["tests/lua"] = { std = "+busted" }
