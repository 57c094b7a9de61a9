/* The smarm core functions of every actor state (the classic C API: always
 * used, so it is opened eagerly where the FFI would cost memory per actor). */
#ifndef SMARM_LUALIB_H
#define SMARM_LUALIB_H

#include <stdint.h>

typedef struct lua_State lua_State;

struct spawn_opts;

/* smarm.spawn with options (fn at fidx, its arguments above it); returns what
 * the Lua function returns. */
int lualib_spawn(lua_State *L, int fidx, struct spawn_opts *o, int try_mode, const char *fname);
/* The pid at idx, or a Lua error naming fname. */
uint64_t lualib_check_pid(lua_State *L, int idx, const char *fname);
/* The deadline (CLOCK_MONOTONIC ns) of a timeout argument at idx: 0 = forever;
 * *poll is set for a zero timeout. Raises on a bad timeout. */
uint64_t lualib_check_timeout(lua_State *L, int idx, const char *fname, int *poll);
/* The tail of every blocking receive: nil, "timeout" for a poll, else arm the
 * deadline (0 = none) and wait with cont (see sched_wait). */
struct actor;
int lualib_wait(lua_State *L, struct actor *a, uint64_t deadline, int poll,
                int (*cont)(struct actor *, lua_State *));
/* smarm.send(dest, msg) on the stack. */
int lualib_send(lua_State *L);
/* Pushes the state's smarm table, building it on first use. */
void lualib_push(lua_State *L);
/* The smarm table's __index: loads the Lua half of the library (smarm.ext) on a miss. */
int lualib_index(lua_State *L);
/* Whether the error value at idx is the one smarm.exit raises. */
int lualib_is_exit(lua_State *L, int idx);
/* Pushes the value given to smarm.exit (nil if none). */
void lualib_push_exit_value(lua_State *L);
/* The reason given to smarm.exit as a string, or NULL for "normal". */
const char *lualib_exit_reason(lua_State *L);

#endif
