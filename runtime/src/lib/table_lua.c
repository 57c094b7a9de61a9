/* smarm.table: the Lua face of the shared tables (core/stable.c). Keys (strings, numbers,
 * booleans) and values (anything sendable but channel endpoints and sockets) are encoded
 * in the message format; a value read is decoded afresh in the reader's state, so every
 * reader gets its own copy. */
#include "lib/table_lua.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "core/actor.h"
#include "core/runtime.h"
#include "core/stable.h"
#include "lib/args.h"
#include "vm/codec.h"
#include "vm/ljx.h"
#include "vm/luavm.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

static const char handle_mt_key = 'h';

/* t:lookup copies a value of at most this many bytes (a number, a short string, a small
 * record) instead of holding its blob (core/stable.h) */
#define LOOKUP_COPY_MAX 256

typedef struct handle {
    stab *t;
} handle;

/* Decoding runs in an allocation-free protected call with the state's garbage collector
 * held, as a receive does (vm/luavm.c): no finalizer runs in the middle (one that used this
 * table again, or raised, would find the blobs half read), and a memory error comes back
 * here, where the blob references are dropped before it is raised again. */
typedef struct decode_call {
    stab_blob **blobs; /* one value, or n key/value pairs; NULL: the copy in data */
    const char *data;  /* a value copied under the read lock (len bytes) */
    size_t len;
    size_t n;
    int pairs;
    int rc;
    char err[128];
} decode_call;

static void decode_protected(lua_State *L, void *ud)
{
    decode_call *dc = ud;
    if (!dc->blobs) {
        dc->rc = codec_decode(L, dc->data, dc->len, dc->err, sizeof dc->err);
        return;
    }
    if (!dc->pairs) {
        dc->rc = codec_decode(L, dc->blobs[0]->data, dc->blobs[0]->len, dc->err, sizeof dc->err);
        return;
    }
    lua_createtable(L, (int)dc->n, 0);
    for (size_t i = 0; i < dc->n; i++) {
        lua_createtable(L, 2, 0);
        for (int j = 0; j < 2; j++) {
            stab_blob *b = dc->blobs[2 * i + (size_t)j];
            dc->rc = codec_decode(L, b->data, b->len, dc->err, sizeof dc->err);
            if (dc->rc < 0)
                return;
            lua_rawseti(L, -2, j + 1);
        }
        lua_rawseti(L, -2, (int)i + 1);
    }
}

/* Decodes (pushes) the blobs, then releases them; raises on failure. */
static void decode_release(lua_State *L, decode_call *dc, const char *fname)
{
    int top = lua_gettop(L);
    luaL_checkstack(L, 8, fname);
    size_t held = ljx_gc_hold(L);
    int st = ljx_cpcall(L, decode_protected, dc);
    ljx_gc_resume(L, held);
    size_t nb = !dc->blobs ? 0 : dc->pairs ? 2 * dc->n : 1;
    for (size_t i = 0; i < nb; i++)
        stab_blob_release(dc->blobs[i]);
    if (st)
        lua_error(L); /* out of memory */
    if (dc->rc < 0) {
        lua_settop(L, top);
        luaL_error(L, "smarm.table: %s: %s", fname, dc->err);
    }
}

static const char *const access_names[] = {"public", "protected", "private"};

static handle *check_handle(lua_State *L, const char *fname)
{
    handle *h = lua_touserdata(L, 1);
    if (h && lua_getmetatable(L, 1)) {
        lua_pushlightuserdata(L, (void *)&handle_mt_key);
        lua_rawget(L, LUA_REGISTRYINDEX);
        int same = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
        if (same)
            return h;
    }
    luaL_error(L, "smarm.table: %s: a table expected (call it as t:%s(...))", fname, fname);
    return NULL;
}

/* The table of the handle at 1, checked for the caller's right to read or write it. */
static stab *check_table(lua_State *L, const char *fname, int write)
{
    stab *t = check_handle(L, fname)->t;
    uint64_t owner = stab_owner(t);
    if (!owner)
        luaL_error(L, "smarm.table: %s: table '%s' was deleted (its owner died)", fname,
                   stab_name(t));
    int access = stab_access(t);
    if (access != STAB_PUBLIC && (write || access == STAB_PRIVATE) && owner != luavm_actor(L)->pid)
        luaL_error(L, "smarm.table: %s: table '%s' is %s: only its owner may %s it", fname,
                   stab_name(t), access_names[access], write ? "write" : "read");
    return t;
}

