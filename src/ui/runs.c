/* runs.c - `drover ls`: the runs in a runs directory and their state, read
 * from what each run directory holds (see rundir.h):
 *   running      its coordinator (or in-process) file names a live process
 *   done         the process that ran it exited with status 0
 *   failed       it exited with another status
 *   interrupted  it exited on SIGINT (status 130)
 *   crashed      its process is gone and left no exit status (killed, a
 *                segfault): "crashed (resumable from step N)" when it has
 *                a checkpoint
 * The exit status is events.log's "process exit: N" line, written by
 * rundir_record_exit. A run without one (from a drover before it, or a
 * process that died) is judged by its events: a cluster run is done when
 * it logged "shutdown complete: 0 node failures" and no error, failed
 * when it logged an error, a failed start or node failures, and crashed
 * when its coordinator went without shutting down; an in-process run is
 * done when every fit it began ended, else crashed. The EXIT column is
 * the status, "-" when there is none. The CHECKPOINT column is the newest
 * committed checkpoint.
 */
#include "ui/runs.h"

#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "train/ckpt.h"
#include "base/err.h"
#include "base/rundir.h"
#include "base/util.h"

typedef struct run_info {
  char name[256];
  char state[64];
  char ckpt[32];    /* "step-N" or "-" */
  bool in_process;
  bool resumable;   /* run.json: `drover run --resume` can run its script again */
  bool fit_open;    /* in process: a fit began and did not end */
  char started[32]; /* events.log's first time stamp (UTC, sortable) */
  char last[32];    /* and its last */
  char address[80];
  char tensorboard[160]; /* the URL while its TensorBoard serves, else "" */
  int nodes;        /* -1 unknown */
  int exit_status;  /* "process exit: N", -1 none */
  int exit_signal;  /* "(signal S)", 0 none */
  bool shut_down;   /* a cluster run logged "shutdown complete" */
  int64_t fit_steps; /* the last "fit done: N steps", -1 none */
} run_info;

static bool starts(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Reads events.log: start time, node count, and how the run ended. */
static void read_events(const char *dir, run_info *r, bool *shutdown_ok, bool *failed) {
  char path[PATH_MAX + 32], line[2400];
  snprintf(path, sizeof path, "%s/" RUNDIR_EVENTS_LOG, dir);
  FILE *f = fopen(path, "r");
  *shutdown_ok = *failed = false;
  if (!f) return;
  int started = 0;
  while (fgets(line, sizeof line, f)) {
    char *text = strchr(line, ' ');
    if (!text) continue;
    *text++ = '\0';
    if (!r->started[0]) snprintf(r->started, sizeof r->started, "%.31s", line);
    snprintf(r->last, sizeof r->last, "%.31s", line);
    int n, fails;
    if (sscanf(text, "cluster ready: %d nodes", &n) == 1) r->nodes = n;
    if (starts(text, "node start ")) started++;
    if ((starts(text, "fit ") && (strstr(text, ": started") || strstr(text, ": resuming"))) ||
        starts(text, "fit: ")) /* in process; on a cluster */
      r->fit_open = true;
    if (starts(text, "fit done") || starts(text, "fit failed") || starts(text, "error: fit stopped"))
      r->fit_open = false;
    if (starts(text, "error ") || starts(text, "start failed") ||
        starts(text, "reservation timed out"))
      *failed = true;
    long long steps;
    if (sscanf(text, "fit done: %lld steps", &steps) == 1) r->fit_steps = steps;
    int st, sig;
    if (sscanf(text, "process exit: %d (signal %d)", &st, &sig) == 2) {
      r->exit_status = st;
      r->exit_signal = sig;
    } else if (sscanf(text, "process exit: %d", &st) == 1) {
      r->exit_status = st;
      r->exit_signal = 0;
    }
    if (sscanf(text, "shutdown complete: %d node failure", &fails) == 1) {
      r->shut_down = true;
      *shutdown_ok = fails == 0;
      *failed |= fails != 0;
    }
  }
  fclose(f);
  if (r->nodes < 0 && started > 0) r->nodes = started;
}

long runs_coordinator_pid(const char *dir, char *addr, size_t n) {
  char path[PATH_MAX + 32], line[512] = "";
  snprintf(path, sizeof path, "%s/" RUNDIR_COORDINATOR, dir);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  bool got = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  char *sp = got ? strchr(line, ' ') : NULL;
  if (!sp) return 0;
  *sp = '\0';
  if (n) snprintf(addr, n, "%s", line);
  long pid = strtol(sp + 1, NULL, 10);
  return pid > 0 ? pid : 0;
}

/* "HOST:PORT PID" while the coordinator lives. */
static bool coordinator_alive(const char *dir, run_info *r) {
  char addr[sizeof r->address];
  long pid = runs_coordinator_pid(dir, addr, sizeof addr);
  if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH)) return false;
  snprintf(r->address, sizeof r->address, "%s", addr);
  return true;
}

