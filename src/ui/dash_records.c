/* dash_records.c - a finished run's runview from its run directory
 * (see dash_records.h). Each file is read on its own and a missing or
 * damaged line is skipped: a run that crashed mid-write is still worth
 * looking at.
 */
#include "ui/dash_records.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/err.h"
#include "base/rundir.h"
#include "proto/nodestate.h"
#include "run/metrics.h"
#include "ui/runs.h"

#define THROUGHPUT_EVERY 1.0 /* seconds of run time per examples/s point */

/* "2026-11-21T10:53:06.123Z" as seconds since the epoch; <0 when not one. */
static double stamp_seconds(const char *s) {
  struct tm tm = {0};
  const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return -1;
  double frac = *rest == '.' ? strtod(rest, NULL) : 0;
  return (double)timegm(&tm) + frac;
}

/* ============================== events.log =============================== */

/* Returns the exit status events.log records ("process exit: N", the last
 * one), or -1. */
static int load_events(const char *dir, runview *m) {
  char path[PATH_MAX + 32], line[2400];
  snprintf(path, sizeof path, "%s/" RUNDIR_EVENTS_LOG, dir);
  FILE *f = fopen(path, "r");
  int status = -1;
  if (!f) return status;
  double t0 = -1;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *text = strchr(line, ' ');
    if (!text) continue;
    *text++ = '\0';
    double t = stamp_seconds(line);
    if (t < 0) continue;
    if (t0 < 0) t0 = t;
    m->uptime = t - t0;
    runview_add_event(m, t - t0, text);
    int n;
    if (sscanf(text, "fit: %d steps", &n) == 1) m->total_steps = n;
    if (sscanf(text, "process exit: %d", &n) == 1) status = n;
  }
  fclose(f);
  return status;
}

/* ============================== nodes.tsv ================================ */

static void add_node(runview *m, const char *dir, char **col, int ncol) {
  if (runview_set_nnodes(m, m->nnodes + 1) < 0) return;
  runview_node *n = &m->nodes[m->nnodes - 1];
  snprintf(n->name, sizeof n->name, "%s", col[0]);
  n->pid = ncol > 1 ? atoi(col[1]) : 0;
  snprintf(n->host, sizeof n->host, "%s", ncol > 2 ? col[2] : "-");
  n->restarts = ncol > 14 ? atoi(col[14]) : 0;
  snprintf(n->where, sizeof n->where, "%s", ncol > 15 ? col[15] : "");
  snprintf(n->state, sizeof n->state, "%s", nodestate_shown(NODE_DONE));
  n->cpu_pct = n->heartbeat_age = -1;
  n->backlog = -1;
  char role[32] = "";
  int index = 0;
  if (sscanf(col[0], "%31[^:]:%d", role, &index) == 2)
    rundir_node_log(n->log, sizeof n->log, dir, role, index);
  if (ncol > 6)
    snprintf(n->got, sizeof n->got, "%s threads, %s cpus", col[5], col[6]);
}

static void load_nodes(const char *dir, runview *m) {
  char path[PATH_MAX + 32], line[2048];
  snprintf(path, sizeof path, "%s/" RUNDIR_NODES, dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  bool header = true;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (header || !line[0]) {
      header = false;
      continue;
    }
    char *col[16];
    int ncol = 0;
    for (char *p = line; p && ncol < 16; ncol++) {
      col[ncol] = p;
      p = strchr(p, '\t');
      if (p) *p++ = '\0';
    }
    add_node(m, dir, col, ncol);
  }
  fclose(f);
}

/* ============================== metrics.jsonl ============================ */

typedef struct rate {
  double t0, examples; /* since the last point */
} rate;