static void check_key(lua_State *L, int idx, const char *fname)
{
    int ty = lua_type(L, idx);
    if (ty == LUA_TSTRING || ty == LUA_TBOOLEAN)
        return;
    if (ty == LUA_TNUMBER) {
        if (isnan(lua_tonumber(L, idx)))
            luaL_error(L, "smarm.table: %s: a key cannot be NaN", fname);
        return;
    }
    luaL_error(L, "smarm.table: %s: a key must be a string, number or boolean, got %s", fname,
               luaL_typename(L, idx));
}

/* Raises if the value at idx holds userdata (a channel endpoint or a socket would move into
 * the table, out of the caller's hands, before the encoder refused it). seen: a table of
 * the tables visited, made on the first nested table. */
static void refuse_objects(lua_State *L, int idx, const char *fname, int depth, int *seen)
{
    int ty = lua_type(L, idx);
    if (ty == LUA_TUSERDATA)
        luaL_error(L, "smarm.table: %s: a table cannot hold channel endpoints or sockets", fname);
    if (ty != LUA_TTABLE || depth > WIRE_MAX_DEPTH)
        return;
    idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
    if (!*seen) { /* made before any iteration, so it never lands between next's keys */
        lua_newtable(L);
        *seen = lua_gettop(L);
    }
    lua_pushvalue(L, idx);
    lua_rawget(L, *seen);
    int visited = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (visited)
        return;
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, *seen);
    luaL_checkstack(L, 4, "smarm.table");
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        refuse_objects(L, -2, fname, depth + 1, seen);
        refuse_objects(L, -1, fname, depth + 1, seen);
        lua_pop(L, 1);
    }
}

/* The encoding of the value at idx in the thread's scratch buffer (valid until the next
 * encoding of this thread). */
static wire_buf *encode(lua_State *L, int idx, const char *fname, const char *root)
{
    char err[256];
    wire_buf *b = lib_scratch(luavm_actor(L));
    wire_buf_reset(b);
    if (codec_encode(L, idx, b, root, err, sizeof err) != 0)
        luaL_error(L, "smarm.table: %s: %s", fname, err);
    return b;
}

static stab_blob *encode_blob(lua_State *L, int idx, const char *fname, const char *root)
{
    wire_buf *b = encode(L, idx, fname, root);
    stab_blob *blob = stab_blob_new(b->data, b->len);
    if (!blob)
        luaL_error(L, "smarm.table: %s: out of memory", fname);
    return blob;
}

static int fail(lua_State *L, int rc, stab *t, const char *fname)
{
    if (rc == STAB_DEAD)
        return luaL_error(L, "smarm.table: %s: table '%s' was deleted (its owner died)", fname,
                          stab_name(t));
    return luaL_error(L, "smarm.table: %s: out of memory", fname);
}

/**
 * t:insert(key, value): sets key to a copy of value (nil deletes the key).
 */
static int l_insert(lua_State *L)
{
    stab *t = check_table(L, "insert", 1);
    check_key(L, 2, "insert");
    if (lua_isnoneornil(L, 3)) {
        wire_buf *kb = encode(L, 2, "insert", "key");
        int rc = stab_delete(t, kb->data, kb->len);
        if (rc < 0)
            fail(L, rc, t, "insert");
        return 0;
    }
    int seen = 0;
    refuse_objects(L, 3, "insert", 0, &seen);
    if (seen)
        lua_settop(L, 3);
    stab_blob *val = encode_blob(L, 3, "insert", "value");
    wire_buf *kb = encode(L, 2, "insert", "key"); /* a key never raises: checked above */
    stab_blob *key = stab_blob_new(kb->data, kb->len);
    if (!key) {
        stab_blob_release(val);
        return luaL_error(L, "smarm.table: insert: out of memory");
    }
    int rc = stab_insert(t, key, val);
    if (rc != STAB_OK)
        fail(L, rc, t, "insert");
    return 0;
}

/**
 * t:lookup(key) -> a copy of the value | nil
 */
static int l_lookup(lua_State *L)
{
    stab *t = check_table(L, "lookup", 0);
    check_key(L, 2, "lookup");
    wire_buf *kb = encode(L, 2, "lookup", "key");
    /* a small value is copied under the stripe's read lock: no reference to take and drop on
     * a blob that the other schedulers' lookups of the key write too */
    char copy[LOOKUP_COPY_MAX];
    size_t len;
    stab_blob *v = stab_lookup_small(t, kb->data, kb->len, copy, sizeof copy, &len);
    if (len == STAB_ABSENT) {
        lua_pushnil(L);
        return 1;
    }
    decode_call dc =
        v ? (decode_call){.blobs = &v, .n = 1} : (decode_call){.data = copy, .len = len};
    decode_release(L, &dc, "lookup");
    return 1;
}

