/* The external term format (ETF) for Lua values, atoms, tuples and remote pids: see
 * dist_lua.h. Atoms and pids of other nodes are interned records (base/intern.h) pushed as
 * light userdata; a tuple is a table whose key smarm.atom("$tuple") holds its size; a term
 * Lua has no value for but may hand back (a reference, a fun, a port) is a table whose key
 * smarm.atom("$term") holds its encoded bytes. */
#include "lib/dist_lua.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ei.h>
#include <lauxlib.h>
#include <lua.h>

#include "base/intern.h"
#include "base/wire.h"
#include "core/exit.h"
#include "vm/luavm.h"
#include "lib/args.h"
#include "base/sanitize.h"
#include "base/slot.h"
#include "vm/ljx.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

#define MAX_DEPTH 100
#define TWO53 9007199254740992.0

/* This node's name and creation (set once dist.lua has registered with epmd): pids of it
 * decode to local pids. */
static const intern_rec *self_node;
static uint32_t self_creation;

static const intern_rec *marker(const char *s)
{
    const intern_rec *r = intern_atom(s, strlen(s));
    return r;
}

static void push_atom(lua_State *L, const char *s, size_t n)
{
    const intern_rec *r = intern_atom(s, n);
    if (!r)
        luaL_error(L, "atom table full or name longer than 255 bytes");
    lua_pushlightuserdata(L, (void *)r);
}

static const intern_rec *rec_at(lua_State *L, int idx, uint32_t kind)
{
    if (lua_type(L, idx) != LUA_TLIGHTUSERDATA)
        return NULL;
    const intern_rec *r = intern_lookup(lua_touserdata(L, idx));
    return r && r->kind == kind ? r : NULL;
}

/* ---- decoding ---- */

typedef struct dec {
    lua_State *L;
    const char *buf;
    int len;
    const char *err;
} dec;

static int dfail(dec *d, const char *what)
{
    if (!d->err)
        d->err = what;
    return -1;
}

static uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

static int dec_term(dec *d, int *i, int depth);

/* The local pid that (node, num, serial, creation) names if it is a pid of this node as it
 * is now (not of an earlier run of its name), else 0. */
static uint64_t own_pid(const char *node, size_t nlen, uint32_t num, uint32_t serial,
                        uint32_t creation)
{
    const intern_rec *me = __atomic_load_n(&self_node, __ATOMIC_ACQUIRE);
    if (me && me->len == nlen && memcmp(me->name, node, nlen) == 0 &&
        creation == __atomic_load_n(&self_creation, __ATOMIC_RELAXED) && num <= PID_MAX_INDEX &&
        serial != 0 && serial <= PID_GEN_MASK)
        return pid_make(num, serial);
    return 0;
}

static int dec_opaque(dec *d, int *i)
{
    int start = *i;
    if (ei_skip_term(d->buf, i) < 0 || *i > d->len)
        return dfail(d, "malformed term");
    lua_createtable(d->L, 0, 1);
    lua_pushlightuserdata(d->L, (void *)marker("$term"));
    lua_pushlstring(d->L, d->buf + start, (size_t)(*i - start));
    lua_rawset(d->L, -3);
    return 0;
}

static int dec_pid(dec *d, int *i)
{
    unsigned char tag = (unsigned char)d->buf[*i];
    int at = *i + 1;
    char node[MAXATOMLEN_UTF8];
    if (ei_decode_atom_as(d->buf, &at, node, sizeof node, ERLANG_UTF8, NULL, NULL) < 0)
        return dfail(d, "malformed pid");
    int need = tag == ERL_NEW_PID_EXT ? 12 : 9;
    if (at + need > d->len)
        return dfail(d, "truncated pid");
    uint32_t num = get32(d->buf + at), serial = get32(d->buf + at + 4);
    uint32_t creation =
        tag == ERL_NEW_PID_EXT ? get32(d->buf + at + 8) : (unsigned char)d->buf[at + 8];
    *i = at + need;
    size_t nlen = strlen(node);
    uint64_t mine = own_pid(node, nlen, num, serial, creation);
    if (mine) { /* a pid of this node is the local pid, a number, as smarm.self() gives it */
        lua_pushnumber(d->L, (lua_Number)mine);
        return 0;
    }
    const intern_rec *r = intern_pid(node, nlen, num, serial, creation);
    if (!r)
        return dfail(d, "atom table full");
    lua_pushlightuserdata(d->L, (void *)r);
    return 0;
}

