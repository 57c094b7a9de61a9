/* Tests of the interned values of the distribution (atoms, remote pids): one record per
 * distinct value, from any thread at once, lookups that refuse foreign pointers; and the
 * MD5 of the handshake's cookie digests against RFC 1321's vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/intern.h"
#include "base/wire.h"
#include "lib/dist_lua.h"
#include "vm/codec.h"

static void atoms_are_unique(void **state)
{
    (void)state;
    const intern_rec *a = intern_atom("ok", 2), *b = intern_atom("okay", 2);
    assert_non_null(a);
    assert_ptr_equal(a, b);
    assert_int_equal(a->kind, INTERN_ATOM);
    assert_string_equal(a->name, "ok");
    assert_ptr_not_equal(a, intern_atom("error", 5));
    assert_ptr_equal(intern_lookup(a), a);
    assert_true(intern_index(a) >= 1);
    char longname[300];
    memset(longname, 'x', sizeof longname);
    assert_null(intern_atom(longname, 256));
    assert_non_null(intern_atom(longname, 255));
}

static void pids_are_unique(void **state)
{
    (void)state;
    const intern_rec *p = intern_pid("a@b", 3, 1, 2, 3);
    assert_ptr_equal(p, intern_pid("a@b", 3, 1, 2, 3));
    assert_ptr_not_equal(p, intern_pid("a@b", 3, 1, 2, 4));
    assert_ptr_not_equal(p, intern_pid("a@c", 3, 1, 2, 3));
    assert_ptr_not_equal((const void *)p, (const void *)intern_atom("a@b", 3));
    assert_int_equal(p->kind, INTERN_PID);
    assert_string_equal(p->name, "a@b");
    assert_int_equal(p->num, 1);
    assert_int_equal(p->serial, 2);
    assert_int_equal(p->creation, 3);
}

static void lookup_refuses_other_pointers(void **state)
{
    (void)state;
    int x;
    const intern_rec *a = intern_atom("z", 1);
    assert_null(intern_lookup(&x));
    assert_null(intern_lookup(NULL));
    assert_null(intern_lookup((const char *)a + 1));
    assert_null(intern_lookup(a + 100000)); /* inside the array, not yet made */
}

static void *make_many(void *arg)
{
    const intern_rec **out = arg;
    char name[32];
    for (int i = 0; i < 2000; i++) {
        int n = snprintf(name, sizeof name, "atom%d", i);
        out[i] = intern_atom(name, (size_t)n);
    }
    return NULL;
}

static void threads_agree(void **state)
{
    (void)state;
    static const intern_rec *seen[4][2000];
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, make_many, seen[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int k = 0; k < 2000; k++)
        for (int i = 1; i < 4; i++)
            assert_ptr_equal(seen[0][k], seen[i][k]);
}

static void md5_vectors(void **state)
{
    (void)state;
    static const char *const in[] = {
        "", "a", "abc", "message digest",
        "12345678901234567890123456789012345678901234567890123456789012345678901234567890"};
    static const char *const want[] = {
        "d41d8cd98f00b204e9800998ecf8427e", "0cc175b9c0f1b6a831c399e269772661",
        "900150983cd24fb0d6963f7d28e17f72", "f96b697d7cb7938d525a2f31aaf161d0",
        "57edf4a22be3c955ac49da2e2107b67a"};
    for (size_t i = 0; i < 5; i++) {
        unsigned char d[16];
        char hex[33];
        dist_md5(in[i], strlen(in[i]), d);
        for (int k = 0; k < 16; k++)
            snprintf(hex + 2 * k, 3, "%02x", d[k]);
        assert_string_equal(hex, want[i]);
    }
}

/* What core/exit.c writes for an alias (wire_put_intern) is what the codec reads as that
 * record's light userdata: the pid a proxy's notice names is == to the one Lua holds. */
static void intern_on_the_wire(void **state)
{
    (void)state;
    const intern_rec *p = intern_pid("w@host", 6, 7, 8, 9);
    assert_non_null(p);
    wire_buf b;
    wire_buf_init(&b);
    assert_int_equal(wire_put_table(&b, 0, 1), 0);
    assert_int_equal(wire_put_string(&b, "pid", 3), 0);
    assert_int_equal(wire_put_intern(&b, p), 0);
    lua_State *L = luaL_newstate();
    char err[128];
    assert_int_equal(codec_decode(L, b.data, b.len, err, sizeof err), 0);
    lua_getfield(L, -1, "pid");
    assert_int_equal(lua_type(L, -1), LUA_TLIGHTUSERDATA);
    assert_ptr_equal(lua_touserdata(L, -1), p);
    lua_close(L);
    /* an address that is no record is refused, not made a value */
    wire_buf_reset(&b);
    int x;
    assert_int_equal(wire_put_intern(&b, &x), 0);
    L = luaL_newstate();
    assert_int_equal(codec_decode(L, b.data, b.len, err, sizeof err), -1);
    lua_close(L);
    wire_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(atoms_are_unique),
        cmocka_unit_test(pids_are_unique),
        cmocka_unit_test(lookup_refuses_other_pointers),
        cmocka_unit_test(threads_agree),
        cmocka_unit_test(md5_vectors),
        cmocka_unit_test(intern_on_the_wire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