/**
 * t:delete(key) -> true if it was there
 */
static int l_delete(lua_State *L)
{
    stab *t = check_table(L, "delete", 1);
    check_key(L, 2, "delete");
    wire_buf *kb = encode(L, 2, "delete", "key");
    int rc = stab_delete(t, kb->data, kb->len);
    if (rc < 0)
        fail(L, rc, t, "delete");
    lua_pushboolean(L, rc);
    return 1;
}

/**
 * t:update_counter(key, incr [, default]) -> the new number
 * Atomic: concurrent updates of one key all count. An absent key starts at default (an
 * error without one); a value that is not a number is an error.
 */
static int l_update_counter(lua_State *L)
{
    stab *t = check_table(L, "update_counter", 1);
    check_key(L, 2, "update_counter");
    if (lua_type(L, 3) != LUA_TNUMBER)
        return luaL_error(L, "smarm.table: update_counter: incr must be a number, got %s",
                          luaL_typename(L, 3));
    double incr = lua_tonumber(L, 3), deflt = 0, out = 0;
    int has_default = !lua_isnoneornil(L, 4);
    if (has_default && lua_type(L, 4) != LUA_TNUMBER)
        return luaL_error(L, "smarm.table: update_counter: default must be a number, got %s",
                          luaL_typename(L, 4));
    if (has_default)
        deflt = lua_tonumber(L, 4);
    wire_buf *kb = encode(L, 2, "update_counter", "key");
    int rc = stab_update_counter(t, kb->data, kb->len, incr, has_default, deflt, &out);
    if (rc == 1)
        return luaL_error(L, "smarm.table: update_counter: no key %s in '%s' and no default",
                          lua_tostring(L, 2) ? lua_tostring(L, 2) : "?", stab_name(t));
    if (rc == STAB_NOTNUM)
        return luaL_error(L, "smarm.table: update_counter: the value of %s in '%s' is not a number",
                          lua_tostring(L, 2) ? lua_tostring(L, 2) : "?", stab_name(t));
    if (rc != STAB_OK)
        fail(L, rc, t, "update_counter");
    lua_pushnumber(L, out);
    return 1;
}

static int l_size(lua_State *L)
{
    stab *t = check_table(L, "size", 0);
    lua_pushnumber(L, (lua_Number)stab_size(t));
    return 1;
}

/* Pushes an array of {key, value} copies of every entry (one consistent snapshot). */
static void push_entries(lua_State *L, const char *fname)
{
    stab *t = check_table(L, fname, 0);
    stab_blob **arr;
    size_t n;
    int rc = stab_snapshot(t, &arr, &n);
    if (rc != STAB_OK)
        fail(L, rc, t, fname);
    decode_call dc = {.blobs = arr, .n = n, .pairs = 1};
    /* the array is freed whether decoding raises or not */
    int top = lua_gettop(L);
    luaL_checkstack(L, 8, fname);
    size_t held = ljx_gc_hold(L);
    int st = ljx_cpcall(L, decode_protected, &dc);
    ljx_gc_resume(L, held);
    for (size_t i = 0; i < 2 * n; i++)
        stab_blob_release(arr[i]);
    free(arr);
    if (st)
        lua_error(L);
    if (dc.rc < 0) {
        lua_settop(L, top);
        luaL_error(L, "smarm.table: %s: %s", fname, dc.err);
    }
}

/**
 * t:foldl(fn, acc) -> acc: fn(key, value, acc) -> acc over a snapshot of the entries.
 */
static int l_foldl(lua_State *L)
{
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 3);
    push_entries(L, "foldl");
    size_t n = lua_objlen(L, 4);
    for (size_t i = 1; i <= n; i++) {
        lua_pushvalue(L, 2);
        lua_rawgeti(L, 4, (int)i);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        lua_remove(L, -3);
        lua_pushvalue(L, 3);
        lua_call(L, 3, 1);
        lua_replace(L, 3);
    }
    lua_settop(L, 3);
    return 1;
}

/**
 * t:match(pred) -> array of {key, value} for which pred(key, value) is truthy.
 */
static int l_match(lua_State *L)
{
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    push_entries(L, "match");
    size_t n = lua_objlen(L, 3);
    lua_createtable(L, 0, 0);
    int k = 0;
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, 3, (int)i);
        lua_pushvalue(L, 2);
        lua_rawgeti(L, -2, 1);
        lua_rawgeti(L, -3, 2);
        lua_call(L, 2, 1);
        int keep = lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (keep)
            lua_rawseti(L, 4, ++k);
        else
            lua_pop(L, 1);
    }
    return 1;
}

