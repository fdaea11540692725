/* test_nn.c - layers, Sequential and losses: finite-difference gradient
 * checks for every layer and loss, values against direct computations,
 * accumulation, Dropout modes, descriptions, error messages, buffer reuse
 * and reference counting. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "harness.h"
#include "numeric/nn.h"
#include "numeric/tensor.h"

#if defined(__SANITIZE_ADDRESS__)
#define NN_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NN_TEST_LSAN 1
#endif
#endif
#ifdef NN_TEST_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* Under ASan, fails the case if anything allocated so far is unreachable.
 * Needed because the runner ends each case with _exit(), which skips
 * LeakSanitizer's own check at exit. A no-op in plain builds. */
static void no_leaks(void) {
#ifdef NN_TEST_LSAN
  if (__lsan_do_recoverable_leak_check())
    harness_fail(__FILE__, __LINE__, "memory leaked (LeakSanitizer report above)");
#endif
}

/* ============================== helpers ================================= */

static void free_tensors(tensor **ts, size_t n) {
  for (size_t i = 0; i < n; i++) tensor_free(ts[i]);
}
static void unref_modules(nn_module **ms, size_t n) {
  for (size_t i = 0; i < n; i++) nn_unref(ms[i]);
}
static void unref_losses(nn_loss **ls, size_t n) {
  for (size_t i = 0; i < n; i++) nn_loss_unref(ls[i]);
}
#define LIST_(type, ...) (type *[]){__VA_ARGS__}, sizeof((type *[]){__VA_ARGS__}) / sizeof(type *)
#define FREE_TENSORS(...) free_tensors(LIST_(tensor, __VA_ARGS__))
#define UNREF(...) unref_modules(LIST_(nn_module, __VA_ARGS__))
#define UNREF_LOSSES(...) unref_losses(LIST_(nn_loss, __VA_ARGS__))

static tensor *mat(int64_t rows, int64_t cols) {
  tensor *t = tensor_new2(rows, cols);
  CHECK(t != NULL);
  return t;
}

static tensor *uniform(rng_t *r, int64_t rows, int64_t cols, float lo, float hi) {
  tensor *t = mat(rows, cols);
  CHECK_OK(tensor_uniform(t, r, lo, hi));
  return t;
}

/* Magnitudes in [lo, hi] with random signs: inputs kept away from 0, where
 * ReLU has its kink. */
static tensor *away_from_zero(rng_t *r, int64_t rows, int64_t cols, float lo, float hi) {
  tensor *t = uniform(r, rows, cols, lo, hi);
  float *p = tensor_data(t);
  for (int64_t i = 0; i < rows * cols; i++)
    if (rng_uniform(r) < 0.5f) p[i] = -p[i];
  return t;
}

/* Builds a Sequential of the given modules, dropping the caller's refs. */
static nn_module *seq_of(int n, nn_module **mods) {
  nn_module *s = nn_sequential();
  CHECK(s != NULL);
  for (int i = 0; i < n; i++) {
    CHECK(mods[i] != NULL);
    CHECK_OK(nn_sequential_add(s, mods[i]));
    nn_unref(mods[i]);
  }
  return s;
}

static tensor *vec(int64_t n, const float *v) { return tensor_from(1, &n, v); }

static double dot(const tensor *a, const tensor *b) {
  CHECK_INT_EQ(tensor_numel(a), tensor_numel(b));
  const float *p = tensor_data(a), *q = tensor_data(b);
  double s = 0;
  for (int64_t i = 0; i < tensor_numel(a); i++) s += (double)p[i] * q[i];
  return s;
}

static float at(const tensor *t, int64_t i, int64_t j) {
  int64_t idx[2] = {i, j};
  return tensor_get(t, idx);
}

/* ---- finite differences --------------------------------------------------- */

typedef double (*objective_fn)(void *ud);

/* Compares `analytic` with central differences of f with respect to every
 * element of t (perturbed in place and restored). */
static void compare_grad(objective_fn f, void *ud, tensor *t, const tensor *analytic,
                         const char *what, float eps, double atol, double rtol) {
  CHECK_INT_EQ(tensor_numel(t), tensor_numel(analytic));
  float *p = tensor_data(t);
  const float *a = tensor_data(analytic);
  double biggest = 0;
  for (int64_t i = 0; i < tensor_numel(t); i++) {
    float save = p[i];
    p[i] = save + eps;
    double fp = f(ud);
    p[i] = save - eps;
    double fm = f(ud);
    p[i] = save;
    double num = (fp - fm) / (2.0 * (double)eps);
    if (!(fabs(num - a[i]) <= atol + rtol * fabs(num)))
      harness_fail(__FILE__, __LINE__, "%s[%lld]: analytic %.7g, numeric %.7g", what,
                   (long long)i, (double)a[i], num);
    if (fabs(num) > biggest) biggest = fabs(num);
  }
  /* A check against an all-zero gradient would prove little. */
  if (!(biggest > 10 * atol))
    harness_fail(__FILE__, __LINE__, "%s: gradient is ~0 everywhere (%g)", what, biggest);
}

/* A layer under test: f(x, params) = sum(y * w) for a fixed random w. A
 * Dropout inside gets its rng re-seeded before every forward, so each
 * evaluation draws the same mask. */
typedef struct layer_case {
  nn_module *m;
  tensor *x, *w;
  nn_module *dropout;
  uint64_t seed;
} layer_case;

static const tensor *run_forward(layer_case *c) {
  const tensor *y = NULL;
  if (c->dropout) rng_seed(&c->dropout->rng, c->seed);
  CHECK_OK(nn_forward(c->m, c->x, &y));
  return y;
}

static double layer_objective(void *ud) {
  layer_case *c = ud;
  return dot(run_forward(c), c->w);
}

/* Checks d f / d x and d f / d p for every parameter p of c->m. */
static void gradcheck_layer(layer_case *c, rng_t *r, float eps) {
  const tensor *y = run_forward(c);
  c->w = tensor_new(y->ndim, y->shape);
  CHECK(c->w != NULL);
  CHECK_OK(tensor_uniform(c->w, r, -1, 1));
  const tensor *dx = NULL;
  nn_zero_grad(c->m);
  CHECK_OK(nn_backward(c->m, c->x, c->w, &dx));
  CHECK(tensor_same_shape(dx, c->x));
  tensor *dx_copy = tensor_clone(dx);
  compare_grad(layer_objective, c, c->x, dx_copy, "input", eps, 1e-3, 1e-2);
  tensor_free(dx_copy);

  nn_param_list ps = {0};
  CHECK_OK(nn_collect_params(c->m, &ps));
  for (int i = 0; i < ps.n; i++) {
    tensor *g = tensor_clone(ps.items[i].grad);
    compare_grad(layer_objective, c, ps.items[i].value, g, ps.items[i].name, eps, 1e-3, 1e-2);
    tensor_free(g);
  }
  nn_param_list_free(&ps);
  tensor_free(c->w);
}

typedef struct loss_case {
  nn_loss *l;
  tensor *pred, *target;
} loss_case;

static double loss_objective(void *ud) {
  loss_case *c = ud;
  float v;
  CHECK_OK(nn_loss_forward(c->l, c->pred, c->target, &v));
  return v;
}

static void gradcheck_loss(nn_loss *l, tensor *pred, tensor *target) {
  loss_case c = {l, pred, target};
  const tensor *g = NULL;
  CHECK_OK(nn_loss_backward(l, pred, target, &g));
  CHECK(tensor_same_shape(g, pred));
  tensor *copy = tensor_clone(g);
  compare_grad(loss_objective, &c, pred, copy, l->ops->type, 1e-2f, 1e-4, 1e-2);
  tensor_free(copy);
}

/* ============================== gradient checks ========================= */

static void gradcheck_single(nn_module *m, tensor *x, float eps) {
  rng_t r;
  rng_seed(&r, 99);
  layer_case c = {.m = m, .x = x};
  gradcheck_layer(&c, &r, eps);
  nn_unref(m);
  tensor_free(x);
}

TEST(nn_grad_linear) {
  rng_t r;
  rng_seed(&r, 1);
  gradcheck_single(nn_linear(5, 3, &r), uniform(&r, 4, 5, -1, 1), 1e-2f);
  no_leaks();
}

