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
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/critical.h"
#include "base/sanitize.h"
#include "core/exit.h"
#include "core/registry.h"
#include "core/runtime.h"
#include "core/scheduler.h"
#include "core/trace.h"

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

/* The machine code of the shared objects loaded when the handler was installed (libc, the
 * dynamic loader, a host program), except the runtime's own: code that may hold locks the
 * runtime cannot see. An overflow there ends the process. Code outside these ranges is the
 * runtime's and LuaJIT's, compiled traces, or Lua C modules loaded later. */
#define MAX_FOREIGN 64
static struct {
    uintptr_t lo, hi;
} foreign_code[MAX_FOREIGN];
static int nforeign;
/* where the runtime's own object is loaded: a fault's pc is reported relative to it, which
 * `addr2line -e OBJECT OFFSET` turns into a line */
static uintptr_t own_base, own_lo, own_hi;

static int note_object(struct dl_phdr_info *info, size_t size, void *self)
{
    (void)size;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < info->dlpi_phnum; i++) {
            const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
            if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
                continue;
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
            if (pass == 0 && (uintptr_t)self >= lo && (uintptr_t)self < hi) {
                own_base = info->dlpi_addr;
                own_lo = lo;
                own_hi = hi;
                return 0; /* the runtime's own object */
            }
            if (pass == 1 && nforeign < MAX_FOREIGN) {
                foreign_code[nforeign].lo = lo;
                foreign_code[nforeign].hi = hi;
                nforeign++;
            }
        }
    }
    return 0;
}

static int in_foreign_code(uintptr_t pc)
{
    for (int i = 0; i < nforeign; i++)
        if (pc >= foreign_code[i].lo && pc < foreign_code[i].hi)
            return 1;
    return 0;
}

static uintptr_t fault_pc(void *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#else
    (void)uc;
    return 0;
#endif
}

/* Whether an overflow of a's stack at pc can end a alone: nothing of the runtime was half
 * done on that stack (no lock held, no allocator update under way), the code is not a
 * system library's (which may hold its own locks: stdio, malloc), and a was not already
 * ending (its stop entry runs on the same stack). */
