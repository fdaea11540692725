/* nn_norm.c - Embedding, LayerNorm and BatchNorm1d/2d.
 *
 * The normalisations keep the last forward's normalised input (x-hat, in
 * m->mask) and one reciprocal standard deviation per group (in m->cols)
 * for backward. BatchNorm's running statistics are buffers (nn_module.
 * buffers): saved with the parameters under PyTorch's names, never sent to
 * an optimiser or a parameter server.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "numeric/nn.h"
#include "numeric/nn_int.h"

/* ---- Embedding -------------------------------------------------------------- */

int nn_check_ids(const nn_module *m, const tensor *x, double n) {
  char a[64], nm[96];
  int rc = nn_need_contiguous(m, x, "input");
  if (rc < 0) return rc;
  if (x->ndim < 1 || x->ndim > 3)
    return err_set(DRV_ESHAPE, "%s: input %s must have 1 to 3 dimensions of ids",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a));
  const float *p = tensor_data(x);
  for (int64_t i = 0; i < tensor_numel(x); i++)
    if (!(p[i] >= 0.0f && (double)p[i] < n) || p[i] != floorf(p[i]))
      return err_set(DRV_ERANGE, "%s: input element %lld is %g, expected an id in 0..%.0f",
                     nn_name_of(m, nm, sizeof nm), (long long)i, (double)p[i], n - 1);
  return 0;
}

static int embedding_ids(const nn_module *m, const tensor *x) {
  return nn_check_ids(m, x, (double)m->in_features);
}

static void embedding_shape(const nn_module *m, const tensor *x, int64_t *shape) {
  for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
  shape[x->ndim] = m->out_features;
}

static int embedding_forward(nn_module *m, const tensor *x, const tensor **y) {
  int64_t shape[4];
  int rc = embedding_ids(m, x);
  if (rc < 0) return rc;
  embedding_shape(m, x, shape);
  if ((rc = nn_ensure(&m->out, x->ndim + 1, shape)) < 0) return rc;
  int64_t d = m->out_features;
  const float *ids = tensor_data(x), *w = tensor_data(m->params[0].value);
  for (int64_t i = 0; i < tensor_numel(x); i++)
    memcpy(tensor_data(m->out) + i * d, w + (int64_t)ids[i] * d, (size_t)d * sizeof(float));
  *y = m->out;
  return 0;
}

/* dW[id] += dy's row, for every id (repeats accumulate). */
static int embedding_backward(nn_module *m, const tensor *x, const tensor *dy,
                              const tensor **dx) {
  int64_t shape[4];
  int rc = embedding_ids(m, x);
  if (rc < 0) return rc;
  embedding_shape(m, x, shape);
  if ((rc = nn_check_grad(m, dy, x->ndim + 1, shape)) < 0) return rc;
  int64_t d = m->out_features;
  const float *ids = tensor_data(x), *g = tensor_data(dy);
  float *dw = tensor_data(m->params[0].grad);
  for (int64_t i = 0; i < tensor_numel(x); i++) {
    float *row = dw + (int64_t)ids[i] * d;
    for (int64_t j = 0; j < d; j++) row[j] += g[i * d + j];
  }
  if (!dx) return 0;
  if ((rc = nn_ensure_like(&m->dx, x)) < 0 || (rc = tensor_fill(m->dx, 0.0f)) < 0) return rc;
  *dx = m->dx;
  return 0;
}

static int embedding_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.Embedding(%lld, %lld)", (long long)m->in_features,
            (long long)m->out_features);
  return 0;
}

static const nn_module_ops embedding_ops = {"Embedding", embedding_forward, embedding_backward,
                                            embedding_describe, NULL};

nn_module *nn_embedding(int64_t n, int64_t dim, rng_t *r) {
  if (n <= 0 || dim <= 0 || n > INT32_MAX || dim > INT32_MAX || !r) {
    err_set(DRV_EINVAL, "nn.Embedding(%lld, %lld): sizes must be positive%s", (long long)n,
            (long long)dim, r ? "" : " and an rng is required");
    return NULL;
  }
  nn_module *m = nn_module_new(&embedding_ops);
  if (!m) return NULL;
  m->in_features = n;
  m->out_features = dim;
  m->nparams = 1;
  if (nn_param_init(&m->params[0], "weight", 2, (int64_t[]){n, dim}) < 0) {
    nn_unref(m);
    err_set(DRV_ENOMEM, "out of memory creating nn.Embedding(%lld, %lld)", (long long)n,
            (long long)dim);
    return NULL;
  }
  tensor_normal(m->params[0].value, r, 0.0f, 1.0f);
  return m;
}

