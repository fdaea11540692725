/* launch_common.c - what every launcher needs: the task base (spawn, the
 * list of started tasks, exits, closing and killing them), role names, the
 * node's binary, environment and log, task checks, reaping, and
 * launch_open (the choice of launcher by name).
 *
 * Lifetimes follow libuv: a task is freed in its last close callback; it
 * leaves its launcher's list when its exit is reported or when the
 * launcher is destroyed, and its close callbacks never touch the launcher,
 * so a launcher may be destroyed from inside on_exit. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/rundir.h"
#include "launch/launch_int.h"
#include "base/util.h"
#include "proto/wire.h"

extern char **environ;

/* ============================== task base ================================ */

void launch__base_init(launch_base *b, const launch_ops *ops, uv_loop_t *loop,
                       launch_exit_cb on_exit, void *ud, launch_ended_fn ended) {
  b->pub = (launcher){.ops = ops, .loop = loop, .on_exit = on_exit, .ud = ud};
  b->procs = NULL;
  b->ended = ended;
}

launch_proc *launch__find(launch_base *b, void *task_ud) {
  for (launch_proc *p = b->procs; p; p = p->next)
    if (p->ud == task_ud) return p;
  return NULL;
}

int launch__running(launcher *l) {
  int n = 0;
  for (launch_proc *p = ((launch_base *)l)->procs; p; p = p->next) n++;
  return n;
}

static void unlink_proc(launch_base *b, launch_proc *p) {
  for (launch_proc **q = &b->procs; *q; q = &(*q)->next)
    if (*q == p) {
      *q = p->next;
      return;
    }
}

static void on_handle_closed(uv_handle_t *h) {
  launch_proc *p = h->data;
  if (--p->open == 0) free(p);
}

void launch__close(launch_proc *p) {
  if (p->also && !uv_is_closing(p->also)) uv_close(p->also, on_handle_closed);
  if (!uv_is_closing((uv_handle_t *)&p->proc)) uv_close((uv_handle_t *)&p->proc, on_handle_closed);
}

/* libuv reaped the child. The task leaves the list and its handles are
 * closed before on_exit runs, so on_exit may start a replacement with the
 * same task_ud, or destroy the launcher. */
static void on_proc_exit(uv_process_t *proc, int64_t status, int sig) {
  launch_proc *p = proc->data;
  launch_base *b = p->owner;
  void *ud = p->ud;
  unlink_proc(b, p);
  if (b->ended) b->ended(b, p, &status, &sig);
  launch__close(p);
  if (b->pub.on_exit) b->pub.on_exit(&b->pub, ud, status, sig);
}

int launch__spawn(launch_base *b, launch_proc *p, const char *file, char **args, char **env,
                  uv_stdio_container_t in, int log_fd, void *task_ud) {
  uv_stdio_container_t stdio[3] = {
      in,
      {.flags = UV_INHERIT_FD, .data.fd = log_fd},
      {.flags = UV_INHERIT_FD, .data.fd = log_fd},
  };
  uv_process_options_t o = {.exit_cb = on_proc_exit, .file = file, .args = args, .env = env,
                            .stdio = stdio, .stdio_count = 3, .flags = UV_PROCESS_DETACHED};
  p->proc.data = p;
  if (p->also) p->also->data = p;
  p->open = p->also ? 2 : 1;
  int err = uv_spawn(b->pub.loop, &p->proc, &o);
  if (err < 0) {
    /* uv_spawn initialised the handle even though it failed: close it,
     * and the close callback frees the task. */
    launch__close(p);
    return err;
  }
  p->owner = b;
  p->ud = task_ud;
  p->next = b->procs;
  b->procs = p;
  return 0;
}

int launch__close_all(launch_base *b, int sig, pid_t **pids, launch_proc ***procs) {
  int n = launch__running(&b->pub), k = 0;
  *pids = n ? calloc((size_t)n, sizeof **pids) : NULL;
  launch_proc **ps = n && procs ? calloc((size_t)n, sizeof *ps) : NULL;
  if (n && (!*pids || (procs && !ps))) {
    free(*pids), free(ps);
    *pids = NULL, ps = NULL;
  }
  for (launch_proc *p = b->procs, *next; p; p = next) {
    next = p->next;
    if (sig) uv_process_kill(&p->proc, sig);
    if (*pids) {
      if (ps) ps[k] = p;
      (*pids)[k++] = p->proc.pid;
    }
    /* Closing stops libuv from watching the pid: no exit callback now. */
    launch__close(p);
  }
  b->procs = NULL;
  if (procs) *procs = ps;
  return k;
}

void launch__kill_all(launch_base *b) {
  pid_t *pids;
  int k = launch__close_all(b, SIGKILL, &pids, NULL);
  if (pids) launch__reap(pids, k, LAUNCH__REAP_MS);
  free(pids);
}

/* ============================== the node ================================= */

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

static const char *const role_names[] = {
    [ROLE_PS] = "ps", [ROLE_CHIEF] = "chief", [ROLE_WORKER] = "worker",
    [ROLE_EVALUATOR] = "evaluator"};

const char *launch__role_name(int role) {
  if (role < 0 || role >= (int)(sizeof role_names / sizeof role_names[0])) return NULL;
  return role_names[role];
}

