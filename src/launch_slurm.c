/* launch_slurm.c - the Slurm launcher: each node is a job step of the
 * allocation drover runs in, started with `srun`.
 *
 * Only the commands are used (srun, squeue, scancel), never libslurm, so
 * the binary does not depend on one Slurm version.
 *
 * A task is
 *   srun --ntasks=1 --nodes=1 --cpus-per-task=N --exact
 *        --job-name=drover-ROLE-I --input=none  <self> node ... (launch.h)
 * spawned with libuv like a local node: srun is the local handle, and its
 * exit is the node's exit. srun's stdout and stderr (which carry the
 * task's, plus srun's own messages) are appended to the node's log; the
 * environment is ours plus DROVER_SECRET_FILE and OPENBLAS_NUM_THREADS,
 * which srun exports to the task (--export=ALL is its default). srun runs
 * in its own session for the reason launch_local.c gives: the terminal's
 * Ctrl-C is the coordinator's alone (one SIGINT makes srun print status,
 * two kill the step).
 *
 * Exit statuses. srun exits with its task's status, or 128+S when the task
 * was killed by signal S; 129..159 is reported as term_signal S.
 *
 * Signals. SIGTERM to srun kills the step at once without giving the task
 * a SIGTERM (../shared/slurm/NOTES.md, section 6), so a signal goes through
 * Slurm: `scancel --signal=SIG JOB.STEP`, with the step id found by name
 * (`squeue -s`). Until the step exists (srun is still waiting for it), the
 * signal goes to srun, which then gives up on the step.
 *
 * destroy cancels every step still running (`scancel --signal=KILL` by
 * step id), sends srun SIGTERM, waits a bounded time for the sruns to end,
 * then SIGKILLs what is left and reaps it.
 *
 * Helper commands (squeue, scancel) run synchronously with a bounded wait
 * (HELPER_TIMEOUT_MS): they take milliseconds and are needed only for
 * signals and teardown, never on the training path.
 *
 * Not yet: submitting a job when outside an allocation (sbatch, waiting
 * with the pending reason, scancel at shutdown); --mem/--gres from per-role
 * resources; a routable coordinator address for nodes on other hosts.
 */
#include "launch.h"
#include "launch_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "wire.h"

extern char **environ;

#define HELPER_TIMEOUT_MS 5000 /* one squeue or scancel */
#define SRUN_END_MS 8000       /* destroy: sruns to end after the cancel (KillWait + 2 s is usual) */
#define REAP_TIMEOUT_MS 2000   /* destroy: sruns to be reaped after SIGKILL */

typedef struct slurm_launcher slurm_launcher;

typedef struct slurm_task {
  uv_process_t proc;     /* srun; proc.data points back at the task */
  slurm_launcher *owner; /* valid while the task is in owner's list */
  void *ud;              /* start's task_ud */
  char name[48];         /* step name: drover-ROLE-I */
  long step;             /* step id once known, else -1 */
  struct slurm_task *next;
} slurm_task;

struct slurm_launcher {
  launcher base; /* first member */
  char job[32];  /* SLURM_JOB_ID of the allocation */
  slurm_task *tasks;
};

/* ============================== helpers ================================== */

/* Runs argv (searched in PATH) with stdin from /dev/null, its stdout into
 * out (NUL-terminated, truncated to n - 1; may be NULL) and its stderr
 * discarded, for at most HELPER_TIMEOUT_MS (then SIGKILL). Returns its exit
 * status (0..255), or a negative code. The child is reaped here: libuv only
 * waits for the pids of its own process handles. */