TEST(nn_grad_relu) {
  rng_t r;
  rng_seed(&r, 2);
  /* |x| >= 0.1 > eps: no perturbation crosses the kink. */
  gradcheck_single(nn_relu(), away_from_zero(&r, 4, 5, 0.1f, 1.0f), 1e-2f);
  no_leaks();
}

TEST(nn_grad_tanh) {
  rng_t r;
  rng_seed(&r, 3);
  gradcheck_single(nn_tanh(), uniform(&r, 3, 6, -2, 2), 1e-2f);
  no_leaks();
}

TEST(nn_grad_sigmoid) {
  rng_t r;
  rng_seed(&r, 4);
  gradcheck_single(nn_sigmoid(), uniform(&r, 4, 4, -3, 3), 1e-2f);
  no_leaks();
}

TEST(nn_grad_softmax) {
  rng_t r;
  rng_seed(&r, 5);
  gradcheck_single(nn_softmax(), uniform(&r, 3, 5, -2, 2), 1e-2f);
  no_leaks();
}

TEST(nn_grad_dropout) {
  rng_t r;
  rng_seed(&r, 6);
  nn_module *d = nn_dropout(0.4f, 7);
  CHECK(d != NULL);
  layer_case c = {.m = d, .x = uniform(&r, 4, 6, -1, 1), .dropout = d, .seed = 1234};
  gradcheck_layer(&c, &r, 1e-2f);
  /* The mask really dropped something and kept something. */
  const tensor *y = run_forward(&c);
  int zeros = 0;
  for (int64_t i = 0; i < 24; i++) zeros += tensor_data(y)[i] == 0.0f;
  CHECK(zeros > 0 && zeros < 24);
  tensor_free(c.x);
  nn_unref(d);
  no_leaks();
}

/* Smallest |z| over the elements of t. */
static float min_abs(const tensor *t) {
  float m = INFINITY;
  for (int64_t i = 0; i < tensor_numel(t); i++) m = fminf(m, fabsf(tensor_data(t)[i]));
  return m;
}

/* Linear -> Tanh -> (Linear -> ReLU -> Dropout) -> Linear -> Softmax, with
 * respect to the input and all six parameter tensors. (Softmax after
 * Sigmoid would flatten the gradients below what float differences show.) */
TEST(nn_grad_sequential) {
  for (uint64_t seed = 1; seed < 100; seed++) {
    rng_t r;
    rng_seed(&r, seed);
    nn_module *drop = nn_dropout(0.25f, 3), *l1 = nn_linear(4, 6, &r);
    nn_module *inner = seq_of(3, (nn_module *[]){nn_linear(6, 5, &r), nn_relu(), drop});
    nn_module *seq = seq_of(5, (nn_module *[]){l1, nn_tanh(), inner, nn_linear(5, 3, &r),
                                              nn_softmax()});
    /* Default-initialised weights shrink the input gradient through three
     * layers to where float differences cannot resolve it: scale them up. */
    nn_param_list ps = {0};
    CHECK_OK(nn_collect_params(seq, &ps));
    CHECK_INT_EQ(ps.n, 6);
    for (int i = 0; i < ps.n; i++) CHECK_OK(tensor_scale(ps.items[i].value, 3.0f));
    nn_param_list_free(&ps);
    layer_case c = {.m = seq, .x = uniform(&r, 3, 4, -1, 1), .dropout = drop, .seed = 77};
    run_forward(&c);
    /* Keep the ReLU's inputs well away from its kink (eps moves them by far
     * less than 0.2); otherwise try the next seed. */
    if (min_abs(inner->children[0]->out) > 0.2f) {
      gradcheck_layer(&c, &r, 5e-3f);
      tensor_free(c.x);
      nn_unref(seq);
      no_leaks();
      return;
    }
    tensor_free(c.x);
    nn_unref(seq);
  }
  CHECK(!"no seed kept the ReLU inputs away from 0");
}

TEST(nn_grad_cross_entropy) {
  rng_t r;
  rng_seed(&r, 8);
  tensor *pred = uniform(&r, 4, 5, -2, 2);
  float labels[4] = {0, 3, 4, 3};
  tensor *target = vec(4, labels);
  nn_loss *l = nn_cross_entropy();
  gradcheck_loss(l, pred, target);
  nn_loss_unref(l);
  FREE_TENSORS(pred, target);
  no_leaks();
}

TEST(nn_grad_mse) {
  rng_t r;
  rng_seed(&r, 9);
  nn_loss *l = nn_mse();
  tensor *pred = uniform(&r, 4, 3, -2, 2), *target = uniform(&r, 4, 3, -2, 2);
  gradcheck_loss(l, pred, target);
  FREE_TENSORS(pred, target);
  /* [N, 1] predictions against [N] targets. */
  float t[5] = {0.5f, -1, 2, 0, 1};
  pred = uniform(&r, 5, 1, -2, 2);
  target = vec(5, t);
  gradcheck_loss(l, pred, target);
  FREE_TENSORS(pred, target);
  nn_loss_unref(l);
  no_leaks();
}

TEST(nn_grad_bce_with_logits) {
  rng_t r;
  rng_seed(&r, 10);
  nn_loss *l = nn_bce_with_logits();
  tensor *pred = uniform(&r, 4, 3, -4, 4), *target = mat(4, 3);
  float *t = tensor_data(target);
  for (int i = 0; i < 12; i++) t[i] = i % 3 == 0 ? 0.3f : (float)(i % 2); /* hard and soft */
  gradcheck_loss(l, pred, target);
  FREE_TENSORS(pred, target);
  nn_loss_unref(l);
  no_leaks();
}

/* ============================== values ================================== */

TEST(nn_linear_init_and_forward) {
  rng_t r, ref;
  rng_seed(&r, 5);
  nn_module *m = nn_linear(64, 128, &r);
  CHECK(m != NULL);
  CHECK_INT_EQ(m->params[0].value->shape[0], 128);
  CHECK_INT_EQ(m->params[0].value->shape[1], 64);
  CHECK_INT_EQ(m->params[1].value->shape[0], 128);
  CHECK(strcmp(m->params[0].name, "weight") == 0 && strcmp(m->params[1].name, "bias") == 0);
  /* U(-1/8, 1/8) from the rng, weight first and then bias. */
  rng_seed(&ref, 5);
  const float *w = tensor_data(m->params[0].value), *b = tensor_data(m->params[1].value);
  for (int i = 0; i < 64 * 128; i++)
    CHECK_NEAR(w[i], -0.125f + 0.25f * rng_uniform(&ref), 1e-7);
  for (int i = 0; i < 128; i++) CHECK_NEAR(b[i], -0.125f + 0.25f * rng_uniform(&ref), 1e-7);
  nn_unref(m);

  /* y = x W^T + b against a direct sum, for a contiguous input and for the
   * same values seen through a transposed view. */
  rng_seed(&r, 6);
  m = nn_linear(4, 3, &r);
  tensor *xt = uniform(&r, 4, 5, -1, 1), *x = tensor_transpose(xt, 0, 1), *xc = tensor_clone(x);
  const tensor *y;
  CHECK_OK(nn_forward(m, xc, &y));
  tensor *yc = tensor_clone(y);
  CHECK_OK(nn_forward(m, x, &y));
  CHECK(tensor_max_abs_diff(y, yc) < 1e-6f);
  for (int64_t i = 0; i < 5; i++)
    for (int64_t j = 0; j < 3; j++) {
      double s = tensor_data(m->params[1].value)[j];
      for (int64_t k = 0; k < 4; k++) s += (double)at(x, i, k) * at(m->params[0].value, j, k);
      CHECK_NEAR(at(y, i, j), s, 1e-5);
    }
  FREE_TENSORS(yc, xc, x, xt);
  nn_unref(m);
  no_leaks();
}

