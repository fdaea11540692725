/* logs.h - `drover logs`: a run's node logs (logs/<role>-<i>.log, the
 * coordinator's, a detached run's script.log), one node's or all of them
 * merged in time order, each line after its node's name ("worker:1 | ..."),
 * and followed while they grow.
 *
 * Lines are ordered by their leading time stamp ("2026-11-21T10:53:06.123Z",
 * as log.c writes them); a line without one (a node's own print) takes the
 * time of the line before it in its file. An in-process run has no node
 * logs: its events.log stands in, as the node "events".
 */
#ifndef DROVER_LOGS_H
#define DROVER_LOGS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct logs_opts {
  const char *run;    /* a run directory, or a name as `drover ls` prints it */
  const char *runs;   /* where names are looked up ("runs") */
  const char *node;   /* "worker:1", "coordinator", "script", "events"; NULL: all */
  bool follow;        /* go on printing what is appended, until the run ends */
  double poll;        /* seconds between looks while following (0: 0.2) */
} logs_opts;

/* Prints the logs to out. Returns 0, or DRV_EINVAL with the reason (no
 * such run, no such node: the message lists the nodes it has). With
 * follow, returns once the run is no longer running and what it wrote last
 * is printed (Ctrl-C, left to its default, ends it sooner). */
int logs_main(const logs_opts *o, FILE *out);

#endif
