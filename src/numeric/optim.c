/* optim.c - SGD, Adam, AdamW, Adagrad and RMSprop as fused passes over
 * flat float arrays (PyTorch semantics; see optim.h), and their binding to a
 * model's parameter list.
 *
 * The update loops run once per parameter tensor per training step, so each
 * is a single pass over contiguous floats with restrict pointers and no
 * branch on the configuration inside the loop: the variant is chosen before
 * the loop and folded into per-call coefficients computed in double.
 */
/* GCC at -O2 vectorises only loops whose trip count is a known multiple of
 * the vector width ("very-cheap" cost model), which would leave these
 * kernels scalar (measured 4-10x slower on a 270k-parameter update). The
 * loops that call sqrtf also need -fno-math-errno on the command line (GCC
 * 12 ignores it in a pragma or attribute): with errno, sqrtf is a call the
 * vectoriser must keep. Nothing here reads errno. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#include "numeric/optim.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* ---- configuration ----------------------------------------------------- */

static const char *const kind_names[] = {
    [OPTIM_SGD] = "SGD",
    [OPTIM_ADAM] = "Adam",
    [OPTIM_ADAMW] = "AdamW",
    [OPTIM_ADAGRAD] = "Adagrad",
    [OPTIM_RMSPROP] = "RMSprop",
    [OPTIM_FTRL] = "FTRL",
};
#define NKINDS ((int)(sizeof kind_names / sizeof kind_names[0]))

static bool kind_valid(optim_kind k) { return (int)k >= 0 && (int)k < NKINDS; }

const char *optim_kind_name(optim_kind k) {
  return kind_valid(k) ? kind_names[k] : "?";
}

int optim_kind_from_name(const char *name) {
  for (int i = 0; name && i < NKINDS; i++)
    if (strcmp(name, kind_names[i]) == 0) return i;
  return -1;
}

void optim_cfg_default(optim_cfg *c, optim_kind kind) {
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->beta1 = 0.9f;
  c->beta2 = 0.999f;
  c->alpha = 0.99f;
  switch (kind) {
  case OPTIM_SGD: c->lr = 0.01f; break;
  case OPTIM_ADAM: c->lr = 1e-3f; c->eps = 1e-8f; break;
  case OPTIM_ADAMW: c->lr = 1e-3f; c->eps = 1e-8f; c->weight_decay = 0.01f; break;
  case OPTIM_ADAGRAD: c->lr = 0.01f; c->eps = 1e-10f; break;
  case OPTIM_RMSPROP: c->lr = 0.01f; c->eps = 1e-8f; break;
  case OPTIM_FTRL: c->lr = 0.05f; c->beta = 1.0f; break; /* the paper's beta */
  }
}

/* Written as !(v >= lo) so that NaN fails every check. */
#define REQUIRE(cond, ...)                                                   \
  do {                                                                       \
    if (!(cond)) return err_set(DRV_EINVAL, __VA_ARGS__);                  \
  } while (0)

static int check_nonneg(const char *kind, const char *field, float v) {
  REQUIRE(v >= 0 && isfinite(v), "optim.%s: %s must be a finite number >= 0 (got %g)",
          kind, field, (double)v);
  return 0;
}

static int check_unit(const char *kind, const char *field, float v) {
  REQUIRE(v >= 0 && v < 1, "optim.%s: %s must be in [0, 1) (got %g)", kind, field,
          (double)v);
  return 0;
}

