/* arena_map_test: the reservations LuaJIT's allocator takes its arenas' pieces from
 * (base/arena_map.c): pieces carved in order, pages given back reused as they are, the cache
 * bounded, plain mappings outside an arena, the reservation unmapped with its arena (or
 * with the last piece another allocator held), and a LuaJIT arena whose every block lies
 * in its reservation (which needs the build's renaming of lj_alloc.o's mmap calls). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/arena_map.h"
#include "vm/ljx.h"

#define PIECE ((size_t)128 * 1024)
#define RW (PROT_READ | PROT_WRITE)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

static void *piece(size_t len) { return smarm_arena_mmap(NULL, len, RW, ANON, -1, 0); }

/* Whether [p, p + one page) is mapped at all. */
static int mapped(void *p)
{
    long page = sysconf(_SC_PAGESIZE);
    void *at = (void *)((uintptr_t)p & ~(uintptr_t)(page - 1));
    return !(msync(at, (size_t)page, MS_ASYNC) != 0 && errno == ENOMEM);
}

static void pieces_touch_and_come_from_the_reservation(void **state)
{
    (void)state;
    arena_map *m = arena_map_new();
    assert_non_null(m);
    arena_map_creating(m);
    char *a = piece(PIECE), *b = piece(2 * PIECE), *c = piece(PIECE);
    arena_map_creating(NULL);
    assert_true(arena_map_holds(m, a) && arena_map_holds(m, b) && arena_map_holds(m, c));
    assert_ptr_equal(b, a + PIECE);
    assert_ptr_equal(c, b + 2 * PIECE);
    memset(a, 1, 4 * PIECE); /* all of it readable and writable */
    arena_map_stats s;
    arena_map_stats_of(m, &s);
    assert_int_equal(s.handed, 4 * PIECE);
    assert_true(s.committed >= s.handed && s.reserved >= s.committed);
    assert_int_equal(smarm_arena_munmap(a, 4 * PIECE), 0);
    arena_map_close(m);
}

static void a_piece_given_back_is_reused_with_its_pages(void **state)
{
    (void)state;
    arena_map *m = arena_map_new();
    assert_non_null(m);
    arena_map_creating(m);
    char *a = piece(PIECE), *b = piece(PIECE);
    memset(b, 0x5a, PIECE);
    /* the top piece, then one below the top (a hole) */
    assert_int_equal(smarm_arena_munmap(b, PIECE), 0);
    arena_map_stats s;
    arena_map_stats_of(m, &s);
    assert_int_equal(s.handed, PIECE);
    assert_true(s.cached >= PIECE);
    char *again = piece(PIECE);
    assert_ptr_equal(again, b);
    /* the same pages, not fresh zero ones: no page fault to take them again */
    assert_int_equal(again[0], 0x5a);
    assert_int_equal(again[PIECE - 1], 0x5a);
    memset(a, 0x33, PIECE);
    assert_int_equal(smarm_arena_munmap(a, PIECE), 0);
    char *hole = piece(PIECE);
    assert_ptr_equal(hole, a);
    assert_int_equal(hole[7], 0x33);
    arena_map_creating(NULL);
    assert_int_equal(smarm_arena_munmap(a, 2 * PIECE), 0);
    arena_map_stats_of(m, &s);
    assert_int_equal(s.handed, 0);
    arena_map_close(m);
}

static void the_cache_is_bounded(void **state)
{
    (void)state;
    arena_map *m = arena_map_new();
    assert_non_null(m);
    size_t big = (size_t)96 << 20; /* address space only: never touched */
    arena_map_creating(m);
    char *p = piece(big);
    arena_map_creating(NULL);
    assert_true(arena_map_holds(m, p));
    arena_map_stats s;
    arena_map_stats_of(m, &s);
    assert_true(s.committed >= big);
    assert_int_equal(smarm_arena_munmap(p, big), 0);
    arena_map_stats_of(m, &s);
    assert_int_equal(s.handed, 0);
    assert_true(s.cached < big / 2);
    assert_true(s.cached >= ((size_t)16 << 20)); /* a swing's worth is kept */
    arena_map_close(m);
}

static void mremap_shrinks_and_grows_in_place(void **state)
{
    (void)state;
    arena_map *m = arena_map_new();
    assert_non_null(m);
    arena_map_creating(m);
    char *p = piece(4 * PIECE);
    arena_map_creating(NULL);
    assert_ptr_equal(smarm_arena_mremap(p, 4 * PIECE, PIECE, 0), p);
    arena_map_stats s;
    arena_map_stats_of(m, &s);
    assert_int_equal(s.handed, PIECE);
    assert_ptr_equal(smarm_arena_mremap(p, PIECE, 3 * PIECE, 0), p);
    memset(p, 2, 3 * PIECE);
    arena_map_stats_of(m, &s);
    assert_int_equal(s.handed, 3 * PIECE);
    /* not at the top: it cannot grow where it is */
    arena_map_creating(m);
    char *q = piece(PIECE);
    arena_map_creating(NULL);
    assert_ptr_equal(smarm_arena_mremap(p, 3 * PIECE, 4 * PIECE, 0), MAP_FAILED);
    assert_int_equal(smarm_arena_munmap(q, PIECE), 0);
    assert_int_equal(smarm_arena_munmap(p, 3 * PIECE), 0);
    arena_map_close(m);
}