static int dec_integer(dec *d, int *i)
{
    long long v;
    int at = *i;
    if (ei_decode_longlong(d->buf, &at, &v) == 0) {
        *i = at;
        if (v >= -(long long)TWO53 && v <= (long long)TWO53)
            lua_pushnumber(d->L, (lua_Number)v);
        else
            ljx_push_int64(d->L, (uint64_t)v, 0);
        return 0;
    }
    unsigned long long u;
    at = *i;
    if (ei_decode_ulonglong(d->buf, &at, &u) == 0) {
        *i = at;
        ljx_push_int64(d->L, (uint64_t)u, 1);
        return 0;
    }
    return dfail(d, "an integer beyond 64 bits");
}

static int dec_list_tail(dec *d, int *i)
{
    if (*i >= d->len || (unsigned char)d->buf[*i] != ERL_NIL_EXT)
        return -1;
    (*i)++;
    return 0;
}

static int dec_term(dec *d, int *i, int depth)
{
    lua_State *L = d->L;
    int type, size;
    if (*i >= d->len || ei_get_type(d->buf, i, &type, &size) < 0)
        return dfail(d, "truncated term");
    if (depth >= MAX_DEPTH)
        return dfail(d, "a term nested too deeply");
    lua_checkstack(L, 8);
    unsigned char tag = (unsigned char)d->buf[*i];
    switch (tag) {
    case ERL_SMALL_INTEGER_EXT:
    case ERL_INTEGER_EXT:
    case ERL_SMALL_BIG_EXT:
    case ERL_LARGE_BIG_EXT:
        return dec_integer(d, i);
    case ERL_FLOAT_EXT:
    case NEW_FLOAT_EXT: {
        double x;
        if (ei_decode_double(d->buf, i, &x) < 0)
            return dfail(d, "malformed float");
        lua_pushnumber(L, x);
        return 0;
    }
    case ERL_ATOM_EXT:
    case ERL_SMALL_ATOM_EXT:
    case ERL_ATOM_UTF8_EXT:
    case ERL_SMALL_ATOM_UTF8_EXT: {
        char a[MAXATOMLEN_UTF8];
        if (ei_decode_atom_as(d->buf, i, a, sizeof a, ERLANG_UTF8, NULL, NULL) < 0)
            return dfail(d, "malformed atom");
        if (strcmp(a, "true") == 0 || strcmp(a, "false") == 0)
            lua_pushboolean(L, a[0] == 't');
        else if (strcmp(a, "nil") == 0)
            lua_pushnil(L);
        else
            push_atom(L, a, strlen(a));
        return 0;
    }
    case ERL_SMALL_TUPLE_EXT:
    case ERL_LARGE_TUPLE_EXT: {
        int n;
        if (ei_decode_tuple_header(d->buf, i, &n) < 0)
            return dfail(d, "malformed tuple");
        lua_createtable(L, n, 1);
        for (int k = 1; k <= n; k++) {
            if (dec_term(d, i, depth + 1))
                return -1;
            lua_rawseti(L, -2, k);
        }
        lua_pushlightuserdata(L, (void *)marker("$tuple"));
        lua_pushnumber(L, n);
        lua_rawset(L, -3);
        return 0;
    }
    case ERL_NIL_EXT:
        (*i)++;
        lua_createtable(L, 0, 0);
        return 0;
    case ERL_STRING_EXT: {
        /* a list of bytes: an array of numbers, as the list it stands for */
        if (*i + 3 + size > d->len)
            return dfail(d, "truncated string");
        const unsigned char *s = (const unsigned char *)d->buf + *i + 3;
        lua_createtable(L, size, 0);
        for (int k = 0; k < size; k++) {
            lua_pushnumber(L, s[k]);
            lua_rawseti(L, -2, k + 1);
        }
        *i += 3 + size;
        return 0;
    }
    case ERL_LIST_EXT: {
        int n, start = *i;
        if (ei_decode_list_header(d->buf, i, &n) < 0)
            return dfail(d, "malformed list");
        lua_createtable(L, n, 0);
        for (int k = 1; k <= n; k++) {
            if (dec_term(d, i, depth + 1))
                return -1;
            lua_rawseti(L, -2, k);
        }
        if (dec_list_tail(d, i) == 0)
            return 0;
        /* an improper list (OTP's call tags are [alias | Ref]): opaque, sent back as is */
        d->err = NULL;
        lua_pop(L, 1);
        *i = start;
        return dec_opaque(d, i);
    }
    case ERL_BINARY_EXT: {
        if (*i + 5 + size > d->len)
            return dfail(d, "truncated binary");
        lua_pushlstring(L, d->buf + *i + 5, (size_t)size);
        *i += 5 + size;
        return 0;
    }
    case ERL_MAP_EXT: {
        int n;
        if (ei_decode_map_header(d->buf, i, &n) < 0)
            return dfail(d, "malformed map");
        lua_createtable(L, 0, n);
        for (int k = 0; k < n; k++) {
            if (dec_term(d, i, depth + 1))
                return -1;
            if (lua_isnil(L, -1)) /* the atom nil as a key: Lua cannot */
                return dfail(d, "a map with the key nil");
            if (dec_term(d, i, depth + 1))
                return -1;
            lua_rawset(L, -3);
        }
        return 0;
    }
    case ERL_PID_EXT:
    case ERL_NEW_PID_EXT:
        return dec_pid(d, i);
    case ERL_REFERENCE_EXT:
    case ERL_NEW_REFERENCE_EXT:
    case ERL_NEWER_REFERENCE_EXT:
    case ERL_PORT_EXT:
    case ERL_NEW_PORT_EXT:
    case ERL_V4_PORT_EXT:
    case ERL_NEW_FUN_EXT:
    case ERL_FUN_EXT:
    case ERL_EXPORT_EXT:
        return dec_opaque(d, i);
    case ERL_BIT_BINARY_EXT:
        return dfail(d, "a bitstring (Lua holds whole bytes only)");
    default:
        return dfail(d, "an unknown term type");
    }
}

