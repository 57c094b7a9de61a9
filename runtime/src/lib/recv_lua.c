/* Selective receive over the inbox (base/mailbox.h's scan): a scan decodes each message it
 * passes once and keeps the value in a per-state table under the message's cache handle,
 * so the next scan (or a plain recv) reuses it instead of decoding the bytes again. */
#include "lib/recv_lua.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/mailbox.h"
#include "base/park.h"
#include "base/sanitize.h"
#include "core/trace.h"
#include "lib/args.h"
#include "vm/luavm.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

static const char cache_key = 'c';

/* Pushes the cache table of L's state, making it on first use. */
static void push_cache(lua_State *L)
{
    if (luavm_registry_get(L, &cache_key))
        return;
    lua_newtable(L);
    luavm_registry_keep(L, &cache_key);
}

/* Pushes the decoded value of m (decoding and caching it if no scan did yet). */
static void push_value(actor *a, lua_State *L, msg *m)
{
    push_cache(L);
    if (m->cache) {
        lua_rawgeti(L, -1, m->cache);
        lua_remove(L, -2);
        return;
    }
    char err[256];
    int rc = luavm_decode(a, L, m, err, sizeof err);
    if (rc != 0) {
        /* a message that cannot be decoded would stop every later scan: it goes */
        msg_free(mailbox_scan_take(&a->inbox));
        if (rc > 0)
            lua_error(L);
        luaL_error(L, "smarm.recv: cannot decode a message: %s", err);
    }
    lua_pushvalue(L, -1);
    int ref = luaL_ref(L, -3);
    /* its channel references belong to the value now (msg_free leaves them) */
    m->cache = ref;
    lua_remove(L, -2);
}

/* m left a's inbox for its Lua code: counted, the end of its flow in a trace, and a host's
 * fd follows the inbox. Every take goes through here. */
static inline void took(actor *a, msg *m)
{
    a->stats.msgs_in++;
    if (TRACE_ON(a->rt))
        trace_rec(sched_current(), TRACE_TAKE, a->pid, (uintptr_t)m, 0, 0);
    lib_took(a);
}

void recv_lua_take(actor *a, lua_State *L, msg *m, const char *fname)
{
    took(a, m);
    if (!m->cache) {
        luavm_take(a, L, m, fname);
        return;
    }
    push_cache(L);
    lua_rawgeti(L, -1, m->cache);
    luaL_unref(L, -2, m->cache);
    lua_remove(L, -2);
    msg_free(m);
}

static actor *scanning(lua_State *L)
{
    actor *a = luavm_actor(L);
    if (mailbox_scan_stale(&a->inbox))
        luaL_error(L, "smarm.recv: the inbox was received from during a selective receive "
                      "(a receive inside the match function?)");
    return a;
}

/* mark() -> id: where a later scan may begin (what is queued now is skipped). */
static int l_mark(lua_State *L)
{
    lua_pushnumber(L, mailbox_mark(&luavm_actor(L)->inbox));
    return 1;
}

/* begin([mark]): starts a scan from the oldest message, or after mark if it is current. */
static int l_begin(lua_State *L)
{
    mailbox_scan_begin(&luavm_actor(L)->inbox, (uint32_t)luaL_optnumber(L, 1, 0));
    return 0;
}

/* next() -> true, value | false: the next message of the scan, left queued. */
static int l_next(lua_State *L)
{
    actor *a = scanning(L);
    msg *m = mailbox_scan_next(&a->inbox);
    if (!m) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_pushboolean(L, 1);
    push_value(a, L, m);
    return 2;
}

/* take(): removes the message next returned last (its value is the caller's already). */
static int l_take(lua_State *L)
{
    actor *a = scanning(L);
    msg *m = mailbox_scan_take(&a->inbox);
    if (!m)
        return luaL_error(L, "smarm.recv: nothing to take");
    took(a, m);
    if (m->cache) {
        push_cache(L);
        luaL_unref(L, -1, m->cache);
        lua_pop(L, 1);
    }
    msg_free(m);
    return 0;
}

/* deadline(timeout) -> d: nil timeout = nil (forever), 0 = 0 (poll), else an instant. */
static int l_deadline(lua_State *L)
{
    int poll;
    uint64_t d = lib_check_timeout(L, 1, "smarm.recv", &poll);
    if (poll)
        lua_pushnumber(L, 0);
    else if (d)
        lua_pushnumber(L, (lua_Number)d);
    else
        lua_pushnil(L);
    return 1;
}

static int wait_cont(actor *a, lua_State *L)
{
    if (mailbox_scan_ready(&a->inbox)) {
        lua_pushboolean(L, 1);
        return 1;
    }
    return lib_timed_out(a, L) ? 2 : -1;
}

/* wait(deadline) -> true | nil, "timeout": until a message arrives past the scan. */
static int l_wait(lua_State *L)
{
    actor *a = scanning(L);
    if (mailbox_scan_ready(&a->inbox)) {
        lua_pushboolean(L, 1);
        return 1;
    }
    uint64_t deadline = 0;
    int poll = 0;
    if (!lua_isnoneornil(L, 1)) {
        deadline = (uint64_t)lua_tonumber(L, 1);
        poll = deadline == 0 || deadline <= park_now_ns();
    }
    return lib_wait(L, a, deadline, poll, wait_cont);
}

static const luaL_Reg raw_funcs[] = {
    {"mark", l_mark},         {"begin", l_begin}, {"next", l_next}, {"take", l_take},
    {"deadline", l_deadline}, {"wait", l_wait},   {NULL, NULL},
};

/* The behaviours' protocol tag (smarm.gen): a key no user message carries by accident, the
 * same in every actor of the process, different in every process. */
static char proto_tag[40];
static pthread_once_t proto_once = PTHREAD_ONCE_INIT;

static void make_tag(void)
{
    uint64_t r[2] = {0, 0};
    if (getentropy(r, sizeof r) != 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r[0] = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
        r[1] = (uint64_t)ts.tv_sec;
    }
    snprintf(proto_tag, sizeof proto_tag, "$gen:%016llx%08llx", (unsigned long long)r[0],
             (unsigned long long)(r[1] & 0xffffffffu));
}

int recv_lua_open(lua_State *L)
{
    pthread_once(&proto_once, make_tag);
    lua_newtable(L);
    luaL_register(L, NULL, raw_funcs);
    lua_pushstring(L, proto_tag);
    lua_setfield(L, -2, "tag");
    return 1;
}

LUA_UNWOUND_END
