/* launch_common.c - what every launcher needs: role names, the node's
 * environment and log, task checks, reaping, and launch_open (the choice
 * of launcher by name). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "launch_int.h"
#include "wire.h"

extern char **environ;

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
  if (!t) return drv_error(DRV_EINVAL, "launch: NULL task");
  const char *r = launch__role_name(t->role);
  if (!r) return drv_error(DRV_EINVAL, "launch: unknown role %d", t->role);
  if (t->index < 0) return drv_error(DRV_EINVAL, "launch %s: index %d is negative", r, t->index);
  if (!t->coord || !t->run_dir || !t->secret_file || !t->bind_host)
    return drv_error(DRV_EINVAL, "launch %s-%d: coord, run_dir, secret_file and bind_host are "
                     "all required", r, t->index);
  if (t->cpus < 0)
    return drv_error(DRV_EINVAL, "launch %s-%d: cpus %d is negative", r, t->index, t->cpus);
  return 0;
}

char **launch__child_env(const launch_task *t, char *secret_var, size_t secret_n,
                         char *blas_var, size_t blas_n) {
  size_t n = 0;
  while (environ && environ[n]) n++;
  char **env = malloc((n + 3) * sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (strncmp(environ[i], "DROVER_SECRET_FILE=", 19) == 0) continue;
    if (t->cpus > 0 && strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) == 0) continue;
    env[k++] = environ[i];
  }
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
  int k = snprintf(path, sizeof path, "%s/logs/%s-%d.log", t->run_dir, r, t->index);
  if (k < 0 || (size_t)k >= sizeof path)
    return drv_error(DRV_ERANGE, "launch %s-%d: log path too long", r, t->index);
  *log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (*log_fd < 0)
    return drv_error(DRV_EIO, "launch %s-%d: cannot open '%s': %s", r, t->index, path,
                     strerror(errno));
  *null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (*null_fd < 0) {
    int e = errno;
    close(*log_fd);
    return drv_error(DRV_EIO, "launch %s-%d: cannot open /dev/null: %s", r, t->index,
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

int launch_open(const char *name, const launch_config *cfg, uv_loop_t *loop,
                launch_exit_cb on_exit, void *ud, launcher **out) {
  *out = NULL;
  if (strcmp(name, "local") == 0) {
    if (!(*out = launch_local_new(loop, on_exit, ud))) return drv_error(DRV_ENOMEM, "out of memory");
    return 0;
  }
  if (strcmp(name, "slurm") == 0) return launch_slurm_new(loop, cfg, on_exit, ud, out);
  if (strcmp(name, "ssh") == 0) {
    launch_config c = *cfg;
    if (!c.ssh_config || !*c.ssh_config) c.ssh_config = getenv("DROVER_SSH_CONFIG");
    *out = launch_ssh_new(loop, &c, on_exit, ud);
    return *out ? 0 : DRV_EINVAL; /* the message names the host */
  }
  return drv_error(DRV_EUNSUPPORTED, "launcher '%s' is not available (\"local\", \"slurm\" or \"ssh\")",
                   name);
}
