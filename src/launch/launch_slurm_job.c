/* launch_slurm_job.c - the Slurm launcher's commands and its own job: when
 * drover runs outside an allocation it submits one with sbatch, waits for
 * it to start, and cancels it at the end.
 *
 * The job. `sbatch --ntasks=NODES --cpus-per-task=C [--mem-per-cpu=M]
 * [--gpus=G]` plus the user's partition/time/account/qos/constraint and
 * extra options, named drover-<run directory's name>, its output appended
 * to RUN_DIR/logs/slurm-job.log. C is the largest `cpus` of any role, M
 * the largest `memory` divided by C (so every task slot holds the largest
 * node), G the sum of every node's `gpus`. NODES counts every node the
 * cluster may have: a role's `max` (cfg->extra) too, so that c:scale grows
 * within the job, at once, instead of submitting a job per added worker
 * (which would pend on its own and outlive a shrink in a queue): the job
 * holds those task slots idle while the cluster is smaller. One task slot per node, sized
 * for the largest role, over-asks when roles differ; a heterogeneous job
 * would fit better but never starts when its components share a node.
 * The batch script (RUN_DIR/slurm-job.sh) only holds the allocation: the
 * coordinator starts each node as a step with `srun --jobid=JOB`.
 *
 * A coordinator that dies without cancelling the job (SIGKILL, a crash)
 * must not leave it running until its time limit. Two guards:
 *  - a watchdog: a small `sh` we spawn in its own session (so the
 *    terminal's signals miss it) whose stdin is a pipe only we hold. When
 *    we die the kernel closes the pipe, the watchdog reads EOF and runs
 *    `scancel JOB` at once. A clean destroy writes "done" first, so it
 *    exits quietly. The watchdog runs on our host and needs nothing shared;
 *  - a heartbeat, for when the watchdog dies with us (host lost, a kill of
 *    the whole session): the watchdog touches RUN_DIR/slurm-heartbeat every
 *    3 s and the batch script ends the job (so Slurm kills every step) once
 *    the file's mtime has not changed for 30 s of its own time. Comparing
 *    mtimes with each other, not with the clock, keeps it immune to clock
 *    skew between hosts. It needs RUN_DIR on a filesystem the nodes share,
 *    which the nodes need anyway (their logs and key files live there).
 * A coordinator that hangs but lives keeps its job: only --time bounds it.
 *
 * Waiting. `squeue -t all -j JOB -o %T|%r` about once a second: each new
 * pending reason goes to cfg->note ("job 12 pending: Resources"). Reasons
 * that waiting cannot clear (a limit of the partition, QOS or association
 * per job, a bad constraint or account, a dependency that can never be
 * met) fail at once; other reasons fail after pending_timeout seconds. A
 * job sbatch rejects fails at once with sbatch's message. Every failure,
 * and Ctrl-C (err_interrupted), cancels the job.
 */
#include "launch/launch_slurm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/rundir.h"
#include "launch/launch_int.h"
#include "proto/wire.h"
#include "base/util.h"

extern char **environ;

#define CANCEL_WAIT_MS 20000 /* scancel until squeue forgets the job (KillWait + slack) */
#define WATCHDOG_END_MS 2000 /* the watchdog to exit after "done" */

/* ============================== commands ================================= */

static void append(char *buf, size_t n, size_t *len, const char *src, size_t k) {
  if (!buf || !n || *len >= n - 1) return;
  if (k > n - 1 - *len) k = n - 1 - *len;
  memcpy(buf + *len, src, k);
  *len += k;
  buf[*len] = '\0';
}

/* Reads the child's two pipes until both close or the deadline passes. */
static bool drain(int fds[2], char *out, size_t on, char *err, size_t en) {
  size_t lens[2] = {0, 0};
  long long deadline = launch__now_ms() + LAUNCH_SLURM__HELPER_MS;
  while (fds[0] >= 0 || fds[1] >= 0) {
    long long left = deadline - launch__now_ms();
    if (left <= 0) return false;
    struct pollfd p[2] = {{.fd = fds[0], .events = POLLIN}, {.fd = fds[1], .events = POLLIN}};
    if (poll(p, 2, (int)left) <= 0) continue;
    for (int i = 0; i < 2; i++) {
      if (fds[i] < 0 || !p[i].revents) continue;
      char buf[4096];
      ssize_t r = read(fds[i], buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        close(fds[i]);
        fds[i] = -1;
        continue;
      }
      if (i == 0) append(out, on, &lens[0], buf, (size_t)r);
      else append(err, en, &lens[1], buf, (size_t)r);
    }
  }
  return true;
}

