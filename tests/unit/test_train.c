/* test_train.c - the training loop on real data: convergence, determinism,
 * evaluation cadence, stopping, interruption and progress output. */
#include <stdint.h>
#include <string.h>

#include "data/data.h"
#include "harness.h"
#include "numeric/nn.h"
#include "numeric/optim.h"
#include "train/progress.h"
#include "train/train.h"

/* ---- fixtures -------------------------------------------------------------- */

static nn_module *mlp(int64_t in, int64_t hidden, int64_t out, uint64_t seed, float dropout) {
  rng_t r;
  rng_seed(&r, seed);
  nn_module *m = nn_sequential();
  CHECK(m);
  nn_module *layers[4] = {nn_linear(in, hidden, &r), nn_relu(), NULL,
                          nn_linear(hidden, out, &r)};
  if (dropout > 0) layers[2] = nn_dropout(dropout, seed + 1);
  for (int i = 0; i < 4; i++) {
    if (i == 2 && dropout <= 0) continue;
    CHECK(layers[i]);
    CHECK_OK(nn_sequential_add(m, layers[i]));
    nn_unref(layers[i]);
  }
  return m;
}

static optim_t *make_optim(optim_kind kind, float lr, nn_param_list *pl, nn_module *m) {
  memset(pl, 0, sizeof *pl);
  CHECK_OK(nn_collect_params(m, pl));
  optim_cfg c;
  optim_cfg_default(&c, kind);
  c.lr = lr;
  optim_t *o = optim_new(&c, pl);
  CHECK(o);
  return o;
}

/* Synthetic classification data (data_synthetic): 16 features, 4 classes. */
static dataset *synth(int64_t n, uint64_t seed) {
  data_synth_opts o = {.n = n, .features = 16, .classes = 4, .seed = seed};
  dataset *d = NULL;
  CHECK_OK(data_synthetic(&o, &d));
  return d;
}

static train_cfg base_cfg(int64_t batch, int64_t epochs) {
  train_cfg c;
  memset(&c, 0, sizeof c);
  c.batch = batch;
  c.epochs = epochs;
  c.shuffle = true;
  c.seed = 42;
  return c;
}

/* Reads a whole stream back (the tmpfile progress output). */
static char *slurp(FILE *f) {
  long n = ftell(f);
  CHECK(n >= 0);
  rewind(f);
  char *s = calloc(1, (size_t)n + 1);
  CHECK(s && fread(s, 1, (size_t)n, f) == (size_t)n);
  return s;
}

/* ---- convergence ----------------------------------------------------------- */

TEST(train_digits_mlp_reaches_95_percent) {
  data_csv_opts co = {.label = -1, .header = 0, .delimiter = ','};
  dataset *all = NULL, *tr0 = NULL, *te0 = NULL, *tr = NULL, *te = NULL;
  data_stats *st = NULL;
  CHECK_OK(data_read_csv(harness_src("examples/data/digits.csv"), &co, &all));
  CHECK_INT_EQ(all->n, 1797);
  CHECK_OK(data_split(all, 0.8, 1, &tr0, &te0));
  CHECK_OK(data_standardize(tr0, NULL, &tr, &st));
  CHECK_OK(data_standardize(te0, st, &te, NULL));
  nn_module *m = mlp(64, 128, 10, 1, 0);
  nn_loss *ce = nn_cross_entropy();
  nn_param_list pl;
  optim_t *o = make_optim(OPTIM_ADAM, 1e-3f, &pl, m);
  train_cfg c = base_cfg(64, 20);
  c.eval = te;
  train_result r;
  CHECK_OK(train_fit(m, ce, o, tr, &c, &r));
  int64_t per_epoch = (tr->n + 63) / 64;
  CHECK_INT_EQ(r.steps, 20 * per_epoch);
  CHECK_INT_EQ(optim_steps(o), r.steps);
  CHECK_INT_EQ(r.epochs, 20);
  CHECK(r.eval_accuracy >= 0.95);
  CHECK(r.accuracy >= 0.95 && r.loss < 0.2);
  CHECK(r.examples_per_sec > 0 && r.seconds > 0);
  /* the reported eval is what train_evaluate measures on the final model */
  double l, a;
  CHECK_OK(train_evaluate(m, ce, te, 50, &l, &a));
  CHECK_NEAR(l, r.eval_loss, 1e-5);
  CHECK_NEAR(a, r.eval_accuracy, 1e-12);
  optim_free(o);
  nn_param_list_free(&pl);
  nn_loss_unref(ce);
  nn_unref(m);
  data_stats_free(st);
  data_free(all);
  data_free(tr0);
  data_free(te0);
  data_free(tr);
  data_free(te);
}

