/* Preemption: a watchdog finds actors past their timeslice while others wait,
 * and a signal stops them wherever they are (see preempt.c for the three tiers). */
#ifndef SMARM_PREEMPT_H
#define SMARM_PREEMPT_H

struct smarm_runtime;
struct actor;
struct sched;

/* Installs the process-wide preemption signal handler (once per process). */
void preempt_install(void);
/* Starts / stops the runtime's watchdog thread. */
int preempt_start(struct smarm_runtime *rt);
void preempt_stop(struct smarm_runtime *rt);
/* A scheduler left idleness: wakes the watchdog if it sleeps because all were idle. */
void preempt_busy(struct smarm_runtime *rt);
/* Safe point in runtime code called from Lua: leaves the CPU if the actor's
 * timeslice is over (tier 3). */
void preempt_safe_point(struct actor *a);
/* Makes the actor running on s leave its scheduler as soon as it can. */
void preempt_signal(struct sched *s);

#endif