static void outside_an_arena_the_mapping_is_plain(void **state)
{
    (void)state;
    arena_map *m = arena_map_new();
    assert_non_null(m);
    char *p = piece(PIECE); /* no arena being made, no hook: a mapping of its own */
    assert_ptr_not_equal(p, MAP_FAILED);
    assert_false(arena_map_holds(m, p));
    /* the bounds the allocation function tests a block against say the same */
    uintptr_t lo;
    size_t span;
    arena_map_bounds(m, &lo, &span);
    assert_true(span > 0);
    assert_false((uintptr_t)p - lo < span);
    arena_map_bounds(NULL, &lo, &span); /* no reservation: nothing lies inside */
    assert_int_equal(span, 0);
    p[0] = 1;
    char *q = smarm_arena_mremap(p, PIECE, 4 * PIECE, MREMAP_MAYMOVE);
    assert_ptr_not_equal(q, MAP_FAILED);
    assert_int_equal(q[0], 1);
    assert_int_equal(smarm_arena_munmap(q, 4 * PIECE), 0);
    assert_false(mapped(q));
    arena_map_close(m);
}

static void closing_unmaps_the_reservation(void **state)
{
    (void)state;
    int live = arena_map_live();
    arena_map *m = arena_map_new();
    assert_non_null(m);
    assert_int_equal(arena_map_live(), live + 1);
    arena_map_creating(m);
    char *p = piece(PIECE);
    arena_map_creating(NULL);
    p[0] = 1;
    assert_int_equal(smarm_arena_munmap(p, PIECE), 0);
    assert_true(mapped(p)); /* kept for reuse */
    arena_map_close(m);
    assert_int_equal(arena_map_live(), live);
    assert_false(mapped(p));
}

static void a_piece_held_elsewhere_keeps_the_reservation(void **state)
{
    (void)state;
    int live = arena_map_live();
    arena_map *m = arena_map_new();
    assert_non_null(m);
    arena_map_creating(m);
    char *p = piece(PIECE);
    arena_map_creating(NULL);
    arena_map_close(m); /* the arena is gone; another allocator still holds p */
    assert_int_equal(arena_map_live(), live + 1);
    memset(p, 7, PIECE);
    assert_int_equal(smarm_arena_munmap(p, PIECE), 0);
    assert_int_equal(arena_map_live(), live);
    assert_false(mapped(p));
}

/* The hook, as the runtime's returns the running actor's reservation. */
static arena_map *running;
static arena_map *running_map(void) { return running; }

static void a_luajit_arena_lives_in_its_reservation(void **state)
{
    (void)state;
    int live = arena_map_live();
    void *ar = ljx_arena_new();
    assert_non_null(ar);
    arena_map *m = ljx_arena_map(ar);
    assert_non_null(m);
    assert_int_equal(arena_map_live(), live + 1);
    void *msp = ljx_arena_msp(ar);
    uintptr_t lo;
    size_t span;
    arena_map_bounds(m, &lo, &span);
    running = m;
    arena_map_set_running(running_map);
    enum { N = 20000, SIZE = 1000 }; /* some 20 MB: many pieces */
    static void *blocks[N];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            blocks[i] = lj_alloc_f(msp, NULL, 0, SIZE);
            assert_non_null(blocks[i]);
            assert_true(arena_map_holds(m, blocks[i]));
            assert_true((uintptr_t)blocks[i] - lo < span);
            memset(blocks[i], i, SIZE);
        }
        arena_map_stats s;
        arena_map_stats_of(m, &s);
        assert_true(s.handed >= (size_t)N * SIZE);
        /* the pieces touch, so the allocator holds them as one: little beyond the blocks */
        assert_true(s.handed < (size_t)N * SIZE + ((size_t)4 << 20));
        for (int i = 0; i < N; i++)
            lj_alloc_f(msp, blocks[i], SIZE, 0);
    }
    arena_map_set_running(NULL);
    running = NULL;
    ljx_arena_free(ar);
    assert_int_equal(arena_map_live(), live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pieces_touch_and_come_from_the_reservation),
        cmocka_unit_test(a_piece_given_back_is_reused_with_its_pages),
        cmocka_unit_test(the_cache_is_bounded),
        cmocka_unit_test(mremap_shrinks_and_grows_in_place),
        cmocka_unit_test(outside_an_arena_the_mapping_is_plain),
        cmocka_unit_test(closing_unmaps_the_reservation),
        cmocka_unit_test(a_piece_held_elsewhere_keeps_the_reservation),
        cmocka_unit_test(a_luajit_arena_lives_in_its_reservation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
