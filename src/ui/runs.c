/* runs.c - `drover ls`: the runs in a runs directory and their state, read
 * from what each run directory holds (see rundir.h):
 *   running      its coordinator (or in-process) file names a live process
 *   done         the process that ran it exited with status 0
 *   failed       it exited with another status
 *   interrupted  it exited on SIGINT (status 130: Ctrl-C, drover stop)
 *   crashed      its process is gone and left no exit status (killed, a
 *                segfault)
 * and, after any but done, "(resumable from step N)" when its script was
 * kept (run.json), its last fit did not end "fit done" and a checkpoint is
 * there to go on from.
 * The exit status is events.log's "process exit: N" line, written by
 * rundir_record_exit. A run without one (from a drover before it, or a
 * process that died) is judged by its events: a cluster run is done when
 * it logged "shutdown complete: 0 node failures" and no error, failed
 * when it logged an error, a failed start or node failures, and crashed
 * when its coordinator went without shutting down; an in-process run is
 * done when every fit it began ended, else crashed. A run the REPL hosts
 * (RUNS_REPL_EVENT) is judged by its events whatever the REPL's exit
 * status: running while its fit (or its cluster) runs, then as its last
 * fit ended or as `drover stop` ended it. The EXIT column is the status,
 * "-" when there is none or the REPL ran it. The CHECKPOINT column is the
 * newest committed checkpoint.
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

/* How the last fit a run began ended, as events.log says. */
enum { FIT_NONE, FIT_DONE, FIT_FAILED, FIT_INTERRUPTED };

typedef struct run_info {
  char name[256];
  char state[64];
  char ckpt[32];    /* "step-N" or "-" */
  bool in_process;
  bool repl;        /* the REPL hosts it: its exit status is not the run's */
  bool resumable;   /* run.json: `drover run --resume` can run its script again */
  bool fit_open;    /* a fit began and logged no end */
  bool unfinished;  /* a fit began and did not end "fit done" (a resume goes on) */
  int last_fit;     /* FIT_* */
  bool stopped;     /* `drover stop` ended it ("stopping the run ...") */
  char started[32]; /* events.log's first time stamp (UTC, sortable) */
  char last[32];    /* and its last */
  char address[80];
  char tensorboard[160]; /* the URL while its TensorBoard serves, else "" */
  int nodes;        /* -1 unknown */
  char mix[24];     /* a mixed cluster's launchers ("local+spark"), else "" */
  int exit_status;  /* "process exit: N", -1 none */
  int exit_signal;  /* "(signal S)", 0 none */
  bool shut_down;   /* a cluster run logged "shutdown complete" */
  int64_t fit_steps; /* the last "fit done: N steps", -1 none */
} run_info;