TEST(nn_activation_values) {
  float xs[8] = {-100, -3, -0.5f, 0, 0.25f, 2, 30, 100};
  int64_t shape[2] = {2, 4};
  tensor *x = tensor_from(2, shape, xs);
  nn_module *relu = nn_relu(), *th = nn_tanh(), *sg = nn_sigmoid();
  const tensor *a, *b, *c;
  CHECK_OK(nn_forward(relu, x, &a));
  CHECK_OK(nn_forward(th, x, &b));
  CHECK_OK(nn_forward(sg, x, &c));
  for (int i = 0; i < 8; i++) {
    CHECK_NEAR(tensor_data(a)[i], xs[i] > 0 ? xs[i] : 0, 0);
    CHECK_NEAR(tensor_data(b)[i], tanh(xs[i]), 1e-6);
    CHECK_NEAR(tensor_data(c)[i], 1.0 / (1.0 + exp(-(double)xs[i])), 1e-6);
    CHECK(isfinite(tensor_data(c)[i]));
  }
  UNREF(relu, th, sg);
  tensor_free(x);

  /* Softmax: rows sum to 1; shifting a row changes nothing, even by 1000. */
  float big[6] = {1000, 1001, 1002, 0, 1, 2};
  int64_t s23[2] = {2, 3};
  x = tensor_from(2, s23, big);
  nn_module *sm = nn_softmax();
  CHECK_OK(nn_forward(sm, x, &a));
  double z = exp(0) + exp(1) + exp(2);
  for (int64_t i = 0; i < 2; i++) {
    double sum = 0;
    for (int64_t j = 0; j < 3; j++) {
      CHECK_NEAR(at(a, i, j), exp((double)j) / z, 1e-6);
      sum += at(a, i, j);
    }
    CHECK_NEAR(sum, 1.0, 1e-6);
  }
  nn_unref(sm);
  tensor_free(x);
  no_leaks();
}

/* Direct double-precision reference for CrossEntropy. */
static double ce_reference(const tensor *pred, const float *labels) {
  double total = 0;
  for (int64_t i = 0; i < pred->shape[0]; i++) {
    double s = 0;
    for (int64_t j = 0; j < pred->shape[1]; j++) s += exp((double)at(pred, i, j));
    total += log(s) - at(pred, i, (int64_t)labels[i]);
  }
  return total / (double)pred->shape[0];
}

TEST(nn_loss_values) {
  rng_t r;
  rng_seed(&r, 11);
  float v, labels[3] = {2, 0, 1};
  tensor *pred = uniform(&r, 3, 4, -3, 3), *target = vec(3, labels);
  nn_loss *ce = nn_cross_entropy(), *mse = nn_mse(), *bce = nn_bce_with_logits();
  CHECK_OK(nn_loss_forward(ce, pred, target, &v));
  CHECK_NEAR(v, ce_reference(pred, labels), 1e-5);
  /* Equal logits: log(C) whatever the label. */
  CHECK_OK(tensor_fill(pred, 0.0f));
  CHECK_OK(nn_loss_forward(ce, pred, target, &v));
  CHECK_NEAR(v, log(4.0), 1e-6);
  /* Huge logits stay finite: the label's logit is 999, the others 1000. */
  CHECK_OK(tensor_fill(pred, 1000.0f));
  for (int64_t i = 0; i < 3; i++) tensor_data(pred)[i * 4 + (int64_t)labels[i]] = 999.0f;
  CHECK_OK(nn_loss_forward(ce, pred, target, &v));
  CHECK(isfinite(v));
  CHECK_NEAR(v, 1.0 + log(3.0 + exp(-1.0)), 1e-5); /* lse = 1000 + log(3 + 1/e) */
  FREE_TENSORS(pred, target);

  /* MSE: mean of squared differences over every element. */
  float p6[6] = {1, 2, 3, 4, 5, 6}, t6[6] = {1, 0, 3, 1, 5, 2};
  int64_t s32[2] = {3, 2};
  pred = tensor_from(2, s32, p6);
  target = tensor_from(2, s32, t6);
  CHECK_OK(nn_loss_forward(mse, pred, target, &v));
  CHECK_NEAR(v, (0 + 4 + 0 + 9 + 0 + 16) / 6.0, 1e-6);

  /* BCEWithLogits against log(1 + e^-x) / log(1 + e^x), and finite for
   * logits of +-100 where the naive form overflows. */
  float lg[6] = {-2, 0.5f, 3, -100, 100, 1}, tg[6] = {0, 1, 0.25f, 1, 0, 0.5f};
  tensor *lp = tensor_from(2, s32, lg), *lt = tensor_from(2, s32, tg);
  double ref = 0;
  for (int i = 0; i < 6; i++) {
    double x = lg[i], t = tg[i];
    ref += t * log1p(exp(-x)) + (1 - t) * log1p(exp(x));
  }
  CHECK_OK(nn_loss_forward(bce, lp, lt, &v));
  CHECK(isfinite(v));
  CHECK_NEAR(v, ref / 6.0, 1e-4);
  FREE_TENSORS(lp, lt, pred, target);
  UNREF_LOSSES(ce, mse, bce);
  no_leaks();
}

TEST(nn_loss_correct_counts) {
  float lg[12] = {0.1f, 0.9f, 0.0f,   /* argmax 1 */
                  2.0f, -1.0f, 0.5f,  /* argmax 0 */
                  0.0f, 0.0f, 3.0f,   /* argmax 2 */
                  1.0f, 1.5f, 1.2f};  /* argmax 1 */
  float labels[4] = {1, 2, 2, 0};
  int64_t s43[2] = {4, 3};
  tensor *pred = tensor_from(2, s43, lg), *target = vec(4, labels);
  nn_loss *ce = nn_cross_entropy(), *mse = nn_mse(), *bce = nn_bce_with_logits();
  CHECK_INT_EQ(nn_loss_correct(ce, pred, target), 2);
  CHECK_INT_EQ(nn_loss_correct(mse, pred, target), -1);

  /* BCE: a row counts when each output's (logit > 0) matches (t > 0.5). */
  float bl[6] = {2, -1, -3, 0.5f, 1, 1}, bt[6] = {1, 0, 0, 0, 1, 0.75f};
  int64_t s32[2] = {3, 2};
  tensor *bp = tensor_from(2, s32, bl), *btg = tensor_from(2, s32, bt);
  CHECK_INT_EQ(nn_loss_correct(bce, bp, btg), 2);
  float one[3] = {-1, 2, 0};
  int64_t s31[2] = {3, 1};
  tensor *p1 = tensor_from(2, s31, one), *t1 = vec(3, (float[]){0, 0, 0});
  CHECK_INT_EQ(nn_loss_correct(bce, p1, t1), 2); /* 0 is not > 0: predicts 0 */
  FREE_TENSORS(p1, t1, bp, btg, pred, target);
  UNREF_LOSSES(ce, mse, bce);
  no_leaks();
}

/* ============================== semantics =============================== */

/* Gradients add up over backward calls until nn_zero_grad. */
TEST(nn_grad_accumulates) {
  rng_t r;
  rng_seed(&r, 12);
  nn_module *seq = seq_of(3, (nn_module *[]){nn_linear(3, 4, &r), nn_tanh(), nn_linear(4, 2, &r)});
  tensor *x = uniform(&r, 5, 3, -1, 1), *dy = uniform(&r, 5, 2, -1, 1);
  const tensor *y, *dx;
  CHECK_OK(nn_forward(seq, x, &y));
  CHECK_OK(nn_backward(seq, x, dy, &dx));
  nn_param_list ps = {0};
  CHECK_OK(nn_collect_params(seq, &ps));
  tensor *once[4];
  for (int i = 0; i < 4; i++) once[i] = tensor_clone(ps.items[i].grad);
  CHECK_OK(nn_backward(seq, x, dy, &dx));
  for (int i = 0; i < 4; i++) {
    CHECK_OK(tensor_scale(once[i], 2.0f));
    CHECK(tensor_max_abs_diff(ps.items[i].grad, once[i]) < 1e-5f);
    CHECK(tensor_sum(once[i]) != 0.0);
  }
  nn_zero_grad(seq);
  for (int i = 0; i < 4; i++) {
    const float *g = tensor_data(ps.items[i].grad);
    for (int64_t k = 0; k < tensor_numel(ps.items[i].grad); k++) CHECK(g[k] == 0.0f);
    tensor_free(once[i]);
  }
  nn_param_list_free(&ps);
  nn_unref(seq);
  FREE_TENSORS(x, dy);
  no_leaks();
}

/* Without an input gradient the parameter gradients are the same, and the
 * first layer never fills its dx buffer. */
