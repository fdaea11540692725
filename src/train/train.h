/* train.h - the in-process training loop: steps, epochs, evaluation,
 * progress reporting.
 *
 * train_step() is the unit a worker runs (forward, loss, backward into the
 * model's grad buffers); train_fit() drives epochs of steps with an
 * optimizer in this process; train_evaluate() measures a dataset. All math
 * runs in C; callers (Lua bindings, later the worker role) only configure.
 * train_fit() polls err_interrupted() between steps and returns
 * DRV_EINTERRUPTED when asked to stop (the model keeps what it learnt).
 */
#ifndef DROVER_TRAIN_H
#define DROVER_TRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data/data.h"
#include "numeric/nn.h"
#include "numeric/optim.h"

/* An evaluation's numbers: auc and logloss NAN unless asked for (and the
 * AUC NAN when the set holds one class only: bineval.h). */
typedef struct train_eval {
  double loss, accuracy, auc, logloss;
} train_eval;

/* What a progress or eval callback sees. */
typedef struct train_progress {
  int64_t step, total_steps;   /* steps done so far, planned */
  int64_t epoch, epochs;       /* 1-based current epoch */
  double loss;                 /* mean training loss of the current epoch so far */
  double accuracy;             /* same for accuracy; NAN when it does not apply */
  /* The last step's batch alone (NAN before a step; accuracy NAN when it
   * does not apply): the per-step records (metrics.jsonl, TensorBoard,
   * the dashboard) carry these, as a cluster's do; the progress line and
   * the result the epoch means above. */
  double batch_loss, batch_accuracy;
  double examples_per_sec;     /* since the start of fit */
  double elapsed, eta;         /* seconds */
  bool is_eval;                /* an eval just ran: eval_* are set */
  double eval_loss, eval_accuracy;
  unsigned metrics;    /* BINEVAL_* bits the evals compute (train_cfg.metrics) */
  double eval_auc, eval_logloss; /* NAN unless metrics asks (bineval.h) */
  /* Sync cluster training (0 otherwise): the global step (updates the ps
   * applied, estimated until the fit ends) against its target, and the
   * epoch the data has reached through them. Progress lines show these:
   * `step` counts train steps run, backups and dropped gradients too. */
  int64_t global_step, global_steps, global_epoch;
  double lr;                   /* the rate of the last step; NAN when unknown */
  double grad_norm;            /* its gradient norm before clipping; NAN when not computed */
} train_progress;

/* Where a fit stands between two steps. With the model's parameters and
 * the optimizer's slots and count, it is all a resumed fit needs to go on
 * exactly as the interrupted one would have (checkpoints keep it). */
/* Early stopping's bookkeeping (best value, its step, evals without
 * improvement): part of a position, so a resumed fit stops where the
 * interrupted one would have. */
typedef struct train_stopper {
  double best;
  int64_t best_step, bad;
  bool seen;
} train_stopper;

typedef struct train_position {
  int64_t step;        /* training steps done */
  int64_t epoch;       /* 1-based epoch of the last step (0 before the first) */
  int64_t data_pos;    /* examples of that epoch consumed */
  double epoch_loss;   /* the epoch's running sums: the reported loss */
  int64_t epoch_seen, epoch_correct;
  bool epoch_has_acc;
  double eval_loss, eval_accuracy; /* of the last eval; NAN before one */
  double eval_auc, eval_logloss;    /* NAN unless its evals compute them */
  train_stopper stop;  /* early stopping's state */
} train_position;

/* Early stopping: the fit ends once the watched eval metric has not
 * improved (strictly, by more than min_delta) for `patience` evals in a
 * row. Needs periodic evals (eval_every > 0). */
typedef struct train_stop {
  bool on;
  optim_metric metric;
  bool maximize;
  int64_t patience;    /* >= 0 */
  double min_delta;    /* >= 0 */
} train_stop;

