--- The FFI surface of the runtime: bindings/smarm_ffi.h, declared once per state.
-- Loaded on first use only (ffi and the cdefs cost memory in every state that loads them).
local ffi = require "ffi"

ffi.cdef(require "smarm.cdef")

return ffi.C