TEST(nn_backward_without_dx) {
  rng_t r;
  rng_seed(&r, 13);
  nn_module *seq = seq_of(3, (nn_module *[]){nn_linear(3, 4, &r), nn_relu(), nn_linear(4, 2, &r)});
  nn_module *l1 = seq->children[0], *l2 = seq->children[2];
  tensor *x = uniform(&r, 6, 3, -1, 1), *dy = uniform(&r, 6, 2, -1, 1);
  const tensor *y, *dx;
  CHECK_OK(nn_forward(seq, x, &y));
  CHECK_OK(nn_backward(seq, x, dy, NULL));
  CHECK(l1->dx == NULL);
  CHECK(l2->dx != NULL);
  nn_param_list ps = {0};
  CHECK_OK(nn_collect_params(seq, &ps));
  tensor *without[4];
  for (int i = 0; i < 4; i++) without[i] = tensor_clone(ps.items[i].grad);
  nn_zero_grad(seq);
  CHECK_OK(nn_backward(seq, x, dy, &dx));
  CHECK(dx == l1->dx);
  for (int i = 0; i < 4; i++) {
    CHECK(tensor_max_abs_diff(ps.items[i].grad, without[i]) == 0.0f);
    tensor_free(without[i]);
  }
  nn_param_list_free(&ps);
  nn_unref(seq);
  FREE_TENSORS(x, dy);
  no_leaks();
}

TEST(nn_dropout_modes) {
  tensor *x = mat(100, 100), *dy = mat(100, 100);
  CHECK_OK(tensor_fill(x, 2.0f));
  CHECK_OK(tensor_fill(dy, 1.0f));
  nn_module *d = nn_dropout(0.3f, 42);
  const tensor *y, *dx;
  /* Training: about 30% zeroed, the rest scaled by 1/0.7; the gradient
   * goes through the same mask. */
  CHECK_OK(nn_forward(d, x, &y));
  CHECK_OK(nn_backward(d, x, dy, &dx));
  int64_t zeros = 0;
  for (int64_t i = 0; i < 10000; i++) {
    float v = tensor_data(y)[i], g = tensor_data(dx)[i];
    if (v == 0.0f) {
      zeros++;
      CHECK(g == 0.0f);
    } else {
      CHECK_NEAR(v, 2.0f / 0.7f, 1e-5);
      CHECK_NEAR(g, 1.0f / 0.7f, 1e-5);
    }
  }
  CHECK(zeros > 2700 && zeros < 3300);
  /* A new forward draws a new mask. */
  tensor *first = tensor_clone(y);
  CHECK_OK(nn_forward(d, x, &y));
  CHECK(tensor_max_abs_diff(first, y) > 0.0f);
  tensor_free(first);

  /* Evaluation: the identity both ways. */
  rng_t r;
  rng_seed(&r, 1);
  tensor *xr = uniform(&r, 7, 9, -1, 1), *dyr = uniform(&r, 7, 9, -1, 1);
  nn_set_training(d, false);
  CHECK_OK(nn_forward(d, xr, &y));
  CHECK(tensor_max_abs_diff(y, xr) == 0.0f);
  CHECK_OK(nn_backward(d, xr, dyr, &dx));
  CHECK(tensor_max_abs_diff(dx, dyr) == 0.0f);
  nn_unref(d);

  /* p = 1 drops everything; p outside [0, 1] is refused. */
  d = nn_dropout(1.0f, 1);
  CHECK_OK(nn_forward(d, x, &y));
  CHECK(tensor_sum(y) == 0.0);
  nn_unref(d);
  CHECK(nn_dropout(1.5f, 1) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "1.5");
  FREE_TENSORS(x, dy, xr, dyr);
  no_leaks();
}

TEST(nn_describe_torch7) {
  rng_t r;
  rng_seed(&r, 1);
  char buf[1024];
  nn_module *m = seq_of(3, (nn_module *[]){nn_linear(64, 128, &r), nn_relu(),
                                           nn_linear(128, 10, &r)});
  CHECK_INT_EQ(nn_describe(m, buf, sizeof buf), (int)strlen(buf));
  const char *want =
      "nn.Sequential {\n"
      "  [input -> (1) -> (2) -> (3) -> output]\n"
      "  (1): nn.Linear(64 -> 128)\n"
      "  (2): nn.ReLU\n"
      "  (3): nn.Linear(128 -> 10)\n"
      "}";
  if (strcmp(buf, want) != 0) harness_fail(__FILE__, __LINE__, "got:\n%s", buf);
  nn_unref(m);

  nn_module *inner = seq_of(2, (nn_module *[]){nn_linear(4, 4, &r), nn_tanh()});
  m = seq_of(5, (nn_module *[]){nn_dropout(0.5f, 1), inner, nn_sigmoid(), nn_softmax(),
                               nn_sequential()});
  nn_describe(m, buf, sizeof buf);
  want =
      "nn.Sequential {\n"
      "  [input -> (1) -> (2) -> (3) -> (4) -> (5) -> output]\n"
      "  (1): nn.Dropout(0.5)\n"
      "  (2): nn.Sequential {\n"
      "    [input -> (1) -> (2) -> output]\n"
      "    (1): nn.Linear(4 -> 4)\n"
      "    (2): nn.Tanh\n"
      "  }\n"
      "  (3): nn.Sigmoid\n"
      "  (4): nn.Softmax\n"
      "  (5): nn.Sequential {\n"
      "    [input -> output]\n"
      "  }\n"
      "}";
  if (strcmp(buf, want) != 0) harness_fail(__FILE__, __LINE__, "got:\n%s", buf);

  /* A short buffer is truncated, never overrun. */
  char small[20];
  memset(small, 'x', sizeof small);
  nn_describe(m, small, 12);
  CHECK(strcmp(small, "nn.Sequenti") == 0);
  CHECK(small[12] == 'x');
  nn_unref(m);

  nn_module *lin = nn_linear(3, 2, &r);
  nn_describe(lin, buf, sizeof buf);
  CHECK(strcmp(buf, "nn.Linear(3 -> 2)") == 0);
  nn_unref(lin);
  no_leaks();
}

TEST(nn_collect_params_names) {
  rng_t r;
  rng_seed(&r, 1);
  nn_module *inner = seq_of(2, (nn_module *[]){nn_linear(3, 4, &r), nn_relu()});
  nn_module *m = seq_of(3, (nn_module *[]){nn_linear(2, 3, &r), inner, nn_linear(4, 5, &r)});
  nn_param_list ps = {0};
  CHECK_OK(nn_collect_params(m, &ps));
  const char *names[] = {"1.weight", "1.bias", "2.1.weight", "2.1.bias", "3.weight", "3.bias"};
  CHECK_INT_EQ(ps.n, 6);
  int64_t total = 0;
  for (int i = 0; i < 6; i++) {
    if (strcmp(ps.items[i].name, names[i]) != 0)
      harness_fail(__FILE__, __LINE__, "param %d is %s, expected %s", i, ps.items[i].name,
                   names[i]);
    CHECK(tensor_same_shape(ps.items[i].value, ps.items[i].grad));
    total += tensor_numel(ps.items[i].value);
  }
  CHECK(ps.items[2].value == inner->children[0]->params[0].value);
  CHECK_INT_EQ(total, 2 * 3 + 3 + 3 * 4 + 4 + 4 * 5 + 5);
  CHECK_INT_EQ(nn_num_params(m), total);
  nn_param_list_free(&ps);
  CHECK(ps.items == NULL && ps.n == 0);
  nn_unref(m);
  no_leaks();
}

/* ============================== errors ================================== */

