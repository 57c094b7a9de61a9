/* The FFI surface of smarm.logger (bindings/smarm_ffi.h): the flags that tell the runtime's
 * own reports where to go, and the wall clock of event timestamps. */
#include <stdatomic.h>

#include "smarm_ffi.h"
#include "core/logsink.h"
#include "core/runtime.h"
#include "core/scheduler.h"

void smarm_ffi_log_flags(uint32_t flags)
{
    sched *s = sched_current();
    if (s)
        atomic_store_explicit(&s->rt->log_flags, flags, memory_order_relaxed);
}

double smarm_ffi_wall_time(void) { return log_wall_time(); }
