/* Embedding: the runtime started and stopped by a host program, and host handles, with
 * which threads of the host are actors (a pid, an inbox, a Lua state of their own). */
#include "embed.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/critical.h"
#include "base/park.h"
#include "base/sanitize.h"
#include "base/wire.h"
#include "core/exit.h"
#include "core/host.h"
#include "core/registry.h"
#include "core/runtime.h"
#include "core/scheduler.h"
#include "vm/body.h"
#include "vm/luavm.h"
#include "vm/modcache.h"

struct thread_handle;

struct smarm_host {
    smarm_runtime *rt;
    host *core; /* the parker the wake path signals (core/host.h) */
    actor *a;
    uint64_t pid;
    int closed;
    struct thread_handle *owner; /* its entry in the opening thread's list */
    struct smarm_host *next;     /* every handle of the runtime, freed with it */
};

/* The handles a thread opened, so that the thread ending closes those it left open, as an
 * actor's end does (links and monitors fire with "normal"). The entries belong to the
 * thread: a close on any thread only clears the entry's handle; the thread's end frees
 * them. Whoever clears the handle first closes it. */
typedef struct thread_handle {
    _Atomic(smarm_host *) h;
    struct thread_handle *next;
} thread_handle;

static pthread_key_t thread_handles_key;
static pthread_once_t thread_handles_once = PTHREAD_ONCE_INIT;

static void close_host(smarm_host *h);

/* The key's destructor: runs when a thread that opened handles ends (not at exit()). */
static void close_thread_handles(void *head)
{
    for (thread_handle *t = head, *next; t; t = next) {
        next = t->next;
        smarm_host *h = atomic_exchange(&t->h, NULL);
        if (h)
            close_host(h);
        free(t);
    }
}

static void make_thread_handles_key(void)
{
    if (pthread_key_create(&thread_handles_key, close_thread_handles) != 0)
        abort(); /* only EAGAIN (every key taken) or ENOMEM, at the first open */
}

/* Adds h to the calling thread's list; 0 or SMARM_ENOMEM. */
static int own_handle(smarm_host *h)
{
    pthread_once(&thread_handles_once, make_thread_handles_key);
    thread_handle *t = malloc(sizeof *t);
    if (!t)
        return SMARM_ENOMEM;
    atomic_init(&t->h, h);
    t->next = pthread_getspecific(thread_handles_key);
    if (pthread_setspecific(thread_handles_key, t) != 0) {
        free(t);
        return SMARM_ENOMEM;
    }
    h->owner = t;
    return 0;
}

/* Frees the calling thread's entries whose handles are closed (a thread that opens and
 * closes handles all its life keeps a short list). */
static void prune_thread_handles(void)
{
    thread_handle *head = pthread_getspecific(thread_handles_key), **link = &head;
    while (*link) {
        thread_handle *t = *link;
        if (atomic_load(&t->h) == NULL) {
            *link = t->next;
            free(t);
        } else {
            link = &t->next;
        }
    }
    pthread_setspecific(thread_handles_key, head);
}

static int running(smarm_runtime *rt)
{
    return atomic_load(&rt->embed_running) &&
           !atomic_load_explicit(&rt->stopping, memory_order_acquire);
}

/* ---- start and stop ---- */

