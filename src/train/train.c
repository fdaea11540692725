/* train.c - the in-process training loop: steps, epochs, periodic
 * evaluation, and progress output (a redrawn one-line bar on a terminal,
 * plain periodic lines otherwise).
 *
 * Callback cadence (train_cfg.on_progress): after every training step
 * (is_eval false) and after every evaluation, periodic or final (is_eval
 * true). The last step's call and the final evaluation's call are the "end"
 * calls. Printing is throttled separately (0.25 s on a TTY, 5 s otherwise,
 * and always once at the end), so a callback sees every step even when the
 * console does not.
 */
#include "train/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "train/bineval.h"
#include "train/progress.h"

#define now_sec progress_now

/* ---- steps and evaluation ------------------------------------------------ */

int train_step(nn_module *model, nn_loss *loss, const tensor *x, const tensor *y,
               float *loss_out, int64_t *correct) {
  const tensor *out, *dout;
  int rc;
  if ((rc = nn_forward(model, x, &out)) < 0) return rc;
  if ((rc = nn_loss_forward(loss, out, y, loss_out)) < 0) return rc;
  if (correct) *correct = nn_loss_correct(loss, out, y);
  if ((rc = nn_loss_backward(loss, out, y, &dout)) < 0) return rc;
  /* dx == NULL: nothing upstream of the model needs an input gradient. */
  return nn_backward(model, x, dout, NULL);
}

/* The whole set's AUC and log loss from the scores gathered. */
static void evaluate_binary(bineval *b, unsigned metrics, train_eval *out) {
  if (metrics & BINEVAL_LOGLOSS) out->logloss = bineval_logloss(b);
  if (metrics & BINEVAL_AUC) out->auc = bineval_auc(b);
}

/* Evaluation with the model already in eval mode. */
static int evaluate_batches(nn_module *model, nn_loss *loss, const dataset *d,
                            int64_t batch, unsigned metrics, train_eval *res) {
  data_iter it;
  int rc = data_iter_init(&it, d, batch, false, 0);
  if (rc < 0) return rc;
  double sum = 0;
  int64_t seen = 0, correct = 0;
  bool has_acc = true;
  bineval scores = {0};
  const tensor *x, *y, *out;
  while ((rc = data_iter_next(&it, &x, &y)) > 0) {
    if (err_interrupted()) {
      rc = err_set(DRV_EINTERRUPTED, "evaluation interrupted");
      break;
    }
    float l;
    nn_set_sparse(model, data_iter_sparse(&it));
    if ((rc = nn_forward(model, x, &out)) < 0) break;
    if ((rc = nn_loss_forward(loss, out, y, &l)) < 0) break;
    if (metrics && (rc = bineval_add(&scores, loss, out, y)) < 0) break;
    int64_t c = nn_loss_correct(loss, out, y);
    if (c < 0)
      has_acc = false;
    else
      correct += c;
    int64_t bs = x->shape[0];
    sum += (double)l * (double)bs;
    seen += bs;
  }
  nn_set_sparse(model, NULL); /* the batch's ids die with the iterator */
  data_iter_free(&it);
  if (rc == 0) {
    res->loss = sum / (double)seen;
    res->accuracy = has_acc ? (double)correct / (double)seen : NAN;
    evaluate_binary(&scores, metrics, res);
  }
  bineval_free(&scores);
  return rc;
}

int train_evaluate_metrics(nn_module *model, nn_loss *loss, const dataset *d, int64_t batch,
                           unsigned metrics, train_eval *out) {
  *out = (train_eval){NAN, NAN, NAN, NAN};
  if (!model || !loss || !d) return err_set(DRV_EINVAL, "evaluate: missing model, loss or data");
  if (batch <= 0)
    return err_set(DRV_EINVAL, "evaluate: batch must be > 0 (got %lld)", (long long)batch);
  if (d->n <= 0) return err_set(DRV_EINVAL, "evaluate: dataset %s is empty", d->source);
  /* A lazy dataset is filled in place on first use: what it holds, as
   * seen through const, does not change. */
  int rc = data_load((dataset *)d);
  if (rc < 0) return rc;
  bool was = model->training;
  nn_set_training(model, false);
  rc = evaluate_batches(model, loss, d, batch, metrics, out);
  nn_set_training(model, was);
  return rc;
}

