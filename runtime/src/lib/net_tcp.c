/* TCP in smarm.net: streams (recv with its patterns and read-ahead, send, peer, shutdown),
 * servers (listen, accept with its back-off out of fds) and connecting. */
#include "lib/net_obj.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/park.h"
#include "base/sanitize.h"
#include "base/wire.h"
#include "base/netpoll.h"
#include "io/sock.h"
#include "lib/args.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* How long accept backs off after running out of fds (EMFILE/ENFILE): the error is
 * returned at once, and the server's next accept waits out the rest of this first, so an
 * accept loop that retries at once does not spin while no fd can be had. */
#define ACCEPT_BACKOFF_NS 100000000ull

/* ---- TCP streams ---- */

/* recv's pattern at idx: n >= 0 bytes, or 'l', 'a', 'r' (then *n = 0). */
static int check_pattern(lua_State *L, int idx, size_t *n)
{
    *n = 0;
    size_t len;
    const char *p = ljx_string_at(L, idx, &len);
    if (p && len == 2 && p[0] == '*' && (p[1] == 'r' || p[1] == 'l' || p[1] == 'a'))
        return p[1];
    double d;
    if (!p && ljx_number_at(L, idx, &d)) {
        if (!(d >= 0 && d <= (double)WIRE_MAX_BYTES) || d != (double)(size_t)d)
            luaL_error(L, "sock:recv: a byte count must be an integer from 0 to 2^30, got %s",
                       lua_tostring(L, idx));
        *n = (size_t)d;
        return 'n';
    }
    return luaL_error(L,
                      "sock:recv: bad pattern (a byte count, \"*l\", \"*a\" or \"*r\" expected, "
                      "got %s)",
                      p ? p : luaL_typename(L, idx));
}

/* The pattern at idx, already checked by sock:recv (a try runs once or more per call, the
 * continuation's tries on the anchored copy of the same value): check_pattern's answer
 * without its checks. */
static int checked_pattern(lua_State *L, int idx, size_t *n)
{
    size_t len;
    const char *p = ljx_string_at(L, idx, &len);
    if (p) {
        *n = 0;
        return p[1];
    }
    double d = 0;
    ljx_number_at(L, idx, &d);
    *n = (size_t)d;
    return 'n';
}

/* Pushes n buffered bytes and takes them. */
static void take_bytes(lua_State *L, io_sock *s, size_t n, size_t keep)
{
    if (s->rbuf)
        lua_pushlstring(L, s->rbuf + s->roff, keep);
    else
        lua_pushliteral(L, ""); /* nothing buffered: no buffer */
    io_sock_consume(s, n);
}

/* recv's results after err: nil, err, and whatever was buffered (taken) as the partial. */
static int recv_fail(lua_State *L, int base, const char *err)
{
    net_obj *o = net_obj_at(L, base);
    lua_pushnil(L);
    lua_pushstring(L, err);
    if (o->s)
        take_bytes(L, o->s, io_sock_buffered(o->s), io_sock_buffered(o->s));
    else
        lua_pushliteral(L, "");
    return 3;
}

/* What "*r" reads with nothing read ahead: the bytes go straight from here into the Lua
 * string, so a request/response connection allocates and frees no read-ahead buffer per
 * request. One per thread: the read and the copy into the string are one C stretch. In use
 * while the string is made (a collection step there may run a finalizer, whose own read
 * then takes the buffered path). */
#define RECV_SCRATCH 16384
static _Thread_local char recv_scratch[RECV_SCRATCH];
static _Thread_local int recv_scratch_busy;

/* "*r" with nothing buffered: 1 (the bytes pushed), 0 (the end of the stream: s->eof), or
 * -errno as io_sock_fill returns it. */
static long recv_direct(lua_State *L, io_sock *s)
{
    long r = io_sock_recv(s, recv_scratch, RECV_SCRATCH);
    if (r <= 0)
        return r;
    recv_scratch_busy = 1;
    lua_pushlstring(L, recv_scratch, (size_t)r);
    recv_scratch_busy = 0;
    return 1;
}

