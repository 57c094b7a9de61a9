/* Channels: a spinlocked FIFO of messages plus tx/rx reference counts; the counts decide
 * closing (no tx left: closed for the receiver; no rx left: closed for senders) and freeing. */
#include "core/chan.h"

#include <sched.h>
#include <stdlib.h>

#include "base/blocks.h"
#include "base/spin.h"
#include "core/runtime.h"
#include "core/scheduler.h"

struct chan {
    _Atomic uint32_t lock;
    uint32_t ntx, nrx;           /* references: endpoint objects and encodings in flight */
    int closed;                  /* tx:close() was called */
    uint64_t owner;              /* the receiving actor, 0 while rx travels */
    uint64_t mon_target, mon_id; /* a monitor's channel: whom it watches (exit.c) */
    msg *head, *tail;
    smarm_runtime *rt;
};

_Static_assert(sizeof(struct chan) <= BLOCK_LARGE, "a channel is one of a thread's small blocks");

/* Everything below is under the lock, so the counts need no ordering argument of their
 * own: acquire/release on the lock orders them with the queue. */
static void c_lock(chan *c) { spin_lock(&c->lock); }

static void c_unlock(chan *c) { spin_unlock(&c->lock); }

chan *chan_new(smarm_runtime *rt, uint64_t owner)
{
    /* one of the thread's small blocks: a gen_server call makes a channel */
    chan *c = blocks_get(sizeof *c);
    if (!c)
        return NULL;
    *c = (chan){.ntx = 1, .nrx = 1, .owner = owner, .rt = rt};
    return c;
}

void chan_retain(chan *c, enum chan_kind kind)
{
    c_lock(c);
    if (kind == CHAN_TX)
        c->ntx++;
    else
        c->nrx++;
    c_unlock(c);
}

static void free_list(msg *m)
{
    while (m) {
        msg *next = m->next;
        msg_free(m); /* releases the references the message carries */
        m = next;
    }
}

void chan_release(chan *c, enum chan_kind kind)
{
    uint64_t wake = 0;
    msg *dropped = NULL;
    smarm_runtime *rt = c->rt;
    c_lock(c);
    if (kind == CHAN_TX) {
        if (--c->ntx == 0 && !c->closed)
            wake = c->owner; /* closed for the receiver now */
    } else if (--c->nrx == 0) {
        /* nobody can receive any more: what is queued goes (breaking cycles through
         * messages that carry this channel's own endpoints), and a close or the last tx's
         * release has nobody to wake */
        dropped = c->head;
        c->head = c->tail = NULL;
        c->owner = 0;
    }
    int gone = c->ntx == 0 && c->nrx == 0;
    c_unlock(c);
    if (wake)
        sched_wake(rt, wake);
    /* a dropped message may hold references to c, so c outlives this when they exist;
     * `gone` implies no message holds any (each would be counted) */
    free_list(dropped);
    if (gone)
        blocks_put(c, sizeof *c);
}

int chan_send(chan *c, msg *m) { return chan_send_ex(c, m, 0); }

int chan_send_ex(chan *c, msg *m, int last)
{
    m->next = NULL;
    c_lock(c);
    if (c->closed || c->nrx == 0) {
        c_unlock(c);
        return -1;
    }
    if (c->tail)
        c->tail->next = m;
    else
        c->head = m;
    c->tail = m;
    /* the last message: closed in the same step, so a reader that got it sees the end */
    if (last)
        c->closed = 1;
    uint64_t owner = c->owner;
    smarm_runtime *rt = c->rt;
    c_unlock(c);
    /* the sender holds a tx reference, so c is alive; the wake is outside the lock */
    if (owner)
        sched_wake(rt, owner);
    return 0;
}

msg *chan_pop(chan *c, int *closed)
{
    c_lock(c);
    msg *m = c->head;
    if (m) {
        c->head = m->next;
        if (!c->head)
            c->tail = NULL;
        *closed = 0;
    } else {
        *closed = c->closed || c->ntx == 0;
    }
    c_unlock(c);
    return m;
}

void chan_close(chan *c)
{
    c_lock(c);
    uint64_t owner = c->closed ? 0 : c->owner;
    c->closed = 1;
    smarm_runtime *rt = c->rt;
    c_unlock(c);
    if (owner)
        sched_wake(rt, owner);
}

void chan_set_monitor(chan *c, uint64_t target, uint64_t id)
{
    c_lock(c);
    c->mon_target = target;
    c->mon_id = id;
    c_unlock(c);
}

int chan_get_monitor(chan *c, uint64_t *target, uint64_t *id)
{
    c_lock(c);
    *target = c->mon_target;
    *id = c->mon_id;
    c_unlock(c);
    return *id != 0;
}

int chan_has_receiver(chan *c)
{
    c_lock(c);
    int r = c->nrx > 0;
    c_unlock(c);
    return r;
}

void chan_drain(chan *c)
{
    c_lock(c);
    msg *m = c->head;
    c->head = c->tail = NULL;
    c_unlock(c);
    while (m) {
        msg *next = m->next;
        msg_free(m);
        m = next;
    }
}

void chan_set_owner(chan *c, uint64_t pid)
{
    c_lock(c);
    c->owner = pid;
    c_unlock(c);
}
