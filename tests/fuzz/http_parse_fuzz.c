/* http_parse_fuzz: libFuzzer target for smarm.http_parse, the LPeg grammars of HTTP/1.1
 * request heads, chunked bodies, response heads and URLs. Whatever bytes arrive, each parser
 * answers in its documented shape (a value and the position after it, "need more" or a
 * status/error) and never raises; a head it accepts is never refused when it arrives in two
 * pieces (a valid prefix is never a 400), and a chunked body decodes to the same bytes
 * whole or split.
 *
 * The parser is Lua: the module's source embedded in the runtime (smarm_embedded_modules)
 * runs in one plain LuaJIT state, with Debian's lpeg.so loaded through package.cpath
 * (dlopen works here: the fuzzer, like smarm-lua, is linked with -Wl,-E, so lpeg.so
 * resolves lua_* against LuaJIT inside the executable). Neither LuaJIT nor lpeg.so is
 * instrumented, so libFuzzer would see almost no coverage; a line hook feeds the Lua
 * lines that ran (source, line and the previous line: a crude edge) into libFuzzer's extra
 * counters instead.
 * Build: ./configure.py --flavour fuzz && ninja -f build-fuzz/build.ninja */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <luajit.h>
#include <lualib.h>

#include "smarm_embedded.h"

#define COUNTERS 65536
__attribute__((section("__libfuzzer_extra_counters"))) static uint8_t counters[COUNTERS];

static lua_State *L;
static int check_ref;
static uintptr_t prev_site;

__attribute__((noreturn)) static void die(const char *what, const char *err)
{
    fprintf(stderr, "http_parse_fuzz: %s%s%s\n", what, err ? ": " : "", err ? err : "");
    abort();
}

/* Counts (previous line, this line) pairs of the parser's own source. */
static void line_hook(lua_State *S, lua_Debug *ar)
{
    if (lua_getinfo(S, "S", ar) == 0 || ar->source == NULL)
        return;
    uintptr_t site = (uintptr_t)ar->source * 31u + (uintptr_t)ar->currentline;
    uintptr_t edge = (site ^ (prev_site >> 1)) * 2654435761u;
    prev_site = site;
    uint8_t *c = &counters[edge % COUNTERS];
    if (*c != 255)
        (*c)++;
}

static const struct smarm_embedded_module *find_module(const char *name)
{
    for (const struct smarm_embedded_module *m = smarm_embedded_modules; m->name; m++)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}

