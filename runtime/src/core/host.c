/* Host actors' parker: a futex word for the host thread's waits and an eventfd for its
 * poll loop. */
#include "core/host.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

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
    pthread_mutex_lock(&h->lock);
    h->closed = 1;
    close(h->efd);
    h->efd = -1;
    pthread_mutex_unlock(&h->lock);
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

static int inbox_nonempty(actor *a)
{
    return atomic_load_explicit(&a->inbox.depth, memory_order_seq_cst) > 0;
}

void host_wake(host *h)
{
    pthread_mutex_lock(&h->lock);
    if (!h->closed) {
        atomic_fetch_add(&h->seq, 1);
        futex_wake(&h->seq, INT_MAX);
        /* the sender counted its message before this wake */
        if (!h->efd_armed && inbox_nonempty(h->a)) {
            uint64_t one = 1;
            if (write(h->efd, &one, sizeof one) == sizeof one)
                h->efd_armed = 1;
        }
    }
    pthread_mutex_unlock(&h->lock);
}

void host_after_take(host *h)
{
    pthread_mutex_lock(&h->lock);
    /* a push counts its message before it wakes, and the wake takes this lock: a message
     * counted after this look arms the fd again in its wake */
    if (!h->closed && h->efd_armed && !inbox_nonempty(h->a)) {
        uint64_t v;
        while (read(h->efd, &v, sizeof v) == sizeof v)
            ;
        h->efd_armed = 0;
    }
    pthread_mutex_unlock(&h->lock);
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
    futex_wait(&h->seq, seq, tp);
}
