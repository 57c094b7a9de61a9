/* UDP in smarm.net: sockets bound or not (an unbound one is IPv6 and reaches IPv4 too),
 * sendto and recvfrom. */
#include "lib/net_obj.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/sanitize.h"
#include "base/netpoll.h"
#include "io/sock.h"
#include "lib/args.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

#define UDP_MAX 65536 /* the largest datagram */

/* ---- UDP ---- */

/* raw.udp([address, port]) -> u | nil, err: bound to address:port if given, else an unbound
 * IPv6 socket that also reaches IPv4 (an IPv4 one where IPv6 is missing) */
int net_l_udp(lua_State *L)
{
    struct sockaddr_storage sa;
    socklen_t len = 0;
    if (!lua_isnoneornil(L, 1))
        len = net_check_addr(L, 1, "net.udp", &sa);
    net_obj *o = net_new_obj(L, IO_UDP);
    int family = len ? sa.ss_family : AF_INET6;
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && !len && errno == EAFNOSUPPORT)
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || net_attach(o, fd) != 0)
        return net_push_fail(L, fd < 0 ? strerror(errno) : "out of memory");
    if (!len) {
        int zero = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    } else if (bind(fd, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;
        net_close_obj(o);
        return net_push_fail(L, strerror(e));
    }
    return 1;
}

/* An IPv4 destination for an IPv6 socket becomes IPv4-mapped. */
static socklen_t map_to_family(int fd, struct sockaddr_storage *sa, socklen_t len)
{
    struct sockaddr_storage me;
    socklen_t mlen = sizeof me;
    if (sa->ss_family != AF_INET || getsockname(fd, (struct sockaddr *)&me, &mlen) != 0 ||
        me.ss_family != AF_INET6)
        return len;
    struct sockaddr_in v4 = *(struct sockaddr_in *)sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)sa;
    memset(v6, 0, sizeof *v6);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = v4.sin_port;
    v6->sin6_addr.s6_addr[10] = v6->sin6_addr.s6_addr[11] = 0xff;
    memcpy(&v6->sin6_addr.s6_addr[12], &v4.sin_addr, 4);
    return sizeof *v6;
}

static int sendto_try(lua_State *L, int base, net_obj *o, unsigned *ev)
{
    if (!o->s)
        return net_push_fail(L, "closed");
    size_t n;
    const char *p = lua_tolstring(L, base + 1, &n);
    struct sockaddr_storage sa;
    socklen_t len = io_addr_parse(lua_tostring(L, base + 2), (int)lua_tointeger(L, base + 3), &sa);
    len = map_to_family(o->s->fd, &sa, len);
    for (;;) {
        if (sendto(o->s->fd, p, n, MSG_NOSIGNAL, (struct sockaddr *)&sa, len) >= 0) {
            lua_pushboolean(L, 1);
            return 1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *ev = NETPOLL_WRITE;
            return -1;
        }
        return net_push_fail(L, io_err_name(errno));
    }
}

static const net_op sendto_op = {sendto_try, net_fail_plain};

/* u:sendto(data, address, port) -> true | nil, err: one datagram (address: a literal) */
static int l_sendto(lua_State *L)
{
    net_obj *o = net_check_obj(L, 1, IO_UDP, "u:sendto");
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "u:sendto: data must be a string, got %s", luaL_typename(L, 2));
    struct sockaddr_storage sa;
    net_check_addr(L, 3, "u:sendto", &sa);
    lua_settop(L, 4);
    return net_run_op(L, &sendto_op, o, 0, 0);
}

static int recvfrom_try(lua_State *L, int base, net_obj *o, unsigned *ev)
{
    if (!o->s)
        return net_push_fail(L, "closed");
    char *buf = malloc(UDP_MAX);
    if (!buf)
        return net_push_fail(L, "out of memory");
    struct sockaddr_storage sa;
    for (;;) {
        socklen_t len = sizeof sa;
        ssize_t n = recvfrom(o->s->fd, buf, UDP_MAX, 0, (struct sockaddr *)&sa, &len);
        if (n >= 0) {
            char host[64];
            int port;
            io_addr_format((struct sockaddr *)&sa, host, &port);
            /* the pushes may raise a memory error: nothing of ours is held after this */
            lua_pushlstring(L, buf, (size_t)n);
            free(buf);
            lua_pushstring(L, host);
            lua_pushinteger(L, port);
            return 3;
        }
        int e = errno;
        if (e == EINTR)
            continue;
        free(buf);
        if (e == EAGAIN || e == EWOULDBLOCK) {
            *ev = NETPOLL_READ;
            return -1;
        }
        return net_push_fail(L, io_err_name(e));
    }
}

static const net_op recvfrom_op = {recvfrom_try, net_fail_plain};

/* u:recvfrom([timeout]) -> data, host, port | nil, err */
static int l_recvfrom(lua_State *L)
{
    net_obj *o = net_check_obj(L, 1, IO_UDP, "u:recvfrom");
    int poll;
    uint64_t deadline = lib_check_timeout(L, 2, "u:recvfrom", &poll);
    lua_settop(L, 1);
    return net_run_op(L, &recvfrom_op, o, deadline, poll);
}

const luaL_Reg net_udp_methods[] = {
    {"sendto", l_sendto},           {"recvfrom", l_recvfrom},
    {"readable", net_l_readable},   {"close", net_l_close},
    {"port", net_l_port},           {"fd", net_l_fd},
    {"setoption", net_l_setoption}, {NULL, NULL},
};

LUA_UNWOUND_END
