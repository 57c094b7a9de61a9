/* Supervisor bookkeeping behind lua/smarm/supervisor.lua: the child table in
 * start order, restart decisions and the O(1) restart-intensity ring. */
#include "core/supervisor.h"

#include <stdlib.h>
#include <string.h>

typedef struct sup_child {
    int32_t key;
    int32_t restart;
    int32_t is_sup;
    double shutdown;
    uint64_t pid; /* 0 while not running */
} sup_child;

struct smarm_sup {
    int32_t strategy;
    int32_t intensity;
    double period;
    int32_t next_key;
    sup_child *kids; /* in start order */
    int32_t nkids, capkids;
    int32_t active, sups; /* running children, supervisor children: count_children in O(1) */
    /* The times of the last min(restarts, intensity) restarts, oldest at head.
     * Grown on demand up to intensity entries, so a huge intensity costs only
     * what is used. */
    double *ring;
    int32_t rcap, rlen, rhead;
};

smarm_sup *smarm_ffi_sup_new(int32_t strategy, int32_t intensity, double period)
{
    smarm_sup *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->strategy = strategy;
    s->intensity = intensity < 0 ? 0 : intensity;
    s->period = period;
    s->next_key = 1;
    return s;
}

void smarm_ffi_sup_free(smarm_sup *s)
{
    if (!s)
        return;
    free(s->kids);
    free(s->ring);
    free(s);
}

static int32_t find_key(const smarm_sup *s, int32_t key)
{
    for (int32_t i = 0; i < s->nkids; i++)
        if (s->kids[i].key == key)
            return i;
    return -1;
}

/* Children are few and exits rare next to the work of a restart (a spawn), so a
 * linear scan is cheaper than keeping an index in step with deletions. */
static int32_t find_pid(const smarm_sup *s, uint64_t pid)
{
    if (!pid)
        return -1;
    for (int32_t i = 0; i < s->nkids; i++)
        if (s->kids[i].pid == pid)
            return i;
    return -1;
}

int32_t smarm_ffi_sup_add_child(smarm_sup *s, int32_t restart, double shutdown, int32_t is_sup)
{
    if (s->nkids == s->capkids) {
        int32_t cap = s->capkids ? s->capkids * 2 : 8;
        sup_child *k = realloc(s->kids, (size_t)cap * sizeof *k);
        if (!k)
            return -1;
        s->kids = k;
        s->capkids = cap;
    }
    sup_child *c = &s->kids[s->nkids++];
    c->key = s->next_key++;
    c->restart = restart;
    c->is_sup = is_sup != 0;
    c->shutdown = shutdown;
    c->pid = 0;
    s->sups += c->is_sup;
    return c->key;
}

/* Sets child i's pid, keeping the count of running children. */
static void set_pid_at(smarm_sup *s, int32_t i, uint64_t pid)
{
    s->active += (pid != 0) - (s->kids[i].pid != 0);
    s->kids[i].pid = pid;
}

static void remove_at(smarm_sup *s, int32_t i)
{
    set_pid_at(s, i, 0);
    s->sups -= s->kids[i].is_sup;
    memmove(&s->kids[i], &s->kids[i + 1], (size_t)(s->nkids - i - 1) * sizeof *s->kids);
    s->nkids--;
}

int32_t smarm_ffi_sup_delete_child(smarm_sup *s, int32_t key)
{
    int32_t i = find_key(s, key);
    if (i < 0)
        return -1;
    if (s->kids[i].pid)
        return -2;
    remove_at(s, i);
    return 0;
}

int32_t smarm_ffi_sup_set_pid(smarm_sup *s, int32_t key, uint64_t pid)
{
    int32_t i = find_key(s, key);
    if (i < 0)
        return -1;
    set_pid_at(s, i, pid);
    return 0;
}

int32_t smarm_ffi_sup_key_of(smarm_sup *s, uint64_t pid)
{
    int32_t i = find_pid(s, pid);
    return i < 0 ? 0 : s->kids[i].key;
}

