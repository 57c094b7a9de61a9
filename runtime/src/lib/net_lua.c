/* The C half of smarm.net. A socket object is a full userdata holding a pointer to its
 * io_sock handle; closing frees the handle (and the fd), sending it in a message moves the
 * handle into the message and leaves the object dead ("sent"), and __gc closes whatever the
 * object still holds, so an actor's sockets close however it ends.
 *
 * Every blocking operation is a try function over the nonblocking fd: it pushes its results,
 * or returns -1 and the readiness it waits for. The method tries once; if it must wait, it
 * arms the reactor with the actor's pid (after the EAGAIN, so data that came meanwhile is
 * seen: the arm reports the level), anchors its arguments and parks; the continuation runs
 * the try again after every wake, and re-arms while it is not satisfied. */
#include "lib/net_lua.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/park.h"
#include "base/sanitize.h"
#include "base/wire.h"
#include "core/runtime.h"
#include "core/scheduler.h"
#include "io/reactor.h"
#include "io/sock.h"
#include "lib/args.h"
#include "vm/luavm.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* How long accept backs off after running out of fds (EMFILE/ENFILE): the error is
 * returned at once, and the server's next accept waits out the rest of this first, so an
 * accept loop that retries at once does not spin while no fd can be had. */
#define ACCEPT_BACKOFF_NS 100000000ull
#define UDP_MAX 65536

enum obj_state { OBJ_OPEN, OBJ_CLOSED, OBJ_SENT };

typedef struct net_obj {
    uint64_t magic;
    io_sock *s; /* NULL unless OBJ_OPEN */
    int kind;   /* enum io_sock_kind */
    int state;
    uint64_t backoff_until; /* a server: accept waits until then (CLOCK_MONOTONIC ns) */
} net_obj;

typedef struct net_arm {
    uint64_t magic;
    unsigned events;
} net_arm; /* its environment table holds the socket object at [1] */

static const char tcp_mt_key = 't', server_mt_key = 's', udp_mt_key = 'u', arm_mt_key = 'a',
                  wait_key = 'w';

static uint64_t obj_magic(void)
{
    return (uint64_t)(uintptr_t)&tcp_mt_key * 0x9E3779B97F4A7C15ull ^ 0x736d61726d6e6574ull;
}

static uint64_t arm_magic(void) { return obj_magic() ^ 0x61726d61726d6172ull; }

static const char *kind_name(int kind)
{
    return kind == IO_TCP ? "socket" : kind == IO_LISTEN ? "server" : "udp socket";
}

static reactor *reactor_of(lua_State *L) { return luavm_runtime(L)->reactor; }

/* ---- objects ---- */

static net_obj *to_obj(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TUSERDATA || lua_objlen(L, idx) != sizeof(net_obj))
        return NULL;
    net_obj *o = lua_touserdata(L, idx);
    return o->magic == obj_magic() ? o : NULL;
}

/* The object of kind at idx; a closed one is returned (its methods answer "closed"), one
 * sent to another actor raises. */
static net_obj *check_obj(lua_State *L, int idx, int kind, const char *fname)
{
    net_obj *o = to_obj(L, idx);
    if (!o || (kind && o->kind != kind))
        luaL_error(L, "%s: a %s expected, got %s", fname, kind ? kind_name(kind) : "socket",
                   o ? kind_name(o->kind) : luaL_typename(L, idx));
    if (o->state == OBJ_SENT)
        luaL_error(L, "%s: this %s was sent to another actor", fname, kind_name(o->kind));
    return o;
}

static void close_obj(net_obj *o)
{
    io_sock *s = o->s;
    o->s = NULL;
    if (o->state == OBJ_OPEN)
        o->state = OBJ_CLOSED;
    io_sock_free(s);
}

static int l_obj_gc(lua_State *L)
{
    net_obj *o = to_obj(L, 1);
    if (o)
        close_obj(o);
    return 0;
}

static int l_obj_tostring(lua_State *L)
{
    net_obj *o = to_obj(L, 1);
    if (!o)
        return 0;
    if (o->state == OBJ_OPEN)
        lua_pushfstring(L, "%s (fd %d)", kind_name(o->kind), o->s->fd);
    else
        lua_pushfstring(L, "%s (%s)", kind_name(o->kind),
                        o->state == OBJ_SENT ? "sent away" : "closed");
    return 1;
}