static bool starts(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A fit begins: "fit N: started", "fit N: resuming ..." in process; on a
 * cluster "fit: ..." (several lines per fit, none after its end). */
static bool fit_begins(const char *text) {
  return (starts(text, "fit ") && (strstr(text, ": started") || strstr(text, ": resuming"))) ||
         starts(text, "fit: ");
}

/* How a fit ends: "fit done: N steps"; "fit failed: N steps" (a cluster)
 * or "error: fit stopped: why" (in process); then, when it was Ctrl-C or
 * `drover stop`, "interrupted: the fit stopped at step N" (both). */
static int fit_ends(const char *text) {
  if (starts(text, "fit done")) return FIT_DONE;
  if (starts(text, "interrupted: ")) return FIT_INTERRUPTED;
  if (starts(text, "fit failed") || starts(text, "error: fit stopped")) return FIT_FAILED;
  return FIT_NONE;
}

/* One event of events.log into r; *failed when it is a failure's. */
static void read_event(run_info *r, const char *text, int *started, bool *shutdown_ok,
                       bool *failed) {
  int n, fails, st, sig, end = fit_ends(text);
  long long steps;
  if (sscanf(text, "cluster ready: %d nodes", &n) == 1) r->nodes = n;
  if (starts(text, "mixed placement: ")) sscanf(text, "mixed placement: %23[a-z+]", r->mix);
  if (starts(text, "node start ")) (*started)++;
  if (starts(text, RUNS_REPL_EVENT)) r->repl = true;
  if (starts(text, "stopping the run")) r->stopped = true;
  if (fit_begins(text)) r->fit_open = r->unfinished = true;
  if (end != FIT_NONE) {
    r->fit_open = false;
    r->unfinished = end != FIT_DONE;
    r->last_fit = end;
  }
  if (starts(text, "error ") || starts(text, "start failed") ||
      starts(text, "reservation timed out"))
    *failed = true;
  if (sscanf(text, "fit done: %lld steps", &steps) == 1) r->fit_steps = steps;
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
    read_event(r, text, &started, shutdown_ok, failed);
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
  rundir_ckdir(dir, path, sizeof path);
  ckpt_entry *all;
  int n = ckpt_list(path, &all);
  int64_t step = n > 0 ? all[n - 1].step : -1;
  if (n >= 0) free(all);
  return step;
}

/* Running: its coordinator lives; in process, its process lives and, when
 * that is the REPL, a fit runs (between fits the REPL waits for the user,
 * and the run stands as its last fit ended). */
static bool is_running(const char *dir, run_info *r) {
  if (!r->in_process) return coordinator_alive(dir, r);
  return process_alive(dir) && (!r->repl || r->fit_open);
}

/* `what`, with " (resumable from step N)" when its script was kept, a fit
 * did not finish (it failed, was interrupted or its process died) and a
 * checkpoint is there to go on from. */
static void set_state(run_info *r, const char *what, int64_t step) {
  if (r->resumable && r->unfinished && step >= 0 && strcmp(what, "done") != 0)
    snprintf(r->state, sizeof r->state, "%s (resumable from step %lld)", what, (long long)step);
  else snprintf(r->state, sizeof r->state, "%s", what);
}

/* A run the REPL hosts, not running: as its last fit ended (the REPL's
 * exit status says nothing of it), or as `drover stop` ended its cluster. */
static const char *repl_state(const run_info *r, bool failed) {
  if (r->fit_open) return "crashed"; /* the REPL died in the middle of a fit */
  if (r->stopped || r->last_fit == FIT_INTERRUPTED) return "interrupted";
  if (failed || r->last_fit == FIT_FAILED) return "failed";
  if (!r->in_process && !r->shut_down) return "crashed"; /* with its cluster up */
  return "done";
}

/* The state of a run that is not running (see the top of the file). */
static void ended_state(run_info *r, bool shutdown_ok, bool failed, int64_t step) {
  if (r->repl)
    set_state(r, repl_state(r, failed), step);
  else if (r->exit_status >= 0)
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
  if (is_running(dir, r)) {
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

/* One run's columns as printed. */
typedef struct run_row {
  const char *name, *state, *ckpt, *address, *tensorboard;
  char when[32], nodes[40], status[16];
} run_row;

static void make_row(run_info *r, run_row *w) {
  w->name = r->name;
  w->state = r->state;
  w->ckpt = r->ckpt;
  w->address = r->address;
  w->tensorboard = r->tensorboard;
  char when[32];
  snprintf(w->when, sizeof w->when, "%s", local_time(r->started, when, sizeof when));
  snprintf(w->status, sizeof w->status, "-");
  if (r->exit_status >= 0 && !r->repl && strcmp(r->state, "running") != 0)
    snprintf(w->status, sizeof w->status, "%d", r->exit_status);
  if (r->in_process) snprintf(w->nodes, sizeof w->nodes, "local");
  else if (r->nodes >= 0) snprintf(w->nodes, sizeof w->nodes, "%d%s%s", r->nodes,
                                   r->mix[0] ? " " : "", r->mix);
  else snprintf(w->nodes, sizeof w->nodes, "-");
}

static int widest(int w, const char *s) {
  int n = (int)strlen(s);
  return n > w ? n : w;
}

/* The table, each column as wide as its widest cell (as ls -l and ps do):
 * a long STATE ("interrupted (resumable from step 14070)") or name moves
 * the columns after it, on every line alike. A TENSORBOARD column follows
 * ADDRESS while some run has one ("-" for an ADDRESS then; else none). */
static void print_rows(run_row *w, size_t n, FILE *out) {
  int cw[6] = {3, 5, 5, 10, 4, 0}; /* RUN STATE NODES CHECKPOINT EXIT ADDRESS */
  for (size_t i = 0; i < n; i++) {
    cw[0] = widest(cw[0], w[i].name);
    cw[1] = widest(cw[1], w[i].state);
    cw[2] = widest(cw[2], w[i].nodes);
    cw[3] = widest(cw[3], w[i].ckpt);
    cw[4] = widest(cw[4], w[i].status);
    if (w[i].tensorboard[0]) cw[5] = 7;
  }
  for (size_t i = 0; cw[5] && i < n; i++) cw[5] = widest(cw[5], w[i].address);
  for (size_t i = 0; i <= n; i++) {
    const run_row *r = i ? &w[i - 1] : NULL;
    const char *addr = !r ? "ADDRESS" : r->address[0] || !cw[5] ? r->address : "-";
    char line[1024];
    snprintf(line, sizeof line, "%-*s  %-*s  %*s  %-19s  %-*s  %*s  %-*s  %s", cw[0],
             r ? r->name : "RUN", cw[1], r ? r->state : "STATE", cw[2], r ? r->nodes : "NODES",
             r ? r->when : "STARTED", cw[3], r ? r->ckpt : "CHECKPOINT", cw[4],
             r ? r->status : "EXIT", cw[5], addr,
             cw[5] ? (r ? r->tensorboard : "TENSORBOARD") : "");
    size_t len = strlen(line);
    while (len > 0 && line[len - 1] == ' ') line[--len] = '\0'; /* no trailing blanks */
    fprintf(out, "%s\n", line);
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
  run_row *rows = n ? calloc(n, sizeof *rows) : NULL;
  if (n && !rows) {
    free(runs);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < n; i++) make_row(&runs[i], &rows[i]);
  if (n) print_rows(rows, n, out);
  free(rows);
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

bool runs_repl(const char *dir) {
  run_info r;
  return read_dir(dir, &r) && r.repl;
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

/* Whether events.log begins as an in-process run's ("in-process run: pid
 * N", among its first lines): one of the REPL, or of a script read from
 * stdin, has no run.json. */
static bool logged_in_process(const char *dir) {
  char path[PATH_MAX + 16], line[512];
  snprintf(path, sizeof path, "%s/" RUNDIR_EVENTS_LOG, dir);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool found = false;
  for (int i = 0; i < 8 && !found && fgets(line, sizeof line, f); i++) {
    const char *text = strchr(line, ' ');
    found = text && starts(text + 1, "in-process run");
  }
  fclose(f);
  return found;
}

bool runs_in_process(const char *dir) {
  char path[PATH_MAX + 16];
  struct stat st;
  snprintf(path, sizeof path, "%s/" RUNDIR_SECRET, dir);
  if (stat(path, &st) == 0) return false;
  snprintf(path, sizeof path, "%s/" RUNDIR_RUN_JSON, dir);
  return stat(path, &st) == 0 || logged_in_process(dir);
}

bool runs_running(const char *dir) {
  run_info r;
  return read_dir(dir, &r) && strcmp(r.state, "running") == 0;
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
    if (pid > 0 && runs_repl(abs) && !runs_running(abs)) /* between fits */
      return err_set(DRV_EAGAIN, "run '%s' is held by the REPL that ran it (pid %ld), for its "
                     "experiment's next fit: leave that REPL first", dir, pid);
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
