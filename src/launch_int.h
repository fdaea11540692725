/* launch_int.h - what the launchers (launch_local.c, launch_slurm.c,
 * launch_ssh.c) share: launch_common.c. Not a public API. */
#ifndef DROVER_LAUNCH_INT_H
#define DROVER_LAUNCH_INT_H

#include <stddef.h>
#include <sys/types.h>

#include "launch.h"

/* "ps", "chief", "worker", "evaluator"; NULL for any other role. */
const char *launch__role_name(int role);
/* Monotonic milliseconds. */
long long launch__now_ms(void);
/* 0, or DRV_EINVAL naming what is missing or out of range in t. */
int launch__check_task(const launch_task *t);
/* The node's environment: ours minus DROVER_SECRET_FILE (and
 * OPENBLAS_NUM_THREADS when t->cpus is set), then those two from t,
 * written into the caller's buffers. A malloc'd array (free only the
 * array: the strings are environ's and the buffers), or NULL. */
char **launch__child_env(const launch_task *t, char *secret_var, size_t secret_n,
                         char *blas_var, size_t blas_n);
/* Opens DIR/logs/ROLE-I.log for appending (a restarted node adds to the
 * same file) and /dev/null, both close-on-exec (libuv dup2()s them onto
 * the child's 0-2). 0, or DRV_ERANGE / DRV_EIO with nothing left open. */
int launch__open_stdio(const launch_task *t, int *log_fd, int *null_fd);
/* Reaps the pids (> 0; each set to 0 once reaped), waiting at most ms in
 * all: libuv never reaps a child whose handle was closed. Returns how
 * many are left. */
int launch__reap(pid_t *pids, int n, long ms);

#endif
