/* launch_int.h - what the launchers (launch_local.c, launch_slurm.c,
 * launch_ssh.c) share: launch_common.c. Not a public API. */
#ifndef DROVER_LAUNCH_INT_H
#define DROVER_LAUNCH_INT_H

#include <stdbool.h>
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

/* ---- the ssh launcher's hosts (launch_ship.c) ---- */

typedef struct launch_site {
  char *name;  /* ssh destination (owned) */
  int slots, used;
  char *dir;   /* the per-run directory on the host, NULL: none (owned) */
  char *exe;   /* the drover shipped there, NULL: launch_self_exe() (owned) */
} launch_site;

typedef struct launch_ship_ctx {
  const char *config;       /* ssh -F, or NULL */
  const char *run_dir;      /* logs go to run_dir/logs/ssh-<host>.log */
  const char *const *files; /* shipped to every host (borrowed) */
  int nfiles;
  launch_note_cb note;      /* may be NULL */
  void *note_ud;
} launch_ship_ctx;

/* Appends s to out (length *len, capacity cap) in single quotes (' as
 * '\''), space-separated, for a remote shell; false when it does not fit. */
bool launch__sh_quote(char *out, size_t cap, size_t *len, const char *s);
/* <run_dir>/logs/ssh-<host>.log into out. */
int launch__host_log(const char *run_dir, const char *host, char *out, size_t n);
/* Probes the n hosts in parallel and ships to those that need it (see
 * launch_ship.c), setting each site's dir and exe. 0, or an error naming
 * the host and quoting ssh; directories made before a failure are in the
 * sites: launch__ship_clean removes them. */
int launch__ship(const launch_ship_ctx *x, launch_site *s, int n);
/* Removes the sites' directories (bounded; failures are only logged in
 * the hosts' ssh logs). The sites keep their strings. */
void launch__ship_clean(const launch_ship_ctx *x, launch_site *s, int n);

#endif
