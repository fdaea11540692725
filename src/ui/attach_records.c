/* attach_records.c - `drover attach` on a run that has ended: the
 * dashboard, read-only, over a model rebuilt from the run directory
 * (dash_records.h), and `drover attach A B`, two runs' metrics in the same
 * panels as TensorBoard compares runs. Nothing here talks to a
 * coordinator: the files are all there is.
 */
#include "ui/attach.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ui/dash.h"
#include "ui/dash_records.h"
#include "base/err.h"
#include "base/rundir.h"
#include "ui/runs.h"

bool attach_coordinator_up(const char *dir) {
  long pid = runs_coordinator_pid(dir, NULL, 0);
  if (pid < 0) return false;
  /* unreadable: let the live path say what is wrong with it */
  return pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

/* One run's records into m; the banner says how it stands. */
static int load_run(const char *dir, runview *m) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/" RUNDIR_EVENTS_LOG, dir);
  if (access(path, F_OK) != 0)
    return err_set(DRV_EINVAL, "'%s' is not a run directory (it has no " RUNDIR_EVENTS_LOG ")",
                   dir);
  char state[64], last[40];
  runs_state(dir, state, sizeof state, last, sizeof last);
  int rc = dash_records_load(dir, state, last, m);
  if (rc == 0 && strcmp(state, "running") == 0)
    snprintf(m->banner, sizeof m->banner, "still running in process: its records so far, read-only");
  return rc;
}

/* A and B in one model: A's nodes and events, both runs' metrics. */
static int load_pair(const char *dir, const char *dir2, runview *m) {
  runview b;
  runview_init(&b);
  int rc = load_run(dir, m);
  if (rc == 0) rc = load_run(dir2, &b);
  if (rc == 0) rc = dash_records_overlay(m, &b);
  if (rc == 0) {
    char a[160];
    snprintf(a, sizeof a, "%s", m->run);
    snprintf(m->run, sizeof m->run, "%.70s vs %.70s", a, b.run);
    snprintf(m->banner, sizeof m->banner, "comparing %.55s (bright) with %.55s (dim)  read-only", a,
             b.run);
  }
  runview_free(&b);
  return rc;
}

/* ---- the dashboard ---- */

typedef struct view {
  runview *m;
  bool quit;
} view;

static const runview *src_get(void *ud) { return ((view *)ud)->m; }

/* The node's log file is in the run directory: read it here. */
static int src_log_tail(void *ud, const char *name, char *out, size_t n) {
  const runview *m = ((view *)ud)->m;
  const runview_node *node = runview_find_node(m, name);
  if (node) {
    rundir_log_tail(node->log, DASH_LOG_LINES, out, n);
    return 0;
  }
  snprintf(out, n, "(no node '%s' in this run's records)", name);
  return 0;
}

static void on_quit(void *ud) { ((view *)ud)->quit = true; }

static int show(runview *m, const attach_opts *o) {
  uv_loop_t loop;
  if (uv_loop_init(&loop) < 0) return 1;
  view v = {.m = m};
  dash_opts dopt;
  dash_opts_default(&dopt);
  dopt.hz = o->hz;
  dopt.on_quit = on_quit;
  dopt.ud = &v;
  dash_source src = {.get = src_get, .log_tail = src_log_tail, .ud = &v};
  dash *d = NULL;
  int status = 0;
  if (dash_open(&loop, &dopt, src, &d) < 0) {
    fprintf(stderr, "drover: cannot open the dashboard: %s\n", err_msg());
    status = 1;
  } else {
    while (!v.quit && !dash_closed(d) && !err_interrupted()) uv_run(&loop, UV_RUN_ONCE);
    dash_close(d);
  }
  uv_run(&loop, UV_RUN_DEFAULT); /* the dashboard's handles close */
  if (uv_loop_close(&loop) != 0) fputs("drover: dashboard loop closed with live handles\n", stderr);
  return status;
}

/* --print of a comparison: the second run's newest values too. */
static void print_overlay(const runview *m, FILE *out) {
  if (m->noverlay) fprintf(out, "metrics of %s:\n", m->overlay_run);
  for (int i = 0; i < m->noverlay; i++) {
    const runview_series *s = &m->overlay[i];
    if (s->n == 0) continue;
    const runview_point *p = runview_series_at(s, s->n - 1);
    fprintf(out, "  %-18s %.6g at step %.0f (%d points)\n", s->tag, p->value, p->step, s->n);
  }
}

int attach_records_main(const attach_opts *o, const char *dir, const char *dir2) {
  runview m;
  runview_init(&m);
  int rc = dir2 ? load_pair(dir, dir2, &m) : load_run(dir, &m);
  int status = 0;
  if (rc < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    status = 1;
  } else if (o->print) {
    printf("%s\n", m.banner);
    attach_print(&m, 10, stdout);
    print_overlay(&m, stdout);
    fflush(stdout);
  } else {
    status = show(&m, o);
  }
  runview_free(&m);
  return status;
}
