/* Per-actor inbox: a spinlocked shared list drained in batches into an owner-private list. */
#include "base/mailbox.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/blocks.h"
#include "base/spin.h"
#include "base/wire.h"

static _Atomic int injected_failures;

void msg_inject_failures(int n)
{
    atomic_store_explicit(&injected_failures, n, memory_order_relaxed);
}

/* Whether this allocation is one a test asked to fail. */
static inline int injected_failure(void)
{
    if (__builtin_expect(atomic_load_explicit(&injected_failures, memory_order_relaxed) <= 0, 1))
        return 0;
    return atomic_fetch_sub_explicit(&injected_failures, 1, memory_order_relaxed) > 0;
}

/* Messages of up to BLOCK_LARGE bytes, header included (most are: a flat {hop = k} takes 8
 * bytes), are the thread's small blocks (base/blocks.h): malloc and free were a sixth of a
 * flat message's cost. */
static inline size_t msg_bytes(size_t len, size_t extralen) { return sizeof(msg) + len + extralen; }

/* Inlined in both makers: msg_new (every send) folds the extra part away. */
static inline msg *msg_make(const void *data, size_t len, const void *extra, size_t extralen)
{
    if (injected_failure())
        return NULL;
    size_t n = msg_bytes(len, extralen);
    msg *m = n <= BLOCK_LARGE ? blocks_get(n) : malloc(n);
    if (!m)
        return NULL;
    m->next = NULL;
    m->len = (uint32_t)len;
    m->extra = (uint32_t)extralen;
    m->cache = 0;
    m->flat = 0;
    memcpy(m->data, data, len);
    if (extralen)
        memcpy(m->data + len, extra, extralen);
    return m;
}

msg *msg_new_extra(const void *data, size_t len, const void *extra, size_t extralen)
{
    return msg_make(data, len, extra, extralen);
}

msg *msg_new(const void *data, size_t len) { return msg_make(data, len, NULL, 0); }

void msg_free(msg *m)
{
    /* undelivered messages still hold the channel references they carry (unless decoded:
     * then the receiver's value holds them) */
    if (!m->cache)
        wire_release(m->data, m->len);
    size_t n = msg_bytes(m->len, m->extra);
    if (n <= BLOCK_LARGE)
        blocks_put(m, n);
    else
        free(m);
}

static void mb_lock(mailbox *mb) { spin_lock(&mb->lock); }

static void mb_unlock(mailbox *mb) { spin_unlock(&mb->lock); }

/* Adds one to a count only one thread writes at a time (pushed under the lock, popped by the
 * owner): a plain increment, where an add that others could race needed a locked one. */