/**
 * t:info() -> {name, owner, access, size, memory}
 */
static int l_info(lua_State *L)
{
    stab *t = check_handle(L, "info")->t;
    lua_createtable(L, 0, 5);
    lua_pushstring(L, stab_name(t));
    lua_setfield(L, -2, "name");
    uint64_t owner = stab_owner(t);
    if (owner) {
        lua_pushnumber(L, (lua_Number)owner);
        lua_setfield(L, -2, "owner");
    }
    lua_pushstring(L, access_names[stab_access(t)]);
    lua_setfield(L, -2, "access");
    lua_pushnumber(L, (lua_Number)stab_size(t));
    lua_setfield(L, -2, "size");
    lua_pushnumber(L, (lua_Number)stab_memory(t));
    lua_setfield(L, -2, "memory");
    lua_pushboolean(L, owner == 0);
    lua_setfield(L, -2, "deleted");
    return 1;
}

static int l_handle_gc(lua_State *L)
{
    handle *h = lua_touserdata(L, 1);
    stab_release(h->t);
    h->t = NULL;
    return 0;
}

static int l_handle_tostring(lua_State *L)
{
    handle *h = lua_touserdata(L, 1);
    lua_pushfstring(L, "smarm table '%s'", h->t ? stab_name(h->t) : "?");
    return 1;
}

static const luaL_Reg methods[] = {
    {"insert", l_insert}, {"lookup", l_lookup},
    {"delete", l_delete}, {"update_counter", l_update_counter},
    {"size", l_size},     {"foldl", l_foldl},
    {"match", l_match},   {"info", l_info},
    {NULL, NULL},
};

/**
 * smarm.table.new(name [, opts]) -> t     opts: access ("protected"), heir (a pid)
 * The caller owns the table; the name must be free.
 */
static int l_new(lua_State *L)
{
    actor *a = luavm_actor(L);
    const char *name = lib_check_name(L, 1, "smarm.table.new");
    int access = STAB_PROTECTED;
    uint64_t heir = 0;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_getfield(L, 2, "access");
        if (!lua_isnil(L, -1)) {
            const char *s = lua_tostring(L, -1);
            access = -1;
            for (int i = 0; s && i < 3; i++)
                if (strcmp(s, access_names[i]) == 0)
                    access = i;
            if (access < 0)
                return luaL_error(L, "smarm.table.new: access must be \"public\", \"protected\" "
                                     "or \"private\"");
        }
        lua_pop(L, 1);
        lua_getfield(L, 2, "heir");
        if (!lua_isnil(L, -1))
            heir = lib_check_pid(L, lua_gettop(L), "smarm.table.new");
        lua_pop(L, 1);
    }
    /* the handle object first: making it is what may raise */
    handle *h = lua_newuserdata(L, sizeof *h);
    h->t = NULL;
    lua_pushlightuserdata(L, (void *)&handle_mt_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_setmetatable(L, -2);
    int rc = stab_new(a->rt, name, a->pid, access, heir == a->pid ? 0 : heir, &h->t);
    if (rc == STAB_EXISTS)
        return luaL_error(L, "smarm.table.new: a table named '%s' exists", name);
    if (rc != STAB_OK)
        return luaL_error(L, "smarm.table.new: out of memory");
    return 1;
}

/**
 * smarm.table.open(name) -> t | nil
 */
static int l_open(lua_State *L)
{
    actor *a = luavm_actor(L);
    const char *name = lib_check_name(L, 1, "smarm.table.open");
    /* the handle object first: making it is what may raise */
    handle *h = lua_newuserdata(L, sizeof *h);
    h->t = NULL;
    lua_pushlightuserdata(L, (void *)&handle_mt_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_setmetatable(L, -2);
    h->t = stab_open(a->rt, name);
    if (!h->t)
        lua_pushnil(L);
    return 1;
}

static const luaL_Reg module_funcs[] = {
    {"new", l_new},
    {"open", l_open},
    {NULL, NULL},
};

int table_lua_open(lua_State *L)
{
    lua_createtable(L, 0, 4);
    lua_createtable(L, 0, 8);
    luaL_register(L, NULL, methods);
    lib_object_mt(L, l_handle_gc, l_handle_tostring, "smarm table", &handle_mt_key);
    lua_pop(L, 1);
    lua_createtable(L, 0, 2);
    luaL_register(L, NULL, module_funcs);
    return 1;
}

LUA_UNWOUND_END
