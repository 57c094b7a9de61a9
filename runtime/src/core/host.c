/* Host actors' parker: a futex word for the host thread's waits and an eventfd for its
 * poll loop. */
#include "core/host.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/critical.h"
#include "base/futex.h"
#include "base/park.h"
#include "core/actor.h"

host *host_new(void)
{
    host *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (h->efd < 0) {
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    return h;
}

void host_close(host *h)
{
    mutex_lock(&h->lock);
    h->closed = 1;
    close(h->efd);
    h->efd = -1;
    mutex_unlock(&h->lock);
    wire_buf_free(&h->enc);
}

void host_free(host *h)
{
    if (!h)
        return;
    pthread_mutex_destroy(&h->lock);
    wire_buf_free(&h->enc);
    free(h);
}

/* whether the host's inbox holds messages (no actor yet: no) */
static int inbox_nonempty(host *h)
{
    actor *a = atomic_load_explicit(&h->a, memory_order_acquire);
    /* a push counts its message before it unlocks the inbox: one the host can take is
     * counted */
    return a && mailbox_depth(&a->inbox) > 0;
}

/* Under lock: makes the fd readable if the inbox holds messages and it is not already. */
static void arm_locked(host *h)
{
    if (!h->closed && !atomic_load(&h->efd_armed) && inbox_nonempty(h)) {
        /* armed before the write: a host that sees the fd readable and takes the message
         * at once must find it armed, or it would not drain it */
        atomic_store(&h->efd_armed, 1);
        uint64_t one = 1;
        if (write(h->efd, &one, sizeof one) != sizeof one)
            atomic_store(&h->efd_armed, 0);
    }
}

void host_wake(host *h)
{
    /* the memory of a host is never freed while the runtime lives: a stale waker only
     * causes a spurious wake */
    atomic_fetch_add(&h->seq, 1);
    if (atomic_load(&h->sleeping))
        futex_wake(&h->seq, INT_MAX);
    /* the sender counted its message before this wake; the lock is taken only to arm */
    if (!atomic_load(&h->efd_armed) && inbox_nonempty(h)) {
        mutex_lock(&h->lock);
        arm_locked(h);
        mutex_unlock(&h->lock);
    }
}

void host_after_take(host *h)
{
    if (!atomic_load(&h->efd_armed))
        return;
    mutex_lock(&h->lock);
    if (!h->closed && atomic_load(&h->efd_armed) && !inbox_nonempty(h)) {
        uint64_t v;
        while (read(h->efd, &v, sizeof v) == sizeof v)
            ;
        atomic_store(&h->efd_armed, 0);
        /* a message counted after the look above, whose waker saw the fd still armed */
        arm_locked(h);
    }
    mutex_unlock(&h->lock);
}

void host_park(host *h, uint32_t seq, uint64_t deadline)
{
    struct timespec ts, *tp = NULL;
    if (deadline) {
        uint64_t now = park_now_ns();
        if (now >= deadline)
            return;
        uint64_t d = deadline - now;
        ts.tv_sec = (time_t)(d / 1000000000u);
        ts.tv_nsec = (long)(d % 1000000000u);
        tp = &ts;
    }
    /* a waker bumps seq and then reads sleeping; this sets sleeping and then the kernel
     * compares seq: one of the two sees the other */
    atomic_store(&h->sleeping, 1);
    atomic_thread_fence(memory_order_seq_cst);
    futex_wait(&h->seq, seq, tp);
    atomic_store(&h->sleeping, 0);
}

static __thread struct smarm_runtime *thread_runtime;

struct smarm_runtime *host_thread_runtime(void) { return thread_runtime; }

void host_thread_enter(struct smarm_runtime *rt) { thread_runtime = rt; }

void host_thread_leave(struct smarm_runtime *rt)
{
    if (thread_runtime == rt)
        thread_runtime = NULL;
}
