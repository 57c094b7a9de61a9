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

/* The two Lua types the API names, as LuaJIT's lua.h declares them (installed beside this
 * header with lauxlib.h, lualib.h, luajit.h and lua.hpp: C hosts include lauxlib.h, C++
 * hosts lua.hpp, which gives the Lua API C linkage). */
#ifndef lua_h
typedef struct lua_State lua_State;
typedef int (*lua_CFunction)(lua_State *L);
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
    SMARM_ESTOPPED = -7,  /* the runtime is not running (not started, or stopped) */
    SMARM_ECLOSED = -8,   /* the host handle was closed */
    SMARM_EDEAD = -9,     /* no such actor: the pid is dead, or the name is not registered */
    SMARM_EBUSY = -10,    /* the runtime is running already */
};

typedef struct smarm_runtime smarm_runtime;

typedef struct smarm_config {
    int schedulers;       /* scheduler threads; 0 = online CPUs */
    uint32_t max_actors;  /* slab size; 0 = 1,048,576 */
    size_t stack_size;    /* default actor C stack; 0 = 64 KiB */
    size_t stack_guard;   /* PROT_NONE guard below each stack; 0 = 64 KiB */
    double timeslice_ms;  /* longest run of one actor while others wait; 0 = 2 ms */
    size_t max_heap;      /* default cap on an actor's Lua heap in bytes; 0 = none */
    int handle_signals;   /* 1: the runtime handles signals while it runs (see below) */
    const char *app_dir;  /* put first on every actor's package.path; NULL = none */
    int blocking_threads; /* threads for smarm.blocking, started on demand; 0 = the larger of
                             8 and twice the schedulers */
    int keep_sigint;      /* with handle_signals: SIGINT is left to the host (an interactive
                             shell reads Ctrl-C), the runtime takes the other three */
    const char *observer; /* "[HOST:]PORT": smarm_run_file/smarm_run_string also serve the
                             observer page there (an actor of its own, beside the root);
                             NULL = none. Kept, not copied: it must outlive the runtime */
    const char *trace;    /* a file the run writes a trace of scheduling events to, in the
                             Chrome trace-event format, at its end and on SIGUSR1; NULL =
                             none. Kept, not copied, like observer */
} smarm_config;

/* Signals. Whatever the configuration, a run installs (once per process) a
 * SIGURG handler for preemption, and a handler for SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL and SIGABRT that prints one line naming the signal and the actor that
 * was running (or the C-stack overflow) and then hands the signal to the action
 * installed before it (the default one: the process dies of it).
 *
 * handle_signals = 1 (what smarm-lua does), for the duration of a run:
 *  - SIGINT, SIGTERM, SIGHUP: the first shuts the root down politely (it is told
 *    as by smarm.shutdown; smarm_runtime_signal reports it afterwards), the
 *    second stops every actor at once. If an actor cannot stop because its
 *    scheduler thread stays inside a C call (a blocking read, os.execute), the
 *    process exits: stdout and stderr are flushed, then _exit(128+N), N being
 *    the first signal. A third signal exits so in any case;
 *  - SIGUSR1: one line per live actor on stderr (pid, state, mailbox, memory);
 *  - these four are blocked in the calling thread, whose mask the runtime's
 *    threads inherit; a thread of the runtime takes them. The mask is restored
 *    when the run returns;
 *  - SIGPIPE: a handler that does nothing, so a write to a closed pipe or
 *    socket fails with EPIPE in the actor that made it; the previous action is
 *    restored when the run returns.
 * Only one runtime of a process handles signals at a time; a run that starts
 * while another one does runs as with handle_signals = 0.
 *
 * handle_signals = 0: the host's signal handling is left alone. SIGPIPE then
 * kills the process (its default action) when an actor writes to a closed pipe,
 * unless the host ignores it (signal(SIGPIPE, SIG_IGN)) or blocks it in the
 * thread that calls smarm_run_*. */

/* Fills c with the defaults. */
void smarm_config_init(smarm_config *c);
/* Creates a runtime (no threads run until smarm_run_*). The runtime owns
 * everything it allocates; a process may hold several. */
int smarm_runtime_new(const smarm_config *c, smarm_runtime **out);
void smarm_runtime_free(smarm_runtime *rt);

/* Runs the Lua file at path as the root actor, with args in its global `arg`
 * (arg[0] = path) and as the chunk's `...`, until the root ends and every
 * actor it left is swept. *exit_status gets 0 (root ended normally) or 1
 * (root crashed; the reason and a traceback went to stderr).
 * An actor inside a C call that does not return (a blocking read, os.execute,
 * a long string.find, such a call in smarm.blocking) cannot be swept: about a
 * second after the sweep the run returns without waiting for it (a line on
 * stderr names it), and its scheduler (or blocking pool) thread is left
 * running, detached. smarm_runtime_abandoned then
 * says so: the runtime can run nothing more, and smarm_runtime_free leaves its
 * memory to that thread (a leak, by design). A host that is about to exit
 * should flush its output and _exit rather than run exit handlers under it. */
int smarm_run_file(smarm_runtime *rt, const char *path, int argc, char **argv, int *exit_status);
/* Same for a chunk of source (chunkname "=(command line)"). */
int smarm_run_string(smarm_runtime *rt, const char *code, int argc, char **argv, int *exit_status);
/* After a run: the signal that started its shutdown (handle_signals), or 0. */
int smarm_runtime_signal(const smarm_runtime *rt);
/* After a run: how many threads it left running inside C calls (see
 * smarm_run_file), or 0. Nonzero: smarm_run_* returns SMARM_EINVAL from then on,
 * and smarm_runtime_free frees nothing. */
