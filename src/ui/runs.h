/* runs.h - `drover ls`: the run directories under a runs directory, with
 * their state (running, done, failed, interrupted, crashed), exit status,
 * node count, start time and, while
 * running, the coordinator's address. */
#ifndef DROVER_RUNS_H
#define DROVER_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Prints a header and one line per run directory under `base` (oldest
 * first; nothing when there is none). Returns the number of runs, or
 * DRV_EIO ("cannot list runs in 'x': ..."), DRV_ENOMEM. */
int runs_list(const char *base, FILE *out);
/* Whether dir holds an in-process run: its script kept (run.json) and no
 * secret (a cluster run keeps its script too, and always has a secret). */
bool runs_in_process(const char *dir);
/* Whether the run in dir is running (its coordinator's or, in process,
 * its own process is alive). */
bool runs_running(const char *dir);

/* The pid in dir/coordinator ("HOST:PORT PID"), the address copied to
 * addr (n bytes, may be 0): -1 when there is no such file, 0 when it does
 * not parse. */
long runs_coordinator_pid(const char *dir, char *addr, size_t n);

/* The run directory `name` stands for, into dir[n]: name itself when it is
 * a directory; else base/name (a name `drover ls` prints); else the newest
 * run under base whose name starts with `name` ("train" for the newest
 * train-20261124-...). 0, or DRV_EINVAL naming both ("no run 'x' in
 * 'runs' (drover ls lists them)"). */
int runs_find(const char *base, const char *name, char *dir, size_t n);

/* How the run in `dir` stands, as `drover ls` says it ("running", "done",
 * "failed", "crashed ..."), into state[n], and the UTC time stamp of its
 * last event into last[nl] ("" when none). */
void runs_state(const char *dir, char *state, size_t n, char *last, size_t nl);

#endif
