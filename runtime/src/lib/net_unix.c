/* Unix stream sockets in smarm.net: a server on a filesystem path, for local control
 * channels such as the shell socket, and taking over a stream fd the host already holds
 * (one end of a socketpair). Accepted connections are ordinary stream objects. */
#include "lib/net_obj.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/sanitize.h"
#include "io/sock.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* Whether something accepts connections on the socket at path now. */
static int path_in_use(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 1; /* cannot tell: do not take the path */
    int rc = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
    int e = errno;
    close(fd);
    return rc == 0 || (e != ECONNREFUSED && e != ENOENT);
}

/* Whether the path may be bound: nothing there, or a stale socket this user owns (then it
 * is removed). A symlink, another kind of file, a path someone else owns or a socket in
 * use is refused with a message in err. */
static int claim_path(const struct sockaddr_un *sa, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(sa->sun_path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", sa->sun_path, strerror(errno));
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen, "%s is owned by uid %u, not by this user: refused", sa->sun_path,
                 (unsigned)st.st_uid);
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        snprintf(err, errlen, "%s is a symbolic link: refused", sa->sun_path);
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "%s exists and is not a socket: refused", sa->sun_path);
        return -1;
    }
    if (path_in_use(sa)) {
        snprintf(err, errlen, "%s is in use by a running server", sa->sun_path);
        return -1;
    }
    if (unlink(sa->sun_path) != 0) {
        snprintf(err, errlen, "%s: %s", sa->sun_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The path at idx as an address, or a Lua error naming fname. */
static void check_path(lua_State *L, int idx, const char *fname, struct sockaddr_un *sa)
{
    size_t n;
    const char *path = luaL_checklstring(L, idx, &n);
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (n == 0 || n >= sizeof sa->sun_path || strlen(path) != n)
        luaL_error(L, "%s: a path of 1 to %d bytes without zero bytes expected", fname,
                   (int)sizeof sa->sun_path - 1);
    memcpy(sa->sun_path, path, n);
}

/* raw.listen_unix(path [, backlog]) -> server | nil, err
 * The socket file is made with mode 0600 (only this user may connect). */
int net_l_listen_unix(lua_State *L)
{
    struct sockaddr_un sa;
    check_path(L, 1, "net.listen_unix", &sa);
    const char *path = sa.sun_path;
    int backlog = (int)luaL_optnumber(L, 2, 16);
    char err[400];
    if (claim_path(&sa, err, sizeof err) != 0)
        return net_push_fail(L, err);
    net_obj *o = net_new_obj(L, IO_LISTEN);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || net_attach(o, fd) != 0)
        return net_push_fail(L, fd < 0 ? strerror(errno) : "out of memory");
    /* no moment in which others could connect: the file is born 0600 (the umask is the
     * process's, so restore it at once), and set so again in case the umask was wider */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    umask(old);
    if (rc != 0 || chmod(sa.sun_path, 0600) != 0 || listen(fd, backlog < 1 ? 1 : backlog) != 0) {
        if (rc == 0)
            e = errno, unlink(sa.sun_path);
        net_close_obj(o);
        snprintf(err, sizeof err, "%s: %s", path, strerror(e));
        return net_push_fail(L, err);
    }
    return 1;
}

/* raw.connect_unix(path) -> sock | nil, err. A local connect completes at once or fails
 * (a full backlog says so: "Resource temporarily unavailable"). */
int net_l_connect_unix(lua_State *L)
{
    struct sockaddr_un sa;
    check_path(L, 1, "net.connect_unix", &sa);
    lua_settop(L, 0);
    net_obj *o = net_new_obj(L, IO_TCP);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || net_attach(o, fd) != 0)
        return net_push_fail(L, fd < 0 ? strerror(errno) : "out of memory");
    int rc;
    do
        rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int e = errno;
        net_close_obj(o);
        return net_push_fail(L, io_err_name(e));
    }
    return 1;
}

/* raw.adopt_stream(fd) -> sock: a stream object taking over fd (made non-blocking); closing
 * the object closes it */
int net_l_adopt_stream(lua_State *L)
{
    lua_Number d = luaL_checknumber(L, 1);
    int fd = (int)d;
    int type = 0;
    socklen_t len = sizeof type;
    if (d != fd || fd < 0 || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM)
        return luaL_error(L, "net.adopt_stream: %d is not a stream socket", fd);
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    net_obj *o = net_new_obj(L, IO_TCP);
    if (net_attach(o, fd) != 0)
        return net_push_fail(L, "out of memory");
    return 1;
}

LUA_UNWOUND_END