int train_evaluate(nn_module *model, nn_loss *loss, const dataset *d, int64_t batch,
                   double *loss_out, double *accuracy_out) {
  train_eval e;
  int rc = train_evaluate_metrics(model, loss, d, batch, 0, &e);
  if (rc < 0) return rc;
  *loss_out = e.loss;
  *accuracy_out = e.accuracy;
  return 0;
}

/* ---- the fit loop ---------------------------------------------------------- */

typedef struct fit {
  nn_module *model;
  nn_loss *loss;
  optim_t *opt;
  const train_cfg *cfg;
  train_progress p;
  double t0;
  double eval_secs;     /* wall time spent evaluating, kept out of throughput */
  progress out;         /* progress output */
  int64_t examples;     /* training examples consumed */
  double epoch_loss;    /* sum of loss * batch size in this epoch */
  int64_t epoch_seen, epoch_correct;
  bool epoch_has_acc;
  train_stopper stopper;
  bool stopped_early;
  bool stopped; /* the progress callback asked to stop */
} fit;

static void fit_update_times(fit *f) {
  train_progress *p = &f->p;
  p->elapsed = now_sec() - f->t0;
  double train_secs = p->elapsed - f->eval_secs;
  p->examples_per_sec = train_secs > 0 ? (double)f->examples / train_secs : 0;
  p->eta = p->step > 0 ? train_secs / (double)p->step * (double)(p->total_steps - p->step) : 0;
}

static void fit_print(fit *f, bool force) { progress_step(&f->out, &f->p, force); }

static int fit_eval(fit *f) {
  const train_cfg *cfg = f->cfg;
  double t = now_sec();
  train_eval e;
  int rc = train_evaluate_metrics(f->model, f->loss, cfg->eval, cfg->batch, cfg->metrics, &e);
  f->eval_secs += now_sec() - t;
  if (rc < 0) return rc;
  f->p.eval_loss = e.loss, f->p.eval_accuracy = e.accuracy;
  f->p.eval_auc = e.auc, f->p.eval_logloss = e.logloss;
  progress_eval(&f->out, &f->p);
  fit_update_times(f);
  optim_observe(f->opt, train_eval_value(&e, optim_config(f->opt)->sched.metric));
  if (cfg->on_progress) {
    f->p.is_eval = true;
    rc = cfg->on_progress(cfg->ud, &f->p);
    f->p.is_eval = false;
    if (rc != 0) {
      f->stopped = true;
      return rc;
    }
  }
  if (train_stop_observe(&cfg->stop, &f->stopper, f->p.step, &e)) f->stopped_early = true;
  return 0;
}

double train_eval_value(const train_eval *e, optim_metric m) {
  switch (m) {
  case OMETRIC_EVAL_ACCURACY: return e->accuracy;
  case OMETRIC_EVAL_AUC: return e->auc;
  case OMETRIC_EVAL_LOGLOSS: return e->logloss;
  case OMETRIC_EVAL_LOSS: break;
  }
  return e->loss;
}

bool train_stop_observe(const train_stop *s, train_stopper *st, int64_t step, const train_eval *e) {
  if (!s->on) return false;
  double v = train_eval_value(e, s->metric);
  if (isnan(v)) return false;
  if (!st->seen || (s->maximize ? v > st->best + s->min_delta : v < st->best - s->min_delta)) {
    st->best = v, st->best_step = step, st->bad = 0, st->seen = true;
    return false;
  }
  return ++st->bad > s->patience;
}

