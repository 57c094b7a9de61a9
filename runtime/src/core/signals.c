/* Fatal-signal diagnosis. The handler runs on a per-scheduler alternate stack
 * (a guard hit leaves no stack to run on) and does only async-signal-safe work:
 * plain loads, a fixed buffer, one write(2). A C-stack overflow into an actor's
 * guard is named as such; any other fatal signal (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGABRT) on a scheduler thread is named with the actor that was
 * running. Then the handler hands the signal back to the action that was there
 * before (the default one, unless the host installed its own) and returns: a
 * fault repeats, a signal that was sent is raised again, so the process dies
 * with the signal's normal status (and a core, where enabled). Also the polite
 * shutdown on SIGINT/SIGTERM, when the runtime is asked to handle those. */
#include "core/signals.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/exit.h"
#include "core/runtime.h"
#include "core/scheduler.h"

#define ALTSTACK_SIZE (64 * 1024)

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NFATAL ((int)(sizeof fatal_signals / sizeof fatal_signals[0]))
static struct sigaction prev_fatal[NFATAL];

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGFPE:
        return "SIGFPE";
    case SIGILL:
        return "SIGILL";
    case SIGABRT:
        return "SIGABRT";
    }
    return "a signal";
}

static char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    int n = 0;
    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v);
    p = put_str(p, "0x");
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_pid(char *p, uint64_t pid)
{
    p = put_str(p, "<0.");
    p = put_u64(p, pid_index(pid));
    p = put_str(p, ".");
    p = put_u64(p, pid_gen(pid));
    return put_str(p, ">");
}

static void fault_handler(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    int i = 0;
    while (i < NFATAL - 1 && fatal_signals[i] != sig)
        i++;
    sched *s = sched_current();
    actor *a = s ? atomic_load_explicit(&s->cur, memory_order_relaxed) : NULL;
    uintptr_t addr = (uintptr_t)si->si_addr;
    /* si_code > 0: the kernel raised it for a fault at si_addr; <= 0: it was sent */
    int fault = si->si_code > 0 && sig != SIGABRT;
    stack *stk = a ? a->run.stk : NULL;
    char buf[256], *p = buf;
    if (sig == SIGSEGV && fault && stk && addr < (uintptr_t)stk->base &&
        addr >= (uintptr_t)stk->base - stk->guard) {
        p = put_str(p, "smarm: actor ");
        p = put_pid(p, a->pid);
        p = put_str(p, " overflowed its C stack (reserve ");
        p = put_u64(p, stk->size);
        p = put_str(p, " bytes, guard ");
        p = put_u64(p, stk->guard);
        p = put_str(p, " bytes); spawn it with a larger smarm.spawn_opt{stack = ...}\n");
        ssize_t w = write(2, buf, (size_t)(p - buf));
        (void)w;
        /* the default action, whoever handled SIGSEGV before: this one is diagnosed */
        signal(sig, SIG_DFL);
        errno = saved_errno;
        return;
    }
    if (s) {
        /* only on a scheduler thread: elsewhere it is none of the runtime's business */
        p = put_str(p, "smarm: fatal signal ");
        p = put_str(p, signal_name(sig));
        if (fault) {
            p = put_str(p, " (address ");
            p = put_hex(p, addr);
            p = put_str(p, ")");
        }
        if (a) {
            p = put_str(p, " in actor ");
            p = put_pid(p, a->pid);
        } else {
            p = put_str(p, " in scheduler thread ");
            p = put_u64(p, (uint64_t)s->id);
            p = put_str(p, ", outside any actor");
        }
        p = put_str(p, "\n");
        ssize_t w = write(2, buf, (size_t)(p - buf));
        (void)w;
    }
    /* back to whoever handled it before (the default action: the process dies).
     * A fault repeats when this returns; a sent signal (kill, raise, abort) is
     * raised again, and stays blocked until this handler returns */
    sigaction(sig, &prev_fatal[i], NULL);
    if (!fault)
        raise(sig);
    errno = saved_errno;
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NFATAL; i++)
        sigaction(fatal_signals[i], &sa, &prev_fatal[i]);
}

void signal_diag_install(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install);
}

void *signal_diag_thread_init(void)
{
    void *p = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    stack_t ss = {.ss_sp = p, .ss_size = ALTSTACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(p, ALTSTACK_SIZE);
        return NULL;
    }
    return p;
}

void signal_diag_thread_fini(void *altstack)
{
    if (!altstack)
        return;
    stack_t ss = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    sigaltstack(&ss, NULL);
    munmap(altstack, ALTSTACK_SIZE);
}

/* ---- SIGINT / SIGTERM: polite shutdown of the root, then a hard stop ---- */

static void *shutdown_waiter(void *arg)
{
    smarm_runtime *rt = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    struct timespec tick = {0, 50 * 1000 * 1000};
    int seen = 0;
    while (!atomic_load_explicit(&rt->sig_stop, memory_order_acquire)) {
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig <= 0)
            continue;
        if (!seen++) {
            atomic_store(&rt->sig_caught, sig);
            /* the root hears it as smarm.shutdown: a supervisor stops its tree
             * top-down with each child's grace; anything else just stops */
            exit_shutdown(rt, 0, rt->root_pid);
        } else {
            /* a second signal: everything stops now */
            atomic_store(&rt->root_done, 1);
            sched_sweep(rt, STOP_KILL);
        }
    }
    return NULL;
}

int signal_shutdown_start(smarm_runtime *rt, sigset_t *saved)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    /* blocked here before any runtime thread starts: they inherit the mask,
     * so only the waiter takes these signals */
    pthread_sigmask(SIG_BLOCK, &set, saved);
    atomic_store(&rt->sig_stop, 0);
    atomic_store(&rt->sig_caught, 0);
    if (pthread_create(&rt->sig_thread, NULL, shutdown_waiter, rt) != 0) {
        pthread_sigmask(SIG_SETMASK, saved, NULL);
        return -1;
    }
    return 0;
}

void signal_shutdown_stop(smarm_runtime *rt, const sigset_t *saved)
{
    atomic_store_explicit(&rt->sig_stop, 1, memory_order_release);
    pthread_join(rt->sig_thread, NULL);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}
