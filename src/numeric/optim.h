/* optim.h - optimizers as pure updates over flat float arrays.
 *
 * The core is optim_update(): one update of `n` parameters from their
 * gradient and the optimizer's per-element state ("slots"), with PyTorch's
 * semantics and defaults. It knows nothing of models, so a parameter server
 * applies it to the shard of a variable it holds, with that shard's slots.
 * optim_t binds a config to a model's parameter list for in-process
 * training.
 *
 * Semantics (g = gradient, p = parameter, t = 1-based update count):
 *   SGD      g += wd*p; with momentum: b = g at t == 1, else
 *            b = mom*b + (1-dampening)*g; g = nesterov ? g + mom*b : b;
 *            p -= lr*g.                          slots: 1 if momentum > 0
 *   Adam     g += wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 *            p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps).   slots: 2
 *   AdamW    p *= 1 - lr*wd; then Adam without the g += wd*p.     slots: 2
 *   Adagrad  clr = lr / (1 + (t-1)*lr_decay); g += wd*p; s += g^2;
 *            p -= clr * g / (sqrt(s) + eps).     slots: 1 (starts at
 *            initial_accumulator)
 *   RMSprop  g += wd*p; v = alpha*v + (1-alpha)*g^2; with momentum:
 *            b = mom*b + g/(sqrt(v)+eps), p -= lr*b; else
 *            p -= lr*g/(sqrt(v)+eps).            slots: 1, 2 with momentum
 *   FTRL     FTRL-Proximal (McMahan et al. 2013, per coordinate), lr = alpha:
 *            s = (sqrt(n + g^2) - sqrt(n)) / lr; z += g - s*p; n += g^2;
 *            p = |z| <= l1 ? 0 : -(z - sign(z)*l1) / ((beta + sqrt(n))/lr + l2).
 *            slots: 2 (z, then n, which starts at initial_accumulator)
 */
#ifndef DROVER_OPTIM_H
#define DROVER_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "numeric/nn.h"
#include "numeric/nn_sparse.h"
#include "numeric/optim_sched.h"

typedef enum optim_kind {
  OPTIM_SGD,
  OPTIM_ADAM,
  OPTIM_ADAMW,
  OPTIM_ADAGRAD,
  OPTIM_RMSPROP,
  OPTIM_FTRL
} optim_kind;

#define OPTIM_MAX_SLOTS 2

typedef struct optim_cfg {
  optim_kind kind;
  float lr;
  float momentum, dampening, weight_decay; /* SGD, RMSprop (momentum, wd) */
  bool nesterov;
  float beta1, beta2, eps;                 /* Adam, AdamW; eps also Adagrad/RMSprop */
  float alpha;                             /* RMSprop smoothing */
  float lr_decay, initial_accumulator;     /* Adagrad; initial_accumulator also FTRL's n */
  float beta, l1, l2;                      /* FTRL */
  /* In-process training only (the wire does not carry them; a cluster
   * fit refuses a config that sets them): */
  optim_sched sched;                       /* lr(step); zeroed: constant */
  float clip_norm;                         /* > 0: clip the global gradient norm */
} optim_cfg;

/* Fills c with PyTorch's defaults for `kind` (SGD lr 0.01 here, since
 * PyTorch has none; Adam lr 1e-3, betas 0.9/0.999, eps 1e-8; AdamW wd 0.01;
 * Adagrad lr 0.01, eps 1e-10; RMSprop lr 0.01, alpha 0.99, eps 1e-8). */
void optim_cfg_default(optim_cfg *c, optim_kind kind);
/* Checks ranges (lr >= 0, 0 <= betas < 1, nesterov needs momentum > 0 and
 * dampening 0, ...); DRV_EINVAL with a message naming the field. */
int optim_cfg_check(const optim_cfg *c);
/* "SGD", "Adam", ...; and the reverse (case-sensitive), -1 when unknown. */
const char *optim_kind_name(optim_kind k);
int optim_kind_from_name(const char *name);
/* Writes "optim.SGD { lr = 0.1, momentum = 0.9 }" (non-default fields). */
int optim_describe(const optim_cfg *c, char *buf, size_t n);

/* Number of slot arrays (each n floats, zero- or accumulator-initialised by
 * optim_slots_init) that `c` needs per parameter. */
int optim_nslots(const optim_cfg *c);
void optim_slots_init(const optim_cfg *c, float **slots, size_t n);
/* One update of p[0..n) from g[0..n). `t` is this update's 1-based count
 * for these parameters. g is not modified. */