/* Linear regression y = x.w + b on synthetic data: MSE must fall a lot. */
TEST(train_mse_regression_drives_loss_down) {
  const int64_t n = 256, k = 4;
  const float w[4] = {1.5f, -2.0f, 0.5f, 3.0f}, b = 0.25f;
  dataset *d = calloc(1, sizeof *d);
  CHECK(d);
  d->x = tensor_new2(n, k);
  d->y = tensor_new1(n);
  d->n = n;
  d->features = k;
  snprintf(d->source, sizeof d->source, "linear");
  rng_t r;
  rng_seed(&r, 9);
  CHECK_OK(tensor_uniform(d->x, &r, -1, 1));
  float *x = tensor_data(d->x), *y = tensor_data(d->y);
  for (int64_t i = 0; i < n; i++) {
    y[i] = b;
    for (int64_t j = 0; j < k; j++) y[i] += w[j] * x[i * k + j];
  }
  nn_module *m = nn_sequential(), *lin = nn_linear(k, 1, &r);
  CHECK_OK(nn_sequential_add(m, lin));
  nn_unref(lin);
  nn_loss *mse = nn_mse();
  nn_param_list pl;
  optim_t *o = make_optim(OPTIM_SGD, 0.05f, &pl, m);
  double before, after, acc;
  CHECK_OK(train_evaluate(m, mse, d, 64, &before, &acc));
  CHECK(isnan(acc));
  train_cfg c = base_cfg(32, 40);
  c.eval = d;
  train_result res;
  CHECK_OK(train_fit(m, mse, o, d, &c, &res));
  CHECK_OK(train_evaluate(m, mse, d, 64, &after, &acc));
  CHECK(after < before / 1000);
  CHECK(isnan(res.accuracy) && isnan(res.eval_accuracy));
  CHECK_NEAR(res.eval_loss, after, 1e-9);
  optim_free(o);
  nn_param_list_free(&pl);
  nn_loss_unref(mse);
  nn_unref(m);
  data_free(d);
}

/* ---- determinism ----------------------------------------------------------- */

/* Fits a fresh model (dropout included) and returns a copy of its flat
 * parameters. */
static float *fit_params(uint64_t shuffle_seed, int64_t *count) {
  dataset *d = synth(300, 5);
  nn_module *m = mlp(16, 32, 4, 3, 0.2f);
  nn_loss *ce = nn_cross_entropy();
  nn_param_list pl;
  optim_t *o = make_optim(OPTIM_SGD, 0.1f, &pl, m);
  train_cfg c = base_cfg(32, 3);
  c.seed = shuffle_seed;
  CHECK_OK(train_fit(m, ce, o, d, &c, NULL));
  int64_t total = nn_num_params(m), at = 0;
  float *out = malloc((size_t)total * sizeof *out);
  CHECK(out);
  for (int i = 0; i < pl.n; i++) {
    int64_t k = tensor_numel(pl.items[i].value);
    memcpy(out + at, tensor_data(pl.items[i].value), (size_t)k * sizeof *out);
    at += k;
  }
  CHECK_INT_EQ(at, total);
  *count = total;
  optim_free(o);
  nn_param_list_free(&pl);
  nn_loss_unref(ce);
  nn_unref(m);
  data_free(d);
  return out;
}

TEST(train_fit_is_bit_reproducible) {
  int64_t n1, n2, n3;
  float *a = fit_params(7, &n1), *b = fit_params(7, &n2), *c = fit_params(8, &n3);
  CHECK_INT_EQ(n1, n2);
  CHECK(memcmp(a, b, (size_t)n1 * sizeof *a) == 0);
  /* and the shuffle seed really matters, so the equality above means something */
  CHECK(memcmp(a, c, (size_t)n1 * sizeof *a) != 0);
  free(a);
  free(b);
  free(c);
}

