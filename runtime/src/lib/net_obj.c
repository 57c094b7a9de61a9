/* Socket objects and the wait of smarm.net. A socket object is a full userdata holding a
 * pointer to its io_sock handle; closing frees the handle (and the fd), sending it in a
 * message moves the handle into the message and leaves the object dead ("sent"), and __gc
 * closes whatever the object still holds, so an actor's sockets close however it ends.
 *
 * Every blocking operation is a try function over the nonblocking fd: it pushes its results,
 * or returns -1 and the readiness it waits for. The method tries once; if it must wait, it
 * arms the network poller with the actor's pid (after the EAGAIN, so an edge that came
 * meanwhile is seen: the arm says "ready" and the method tries again), anchors its arguments
 * and parks; the continuation takes the edge that woke it, runs the try again, and re-arms
 * while it is not satisfied. */
#include "lib/net_obj.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/park.h"
#include "base/sanitize.h"
#include "base/wire.h"
#include "core/runtime.h"
#include "core/scheduler.h"
#include "base/netpoll.h"
#include "io/sock.h"
#include "lib/args.h"
#include "lib/net_lua.h"
#include "vm/ljx.h"
#include "vm/luavm.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

typedef struct net_arm {
    uint64_t magic;
    unsigned events;
} net_arm; /* its environment table holds the socket object at [1] */

static const char tcp_mt_key = 't', server_mt_key = 's', udp_mt_key = 'u', arm_mt_key = 'a';

/* The registry key of a state's wait anchor (below): a negative integer, which luaL_ref
 * never hands out, so that finding it pushes no light userdata (LuaJIT interns each one
 * pushed) and hashes no pointer, twice per wait. */
#define WAIT_ANCHOR_KEY (-0x6e6574)

/* Slot 1 of a wait's anchor holds its op and the count of slots in use (slot 1 included)
 * as one number, the op's address times 32 plus the count: an address of static data is
 * below 2^47, so the number is exact, and a number, unlike a light userdata, is stored
 * without interning. A method waits with at most 4 arguments (5 slots); the anchor has room
 * for 8 in its array part. */
#define ANCHOR_COUNT_BITS 5
#define ANCHOR_SLOTS 8

static double op_head(const net_op *op, int n)
{
    return (double)(((uint64_t)(uintptr_t)op << ANCHOR_COUNT_BITS) | (unsigned)n);
}

/* The op of a slot-1 number (NULL for 0: none) */
static const net_op *head_op(double head)
{
    return (const net_op *)(uintptr_t)((uint64_t)head >> ANCHOR_COUNT_BITS);
}

/* The count of a slot-1 number (0 for 0: none) */
static int head_count(double head)
{
    return (int)((uint64_t)head & ((1u << ANCHOR_COUNT_BITS) - 1));
}

/* The arguments a slot-1 number says are anchored after it */
static int head_args(double head)
{
    int n = head_count(head);
    return n > 0 ? n - 1 : 0;
}

static uint64_t obj_magic(void)
{
    return (uint64_t)(uintptr_t)&tcp_mt_key * 0x9E3779B97F4A7C15ull ^ 0x736d61726d6e6574ull;
}

static uint64_t arm_magic(void) { return obj_magic() ^ 0x61726d61726d6172ull; }

static const char *kind_name(int kind)
{
    return kind == IO_TCP ? "socket" : kind == IO_LISTEN ? "server" : "udp socket";
}

static netpoll *netpoll_of(lua_State *L) { return &luavm_runtime(L)->np; }

/* ---- objects ---- */

static net_obj *to_obj(lua_State *L, int idx)
{
    net_obj *o = ljx_udata_at(L, idx, sizeof(net_obj));
    return o && o->magic == obj_magic() ? o : NULL;
}

/* The object of kind at idx; a closed one is returned (its methods answer "closed"), one
 * sent to another actor raises. */
net_obj *net_check_obj(lua_State *L, int idx, int kind, const char *fname)
{
    net_obj *o = to_obj(L, idx);
    if (!o || (kind && o->kind != kind))
        luaL_error(L, "%s: a %s expected, got %s", fname, kind ? kind_name(kind) : "socket",
                   o ? kind_name(o->kind) : luaL_typename(L, idx));
    if (o->state == OBJ_SENT)
        luaL_error(L, "%s: this %s was sent to another actor", fname, kind_name(o->kind));
    return o;
}

void net_close_obj(net_obj *o)
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
        net_close_obj(o);
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

