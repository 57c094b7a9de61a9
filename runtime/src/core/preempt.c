/* Preemption. A watchdog thread ticks every quarter timeslice while any
 * scheduler is busy; a scheduler whose switch counter has not moved for four
 * ticks has run one actor for a timeslice or more (at most a quarter more),
 * and if other work waits it gets SIGURG
 * (tagged with that counter, so a signal that lands after a switch is ignored).
 * The handler stops any Lua code:
 *   1. interpreted Lua: a one-shot count hook (lua_sethook is async-signal-safe
 *      in LuaJIT) fires at the next bytecode and yields the actor's coroutine;
 *      where it cannot yield it switches away holding its stack, pinned to this
 *      OS thread: LuaJIT's hook dispatcher keeps errno's address across the hook;
 *   2. JIT-compiled code ignores hooks: when the interrupted PC lies in one of
 *      the actor's machine-code areas (no lock, no libc state is held there),
 *      the handler switches the actor out right away. The kernel saved every
 *      register, the flags and the vector state in the signal frame on the
 *      actor's stack; the handler returns through it when the actor is resumed,
 *      on whichever thread. No sigaltstack; the signal is blocked while the
 *      handler runs, and unblocked before such a switch (the switch itself
 *      restores no mask);
 *   3. anywhere else (runtime C, libc) only a flag is set, honoured at the
 *      runtime's safe points (send, receive, yield); the next tick signals again.
 *      Under a C function called from Lua, the hook also makes that function's
 *      return switch the actor out (vm/body.c). */

#include "core/preempt.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/cpuroom.h"
#include "base/futex.h"
#include "base/netpoll.h"
#include "base/sanitize.h"
#include "core/runtime.h"
#include "core/scheduler.h"

#define PREEMPT_SIGNAL SIGURG

/* how long busy actors may keep running after the root ended */
#define SWEEP_GRACE_NS 100000000
/* how long after the sweep an actor may stay inside a C call (a blocking read,
 * os.execute) before the run ends without its scheduler */
#define ABANDON_GRACE_NS 1000000000ull
/* How often the watchdog lets the layers above give back what they keep for reuse
 * (actor_hooks.trim). */
#define TRIM_NS 1000000000ull
/* How often the watchdog samples the CPUs other programs leave this process (base/cpuroom.c,
 * sched_share_backlog): /proc/stat counts in hundredths of a second, so a window of 0.1 s
 * gives 10 ticks per CPU. */
#define ROOM_NS 100000000ull

/* TSan defers a signal to its next interceptor and passes the context of where
 * it arrived: the PC may say "compiled code" while the thread runs the runtime.
 * Under TSan only the hook and the flag preempt. */
#if defined(SMARM_TSAN)
#define MCODE_SWITCH_OK 0
#else
#define MCODE_SWITCH_OK 1
#endif

/* Bits of a signal's tag beside the switch counter: RETUNE_TAG, the actor has run a whole
 * timeslice and its state is to take LuaJIT's own JIT parameters (vm/body.c; the handler
 * sets the actor's flag, on its own thread); NO_PREEMPT_TAG, only that, no preemption. */
#define RETUNE_TAG (1ull << 63)
#define NO_PREEMPT_TAG (1ull << 62)

static struct sigaction prev_action;

static void install_handler(void);