/* ---- callbacks, stopping, interruption -------------------------------------- */

typedef struct counter {
  int steps, evals;
  int64_t eval_steps[16];
  int64_t stop_at;       /* return stop_code at this step (0: never) */
  int stop_code;
  int64_t interrupt_at;  /* err_interrupt_request() at this step */
  bool interrupt_first;  /* err_interrupt_request() just before the fit */
  int64_t last_step;
  bool bad;              /* a callback saw inconsistent progress */
} counter;

static int count_cb(void *ud, const train_progress *p) {
  counter *c = ud;
  if (p->is_eval) {
    if (c->evals < 16) c->eval_steps[c->evals] = p->step;
    c->evals++;
    if (!isfinite(p->eval_loss) || !(p->eval_accuracy >= 0 && p->eval_accuracy <= 1))
      c->bad = true;
    return 0;
  }
  c->steps++;
  if (p->step != c->last_step + 1 || p->step > p->total_steps || p->epoch < 1 ||
      p->epoch > p->epochs || !isfinite(p->loss))
    c->bad = true;
  c->last_step = p->step;
  if (c->interrupt_at && p->step == c->interrupt_at) err_interrupt_request();
  return c->stop_at && p->step == c->stop_at ? c->stop_code : 0;
}

/* Fits a 16-4-4 MLP on 300 synthetic examples, batch 32: 10 steps/epoch. */
static int run_counted(train_cfg *c, bool with_eval, counter *cnt, train_result *r) {
  dataset *d = synth(300, 5), *e = synth(100, 6);
  nn_module *m = mlp(16, 8, 4, 3, 0);
  nn_loss *ce = nn_cross_entropy();
  nn_param_list pl;
  optim_t *o = make_optim(OPTIM_SGD, 0.1f, &pl, m);
  c->eval = with_eval ? e : NULL;
  c->on_progress = count_cb;
  c->ud = cnt;
  if (cnt->interrupt_first) err_interrupt_request();
  int rc = train_fit(m, ce, o, d, c, r);
  CHECK(m->training); /* restored to what it was (training) */
  optim_free(o);
  nn_param_list_free(&pl);
  nn_loss_unref(ce);
  nn_unref(m);
  data_free(d);
  data_free(e);
  return rc;
}

TEST(train_eval_runs_every_n_steps_and_at_the_end) {
  counter cnt = {0};
  train_cfg c = base_cfg(32, 3); /* 30 steps */
  c.eval_every = 7;
  train_result r;
  CHECK_OK(run_counted(&c, true, &cnt, &r));
  CHECK(!cnt.bad);
  CHECK_INT_EQ(cnt.steps, 30);
  CHECK_INT_EQ(r.steps, 30);
  CHECK_INT_EQ(cnt.evals, 5); /* 7, 14, 21, 28 and the end (30) */
  const int64_t want[5] = {7, 14, 21, 28, 30};
  for (int i = 0; i < 5; i++) CHECK_INT_EQ(cnt.eval_steps[i], want[i]);
  CHECK(isfinite(r.eval_loss) && r.eval_accuracy >= 0);

  /* when the last step is an eval step, the end does not evaluate twice */
  counter cnt2 = {0};
  c = base_cfg(32, 3);
  c.eval_every = 10;
  CHECK_OK(run_counted(&c, true, &cnt2, &r));
  CHECK_INT_EQ(cnt2.evals, 3);

  /* eval_every = 0: only at the end; no eval data: never */
  counter cnt3 = {0};
  c = base_cfg(32, 3);
  CHECK_OK(run_counted(&c, true, &cnt3, &r));
  CHECK_INT_EQ(cnt3.evals, 1);
  CHECK_INT_EQ(cnt3.eval_steps[0], 30);
  counter cnt4 = {0};
  c = base_cfg(32, 3);
  c.eval_every = 5;
  CHECK_OK(run_counted(&c, false, &cnt4, &r));
  CHECK_INT_EQ(cnt4.evals, 0);
  CHECK(isnan(r.eval_loss));
}

