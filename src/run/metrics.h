/* metrics.h - a run's metrics.jsonl: its one writer, its schema, and the
 * rule its readers (the dashboard on a finished run, `drover
 * export-metrics`) share for which members are series.
 *
 * One JSON object per line, written whole or not at all (rundir_append),
 * appended as the run goes; a resumed run appends to the same file.
 *
 * A train step, in process (fitrun.c) after every step and on a cluster
 * (coord_fit.c) as each step's result arrives:
 *   time       number   seconds since the fit began, to the millisecond
 *   step       integer  train steps done in this fit (1 for the first)
 *   epoch      integer  the step's epoch, from 1
 *   node       string   the node that ran the step ("worker:1"; cluster)
 *   loss       number   the loss of the step's batch alone (not a running
 *                       mean: readers smooth it, as TensorBoard does)
 *   accuracy   number   the step's batch's accuracy; null where it does not
 *                       apply (regression)
 *   examples   integer  the step's batch size (cluster)
 *   lr         number   the learning rate of the step, when known
 *   grad_norm  number   the gradient's norm before clipping, when computed
 *                       (in process)
 * An evaluation, after the step it follows:
 *   time, step, eval_loss, eval_accuracy (null where it does not apply),
 *   and with an experiment's eval.metrics: eval_auc, eval_logloss (null
 *   when not defined: an eval set of one class has no AUC)
 * A cluster fit's trainer count, at its start and after each change of
 * membership (c:scale, a lost worker), at the step it took effect:
 *   time, step, workers (integer; TensorBoard tag cluster/workers)
 * A value JSON cannot hold (NaN, an infinity) is null: a diverged loss
 * never writes a bare `nan`. Members that are absent are unknown.
 *
 * Readers: time, step, epoch, node and examples place a line; every other
 * member whose value is a number or null is a point of the series of its
 * name (metrics_series). Older files (before this schema: an in-process
 * time to the nanosecond, a cluster's lines without epoch and accuracy,
 * an in-process loss and accuracy that were the epoch's mean so far)
 * read the same way.
 */
#ifndef DROVER_METRICS_H
#define DROVER_METRICS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/rundir.h"
#include "run/events.h"
#include "train/train.h"

typedef struct metrics {
  rundir *rd; /* borrowed */
  FILE *f;    /* NULL: lines are dropped (the open failure was counted) */
} metrics;

/* A train step's line. NAN for a number not known (accuracy null, lr and
 * grad_norm left out); node NULL and examples < 0 leave them out. */
typedef struct metrics_step {
  double time;
  int64_t step, epoch;
  const char *node;
  double loss, accuracy;
  int64_t examples;
  double lr, grad_norm;
} metrics_step;

/* Opens rd's metrics.jsonl for appending. A failure is counted as a lost
 * record (rundir_lost) and leaves m dropping its lines: training goes on. */
void metrics_open(metrics *m, rundir *rd);
/* Appends one line; a line that cannot be made or written is lost. */
void metrics_step_line(metrics *m, const metrics_step *s);
/* An evaluation's line: e's loss and accuracy, and its auc and logloss
 * when `which` (BINEVAL_* bits) asked for them. */
void metrics_eval_line(metrics *m, double time, int64_t step, const train_eval *e,
                       unsigned which);
/* The same eval as TensorBoard scalars (eval/loss, eval/accuracy,
 * eval/auc, eval/logloss; a NaN skipped). w NULL is fine. */
void metrics_eval_events(events_writer *w, int64_t step, const train_eval *e, unsigned which);
/* A cluster fit's trainer count at `step` (0: its start). */
void metrics_workers_line(metrics *m, double time, int64_t step, int workers);
void metrics_flush(metrics *m);
void metrics_close(metrics *m);

/* The readers' rule: whether member `key` of a line is a point of a series,
 * with its value in *value (NAN for null). */
bool metrics_series(const char *key, const json_t *v, double *value);
/* The tag of series `key` on the dashboard and in TensorBoard: "loss" ->
 * "train/loss", "eval_accuracy" -> "eval/accuracy", "eval_auc" -> "eval/auc", "lr" ->
 * "train/learning_rate", "workers" -> "cluster/workers"...; a key it does not know, as it is. */
const char *metrics_tag(const char *key);

#endif