TEST(nn_shape_errors) {
  rng_t r;
  rng_seed(&r, 1);
  nn_module *lin = nn_linear(64, 128, &r);
  tensor *x = mat(32, 10), *x3 = tensor_new(3, (int64_t[]){2, 3, 64});
  const tensor *y, *dx;
  CHECK_ERR(nn_forward(lin, x, &y), DRV_ESHAPE,
            "nn.Linear(64 -> 128): input [32, 10] has 10 features, expected 64");
  CHECK_ERR(nn_forward(lin, x3, &y), DRV_ESHAPE, "input [2, 3, 64] is not 2-D");
  tensor *good = mat(32, 64), *dy = mat(32, 64);
  CHECK_OK(nn_forward(lin, good, &y));
  CHECK_ERR(nn_backward(lin, good, dy, &dx), DRV_ESHAPE,
            "gradient [32, 64] does not match the output [32, 128]");

  /* Inside a Sequential the message says which layer. */
  nn_module *m = seq_of(3, (nn_module *[]){nn_linear(10, 64, &r), nn_relu(), nn_linear(128, 10, &r)});
  CHECK_ERR(nn_forward(m, x, &y), DRV_ESHAPE,
            "layer 3: nn.Linear(128 -> 10): input [32, 64] has 64 features, expected 128");
  nn_module *outer = seq_of(1, (nn_module *[]){nn_ref(m)});
  CHECK_ERR(nn_forward(outer, x, &y), DRV_ESHAPE, "layer 1.3: nn.Linear(128 -> 10)");
  UNREF(outer, m);

  nn_module *relu = nn_relu();
  CHECK_OK(nn_forward(relu, x, &y));
  CHECK_ERR(nn_backward(relu, x, dy, &dx), DRV_ESHAPE, "gradient [32, 64] does not match the output [32, 10]");
  nn_unref(relu);

  /* Tanh needs its forward output. */
  nn_module *th = nn_tanh();
  CHECK_ERR(nn_backward(th, x, x, &dx), DRV_EINVAL, "without a forward");
  nn_unref(th);

  nn_loss *ce = nn_cross_entropy(), *mse = nn_mse();
  tensor *t5 = tensor_new1(5), *t32 = mat(32, 3);
  float v;
  CHECK_ERR(nn_loss_forward(ce, x, t5, &v), DRV_ESHAPE, "prediction [32, 10] and target [5]");
  CHECK_ERR(nn_loss_forward(mse, x, t32, &v), DRV_ESHAPE,
            "prediction [32, 10] and target [32, 3] do not match");
  UNREF_LOSSES(ce, mse);
  FREE_TENSORS(t5, t32, x, x3, good, dy);
  nn_unref(lin);
  no_leaks();
}