static int run_helper(char *const argv[], char *out, size_t n) {
  if (out && n) out[0] = '\0';
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return drv_error(DRV_EIO, "pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (e != 0) {
    close(fds[0]);
    return drv_error(DRV_EIO, "cannot run %s: %s", argv[0], strerror(e));
  }
  size_t len = 0;
  long long deadline = launch__now_ms() + HELPER_TIMEOUT_MS;
  bool timed_out = false;
  for (;;) {
    long long left = deadline - launch__now_ms();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    int k = poll(&p, 1, (int)left);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) continue;
    char buf[4096];
    ssize_t r = read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* EOF: the helper closed its stdout */
    if (out && n && len < n - 1) {
      size_t c = (size_t)r < n - 1 - len ? (size_t)r : n - 1 - len;
      memcpy(out + len, buf, c);
      len += c;
      out[len] = '\0';
    }
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return drv_error(DRV_ETIMEDOUT, "%s did not answer within %d ms", argv[0], HELPER_TIMEOUT_MS);
  if (WIFSIGNALED(status))
    return drv_error(DRV_EIO, "%s killed by signal %d", argv[0], WTERMSIG(status));
  return WEXITSTATUS(status);
}

/* Fills in the step id of every task that lacks one, from one
 * `squeue -s` of our job: lines "JOB.STEP NAME". A name that appears more
 * than once (a restarted node whose old step is still COMPLETING) takes
 * the highest step id, the newest. */
static void learn_steps(slurm_launcher *l) {
  bool need = false;
  for (slurm_task *t = l->tasks; t; t = t->next) need |= t->step < 0;
  if (!need) return;
  char out[16384];
  char *argv[] = {"squeue", "-h", "-s", "-j", l->job, "-o", "%i %j", NULL};
  if (run_helper(argv, out, sizeof out) != 0) return;
  size_t jl = strlen(l->job);
  char *save = NULL;
  for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char id[64], name[64];
    if (sscanf(line, "%63s %63s", id, name) != 2) continue;
    if (strncmp(id, l->job, jl) != 0 || id[jl] != '.') continue;
    char *end;
    long step = strtol(id + jl + 1, &end, 10);
    if (end == id + jl + 1 || *end) continue; /* "batch", "extern" */
    for (slurm_task *t = l->tasks; t; t = t->next)
      if (strcmp(t->name, name) == 0 && step > t->step) t->step = step;
  }
}

/* ============================== list ===================================== */

static slurm_task *find_task(slurm_launcher *l, void *ud) {
  for (slurm_task *t = l->tasks; t; t = t->next)
    if (t->ud == ud) return t;
  return NULL;
}

static void unlink_task(slurm_launcher *l, slurm_task *t) {
  for (slurm_task **p = &l->tasks; *p; p = &(*p)->next)
    if (*p == t) {
      *p = t->next;
      return;
    }
}

static void free_task(uv_handle_t *h) { free(h); }
_Static_assert(offsetof(slurm_task, proc) == 0, "proc must be slurm_task's first member");

/* ============================== start ==================================== */

/* srun ended. As in launch_local.c, the task leaves the list and its handle
 * is closed before on_exit, which may start a replacement or destroy us. */
static void on_srun_exit(uv_process_t *proc, int64_t exit_status, int term_signal) {
  slurm_task *t = proc->data;
  slurm_launcher *l = t->owner;
  void *ud = t->ud;
  unlink_task(l, t);
  uv_close((uv_handle_t *)proc, free_task);
  if (!term_signal && exit_status > 128 && exit_status < 160) {
    term_signal = (int)(exit_status - 128); /* the task's signal, as srun reports it */
    exit_status = 0;
  }
  if (l->base.on_exit) l->base.on_exit(&l->base, ud, exit_status, term_signal);
}