void optim_update(const optim_cfg *c, float *p, const float *g, float **slots,
                  size_t n, int64_t t);

/* ---- binding to a model for in-process training ------------------------ */

typedef struct optim optim_t;

/* Binds cfg to the parameters in `params` (borrowed: the list and its
 * tensors must outlive the optimizer). Allocates zeroed slots. */
optim_t *optim_new(const optim_cfg *cfg, const nn_param_list *params);
/* Binds the model's sparse tables too (nn_collect_tables; borrowed like
 * the parameters). Each step then updates, after the dense parameters,
 * only the rows in each table's sparse gradient, one row at a time with
 * optim_update over its dim floats, its own slot rows and its own update
 * count t (lazy: an untouched row and its state do not change, so weight
 * decay reaches a row only when it is touched). That is PyTorch's
 * SparseAdam for Adam, and the dense update itself on the touched rows for
 * SGD without momentum and Adagrad without lr_decay (whose rate follows
 * the row's count here, the global step in PyTorch). Clipping scales the
 * dense and the sparse gradients together by their joint norm. Resets the
 * tables' slots and counts; DRV_ENOMEM. */
int optim_bind_tables(optim_t *o, const nn_table_list *tables);
/* The lazy update of n rows of table t, whose slots sptable_set_slots
 * gave for c: row ids[r] (created on first touch) gets optim_update from
 * rows[r * dim ..], with its own slot rows and its own count, which goes
 * up by one. What each step does for a bound table, and what a ps is to
 * do for a SPARSE_PUSH (one code path, so both stay bit-identical).
 * DRV_ERANGE for an id past the declared rows (rows before it are
 * updated), DRV_ENOMEM. */
int optim_table_update(const optim_cfg *c, sptable *t, const uint64_t *ids, const float *rows,
                       int64_t n);
/* Applies one update to every parameter from its grad buffer, at the
 * rate the schedule gives for this step, after scaling every gradient by
 * min(1, clip_norm / (norm + 1e-6)) when clip_norm > 0, where norm is the
 * L2 norm of all the gradients together (torch.nn.utils.clip_grad_norm_). */
int optim_step(optim_t *o);
/* The same, then zeroes each grad buffer (the next step's nn_zero_grad,
 * done while the gradient is in cache). The training loop uses it. */
int optim_step_zero_grad(optim_t *o);
int64_t optim_steps(const optim_t *o);
/* The rate the next update will use (the schedule at this step). */
double optim_lr(const optim_t *o);
/* Scales every gradient of l and every row gradient of the tables t (may
 * be NULL) by min(1, max_norm / (norm + 1e-6)), norm being their global L2
 * norm (clip_grad_norm_), and returns that norm. Workers of a cluster fit
 * clip this way before they push: a worker holds its step's whole
 * gradient, dense and rows. */
double optim_clip_grads(const nn_param_list *l, const nn_table_list *t, double max_norm);
/* The global gradient norm of the last update, before clipping (NAN
 * before the first update or when clip_norm is 0: it is not computed). */
double optim_grad_norm(const optim_t *o);
/* After an evaluation: feeds the value of the metric its plateau schedule
 * watches (optim_config(o)->sched.metric: the caller picks it from the
 * eval's results). Returns 1 when the rate was reduced; 0 without a
 * plateau schedule or for a NaN value (a metric the eval did not
 * compute). The rate applies to the dense updates and to every table's
 * row updates alike. */
int optim_observe(optim_t *o, double value);
/* A plateau schedule's state (owned by o), and its restore: checkpoints
 * keep it with the update count, or a resume would restart at full rate. */
const optim_plateau *optim_plateau_state(const optim_t *o);
void optim_set_plateau(optim_t *o, const optim_plateau *p);
const optim_cfg *optim_config(const optim_t *o);
void optim_free(optim_t *o);

/* ---- state, for checkpoints ---------------------------------------------- */

/* Slot s (0 .. optim_nslots(optim_config(o)) - 1) of parameter i (in the
 * order of the list optim_new was given): as many floats as the
 * parameter, owned by o. NULL when i or s is out of range. A checkpoint
 * reads them; a resume writes them back. */
float *optim_slot(optim_t *o, int i, int s);
/* Sets the update count (what the next update's t is one more than): a
 * resume restores it with the slots, or Adam's bias correction restarts. */
void optim_set_steps(optim_t *o, int64_t steps);

#endif
