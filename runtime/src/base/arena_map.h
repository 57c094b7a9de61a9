/* Address space for the arenas of LuaJIT's allocator (vm/ljx.c). LuaJIT's allocator grows
 * by mapping 128 KiB pieces and merges a piece with its neighbour only when the two touch;
 * in a process whose other mappings (actor stacks, heap chunks, glibc's arenas) land in
 * between, its pieces scatter, it ends with more of them, and it trims and maps again, each
 * time on fresh zero pages. So the build renames the mmap, munmap and mremap calls of
 * LuaJIT's allocator (lj_alloc.o only; configure.py) to the three functions below, and an
 * arena takes its pieces from a reservation of its own: carved in order from the bottom, so
 * they always touch; a piece given back stays mapped (its pages are reused without a fault)
 * up to a bound; the reservation goes back to the system when the arena is destroyed.
 *
 * Which reservation a new piece comes from: the one being set up on this thread
 * (arena_map_creating), else the one of the actor running on this thread (the hook). The
 * runtime's other states do not use LuaJIT's allocator (the template state allocates with
 * malloc); should some other user of it (a C module's luaL_newstate) get a piece of a
 * reservation, the reservation outlives its arena until the piece comes back: a
 * reservation is unmapped only when none of it is handed out. */
#ifndef SMARM_ARENA_MAP_H
#define SMARM_ARENA_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct arena_map arena_map;

/* A new reservation (address space only), or NULL when none can be had (the arena then
 * maps its pieces as LuaJIT does). */
arena_map *arena_map_new(void);

/* The arena that used m was destroyed: m goes back to the system (at once, or when the
 * last piece another allocator holds comes back). NULL is ignored. */
void arena_map_close(arena_map *m);

/* While m is set (not NULL) on this thread, new pieces come from m (an arena being made). */
void arena_map_creating(arena_map *m);

/* The hook: the reservation of the actor running on the calling thread, or NULL. */
void arena_map_set_running(arena_map *(*running)(void));

typedef struct arena_map_stats {
    size_t reserved;  /* address space */
    size_t handed;    /* bytes of pieces LuaJIT's allocator holds */
    size_t committed; /* bytes readable and writable (handed, cached, or in holes) */
    size_t cached;    /* committed bytes above the highest handed piece, kept for reuse */
} arena_map_stats;

void arena_map_stats_of(arena_map *m, arena_map_stats *out);
/* Whether p lies in m's reservation. */
int arena_map_holds(arena_map *m, const void *p);
/* m's reservation: [*lo, *lo + *span) (an empty one for NULL). */
void arena_map_bounds(arena_map *m, uintptr_t *lo, size_t *span);
/* Reservations not yet given back, in the whole process. */
int arena_map_live(void);

/* The calls LuaJIT's allocator makes instead of mmap, munmap and mremap. */
void *smarm_arena_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int smarm_arena_munmap(void *addr, size_t len);
void *smarm_arena_mremap(void *old, size_t old_len, size_t new_len, int flags, ...);

#endif