int optim_cfg_check(const optim_cfg *c) {
  if (!kind_valid(c->kind))
    return err_set(DRV_EINVAL, "optim: unknown optimizer kind %d", (int)c->kind);
  const char *k = kind_names[c->kind];
  int rc;
  if ((rc = check_nonneg(k, "lr", c->lr)) < 0) return rc;
  if ((rc = check_nonneg(k, "weight_decay", c->weight_decay)) < 0) return rc;
  switch (c->kind) {
  case OPTIM_SGD:
    if ((rc = check_nonneg(k, "momentum", c->momentum)) < 0) return rc;
    REQUIRE(c->dampening >= 0 && c->dampening <= 1,
            "optim.SGD: dampening must be in [0, 1] (got %g)", (double)c->dampening);
    REQUIRE(!c->nesterov || (c->momentum > 0 && c->dampening == 0),
            "optim.SGD: nesterov requires momentum > 0 and dampening = 0");
    break;
  case OPTIM_ADAM:
  case OPTIM_ADAMW:
    if ((rc = check_unit(k, "beta1", c->beta1)) < 0) return rc;
    if ((rc = check_unit(k, "beta2", c->beta2)) < 0) return rc;
    if ((rc = check_nonneg(k, "eps", c->eps)) < 0) return rc;
    break;
  case OPTIM_ADAGRAD:
    if ((rc = check_nonneg(k, "lr_decay", c->lr_decay)) < 0) return rc;
    if ((rc = check_nonneg(k, "initial_accumulator", c->initial_accumulator)) < 0)
      return rc;
    if ((rc = check_nonneg(k, "eps", c->eps)) < 0) return rc;
    break;
  case OPTIM_RMSPROP:
    if ((rc = check_nonneg(k, "momentum", c->momentum)) < 0) return rc;
    if ((rc = check_nonneg(k, "eps", c->eps)) < 0) return rc;
    REQUIRE(c->alpha >= 0 && c->alpha <= 1, "optim.RMSprop: alpha must be in [0, 1] (got %g)",
            (double)c->alpha);
    break;
  case OPTIM_FTRL:
    REQUIRE(c->lr > 0, "optim.FTRL: lr (alpha) must be > 0 (got %g)", (double)c->lr);
    if ((rc = check_nonneg(k, "beta", c->beta)) < 0) return rc;
    if ((rc = check_nonneg(k, "l1", c->l1)) < 0) return rc;
    if ((rc = check_nonneg(k, "l2", c->l2)) < 0) return rc;
    if ((rc = check_nonneg(k, "initial_accumulator", c->initial_accumulator)) < 0) return rc;
    /* l2 is FTRL's own weight decay: two would be one too many. */
    REQUIRE(c->weight_decay == 0, "optim.FTRL: weight_decay is not used (l2 regularises)");
    REQUIRE(c->beta > 0 || c->initial_accumulator > 0,
            "optim.FTRL: beta or initial_accumulator must be > 0 (the first step divides by them)");
    break;
  }
  if ((rc = check_nonneg(k, "clip_norm", c->clip_norm)) < 0) return rc;
  REQUIRE(isfinite(c->clip_norm), "optim.%s: clip_norm must be finite", k);
  return optim_sched_check(&c->sched);
}

/* Appends ", name = value" (or "name = value" first) to a describe buffer. */
typedef struct descbuf {
  char *buf;
  size_t n, len;
  int fields;
} descbuf;

