/* smarm: an Erlang/OTP-style actor runtime whose actors are LuaJIT states.
 * This header is the whole public C API (embedding). Functions return 0 or a
 * negative SMARM_E* code; smarm_strerror names it. */
#ifndef SMARM_H
#define SMARM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SMARM_VERSION "0.1.0"

enum {
    SMARM_OK = 0,
    SMARM_EINVAL = -1,    /* bad argument */
    SMARM_ENOMEM = -2,    /* out of memory */
    SMARM_ECAPACITY = -3, /* the actor slab is full */
    SMARM_ETHREAD = -4,   /* a scheduler thread could not be started */
    SMARM_ELOAD = -5,     /* the root chunk failed to load (syntax error, missing file) */
    SMARM_ETAKEN = -6,    /* the name asked for is held by a live actor */
};

typedef struct smarm_runtime smarm_runtime;

typedef struct smarm_config {
    int schedulers;      /* scheduler threads; 0 = online CPUs */
    uint32_t max_actors; /* slab size; 0 = 1,048,576 */
    size_t stack_size;   /* default actor C stack; 0 = 64 KiB */
    size_t stack_guard;  /* PROT_NONE guard below each stack; 0 = 64 KiB */
    double timeslice_ms; /* longest run of one actor while others wait; 0 = 2 ms */
    size_t max_heap;     /* default cap on an actor's Lua heap in bytes; 0 = none */
    int handle_signals;  /* 1: SIGINT/SIGTERM shut the root down politely, a second stops all */
    const char *app_dir; /* put first on every actor's package.path; NULL = none */
} smarm_config;

/* Fills c with the defaults. */
void smarm_config_init(smarm_config *c);
/* Creates a runtime (no threads run until smarm_run_*). The runtime owns
 * everything it allocates; a process may hold several. */
int smarm_runtime_new(const smarm_config *c, smarm_runtime **out);
void smarm_runtime_free(smarm_runtime *rt);

/* Runs the Lua file at path as the root actor, with args in its global `arg`
 * (arg[0] = path) and as the chunk's `...`, until the root ends and every
 * actor it left is swept. *exit_status gets 0 (root ended normally) or 1
 * (root crashed; the reason and a traceback went to stderr). */
int smarm_run_file(smarm_runtime *rt, const char *path, int argc, char **argv, int *exit_status);
/* Same for a chunk of source (chunkname "=(command line)"). */
int smarm_run_string(smarm_runtime *rt, const char *code, int argc, char **argv, int *exit_status);
/* After a run: the signal that started its shutdown (handle_signals), or 0. */
int smarm_runtime_signal(const smarm_runtime *rt);

const char *smarm_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
