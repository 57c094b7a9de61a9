/* Exits: links, monitors, trap_exit, kill and shutdown, and exit reasons.
 *
 * Each actor's links, monitors and trap channel sit under its "cold" lock.
 * Lock order: cold -> channel. At most one cold lock is held at a time (debug
 * builds assert it); under it a channel may be retained (its lock is a leaf),
 * but sends, stops and frees happen after it is released. Liveness for links and monitors is the
 * exited flag, set under the same lock at death, so a registration either lands before the death
 * (and is notified) or sees the actor gone (and gets noproc). */
#include "core/exit.h"

#include <assert.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/actor.h"
#include "core/chan.h"
#include "core/linkset.h"
#include "base/spin.h"
#include "base/wire.h"
#include "core/runtime.h"
#include "core/scheduler.h"

#if defined(SMARM_DEBUG)
static __thread int cold_held;
#define COLD_ENTER() (assert(cold_held == 0 && "two cold locks at once"), cold_held++)
#define COLD_LEAVE() (cold_held--)
#else
#define COLD_ENTER() ((void)0)
#define COLD_LEAVE() ((void)0)
#endif

static void cold_lock(actor *a)
{
    COLD_ENTER();
    spin_lock(&a->ex.cold);
}

static void cold_unlock(actor *a)
{
    spin_unlock(&a->ex.cold);
    COLD_LEAVE();
}

/* The actor of pid with its cold lock held, if that tenancy is alive; else NULL. */
static actor *lock_live(smarm_runtime *rt, uint64_t pid)
{
    actor *a = sched_actor(rt, pid);
    if (!a)
        return NULL;
    cold_lock(a);
    if (a->pid != pid || a->ex.exited) {
        cold_unlock(a);
        return NULL;
    }
    return a;
}