static void desc_add(descbuf *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void desc_add(descbuf *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = d->len < d->n ? d->n - d->len : 0;
  int w = vsnprintf(room ? d->buf + d->len : NULL, room, fmt, ap);
  va_end(ap);
  if (w > 0) d->len += (size_t)w;
}

static void desc_num(descbuf *d, const char *name, float v, float dflt, bool always) {
  if (!always && v == dflt) return;
  desc_add(d, "%s%s = %g", d->fields++ ? ", " : "", name, (double)v);
}

int optim_describe(const optim_cfg *c, char *buf, size_t n) {
  if (!kind_valid(c->kind))
    return err_set(DRV_EINVAL, "optim: unknown optimizer kind %d", (int)c->kind);
  optim_cfg d;
  optim_cfg_default(&d, c->kind);
  char scratch[1];
  descbuf b = {n ? buf : scratch, n ? n : 1, 0, 0};
  desc_add(&b, "optim.%s { ", kind_names[c->kind]);
  desc_num(&b, "lr", c->lr, d.lr, true);
  switch (c->kind) {
  case OPTIM_SGD:
    desc_num(&b, "momentum", c->momentum, d.momentum, false);
    desc_num(&b, "dampening", c->dampening, d.dampening, false);
    if (c->nesterov) desc_add(&b, ", nesterov = true");
    break;
  case OPTIM_ADAM:
  case OPTIM_ADAMW:
    desc_num(&b, "beta1", c->beta1, d.beta1, false);
    desc_num(&b, "beta2", c->beta2, d.beta2, false);
    desc_num(&b, "eps", c->eps, d.eps, false);
    break;
  case OPTIM_ADAGRAD:
    desc_num(&b, "lr_decay", c->lr_decay, d.lr_decay, false);
    desc_num(&b, "initial_accumulator", c->initial_accumulator, d.initial_accumulator,
             false);
    desc_num(&b, "eps", c->eps, d.eps, false);
    break;
  case OPTIM_RMSPROP:
    desc_num(&b, "alpha", c->alpha, d.alpha, false);
    desc_num(&b, "momentum", c->momentum, d.momentum, false);
    desc_num(&b, "eps", c->eps, d.eps, false);
    break;
  case OPTIM_FTRL:
    desc_num(&b, "beta", c->beta, d.beta, false);
    desc_num(&b, "l1", c->l1, d.l1, false);
    desc_num(&b, "l2", c->l2, d.l2, false);
    desc_num(&b, "initial_accumulator", c->initial_accumulator, d.initial_accumulator, false);
    break;
  }
  desc_num(&b, "weight_decay", c->weight_decay, d.weight_decay, false);
  desc_num(&b, "clip_norm", c->clip_norm, 0, false);
  if (optim_sched_active(&c->sched)) {
    char sb[640];
    optim_sched_describe(&c->sched, sb, sizeof sb);
    desc_add(&b, ", schedule = %s", sb);
  }
  desc_add(&b, " }");
  return (int)b.len;
}

/* ---- slots ------------------------------------------------------------- */

int optim_nslots(const optim_cfg *c) {
  switch (c->kind) {
  case OPTIM_SGD: return c->momentum > 0 ? 1 : 0;
  case OPTIM_ADAM:
  case OPTIM_ADAMW: return 2;
  case OPTIM_ADAGRAD: return 1;
  case OPTIM_RMSPROP: return c->momentum > 0 ? 2 : 1;
  case OPTIM_FTRL: return 2;
  }
  return 0;
}

void optim_slots_init(const optim_cfg *c, float **slots, size_t n) {
  int ns = optim_nslots(c);
  for (int s = 0; s < ns; s++) memset(slots[s], 0, n * sizeof(float));
  if (c->kind == OPTIM_ADAGRAD)
    for (size_t i = 0; i < n; i++) slots[0][i] = c->initial_accumulator;
  if (c->kind == OPTIM_FTRL)
    for (size_t i = 0; i < n; i++) slots[1][i] = c->initial_accumulator;
}

/* ---- update kernels ------------------------------------------------------
 * Each kernel is one pass. Weight decay enters as g + wd*p with wd == 0 when
 * unset, which is exact (g + 0*p == g for finite p) and keeps the loop
 * branch-free. */

static void sgd_plain(float *restrict p, const float *restrict g, size_t n, float lr,
                      float wd) {
  for (size_t i = 0; i < n; i++) p[i] -= lr * (g[i] + wd * p[i]);
}

/* b = keep*b + cg*g; step = gn*g + bn*b, where (keep, cg) = (0, 1) on the
 * first update (b = g) and (mom, 1 - dampening) after; (gn, bn) = (1, mom)
 * for Nesterov and (0, 1) otherwise. */
static void sgd_momentum(float *restrict p, const float *restrict g, float *restrict b,
                         size_t n, float lr, float wd, float keep, float cg, float gn,
                         float bn) {
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] + wd * p[i];
    float bi = keep * b[i] + cg * gi;
    b[i] = bi;
    p[i] -= lr * (gn * gi + bn * bi);
  }
}

/* Adam and AdamW: `shrink` is 1 - lr*wd (AdamW) or 1; `wd` the L2 term
 * (Adam) or 0. step = lr / (1 - b1^t), ibc2 = 1 / sqrt(1 - b2^t). */
static void adam(float *restrict p, const float *restrict g, float *restrict m,
                 float *restrict v, size_t n, float shrink, float wd, float b1, float b2,
                 float step, float ibc2, float eps) {
  const float c1 = 1.0f - b1, c2 = 1.0f - b2;
  for (size_t i = 0; i < n; i++) {
    float pi = p[i] * shrink;
    float gi = g[i] + wd * pi;
    float mi = b1 * m[i] + c1 * gi;
    float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - step * mi / (sqrtf(vi) * ibc2 + eps);
  }
}

static void adagrad(float *restrict p, const float *restrict g, float *restrict s, size_t n,
                    float clr, float wd, float eps) {
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] + wd * p[i];
    float si = s[i] + gi * gi;
    s[i] = si;
    p[i] -= clr * gi / (sqrtf(si) + eps);
  }
}

static void rmsprop(float *restrict p, const float *restrict g, float *restrict v, size_t n,
                    float lr, float wd, float alpha, float eps) {
  const float ca = 1.0f - alpha;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] + wd * p[i];
    float vi = alpha * v[i] + ca * gi * gi;
    v[i] = vi;
    p[i] -= lr * gi / (sqrtf(vi) + eps);
  }
}

