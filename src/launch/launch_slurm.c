/* launch_slurm.c - the Slurm launcher: each node is a job step, started
 * with `srun`, of the allocation drover runs in ($SLURM_JOB_ID, under
 * salloc or in an sbatch script) or, outside one, of a job drover submits
 * for itself (launch_slurm_job.c).
 *
 * Only the commands are used (srun, sbatch, squeue, scancel), never
 * libslurm, so the binary does not depend on one Slurm version.
 *
 * A task is
 *   srun [--jobid=JOB] --ntasks=1 --nodes=1 --cpus-per-task=C [--mem=M]
 *        [--gres=gpu:G] --exact --job-name=drover-ROLE-I --input=none
 *        <self> node ... (launch.h)
 * spawned with libuv like a local node: srun is the local handle, and its
 * exit is the node's exit. srun's stdout and stderr (which carry the
 * task's, plus srun's and slurmstepd's own messages) are appended to the
 * node's log; the environment is ours plus DROVER_SECRET_FILE and
 * OPENBLAS_NUM_THREADS, which srun exports to the task (--export=ALL is its
 * default). srun runs in its own session for the reason launch_local.c
 * gives: the terminal's Ctrl-C is the coordinator's alone (one SIGINT
 * makes srun print status, two kill the step).
 *
 * Resources. C is the role's `cpus` (1 when not given), G its `gpus`, M its
 * `memory` in MiB. A role without `memory`: where Slurm tracks memory, a
 * step without --mem is given all of its job's memory on the node. In our
 * own job we know how the job was sized (launch_slurm_job.c), so such a
 * step gets an explicit share instead, C times the job's memory per CPU:
 * the shares of all nodes add up to at most the job's memory, so no step
 * waits for another's, and each node is bounded where memory is enforced.
 * In an allocation the user made we cannot know how its memory is meant to
 * be split, so no --mem is passed: Slurm 22.05 then does not count the
 * step's memory against the other steps (measured: a step without --mem
 * ran beside steps whose --mem used up the job), whereas a guessed share
 * could exceed what the roles with `memory` leave and make a node wait.
 *
 * How a node ended, as far as Slurm tells. srun exits with its task's
 * status, or 128+S when the task was killed by signal S (129..159 is
 * reported as term_signal S). A step cancelled by Slurm (scancel, time
 * limit, preemption, node failure) also exits 137 - indistinguishable by
 * status from a task that died of SIGKILL - and after a stalled teardown
 * srun may even exit 0 (NOTES.md pitfall 11). So on exit we read what srun
 * and slurmstepd printed into the node's log since the start (srun's "Job
 * step aborted", slurmstepd's "*** STEP J.S ON host CANCELLED AT ... [DUE
 * TO ...] ***" when it arrives before srun ends) and append one line
 * "drover: step J.S ended: ..." saying which it was: cancelled by drover,
 * cancelled by Slurm (with Slurm's words), killed by a signal, or an exit
 * status. A cancelled step that srun reports as 0 is passed on as
 * SIGKILL: the node did not finish its work. What we cannot tell: who ran
 * a scancel (a user, an admin), or why a task that Slurm did not cancel
 * got its signal (the OOM killer and a user's kill -9 look the same).
 *
 * Signals. SIGTERM to srun kills the step at once without giving the task
 * a SIGTERM (NOTES.md, section 6), so a signal goes through Slurm:
 * `scancel --signal=SIG JOB.STEP`, with the step id found by name
 * (`squeue -s`). Until the step exists (srun is still waiting for it), the
 * signal goes to srun, which then gives up on the step.
 *
 * destroy (after the coordinator's SHUTDOWN let the nodes exit) sends the
 * steps still running `scancel --signal=TERM`, waits STOP_GRACE_MS for
 * their sruns to end, then `scancel --signal=KILL`, waits for the sruns
 * (KillWait + 2 s is usual), SIGKILLs what is left and reaps it; finally
 * it cancels our own job, if we submitted one (launch_slurm_job.c).
 *
 * Helper commands run synchronously with a bounded wait (launch_slurm_int.h):
 * they take milliseconds and are needed only for signals, teardown and the
 * job's start, never on the training path.
 */
#include "launch/launch.h"
#include "launch/launch_int.h"
#include "launch/launch_slurm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/rundir.h"
#include "base/util.h"
#include "proto/wire.h"

