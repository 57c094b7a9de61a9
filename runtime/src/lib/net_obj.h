/* What the files of smarm.net's C half share: the socket object, the wait that parks an
 * actor until the network poller wakes it, the methods every kind of socket has, and argument
 * checks. net_obj.c has the objects and the wait, net_tcp.c streams, servers and connecting,
 * net_udp.c datagrams, net_lua.c the module table. */
#ifndef SMARM_LIB_NET_OBJ_H
#define SMARM_LIB_NET_OBJ_H

#include <stdint.h>
#include <sys/socket.h>

#include <lauxlib.h>
#include <lua.h>

#include "io/sock.h"
#include "vm/ljx.h"

enum net_obj_state { OBJ_OPEN, OBJ_CLOSED, OBJ_SENT };

/* A socket object's payload (a full userdata; the magic tells it from any other). */
typedef struct net_obj {
    uint64_t magic;
    io_sock *s; /* NULL unless OBJ_OPEN */
    int kind;   /* enum io_sock_kind */
    int state;
    uint64_t backoff_until; /* a server: accept waits until then (CLOCK_MONOTONIC ns) */
} net_obj;

/* The methods of each kind (net_tcp.c, net_udp.c), put in its metatable's __index. */
extern const luaL_Reg net_tcp_methods[], net_server_methods[], net_udp_methods[];

/* The object of kind (0: any) at idx; a closed one is returned (its methods answer
 * "closed"), one sent to another actor raises, naming fname. */
net_obj *net_check_obj(lua_State *L, int idx, int kind, const char *fname);
/* The object at idx that the method has already checked (its tries and its wait read it
 * again, one call where lua_touserdata takes two). */
static inline net_obj *net_obj_at(lua_State *L, int idx)
{
    return ljx_udata_at(L, idx, sizeof(net_obj));
}
/* Pushes a closed object of kind: a handle is attached once it exists, so a memory error
 * raised while making the object can leak no fd. */
net_obj *net_new_obj(lua_State *L, int kind);
/* Attaches fd to the closed object o: 0, or -1 (out of memory: fd is closed). */
int net_attach(net_obj *o, int fd);
/* Closes o's fd and frees its handle (a no-op once closed). */
void net_close_obj(net_obj *o);
/* Pushes nil, err: 2. */
int net_push_fail(lua_State *L, const char *err);

/* A blocking operation: try runs with its arguments at base.. (the object first, o its payload,
 * read once per call or wake rather than once per try and arm) and pushes
 * its results (>= 0) or returns -1 with the readiness to wait for in *ev (NETPOLL_READ or
 * WRITE; 0: the actor's timer only, until the object's backoff_until); fail pushes the
 * results of a wait that ended with err ("timeout", or why the poller could not be armed). */
typedef struct net_op {
    int (*try)(lua_State *L, int base, net_obj *o, unsigned *ev);
    int (*fail)(lua_State *L, int base, const char *err);
} net_op;

/* A fail that pushes nil, err. */
int net_fail_plain(lua_State *L, int base, const char *err);
/* Tries op with the arguments at 1..top, and if it must wait, arms the network poller and parks the
 * calling actor until it is done (deadline and poll as lib_check_timeout gives them). */
int net_run_op(lua_State *L, const net_op *op, net_obj *o, uint64_t deadline, int poll);

/* The methods every kind has: close, fd, port, setoption; and readable (streams, UDP). */
int net_l_close(lua_State *L);
int net_l_fd(lua_State *L);
int net_l_port(lua_State *L);
int net_l_setoption(lua_State *L);
int net_l_readable(lua_State *L);
/* Pushes a select arm over the object at 1, ready for events (NETPOLL_READ/WRITE). */
void net_push_arm(lua_State *L, unsigned events);

/* A port (0..65535) at idx, or a Lua error naming fname. */
int net_check_port(lua_State *L, int idx, const char *fname);
/* The address literal at idx and the port at idx + 1 in sa: its length, or a Lua error. */
socklen_t net_check_addr(lua_State *L, int idx, const char *fname, struct sockaddr_storage *sa);

/* The module's constructors (net_tcp.c, net_udp.c), in net_lua.c's table. */
int net_l_listen(lua_State *L);
int net_l_connect(lua_State *L);
int net_l_udp(lua_State *L);
/* Unix stream sockets (net_unix.c): a server on a path, and a stream over an fd held already. */
int net_l_listen_unix(lua_State *L);
int net_l_connect_unix(lua_State *L);
int net_l_adopt_stream(lua_State *L);

#endif
