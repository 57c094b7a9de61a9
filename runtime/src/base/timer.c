/* Timers: a binary min-heap of (deadline, pid, id) entries, beside a run of entries armed
 * in deadline order (each no earlier than the run's last): the earliest entry is the
 * earlier of the two heads. In tests/bench/timers.lua, 100,000 actors that each sleep 10 ms
 * arm in deadline order, and popping them from a heap of tens of thousands was a sift
 * through 15 levels of cold lines per timer. A wake that finds its actor
 * no longer waiting is harmless: every wait re-checks its own condition. A send timer's
 * message sits in an id map until it fires or is cancelled, whichever takes it first;
 * a cancelled send's heap entry is skipped when it falls due, or dropped earlier when
 * cancelled entries make up half the heap (one O(n) rebuild per n/2 cancels), so a
 * pattern of long timers cancelled early (gen_statem timeouts) keeps the heap small. */
#include "base/timer.h"

#include <sched.h>
#include <stdlib.h>

#include "base/mailbox.h"
#include "base/spin.h"

static void t_lock(timers *t) { spin_lock(&t->lock); }

static void t_unlock(timers *t) { spin_unlock(&t->lock); }

void timers_init(timers *t)
{
    atomic_store(&t->lock, 0);
    t->heap = NULL;
    t->len = t->cap = 0;
    t->run = NULL;
    t->rhead = t->rlen = t->rcap = 0;
    t->keys = NULL;
    t->vals = NULL;
    t->dls = NULL;
    t->mcap = t->mlen = 0;
    t->next_id = 1;
    t->cancelled = 0;
    atomic_store(&t->earliest, UINT64_MAX);
}

void timers_destroy(timers *t)
{
    for (uint32_t i = 0; i < t->mcap; i++)
        if (t->keys[i])
            msg_free(t->vals[i]);
    free(t->keys);
    free(t->vals);
    free(t->dls);
    free(t->heap);
    free(t->run);
    t->heap = NULL;
    t->run = NULL;
    t->rhead = t->rlen = t->rcap = 0;
    t->keys = NULL;
    t->vals = NULL;
    t->dls = NULL;
    t->len = t->cap = t->mcap = t->mlen = 0;
}

/* ---- the id map (linear probing, deletion by backward shift: no tombstones) ---- */

static uint32_t slot_for(const timers *t, uint64_t id)
{
    return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (t->mcap - 1);
}

static void map_put(timers *t, uint64_t id, void *m, uint64_t deadline)
{
    uint32_t i = slot_for(t, id);
    while (t->keys[i])
        i = (i + 1) & (t->mcap - 1);
    t->keys[i] = id;
    t->vals[i] = m;
    t->dls[i] = deadline;
    t->mlen++;
}

/* Room for one more at a load of at most 1/2. */
static int map_reserve(timers *t)
{
    if ((t->mlen + 1) * 2 <= t->mcap)
        return 0;
    uint32_t ocap = t->mcap, ncap = ocap ? ocap * 2 : 64;
    uint64_t *ok = t->keys;
    void **ov = t->vals;
    uint64_t *od = t->dls;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    void **nv = malloc(ncap * sizeof *nv);
    uint64_t *nd = malloc(ncap * sizeof *nd);
    if (!nk || !nv || !nd) {
        free(nk);
        free(nv);
        free(nd);
        return -1;
    }
    t->keys = nk;
    t->vals = nv;
    t->dls = nd;
    t->mcap = ncap;
    t->mlen = 0;
    for (uint32_t i = 0; i < ocap; i++)
        if (ok[i])
            map_put(t, ok[i], ov[i], od[i]);
    free(ok);
    free(ov);
    free(od);
    return 0;
}