TEST(nn_cross_entropy_bad_labels) {
  tensor *pred = mat(3, 4);
  nn_loss *ce = nn_cross_entropy();
  const tensor *g;
  float v;
  struct {
    float label;
    const char *needle;
  } bad[] = {{2.5f, "target row 1 has class 2.5, expected an integer in 0..3"},
             {-1.0f, "row 1 has class -1"},
             {4.0f, "row 1 has class 4"},
             {NAN, "row 1 has class nan"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tensor *t = vec(3, (float[]){0, bad[i].label, 3});
    CHECK_ERR(nn_loss_forward(ce, pred, t, &v), DRV_ERANGE, bad[i].needle);
    CHECK_ERR(nn_loss_backward(ce, pred, t, &g), DRV_ERANGE, bad[i].needle);
    CHECK_ERR(nn_loss_correct(ce, pred, t), DRV_ERANGE, bad[i].needle);
    tensor_free(t);
  }
  nn_loss *bce = nn_bce_with_logits();
  tensor *t = mat(3, 4);
  tensor_data(t)[5] = 1.5f;
  CHECK_ERR(nn_loss_forward(bce, pred, t, &v), DRV_ERANGE, "target [1, 1] is 1.5");
  tensor_free(t);
  UNREF_LOSSES(bce, ce);
  tensor_free(pred);
  no_leaks();
}

/* ============================== lifetime ================================ */

/* A warm step reuses every buffer; a smaller batch fits in the same storage. */
TEST(nn_buffers_reused) {
  rng_t r;
  rng_seed(&r, 3);
  nn_module *m = seq_of(4, (nn_module *[]){nn_linear(8, 16, &r), nn_relu(), nn_dropout(0.2f, 1),
                                          nn_linear(16, 4, &r)});
  nn_loss *ce = nn_cross_entropy();
  tensor *x = uniform(&r, 32, 8, -1, 1), *lab = tensor_new1(32);
  for (int i = 0; i < 32; i++) tensor_data(lab)[i] = (float)(i % 4);
  const float *before[8] = {0}, *after[8] = {0};
  for (int step = 0; step < 3; step++) {
    if (step == 2) { /* batch 32 -> 16, as a view of the first rows */
      tensor *half = tensor_narrow(x, 0, 0, 16), *hl = tensor_narrow(lab, 0, 0, 16);
      FREE_TENSORS(x, lab);
      x = half;
      lab = hl;
    }
    const tensor *y, *g, *dx;
    float v;
    nn_zero_grad(m);
    CHECK_OK(nn_forward(m, x, &y));
    CHECK_OK(nn_loss_forward(ce, y, lab, &v));
    CHECK_OK(nn_loss_backward(ce, y, lab, &g));
    CHECK_OK(nn_backward(m, x, g, &dx));
    const float **rec = step == 0 ? before : after;
    for (int i = 0; i < 4; i++) rec[i] = tensor_data(m->children[i]->out);
    for (int i = 1; i < 4; i++) rec[4 + i - 1] = tensor_data(m->children[i]->dx);
    rec[7] = tensor_data(ce->grad);
    if (step > 0)
      for (int i = 0; i < 8; i++) CHECK(before[i] == after[i]);
  }
  CHECK_INT_EQ(m->children[3]->out->shape[0], 16);
  FREE_TENSORS(x, lab);
  nn_loss_unref(ce);
  nn_unref(m);
  no_leaks();
}

/* Children are shared by reference; the ASan build proves no leak and no
 * use after free. */
TEST(nn_refcount_shared_child) {
  rng_t r;
  rng_seed(&r, 4);
  nn_module *lin = nn_linear(3, 2, &r);
  nn_module *a = nn_sequential(), *b = nn_sequential();
  CHECK_OK(nn_sequential_add(a, lin));
  CHECK_OK(nn_sequential_add(b, lin));
  CHECK_INT_EQ(lin->refs, 3);
  nn_unref(lin); /* now owned by a and b only */
  nn_unref(a);
  CHECK_INT_EQ(lin->refs, 1);
  tensor *x = uniform(&r, 2, 3, -1, 1);
  const tensor *y;
  CHECK_OK(nn_forward(b, x, &y));
  CHECK_INT_EQ(y->shape[1], 2);

  /* Cycles and repeats are refused. */
  nn_module *c = nn_sequential();
  CHECK_ERR(nn_sequential_add(b, b), DRV_EINVAL, "cycle");
  CHECK_OK(nn_sequential_add(c, b));
  CHECK_ERR(nn_sequential_add(b, c), DRV_EINVAL, "cycle");
  CHECK_ERR(nn_sequential_add(b, lin), DRV_EINVAL, "nn.Linear(3 -> 2) is already part");
  nn_module *holder = seq_of(1, (nn_module *[]){nn_ref(lin)});
  CHECK_ERR(nn_sequential_add(c, holder), DRV_EINVAL, "already part");
  CHECK_ERR(nn_sequential_add(lin, b), DRV_EINVAL, "not an nn.Sequential");
  nn_unref(holder);
  CHECK(nn_ref(b) == b);
  nn_unref(b);
  nn_unref(b);
  nn_unref(c); /* frees b, then lin */
  nn_unref(NULL);
  nn_loss *l = nn_mse();
  CHECK(nn_loss_ref(l) == l);
  nn_loss_unref(l);
  nn_loss_unref(l);
  nn_loss_unref(NULL);
  tensor_free(x);
  no_leaks();
}

/* ============================== layers of issue 16 ====================== */

static tensor *uniform4(rng_t *r, int64_t n, int64_t c, int64_t h, int64_t w, float lo,
                        float hi) {
  tensor *t = tensor_new(4, (int64_t[]){n, c, h, w});
  CHECK(t != NULL);
  CHECK_OK(tensor_uniform(t, r, lo, hi));
  return t;
}

/* Distinct values 0.1 apart in a random order: no two elements of a pool
 * window come within eps of each other, so the max never switches. */
static tensor *spread4(rng_t *r, int64_t n, int64_t c, int64_t h, int64_t w) {
  tensor *t = uniform4(r, n, c, h, w, 0, 1);
  float *p = tensor_data(t);
  int64_t k = tensor_numel(t);
  for (int64_t i = 0; i < k; i++) p[i] = 0.1f * (float)(i - k / 2);
  for (int64_t i = k - 1; i > 0; i--) {
    int64_t j = (int64_t)(rng_uniform(r) * (float)(i + 1)) % (i + 1);
    float v = p[i];
    p[i] = p[j];
    p[j] = v;
  }
  return t;
}

TEST(nn_grad_conv2d) {
  rng_t r;
  rng_seed(&r, 21);
  nn_conv_opts o = {.stride = {2, 2}, .padding = {1, 1}, .dilation = {1, 1}, .bias = true};
  gradcheck_single(nn_conv2d_square(2, 3, 3, &o, &r), uniform4(&r, 2, 2, 5, 6, -1, 1), 1e-2f);
  nn_conv_opts d = {.stride = {1, 1}, .padding = {2, 2}, .dilation = {2, 2}, .bias = false};
  gradcheck_single(nn_conv2d_square(3, 2, 2, &d, &r), uniform4(&r, 3, 3, 4, 4, -1, 1), 1e-2f);
  no_leaks();
}

/* Non-square kernels, strides, paddings and dilations, and groups of
 * examples smaller than the batch (a 1-channel 40x40 input in groups). */
TEST(nn_grad_conv2d_pairs) {
  rng_t r;
  rng_seed(&r, 31);
  nn_conv_opts o = {.stride = {2, 1}, .padding = {0, 2}, .dilation = {1, 2}, .bias = true};
  gradcheck_single(nn_conv2d(2, 3, (int64_t[2]){3, 2}, &o, &r), uniform4(&r, 2, 2, 7, 5, -1, 1),
                   1e-2f);
  nn_conv_opts q = {.stride = {1, 3}, .padding = {1, 0}, .dilation = {2, 1}, .bias = false};
  gradcheck_single(nn_conv2d(1, 2, (int64_t[2]){1, 4}, &q, &r), uniform4(&r, 3, 1, 4, 9, -1, 1),
                   1e-2f);
  nn_module *c = nn_conv2d(2, 2, (int64_t[2]){2, 5}, &o, &r);
  char buf[128] = "";
  nn_describe(c, buf, sizeof buf);
  CHECK_STR_CONTAINS(buf, "nn.Conv2d(2 -> 2, 2x5, stride 2x1, padding 0x2, dilation 1x2)");
  nn_unref(c);
  no_leaks();
}

TEST(nn_grad_pools) {
  rng_t r;
  rng_seed(&r, 22);
  gradcheck_single(nn_maxpool2d_square(2, 0, 0), spread4(&r, 2, 2, 4, 5), 1e-2f);
  gradcheck_single(nn_maxpool2d_square(3, 2, 1), spread4(&r, 1, 3, 5, 5), 1e-2f);
  gradcheck_single(nn_avgpool2d_square(3, 2, 1), uniform4(&r, 2, 2, 5, 4, -1, 1), 1e-2f);
  gradcheck_single(nn_avgpool2d_square(2, 1, 0), uniform4(&r, 1, 2, 3, 3, -1, 1), 1e-2f);
  /* {height, width} kernels, strides and paddings */
  gradcheck_single(nn_maxpool2d((int64_t[2]){2, 3}, (int64_t[2]){1, 2}, (int64_t[2]){1, 0}),
                   spread4(&r, 2, 2, 5, 7), 1e-2f);
  gradcheck_single(nn_maxpool2d((int64_t[2]){3, 1}, NULL, NULL), spread4(&r, 1, 2, 7, 3), 1e-2f);
  gradcheck_single(nn_avgpool2d((int64_t[2]){3, 2}, (int64_t[2]){2, 1}, (int64_t[2]){1, 1}),
                   uniform4(&r, 2, 2, 6, 5, -1, 1), 1e-2f);
  gradcheck_single(nn_avgpool2d((int64_t[2]){1, 4}, (int64_t[2]){1, 3}, NULL),
                   uniform4(&r, 1, 3, 3, 8, -1, 1), 1e-2f);
  nn_module *p = nn_avgpool2d((int64_t[2]){3, 2}, (int64_t[2]){2, 1}, (int64_t[2]){1, 0});
  char buf[128] = "";
  nn_describe(p, buf, sizeof buf);
  CHECK_STR_CONTAINS(buf, "nn.AvgPool2d(3x2, stride 2x1, padding 1x0)");
  tensor *x = tensor_new(4, (int64_t[]){2, 3, 9, 8});
  const tensor *y;
  CHECK_OK(nn_forward(p, x, &y)); /* (9 + 2 - 3) / 2 + 1, (8 - 2) / 1 + 1 */
  CHECK(y->ndim == 4 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 5 && y->shape[3] == 7);
  nn_unref(p);
  tensor_free(x);
  no_leaks();
}

TEST(nn_grad_gelu_leaky_identity) {
  rng_t r;
  rng_seed(&r, 23);
  gradcheck_single(nn_gelu(), uniform(&r, 4, 5, -3, 3), 1e-2f);
  gradcheck_single(nn_leaky_relu(0.2f), away_from_zero(&r, 4, 5, 0.1f, 1.0f), 1e-2f);
  gradcheck_single(nn_leaky_relu(-0.5f), away_from_zero(&r, 3, 3, 0.1f, 1.0f), 1e-2f);
  gradcheck_single(nn_identity(), uniform(&r, 3, 4, -1, 1), 1e-2f);
  gradcheck_single(nn_gelu(), uniform4(&r, 2, 2, 2, 3, -2, 2), 1e-2f); /* any shape */
  no_leaks();
}

/* Unflatten -> Conv2d -> Tanh -> AvgPool2d -> Flatten -> Linear, with
 * respect to the rows and all parameters. */
TEST(nn_grad_conv_model) {
  rng_t r;
  rng_seed(&r, 24);
  nn_conv_opts o = NN_CONV_DEFAULTS;
  o.padding[0] = o.padding[1] = 1;
  nn_module *m = seq_of(6, (nn_module *[]){nn_unflatten(3, (int64_t[]){2, 4, 4}),
                                           nn_conv2d_square(2, 3, 3, &o, &r), nn_tanh(),
                                           nn_avgpool2d_square(2, 0, 0), nn_flatten(),
                                           nn_linear(12, 4, &r)});
  gradcheck_single(m, uniform(&r, 3, 32, -1, 1), 1e-2f);
  no_leaks();
}

/* The 2x2 stride-2 pools' own loops (nn_conv.c): odd sizes leave the last
 * row and column out (their gradient 0), ties go to the first element,
 * NaN wins; backward writes every gradient without a cleared dx. */
TEST(nn_pool_2x2_fast_path) {
  float xs[15] = {1, 3, 3, 0, 9,   /* [1, 1, 3, 5]: windows (0,0) (0,1), */
                  2, 3, 1, 3, 9,   /* row 2 and column 4 left out */
                  7, 7, 7, 7, 7};
  xs[3] = NAN;
  tensor *x = tensor_from(4, (int64_t[]){1, 1, 3, 5}, xs);
  tensor *dy = tensor_from(4, (int64_t[]){1, 1, 1, 2}, (float[]){10, 20});
  nn_module *mx = nn_maxpool2d_square(2, 0, 0), *av = nn_avgpool2d_square(2, 0, 0);
  const tensor *y, *dx;
  for (int round = 0; round < 2; round++) { /* the second reuses dx uncleared */
    CHECK_OK(nn_forward(mx, x, &y));
    CHECK_INT_EQ(y->shape[2], 1);
    CHECK_INT_EQ(y->shape[3], 2);
    CHECK_NEAR(tensor_data(y)[0], 3, 0); /* 1 3 / 2 3: the first 3 */
    CHECK(isnan(tensor_data(y)[1]));
    CHECK_OK(nn_backward(mx, x, dy, &dx));
    float want[15] = {0, 10, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 15; i++) CHECK_NEAR(tensor_data(dx)[i], want[i], 0);
  }
  CHECK_OK(nn_forward(av, x, &y));
  CHECK_NEAR(tensor_data(y)[0], 2.25f, 1e-6);
  CHECK_OK(nn_backward(av, x, dy, &dx));
  float wavg[15] = {2.5f, 2.5f, 5, 5, 0, 2.5f, 2.5f, 5, 5, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 15; i++) CHECK_NEAR(tensor_data(dx)[i], wavg[i], 1e-6);
  UNREF(mx, av);
  FREE_TENSORS(x, dy);
  no_leaks();
}

TEST(nn_conv_pool_values) {
  rng_t r;
  rng_seed(&r, 25);
  float xs[16];
  for (int i = 0; i < 16; i++) xs[i] = (float)(i + 1);
  tensor *x3 = tensor_from(4, (int64_t[]){1, 1, 3, 3}, xs);
  tensor *x4 = tensor_from(4, (int64_t[]){1, 1, 4, 4}, xs);
  nn_module *c = nn_conv2d_square(1, 1, 2, NULL, &r);
  CHECK(c != NULL);
  CHECK_OK(tensor_fill(c->params[0].value, 1.0f));
  CHECK_OK(tensor_fill(c->params[1].value, 0.5f));
  const tensor *y;
  CHECK_OK(nn_forward(c, x3, &y));
  float want[4] = {12.5f, 16.5f, 24.5f, 28.5f};
  CHECK_INT_EQ(y->ndim, 4);
  for (int i = 0; i < 4; i++) CHECK_NEAR(tensor_data(y)[i], want[i], 1e-6);
  nn_module *mx = nn_maxpool2d_square(2, 0, 0), *av = nn_avgpool2d_square(2, 0, 0);
  CHECK_OK(nn_forward(mx, x4, &y));
  float wmax[4] = {6, 8, 14, 16}, wavg[4] = {3.5f, 5.5f, 11.5f, 13.5f};
  for (int i = 0; i < 4; i++) CHECK_NEAR(tensor_data(y)[i], wmax[i], 0);
  CHECK_OK(nn_forward(av, x4, &y));
  for (int i = 0; i < 4; i++) CHECK_NEAR(tensor_data(y)[i], wavg[i], 1e-6);
  char buf[256];
  nn_module *s = seq_of(3, (nn_module *[]){nn_ref(c), nn_ref(mx), nn_leaky_relu(0.1f)});
  nn_describe(s, buf, sizeof buf);
  CHECK(strstr(buf, "(1): nn.Conv2d(1 -> 1, 2x2)") && strstr(buf, "(2): nn.MaxPool2d(2x2)") &&
        strstr(buf, "(3): nn.LeakyReLU(0.1)"));
  UNREF(s, c, mx, av);
  FREE_TENSORS(x3, x4);
  no_leaks();
}

TEST(nn_conv_shape_errors) {
  rng_t r;
  rng_seed(&r, 26);
  nn_module *c = nn_conv2d_square(3, 4, 3, NULL, &r);
  tensor *x2 = mat(2, 27), *small = tensor_new(4, (int64_t[]){1, 3, 2, 2});
  tensor *wrong = tensor_new(4, (int64_t[]){1, 2, 5, 5});
  const tensor *y;
  CHECK_ERR(nn_forward(c, x2, &y), DRV_ESHAPE,
            "nn.Conv2d(3 -> 4, 3x3): input [2, 27] is not [batch, 3, height, width]");
  CHECK_ERR(nn_forward(c, wrong, &y), DRV_ESHAPE, "input [1, 2, 5, 5] is not [batch, 3,");
  CHECK_ERR(nn_forward(c, small, &y), DRV_ESHAPE, "is smaller than the kernel");
  CHECK(nn_maxpool2d_square(2, 2, 2) == NULL);
  CHECK(strstr(err_msg(), "padding in 0..kernel/2") != NULL);
  CHECK(nn_conv2d_square(0, 1, 1, NULL, &r) == NULL);
  nn_module *u = nn_unflatten(2, (int64_t[]){3, 3});
  CHECK_ERR(nn_forward(u, x2, &y), DRV_ESHAPE, "nn.Unflatten(3x3): input [2, 27] is not [batch, 9]");
  UNREF(c, u);
  FREE_TENSORS(x2, small, wrong);
  no_leaks();
}

/* Bounds of PyTorch's formulas, reached closely by a few thousand draws. */
static void check_init(nn_module *m, const char *how, double bound, bool zero_bias) {
  rng_t r;
  rng_seed(&r, 27);
  CHECK_OK(nn_init(m, how, &r));
  const tensor *w = m->params[0].value, *b = m->params[1].value;
  float mx = 0;
  for (int64_t i = 0; i < tensor_numel(w); i++) mx = fmaxf(mx, fabsf(tensor_data(w)[i]));
  CHECK(mx <= bound && mx > 0.98 * bound);
  float bmx = 0;
  for (int64_t i = 0; i < tensor_numel(b); i++) bmx = fmaxf(bmx, fabsf(tensor_data(b)[i]));
  CHECK(zero_bias ? bmx == 0 : (bmx > 0 && bmx <= bound));
}

TEST(nn_init_formulas) {
  rng_t r;
  rng_seed(&r, 28);
  nn_module *lin = nn_linear(50, 80, &r), *conv = nn_conv2d_square(6, 40, 3, NULL, &r);
  check_init(lin, "uniform", 1 / sqrt(50.0), false);
  check_init(lin, "kaiming", sqrt(6 / 50.0), true);
  check_init(lin, "xavier", sqrt(6 / 130.0), true);
  check_init(conv, "kaiming", sqrt(6 / 54.0), true);
  check_init(conv, "xavier", sqrt(6 / (54.0 + 360.0)), true);
  check_init(conv, "uniform", 1 / sqrt(54.0), false);
  nn_module *s = seq_of(2, (nn_module *[]){nn_ref(lin), nn_relu()});
  CHECK_ERR(nn_init(s, "he", &r), DRV_EINVAL, "unknown init 'he' (known: uniform, kaiming, xavier)");
  CHECK_OK(nn_init(s, "kaiming", &r)); /* reaches the Linear inside */
  CHECK(tensor_data(lin->params[1].value)[0] == 0.0f);
  UNREF(s, lin, conv);
  no_leaks();
}

TEST(nn_grad_new_losses) {
  rng_t r;
  rng_seed(&r, 29);
  tensor *pred = uniform(&r, 4, 3, -2, 2), *target = mat(4, 3);
  float *p = tensor_data(pred), *t = tensor_data(target);
  /* |d| between 0.1 and 0.4 or 0.6 and 0.9 here: away from 0 (L1's kink)
   * and from 0.5 (Huber's delta). */
  for (int i = 0; i < 12; i++) t[i] = p[i] + (i % 2 ? 1 : -1) * (i % 3 ? 0.25f : 0.75f);
  nn_loss *l1 = nn_l1(), *hu = nn_huber(0.5f), *nll = nn_nll();
  gradcheck_loss(l1, pred, target);
  gradcheck_loss(hu, pred, target);
  float labels[4] = {2, 0, 1, 2};
  tensor *ids = vec(4, labels);
  gradcheck_loss(nll, pred, ids);
  float v;
  CHECK_OK(nn_loss_forward(nll, pred, ids, &v));
  CHECK_NEAR(v, -(p[2] + p[3] + p[7] + p[11]) / 4, 1e-6);
  CHECK_OK(nn_loss_forward(l1, pred, target, &v));
  CHECK_NEAR(v, (8 * 0.25 + 4 * 0.75) / 12, 1e-6);
  CHECK_OK(nn_loss_forward(hu, pred, target, &v));
  CHECK_NEAR(v, (8 * 0.5 * 0.0625 + 4 * 0.5 * (0.75 - 0.25)) / 12, 1e-6);
  CHECK_INT_EQ(nn_loss_correct(l1, pred, target), -1);
  CHECK(nn_loss_correct(nll, pred, ids) >= 0);
  CHECK(nn_huber(0.0f) == NULL);
  CHECK_ERR(nn_loss_forward(nll, pred, target, &v), DRV_ESHAPE, "nn.NLL: prediction [4, 3]");
  UNREF_LOSSES(l1, hu, nll);
  FREE_TENSORS(pred, target, ids);
  no_leaks();
}

TEST(nn_grad_norms) {
  rng_t r;
  rng_seed(&r, 31);
  gradcheck_single(nn_layer_norm(5, 1e-5f), uniform(&r, 4, 5, -2, 2), 1e-2f);
  gradcheck_single(nn_layer_norm(3, 1e-3f), uniform4(&r, 2, 2, 2, 3, -2, 2), 1e-2f);
  gradcheck_single(nn_batch_norm(1, 3, 1e-5f, 0.1f), uniform(&r, 6, 3, -2, 2), 1e-2f);
  gradcheck_single(nn_batch_norm(2, 2, 1e-5f, 0.1f), uniform4(&r, 3, 2, 2, 3, -2, 2), 1e-2f);
  /* Evaluation: the running statistics are constants. */
  nn_module *bn = nn_batch_norm(2, 2, 1e-5f, 0.5f);
  tensor *warm = uniform4(&r, 4, 2, 3, 3, 1, 3);
  const tensor *y;
  CHECK_OK(nn_forward(bn, warm, &y));
  CHECK(tensor_data(bn->buffers[0].value)[0] > 0.5f); /* mean ~2, momentum 0.5 */
  CHECK(tensor_data(bn->buffers[2].value)[0] == 1.0f);
  nn_set_training(bn, false);
  tensor_free(warm);
  gradcheck_single(bn, uniform4(&r, 2, 2, 2, 2, -2, 2), 1e-2f);
  no_leaks();
}

TEST(nn_batch_norm_statistics) {
  float xs[6] = {1, 10, 2, 20, 3, 30}; /* [3, 2]: channel 0 is 1,2,3; channel 1 10,20,30 */
  tensor *x = tensor_from(2, (int64_t[]){3, 2}, xs);
  nn_module *bn = nn_batch_norm(1, 2, 1e-5f, 0.1f);
  const tensor *y;
  CHECK_OK(nn_forward(bn, x, &y));
  /* xhat of 3 with mean 2 and biased variance 2/3 */
  CHECK_NEAR(at(y, 2, 0), 1.0f / sqrtf(2.0f / 3.0f + 1e-5f), 1e-5);
  CHECK_NEAR(tensor_data(bn->buffers[0].value)[0], 0.2f, 1e-6);           /* 0.1 * 2 */
  CHECK_NEAR(tensor_data(bn->buffers[1].value)[1], 0.9f + 0.1f * 100, 1e-4); /* unbiased 100 */
  tensor *one = mat(1, 2);
  CHECK_ERR(nn_forward(bn, one, &y), DRV_ESHAPE, "more than one value per channel");
  nn_set_training(bn, false);
  CHECK_OK(nn_forward(bn, one, &y));
  tensor *x4 = mat(3, 3);
  CHECK_ERR(nn_forward(bn, x4, &y), DRV_ESHAPE,
            "nn.BatchNorm1d(2): input [3, 3] is not [batch, channels] or [batch, channels, length]");
  nn_param_list st = {0};
  CHECK_OK(nn_torch_state(bn, &st));
  CHECK_INT_EQ(st.n, 5);
  CHECK(strcmp(st.items[4].name, "num_batches_tracked") == 0 && st.items[4].value->ndim == 0);
  nn_param_list_free(&st);
  CHECK_INT_EQ(nn_num_params(bn), 4);
  nn_unref(bn);
  FREE_TENSORS(x, one, x4);
  no_leaks();
}

TEST(nn_embedding_rows_and_grads) {
  rng_t r;
  rng_seed(&r, 32);
  nn_module *e = nn_embedding(4, 3, &r);
  float ids[4] = {1, 3, 1, 0};
  tensor *x = tensor_from(2, (int64_t[]){2, 2}, ids);
  const tensor *y, *dx;
  CHECK_OK(nn_forward(e, x, &y));
  CHECK_INT_EQ(y->ndim, 3);
  const float *w = tensor_data(e->params[0].value);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) CHECK(tensor_data(y)[i * 3 + j] == w[(int)ids[i] * 3 + j]);
  tensor *dy = tensor_new(3, (int64_t[]){2, 2, 3});
  CHECK_OK(tensor_fill(dy, 1.0f));
  nn_zero_grad(e);
  CHECK_OK(nn_backward(e, x, dy, &dx));
  const float *g = tensor_data(e->params[0].grad);
  float want[4] = {1, 2, 0, 1}; /* how often each id occurs */
  for (int i = 0; i < 4; i++) CHECK(g[i * 3] == want[i] && g[i * 3 + 2] == want[i]);
  CHECK(tensor_sum(dx) == 0.0);
  tensor_data(x)[2] = 4;
  CHECK_ERR(nn_forward(e, x, &y), DRV_ERANGE, "nn.Embedding(4, 3): input element 2 is 4");
  tensor_data(x)[2] = 0.5f;
  CHECK_ERR(nn_forward(e, x, &y), DRV_ERANGE, "expected an id in 0..3");
  nn_unref(e);
  FREE_TENSORS(x, dy);
  no_leaks();
}

