/* The runtime object: configuration, construction of every part, the root
 * actor's run, and teardown. A process may hold several runtimes. */
#include "core/runtime.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/arena_map.h"
#include "base/zalloc.h"
#include "core/chan.h"
#include "core/exit.h"
#include "core/pg.h"
#include "core/registry.h"
#include "core/scheduler.h"
#include "core/stable.h"
#include "embed.h"
#include "lib/chan_lua.h"
#include "lib/init.h"
#include "lib/net_lua.h"
#include "lib/reload_lua.h"
#include "watch.h"
#include "vm/body.h"
#include "vm/codec.h"
#include "vm/luavm.h"

#define DEFAULT_MAX_ACTORS (1u << 20)
#define BLOCKING_THREADS_MAX 1024

/* ---- the hooks: how the lower layers reach what is built above them ---- */

/* a socket reference is never retained: sockets only move */
static void refs_retain(void *c, int kind) { chan_retain(c, (enum chan_kind)kind); }

static void refs_release(void *c, int kind)
{
    if (kind == WIRE_REF_SOCK)
        net_lua_release(c); /* a socket in a message freed undelivered is closed */
    else
        chan_release(c, (enum chan_kind)kind);
}

static void *refs_take(void *obj, int kind)
{
    return kind == WIRE_REF_SOCK ? net_lua_take(obj) : chan_lua_take_rx(obj);
}

static int any_endpoint(void *ud, size_t len, void **c)
{
    int kind = chan_lua_endpoint(ud, len, c);
    return kind ? kind : net_lua_endpoint(ud, len, c);
}

static void push_endpoint(lua_State *L, void *c, int kind)
{
    if (kind == WIRE_REF_SOCK)
        net_lua_push(L, c);
    else
        chan_lua_push_ref(L, c, kind);
}

/* what a channel or socket reference inside an encoded message means (base/wire.c) */
static const wire_refs_ops refs_ops = {refs_retain, refs_release, refs_take};
/* how the codec recognises and makes endpoint and socket objects (vm/codec.c) */
static const codec_endpoints endpoints = {any_endpoint, push_endpoint};

/* the vm layer's state pools (vm/luavm.c) */
static void trim_states(smarm_runtime *rt) { luavm_trim(rt->vm); }

/* actors are Lua states: the scheduler runs them through the vm layer's body */
static const actor_hooks actor_hooks_lua = {body_entry,  body_stop_entry, body_preempt,
                                            body_retune, trim_states,     luavm_warm};

static void install_process_hooks(void)
{
    wire_set_refs_ops(&refs_ops);
    codec_set_endpoints(&endpoints);
    arena_map_set_running(luavm_running_arena_map);
}

void smarm_config_init(smarm_config *c) { memset(c, 0, sizeof *c); }

static void config_resolve(smarm_config *c)
{
    if (c->schedulers <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c->schedulers = n > 0 ? (int)n : 1;
    }
    if (c->schedulers > PARK_MAX)
        c->schedulers = PARK_MAX;
    if (c->max_actors == 0)
        c->max_actors = DEFAULT_MAX_ACTORS;
    if (c->stack_size == 0)
        c->stack_size = STACK_DEFAULT_SIZE;
    if (c->stack_guard == 0)
        c->stack_guard = STACK_DEFAULT_GUARD;
    if (c->timeslice_ms <= 0)
        c->timeslice_ms = 2;
    if (c->blocking_threads <= 0)
        c->blocking_threads = c->schedulers * 2 > 8 ? c->schedulers * 2 : 8;
    if (c->blocking_threads > BLOCKING_THREADS_MAX)
        c->blocking_threads = BLOCKING_THREADS_MAX;
}

