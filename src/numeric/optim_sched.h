/* optim_sched.h - learning-rate schedules as pure functions of the step,
 * PyTorch's formulas, plus ReduceLROnPlateau's small state.
 *
 * A schedule is an optional linear warmup followed by one main schedule:
 *   CONST      lr
 *   STEP       lr * gamma^floor(k / step_size)                  (StepLR)
 *   MULTISTEP  lr * gamma^(milestones <= k)                     (MultiStepLR)
 *   COSINE     eta_min + (lr - eta_min) * (1 + cos(pi * k / T_max)) / 2,
 *              held at eta_min after T_max           (CosineAnnealingLR)
 *   PLATEAU    lr * scale, scale multiplied by `factor` when the watched
 *              eval metric has not improved for `patience` evals, never
 *              below min_lr                          (ReduceLROnPlateau)
 * k counts the optimizer updates done before the one being computed (the
 * first update uses k = 0), so "steps" are updates, not epochs. During a
 * warmup of W steps the factor goes linearly from start_factor to 1
 * (LinearLR), and the main schedule then sees k - W (SequentialLR).
 *
 * The struct is plain data (no pointers): it is copied into an optim_cfg.
 */
#ifndef DROVER_OPTIM_SCHED_H
#define DROVER_OPTIM_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum optim_sched_kind {
  OSCHED_CONST = 0, /* zero-initialised configs have no schedule */
  OSCHED_STEP,
  OSCHED_MULTISTEP,
  OSCHED_COSINE,
  OSCHED_PLATEAU
} optim_sched_kind;

#define OSCHED_MAX_MILESTONES 16

/* The metric a plateau schedule or early stopping watches. AUC (higher is
 * better) and log loss (lower is better) exist when the eval computes
 * them (eval = { metrics = { "auc", "logloss" } }): a fit watching one it
 * does not compute is refused before it starts. */
typedef enum optim_metric {
  OMETRIC_EVAL_LOSS,
  OMETRIC_EVAL_ACCURACY,
  OMETRIC_EVAL_AUC,
  OMETRIC_EVAL_LOGLOSS
} optim_metric;

typedef struct optim_sched {
  optim_sched_kind kind;
  int64_t warmup;        /* steps of linear warmup first; 0 for none */
  float start_factor;    /* warmup's factor at k = 0, in (0, 1] */
  int64_t step_size;     /* STEP */
  float gamma;           /* STEP, MULTISTEP */
  int nmilestones;       /* MULTISTEP: increasing steps */
  int64_t milestones[OSCHED_MAX_MILESTONES];
  int64_t t_max;         /* COSINE */
  float eta_min;         /* COSINE */
  optim_metric metric;   /* PLATEAU */
  bool maximize;         /* PLATEAU: mode "max" */
  float factor;          /* PLATEAU, in (0, 1) */
  int64_t patience;      /* PLATEAU: evals without improvement tolerated */
  float threshold;       /* PLATEAU: relative improvement that counts */
  float min_lr;          /* PLATEAU */
} optim_sched;

/* ReduceLROnPlateau's state; zero it before the first observation. */
typedef struct optim_plateau {
  double scale;  /* multiplies lr; 0 means 1 (not yet reduced) */
  double best;
  int64_t bad;   /* evals since the best */
  bool seen;     /* best is set */
} optim_plateau;

/* The state as text for checkpoints ("%a %a %lld %d": scale, best, bad,
 * seen; hexadecimal floats, so it reads back bit for bit) into buf (n
 * bytes), and back: false when s is not such a text (*p untouched). */
void optim_plateau_format(const optim_plateau *p, char *buf, size_t n);
bool optim_plateau_parse(const char *s, optim_plateau *p);

/* Whether s changes the rate at all (a warmup or a non-CONST kind). */
bool optim_sched_active(const optim_sched *s);
/* Ranges (step_size > 0, increasing milestones, 0 < factor < 1...);
 * DRV_EINVAL naming the schedule and field. */
int optim_sched_check(const optim_sched *s);
/* The rate of the update after k earlier ones, from the base rate `lr`.
 * `pl` may be NULL (plateau scale 1). */
double optim_sched_lr(const optim_sched *s, double lr, int64_t k, const optim_plateau *pl);
/* Feeds one eval's metric value to a PLATEAU schedule; returns 1 when it
 * reduced the rate, else 0. NaN values are ignored. */
int optim_plateau_observe(const optim_sched *s, optim_plateau *pl, double lr, double value);
/* "optim.schedule.cosine { T_max = 1000 }" (a warmup wraps the main one:
 * "optim.schedule.warmup { steps = 100, after = ... }"). Like snprintf. */
int optim_sched_describe(const optim_sched *s, char *buf, size_t n);
/* "eval_loss", "eval_accuracy", "eval_auc", "eval_logloss"; and back (-1
 * when unknown). optim_metric_maximize: whether higher is better (the
 * default mode). */
const char *optim_metric_name(optim_metric m);
int optim_metric_from_name(const char *name);
bool optim_metric_maximize(optim_metric m);

#endif
