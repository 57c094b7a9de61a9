/* See cpuroom.h. */
#include "base/cpuroom.h"

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ticks per CPU a window needs before it says anything (10 at USER_HZ 100: 0.1 s) */
#define MIN_TICKS_PER_CPU 10

void cpuroom_open(cpuroom *c, const char *path)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    int top = 0;
    for (int i = 0; i < CPUROOM_MAX_CPUS && i < CPU_SETSIZE; i++) {
        if (CPU_ISSET(i, &set)) {
            c->mask[i / 64] |= 1ull << (i % 64);
            c->ncpu++;
            top = i;
        }
    }
    c->hz = sysconf(_SC_CLK_TCK);
    if (c->ncpu == 0 || c->hz <= 0)
        return;
    /* the cpu lines come first: the aggregate, then one per CPU (under 128 bytes each) */
    c->cap = 4096 + 128 * (size_t)(top + 1);
    c->buf = malloc(c->cap);
    if (!c->buf)
        return;
    c->fd = open(path ? path : "/proc/stat", O_RDONLY | O_CLOEXEC);
}

void cpuroom_close(cpuroom *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    c->buf = NULL;
    c->fd = -1;
}

/* the decimal at *p (after spaces); advances p */
static uint64_t number(const char **p)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    uint64_t v = 0;
    while (*s >= '0' && *s <= '9')
        v = v * 10 + (uint64_t)(*s++ - '0');
    *p = s;
    return v;
}

int cpuroom_parse(const cpuroom *c, const char *text, uint64_t *busy, uint64_t *total)
{
    int seen = 0;
    uint64_t b = 0, t = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol) /* a line cut at the end of the read */
            break;
        if (p[0] == 'c' && p[1] == 'p' && p[2] == 'u' && p[3] >= '0' && p[3] <= '9') {
            const char *q = p + 3;
            uint64_t id = number(&q);
            if (id < CPUROOM_MAX_CPUS && (c->mask[id / 64] >> (id % 64) & 1)) {
                /* user nice system idle iowait irq softirq steal (guest time is in user) */
                uint64_t f[8];
                for (int i = 0; i < 8; i++)
                    f[i] = number(&q);
                uint64_t idle = f[3] + f[4];
                uint64_t used = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
                b += used;
                t += used + idle;
                seen++;
            }
        } else if (seen) {
            break; /* past the cpu lines */
        }
        p = eol + 1;
    }
    *busy = b;
    *total = t;
    return seen;
}

int64_t cpuroom_sample(cpuroom *c, uint64_t self_ns)
{
    if (c->fd < 0)
        return -1;
    ssize_t n = pread(c->fd, c->buf, c->cap - 1, 0);
    if (n <= 0)
        return -1;
    c->buf[n] = '\0';
    uint64_t busy, total;
    int seen = cpuroom_parse(c, c->buf, &busy, &total);
    if (seen == 0)
        return -1;
    /* the first sample, counters that went back (a new file, a wrap), or CPUs that came or
     * went (hotplug: a new line brings its whole history): a new window */
    if (seen != c->seen || busy < c->busy || total < c->total) {
        c->seen = seen;
        c->busy = busy;
        c->total = total;
        c->self_ns = self_ns;
        return -1;
    }
    uint64_t dt = total - c->total;
    if (dt < (uint64_t)MIN_TICKS_PER_CPU * (uint64_t)seen)
        return -1; /* the window stays open */
    uint64_t db = busy - c->busy;
    uint64_t dself =
        self_ns > c->self_ns ? (self_ns - c->self_ns) * (uint64_t)c->hz / 1000000000ull : 0;
    uint64_t others = db > dself ? db - dself : 0;
    c->busy = busy;
    c->total = total;
    c->self_ns = self_ns;
    /* seen CPUs, less the share of their time other programs took */
    int64_t room = (int64_t)seen * 1000 - (int64_t)(others * 1000 * (uint64_t)seen / dt);
    return room < 0 ? 0 : room;
}
