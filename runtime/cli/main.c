/* smarm-lua: runs a Lua application as the root actor of a smarm runtime. */
#include <libgen.h>
#include <malloc.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "smarm.h"

static void usage(FILE *f)
{
    fputs("usage: smarm-lua [options] app.lua [args...]\n"
          "       smarm-lua [options] -e CODE [args...]\n"
          "Runs app.lua (or CODE) as the root actor; the run ends when the root ends.\n"
          "  -S N              scheduler threads (default: online CPUs)\n"
          "  -T MS             timeslice in milliseconds (default 2)\n"
          "  --max-actors N    actor slab size (default 1048576)\n"
          "  --blocking-threads N\n"
          "                    threads for smarm.blocking calls (default: the larger of\n"
          "                    8 and twice the schedulers; started as needed)\n"
          "  -e CODE           run CODE as the root actor\n"
          "  --sname NAME      a distributed node NAME[@host] (registers with epmd, which\n"
          "                    is started if needed; Erlang nodes can connect)\n"
          "  --name NAME@HOST  the same with a long (fully qualified) name\n"
          "  --cookie C        the distribution cookie (default: ~/.erlang.cookie)\n"
          "  -v, --version     print the version\n"
          "  -h, --help        this help\n"
          "Exit status: 0 when the root ends normally, 1 when it crashed,\n"
          "2 for a usage error, 128+N after a shutdown caused by signal N.\n"
          "Signals: SIGINT, SIGTERM, SIGHUP shut the root down politely; a second\n"
          "stops every actor at once. SIGUSR1 lists the actors on stderr.\n",
          f);
}