#define STOP_GRACE_MS 3000 /* destroy: steps to end after scancel --signal=TERM */
#define SRUN_END_MS 8000   /* destroy: sruns to end after the KILL (KillWait + 2 s is usual) */
#define LEARN_FIRST_MS 300   /* after a start: look up the new step's id */
#define LEARN_AGAIN_MS 1000  /* ... again while srun waits for its step */

typedef struct slurm_launcher slurm_launcher;

typedef struct slurm_task {
  launch_proc p;         /* first member: srun's process */
  char name[48];         /* step name: drover-ROLE-I */
  int cpus;              /* its --cpus-per-task */
  long step;             /* step id once known, else -1 */
  int sent;              /* the last signal we sent through Slurm, else 0 */
  bool told;             /* its step id was written to its log */
  char log[PATH_MAX];    /* the node's log */
  off_t log_start;       /* its size when srun started: what follows is this step's */
} slurm_task;
_Static_assert(offsetof(slurm_task, p) == 0, "p must be slurm_task's first member");

/* Every task of l whose exit is not reported yet. */
#define FOR_TASKS(t, l) \
  for (slurm_task *t = (slurm_task *)(l)->base.procs; t; t = (slurm_task *)t->p.next)
/* The i-th of an array of tasks (launch__close_all's). */
#define TASK(ps, i) ((slurm_task *)(ps)[i])

struct slurm_launcher {
  launch_base base; /* first member */
  char job[32];  /* the allocation's job id */
  slurm_job own; /* the job we submitted (own.own), else unused */
  uint64_t share_mib;  /* our job: MiB per CPU for a role without `memory` (0: none) */
  uv_timer_t *learn;    /* after starts: learn the new steps' ids (heap: closed by destroy) */
};

/* ============================== steps ==================================== */

/* Fills in the step id of every task that lacks one, from one
 * `squeue -s` of our job: lines "JOB.STEP NAME". A name that appears more
 * than once (a restarted node whose old step is still COMPLETING) takes
 * the highest step id, the newest. */
static void learn_steps(slurm_launcher *l) {
  bool need = false;
  FOR_TASKS(t, l) need |= t->step < 0;
  if (!need) return;
  char out[16384];
  char *argv[] = {"squeue", "-h", "-s", "-j", l->job, "-o", "%i %j", NULL};
  if (launch_slurm__run(argv, out, sizeof out, NULL, 0) != 0) return;
  size_t jl = strlen(l->job);
  char *save = NULL;
  for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char id[64], name[64];
    if (sscanf(line, "%63s %63s", id, name) != 2) continue;
    if (strncmp(id, l->job, jl) != 0 || id[jl] != '.') continue;
    char *end;
    long step = strtol(id + jl + 1, &end, 10);
    if (end == id + jl + 1 || *end) continue; /* "batch", "extern" */
    FOR_TASKS(t, l)
      if (strcmp(t->name, name) == 0 && step > t->step) t->step = step;
  }
}

/* A while after a start: which step each new node is, in its log (and for
 * the end report). Again later for a step srun is still waiting for. */
static void on_learn(uv_timer_t *h) {
  slurm_launcher *l = h->data;
  learn_steps(l);
  bool unknown = false;
  FOR_TASKS(t, l) {
    if (t->step >= 0 && !t->told)
      launch_slurm__log_line(t->log, "drover: %s runs as Slurm step %s.%ld", t->name, l->job,
                             t->step);
    t->told |= t->step >= 0;
    unknown |= t->step < 0;
  }
  if (unknown) uv_timer_start(h, on_learn, LEARN_AGAIN_MS, 0);
}

/* ============================== exit ===================================== */

/* What srun and slurmstepd printed since the step started (at most the
 * last 8 KiB of it), NUL-terminated in buf. */
