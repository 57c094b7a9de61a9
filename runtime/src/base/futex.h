/* The futex system call, as the runtime uses it: private (process-local) waits and wakes
 * on a 32-bit word. */
#ifndef SMARM_BASE_FUTEX_H
#define SMARM_BASE_FUTEX_H

#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleeps while *word == expected, until woken or timeout (relative; NULL = none).
 * 0, or -1 with errno (EAGAIN: the word had changed; ETIMEDOUT; EINTR). */
static inline long futex_wait(void *word, uint32_t expected, const struct timespec *timeout)
{
    return syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, timeout, NULL, 0);
}

/* Wakes up to n sleepers on word (INT_MAX: all). */
static inline void futex_wake(void *word, int n)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

#endif
