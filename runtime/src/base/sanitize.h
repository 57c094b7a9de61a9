/* What the sanitizers must be told: LuaJIT raises errors by resetting the C
 * stack pointer, which ASan never sees. A C function that a Lua error can
 * unwind through is therefore left uninstrumented, so no redzone of its
 * locals stays poisoned on a stack that is used again afterwards. */
#ifndef SMARM_SANITIZE_H
#define SMARM_SANITIZE_H

/* Introspection reads another actor's fields while it runs, on purpose (like
 * ps: each field is true at some instant); TSan is told not to watch those reads. */
#if defined(SMARM_TSAN)
#define RACY_READS __attribute__((no_sanitize("thread")))
#else
#define RACY_READS
#endif

#if defined(SMARM_ASAN)
#include <sanitizer/asan_interface.h>
#define LUA_UNWOUND __attribute__((no_sanitize("address")))
/* every function between these two lines is LUA_UNWOUND */
/* clang-format off: _Pragma needs its string in one piece */
// clang-format off
#define LUA_UNWOUND_BEGIN _Pragma("clang attribute push(__attribute__((no_sanitize(\"address\"))), apply_to = function)")
// clang-format on
#define LUA_UNWOUND_END _Pragma("clang attribute pop")
#define SANITIZE_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define LUA_UNWOUND
#define LUA_UNWOUND_BEGIN
#define LUA_UNWOUND_END
#define SANITIZE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif
