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
 * spawned (launch_self_exe), so tests can run a fake node and a developer
 * can put a wrapper (valgrind, strace) in front of the real one.
 *
 * Lifetimes follow libuv: a task's uv_process_t is freed in its close
 * callback; a task leaves the launcher's list when its exit is reported or
 * when the launcher is destroyed, and its close callback never touches the
 * launcher, so the launcher may be destroyed from inside on_exit.
 */
#include "launch.h"
#include "launch_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "wire.h"

extern char **environ;

/* How long destroy waits for SIGKILLed nodes to be reaped. */
#define REAP_TIMEOUT_MS 2000

typedef struct local_launcher local_launcher;

typedef struct local_task {
  uv_process_t proc;      /* proc.data points back at the task */
  local_launcher *owner;  /* valid while the task is in owner's list */
  void *ud;               /* start's task_ud */
  struct local_task *next;
} local_task;

struct local_launcher {
  launcher base;     /* first member: launcher * and local_launcher * convert */
  local_task *tasks; /* started, exit not reported yet, handle open */
};

/* ============================== self ===================================== */

const char *launch_self_exe(void) {
  static char path[PATH_MAX];
  const char *over = getenv("DROVER_LAUNCH_EXE");
  if (over && *over) {
    snprintf(path, sizeof path, "%s", over);
    return path;
  }
  ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
  static const char deleted[] = " (deleted)";
  size_t dl = sizeof deleted - 1;
  /* The binary was replaced while we run (a rebuild): its old path now
   * names another program, perhaps speaking another protocol version.
   * /proc/self/exe still reaches our own image, in the child too. */
  if (k <= 0 || (size_t)k >= sizeof path - 1 ||
      ((size_t)k > dl && memcmp(path + k - dl, deleted, dl) == 0))
    return "/proc/self/exe";
  path[k] = '\0';
  return path;
}

/* ============================== list ===================================== */

static local_task *find_task(local_launcher *l, void *ud) {
  for (local_task *t = l->tasks; t; t = t->next)
    if (t->ud == ud) return t;
  return NULL;
}

static void unlink_task(local_launcher *l, local_task *t) {
  for (local_task **p = &l->tasks; *p; p = &(*p)->next)
    if (*p == t) {
      *p = t->next;
      return;
    }
}

/* The handle is the task's first member, so the handle is the task. */
static void free_task(uv_handle_t *h) { free(h); }
_Static_assert(offsetof(local_task, proc) == 0, "proc must be local_task's first member");

/* ============================== start ==================================== */

/* libuv reaped the child. The task leaves the list and its handle is
 * closed before on_exit runs, so on_exit may start a replacement with the
 * same task_ud, or destroy the launcher. */
static void on_process_exit(uv_process_t *proc, int64_t exit_status, int term_signal) {
  local_task *t = proc->data;
  local_launcher *l = t->owner;
  void *ud = t->ud;
  unlink_task(l, t);
  uv_close((uv_handle_t *)proc, free_task);
  if (l->base.on_exit) l->base.on_exit(&l->base, ud, exit_status, term_signal);
}

static int spawn_task(local_launcher *l, local_task *task, const launch_task *t,
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

  uv_stdio_container_t stdio[3] = {
      {.flags = UV_INHERIT_FD, .data.fd = null_fd},
      {.flags = UV_INHERIT_FD, .data.fd = log_fd},
      {.flags = UV_INHERIT_FD, .data.fd = log_fd},
  };
  uv_process_options_t o = {0};
  o.exit_cb = on_process_exit;
  o.file = exe;
  o.args = args;
  o.env = env;
  o.stdio = stdio;
  o.stdio_count = 3;
  o.flags = UV_PROCESS_DETACHED; /* own session and group: see the top of the file */
  task->proc.data = task;
  return uv_spawn(l->base.loop, &task->proc, &o);
}

static int local_start(launcher *base, const launch_task *t, void *task_ud, pid_t *pid) {
  local_launcher *l = (local_launcher *)base;
  if (pid) *pid = 0;
  int rc = launch__check_task(t);
  if (rc < 0) return rc;
  const char *r = launch__role_name(t->role);
  const char *exe = launch_self_exe();

  char secret_var[PATH_MAX + 32], blas_var[48];
  char **env = launch__child_env(t, secret_var, sizeof secret_var, blas_var, sizeof blas_var);
  local_task *task = calloc(1, sizeof *task);
  if (!env || !task) {
    free(env);
    free(task);
    return drv_error(DRV_ENOMEM, "launch %s-%d: out of memory", r, t->index);
  }
  int log_fd = -1, null_fd = -1;
  if ((rc = launch__open_stdio(t, &log_fd, &null_fd)) < 0) {
    free(env);
    free(task);
    return rc;
  }
  int err = spawn_task(l, task, t, exe, env, log_fd, null_fd);
  /* The child has its own copies now (uv_spawn returns after its exec). */
  close(log_fd);
  close(null_fd);
  free(env);
  if (err < 0) {
    /* uv_spawn initialised the handle even though it failed: close it,
     * and the close callback frees the task. */
    uv_close((uv_handle_t *)&task->proc, free_task);
    return drv_error(DRV_EIO, "launch %s-%d: cannot start '%s': %s", r, t->index, exe,
                     uv_strerror(err));
  }
  task->owner = l;
  task->ud = task_ud;
  task->next = l->tasks;
  l->tasks = task;
  if (pid) *pid = task->proc.pid;
  return 0;
}

/* ============================== control ================================== */

static int local_signal(launcher *base, void *task_ud, int sig) {
  local_launcher *l = (local_launcher *)base;
  local_task *t = find_task(l, task_ud);
  if (!t) return 0; /* its exit was reported: nothing to signal */
  int err = uv_process_kill(&t->proc, sig);
  /* ESRCH: it exited and libuv has not reaped it yet; on_exit follows. */
  if (err < 0 && err != UV_ESRCH)
    return drv_error(DRV_EIO, "cannot send signal %d to pid %d: %s", sig, t->proc.pid,
                     uv_strerror(err));
  return 0;
}

static int local_running(launcher *base) {
  int n = 0;
  for (local_task *t = ((local_launcher *)base)->tasks; t; t = t->next) n++;
  return n;
}

static void local_destroy(launcher *base) {
  local_launcher *l = (local_launcher *)base;
  if (!l) return;
  int n = local_running(base), k = 0;
  pid_t *pids = n ? malloc((size_t)n * sizeof *pids) : NULL;
  for (local_task *t = l->tasks, *next; t; t = next) {
    next = t->next;
    uv_process_kill(&t->proc, SIGKILL);
    if (pids) pids[k++] = t->proc.pid;
    /* Closing stops libuv from watching the pid: no exit callback now. */
    uv_close((uv_handle_t *)&t->proc, free_task);
  }
  l->tasks = NULL;
  if (pids) launch__reap(pids, k, REAP_TIMEOUT_MS);
  free(pids);
  free(l);
}

static const launch_ops local_ops = {"local", local_start, local_signal, local_running,
                                     local_destroy};

launcher *launch_local_new(uv_loop_t *loop, launch_exit_cb on_exit, void *ud) {
  if (!loop) {
    drv_error(DRV_EINVAL, "launch_local_new: NULL loop");
    return NULL;
  }
  local_launcher *l = calloc(1, sizeof *l);
  if (!l) {
    drv_error(DRV_ENOMEM, "out of memory creating the local launcher");
    return NULL;
  }
  l->base.ops = &local_ops;
  l->base.loop = loop;
  l->base.on_exit = on_exit;
  l->base.ud = ud;
  return &l->base;
}
