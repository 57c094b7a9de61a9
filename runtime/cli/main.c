/* smarm-lua: runs a Lua application as the root actor of a smarm runtime. */
#include <libgen.h>
#include <malloc.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "shell_client.h"
#include "smarm.h"

static void usage(FILE *f)
{
    fputs("usage: smarm-lua [options] app.lua [args...]\n"
          "       smarm-lua [options] -e CODE [args...]\n"
          "       smarm-lua [options] [-i]             an interactive shell\n"
          "       smarm-lua --remsh PATH               a shell inside a running application\n"
          "Runs app.lua (or CODE) as the root actor; the run ends when the root ends.\n"
          "app.lua may be - (the chunk is read from standard input).\n"
          "  -S N              scheduler threads (default: online CPUs)\n"
          "  -T MS             timeslice in milliseconds (default 2)\n"
          "  --max-actors N    actor slab size (default 1048576)\n"
          "  --blocking-threads N\n"
          "                    threads for smarm.blocking calls (default: the larger of\n"
          "                    8 and twice the schedulers; started as needed)\n"
          "  --observer [HOST:]PORT\n"
          "                    serve the observer page (live actors, supervision tree,\n"
          "                    scheduler load, /metrics) on HOST (default 127.0.0.1)\n"
          "  --trace FILE      write a trace of the run (Chrome trace-event JSON, for\n"
          "                    Perfetto) to FILE at the end and on SIGUSR1\n"
          "  -e CODE           run CODE as the root actor\n"
          "  -i                a shell (after app.lua, if given); also the default with no\n"
          "                    app.lua when standard input is a terminal\n"
          "  --shell-socket PATH\n"
          "                    shells may attach to the application on this Unix socket\n"
          "                    (made with mode 0600; a path of another user is refused)\n"
          "  --remsh PATH      attach a shell to the application listening on PATH\n"
          "  --watch           reload the loaded modules whose .lua files change under\n"
          "                    app.lua's directory (reports on stderr)\n"
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

/* --remsh PATH: a shell client attached to a running application; no runtime here */
static int remsh(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        fprintf(stderr, "smarm-lua: --remsh: the path is too long\n");
        return 2;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "smarm-lua: --remsh %s: %s\n", path, strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    shell_client_catch_sigint();
    int rc = shell_client_run(fd, 0);
    close(fd);
    return rc == 0 ? 0 : 1;
}

/* The whole of standard input, for smarm-lua - (NULL when out of memory). */
static char *read_stdin(void)
{
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            return NULL;
        if (cap - len < 2) {
            cap *= 2;
            char *p = realloc(buf, cap);
            if (!p)
                free(buf);
            buf = p;
            continue;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, stdin);
        len += n;
        if (n == 0)
            break;
    }
    buf[len] = 0;
    return buf;
}

/* The local shell's terminal end runs on a thread of its own: Ctrl-C is taken there only */
static void *client_main(void *arg)
{
    int fd = *(int *)arg;
    sigset_t set;
    sigfillset(&set);
    sigdelset(&set, SIGINT);
    pthread_sigmask(SIG_SETMASK, &set, NULL);
    shell_client_run(fd, 1);
    return NULL;
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
    const char *code = NULL, *script = NULL, *shell_socket = NULL;
    const char *node = NULL, *cookie = NULL;
    int interactive = 0, watch = 0, longnames = 0;
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
        } else if (strcmp(a, "--watch") == 0) {
            watch = 1;
        } else if (strcmp(a, "--observer") == 0) {
            if (i + 1 >= argc) {
                fputs("smarm-lua: --observer needs [HOST:]PORT\n", stderr);
                return 2;
            }
            cfg.observer = argv[++i];
        } else if (strcmp(a, "--trace") == 0) {
            if (i + 1 >= argc) {
                fputs("smarm-lua: --trace needs a file\n", stderr);
                return 2;
            }
            cfg.trace = argv[++i];
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
        } else if (strcmp(a, "-i") == 0) {
            interactive = 1;
        } else if (strcmp(a, "--shell-socket") == 0 || strcmp(a, "--remsh") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "smarm-lua: %s needs a path\n", a);
                return 2;
            }
            if (strcmp(a, "--remsh") == 0)
                return remsh(argv[i + 1]);
            shell_socket = argv[++i];
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
    char *stdin_code = NULL;
    if (!code) {
        if (i < argc)
            script = argv[i++];
        if (script && strcmp(script, "-") == 0) {
            script = NULL;
            if (isatty(0)) {
                interactive = 1;
            } else {
                code = stdin_code = read_stdin();
                if (!code) {
                    fputs("smarm-lua: out of memory reading standard input\n", stderr);
                    return 1;
                }
            }
        } else if (!script && isatty(0)) {
            interactive = 1;
        } else if (!script && !interactive) {
            usage(stderr);
            return 2;
        }
    } else if (interactive) {
        fputs("smarm-lua: -i goes with app.lua or nothing, not with -e\n", stderr);
        return 2;
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
    cfg.keep_sigint = interactive;
    smarm_runtime *rt;
    int rc = smarm_runtime_new(&cfg, &rt);
    if (rc != 0) {
        fprintf(stderr, "smarm-lua: %s\n", smarm_strerror(rc));
        free(boot);
        return 1;
    }
    if (watch && (rc = smarm_watch(rt, cfg.app_dir)) != 0)
        fprintf(stderr, "smarm-lua: --watch: cannot watch %s: %s\n", cfg.app_dir,
                smarm_strerror(rc));
    int status = 1;
    int sv[2] = {-1, -1};
    pthread_t client;
    int client_on = 0;
    if (interactive || shell_socket) {
        /* the root runs the shell's boot: the socket to listen on, the app, then the
         * local session over a socketpair whose other end the client thread holds */
        char fdtext[16] = "";
        if (interactive) {
            if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
                perror("smarm-lua: socketpair");
                return 1;
            }
            snprintf(fdtext, sizeof fdtext, "%d", sv[1]);
            shell_client_catch_sigint();
            client_on = pthread_create(&client, NULL, client_main, &sv[0]) == 0;
            /* the runtime's threads inherit this mask: Ctrl-C reaches the client only */
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, SIGINT);
            pthread_sigmask(SIG_BLOCK, &set, NULL);
        }
        int n = argc - i;
        char **bargv = calloc((size_t)n + 5, sizeof *bargv);
        bargv[0] = interactive ? "i" : code ? "e" : "";
        bargv[1] = fdtext;
        bargv[2] = script ? (char *)script : code ? (char *)code : (char *)"";
        bargv[3] = shell_socket ? (char *)shell_socket : (char *)"";
        for (int k = 0; k < n; k++)
            bargv[4 + k] = argv[i + k];
        rc = smarm_run_string(rt, "return require('smarm.shell').boot(...)", n + 4, bargv, &status);
        free(bargv);
        if (client_on) {
            /* the session ended with the root: the client sees the end of its stream */
            shutdown(sv[0], SHUT_RDWR);
            pthread_join(client, NULL);
        }
        close(sv[0]);
    } else {
        rc = script ? smarm_run_file(rt, script, argc - i, argv + i, &status)
                    : smarm_run_string(rt, code, argc - i, argv + i, &status);
    }
    free(stdin_code);
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
