/* Socket handles, their read-ahead buffer, readiness polls, error names and addresses. */
#include "io/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/netpoll.h"

#define READ_CHUNK 16384

io_sock *io_sock_new(int fd, int kind)
{
    io_sock *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->fd = fd;
    s->kind = kind;
    return s;
}

void io_sock_free(io_sock *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd); /* also takes it out of the epoll set */
    free(s->rbuf);
    free(s);
}

/* After a short read, a recv at once would most likely find nothing (a request answered, the
 * reader wants the next one): the read says EAGAIN without the syscall, once. The caller arms
 * the fd: an edge since the short read makes the arm say "ready" and undrains, so the read the
 * caller then retries is real. Not once the peer has hung up: its end of the stream may have
 * come with the bytes just read, and the edge that said so was taken before that read, so no
 * other comes (a reader waited for its timeout). For both reads, io_sock_fill and
 * io_sock_recv. */
static inline int skip_after_short_read(io_sock *s)
{
    if (!s->drained)
        return 0;
    s->drained = 0;
    return !(s->words && netpoll_hung_up(s->words));
}

long io_sock_fill(io_sock *s, size_t want)
{
    if (skip_after_short_read(s)) {
        if (s->roff == s->rlen)
            io_sock_consume(s, 0);
        return -EAGAIN;
    }
    if (want < READ_CHUNK)
        want = READ_CHUNK;
    if (s->roff > 0 && s->roff == s->rlen)
        s->roff = s->rlen = 0;
    if (s->rcap - s->rlen < want) {
        /* slide the unread bytes down first, if that makes the room */
        size_t unread = s->rlen - s->roff;
        if (s->roff > 0 && s->rcap - unread >= want) {
            memmove(s->rbuf, s->rbuf + s->roff, unread);
            s->roff = 0;
            s->rlen = unread;
        } else {
            size_t cap = s->rcap ? s->rcap : READ_CHUNK;
            while (cap - s->rlen < want)
                cap *= 2;
            char *b = realloc(s->rbuf, cap);
            if (!b)
                return -ENOMEM;
            s->rbuf = b;
            s->rcap = cap;
        }
    }
    for (;;) {
        size_t room = s->rcap - s->rlen;
        ssize_t n = recv(s->fd, s->rbuf + s->rlen, room, 0);
        if (n > 0) {
            s->drained = (size_t)n < room;
            s->rlen += (size_t)n;
            return (long)n;
        }
        if (n == 0) {
            s->eof = 1;
            if (s->roff == s->rlen)
                io_sock_consume(s, 0);
            return 0;
        }
        if (errno == EINTR)
            continue;
        int e = errno == EWOULDBLOCK ? EAGAIN : errno;
        if (s->roff == s->rlen)
            io_sock_consume(s, 0);
        return -e;
    }
}

long io_sock_recv(io_sock *s, char *buf, size_t cap)
{
    if (skip_after_short_read(s))
        return -EAGAIN;
    for (;;) {
        ssize_t n = recv(s->fd, buf, cap, 0);
        if (n > 0) {
            s->drained = (size_t)n < cap;
            return (long)n;
        }
        if (n == 0) {
            s->eof = 1;
            return 0;
        }
        if (errno == EINTR)
            continue;
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

int io_sock_arm(netpoll *np, io_sock *s, unsigned events, uint64_t pid)
{
    s->armed = events;
    int r = netpoll_arm(np, s->fd, events, pid, &s->added);
    if (r > 0)
        s->drained = 0;
    if (r >= 0 && !s->words)
        s->words = netpoll_words(np, s->fd);
    return r;
}

void io_sock_take_ready(io_sock *s)
{
    if (s->armed && s->words && netpoll_take(s->words, s->armed))
        s->drained = 0;
    s->armed = 0;
}

void io_sock_consume(io_sock *s, size_t n)
{
    s->roff += n;
    if (s->roff >= s->rlen) {
        free(s->rbuf);
        s->rbuf = NULL;
        s->roff = s->rlen = s->rcap = 0;
    }
}

int io_fd_ready(int fd, unsigned events)
{
    struct pollfd p = {.fd = fd, .events = 0};
    if (events & NETPOLL_READ)
        p.events |= POLLIN | POLLRDHUP;
    if (events & NETPOLL_WRITE)
        p.events |= POLLOUT;
    int n;
    do
        n = poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    return n > 0 && p.revents != 0;
}

const char *io_err_name(int err)
{
    switch (err) {
    case ECONNREFUSED:
        return "refused";
    case ECONNRESET:
        return "reset";
    case EPIPE:
    case ENOTCONN:
    case ESHUTDOWN:
        return "closed";
    case ETIMEDOUT:
        return "timeout";
    default:
        return strerror(err);
    }
}

socklen_t io_addr_parse(const char *host, int port, struct sockaddr_storage *sa)
{
    memset(sa, 0, sizeof *sa);
    if (port < 0 || port > 65535)
        return 0;
    struct sockaddr_in *v4 = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)sa;
    if (strcmp(host, "*") == 0)
        host = "0.0.0.0";
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        return sizeof *v4;
    }
    /* a zone ("fe80::1%eth0") is not taken: literals only */
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        return sizeof *v6;
    }
    return 0;
}

int io_addr_format(const struct sockaddr *sa, char *host, int *port)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &v4->sin_addr, host, 64);
        *port = ntohs(v4->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr))
            inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], host, 64);
        else
            inet_ntop(AF_INET6, &v6->sin6_addr, host, 64);
        *port = ntohs(v6->sin6_port);
        return 0;
    }
    strcpy(host, "?");
    *port = 0;
    return -1;
}
