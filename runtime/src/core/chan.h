/* Channels: a queue of encoded messages with many senders and one receiving actor,
 * freed when the last endpoint (object or in-flight encoding) lets go of it. */
#ifndef SMARM_CHAN_H
#define SMARM_CHAN_H

#include <stdint.h>

#include "base/mailbox.h"

struct smarm_runtime;
typedef struct chan chan;

enum chan_kind { CHAN_TX = 1, CHAN_RX = 2 };

/* A channel owned by pid, with one tx and one rx reference held by the caller. NULL on OOM. */
chan *chan_new(struct smarm_runtime *rt, uint64_t owner);
/* Adds / drops one reference of the given kind. The last tx reference gone closes the
 * channel for the receiver (and wakes it); the last rx gone drops what is queued, forgets
 * the owner and closes it for senders; the last of all frees the channel. */
void chan_retain(chan *c, enum chan_kind kind);
void chan_release(chan *c, enum chan_kind kind);
/* Queues m and wakes the owner: 0, or -1 if the channel is closed (m untouched). */
int chan_send(chan *c, msg *m);
/* Same; with last, the channel closes with this message (a monitor's one notice). */
int chan_send_ex(chan *c, msg *m, int last);
/* The oldest message, or NULL; then *closed says whether more can ever come. */
msg *chan_pop(chan *c, int *closed);
/* tx:close(): no more sends; the receiver drains what is queued, then sees "closed". */
void chan_close(chan *c);
/* A monitor's channel records whom it watches and the registration id. */
void chan_set_monitor(chan *c, uint64_t target, uint64_t id);
int chan_get_monitor(chan *c, uint64_t *target, uint64_t *id); /* 0: not a monitor */
/* Whether any rx reference is left (someone can still receive). */
int chan_has_receiver(chan *c);
/* Drops every queued message (demonitor discards a notice that already came). */
void chan_drain(chan *c);
/* The receiving actor (0 while rx travels inside a message). */
void chan_set_owner(chan *c, uint64_t pid);

#endif
