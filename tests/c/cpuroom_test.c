/* Tests of the CPU room sampler (base/cpuroom.c) over stat files written here: the sums of
 * the mask's cpuN lines only, windows too short to say anything, this process's own time
 * subtracted from the busy time, a line cut at the end of the read, an unreadable file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cpuroom.h"

static char path[64];

static void write_stat(const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* a stat file's text: the aggregate line, cpu0..cpu2 with (busy user, idle) ticks each, and
 * a line that is no CPU's */
static void write_cpus(uint64_t u0, uint64_t i0, uint64_t u1, uint64_t i1, uint64_t u2, uint64_t i2)
{
    char text[512];
    snprintf(text, sizeof text,
             "cpu  %llu 0 0 %llu 0 0 0 0 0 0\n"
             "cpu0 %llu 0 0 %llu 0 0 0 0 0 0\n"
             "cpu1 %llu 0 0 %llu 0 0 0 0 0 0\n"
             "cpu2 %llu 0 0 %llu 0 0 0 0 0 0\n"
             "intr 12345 1 2 3\n",
             (unsigned long long)(u0 + u1 + u2), (unsigned long long)(i0 + i1 + i2),
             (unsigned long long)u0, (unsigned long long)i0, (unsigned long long)u1,
             (unsigned long long)i1, (unsigned long long)u2, (unsigned long long)i2);
    write_stat(text);
}

/* opens path with the mask cpu0 and cpu1 (whatever this machine's affinity) */
static void open_two(cpuroom *c)
{
    cpuroom_open(c, path);
    assert_true(c->fd >= 0);
    memset(c->mask, 0, sizeof c->mask);
    c->mask[0] = 3;
}

static int setup(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "/tmp/cpuroom_test.%d", (int)getpid());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static void parse_sums_the_masks_cpu_lines(void **state)
{
    (void)state;
    cpuroom c;
    write_cpus(0, 0, 0, 0, 0, 0);
    open_two(&c);
    uint64_t busy, total;
    const char *text = "cpu  9 9 9 9 9 9 9 9 0 0\n"
                       "cpu0 1 2 3 100 10 4 5 6 7 0\n"
                       "cpu1 10 0 0 50 0 0 0 0 0 0\n"
                       "cpu2 1000 0 0 0 0 0 0 0 0 0\n"
                       "intr 1 2 3\n";
    assert_int_equal(cpuroom_parse(&c, text, &busy, &total), 2);
    /* user nice system irq softirq steal are busy, idle and iowait not; guest is in user */
    assert_int_equal(busy, 1 + 2 + 3 + 4 + 5 + 6 + 10);
    assert_int_equal(total, busy + 100 + 10 + 50);
    /* a line cut where the read ended counts for nothing */
    assert_int_equal(cpuroom_parse(&c, "cpu0 1 0 0 1 0 0 0 0 0 0\ncpu1 5 0 0", &busy, &total), 1);
    assert_int_equal(busy, 1);
    assert_int_equal(total, 2);
    /* nothing of the mask */
    assert_int_equal(cpuroom_parse(&c, "cpu2 1 0 0 1 0 0 0 0 0 0\n", &busy, &total), 0);
    cpuroom_close(&c);
}

static void room_is_what_other_programs_left(void **state)
{
    (void)state;
    cpuroom c;
    write_cpus(1000, 1000, 1000, 1000, 0, 0);
    open_two(&c);
    /* the first sample only starts the window */
    assert_int_equal(cpuroom_sample(&c, 0), -1);
    /* cpu0 busy the whole window, cpu1 idle, cpu2 (outside the mask) busy: one CPU left */
    write_cpus(1100, 1000, 1000, 1100, 100, 0);
    assert_int_equal(cpuroom_sample(&c, 0), 1000);
    /* the same, but half of cpu0's busy time was this process's: 1.5 CPUs left */
    write_cpus(1200, 1000, 1000, 1200, 200, 0);
    uint64_t self = 50 * 1000000000ull / (uint64_t)c.hz;
    assert_int_equal(cpuroom_sample(&c, self), 1500);
    /* both busy with this process alone: all of it */
    write_cpus(1300, 1000, 1100, 1200, 300, 0);
    assert_int_equal(cpuroom_sample(&c, self + 200 * 1000000000ull / (uint64_t)c.hz), 2000);
    cpuroom_close(&c);
}

static void short_windows_stay_open(void **state)
{
    (void)state;
    cpuroom c;
    write_cpus(0, 0, 0, 0, 0, 0);
    open_two(&c);
    assert_int_equal(cpuroom_sample(&c, 0), -1);
    /* 5 ticks per CPU: too few to say anything, and the window goes on */
    write_cpus(5, 0, 0, 5, 0, 0);
    assert_int_equal(cpuroom_sample(&c, 0), -1);
    /* 20 per CPU since the start: cpu0 busy throughout, cpu1 idle */
    write_cpus(20, 0, 0, 20, 0, 0);
    assert_int_equal(cpuroom_sample(&c, 0), 1000);
    /* counters that went back (a new file, a wrap) start a new window */
    write_cpus(1, 0, 0, 1, 0, 0);
    assert_int_equal(cpuroom_sample(&c, 0), -1);
    /* and so does a CPU of the mask that comes online with its whole history */
    write_cpus(21, 0, 0, 21, 0, 0);
    assert_int_equal(cpuroom_sample(&c, 0), 1000);
    write_stat("cpu0 41 0 0 0 0 0 0 0 0 0\n");
    assert_int_equal(cpuroom_sample(&c, 0), -1);
    write_cpus(61, 0, 5000, 5000, 0, 0);
    assert_int_equal(cpuroom_sample(&c, 0), -1);
    write_cpus(81, 0, 5000, 5020, 0, 0);
    assert_int_equal(cpuroom_sample(&c, 0), 1000);
    cpuroom_close(&c);
}

static void no_file_says_unknown(void **state)
{
    (void)state;
    cpuroom c;
    cpuroom_open(&c, "/nonexistent/stat");
    assert_int_equal(cpuroom_sample(&c, 0), -1);
    cpuroom_close(&c);
    /* this machine's own file gives a number once a window has passed */
    cpuroom_open(&c, NULL);
    if (c.fd >= 0) {
        assert_int_equal(cpuroom_sample(&c, 0), -1);
        int64_t r = -1;
        for (int i = 0; i < 100 && r < 0; i++) {
            usleep(20000);
            struct timespec t;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
            r = cpuroom_sample(&c, (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec);
        }
        assert_true(r >= 0 && r <= (int64_t)c.ncpu * 1000);
    }
    cpuroom_close(&c);
}

int main(void)
{
    alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_sums_the_masks_cpu_lines),
        cmocka_unit_test(room_is_what_other_programs_left),
        cmocka_unit_test(short_windows_stay_open),
        cmocka_unit_test(no_file_says_unknown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
