/* log.h - one-line log records: "2026-11-21T10:53:06.123Z worker:1 W text".
 *
 * Each process logs to one stream: stderr by default (a node's stderr is
 * its log file in the run directory); the coordinator points it at
 * logs/coordinator.log so that protocol noise never reaches the user's
 * terminal. Not thread-safe beyond stdio's own locking; call from the loop
 * thread.
 */
#ifndef DROVER_LOG_H
#define DROVER_LOG_H

#include <stdio.h>

enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Where records go (NULL: stderr) and who writes them ("coordinator",
 * "worker:1"); the name is copied. Records below `level` are dropped. */
void log_setup(FILE *out, const char *who, int level);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Also hands every record written ("...\n", len bytes, valid for the
 * call) to fn, once set (NULL: none). Records logged from inside fn are
 * not handed to it again. */
typedef void (*log_sink_fn)(void *ud, const char *record, size_t len);
void log_set_sink(log_sink_fn fn, void *ud);

/* The records' time stamp, "2026-11-21T10:53:06.123Z", into buf (32 bytes
 * or more). Thread-safe. */
void log_timestamp(char *buf, size_t n);

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
