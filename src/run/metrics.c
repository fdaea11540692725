/* metrics.c - metrics.jsonl, written and read by one schema (see
 * metrics.h).
 */
#include "run/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "train/bineval.h"

/* ============================== writing ================================== */

void metrics_open(metrics *m, rundir *rd) {
  char path[1200];
  m->rd = rd;
  m->f = util_fopen_append(rundir_file(rd, RUNDIR_METRICS, path, sizeof path), 0644);
  if (!m->f) {
    char why[1400];
    snprintf(why, sizeof why, "cannot open %s: %s", path, strerror(errno));
    rundir_lost(rd, why);
  }
}

/* A JSON number, or null for NaN and the infinities, which JSON lacks
 * (and json_real refuses). */
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* Sets key to v when v is known (finite); false when out of memory. */
static bool set_known(json_t *o, const char *key, double v) {
  return !isfinite(v) || json_object_set_new(o, key, json_real(v)) == 0;
}

/* Takes over `line` (NULL: out of memory, a lost line). */
static void append(metrics *m, json_t *line) {
  char *text = line ? json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
  if (text) rundir_append(m->rd, m->f, RUNDIR_METRICS, text, strlen(text));
  else rundir_lost(m->rd, "a " RUNDIR_METRICS " line: out of memory");
  free(text);
  json_decref(line);
}

/* Seconds to the millisecond: the lines stay short, and a reader plots
 * against the step. */
static json_t *seconds(double t) { return num(round(t * 1e3) / 1e3); }

void metrics_step_line(metrics *m, const metrics_step *s) {
  if (!m->f) return;
  json_t *o = json_pack("{s:o, s:I, s:I}", "time", seconds(s->time), "step", (json_int_t)s->step,
                        "epoch", (json_int_t)s->epoch);
  bool ok = o && (!s->node || json_object_set_new(o, "node", json_string(s->node)) == 0) &&
            json_object_set_new(o, "loss", num(s->loss)) == 0 &&
            json_object_set_new(o, "accuracy", num(s->accuracy)) == 0 &&
            (s->examples < 0 ||
             json_object_set_new(o, "examples", json_integer((json_int_t)s->examples)) == 0) &&
            set_known(o, "lr", s->lr) && set_known(o, "grad_norm", s->grad_norm);
  if (!ok) json_decref(o);
  append(m, ok ? o : NULL);
}

void metrics_eval_line(metrics *m, double time, int64_t step, const train_eval *e,
                       unsigned which) {
  if (!m->f) return;
  json_t *o = json_pack("{s:o, s:I, s:o, s:o}", "time", seconds(time), "step", (json_int_t)step,
                        "eval_loss", num(e->loss), "eval_accuracy", num(e->accuracy));
  bool ok = o && (!(which & BINEVAL_AUC) || json_object_set_new(o, "eval_auc", num(e->auc)) == 0) &&
            (!(which & BINEVAL_LOGLOSS) ||
             json_object_set_new(o, "eval_logloss", num(e->logloss)) == 0);
  if (!ok) json_decref(o);
  append(m, ok ? o : NULL);
}

void metrics_workers_line(metrics *m, double time, int64_t step, int workers) {
  if (!m->f) return;
  append(m, json_pack("{s:o, s:I, s:i}", "time", seconds(time), "step", (json_int_t)step,
                      "workers", workers));
}

void metrics_eval_events(events_writer *w, int64_t step, const train_eval *e, unsigned which) {
  events_run_scalar(w, "eval/loss", step, e->loss);
  events_run_scalar(w, "eval/accuracy", step, e->accuracy);
  if (which & BINEVAL_AUC) events_run_scalar(w, "eval/auc", step, e->auc);
  if (which & BINEVAL_LOGLOSS) events_run_scalar(w, "eval/logloss", step, e->logloss);
}

void metrics_flush(metrics *m) {
  if (m->f) fflush(m->f);
}

void metrics_close(metrics *m) {
  if (m->f) fclose(m->f);
  m->f = NULL;
}

/* ============================== reading ================================== */

bool metrics_series(const char *key, const json_t *v, double *value) {
  static const char *const place[] = {"time", "step", "epoch", "node", "examples"};
  for (size_t i = 0; i < sizeof place / sizeof *place; i++)
    if (strcmp(key, place[i]) == 0) return false;
  if (!json_is_number(v) && !json_is_null(v)) return false;
  *value = json_is_number(v) ? json_number_value(v) : NAN;
  return true;
}

const char *metrics_tag(const char *key) {
  static const char *const tags[][2] = {
      {"loss", "train/loss"},       {"accuracy", "train/accuracy"},
      {"lr", "train/learning_rate"}, {"grad_norm", "train/grad_norm"},
      {"eval_loss", "eval/loss"},   {"eval_accuracy", "eval/accuracy"},
      {"eval_auc", "eval/auc"},     {"eval_logloss", "eval/logloss"},
      {"workers", "cluster/workers"}};
  for (size_t i = 0; i < sizeof tags / sizeof *tags; i++)
    if (strcmp(key, tags[i][0]) == 0) return tags[i][1];
  return key;
}