/* Pushes the metatable of kind's objects, made on the state's first use. */
static void push_mt(lua_State *L, int kind)
{
    const char *key = kind == IO_TCP      ? &tcp_mt_key
                      : kind == IO_LISTEN ? &server_mt_key
                                          : &udp_mt_key;
    if (luavm_registry_get(L, key))
        return;
    lua_createtable(L, 0, 4);
    const luaL_Reg *r = kind == IO_TCP      ? net_tcp_methods
                        : kind == IO_LISTEN ? net_server_methods
                                            : net_udp_methods;
    lua_createtable(L, 0, 10);
    for (; r->name; r++) {
        lua_pushcfunction(L, r->func);
        lua_setfield(L, -2, r->name);
    }
    lib_object_mt(L, l_obj_gc, l_obj_tostring, "smarm socket", key);
}

/* Pushes a closed object of kind: a handle is attached once it exists, so a memory error
 * raised while making the object can leak no fd. */
net_obj *net_new_obj(lua_State *L, int kind)
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
int net_attach(net_obj *o, int fd)
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
    net_obj *o = net_new_obj(L, s->kind);
    o->s = s;
    o->state = OBJ_OPEN;
}

void net_lua_release(void *h) { io_sock_free(h); }

int net_push_fail(lua_State *L, const char *err)
{
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
}

/* ---- waiting ---- */

int net_fail_plain(lua_State *L, int base, const char *err)
{
    (void)base;
    return net_push_fail(L, err);
}

/* Makes sure actor a is woken when the object at base is ready for ev: 0, 1 (ready now: try
 * again instead of parking), or -errno. */
static int arm(lua_State *L, actor *a, net_obj *o, unsigned ev)
{
    if (ev == 0) {
        sched_arm_wake(a, o->backoff_until);
        return 0;
    }
    return io_sock_arm(netpoll_of(L), o->s, ev, a->pid);
}

/* Tries op until it is done or armed: its results (>= 0), or -1 when the actor must park. */
static int try_or_arm(lua_State *L, actor *a, const net_op *op, int base, net_obj *o,
                      uint64_t deadline)
{
    for (;;) {
        unsigned ev = 0;
        int r = op->try(L, base, o, &ev);
        if (r >= 0)
            return r;
        if (deadline && park_now_ns() >= deadline)
            return op->fail(L, base, "timeout");
        int rc = arm(L, a, o, ev);
        if (rc == 0)
            return -1;
        if (rc < 0)
            return op->fail(L, base, strerror(-rc));
    }
}

/* The anchor of a wait (the op, then the method's arguments) is one table per state, kept
 * between waits: a connection waits once per request, and a table made and dropped each
 * time is garbage to collect. Slot 1 holds the op and the count in use; a wait clears its
 * slots when it ends, so the table holds nothing alive between waits (one an interrupt
 * ended is cleared by the next store, which clears every slot past its own). The slots are
 * written and read by ljx_anchor_*, which find the table in the registry themselves: a C API
 * call per slot cost more than the rest of a wait's anchoring, and pushing the table to
 * reach it cost two calls and a stack slot per wait. */
static int net_cont(actor *a, lua_State *L)
{
    int base = lua_gettop(L) + 1;
    /* the arguments pushed at base.., and the slots cleared at once: the values live on
     * the stack while the continuation runs */
    double head = ljx_anchor_take(L, WAIT_ANCHOR_KEY, head_args);
    const net_op *op = head_op(head);
    int n = head_count(head);
    net_obj *o = net_obj_at(L, base);
    if (o->s)
        io_sock_take_ready(o->s);
    int r = try_or_arm(L, a, op, base, o, a->run.deadline);
    if (r >= 0)
        return r;
    /* waits again: anchored again */
    ljx_anchor_store(L, WAIT_ANCHOR_KEY, ANCHOR_SLOTS, op_head(op, n), base, n - 1);
    lua_settop(L, base - 1);
    return -1;
}

/* The wait of a method whose try asked for ev: its arguments are at base..top. */
static int net_block(lua_State *L, const net_op *op, int base, net_obj *o, unsigned ev,
                     uint64_t deadline, int poll)
{
    actor *a = luavm_actor(L);
    if (poll)
        return op->fail(L, base, "timeout");
    int rc = arm(L, a, o, ev);
    if (rc < 0)
        return op->fail(L, base, strerror(-rc));
    if (rc > 0) {
        /* an edge came since the try: try again (with the deadline the wait would have) */
        int r = try_or_arm(L, a, op, base, o, deadline);
        if (r >= 0)
            return r;
    }
    int top = lua_gettop(L);
    int n = top - base + 2;
    if (n > ANCHOR_SLOTS)
        return luaL_error(L, "net: a wait with too many arguments");
    ljx_anchor_store(L, WAIT_ANCHOR_KEY, ANCHOR_SLOTS, op_head(op, n), base, n - 1);
    return lib_wait(L, a, deadline, 0, net_cont);
}

