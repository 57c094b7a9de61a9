/* Argument checks, the wait tail and message encoding shared by the Lua faces. */
#include "lib/args.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/park.h"
#include "base/sanitize.h"
#include "core/runtime.h"
#include "core/scheduler.h"
#include "vm/luavm.h"
#include "vm/body.h"
#include "vm/codec.h"
#include "vm/flat.h"
#include "vm/ljx.h"
#include "lib/dist_lua.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

uint64_t lib_check_pid_in(lua_State *L, int idx, const char *fname, const smarm_runtime *rt)
{
    double d;
    uint64_t pid;
    /* the common case straight from the stack slot; what fails it takes the checks below */
    if (idx > 0 && ljx_number_at(L, idx, &d) && (pid = lib_pid_of(d, rt->slots.max)) != 0)
        return pid;
    if (lua_type(L, idx) != LUA_TNUMBER) {
        uint64_t own = dist_lua_own_pid(L, idx); /* dist.export's mark of a local pid */
        if (own && pid_index(own) < rt->slots.max)
            return own;
        luaL_error(L, "%s: bad pid (a number expected, got %s)", fname, luaL_typename(L, idx));
    }
    d = lua_tonumber(L, idx);
    if (!lib_pid_whole(d))
        luaL_error(L, "%s: bad pid (%s is not a pid)", fname, lua_tostring(L, idx));
    pid = (uint64_t)d;
    if (pid_index(pid) >= rt->slots.max || pid_gen(pid) == 0)
        luaL_error(L, "%s: bad pid (%s is not a pid of this runtime)", fname, lua_tostring(L, idx));
    return pid;
}

uint64_t lib_check_pid(lua_State *L, int idx, const char *fname)
{
    return lib_check_pid_in(L, idx, fname, luavm_runtime(L));
}

uint64_t lib_check_timeout_given(lua_State *L, int idx, const char *fname, int *poll)
{
    double t;
    if (!ljx_number_at(L, idx, &t)) {
        if (lua_isnil(L, idx))
            return 0;
        luaL_error(L, "%s: timeout must be a number of seconds, got %s", fname,
                   luaL_typename(L, idx));
    }
    if (t != t)
        luaL_error(L, "%s: timeout must be a number of seconds, got nan", fname);
    if (t < 0)
        luaL_error(L, "%s: timeout must not be negative", fname);
    if (t == 0) {
        *poll = 1;
        return 0;
    }
    if (t > 1e9)
        return 0; /* effectively forever */
    return park_now_ns() + (uint64_t)(t * 1e9);
}

uint64_t lib_check_seconds(lua_State *L, int idx, const char *fname)
{
    if (lua_isnoneornil(L, idx))
        luaL_error(L, "%s: seconds must be a number, got %s", fname, luaL_typename(L, idx));
    int poll;
    uint64_t deadline = lib_check_timeout(L, idx, fname, &poll);
    if (poll)
        return park_now_ns();
    return deadline ? deadline : park_now_ns() + (uint64_t)1e18;
}

const char *lib_check_name(lua_State *L, int idx, const char *fname)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "%s: a name must be a string, got %s", fname, luaL_typename(L, idx));
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    if (n == 0 || strlen(s) != n)
        luaL_error(L, "%s: a name must be a non-empty string without zero bytes", fname);
    return s;
}

int lib_wait(lua_State *L, actor *a, uint64_t deadline, int poll, actor_cont cont)
{
    if (poll) {
        luavm_safe_point(a, L);
        lua_pushnil(L);
        lua_pushliteral(L, "timeout");
        return 2;
    }
    a->run.deadline = deadline;
    if (deadline)
        sched_arm_wake(a, deadline);
    return body_wait(L, a, cont);
}

int lib_timed_out(actor *a, lua_State *L)
{
    if (!a->run.deadline || park_now_ns() < a->run.deadline)
        return 0;
    lua_pushnil(L);
    lua_pushliteral(L, "timeout");
    return 1;
}

void lib_require(lua_State *L, const char *module)
{
    lua_getfield(L, LUA_GLOBALSINDEX, "require");
    lua_pushstring(L, module);
    lua_call(L, 1, 1);
}

void lib_require_field(lua_State *L, const char *module, const char *field)
{
    lib_require(L, module);
    lua_getfield(L, -1, field);
    lua_replace(L, -2);
}

int lib_forward(lua_State *L, const char *module, const char *fn)
{
    int n = lua_gettop(L);
    lib_require_field(L, module, fn);
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

/* A message flat declined: the nested fast pass (vm/flat.h) on the C stack, with room for
 * the refs prefix in front, else the codec's own walk, which also names what cannot be
 * sent. */
static __attribute__((noinline)) msg *encode_nested(lua_State *L, int idx, wire_buf *scratch,
                                                    const char *fname, const char *extra,
                                                    size_t extralen)
{
    char buf[WIRE_REFS_LEN + FLAT_DEEP_MAX];
    char *bytes = buf + WIRE_REFS_LEN;
    flat_out r;
    size_t n = idx > 0 ? flat_encode_deep(L, idx, bytes, FLAT_DEEP_MAX, codec_endpoint(), &r) : 0;
    if (n) {
        if (r.ntx) {
            bytes = buf;
            n += WIRE_REFS_LEN;
            wire_refs_prefix_txs(bytes, r.txs, r.ntx);
        }
        msg *m = msg_new_extra(bytes, n, extra, extralen);
        if (!m) {
            wire_release(bytes, n);
            luaL_error(L, "%s: out of memory", fname);
        }
        /* the receiver takes it without checking its bytes again (but an int64 needs its
         * FFI, which the check looks for) */
        m->flat = r.cdata ? 0 : MSG_DEEP;
        return m;
    }
    char err[256];
    scratch->len = 0;
    if (codec_encode_general(L, idx, scratch, "msg", err, sizeof err) != 0) {
        luaL_error(L, "%s: %s", fname, err);
        return NULL;
    }
    msg *m = extralen ? msg_new_extra(scratch->data, scratch->len, extra, extralen)
                      : msg_new(scratch->data, scratch->len);
    if (!m) {
        /* the encoding took references to the channels it carries: give them back */
        wire_release(scratch->data, scratch->len);
        scratch->len = 0;
        luaL_error(L, "%s: out of memory", fname);
    }
    return m;
}

msg *lib_encode_msg(lua_State *L, int idx, wire_buf *scratch, const char *fname, const char *extra,
                    size_t extralen)
{
    /* most messages are flat (vm/flat.h): encoded without the codec's buffer */
    char flat[FLAT_MAX];
    int cdata;
    size_t n = idx > 0 ? flat_encode(L, idx, flat, sizeof flat, &cdata) : 0;
    if (!n)
        return encode_nested(L, idx, scratch, fname, extra, extralen);
    msg *m = msg_new_extra(flat, n, extra, extralen);
    if (!m)
        luaL_error(L, "%s: out of memory", fname);
    /* the receiver takes it without checking its bytes again (but an int64 needs its FFI,
     * which flat_decodable looks for) */
    m->flat = cdata ? 0 : MSG_FLAT;
    return m;
}

void lib_object_mt(lua_State *L, lua_CFunction gc, lua_CFunction tostring, const char *name,
                   const void *key)
{
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushstring(L, name);
    lua_setfield(L, -2, "__metatable");
    luavm_registry_keep(L, key);
}

LUA_UNWOUND_END