static char *dup_bytes(const char *p, size_t n)
{
    char *d = malloc(n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

/* ---- reasons ---- */

/* The wire bytes of "normal", the reason of most deaths: shared by every actor that ends so,
 * never freed (reason_free), so an ordinary death allocates no reason. */
static char normal_bytes[] = {(char)(WIRE_SSTR + 6), 'n', 'o', 'r', 'm', 'a', 'l'};

/* Frees a reason's (or a terminal record's) bytes. */
static void reason_free(char *bytes)
{
    if (bytes != normal_bytes)
        free(bytes);
}

static void clear_reason(actor *a)
{
    reason_free(a->ex.reason);
    free(a->ex.err_msg);
    free(a->ex.err_tb);
    a->ex.reason = a->ex.err_msg = a->ex.err_tb = NULL;
    a->ex.reason_len = 0;
}

void exit_set_reason_bytes(actor *a, char *bytes, size_t len, int abnormal)
{
    clear_reason(a);
    a->ex.reason = bytes;
    a->ex.reason_len = len;
    a->ex.reason_abnormal = abnormal;
}

void exit_set_reason(actor *a, const char *reason, int abnormal)
{
    if (strcmp(reason, "normal") == 0) {
        exit_set_reason_bytes(a, normal_bytes, sizeof normal_bytes, abnormal);
        return;
    }
    wire_buf b;
    wire_buf_init(&b);
    if (wire_put_string(&b, reason, strlen(reason)) != 0) {
        wire_buf_free(&b);
        exit_set_reason_bytes(a, NULL, 0, abnormal);
        return;
    }
    exit_set_reason_bytes(a, b.data, b.len, abnormal);
}

void exit_set_error(actor *a, const char *msg, const char *traceback)
{
    exit_set_reason(a, "error", 1);
    a->ex.err_msg = msg ? strdup(msg) : NULL;
    a->ex.err_tb = traceback ? strdup(traceback) : NULL;
}

/* pid as a notice names it: the value a stands in for, if it has one */
static int put_subject(wire_buf *b, const actor *a, uint64_t pid)
{
    return a->ex.alias ? wire_buf_append(b, a->ex.alias, a->ex.alias_len)
                       : wire_put_number(b, (double)pid);
}

/* {pid = pid, reason = r, error = e?, traceback = t?}, plus from = pid for exit
 * signals, plus request = true for a shutdown asked of the receiver (exit_shutdown:
 * not a death, so a supervisor can tell it from a linked actor that ended so) */
static msg *notice_ref(actor *a, uint64_t pid, int exit_signal, int request, uint64_t ref)
{
    wire_buf b;
    wire_buf_init(&b);
    unsigned n = 2 + (a->ex.err_msg != NULL) + (a->ex.err_tb != NULL) + (exit_signal != 0) +
                 (request != 0) + (ref != 0);
    int bad = wire_put_table(&b, 0, n);
    bad |= wire_put_string(&b, "pid", 3) | put_subject(&b, a, pid);
    /* a monitor's notice names the monitor (mon.ref) */
    if (ref)
        bad |= wire_put_string(&b, "ref", 3) | wire_put_number(&b, (double)ref);
    if (exit_signal)
        bad |= wire_put_string(&b, "from", 4) | put_subject(&b, a, pid);
    if (request)
        bad |= wire_put_string(&b, "request", 7) | wire_put_boolean(&b, 1);
    bad |= wire_put_string(&b, "reason", 6);
    if (a->ex.reason)
        bad |= wire_buf_append(&b, a->ex.reason, a->ex.reason_len);
    else
        bad |= wire_put_string(&b, "normal", 6);
    if (a->ex.err_msg)
        bad |= wire_put_string(&b, "error", 5) |
               wire_put_string(&b, a->ex.err_msg, strlen(a->ex.err_msg));
    if (a->ex.err_tb)
        bad |= wire_put_string(&b, "traceback", 9) |
               wire_put_string(&b, a->ex.err_tb, strlen(a->ex.err_tb));
    msg *m = bad ? NULL : msg_new(b.data, b.len);
    wire_buf_free(&b);
    return m;
}

static msg *notice_req(actor *a, uint64_t pid, int exit_signal, int request)
{
    return notice_ref(a, pid, exit_signal, request, 0);
}

static msg *notice(actor *a, uint64_t pid, int exit_signal)
{
    return notice_req(a, pid, exit_signal, 0);
}

/* A notice about pid that says only its reason (noproc, shutdown); request
 * marks a shutdown request sent to a trapping actor. */
static msg *simple_notice(uint64_t pid, const char *reason, int exit_signal, int request)
{
    actor tmp;
    memset(&tmp, 0, sizeof tmp);
    exit_set_reason(&tmp, reason, 1);
    msg *m = notice_req(&tmp, pid, exit_signal, request);
    clear_reason(&tmp);
    return m;
}

static void send_or_drop(chan *c, msg *m)
{
    if (m && chan_send(c, m) != 0)
        msg_free(m);
}

/* A monitor's notice is its channel's last message. A demonitor that raced
 * the death closed the channel first, and then the notice is dropped. */
static void send_last_or_drop(chan *c, msg *m)
{
    if (m && chan_send_ex(c, m, 1) != 0)
        msg_free(m);
}

/* ---- lifecycle ---- */

void exit_reset(actor *a, uint64_t pid, uint64_t owner)
{
    cold_lock(a);
    /* the pid is written under the lock: lock_live reads it under the lock */
    a->pid = pid;
    a->ex.owner = owner;
    a->ex.exited = 0;
    a->ex.nlinks = 0;
    linkset_drop_index(a);
    a->ex.nmonitors = 0;
    a->ex.trap = NULL;
    free(a->ex.exit_override);
    a->ex.exit_override = NULL;
    a->ex.exit_override_len = 0;
    char *alias = a->ex.alias;
    a->ex.alias = NULL;
    a->ex.alias_len = 0;
    cold_unlock(a);
    free(alias);
    clear_reason(a);
    a->ex.reason_abnormal = 0;
}

int exit_set_alias(actor *a, const char *alias, size_t len)
{
    char *copy = alias ? dup_bytes(alias, len) : NULL;
    if (alias && !copy)
        return -1;
    cold_lock(a);
    char *old = a->ex.alias;
    a->ex.alias = copy;
    a->ex.alias_len = copy ? len : 0;
    cold_unlock(a);
    free(old);
    return 0;
}

/* A copy of the alias of pid's actor into tmp (none if it has none, is not alive, or memory
 * runs out: the signal then names the pid). */
static void alias_of(smarm_runtime *rt, uint64_t pid, actor *tmp)
{
    actor *a = lock_live(rt, pid);
    if (!a)
        return;
    if (a->ex.alias) {
        tmp->ex.alias = dup_bytes(a->ex.alias, a->ex.alias_len);
        tmp->ex.alias_len = tmp->ex.alias ? a->ex.alias_len : 0;
    }
    cold_unlock(a);
}

static void stop_linked(smarm_runtime *rt, uint64_t peer_pid, actor *dying)
{
    actor *p = lock_live(rt, peer_pid);
    if (!p)
        return;
    if (!p->ex.exit_override && dying->ex.reason) {
        p->ex.exit_override = dup_bytes(dying->ex.reason, dying->ex.reason_len);
        p->ex.exit_override_len = p->ex.exit_override ? dying->ex.reason_len : 0;
    }
    cold_unlock(p);
    sched_stop(rt, peer_pid, STOP_LINKED);
}

void exit_finalize(smarm_runtime *rt, actor *a)
{
    uint64_t pid = a->pid;
    cold_lock(a);
    a->ex.exited = 1;
    uint64_t *links = a->ex.links;
    uint32_t nlinks = a->ex.nlinks;
    monitor_ref *mons = a->ex.monitors;
    uint32_t nmons = a->ex.nmonitors;
    chan *trap = a->ex.trap;
    a->ex.links = NULL;
    a->ex.nlinks = a->ex.caplinks = 0;
    linkset_drop_index(a);
    a->ex.monitors = NULL;
    a->ex.nmonitors = a->ex.capmonitors = 0;
    a->ex.trap = NULL;
    /* the terminal record outlives the tenancy until the slot's next death: it takes the
     * reason's bytes (the notices below still read them as a->ex.reason, which lets go of
     * them at the end instead of freeing them) */
    reason_free(a->ex.terminal);
    a->ex.terminal = a->ex.reason;
    a->ex.terminal_len = a->ex.reason ? a->ex.reason_len : 0;
    a->ex.terminal_gen = pid_gen(pid);
    free(a->ex.exit_override);
    a->ex.exit_override = NULL;
    a->ex.exit_override_len = 0;
    cold_unlock(a);

    for (uint32_t i = 0; i < nlinks; i++) {
        uint64_t peer_pid = links[i];
        actor *p = lock_live(rt, peer_pid);
        if (!p)
            continue;
        /* the link is gone on both sides; a stale entry elsewhere is harmless */
        linkset_remove(p, pid);
        /* an owned child (a supervisor's) dies with its owner even if it traps:
         * nothing of a killed owner runs again to stop it (a drop guard's work, done here) */
        chan *ptrap = p->ex.owner == pid ? NULL : p->ex.trap;
        if (ptrap) {
            /* queued under p's lock (cold -> channel): a trap_exit(false) that
             * takes the lock finds the signal queued or not sent at all, so the
             * receiver it hands back reads closed once drained, never "timeout" */
            if (a->ex.reason_abnormal)
                send_or_drop(ptrap, notice(a, pid, 1));
            cold_unlock(p);
        } else {
            cold_unlock(p);
            if (a->ex.reason_abnormal)
                stop_linked(rt, peer_pid, a);
        }
    }
    free(links);
    /* monitors after links: whoever watches and is linked sees the link's
     * effect (a stop, or an exit signal queued) done by the time the notice comes */
    for (uint32_t i = 0; i < nmons; i++) {
        msg *m = notice_ref(a, pid, 0, 0, mons[i].id);
        if (mons[i].shared)
            send_or_drop(mons[i].c, m);
        else
            send_last_or_drop(mons[i].c, m);
        chan_release(mons[i].c, CHAN_TX);
    }
    free(mons);
    if (trap)
        chan_release(trap, CHAN_TX);
    a->ex.reason = NULL; /* the terminal record's now */
    clear_reason(a);
}

/* ---- links ---- */

static int add_link(actor *a, uint64_t pid) { return linkset_add(a, pid); }

static void remove_link(actor *a, uint64_t pid) { linkset_remove(a, pid); }

int exit_link(smarm_runtime *rt, actor *self, uint64_t pid)
{
    if (pid == self->pid)
        return 0;
    /* the target first, then self: if the target dies in between, its death
     * walks its own list (which has us) and the stale entry here is ignored */
    actor *t = lock_live(rt, pid);
    if (!t)
        return -1;
    int rc = add_link(t, self->pid);
    cold_unlock(t);
    if (rc != 0)
        return -2;
    cold_lock(self);
    rc = add_link(self, pid);
    cold_unlock(self);
    return rc != 0 ? -2 : 0;
}

void exit_unlink(smarm_runtime *rt, actor *self, uint64_t pid)
{
    cold_lock(self);
    remove_link(self, pid);
    cold_unlock(self);
    actor *t = lock_live(rt, pid);
    if (t) {
        remove_link(t, self->pid);
        cold_unlock(t);
    }
}

void exit_noproc(smarm_runtime *rt, actor *self, uint64_t pid)
{
    cold_lock(self);
    chan *trap = self->ex.trap;
    if (trap)
        chan_retain(trap, CHAN_TX);
    if (!trap && !self->ex.exit_override) {
        wire_buf b;
        wire_buf_init(&b);
        if (wire_put_string(&b, "noproc", 6) == 0) {
            self->ex.exit_override = b.data;
            self->ex.exit_override_len = b.len;
        } else {
            wire_buf_free(&b);
        }
    }
    cold_unlock(self);
    if (trap) {
        send_or_drop(trap, simple_notice(pid, "noproc", 1, 0));
        chan_release(trap, CHAN_TX);
    } else {
        sched_stop(rt, self->pid, STOP_LINKED);
    }
}

/* ---- monitors ---- */

/* Drops the monitors of t whose handle is gone (no receiver is left on their channel, e.g.
 * the watcher dropped it and its GC collected it, or the watcher died): nobody can receive
 * their notice. Run when the array is full, so a target watched by monitors that are
 * created and dropped keeps about twice its live ones. Cold lock held; the channels have no
 * receiver, so releasing them takes no other lock than their own. */
static void prune_monitors(actor *t)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->ex.nmonitors; i++) {
        monitor_ref m = t->ex.monitors[i];
        if (chan_has_receiver(m.c))
            t->ex.monitors[n++] = m;
        else
            chan_release(m.c, CHAN_TX);
    }
    t->ex.nmonitors = n;
}