/* Residual(Linear -> Tanh) and a Concat of a Linear and a Sequential, with
 * respect to the input and every parameter; Concat of 4-D outputs joins
 * channels. */
TEST(nn_grad_containers) {
  rng_t r;
  rng_seed(&r, 33);
  nn_module *res = nn_residual(seq_of(2, (nn_module *[]){nn_linear(4, 4, &r), nn_tanh()}));
  CHECK(res != NULL);
  nn_unref(res->children[0]); /* seq_of's reference; res keeps its own */
  gradcheck_single(res, uniform(&r, 3, 4, -1, 1), 1e-2f);
  nn_module *cat = nn_concat();
  nn_module *a = nn_linear(4, 2, &r), *b = seq_of(2, (nn_module *[]){nn_linear(4, 3, &r), nn_tanh()});
  CHECK_OK(nn_sequential_add(cat, a));
  CHECK_OK(nn_sequential_add(cat, b));
  UNREF(a, b);
  gradcheck_single(cat, uniform(&r, 3, 4, -1, 1), 1e-2f);
  nn_conv_opts o = NN_CONV_DEFAULTS;
  o.padding[0] = o.padding[1] = 1;
  nn_module *c4 = nn_concat(), *c1 = nn_conv2d_square(2, 1, 3, &o, &r), *c2 = nn_avgpool2d_square(3, 1, 1);
  CHECK_OK(nn_sequential_add(c4, c1));
  CHECK_OK(nn_sequential_add(c4, c2));
  UNREF(c1, c2);
  tensor *x = uniform4(&r, 2, 2, 3, 3, -1, 1);
  const tensor *y;
  CHECK_OK(nn_forward(c4, x, &y));
  CHECK(y->ndim == 4 && y->shape[1] == 3 && y->shape[2] == 3);
  CHECK(tensor_data(y)[9] == tensor_data(c4->children[1]->out)[0]); /* channel 2 = pool's 1 */
  gradcheck_single(c4, x, 1e-2f);
  /* Sum of a Linear and a Sequential of the same output width. */
  nn_module *sum = nn_sum();
  nn_module *s1 = nn_linear(4, 3, &r), *s2 = seq_of(2, (nn_module *[]){nn_linear(4, 3, &r), nn_tanh()});
  CHECK_OK(nn_sequential_add(sum, s1));
  CHECK_OK(nn_sequential_add(sum, s2));
  UNREF(s1, s2);
  tensor *xs = uniform(&r, 3, 4, -1, 1);
  CHECK_OK(nn_forward(sum, xs, &y));
  /* a Sequential keeps no output of its own: its last layer's is it */
  const float want = tensor_data(sum->children[0]->out)[4] +
                     tensor_data(sum->children[1]->children[1]->out)[4];
  CHECK(tensor_data(y)[4] == want);
  gradcheck_single(sum, xs, 1e-2f);
  no_leaks();
}

