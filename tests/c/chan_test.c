/* Tests of channels: reference counts decide closing and freeing (ASan reports a leak or a
 * use after free), and Lua programs using channels, select and timers through the runtime
 * (so the sanitizer flavours see them across schedulers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <unistd.h>

#include "core/chan.h"
#include "smarm.h"

static void last_tx_gone_closes_for_the_receiver_after_the_queue(void **state)
{
    (void)state;
    chan *c = chan_new(NULL, 0);
    chan_retain(c, CHAN_TX); /* a second sender */
    assert_int_equal(chan_send(c, msg_new("1", 1)), 0);
    chan_release(c, CHAN_TX);
    chan_release(c, CHAN_TX);
    int closed = -1;
    msg *m = chan_pop(c, &closed);
    assert_non_null(m);
    msg_free(m);
    assert_null(chan_pop(c, &closed));
    assert_int_equal(closed, 1);
    chan_release(c, CHAN_RX); /* the last reference: freed */
}

static void last_rx_gone_drops_the_queue_and_refuses_sends(void **state)
{
    (void)state;
    chan *c = chan_new(NULL, 0);
    assert_int_equal(chan_send(c, msg_new("a", 1)), 0);
    assert_int_equal(chan_send(c, msg_new("b", 1)), 0);
    chan_release(c, CHAN_RX); /* queued messages are freed here */
    msg *m = msg_new("c", 1);
    assert_int_equal(chan_send(c, m), -1);
    msg_free(m);
    chan_release(c, CHAN_TX);
}

static void close_refuses_sends_but_keeps_the_queue(void **state)
{
    (void)state;
    chan *c = chan_new(NULL, 0);
    assert_int_equal(chan_send(c, msg_new("a", 1)), 0);
    chan_close(c);
    msg *m = msg_new("b", 1);
    assert_int_equal(chan_send(c, m), -1);
    msg_free(m);
    int closed;
    m = chan_pop(c, &closed);
    assert_non_null(m);
    msg_free(m);
    assert_null(chan_pop(c, &closed));
    assert_int_equal(closed, 1);
    chan_release(c, CHAN_TX);
    chan_release(c, CHAN_RX);
}

static int run2(const char *code)
{
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.schedulers = 2;
    smarm_runtime *rt = NULL;
    assert_int_equal(smarm_runtime_new(&cfg, &rt), 0);
    int status = -1;
    assert_int_equal(smarm_run_string(rt, code, 0, NULL, &status), 0);
    smarm_runtime_free(rt);
    return status;
}

/* Endpoints through messages, dropped messages, receiver death, select and timers. */
static void lua_channels_select_and_timers_across_schedulers(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local tx, rx = s.channel()\n"
                       "for k = 1, 20 do\n"
                       "   s.spawn(function(m)\n"
                       "      local s = require 'smarm'\n"
                       "      for i = 1, 50 do assert(m.tx:send(i)) end\n"
                       "   end, {tx = tx})\n"
                       "end\n"
                       "local dead = s.spawn(function() end)\n"
                       "s.sleep(0.01)\n"
                       "s.send(dead, {tx = tx})\n"
                       "s.send_after(0.001, dead, {tx = tx})\n"
                       "local t = s.send_after(10, s.self(), {tx = tx})\n"
                       "assert(s.cancel_timer(t))\n"
                       "tx = nil; collectgarbage(); collectgarbage()\n"
                       "local sum, n = 0, 0\n"
                       "while true do\n"
                       "   local i, v, why = s.select({rx, s.inbox}, 5)\n"
                       "   assert(i == 1, 'select: ' .. tostring(why))\n"
                       "   if v == nil then assert(why == 'closed'); break end\n"
                       "   sum, n = sum + v, n + 1\n"
                       "end\n"
                       "assert(n == 1000 and sum == 20 * 1275, 'got ' .. n)\n"
                       /* a receiver that dies holding queued messages that carry endpoints */
                       "local tx2, rx2 = s.channel()\n"
                       "local child = s.spawn(function(parent)\n"
                       "   local s = require 'smarm'\n"
                       "   local tx, rx = s.channel()\n"
                       "   s.send(parent, tx)\n"
                       "   s.recv(5)\n"
                       "end, s.self())\n"
                       "local ctx = s.recv(5)\n"
                       "assert(ctx:send({back = tx2, self = ctx}))\n"
                       "s.send(child, 'die')\n"
                       "tx2 = nil; collectgarbage(); collectgarbage()\n"
                       "assert(select(2, rx2:recv(5)) == 'closed')\n";
    assert_int_equal(run2(code), 0);
}

int main(void)
{
    alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(last_tx_gone_closes_for_the_receiver_after_the_queue),
        cmocka_unit_test(last_rx_gone_drops_the_queue_and_refuses_sends),
        cmocka_unit_test(close_refuses_sends_but_keeps_the_queue),
        cmocka_unit_test(lua_channels_select_and_timers_across_schedulers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