/* ---- shared by the normalisations ------------------------------------------------ */

/* Element (n, c, s) of a [N, C, S] layout; LayerNorm is N rows x 1 x dim. */
typedef struct norm_geom {
  int64_t n, c, s;
} norm_geom;

/* Affine parameters weight (ones) and bias (zeros) of size c. */
static nn_module *norm_new(const nn_module_ops *ops, int64_t c, float eps) {
  if (c <= 0 || c > INT32_MAX || !(eps > 0.0f) || !isfinite(eps)) {
    err_set(DRV_EINVAL, "nn.%s(%lld): the size must be positive and eps > 0", ops->type,
            (long long)c);
    return NULL;
  }
  nn_module *m = nn_module_new(ops);
  if (!m) return NULL;
  m->in_features = m->out_features = c;
  m->eps = eps;
  m->nparams = 2;
  if (nn_param_init(&m->params[0], "weight", 1, &c) < 0 ||
      nn_param_init(&m->params[1], "bias", 1, &c) < 0) {
    nn_unref(m);
    err_set(DRV_ENOMEM, "out of memory creating nn.%s(%lld)", ops->type, (long long)c);
    return NULL;
  }
  tensor_fill(m->params[0].value, 1.0f);
  return m;
}

/* y = xhat w + b from x-hat in m->mask, channel c of the geometry. */
static void norm_affine(nn_module *m, norm_geom g, bool per_channel) {
  const float *xh = tensor_data(m->mask), *w = tensor_data(m->params[0].value);
  const float *b = tensor_data(m->params[1].value);
  float *y = tensor_data(m->out);
  for (int64_t i = 0; i < g.n; i++)
    for (int64_t c = 0; c < g.c; c++)
      for (int64_t s = 0; s < g.s; s++) {
        int64_t at = (i * g.c + c) * g.s + s, k = per_channel ? c : s;
        y[at] = xh[at] * w[k] + b[k];
      }
}

/* ---- LayerNorm --------------------------------------------------------------------- */

static int layer_norm_check(const nn_module *m, const tensor *x) {
  char a[64], nm[96];
  int rc = nn_need_contiguous(m, x, "input");
  if (rc < 0) return rc;
  if (x->ndim < 1 || x->shape[x->ndim - 1] != m->in_features)
    return err_set(DRV_ESHAPE, "%s: input %s does not end in %lld",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a), (long long)m->in_features);
  return 0;
}

static int layer_norm_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = layer_norm_check(m, x);
  int64_t d = m->in_features, rows = tensor_numel(x) / d;
  if (rc < 0 || (rc = nn_ensure_like(&m->out, x)) < 0 || (rc = nn_ensure_like(&m->mask, x)) < 0 ||
      (rc = nn_ensure(&m->cols, 1, &rows)) < 0)
    return rc;
  for (int64_t i = 0; i < rows; i++) {
    const float *xr = tensor_data(x) + i * d;
    float *xh = tensor_data(m->mask) + i * d;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; j++) mean += xr[j];
    mean /= (double)d;
    for (int64_t j = 0; j < d; j++) var += ((double)xr[j] - mean) * ((double)xr[j] - mean);
    float rstd = (float)(1.0 / sqrt(var / (double)d + (double)m->eps));
    for (int64_t j = 0; j < d; j++) xh[j] = (float)((double)xr[j] - mean) * rstd;
    tensor_data(m->cols)[i] = rstd;
  }
  norm_affine(m, (norm_geom){rows, 1, d}, false);
  *y = m->out;
  return 0;
}

/* With dxh = dy w: dx = rstd (dxh - mean(dxh) - xhat mean(dxh xhat)) per
 * row; dw += sum of dy xhat, db += sum of dy over the rows. */
