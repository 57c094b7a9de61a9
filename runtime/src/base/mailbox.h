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
    char data[];
} msg;

/* Producers append under a short spinlock that also guards the owner's
 * generation, so a send that raced the owner's death (and the slot's reuse)
 * finds the tenancy gone instead of leaking into the next tenant. The owner
 * takes the whole shared list at once into a private list it pops lock-free. */
typedef struct mailbox {
    _Atomic uint32_t lock;
    uint32_t gen;           /* owner generation; 0 = closed */
    msg *head, *tail;       /* shared list, under lock */
    msg *priv, *priv_tail;  /* owner-only */
    _Atomic uint32_t depth; /* queued messages (approximate, for introspection) */
} mailbox;

msg *msg_new(const void *data, size_t len);
/* A message of len bytes of data followed by extralen bytes that are not the message. */
msg *msg_new_extra(const void *data, size_t len, const void *extra, size_t extralen);
/* For tests: the next n message allocations fail as if out of memory. */
void msg_inject_failures(int n);
/* Frees m; the channel references of an undelivered message are released. */
void msg_free(msg *m);
void mailbox_open(mailbox *mb, uint32_t gen);
/* Appends m if the mailbox belongs to generation gen; returns 0, or -1 (m untouched) if
 * closed/stale. */
int mailbox_push(mailbox *mb, uint32_t gen, msg *m);
/* Owner only: the oldest message, or NULL if none is visible yet. */
msg *mailbox_pop(mailbox *mb);
/* Owner only: whether a pop would find something. */
int mailbox_nonempty(mailbox *mb);
/* Closes the mailbox and frees every queued message. */
void mailbox_close(mailbox *mb);

#endif