static uint64_t add_monitor(smarm_runtime *rt, uint64_t pid, chan *c, int shared);

uint64_t exit_monitor(smarm_runtime *rt, uint64_t pid, chan *c)
{
    return add_monitor(rt, pid, c, 0);
}

uint64_t exit_monitor_shared(smarm_runtime *rt, uint64_t pid, chan *c)
{
    return add_monitor(rt, pid, c, 1);
}

static uint64_t add_monitor(smarm_runtime *rt, uint64_t pid, chan *c, int shared)
{
    uint64_t id = atomic_fetch_add_explicit(&rt->next_monitor, 1, memory_order_relaxed) + 1;
    actor *t = lock_live(rt, pid);
    if (t) {
        if (t->ex.nmonitors == t->ex.capmonitors)
            prune_monitors(t);
        if (t->ex.nmonitors == t->ex.capmonitors) {
            uint32_t cap = t->ex.capmonitors ? t->ex.capmonitors * 2 : 4;
            monitor_ref *m = realloc(t->ex.monitors, cap * sizeof *m);
            if (!m) {
                cold_unlock(t);
                chan_release(c, CHAN_TX);
                return 0;
            }
            t->ex.monitors = m;
            t->ex.capmonitors = cap;
        }
        t->ex.monitors[t->ex.nmonitors++] = (monitor_ref){id, c, shared};
        cold_unlock(t);
        return id;
    }
    actor tmp;
    memset(&tmp, 0, sizeof tmp);
    exit_set_reason(&tmp, "noproc", 1);
    msg *m = notice_ref(&tmp, pid, 0, 0, id);
    if (shared)
        send_or_drop(c, m);
    else
        send_last_or_drop(c, m);
    clear_reason(&tmp);
    chan_release(c, CHAN_TX);
    return id;
}

