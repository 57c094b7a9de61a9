/* The C half of smarm.net as the rest of the runtime sees it: the module's opener, and the
 * socket objects as the codec (moving them in messages) and select (fd arms) use them.
 * Socket objects (TCP streams, TCP servers, UDP) over io/sock.h handles live in net_obj.c,
 * their operations in net_tcp.c and net_udp.c; lua/smarm/net.lua wraps the module
 * functions (names, address lists). */
#ifndef SMARM_LIB_NET_LUA_H
#define SMARM_LIB_NET_LUA_H

#include <stddef.h>

#include "core/actor.h"

typedef struct lua_State lua_State;

/* package.preload["smarm.net.raw"]: the primitives net.lua builds on. */
int net_lua_open(lua_State *L);

/* For the codec (installed by runtime.c): if ud (len bytes) is a socket object, WIRE_REF_SOCK
 * and its handle in *h (NULL if it was closed or sent away); else 0. */
int net_lua_endpoint(void *ud, size_t len, void **h);
/* Moves the handle out of the socket object ud (which then raises when used): its handle. */
void *net_lua_take(void *ud);
/* Pushes a new socket object of L taking over the handle h; may raise a memory error. */
void net_lua_push(lua_State *L, void *h);

/* For select (lib/chan_lua.c): whether the value at idx is an fd arm (sock:readable(),
 * server:acceptable(), u:readable()); 2 if its socket was sent to another actor. */
int net_lua_is_arm(lua_State *L, int idx);
/* Tries the fd arm at idx for actor a: pushes its socket and returns 1 when ready (or
 * closed); else arms the network poller to wake a and returns -1 (or pushes nothing and returns -1
 * if arming failed: the arm is polled on every other wake). */
int net_lua_try_arm(lua_State *L, int idx, actor *a);

/* Closes a dead message's socket handle (the wire refs release, through runtime.c). */
void net_lua_release(void *h);

#endif
