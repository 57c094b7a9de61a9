/* The trace rings and the writer of their file (see trace.h). */
#include "core/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sanitize.h"
#include "core/exit.h"
#include "core/registry.h"

/* Names of actors that ended, for their slices: few actors have names. */
typedef struct trace_name {
    uint64_t pid;
    char *name;
    struct trace_name *next;
} trace_name;

struct trace {
    char *path;
    uint64_t t0;
    int nrings;
    trace_ring *rings;
    pthread_mutex_t lock; /* one writer of the file at a time; the names list */
    trace_name *names;
};

void trace_start(smarm_runtime *rt, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "smarm: cannot write the trace to %s: %s\n", path, strerror(errno));
        return;
    }
    fclose(f);
    struct trace *t = calloc(1, sizeof *t);
    int n = sched_total(rt);
    if (t) {
        t->path = strdup(path);
        t->rings = calloc((size_t)n, sizeof *t->rings);
    }
    for (int i = 0; t && t->rings && i < n; i++) {
        /* calloc'd: the pages a ring never reaches are never touched */
        t->rings[i].ev = calloc(TRACE_RING, sizeof(trace_ev));
        if (!t->rings[i].ev)
            break;
        t->nrings = i + 1;
    }
    if (!t || !t->path || t->nrings < n) {
        fprintf(stderr, "smarm: no memory for the trace rings\n");
        for (int i = 0; t && i < t->nrings; i++)
            free(t->rings[i].ev);
        if (t) {
            free(t->rings);
            free(t->path);
        }
        free(t);
        return;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->t0 = park_now_ns();
    for (int i = 0; i < n; i++)
        rt->scheds[i].trace = &t->rings[i];
    rt->trace = t;
}

void trace_keep_name(smarm_runtime *rt, uint64_t pid, const char *name)
{
    struct trace *t = rt->trace;
    trace_name *tn = malloc(sizeof *tn);
    if (!tn || !(tn->name = strdup(name))) {
        free(tn);
        return;
    }
    tn->pid = pid;
    pthread_mutex_lock(&t->lock);
    tn->next = t->names;
    t->names = tn;
    pthread_mutex_unlock(&t->lock);
}

