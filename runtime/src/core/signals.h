/* Fault diagnosis: a C-stack overflow into an actor's guard is reported with
 * the actor's pid and stack shape before the process dies of the fault. */
#ifndef SMARM_SIGNAL_DIAG_H
#define SMARM_SIGNAL_DIAG_H

/* Installs the SIGSEGV/SIGBUS handler (once per process; faults that are not
 * guard hits go to the handler that was there before). */
void signal_diag_install(void);
/* Gives the calling scheduler thread the alternate stack the handler runs on;
 * returns it for signal_diag_thread_fini. */
void *signal_diag_thread_init(void);
void signal_diag_thread_fini(void *altstack);

#include <signal.h>
struct smarm_runtime;
/* SIGINT/SIGTERM while the runtime runs: the first shuts the root down politely
 * (it is told as by smarm.shutdown), a second stops every actor at once. Blocks
 * both in the calling thread (restored by signal_shutdown_stop). */
int signal_shutdown_start(struct smarm_runtime *rt, sigset_t *saved);
void signal_shutdown_stop(struct smarm_runtime *rt, const sigset_t *saved);

#endif