/* raw.decode(bytes [, pos]) -> value, next_pos | nil, err: the term at pos (1-based), which
 * starts with the version byte 131. */
static int l_decode(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    lua_Integer pos = luaL_optinteger(L, 2, 1);
    if (pos < 1 || (size_t)pos > n || n > 0x7fffffff)
        return luaL_error(L, "dist.decode: position %d outside the %d bytes", (int)pos, (int)n);
    dec d = {L, s, (int)n, NULL};
    int i = (int)pos - 1, version;
    if (ei_decode_version(s, &i, &version) < 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "not a term (no version byte 131)");
        return 2;
    }
    int top = lua_gettop(L);
    if (dec_term(&d, &i, 0) || i > d.len) {
        lua_settop(L, top);
        lua_pushnil(L);
        lua_pushfstring(L, "cannot hold %s", d.err ? d.err : "a truncated term");
        return 2;
    }
    lua_pushinteger(L, i + 1);
    return 2;
}

/* ---- encoding ---- */

typedef struct enc {
    lua_State *L;
    ei_x_buff x;
    const char *err;
} enc;

static int efail(enc *e, const char *what)
{
    if (!e->err)
        e->err = what;
    return -1;
}

static int put32(ei_x_buff *x, uint32_t v)
{
    char b[4] = {(char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v};
    return ei_x_append_buf(x, b, 4);
}

static int enc_pid(enc *e, const intern_rec *node, uint32_t num, uint32_t serial, uint32_t creation)
{
    char tag = (char)ERL_NEW_PID_EXT;
    if (ei_x_append_buf(&e->x, &tag, 1) < 0 ||
        ei_x_encode_atom_len_as(&e->x, node->name, (int)node->len, ERLANG_UTF8, ERLANG_UTF8) < 0 ||
        put32(&e->x, num) < 0 || put32(&e->x, serial) < 0 || put32(&e->x, creation) < 0)
        return efail(e, "out of memory");
    return 0;
}

static int enc_value(enc *e, int idx, int depth);

static int enc_table(enc *e, int idx, int depth)
{
    lua_State *L = e->L;
    if (depth >= MAX_DEPTH)
        return efail(e, "a table nested too deeply (or a cycle)");
    lua_checkstack(L, 8);
    lua_pushlightuserdata(L, (void *)marker("$term"));
    lua_rawget(L, idx);
    if (lua_type(L, -1) == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        int r = ei_x_append_buf(&e->x, s, (int)n);
        lua_pop(L, 1);
        return r < 0 ? efail(e, "out of memory") : 0;
    }
    lua_pop(L, 1);
    lua_pushlightuserdata(L, (void *)marker("$tuple"));
    lua_rawget(L, idx);
    if (lua_type(L, -1) == LUA_TNUMBER) {
        int n = (int)lua_tonumber(L, -1);
        lua_pop(L, 1);
        if (ei_x_encode_tuple_header(&e->x, n) < 0)
            return efail(e, "out of memory");
        for (int k = 1; k <= n; k++) {
            lua_rawgeti(L, idx, k);
            if (enc_value(e, lua_gettop(L), depth + 1))
                return -1;
            lua_pop(L, 1);
        }
        return 0;
    }
    lua_pop(L, 1);
    size_t narr = lua_objlen(L, idx), count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        count++;
        lua_pop(L, 1);
    }
    if (count == 0)
        return ei_x_encode_empty_list(&e->x) < 0 ? efail(e, "out of memory") : 0;
    if (count == narr) {
        if (ei_x_encode_list_header(&e->x, (long)narr) < 0)
            return efail(e, "out of memory");
        for (size_t k = 1; k <= narr; k++) {
            lua_rawgeti(L, idx, (int)k);
            if (enc_value(e, lua_gettop(L), depth + 1))
                return -1;
            lua_pop(L, 1);
        }
        return ei_x_encode_empty_list(&e->x) < 0 ? efail(e, "out of memory") : 0;
    }
    if (ei_x_encode_map_header(&e->x, (long)count) < 0)
        return efail(e, "out of memory");
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int top = lua_gettop(L);
        if (enc_value(e, top - 1, depth + 1) || enc_value(e, top, depth + 1))
            return -1;
        lua_pop(L, 1);
    }
    return 0;
}

