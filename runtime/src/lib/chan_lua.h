/* The Lua face of channels and select: endpoint objects (tx, rx), smarm.channel,
 * smarm.select, smarm.inbox, and what the codec needs to carry endpoints in messages. */
#ifndef SMARM_CHAN_LUA_H
#define SMARM_CHAN_LUA_H

#include <stddef.h>

#include "core/chan.h"

#include <lauxlib.h>

/* smarm.channel and smarm.select (lib/init.c lists the groups) */
extern const luaL_Reg chan_lua_funcs[];
/* Puts smarm.inbox into the smarm table at t. */
void chan_lua_fields(lua_State *L, int t);
/* If the userdata payload ud (len bytes) is an endpoint: its kind, and its channel in *c
 * (NULL for an rx that was sent away). 0 for any other userdata. */
int chan_lua_endpoint(void *ud, size_t len, void **c);
/* Moves the reference of rx object ud into a message being sent; the object goes dead. */
void *chan_lua_take_rx(void *ud);
/* Pushes a new endpoint object of L's state that takes over one reference to c; an rx
 * makes L's actor the channel's receiver. May raise a memory error. */
void chan_lua_push(lua_State *L, chan *c, enum chan_kind kind);
/* Makes the rx at idx (a monitor's) answer mon.ref with ref. May raise out of memory. */
void chan_lua_monitor_ref(lua_State *L, int idx, uint64_t ref);
/* package.preload["smarm.chan.raw"]: is_tx, call_send, drop and reply, a gen_server call's
 * reply channel (lua/smarm/gen.lua). */
int chan_lua_open_raw(lua_State *L);
/* The same, as the codec's endpoint hook (codec_endpoints.push). */
void chan_lua_push_ref(lua_State *L, void *c, int kind);

#endif