void train_stopper_format(const train_stopper *s, char *buf, size_t n) {
  snprintf(buf, n, "%a %lld %lld %d", s->best, (long long)s->best_step, (long long)s->bad,
           s->seen ? 1 : 0);
}

bool train_stopper_parse(const char *s, train_stopper *out) {
  double best;
  long long step, bad;
  int seen;
  if (!s || sscanf(s, "%la %lld %lld %d", &best, &step, &bad, &seen) != 4 || bad < 0) return false;
  *out = (train_stopper){best, step, bad, seen != 0};
  return true;
}

static void fit_epoch_begin(fit *f, int64_t epoch) {
  f->p.epoch = epoch;
  f->epoch_loss = 0;
  f->epoch_seen = f->epoch_correct = 0;
  f->epoch_has_acc = true;
}

/* One optimizer step on the iterator's next batch; 1 done, 0 epoch over. */
static int fit_one_step(fit *f, data_iter *it) {
  const tensor *x, *y;
  int rc = data_iter_next(it, &x, &y);
  if (rc <= 0) return rc;
  float l;
  int64_t correct;
  /* Gradients are zero here: fit_loop clears them once, and every step's
   * optimizer update clears them again while they are in cache. The id
   * layers read the batch's ids (NULL for a dense dataset) from the model. */
  nn_set_sparse(f->model, data_iter_sparse(it));
  if ((rc = train_step(f->model, f->loss, x, y, &l, &correct)) < 0) return rc;
  /* A non-finite loss poisons every parameter at the update: the fit
   * stops before it, naming the step, with the model as it was. */
  if (!isfinite(l)) {
    nn_zero_grad(f->model);
    return err_set(DRV_ERANGE, "fit: the loss is %s at step %lld (epoch %lld); stopped before "
                   "the update (check the data and the learning rate)",
                   isnan(l) ? "NaN" : "infinite", (long long)f->p.step + 1,
                   (long long)f->p.epoch);
  }
  f->p.lr = optim_lr(f->opt);
  if ((rc = optim_step_zero_grad(f->opt)) < 0) return rc;
  f->p.grad_norm = optim_grad_norm(f->opt);
  int64_t bs = x->shape[0];
  f->p.step++;
  f->examples += bs;
  f->epoch_loss += (double)l * (double)bs;
  f->epoch_seen += bs;
  if (correct < 0)
    f->epoch_has_acc = false;
  else
    f->epoch_correct += correct;
  f->p.batch_loss = l;
  f->p.batch_accuracy = correct < 0 ? NAN : (double)correct / (double)bs;
  f->p.loss = f->epoch_loss / (double)f->epoch_seen;
  f->p.accuracy = f->epoch_has_acc ? (double)f->epoch_correct / (double)f->epoch_seen : NAN;
  fit_update_times(f);
  return 1;
}

/* The fit's position, for the on_step_end hook. */
static void fit_position(const fit *f, const data_iter *it, train_position *pos) {
  *pos = (train_position){.step = f->p.step, .epoch = f->p.epoch, .data_pos = it->pos,
                          .epoch_loss = f->epoch_loss,
                          .epoch_seen = f->epoch_seen, .epoch_correct = f->epoch_correct,
                          .epoch_has_acc = f->epoch_has_acc, .eval_loss = f->p.eval_loss,
                          .eval_accuracy = f->p.eval_accuracy, .eval_auc = f->p.eval_auc,
                          .eval_logloss = f->p.eval_logloss, .stop = f->stopper};
}

/* Puts the fit where `from` says, in its epoch `epoch`: the iterator, and
 * the sums the reported loss and accuracy come from. */
static int fit_resume_epoch(fit *f, data_iter *it, const train_position *from) {
  int rc = data_iter_seek(it, from->epoch - 1, from->data_pos);
  if (rc < 0) return rc;
  f->epoch_loss = from->epoch_loss;
  f->epoch_seen = from->epoch_seen;
  f->epoch_correct = from->epoch_correct;
  f->epoch_has_acc = from->epoch_has_acc;
  return 0;
}

