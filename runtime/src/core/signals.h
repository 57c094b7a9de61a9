/* Fault diagnosis: a C-stack overflow into an actor's guard is reported with
 * the actor's pid and stack shape, any other fatal signal with the running
 * actor's pid, before the process dies of it. And the signals the runtime
 * handles for a host that asks (smarm_config.handle_signals). */
#ifndef SMARM_SIGNAL_DIAG_H
#define SMARM_SIGNAL_DIAG_H

/* Installs the SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT handler (once per process;
 * after its line the signal goes to the handler that was there before). */
void signal_diag_install(void);
/* Gives the calling scheduler thread the alternate stack the handler runs on;
 * returns it for signal_diag_thread_fini. */
void *signal_diag_thread_init(void);
void signal_diag_thread_fini(void *altstack);

#include <signal.h>
struct smarm_runtime;
/* handle_signals: while the runtime runs, SIGINT/SIGTERM/SIGHUP shut the root
 * down politely (it is told as by smarm.shutdown), a second stops every actor
 * at once (and ends the process, _exit(128+N), if a scheduler is stuck inside
 * a C call), a third ends the process; SIGUSR1 prints a snapshot of the actors
 * on stderr; SIGPIPE is caught and does nothing (the write fails with EPIPE).
 * The first four are blocked in the calling thread (its mask is saved and
 * restored, with SIGPIPE's action, by signal_shutdown_stop). -1 if another
 * runtime of the process handles them, or no thread could be started. */
int signal_shutdown_start(struct smarm_runtime *rt, sigset_t *saved);
void signal_shutdown_stop(struct smarm_runtime *rt, const sigset_t *saved);

#endif