static void preempt_handler(int sig, siginfo_t *si, void *ucv)
{
    int saved_errno = errno;
    sched *s = sched_current();
    if (!s) {
        /* not a scheduler thread: somebody else's SIGURG */
        if (prev_action.sa_flags & SA_SIGINFO) {
            if (prev_action.sa_sigaction)
                prev_action.sa_sigaction(sig, si, ucv);
        } else if (prev_action.sa_handler != SIG_IGN && prev_action.sa_handler != SIG_DFL) {
            prev_action.sa_handler(sig);
        }
        errno = saved_errno;
        return;
    }
    actor *a = atomic_load_explicit(&s->cur, memory_order_relaxed);
    uint64_t tag = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    int retune = (tag & RETUNE_TAG) != 0, retune_only = (tag & NO_PREEMPT_TAG) != 0;
    tag &= ~(RETUNE_TAG | NO_PREEMPT_TAG);
    /* a smarm.blocking thread runs its actor's call to the end: nothing preempts there */
    if (s->kind == SCHED_POOL || !a || !a->vm.L || a->vm.closing || a->vm.remapping ||
        a->run.stopping || si->si_code != SI_QUEUE ||
        (tag && tag != atomic_load_explicit(&s->switches, memory_order_relaxed))) {
        errno = saved_errno;
        return;
    }
    /* the handler runs on the interrupted stack (no sigaltstack for this signal): outside
     * the actor's own stack, the thread is in the scheduler around a switch (s->cur is set
     * just before the switch in and cleared just after the switch out), not in the actor */
    stack *stk = a->run.stk;
    if (!stk || !stack_contains(stk, __builtin_frame_address(0))) {
        errno = saved_errno;
        return;
    }
    if (retune)
        atomic_store_explicit(&a->vm.retune_due, 1, memory_order_relaxed);
    if (retune_only) {
        a->rt->hooks.retune(a);
        errno = saved_errno;
        return;
    }
    ucontext_t *uc = ucv;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    a->run.preempt_pending = 1;
    if (a->rt->hooks.preempt(a, pc, sp, MCODE_SWITCH_OK)) {
        a->stats.preempt_jit++;
        a->run.preempt_pending = 0;
        /* the kernel blocked the signal for this handler; the thread goes on to run the
         * scheduler without returning through it, so it unblocks it here (the frame holds
         * the interrupted mask, restored where the actor resumes) */
        sigset_t urg;
        sigemptyset(&urg);
        sigaddset(&urg, PREEMPT_SIGNAL);
        pthread_sigmask(SIG_UNBLOCK, &urg, NULL);
        sched_leave(a, LEAVE_YIELD);
        /* resumed, maybe on another thread, whose errno is not the one saved
         * above: compiled code never reads errno, so it is left alone */
        return;
    }
    /* a count hook is armed (vm/body.c): it yields at the next interpreted bytecode, and
     * a C function called from Lua switches out as it returns */
    errno = saved_errno;
}

/* Signals s's thread; tag: its switch counter when the actor to preempt was seen running
 * there (the handler ignores the signal if it has switched since), or 0 for whatever runs
 * there now. */
static void signal_at(sched *s, uint64_t tag)
{
    union sigval v;
    v.sival_ptr = (void *)(uintptr_t)tag;
    pthread_sigqueue(s->thread, PREEMPT_SIGNAL, v);
}

void preempt_signal(sched *s)
{
    /* whatever runs there now; a stop flag tells the handler who */
    signal_at(s, 0);
}

void preempt_safe_point(actor *a)
{
    if (a->run.blocking)
        return;
    if (!a->run.preempt_pending && !atomic_load_explicit(&a->run.stop, memory_order_relaxed))
        return;
    a->run.preempt_pending = 0;
    a->stats.preempt_safe++;
    sched_yield_actor(a);
}

void preempt_install(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_handler);
}

static void install_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = preempt_handler;
    /* no SA_NODEFER: a signal that came while the handler's frame was being written (a page
     * fault on a fresh stack page, a loaded host) was delivered on top of it before its first
     * instruction, again and again, until the nested frames overran the stack */
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(PREEMPT_SIGNAL, &sa, &prev_action);
}

/* ---- the watchdog ---- */

/* After the root-exit sweep, a scheduler that has not switched for ABANDON_GRACE_NS
 * while its actor was told to stop is inside a C call that does not return. Once
 * one is, the others leave as soon as they are idle and sched_run returns without
 * waiting for it (the runtime is then never freed: that thread still uses it). */
static RACY_READS void find_stuck(smarm_runtime *rt, uint64_t now)
{
    uint64_t mask = 0;
    for (int i = 0; i < sched_total(rt); i++) {
        actor *a = sched_stuck_actor(&rt->scheds[i], now, 0, ABANDON_GRACE_NS);
        if (!a)
            continue;
        mask |= 1ull << i;
        sched_report_left_behind(a, "a C call");
    }
    if (!mask)
        return;
    atomic_store(&rt->stuck, mask);
    /* idle schedulers look at it and leave; sched_run looks at it too */
    park_set_wake_all(&rt->parks);
    sched_note_exit(rt);
}