static void read_step_output(const slurm_task *t, char *buf, size_t n) {
  buf[0] = '\0';
  int fd = open(t->log, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  off_t from = t->log_start;
  if (fstat(fd, &st) == 0 && st.st_size - from > (off_t)(n - 1)) from = st.st_size - (off_t)(n - 1);
  ssize_t r = pread(fd, buf, n - 1, from);
  close(fd);
  buf[r > 0 ? r : 0] = '\0';
  for (ssize_t i = 0; i < r; i++)
    if (!buf[i]) buf[i] = ' '; /* keep the string whole */
}

/* Whether Slurm aborted the step, from srun's and slurmstepd's words: srun
 * prints "Job step aborted" when slurmctld tells it the step was cancelled
 * (scancel, time limit, preemption); slurmstepd's "*** STEP 12.3 ON vm
 * CANCELLED AT ... [DUE TO ...] ***" (or JOB) follows when it arrives in
 * time, and is then copied into out without the stars. */
static bool slurm_cancelled(const char *text, char *out, size_t n) {
  const char *s = NULL;
  for (const char *p = text; (p = strstr(p, "*** ")); p += 4)
    if ((strncmp(p + 4, "STEP ", 5) == 0 || strncmp(p + 4, "JOB ", 4) == 0) &&
        strstr(p, " CANCELLED AT ") && strstr(p, " CANCELLED AT ") < strchrnul(p, '\n'))
      s = p + 4; /* the last one wins */
  if (s) {
    size_t k = strcspn(s, "\n");
    while (k && (s[k - 1] == '*' || s[k - 1] == ' ')) k--;
    snprintf(out, n, "%.*s", (int)k, s);
    return true;
  }
  snprintf(out, n, "srun: Job step aborted");
  return strstr(text, "srun: Job step aborted") != NULL;
}

/* Writes the node's end as Slurm saw it into its log; may turn a 0 into
 * SIGKILL (see the top of the file). */
static void report_end(slurm_launcher *l, slurm_task *t, int64_t *status, int *sig) {
  char text[8192], line[512], step[64];
  read_step_output(t, text, sizeof text);
  if (t->step >= 0) snprintf(step, sizeof step, "%s.%ld", l->job, t->step);
  else snprintf(step, sizeof step, "of job %s", l->job); /* ended before we looked it up */
  bool cancelled = slurm_cancelled(text, line, sizeof line);
  char how[700];
  if (cancelled && t->sent)
    snprintf(how, sizeof how, "cancelled by drover (scancel --signal=%d): %s", t->sent, line);
  else if (cancelled)
    snprintf(how, sizeof how, "cancelled by Slurm or a user's scancel: %s", line);
  else if (*sig && t->sent)
    snprintf(how, sizeof how, "the task was killed by signal %d after drover's scancel "
             "--signal=%d", *sig, t->sent);
  else if (*sig)
    snprintf(how, sizeof how, "the task was killed by signal %d (not cancelled by Slurm)", *sig);
  else if (strstr(text, "srun: error: Unable to create step") ||
           strstr(text, "srun: error: Unable to allocate resources"))
    snprintf(how, sizeof how, "Slurm could not start the step (see srun's error above)");
  else
    snprintf(how, sizeof how, "the task exited with status %lld", (long long)*status);
  launch_slurm__log_line(t->log, "drover: step %s (%s) ended: %s", step, t->name, how);
  if (cancelled && !*sig && *status == 0) *sig = SIGKILL;
}

/* srun ended (launch_ended_fn): the task's signal as srun reports it, and
 * the end as Slurm saw it in the node's log. */
static void srun_ended(launch_base *b, launch_proc *p, int64_t *exit_status, int *term_signal) {
  if (!*term_signal && *exit_status > 128 && *exit_status < 160) {
    *term_signal = (int)(*exit_status - 128);
    *exit_status = 0;
  }
  report_end((slurm_launcher *)b, (slurm_task *)p, exit_status, term_signal);
}

/* ============================== start ==================================== */

/* The step's --mem in MiB, 0 for none: the node's memory rounded up (Slurm
 * takes no bytes), else its CPUs' share of our own job (the top of the
 * file says why). */
static uint64_t step_mem_mib(const slurm_launcher *l, const launch_task *t) {
  if (t->memory) return (t->memory + (1u << 20) - 1) >> 20;
  return l->share_mib * (uint64_t)(t->cpus > 0 ? t->cpus : 1);
}

/* env (malloc'd, NULL-ended, strings borrowed) with s appended: the grown
 * array, or NULL (env freed) when out of memory. */
static char **env_add(char **env, char *s) {
  size_t n = 0;
  while (env[n]) n++;
  char **e = realloc(env, (n + 2) * sizeof *e);
  if (!e) {
    free(env);
    return NULL;
  }
  e[n] = s, e[n + 1] = NULL;
  return e;
}

static int spawn_srun(slurm_launcher *l, slurm_task *task, const launch_task *t, void *task_ud,
                      char **env, int log_fd, int null_fd) {
  char index[16], cpt[32], hb[16], to[16], cpus[16], jobname[64], jobid[48], mem[48], gres[32];
  int c = t->cpus > 0 ? t->cpus : 1;
  snprintf(index, sizeof index, "%d", t->index);
  snprintf(cpus, sizeof cpus, "%d", c); /* the node's threads: what the step got */
  snprintf(cpt, sizeof cpt, "--cpus-per-task=%d", c);
  snprintf(hb, sizeof hb, "%u", (unsigned)t->heartbeat_ms);
  snprintf(to, sizeof to, "%u", (unsigned)t->timeout_ms);
  snprintf(jobname, sizeof jobname, "--job-name=%s", task->name);
  snprintf(jobid, sizeof jobid, "--jobid=%s", l->job);
  snprintf(gres, sizeof gres, "--gres=gpu:%d", t->gpus);
  mem[0] = '\0';
  uint64_t mib = step_mem_mib(l, t);
  if (mib) snprintf(mem, sizeof mem, "--mem=%lluM", (unsigned long long)mib);
  char *args[40];
  int n = 0;
#define ARG(s) (args[n++] = (char *)(s))
  /* --exact: the step gets only the CPUs it asks for, so the nodes' steps
   * run side by side in the allocation instead of waiting for each other. */
  ARG("srun");
  if (l->own.own) ARG(jobid); /* not ours to run in: the job's */
  ARG("--ntasks=1"), ARG("--nodes=1"), ARG(cpt), ARG("--exact"), ARG(jobname);
  if (mem[0]) ARG(mem);
  if (t->gpus > 0) ARG(gres);
  ARG("--input=none");
  ARG(launch_self_exe()), ARG("node"), ARG("--coord"), ARG(t->coord);
  ARG("--role"), ARG(launch__role_name(t->role)), ARG("--index"), ARG(index);
  ARG("--run-dir"), ARG(t->run_dir), ARG("--bind"), ARG(t->bind_host);
  ARG("--cpus"), ARG(cpus);
  ARG("--heartbeat-ms"), ARG(hb), ARG("--timeout-ms"), ARG(to), ARG(NULL);
#undef ARG
  /* In its own session: see the top of the file. */
  uv_stdio_container_t in = {.flags = UV_INHERIT_FD, .data.fd = null_fd};
  return launch__spawn(&l->base, &task->p, "srun", args, env, in, log_fd, task_ud);
}

static int slurm_start(launcher *base, const launch_task *t, void *task_ud, pid_t *pid) {
  slurm_launcher *l = (slurm_launcher *)base;
  if (pid) *pid = 0;
  int rc = launch__check_task(t);
  if (rc < 0) return rc;
  if (t->gpus < 0) return err_set(DRV_EINVAL, "launch: gpus %d is negative", t->gpus);
  const char *r = launch__role_name(t->role);
  char secret_var[PATH_MAX + 32], blas_var[48];
  char **env = launch__child_env(t, secret_var, sizeof secret_var, blas_var, sizeof blas_var);
  /* The step's memory grant (its --mem, see spawn_srun) is not in a step's
   * environment: DROVER_SLURM_MEM_MIB tells the node, which reports it. */
  char mem_var[64];
  uint64_t mib = step_mem_mib(l, t);
  snprintf(mem_var, sizeof mem_var, "DROVER_SLURM_MEM_MIB=%llu", (unsigned long long)mib);
  if (env && mib) env = env_add(env, mem_var);
  slurm_task *task = calloc(1, sizeof *task);
  if (!env || !task) {
    free(env);
    free(task);
    return err_set(DRV_ENOMEM, "launch %s-%d: out of memory", r, t->index);
  }
  rundir_node_log(task->log, sizeof task->log, t->run_dir, r, t->index);
  snprintf(task->name, sizeof task->name, "drover-%s-%d", r, t->index);
  task->step = -1;
  task->cpus = t->cpus > 0 ? t->cpus : 1;
  int log_fd = -1, null_fd = -1;
  if ((rc = launch__open_stdio(t, &log_fd, &null_fd)) < 0) {
    free(env);
    free(task);
    return rc;
  }
  struct stat st;
  task->log_start = fstat(log_fd, &st) == 0 ? st.st_size : 0;
  int err = spawn_srun(l, task, t, task_ud, env, log_fd, null_fd);
  close(log_fd);
  close(null_fd);
  free(env);
  if (err < 0) /* the task is freed */
    return err_set(DRV_EIO, "launch %s-%d: cannot start srun: %s", r, t->index,
                   uv_strerror(err));
  if (pid) *pid = task->p.proc.pid; /* srun's: the local handle of the step */
  if (!uv_is_active((uv_handle_t *)l->learn)) {
    uv_update_time(l->base.pub.loop); /* the loop's clock may be stale (a blocking start) */
    uv_timer_start(l->learn, on_learn, LEARN_FIRST_MS, 0);
  }
  return 0;
}

/* ============================== control ================================== */

/* scancel --signal=SIG for the steps of tasks (at most 64 per call), each
 * marked as sent sig; the number of steps named. */
static int cancel_steps(slurm_launcher *l, launch_proc **tasks, int n, int sig) {
  int named = 0;
  for (int i = 0; i < n;) {
    char *argv[3 + 64], ids[64][56], sigopt[32];
    int a = 0, k = 0;
    snprintf(sigopt, sizeof sigopt, "--signal=%d", sig);
    argv[a++] = "scancel";
    argv[a++] = sigopt;
    for (; i < n && k < 64; i++)
      if (TASK(tasks, i)->step >= 0) {
        snprintf(ids[k], sizeof ids[k], "%s.%ld", l->job, TASK(tasks, i)->step);
        argv[a++] = ids[k++];
        TASK(tasks, i)->sent = sig;
      }
    argv[a] = NULL;
    if (k > 0) launch_slurm__run(argv, NULL, 0, NULL, 0);
    named += k;
  }
  return named;
}

static int slurm_signal(launcher *base, void *task_ud, int sig) {
  slurm_launcher *l = (slurm_launcher *)base;
  slurm_task *t = (slurm_task *)launch__find(&l->base, task_ud);
  if (!t) return 0; /* its exit was reported */
  learn_steps(l);
  if (t->step >= 0) {
    char step[64], sigopt[32], err[512];
    snprintf(step, sizeof step, "%s.%ld", l->job, t->step);
    snprintf(sigopt, sizeof sigopt, "--signal=%d", sig);
    char *argv[] = {"scancel", sigopt, step, NULL};
    int prev = t->sent;
    t->sent = sig;
    if (launch_slurm__run(argv, NULL, 0, err, sizeof err) == 0) return 0;
    t->sent = prev;
  }
  /* No step yet (srun still waiting for it), or scancel failed: srun
   * abandons or kills the step on SIGTERM/SIGKILL. */
  int err = uv_process_kill(&t->p.proc, sig == SIGKILL ? SIGKILL : SIGTERM);
  if (err < 0 && err != UV_ESRCH)
    return err_set(DRV_EIO, "cannot signal srun (pid %d) of %s: %s", t->p.proc.pid, t->name,
                   uv_strerror(err));
  return 0;
}

/* ============================== destroy ================================== */

/* Waits at most ms for the sruns (pids[i] > 0) to end, logging each end in
 * its node's log as `when`; returns how many are left. */
static int reap_logged(slurm_launcher *l, launch_proc **ts, pid_t *pids, int n, long ms,
                       const char *when) {
  long long deadline = launch__now_ms() + ms;
  for (;;) {
    int left = 0;
    for (int i = 0; i < n; i++) {
      if (pids[i] <= 0) continue;
      int st = 0;
      pid_t k = waitpid(pids[i], &st, WNOHANG);
      if (k == 0 || (k < 0 && errno == EINTR)) {
        left++;
        continue;
      }
      pids[i] = 0;
      char step[64];
      if (TASK(ts, i)->step >= 0) snprintf(step, sizeof step, "%s.%ld", l->job, TASK(ts, i)->step);
      else snprintf(step, sizeof step, "of job %s", l->job);
      if (k > 0 && WIFEXITED(st))
        launch_slurm__log_line(TASK(ts, i)->log,
                               "drover: step %s (%s) ended at shutdown %s: srun status %d", step,
                               TASK(ts, i)->name, when, WEXITSTATUS(st));
      else if (k > 0)
        launch_slurm__log_line(TASK(ts, i)->log,
                               "drover: step %s (%s) ended at shutdown %s: srun signal %d", step,
                               TASK(ts, i)->name, when, WTERMSIG(st));
    }
    if (left == 0 || launch__now_ms() >= deadline) return left;
    struct timespec pause = {0, 5 * 1000000L};
    nanosleep(&pause, NULL);
  }
}

static void slurm_destroy(launcher *base) {
  slurm_launcher *l = (slurm_launcher *)base;
  if (!l) return;
  learn_steps(l);
  /* No exit callback from now on; the tasks stay readable for the rest of
   * this call. Out of memory (k = 0): the job's cancel below still ends
   * our own steps. */
  pid_t *pids;
  launch_proc **ts;
  int k = launch__close_all(&l->base, 0, &pids, &ts);
  int left = k;
  if (k && cancel_steps(l, ts, k, SIGTERM) > 0)
    left = reap_logged(l, ts, pids, k, STOP_GRACE_MS, "after scancel --signal=TERM");
  if (left) {
    cancel_steps(l, ts, k, SIGKILL);
    for (int i = 0; i < k; i++) /* a step not created yet: srun gives up on it */
      if (pids[i] > 0 && TASK(ts, i)->step < 0) kill(pids[i], SIGTERM);
    left = reap_logged(l, ts, pids, k, SRUN_END_MS, "after scancel --signal=KILL");
  }
  if (left) {
    for (int i = 0; i < k; i++)
      if (pids[i] > 0) kill(pids[i], SIGKILL);
    if (reap_logged(l, ts, pids, k, LAUNCH__REAP_MS, "after SIGKILL to srun") > 0)
      fprintf(stderr, "drover: an srun did not end within %d ms of SIGKILL\n", LAUNCH__REAP_MS);
  }
  launch_slurm__job_cancel(&l->own); /* our own job, with whatever still runs in it */
  uv_close((uv_handle_t *)l->learn, util_free_handle);
  free(ts);
  free(pids);
  free(l);
}

/* c:scale: the new steps' CPUs beside those of the running ones, within
 * the job's (squeue's %C: every CPU of the allocation, on all its nodes).
 * Refused rather than left to srun, which would wait for CPUs that only
 * the end of another step frees. Removed workers' steps count until
 * their srun ended. */
static int slurm_room(launcher *base, int role, const int *index, int n, int cpus) {
  slurm_launcher *l = (slurm_launcher *)base;
  (void)index;
  char out[64], err[256];
  char *argv[] = {"squeue", "-h", "-j", l->job, "-o", "%C", NULL};
  const char *what = l->own.own ? "job" : "allocation";
  int rc = launch_slurm__run(argv, out, sizeof out, err, sizeof err);
  char *end;
  long total = rc == 0 ? strtol(out, &end, 10) : 0;
  if (rc != 0 || total <= 0)
    return err_set(DRV_EIO, "launcher 'slurm': cannot learn the CPUs of %s %s (squeue: %s)",
                   what, l->job, rc == 0 ? out : err);
  int used = 0, steps = 0, c = cpus > 0 ? cpus : 1;
  FOR_TASKS(t, l) used += t->cpus, steps++;
  if (used + (long)n * c > total)
    return err_set(DRV_ERANGE, "launcher 'slurm': %s %s holds %ld CPUs and drover's %d steps "
                   "take %d: %d more %s%s (%d CPU%s each) do not fit", what, l->job, total, steps,
                   used, n, launch__role_name(role), n == 1 ? "" : "s", c, c == 1 ? "" : "s");
  return 0;
}

static const launch_ops slurm_ops = {"slurm", slurm_start, slurm_signal, launch__running,
                                     slurm_destroy, NULL, NULL, slurm_room};

/* ============================== new ====================================== */

int launch_slurm_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit, void *ud,
                     launcher **out) {
  *out = NULL;
  if (!loop || !cfg) return err_set(DRV_EINVAL, "launch_slurm_new: NULL loop or config");
  slurm_launcher *l = calloc(1, sizeof *l);
  if (!l) return err_set(DRV_ENOMEM, "out of memory creating the Slurm launcher");
  l->own.watch_fd = -1;
  if (!(l->learn = malloc(sizeof *l->learn))) {
    free(l);
    return err_set(DRV_ENOMEM, "out of memory creating the Slurm launcher");
  }
  const char *job = getenv("SLURM_JOB_ID");
  if (job && *job) {
    if (strlen(job) >= sizeof l->job || strspn(job, "0123456789") != strlen(job)) {
      free(l->learn);
      free(l);
      return err_set(DRV_EINVAL, "launcher \"slurm\": SLURM_JOB_ID '%.40s' is not a job id", job);
    }
    snprintf(l->job, sizeof l->job, "%s", job);
  } else {
    int rc = launch_slurm__job_submit(loop, cfg, &l->own);
    if (rc < 0) {
      free(l->learn);
      free(l);
      return rc;
    }
    snprintf(l->job, sizeof l->job, "%s", l->own.id);
    l->share_mib = l->own.mem_per_cpu;
  }
  launch__base_init(&l->base, &slurm_ops, loop, on_exit, ud, srun_ended);
  uv_timer_init(loop, l->learn);
  l->learn->data = l;
  *out = &l->base.pub;
  return 0;
}