/* "URL PID" while the TensorBoard serving the run lives (run/tboard.h);
 * a file its SIGKILLed process left is ignored. */
static void read_tensorboard(const char *dir, run_info *r) {
  char path[PATH_MAX + 32], line[256] = "", url[160];
  snprintf(path, sizeof path, "%s/" RUNDIR_TENSORBOARD, dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  long pid = 0;
  bool got = fgets(line, sizeof line, f) && sscanf(line, "%159s %ld", url, &pid) == 2;
  fclose(f);
  if (got && pid > 0 && !(kill((pid_t)pid, 0) != 0 && errno == ESRCH))
    snprintf(r->tensorboard, sizeof r->tensorboard, "%s", url);
}

long runs_process_pid(const char *dir) {
  char path[PATH_MAX + 32], line[64] = "";
  snprintf(path, sizeof path, "%s/" RUNDIR_PROCESS, dir);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  long pid = 0;
  bool got = fgets(line, sizeof line, f) && sscanf(line, "in-process %ld", &pid) == 1;
  fclose(f);
  return got && pid > 0 && !(kill((pid_t)pid, 0) != 0 && errno == ESRCH) ? pid : 0;
}

/* "in-process PID" while the process lives. */
static bool process_alive(const char *dir) { return runs_process_pid(dir) > 0; }

/* The newest committed checkpoint's step, or -1. */
static int64_t last_checkpoint(const char *dir) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/" RUNDIR_CHECKPOINTS, dir);
  ckpt_entry *all;
  int n = ckpt_list(path, &all);
  int64_t step = n > 0 ? all[n - 1].step : -1;
  if (n >= 0) free(all);
  return step;
}

/* `what` with ", resumable from step N" when an unfinished fit has a
 * checkpoint. */
static void set_state(run_info *r, const char *what, int64_t step) {
  if (r->resumable && r->fit_open && step >= 0)
    snprintf(r->state, sizeof r->state, "%s (resumable from step %lld)", what, (long long)step);
  else snprintf(r->state, sizeof r->state, "%s", what);
}

/* The state of a run that is not running (see the top of the file). */
static void ended_state(run_info *r, bool shutdown_ok, bool failed, int64_t step) {
  if (r->exit_status >= 0)
    set_state(r, r->exit_signal == SIGINT ? "interrupted" : r->exit_status == 0 ? "done" : "failed",
              step);
  else if (r->in_process)
    set_state(r, failed ? "failed" : r->fit_open ? "crashed" : "done", step);
  else
    set_state(r, shutdown_ok && !failed ? "done" : failed || r->shut_down ? "failed" : "crashed",
              step);
}

