/* The per-thread state of critical sections (see critical.h). */
#include "base/critical.h"

__thread int crit_held __attribute__((tls_model("initial-exec")));
__thread uintptr_t crit_stack_floor __attribute__((tls_model("initial-exec")));

void crit_stack_exhausted(void)
{
    /* the top byte of the guard: floor - margin is the stack's lowest usable byte */
    volatile char *guard_top = (volatile char *)(crit_stack_floor - CRIT_STACK_MARGIN - 1);
    (void)*guard_top;
}
