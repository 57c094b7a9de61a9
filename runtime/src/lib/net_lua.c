/* The C half of smarm.net as a module (package.preload["smarm.net.raw"]): the constructors,
 * name resolution and the checks lua/smarm/net.lua builds on. The objects are in
 * net_obj.c, TCP in net_tcp.c, UDP in net_udp.c. */
#include "lib/net_lua.h"

#include <errno.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "io/sock.h"
#include "lib/net_obj.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* ---- names ---- */

/* raw.resolve(name) -> {address, ...} | nil, err. getaddrinfo blocks: net.lua runs this on a
 * pool thread when it can, and skips it for literals. */
static int l_resolve(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(name, NULL, &hints, &res);
    if (rc != 0)
        return net_push_fail(L, rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    /* copy out first: a Lua memory error must not leak the list */
    char addrs[16][64];
    int n = 0;
    for (struct addrinfo *ai = res; ai && n < 16; ai = ai->ai_next) {
        int port;
        if (io_addr_format(ai->ai_addr, addrs[n], &port) != 0)
            continue;
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= strcmp(addrs[i], addrs[n]) == 0;
        n += !dup;
    }
    freeaddrinfo(res);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushstring(L, addrs[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* raw.is_literal(host) -> whether host is an IPv4/IPv6 literal (or "*") */
static int l_is_literal(lua_State *L)
{
    struct sockaddr_storage sa;
    lua_pushboolean(L, io_addr_parse(luaL_checkstring(L, 1), 0, &sa) != 0);
    return 1;
}

static int l_check_port(lua_State *L)
{
    net_check_port(L, 1, luaL_checkstring(L, 2));
    return 0;
}

static const luaL_Reg raw_funcs[] = {
    {"listen", net_l_listen},
    {"connect", net_l_connect},
    {"udp", net_l_udp},
    {"listen_unix", net_l_listen_unix},
    {"connect_unix", net_l_connect_unix},
    {"adopt_stream", net_l_adopt_stream},
    {"resolve", l_resolve},
    {"is_literal", l_is_literal},
    {"check_port", l_check_port},
    {NULL, NULL},
};

int net_lua_open(lua_State *L)
{
    lua_createtable(L, 0, 8);
    for (const luaL_Reg *r = raw_funcs; r->name; r++) {
        lua_pushcfunction(L, r->func);
        lua_setfield(L, -2, r->name);
    }
    return 1;
}

LUA_UNWOUND_END