/* The end of one step: progress, the periodic eval, the step-end hook. */
static int fit_step_done(fit *f, data_iter *it) {
  const train_cfg *cfg = f->cfg;
  int rc;
  fit_print(f, false);
  if (cfg->on_progress && (rc = cfg->on_progress(cfg->ud, &f->p)) != 0) {
    f->stopped = true;
    return rc;
  }
  if (cfg->eval && cfg->eval_every > 0 && f->p.step % cfg->eval_every == 0 &&
      (rc = fit_eval(f)) != 0)
    return rc;
  if (!cfg->on_step_end) return 0;
  train_position pos;
  fit_position(f, it, &pos);
  return cfg->on_step_end(cfg->ud, &pos);
}

/* Runs steps until the plan is done, an error, an interrupt or a stop
 * request from the callback; from cfg->resume's position when set. */
static int fit_loop(fit *f, data_iter *it) {
  const train_cfg *cfg = f->cfg;
  const train_position *from = cfg->resume && cfg->resume->epoch > 0 ? cfg->resume : NULL;
  nn_zero_grad(f->model);
  for (int64_t epoch = from ? from->epoch : 1;
       epoch <= cfg->epochs && f->p.step < f->p.total_steps; epoch++) {
    if (epoch > 1 && !from) data_iter_reset(it);
    fit_epoch_begin(f, epoch);
    if (from) {
      int rc = fit_resume_epoch(f, it, from);
      if (rc < 0) return rc;
      from = NULL;
    }
    while (f->p.step < f->p.total_steps) {
      if (err_interrupted())
        return err_set(DRV_EINTERRUPTED, "training interrupted at step %lld",
                       (long long)f->p.step);
      int rc = fit_one_step(f, it);
      if (rc < 0) return rc;
      if (rc == 0) break;
      if ((rc = fit_step_done(f, it)) != 0) return rc;
      if (f->stopped_early) return 0;
    }
  }
  return 0;
}

static int fit_check(nn_module *model, nn_loss *loss, optim_t *opt, const dataset *train,
                     const train_cfg *cfg) {
  if (!model || !loss || !opt || !train || !cfg)
    return err_set(DRV_EINVAL, "fit: missing model, loss, optimizer, data or config");
  if (cfg->batch <= 0)
    return err_set(DRV_EINVAL, "fit: batch must be > 0 (got %lld)", (long long)cfg->batch);
  if (cfg->epochs <= 0)
    return err_set(DRV_EINVAL, "fit: epochs must be > 0 (got %lld)", (long long)cfg->epochs);
  if (cfg->max_steps < 0)
    return err_set(DRV_EINVAL, "fit: max_steps must be >= 0 (got %lld)",
                   (long long)cfg->max_steps);
  if (cfg->eval_every < 0)
    return err_set(DRV_EINVAL, "fit: eval_every must be >= 0 (got %lld)",
                   (long long)cfg->eval_every);
  if (cfg->stop.on && (!cfg->eval || cfg->eval_every <= 0))
    return err_set(DRV_EINVAL, "fit: early stopping needs periodic evals (eval = { data = ..., "
                   "every = STEPS })");
  if (cfg->stop.on && (cfg->stop.patience < 0 || !(cfg->stop.min_delta >= 0)))
    return err_set(DRV_EINVAL, "fit: stop.patience and stop.min_delta must be >= 0");
  if (train->n <= 0) return err_set(DRV_EINVAL, "fit: dataset %s is empty", train->source);
  int64_t steps, per_epoch = (train->n + cfg->batch - 1) / cfg->batch;
  if (__builtin_mul_overflow(cfg->epochs, per_epoch, &steps))
    return err_set(DRV_EINVAL, "fit: %lld epochs of %lld steps are too many steps to count",
                   (long long)cfg->epochs, (long long)per_epoch);
  if (cfg->eval && cfg->eval->n <= 0)
    return err_set(DRV_EINVAL, "fit: eval dataset %s is empty", cfg->eval->source);
  /* Before the first step, not at the first eval. */
  if (cfg->metrics & BINEVAL_ALL) return bineval_check(loss, -1);
  return 0;
}