TEST(nn_container_errors) {
  rng_t r;
  rng_seed(&r, 34);
  nn_module *lin = nn_linear(4, 3, &r), *res = nn_residual(lin);
  tensor *x = mat(2, 4);
  const tensor *y;
  CHECK_ERR(nn_forward(res, x, &y), DRV_ESHAPE, "nn.Residual: its module maps [2, 4] to [2, 3]");
  nn_module *cat = nn_concat(), *u = nn_unflatten(2, (int64_t[]){2, 2}), *l2 = nn_linear(4, 3, &r);
  CHECK_OK(nn_sequential_add(cat, l2));
  CHECK_OK(nn_sequential_add(cat, u));
  CHECK_ERR(nn_forward(cat, x, &y), DRV_ESHAPE, "nn.Concat: output 2 is [2, 2, 2], output 1 is [2, 3]");
  nn_module *sm = nn_sum(), *l3 = nn_linear(4, 3, &r), *l4 = nn_linear(4, 2, &r);
  CHECK_OK(nn_sequential_add(sm, l3));
  CHECK_OK(nn_sequential_add(sm, l4));
  CHECK_ERR(nn_forward(sm, x, &y), DRV_ESHAPE, "nn.Sum: output 2 is [2, 2], output 1 is [2, 3]");
  UNREF(sm, l3, l4);
  CHECK_ERR(nn_sequential_add(res, lin), DRV_EINVAL, "not an nn.Sequential, nn.Concat or nn.Sum");
  char buf[512];
  nn_module *s = seq_of(2, (nn_module *[]){nn_ref(res), nn_ref(cat)});
  nn_describe(s, buf, sizeof buf);
  CHECK(strstr(buf, "(1): nn.Residual {\n    [input -> (1) -> output]\n    (1): nn.Linear(4 -> 3)") != NULL);
  CHECK(strstr(buf, "(2): nn.Concat {\n    [input -> (1) | (2) -> output]") != NULL);
  UNREF(s, lin, res, cat, u, l2);
  tensor_free(x);
  no_leaks();
}
