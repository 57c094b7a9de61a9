/* Exits: links, monitors, trap_exit, kill and shutdown, exit reasons and the
 * terminal record a slot keeps of its last death. */
#ifndef SMARM_EXIT_H
#define SMARM_EXIT_H

#include <stddef.h>
#include <stdint.h>

struct actor;
struct chan;
struct smarm_runtime;

/* How the actor ended (luavm_finish calls one of these before its state closes). */
void exit_set_reason(struct actor *a, const char *reason, int abnormal);
void exit_set_reason_bytes(struct actor *a, char *bytes, size_t len, int abnormal);
void exit_set_error(struct actor *a, const char *msg, const char *traceback);
/* At death, on the scheduler: down notices to monitors, exit signals or stops to
 * links, the terminal record; later links and monitors see noproc. */
void exit_finalize(struct smarm_runtime *rt, struct actor *a);
/* An actor whose spawn was refused before it was published: it never lived. */
void exit_retire_unborn(struct actor *a);
/* Frees what dead actors' slots still hold (the runtime is being freed). */
void exit_free_records(struct smarm_runtime *rt);
/* Called at spawn: a fresh tenancy has no links, monitors or trap. */
void exit_reset(struct actor *a, uint64_t pid, uint64_t owner);
/* From now on, a's exit signals and down notices name it as the value whose wire bytes are
 * alias[0..len) (an interned pid of another node, or a {name, node} tuple, whose link or
 * monitor a stands in for) rather than by its own pid; NULL undoes it. The bytes are copied:
 * 0, or -1 (out of memory, nothing changed). */
int exit_set_alias(struct actor *a, const char *alias, size_t len);

/* Links between the calling actor self and pid. 0, or -1 if pid is not alive
 * (the caller then gets noproc: exit_noproc). */
int exit_link(struct smarm_runtime *rt, struct actor *self, uint64_t pid);
void exit_unlink(struct smarm_runtime *rt, struct actor *self, uint64_t pid);
/* Links a new, not yet running child with its parent (spawn_link). */
int exit_link_child(struct smarm_runtime *rt, struct actor *parent, struct actor *child);
/* Delivers "noproc" about pid to self: an exit signal if it traps, else a stop. */
void exit_noproc(struct smarm_runtime *rt, struct actor *self, uint64_t pid);
/* Registers channel c (one tx reference handed over) for pid's down notice;
 * returns the monitor id. If pid is not alive, c gets a noproc notice at once. */
uint64_t exit_monitor(struct smarm_runtime *rt, uint64_t pid, struct chan *c);
/* The same for a channel several monitors share (one tx reference handed over per call):
 * the notice is an ordinary message, and the channel stays open after it. */
uint64_t exit_monitor_shared(struct smarm_runtime *rt, uint64_t pid, struct chan *c);
/* Removes monitor id from pid, releasing its reference; 1 if it was still there. */
int exit_demonitor(struct smarm_runtime *rt, uint64_t pid, uint64_t id);
/* trap_exit: installs c (one tx reference handed over) or clears it (c = NULL). */
void exit_set_trap(struct actor *a, struct chan *c);
/* Polite stop: a trapping target gets {from, reason = "shutdown"}; others stop. */
void exit_shutdown(struct smarm_runtime *rt, uint64_t from, uint64_t pid);
/* Erlang's exit/2: an exit signal from `from` to pid with reason (codec bytes). EXIT_KILL stops
 * it with "killed" whether it traps or not; otherwise a trapping target gets {pid = from,
 * from = from, reason = reason} on its trap channel, and a target that does not trap ignores
 * EXIT_NORMAL and ends with the reason for EXIT_OTHER. 0, or -1 if pid is not alive. */
enum exit_kind { EXIT_KILL, EXIT_NORMAL, EXIT_OTHER };
int exit_signal(struct smarm_runtime *rt, uint64_t from, uint64_t pid, const char *reason,
                size_t len, enum exit_kind kind);
/* The reason bytes of pid's death if its slot has not died again since;
 * copies them into a malloc'd buffer. 0 = found, -1 = alive or unknown. */
int exit_terminal(struct smarm_runtime *rt, uint64_t pid, char **bytes, size_t *len);

#endif