static int enc_value(enc *e, int idx, int depth)
{
    lua_State *L = e->L;
    int r = 0;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        r = ei_x_encode_atom(&e->x, "nil");
        break;
    case LUA_TBOOLEAN:
        r = ei_x_encode_boolean(&e->x, lua_toboolean(L, idx));
        break;
    case LUA_TNUMBER: {
        double v = lua_tonumber(L, idx);
        if (v == floor(v) && fabs(v) < 9.2e18)
            r = ei_x_encode_longlong(&e->x, (long long)v);
        else
            r = ei_x_encode_double(&e->x, v);
        break;
    }
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        if (n > 0x7fffffff)
            return efail(e, "a string too long for a binary");
        r = ei_x_encode_binary(&e->x, s, (long)n);
        break;
    }
    case LUA_TTABLE:
        return enc_table(e, idx, depth);
    case LUA_TLIGHTUSERDATA: {
        const intern_rec *rec = intern_lookup(lua_touserdata(L, idx));
        if (!rec)
            return efail(e, "a light userdata");
        if (rec->kind == INTERN_ATOM)
            r = ei_x_encode_atom_len_as(&e->x, rec->name, (int)rec->len, ERLANG_UTF8, ERLANG_UTF8);
        else
            return enc_pid(e, intern_atom(rec->name, rec->len), rec->num, rec->serial,
                           rec->creation);
        break;
    }
    case LUA_TFUNCTION:
        return efail(e, "a function");
    case LUA_TTHREAD:
        return efail(e, "a coroutine");
    default: {
        uint64_t bits;
        int is_unsigned;
        if (ljx_cdata_int64(L, idx, &bits, &is_unsigned)) {
            r = is_unsigned ? ei_x_encode_ulonglong(&e->x, bits)
                            : ei_x_encode_longlong(&e->x, (long long)bits);
            break;
        }
        return efail(e, "a userdata or cdata");
    }
    }
    return r < 0 ? efail(e, "out of memory") : 0;
}