/* "*r": what is there now, at least one byte, straight into the scratch buffer when nothing
 * is buffered. 1 (the bytes pushed), -1 (none yet: *ev set for the wait), 0 (the end of the
 * stream: nothing more will come), or -2 with *err the errno. */
static int recv_any(lua_State *L, io_sock *s, unsigned *ev, int *err)
{
    long r;
    if (!io_sock_buffered(s) && !s->eof && !recv_scratch_busy) {
        r = recv_direct(L, s);
        if (r > 0)
            return 1;
        if (r < 0)
            goto failed;
        /* the end of the stream (s->eof): below */
    }
    for (;;) {
        size_t have = io_sock_buffered(s);
        if (have) {
            take_bytes(L, s, have, have);
            return 1;
        }
        if (s->eof)
            return 0;
        /* the scratch buffer is busy (a finalizer's read): read ahead the buffered way */
        if ((r = io_sock_fill(s, 0)) < 0)
            goto failed;
    }
failed:
    if (r == -EAGAIN) {
        *ev = NETPOLL_READ;
        return -1;
    }
    *err = (int)-r;
    return -2;
}

static int recv_try(lua_State *L, int base, net_obj *o, unsigned *ev)
{
    size_t n;
    int pat = checked_pattern(L, base + 1, &n);
    io_sock *s = o->s;
    if (!s)
        return recv_fail(L, base, "closed");
    if (pat == 'r') {
        int err, got = recv_any(L, s, ev, &err);
        if (got == -2)
            return recv_fail(L, base, io_err_name(err));
        return got ? got : recv_fail(L, base, "closed");
    }
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
            *ev = NETPOLL_READ;
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
    net_obj *o = net_check_obj(L, 1, IO_TCP, "sock:recv");
    size_t n;
    check_pattern(L, 2, &n);
    int poll;
    uint64_t deadline = lib_check_timeout(L, 3, "sock:recv", &poll);
    lua_settop(L, 2);
    return net_run_op(L, &recv_op, o, deadline, poll);
}

static int send_fail(lua_State *L, int base, const char *err)
{
    net_obj *o = net_obj_at(L, base);
    lua_pushnil(L);
    lua_pushstring(L, err);
    lua_pushnumber(L, o->s ? (double)o->s->woff : 0);
    return 3;
}

/* Sends what is left of p (len bytes; the handle's woff is the progress): 0 when all of it
 * went, -1 when the socket has no room (*ev set for the wait), or the errno. */
static int send_rest(io_sock *s, const char *p, size_t len, unsigned *ev)
{
    while (s->woff < len) {
        ssize_t n = send(s->fd, p + s->woff, len - s->woff, MSG_NOSIGNAL);
        if (n >= 0) {
            s->woff += (size_t)n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *ev = NETPOLL_WRITE;
            return -1;
        }
        return errno;
    }
    return 0;
}

static int send_try(lua_State *L, int base, net_obj *o, unsigned *ev)
{
    size_t len;
    const char *p = ljx_string_at(L, base + 1, &len);
    io_sock *s = o->s;
    if (!s)
        return send_fail(L, base, "closed");
    int r = send_rest(s, p, len, ev);
    if (r < 0)
        return -1;
    if (r > 0)
        return send_fail(L, base, io_err_name(r));
    lua_pushboolean(L, 1);
    return 1;
}

static const net_op send_op = {send_try, send_fail};

/* A turn of a request/response connection: all of the data at base + 1 sent (what is left
 * of it), then what recv("*r") reads. The two tries of one op: the send's progress is the
 * handle's woff, so a retry after a wait for room goes on where the send stopped, and one
 * after a wait for bytes finds it done. */
static int sendrecv_try(lua_State *L, int base, net_obj *o, unsigned *ev)
{
    io_sock *s = o->s;
    if (!s)
        return net_fail_plain(L, base, "closed");
    size_t len;
    const char *p = ljx_string_at(L, base + 1, &len);
    int err = send_rest(s, p, len, ev);
    if (err < 0)
        return -1;
    if (err > 0)
        return net_fail_plain(L, base, io_err_name(err));
    int got = recv_any(L, s, ev, &err);
    if (got == -2)
        return net_fail_plain(L, base, io_err_name(err));
    return got ? got : net_fail_plain(L, base, "closed");
}