static int spawn_srun(slurm_launcher *l, slurm_task *task, const launch_task *t, char **env,
                      int log_fd, int null_fd) {
  char index[16], cpt[32], hb[16], to[16], cpus[16], jobname[64];
  snprintf(index, sizeof index, "%d", t->index);
  snprintf(cpus, sizeof cpus, "%d", t->cpus);
  snprintf(cpt, sizeof cpt, "--cpus-per-task=%d", t->cpus > 0 ? t->cpus : 1);
  snprintf(hb, sizeof hb, "%u", (unsigned)t->heartbeat_ms);
  snprintf(to, sizeof to, "%u", (unsigned)t->timeout_ms);
  snprintf(jobname, sizeof jobname, "--job-name=%s", task->name);
  char *args[32];
  int n = 0;
#define ARG(s) (args[n++] = (char *)(s))
  /* --exact: the step gets only the CPUs it asks for, so the nodes' steps
   * run side by side in the allocation instead of waiting for each other. */
  ARG("srun"), ARG("--ntasks=1"), ARG("--nodes=1"), ARG(cpt), ARG("--exact"), ARG(jobname);
  ARG("--input=none");
  ARG(launch_self_exe()), ARG("node"), ARG("--coord"), ARG(t->coord);
  ARG("--role"), ARG(launch__role_name(t->role)), ARG("--index"), ARG(index);
  ARG("--run-dir"), ARG(t->run_dir), ARG("--bind"), ARG(t->bind_host);
  if (t->cpus > 0) ARG("--cpus"), ARG(cpus);
  ARG("--heartbeat-ms"), ARG(hb), ARG("--timeout-ms"), ARG(to), ARG(NULL);
#undef ARG
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_INHERIT_FD, .data.fd = null_fd},
      {.flags = UV_INHERIT_FD, .data.fd = log_fd},
      {.flags = UV_INHERIT_FD, .data.fd = log_fd},
  };
  uv_process_options_t o = {0};
  o.exit_cb = on_srun_exit;
  o.file = "srun"; /* libuv searches PATH (execvp) */
  o.args = args;
  o.env = env;
  o.stdio = stdio;
  o.stdio_count = 3;
  o.flags = UV_PROCESS_DETACHED; /* own session: see the top of the file */
  task->proc.data = task;
  return uv_spawn(l->base.loop, &task->proc, &o);
}

static int slurm_start(launcher *base, const launch_task *t, void *task_ud, pid_t *pid) {
  slurm_launcher *l = (slurm_launcher *)base;
  if (pid) *pid = 0;
  int rc = launch__check_task(t);
  if (rc < 0) return rc;
  const char *r = launch__role_name(t->role);
  char secret_var[PATH_MAX + 32], blas_var[48];
  char **env = launch__child_env(t, secret_var, sizeof secret_var, blas_var, sizeof blas_var);
  slurm_task *task = calloc(1, sizeof *task);
  if (!env || !task) {
    free(env);
    free(task);
    return drv_error(DRV_ENOMEM, "launch %s-%d: out of memory", r, t->index);
  }
  snprintf(task->name, sizeof task->name, "drover-%s-%d", r, t->index);
  task->step = -1;
  int log_fd = -1, null_fd = -1;
  if ((rc = launch__open_stdio(t, &log_fd, &null_fd)) < 0) {
    free(env);
    free(task);
    return rc;
  }
  int err = spawn_srun(l, task, t, env, log_fd, null_fd);
  close(log_fd);
  close(null_fd);
  free(env);
  if (err < 0) {
    uv_close((uv_handle_t *)&task->proc, free_task);
    return drv_error(DRV_EIO, "launch %s-%d: cannot start srun: %s", r, t->index,
                     uv_strerror(err));
  }
  task->owner = l;
  task->ud = task_ud;
  task->next = l->tasks;
  l->tasks = task;
  if (pid) *pid = task->proc.pid; /* srun's: the local handle of the step */
  return 0;
}

/* ============================== control ================================== */

/* scancel --signal=SIG JOB.STEP for one task; < 0 if it could not be. */
static int cancel_step(slurm_launcher *l, slurm_task *t, int sig) {
  char step[64], sigopt[32]; /* job <= 31 chars, step <= 20 */
  snprintf(step, sizeof step, "%s.%ld", l->job, t->step);
  snprintf(sigopt, sizeof sigopt, "--signal=%d", sig);
  char *argv[] = {"scancel", sigopt, step, NULL};
  int rc = run_helper(argv, NULL, 0);
  if (rc > 0) return drv_error(DRV_EIO, "scancel %s %s exited with status %d", sigopt, step, rc);
  return rc;
}