/* Encodes the values at 1..top (each with its version byte) into one string. */
static int l_encode(lua_State *L)
{
    int top = lua_gettop(L);
    enc e = {L, {0}, NULL};
    if (ei_x_new(&e.x) < 0)
        return luaL_error(L, "dist.encode: out of memory");
    for (int k = 1; k <= top; k++) {
        if (ei_x_encode_version(&e.x) < 0 || enc_value(&e, k, 0)) {
            ei_x_free(&e.x);
            return luaL_error(L, "dist: cannot send %s to another node (argument %d)",
                              e.err ? e.err : "out of memory", k);
        }
    }
    lua_pushlstring(L, e.x.buff, (size_t)e.x.index);
    ei_x_free(&e.x);
    return 1;
}

/* ---- atoms, tuples, pids ---- */

static int l_atom(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    if (n > INTERN_ATOM_MAX)
        return luaL_error(L, "smarm.atom: a name of at most 255 bytes expected, got %d", (int)n);
    push_atom(L, s, n);
    return 1;
}

static int l_atom_name(lua_State *L)
{
    const intern_rec *r = rec_at(L, 1, INTERN_ATOM);
    if (!r)
        return 0;
    lua_pushlstring(L, r->name, r->len);
    return 1;
}

static int l_is_atom(lua_State *L)
{
    lua_pushboolean(L, rec_at(L, 1, INTERN_ATOM) != NULL);
    return 1;
}

static int l_tuple(lua_State *L)
{
    int n = lua_gettop(L);
    lua_createtable(L, n, 1);
    for (int k = 1; k <= n; k++) {
        lua_pushvalue(L, k);
        lua_rawseti(L, -2, k);
    }
    lua_pushlightuserdata(L, (void *)marker("$tuple"));
    lua_pushnumber(L, n);
    lua_rawset(L, -3);
    return 1;
}

static int l_is_tuple(lua_State *L)
{
    int yes = 0;
    if (lua_type(L, 1) == LUA_TTABLE) {
        lua_pushlightuserdata(L, (void *)marker("$tuple"));
        lua_rawget(L, 1);
        yes = lua_type(L, -1) == LUA_TNUMBER;
    }
    lua_pushboolean(L, yes);
    return 1;
}

/* raw.pid(node, num, serial, creation) -> a remote pid (or the local pid for this node) */
static int l_pid(lua_State *L)
{
    size_t n;
    const char *node = luaL_checklstring(L, 1, &n);
    uint32_t num = (uint32_t)luaL_checknumber(L, 2), serial = (uint32_t)luaL_checknumber(L, 3),
             creation = (uint32_t)luaL_checknumber(L, 4);
    const intern_rec *r = intern_pid(node, n, num, serial, creation);
    if (!r)
        return luaL_error(L, "dist: atom table full");
    lua_pushlightuserdata(L, (void *)r);
    return 1;
}

/* raw.pid_info(p) -> node, num, serial, creation, node_index | nil: node_index numbers the
 * node for the life of the process (the N of "<N.num.serial>") */
