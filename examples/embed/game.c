/* A game loop that embeds smarm: the main thread runs a fixed-rate loop and, each frame,
 * asks every NPC (an actor, under a supervisor) for its move and gathers the replies
 * within the frame. The NPCs call the game's own C code (engine.step, preloaded). One NPC
 * is made to crash halfway: its supervisor restarts it while the loop keeps its rate.
 *
 *   game DIR NPCS FRAMES [HZ]      DIR holds world.lua, npc.lua and frame.lua
 *
 * Prints what happened, and a RESULT line with the host-side time per frame (sending and
 * gathering, not the sleep to the next frame). Build against an installed smarm:
 *   cc -O2 -o game game.c $(pkg-config --cflags --libs smarm) */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <lauxlib.h>
#include <smarm.h>

static _Atomic uint64_t engine_calls;

/* engine.spawn_point(id) -> x, y */
static int engine_spawn_point(lua_State *L)
{
    int id = (int)luaL_checkinteger(L, 1);
    lua_pushnumber(L, (id % 100) * 10.0);
    lua_pushnumber(L, (id / 100) * 10.0);
    return 2;
}

/* engine.step(x, y, dt, id) -> x, y: the game's movement rule, in C */
static int engine_step(lua_State *L)
{
    double x = luaL_checknumber(L, 1), y = luaL_checknumber(L, 2);
    double dt = luaL_checknumber(L, 3);
    int id = (int)luaL_checkinteger(L, 4);
    double vx = (id % 7) - 3, vy = (id % 5) - 2;
    atomic_fetch_add_explicit(&engine_calls, 1, memory_order_relaxed);
    lua_pushnumber(L, x + vx * dt);
    lua_pushnumber(L, y + vy * dt);
    return 2;
}

static int open_engine(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"spawn_point", engine_spawn_point}, {"step", engine_step}, {NULL, NULL}};
    lua_newtable(L);
    luaL_register(L, NULL, fns);
    return 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
    struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

static int die(const char *what, int rc)
{
    fprintf(stderr, "game: %s: %s\n", what, smarm_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: game DIR NPCS FRAMES [HZ]\n");
        return 2;
    }
    const char *dir = argv[1];
    int npcs = atoi(argv[2]), frames = atoi(argv[3]);
    double hz = argc > 4 ? atof(argv[4]) : 60;
    if (npcs < 1 || frames < 1 || !(hz > 0)) {
        fprintf(stderr, "game: NPCS, FRAMES and HZ must be positive\n");
        return 2;
    }
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.app_dir = dir; /* require "npc" finds DIR/npc.lua */
    smarm_runtime *rt;
    int rc = smarm_runtime_new(&cfg, &rt);
    if (rc)
        return die("runtime", rc);
    if ((rc = smarm_preload(rt, "engine", open_engine)))
        return die("preload", rc);
    char world[4096], frame_lua[4096], nbuf[16];
    snprintf(world, sizeof world, "%s/world.lua", dir);
    snprintf(frame_lua, sizeof frame_lua, "%s/frame.lua", dir);
    snprintf(nbuf, sizeof nbuf, "%d", npcs);
    char *args[] = {nbuf};
    if ((rc = smarm_start(rt, world, 1, args)))
        return die("start", rc);

    /* the main thread becomes an actor: its Lua state runs frame.lua */
    smarm_host *h = smarm_host_open(rt);
    if (!h)
        return die("host", SMARM_ESTOPPED);
    lua_State *L = smarm_host_lua(h);
    if (luaL_loadfile(L, frame_lua) != 0) {
        fprintf(stderr, "game: %s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_pushinteger(L, npcs);
    if (lua_pcall(L, 1, 1, 0) != 0) { /* waits until every NPC is up */
        fprintf(stderr, "game: %s\n", lua_tostring(L, -1));
        return 1;
    }
    int frame_fn = luaL_ref(L, LUA_REGISTRYINDEX);
    printf("game: %d NPCs, %d frames at %g Hz\n", npcs, frames, hz);

    double period = 1.0 / hz, budget = period * 0.6;
    int crash_at = frames >= 4 ? frames / 2 : 0, back_at = 0;
    uint64_t crashed_pid = 0;
    long expected = 0, got_total = 0;
    int late = 0;
    double host_sum = 0, host_max = 0, start = now_s(), next = start;
    for (int f = 1; f <= frames; f++) {
        double t0 = now_s();
        if (f == crash_at)
            crashed_pid = smarm_whereis(rt, "npc1");
        lua_rawgeti(L, LUA_REGISTRYINDEX, frame_fn);
        lua_pushinteger(L, f);
        lua_pushnumber(L, period);
        lua_pushnumber(L, budget);
        lua_pushinteger(L, f == crash_at ? 1 : 0);
        if (lua_pcall(L, 4, 2, 0) != 0) {
            fprintf(stderr, "game: frame %d: %s\n", f, lua_tostring(L, -1));
            return 1;
        }
        long sent = (long)lua_tointeger(L, -2), got = (long)lua_tointeger(L, -1);
        lua_pop(L, 2);
        expected += sent;
        got_total += got;
        if (crashed_pid && !back_at) {
            uint64_t now_pid = smarm_whereis(rt, "npc1");
            if (now_pid && now_pid != crashed_pid)
                back_at = f;
        }
        double dt = now_s() - t0;
        host_sum += dt;
        if (dt > host_max)
            host_max = dt;
        next += period;
        if (now_s() > next) {
            late++;
            next = now_s(); /* a late frame does not make the next ones hurry */
        } else {
            sleep_until(next);
        }
    }
    double wall = now_s() - start;
    luaL_unref(L, LUA_REGISTRYINDEX, frame_fn);
    smarm_host_close(h);
    int status = -1;
    rc = smarm_stop(rt, 5, &status);
    if (crash_at)
        printf("npc1 crashed at frame %d and was restarted: registered again, as a new "
               "actor, by frame %d\n",
               crash_at, back_at);
    printf("frames %d in %.2f s (%.1f Hz), late frames %d\n", frames, wall, frames / wall, late);
    printf("replies %ld of %ld within their frame; engine.step called %llu times\n", got_total,
           expected, (unsigned long long)atomic_load(&engine_calls));
    printf("host time per frame: mean %.1f us, max %.1f us\n", host_sum / frames * 1e6,
           host_max * 1e6);
    printf("RESULT npcs=%d us_per_frame=%.1f us_per_frame_max=%.1f\n", npcs,
           host_sum / frames * 1e6, host_max * 1e6);
    printf("stopped: %s, root status %d\n", smarm_strerror(rc), status);
    smarm_runtime_free(rt);
    return rc == 0 && status == 0 && (!crash_at || back_at) ? 0 : 1;
}
