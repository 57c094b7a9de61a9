/* Links in an array (the order nobody relies on: removal swaps the last one in), plus, past
 * INDEX_MIN links, an open-addressing index of positions (linear probing, at most half
 * full, deletion by backward shift). Without an index (few links, or no memory for one)
 * every operation scans the array: correct, only slower. */
#include "core/linkset.h"

#include <stdlib.h>

#include "core/actor.h"

#define INDEX_MIN 16

static uint32_t hash(uint64_t pid)
{
    pid ^= pid >> 33;
    pid *= 0xff51afd7ed558ccdull;
    pid ^= pid >> 33;
    return (uint32_t)pid;
}

/* The index slot holding pid, or the empty slot where it would go. */
static uint32_t slot_of(const actor *a, uint64_t pid)
{
    uint32_t mask = a->ex.link_index_cap - 1;
    for (uint32_t i = hash(pid) & mask;; i = (i + 1) & mask) {
        uint32_t e = a->ex.link_index[i];
        if (!e || a->ex.links[e - 1] == pid)
            return i;
    }
}

void linkset_drop_index(actor *a)
{
    free(a->ex.link_index);
    a->ex.link_index = NULL;
    a->ex.link_index_cap = 0;
}

/* Rebuilds the index with cap slots (a power of two); without one if out of memory. */
static void rebuild(actor *a, uint32_t cap)
{
    linkset_drop_index(a);
    uint32_t *idx = calloc(cap, sizeof *idx);
    if (!idx)
        return;
    a->ex.link_index = idx;
    a->ex.link_index_cap = cap;
    for (uint32_t j = 0; j < a->ex.nlinks; j++)
        idx[slot_of(a, a->ex.links[j])] = j + 1;
}

/* The position of pid in the links array, or -1. */
static int64_t find(const actor *a, uint64_t pid)
{
    if (a->ex.link_index) {
        uint32_t e = a->ex.link_index[slot_of(a, pid)];
        return e ? (int64_t)e - 1 : -1;
    }
    for (uint32_t i = 0; i < a->ex.nlinks; i++)
        if (a->ex.links[i] == pid)
            return i;
    return -1;
}

int linkset_add(actor *a, uint64_t pid)
{
    if (find(a, pid) >= 0)
        return 0;
    if (a->ex.nlinks == a->ex.caplinks) {
        uint32_t cap = a->ex.caplinks ? a->ex.caplinks * 2 : 4;
        uint64_t *l = realloc(a->ex.links, cap * sizeof *l);
        if (!l)
            return -1;
        a->ex.links = l;
        a->ex.caplinks = cap;
    }
    a->ex.links[a->ex.nlinks++] = pid;
    if (a->ex.link_index && a->ex.nlinks * 2 <= a->ex.link_index_cap)
        a->ex.link_index[slot_of(a, pid)] = a->ex.nlinks;
    else if (a->ex.nlinks > INDEX_MIN)
        rebuild(a, a->ex.link_index_cap ? a->ex.link_index_cap * 2 : 4 * INDEX_MIN);
    return 0;
}

/* Empties index slot i, shifting back the entries after it that probed past it. */
static void delete_slot(actor *a, uint32_t i)
{
    uint32_t *idx = a->ex.link_index, mask = a->ex.link_index_cap - 1;
    for (uint32_t j = i;;) {
        j = (j + 1) & mask;
        uint32_t e = idx[j];
        if (!e)
            break;
        uint32_t home = hash(a->ex.links[e - 1]) & mask;
        /* the entry at j may fill the hole at i unless its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            idx[i] = e;
            i = j;
        }
    }
    idx[i] = 0;
}

void linkset_remove(actor *a, uint64_t pid)
{
    int64_t at = find(a, pid);
    if (at < 0)
        return;
    uint32_t last = a->ex.nlinks - 1;
    if (a->ex.link_index) {
        delete_slot(a, slot_of(a, pid));
        if ((uint32_t)at != last)
            a->ex.link_index[slot_of(a, a->ex.links[last])] = (uint32_t)at + 1;
    }
    a->ex.links[at] = a->ex.links[last];
    a->ex.nlinks--;
}