static int l_tcp_send(lua_State *L);
static int l_tcp_recv(lua_State *L);
static int l_tcp_peer(lua_State *L);
static int l_tcp_shutdown(lua_State *L);
static int l_readable(lua_State *L);
static int l_accept(lua_State *L);
static int l_acceptable(lua_State *L);
static int l_sendto(lua_State *L);
static int l_recvfrom(lua_State *L);
static int l_close(lua_State *L);
static int l_fd(lua_State *L);
static int l_port(lua_State *L);
static int l_setoption(lua_State *L);

static const luaL_Reg tcp_methods[] = {
    {"send", l_tcp_send},
    {"recv", l_tcp_recv},
    {"close", l_close},
    {"peer", l_tcp_peer},
    {"fd", l_fd},
    {"port", l_port},
    {"setoption", l_setoption},
    {"shutdown", l_tcp_shutdown},
    {"readable", l_readable},
    {NULL, NULL},
};
static const luaL_Reg server_methods[] = {
    {"accept", l_accept}, {"acceptable", l_acceptable}, {"close", l_close}, {"port", l_port},
    {"fd", l_fd},         {"setoption", l_setoption},   {NULL, NULL},
};
static const luaL_Reg udp_methods[] = {
    {"sendto", l_sendto},       {"recvfrom", l_recvfrom},
    {"readable", l_readable},   {"close", l_close},
    {"port", l_port},           {"fd", l_fd},
    {"setoption", l_setoption}, {NULL, NULL},
};

/* Pushes the metatable of kind's objects, made on the state's first use. */
static void push_mt(lua_State *L, int kind)
{
    const char *key = kind == IO_TCP      ? &tcp_mt_key
                      : kind == IO_LISTEN ? &server_mt_key
                                          : &udp_mt_key;
    lua_pushlightuserdata(L, (void *)key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    if (!lua_isnil(L, -1))
        return;
    lua_pop(L, 1);
    lua_createtable(L, 0, 4);
    const luaL_Reg *r = kind == IO_TCP      ? tcp_methods
                        : kind == IO_LISTEN ? server_methods
                                            : udp_methods;
    lua_createtable(L, 0, 10);
    for (; r->name; r++) {
        lua_pushcfunction(L, r->func);
        lua_setfield(L, -2, r->name);
    }
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_obj_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_obj_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "smarm socket");
    lua_setfield(L, -2, "__metatable");
    lua_pushlightuserdata(L, (void *)key);
    lua_pushvalue(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
}

/* Pushes a closed object of kind: a handle is attached once it exists, so a memory error
 * raised while making the object can leak no fd. */
static net_obj *new_obj(lua_State *L, int kind)
{
    luaL_checkstack(L, 4, "smarm.net");
    net_obj *o = lua_newuserdata(L, sizeof *o);
    memset(o, 0, sizeof *o);
    o->magic = obj_magic();
    o->kind = kind;
    o->state = OBJ_CLOSED;
    push_mt(L, kind);
    lua_setmetatable(L, -2);
    return o;
}

/* Attaches fd to the closed object o: 0, or -1 (out of memory: fd is closed). */
static int attach(net_obj *o, int fd)
{
    o->s = io_sock_new(fd, o->kind);
    if (!o->s) {
        close(fd);
        return -1;
    }
    o->state = OBJ_OPEN;
    return 0;
}

int net_lua_endpoint(void *ud, size_t len, void **h)
{
    net_obj *o = ud;
    if (len != sizeof(net_obj) || o->magic != obj_magic())
        return 0;
    *h = o->s;
    return WIRE_REF_SOCK;
}

void *net_lua_take(void *ud)
{
    net_obj *o = ud;
    io_sock *s = o->s;
    o->s = NULL;
    o->state = OBJ_SENT;
    return s;
}

void net_lua_push(lua_State *L, void *h)
{
    io_sock *s = h;
    net_obj *o = new_obj(L, s->kind);
    o->s = s;
    o->state = OBJ_OPEN;
}

void net_lua_release(void *h) { io_sock_free(h); }

static int push_fail(lua_State *L, const char *err)
{
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
}

/* ---- waiting ---- */

/* A blocking operation: try runs with its arguments at base.. (the object first) and pushes
 * its results (>= 0) or returns -1 with the readiness to wait for in *ev (0: wait for the
 * actor's timer only, e.g. accept's back-off); fail pushes the results of a wait that ended
 * with err ("timeout", or why the reactor could not be armed). */
typedef struct net_op {
    int (*try)(lua_State *L, int base, unsigned *ev);
    int (*fail)(lua_State *L, int base, const char *err);
} net_op;

static int fail_plain(lua_State *L, int base, const char *err)
{
    (void)base;
    return push_fail(L, err);
}

/* Makes sure actor a is woken when the object at base is ready for ev: 0, or -errno. */
static int arm(lua_State *L, actor *a, int base, unsigned ev)
{
    net_obj *o = lua_touserdata(L, base);
    if (ev == 0) {
        sched_arm_wake(a, o->backoff_until);
        return 0;
    }
    return reactor_arm(reactor_of(L), o->s->fd, ev, a->pid, &o->s->added);
}

static void clear_anchor(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&wait_key);
    lua_pushnil(L);
    lua_rawset(L, LUA_REGISTRYINDEX);
}

