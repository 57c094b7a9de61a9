/* The terminal end of a shell: edits lines (libedit, history under $HOME), sends them to
 * a shell session over a stream socket and prints what the session sends back. The same
 * client serves the local shell (over a socketpair with the in-process session) and
 * --remsh (over a Unix socket to a running application).
 *
 * The stream carries frames: one type byte, the payload length in decimal, a newline, the
 * payload. Session to client: 'o' output, 'p' a prompt (the session waits for a line), 'C'
 * the answer to a 'c', names one a line. Client to session: 'l' a line, 'i' Ctrl-C (payload
 * "1" when the line being edited had text), 'e' the user left (Ctrl-D), 'c' a word to
 * complete (Tab). */
#ifndef SMARM_CLI_SHELL_CLIENT_H
#define SMARM_CLI_SHELL_CLIENT_H

/* Installs the SIGINT handler the client watches (once, before the threads that must not
 * take SIGINT are started: they block it). */
void shell_client_catch_sigint(void);

/* Runs the client over fd until the session closes it. local: Ctrl-C pressed three times
 * while the session does not answer asks the process to stop (SIGTERM); remote: it
 * detaches. Returns 0, or -1 if the connection broke. Does not close fd. */
int shell_client_run(int fd, int local);

#endif