static int overflow_containable(actor *a, uintptr_t pc)
{
#if defined(__x86_64__) && !defined(SMARM_ASAN) && !defined(SMARM_TSAN)
    return pc && !crit_inside() && !in_foreign_code(pc) && !a->run.stopping;
#else
    /* the sanitizers' fiber bookkeeping does not expect a switch from a signal handler */
    (void)a;
    (void)pc;
    (void)in_foreign_code;
    return 0;
#endif
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
    if (sig == SIGSEGV && fault && stk && stack_in_guard(stk, (void *)addr)) {
        p = put_str(p, "smarm: actor ");
        p = put_pid(p, a->pid);
        p = put_str(p, " overflowed its C stack (reserve ");
        p = put_u64(p, stk->size);
        p = put_str(p, " bytes, guard ");
        p = put_u64(p, stk->guard);
        int contain = overflow_containable(a, fault_pc(uc));
        p = put_str(p, contain ? " bytes); it ends with reason stack_overflow"
                               : " bytes) inside a runtime lock or a system library, where it "
                                 "cannot end alone: the process dies");
        p = put_str(p, "; spawn it with a larger smarm.spawn_opt{stack = ...}\n");
        ssize_t w = write(2, buf, (size_t)(p - buf));
        (void)w;
        if (contain) {
            /* the kernel blocked SIGSEGV for this handler, and it never returns */
            sigset_t segv;
            sigemptyset(&segv);
            sigaddset(&segv, SIGSEGV);
            sigprocmask(SIG_UNBLOCK, &segv, NULL);
            errno = saved_errno;
            sched_abandon_overflowed(a);
        }
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
        uintptr_t pc = fault ? fault_pc(uc) : 0;
        if (pc) {
            p = put_str(p, " at pc ");
            p = put_hex(p, pc);
            if (pc >= own_lo && pc < own_hi) {
                p = put_str(p, " (runtime object +");
                p = put_hex(p, pc - own_base);
                p = put_str(p, ")");
            }
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
    dl_iterate_phdr(note_object, (void *)(uintptr_t)fault_handler);
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

/* ---- the signals the runtime handles for its host (handle_signals) ----
 *
 * SIGINT, SIGTERM, SIGHUP: the first shuts the root down politely (as
 *   smarm.shutdown), the second stops every actor at once, and if a scheduler
 *   stays inside a C call (a blocking read, os.execute, a long string.find) so
 *   that its actor cannot stop, the process ends at once: _exit(128+N). A third
 *   ends it at once in any case.
 * SIGUSR1: one line per actor on stderr (pid, state, mailbox, memory, name).
 *
 * These four are blocked in the thread that runs the runtime before its threads
 * start, so they inherit the mask, and a waiter thread takes them with
 * sigtimedwait. A blocked signal is never discarded, not even while the C
 * library's system() (os.execute) sets SIGINT to be ignored. Commands that
 * actors start run through /bin/sh, which clears the mask it inherits.
 *
 * SIGPIPE: a handler that does nothing, so a write to a closed pipe fails with
 *   EPIPE in the actor that made it instead of killing the process. A handler,
 *   not SIG_IGN: the default action comes back at exec, so the commands actors
 *   start still die of SIGPIPE (an ignored one would stay ignored in them). */

/* the runtime whose waiter takes them: one at a time per process */
static _Atomic(smarm_runtime *) sig_owner;
static struct sigaction prev_pipe;

/* a scheduler that ran one actor this long after it was told to stop is inside a C call */
#define STUCK_NS 250000000ull

static void pipe_handler(int sig) { (void)sig; }

static void waited_set(const smarm_runtime *rt, sigset_t *set)
{
    sigemptyset(set);
    if (!rt->cfg.keep_sigint)
        sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGUSR1);
}

static const char *state_name(enum slot_state st, const actor *a)
{
    switch (st) {
    case SLOT_QUEUED:
        return "queued";
    case SLOT_RUNNING:
    case SLOT_NOTIFIED:
        return a->run.blocking ? "blocking" : "running";
    case SLOT_PARKED:
        return "parked";
    default:
        return "ending";
    }
}

/* SIGUSR1: what each live actor is doing, one line each, straight to fd 2 (no
 * stdio lock, which an actor blocked in a write may hold). Racy reads, like ps. */
static RACY_READS void snapshot(smarm_runtime *rt)
{
    /* a plain read (spawns write it plainly, under the free-list lock): the
     * high-water mark at some instant, which is all a snapshot needs */
    uint32_t hwm = *(volatile uint32_t *)&rt->slots.hwm;
    char line[512], name[128];
    int n = snprintf(line, sizeof line, "smarm: snapshot: %lld actors, %d schedulers\n",
                     (long long)atomic_load_explicit(&rt->live, memory_order_relaxed), rt->nsched);
    ssize_t w = write(2, line, (size_t)n);
    for (uint32_t i = 0; i < hwm; i++) {
        uint64_t word = atomic_load_explicit(&slot_at(&rt->slots, i)->word, memory_order_acquire);
        enum slot_state st = slot_word_state(word);
        if (st == SLOT_VACANT || st == SLOT_DONE)
            continue;
        uint64_t pid = pid_make(i, slot_word_gen(word));
        actor *a = &rt->actors[i];
        registry_name_of(rt, a, name, sizeof name);
        n = snprintf(line, sizeof line, "smarm:   <0.%u.%u> %s mailbox=%u memory=%zu%s%s%s\n",
                     pid_index(pid), pid_gen(pid), state_name(st, a), mailbox_depth(&a->inbox),
                     a->vm.mem, name[0] ? " name=" : "", name, pid == rt->root_pid ? " root" : "");
        if (n > (int)sizeof line - 1) {
            n = (int)sizeof line - 1;
            line[n - 1] = '\n';
        }
        w = write(2, line, (size_t)n);
    }
    (void)w;
}

/* stdio may be locked by a thread that never comes back: flush what can be */
static void flush_stdio(void)
{
    FILE *fs[2] = {stdout, stderr};
    for (int i = 0; i < 2; i++) {
        for (int tries = 0; tries < 20; tries++) {
            if (ftrylockfile(fs[i]) == 0) {
                fflush_unlocked(fs[i]);
                funlockfile(fs[i]);
                break;
            }
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

static RACY_READS _Noreturn void exit_now(smarm_runtime *rt, actor *stuck)
{
    char line[256];
    int n;
    if (stuck)
        n = snprintf(line, sizeof line,
                     "smarm: actor <0.%u.%u> cannot be stopped (its scheduler is inside a C "
                     "call): the process exits now\n",
                     pid_index(stuck->pid), pid_gen(stuck->pid));
    else
        n = snprintf(line, sizeof line, "smarm: a third signal: the process exits now\n");
    flush_stdio();
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
    _exit(128 + atomic_load(&rt->sig_caught));
}

/* After the second stop signal (at `at`): every actor was told to stop. One whose
 * scheduler has not switched since, for STUCK_NS, is inside a C call. */
static void hard_stop_check(smarm_runtime *rt, uint64_t at)
{
    uint64_t now = park_now_ns();
    for (int i = 0; i < sched_total(rt); i++) {
        actor *a = sched_stuck_actor(&rt->scheds[i], now, at, STUCK_NS);
        if (a)
            exit_now(rt, a);
    }
}

static void stop_signal(smarm_runtime *rt, int sig, int *stops, uint64_t *hard_at)
{
    ++*stops;
    if (*stops == 1) {
        atomic_store(&rt->sig_caught, sig);
        /* the root hears it as smarm.shutdown: a supervisor stops its tree
         * top-down with each child's grace; anything else just stops */
        exit_shutdown(rt, 0, rt->root_pid);
    } else if (*stops == 2) {
        /* a second signal: everything stops now */
        *hard_at = park_now_ns();
        atomic_store(&rt->root_done, 1);
        sched_sweep(rt, STOP_KILL);
        /* idle schedulers look at the end: what is left may sit in smarm.blocking calls that
         * a stop only marks, which the run then ends without (blocking_abandon) */
        park_set_wake_all(&rt->parks);
    } else {
        exit_now(rt, NULL);
    }
}

static void *signal_waiter(void *arg)
{
    smarm_runtime *rt = arg;
    pthread_setname_np(pthread_self(), "smarm-signals");
    sigset_t set;
    waited_set(rt, &set);
    int stops = 0;
    uint64_t hard_at = 0; /* when a second signal stopped everything */
    while (!atomic_load_explicit(&rt->sig_stop, memory_order_acquire)) {
        /* a tick to notice the stop, and a finer one to watch a hard stop */
        struct timespec tick = {0, (hard_at ? 10 : 50) * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig == SIGUSR1) {
            snapshot(rt);
            trace_flush(rt); /* --trace: what the rings hold so far */
        } else if (sig > 0)
            stop_signal(rt, sig, &stops, &hard_at);
        if (hard_at)
            hard_stop_check(rt, hard_at);
    }
    return NULL;
}

int signal_shutdown_start(smarm_runtime *rt, sigset_t *saved)
{
    smarm_runtime *none = NULL;
    if (!atomic_compare_exchange_strong(&sig_owner, &none, rt))
        return -1; /* another runtime of this process takes them */
    sigset_t set;
    waited_set(rt, &set);
    /* blocked here before any runtime thread starts: they inherit the mask,
     * so only the waiter takes these signals */
    pthread_sigmask(SIG_BLOCK, &set, saved);
    atomic_store(&rt->sig_stop, 0);
    atomic_store(&rt->sig_caught, 0);
    if (pthread_create(&rt->sig_thread, NULL, signal_waiter, rt) != 0) {
        pthread_sigmask(SIG_SETMASK, saved, NULL);
        atomic_store(&sig_owner, NULL);
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pipe_handler;
    sa.sa_flags = SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, &prev_pipe);
    return 0;
}

void signal_shutdown_stop(smarm_runtime *rt, const sigset_t *saved)
{
    atomic_store_explicit(&rt->sig_stop, 1, memory_order_release);
    pthread_join(rt->sig_thread, NULL);
    sigaction(SIGPIPE, &prev_pipe, NULL);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
    atomic_store(&sig_owner, NULL);
}