static int net_cont(actor *a, lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&wait_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    int t = lua_gettop(L), n = (int)lua_objlen(L, t);
    lua_rawgeti(L, t, 1);
    const net_op *op = lua_touserdata(L, -1);
    lua_pop(L, 1);
    int base = t + 1;
    for (int i = 2; i <= n; i++)
        lua_rawgeti(L, t, i);
    unsigned ev = 0;
    int r = op->try(L, base, &ev);
    if (r < 0 && a->run.deadline && park_now_ns() >= a->run.deadline)
        r = op->fail(L, base, "timeout");
    if (r < 0) {
        int rc = arm(L, a, base, ev);
        if (rc < 0)
            r = op->fail(L, base, strerror(-rc));
    }
    if (r >= 0) {
        clear_anchor(L);
        return r;
    }
    lua_settop(L, t - 1);
    return -1;
}

/* The wait of a method whose try asked for ev: its arguments are at base..top. */
static int net_block(lua_State *L, const net_op *op, int base, unsigned ev, uint64_t deadline,
                     int poll)
{
    actor *a = luavm_actor(L);
    if (poll)
        return op->fail(L, base, "timeout");
    int rc = arm(L, a, base, ev);
    if (rc < 0)
        return op->fail(L, base, strerror(-rc));
    int top = lua_gettop(L);
    lua_pushlightuserdata(L, (void *)&wait_key);
    lua_createtable(L, top - base + 2, 0);
    lua_pushlightuserdata(L, (void *)op);
    lua_rawseti(L, -2, 1);
    for (int i = base; i <= top; i++) {
        lua_pushvalue(L, i);
        lua_rawseti(L, -2, i - base + 2);
    }
    lua_rawset(L, LUA_REGISTRYINDEX);
    return lib_wait(L, a, deadline, 0, net_cont);
}

/* Tries op with the arguments at 1..top, then waits if it must. */
static int run_op(lua_State *L, const net_op *op, uint64_t deadline, int poll)
{
    unsigned ev = 0;
    int r = op->try(L, 1, &ev);
    return r >= 0 ? r : net_block(L, op, 1, ev, deadline, poll);
}

/* ---- TCP streams ---- */

/* recv's pattern at idx: n >= 0 bytes, or 'l', 'a', 'r' (then *n = 0). */
static int check_pattern(lua_State *L, int idx, size_t *n)
{
    *n = 0;
    if (lua_type(L, idx) == LUA_TNUMBER) {
        double d = lua_tonumber(L, idx);
        if (!(d >= 0 && d <= (double)WIRE_MAX_BYTES) || d != (double)(size_t)d)
            luaL_error(L, "sock:recv: a byte count must be an integer from 0 to 2^30, got %s",
                       lua_tostring(L, idx));
        *n = (size_t)d;
        return 'n';
    }
    const char *p = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
    if (p && (strcmp(p, "*l") == 0 || strcmp(p, "*a") == 0 || strcmp(p, "*r") == 0))
        return p[1];
    return luaL_error(L,
                      "sock:recv: bad pattern (a byte count, \"*l\", \"*a\" or \"*r\" expected, "
                      "got %s)",
                      p ? p : luaL_typename(L, idx));
}