/* The checks, in Lua: check(bytes) raises on any answer outside the contract. */
static const char CHECK[] =
    "local parse = ...\n"
    "local STATUS = {[400] = true, [431] = true, [501] = true, [505] = true}\n"
    "local function flat(req, x)\n"
    "   if not req then return tostring(x) end\n"
    "   local t = {tostring(x)}\n"
    "   for k, v in pairs(req) do if k ~= 'headers' then t[#t + 1] = k .. '=' .. tostring(v) end "
    "end\n"
    "   for k, v in pairs(req.headers) do t[#t + 1] = 'h.' .. tostring(k) .. '=' .. v end\n"
    "   table.sort(t)\n"
    "   return table.concat(t, '\\n')\n"
    "end\n"
    "local function head_ok(s, pos, max)\n"
    "   local req, x = parse.request_head(s, pos, max)\n"
    "   -- the line-by-line fast path answers as the whole grammar does\n"
    "   assert(flat(req, x) == flat(parse.request_head(s, pos, max, true)), 'fast path differs')\n"
    "   -- asked again, a head the fast path answered comes from the heads kept whole\n"
    "   assert(flat(req, x) == flat(parse.request_head(s, pos, max)), 'kept head differs')\n"
    "   if req == nil then\n"
    "      assert(x == nil or STATUS[x], 'request_head: bad status ' .. tostring(x))\n"
    "      return nil, x\n"
    "   end\n"
    "   assert(type(req) == 'table' and type(x) == 'number', 'request_head: bad answer')\n"
    "   assert(x > pos and x <= #s + 1 and x - pos <= max, 'request_head: bad next')\n"
    "   assert(type(req.method) == 'string' and parse.is_token(req.method), 'method')\n"
    "   assert(type(req.path) == 'string' and #req.path > 0, 'path')\n"
    "   assert(type(req.query) == 'string', 'query')\n"
    "   assert(req.version == 1.0 or req.version == 1.1, 'version')\n"
    "   assert(req.headers[false] == nil, 'duplicate marker left in headers')\n"
    "   for k, v in pairs(req.headers) do\n"
    "      assert(type(k) == 'string' and k == k:lower() and parse.is_token(k), 'name')\n"
    "      assert(type(v) == 'string' and not v:find('[\\r\\n%z]'), 'value')\n"
    "   end\n"
    "   assert(not (req.chunked and req.length), 'both framings')\n"
    "   assert(req.length == nil or req.length >= 0, 'length')\n"
    "   return req, x\n"
    "end\n"
    "local function chunked_ok(s, pos, max)\n"
    "   local body, x, consumed = parse.chunked(parse.chunked_state(), s, pos, max)\n"
    "   if body then\n"
    "      assert(type(body) == 'string' and #body <= max, 'chunked: body')\n"
    "      assert(x > pos and x <= #s + 1, 'chunked: next')\n"
    "      -- the same body when it arrives in two pieces\n"
    "      local cut = pos + (#body * 7 + #s) % (x - pos)\n"
    "      local st = parse.chunked_state()\n"
    "      local b2, e2, c2 = parse.chunked(st, s:sub(1, cut - 1), pos, max)\n"
    "      if b2 == nil then\n"
    "         assert(e2 == nil, 'chunked: a prefix was refused: ' .. tostring(e2))\n"
    "         b2 = parse.chunked(st, s:sub(c2), 1, max)\n"
    "      end\n"
    "      assert(b2 == body, 'chunked: split input decodes differently')\n"
    "   elseif x ~= nil then\n"
    "      assert(x == 400 or x == 413, 'chunked: bad status ' .. tostring(x))\n"
    "   else\n"
    "      assert(consumed >= pos and consumed <= #s + 1, 'chunked: bad consumed')\n"
    "   end\n"
    "   return body, x\n"
    "end\n"
    "return function(s)\n"
    "   local max = 8192\n"
    "   local pos = 1\n"
    "   for _ = 1, 8 do\n"
    "      local req, x = head_ok(s, pos, max)\n"
    "      if not req then break end\n"
    "      -- every prefix of an accepted head needs more bytes, never a refusal\n"
    "      local step = x - pos > 256 and math.floor((x - pos) / 64) or 1\n"
    "      for cut = pos, x - 2, step do\n"
    "         local r2, e2 = parse.request_head(s:sub(1, cut), pos, max)\n"
    "         assert(r2 == nil and e2 == nil,\n"
    "                'request_head: a prefix of a valid head gave ' .. tostring(e2))\n"
    "      end\n"
    "      pos = x\n"
    "      if req.chunked then\n"
    "         local body, y = chunked_ok(s, pos, 65536)\n"
    "         if not body then break end\n"
    "         pos = y\n"
    "      elseif req.length then\n"
    "         pos = pos + math.min(req.length, #s)\n"
    "      end\n"
    "      if pos > #s then break end\n"
    "   end\n"
    "   chunked_ok(s, 1, 1024)\n"
    "   local resp, y = parse.response_head(s, 1, max)\n"
    "   if resp then\n"
    "      assert(resp.status >= 100 and resp.status <= 999 and y > 1, 'response_head')\n"
    "   else\n"
    "      assert(y == nil or type(y) == 'string', 'response_head: bad error')\n"
    "   end\n"
    "   local host, port, target = parse.url(s)\n"
    "   if host then\n"
    "      assert(port >= 1 and port <= 65535 and target:sub(1, 1) == '/', 'url')\n"
    "   end\n"
    "   parse.has_token(s, 'close')\n"
    "   parse.is_field_value(s)\n"
    "end\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    L = luaL_newstate();
    if (L == NULL)
        die("luaL_newstate failed", NULL);
    luaL_openlibs(L);
    /* Debian's lua-lpeg, where smarm-lua finds it too */
    if (luaL_dostring(L, "package.cpath = '/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;' .. "
                         "package.cpath; require 'lpeg'") != 0)
        die("cannot load lpeg (install lua-lpeg)", lua_tostring(L, -1));
    const struct smarm_embedded_module *m = find_module("smarm.http_parse");
    if (m == NULL)
        die("smarm.http_parse is not embedded", NULL);
    if (luaL_loadbuffer(L, m->source, m->len, "@lua/smarm/http_parse.lua") != 0 ||
        lua_pcall(L, 0, 1, 0) != 0)
        die("loading smarm.http_parse", lua_tostring(L, -1));
    if (luaL_loadbuffer(L, CHECK, sizeof CHECK - 1, "=check") != 0)
        die("loading the checks", lua_tostring(L, -1));
    lua_insert(L, -2);
    if (lua_pcall(L, 1, 1, 0) != 0)
        die("running the checks' chunk", lua_tostring(L, -1));
    check_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    /* The JIT would run traces without line events; the hook needs the interpreter. */
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    prev_site = 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, check_ref);
    lua_pushlstring(L, (const char *)data, len);
    if (lua_pcall(L, 1, 0, 0) != 0)
        die("contract broken", lua_tostring(L, -1));
    lua_settop(L, 0);
    /* a full collection now and then keeps the state's memory flat over a long run */
    static unsigned runs;
    if (++runs % 4096 == 0)
        lua_gc(L, LUA_GCCOLLECT, 0);
    return 0;
}