static int l_pid_info(lua_State *L)
{
    const intern_rec *r = rec_at(L, 1, INTERN_PID);
    if (!r)
        return 0;
    lua_pushlstring(L, r->name, r->len);
    lua_pushnumber(L, r->num);
    lua_pushnumber(L, r->serial);
    lua_pushnumber(L, r->creation);
    lua_pushnumber(L, (lua_Number)intern_index(intern_atom(r->name, r->len)));
    return 5;
}

/* raw.node() -> this node's name | nil, creation */
static int l_node(lua_State *L)
{
    const intern_rec *me = __atomic_load_n(&self_node, __ATOMIC_ACQUIRE);
    if (!me)
        return 0;
    lua_pushlstring(L, me->name, me->len);
    lua_pushnumber(L, __atomic_load_n(&self_creation, __ATOMIC_RELAXED));
    return 2;
}

/* raw.export(localpid) -> this node's pid as a term (a remote-pid value naming this node) */
static int l_export(lua_State *L)
{
    uint64_t pid = lib_check_pid(L, 1, "dist.export");
    const intern_rec *me = __atomic_load_n(&self_node, __ATOMIC_ACQUIRE);
    if (!me)
        return luaL_error(L, "dist: this node is not alive (start it with --sname or --name)");
    const intern_rec *r = intern_pid(me->name, me->len, pid_index(pid), pid_gen(pid),
                                     __atomic_load_n(&self_creation, __ATOMIC_RELAXED));
    if (!r)
        return luaL_error(L, "dist: atom table full");
    lua_pushlightuserdata(L, (void *)r);
    return 1;
}

/* raw.set_alias(pid) or raw.set_alias(name, node): the calling actor's exit signals and down
 * notices name it as pid, or as the tuple {name, node} (two strings), from now on (a proxy
 * standing in for a process of another node, or for a name there: core/exit.c) */
static int l_set_alias(lua_State *L)
{
    wire_buf b;
    wire_buf_init(&b);
    int bad;
    if (lua_type(L, 1) == LUA_TSTRING && lua_type(L, 2) == LUA_TSTRING) {
        size_t nn, dn;
        const char *name = lua_tolstring(L, 1, &nn), *node = lua_tolstring(L, 2, &dn);
        bad = wire_put_table(&b, 2, 1) | wire_put_string(&b, name, nn) |
              wire_put_string(&b, node, dn) | wire_put_intern(&b, marker("$tuple")) |
              wire_put_number(&b, 2);
    } else {
        const intern_rec *r = rec_at(L, 1, INTERN_PID);
        if (!r)
            return luaL_error(L,
                              "dist: set_alias: a remote pid or a name and a node expected, "
                              "got %s",
                              luaL_typename(L, 1));
        bad = wire_put_intern(&b, r);
    }
    if (bad || exit_set_alias(luavm_actor(L), b.data, b.len)) {
        wire_buf_free(&b);
        return luaL_error(L, "dist: set_alias: out of memory");
    }
    wire_buf_free(&b);
    return 0;
}

/* raw.set_node(name, creation): this node's identity, once registered */
static int l_set_node(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    __atomic_store_n(&self_creation, (uint32_t)luaL_checknumber(L, 2), __ATOMIC_RELAXED);
    __atomic_store_n(&self_node, intern_atom(s, n), __ATOMIC_RELEASE);
    return 0;
}

static int l_md5(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    unsigned char out[16];
    dist_md5(s, n, out);
    lua_pushlstring(L, (const char *)out, 16);
    return 1;
}

int dist_lua_is_remote(lua_State *L, int idx, int pairs)
{
    if (rec_at(L, idx, INTERN_PID))
        return 1;
    if (!pairs || lua_type(L, idx) != LUA_TTABLE)
        return 0;
    lua_rawgeti(L, idx, 2);
    int yes = lua_type(L, -1) == LUA_TSTRING || rec_at(L, -1, INTERN_ATOM);
    lua_pop(L, 1);
    return yes;
}