/* Pushes n buffered bytes and takes them. */
static void take_bytes(lua_State *L, io_sock *s, size_t n, size_t keep)
{
    lua_pushlstring(L, s->rbuf + s->roff, keep);
    io_sock_consume(s, n);
}

/* recv's results after err: nil, err, and whatever was buffered (taken) as the partial. */
static int recv_fail(lua_State *L, int base, const char *err)
{
    net_obj *o = lua_touserdata(L, base);
    lua_pushnil(L);
    lua_pushstring(L, err);
    if (o->s)
        take_bytes(L, o->s, io_sock_buffered(o->s), io_sock_buffered(o->s));
    else
        lua_pushliteral(L, "");
    return 3;
}

static int recv_try(lua_State *L, int base, unsigned *ev)
{
    net_obj *o = lua_touserdata(L, base);
    size_t n;
    int pat = check_pattern(L, base + 1, &n);
    io_sock *s = o->s;
    if (!s)
        return recv_fail(L, base, "closed");
    for (;;) {
        size_t have = io_sock_buffered(s);
        if (pat == 'n' && have >= n) {
            take_bytes(L, s, n, n);
            return 1;
        }
        if (pat == 'l' && have) {
            const char *p = s->rbuf + s->roff, *nl = memchr(p, '\n', have);
            if (nl) {
                size_t len = (size_t)(nl - p);
                take_bytes(L, s, len + 1, len > 0 && p[len - 1] == '\r' ? len - 1 : len);
                return 1;
            }
        }
        if (pat == 'r' && have) {
            take_bytes(L, s, have, have);
            return 1;
        }
        if (s->eof) {
            if (pat != 'a')
                return recv_fail(L, base, "closed");
            take_bytes(L, s, have, have);
            return 1;
        }
        /* room for what n still needs; for "*a" and lines, double as the data grows */
        long r = io_sock_fill(s, pat == 'n' ? n - have : have);
        if (r >= 0)
            continue;
        if (r == -EAGAIN) {
            *ev = REACTOR_READ;
            return -1;
        }
        return recv_fail(L, base, io_err_name((int)-r));
    }
}

static const net_op recv_op = {recv_try, recv_fail};

/**
 * sock:recv(pattern [, timeout]) -> data | nil, err, partial
 * pattern: n (exactly n bytes), "*l" (a line, without its "\n" and a "\r" before it), "*a"
 * (everything until the peer closes), "*r" (what is there now, at least one byte). err is
 * "closed" (the peer closed before the pattern was met), "timeout", "reset" or the OS's text;
 * partial holds the bytes read so far, which are taken. Bytes read ahead stay with the socket
 * (also when it is sent to another actor).
 */
static int l_tcp_recv(lua_State *L)
{
    check_obj(L, 1, IO_TCP, "sock:recv");
    size_t n;
    check_pattern(L, 2, &n);
    int poll;
    uint64_t deadline = lib_check_timeout(L, 3, "sock:recv", &poll);
    lua_settop(L, 2);
    return run_op(L, &recv_op, deadline, poll);
}

static int send_fail(lua_State *L, int base, const char *err)
{
    net_obj *o = lua_touserdata(L, base);
    lua_pushnil(L);
    lua_pushstring(L, err);
    lua_pushnumber(L, o->s ? (double)o->s->woff : 0);
    return 3;
}

static int send_try(lua_State *L, int base, unsigned *ev)
{
    net_obj *o = lua_touserdata(L, base);
    size_t len;
    const char *p = lua_tolstring(L, base + 1, &len);
    io_sock *s = o->s;
    if (!s)
        return send_fail(L, base, "closed");
    while (s->woff < len) {
        ssize_t n = send(s->fd, p + s->woff, len - s->woff, MSG_NOSIGNAL);
        if (n >= 0) {
            s->woff += (size_t)n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *ev = REACTOR_WRITE;
            return -1;
        }
        return send_fail(L, base, io_err_name(errno));
    }
    lua_pushboolean(L, 1);
    return 1;
}

static const net_op send_op = {send_try, send_fail};

