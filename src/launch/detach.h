/* detach.h - `drover run --detach`: a run in the background that survives
 * the terminal and the SSH session closing.
 *
 * The parent forks; the child starts a new session (setsid), reads stdin
 * from /dev/null, writes stdout and stderr to a log file, and executes
 * `drover run` again with the same arguments. The run directory is only
 * known once the script creates its cluster, so the child gets the write
 * end of a pipe (DROVER_DETACH_FD) and the coordinator writes its run
 * directory there when it has started (coord_start, detach_notify). The
 * parent waits for that line (bounded), prints the run directory and how
 * to attach, and exits; if the child exits first, it prints the tail of
 * the child's log and fails.
 *
 * The log: runs/detached-<stamp>-<pid>.log under the current directory
 * until the run directory is known, then moved to <run dir>/logs/script.log
 * (a symbolic link to it when the move crosses file systems).
 */
#ifndef DROVER_DETACH_H
#define DROVER_DETACH_H

/* Parent: runs `drover run ARGS` detached; args[0..n) are what follows
 * `run` (options other than --detach, the script, its arguments). Prints
 * the run directory and the attach command to stdout; returns the exit
 * status (0 started; 1 failed to start, with the log's tail on stderr). */
int detach_run(int n, char **args);

/* Child: takes DROVER_DETACH_FD and DROVER_DETACH_LOG out of the
 * environment and marks the pipe close-on-exec, before any node is
 * spawned. A no-op in a process that was not detached. */
void detach_child_init(void);

/* The coordinator started in run_dir: the first call moves the log into
 * the run directory and tells the waiting parent; later calls (and calls
 * in a process that was not detached) do nothing. */
void detach_notify(const char *run_dir);

#endif