static inline void count_one(_Atomic uint32_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

void mailbox_open(mailbox *mb, uint32_t gen)
{
    mb_lock(mb);
    mb->gen = gen;
    __atomic_store_n(&mb->head, NULL, __ATOMIC_RELAXED);
    mb->tail = NULL;
    mb->priv = mb->priv_tail = NULL;
    atomic_store_explicit(&mb->popped, 0, memory_order_relaxed);
    atomic_store_explicit(&mb->pushed, 0, memory_order_relaxed);
    mb->scan_at = mb->scan_before = mb->mark = NULL;
    mb->scan_can_take = 0;
    mb->mark_id = 0;
    mb_unlock(mb);
}

int mailbox_push(mailbox *mb, uint32_t gen, msg *m)
{
    m->next = NULL;
    mb_lock(mb);
    if (mb->gen != gen || gen == 0) {
        mb_unlock(mb);
        return -1;
    }
    if (mb->tail)
        mb->tail->next = m;
    else
        __atomic_store_n(&mb->head, m,
                         __ATOMIC_RELAXED); /* pairs with the owner's lock-free peek */
    mb->tail = m;
    count_one(&mb->pushed);
    mb_unlock(mb);
    return 0;
}

static void mb_refill(mailbox *mb)
{
    /* a relaxed peek saves the lock when nothing was sent */
    if (!__atomic_load_n(&mb->head, __ATOMIC_RELAXED))
        return;
    mb_lock(mb);
    msg *h = mb->head, *t = mb->tail;
    __atomic_store_n(&mb->head, NULL, __ATOMIC_RELAXED);
    mb->tail = NULL;
    mb_unlock(mb);
    if (!h)
        return;
    if (mb->priv_tail)
        mb->priv_tail->next = h;
    else
        mb->priv = h;
    mb->priv_tail = t;
}

msg *mailbox_pop(mailbox *mb)
{
    if (!mb->priv)
        mb_refill(mb);
    msg *m = mb->priv;
    if (!m)
        return NULL;
    mb->priv = m->next;
    if (!mb->priv)
        mb->priv_tail = NULL;
    /* the mark's message gone from the head: everything left came after the mark */
    if (mb->mark == m)
        mb->mark = NULL;
    mb->epoch++;
    count_one(&mb->popped);
    return m;
}

uint32_t mailbox_mark(mailbox *mb)
{
    mb_refill(mb);
    mb->mark = mb->priv_tail;
    if (++mb->mark_id == 0)
        mb->mark_id = 1;
    return mb->mark_id;
}

void mailbox_scan_begin(mailbox *mb, uint32_t mark)
{
    mb->scan_at = mark && mark == mb->mark_id ? mb->mark : NULL;
    mb->scan_before = NULL;
    mb->scan_can_take = 0;
    mb->scan_epoch = mb->epoch;
}

int mailbox_scan_stale(mailbox *mb) { return mb->scan_epoch != mb->epoch; }

/* The message after the scan's position, refilling from the shared list at the end. */
static msg *scan_ahead(mailbox *mb)
{
    msg *c = mb->scan_at ? mb->scan_at->next : mb->priv;
    if (!c) {
        mb_refill(mb);
        c = mb->scan_at ? mb->scan_at->next : mb->priv;
    }
    return c;
}

msg *mailbox_scan_next(mailbox *mb)
{
    msg *c = scan_ahead(mb);
    if (!c)
        return NULL;
    mb->scan_before = mb->scan_at;
    mb->scan_at = c;
    mb->scan_can_take = 1;
    return c;
}

int mailbox_scan_ready(mailbox *mb) { return scan_ahead(mb) != NULL; }

msg *mailbox_scan_take(mailbox *mb)
{
    if (!mb->scan_can_take)
        return NULL;
    msg *m = mb->scan_at, *before = mb->scan_before;
    if (before)
        before->next = m->next;
    else
        mb->priv = m->next;
    if (mb->priv_tail == m)
        mb->priv_tail = before;
    /* a mark on the taken message moves back to the one before (NULL: from the head) */
    if (mb->mark == m)
        mb->mark = before;
    m->next = NULL;
    mb->scan_at = before;
    mb->scan_can_take = 0;
    mb->scan_epoch = ++mb->epoch;
    count_one(&mb->popped);
    return m;
}

int mailbox_nonempty(mailbox *mb)
{
    if (!mb->priv)
        mb_refill(mb);
    return mb->priv != NULL;
}

void mailbox_close(mailbox *mb)
{
    mb_lock(mb);
    mb->gen = 0;
    /* nothing stays queued: every message the generation let in counts as taken (no push
     * comes after this, under the lock with gen 0) */
    atomic_store_explicit(&mb->popped, atomic_load_explicit(&mb->pushed, memory_order_relaxed),
                          memory_order_relaxed);
    msg *h = mb->head;
    __atomic_store_n(&mb->head, NULL, __ATOMIC_RELAXED);
    mb->tail = NULL;
    mb_unlock(mb);
    msg *lists[2] = {mb->priv, h};
    mb->priv = mb->priv_tail = NULL;
    mb->scan_at = mb->scan_before = mb->mark = NULL;
    mb->scan_can_take = 0;
    mb->mark_id = 0;
    mb->epoch++;
    for (int i = 0; i < 2; i++) {
        for (msg *m = lists[i]; m;) {
            msg *next = m->next;
            msg_free(m);
            m = next;
        }
    }
}
