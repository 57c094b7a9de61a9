/* The room this process has on the machine: how many of the CPUs it may run on were not
 * busy with other programs over a window of time. Read from /proc/stat's per-CPU lines (the
 * CPUs of the process's affinity mask) and this process's CPU clock: the CPUs' busy time
 * minus this process's own is what other programs took.
 *
 * The scheduler asks before a second thread takes over part of a busy scheduler's work
 * (a polled backlog, see core/scheduler.c): when other programs keep every other CPU busy
 * (a load generator on the same two cores, a build), the woken thread only time-slices with
 * them, and the work costs more spread over two threads than kept on one. */
#ifndef SMARM_CPUROOM_H
#define SMARM_CPUROOM_H

#include <stddef.h>
#include <stdint.h>

/* CPU ids the affinity mask can name here */
#define CPUROOM_MAX_CPUS 1024

typedef struct cpuroom {
    int fd;   /* the stat file, -1 when it cannot be read */
    int ncpu; /* CPUs in the affinity mask */
    long hz;  /* the stat file's ticks per second */
    int seen; /* of the mask's CPUs, those the stat file listed at the last sample (0: none) */
    uint64_t busy, total; /* ticks of the mask's CPUs at the last sample */
    uint64_t self_ns;     /* this process's CPU time at the last sample */
    uint64_t mask[CPUROOM_MAX_CPUS / 64];
    char *buf;
    size_t cap;
} cpuroom;

/* Opens path (NULL: /proc/stat) for the CPUs of this process's affinity mask. Without the
 * file (or the mask) every sample says "unknown". */
void cpuroom_open(cpuroom *c, const char *path);
void cpuroom_close(cpuroom *c);

/* Room since the last sample, in thousandths of a CPU: the mask's CPUs minus what other
 * programs used of them. self_ns is this process's CPU time now (CLOCK_PROCESS_CPUTIME_ID).
 * -1 when unknown: the first sample, an unreadable file, or too few ticks since the last
 * (the window then stays open: the next sample covers it too). */
int64_t cpuroom_sample(cpuroom *c, uint64_t self_ns);

/* The same, from the text of a stat file (for tests): the sums of the mask's cpuN lines. */
int cpuroom_parse(const cpuroom *c, const char *text, uint64_t *busy, uint64_t *total);

#endif