/* how long a scheduler may stay in one actor's C call while work waits before a spare
 * scheduler thread takes the work over (sched_cover_stuck) */
#define HANDOFF_NS 10000000ull

/* Finer ticks end a slice closer to its length, and re-signal sooner an actor
 * the last signal found in C code (tier 3 above); each costs the watchdog one
 * wake-up while some scheduler is busy. */
#define TICKS_PER_SLICE 4

/* A tick that finds nothing that could need it soon (no work waits, every busy actor has
 * LuaJIT's own JIT parameters, no probation, no fd left unwatched, the root still runs) is
 * calm: the next comes a whole slice later, or at the earliest timer. A tick wakes the
 * watchdog on some core, and on a loaded machine that is often the core of the actor that
 * computes: binary-trees took 2,400-9,900 involuntary switches in 2-3 s against plain
 * luajit's 150-1,200 beside the same load. Work that turns up during a calm sleep is seen
 * at most a slice late, which only delays a preemption that is a slice long anyway. */
#define CALM_TICKS TICKS_PER_SLICE

/* Whether a's state has LuaJIT's own JIT parameters. A racy read: a is what a scheduler ran
 * at some instant, and its record may be reset for a new actor meanwhile; a stale answer
 * only sends a retune signal that the handler drops (it checks the switch counter) or
 * calms a tick. */
static RACY_READS int actor_retuned(const actor *a) { return a->vm.jit_retuned; }

/* The schedulers whose being busy keeps the watchdog awake: the schedulers proper, and the
 * spares that stand in. A spare goes on running the actor it took after the scheduler it
 * covers has become idle (it looks whether it may retire between runs only), so with only
 * the schedulers proper counted, the watchdog slept while a spare ran an actor that
 * computed: nothing preempted it, and its state kept the runtime's JIT parameters (seen
 * in 1 of 15 runs of jit_params_spec). A spare's own loop calls preempt_busy as it leaves
 * its idle point, as the schedulers proper do. */
static uint64_t watch_mask(smarm_runtime *rt, uint64_t main_mask, int n)
{
    uint64_t m = main_mask;
    for (int i = rt->nsched; i < n && i < 64; i++)
        if (atomic_load_explicit(&rt->scheds[i].spare_state, memory_order_relaxed) == SPARE_ACTIVE)
            m |= 1ull << i;
    return m;
}

/* Whether some scheduler looked at the network since the last tick (polls_at: the counts
 * then, updated): one that ran out of work polls right then (sched_loop), a busy one every
 * POLL_PICKS picks, so the watchdog need not: an fd is still seen within two ticks by someone
 * while every scheduler is busy. Under a server's load of short requests at -S 2 (one
 * scheduler running, the other asleep on its futex, so nobody sleeps in the set), nearly
 * every tick polled, placed what it found as a busy scheduler's poll would (waking the
 * sleeper for it), and was never calm. Counting only the polls of schedulers that ran out of
 * work, two ticks in three still polled there (the busy one had a backlog for the whole tick,
 * and polled every 16 of its short requests): 2,052 of 3,109 ticks in a 3-second run. */
static int polled_since(smarm_runtime *rt, int n, uint64_t *polls_at)
{
    int polled = 0;
    for (int i = 0; i < n; i++) {
        uint64_t d = atomic_load_explicit(&rt->scheds[i].net_polls, memory_order_relaxed);
        polled |= d != polls_at[i];
        polls_at[i] = d;
    }
    return polled;
}

/* The CPU time s's thread has used, in ns; UINT64_MAX when it cannot be read. Only for the
 * schedulers proper, whose threads live as long as the watchdog (a spare's may retire). */
