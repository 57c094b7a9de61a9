/* smarm.blocking's threads. An actor that calls smarm.blocking leaves its scheduler the way a
 * stack park does, holding its C stack, but its slot stays RUNNING (a wake only marks it
 * NOTIFIED); run_actor hands it here, and a pool thread switches into it, so the call runs
 * on that thread while the schedulers run everything else. When the call returns the actor
 * switches back to the pool thread, which queues it with the woken actors; the scheduler
 * that takes it switches it in where it left, or ends it if a stop came meanwhile.
 *
 * A pool thread has a sched of its own (kind SCHED_POOL), so sched_current() gives the
 * actor a heap cache, an encoding buffer and sanitizer state there; it holds no runnext and
 * is never signalled (the watchdog and stops look at rt->scheds only). Threads start on
 * demand, one for each actor inside at once, up to cfg.blocking_threads; more wait in the
 * queue. The pool mutex is a leaf, never held across a switch. */
#include "core/blocking.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/critical.h"
#include "base/park.h"
#include "core/runtime.h"
#include "core/scheduler.h"

/* how long every live actor may sit inside smarm.blocking after the root ended and the
 * sweep stopped them, before the run ends without them (as preempt.c does for schedulers) */
#define ABANDON_GRACE_NS 1000000000ull

typedef struct blocking_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    actor *head, *tail; /* handed over by run_actor, waiting for a thread */
    int max;            /* threads at most */
    int started;        /* threads running pool_main (they stay until the run ends) */
    int inside;         /* actors from blocking_enter until a pool thread queued them again */
    int stop;
    int abandoned;             /* the run ends without the actors inside (blocking_abandon) */
    uint64_t all_inside_since; /* root ended: since when every live actor is inside (0 = not) */
    sched *threads;            /* max of them; the first `started` are in use */
} blocking_pool;

int blocking_pool_init(smarm_runtime *rt)
{
    blocking_pool *p = calloc(1, sizeof *p);
    if (!p)
        return SMARM_ENOMEM;
    p->max = rt->cfg.blocking_threads > 0 ? rt->cfg.blocking_threads : 1;
    p->threads = sched_alloc(p->max);
    if (!p->threads) {
        free(p);
        return SMARM_ENOMEM;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    rt->blocking = p;
    return 0;
}

static void *pool_main(void *arg)
{
    sched *s = arg;
    smarm_runtime *rt = s->rt;
    blocking_pool *p = rt->blocking;
    sched_thread_begin(s);
    mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->cond, &p->lock);
        actor *a = p->head;
        if (!a)
            break;
        p->head = a->run.blocking_next;
        if (!p->head)
            p->tail = NULL;
        a->run.blocking_next = NULL;
        mutex_unlock(&p->lock);
        /* the actor runs its call here, then switches back (blocking_leave); nothing else
         * can switch it out on this thread (waits refuse, yields do nothing, no signal) */
        if (sched_run_held(s, a) != LEAVE_BLOCKING) {
            fprintf(stderr, "smarm: internal error: an actor left a blocking thread as %d\n",
                    (int)a->run.leave);
            abort();
        }
        a->run.blocking = 0;
        /* out of the call before it is queued: once queued it may end, and the last actor's
         * end may let the run stop before this thread takes the lock again, and then the stop
         * counted it as still inside and abandoned the runtime (a race a loaded machine lost
         * about once in 80 runs of runtime_test) */
        mutex_lock(&p->lock);
        p->inside--;
        mutex_unlock(&p->lock);
        sched_requeue_held(rt, a);
        mutex_lock(&p->lock);
    }
    mutex_unlock(&p->lock);
    sched_thread_end(s);
    return NULL;
}

/* Under p->lock. */
static int start_thread(smarm_runtime *rt, blocking_pool *p)
{
    sched *s = &p->threads[p->started];
    s->rt = rt;
    s->id = -1 - p->started;
    s->kind = SCHED_POOL;
    wire_buf_init(&s->enc);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    int rc = pthread_create(&s->thread, &attr, pool_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        wire_buf_free(&s->enc);
        return -1;
    }
    p->started++;
    return 0;
}

int blocking_enter(actor *a)
{
    blocking_pool *p = a->rt->blocking;
    mutex_lock(&p->lock);
    /* one thread per actor inside at once, up to the limit; past it they queue. A thread
     * that cannot start is not fatal while another runs */
    if (p->stop || (p->inside >= p->started && p->started < p->max && start_thread(a->rt, p) != 0 &&
                    p->started == 0)) {
        mutex_unlock(&p->lock);
        return -1;
    }
    p->inside++;
    mutex_unlock(&p->lock);
    a->run.blocking = 1;
    sched_leave(a, LEAVE_BLOCKING);
    /* on a pool thread now */
    return 0;
}

void blocking_leave(actor *a) { sched_leave(a, LEAVE_BLOCKING); }

void blocking_submit(smarm_runtime *rt, actor *a)
{
    blocking_pool *p = rt->blocking;
    mutex_lock(&p->lock);
    a->run.blocking_next = NULL;
    if (p->tail)
        p->tail->run.blocking_next = a;
    else
        p->head = a;
    p->tail = a;
    pthread_cond_signal(&p->cond);
    mutex_unlock(&p->lock);
}

int blocking_abandon(smarm_runtime *rt, uint64_t now)
{
    blocking_pool *p = rt->blocking;
    if (!p)
        return 0;
    mutex_lock(&p->lock);
    int all = p->inside > 0 && atomic_load(&rt->live) <= p->inside;
    if (!all)
        p->all_inside_since = 0;
    else if (!p->all_inside_since)
        p->all_inside_since = now;
    int give_up = all && now - p->all_inside_since >= ABANDON_GRACE_NS && !p->abandoned;
    if (give_up) {
        for (int i = 0; i < p->started; i++) {
            actor *a = atomic_load_explicit(&p->threads[i].cur, memory_order_acquire);
            if (!a)
                continue;
            sched_report_left_behind(a, "smarm.blocking");
        }
        p->abandoned = 1;
        p->stop = 1; /* no new entries; the idle threads leave */
        pthread_cond_broadcast(&p->cond);
    }
    int abandoned = p->abandoned;
    mutex_unlock(&p->lock);
    return abandoned;
}

int blocking_pool_stop(smarm_runtime *rt)
{
    blocking_pool *p = rt->blocking;
    if (!p)
        return 0;
    mutex_lock(&p->lock);
    p->stop = 1;
    int busy = p->inside;
    pthread_cond_broadcast(&p->cond);
    mutex_unlock(&p->lock);
    if (busy) {
        /* a run abandoned with actors inside calls that do not return: those threads still
         * use the runtime, so nothing is freed (see smarm_runtime_abandoned) */
        for (int i = 0; i < p->started; i++)
            pthread_detach(p->threads[i].thread);
        return busy;
    }
    for (int i = 0; i < p->started; i++) {
        pthread_join(p->threads[i].thread, NULL);
        wire_buf_free(&p->threads[i].enc);
    }
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p);
    rt->blocking = NULL;
    return 0;
}