uint64_t smarm_ffi_sup_pid(smarm_sup *s, int32_t key)
{
    int32_t i = find_key(s, key);
    return i < 0 ? 0 : s->kids[i].pid;
}

int32_t smarm_ffi_sup_restart_type(smarm_sup *s, int32_t key)
{
    int32_t i = find_key(s, key);
    return i < 0 ? -1 : s->kids[i].restart;
}

double smarm_ffi_sup_shutdown(smarm_sup *s, int32_t key)
{
    int32_t i = find_key(s, key);
    return i < 0 ? -1 : s->kids[i].shutdown;
}

int32_t smarm_ffi_sup_is_sup(smarm_sup *s, int32_t key)
{
    int32_t i = find_key(s, key);
    return i < 0 ? -1 : s->kids[i].is_sup;
}

int32_t smarm_ffi_sup_child_exited(smarm_sup *s, uint64_t pid, int32_t abnormal, int32_t *out,
                                   int32_t max)
{
    int32_t i = find_pid(s, pid);
    if (i < 0)
        return -1;
    sup_child *c = &s->kids[i];
    set_pid_at(s, i, 0);
    int restart =
        c->restart == SMARM_SUP_PERMANENT || (c->restart == SMARM_SUP_TRANSIENT && abnormal);
    if (c->restart == SMARM_SUP_TEMPORARY) {
        remove_at(s, i);
        return 0;
    }
    if (!restart)
        return 0;
    int32_t from = s->strategy == SMARM_SUP_ONE_FOR_ALL ? 0 : i;
    int32_t to = s->strategy == SMARM_SUP_ONE_FOR_ONE ? i + 1 : s->nkids;
    int32_t n = 0;
    for (int32_t j = from; j < to && n < max; j++)
        out[n++] = s->kids[j].key;
    return n;
}

/* OTP keeps every restart of the last period in a list and walks it on each
 * restart. Only one entry decides, though: the cap trips when the intensity-th
 * most recent earlier restart lies within the period (with it, this restart
 * makes intensity+1). Times are monotonic, so a ring of the last intensity
 * restart times has that entry at its head once full. Boundary as OTP's:
 * now - then <= period counts as within. */
int32_t smarm_ffi_sup_restart_allowed(smarm_sup *s, double now)
{
    if (s->intensity == 0)
        return 0;
    if (s->rlen == s->intensity) {
        if (now - s->ring[s->rhead] <= s->period)
            return 0;
        s->ring[s->rhead] = now; /* the oldest makes way */
        s->rhead = (s->rhead + 1) % s->rcap;
        return 1;
    }
    if (s->rlen == s->rcap) { /* grow, keeping the order oldest-first from 0 */
        int32_t cap = s->rcap ? s->rcap * 2 : 4;
        if (cap > s->intensity)
            cap = s->intensity;
        double *r = malloc((size_t)cap * sizeof *r);
        if (!r)
            return 0; /* cannot account for it: refuse, as a tripped cap */
        for (int32_t j = 0; j < s->rlen; j++)
            r[j] = s->ring[(s->rhead + j) % s->rcap];
        free(s->ring);
        s->ring = r;
        s->rcap = cap;
        s->rhead = 0;
    }
    s->ring[(s->rhead + s->rlen) % s->rcap] = now;
    s->rlen++;
    return 1;
}

int32_t smarm_ffi_sup_children(smarm_sup *s, int32_t *out, int32_t max, int32_t reverse)
{
    for (int32_t j = 0; j < s->nkids && j < max; j++)
        out[j] = s->kids[reverse ? s->nkids - 1 - j : j].key;
    return s->nkids;
}

void smarm_ffi_sup_count(smarm_sup *s, int32_t *out)
{
    out[0] = s->nkids;
    out[1] = s->active;
    out[2] = s->sups;
    out[3] = s->nkids - s->sups;
}
