/* The reactor: one epoll set and one thread per runtime that turns fd readiness into actor
 * wakes. It never touches socket objects: a wait arms its fd with the waiting actor's pid as
 * the event's data (one-shot), and the reactor's only action per event is to wake that pid.
 * A stale pid is harmless (the slot's generation check), and so is a spurious wake (every
 * wait re-checks its condition after every wake). */
#ifndef SMARM_IO_REACTOR_H
#define SMARM_IO_REACTOR_H

#include <stdint.h>

typedef struct reactor reactor;

/* What an event does: wake(ctx, pid). The runtime passes sched_wake; tests pass a recorder.
 * Called on the reactor thread. */
typedef void (*reactor_wake_fn)(void *ctx, uint64_t pid);

enum { REACTOR_READ = 1, REACTOR_WRITE = 2 };

/* A reactor that starts its thread and epoll set on the first arm. NULL when out of memory. */
reactor *reactor_new(reactor_wake_fn wake, void *ctx);
/* Stops the thread (through an eventfd) and joins it, closes the epoll set, frees r. */
void reactor_free(reactor *r);
/* Arms fd to wake pid once, when it is ready for events (REACTOR_READ/WRITE; a hang-up or an
 * error counts as ready, and so does the peer's half-close for a reader). *added says whether fd is
 * in the set already (it is set here). The readiness is level: data that came before the arm wakes
 * at once. 0, or -errno (the thread or the epoll set could not be made, or epoll_ctl failed: ENOSPC
 * past max_user_watches). */
int reactor_arm(reactor *r, int fd, unsigned events, uint64_t pid, int *added);
/* Forgets fd before it is closed (a no-op if it was never added); only needed when the fd
 * might live on in another process or duplicate, since close removes it from the set. */
void reactor_forget(reactor *r, int fd, int *added);

#endif
