/* A socket handle: the fd and what travels with it when a socket moves between actors (its
 * kind, its epoll membership and the bytes read ahead but not taken yet). Handles live in
 * malloc'd memory, outside any actor's heap, so a message can carry one by address; the Lua
 * object of the owning actor points to it. Also the syscall-level helpers the Lua face uses:
 * reading ahead, addresses, error names. No Lua here. */
#ifndef SMARM_IO_SOCK_H
#define SMARM_IO_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum io_sock_kind { IO_TCP = 1, IO_LISTEN = 2, IO_UDP = 3 };

typedef struct io_sock {
    int fd;
    int kind;
    int added;                /* in the network poller's epoll set (netpoll_arm keeps it) */
    unsigned armed;           /* the readiness the last wait armed for (NETPOLL_READ/WRITE), or 0 */
    struct netpoll_fd *words; /* the fd's waiter words in the poller, once armed */
    int eof;                  /* the peer's end of the stream was read */
    /* the last recv came back short of the room it had: the queue was empty then, and the
     * next read skips its recv once (skip_after_short_read). For a server: its last accept
     * found no connection waiting. */
    int drained;
    /* read-ahead: bytes [roff, rlen) of rbuf are read and not taken yet; freed when empty,
     * so an idle connection holds no buffer */
    char *rbuf;
    size_t roff, rlen, rcap;
    size_t woff; /* bytes of the send under way already written */
} io_sock;

/* A handle taking over fd; NULL when out of memory (fd is left open). */
io_sock *io_sock_new(int fd, int kind);
/* Closes the fd and frees the handle and its buffer. */
void io_sock_free(io_sock *s);

/* Bytes read ahead and not taken. */
static inline size_t io_sock_buffered(const io_sock *s) { return s->rlen - s->roff; }
/* Reads once into the buffer, at least want bytes of room (at least 16 KiB): >0 bytes read,
 * 0 at the end of the stream (s->eof set), -errno (-EAGAIN: nothing now; -ENOMEM). */
long io_sock_fill(io_sock *s, size_t want);
/* Reads once into buf (cap bytes) instead of the read-ahead buffer, which must be empty:
 * the same outcomes and the same skipped recv after a short read as io_sock_fill. For a
 * reader that takes whatever comes: no buffer is allocated for bytes taken at once. */
long io_sock_recv(io_sock *s, char *buf, size_t cap);
/* The next io_sock_fill really reads (a poll with no wait must not guess). */
static inline void io_sock_undrain(io_sock *s) { s->drained = 0; }
/* Arms the network poller for events with pid as the waiter (see netpoll_arm): 0 parked,
 * 1 ready now (try again), -errno. A readiness taken makes the next fill read. */
struct netpoll;
int io_sock_arm(struct netpoll *np, io_sock *s, unsigned events, uint64_t pid);
/* Before the try of a woken wait: takes the edge that woke it (the fill after it reads). */
void io_sock_take_ready(io_sock *s);
/* Marks n buffered bytes taken (the buffer is freed once empty). */
void io_sock_consume(io_sock *s, size_t n);

/* Whether fd is ready now for events (NETPOLL_READ/WRITE), by poll with a zero timeout; an
 * error or hang-up counts as ready. */
int io_fd_ready(int fd, unsigned events);

/* The text an error outcome gets: "refused", "reset", "closed", "timeout", or strerror. */
const char *io_err_name(int err);

/* Parses an IPv4 or IPv6 literal ("*" is 0.0.0.0) and a port into sa: its length, or 0. */
socklen_t io_addr_parse(const char *host, int port, struct sockaddr_storage *sa);
/* The literal and port of sa (an IPv4-mapped IPv6 address prints as IPv4); host holds 64. */
int io_addr_format(const struct sockaddr *sa, char *host, int *port);

#endif