/**
 * sock:send(data [, timeout]) -> true | nil, err, sent
 * Writes all of data (a string), waiting for room as needed. err is "closed" (this socket
 * was closed, or the peer's end is: EPIPE), "reset" (the peer reset the connection),
 * "timeout", or the OS's text; sent is how many bytes went out before it.
 */
static int l_tcp_send(lua_State *L)
{
    net_obj *o = check_obj(L, 1, IO_TCP, "sock:send");
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "sock:send: data must be a string, got %s", luaL_typename(L, 2));
    int poll;
    uint64_t deadline = lib_check_timeout(L, 3, "sock:send", &poll);
    lua_settop(L, 2);
    if (o->s)
        o->s->woff = 0;
    return run_op(L, &send_op, deadline, poll);
}

/* sock:peer() -> host, port | nil, err */
static int l_tcp_peer(lua_State *L)
{
    net_obj *o = check_obj(L, 1, IO_TCP, "sock:peer");
    if (!o->s)
        return push_fail(L, "closed");
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getpeername(o->s->fd, (struct sockaddr *)&sa, &len) != 0)
        return push_fail(L, io_err_name(errno));
    char host[64];
    int port;
    io_addr_format((struct sockaddr *)&sa, host, &port);
    lua_pushstring(L, host);
    lua_pushinteger(L, port);
    return 2;
}

/* sock:shutdown(["send" | "recv" | "both"]) -> true | nil, err: a half-close (default "send":
 * the peer reads the end of the stream, and can still send). */
static int l_tcp_shutdown(lua_State *L)
{
    net_obj *o = check_obj(L, 1, IO_TCP, "sock:shutdown");
    const char *how = luaL_optstring(L, 2, "send");
    int h = strcmp(how, "send") == 0   ? SHUT_WR
            : strcmp(how, "recv") == 0 ? SHUT_RD
            : strcmp(how, "both") == 0 ? SHUT_RDWR
                                       : -1;
    if (h < 0)
        return luaL_error(L, "sock:shutdown: how must be \"send\", \"recv\" or \"both\", got %s",
                          how);
    if (!o->s)
        return push_fail(L, "closed");
    if (shutdown(o->s->fd, h) != 0)
        return push_fail(L, io_err_name(errno));
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- common methods ---- */

/* sock:close(), server:close(), u:close(): closes the fd; later calls return nil, "closed".
 * Closing twice is fine. */
static int l_close(lua_State *L)
{
    net_obj *o = check_obj(L, 1, 0, "close");
    close_obj(o);
    return 0;
}

/* :fd() -> the fd, or -1 once closed */
static int l_fd(lua_State *L)
{
    net_obj *o = check_obj(L, 1, 0, "fd");
    lua_pushinteger(L, o->s ? o->s->fd : -1);
    return 1;
}

/* :port() -> the local port (0 for a UDP socket not bound yet) | nil, "closed" */
static int l_port(lua_State *L)
{
    net_obj *o = check_obj(L, 1, 0, "port");
    if (!o->s)
        return push_fail(L, "closed");
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getsockname(o->s->fd, (struct sockaddr *)&sa, &len) != 0)
        return push_fail(L, io_err_name(errno));
    char host[64];
    int port;
    io_addr_format((struct sockaddr *)&sa, host, &port);
    lua_pushinteger(L, port);
    return 1;
}

static int check_bool(lua_State *L, int idx, const char *name)
{
    if (lua_type(L, idx) != LUA_TBOOLEAN)
        luaL_error(L, "setoption: %s takes a boolean, got %s", name, luaL_typename(L, idx));
    return lua_toboolean(L, idx);
}

/**
 * :setoption(name, value) -> true | nil, err
 * "nodelay" (boolean; TCP streams), "keepalive" (boolean), "reuseaddr" (boolean), "linger"
 * (seconds >= 0, or false for off). Another name raises.
 */