/* fflush, unless another thread holds the stream's lock for long */
static void flush_quietly(FILE *f)
{
    for (int tries = 0; tries < 20; tries++) {
        if (ftrylockfile(f) == 0) {
            fflush_unlocked(f);
            funlockfile(f);
            return;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The option's value: a number in [lo, hi], a whole one if whole is set. */
static int parse_num(const char *opt, const char *s, double lo, double hi, int whole, double *out)
{
    char *end;
    double v = s ? strtod(s, &end) : 0;
    if (!s || *end || !(v >= lo && v <= hi) || (whole && v != (double)(long long)v)) {
        fprintf(stderr, "smarm-lua: %s needs %s between %.15g and %.15g\n", opt,
                whole ? "a whole number" : "a number", lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* s as a Lua long string literal: [==[s]==] with enough '=' that s cannot close it. */
static int lua_quote(char *out, size_t cap, const char *s)
{
    int level = 0;
    char close[80];
    for (; level < 60; level++) {
        snprintf(close, sizeof close, "]%.*s]", level,
                 "============================================================");
        if (!strstr(s, close))
            break;
    }
    const char *eq = "============================================================";
    return snprintf(out, cap, "[%.*s[%s]%.*s]", level, eq, s, level, eq);
}

/* The root chunk of a distributed node: start it, then run the script (or code). */
static int dist_boot(const char *node, int longnames, const char *cookie, const char *script,
                     const char *code, char **out)
{
    size_t cap = strlen(node) + (cookie ? strlen(cookie) : 0) +
                 (script ? strlen(script) : strlen(code)) + 600;
    char *b = malloc(cap), qn[300], *qc = malloc(cap), *qs = malloc(cap);
    if (!b || !qc || !qs || strlen(node) > 200) {
        fputs("smarm-lua: bad node name\n", stderr);
        free(b);
        free(qc);
        free(qs);
        return 0;
    }
    lua_quote(qn, sizeof qn, node);
    if (cookie)
        lua_quote(qc, cap, cookie);
    else
        snprintf(qc, cap, "nil");
    lua_quote(qs, cap, script ? script : code);
    snprintf(b, cap,
             "require('smarm.dist').start_cli(%s, %s, %s) "
             "return assert(%s(%s%s))(...)",
             qn, longnames ? "true" : "false", qc, script ? "loadfile" : "loadstring", qs,
             script ? "" : ", '=(command line)'");
    free(qc);
    free(qs);
    *out = b;
    return 1;
}

int main(int argc, char **argv)
{
    /* actors migrate between scheduler threads, so blocks malloc'd on one are
     * freed on another: per-thread arenas then fragment and resident memory
     * creeps (measured in the soak); a couple of arenas keep it flat */
    mallopt(M_ARENA_MAX, 2);
    smarm_config cfg;
    smarm_config_init(&cfg);
    const char *code = NULL, *script = NULL;
    const char *node = NULL, *cookie = NULL;
    int longnames = 0;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        double v;
        if (strcmp(a, "-S") == 0) {
            if (parse_num("-S", i + 1 < argc ? argv[++i] : NULL, 1, 64, 1, &v) < 0)
                return 2;
            cfg.schedulers = (int)v;
        } else if (strcmp(a, "-T") == 0) {
            if (parse_num("-T", i + 1 < argc ? argv[++i] : NULL, 0.01, 60000, 0, &v) < 0)
                return 2;
            cfg.timeslice_ms = v;
        } else if (strcmp(a, "--max-actors") == 0) {
            if (parse_num("--max-actors", i + 1 < argc ? argv[++i] : NULL, 1, 16777216, 1, &v) < 0)
                return 2;
            cfg.max_actors = (uint32_t)v;
        } else if (strcmp(a, "--blocking-threads") == 0) {
            if (parse_num("--blocking-threads", i + 1 < argc ? argv[++i] : NULL, 1, 1024, 1, &v) <
                0)
                return 2;
            cfg.blocking_threads = (int)v;
        } else if (strcmp(a, "--sname") == 0 || strcmp(a, "--name") == 0 ||
                   strcmp(a, "--cookie") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "smarm-lua: %s needs an argument\n", a);
                return 2;
            }
            if (strcmp(a, "--cookie") == 0) {
                cookie = argv[++i];
            } else {
                longnames = strcmp(a, "--name") == 0;
                node = argv[++i];
            }
        } else if (strcmp(a, "-e") == 0) {
            if (i + 1 >= argc) {
                fputs("smarm-lua: -e needs an argument\n", stderr);
                return 2;
            }
            code = argv[++i];
            i++;
            break;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
            printf("smarm-lua %s\n", SMARM_VERSION);
            return 0;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "smarm-lua: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else {
            break;
        }
    }
    if (!code) {
        if (i >= argc) {
            usage(stderr);
            return 2;
        }
        script = argv[i++];
    }
    char dir[PATH_MAX];
    if (script) {
        snprintf(dir, sizeof dir, "%s", script);
        cfg.app_dir = dirname(dir);
    } else {
        cfg.app_dir = ".";
    }
    char *boot = NULL;
    if (node) {
        /* the node starts before the application: the root runs a prelude that makes it
         * alive, then the script or code */
        if (!dist_boot(node, longnames, cookie, script, code, &boot))
            return 2;
        code = boot;
        script = NULL;
    }
    cfg.handle_signals = 1;
    smarm_runtime *rt;
    int rc = smarm_runtime_new(&cfg, &rt);
    if (rc != 0) {
        fprintf(stderr, "smarm-lua: %s\n", smarm_strerror(rc));
        free(boot);
        return 1;
    }
    int status = 1;
    rc = script ? smarm_run_file(rt, script, argc - i, argv + i, &status)
                : smarm_run_string(rt, code, argc - i, argv + i, &status);
    free(boot);
    int sig = smarm_runtime_signal(rt);
    if (rc != 0) {
        fprintf(stderr, "smarm-lua: %s\n", smarm_strerror(rc));
        status = 1;
    } else if (sig) {
        status = 128 + sig;
    }
    if (smarm_runtime_abandoned(rt)) {
        /* a scheduler thread is still inside an actor's C call (a blocking read,
         * os.execute): exit under it without running exit handlers, and without
         * waiting for a stdio lock that thread may hold */
        flush_quietly(stdout);
        flush_quietly(stderr);
        _exit(status);
    }
    smarm_runtime_free(rt);
    return status;
}