static int slurm_signal(launcher *base, void *task_ud, int sig) {
  slurm_launcher *l = (slurm_launcher *)base;
  slurm_task *t = find_task(l, task_ud);
  if (!t) return 0; /* its exit was reported */
  learn_steps(l);
  if (t->step >= 0 && cancel_step(l, t, sig) == 0) return 0;
  /* No step yet (srun still waiting for it), or scancel failed: srun
   * abandons or kills the step on SIGTERM/SIGKILL. */
  int err = uv_process_kill(&t->proc, sig == SIGKILL ? SIGKILL : SIGTERM);
  if (err < 0 && err != UV_ESRCH)
    return drv_error(DRV_EIO, "cannot signal srun (pid %d) of %s: %s", t->proc.pid, t->name,
                     uv_strerror(err));
  return 0;
}

static int slurm_running(launcher *base) {
  int n = 0;
  for (slurm_task *t = ((slurm_launcher *)base)->tasks; t; t = t->next) n++;
  return n;
}

static void slurm_destroy(launcher *base) {
  slurm_launcher *l = (slurm_launcher *)base;
  if (!l) return;
  int n = slurm_running(base), k = 0;
  learn_steps(l);
  /* scancel every step we know of, 64 per call. */
  slurm_task *t = l->tasks;
  while (t) {
    char *argv[3 + 64], ids[64][56];
    int a = 0, k = 0;
    argv[a++] = "scancel";
    argv[a++] = "--signal=KILL";
    for (; t && k < 64; t = t->next)
      if (t->step >= 0) {
        snprintf(ids[k], sizeof ids[k], "%s.%ld", l->job, t->step);
        argv[a++] = ids[k++];
      }
    argv[a] = NULL;
    if (k > 0) run_helper(argv, NULL, 0);
  }
  pid_t *pids = n ? malloc((size_t)n * sizeof *pids) : NULL;
  for (slurm_task *t = l->tasks, *next; t; t = next) {
    next = t->next;
    uv_process_kill(&t->proc, SIGTERM); /* srun: kill the step and end */
    if (pids) pids[k++] = t->proc.pid;
    uv_close((uv_handle_t *)&t->proc, free_task); /* no exit callback now */
  }
  l->tasks = NULL;
  if (pids && launch__reap(pids, k, SRUN_END_MS) > 0) {
    for (int i = 0; i < k; i++)
      if (pids[i] > 0) kill(pids[i], SIGKILL);
    if (launch__reap(pids, k, REAP_TIMEOUT_MS) > 0)
      fprintf(stderr, "drover: an srun did not end within %d ms of SIGKILL\n", REAP_TIMEOUT_MS);
  }
  free(pids);
  free(l);
}

static const launch_ops slurm_ops = {"slurm", slurm_start, slurm_signal, slurm_running,
                                     slurm_destroy};

int launch_slurm_new(uv_loop_t *loop, launch_exit_cb on_exit, void *ud, launcher **out) {
  *out = NULL;
  if (!loop) return drv_error(DRV_EINVAL, "launch_slurm_new: NULL loop");
  const char *job = getenv("SLURM_JOB_ID");
  if (!job || !*job)
    return drv_error(DRV_EUNSUPPORTED,
                     "launcher \"slurm\": not inside a Slurm allocation (SLURM_JOB_ID is not "
                     "set); run drover under salloc or in an sbatch script (submitting a job "
                     "itself is not implemented yet)");
  if (strlen(job) >= sizeof((slurm_launcher *)0)->job || strspn(job, "0123456789") != strlen(job))
    return drv_error(DRV_EINVAL, "launcher \"slurm\": SLURM_JOB_ID '%.40s' is not a job id", job);
  slurm_launcher *l = calloc(1, sizeof *l);
  if (!l) return drv_error(DRV_ENOMEM, "out of memory creating the Slurm launcher");
  snprintf(l->job, sizeof l->job, "%s", job);
  l->base.ops = &slurm_ops;
  l->base.loop = loop;
  l->base.on_exit = on_exit;
  l->base.ud = ud;
  *out = &l->base;
  return 0;
}