static void rmsprop_momentum(float *restrict p, const float *restrict g, float *restrict v,
                             float *restrict b, size_t n, float lr, float wd, float alpha,
                             float eps, float mom) {
  const float ca = 1.0f - alpha;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] + wd * p[i];
    float vi = alpha * v[i] + ca * gi * gi;
    float bi = mom * b[i] + gi / (sqrtf(vi) + eps);
    v[i] = vi;
    b[i] = bi;
    p[i] -= lr * bi;
  }
}

/* FTRL-Proximal, per coordinate (McMahan et al. 2013, Algorithm 1) with the
 * current parameter as the paper's w_t, so a model's initial values count
 * (as TensorFlow's Ftrl does). In double: sqrt(n + g^2) - sqrt(n) cancels. */
static void ftrl(const optim_cfg *c, float *p, const float *g, float *z, float *acc, size_t n) {
  const double a = c->lr, beta = c->beta, l1 = c->l1, l2 = c->l2;
  for (size_t i = 0; i < n; i++) {
    double gi = g[i], ni = acc[i], nn = ni + gi * gi;
    double sigma = (sqrt(nn) - sqrt(ni)) / a;
    double zi = (double)z[i] + gi - sigma * (double)p[i];
    z[i] = (float)zi;
    acc[i] = (float)nn;
    p[i] = fabs(zi) <= l1 ? 0.0f
                          : (float)(-(zi - copysign(l1, zi)) / ((beta + sqrt(nn)) / a + l2));
  }
}

void optim_update(const optim_cfg *c, float *p, const float *g, float **slots, size_t n,
                  int64_t t) {
  const float lr = c->lr, wd = c->weight_decay;
  switch (c->kind) {
  case OPTIM_SGD:
    if (c->momentum > 0) {
      bool first = t <= 1;
      float keep = first ? 0.0f : c->momentum;
      float cg = first ? 1.0f : 1.0f - c->dampening;
      float gn = c->nesterov ? 1.0f : 0.0f;
      float bn = c->nesterov ? c->momentum : 1.0f;
      sgd_momentum(p, g, slots[0], n, lr, wd, keep, cg, gn, bn);
    } else {
      sgd_plain(p, g, n, lr, wd);
    }
    break;
  case OPTIM_ADAM:
  case OPTIM_ADAMW: {
    double bc1 = 1.0 - pow((double)c->beta1, (double)t);
    double bc2 = 1.0 - pow((double)c->beta2, (double)t);
    bool w = c->kind == OPTIM_ADAMW;
    float shrink = w ? (float)(1.0 - (double)lr * (double)wd) : 1.0f;
    adam(p, g, slots[0], slots[1], n, shrink, w ? 0.0f : wd, c->beta1, c->beta2,
         (float)((double)lr / bc1), (float)(1.0 / sqrt(bc2)), c->eps);
    break;
  }
  case OPTIM_ADAGRAD: {
    float clr = (float)((double)lr / (1.0 + (double)(t - 1) * (double)c->lr_decay));
    adagrad(p, g, slots[0], n, clr, wd, c->eps);
    break;
  }
  case OPTIM_RMSPROP:
    if (c->momentum > 0)
      rmsprop_momentum(p, g, slots[0], slots[1], n, lr, wd, c->alpha, c->eps, c->momentum);
    else
      rmsprop(p, g, slots[0], n, lr, wd, c->alpha, c->eps);
    break;
  case OPTIM_FTRL: ftrl(c, p, g, slots[0], slots[1], n); break;
  }
}

/* ---- binding to a model ------------------------------------------------ */

struct optim {
  optim_cfg cfg;
  const nn_param_list *params; /* borrowed */
  int nparams;                 /* params->n at optim_new */
  int nslots;
  float **slots;  /* params->n * nslots arrays; slot s of param i at [i*nslots + s] */
  int64_t *numel; /* per parameter, as sized at optim_new */
  int64_t steps;
  optim_plateau plateau; /* a plateau schedule's state */
  double grad_norm;      /* of the last update, NAN when not computed */
  const nn_table_list *tables; /* borrowed, or NULL */
};

void optim_free(optim_t *o) {
  if (!o) return;
  if (o->slots)
    for (int i = 0; i < o->nparams * o->nslots; i++) free(o->slots[i]);
  free(o->slots);
  free(o->numel);
  free(o);
}

