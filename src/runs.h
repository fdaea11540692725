/* runs.h - `drover ls`: the run directories under a runs directory, with
 * their state (running, done, failed), node count, start time and, while
 * running, the coordinator's address. */
#ifndef DROVER_RUNS_H
#define DROVER_RUNS_H

#include <stdio.h>

/* Prints a header and one line per run directory under `base` (oldest
 * first; nothing when there is none). Returns the number of runs, or
 * DRV_EIO ("cannot list runs in 'x': ..."), DRV_ENOMEM. */
int runs_list(const char *base, FILE *out);

#endif
