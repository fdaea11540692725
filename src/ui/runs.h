/* runs.h - `drover ls`: the run directories under a runs directory, with
 * their state (running, done, failed, interrupted, crashed), exit status,
 * node count, start time and, while running, the coordinator's address;
 * finding a run by name; removing one. */
#ifndef DROVER_RUNS_H
#define DROVER_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The event that says the REPL hosts a run (l_train.c, l_cluster.c write
 * it as the run opens): the REPL's exit status is not the run's, and the
 * run stands as its last fit ended (runs.c). */
#define RUNS_REPL_EVENT "the REPL hosts this run"

/* Prints a header and one line per run directory under `base` (oldest
 * first; nothing when there is none). Returns the number of runs, or
 * DRV_EIO ("cannot list runs in 'x': ..."), DRV_ENOMEM. */
int runs_list(const char *base, FILE *out);
/* Whether dir holds an in-process run: its script kept (run.json) and no
 * secret (a cluster run keeps its script too, and always has a secret). */
bool runs_in_process(const char *dir);
/* Whether the run in dir is running, as `drover ls` says it: its
 * coordinator's or, in process, its own process is alive (and, when that
 * is the REPL, a fit runs). */
bool runs_running(const char *dir);

/* Whether the REPL hosts the run in dir (RUNS_REPL_EVENT): its process
 * outlives the run's fits (and, `drover stop`ped, its cluster). */
bool runs_repl(const char *dir);

/* The pid in dir/process ("in-process PID", while an in-process run's
 * process lives): 0 when there is none or it is gone. */
long runs_process_pid(const char *dir);

/* The pid in dir/coordinator ("HOST:PORT PID"), the address copied to
 * addr (n bytes, may be 0): -1 when there is no such file, 0 when it does
 * not parse. */
long runs_coordinator_pid(const char *dir, char *addr, size_t n);

/* The run directory `name` stands for, into dir[n]: every command that
 * takes a run resolves it here. name itself when it is a directory; else
 * base/name (a name `drover ls` prints); else the one run under base whose
 * name starts with `name` ("mnist-2026" for mnist-20261124-101500). 0, or
 * DRV_EINVAL: "no run 'x' (... drover ls runs lists them)", or, for a
 * prefix of several runs, "run 'x' is ambiguous: N runs in 'runs' start
 * so (give more of the name):" and their names, one a line, oldest first. */
int runs_find(const char *base, const char *name, char *dir, size_t n);

/* `drover rm`: removes run directory dir and all it holds, under its lock
 * (rundir_lock: nothing can start in it meanwhile). Refuses a directory
 * that is not a run's (no events.log) and a run that is running (its lock
 * held: "run 'D' is running (pid N): drover stop ... first"; or its
 * coordinator or process alive), or that a REPL holds between fits ("run
 * 'D' is held by the REPL that ran it (pid N) ..."). 0, DRV_EINVAL,
 * DRV_EAGAIN, DRV_EIO. */
int runs_remove(const char *dir);

/* Whether the run in dir has ended well (`drover ls` says "done"): then
 * the steps of its last fit into *step (-1: it logged none) and its exit
 * status into *exit_status (-1: none recorded). */
bool runs_done(const char *dir, int64_t *step, int *exit_status);

/* How the run in `dir` stands, as `drover ls` says it ("running", "done",
 * "failed", "crashed ..."), into state[n], and the UTC time stamp of its
 * last event into last[nl] ("" when none). */
void runs_state(const char *dir, char *state, size_t n, char *last, size_t nl);

#endif
