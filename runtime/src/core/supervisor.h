/* Supervisor bookkeeping: the child table in start order, restart decisions per
 * strategy and restart type, and the restart-intensity ring. The supervisor's
 * loop (lua/smarm/supervisor.lua) drives it through the FFI; its whole surface
 * is the smarm_ffi_sup_* section of bindings/smarm_ffi.h. */
#ifndef SMARM_SUPERVISOR_H
#define SMARM_SUPERVISOR_H

#include "smarm_ffi.h"

#endif
