/* smarm_watch: a thread that watches a directory tree with inotify and reloads the loaded
 * module whose file was written (IN_CLOSE_WRITE: the writer closed it) or renamed into place
 * (IN_MOVED_TO: editors that write a temporary file and rename it over the original). Events
 * are gathered for a short settle time, so one save that makes several events is one reload.
 * A file is matched to modules by its real path against the module cache's. */
#include "watch.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/critical.h"
#include "core/runtime.h"
#include "smarm.h"
#include "vm/modcache.h"

#define MAX_DIRS 4096
#define MAX_PENDING 64
#define SETTLE_MS 50

typedef struct watch {
    smarm_runtime *rt;
    pthread_t thread;
    int ifd, stopfd;
    int ndirs;
    struct {
        int wd;
        char *path;
    } dirs[MAX_DIRS];
    char *pending[MAX_PENDING]; /* changed .lua files not yet looked at */
    int npending;
} watch;

static void add_dir(watch *w, const char *path, int depth)
{
    if (w->ndirs >= MAX_DIRS || depth > 16)
        return;
    int wd = inotify_add_watch(w->ifd, path, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE);
    if (wd < 0)
        return;
    char *copy = strdup(path);
    if (!copy)
        return;
    w->dirs[w->ndirs].wd = wd;
    w->dirs[w->ndirs].path = copy;
    w->ndirs++;
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        /* hidden directories (.git) are not the application's code */
        if (e->d_name[0] == '.')
            continue;
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= (int)sizeof sub)
            continue;
        struct stat st;
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
            add_dir(w, sub, depth + 1);
    }
    closedir(d);
}

static const char *dir_of(watch *w, int wd)
{
    for (int i = 0; i < w->ndirs; i++)
        if (w->dirs[i].wd == wd)
            return w->dirs[i].path;
    return NULL;
}

static int ends_with_lua(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".lua") == 0;
}

static void note_pending(watch *w, const char *path)
{
    for (int i = 0; i < w->npending; i++)
        if (strcmp(w->pending[i], path) == 0)
            return;
    if (w->npending < MAX_PENDING) {
        char *copy = strdup(path);
        if (copy)
            w->pending[w->npending++] = copy;
    }
}

/* Reads the queued events: new directories are watched, changed .lua files noted. */
static void read_events(watch *w)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(w->ifd, buf, sizeof buf);
        if (n <= 0)
            return;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            const char *dir = dir_of(w, ev->wd);
            if (!dir || !ev->len || ev->name[0] == '.')
                continue;
            char path[PATH_MAX];
            if (snprintf(path, sizeof path, "%s/%s", dir, ev->name) >= (int)sizeof path)
                continue;
            if (ev->mask & IN_ISDIR) {
                if (ev->mask & (IN_CREATE | IN_MOVED_TO))
                    add_dir(w, path, 1);
            } else if ((ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) && ends_with_lua(ev->name)) {
                note_pending(w, path);
            }
        }
    }
}

/* The loaded modules whose file is real path `real` (collected under the cache lock). */
typedef struct match {
    const char *real;
    char names[8][256];
    int n;
} match;

static int match_file(const char *key, const char *name, void *ud)
{
    match *m = ud;
    char real[PATH_MAX];
    if (m->n < 8 && realpath(key, real) && strcmp(real, m->real) == 0)
        snprintf(m->names[m->n++], sizeof m->names[0], "%s", name);
    return 0;
}

static void reload_file(watch *w, const char *path)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return; /* gone again (a temporary file) */
    match m = {real, {{0}}, 0};
    modcache_list_files(w->rt->vm, match_file, &m);
    for (int i = 0; i < m.n; i++) {
        char err[512];
        int64_t v = modcache_reload(w->rt->vm, m.names[i], err, sizeof err);
        /* read before the report lock: that lock is a leaf */
        int64_t kept = v >= 0 ? v : modcache_version(w->rt->vm, m.names[i]);
        mutex_lock(&w->rt->err_lock);
        if (v >= 0)
            fprintf(stderr, "smarm: reloaded %s (%s): version %lld\n", m.names[i], path,
                    (long long)v);
        else
            fprintf(stderr, "smarm: rejected %s (%s stays at version %lld): %s\n", path, m.names[i],
                    (long long)kept, err);
        fflush(stderr);
        mutex_unlock(&w->rt->err_lock);
    }
}

static void *watch_main(void *arg)
{
    watch *w = arg;
    struct pollfd fds[2] = {{w->ifd, POLLIN, 0}, {w->stopfd, POLLIN, 0}};
    for (;;) {
        /* with changes noted, wait only the settle time for more events of the same save */
        int r = poll(fds, 2, w->npending ? SETTLE_MS : -1);
        if (r < 0 && errno != EINTR)
            break;
        if (fds[1].revents)
            break;
        if (r > 0 && fds[0].revents) {
            read_events(w);
            continue;
        }
        if (r == 0) {
            for (int i = 0; i < w->npending; i++) {
                reload_file(w, w->pending[i]);
                free(w->pending[i]);
            }
            w->npending = 0;
        }
    }
    return NULL;
}

int smarm_watch(smarm_runtime *rt, const char *dir)
{
    if (!rt || !dir || rt->watch)
        return SMARM_EINVAL;
    watch *w = calloc(1, sizeof *w);
    if (!w)
        return SMARM_ENOMEM;
    w->rt = rt;
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    w->stopfd = eventfd(0, EFD_CLOEXEC);
    if (w->ifd < 0 || w->stopfd < 0)
        goto fail;
    add_dir(w, dir, 0);
    if (w->ndirs == 0)
        goto fail;
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0)
        goto fail;
    rt->watch = w;
    return 0;
fail:
    for (int i = 0; i < w->ndirs; i++)
        free(w->dirs[i].path);
    if (w->ifd >= 0)
        close(w->ifd);
    if (w->stopfd >= 0)
        close(w->stopfd);
    free(w);
    return SMARM_EINVAL;
}

void watch_stop(smarm_runtime *rt)
{
    watch *w = rt->watch;
    if (!w)
        return;
    uint64_t one = 1;
    ssize_t n = write(w->stopfd, &one, sizeof one);
    (void)n;
    pthread_join(w->thread, NULL);
    for (int i = 0; i < w->ndirs; i++)
        free(w->dirs[i].path);
    for (int i = 0; i < w->npending; i++)
        free(w->pending[i]);
    close(w->ifd);
    close(w->stopfd);
    free(w);
    rt->watch = NULL;
}