uint64_t dist_lua_own_pid(lua_State *L, int idx)
{
    const intern_rec *r = rec_at(L, idx, INTERN_PID);
    return r ? own_pid(r->name, r->len, r->num, r->serial, r->creation) : 0;
}

/* raw.unexport(v) -> the local pid (a number) for a pid of this node as dist.export marks it;
 * v itself for anything else */
static int l_unexport(lua_State *L)
{
    luaL_checkany(L, 1);
    uint64_t pid = dist_lua_own_pid(L, 1);
    if (pid)
        lua_pushnumber(L, (lua_Number)pid);
    else
        lua_settop(L, 1);
    return 1;
}

int dist_lua_alive(void) { return __atomic_load_n(&self_node, __ATOMIC_ACQUIRE) != NULL; }

/* Set once a monitor of a name of this node was made without the node being alive (its proxy
 * must hear of a demonitor too); an alive node always hooks. */
static int name_proxies;

int dist_lua_hooks_demonitor(void)
{
    return dist_lua_alive() || __atomic_load_n(&name_proxies, __ATOMIC_RELAXED);
}

/* raw.hook_demonitor(): from now on smarm.demonitor tells smarm.dist (dist_lua_demonitored) */
static int l_hook_demonitor(lua_State *L)
{
    (void)L;
    __atomic_store_n(&name_proxies, 1, __ATOMIC_RELAXED);
    return 0;
}

void dist_lua_demonitored(lua_State *L, uint64_t target)
{
    int top = lua_gettop(L);
    /* only a state that loaded smarm.dist can have made a remote monitor: no require here */
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "smarm.dist");
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "demonitored");
            if (lua_isfunction(L, -1)) {
                lua_pushnumber(L, (lua_Number)target);
                lua_call(L, 1, 0);
            }
        }
    }
    lua_settop(L, top);
}

void dist_lua_pg_call(lua_State *L, const char *fn, int nargs, int nres)
{
    lib_require_field(L, "smarm.dist_pg", fn);
    lua_insert(L, -1 - nargs);
    lua_call(L, nargs, nres);
}

static int fwd_node(lua_State *L) { return lib_forward(L, "smarm.dist", "node"); }
static int fwd_nodes(lua_State *L) { return lib_forward(L, "smarm.dist", "nodes"); }
static int fwd_connect(lua_State *L) { return lib_forward(L, "smarm.dist", "connect"); }
static int fwd_monitor_node(lua_State *L) { return lib_forward(L, "smarm.dist", "monitor_node"); }

const luaL_Reg dist_lua_funcs[] = {
    {"atom", l_atom},     {"is_atom", l_is_atom},   {"atom_name", l_atom_name},
    {"tuple", l_tuple},   {"is_tuple", l_is_tuple}, {"node", fwd_node},
    {"nodes", fwd_nodes}, {"connect", fwd_connect}, {"monitor_node", fwd_monitor_node},
    {NULL, NULL},
};

static const luaL_Reg raw_funcs[] = {
    {"encode", l_encode},
    {"decode", l_decode},
    {"pid", l_pid},
    {"pid_info", l_pid_info},
    {"export", l_export},
    {"unexport", l_unexport},
    {"set_node", l_set_node},
    {"md5", l_md5},
    {"node", l_node},
    {"atom", l_atom},
    {"atom_name", l_atom_name},
    {"tuple", l_tuple},
    {"is_tuple", l_is_tuple},
    {"set_alias", l_set_alias},
    {"hook_demonitor", l_hook_demonitor},
    {NULL, NULL},
};

int dist_lua_open(lua_State *L)
{
    static int inited;
    if (!__atomic_exchange_n(&inited, 1, __ATOMIC_ACQ_REL))
        ei_init();
    lua_createtable(L, 0, 12);
    luaL_register(L, NULL, raw_funcs);
    return 1;
}

LUA_UNWOUND_END
