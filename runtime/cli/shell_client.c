/* The terminal end of a shell (see shell_client.h). Line editing runs on the thread that
 * calls shell_client_run, never on a scheduler: the session actor only sees whole lines. */
#include "shell_client.h"

#include <errno.h>
#include <fcntl.h>
#include <histedit.h>
#include <limits.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>
#include <wchar.h>

#define HISTORY_FILE ".smarm_lua_history"
#define HISTORY_SIZE 1000

/* SIGINT writes a byte here; the client polls it beside the terminal and the socket */
static int intr_pipe[2] = {-1, -1};

static void on_sigint(int sig)
{
    (void)sig;
    int e = errno;
    char c = 1;
    ssize_t w = write(intr_pipe[1], &c, 1);
    (void)w;
    errno = e;
}

void shell_client_catch_sigint(void)
{
    if (intr_pipe[0] >= 0)
        return;
    if (pipe2(intr_pipe, O_NONBLOCK | O_CLOEXEC) != 0)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

typedef struct client {
    int fd, local, tty;
    char *in; /* frames read and not handled yet */
    size_t inlen, incap;
    char prompt[256];
    int interrupted; /* the line editor was left by Ctrl-C */
    int closed;      /* the session closed the stream */
    int unanswered;  /* Ctrl-C presses since the last prompt */
    EditLine *el;
    History *hist;
    HistEvent ev;
    char histpath[PATH_MAX];
    mbstate_t mb;
    struct termios saved; /* the terminal as we found it */
} client;

/* Between prompts the terminal stays out of canonical mode and does not echo: what the
 * user types ahead waits as plain bytes for the editor (a canonical line buffer would be
 * cut when the editor switches modes, losing a Ctrl-D or a half-typed line). Ctrl-C still
 * raises SIGINT. libedit restores its own idea of the cooked mode when a line ends, so
 * this is set again after each one. */
static void busy_mode(client *c)
{
    struct termios t = c->saved;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_lflag |= ISIG;
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    tcsetattr(0, TCSADRAIN, &t);
}

static int drain_intr(void)
{
    char buf[64];
    int n = 0;
    ssize_t r;
    while ((r = read(intr_pipe[0], buf, sizeof buf)) > 0)
        n += (int)r;
    return n;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_frame(client *c, char type, const char *payload, size_t len)
{
    char head[32];
    int n = snprintf(head, sizeof head, "%c%zu\n", type, len);
    if (send_all(c->fd, head, (size_t)n) != 0 || send_all(c->fd, payload, len) != 0) {
        c->closed = 1;
        return -1;
    }
    return 0;
}

/* Reads what the socket has into c->in: >0, 0 at its end, -1 on an error. */
static int read_some(client *c)
{
    if (c->incap - c->inlen < 4096) {
        size_t cap = c->incap ? c->incap * 2 : 16384;
        char *p = realloc(c->in, cap);
        if (!p)
            return -1;
        c->in = p;
        c->incap = cap;
    }
    for (;;) {
        ssize_t r = read(c->fd, c->in + c->inlen, c->incap - c->inlen);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0)
            c->inlen += (size_t)r;
        return r < 0 ? -1 : (int)r;
    }
}

/* A whole frame at the front of c->in: its type, payload and size taken in *took. */
static int frame_ready(client *c, char *type, const char **payload, size_t *len, size_t *took)
{
    char *nl = c->inlen ? memchr(c->in, '\n', c->inlen) : NULL;
    if (!nl)
        return 0;
    char *end;
    unsigned long long n = strtoull(c->in + 1, &end, 10);
    size_t head = (size_t)(nl - c->in) + 1;
    if (end != nl || c->inlen < head + n)
        return 0;
    *type = c->in[0];
    *payload = c->in + head;
    *len = (size_t)n;
    *took = head + (size_t)n;
    return 1;
}

static void consume(client *c, size_t n)
{
    memmove(c->in, c->in + n, c->inlen - n);
    c->inlen -= n;
}

/* A Ctrl-C while the session is busy: it interrupts the evaluation. Three without an
 * answer: the session is stuck, so a local shell asks the runtime to stop and a remote
 * one detaches. */
static int busy_interrupt(client *c)
{
    if (++c->unanswered >= 3) {
        if (c->local) {
            fputs("\n(the session does not answer: stopping)\n", stderr);
            kill(getpid(), SIGTERM);
            return 0;
        }
        fputs("\n(the session does not answer: detached)\n", stderr);
        return -1;
    }
    return send_frame(c, 'i', "", 0);
}

/* libedit's character source: the terminal, unless Ctrl-C was pressed or the session went
 * away meanwhile (then -1 ends the edit and the flags say why). */
static int getc_fn(EditLine *el, wchar_t *wc)
{
    client *c;
    el_get(el, EL_CLIENTDATA, &c);
    for (;;) {
        struct pollfd p[3] = {{0, POLLIN, 0}, {intr_pipe[0], POLLIN, 0}, {c->fd, POLLIN, 0}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (p[1].revents) {
            drain_intr();
            c->interrupted = 1;
            return -1;
        }
        if (p[2].revents) {
            /* the session speaks while we edit only when it ends */
            int r = read_some(c);
            if (r <= 0) {
                c->closed = 1;
                return -1;
            }
        }
        if (p[0].revents) {
            char ch;
            ssize_t r = read(0, &ch, 1);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return 0;
            size_t k = mbrtowc(wc, &ch, 1, &c->mb);
            if (k == (size_t)-2)
                continue; /* more bytes of this character to come */
            if (k == (size_t)-1) {
                memset(&c->mb, 0, sizeof c->mb);
                *wc = (wchar_t)(unsigned char)ch;
            }
            return 1;
        }
    }
}

/* The frame of type want, waiting up to ms for it; 1 when it is at the front of c->in. */
static int await_frame(client *c, char want, const char **payload, size_t *len, size_t *took,
                       int ms)
{
    for (;;) {
        char type;
        if (frame_ready(c, &type, payload, len, took)) {
            if (type == want)
                return 1;
            if (type != 'o')
                return 0; /* not an answer: leave it for the main loop */
            fwrite(*payload, 1, *len, stdout);
            consume(c, *took);
            continue;
        }
        struct pollfd p = {c->fd, POLLIN, 0};
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || read_some(c) <= 0)
            return 0;
    }
}

/* The longest common prefix of the n names, from their first byte at skip. */
static size_t common_prefix(char **names, int n, size_t skip)
{
    size_t k = skip;
    for (;;) {
        char ch = names[0][k];
        if (!ch)
            return k;
        for (int i = 1; i < n; i++)
            if (names[i][k] != ch)
                return k;
        k++;
    }
}

/* Tab: the session's evaluator names what the word before the cursor may be. One name is
 * completed; several are completed as far as they agree, then listed. */
static unsigned char complete_fn(EditLine *el, int ch)
{
    (void)ch;
    client *c;
    el_get(el, EL_CLIENTDATA, &c);
    const LineInfo *li = el_line(el);
    const char *start = li->cursor;
    while (start > li->buffer &&
           (start[-1] == '_' || start[-1] == '.' || start[-1] == ':' ||
            (start[-1] >= '0' && start[-1] <= '9') || (start[-1] >= 'a' && start[-1] <= 'z') ||
            (start[-1] >= 'A' && start[-1] <= 'Z')))
        start--;
    size_t wlen = (size_t)(li->cursor - start);
    const char *payload;
    size_t len, took;
    if (send_frame(c, 'c', start, wlen) != 0 || !await_frame(c, 'C', &payload, &len, &took, 2000))
        return CC_ERROR;
    /* the names, one a line, as strings of their own */
    char *text = strndup(payload, len);
    consume(c, took);
    if (!text)
        return CC_ERROR;
    char *names[256];
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(text, "\n", &save); tok && n < 256;
         tok = strtok_r(NULL, "\n", &save))
        names[n++] = tok;
    unsigned char rc = CC_ERROR;
    if (n > 0) {
        size_t upto = common_prefix(names, n, 0);
        if (upto > wlen) {
            char saved = names[0][upto];
            names[0][upto] = 0;
            el_insertstr(el, names[0] + wlen);
            names[0][upto] = saved;
            rc = CC_REFRESH;
        } else if (n > 1) {
            fputs("\n", stdout);
            for (int i = 0; i < n; i++)
                fprintf(stdout, "%s%s", names[i], i + 1 < n ? "  " : "\n");
            fflush(stdout);
            rc = CC_REDISPLAY;
        }
    }
    free(text);
    return rc;
}