static int l_setoption(lua_State *L)
{
    net_obj *o = check_obj(L, 1, 0, "setoption");
    const char *name = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    int level = SOL_SOCKET, opt, v = 0;
    const void *val = &v;
    socklen_t vlen = sizeof v;
    struct linger lg = {0, 0};
    if (name && strcmp(name, "nodelay") == 0) {
        level = IPPROTO_TCP;
        opt = TCP_NODELAY;
        v = check_bool(L, 3, name);
        if (o->kind == IO_UDP)
            return luaL_error(L, "setoption: nodelay is for TCP sockets");
    } else if (name && strcmp(name, "keepalive") == 0) {
        opt = SO_KEEPALIVE;
        v = check_bool(L, 3, name);
    } else if (name && strcmp(name, "reuseaddr") == 0) {
        opt = SO_REUSEADDR;
        v = check_bool(L, 3, name);
    } else if (name && strcmp(name, "linger") == 0) {
        opt = SO_LINGER;
        if (lua_type(L, 3) == LUA_TNUMBER && lua_tonumber(L, 3) >= 0 && lua_tonumber(L, 3) < 1e6) {
            lg.l_onoff = 1;
            lg.l_linger = (int)lua_tonumber(L, 3);
        } else if (!(lua_type(L, 3) == LUA_TBOOLEAN && !lua_toboolean(L, 3))) {
            return luaL_error(L, "setoption: linger takes seconds (0 to 1e6) or false, got %s",
                              lua_type(L, 3) == LUA_TNUMBER ? lua_tostring(L, 3)
                                                            : luaL_typename(L, 3));
        }
        val = &lg;
        vlen = sizeof lg;
    } else {
        return luaL_error(L,
                          "setoption: unknown option %s (\"nodelay\", \"keepalive\", \"linger\" "
                          "or \"reuseaddr\")",
                          name ? name : luaL_typename(L, 2));
    }
    if (!o->s)
        return push_fail(L, "closed");
    if (setsockopt(o->s->fd, level, opt, val, vlen) != 0)
        return push_fail(L, io_err_name(errno));
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- select arms ---- */

static void push_arm(lua_State *L, unsigned events)
{
    luaL_checkstack(L, 4, "smarm.net");
    net_arm *arm = lua_newuserdata(L, sizeof *arm);
    arm->magic = arm_magic();
    arm->events = events;
    lua_pushlightuserdata(L, (void *)&arm_mt_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "smarm socket arm");
        lua_setfield(L, -2, "__metatable");
        lua_pushlightuserdata(L, (void *)&arm_mt_key);
        lua_pushvalue(L, -2);
        lua_rawset(L, LUA_REGISTRYINDEX);
    }
    lua_setmetatable(L, -2);
    lua_createtable(L, 1, 0);
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, 1);
    lua_setfenv(L, -2);
}

/* sock:readable(), u:readable() -> a select arm, ready (with the socket as its value) when
 * data, the end of the stream or an error is there to be read */
static int l_readable(lua_State *L)
{
    check_obj(L, 1, 0, "readable");
    lua_settop(L, 1);
    push_arm(L, REACTOR_READ);
    return 1;
}

/* server:acceptable() -> a select arm, ready (with the server as its value) when a
 * connection waits to be accepted */
static int l_acceptable(lua_State *L)
{
    check_obj(L, 1, IO_LISTEN, "server:acceptable");
    lua_settop(L, 1);
    push_arm(L, REACTOR_READ);
    return 1;
}

static net_arm *to_arm(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TUSERDATA || lua_objlen(L, idx) != sizeof(net_arm))
        return NULL;
    net_arm *arm = lua_touserdata(L, idx);
    return arm->magic == arm_magic() ? arm : NULL;
}

/* Pushes the socket object of the arm at idx. */
static net_obj *arm_obj(lua_State *L, int idx)
{
    lua_getfenv(L, idx);
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
    return to_obj(L, -1);
}

int net_lua_is_arm(lua_State *L, int idx)
{
    if (!to_arm(L, idx))
        return 0;
    net_obj *o = arm_obj(L, idx);
    int r = o && o->state == OBJ_SENT ? 2 : 1;
    lua_pop(L, 1);
    return r;
}

int net_lua_try_arm(lua_State *L, int idx, actor *a)
{
    idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
    net_arm *arm = to_arm(L, idx);
    net_obj *o = arm_obj(L, idx);
    /* closed: ready (its operations answer "closed"); read-ahead bytes: ready */
    if (!o->s || (arm->events & REACTOR_READ && io_sock_buffered(o->s)) ||
        io_fd_ready(o->s->fd, arm->events))
        return 1;
    if (reactor_arm(reactor_of(L), o->s->fd, arm->events, a->pid, &o->s->added) != 0)
        return 1; /* cannot be watched: ready, and its operation reports why */
    lua_pop(L, 1);
    return -1;
}

