/* smarm_watch: hot reload of the modules whose files change under a directory. */
#ifndef SMARM_WATCH_H
#define SMARM_WATCH_H

struct smarm_runtime;

/* Stops the watch thread, if any, and frees it (smarm_runtime_free). */
void watch_stop(struct smarm_runtime *rt);

#endif