static int layer_norm_backward(nn_module *m, const tensor *x, const tensor *dy,
                               const tensor **dx) {
  char a[64], nm[96];
  int rc = layer_norm_check(m, x);
  if (rc < 0 || (rc = nn_check_grad(m, dy, x->ndim, x->shape)) < 0) return rc;
  if (!m->mask || !tensor_same_shape(m->mask, x))
    return err_set(DRV_EINVAL, "%s: backward of input %s without a forward of it",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a));
  if (dx && (rc = nn_ensure_like(&m->dx, x)) < 0) return rc;
  int64_t d = m->in_features, rows = tensor_numel(x) / d;
  const float *w = tensor_data(m->params[0].value);
  float *dw = tensor_data(m->params[0].grad), *db = tensor_data(m->params[1].grad);
  for (int64_t i = 0; i < rows; i++) {
    const float *g = tensor_data(dy) + i * d, *xh = tensor_data(m->mask) + i * d;
    double s1 = 0, s2 = 0;
    for (int64_t j = 0; j < d; j++) {
      dw[j] += g[j] * xh[j];
      db[j] += g[j];
      s1 += g[j] * w[j];
      s2 += g[j] * w[j] * xh[j];
    }
    if (!dx) continue;
    float m1 = (float)(s1 / (double)d), m2 = (float)(s2 / (double)d), rstd = tensor_data(m->cols)[i];
    float *o = tensor_data(m->dx) + i * d;
    for (int64_t j = 0; j < d; j++) o[j] = rstd * (g[j] * w[j] - m1 - xh[j] * m2);
  }
  if (dx) *dx = m->dx;
  return 0;
}

static int norm_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.%s(%lld", m->ops->type, (long long)m->in_features);
  if (m->eps != 1e-5f) nn_append(buf, n, ", eps %g", (double)m->eps);
  if (m->nbuffers && m->momentum != 0.1f) nn_append(buf, n, ", momentum %g", (double)m->momentum);
  nn_append(buf, n, ")");
  return 0;
}

static const nn_module_ops layer_norm_ops = {"LayerNorm", layer_norm_forward,
                                             layer_norm_backward, norm_describe, NULL};

nn_module *nn_layer_norm(int64_t dim, float eps) { return norm_new(&layer_norm_ops, dim, eps); }

/* ---- BatchNorm1d / BatchNorm2d -------------------------------------------------------- */

static const nn_module_ops bn1_ops, bn2_ops;

/* [N, C] or [N, C, L] (1d), [N, C, H, W] (2d) as [N, C, S]. */
static int bn_geom(const nn_module *m, const tensor *x, norm_geom *g) {
  char a[64], nm[96];
  int rc = nn_need_contiguous(m, x, "input");
  if (rc < 0) return rc;
  bool two = m->ops == &bn2_ops;
  bool ok = (two ? x->ndim == 4 : (x->ndim == 2 || x->ndim == 3)) &&
            x->shape[1] == m->in_features;
  if (!ok)
    return err_set(DRV_ESHAPE, "%s: input %s is not %s", nn_name_of(m, nm, sizeof nm),
                   SHAPE(x, a), two ? "[batch, channels, height, width]"
                                      : "[batch, channels] or [batch, channels, length]");
  g->n = x->shape[0];
  g->c = x->shape[1];
  g->s = tensor_numel(x) / (g->n ? g->n * g->c : 1);
  return 0;
}

/* Batch statistics of channel c; updates the running ones. */
static void bn_batch_stats(nn_module *m, const float *x, norm_geom g, int64_t c, double *mean,
                           double *var) {
  double cnt = (double)(g.n * g.s), s = 0, q = 0;
  for (int64_t i = 0; i < g.n; i++)
    for (int64_t k = 0; k < g.s; k++) s += x[(i * g.c + c) * g.s + k];
  *mean = s / cnt;
  for (int64_t i = 0; i < g.n; i++)
    for (int64_t k = 0; k < g.s; k++) {
      double d = x[(i * g.c + c) * g.s + k] - *mean;
      q += d * d;
    }
  *var = q / cnt;
  float mo = m->momentum, *rm = tensor_data(m->buffers[0].value);
  float *rv = tensor_data(m->buffers[1].value);
  rm[c] = (1.0f - mo) * rm[c] + mo * (float)*mean;
  rv[c] = (1.0f - mo) * rv[c] + mo * (float)(q / (cnt - 1.0));
}

static int bn_forward(nn_module *m, const tensor *x, const tensor **y) {
  char a[64], nm[96];
  norm_geom g;
  int rc = bn_geom(m, x, &g);
  if (rc < 0 || (rc = nn_ensure_like(&m->out, x)) < 0 || (rc = nn_ensure_like(&m->mask, x)) < 0 ||
      (rc = nn_ensure(&m->cols, 1, &g.c)) < 0)
    return rc;
  if (m->training && g.n * g.s < 2)
    return err_set(DRV_ESHAPE, "%s: training needs more than one value per channel (input %s)",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a));
  const float *xp = tensor_data(x);
  for (int64_t c = 0; c < g.c; c++) {
    double mean = tensor_data(m->buffers[0].value)[c], var = tensor_data(m->buffers[1].value)[c];
    if (m->training) bn_batch_stats(m, xp, g, c, &mean, &var);
    float rstd = (float)(1.0 / sqrt(var + (double)m->eps));
    tensor_data(m->cols)[c] = rstd;
    for (int64_t i = 0; i < g.n; i++)
      for (int64_t k = 0; k < g.s; k++) {
        int64_t at = (i * g.c + c) * g.s + k;
        tensor_data(m->mask)[at] = (float)((double)xp[at] - mean) * rstd;
      }
  }
  if (m->training) tensor_data(m->buffers[2].value)[0] += 1.0f;
  norm_affine(m, g, true);
  *y = m->out;
  return 0;
}

