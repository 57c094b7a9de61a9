/* The runtime's own reports: see logsink.h. The event is built from C in the message format
 * so the logger actor receives it as any message: {smarm_log = {level, kind, pid, what,
 * text, time, domain = {"smarm", "runtime"}}}. */
#include "core/logsink.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/critical.h"
#include "base/mailbox.h"
#include "base/slot.h"
#include "base/wire.h"
#include "core/registry.h"
#include "core/runtime.h"
#include "core/scheduler.h"

static const char *const level_names[] = {"emergency", "alert",  "critical", "error",
                                          "warning",   "notice", "info",     "debug"};

double log_wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int put_kv(wire_buf *b, const char *k, const char *v)
{
    return wire_put_string(b, k, strlen(k)) | wire_put_string(b, v, strlen(v));
}

static void forward(smarm_runtime *rt, int level, const char *kind, uint64_t pid, const char *what,
                    const char *detail)
{
    uint64_t to = registry_whereis(rt, "smarm.logger");
    if (!to)
        return;
    wire_buf b;
    wire_buf_init(&b);
    int bad = wire_put_table(&b, 0, 1) | wire_put_string(&b, "smarm_log", 9);
    bad |= wire_put_table(&b, 0, 6 + (pid != 0));
    bad |= put_kv(&b, "level", level_names[level]) | put_kv(&b, "kind", kind);
    bad |= put_kv(&b, "what", what) | put_kv(&b, "text", detail);
    bad |= wire_put_string(&b, "time", 4) | wire_put_number(&b, log_wall_time());
    if (pid)
        bad |= wire_put_string(&b, "pid", 3) | wire_put_number(&b, (double)pid);
    bad |= wire_put_string(&b, "domain", 6) | wire_put_table(&b, 2, 0);
    bad |= wire_put_string(&b, "smarm", 5) | wire_put_string(&b, "runtime", 7);
    msg *m = bad ? NULL : msg_new(b.data, b.len);
    wire_buf_free(&b);
    if (m)
        sched_send(rt, to, m); /* a logger gone meanwhile frees it */
}

void log_report(smarm_runtime *rt, int level, const char *kind, uint64_t pid, const char *what,
                const char *detail)
{
    uint32_t flags = atomic_load_explicit(&rt->log_flags, memory_order_relaxed);
    if (!(flags & LOG_STDERR_OFF)) {
        mutex_lock(&rt->err_lock);
        if (pid)
            fprintf(stderr, "smarm: actor <0.%u.%u> %s: %s\n", pid_index(pid), pid_gen(pid), what,
                    detail);
        else
            fprintf(stderr, "smarm: %s: %s\n", what, detail);
        fflush(stderr);
        mutex_unlock(&rt->err_lock);
    }
    if (flags & LOG_FORWARD)
        forward(rt, level, kind, pid, what, detail);
}