int launch_slurm__run(char *const argv[], char *out, size_t out_n, char *err, size_t err_n) {
  if (out && out_n) out[0] = '\0';
  if (err && err_n) err[0] = '\0';
  int po[2], pe[2];
  if (pipe2(po, O_CLOEXEC) < 0) return err_set(DRV_EIO, "pipe: %s", strerror(errno));
  if (pipe2(pe, O_CLOEXEC) < 0) {
    close(po[0]), close(po[1]);
    return err_set(DRV_EIO, "pipe: %s", strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, po[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
  pid_t pid;
  int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(po[1]), close(pe[1]);
  int fds[2] = {po[0], pe[0]};
  if (e != 0) {
    close(fds[0]), close(fds[1]);
    return err_set(DRV_EIO, "cannot run %s: %s", argv[0], strerror(e));
  }
  bool done = drain(fds, out, out_n, err, err_n);
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0) close(fds[i]);
  if (!done) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!done)
    return err_set(DRV_ETIMEDOUT, "%s did not answer within %d ms", argv[0],
                   LAUNCH_SLURM__HELPER_MS);
  if (WIFSIGNALED(status))
    return err_set(DRV_EIO, "%s killed by signal %d", argv[0], WTERMSIG(status));
  return WEXITSTATUS(status);
}

void launch_slurm__log_line(const char *path, const char *fmt, ...) {
  FILE *f = util_fopen_append(path, 0644);
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

/* sbatch's stderr as one line: "sbatch: error: " dropped, lines joined. */
static void one_line(const char *in, char *out, size_t n) {
  size_t len = 0;
  out[0] = '\0';
  while (*in) {
    size_t k = strcspn(in, "\n");
    const char *s = in;
    if (strncmp(s, "sbatch: error: ", 15) == 0) s += 15, k -= 15;
    if (k) {
      if (len) append(out, n, &len, "; ", 2);
      append(out, n, &len, s, k);
    }
    in = s + k + (s[k] == '\n');
  }
}

/* ============================== the job's files ========================== */

/* Writes s into f single-quoted for sh. */
static void sh_quote(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++)
    if (*s == '\'') fputs("'\\''", f);
    else fputc(*s, f);
  fputc('\'', f);
}

static int write_holder(const char *run_dir, char *path, size_t n) {
  snprintf(path, n, "%s/" RUNDIR_SLURM_JOB, run_dir);
  FILE *f = fopen(path, "we");
  if (!f) return err_set(DRV_EIO, "cannot write '%s': %s", path, strerror(errno));
  fputs("#!/bin/sh\n"
        "# drover: holds this allocation for a run; the coordinator starts the nodes in\n"
        "# it as steps (srun --jobid). Ends the job once the coordinator's heartbeat\n"
        "# file has not changed for 30 s (see src/launch/launch_slurm_job.c).\n"
        "hb=", f);
  sh_quote(f, run_dir);
  fputs("/" RUNDIR_SLURM_HEARTBEAT "\n"
        "last= quiet=0\n"
        "while [ \"$quiet\" -lt 30 ]; do\n"
        "  sleep 5\n"
        "  m=$(stat -c %Y \"$hb\" 2>/dev/null)\n"
        "  if [ -n \"$m\" ] && [ \"$m\" != \"$last\" ]; then last=$m quiet=0; "
        "else quiet=$((quiet + 5)); fi\n"
        "done\n"
        "echo \"drover: no heartbeat in $hb for 30 s: the coordinator is gone; "
        "ending job $SLURM_JOB_ID\"\n",
        f);
  if (fclose(f) != 0) return err_set(DRV_EIO, "cannot write '%s': %s", path, strerror(errno));
  return 0;
}

/* The watchdog (see the top of the file): $1 job, $2 heartbeat file. */
static const char watchdog_sh[] =
    "echo \"drover watchdog: pid $$, guarding job $1\"\n"
    "( while kill -0 $$ 2>/dev/null; do touch \"$2\"; sleep 3; done ) &\n"
    "read -r word\n"
    "kill $! 2>/dev/null\n"
    "[ \"$word\" = done ] && exit 0\n"
    "echo \"drover watchdog: the coordinator is gone; cancelling job $1\"\n"
    "exec scancel \"$1\"\n";

static int start_watchdog(slurm_job *job, const char *run_dir) {
  char hb[4200], logp[4200];
  snprintf(hb, sizeof hb, "%s/" RUNDIR_SLURM_HEARTBEAT, run_dir);
  snprintf(logp, sizeof logp, "%s/" RUNDIR_SLURM_LOG, run_dir);
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) return err_set(DRV_EIO, "pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[0], 0);
  posix_spawn_file_actions_addopen(&fa, 1, logp, O_WRONLY | O_APPEND | O_CREAT, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
  char *argv[] = {"sh", "-c", (char *)watchdog_sh, "drover-watchdog", job->id, hb, NULL};
  int e = posix_spawn(&job->watchdog, "/bin/sh", &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(p[0]);
  if (e != 0) {
    close(p[1]);
    job->watchdog = 0;
    return err_set(DRV_EIO, "cannot start the job's watchdog: %s", strerror(e));
  }
  job->watch_fd = p[1];
  return 0;
}

static void stop_watchdog(slurm_job *job) {
  if (job->watch_fd >= 0) {
    ssize_t w = write(job->watch_fd, "done\n", 5);
    (void)w; /* a watchdog already gone is fine */
    close(job->watch_fd);
    job->watch_fd = -1;
  }
  if (job->watchdog > 0) {
    pid_t p = job->watchdog;
    if (launch__reap(&p, 1, WATCHDOG_END_MS) > 0) {
      kill(p, SIGKILL);
      launch__reap(&p, 1, WATCHDOG_END_MS);
    }
    job->watchdog = 0;
  }
}

/* ============================== sbatch =================================== */

typedef struct job_args {
  char *argv[64 + 256];
  int n;
  char buf[12][4200]; /* storage for the formatted options */
  int nbuf;
} job_args;

static void arg(job_args *a, const char *s) {
  if (a->n < (int)(sizeof a->argv / sizeof a->argv[0]) - 1) a->argv[a->n++] = (char *)s;
}

static void argf(job_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void argf(job_args *a, const char *fmt, ...) {
  if (a->nbuf >= (int)(sizeof a->buf / sizeof a->buf[0])) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->buf[a->nbuf], sizeof a->buf[0], fmt, ap);
  va_end(ap);
  arg(a, a->buf[a->nbuf++]);
}

/* The job's size from the roles' specs: see the top of the file. */
static void size_args(const launch_config *cfg, job_args *a, slurm_job *job) {
  int nodes = 0, cpus = 1;
  long gpus = 0;
  uint64_t mem = 0;
  for (int r = 0; r < ROLE_COUNT; r++) {
    if (cfg->count[r] <= 0) continue;
    const launch_resources *s = &cfg->res[r];
    int k = cfg->count[r] + (cfg->extra[r] > 0 ? cfg->extra[r] : 0); /* room for c:scale */
    nodes += k;
    if (s->cpus > cpus) cpus = s->cpus;
    if (s->memory > mem) mem = s->memory;
    gpus += (long)k * s->gpus;
  }
  argf(a, "--ntasks=%d", nodes);
  argf(a, "--cpus-per-task=%d", cpus);
  if (mem) {
    uint64_t mib = (mem + (1u << 20) - 1) >> 20, per_cpu = (mib + (uint64_t)cpus - 1) / (uint64_t)cpus;
    argf(a, "--mem-per-cpu=%lluM", (unsigned long long)per_cpu);
    job->mem_per_cpu = per_cpu; /* a role without memory: its CPUs' share (launch_slurm.c) */
  }
  if (gpus) argf(a, "--gpus=%ld", gpus);
}

static void name_args(const launch_config *cfg, job_args *a) {
  const char *base = strrchr(cfg->run_dir, '/');
  base = base ? base + 1 : cfg->run_dir;
  char name[64];
  size_t k = 0;
  for (; base[k] && k < sizeof name - 1; k++) /* Slurm job names: keep them plain */
    name[k] = (strchr(" \t\n'\"\\$`", base[k]) ? '_' : base[k]);
  name[k] = '\0';
  argf(a, "--job-name=drover-%s", name);
  argf(a, "--output=%s/" RUNDIR_SLURM_LOG, cfg->run_dir);
  arg(a, "--open-mode=append");
}

static void user_args(const launch_config *cfg, job_args *a) {
  const launch_slurm_opts *o = &cfg->slurm;
  if (o->partition) argf(a, "--partition=%s", o->partition);
  if (o->time) argf(a, "--time=%s", o->time);
  if (o->account) argf(a, "--account=%s", o->account);
  if (o->qos) argf(a, "--qos=%s", o->qos);
  if (o->constraint) argf(a, "--constraint=%s", o->constraint);
  for (int i = 0; i < o->nsbatch; i++) arg(a, o->sbatch[i]); /* verbatim, after ours: they win */
}

static int sbatch(const launch_config *cfg, slurm_job *job) {
  char script[4200], hb[4200];
  int rc = write_holder(cfg->run_dir, script, sizeof script);
  if (rc < 0) return rc;
  snprintf(hb, sizeof hb, "%s/" RUNDIR_SLURM_HEARTBEAT, cfg->run_dir);
  int fd = open(hb, O_WRONLY | O_CREAT | O_CLOEXEC, 0644); /* there before the holder looks */
  if (fd >= 0) close(fd);
  job_args *a = calloc(1, sizeof *a);
  if (!a) return err_set(DRV_ENOMEM, "out of memory");
  arg(a, "sbatch");
  arg(a, "--parsable");
  size_args(cfg, a, job);
  name_args(cfg, a);
  user_args(cfg, a);
  arg(a, script);
  a->argv[a->n] = NULL;
  char out[256], err[2048], msg[2048];
  rc = launch_slurm__run(a->argv, out, sizeof out, err, sizeof err);
  free(a);
  if (rc < 0) return rc;
  one_line(err, msg, sizeof msg);
  if (rc != 0)
    return err_set(DRV_EUNSUPPORTED, "Slurm rejected the job: %s",
                   msg[0] ? msg : "sbatch failed without a message");
  size_t k = strspn(out, "0123456789");
  if (k == 0 || k >= sizeof job->id)
    return err_set(DRV_EPROTO, "sbatch printed no job id ('%.80s')", out);
  memcpy(job->id, out, k);
  job->id[k] = '\0';
  return 0;
}

/* ============================== waiting ================================== */

/* Pending reasons that waiting cannot clear (Slurm's job_reason_codes):
 * the request itself is outside what the partition, QOS or association
 * allows for any one job, or names what does not exist. */
static bool reason_permanent(const char *r) {
  static const char *const never[] = {
      "BadConstraints", "PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit",
      "DependencyNeverSatisfied", "InvalidAccount", "InvalidQOS", "AccountNotAllowed",
      "QOSNotAllowed", "InactiveLimit", NULL};
  for (int i = 0; never[i]; i++)
    if (strcmp(r, never[i]) == 0) return true;
  bool limit = strncmp(r, "QOSMax", 6) == 0 || strncmp(r, "AssocMax", 8) == 0;
  return limit && (strstr(r, "PerJob") || strstr(r, "PerNode") || strstr(r, "MinCpu"));
}

/* A pause of ms, cut short by Ctrl-C, during which the coordinator's loop
 * keeps turning (UV_RUN_NOWAIT every 20 ms), so attach clients and its
 * timers are served while a job pends: `drover attach` shows the pending
 * reasons. Safe only outside that loop's callbacks, like any wait that
 * turns the loop: we are called while the coordinator starts (launch_open,
 * start), never from a callback. */
static void nap(uv_loop_t *loop, long ms) {
  long long end = launch__now_ms() + ms;
  while (!err_interrupted() && launch__now_ms() < end) {
    if (loop) uv_run(loop, UV_RUN_NOWAIT);
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

static void note(const launch_config *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const launch_config *cfg, const char *fmt, ...) {
  if (!cfg->note) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cfg->note(cfg->note_ud, msg);
}

/* One look at the job: 1 running, 0 still waiting, < 0 failed (error set). */
static int look(const launch_config *cfg, slurm_job *job, char *last, size_t n) {
  char out[512], err[512], state[64] = "", reason[256] = "";
  char *argv[] = {"squeue", "-h", "-t", "all", "-j", job->id, "-o", "%T|%r", NULL};
  int rc = launch_slurm__run(argv, out, sizeof out, err, sizeof err);
  if (rc < 0) return rc;
  if (rc != 0 || sscanf(out, "%63[^|\n]|%255[^\n]", state, reason) < 1)
    return err_set(DRV_EIO, "Slurm job %s vanished before it started (squeue: %.200s)", job->id,
                   err[0] ? err : out);
  if (strcmp(state, "RUNNING") == 0) return 1;
  if (strcmp(state, "PENDING") != 0 && strcmp(state, "CONFIGURING") != 0)
    return err_set(DRV_EIO, "Slurm job %s ended before it started: %s (%s)", job->id, state,
                   reason);
  if (strcmp(reason, last) != 0 && strcmp(reason, "None") != 0) {
    snprintf(last, n, "%s", reason);
    note(cfg, "job %s %s: %s", job->id, strcmp(state, "PENDING") == 0 ? "pending" : "configuring",
         reason);
  }
  if (reason_permanent(reason))
    return err_set(DRV_EUNSUPPORTED, "Slurm job %s cannot start: %s (a reason waiting cannot "
                   "clear); cancelled", job->id, reason);
  return 0;
}

static int wait_running(uv_loop_t *loop, const launch_config *cfg, slurm_job *job) {
  double limit = cfg->slurm.pending_timeout > 0 ? cfg->slurm.pending_timeout : 300;
  long long deadline = launch__now_ms() + (long long)(limit * 1000);
  char last[256] = "";
  for (long pause = 200;; pause = pause < 1000 ? pause * 2 : 1000) {
    int rc = look(cfg, job, last, sizeof last);
    if (rc != 0) return rc < 0 ? rc : 0;
    if (err_interrupted())
      return err_set(DRV_EINTERRUPTED, "interrupted while Slurm job %s was pending; cancelled",
                     job->id);
    if (launch__now_ms() >= deadline)
      return err_set(DRV_ETIMEDOUT, "Slurm job %s still pending after %g s (reason: %s); "
                     "cancelled", job->id, limit, last[0] ? last : "none given");
    nap(loop, pause);
  }
}

int launch_slurm__job_submit(uv_loop_t *loop, const launch_config *cfg, slurm_job *job) {
  memset(job, 0, sizeof *job);
  job->watch_fd = -1;
  if (!cfg || !cfg->run_dir) return err_set(DRV_EINVAL, "launcher \"slurm\": no run directory");
  int rc = sbatch(cfg, job);
  if (rc < 0) return rc;
  job->own = true;
  note(cfg, "submitted Slurm job %s (%s/" RUNDIR_SLURM_JOB ")", job->id, cfg->run_dir);
  if ((rc = start_watchdog(job, cfg->run_dir)) < 0 || (rc = wait_running(loop, cfg, job)) < 0) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", err_msg());
    launch_slurm__job_cancel(job);
    return err_set(rc, "%s", msg);
  }
  note(cfg, "job %s running", job->id);
  return 0;
}

/* ============================== cancel =================================== */

static bool job_listed(const slurm_job *job) {
  char out[256];
  char *argv[] = {"squeue", "-h", "-j", (char *)job->id, "-o", "%T", NULL};
  int rc = launch_slurm__run(argv, out, sizeof out, NULL, 0);
  return rc == 0 && out[0]; /* squeue fails for a job it has forgotten */
}

void launch_slurm__job_cancel(slurm_job *job) {
  if (!job || !job->own || !job->id[0]) return;
  char *argv[] = {"scancel", job->id, NULL};
  char err[512];
  if (launch_slurm__run(argv, NULL, 0, err, sizeof err) < 0)
    fprintf(stderr, "drover: scancel %s: %s\n", job->id, err_msg());
  long long deadline = launch__now_ms() + CANCEL_WAIT_MS;
  while (job_listed(job) && launch__now_ms() < deadline) {
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (job_listed(job))
    fprintf(stderr, "drover: Slurm job %s still listed %d s after scancel\n", job->id,
            CANCEL_WAIT_MS / 1000);
  stop_watchdog(job);
  job->own = false;
}
