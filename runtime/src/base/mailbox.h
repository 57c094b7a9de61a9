/* Per-actor inbox: copied messages in FIFO order, closed with the tenancy it belongs to. */
#ifndef SMARM_MAILBOX_H
#define SMARM_MAILBOX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct msg {
    struct msg *next;
    uint32_t len;   /* codec bytes */
    uint32_t extra; /* bytes after them that are not the message (a send_after's name) */
    int32_t cache;  /* the receiver's handle of its decoded value (selective receive); 0 = none.
                     * A decoded message's channel references belong to that value. */
    uint32_t flat;  /* set by its maker: MSG_FLAT or MSG_DEEP bytes, well formed by construction
                     * (vm/flat.h), or 0 (the receiver checks them) */
    char data[];
} msg;

enum { MSG_FLAT = 1, MSG_DEEP = 2 };

/* Producers append under a short spinlock that also guards the owner's
 * generation, so a send that raced the owner's death (and the slot's reuse)
 * finds the tenancy gone instead of leaking into the next tenant. The owner
 * takes the whole shared list at once into a private list it pops lock-free. */
typedef struct mailbox {
    _Atomic uint32_t lock;
    uint32_t gen;          /* owner generation; 0 = closed */
    msg *head, *tail;      /* shared list, under lock */
    msg *priv, *priv_tail; /* owner-only */
    /* messages queued, as two counts: pushes, kept under the lock, and removals, kept by
     * the owner alone (mailbox_depth tells their difference). One count changed by both
     * sides took a locked add per push and a locked subtract per pop. */
    _Atomic uint32_t pushed, popped;
    uint32_t epoch; /* bumped by every removal: a scan of an older epoch is stale */
    msg *mark;      /* the newest message queued when the mark was made (NULL: none) */
    /* owner-only, for selective receive: a scan walks the private list from its start or
     * from a mark; at is the message it returned last, before the one ahead of it (after
     * the fields a push and a pop touch, which share a cache line) */
    msg *scan_at, *scan_before;
    int scan_can_take;
    uint32_t scan_epoch; /* the epoch the scan saw */
    uint32_t mark_id;    /* which mark is current; 0 = none */
} mailbox;

msg *msg_new(const void *data, size_t len);
/* A message of len bytes of data followed by extralen bytes that are not the message. */
msg *msg_new_extra(const void *data, size_t len, const void *extra, size_t extralen);
/* For tests: the next n message allocations fail as if out of memory. */
void msg_inject_failures(int n);
/* Frees m; the channel references of an undelivered message are released. */
void msg_free(msg *m);
void mailbox_open(mailbox *mb, uint32_t gen);
/* The messages queued (any thread; a snapshot, for introspection and a host's wake check):
 * never short of the messages queued both before and after the call. */
static inline uint32_t mailbox_depth(mailbox *mb)
{
    /* the removals first: read before the pushes, they cannot count a message the pushes
     * read after them miss, so the difference is never negative */
    uint32_t out = atomic_load_explicit(&mb->popped, memory_order_seq_cst);
    uint32_t in = atomic_load_explicit(&mb->pushed, memory_order_seq_cst);
    return in - out;
}
/* Appends m if the mailbox belongs to generation gen; returns 0, or -1 (m untouched) if
 * closed/stale. */
int mailbox_push(mailbox *mb, uint32_t gen, msg *m);
/* Owner only: the oldest message, or NULL if none is visible yet. */
msg *mailbox_pop(mailbox *mb);
/* Owner only: whether a pop would find something. */
int mailbox_nonempty(mailbox *mb);
/* Owner only, selective receive. A mark records the end of the queue (mailbox_mark returns
 * its id): a scan begun from that id skips what was queued before it (a call's reply comes
 * after its request). scan_begin starts a scan (mark 0 or a stale id: from the oldest);
 * scan_next returns the next message, leaving it queued, or NULL if no more are visible;
 * scan_take removes the message scan_next returned last and returns it; scan_ready tells
 * whether scan_next would find one. scan_stale: the queue lost a message since the scan
 * began by other means than scan_take (a receive nested in the scan). */
uint32_t mailbox_mark(mailbox *mb);
void mailbox_scan_begin(mailbox *mb, uint32_t mark);
int mailbox_scan_stale(mailbox *mb);
msg *mailbox_scan_next(mailbox *mb);
msg *mailbox_scan_take(mailbox *mb);
int mailbox_scan_ready(mailbox *mb);
/* Closes the mailbox and frees every queued message. */
void mailbox_close(mailbox *mb);

#endif