int exit_demonitor(smarm_runtime *rt, uint64_t pid, uint64_t id)
{
    actor *t = lock_live(rt, pid);
    if (!t)
        return 0;
    chan *c = NULL;
    for (uint32_t i = 0; i < t->ex.nmonitors; i++) {
        if (t->ex.monitors[i].id == id) {
            c = t->ex.monitors[i].c;
            t->ex.monitors[i] = t->ex.monitors[--t->ex.nmonitors];
            break;
        }
    }
    cold_unlock(t);
    if (!c)
        return 0;
    chan_release(c, CHAN_TX);
    return 1;
}

/* ---- trap_exit, shutdown, terminal reasons ---- */

void exit_set_trap(actor *a, chan *c)
{
    cold_lock(a);
    chan *old = a->ex.trap;
    a->ex.trap = c;
    cold_unlock(a);
    if (old)
        chan_release(old, CHAN_TX);
}

void exit_shutdown(smarm_runtime *rt, uint64_t from, uint64_t pid)
{
    actor *t = lock_live(rt, pid);
    if (!t)
        return;
    chan *trap = t->ex.trap;
    if (!trap) {
        cold_unlock(t);
        sched_stop(rt, pid, STOP_SHUTDOWN);
        return;
    }
    /* a trapping target hears about it and decides; queued under its lock, as
     * exit signals of links are (see exit_finalize) */
    send_or_drop(trap, simple_notice(from, "shutdown", 1, 1));
    cold_unlock(t);
}