static char *prompt_fn(EditLine *el)
{
    client *c;
    el_get(el, EL_CLIENTDATA, &c);
    return c->prompt;
}

static void editor_open(client *c)
{
    c->el = el_init("smarm-lua", stdin, stdout, stderr);
    if (!c->el)
        return;
    c->hist = history_init();
    history(c->hist, &c->ev, H_SETSIZE, HISTORY_SIZE);
    history(c->hist, &c->ev, H_SETUNIQUE, 1);
    const char *home = getenv("HOME");
    c->histpath[0] = 0;
    if (home && *home) {
        snprintf(c->histpath, sizeof c->histpath, "%s/%s", home, HISTORY_FILE);
        history(c->hist, &c->ev, H_LOAD, c->histpath);
    }
    el_set(c->el, EL_CLIENTDATA, c);
    el_set(c->el, EL_EDITOR, "emacs");
    el_set(c->el, EL_PROMPT, prompt_fn);
    el_set(c->el, EL_HIST, history, c->hist);
    el_set(c->el, EL_GETCFN, getc_fn);
    el_set(c->el, EL_ADDFN, "smarm-complete", "complete a name", complete_fn);
    el_set(c->el, EL_BIND, "^I", "smarm-complete", NULL);
    el_source(c->el, NULL); /* the user's ~/.editrc, as other libedit programs read it */
}

static void editor_close(client *c)
{
    if (c->hist)
        history_end(c->hist);
    if (c->el)
        el_end(c->el);
}