TEST(train_max_steps_cuts_the_plan) {
  counter cnt = {0};
  train_cfg c = base_cfg(32, 5);
  c.max_steps = 13;
  train_result r;
  CHECK_OK(run_counted(&c, false, &cnt, &r));
  CHECK(!cnt.bad);
  CHECK_INT_EQ(r.steps, 13);
  CHECK_INT_EQ(cnt.steps, 13);
  CHECK_INT_EQ(r.epochs, 2); /* 10 steps per epoch */
}

TEST(train_on_progress_nonzero_stops) {
  counter cnt = {.stop_at = 5, .stop_code = 7};
  train_cfg c = base_cfg(32, 3);
  train_result r;
  CHECK_INT_EQ(run_counted(&c, false, &cnt, &r), 7);
  CHECK_INT_EQ(r.steps, 5);
  CHECK_INT_EQ(cnt.steps, 5);
  CHECK(isfinite(r.loss) && r.accuracy >= 0);
  CHECK(r.stopped && !r.stopped_early); /* the callback's stop, in the result */
  /* a fit that runs its plan is not stopped */
  counter whole = {0};
  c = base_cfg(32, 1);
  CHECK_OK(run_counted(&c, false, &whole, &r));
  CHECK(!r.stopped);
  CHECK_INT_EQ(r.steps, 10);
}

TEST(train_result_fill_reports_the_end) {
  train_progress p = {.step = 12, .epoch = 2, .loss = 0.5, .accuracy = NAN, .eval_loss = 0.25,
                      .eval_accuracy = 0.75, .examples_per_sec = 100, .elapsed = 3};
  train_stopper st = {.best = 0.2, .best_step = 8, .bad = 2, .seen = true};
  train_result r;
  memset(&r, 0x5a, sizeof r); /* every field set, none left over */
  train_result_fill(&r, &p, &st, true, false);
  CHECK_INT_EQ(r.steps, 12);
  CHECK_INT_EQ(r.epochs, 2);
  CHECK(r.loss == 0.5 && isnan(r.accuracy) && r.eval_loss == 0.25 && r.eval_accuracy == 0.75);
  CHECK(r.examples_per_sec == 100 && r.seconds == 3);
  CHECK(r.stopped_early && !r.stopped);
  CHECK_INT_EQ(r.best_step, 8);
  CHECK(r.best_metric == 0.2);
  train_stopper none = {0};
  train_result_fill(&r, &p, &none, false, true);
  CHECK(r.stopped && !r.stopped_early);
  CHECK_INT_EQ(r.best_step, 0);
  CHECK(isnan(r.best_metric));
  train_result_init(&r);
  CHECK_INT_EQ(r.steps, 0);
  CHECK(isnan(r.loss) && isnan(r.eval_loss) && !r.stopped);
}

TEST(train_interrupt_returns_EINTERRUPTED) {
  counter cnt = {.interrupt_at = 12};
  train_cfg c = base_cfg(32, 3);
  train_result r;
  CHECK_ERR(run_counted(&c, false, &cnt, &r), DRV_EINTERRUPTED, "interrupted at step 12");
  CHECK_INT_EQ(r.steps, 12);
  CHECK_INT_EQ(r.epochs, 2);
  CHECK(isfinite(r.loss)); /* results so far are filled in */
  err_interrupt_clear();
  /* an interrupt pending before the fit stops it before any step */
  counter cnt2 = {.interrupt_first = true};
  c = base_cfg(32, 3);
  CHECK_ERR(run_counted(&c, false, &cnt2, &r), DRV_EINTERRUPTED, "at step 0");
  CHECK_INT_EQ(r.steps, 0);
  CHECK_INT_EQ(cnt2.steps, 0);
  err_interrupt_clear();
}

