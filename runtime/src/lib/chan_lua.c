/* The Lua face of channels and select: tx/rx objects are full userdata with a metatable per
 * state (made on first use); waits park through sched_wait and re-check on every wake. */
#include "lib/chan_lua.h"

#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include "core/actor.h"
#include "vm/codec.h"
#include "vm/ljx.h"
#include "lib/args.h"
#include "lib/net_lua.h"
#include "lib/recv_lua.h"
#include "lib/smarm_lua.h"
#include "vm/luavm.h"
#include "core/runtime.h"
#include "base/sanitize.h"
#include "core/scheduler.h"
#include "base/park.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* An endpoint object's payload. The magic tells it from any other userdata (the codec sees
 * payloads only); c is NULL once an rx has been sent away, or the object released. */
typedef struct chan_ep {
    uint64_t magic;
    chan *c;
    int kind;
    int released; /* c went by tx:release or rx:release */
    uint64_t ref; /* a monitor's id (mon.ref), else 0 */
} chan_ep;

static const char tx_mt_key = 't', rx_mt_key = 'r', mon_mt_key = 'm', inbox_key = 'i',
                  spent_tx_mt_key = 'T', spent_rx_mt_key = 'R';

static uint64_t ep_magic(void)
{
    return (uint64_t)(uintptr_t)&tx_mt_key * 0xC2B2AE3D27D4EB4Full ^ 0x736d61726d636821ull;
}

static const char *kind_name(int kind) { return kind == CHAN_TX ? "tx" : "rx"; }

/* ---- endpoint objects ---- */

int chan_lua_endpoint(void *ud, size_t len, void **c)
{
    chan_ep *ep = ud;
    if (len != sizeof(chan_ep) || ep->magic != ep_magic())
        return 0;
    *c = ep->c;
    return ep->kind;
}

void *chan_lua_take_rx(void *ud)
{
    chan_ep *ep = ud;
    chan *c = ep->c;
    ep->c = NULL;
    chan_set_owner(c, 0); /* nobody receives until a decoder takes it */
    return c;
}

static chan_ep *to_ep(lua_State *L, int idx)
{
    /* one call (lua_type, lua_objlen and lua_touserdata took 60 instructions, ten times in a
     * gen_server call) */
    chan_ep *ep = ljx_udata_at(L, idx, sizeof(chan_ep));
    return ep && ep->magic == ep_magic() ? ep : NULL;
}

/* The endpoint of `kind` at idx, alive (an rx that was sent away raises). */
static chan_ep *check_ep(lua_State *L, int idx, int kind, const char *fname)
{
    chan_ep *ep = to_ep(L, idx);
    if (!ep || ep->kind != kind)
        luaL_error(L, "%s: a channel %s expected, got %s", fname, kind_name(kind),
                   ep ? "a channel tx" : luaL_typename(L, idx));
    if (!ep->c)
        luaL_error(L,
                   kind == CHAN_RX && !ep->released
                       ? "%s: this rx was sent to another actor and can no longer receive"
                       : "%s: this %s was released",
                   fname, kind_name(kind));
    return ep;
}

/* ep lets go of its channel, if it holds one (the object stays, holding none). */
static void ep_let_go(chan_ep *ep)
{
    chan *c = ep->c;
    ep->c = NULL;
    if (c)
        chan_release(c, ep->kind);
}

static int l_ep_gc(lua_State *L)
{
    chan_ep *ep = to_ep(L, 1);
    if (ep)
        ep_let_go(ep);
    return 0;
}

static int l_ep_tostring(lua_State *L)
{
    chan_ep *ep = to_ep(L, 1);
    if (ep && ep->c)
        lua_pushfstring(L, "channel %s %p", kind_name(ep->kind), (void *)ep->c);
    else
        lua_pushfstring(L, "channel %s (%s)", ep ? kind_name(ep->kind) : "?",
                        ep && ep->released ? "released" : "sent away");
    return 1;
}