/* The slice title of pid: "<0.I.G>" and its name, if it has or had one. */
RACY_READS static void title_of(smarm_runtime *rt, struct trace *t, uint64_t pid, char *buf,
                                size_t n)
{
    char name[64] = "";
    for (trace_name *tn = t->names; tn; tn = tn->next)
        if (tn->pid == pid) {
            snprintf(name, sizeof name, "%s", tn->name);
            break;
        }
    slot *sl = name[0] ? NULL : slot_of(&rt->slots, pid);
    if (sl) {
        uint64_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
        enum slot_state st = slot_word_state(w);
        if (slot_word_gen(w) == pid_gen(pid) && st != SLOT_VACANT && st != SLOT_DONE)
            registry_name_of(rt, &rt->actors[pid_index(pid)], name, sizeof name);
    }
    /* names come from Lua strings: keep the JSON well-formed */
    for (char *c = name; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            *c = '?';
    snprintf(buf, n, "<0.%u.%u>%s%s", pid_index(pid), pid_gen(pid), name[0] ? " " : "", name);
}

static const char *leave_name(uint32_t leave)
{
    switch (leave) {
    case LEAVE_YIELD:
    case LEAVE_YIELD_CO:
        return "yield";
    case LEAVE_PARK_STACK:
    case LEAVE_PARK_CO:
    case LEAVE_PARK_HOT:
        return "park";
    case LEAVE_DONE:
        return "done";
    case LEAVE_BLOCKING:
        return "blocking";
    }
    return "?";
}

/* ns as microseconds with three decimals, in integers (printf's %f costs far more) */
#define US_FMT "%" PRIu64 ".%03u"
#define US(ns) (ns) / 1000, (unsigned)((ns) % 1000)

/* An instant event of an actor, "CAT TITLE" on thread tid at ns after the trace's start, up
 * to its args' pid: the caller adds its other args (or none) and closes with "}}". */
static void instant(FILE *f, const char *cat, const char *title, int tid, uint64_t ns, uint64_t pid)
{
    fprintf(f,
            ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"%s\",\"name\":\"%s %s\",\"pid\":1,"
            "\"tid\":%d,\"ts\":" US_FMT ",\"args\":{\"pid\":%" PRIu64,
            cat, cat, title, tid, US(ns), pid);
}

RACY_READS static void write_ring(smarm_runtime *rt, struct trace *t, FILE *f, int tid,
                                  trace_ring *r, int *first)
{
    uint64_t n = atomic_load_explicit(&r->n, memory_order_acquire);
    uint64_t from = n > TRACE_RING ? n - TRACE_RING : 0;
    if (n == 0)
        return;
    fprintf(f,
            "%s\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%d,"
            "\"args\":{\"name\":\"%s %d\"}}",
            *first ? "" : ",", tid, tid < rt->nsched ? "scheduler" : "spare scheduler", tid);
    *first = 0;
    char title[96];
    uint64_t open_pid = 0, open_ts = 0;
    for (uint64_t i = from; i < n; i++) {
        trace_ev e = r->ev[i & (TRACE_RING - 1)];
        if (e.ts < t->t0)
            continue; /* torn by a write racing this read (SIGUSR1) */
        switch (e.kind) {
        case TRACE_BEGIN:
            open_pid = e.pid;
            open_ts = e.ts;
            break;
        case TRACE_END:
            if (open_pid != e.pid || e.ts < open_ts)
                break; /* its begin fell out of the ring */
            title_of(rt, t, e.pid, title, sizeof title);
            fprintf(f,
                    ",\n{\"ph\":\"X\",\"cat\":\"actor\",\"name\":\"%s\",\"pid\":1,\"tid\":%d,"
                    "\"ts\":" US_FMT ",\"dur\":" US_FMT ",\"args\":{\"pid\":%" PRIu64
                    ",\"left\":\"%s\"}}",
                    title, tid, US(open_ts - t->t0), US(e.ts - open_ts), e.pid, leave_name(e.aux));
            if (e.aux == LEAVE_PARK_STACK || e.aux == LEAVE_PARK_CO || e.aux == LEAVE_PARK_HOT) {
                instant(f, "park", title, tid, e.ts - t->t0, e.pid);
                fputs("}}", f);
            }
            open_pid = 0;
            break;
        case TRACE_SPAWN:
            title_of(rt, t, e.pid, title, sizeof title);
            instant(f, "spawn", title, tid, e.ts - t->t0, e.pid);
            fprintf(f, ",\"parent\":%" PRIu64 "}}", e.arg);
            break;
        case TRACE_EXIT:
            title_of(rt, t, e.pid, title, sizeof title);
            instant(f, "exit", title, tid, e.ts - t->t0, e.pid);
            fprintf(f, ",\"reason\":\"%s\"}}",
                    e.aux < ENDED_CLASSES ? exit_class_names[e.aux] : "other");
            break;
        case TRACE_SEND:
            fprintf(f,
                    ",\n{\"ph\":\"s\",\"cat\":\"message\",\"name\":\"send\",\"id\":\"%" PRIx64
                    "\",\"pid\":1,\"tid\":%d,\"ts\":" US_FMT ",\"args\":{\"from\":%" PRIu64
                    ",\"to\":%" PRIu64 "}}",
                    e.arg, tid, US(e.ts - t->t0), e.pid, e.arg2);
            break;
        case TRACE_TAKE:
            fprintf(f,
                    ",\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"message\",\"name\":\"send\","
                    "\"id\":\"%" PRIx64 "\",\"pid\":1,\"tid\":%d,\"ts\":" US_FMT "}",
                    e.arg, tid, US(e.ts - t->t0));
            break;
        case TRACE_WAKE:
            title_of(rt, t, e.pid, title, sizeof title);
            instant(f, "wake", title, tid, e.ts - t->t0, e.pid);
            fprintf(f, ",\"by\":%" PRIu64 "}}", e.arg);
            break;
        }
    }
}

RACY_READS void trace_flush(smarm_runtime *rt)
{
    struct trace *t = rt->trace;
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", t->path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "smarm: cannot write the trace to %s: %s\n", tmp, strerror(errno));
        pthread_mutex_unlock(&t->lock);
        return;
    }
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n{\"ph\":\"M\",\"name\":"
          "\"process_name\",\"pid\":1,\"args\":{\"name\":\"smarm-lua\"}}",
          f);
    int first = 0;
    for (int i = 0; i < t->nrings; i++)
        write_ring(rt, t, f, i, &t->rings[i], &first);
    fputs("\n]}\n", f);
    /* renamed into place: a reader never sees half a file */
    if (fclose(f) != 0 || rename(tmp, t->path) != 0)
        fprintf(stderr, "smarm: cannot write the trace to %s: %s\n", t->path, strerror(errno));
    pthread_mutex_unlock(&t->lock);
}

void trace_stop(smarm_runtime *rt)
{
    struct trace *t = rt->trace;
    if (!t)
        return;
    trace_flush(rt);
    rt->trace = NULL;
    for (int i = 0; i < t->nrings; i++) {
        if (rt->scheds)
            rt->scheds[i].trace = NULL;
        free(t->rings[i].ev);
    }
    while (t->names) {
        trace_name *tn = t->names;
        t->names = tn->next;
        free(tn->name);
        free(tn);
    }
    pthread_mutex_destroy(&t->lock);
    free(t->rings);
    free(t->path);
    free(t);
}