TEST(train_fit_rejects_bad_config) {
  dataset *d = synth(50, 1);
  nn_module *m = mlp(16, 8, 4, 3, 0);
  nn_loss *ce = nn_cross_entropy();
  nn_param_list pl;
  optim_t *o = make_optim(OPTIM_SGD, 0.1f, &pl, m);
  train_cfg c = base_cfg(0, 1);
  train_result r;
  CHECK_ERR(train_fit(m, ce, o, d, &c, &r), DRV_EINVAL, "batch must be > 0");
  c = base_cfg(8, 0);
  CHECK_ERR(train_fit(m, ce, o, d, &c, &r), DRV_EINVAL, "epochs must be > 0");
  c = base_cfg(8, 1);
  c.max_steps = -1;
  CHECK_ERR(train_fit(m, ce, o, d, &c, &r), DRV_EINVAL, "max_steps");
  /* a model that does not fit the data fails with the layer's message */
  nn_module *wrong = mlp(10, 8, 4, 3, 0);
  nn_param_list pl2;
  optim_t *o2 = make_optim(OPTIM_SGD, 0.1f, &pl2, wrong);
  c = base_cfg(8, 1);
  CHECK(train_fit(wrong, ce, o2, d, &c, &r) == DRV_ESHAPE);
  CHECK_INT_EQ(r.steps, 0);
  optim_free(o2);
  nn_param_list_free(&pl2);
  nn_unref(wrong);
  optim_free(o);
  nn_param_list_free(&pl);
  nn_loss_unref(ce);
  nn_unref(m);
  data_free(d);
}

/* ---- steps and evaluation ----------------------------------------------------- */

TEST(train_step_accumulates_gradients) {
  dataset *d = synth(20, 2);
  nn_module *m = mlp(16, 8, 4, 3, 0);
  nn_loss *ce = nn_cross_entropy();
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(m, &pl));
  float l1, l2;
  int64_t correct;
  nn_zero_grad(m);
  CHECK_OK(train_step(m, ce, d->x, d->y, &l1, &correct));
  CHECK(correct >= 0 && correct <= 20);
  CHECK(l1 > 0 && isfinite(l1));
  tensor *g1 = tensor_clone(pl.items[0].grad);
  CHECK_OK(train_step(m, ce, d->x, d->y, &l2, NULL));
  CHECK(l1 == l2); /* no update happened: same loss */
  /* the second step added the same gradient again */
  const float *a = tensor_data(g1), *b = tensor_data(pl.items[0].grad);
  double maxg = 0;
  for (int64_t i = 0; i < tensor_numel(g1); i++) {
    CHECK_NEAR(b[i], 2 * a[i], 1e-6);
    maxg = fmax(maxg, fabs(a[i]));
  }
  CHECK(maxg > 0);
  tensor_free(g1);
  nn_param_list_free(&pl);
  nn_loss_unref(ce);
  nn_unref(m);
  data_free(d);
}

TEST(train_evaluate_weights_ragged_batches_and_restores_mode) {
  dataset *d = synth(100, 4);
  nn_module *m = mlp(16, 8, 4, 3, 0.5f);
  nn_loss *ce = nn_cross_entropy();
  /* the whole set in one batch, eval mode, computed directly */
  nn_set_training(m, false);
  const tensor *out;
  float whole;
  CHECK_OK(nn_forward(m, d->x, &out));
  CHECK_OK(nn_loss_forward(ce, out, d->y, &whole));
  int64_t correct = nn_loss_correct(ce, out, d->y);
  /* batches of 32: 32+32+32+4, the last one must weigh 4/100 */
  nn_set_training(m, true);
  double l, a;
  CHECK_OK(train_evaluate(m, ce, d, 32, &l, &a));
  CHECK(m->training);
  CHECK_NEAR(l, whole, 1e-5);
  CHECK_NEAR(a, (double)correct / 100, 1e-12);
  nn_set_training(m, false);
  double l2, a2;
  CHECK_OK(train_evaluate(m, ce, d, 7, &l2, &a2));
  CHECK(!m->training);
  CHECK_NEAR(l2, l, 1e-5); /* dropout off: the batching does not matter */
  CHECK_ERR(train_evaluate(m, ce, d, 0, &l, &a), DRV_EINVAL, "batch must be > 0");
  nn_loss_unref(ce);
  nn_unref(m);
  data_free(d);
}

/* ---- progress output ----------------------------------------------------------- */

/* Runs a 2-epoch fit (20 steps) with eval at the end, progress into a tmpfile. */
static char *progress_text(bool tty, train_result *r) {
  FILE *f = tmpfile();
  CHECK(f);
  counter cnt = {0};
  train_cfg c = base_cfg(32, 2);
  c.progress = f;
  c.progress_tty = tty;
  CHECK_OK(run_counted(&c, true, &cnt, r));
  char *s = slurp(f);
  fclose(f);
  return s;
}