int exit_signal(smarm_runtime *rt, uint64_t from, uint64_t pid, const char *reason, size_t len,
                enum exit_kind kind)
{
    /* the sender's alias, read before the target's lock: one cold lock at a time */
    actor tmp;
    memset(&tmp, 0, sizeof tmp);
    if (kind != EXIT_KILL && from != pid)
        alias_of(rt, from, &tmp);
    actor *t = lock_live(rt, pid);
    if (!t) {
        free(tmp.ex.alias);
        return -1;
    }
    if (kind == EXIT_KILL) {
        cold_unlock(t);
        sched_stop(rt, pid, STOP_KILL);
        return 0;
    }
    chan *trap = t->ex.trap;
    if (trap) {
        /* trap_exit is read under the target's lock, so a signal racing it is either a
         * message (trapping) or a stop (not), never both nor neither */
        char *copy = dup_bytes(reason, len);
        exit_set_reason_bytes(&tmp, copy, copy ? len : 0, 1);
        send_or_drop(trap, notice_req(&tmp, from, 1, 0));
        clear_reason(&tmp);
        cold_unlock(t);
        free(tmp.ex.alias);
        return 0;
    }
    free(tmp.ex.alias);
    if (kind == EXIT_NORMAL) {
        cold_unlock(t);
        return 0;
    }
    if (!t->ex.exit_override) {
        t->ex.exit_override = dup_bytes(reason, len);
        t->ex.exit_override_len = t->ex.exit_override ? len : 0;
    }
    cold_unlock(t);
    sched_stop(rt, pid, STOP_LINKED);
    return 0;
}

int exit_terminal(smarm_runtime *rt, uint64_t pid, char **bytes, size_t *len)
{
    actor *a = sched_actor(rt, pid);
    if (!a)
        return -1;
    int rc = -1;
    cold_lock(a);
    int alive = a->pid == pid && !a->ex.exited;
    if (!alive && a->ex.terminal && a->ex.terminal_gen == pid_gen(pid)) {
        *bytes = dup_bytes(a->ex.terminal, a->ex.terminal_len);
        *len = a->ex.terminal_len;
        rc = *bytes ? 0 : -1;
    }
    cold_unlock(a);
    return rc;
}

void exit_retire_unborn(actor *a)
{
    cold_lock(a);
    a->ex.exited = 1;
    cold_unlock(a);
}

void exit_free_records(smarm_runtime *rt)
{
    uint32_t hwm = rt->slots.hwm;
    for (uint32_t i = 0; i < hwm; i++) {
        actor *a = &rt->actors[i];
        reason_free(a->ex.terminal);
        free(a->ex.exit_override);
        free(a->ex.links);
        linkset_drop_index(a);
        free(a->ex.monitors);
        free(a->ex.alias);
        a->ex.alias = NULL;
        a->ex.terminal = a->ex.exit_override = NULL;
        a->ex.links = NULL;
        a->ex.monitors = NULL;
        clear_reason(a);
    }
}

int exit_link_child(smarm_runtime *rt, actor *parent, actor *child)
{
    if (!parent)
        return -1;
    cold_lock(child);
    int rc = add_link(child, parent->pid);
    cold_unlock(child);
    if (rc != 0)
        return -1;
    cold_lock(parent);
    rc = add_link(parent, child->pid);
    cold_unlock(parent);
    return rc;
}