long long launch__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int launch__check_task(const launch_task *t) {
  if (!t) return err_set(DRV_EINVAL, "launch: NULL task");
  const char *r = launch__role_name(t->role);
  if (!r) return err_set(DRV_EINVAL, "launch: unknown role %d", t->role);
  if (t->index < 0) return err_set(DRV_EINVAL, "launch %s: index %d is negative", r, t->index);
  if (!t->coord || !t->run_dir || !t->secret_file || !t->bind_host)
    return err_set(DRV_EINVAL, "launch %s-%d: coord, run_dir, secret_file and bind_host are "
                   "all required", r, t->index);
  if (t->cpus < 0)
    return err_set(DRV_EINVAL, "launch %s-%d: cpus %d is negative", r, t->index, t->cpus);
  return 0;
}

char **launch__child_env(const launch_task *t, char *secret_var, size_t secret_n,
                         char *blas_var, size_t blas_n) {
  /* execve never writes into them */
  static const char *const transports[] = {"DROVER_TRANSPORT=auto", "DROVER_TRANSPORT=unix",
                                           "DROVER_TRANSPORT=tcp"};
  size_t n = 0;
  while (environ && environ[n]) n++;
  char **env = malloc((n + 4) * sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (strncmp(environ[i], "DROVER_SECRET_FILE=", 19) == 0) continue;
    if (t->cpus > 0 && strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) == 0) continue;
    if (t->transport && strncmp(environ[i], "DROVER_TRANSPORT=", 17) == 0) continue;
    env[k++] = environ[i];
  }
  for (int i = 0; t->transport && i < 3; i++)
    if (strcmp(transports[i] + 17, t->transport) == 0) env[k++] = (char *)transports[i];
  snprintf(secret_var, secret_n, "DROVER_SECRET_FILE=%s", t->secret_file);
  env[k++] = secret_var;
  if (t->cpus > 0) {
    snprintf(blas_var, blas_n, "OPENBLAS_NUM_THREADS=%d", t->cpus);
    env[k++] = blas_var;
  }
  env[k] = NULL;
  return env;
}

int launch__open_stdio(const launch_task *t, int *log_fd, int *null_fd) {
  const char *r = launch__role_name(t->role);
  char path[PATH_MAX];
  int k = rundir_node_log(path, sizeof path, t->run_dir, r, t->index);
  if (k < 0 || (size_t)k >= sizeof path)
    return err_set(DRV_ERANGE, "launch %s-%d: log path too long", r, t->index);
  *log_fd = util_open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (*log_fd < 0)
    return err_set(DRV_EIO, "launch %s-%d: cannot open '%s': %s", r, t->index, path,
                   strerror(errno));
  *null_fd = util_open("/dev/null", O_RDONLY, 0);
  if (*null_fd < 0) {
    int e = errno;
    close(*log_fd);
    return err_set(DRV_EIO, "launch %s-%d: cannot open /dev/null: %s", r, t->index,
                   strerror(e));
  }
  return 0;
}

int launch__reap(pid_t *pids, int n, long ms) {
  long long deadline = launch__now_ms() + ms;
  for (;;) {
    int left = 0;
    for (int i = 0; i < n; i++) {
      if (pids[i] <= 0) continue;
      pid_t k = waitpid(pids[i], NULL, WNOHANG);
      if (k == pids[i] || (k < 0 && errno != EINTR))
        pids[i] = 0;
      else
        left++;
    }
    if (left == 0 || launch__now_ms() >= deadline) return left;
    struct timespec pause = {0, 2 * 1000000L};
    nanosleep(&pause, NULL);
  }
}

/* ============================== by name ================================== */

static const struct {
  const char *name;
  launch_new_fn open;
} launchers[] = {{"local", launch_local_new},
                 {"slurm", launch_slurm_new},
                 {"ssh", launch_ssh_new},
                 {"spark", launch_spark_new},
                 {"yarn", launch_yarn_new},
                 {"external", launch_external_new}};
#define NLAUNCHERS (sizeof launchers / sizeof launchers[0])

int launch_open(const char *name, const launch_config *cfg, uv_loop_t *loop,
                launch_exit_cb on_exit, void *ud, launcher **out) {
  *out = NULL;
  for (size_t i = 0; i < NLAUNCHERS; i++)
    if (strcmp(name, launchers[i].name) == 0) return launchers[i].open(loop, cfg, on_exit, ud, out);
  return launch_check_name(name);
}

int launch_ship_name(const char *name, const char *path, char *out, size_t n) {
  if (strcmp(name, "spark") != 0) return launch__ship_name(path, out, n);
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (!*base) return err_set(DRV_EINVAL, "files: '%s' names no file", path);
  if (strlen(base) >= n) return err_set(DRV_ERANGE, "files: '%s' is too long", path);
  snprintf(out, n, "%s", base);
  return 0;
}

int launch_check_name(const char *name) {
  for (size_t i = 0; i < NLAUNCHERS; i++)
    if (strcmp(name, launchers[i].name) == 0) return 0;
  char known[256];
  size_t len = 0;
  known[0] = '\0';
  for (size_t i = 0; i < NLAUNCHERS && len < sizeof known; i++)
    len += (size_t)snprintf(known + len, sizeof known - len, "%s\"%s\"",
                            i == 0 ? "" : i + 1 == NLAUNCHERS ? " or " : ", ", launchers[i].name);
  return err_set(DRV_EUNSUPPORTED, "launcher '%s' is not available (%s)", name, known);
}