/* "12,345": digits in groups of three separated by commas. */
static bool grouped_number(const char *s, size_t len) {
  size_t run = 0;
  bool first = true;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == ',') {
      if (run == 0 || run > 3 || (!first && run != 3)) return false;
      first = false;
      run = 0;
    } else if (s[i] >= '0' && s[i] <= '9') {
      run++;
    } else {
      return false;
    }
  }
  return first ? run >= 1 && run <= 3 : run == 3;
}

TEST(train_progress_plain_lines) {
  train_result r;
  char *s = progress_text(false, &r);
  CHECK(!strchr(s, '\r') && !strchr(s, '\033'));
  /* a short run: only the final line (5 s cadence) and the eval line */
  char want_eval[128];
  snprintf(want_eval, sizeof want_eval, "eval step 20: loss %.4f accuracy %.4f\n",
           r.eval_loss, r.eval_accuracy);
  CHECK_STR_CONTAINS(s, want_eval);
  const char *line = strstr(s, "step 20/20 epoch 2/2 loss ");
  CHECK(line);
  double loss, acc, rate;
  char eta[16];
  CHECK_INT_EQ(sscanf(line, "step 20/20 epoch 2/2 loss %lf acc %lf %lf ex/s eta %15s", &loss,
                      &acc, &rate, eta),
               4);
  CHECK_NEAR(loss, r.loss, 5e-5);
  CHECK_NEAR(acc, r.accuracy, 5e-4);
  CHECK(rate > 0);
  CHECK(strcmp(eta, "0s") == 0);
  CHECK(s[strlen(s) - 1] == '\n');
  free(s);
}

TEST(train_progress_tty_bar) {
  train_result r;
  char *s = progress_text(true, &r);
  /* the first step draws at once; every draw is \r ... ESC[K */
  CHECK(strncmp(s, "\rstep 1/20 [=>", 14) == 0);
  CHECK_STR_CONTAINS(s, "\033[K");
  /* the eval line clears the bar and stands on its own line */
  CHECK_STR_CONTAINS(s, "\r\033[Keval step 20: loss ");
  /* the final bar is full, followed by the final newline */
  const char *last = strstr(s, "\rstep 20/20 [====================] epoch 2/2 loss ");
  CHECK(last);
  const char *tail = strstr(last, " ex/s ETA 0:00\033[K\n");
  CHECK(tail && tail[strlen(" ex/s ETA 0:00\033[K\n")] == '\0');
  /* the rate before " ex/s" is grouped with commas */
  const char *p = tail;
  while (p > last && p[-1] != ' ') p--;
  CHECK(grouped_number(p, (size_t)(tail - p)));
  free(s);
}

/* Sync cluster training: the global step against its target and the epoch
 * the data reached, not the train steps run (which backups outnumber). */
TEST(progress_sync_shows_global_steps) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK(f != NULL);
  progress pr;
  progress_init(&pr, f, false);
  train_progress p = {.step = 2216, .total_steps = 1200, .epoch = 185, .epochs = 100, .loss = 0.5,
                      .accuracy = NAN, .global_step = 1108, .global_steps = 1200, .global_epoch = 93};
  progress_step(&pr, &p, true);
  fclose(f);
  CHECK_STR_CONTAINS(buf, "step 1108/1200 epoch 93/100 ");
  free(buf);
}

/* A feed of unknown length (total_steps 0): "step 60", never "step 60/0",
 * and no ETA, in the plain line and in the bar. */
TEST(progress_unknown_total_says_no_total) {
  for (int tty = 0; tty <= 1; tty++) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    progress pr;
    progress_init(&pr, f, tty);
    train_progress p = {.step = 60, .total_steps = 0, .epoch = 1, .epochs = 1, .loss = 0.5,
                        .accuracy = 0.25, .eta = -1, .examples_per_sec = 100};
    progress_step(&pr, &p, true);
    fclose(f);
    CHECK_STR_CONTAINS(buf, "step 60 epoch 1/1 loss 0.5000 acc 0.250 100 ex/s");
    CHECK(strstr(buf, "/0") == NULL);
    CHECK(strstr(buf, "eta") == NULL && strstr(buf, "ETA") == NULL);
    free(buf);
  }
}