static bool read_run(const char *base, const char *name, run_info *r) {
  char dir[PATH_MAX];
  struct stat st;
  if (snprintf(dir, sizeof dir, "%s/%s", base, name) >= (int)sizeof dir) return false;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  char ev[PATH_MAX + 16];
  snprintf(ev, sizeof ev, "%s/" RUNDIR_EVENTS_LOG, dir);
  if (stat(ev, &st) != 0) return false; /* not a run directory */
  memset(r, 0, sizeof *r);
  r->nodes = -1;
  r->exit_status = -1;
  r->fit_steps = -1;
  snprintf(r->name, sizeof r->name, "%s", name);
  bool shutdown_ok, failed;
  read_events(dir, r, &shutdown_ok, &failed);
  int64_t step = last_checkpoint(dir);
  if (step >= 0) rundir_step(r->ckpt, sizeof r->ckpt, NULL, step);
  else snprintf(r->ckpt, sizeof r->ckpt, "-");
  char rj[PATH_MAX + 16];
  snprintf(rj, sizeof rj, "%s/" RUNDIR_RUN_JSON, dir);
  struct stat sx; /* st stays events.log's */
  r->resumable = stat(rj, &sx) == 0; /* its script was kept */
  r->in_process = runs_in_process(dir);
  if (r->in_process ? process_alive(dir) : coordinator_alive(dir, r)) {
    snprintf(r->state, sizeof r->state, "running");
    read_tensorboard(dir, r);
  } else {
    ended_state(r, shutdown_ok, failed, step);
  }
  if (!r->started[0]) { /* an empty events.log: its time of creation */
    struct tm tm;
    gmtime_r(&st.st_mtime, &tm);
    strftime(r->started, sizeof r->started, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
  }
  return true;
}

static int by_start(const void *a, const void *b) {
  const run_info *x = a, *y = b;
  int c = strcmp(x->started, y->started);
  return c ? c : strcmp(x->name, y->name);
}

/* "2026-11-21T10:53:06.123Z" (UTC) as local "2026-11-21 11:53:06". */
static const char *local_time(const char *utc, char *buf, size_t n) {
  struct tm tm = {0};
  if (!strptime(utc, "%Y-%m-%dT%H:%M:%S", &tm)) return utc;
  time_t t = timegm(&tm);
  localtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

/* The table: a TENSORBOARD column after ADDRESS while some run has one. */
static void print_runs(const run_info *runs, size_t n, FILE *out) {
  bool tb = false;
  for (size_t i = 0; i < n; i++) tb |= runs[i].tensorboard[0] != '\0';
  const char *fmt = tb ? "%-40s %-11s %5s  %-19s  %-12s %4s  %-21s  %s\n"
                       : "%-40s %-11s %5s  %-19s  %-12s %4s  %s%s\n";
  if (n)
    fprintf(out, fmt, "RUN", "STATE", "NODES", "STARTED", "CHECKPOINT", "EXIT", "ADDRESS",
            tb ? "TENSORBOARD" : "");
  for (size_t i = 0; i < n; i++) {
    char when[32], nodes[16], status[16] = "-";
    if (runs[i].exit_status >= 0 && strcmp(runs[i].state, "running") != 0)
      snprintf(status, sizeof status, "%d", runs[i].exit_status);
    if (runs[i].in_process) snprintf(nodes, sizeof nodes, "local");
    else if (runs[i].nodes >= 0) snprintf(nodes, sizeof nodes, "%d", runs[i].nodes);
    else snprintf(nodes, sizeof nodes, "-");
    fprintf(out, fmt, runs[i].name, runs[i].state, nodes,
            local_time(runs[i].started, when, sizeof when), runs[i].ckpt, status,
            runs[i].address[0] || !tb ? runs[i].address : "-", runs[i].tensorboard);
  }
}

int runs_list(const char *base, FILE *out) {
  DIR *d = opendir(base);
  if (!d) return err_set(DRV_EIO, "cannot list runs in '%s': %s", base, strerror(errno));
  run_info *runs = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    int rc = util_grow(&runs, &cap, n + 1, sizeof *runs, 16);
    if (rc < 0) {
      closedir(d);
      free(runs);
      return rc;
    }
    if (read_run(base, e->d_name, &runs[n])) n++;
  }
  closedir(d);
  qsort(runs, n, sizeof *runs, by_start);
  print_runs(runs, n, out);
  free(runs);
  return (int)n;
}

/* ============================== finding runs ============================= */

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The runs under base whose names start with prefix: how many, the first
 * into dir, and up to RUNS_LIST_MAX names, oldest first, into list. */
#define RUNS_LIST_MAX 8
static int with_prefix(const char *base, const char *prefix, char *dir, size_t n, char *list,
                       size_t nl) {
  DIR *d = opendir(base);
  if (!d) return 0;
  run_info r, found[RUNS_LIST_MAX];
  int count = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.' || !starts(e->d_name, prefix) || !read_run(base, e->d_name, &r)) continue;
    if (count < RUNS_LIST_MAX) found[count] = r;
    count++;
  }
  closedir(d);
  int shown = count < RUNS_LIST_MAX ? count : RUNS_LIST_MAX;
  qsort(found, (size_t)shown, sizeof *found, by_start);
  size_t len = 0;
  list[0] = '\0';
  for (int i = 0; i < shown && len < nl; i++)
    len += (size_t)snprintf(list + len, nl - len, "%s  %s", i ? "\n" : "", found[i].name);
  if (count > shown && len < nl) snprintf(list + len, nl - len, "\n  ... (%d more)", count - shown);
  if (count == 1 && snprintf(dir, n, "%s/%s", base, found[0].name) >= (int)n) return 0;
  return count;
}