/* One line: its series points, the node's steps, examples/s now and then. */
static void metrics_line(runview *m, json_t *o, rate *r) {
  double t = json_number_value(json_object_get(o, "time"));
  double step = json_number_value(json_object_get(o, "step"));
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    double x;
    if (metrics_series(key, v, &x) && !isnan(x)) /* null: no point */
      runview_add_point(m, metrics_tag(key), (runview_point){step, t, x});
  }
  if (step > (double)m->step) m->step = (int64_t)step;
  const char *node = json_string_value(json_object_get(o, "node"));
  for (int i = 0; node && i < m->nnodes; i++)
    if (strcmp(m->nodes[i].name, node) == 0) m->nodes[i].steps++;
  json_t *ex = json_object_get(o, "examples");
  if (!json_is_integer(ex)) return;
  r->examples += (double)json_integer_value(ex);
  if (t - r->t0 >= THROUGHPUT_EVERY) {
    m->examples_per_sec = r->examples / (t - r->t0);
    runview_add_point(m, "examples/s", (runview_point){step, t, m->examples_per_sec});
    r->t0 = t;
    r->examples = 0;
  }
}

static void load_metrics(const char *dir, runview *m) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/" RUNDIR_METRICS, dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  char *line = NULL;
  size_t cap = 0;
  rate r = {0, 0};
  while (getline(&line, &cap, f) > 0) {
    json_t *o = json_loads(line, JSON_DECODE_ANY, NULL);
    if (json_is_object(o)) metrics_line(m, o, &r);
    json_decref(o);
  }
  free(line);
  fclose(f);
}

/* ============================== the model ================================ */

/* "2026-11-21T10:53:06.123Z" (UTC) as local "2026-11-21 11:53:06". */
static void local_time(const char *utc, char *buf, size_t n) {
  double t = stamp_seconds(utc);
  if (t < 0) {
    snprintf(buf, n, "%s", utc[0] ? utc : "an unknown time");
    return;
  }
  time_t tt = (time_t)t;
  struct tm tm;
  localtime_r(&tt, &tm);
  strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

int dash_records_load(const char *dir, const char *state, const char *ended, runview *m) {
  runview_free(m);
  runview_init(m);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return err_set(DRV_EIO, "cannot read run '%s': %s", dir,
                   errno ? strerror(errno) : "not a directory");
  const char *base = strrchr(dir, '/');
  snprintf(m->run, sizeof m->run, "%s", base && base[1] ? base + 1 : dir);
  snprintf(m->launcher, sizeof m->launcher, "%s", runs_in_process(dir) ? "in-process" : "records");
  snprintf(m->state, sizeof m->state, "%s", state);
  m->eta = -1;
  load_nodes(dir, m);
  int status = load_events(dir, m);
  load_metrics(dir, m);
  if (m->total_steps < m->step) m->total_steps = m->step;
  bool failed = strcmp(state, "done") != 0;
  for (int i = 0; i < m->nnodes; i++)
    if (failed) snprintf(m->nodes[i].state, sizeof m->nodes[i].state, "%s", nodestate_shown(NODE_FAILED));
  char when[64];
  local_time(ended, when, sizeof when);
  if (status < 0) status = failed ? 1 : 0; /* a run from before exits were recorded */
  snprintf(m->banner, sizeof m->banner, "finished at %s (exit %d)  read-only: the run's records",
           when, status);
  return 0;
}

int dash_records_overlay(runview *a, runview *b) {
  for (int i = 0; i < b->nmetrics; i++) {
    const char *tag = b->metrics[i].tag;
    if (runview_find_series(a, tag)) continue;
    /* An empty series: made by a point, which then goes. */
    if (runview_add_point(a, tag, (runview_point){0, 0, NAN}) < 0) return DRV_ENOMEM;
    ((runview_series *)runview_find_series(a, tag))->n = 0;
  }
  a->overlay = b->metrics;
  a->noverlay = b->nmetrics;
  b->metrics = NULL;
  b->nmetrics = b->capmetrics = 0;
  snprintf(a->overlay_run, sizeof a->overlay_run, "%s", b->run);
  return 0;
}