typedef struct train_cfg {
  int64_t batch;        /* > 0 */
  int64_t epochs;       /* > 0 */
  bool shuffle;
  uint64_t seed;        /* shuffling seed */
  int64_t max_steps;    /* 0 = no limit */
  /* a cluster's sync fit scaled (c:scale, a lost worker with min): the
   * shards of the new count begin at the next global step, not at the end
   * of the trainers' epoch (train.reshard = "step") */
  bool reshard_step;
  const dataset *eval;  /* may be NULL */
  int64_t eval_every;   /* steps between evals; 0 = at the end only */
  train_stop stop;      /* early stopping; .on false for none */
  unsigned metrics;     /* BINEVAL_* bits: what evals compute beyond loss and accuracy */
  /* Progress output: NULL for none, else lines (or a one-line bar with \r
   * when `progress_tty`) written to this stream about every 0.25 s on a TTY,
   * every 5 s otherwise, and once at the end. */
  FILE *progress;
  bool progress_tty;
  /* Called after every training step and every eval; may be NULL. Cheap
   * callers throttle themselves. A non-zero return stops training
   * (train_fit returns it) and skips the final evaluation. */
  int (*on_progress)(void *ud, const train_progress *p);
  void *ud;
  /* Called at the end of every step, after its progress call and its
   * eval (so the position and the model agree, and the eval is the
   * step's): where checkpoints are taken. May be NULL; non-zero stops. */
  int (*on_step_end)(void *ud, const train_position *pos);
  /* NULL, or where to start: a resume from a checkpoint whose parameters
   * and optimizer state the caller has restored. Borrowed for the call. */
  const train_position *resume;
} train_cfg;

typedef struct train_result {
  int64_t steps;
  int64_t epochs;
  double loss;             /* mean training loss over the last epoch */
  double accuracy;         /* mean training accuracy over the last epoch, or NAN */
  double eval_loss;        /* on cfg->eval at the end, NAN without eval */
  double eval_accuracy;    /* NAN without eval or when it does not apply */
  unsigned metrics;        /* cfg->metrics: which of the two below were asked for */
  double eval_auc, eval_logloss; /* NAN unless asked, or the AUC of one class */
  double examples_per_sec; /* training examples / wall seconds of the steps */
  double seconds;
  bool stopped_early;      /* cfg->stop ended the fit */
  int64_t best_step;       /* with stop: the step of the best eval */
  double best_metric;      /* and its value */
  bool stopped;            /* the progress callback asked to stop */
} train_result;

/* p's eval as a train_eval. */
train_eval train_progress_eval(const train_progress *p);

/* r before a fit: nothing done, every metric NAN. */
void train_result_init(train_result *r);
/* The result of a finished fit from where it ended: its last progress p,
 * its early stopping state st, whether that (stopped_early) or the
 * progress callback (stopped) ended it. Both fit loops (train_fit here,
 * coord_fit on a cluster) end with it, so both report alike. */
void train_result_fill(train_result *r, const train_progress *p, const train_stopper *st,
                       bool stopped_early, bool stopped);

/* One training step on a batch: forward, loss, backward (gradients
 * accumulate into the model's grad buffers; zeroing is the caller's). Sets
 * *loss and, when `correct` is not NULL, the number of correct predictions
 * (-1 when accuracy does not apply). */
int train_step(nn_module *model, nn_loss *loss, const tensor *x, const tensor *y,
               float *loss_out, int64_t *correct);

/* Returns 0 when the plan is done or cfg->stop ended it early (res says
 * which), a callback's non-zero value, or a negative code. */
int train_fit(nn_module *model, nn_loss *loss, optim_t *opt, const dataset *train,
              const train_cfg *cfg, train_result *res);

/* The stopper as checkpoint metadata ("%a %lld %lld %d": best, its step,
 * bad evals, seen) and back; parse returns false for a missing or
 * malformed value (the state then starts afresh). */
void train_stopper_format(const train_stopper *s, char *buf, size_t n);
bool train_stopper_parse(const char *s, train_stopper *out);
/* Feeds one eval's metrics to early stopping; true when the fit should
 * stop. */
bool train_stop_observe(const train_stop *s, train_stopper *st, int64_t step, const train_eval *e);
/* The value of metric m in e (NAN when the eval did not compute it). */
double train_eval_value(const train_eval *e, optim_metric m);

/* Mean loss and accuracy (NAN when it does not apply) of the model on d in
 * evaluation mode (dropout off), in batches of `batch`. */
int train_evaluate(nn_module *model, nn_loss *loss, const dataset *d, int64_t batch,
                   double *loss_out, double *accuracy_out);

/* train_evaluate, and the whole set's AUC and log loss when `metrics`
 * (BINEVAL_* bits) asks: refused (a negative code) for a model that is
 * not a binary classifier. */
int train_evaluate_metrics(nn_module *model, nn_loss *loss, const dataset *d, int64_t batch,
                           unsigned metrics, train_eval *out);

/* Forward passes of model (in evaluation mode) over the rows of x in
 * batches of `batch`: *out a new [n, k] tensor (the caller's), one row per
 * input row, in order. sp (NULL: none) is the rows' ids (sp->rows == n),
 * handed to the model batch by batch (nn_set_sparse). */
int train_predict(nn_module *model, const tensor *x, const nn_sparse *sp, int64_t batch,
                  tensor **out);

#endif