int smarm_runtime_new(const smarm_config *cfg, smarm_runtime **out)
{
    *out = NULL;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_process_hooks);
    /* aligned: fields written by other threads than those that read their neighbours are on
     * lines of their own (core/runtime.h) */
    smarm_runtime *rt = zalloc_aligned(alignof(smarm_runtime), sizeof *rt);
    if (!rt)
        return SMARM_ENOMEM;
    if (cfg)
        rt->cfg = *cfg;
    config_resolve(&rt->cfg);
    if (rt->cfg.max_actors > PID_MAX_INDEX + 1u) {
        free(rt);
        return SMARM_EINVAL;
    }
    rt->nsched = rt->cfg.schedulers;
    pthread_mutex_init(&rt->err_lock, NULL);
    pthread_mutex_init(&rt->hosts_lock, NULL);
    heap_init(&rt->heap);
    timers_init(&rt->tm);
    int err = SMARM_ENOMEM;
    if (slot_table_init(&rt->slots, rt->cfg.max_actors) != 0)
        goto fail_slots;
    /* the actor records are reserved like the slots and touched as they are used */
    size_t bytes = (size_t)rt->cfg.max_actors * sizeof(actor);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        goto fail_actors;
    rt->actors = p;
    rt->rq = runq_new(rt->cfg.max_actors);
    rt->rq_spawner = runq_new(rt->cfg.max_actors);
    rt->rq_new = runq_new(rt->cfg.max_actors);
    rt->rq_yield = runq_new(rt->cfg.max_actors);
    if (!rt->rq || !rt->rq_spawner || !rt->rq_new || !rt->rq_yield)
        goto fail_rq;
    rt->stacks = stack_pool_new(rt->cfg.stack_size, rt->cfg.stack_guard);
    if (!rt->stacks)
        goto fail_stacks;
    rt->hooks = actor_hooks_lua;
    rt->vm = malloc(sizeof *rt->vm);
    err = rt->vm ? luavm_shared_init(rt->vm, rt->cfg.app_dir) : SMARM_ENOMEM;
    if (err == 0) {
        rt->vm->push_library = lib_push_smarm;
        rt->vm->preloads = lib_preloads;
        rt->vm->take_reload = reload_lua_take;
    }
    if (err == 0)
        err = registry_init(rt);
    if (err == 0)
        err = pg_init(rt);
    if (err == 0)
        err = stab_init(rt);
    if (err != 0)
        goto fail_vm;
    netpoll_init(&rt->np);
    atomic_init(&rt->cpu_room, -1);
    *out = rt;
    return 0;
fail_vm:
    stab_free(rt);
    pg_free(rt);
    registry_free(rt);
    if (rt->vm)
        luavm_shared_free(rt->vm);
    free(rt->vm);
    stack_pool_free(rt->stacks);
fail_stacks:
    runq_free(rt->rq);
    runq_free(rt->rq_spawner);
    runq_free(rt->rq_new);
    runq_free(rt->rq_yield);
fail_rq:
    munmap(rt->actors, bytes);
fail_actors:
    slot_table_destroy(&rt->slots);
fail_slots:
    timers_destroy(&rt->tm);
    heap_destroy(&rt->heap);
    free(rt);
    return err;
}

void smarm_runtime_free(smarm_runtime *rt)
{
    /* scheduler threads a run left inside C calls still use all of it */
    if (!rt || rt->abandoned)
        return;
    watch_stop(rt);
    embed_free(rt);
    if (rt->abandoned)
        return; /* smarm_stop left a scheduler inside a C call */
    /* no scheduler sleeps in the poller's set any more */
    netpoll_destroy(&rt->np);
    exit_free_records(rt);
    stab_free(rt);
    pg_free(rt);
    registry_free(rt);
    if (rt->vm)
        luavm_shared_free(rt->vm);
    free(rt->vm);
    stack_pool_free(rt->stacks);
    runq_free(rt->rq);
    runq_free(rt->rq_spawner);
    runq_free(rt->rq_new);
    runq_free(rt->rq_yield);
    munmap(rt->actors, (size_t)rt->cfg.max_actors * sizeof(actor));
    slot_table_destroy(&rt->slots);
    timers_destroy(&rt->tm);
    pthread_mutex_destroy(&rt->err_lock);
    pthread_mutex_destroy(&rt->hosts_lock);
    heap_destroy(&rt->heap);
    free(rt);
}