/* 64-byte aligned like tensor storage, so the kernels see the same alignment
 * for parameters, gradients and slots. */
static float *alloc_slot(size_t n) {
  size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
  return aligned_alloc(64, bytes ? bytes : 64);
}

/* A parameter must still be what the slots were sized for (expect < 0: not
 * yet known), contiguous, with a gradient of the same size. */
static int check_param(const nn_param *pa, int64_t expect) {
  if (!pa->value || !pa->grad)
    return err_set(DRV_EINVAL, "optim: parameter %s has no %s", pa->name,
                   pa->value ? "gradient" : "value");
  if (!tensor_is_contiguous(pa->value) || !tensor_is_contiguous(pa->grad))
    return err_set(DRV_EINVAL, "optim: parameter %s is not contiguous", pa->name);
  if (tensor_numel(pa->value) != tensor_numel(pa->grad)) {
    char a[64], b[64];
    return err_set(DRV_ESHAPE, "optim: parameter %s is %s but its gradient is %s",
                   pa->name, tensor_shape_str(pa->value, a, sizeof a),
                   tensor_shape_str(pa->grad, b, sizeof b));
  }
  if (expect >= 0 && tensor_numel(pa->value) != expect)
    return err_set(DRV_ESHAPE, "optim: parameter %s changed size (%lld -> %lld elements)",
                   pa->name, (long long)expect, (long long)tensor_numel(pa->value));
  return 0;
}

optim_t *optim_new(const optim_cfg *cfg, const nn_param_list *params) {
  if (optim_cfg_check(cfg) < 0) return NULL;
  for (int i = 0; i < params->n; i++)
    if (check_param(&params->items[i], -1) < 0) return NULL;
  optim_t *o = calloc(1, sizeof *o);
  if (!o) goto nomem;
  o->cfg = *cfg;
  o->grad_norm = NAN;
  o->params = params;
  o->nparams = params->n;
  o->nslots = optim_nslots(cfg);
  if (params->n && !(o->numel = calloc((size_t)params->n, sizeof *o->numel))) goto nomem;
  size_t total = (size_t)params->n * (size_t)o->nslots;
  if (total) {
    o->slots = calloc(total, sizeof *o->slots);
    if (!o->slots) goto nomem;
  }
  for (int i = 0; i < params->n; i++) {
    o->numel[i] = tensor_numel(params->items[i].value);
    size_t n = (size_t)o->numel[i];
    float **s = o->slots + (size_t)i * (size_t)o->nslots;
    for (int k = 0; k < o->nslots; k++)
      if (!(s[k] = alloc_slot(n))) goto nomem;
    if (o->nslots) optim_slots_init(cfg, s, n);
  }
  return o;
nomem:
  optim_free(o);
  err_set(DRV_ENOMEM, "optim: out of memory allocating optimizer state");
  return NULL;
}

static double table_sq(const nn_table_list *t) {
  double sq = 0;
  for (int i = 0; t && i < t->n; i++) {
    const nn_spgrad *g = t->items[i].grad;
    for (int64_t k = 0; k < g->n * g->dim; k++) sq += (double)g->rows[k] * (double)g->rows[k];
  }
  return sq;
}

/* A sparse gradient's rows are distinct ids, so its norm is that of the
 * dense gradient it stands for. */
double optim_clip_grads(const nn_param_list *l, const nn_table_list *t, double max_norm) {
  double sq = table_sq(t);
  for (int i = 0; i < l->n; i++) {
    const float *g = tensor_data(l->items[i].grad);
    int64_t n = tensor_numel(l->items[i].grad);
    for (int64_t k = 0; k < n; k++) sq += (double)g[k] * (double)g[k];
  }
  double norm = sqrt(sq), coef = max_norm / (norm + 1e-6);
  if (coef >= 1) return norm;
  for (int i = 0; i < l->n; i++) tensor_scale(l->items[i].grad, (float)coef);
  for (int i = 0; t && i < t->n; i++) {
    const nn_spgrad *g = t->items[i].grad;
    for (int64_t k = 0; k < g->n * g->dim; k++) g->rows[k] *= (float)coef;
  }
  return norm;
}

/* Scales every gradient, dense and sparse, so that their global L2 norm is
 * at most clip_norm, as clip_grad_norm_ does (with its 1e-6). */
static void clip(optim_t *o, const nn_param_list *l) {
  o->grad_norm = optim_clip_grads(l, o->tables, o->cfg.clip_norm);
}

