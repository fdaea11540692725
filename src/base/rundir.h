/* rundir.h - the run directory: everything a run produces.
 *
 *   runs/<name>-<yyyymmdd-hhmmss>[-N]/
 *     coordinator   "host:port pid" of the coordinator (while it runs)
 *     secret        the run's secret, 0600
 *     events.log    one line per event: node up, lost, errors, shutdown
 *     logs/<role>-<i>.log   each node's stdout and stderr
 *     logs/coordinator.log  the coordinator's own log records
 *     metrics.jsonl one JSON object per train step and per evaluation
 *     events/coordinator/, events/chief/   TensorBoard event files
 *     run.lua, run.json   the script and its arguments (`drover run --resume`)
 *     process       "in-process PID" of an in-process run (while it runs)
 *     checkpoints/step-<N>/   checkpoints (ckpt.h; a cluster's: coord_ckpt.c)
 */
#ifndef DROVER_RUNDIR_H
#define DROVER_RUNDIR_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct rundir {
  char path[1024]; /* absolute */
  FILE *events;    /* events.log, line-buffered */
  void (*hook)(void *ud, const char *text); /* rundir_set_hook */
  void *hook_ud;
} rundir;

/* Creates base/<name>-<stamp> (base and logs/ too) and opens events.log.
 * A name with '/' or starting with '.' is refused; a taken directory gets
 * a -2, -3... suffix. Errors name the path and the reason ("cannot create
 * 'runs': Permission denied"). */
int rundir_create(const char *base, const char *name, rundir *rd);
/* Opens an existing run directory `path` (a resumed run) as rundir_create
 * leaves a new one: events.log open for appending. */
int rundir_open(const char *path, rundir *rd);
/* mkdir -p. The error names the path, and the component that failed when
 * it is another (a regular file in the way, a read-only parent). */
int rundir_mkdirs(const char *path);
/* Appends "2026-11-21T10:53:06.123Z <text>" to events.log and flushes. */
void rundir_event(rundir *rd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends one record, `rec` and a newline, to f (a file of the run
 * directory named `name`, opened for appending) with one write: a reader
 * sees the line whole or not at all (a short write is cut back). A
 * failure counts as a lost record; the first one is said on stderr and in
 * events.log (so on the dashboard). 0, or -1 when the record is lost. */
int rundir_append(rundir *rd, FILE *f, const char *name, const char *rec, size_t len);
/* A record (a line, a whole file) that could not be written: counted,
 * and the first said as rundir_append says it. `why` names the file; rd
 * may be NULL (then stderr only). */
void rundir_lost(rundir *rd, const char *why);
/* Records this process failed to write to any run directory. */
int64_t rundir_records_lost(void);
/* After each event is written, fn(ud, text) gets its text (one line, no
 * time stamp; valid during the call): the coordinator's dashboard keeps
 * its own copy. NULL removes the hook. Set it after rundir_create. */
void rundir_set_hook(rundir *rd, void (*fn)(void *ud, const char *text), void *ud);
/* Writes (replacing) a file in the run directory with the given mode. */
int rundir_write(const rundir *rd, const char *name, const char *content, mode_t mode);
/* "<dir>/<name>" into buf; returns buf. */
const char *rundir_file(const rundir *rd, const char *name, char *buf, size_t n);
/* The last `lines` lines of a file into buf (for error messages naming a
 * node's last log lines); "" when unreadable. Returns buf. */
const char *rundir_tail(const char *path, int lines, char *buf, size_t n);
/* A node's log as the dashboard shows it: the last `lines` lines of path
 * into buf (the newest that fit), or one line in parentheses saying why
 * there are none ("(this node has no log file)" for "" or NULL, "(cannot
 * read PATH: REASON)", "(the log is empty)"). Returns buf. */
const char *rundir_log_tail(const char *path, int lines, char *buf, size_t n);
void rundir_close(rundir *rd);
/* At the end of the process: appends "process exit: STATUS" ("process
 * exit: 130 (signal 2)" for a run interrupted by SIGINT) to the events.log
 * of every run directory this process created or opened, so `drover ls`
 * can tell done, failed and interrupted from crashed (no such line). Call
 * it once, after every rundir is closed. */
void rundir_record_exit(int status, int signo);

#endif