int runs_find(const char *base, const char *name, char *dir, size_t n) {
  if (is_dir(name) && snprintf(dir, n, "%s", name) < (int)n) return 0;
  if (!strchr(name, '/') && *name) {
    if (snprintf(dir, n, "%s/%s", base, name) < (int)n && is_dir(dir)) return 0;
    char list[RUNS_LIST_MAX * 260 + 32];
    int count = with_prefix(base, name, dir, n, list, sizeof list);
    if (count == 1) return 0;
    if (count > 1)
      return err_set(DRV_EINVAL, "run '%s' is ambiguous: %d runs in '%s' start so (give more of "
                     "the name):\n%s", name, count, base, list);
  }
  return err_set(DRV_EINVAL, "no run '%s' (not a directory, nor a run in '%s': drover ls %s "
                 "lists them)", name, base, base);
}

static bool read_dir(const char *dir, run_info *r) {
  char base[PATH_MAX], name[256];
  const char *slash = strrchr(dir, '/');
  snprintf(base, sizeof base, "%.*s", slash ? (int)(slash - dir) : 1, slash ? dir : ".");
  snprintf(name, sizeof name, "%s", slash ? slash + 1 : dir);
  return read_run(base, name, r);
}

bool runs_done(const char *dir, int64_t *step, int *exit_status) {
  run_info r;
  if (!read_dir(dir, &r) || strcmp(r.state, "done") != 0) return false;
  *step = r.fit_steps;
  *exit_status = r.exit_status;
  return true;
}

void runs_state(const char *dir, char *state, size_t n, char *last, size_t nl) {
  run_info r;
  if (!read_dir(dir, &r)) {
    snprintf(state, n, "unknown");
    if (nl) last[0] = '\0';
    return;
  }
  snprintf(state, n, "%s", r.state);
  snprintf(last, nl, "%s", r.last);
}

bool runs_in_process(const char *dir) {
  char path[PATH_MAX + 16];
  struct stat st;
  snprintf(path, sizeof path, "%s/" RUNDIR_RUN_JSON, dir);
  if (stat(path, &st) != 0) return false;
  snprintf(path, sizeof path, "%s/" RUNDIR_SECRET, dir);
  return stat(path, &st) != 0;
}

bool runs_running(const char *dir) {
  run_info r = {0};
  return runs_in_process(dir) ? process_alive(dir) : coordinator_alive(dir, &r);
}

/* ============================== removing runs ============================ */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)ftw;
  int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
  if (rc != 0 && errno != ENOENT)
    return err_set(DRV_EIO, "cannot remove '%s': %s", path, strerror(errno)), 1;
  return 0;
}

int runs_remove(const char *dir) {
  char abs[PATH_MAX], ev[PATH_MAX + 16];
  struct stat st;
  if (!realpath(dir, abs)) return err_set(DRV_EIO, "cannot remove '%s': %s", dir, strerror(errno));
  snprintf(ev, sizeof ev, "%s/" RUNDIR_EVENTS_LOG, abs);
  if (stat(ev, &st) != 0)
    return err_set(DRV_EINVAL, "'%s' is not a run directory (it has no " RUNDIR_EVENTS_LOG
                   "): not removed", dir);
  if (rundir_lock(abs) < 0) {
    long pid = rundir_lock_holder(abs);
    if (pid > 0)
      return err_set(DRV_EAGAIN, "run '%s' is running (pid %ld): `drover stop %s` first", dir,
                     pid, dir);
    return err_set(DRV_EAGAIN, "run '%s' is running: `drover stop %s` first", dir, dir);
  }
  int rc = 0;
  if (runs_running(abs))
    rc = err_set(DRV_EAGAIN, "run '%s' is running (its process is alive): `drover stop %s` "
                 "first", dir, dir);
  else if ((rc = nftw(abs, rm_one, 16, FTW_DEPTH | FTW_PHYS)) != 0)
    rc = rc > 0 ? DRV_EIO /* rm_one said which file */
                : err_set(DRV_EIO, "cannot remove '%s': %s", dir, strerror(errno));
  rundir_unlock(abs);
  return rc;
}
