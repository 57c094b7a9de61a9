/* Guard-page fault diagnosis. The handler runs on a per-scheduler alternate
 * stack (a guard hit leaves no stack to run on) and does only async-signal-safe
 * work: plain loads, a fixed buffer, one write(2). Then it restores the default
 * action and returns, so the fault repeats and the process dies with the
 * fault's normal status (and a core, where enabled). */
#include "signal_diag.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"
#include "sched.h"

#define ALTSTACK_SIZE (64 * 1024)

static struct sigaction prev_segv, prev_bus;

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

static void fault_handler(int sig, siginfo_t *si, void *uc)
{
    sched *s = sched_current();
    actor *a = s ? atomic_load_explicit(&s->cur, memory_order_relaxed) : NULL;
    uintptr_t addr = (uintptr_t)si->si_addr;
    stack *stk = a ? a->stk : NULL;
    if (stk && addr < (uintptr_t)stk->base && addr >= (uintptr_t)stk->base - stk->guard) {
        char buf[256], *p = buf;
        p = put_str(p, "smarm: actor <0.");
        p = put_u64(p, pid_index(a->pid));
        p = put_str(p, ".");
        p = put_u64(p, pid_gen(a->pid));
        p = put_str(p, "> overflowed its C stack (reserve ");
        p = put_u64(p, stk->size);
        p = put_str(p, " bytes, guard ");
        p = put_u64(p, stk->guard);
        p = put_str(p, " bytes); spawn it with a larger smarm.spawn_opt{stack = ...}\n");
        ssize_t w = write(2, buf, (size_t)(p - buf));
        (void)w;
        signal(sig, SIG_DFL);
        return;
    }
    /* not ours: hand the fault to whoever handled it before */
    sigaction(sig, sig == SIGBUS ? &prev_bus : &prev_segv, NULL);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &prev_segv);
    sigaction(SIGBUS, &sa, &prev_bus);
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