/* Final evaluation (unless the last step was just evaluated), last output
 * line, and the result. */
static int fit_finish(fit *f, int rc, train_result *res) {
  const train_cfg *cfg = f->cfg;
  bool evaluated_last = cfg->eval_every > 0 && f->p.step > 0 &&
                        f->p.step % cfg->eval_every == 0;
  if (rc == 0 && cfg->eval && !evaluated_last) rc = fit_eval(f);
  fit_update_times(f);
  fit_print(f, true);
  progress_end(&f->out);
  if (res) train_result_fill(res, &f->p, &f->stopper, f->stopped_early, f->stopped);
  return rc;
}

train_eval train_progress_eval(const train_progress *p) {
  return (train_eval){p->eval_loss, p->eval_accuracy, p->eval_auc, p->eval_logloss};
}

void train_result_init(train_result *r) {
  memset(r, 0, sizeof *r);
  r->loss = r->accuracy = r->eval_loss = r->eval_accuracy = r->best_metric = NAN;
  r->eval_auc = r->eval_logloss = NAN;
}

void train_result_fill(train_result *r, const train_progress *p, const train_stopper *st,
                       bool stopped_early, bool stopped) {
  train_result_init(r);
  r->steps = p->step;
  r->epochs = p->epoch;
  r->loss = p->loss;
  r->accuracy = p->accuracy;
  r->eval_loss = p->eval_loss;
  r->eval_accuracy = p->eval_accuracy;
  r->metrics = p->metrics;
  r->eval_auc = p->eval_auc;
  r->eval_logloss = p->eval_logloss;
  r->examples_per_sec = p->examples_per_sec;
  r->seconds = p->elapsed;
  r->stopped_early = stopped_early;
  r->best_step = st->seen ? st->best_step : 0;
  r->best_metric = st->seen ? st->best : NAN;
  r->stopped = stopped;
}

int train_fit(nn_module *model, nn_loss *loss, optim_t *opt, const dataset *train,
              const train_cfg *cfg, train_result *res) {
  if (res) train_result_init(res);
  /* Lazy datasets are filled in place on first use (see train_evaluate). */
  int rc = train ? data_load((dataset *)train) : 0;
  if (rc == 0 && cfg && cfg->eval) rc = data_load((dataset *)cfg->eval);
  if (rc == 0) rc = fit_check(model, loss, opt, train, cfg);
  if (rc < 0) return rc;
  fit f = {.model = model, .loss = loss, .opt = opt, .cfg = cfg};
  int64_t per_epoch = (train->n + cfg->batch - 1) / cfg->batch;
  f.p.total_steps = cfg->epochs * per_epoch;
  if (cfg->max_steps > 0 && cfg->max_steps < f.p.total_steps)
    f.p.total_steps = cfg->max_steps;
  f.p.epochs = cfg->epochs;
  f.p.loss = f.p.accuracy = f.p.eval_loss = f.p.eval_accuracy = NAN;
  f.p.eval_auc = f.p.eval_logloss = NAN;
  f.p.metrics = cfg->metrics;
  f.p.batch_loss = f.p.batch_accuracy = f.p.lr = f.p.grad_norm = NAN;
  /* The bar appears after the first step; plain lines only after 5 s. */
  progress_init(&f.out, cfg->progress, cfg->progress_tty);
  f.t0 = now_sec();
  if (cfg->resume) { /* the steps before it were counted by the first run */
    f.p.step = cfg->resume->step;
    f.p.eval_loss = cfg->resume->eval_loss;
    f.p.eval_accuracy = cfg->resume->eval_accuracy;
    f.p.eval_auc = cfg->resume->eval_auc;
    f.p.eval_logloss = cfg->resume->eval_logloss;
    f.stopper = cfg->resume->stop;
  }
  data_iter it;
  if ((rc = data_iter_init(&it, train, cfg->batch, cfg->shuffle, cfg->seed)) < 0) return rc;
  bool was = model->training;
  nn_set_training(model, true);
  rc = fit_loop(&f, &it);
  nn_set_sparse(model, NULL); /* the batch's ids die with the iterator */
  data_iter_free(&it);
  rc = fit_finish(&f, rc, res);
  nn_set_training(model, was);
  return rc;
}