/* ---- servers ---- */

static int accept_try(lua_State *L, int base, unsigned *ev)
{
    net_obj *o = lua_touserdata(L, base);
    if (!o->s)
        return push_fail(L, "closed");
    if (o->backoff_until) {
        if (park_now_ns() < o->backoff_until) {
            *ev = 0;
            return -1;
        }
        o->backoff_until = 0;
    }
    net_obj *c = new_obj(L, IO_TCP);
    for (;;) {
        int fd = accept4(o->s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            if (attach(c, fd) != 0)
                return push_fail(L, "out of memory");
            return 1;
        }
        int e = errno;
        switch (e) {
        case EINTR:
        case ECONNABORTED: /* the connection went before it was taken */
        case EPROTO:
            continue;
        case EAGAIN:
#if EWOULDBLOCK != EAGAIN
        case EWOULDBLOCK:
#endif
            lua_pop(L, 1);
            *ev = REACTOR_READ;
            return -1;
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM:
            o->backoff_until = park_now_ns() + ACCEPT_BACKOFF_NS;
            return push_fail(L, strerror(e));
        case EINVAL: /* shut down */
            return push_fail(L, "closed");
        default:
            return push_fail(L, io_err_name(e));
        }
    }
}

static const net_op accept_op = {accept_try, fail_plain};

/**
 * server:accept([timeout]) -> sock | nil, err
 * The next connection. err: "timeout", "closed" (the server was closed), or the OS's text:
 * out of fds (EMFILE/ENFILE) it returns "Too many open files" (or the like) at once, and
 * the server's next accept first waits out a back-off of 100 ms, so a loop that retries at
 * once does not spin while no fd can be had.
 */
static int l_accept(lua_State *L)
{
    check_obj(L, 1, IO_LISTEN, "server:accept");
    int poll;
    uint64_t deadline = lib_check_timeout(L, 2, "server:accept", &poll);
    lua_settop(L, 1);
    return run_op(L, &accept_op, deadline, poll);
}

static int check_port(lua_State *L, int idx, const char *fname)
{
    if (lua_type(L, idx) != LUA_TNUMBER)
        luaL_error(L, "%s: port must be a number, got %s", fname, luaL_typename(L, idx));
    double d = lua_tonumber(L, idx);
    if (!(d >= 0 && d <= 65535) || d != (double)(int)d)
        luaL_error(L, "%s: port must be an integer from 0 to 65535, got %s", fname,
                   lua_tostring(L, idx));
    return (int)d;
}

/* The address literal at idx and the port at idx + 1 in sa: its length, or a Lua error. */
static socklen_t check_addr(lua_State *L, int idx, const char *fname, struct sockaddr_storage *sa)
{
    const char *host = luaL_checkstring(L, idx);
    int port = check_port(L, idx + 1, fname);
    socklen_t len = io_addr_parse(host, port, sa);
    if (!len)
        luaL_error(L, "%s: %s is not an IPv4 or IPv6 address", fname, host);
    return len;
}

/* raw.listen(address, port, backlog, reuseport) -> server | nil, err */
static int l_listen(lua_State *L)
{
    struct sockaddr_storage sa;
    socklen_t len = check_addr(L, 1, "net.listen", &sa);
    int backlog = (int)luaL_optinteger(L, 3, 511);
    int reuseport = lua_toboolean(L, 4);
    net_obj *o = new_obj(L, IO_LISTEN);
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || attach(o, fd) != 0)
        return push_fail(L, fd < 0 ? strerror(errno) : "out of memory");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        goto fail;
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, backlog) != 0)
        goto fail;
    return 1;
fail : {
    int e = errno;
    close_obj(o);
    return push_fail(L, strerror(e));
}
}

/* ---- connecting ---- */

static int connect_fail(lua_State *L, int base, const char *err)
{
    close_obj(lua_touserdata(L, base));
    return push_fail(L, err);
}