/* Tries op with the arguments at 1..top, then waits if it must. */
int net_run_op(lua_State *L, const net_op *op, net_obj *o, uint64_t deadline, int poll)
{
    unsigned ev = 0;
    if (poll && o->s)
        io_sock_undrain(o->s); /* a poll does not wait: its try must read */
    int r = op->try(L, 1, o, &ev);
    return r >= 0 ? r : net_block(L, op, 1, o, ev, deadline, poll);
}

/* ---- common methods ---- */

/* sock:close(), server:close(), u:close(): closes the fd; later calls return nil, "closed".
 * Closing twice is fine. */
int net_l_close(lua_State *L)
{
    net_obj *o = net_check_obj(L, 1, 0, "close");
    net_close_obj(o);
    return 0;
}

/* :fd() -> the fd, or -1 once closed */
int net_l_fd(lua_State *L)
{
    net_obj *o = net_check_obj(L, 1, 0, "fd");
    lua_pushinteger(L, o->s ? o->s->fd : -1);
    return 1;
}

/* :port() -> the local port (0 for a UDP socket not bound yet) | nil, "closed" */
int net_l_port(lua_State *L)
{
    net_obj *o = net_check_obj(L, 1, 0, "port");
    if (!o->s)
        return net_push_fail(L, "closed");
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getsockname(o->s->fd, (struct sockaddr *)&sa, &len) != 0)
        return net_push_fail(L, io_err_name(errno));
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
int net_l_setoption(lua_State *L)
{
    net_obj *o = net_check_obj(L, 1, 0, "setoption");
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
        return net_push_fail(L, "closed");
    if (setsockopt(o->s->fd, level, opt, val, vlen) != 0)
        return net_push_fail(L, io_err_name(errno));
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- select arms ---- */

void net_push_arm(lua_State *L, unsigned events)
{
    luaL_checkstack(L, 4, "smarm.net");
    net_arm *arm = lua_newuserdata(L, sizeof *arm);
    arm->magic = arm_magic();
    arm->events = events;
    if (!luavm_registry_get(L, &arm_mt_key)) {
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "smarm socket arm");
        lua_setfield(L, -2, "__metatable");
        luavm_registry_keep(L, &arm_mt_key);
    }
    lua_setmetatable(L, -2);
    lua_createtable(L, 1, 0);
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, 1);
    lua_setfenv(L, -2);
}

/* sock:readable(), u:readable() -> a select arm, ready (with the socket as its value) when
 * data, the end of the stream or an error is there to be read */
int net_l_readable(lua_State *L)
{
    net_check_obj(L, 1, 0, "readable");
    lua_settop(L, 1);
    net_push_arm(L, NETPOLL_READ);
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
    if (!o->s || (arm->events & NETPOLL_READ && io_sock_buffered(o->s)))
        return 1;
    /* a server whose last accept found nothing (an acceptor's loop between connections):
     * any connection since then left an edge, which the arm reports, so the poll is not
     * needed; the edge must not be taken first. At worst an edge from before that accept
     * wakes the select once for nothing. */
    if (o->kind == IO_LISTEN && o->s->drained && arm->events == NETPOLL_READ) {
        int rc = io_sock_arm(netpoll_of(L), o->s, arm->events, a->pid);
        if (rc != 0)
            return 1; /* ready, or cannot be watched: its accept reports why */
        lua_pop(L, 1);
        return -1;
    }
    /* an edge taken before a poll (the one that woke this select, if any) */
    io_sock_take_ready(o->s);
    for (;;) {
        if (io_fd_ready(o->s->fd, arm->events))
            return 1;
        int rc = io_sock_arm(netpoll_of(L), o->s, arm->events, a->pid);
        if (rc < 0)
            return 1; /* cannot be watched: ready, and its operation reports why */
        if (rc == 0)
            break;
        /* an edge came since the poll (taken): poll again */
    }
    lua_pop(L, 1);
    return -1;
}

/* ---- arguments ---- */

int net_check_port(lua_State *L, int idx, const char *fname)
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
socklen_t net_check_addr(lua_State *L, int idx, const char *fname, struct sockaddr_storage *sa)
{
    const char *host = luaL_checkstring(L, idx);
    int port = net_check_port(L, idx + 1, fname);
    socklen_t len = io_addr_parse(host, port, sa);
    if (!len)
        luaL_error(L, "%s: %s is not an IPv4 or IPv6 address", fname, host);
    return len;
}

LUA_UNWOUND_END
