/* send_after / cancel_timer for Lua, and the delivery of a send timer when it fires. */
#ifndef SMARM_TIMER_LUA_H
#define SMARM_TIMER_LUA_H

#include "base/timer.h"

typedef struct lua_State lua_State;
struct smarm_runtime;

int timer_lua_send_after(lua_State *L); /* smarm.send_after(seconds, dest, msg) -> timer */
int timer_lua_cancel(lua_State *L);     /* smarm.cancel_timer(timer) -> boolean */
/* Delivers a fired send timer's message (e from timers_due; the message is taken over):
 * the destination is resolved now, and a dead one drops the message silently. */
void timer_fire_send(struct smarm_runtime *rt, timer_entry *e);

#endif
