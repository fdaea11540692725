/* nn_layers.c - the shape and activation layers beyond nn.c's: Identity,
 * GELU, LeakyReLU, Flatten and Unflatten; and nn_init, the weight
 * initialisers (PyTorch's formulas).
 */
#include <math.h>
#include <string.h>

#include "base/err.h"
#include "numeric/nn.h"
#include "numeric/nn_int.h"

/* ---- Identity ------------------------------------------------------------- */

/* Copies, like every module: its output is its own buffer. */
static int identity_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = nn_elementwise_begin(m, x);
  if (rc < 0 || (rc = tensor_copy(m->out, x)) < 0) return rc;
  *y = m->out;
  return 0;
}

static int identity_backward(nn_module *m, const tensor *x, const tensor *dy,
                             const tensor **dx) {
  if (!dx) return 0;
  int rc = nn_elementwise_back_begin(m, x, dy, false);
  if (rc < 0 || (rc = tensor_copy(m->dx, dy)) < 0) return rc;
  *dx = m->dx;
  return 0;
}

static const nn_module_ops identity_ops = {"Identity", identity_forward, identity_backward,
                                           nn_describe_plain, NULL};

nn_module *nn_identity(void) { return nn_module_new(&identity_ops); }

/* ---- GELU ----------------------------------------------------------------- */

/* y = x Phi(x) with Phi the standard normal CDF, 0.5 (1 + erf(x / sqrt 2)). */
static int gelu_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = nn_elementwise_begin(m, x);
  if (rc < 0) return rc;
  const float *xp = tensor_data(x);
  float *yp = tensor_data(m->out);
  int64_t n = tensor_numel(x);
  for (int64_t i = 0; i < n; i++) yp[i] = 0.5f * xp[i] * (1.0f + erff(xp[i] * (float)M_SQRT1_2));
  *y = m->out;
  return 0;
}

/* dy/dx = Phi(x) + x phi(x), phi the standard normal density. */
static int gelu_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  int rc = nn_elementwise_back_begin(m, x, dy, false);
  if (rc < 0) return rc;
  const float *xp = tensor_data(x), *g = tensor_data(dy);
  float *d = tensor_data(m->dx);
  const float inv_sqrt_2pi = 0.3989422804f;
  int64_t n = tensor_numel(x);
  for (int64_t i = 0; i < n; i++) {
    float v = xp[i];
    float cdf = 0.5f * (1.0f + erff(v * (float)M_SQRT1_2));
    d[i] = g[i] * (cdf + v * inv_sqrt_2pi * expf(-0.5f * v * v));
  }
  *dx = m->dx;
  return 0;
}

static const nn_module_ops gelu_ops = {"GELU", gelu_forward, gelu_backward, nn_describe_plain,
                                       NULL};

nn_module *nn_gelu(void) { return nn_module_new(&gelu_ops); }

/* ---- LeakyReLU ------------------------------------------------------------ */

static void k_leaky(const float *restrict x, float *restrict y, float a, int64_t n) {
  EACH(i, n, float v = x[i]; y[i] = v < 0.0f ? a * v : v);
}

/* As ReLU's, the slope at exactly 0 is the positive side's (PyTorch: x > 0
 * takes 1, else the negative slope). */
static void k_leaky_back(const float *restrict x, const float *restrict g, float *restrict d,
                         float a, int64_t n) {
  EACH(i, n, float gi = g[i], xi = x[i]; d[i] = xi > 0.0f ? gi : a * gi);
}

static int leaky_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = nn_elementwise_begin(m, x);
  if (rc < 0) return rc;
  k_leaky(tensor_data(x), tensor_data(m->out), m->p, tensor_numel(x));
  *y = m->out;
  return 0;
}

static int leaky_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  int rc = nn_elementwise_back_begin(m, x, dy, false);
  if (rc < 0) return rc;
  k_leaky_back(tensor_data(x), tensor_data(dy), tensor_data(m->dx), m->p, tensor_numel(x));
  *dx = m->dx;
  return 0;
}

static int leaky_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.LeakyReLU(%g)", (double)m->p);
  return 0;
}

static const nn_module_ops leaky_ops = {"LeakyReLU", leaky_forward, leaky_backward,
                                        leaky_describe, NULL};

nn_module *nn_leaky_relu(float slope) {
  if (!isfinite(slope)) {
    err_set(DRV_EINVAL, "nn.LeakyReLU: slope %g is not finite", (double)slope);
    return NULL;
  }
  nn_module *m = nn_module_new(&leaky_ops);
  if (m) m->p = slope;
  return m;
}

/* ---- Flatten and Unflatten ------------------------------------------------ */

/* Both copy x into an output of another shape, and dy back into x's. */
static int reshape_forward(nn_module *m, const tensor *x, int ndim, const int64_t *shape,
                           const tensor **y) {
  int rc = nn_need_contiguous(m, x, "input");
  if (rc < 0 || (rc = nn_ensure(&m->out, ndim, shape)) < 0) return rc;
  memcpy(tensor_data(m->out), tensor_data(x), (size_t)tensor_numel(x) * sizeof(float));
  *y = m->out;
  return 0;
}

