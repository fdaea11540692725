/* launch_local.c - the local launcher: node processes on this machine,
 * spawned with libuv from this very binary.
 *
 * Each task is `<self> node --coord ... --role ... --index ...` (the full
 * argument list is in launch.h) with:
 *   stdin            /dev/null
 *   stdout, stderr   appended to <run_dir>/logs/<role>-<index>.log
 *   environment      ours, plus DROVER_SECRET_FILE=<secret_file> and, when
 *                    cpus > 0, OPENBLAS_NUM_THREADS=<cpus> (replacing any
 *                    inherited value, never duplicating it)
 * The secret itself never appears in argv or the environment: only the
 * path of its 0600 file does.
 *
 * Process groups. Each node runs in a session (and so a process group) of
 * its own, through UV_PROCESS_DETACHED, which is setsid() in the child:
 *  - the coordinator decides the shutdown order (wait for running steps,
 *    stop workers, then the ps) and, in the REPL, Ctrl-C interrupts the
 *    running chunk while the cluster lives on. A node in the terminal's
 *    foreground process group would get the terminal's SIGINT, SIGQUIT and
 *    SIGTSTP at the same moment as the coordinator and die or stop in no
 *    particular order. Out of that group, only the coordinator signals it.
 *  - setpgid() alone would be enough, but uv_spawn offers no hook to run it
 *    in the child, and the parent cannot do it afterwards: uv_spawn returns
 *    only once the child has exec'd, and setpgid() on a child that has
 *    exec'd fails with EACCES. setsid() also gives a new process group; the
 *    one thing it adds, leaving the controlling terminal, costs nothing
 *    because a node never touches the terminal (stdin is /dev/null, output
 *    goes to its log).
 *  - "detached" in libuv's sense (the child may outlive us) is not a
 *    concern: the handle stays referenced, destroy SIGKILLs what is left,
 *    and a node that loses its coordinator exits by itself (node.h). That
 *    is also why PR_SET_PDEATHSIG, which uv_spawn cannot set either, is not
 *    needed.
 *
 * Test hook: $DROVER_LAUNCH_EXE, when set, replaces the binary that is
 * spawned (launch_self_exe, launch_common.c), so tests can run a fake node
 * and a developer can put a wrapper (valgrind, strace) in front of the
 * real one.
 *
 * A task is the task base's launch_proc alone (launch_int.h), which also
 * keeps the list, reports exits and frees tasks.
 */
#include "launch/launch.h"
#include "launch/launch_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "proto/wire.h"

/* ============================== start ==================================== */

static int spawn_task(launch_base *l, launch_proc *task, const launch_task *t, void *task_ud,
                      const char *exe, char **env, int log_fd, int null_fd) {
  char index[16], cpus[16], hb[16], to[16];
  snprintf(index, sizeof index, "%d", t->index);
  snprintf(cpus, sizeof cpus, "%d", t->cpus);
  snprintf(hb, sizeof hb, "%u", (unsigned)t->heartbeat_ms);
  snprintf(to, sizeof to, "%u", (unsigned)t->timeout_ms);
  char *args[24];
  int n = 0;
#define ARG(s) (args[n++] = (char *)(s))
  ARG(exe), ARG("node"), ARG("--coord"), ARG(t->coord), ARG("--role"), ARG(launch__role_name(t->role));
  ARG("--index"), ARG(index), ARG("--run-dir"), ARG(t->run_dir), ARG("--bind"), ARG(t->bind_host);
  if (t->cpus > 0) ARG("--cpus"), ARG(cpus);
  ARG("--heartbeat-ms"), ARG(hb), ARG("--timeout-ms"), ARG(to), ARG(NULL);
#undef ARG
  /* In its own session and group: see the top of the file. */
  uv_stdio_container_t in = {.flags = UV_INHERIT_FD, .data.fd = null_fd};
  return launch__spawn(l, task, exe, args, env, in, log_fd, task_ud);
}

static int start_task(launcher *base, const launch_task *t, void *task_ud, pid_t *pid) {
  launch_base *l = (launch_base *)base;
  if (pid) *pid = 0;
  int rc = launch__check_task(t);
  if (rc < 0) return rc;
  const char *r = launch__role_name(t->role);
  const char *exe = launch_self_exe();

  char secret_var[PATH_MAX + 32], blas_var[48];
  char **env = launch__child_env(t, secret_var, sizeof secret_var, blas_var, sizeof blas_var);
  launch_proc *task = calloc(1, sizeof *task);
  if (!env || !task) {
    free(env);
    free(task);
    return err_set(DRV_ENOMEM, "launch %s-%d: out of memory", r, t->index);
  }
  int log_fd = -1, null_fd = -1;
  if ((rc = launch__open_stdio(t, &log_fd, &null_fd)) < 0) {
    free(env);
    free(task);
    return rc;
  }
  int err = spawn_task(l, task, t, task_ud, exe, env, log_fd, null_fd);
  /* The child has its own copies now (uv_spawn returns after its exec). */
  close(log_fd);
  close(null_fd);
  free(env);
  if (err < 0) /* the task is freed */
    return err_set(DRV_EIO, "launch %s-%d: cannot start '%s': %s", r, t->index, exe,
                   uv_strerror(err));
  if (pid) *pid = task->proc.pid;
  return 0;
}

/* A start is what recovery needs when a flood of connections has filled the
 * descriptor table (a log, /dev/null, libuv's pipes for the exec): the
 * process's reserve is released for it and taken back after (util.h). */
static int local_start(launcher *base, const launch_task *t, void *task_ud, pid_t *pid) {
  util_fd_release();
  int rc = start_task(base, t, task_ud, pid);
  util_fd_reserve();
  return rc;
}

/* ============================== control ================================== */

static int local_signal(launcher *base, void *task_ud, int sig) {
  launch_proc *t = launch__find((launch_base *)base, task_ud);
  if (!t) return 0; /* its exit was reported: nothing to signal */
  int err = uv_process_kill(&t->proc, sig);
  /* ESRCH: it exited and libuv has not reaped it yet; on_exit follows. */
  if (err < 0 && err != UV_ESRCH)
    return err_set(DRV_EIO, "cannot send signal %d to pid %d: %s", sig, t->proc.pid,
                   uv_strerror(err));
  return 0;
}

static void local_destroy(launcher *base) {
  if (!base) return;
  launch__kill_all((launch_base *)base);
  free(base);
}

/* This machine takes any number of nodes: c:scale's bound is `max`. */
static int local_room(launcher *l, int role, const int *index, int n, int cpus) {
  (void)l, (void)role, (void)index, (void)n, (void)cpus;
  return 0;
}

static const launch_ops local_ops = {"local", local_start, local_signal, launch__running,
                                     local_destroy, NULL, NULL, local_room};

int launch_local_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit, void *ud,
                     launcher **out) {
  (void)cfg;
  *out = NULL;
  if (!loop) return err_set(DRV_EINVAL, "launch_local_new: NULL loop");
  launch_base *l = calloc(1, sizeof *l); /* nothing of its own: the base is all */
  if (!l) return err_set(DRV_ENOMEM, "out of memory creating the local launcher");
  launch__base_init(l, &local_ops, loop, on_exit, ud, NULL);
  *out = &l->pub;
  return 0;
}