static const net_op sendrecv_op = {sendrecv_try, net_fail_plain};

/* sock:send and sock:sendrecv: (data [, timeout]) checked, and op run from the data's start
 * (the handle's woff is the send's progress across waits). */
static int run_send(lua_State *L, const net_op *op, const char *name)
{
    net_obj *o = net_check_obj(L, 1, IO_TCP, name);
    size_t len;
    if (!ljx_string_at(L, 2, &len))
        return luaL_error(L, "%s: data must be a string, got %s", name, luaL_typename(L, 2));
    int poll;
    uint64_t deadline = lib_check_timeout(L, 3, name, &poll);
    lua_settop(L, 2);
    if (o->s)
        o->s->woff = 0;
    return net_run_op(L, op, o, deadline, poll);
}

/**
 * sock:sendrecv(data [, timeout]) -> data | nil, err
 * One turn of a request/response protocol in one call: sends all of data (waiting for room as
 * needed), then reads as recv("*r") does (what is there, at least one byte). The timeout
 * covers both. err is as for send and recv; bytes read are never lost (a failed turn reads
 * none).
 */
static int l_tcp_sendrecv(lua_State *L) { return run_send(L, &sendrecv_op, "sock:sendrecv"); }

/**
 * sock:send(data [, timeout]) -> true | nil, err, sent
 * Writes all of data (a string), waiting for room as needed. err is "closed" (this socket
 * was closed, or the peer's end is: EPIPE), "reset" (the peer reset the connection),
 * "timeout", or the OS's text; sent is how many bytes went out before it.
 */
static int l_tcp_send(lua_State *L) { return run_send(L, &send_op, "sock:send"); }

/* sock:peer() -> host, port | nil, err */
static int l_tcp_peer(lua_State *L)
{
    net_obj *o = net_check_obj(L, 1, IO_TCP, "sock:peer");
    if (!o->s)
        return net_push_fail(L, "closed");
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getpeername(o->s->fd, (struct sockaddr *)&sa, &len) != 0)
        return net_push_fail(L, io_err_name(errno));
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
    net_obj *o = net_check_obj(L, 1, IO_TCP, "sock:shutdown");
    const char *how = luaL_optstring(L, 2, "send");
    int h = strcmp(how, "send") == 0   ? SHUT_WR
            : strcmp(how, "recv") == 0 ? SHUT_RD
            : strcmp(how, "both") == 0 ? SHUT_RDWR
                                       : -1;
    if (h < 0)
        return luaL_error(L, "sock:shutdown: how must be \"send\", \"recv\" or \"both\", got %s",
                          how);
    if (!o->s)
        return net_push_fail(L, "closed");
    if (shutdown(o->s->fd, h) != 0)
        return net_push_fail(L, io_err_name(errno));
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- servers ---- */

static int accept_try(lua_State *L, int base, net_obj *o, unsigned *ev)
{
    if (!o->s)
        return net_push_fail(L, "closed");
    if (o->backoff_until) {
        if (park_now_ns() < o->backoff_until) {
            *ev = 0;
            return -1;
        }
        o->backoff_until = 0;
    }
    net_obj *c = net_new_obj(L, IO_TCP);
    for (;;) {
        int fd = accept4(o->s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            o->s->drained = 0;
            if (net_attach(c, fd) != 0)
                return net_push_fail(L, "out of memory");
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
            o->s->drained = 1; /* a select on acceptable() need not poll (net_lua_try_arm) */
            *ev = NETPOLL_READ;
            return -1;
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM:
            o->backoff_until = park_now_ns() + ACCEPT_BACKOFF_NS;
            return net_push_fail(L, strerror(e));
        case EINVAL: /* shut down */
            return net_push_fail(L, "closed");
        default:
            return net_push_fail(L, io_err_name(e));
        }
    }
}