/* Rows [r0, r0 + m) of sp as a batch of their own in *b: ids and vals
 * point into sp's, the offsets rebased from 0 into ptr (m + 1 entries). */
static void sparse_rows(const nn_sparse *sp, int64_t r0, int64_t m, int64_t *ptr, nn_sparse *b) {
  int64_t base = sp->ptr[r0];
  for (int64_t i = 0; i <= m; i++) ptr[i] = sp->ptr[r0 + i] - base;
  *b = (nn_sparse){.rows = m, .ptr = ptr, .ids = sp->ids + base,
                   .vals = sp->vals ? sp->vals + base : NULL, .fields = sp->fields};
}

int train_predict(nn_module *model, const tensor *x, const nn_sparse *sp, int64_t batch,
                  tensor **out) {
  *out = NULL;
  if (!model || !x || x->ndim < 1 || x->shape[0] < 1 || !tensor_is_contiguous(x))
    return err_set(DRV_EINVAL, "predict: expected a contiguous tensor of at least one row");
  if (batch <= 0) return err_set(DRV_EINVAL, "predict: batch must be > 0 (got %lld)", (long long)batch);
  int64_t n = x->shape[0], row = tensor_numel(x) / n;
  if (sp && sp->rows != n)
    return err_set(DRV_ESHAPE, "predict: %lld rows of ids for %lld rows of x", (long long)sp->rows,
                   (long long)n);
  int64_t *bptr = sp ? malloc((size_t)((batch < n ? batch : n) + 1) * sizeof *bptr) : NULL;
  if (sp && !bptr) return err_set(DRV_ENOMEM, "predict: out of memory");
  bool was = model->training;
  nn_set_training(model, false);
  int rc = 0;
  tensor *res = NULL;
  nn_sparse bsp;
  for (int64_t r0 = 0; r0 < n && rc == 0; r0 += batch) {
    tensor v = *x; /* a view header of rows [r0, r0 + k) */
    v.shape[0] = r0 + batch <= n ? batch : n - r0;
    v.offset += r0 * row;
    if (sp) sparse_rows(sp, r0, v.shape[0], bptr, &bsp);
    nn_set_sparse(model, sp ? &bsp : NULL);
    const tensor *y;
    if ((rc = nn_forward(model, &v, &y)) < 0) break;
    int64_t k = y->ndim == 2 ? y->shape[1] : 1;
    if (!res) {
      int64_t shape[2] = {n, k};
      if (!(res = tensor_new(2, shape))) rc = DRV_ENOMEM;
    }
    if (rc == 0 && (y->ndim > 2 || res->shape[1] != k || !tensor_is_contiguous(y)))
      rc = err_set(DRV_ESHAPE, "predict: the model's output is not [rows, k]");
    if (rc == 0)
      memcpy(tensor_data(res) + r0 * k, tensor_data(y), (size_t)(v.shape[0] * k) * sizeof(float));
  }
  nn_set_training(model, was);
  nn_set_sparse(model, NULL);
  free(bptr);
  if (rc < 0) tensor_free(res);
  else *out = res;
  return rc;
}