static int l_tx_send(lua_State *L);
static int l_tx_close(lua_State *L);
static int l_tx_release(lua_State *L);
static int l_rx_recv(lua_State *L);
static int l_rx_release(lua_State *L);

/* Pushes the metatable of kind's objects, creating it on the state's first use. */
static void push_mt(lua_State *L, int kind)
{
    const char *key = kind == CHAN_TX ? &tx_mt_key : &rx_mt_key;
    if (luavm_registry_get(L, key))
        return;
    lua_createtable(L, 0, 4);
    lua_createtable(L, 0, 2);
    if (kind == CHAN_TX) {
        lua_pushcfunction(L, l_tx_send);
        lua_setfield(L, -2, "send");
        lua_pushcfunction(L, l_tx_close);
        lua_setfield(L, -2, "close");
        lua_pushcfunction(L, l_tx_release);
        lua_setfield(L, -2, "release");
    } else {
        lua_pushcfunction(L, l_rx_recv);
        lua_setfield(L, -2, "recv");
        lua_pushcfunction(L, l_rx_release);
        lua_setfield(L, -2, "release");
    }
    lib_object_mt(L, l_ep_gc, l_ep_tostring, "smarm channel", key);
}

/* Pushes the metatable of kind's released objects: the live one's methods, name and
 * __tostring, and no __gc. A userdata without a __gc when the collector finds it dead is
 * freed without a finalizer call (a protected call from the collector, a few hundred
 * instructions: a gen_server call made three of them). */
static void push_spent_mt(lua_State *L, int kind)
{
    const char *key = kind == CHAN_TX ? &spent_tx_mt_key : &spent_rx_mt_key;
    if (luavm_registry_get(L, key))
        return;
    push_mt(L, kind);
    lua_createtable(L, 0, 3);
    static const char *const fields[] = {"__index", "__tostring", "__metatable"};
    for (int i = 0; i < 3; i++) {
        lua_getfield(L, -2, fields[i]);
        lua_setfield(L, -2, fields[i]);
    }
    lua_remove(L, -2);
    luavm_registry_keep(L, key);
}