static int connect_try(lua_State *L, int base, unsigned *ev)
{
    net_obj *o = lua_touserdata(L, base);
    if (!io_fd_ready(o->s->fd, REACTOR_WRITE)) {
        *ev = REACTOR_WRITE;
        return -1;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(o->s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err)
        return connect_fail(L, base, io_err_name(err));
    lua_pushvalue(L, base);
    return 1;
}

static const net_op connect_op = {connect_try, connect_fail};

/* raw.connect(address, port [, timeout]) -> sock | nil, err ("refused", "timeout", ...) */
static int l_connect(lua_State *L)
{
    struct sockaddr_storage sa;
    socklen_t len = check_addr(L, 1, "net.connect", &sa);
    int poll;
    uint64_t deadline = lib_check_timeout(L, 3, "net.connect", &poll);
    lua_settop(L, 0);
    net_obj *o = new_obj(L, IO_TCP);
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || attach(o, fd) != 0)
        return push_fail(L, fd < 0 ? strerror(errno) : "out of memory");
    int rc;
    do
        rc = connect(fd, (struct sockaddr *)&sa, len);
    while (rc != 0 && errno == EINTR);
    if (rc == 0)
        return 1;
    if (errno != EINPROGRESS)
        return connect_fail(L, 1, io_err_name(errno));
    return run_op(L, &connect_op, deadline, poll);
}

/* ---- UDP ---- */

/* raw.udp([address, port]) -> u | nil, err: bound to address:port if given, else an unbound
 * IPv6 socket that also reaches IPv4 (an IPv4 one where IPv6 is missing) */
static int l_udp(lua_State *L)
{
    struct sockaddr_storage sa;
    socklen_t len = 0;
    if (!lua_isnoneornil(L, 1))
        len = check_addr(L, 1, "net.udp", &sa);
    net_obj *o = new_obj(L, IO_UDP);
    int family = len ? sa.ss_family : AF_INET6;
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && !len && errno == EAFNOSUPPORT)
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || attach(o, fd) != 0)
        return push_fail(L, fd < 0 ? strerror(errno) : "out of memory");
    if (!len) {
        int zero = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    } else if (bind(fd, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;
        close_obj(o);
        return push_fail(L, strerror(e));
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

static int sendto_try(lua_State *L, int base, unsigned *ev)
{
    net_obj *o = lua_touserdata(L, base);
    if (!o->s)
        return push_fail(L, "closed");
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
            *ev = REACTOR_WRITE;
            return -1;
        }
        return push_fail(L, io_err_name(errno));
    }
}

static const net_op sendto_op = {sendto_try, fail_plain};

/* u:sendto(data, address, port) -> true | nil, err: one datagram (address: a literal) */
static int l_sendto(lua_State *L)
{
    check_obj(L, 1, IO_UDP, "u:sendto");
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "u:sendto: data must be a string, got %s", luaL_typename(L, 2));
    struct sockaddr_storage sa;
    check_addr(L, 3, "u:sendto", &sa);
    lua_settop(L, 4);
    return run_op(L, &sendto_op, 0, 0);
}

static int recvfrom_try(lua_State *L, int base, unsigned *ev)
{
    net_obj *o = lua_touserdata(L, base);
    if (!o->s)
        return push_fail(L, "closed");
    char *buf = malloc(UDP_MAX);
    if (!buf)
        return push_fail(L, "out of memory");
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
            *ev = REACTOR_READ;
            return -1;
        }
        return push_fail(L, io_err_name(e));
    }
}

static const net_op recvfrom_op = {recvfrom_try, fail_plain};

/* u:recvfrom([timeout]) -> data, host, port | nil, err */
static int l_recvfrom(lua_State *L)
{
    check_obj(L, 1, IO_UDP, "u:recvfrom");
    int poll;
    uint64_t deadline = lib_check_timeout(L, 2, "u:recvfrom", &poll);
    lua_settop(L, 1);
    return run_op(L, &recvfrom_op, deadline, poll);
}

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
        return push_fail(L, rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
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
    check_port(L, 1, luaL_checkstring(L, 2));
    return 0;
}

static const luaL_Reg raw_funcs[] = {
    {"listen", l_listen},   {"connect", l_connect},       {"udp", l_udp},
    {"resolve", l_resolve}, {"is_literal", l_is_literal}, {"check_port", l_check_port},
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