/* Training: the batch statistics depend on x, so per channel
 * dx = rstd (dxh - mean(dxh) - xhat mean(dxh xhat)); evaluation: the
 * running ones are constants, dx = rstd dxh. dxh = dy w. */
static int bn_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  char a[64], nm[96];
  norm_geom g;
  int rc = bn_geom(m, x, &g);
  if (rc < 0 || (rc = nn_check_grad(m, dy, x->ndim, x->shape)) < 0) return rc;
  if (!m->mask || !tensor_same_shape(m->mask, x))
    return err_set(DRV_EINVAL, "%s: backward of input %s without a forward of it",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a));
  if (dx && (rc = nn_ensure_like(&m->dx, x)) < 0) return rc;
  const float *gp = tensor_data(dy), *xh = tensor_data(m->mask);
  const float *w = tensor_data(m->params[0].value);
  float *dw = tensor_data(m->params[0].grad), *db = tensor_data(m->params[1].grad);
  double cnt = (double)(g.n * g.s);
  for (int64_t c = 0; c < g.c; c++) {
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < g.n; i++)
      for (int64_t k = 0; k < g.s; k++) {
        int64_t at = (i * g.c + c) * g.s + k;
        s1 += gp[at];
        s2 += gp[at] * xh[at];
      }
    dw[c] += (float)s2;
    db[c] += (float)s1;
    if (!dx) continue;
    float rstd = tensor_data(m->cols)[c], m1 = m->training ? (float)(s1 / cnt) : 0.0f;
    float m2 = m->training ? (float)(s2 / cnt) : 0.0f;
    for (int64_t i = 0; i < g.n; i++)
      for (int64_t k = 0; k < g.s; k++) {
        int64_t at = (i * g.c + c) * g.s + k;
        tensor_data(m->dx)[at] = rstd * w[c] * (gp[at] - m1 - xh[at] * m2);
      }
  }
  if (dx) *dx = m->dx;
  return 0;
}

static const nn_module_ops bn1_ops = {"BatchNorm1d", bn_forward, bn_backward, norm_describe,
                                      NULL};
static const nn_module_ops bn2_ops = {"BatchNorm2d", bn_forward, bn_backward, norm_describe,
                                      NULL};

static int buffer_init(nn_param *b, const char *name, int ndim, const int64_t *shape, float v) {
  snprintf(b->name, sizeof b->name, "%s", name);
  b->value = tensor_new(ndim, shape);
  return b->value ? tensor_fill(b->value, v) : DRV_ENOMEM;
}

nn_module *nn_batch_norm(int dims, int64_t channels, float eps, float momentum) {
  if ((dims != 1 && dims != 2) || !(momentum >= 0.0f && momentum <= 1.0f)) {
    err_set(DRV_EINVAL, "nn.BatchNorm: %s", dims != 1 && dims != 2
            ? "only BatchNorm1d and BatchNorm2d exist" : "momentum must be in [0, 1]");
    return NULL;
  }
  nn_module *m = norm_new(dims == 1 ? &bn1_ops : &bn2_ops, channels, eps);
  if (!m) return NULL;
  m->momentum = momentum;
  m->nbuffers = 3;
  /* PyTorch's num_batches_tracked is a 0-dimensional int64. */
  if (buffer_init(&m->buffers[0], "running_mean", 1, &channels, 0.0f) < 0 ||
      buffer_init(&m->buffers[1], "running_var", 1, &channels, 1.0f) < 0 ||
      buffer_init(&m->buffers[2], "num_batches_tracked", 0, NULL, 0.0f) < 0) {
    nn_unref(m);
    err_set(DRV_ENOMEM, "out of memory creating nn.BatchNorm%dd(%lld)", dims,
            (long long)channels);
    return NULL;
  }
  return m;
}