int smarm_runtime_abandoned(const smarm_runtime *rt);

const char *smarm_strerror(int err);

/* ---- Embedding: the runtime runs beside the host program ----
 *
 * smarm_start starts the scheduler threads (and the root actor from path, unless path is
 * NULL) and returns at once. The runtime then runs until smarm_stop, whether or not any
 * actor lives (a root that ends makes the runtime stop what it left, as smarm_run_file
 * does, but the schedulers stay for the host until smarm_stop). smarm_run_file and
 * smarm_run_string return SMARM_EBUSY on a started runtime. With handle_signals, call
 * smarm_stop on the thread that called smarm_start (the signal mask is per thread).
 * A runtime can be started again after smarm_stop. */
int smarm_start(smarm_runtime *rt, const char *path, int argc, char **argv);

/* Stops a started runtime: the root is shut down politely (as by SIGTERM, or by
 * smarm.shutdown: a trapping root hears {exit, shutdown} and may finish its work; with no
 * root every top-level actor, one whose parent is no live actor, is told so); after
 * grace_seconds whatever is left is killed, host actors included (their Lua waits then
 * raise). Returns once the schedulers are joined.
 * *exit_status (may be NULL): 0 the root ended normally (or there is none), 1 it crashed
 * or was stopped without trapping exits, 2 the grace ran out and actors were killed. */
int smarm_stop(smarm_runtime *rt, double grace_seconds, int *exit_status);

/* A host handle: the calling thread becomes an actor. It has a pid, an inbox and a Lua
 * state of its own in which require "smarm" works (send, recv with a timeout, 0 = poll,
 * spawn, whereis, monitor, link, trap_exit, gen_server.call...). Its waits block the
 * calling thread (no scheduler runs it). Thread rules: a handle is used by one thread at a
 * time (the one that drives its Lua state). A handle left open when the thread that opened
 * it ends is closed for it (a pthread key destructor; not at exit()). smarm_runtime_free
 * closes handles left open, from its own thread: no host thread may end while it runs.
 * smarm.exit and smarm.yield are for actors: on a host smarm.exit raises an error the
 * host's own pcall sees; smarm.info and smarm.snapshot see the runtime of the handle the
 * thread opened last. Closing the handle ends the actor: links and monitors fire with
 * reason "normal" (or "killed"/"shutdown" if the runtime stopped it meanwhile).
 * smarm_host_open returns NULL on failure; smarm_host_open_rc says why (SMARM_EINVAL also
 * when called on one of the runtime's own threads, from a C function an actor called). */
typedef struct smarm_host smarm_host;
smarm_host *smarm_host_open(smarm_runtime *rt);
int smarm_host_open_rc(smarm_runtime *rt, smarm_host **out);
/* NULL / 0 for NULL or a closed handle. */
lua_State *smarm_host_lua(smarm_host *h);
uint64_t smarm_host_pid(smarm_host *h);
/* 0, SMARM_ECLOSED (closed already), SMARM_EINVAL (NULL). The handle's memory is kept until
 * smarm_runtime_free, so a call on a closed handle is an error code, not a crash. */
int smarm_host_close(smarm_host *h);
/* An fd (eventfd) readable while the host's inbox holds messages, for poll/epoll loops;
 * receiving drains it. Only the inbox: channel messages (monitor notices) do not make it
 * readable. A negative SMARM_E* code for NULL or a closed handle. Do not read or close it. */
int smarm_host_fd(smarm_host *h);

/* Every actor state (and host state) can require(name) from now on: open is called as a
 * Lua module loader (package.preload). Any thread. */
int smarm_preload(smarm_runtime *rt, const char *name, lua_CFunction open);

/* Sends data (len bytes, any bytes) to dest as a Lua string message, from any thread, no
 * Lua state needed. SMARM_EDEAD: dest is dead (or no pid of this runtime); SMARM_ESTOPPED:
 * the runtime is not running. The _name form sends to the actor registered under name
 * (resolved at the call, SMARM_EDEAD if none). */
int smarm_send_string(smarm_runtime *rt, uint64_t dest, const char *data, size_t len);
int smarm_send_string_name(smarm_runtime *rt, const char *name, const char *data, size_t len);
/* The pid registered under name, or 0. */
uint64_t smarm_whereis(smarm_runtime *rt, const char *name);

/* Hot code reload, as smarm.reload(module) from Lua: compiles the module's file again and
 * publishes it as a new version, which every actor that has it loaded takes at its next safe
 * point (a recv, select, sleep or yield returning). Returns the new version (>= 1), or a
 * negative SMARM_E* code: SMARM_ELOAD when the file does not compile (nothing changes) or
 * the module is part of smarm, SMARM_EINVAL when no actor loaded the module. Any thread.
 * smarm_reload_err is the same and also gives the message: err (errlen bytes, may be NULL)
 * receives it on failure, "file:line: message" for a syntax error. */
int64_t smarm_reload(smarm_runtime *rt, const char *module);
int64_t smarm_reload_err(smarm_runtime *rt, const char *module, char *err, size_t errlen);
/* Watches dir and its subdirectories (inotify): a .lua file of a loaded module that is
 * written (closed after writing) or renamed into place is reloaded as by smarm_reload, and
 * each reload or rejected file is reported on stderr with the version number. Stops with
 * smarm_runtime_free. 0, or a negative SMARM_E* code (SMARM_EINVAL: dir cannot be watched,
 * or a watch runs already). Any thread. */
int smarm_watch(smarm_runtime *rt, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