/* A monitor's __index: mon.ref, else the rx methods (upvalue 1). */
static int l_mon_index(lua_State *L)
{
    const char *k = lua_tostring(L, 2);
    if (k && k[0] == 'r' && k[1] == 'e' && k[2] == 'f' && k[3] == 0) {
        chan_ep *ep = to_ep(L, 1);
        if (ep && ep->ref) {
            lua_pushnumber(L, (lua_Number)ep->ref);
            return 1;
        }
        return 0;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

/* The metatable of monitors: an rx's, with mon.ref. */
static void push_mon_mt(lua_State *L)
{
    if (luavm_registry_get(L, &mon_mt_key))
        return;
    lua_createtable(L, 0, 4);
    push_mt(L, CHAN_RX);
    lua_getfield(L, -1, "__index");
    lua_replace(L, -2);
    lua_pushcclosure(L, l_mon_index, 1);
    lib_object_mt(L, l_ep_gc, l_ep_tostring, "smarm channel", &mon_mt_key);
}

void chan_lua_monitor_ref(lua_State *L, int idx, uint64_t ref)
{
    idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
    chan_ep *ep = to_ep(L, idx);
    if (!ep)
        return;
    ep->ref = ref;
    push_mon_mt(L);
    lua_setmetatable(L, idx);
}

void chan_lua_push(lua_State *L, chan *c, enum chan_kind kind)
{
    if (!lua_checkstack(L, 4))
        luaL_error(L, "out of memory (Lua stack) making a channel %s", kind_name(kind));
    chan_ep *ep = lua_newuserdata(L, sizeof *ep);
    ep->magic = ep_magic();
    ep->c = NULL; /* until the metatable (and so __gc) is in place */
    ep->kind = kind;
    ep->ref = 0;
    ep->released = 0;
    push_mt(L, kind);
    lua_setmetatable(L, -2);
    ep->c = c;
    if (kind == CHAN_RX)
        chan_set_owner(c, luavm_actor(L)->pid);
}

/* ---- waiting ---- */

/* What a parked wait scans on each wake (an rx, or select's arms table) is anchored in a slot
 * of the state's roots (ljx_wait_anchor): a continuation runs on whichever thread of the
 * state resumes it, and the collector may run a cycle before it. */
static void set_anchor(lua_State *L, int idx) { ljx_wait_anchor(L, idx); }

/* rx arm: pushes v (1) or nil, "closed" (2); -1 if nothing is there yet. */
static int try_rx(actor *a, lua_State *L, chan *c, const char *fname)
{
    int closed;
    msg *m = chan_pop(c, &closed);
    if (m) {
        luavm_take(a, L, m, fname);
        return 1;
    }
    if (!closed)
        return -1;
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
}

/* inbox arm: pushes the next message (1), or -1. */
static int try_inbox(actor *a, lua_State *L)
{
    msg *m = mailbox_pop(&a->inbox);
    if (!m)
        return -1;
    recv_lua_take(a, L, m, "smarm.select");
    return 1;
}

static int rx_cont(actor *a, lua_State *L)
{
    if (!ljx_wait_anchored(L))
        lua_pushnil(L);
    chan_ep *ep = to_ep(L, -1);
    lua_pop(L, 1); /* the registry still holds it */
    int n = try_rx(a, L, ep->c, "rx:recv");
    if (n < 0 && lib_timed_out(a, L))
        n = 2;
    if (n >= 0) {
        set_anchor(L, 0);
        return n;
    }
    return -1;
}

/**
 * rx:recv([timeout]) -> value | nil, "closed" | nil, "timeout"
 * Takes the next value sent on the channel. "closed" comes once every queued value has
 * been taken and tx:close() was called or no tx is left anywhere. Only the actor that owns
 * rx may call it: an rx sent inside a message moves to the receiving actor, and the
 * sender's copy raises an error when used.
 */
static int l_rx_recv(lua_State *L)
{
    actor *a = luavm_actor(L);
    chan_ep *ep = check_ep(L, 1, CHAN_RX, "rx:recv");
    int poll;
    uint64_t deadline = lib_check_timeout(L, 2, "rx:recv", &poll);
    luavm_gc_catch_up(L);
    int n = try_rx(a, L, ep->c, "rx:recv");
    if (n >= 0) {
        luavm_safe_point(a, L);
        return n;
    }
    if (!poll)
        set_anchor(L, 1);
    return lib_wait(L, a, deadline, poll, rx_cont);
}

/**
 * tx:send(value) -> true | nil, "closed"
 * Queues a copy of value (anything smarm.send takes, endpoints included). "closed" when
 * tx:close() was called or the receiver is gone.
 */
static int l_tx_send(lua_State *L)
{
    chan_ep *ep = check_ep(L, 1, CHAN_TX, "tx:send");
    if (lua_gettop(L) < 2)
        return luaL_error(L, "tx:send: a value expected (argument 1)");
    lib_stop_point(luavm_actor(L));
    sched *s = sched_current();
    msg *m = lib_encode(L, 2, "tx:send", s);
    if (chan_send(ep->c, m) != 0) {
        msg_free(m);
        lua_pushnil(L);
        lua_pushliteral(L, "closed");
        return 2;
    }
    lib_count_send(luavm_actor(L), s);
    lua_pushboolean(L, 1);
    return 1;
}

/* ep, the live endpoint object at index 1, lets go of its channel and is dead afterwards:
 * nothing is left for its finalizer to do; it takes the spent metatable (a monitor keeps its
 * own, for mon.ref). */
static void ep_spend(lua_State *L, chan_ep *ep)
{
    ep_let_go(ep);
    ep->released = 1;
    if (!ep->ref) {
        push_spent_mt(L, ep->kind);
        lua_setmetatable(L, 1);
    }
}

static int ep_release(lua_State *L, int kind, const char *fname)
{
    ep_spend(L, check_ep(L, 1, kind, fname));
    return 0;
}

/* tx:release(): this object lets go of the channel without closing it for the other
 * senders (copies sent in messages keep it open); the object is dead afterwards. A caller
 * that released its own tx sees "closed" once every copy it sent is gone. */
static int l_tx_release(lua_State *L) { return ep_release(L, CHAN_TX, "tx:release"); }

/* rx:release(): the receiver lets go of the channel: senders get nil, "closed" from now on,
 * and what is queued is dropped; the object is dead afterwards. */
static int l_rx_release(lua_State *L) { return ep_release(L, CHAN_RX, "rx:release"); }

/**
 * tx:close()
 * Closes the channel for every sender: later sends return nil, "closed"; the receiver
 * takes what is queued, then gets nil, "closed".
 */
static int l_tx_close(lua_State *L)
{
    chan_close(check_ep(L, 1, CHAN_TX, "tx:close")->c);
    return 0;
}

/**
 * smarm.channel() -> tx, rx
 * A channel with many senders and one receiver (the calling actor). tx can be copied
 * into messages: whoever receives it can send. rx can be sent too, which moves it: the
 * receiving actor becomes the channel's receiver and the sender's rx raises when used.
 * The channel closes for the receiver when tx:close() is called or the last tx anywhere
 * (objects and tx inside undelivered messages) is gone, e.g. its last holder died; it
 * closes for senders when rx is gone (the receiver died or dropped it).
 */
static int l_channel(lua_State *L)
{
    actor *a = luavm_actor(L);
    lua_settop(L, 0);
    luaL_checkstack(L, 6, "smarm.channel");
    /* make the metatables first: no raise can come between chan_new and the objects */
    push_mt(L, CHAN_TX);
    push_mt(L, CHAN_RX);
    lua_settop(L, 0);
    chan *c = chan_new(a->rt, a->pid);
    if (!c)
        return luaL_error(L, "smarm.channel: out of memory");
    chan_lua_push(L, c, CHAN_TX);
    chan_lua_push(L, c, CHAN_RX);
    return 2;
}

/* ---- the calls' reply channels (package.preload["smarm.chan.raw"], for smarm.gen) ----
 * A gen_server call used to make a channel (two objects, each with its metatable) and let
 * both go, and the server's copy of tx went only at its collection, through a finalizer:
 * with the checks of the reply handle, about a tenth of a call's instructions. A caller now
 * keeps one tx and one rx object (smarm.channel's, the first time) and gives them a new
 * channel per call; a server that has sent its one reply lets go of its copy at once. */

/* ep, a live object made by this file, to hold c (taking over one reference); the
 * channel it held before is let go. */
static void ep_rebind(chan_ep *ep, chan *c)
{
    ep_let_go(ep);
    ep->c = c;
    ep->released = 0;
}

/* The object at idx if it is a live (not spent) endpoint of kind, else NULL. */
static chan_ep *live_ep(lua_State *L, int idx, int kind)
{
    chan_ep *ep = to_ep(L, idx);
    if (!ep || ep->kind != kind || ep->ref)
        return NULL;
    if (!ep->c && ep->released) /* spent by tx:release or rx:release: its __gc is gone */
        return NULL;
    return ep;
}

/**
 * raw.call_send(pid, msg, tx, rx) -> true, now | nil, "dead"
 * A call's request, in one C call where it took four: tx and rx (a live pair the caller
 * keeps for its calls, held by its frame; msg refers to tx) get a new channel, received by
 * the caller, and let go of the one they held; smarm.send(pid, msg); then tx lets go of
 * the new one (the request's copy keeps it open). now is smarm.now() at the send, for a
 * wait that may have to go on after "closed". Raises as smarm.send.
 */
static int l_raw_call_send(lua_State *L)
{
    lua_settop(L, 4);
    chan_ep *tx = live_ep(L, 3, CHAN_TX), *rx = live_ep(L, 4, CHAN_RX);
    if (!tx || !rx)
        return luaL_error(L, "smarm.gen: a reply channel's objects expected");
    actor *a = luavm_actor(L);
    chan *c = chan_new(a->rt, a->pid);
    if (!c)
        return luaL_error(L, "smarm.gen: out of memory (a reply channel)");
    ep_rebind(tx, c);
    ep_rebind(rx, c);
    chan_set_owner(c, a->pid);
    lua_settop(L, 2);
    int n = smarm_lua_send(L);
    /* not reached when the send raised: the caller drops both (raw.drop) */
    ep_let_go(tx);
    if (n == 1 && lua_toboolean(L, -1)) {
        lua_pushnumber(L, (lua_Number)park_now_ns() / 1e9);
        return 2;
    }
    return n;
}

/**
 * raw.drop(ep)
 * Lets go of ep's channel (as release) and leaves the object live for a later call_send.
 * Nothing for anything else.
 */
static int l_raw_drop(lua_State *L)
{
    chan_ep *ep = to_ep(L, 1);
    if (ep && !ep->ref)
        ep_let_go(ep);
    return 0;
}

/**
 * raw.reply(tx, value) -> true | nil, "closed"
 * tx:send(value), then the object lets go of the channel as tx:release() (no finalizer
 * left for the collector): a call has one reply. A released tx is "closed" here, not an
 * error: a reply handle kept past the reply that spent it.
 */
static int l_raw_reply(lua_State *L)
{
    chan_ep *ep = to_ep(L, 1);
    if (ep && ep->kind == CHAN_TX && !ep->c && ep->released) {
        lua_pushnil(L);
        lua_pushliteral(L, "closed");
        return 2;
    }
    lua_settop(L, 2);
    int n = l_tx_send(L); /* raises unless ep is a live tx */
    ep_spend(L, ep);
    return n;
}

/**
 * raw.is_tx(v) -> boolean
 * Whether v is a channel's tx object (live, released or sent from: any this file made).
 */
static int l_raw_is_tx(lua_State *L)
{
    chan_ep *ep = to_ep(L, 1);
    lua_pushboolean(L, ep && ep->kind == CHAN_TX);
    return 1;
}

static const luaL_Reg raw_funcs[] = {
    {"is_tx", l_raw_is_tx}, {"call_send", l_raw_call_send},
    {"drop", l_raw_drop},   {"reply", l_raw_reply},
    {NULL, NULL},
};

int chan_lua_open_raw(lua_State *L)
{
    lua_newtable(L);
    luaL_register(L, NULL, raw_funcs);
    return 1;
}

/* ---- select ---- */

enum arm_kind { ARM_BAD, ARM_INBOX, ARM_RX, ARM_TX, ARM_GONE, ARM_FD, ARM_FD_GONE };

/* What the arm at idx is; *c for an rx. New arm kinds (monitors) slot in here and in
 * try_arm. */
static int arm_kind(lua_State *L, int idx, chan **c)
{
    if (lua_touserdata(L, idx) == (void *)&inbox_key)
        return ARM_INBOX;
    chan_ep *ep = to_ep(L, idx);
    if (!ep) {
        int fd = net_lua_is_arm(L, idx);
        return fd == 1 ? ARM_FD : fd == 2 ? ARM_FD_GONE : ARM_BAD;
    }
    if (ep->kind == CHAN_TX)
        return ARM_TX;
    *c = ep->c;
    return ep->c ? ARM_RX : ARM_GONE;
}

static int try_arm(actor *a, lua_State *L, int kind, chan *c)
{
    switch (kind) {
    case ARM_INBOX:
        return try_inbox(a, L);
    case ARM_RX:
        return try_rx(a, L, c, "smarm.select");
    case ARM_FD:
        /* ready: pushes the socket; else the network poller will wake this actor */
        return net_lua_try_arm(L, -1, a);
    default:
        return -1;
    }
}

/* Scans the arms table at t in order; pushes i and the winner's results. */
static int select_scan(actor *a, lua_State *L, int t)
{
    int n = (int)lua_objlen(L, t);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, t, i);
        chan *c = NULL;
        int kind = arm_kind(L, -1, &c);
        int r = try_arm(a, L, kind, c);
        if (r >= 0) {
            lua_pushinteger(L, i);
            lua_replace(L, -r - 2); /* over the arm */
            return r + 1;
        }
        lua_pop(L, 1);
    }
    return -1;
}