static void *map_take(timers *t, uint64_t id)
{
    if (!t->mcap)
        return NULL;
    uint32_t mask = t->mcap - 1, i = slot_for(t, id);
    while (t->keys[i] != id) {
        if (!t->keys[i])
            return NULL;
        i = (i + 1) & mask;
    }
    void *m = t->vals[i];
    t->mlen--;
    /* shift back the entries of the run after i that may not stay behind the hole */
    for (uint32_t j = (i + 1) & mask; t->keys[j]; j = (j + 1) & mask) {
        uint32_t home = slot_for(t, t->keys[j]);
        /* j's home lies cyclically in (i, j]: it stays */
        if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
            continue;
        t->keys[i] = t->keys[j];
        t->vals[i] = t->vals[j];
        t->dls[i] = t->dls[j];
        i = j;
    }
    t->keys[i] = 0;
    return m;
}

/* The run's oldest entry (rlen > 0). */
static timer_entry *run_head(timers *t) { return &t->run[t->rhead]; }

/* The earliest armed deadline; lock held. */
static uint64_t earliest_of(timers *t)
{
    uint64_t h = t->len ? t->heap[0].deadline : UINT64_MAX;
    uint64_t r = t->rlen ? run_head(t)->deadline : UINT64_MAX;
    return h < r ? h : r;
}

static void publish_earliest(timers *t)
{
    atomic_store_explicit(&t->earliest, earliest_of(t), memory_order_relaxed);
}

/* Whether an entry due at deadline joins the run (else the heap). */
static int joins_run(const timers *t, uint64_t deadline)
{
    return t->rlen == 0 || deadline >= t->run[(t->rhead + t->rlen - 1) & (t->rcap - 1)].deadline;
}

/* Room for one more entry in the run. */
static int run_reserve(timers *t)
{
    if (t->rlen < t->rcap)
        return 0;
    uint32_t cap = t->rcap ? t->rcap * 2 : 64;
    timer_entry *r = malloc(cap * sizeof *r);
    if (!r)
        return -1;
    for (uint32_t i = 0; i < t->rlen; i++)
        r[i] = t->run[(t->rhead + i) & (t->rcap - 1)];
    free(t->run);
    t->run = r;
    t->rhead = 0;
    t->rcap = cap;
    return 0;
}

static int heap_reserve(timers *t)
{
    if (t->len < t->cap)
        return 0;
    uint32_t cap = t->cap ? t->cap * 2 : 64;
    timer_entry *h = realloc(t->heap, cap * sizeof *h);
    if (!h)
        return -1;
    t->heap = h;
    t->cap = cap;
    return 0;
}

/* Lock held, room reserved. */
static void heap_push(timers *t, uint64_t deadline, uint64_t pid, uint64_t id)
{
    uint32_t i = t->len++;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (t->heap[p].deadline <= deadline)
            break;
        t->heap[i] = t->heap[p];
        i = p;
    }
    t->heap[i] = (timer_entry){deadline, pid, id, NULL};
}

/* Arms an entry in the run or the heap: 1 if it is the earliest now (a tie is not), 0, or -1
 * when there was no room for it. Lock held. */
static int place(timers *t, uint64_t deadline, uint64_t pid, uint64_t id)
{
    uint64_t before = earliest_of(t);
    if (joins_run(t, deadline)) {
        if (run_reserve(t))
            return -1;
        t->run[(t->rhead + t->rlen++) & (t->rcap - 1)] = (timer_entry){deadline, pid, id, NULL};
    } else {
        if (heap_reserve(t))
            return -1;
        heap_push(t, deadline, pid, id);
    }
    if (deadline >= before)
        return 0;
    atomic_store_explicit(&t->earliest, deadline, memory_order_relaxed);
    return 1;
}

int timers_arm(timers *t, uint64_t deadline, uint64_t pid)
{
    t_lock(t);
    int r = place(t, deadline, pid, 0);
    t_unlock(t);
    return r;
}

static int map_has(const timers *t, uint64_t id);

