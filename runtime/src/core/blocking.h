/* smarm.blocking's core: a pool of threads outside the schedulers that run actors inside a
 * call that may block the OS thread (a read, os.execute, getaddrinfo, a blocking FFI call). */
#ifndef SMARM_BLOCKING_H
#define SMARM_BLOCKING_H

#include <stdint.h>

struct smarm_runtime;
struct actor;

/* Makes the runtime's pool (no thread yet: they start on demand, up to
 * cfg.blocking_threads). 0 or SMARM_ENOMEM. */
int blocking_pool_init(struct smarm_runtime *rt);
/* After every scheduler has left: ends and joins the pool's threads and frees the pool.
 * Returns how many were left inside a call (detached; then nothing is freed). */
int blocking_pool_stop(struct smarm_runtime *rt);
/* From an idle scheduler after the root ended (now: CLOCK_MONOTONIC ns): 1 once every live
 * actor has stayed inside smarm.blocking for a grace after the sweep stopped them (a call
 * that does not return): the run then ends without them, as with a scheduler stuck in C. */
int blocking_abandon(struct smarm_runtime *rt, uint64_t now);

/* The actor side. From the actor's own stack on a scheduler: leaves the scheduler holding its
 * stack (slot still RUNNING) and returns on a pool thread, which other actors never wait for.
 * Returns 0, or -1 if no pool thread could be started (the caller then stays on its
 * scheduler). */
int blocking_enter(struct actor *a);
/* From the pool thread: goes back; returns on a scheduler (never, if a stop came meanwhile:
 * the scheduler ends the actor as with any stop). */
void blocking_leave(struct actor *a);

/* The scheduler side: run_actor hands over an actor that left with LEAVE_BLOCKING. */
void blocking_submit(struct smarm_runtime *rt, struct actor *a);

#endif