static int select_cont(actor *a, lua_State *L)
{
    if (!ljx_wait_anchored(L))
        lua_pushnil(L);
    int n = select_scan(a, L, lua_gettop(L));
    if (n < 0 && lib_timed_out(a, L))
        n = 2;
    if (n >= 0) {
        set_anchor(L, 0);
        return n;
    }
    lua_pop(L, 1);
    return -1;
}

/**
 * smarm.select(arms, [timeout]) -> i, value | i, nil, "closed" | nil, "timeout"
 * Waits until one of arms is ready and takes from it: arms is an array of channel rx,
 * smarm.inbox (the calling actor's own inbox) and socket arms (sock:readable(),
 * server:acceptable(), u:readable(), whose value is the socket: select takes nothing from
 * it, the caller then reads or accepts). The first ready arm in array order wins; a closed
 * rx is ready (and stays so: drop it from arms once seen), and so is a closed socket or one
 * with an error or the end of its stream to read. timeout 0 polls.
 */
static int l_select(lua_State *L)
{
    actor *a = luavm_actor(L);
    if (lua_type(L, 1) != LUA_TTABLE)
        return luaL_error(L, "smarm.select: arms must be a table, got %s", luaL_typename(L, 1));
    int poll;
    uint64_t deadline = lib_check_timeout(L, 2, "smarm.select", &poll);
    lua_settop(L, 1);
    int n = (int)lua_objlen(L, 1);
    if (n == 0)
        return luaL_error(L, "smarm.select: no arms");
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        chan *c;
        switch (arm_kind(L, -1, &c)) {
        case ARM_BAD:
            return luaL_error(L,
                              "smarm.select: arm %d is a %s (a channel rx, smarm.inbox or "
                              "a socket arm expected)",
                              i, luaL_typename(L, -1));
        case ARM_TX:
            return luaL_error(L, "smarm.select: arm %d is a channel tx (select takes rx)", i);
        case ARM_GONE:
            return luaL_error(L, "smarm.select: arm %d is an rx released or sent to another actor",
                              i);
        case ARM_FD_GONE:
            return luaL_error(L, "smarm.select: arm %d is of a socket sent to another actor", i);
        }
        lua_pop(L, 1);
    }
    luavm_gc_catch_up(L);
    int r = select_scan(a, L, 1);
    if (r >= 0) {
        luavm_safe_point(a, L);
        return r;
    }
    if (!poll)
        set_anchor(L, 1);
    return lib_wait(L, a, deadline, poll, select_cont);
}

/* ---- registration ---- */

const luaL_Reg chan_lua_funcs[] = {
    {"channel", l_channel},
    {"select", l_select},
    {NULL, NULL},
};

void chan_lua_fields(lua_State *L, int t)
{
    lua_pushliteral(L, "inbox");
    lua_pushlightuserdata(L, (void *)&inbox_key);
    lua_rawset(L, t);
}

void chan_lua_push_ref(lua_State *L, void *c, int kind) { chan_lua_push(L, c, kind); }

LUA_UNWOUND_END
