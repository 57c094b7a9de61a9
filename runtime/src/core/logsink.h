/* The runtime's own reports (crash reports, warnings): a line on stderr unless the logger's
 * default handler was removed, and a structured event to the logger actor (smarm.logger,
 * registered as "smarm.logger") while it has handlers of its own. */
#ifndef SMARM_CORE_LOGSINK_H
#define SMARM_CORE_LOGSINK_H

#include <stdint.h>

struct smarm_runtime;

/* Levels, as OTP's logger and syslog number them. */
enum log_level {
    LOG_EMERGENCY = 0,
    LOG_ALERT,
    LOG_CRITICAL,
    LOG_ERROR,
    LOG_WARNING,
    LOG_NOTICE,
    LOG_INFO,
    LOG_DEBUG,
};

/* rt->log_flags */
#define LOG_STDERR_OFF 1u /* the default handler was removed: nothing on stderr */
#define LOG_FORWARD 2u    /* the logger actor has handlers: send it every report */

/* Reports "smarm: actor <pid> what: detail" (pid 0: "smarm: what: detail"). kind names the
 * event for handlers ("crash_report", "runtime"). Takes the report lock; never raises. */
void log_report(struct smarm_runtime *rt, int level, const char *kind, uint64_t pid,
                const char *what, const char *detail);

/* Seconds since the epoch (CLOCK_REALTIME), for event timestamps. */
double log_wall_time(void);

#endif