int smarm_start(smarm_runtime *rt, const char *path, int argc, char **argv)
{
    if (!rt || rt->abandoned || argc < 0 || (argc > 0 && !argv))
        return SMARM_EINVAL;
    if (atomic_load(&rt->embed_running) || rt->scheds)
        return SMARM_EBUSY;
    atomic_store(&rt->stopping, 0);
    atomic_store(&rt->root_done, 0);
    rt->root_status = 0;
    rt->root_pid = 0;
    /* the runtime's own hold on live: the schedulers stay while no actor lives, until
     * smarm_stop lets go of it */
    atomic_fetch_add(&rt->live, 1);
    if (path) {
        size_t len;
        char *payload = runtime_chunk_payload(path, argc, argv, &len);
        uint64_t pid;
        int rc = payload ? sched_spawn(rt, BOOT_FILE, payload, len, NULL, 0, &pid) : SMARM_ENOMEM;
        if (rc != 0) {
            free(payload);
            atomic_fetch_sub(&rt->live, 1);
            return rc;
        }
        rt->root_pid = pid;
    }
    int rc = sched_start(rt);
    if (rc != 0) {
        /* none started: whatever was spawned never runs; end the way a run does */
        atomic_fetch_sub(&rt->live, 1);
        if (rt->scheds)
            sched_join(rt);
        return rc;
    }
    atomic_store(&rt->embed_running, 1);
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Whether pid is a live actor that is not a host's. */
static int live_actor(smarm_runtime *rt, uint64_t pid)
{
    slot *sl = pid ? slot_of(&rt->slots, pid) : NULL;
    return sl && slot_is_live(sl, pid_gen(pid)) &&
           !atomic_load_explicit(&rt->actors[pid_index(pid)].run.host, memory_order_acquire);
}

/* The polite part: what the first SIGTERM does (core/signals.c), to the root. With no root,
 * to every top-level actor (one whose parent is no live actor: spawned by a host, or
 * orphaned), so a supervisor the host started stops its tree in order. Host actors are
 * left to the kill that follows the grace. */
static RACY_READS void shutdown_politely(smarm_runtime *rt)
{
    if (rt->root_pid) {
        exit_shutdown(rt, 0, rt->root_pid);
        return;
    }
    uint32_t hwm = rt->slots.hwm;
    for (uint32_t i = 0; i < hwm; i++) {
        uint64_t w = atomic_load_explicit(&slot_at(&rt->slots, i)->word, memory_order_acquire);
        enum slot_state st = slot_word_state(w);
        uint64_t pid = pid_make(i, slot_word_gen(w));
        /* the parent is written before the slot is published (racy only for a new tenant,
         * which is then told or not: its own parent tells it in turn) */
        if (st != SLOT_VACANT && st != SLOT_DONE && live_actor(rt, pid) &&
            !live_actor(rt, rt->actors[i].parent))
            exit_shutdown(rt, 0, pid);
    }
}

int smarm_stop(smarm_runtime *rt, double grace_seconds, int *exit_status)
{
    if (!rt || !(grace_seconds >= 0))
        return SMARM_EINVAL;
    if (!atomic_load(&rt->embed_running))
        return SMARM_ESTOPPED;
    if (grace_seconds > 1e6)
        grace_seconds = 1e6;
    uint64_t deadline = park_now_ns() + (uint64_t)(grace_seconds * 1e9);
    shutdown_politely(rt);
    /* the actors have the grace to finish; live counts them plus the runtime's own hold */
    while (atomic_load(&rt->live) > 1 && park_now_ns() < deadline)
        sleep_ms(1);
    int overran = atomic_load(&rt->live) > 1;
    /* every actor left is stopped, host actors included (their waits raise from now on);
     * the schedulers sweep again while any is left (root_done), and the watchdog finds
     * one stuck inside a C call after that sweep */
    atomic_store(&rt->stopping, 1);
    atomic_store(&rt->root_done, 1);
    sched_sweep(rt, STOP_KILL);
    atomic_fetch_sub(&rt->live, 1);
    /* the last actor may be gone, or idle schedulers must look at the sweep */
    park_set_wake_all(&rt->parks);
    sched_join(rt);
    atomic_store(&rt->embed_running, 0);
    if (exit_status)
        *exit_status = overran ? 2 : rt->root_pid ? rt->root_status : 0;
    return 0;
}

/* ---- host handles ---- */

int smarm_host_open_rc(smarm_runtime *rt, smarm_host **out)
{
    if (!out)
        return SMARM_EINVAL;
    *out = NULL;
    if (!rt)
        return SMARM_EINVAL;
    if (!running(rt))
        return SMARM_ESTOPPED;
    /* a scheduler thread (a C function an actor called) must not block as a host */
    if (sched_current())
        return SMARM_EINVAL;
    smarm_host *h = calloc(1, sizeof *h);
    if (!h)
        return SMARM_ENOMEM;
    h->rt = rt;
    h->core = host_new();
    if (!h->core) {
        free(h);
        return SMARM_ENOMEM;
    }
    spawn_opts o = {0};
    o.host = h->core;
    uint64_t pid;
    int rc = sched_spawn(rt, BOOT_HOST, NULL, 0, &o, 0, &pid);
    if (rc != 0) {
        host_close(h->core);
        host_free(h->core);
        free(h);
        return rc;
    }
    actor *a = sched_actor(rt, pid);
    atomic_store_explicit(&h->core->a, a, memory_order_release);
    h->a = a;
    h->pid = pid;
    a->vm.max_heap = 0; /* the host's own state: no cap */
    /* its state allocates only on this thread: a cache of its own, as a scheduler has */
    a->run.heap_cache = &h->core->cache;
    mutex_lock(&rt->hosts_lock);
    h->next = rt->hosts;
    rt->hosts = h;
    mutex_unlock(&rt->hosts_lock);
    if (luavm_boot(a) < 0) {
        /* reported, reason set: the slot ends as an actor that could not start */
        luavm_close(a);
        heap_cache_flush(&rt->heap, &h->core->cache);
        sched_finalize_host(rt, a);
        host_close(h->core);
        h->closed = 1;
        return SMARM_ENOMEM;
    }
    if (own_handle(h) != 0) {
        close_host(h);
        return SMARM_ENOMEM;
    }
    host_thread_enter(rt);
    *out = h;
    return 0;
}

smarm_host *smarm_host_open(smarm_runtime *rt)
{
    smarm_host *h;
    return smarm_host_open_rc(rt, &h) == 0 ? h : NULL;
}

lua_State *smarm_host_lua(smarm_host *h) { return h && !h->closed ? h->a->vm.L : NULL; }

uint64_t smarm_host_pid(smarm_host *h) { return h && !h->closed ? h->pid : 0; }

int smarm_host_fd(smarm_host *h)
{
    if (!h)
        return SMARM_EINVAL;
    return h->closed ? SMARM_ECLOSED : h->core->efd;
}

int smarm_host_close(smarm_host *h)
{
    if (!h)
        return SMARM_EINVAL;
    if (h->closed)
        return SMARM_ECLOSED;
    /* the opening thread's end will not close it again (that thread may be this one) */
    if (h->owner && atomic_exchange(&h->owner->h, NULL) != h)
        return SMARM_ECLOSED;
    close_host(h);
    prune_thread_handles();
    host_thread_leave(h->rt);
    return 0;
}

static void close_host(smarm_host *h)
{
    actor *a = h->a;
    /* it ends as an actor does: reason "normal", or how it was stopped ("killed",
     * "shutdown", a linked actor's reason) */
    int stopped = atomic_load_explicit(&a->run.stop, memory_order_acquire) != 0;
    body_finish(a, stopped ? BODY_KILLED : 0);
    luavm_close(a);
    heap_cache_flush(&h->rt->heap, &h->core->cache);
    sched_finalize_host(h->rt, a);
    host_close(h->core);
    h->closed = 1;
}

/* ---- from any thread ---- */

int64_t smarm_reload(smarm_runtime *rt, const char *module)
{
    return smarm_reload_err(rt, module, NULL, 0);
}

int64_t smarm_reload_err(smarm_runtime *rt, const char *module, char *err, size_t errlen)
{
    char buf[512];
    if (!err || errlen == 0) {
        err = buf;
        errlen = sizeof buf;
    }
    if (!rt || !module) {
        snprintf(err, errlen, "no runtime or no module name");
        return SMARM_EINVAL;
    }
    if (modcache_version(rt->vm, module) < 0) {
        snprintf(err, errlen, "module %s is not loaded", module);
        return SMARM_EINVAL;
    }
    int64_t v = modcache_reload(rt->vm, module, err, errlen);
    return v >= 0 ? v : SMARM_ELOAD;
}

int smarm_preload(smarm_runtime *rt, const char *name, lua_CFunction open)
{
    if (!rt || !name || !*name || !open)
        return SMARM_EINVAL;
    return luavm_add_preload(rt->vm, name, open) == 0 ? 0 : SMARM_ENOMEM;
}

int smarm_send_string(smarm_runtime *rt, uint64_t dest, const char *data, size_t len)
{
    if (!rt || (!data && len))
        return SMARM_EINVAL;
    if (!running(rt))
        return SMARM_ESTOPPED;
    if (pid_index(dest) >= rt->slots.max || pid_gen(dest) == 0)
        return SMARM_EDEAD;
    wire_buf b;
    wire_buf_init(&b);
    if (wire_put_string(&b, data ? data : "", len) != 0) {
        wire_buf_free(&b);
        return SMARM_ENOMEM;
    }
    msg *m = msg_new(b.data, b.len);
    wire_buf_free(&b);
    if (!m)
        return SMARM_ENOMEM;
    return sched_send(rt, dest, m) == 0 ? 0 : SMARM_EDEAD;
}

int smarm_send_string_name(smarm_runtime *rt, const char *name, const char *data, size_t len)
{
    if (!rt || !name)
        return SMARM_EINVAL;
    if (!running(rt))
        return SMARM_ESTOPPED;
    uint64_t pid = registry_whereis(rt, name);
    return pid ? smarm_send_string(rt, pid, data, len) : SMARM_EDEAD;
}

uint64_t smarm_whereis(smarm_runtime *rt, const char *name)
{
    return rt && name && running(rt) ? registry_whereis(rt, name) : 0;
}

void embed_free(smarm_runtime *rt)
{
    if (atomic_load(&rt->embed_running))
        smarm_stop(rt, 0, NULL);
    smarm_host *h = rt->hosts;
    while (h) {
        smarm_host *next = h->next;
        if (!h->closed)
            smarm_host_close(h);
        host_free(h->core);
        free(h);
        h = next;
    }
    rt->hosts = NULL;
}