int timers_arm_send(timers *t, uint64_t deadline, uint64_t dest, void *msg, uint64_t *id)
{
    t_lock(t);
    if (map_reserve(t)) {
        t_unlock(t);
        return -1;
    }
    /* ids wrap below TIMER_ID_LIMIT, skipping any still armed */
    do {
        *id = t->next_id;
        t->next_id = t->next_id >= TIMER_ID_LIMIT ? 1 : t->next_id + 1;
    } while (map_has(t, *id));
    /* the entry first: the id map has room reserved, so past it nothing can fail */
    int r = place(t, deadline, dest, *id);
    if (r >= 0)
        map_put(t, *id, msg, deadline);
    t_unlock(t);
    return r;
}

static int map_has(const timers *t, uint64_t id)
{
    if (!t->mcap)
        return 0;
    for (uint32_t i = slot_for(t, id); t->keys[i]; i = (i + 1) & (t->mcap - 1))
        if (t->keys[i] == id)
            return 1;
    return 0;
}

/* Puts x at i or below, the heap under i being ordered; lock held. */
static void sift_down_from(timers *t, uint32_t i, timer_entry x)
{
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= t->len)
            break;
        if (c + 1 < t->len && t->heap[c + 1].deadline < t->heap[c].deadline)
            c++;
        if (x.deadline <= t->heap[c].deadline)
            break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    t->heap[i] = x;
}

static void sift_down(timers *t) { sift_down_from(t, 0, t->heap[t->len]); }

/* Drops the entries of cancelled sends, re-heapifies, and keeps the run's order; lock held. */
static void compact(timers *t)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->len; i++)
        if (!t->heap[i].id || map_has(t, t->heap[i].id))
            t->heap[n++] = t->heap[i];
    t->len = n;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < t->rlen; i++) {
        timer_entry e = t->run[(t->rhead + i) & (t->rcap - 1)];
        if (!e.id || map_has(t, e.id))
            t->run[(t->rhead + kept++) & (t->rcap - 1)] = e;
    }
    t->rlen = kept;
    t->cancelled = 0;
    for (uint32_t i = n / 2; i-- > 0;)
        sift_down_from(t, i, t->heap[i]);
    publish_earliest(t);
}

void *timers_cancel(timers *t, uint64_t id)
{
    t_lock(t);
    void *m = map_take(t, id);
    if (m && ++t->cancelled > 64 && t->cancelled * 2 > t->len + t->rlen)
        compact(t);
    t_unlock(t);
    return m;
}

uint64_t timers_deadline(timers *t, uint64_t id)
{
    uint64_t d = 0;
    t_lock(t);
    if (t->mcap)
        for (uint32_t i = slot_for(t, id); t->keys[i]; i = (i + 1) & (t->mcap - 1))
            if (t->keys[i] == id) {
                d = t->dls[i];
                break;
            }
    t_unlock(t);
    return d;
}

uint32_t timers_pending(timers *t)
{
    t_lock(t);
    uint32_t n = t->len + t->rlen;
    t_unlock(t);
    return n;
}

uint32_t timers_due(timers *t, uint64_t now, timer_entry *out, uint32_t max)
{
    if (timers_earliest(t) > now)
        return 0;
    uint32_t n = 0;
    t_lock(t);
    while (n < max) {
        /* the earlier of the two heads (the run's on a tie) */
        timer_entry e;
        int from_run = t->rlen && (!t->len || run_head(t)->deadline <= t->heap[0].deadline);
        if (from_run) {
            if (run_head(t)->deadline > now)
                break;
            e = *run_head(t);
            t->rhead = (t->rhead + 1) & (t->rcap - 1);
            t->rlen--;
        } else {
            if (!t->len || t->heap[0].deadline > now)
                break;
            e = t->heap[0];
            t->len--;
            if (t->len)
                sift_down(t);
        }
        /* a send fires only if no cancel took its message first */
        if (e.id && !(e.msg = map_take(t, e.id))) {
            t->cancelled--;
            continue;
        }
        out[n++] = e;
    }
    publish_earliest(t);
    t_unlock(t);
    return n;
}
