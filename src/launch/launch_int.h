/* launch_int.h - what the launchers (launch_local.c, launch_slurm.c,
 * launch_ssh.c) share: launch_common.c. Not a public API.
 *
 * A launcher is a launch_base (the public launcher and its task list)
 * followed by what is its own; a task is a launch_proc (the local process
 * that is the node's handle: the node itself, its ssh or its srun)
 * followed by what is its own. The base spawns, keeps the list, reports
 * exits and closes handles; a launcher adds only what differs. */
#ifndef DROVER_LAUNCH_INT_H
#define DROVER_LAUNCH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch/launch.h"

/* ---- the task base ---- */

/* destroy: how long killed processes get to be reaped (libuv never reaps
 * a child whose handle was closed). */
#define LAUNCH__REAP_MS 2000

typedef struct launch_base launch_base;

/* A started task. A launcher's own task struct has it as its first member
 * and is one malloc'ed block: the last close callback frees it (free()),
 * so what the task owns must live inside it. */
typedef struct launch_proc {
  uv_process_t proc;       /* first member; proc.data points back at the task */
  uv_handle_t *also;       /* a second handle of the task closed with it (ssh's
                            * stdin pipe), initialised before the spawn; or NULL */
  int open;                /* handles not closed yet */
  launch_base *owner;      /* valid while the task is in owner's list */
  void *ud;                /* start's task_ud */
  struct launch_proc *next;
} launch_proc;

/* A launcher's reading of a task's end, called before its owner hears of
 * it (the task is already out of the list): may log, and rewrite the
 * status and signal (srun's and ssh's 128 + S). */
typedef void (*launch_ended_fn)(launch_base *b, launch_proc *p, int64_t *status, int *sig);

struct launch_base {
  launcher pub;           /* first member: launcher * and launch_base * convert */
  launch_proc *procs;     /* started, exit not reported yet, handles open */
  launch_ended_fn ended;  /* NULL: the exit as libuv reports it */
};

/* Fills in b's public part; the list starts empty. */
void launch__base_init(launch_base *b, const launch_ops *ops, uv_loop_t *loop,
                       launch_exit_cb on_exit, void *ud, launch_ended_fn ended);
/* The task started with task_ud whose exit is not reported yet, or NULL. */
launch_proc *launch__find(launch_base *b, void *task_ud);
/* launch_ops.running for every launcher: the length of the list. */
int launch__running(launcher *l);
/* Spawns `file` (searched in PATH when it has no slash) with args and env
 * (NULL: ours) as task p of b (p zeroed but for what the launcher fills
 * in, `also` included), in a session of its own (launch_local.c says why),
 * with stdin from `in` and stdout and stderr appended to log_fd (the
 * caller keeps its descriptors: the child has copies once this returns).
 * On success p is in the list with task_ud, and its exit is reported
 * through b->ended and on_exit. On failure (libuv's code returned) p is
 * closed, and so freed: do not touch it. */
int launch__spawn(launch_base *b, launch_proc *p, const char *file, char **args, char **env,
                  uv_stdio_container_t in, int log_fd, void *task_ud);
/* Closes p's handles (once); the last close callback frees p. */
void launch__close(launch_proc *p);
/* Empties b's list for destroy: sends each task `sig` (when not 0) and
 * closes it, so no exit callback comes; the tasks are freed by a later
 * turn of the loop and stay readable for the rest of the caller's turn.
 * Returns how many there were, their pids in *pids and (when procs is not
 * NULL) the tasks in *procs, malloc'ed arrays the caller frees; 0 and NULLs
 * when there were none or memory ran out (the tasks are closed all the same). */
int launch__close_all(launch_base *b, int sig, pid_t **pids, launch_proc ***procs);
/* SIGKILLs every task, closes it and reaps it (at most LAUNCH__REAP_MS). */
void launch__kill_all(launch_base *b);

/* ---- the node's process ---- */

/* "ps", "chief", "worker", "evaluator"; NULL for any other role. */
const char *launch__role_name(int role);
/* Monotonic milliseconds. */
long long launch__now_ms(void);
/* 0, or DRV_EINVAL naming what is missing or out of range in t. */
int launch__check_task(const launch_task *t);
/* The node's environment: ours minus DROVER_SECRET_FILE (and
 * OPENBLAS_NUM_THREADS when t->cpus is set, DROVER_TRANSPORT when
 * t->transport is), then those from t, written into the caller's buffers
 * (DROVER_TRANSPORT a static string). A malloc'd array (free only the
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
/* The name a listed file gets where nodes run (the ssh launcher's per-run
 * directory, a YARN container's working directory): a relative path as
 * given ("./" dropped, no ".." in it), an absolute one by its last
 * component. 0, or an error naming the path. */
int launch__ship_name(const char *path, char *out, size_t n);
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