static uint64_t thread_cpu_ns(sched *s)
{
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(s->thread, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return UINT64_MAX;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether s's thread has had a whole slice of CPU time since cpu_at (its CPU time when the
 * watchdog saw its actor run for a tick). A wall-clock slice is not enough: under load the
 * OS sets a scheduler's thread aside for milliseconds, and a server's connection actor that
 * answered one short request then looked as if it computed, and flushed and recompiled its
 * traces (8-11 of 32 during a 6 s run of wrk at -S 2). A spare's thread, or a clock that
 * cannot be read, counts the wall-clock slice. */
static int had_cpu_slice(smarm_runtime *rt, int i, uint64_t cpu_at, uint64_t slice_ns)
{
    if (i >= rt->nsched || cpu_at == UINT64_MAX)
        return 1;
    uint64_t now = thread_cpu_ns(&rt->scheds[i]);
    return now == UINT64_MAX || now - cpu_at >= slice_ns;
}

static void *watchdog_main(void *arg)
{
    smarm_runtime *rt = arg;
    pthread_setname_np(pthread_self(), "smarm-watchdog");
    uint64_t tick = (uint64_t)(rt->cfg.timeslice_ms * 1e6 / TICKS_PER_SLICE);
    if (tick < 50000)
        tick = 50000;
    int n = sched_total(rt);
    /* the schedulers proper (spares are added while they stand in: watch_mask) */
    uint64_t main_mask = sched_proper_mask(rt);
    uint64_t seen[PARK_MAX] = {0};
    int age[PARK_MAX] = {0};
    /* the CPU time of a scheduler's thread when its actor was seen running for a tick, and
     * whether that run's retune was asked (had_cpu_slice) */
    uint64_t cpu_at[PARK_MAX] = {0};
    uint8_t retune_asked[PARK_MAX] = {0};
    uint64_t slice_ns = (uint64_t)(rt->cfg.timeslice_ms * 1e6);
    uint64_t root_done_at = 0, swept_at = 0;
    /* while short slices (run_actor) run, the watchdog ticks at their pace */
    uint64_t probation = rt->probation_ns;
    uint64_t sleep_ns = tick;
    uint64_t last_tick = 0; /* 0 after a sleep: idle time is nobody's busy time */
    uint64_t polls_at[PARK_MAX] = {0};
    uint64_t trimmed_at = park_now_ns();
    cpuroom room;
    cpuroom_open(&room, NULL);
    uint64_t room_at = 0;
    while (!atomic_load_explicit(&rt->wd_stop, memory_order_acquire)) {
        uint64_t idle = atomic_load_explicit(&rt->parks.idle, memory_order_relaxed);
        uint64_t mask = watch_mask(rt, main_mask, n);
        if ((idle & mask) == mask) {
            /* at most once a second, and only here, with every scheduler asleep: the time a
             * trim takes then holds up no actor and no tick (while actors ran, a trim that
             * took the watchdog away for milliseconds let spawned actors move to the other
             * scheduler: 6,466 of spawn_share_spec's 10,000 short ones in a debug build). An
             * idle watchdog wakes every second; a runtime that is never idle keeps what it
             * has for reuse, which its actors then use. */
            uint64_t at = park_now_ns();
            if (rt->hooks.trim && at - trimmed_at >= TRIM_NS) {
                trimmed_at = at;
                rt->hooks.trim(rt);
                continue;
            }
            /* every scheduler sleeps: so does the watchdog, until one wakes (preempt_busy).
             * seq_cst pairs with its fence there */
            atomic_store(&rt->wd_sleeping, 1);
            atomic_thread_fence(memory_order_seq_cst);
            idle = atomic_load_explicit(&rt->parks.idle, memory_order_relaxed);
            mask = watch_mask(rt, main_mask, n);
            if ((idle & mask) == mask && !atomic_load(&rt->wd_stop)) {
                struct timespec ts = {1, 0};
                futex_wait(&rt->wd_sleeping, 1, &ts);
            }
            atomic_store(&rt->wd_sleeping, 0);
            last_tick = 0;
            continue;
        }
        struct timespec ts = {(time_t)(sleep_ns / 1000000000ull), (long)(sleep_ns % 1000000000ull)};
        nanosleep(&ts, NULL);
        sleep_ns = tick;
        uint64_t now = park_now_ns();
        uint64_t since = last_tick ? now - last_tick : 0;
        last_tick = now;
        /* ticks that passed: more than one after a calm sleep (or a late wake) */
        int steps = since > tick ? (int)((since + tick / 2) / tick) : 1;
        int calm = 1;
        count_own(&rt->wd_ticks); /* only the watchdog writes them */
        /* while no scheduler sleeps in the network poller's set, busy ones look at it only
         * every POLL_PICKS picks, which with actors that use whole slices is many slices:
         * fds found ready here are placed from here instead, unless a scheduler has looked
         * since the last tick (polled_since) */
        int unwatched = !polled_since(rt, n, polls_at) && netpoll_ready(&rt->np) &&
                        atomic_load_explicit(&rt->np.poller, memory_order_relaxed) < 0;
        if (unwatched) {
            uint64_t pids[64];
            count_own(&rt->wd_polls);
            int ready = netpoll_wait(&rt->np, 0, pids, 64);
            sched_wake_polled(rt, NULL, pids, ready, 1);
        }
        if (unwatched && atomic_load_explicit(&rt->np.poller, memory_order_relaxed) < 0)
            calm = 0;
        /* what other programs leave this process, for sched_share_backlog (a sample over the
         * time since the last, idle time included) */
        if (now - room_at >= ROOM_NS) {
            room_at = now;
            struct timespec cpu;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
            int64_t r =
                cpuroom_sample(&room, (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec);
            if (r >= 0)
                atomic_store_explicit(&rt->cpu_room, r, memory_order_relaxed);
        }
        /* a polled backlog one scheduler kept for a whole tick goes to the siblings, if the
         * machine has a CPU for one */
        int pending = sched_share_backlog(rt);
        /* the root has ended but busy actors keep every scheduler from the idle
         * point where the sweep runs: after a grace, sweep from here */
        if (atomic_load_explicit(&rt->root_done, memory_order_acquire)) {
            calm = 0;
            if (!root_done_at)
                root_done_at = now;
            if (now - root_done_at > SWEEP_GRACE_NS && now - swept_at > SWEEP_GRACE_NS) {
                swept_at = now;
                sched_sweep(rt, STOP_SWEEP);
            }
            if (now - root_done_at > SWEEP_GRACE_NS + ABANDON_GRACE_NS &&
                !atomic_load_explicit(&rt->stuck, memory_order_relaxed))
                find_stuck(rt, now);
        }
        int waiting = -1, held = 0;
        for (int i = 0; i < n; i++) {
            sched *s = &rt->scheds[i];
            actor *a = atomic_load_explicit(&s->cur, memory_order_relaxed);
            uint64_t sw = atomic_load_explicit(&s->switches, memory_order_relaxed);
            uint64_t p = atomic_load_explicit(&s->probation_until, memory_order_relaxed);
            if (a) /* sampled: busy at this tick counts as busy since the last one */
                atomic_store_explicit(&s->busy_ns, s->busy_ns + since, memory_order_relaxed);
            if (p && a) {
                if (now < p) {
                    calm = 0;
                    if (p - now < sleep_ns)
                        sleep_ns = p - now < PROBATION_MIN_NS / 4 ? PROBATION_MIN_NS / 4 : p - now;
                } else {
                    if (waiting < 0)
                        waiting = sched_work_waiting(rt, now);
                    /* signalled again at every tick until it is switched out (a signal
                     * that finds it booting, or in C, cannot stop it at once); the switch
                     * counter in the signal makes the handler ignore it if the scheduler
                     * has moved on to another actor meanwhile. With nothing waiting the
                     * ticks go back to their pace: at the probation's, an actor that
                     * computed in its first run (the root of a compute program, always)
                     * had the watchdog wake 8,000 times a second for as long as it ran */
                    if (waiting) {
                        calm = 0;
                        signal_at(s, sw);
                        if (sleep_ns > probation)
                            sleep_ns = probation;
                    }
                }
            }
            if (!a || sw != seen[i]) {
                seen[i] = sw;
                age[i] = 0;
                retune_asked[i] = 0;
                atomic_store_explicit(&s->quiet_since, now, memory_order_relaxed);
                continue;
            }
            held = 1;
            /* one actor for HANDOFF_NS although signalled after its slice: the scheduler sits
             * in a C call (a blocking read, os.execute, a long FFI call) that the signal cannot
             * interrupt. If work waits, a spare thread runs it meanwhile (Go's sysmon hands
             * off a processor whose thread is in a system call the same way) */
            if (now - atomic_load_explicit(&s->quiet_since, memory_order_relaxed) >= HANDOFF_NS &&
                !atomic_load_explicit(&rt->stuck, memory_order_relaxed)) {
                if (waiting < 0)
                    waiting = sched_work_waiting(rt, now);
                if (waiting)
                    sched_cover_stuck(rt, i, sw);
            }
            int retuned = actor_retuned(a);
            if (!retuned)
                calm = 0;
            int before = age[i];
            age[i] += steps;
            if (before == 0 && !retuned && i < rt->nsched)
                cpu_at[i] = thread_cpu_ns(s);
            if (age[i] < TICKS_PER_SLICE)
                continue;
            /* a whole timeslice, and a whole slice of CPU time since the actor was seen
             * running: the actor computes, and its state takes LuaJIT's own JIT parameters
             * (vm/body.c), asked once its thread has had the CPU time, then at each whole
             * slice until it has them, with the preemption signal below or with a signal of
             * its own (a signal that found the actor still booting, or whose retune found it
             * in a finalizer, did nothing) */
            uint64_t retune = 0;
            if (!retuned &&
                (!retune_asked[i] || before / TICKS_PER_SLICE != age[i] / TICKS_PER_SLICE) &&
                had_cpu_slice(rt, i, cpu_at[i], slice_ns)) {
                retune = RETUNE_TAG;
                retune_asked[i] = 1;
            }
            /* one actor for two slices although signalled after the first: the scheduler is
             * inside a C call (a blocking read, os.execute), and the actor its last wake put
             * in its runnext would wait for that call: any scheduler may take it instead */
            if (age[i] >= 2 * TICKS_PER_SLICE &&
                atomic_load_explicit(&s->runnext, memory_order_relaxed))
                sched_release_runnext(s);
            if (waiting < 0)
                waiting = sched_work_waiting(rt, now);
            if (waiting)
                signal_at(s, sw | retune);
            else if (retune)
                signal_at(s, sw | RETUNE_TAG | NO_PREEMPT_TAG);
        }
        /* Every busy scheduler has switched actors since the last tick. A tick then only
         * starts the age of each actor it finds (age[] counts the ticks that pass, not the
         * wakes), so unless one is wanted for something else (a backlog to share, new actors
         * to hand over, the network to watch, the root's end, short slices) the next comes
         * two ticks later: an actor that began right after this tick is first seen a tick
         * later than at the ticks' pace, and preempted after 4 to 6 ticks of running
         * instead of 4 to 5. Under an HTTP load of short requests at -S 2 (wrk -t1 -c32),
         * with polled_since above, the watchdog woke 0.008-0.009 times per request against
         * 0.012-0.013 and took 0.17-0.19 us of CPU per request against 0.30-0.34. */
        if (!held && !pending && !unwatched && sleep_ns == tick && !root_done_at)
            sleep_ns = 2 * tick;
        if (calm) {
            if (waiting < 0)
                waiting = sched_work_waiting(rt, now);
            if (!waiting) {
                sleep_ns = tick * CALM_TICKS;
                uint64_t t = timers_earliest(&rt->tm);
                if (t != UINT64_MAX && t < now + sleep_ns)
                    sleep_ns = t > now + tick ? t - now : tick;
            }
        }
    }
    cpuroom_close(&room);
    return NULL;
}

void preempt_busy(smarm_runtime *rt)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&rt->wd_sleeping, memory_order_relaxed)) {
        atomic_store(&rt->wd_sleeping, 0);
        futex_wake(&rt->wd_sleeping, 1);
    }
}

int preempt_start(smarm_runtime *rt)
{
    atomic_store(&rt->wd_stop, 0);
    atomic_store(&rt->wd_sleeping, 0);
    if (pthread_create(&rt->watchdog, NULL, watchdog_main, rt) != 0)
        return SMARM_ETHREAD;
    return 0;
}

void preempt_stop(smarm_runtime *rt)
{
    atomic_store_explicit(&rt->wd_stop, 1, memory_order_release);
    atomic_store(&rt->wd_sleeping, 0);
    futex_wake(&rt->wd_sleeping, 1);
    pthread_join(rt->watchdog, NULL);
}
