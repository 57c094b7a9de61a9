/* Tests of lib/args.c's encode-into-a-message helper, which smarm.send, tx:send and
 * send_after share: a message that cannot be allocated gives back the channel references
 * its encoding took (a channel whose last tx is gone is closed for its receiver, so a leaked
 * reference shows as a channel that never closes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "base/mailbox.h"
#include "base/wire.h"
#include "core/chan.h"
#include "lib/args.h"
#include "lib/chan_lua.h"
#include "smarm.h"

static smarm_runtime *rt;
static wire_buf scratch;

static int setup(void **state)
{
    (void)state;
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.max_actors = 64;
    wire_buf_init(&scratch);
    /* a runtime installs the hooks by which encoded bytes hold channel references */
    return smarm_runtime_new(&cfg, &rt);
}

static int teardown(void **state)
{
    (void)state;
    wire_buf_free(&scratch);
    smarm_runtime_free(rt);
    return 0;
}

/* lua_CFunction: encodes {tx, 42} (or {tx, print} with upvalue 1 true) into a message */
static int encode_table(lua_State *L)
{
    lua_createtable(L, 2, 0);
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, 1);
    if (lua_toboolean(L, lua_upvalueindex(1)))
        lua_getglobal(L, "print");
    else
        lua_pushnumber(L, 42);
    lua_rawseti(L, -2, 2);
    msg *m = lib_encode_msg(L, -1, &scratch, "test.send", NULL, 0);
    lua_pushlightuserdata(L, m);
    return 1;
}

/* Runs encode_table with a fresh tx of c; returns the message (NULL if it raised, with the
 * error text in err). The state and its tx object are gone afterwards. */
static msg *encode_with_tx(chan *c, int unsendable, char *err, size_t errlen)
{
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_pushboolean(L, unsendable);
    lua_pushcclosure(L, encode_table, 1);
    chan_retain(c, CHAN_TX);
    chan_lua_push(L, c, CHAN_TX); /* the object holds that reference */
    msg *m = NULL;
    if (lua_pcall(L, 1, 1, 0) == 0) {
        m = lua_touserdata(L, -1);
    } else {
        snprintf(err, errlen, "%s", lua_tostring(L, -1));
    }
    lua_close(L); /* collects the tx object: its reference goes */
    return m;
}

/* Whether c is closed for its receiver (every tx reference is gone). */
static int closed_for_receiver(chan *c)
{
    int closed = 0;
    msg *m = chan_pop(c, &closed);
    assert_null(m);
    return closed;
}

/* A channel with only its rx held: the test's encodings make its tx references. */
static chan *rx_only_channel(void)
{
    chan *c = chan_new(rt, 0);
    chan_release(c, CHAN_TX);
    return c;
}

static void a_message_holds_its_channel_reference_until_freed(void **state)
{
    (void)state;
    chan *c = chan_new(rt, 0);
    chan_release(c, CHAN_TX); /* only the rx and what the test makes */
    char err[256] = "";
    msg *m = encode_with_tx(c, 0, err, sizeof err);
    assert_non_null(m);
    assert_true(wire_has_refs(m->data, m->len));
    assert_false(closed_for_receiver(c)); /* the message's tx keeps it open */
    msg_free(m);
    assert_true(closed_for_receiver(c));
    chan_release(c, CHAN_RX);
}

static void allocation_failure_releases_the_references(void **state)
{
    (void)state;
    chan *c = rx_only_channel();
    char err[256] = "";
    msg_inject_failures(1);
    msg *m = encode_with_tx(c, 0, err, sizeof err);
    msg_inject_failures(0);
    assert_null(m);
    assert_non_null(strstr(err, "test.send: out of memory"));
    /* nothing holds a tx any more: a leaked reference would keep the channel open */
    assert_true(closed_for_receiver(c));
    chan_release(c, CHAN_RX);
}

static void unsendable_value_takes_no_reference(void **state)
{
    (void)state;
    chan *c = rx_only_channel();
    char err[256] = "";
    msg *m = encode_with_tx(c, 1, err, sizeof err);
    assert_null(m);
    assert_non_null(strstr(err, "test.send: cannot send a function (at msg[2])"));
    assert_true(closed_for_receiver(c));
    chan_release(c, CHAN_RX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_message_holds_its_channel_reference_until_freed),
        cmocka_unit_test(allocation_failure_releases_the_references),
        cmocka_unit_test(unsendable_value_takes_no_reference),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