/* payload: text\0 u32 argc args\0... */
char *runtime_chunk_payload(const char *text, int argc, char **argv, size_t *len)
{
    size_t n = strlen(text) + 1 + 4;
    for (int i = 0; i < argc; i++)
        n += strlen(argv[i]) + 1;
    char *p = malloc(n), *w = p;
    if (!p)
        return NULL;
    size_t tl = strlen(text) + 1;
    memcpy(w, text, tl);
    w += tl;
    uint32_t c = (uint32_t)argc;
    memcpy(w, &c, 4);
    w += 4;
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(argv[i]) + 1;
        memcpy(w, argv[i], l);
        w += l;
    }
    *len = n;
    return p;
}

/* The observer page's actor (lua/smarm/observer.lua), spawned beside the root: a top-level
 * actor that the root-exit sweep stops like any other. A failure is reported, not fatal. */
static void start_observer(smarm_runtime *rt)
{
    char *argv[] = {(char *)rt->cfg.observer};
    size_t len;
    char *payload = runtime_chunk_payload("require('smarm.observer').main(arg[1])", 1, argv, &len);
    uint64_t pid;
    if (!payload || sched_spawn(rt, BOOT_STRING, payload, len, NULL, 0, &pid) != 0) {
        free(payload);
        fputs("smarm: the observer could not be started\n", stderr);
    }
}

static int run_root(smarm_runtime *rt, int kind, const char *text, int argc, char **argv,
                    int *exit_status)
{
    if (rt->abandoned)
        return SMARM_EINVAL;
    if (atomic_load(&rt->embed_running))
        return SMARM_EBUSY;
    size_t len;
    char *payload = runtime_chunk_payload(text, argc, argv, &len);
    if (!payload)
        return SMARM_ENOMEM;
    atomic_store(&rt->root_done, 0);
    atomic_store(&rt->stopping, 0); /* an earlier smarm_stop refused spawns */
    rt->root_status = 0;
    uint64_t pid;
    int rc = sched_spawn(rt, kind, payload, len, NULL, 0, &pid);
    if (rc != 0) {
        free(payload);
        return rc;
    }
    rt->root_pid = pid;
    if (rt->cfg.observer)
        start_observer(rt);
    rc = sched_run(rt);
    if (exit_status)
        *exit_status = rt->root_status;
    return rc;
}

int smarm_run_file(smarm_runtime *rt, const char *path, int argc, char **argv, int *exit_status)
{
    if (!rt || !path)
        return SMARM_EINVAL;
    return run_root(rt, BOOT_FILE, path, argc, argv, exit_status);
}

int smarm_run_string(smarm_runtime *rt, const char *code, int argc, char **argv, int *exit_status)
{
    if (!rt || !code)
        return SMARM_EINVAL;
    return run_root(rt, BOOT_STRING, code, argc, argv, exit_status);
}

int smarm_runtime_signal(const smarm_runtime *rt) { return rt ? atomic_load(&rt->sig_caught) : 0; }

int smarm_runtime_abandoned(const smarm_runtime *rt) { return rt ? rt->abandoned : 0; }

const char *smarm_strerror(int err)
{
    switch (err) {
    case SMARM_OK:
        return "success";
    case SMARM_EINVAL:
        return "invalid argument";
    case SMARM_ENOMEM:
        return "out of memory";
    case SMARM_ECAPACITY:
        return "the actor slab is full (raise max_actors)";
    case SMARM_ETHREAD:
        return "could not start a scheduler thread";
    case SMARM_ELOAD:
        return "could not load the root chunk";
    case SMARM_ETAKEN:
        return "the name is taken";
    case SMARM_ESTOPPED:
        return "the runtime is not running";
    case SMARM_ECLOSED:
        return "the host handle is closed";
    case SMARM_EDEAD:
        return "no such actor (dead pid or unregistered name)";
    case SMARM_EBUSY:
        return "the runtime is running already";
    }
    return "unknown error";
}