int optim_bind_tables(optim_t *o, const nn_table_list *tables) {
  float init[SPTABLE_MAX_SLOTS] = {0};
  int ns = optim_nslots(&o->cfg);
  if (ns > SPTABLE_MAX_SLOTS)
    return err_set(DRV_EINVAL, "optim: %d slots do not fit a sparse table", ns);
  if (ns) {
    float *p[SPTABLE_MAX_SLOTS] = {&init[0], &init[1]};
    optim_slots_init(&o->cfg, p, 1);
  }
  for (int i = 0; i < tables->n; i++) {
    int rc = sptable_set_slots(tables->items[i].value, ns, init);
    if (rc < 0) return rc;
  }
  o->tables = tables;
  return 0;
}

int optim_table_update(const optim_cfg *c, sptable *t, const uint64_t *ids, const float *rows,
                       int64_t n) {
  int ns = sptable_nslots(t);
  int64_t dim = sptable_dim(t);
  for (int64_t r = 0; r < n; r++) {
    int64_t k = sptable_get(t, ids[r]);
    if (k < 0) return (int)k;
    float *slots[SPTABLE_MAX_SLOTS];
    for (int s = 0; s < ns; s++) slots[s] = sptable_slot(t, k, s);
    int64_t *count = sptable_count(t, k);
    optim_update(c, sptable_value(t, k), rows + r * dim, slots, (size_t)dim, ++*count);
  }
  return 0;
}

/* The lazy update of every touched row (see optim_bind_tables). */
static int step_tables(optim_t *o, const optim_cfg *c, bool zero_grad) {
  for (int i = 0; o->tables && i < o->tables->n; i++) {
    nn_spgrad *g = o->tables->items[i].grad;
    int rc = optim_table_update(c, o->tables->items[i].value, g->ids, g->rows, g->n);
    if (rc < 0) return rc;
    if (zero_grad) nn_spgrad_clear(g);
  }
  return 0;
}

double optim_lr(const optim_t *o) {
  return optim_sched_lr(&o->cfg.sched, o->cfg.lr, o->steps, &o->plateau);
}

double optim_grad_norm(const optim_t *o) { return o->grad_norm; }

const optim_plateau *optim_plateau_state(const optim_t *o) { return &o->plateau; }

void optim_set_plateau(optim_t *o, const optim_plateau *p) { o->plateau = *p; }

int optim_observe(optim_t *o, double value) {
  return optim_plateau_observe(&o->cfg.sched, &o->plateau, o->cfg.lr, value);
}

static int step(optim_t *o, bool zero_grad) {
  const nn_param_list *l = o->params;
  if (l->n != o->nparams)
    return err_set(DRV_EINVAL, "optim: the parameter list changed (%d -> %d parameters)",
                   o->nparams, l->n);
  for (int i = 0; i < l->n; i++) {
    int rc = check_param(&l->items[i], o->numel[i]);
    if (rc < 0) return rc;
  }
  int64_t t = o->steps + 1;
  optim_cfg c = o->cfg;
  c.lr = (float)optim_lr(o);
  if (c.clip_norm > 0) clip(o, l);
  for (int i = 0; i < l->n; i++) {
    const nn_param *pa = &l->items[i];
    optim_update(&c, tensor_data(pa->value), tensor_data(pa->grad),
                 o->slots ? o->slots + (size_t)i * (size_t)o->nslots : NULL,
                 (size_t)tensor_numel(pa->value), t);
    /* Cleared right after its update, while it is still in cache: cheaper
     * than a separate nn_zero_grad pass over cold memory. */
    if (zero_grad) tensor_fill(pa->grad, 0.0f);
  }
  int rc = step_tables(o, &c, zero_grad);
  if (rc < 0) return rc;
  o->steps = t;
  return 0;
}

int optim_step(optim_t *o) { return step(o, false); }

int optim_step_zero_grad(optim_t *o) { return step(o, true); }

int64_t optim_steps(const optim_t *o) { return o->steps; }

const optim_cfg *optim_config(const optim_t *o) { return &o->cfg; }

float *optim_slot(optim_t *o, int i, int s) {
  if (!o || i < 0 || i >= o->nparams || s < 0 || s >= o->nslots) return NULL;
  return o->slots[(size_t)i * (size_t)o->nslots + (size_t)s];
}

void optim_set_steps(optim_t *o, int64_t steps) {
  if (o && steps >= 0) o->steps = steps;
}