static int reshape_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  char a[64], b[64], nm[96];
  int rc = nn_need_contiguous(m, dy, "gradient");
  if (rc < 0) return rc;
  if (!m->out || !tensor_same_shape(m->out, dy) || tensor_numel(dy) != tensor_numel(x))
    return err_set(DRV_ESHAPE, "%s: gradient %s does not match the output of input %s",
                   nn_name_of(m, nm, sizeof nm), SHAPE(dy, a), SHAPE(x, b));
  if ((rc = nn_ensure_like(&m->dx, x)) < 0) return rc;
  memcpy(tensor_data(m->dx), tensor_data(dy), (size_t)tensor_numel(x) * sizeof(float));
  *dx = m->dx;
  return 0;
}

static int flatten_forward(nn_module *m, const tensor *x, const tensor **y) {
  char a[64];
  if (x->ndim < 1)
    return err_set(DRV_ESHAPE, "nn.Flatten: input %s has no batch dimension", SHAPE(x, a));
  int64_t shape[2] = {x->shape[0], x->shape[0] ? tensor_numel(x) / x->shape[0] : 1};
  if (x->ndim == 1) shape[1] = 1;
  return reshape_forward(m, x, 2, shape, y);
}

static const nn_module_ops flatten_ops = {"Flatten", flatten_forward, reshape_backward,
                                          nn_describe_plain, NULL};

nn_module *nn_flatten(void) { return nn_module_new(&flatten_ops); }

static int unflatten_forward(nn_module *m, const tensor *x, const tensor **y) {
  char a[64], nm[96];
  int64_t shape[4] = {x->ndim >= 1 ? x->shape[0] : 0}, per = 1;
  for (int i = 0; i < m->nview; i++) per *= shape[i + 1] = m->view[i];
  if (x->ndim != 2 || x->shape[1] != per)
    return err_set(DRV_ESHAPE, "%s: input %s is not [batch, %lld]",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a), (long long)per);
  return reshape_forward(m, x, m->nview + 1, shape, y);
}

static int unflatten_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.Unflatten(");
  for (int i = 0; i < m->nview; i++) nn_append(buf, n, "%s%lld", i ? "x" : "", (long long)m->view[i]);
  nn_append(buf, n, ")");
  return 0;
}

static const nn_module_ops unflatten_ops = {"Unflatten", unflatten_forward, reshape_backward,
                                            unflatten_describe, NULL};

nn_module *nn_unflatten(int ndim, const int64_t *shape) {
  bool ok = ndim >= 1 && ndim <= 3 && shape;
  for (int i = 0; ok && i < ndim; i++) ok = shape[i] > 0 && shape[i] <= INT32_MAX;
  if (!ok) {
    err_set(DRV_EINVAL, "nn.Unflatten: expected 1 to 3 positive sizes");
    return NULL;
  }
  nn_module *m = nn_module_new(&unflatten_ops);
  if (!m) return NULL;
  m->nview = ndim;
  memcpy(m->view, shape, (size_t)ndim * sizeof *shape);
  return m;
}

/* ---- initialisers ---------------------------------------------------------- */

static int init_one(nn_module *m, int how, rng_t *r) {
  tensor *w = m->params[0].value;
  int64_t numel = tensor_numel(w);
  double fan_in = (double)numel / (double)w->shape[0];
  double fan_out = (double)numel / (double)w->shape[1];
  double bound = how == 0 ? 1.0 / sqrt(fan_in)
                 : how == 1 ? sqrt(6.0 / fan_in) : sqrt(6.0 / (fan_in + fan_out));
  int rc = tensor_uniform(w, r, (float)-bound, (float)bound);
  if (rc < 0 || m->nparams < 2) return rc;
  tensor *b = m->params[1].value;
  if (how != 0) return tensor_fill(b, 0.0f);
  return tensor_uniform(b, r, (float)-bound, (float)bound);
}

static int init_walk(nn_module *m, int how, rng_t *r) {
  const char *type = m->ops->type;
  if (strcmp(type, "Linear") == 0 || strcmp(type, "Conv2d") == 0) {
    int rc = init_one(m, how, r);
    if (rc < 0) return rc;
  }
  for (int i = 0; i < m->nchildren; i++) {
    int rc = init_walk(m->children[i], how, r);
    if (rc < 0) return rc;
  }
  return 0;
}

int nn_init(nn_module *m, const char *how, rng_t *r) {
  static const char *const names[] = {"uniform", "kaiming", "xavier"};
  if (!m || !how || !r) return err_set(DRV_EINVAL, "nn_init: NULL argument");
  for (int i = 0; i < 3; i++)
    if (strcmp(how, names[i]) == 0) return init_walk(m, i, r);
  return err_set(DRV_EINVAL, "unknown init '%.32s' (known: uniform, kaiming, xavier)", how);
}