static const net_op accept_op = {accept_try, net_fail_plain};

/**
 * server:accept([timeout]) -> sock | nil, err
 * The next connection. err: "timeout", "closed" (the server was closed), or the OS's text:
 * out of fds (EMFILE/ENFILE) it returns "Too many open files" (or the like) at once, and
 * the server's next accept first waits out a back-off of 100 ms, so a loop that retries at
 * once does not spin while no fd can be had.
 */
static int l_accept(lua_State *L)
{
    net_obj *o = net_check_obj(L, 1, IO_LISTEN, "server:accept");
    int poll;
    uint64_t deadline = lib_check_timeout(L, 2, "server:accept", &poll);
    lua_settop(L, 1);
    return net_run_op(L, &accept_op, o, deadline, poll);
}

/* raw.listen(address, port, backlog, reuseport) -> server | nil, err */
int net_l_listen(lua_State *L)
{
    struct sockaddr_storage sa;
    socklen_t len = net_check_addr(L, 1, "net.listen", &sa);
    lua_Number b = luaL_optnumber(L, 3, 511);
    int backlog = b < 0 ? 0 : b > 65535 ? 65535 : (int)b; /* the kernel caps it at somaxconn */
    int reuseport = lua_toboolean(L, 4);
    net_obj *o = net_new_obj(L, IO_LISTEN);
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || net_attach(o, fd) != 0)
        return net_push_fail(L, fd < 0 ? strerror(errno) : "out of memory");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        goto fail;
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, backlog) != 0)
        goto fail;
    return 1;
fail : {
    int e = errno;
    net_close_obj(o);
    return net_push_fail(L, strerror(e));
}
}

/* ---- connecting ---- */

static int connect_fail(lua_State *L, int base, const char *err)
{
    net_close_obj(net_obj_at(L, base));
    return net_push_fail(L, err);
}

static int connect_try(lua_State *L, int base, net_obj *o, unsigned *ev)
{
    if (!io_fd_ready(o->s->fd, NETPOLL_WRITE)) {
        *ev = NETPOLL_WRITE;
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
int net_l_connect(lua_State *L)
{
    struct sockaddr_storage sa;
    socklen_t len = net_check_addr(L, 1, "net.connect", &sa);
    int poll;
    uint64_t deadline = lib_check_timeout(L, 3, "net.connect", &poll);
    lua_settop(L, 0);
    net_obj *o = net_new_obj(L, IO_TCP);
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || net_attach(o, fd) != 0)
        return net_push_fail(L, fd < 0 ? strerror(errno) : "out of memory");
    int rc;
    do
        rc = connect(fd, (struct sockaddr *)&sa, len);
    while (rc != 0 && errno == EINTR);
    if (rc == 0)
        return 1;
    if (errno != EINPROGRESS)
        return connect_fail(L, 1, io_err_name(errno));
    return net_run_op(L, &connect_op, o, deadline, poll);
}

/* server:acceptable() -> a select arm, ready (with the server as its value) when a
 * connection waits to be accepted */
static int l_acceptable(lua_State *L)
{
    net_check_obj(L, 1, IO_LISTEN, "server:acceptable");
    lua_settop(L, 1);
    net_push_arm(L, NETPOLL_READ);
    return 1;
}

/* ---- methods ---- */

const luaL_Reg net_tcp_methods[] = {
    {"send", l_tcp_send},
    {"recv", l_tcp_recv},
    {"sendrecv", l_tcp_sendrecv},
    {"close", net_l_close},
    {"peer", l_tcp_peer},
    {"fd", net_l_fd},
    {"port", net_l_port},
    {"setoption", net_l_setoption},
    {"shutdown", l_tcp_shutdown},
    {"readable", net_l_readable},
    {NULL, NULL},
};
const luaL_Reg net_server_methods[] = {
    {"accept", l_accept},   {"acceptable", l_acceptable},
    {"close", net_l_close}, {"port", net_l_port},
    {"fd", net_l_fd},       {"setoption", net_l_setoption},
    {NULL, NULL},
};
LUA_UNWOUND_END