/* What the user did at a prompt. */
enum { GOT_LINE, GOT_INTERRUPT, GOT_EOF, GOT_CLOSED };

/* A line from the terminal through the editor: *line (without its newline) is malloc'd. */
static int edit_line(client *c, char **line, int *had_text)
{
    c->interrupted = 0;
    int n = 0;
    const char *s = el_gets(c->el, &n);
    busy_mode(c);
    *had_text = s && n > 0 && strspn(s, " \t\r\n") < (size_t)n;
    if (c->closed)
        return GOT_CLOSED;
    if (c->interrupted) {
        fputs("^C\n", stdout);
        fflush(stdout);
        return GOT_INTERRUPT;
    }
    if (!s || n <= 0)
        return GOT_EOF;
    size_t len = (size_t)n;
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
        len--;
    *line = strndup(s, len);
    if (*had_text && c->hist) {
        history(c->hist, &c->ev, H_ENTER, *line);
        if (c->histpath[0])
            history(c->hist, &c->ev, H_SAVE, c->histpath);
    }
    return GOT_LINE;
}

/* A line from a pipe or file: no editor, no prompt. */
static int plain_line(client *c, char **line, int *had_text)
{
    (void)c;
    size_t cap = 0;
    char *buf = NULL;
    ssize_t n = getline(&buf, &cap, stdin);
    if (n < 0) {
        free(buf);
        return GOT_EOF;
    }
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = 0;
    *had_text = n > 0;
    *line = buf;
    return GOT_LINE;
}

static int at_prompt(client *c, const char *prompt, size_t plen)
{
    c->unanswered = 0;
    /* A Ctrl-C that came after the session's last output but before this prompt (the two
     * frames often arrive in one read) is a Ctrl-C at this prompt: dropping it here lost a
     * second Ctrl-C typed as soon as the "again" hint showed, and the shell stayed open. */
    int early = drain_intr() > 0;
    if (plen >= sizeof c->prompt)
        plen = sizeof c->prompt - 1;
    memcpy(c->prompt, prompt, plen);
    c->prompt[plen] = 0;
    char *line = NULL;
    int had_text = 0;
    int got;
    if (early && c->el) {
        fputs(c->prompt, stdout);
        fputs("^C\n", stdout);
        fflush(stdout);
        got = GOT_INTERRUPT;
    } else {
        got = c->el ? edit_line(c, &line, &had_text) : plain_line(c, &line, &had_text);
    }
    int rc = 0;
    switch (got) {
    case GOT_LINE:
        rc = send_frame(c, 'l', line, strlen(line));
        break;
    case GOT_INTERRUPT:
        rc = send_frame(c, 'i', had_text ? "1" : "", had_text ? 1 : 0);
        break;
    case GOT_EOF:
        if (c->el) {
            fputs("\n", stdout);
            fflush(stdout);
        }
        rc = send_frame(c, 'e', "", 0);
        break;
    case GOT_CLOSED:
        break;
    }
    free(line);
    return rc;
}

int shell_client_run(int fd, int local)
{
    client c;
    memset(&c, 0, sizeof c);
    c.fd = fd;
    c.local = local;
    c.tty = isatty(0) && isatty(1);
    /* the user's character set for the editor, on this thread only (uselocale): the
     * runtime's threads keep the C locale Lua code expects */
    locale_t loc = c.tty ? newlocale(LC_CTYPE_MASK, "", (locale_t)0) : (locale_t)0;
    locale_t prev = loc ? uselocale(loc) : (locale_t)0;
    if (c.tty && tcgetattr(0, &c.saved) == 0) {
        editor_open(&c);
        busy_mode(&c);
    }
    int rc = 0;
    while (!c.closed) {
        char type;
        const char *payload;
        size_t len, took;
        if (frame_ready(&c, &type, &payload, &len, &took)) {
            if (type == 'o') {
                fwrite(payload, 1, len, stdout);
                fflush(stdout);
                consume(&c, took);
            } else if (type == 'p') {
                char prompt[256];
                size_t n = len < sizeof prompt ? len : sizeof prompt - 1;
                memcpy(prompt, payload, n);
                consume(&c, took);
                if (at_prompt(&c, prompt, n) != 0 && !c.closed)
                    rc = -1;
            } else {
                consume(&c, took);
            }
            continue;
        }
        /* the session is busy (or has not spoken yet): Ctrl-C interrupts it */
        struct pollfd p[2] = {{fd, POLLIN, 0}, {intr_pipe[0], POLLIN, 0}};
        if (poll(p, intr_pipe[0] >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = -1;
            break;
        }
        if (intr_pipe[0] >= 0 && p[1].revents && drain_intr() > 0 && busy_interrupt(&c) != 0)
            break;
        if (p[0].revents) {
            int r = read_some(&c);
            if (r < 0)
                rc = -1;
            if (r <= 0)
                break;
        }
    }
    editor_close(&c);
    if (c.el)
        tcsetattr(0, TCSADRAIN, &c.saved);
    if (loc) {
        uselocale(prev);
        freelocale(loc);
    }
    free(c.in);
    return rc;
}
