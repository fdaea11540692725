/* nn.c - modules: Linear, ReLU, Tanh, Sigmoid, Softmax, Dropout and
 * Sequential; forward, backward, parameters, gradients, Torch7-style
 * descriptions and reference counting. The losses are in nn_loss.c.
 *
 * Every module keeps its output and input-gradient buffers between calls and
 * resizes them with tensor_resize(), so a warm training step allocates
 * nothing. Element-wise passes are tight loops over contiguous floats (the
 * kernels section says how they are made to vectorize).
 */
#include "numeric/nn.h"
#include "numeric/nn_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"

/* ============================== helpers ================================= */

/* Makes *t a contiguous tensor of the given shape: allocated on first use,
 * afterwards resized in place (no allocation while the capacity lasts). */
int nn_ensure(tensor **t, int ndim, const int64_t *shape) {
  if (*t) return tensor_resize(*t, ndim, shape);
  *t = tensor_new(ndim, shape);
  return *t ? 0 : DRV_ENOMEM;
}

int nn_ensure_like(tensor **t, const tensor *like) {
  return nn_ensure(t, like->ndim, like->shape);
}

static int ensure2(tensor **t, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  return nn_ensure(t, 2, shape);
}

/* Appends printf-style text to the NUL-terminated string in buf (size n),
 * truncating silently: descriptions are for people. */
void nn_append(char *buf, size_t n, const char *fmt, ...) {
  size_t len = strnlen(buf, n);
  if (len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, n - len, fmt, ap);
  va_end(ap);
}

/* One-line description of m, for error messages ("nn.Linear(64 -> 128)"). */
const char *nn_name_of(const nn_module *m, char *buf, size_t n) {
  buf[0] = '\0';
  if (m->ops->describe == nn_describe_container)
    snprintf(buf, n, "nn.%s", m->ops->type); /* not the whole multi-line listing */
  else
    m->ops->describe(m, buf, n, 0);
  return buf;
}

int nn_need_contiguous(const nn_module *m, const tensor *t, const char *what) {
  char a[64], nm[96];
  if (tensor_is_contiguous(t)) return 0;
  return err_set(DRV_EINVAL, "%s: %s %s is not contiguous", nn_name_of(m, nm, sizeof nm),
                 what, SHAPE(t, a));
}

/* dy must have the shape of the output that x produced. */
int nn_check_grad(const nn_module *m, const tensor *dy, int ndim, const int64_t *shape) {
  char a[64], b[64], nm[96];
  tensor expect = {.ndim = ndim};
  for (int i = 0; i < ndim; i++) expect.shape[i] = shape[i];
  if (!tensor_same_shape(dy, &expect))
    return err_set(DRV_ESHAPE, "%s: gradient %s does not match the output %s",
                   nn_name_of(m, nm, sizeof nm), SHAPE(dy, a), SHAPE(&expect, b));
  return nn_need_contiguous(m, dy, "gradient");
}

/* ============================== kernels ================================= */

/* Element-wise passes over n contiguous floats. They are functions with
 * restrict parameters because GCC honours restrict reliably only there; with
 * EACH's blocks they compile to packed SIMD code at -O2. */

static void k_relu(const float *restrict x, float *restrict y, int64_t n) {
  /* Written so that a NaN input stays NaN instead of becoming 0. */
  EACH(i, n, y[i] = x[i] < 0.0f ? 0.0f : x[i]);
}

/* The gradient at exactly 0 is 0, as in PyTorch. Both loads are
 * unconditional so that the select vectorizes. */
static void k_relu_back(const float *restrict x, const float *restrict g, float *restrict d,
                        int64_t n) {
  EACH(i, n, float gi = g[i], xi = x[i]; d[i] = xi > 0.0f ? gi : 0.0f);
}

static void k_tanh_back(const float *restrict y, const float *restrict g, float *restrict d,
                        int64_t n) {
  EACH(i, n, d[i] = g[i] * (1.0f - y[i] * y[i]));
}

static void k_sigmoid_back(const float *restrict y, const float *restrict g,
                           float *restrict d, int64_t n) {
  EACH(i, n, d[i] = g[i] * y[i] * (1.0f - y[i]));
}

static void k_mul(const float *restrict a, const float *restrict b, float *restrict out,
                  int64_t n) {
  EACH(i, n, out[i] = a[i] * b[i]);
}

static void k_scale(float *x, float s, int64_t n) { EACH(i, n, x[i] *= s); }

static void k_softmax_back(const float *restrict y, const float *restrict g,
                           float *restrict d, float dot, int64_t n) {
  EACH(i, n, d[i] = y[i] * (g[i] - dot));
}

/* ============================== modules ================================= */

nn_module *nn_module_new(const nn_module_ops *ops) {
  nn_module *m = calloc(1, sizeof *m);
  if (!m) {
    err_set(DRV_ENOMEM, "out of memory creating nn.%s", ops->type);
    return NULL;
  }
  m->ops = ops;
  m->refs = 1;
  m->training = true; /* PyTorch's default */
  return m;
}

/* The describe op shared by parameterless layers: "nn.ReLU". */
int nn_describe_plain(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.%s", m->ops->type);
  return 0;
}

/* ---- Linear --------------------------------------------------------------- */

static int linear_check_input(const nn_module *m, const tensor *x) {
  char a[64], nm[96];
  if (x->ndim != 2)
    return err_set(DRV_ESHAPE, "%s: input %s is not 2-D [batch, features]",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a));
  if (x->shape[1] != m->in_features)
    return err_set(DRV_ESHAPE, "%s: input %s has %lld features, expected %lld",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a), (long long)x->shape[1],
                   (long long)m->in_features);
  return 0;
}

/* y = x W^T + b. The rows of y are first filled with b and the GEMM then
 * runs with beta = 1: one write pass plus the GEMM. The alternative (GEMM
 * with beta = 0, then tensor_add_rowvec) costs more, because OpenBLAS
 * zeroes C before a beta = 0 product and the bias add is then a second,
 * read-modify-write pass over y. */
static int linear_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = linear_check_input(m, x);
  if (rc < 0 || (rc = ensure2(&m->out, x->shape[0], m->out_features)) < 0) return rc;
  int64_t rows = x->shape[0], cols = m->out_features;
  float *o = tensor_data(m->out);
  const float *b = tensor_data(m->params[1].value);
  for (int64_t i = 0; i < rows; i++) memcpy(o + i * cols, b, (size_t)cols * sizeof(float));
  rc = tensor_gemm(1.0f, x, false, m->params[0].value, true, 1.0f, m->out);
  if (rc < 0) return rc;
  *y = m->out;
  return 0;
}

/* dW += dy^T x, db += column sums of dy, dx = dy W (only when asked). */
static int linear_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  int rc = linear_check_input(m, x);
  int64_t shape[2] = {x->shape[0], m->out_features};
  if (rc < 0 || (rc = nn_check_grad(m, dy, 2, shape)) < 0) return rc;
  if ((rc = tensor_gemm(1.0f, dy, true, x, false, 1.0f, m->params[0].grad)) < 0) return rc;
  if ((rc = tensor_sum_rows(dy, m->params[1].grad, 1.0f)) < 0) return rc;
  if (!dx) return 0;
  if ((rc = ensure2(&m->dx, x->shape[0], m->in_features)) < 0) return rc;
  if ((rc = tensor_gemm(1.0f, dy, false, m->params[0].value, false, 0.0f, m->dx)) < 0)
    return rc;
  *dx = m->dx;
  return 0;
}

static int linear_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.Linear(%lld -> %lld)", (long long)m->in_features,
         (long long)m->out_features);
  return 0;
}

static const nn_module_ops linear_ops = {"Linear", linear_forward, linear_backward,
                                         linear_describe, NULL};

int nn_param_init(nn_param *p, const char *name, int ndim, const int64_t *shape) {
  snprintf(p->name, sizeof p->name, "%s", name);
  p->value = tensor_new(ndim, shape);
  p->grad = tensor_new(ndim, shape);
  return p->value && p->grad ? 0 : DRV_ENOMEM;
}

nn_module *nn_linear(int64_t in, int64_t out, rng_t *r) {
  if (in <= 0 || out <= 0 || !r) {
    err_set(DRV_EINVAL, "nn.Linear(%lld -> %lld): sizes must be positive%s", (long long)in,
            (long long)out, r ? "" : " and an rng is required");
    return NULL;
  }
  nn_module *m = nn_module_new(&linear_ops);
  if (!m) return NULL;
  m->in_features = in;
  m->out_features = out;
  m->nparams = 2;
  int64_t wshape[2] = {out, in};
  if (nn_param_init(&m->params[0], "weight", 2, wshape) < 0 ||
      nn_param_init(&m->params[1], "bias", 1, &out) < 0) {
    nn_unref(m);
    err_set(DRV_ENOMEM, "out of memory creating nn.Linear(%lld -> %lld)", (long long)in,
            (long long)out);
    return NULL;
  }
  /* PyTorch's default: both U(-1/sqrt(in), 1/sqrt(in)), weight drawn first. */
  float bound = (float)(1.0 / sqrt((double)in));
  tensor_uniform(m->params[0].value, r, -bound, bound);
  tensor_uniform(m->params[1].value, r, -bound, bound);
  return m;
}

/* ---- element-wise activations --------------------------------------------- */

/* Forward prologue shared by the element-wise layers: x contiguous, output
 * buffer shaped like x. */
int nn_elementwise_begin(nn_module *m, const tensor *x) {
  int rc = nn_need_contiguous(m, x, "input");
  return rc < 0 ? rc : nn_ensure_like(&m->out, x);
}

/* Backward prologue: dy shaped like x; `need_out` layers read the output of
 * the last forward, which must have had x's shape. */
int nn_elementwise_back_begin(nn_module *m, const tensor *x, const tensor *dy,
                                  bool need_out) {
  char a[64], b[64], nm[96];
  int rc = nn_need_contiguous(m, x, "input");
  if (rc < 0 || (rc = nn_check_grad(m, dy, x->ndim, x->shape)) < 0) return rc;
  if (need_out && (!m->out || !tensor_same_shape(m->out, x)))
    return err_set(DRV_EINVAL, "%s: backward of input %s without a forward of it (last output %s)",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a), m->out ? SHAPE(m->out, b) : "none");
  return nn_ensure_like(&m->dx, x);
}

static int relu_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = nn_elementwise_begin(m, x);
  if (rc < 0) return rc;
  k_relu(tensor_data(x), tensor_data(m->out), tensor_numel(x));
  *y = m->out;
  return 0;
}

/* Reads x, not the output. */
static int relu_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  int rc = nn_elementwise_back_begin(m, x, dy, false);
  if (rc < 0) return rc;
  k_relu_back(tensor_data(x), tensor_data(dy), tensor_data(m->dx), tensor_numel(x));
  *dx = m->dx;
  return 0;
}

static const nn_module_ops relu_ops = {"ReLU", relu_forward, relu_backward, nn_describe_plain,
                                       NULL};

static int tanh_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = nn_elementwise_begin(m, x);
  if (rc < 0) return rc;
  const float *restrict xp = tensor_data(x);
  float *restrict yp = tensor_data(m->out);
  int64_t n = tensor_numel(x);
  for (int64_t i = 0; i < n; i++) yp[i] = tanhf(xp[i]);
  *y = m->out;
  return 0;
}

/* dx = dy (1 - y^2), from the output kept by the last forward. */
static int tanh_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  int rc = nn_elementwise_back_begin(m, x, dy, true);
  if (rc < 0) return rc;
  k_tanh_back(tensor_data(m->out), tensor_data(dy), tensor_data(m->dx), tensor_numel(x));
  *dx = m->dx;
  return 0;
}

static const nn_module_ops tanh_ops = {"Tanh", tanh_forward, tanh_backward, nn_describe_plain,
                                       NULL};

/* exp of a non-positive argument only, so it never overflows. */
static inline float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  float z = expf(x);
  return z / (1.0f + z);
}

static int sigmoid_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = nn_elementwise_begin(m, x);
  if (rc < 0) return rc;
  const float *restrict xp = tensor_data(x);
  float *restrict yp = tensor_data(m->out);
  int64_t n = tensor_numel(x);
  for (int64_t i = 0; i < n; i++) yp[i] = sigmoid(xp[i]);
  *y = m->out;
  return 0;
}

/* dx = dy y (1 - y). */
static int sigmoid_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  int rc = nn_elementwise_back_begin(m, x, dy, true);
  if (rc < 0) return rc;
  k_sigmoid_back(tensor_data(m->out), tensor_data(dy), tensor_data(m->dx), tensor_numel(x));
  *dx = m->dx;
  return 0;
}

static const nn_module_ops sigmoid_ops = {"Sigmoid", sigmoid_forward, sigmoid_backward,
                                          nn_describe_plain, NULL};

/* ---- Softmax (row-wise) ----------------------------------------------------- */

static int softmax_check(nn_module *m, const tensor *x) {
  char a[64];
  if (x->ndim != 2)
    return err_set(DRV_ESHAPE, "nn.Softmax: input %s is not 2-D [batch, features]",
                   SHAPE(x, a));
  return nn_need_contiguous(m, x, "input");
}

/* Softmax of one row of n values into out; subtracting the row maximum
 * keeps exp() from overflowing. */
static void softmax_row(const float *restrict x, float *restrict out, int64_t n) {
  float mx = x[0];
  for (int64_t j = 1; j < n; j++) mx = x[j] > mx ? x[j] : mx;
  float s = 0.0f;
  for (int64_t j = 0; j < n; j++) s += out[j] = expf(x[j] - mx);
  float inv = 1.0f / s;
  k_scale(out, inv, n);
}

static int softmax_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = softmax_check(m, x);
  if (rc < 0 || (rc = nn_ensure_like(&m->out, x)) < 0) return rc;
  int64_t rows = x->shape[0], cols = x->shape[1];
  if (cols > 0)
    for (int64_t i = 0; i < rows; i++)
      softmax_row(tensor_data(x) + i * cols, tensor_data(m->out) + i * cols, cols);
  *y = m->out;
  return 0;
}

/* dx_j = y_j (dy_j - sum_k dy_k y_k), row by row. */
static int softmax_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  int rc = softmax_check(m, x);
  if (rc < 0 || (rc = nn_elementwise_back_begin(m, x, dy, true)) < 0) return rc;
  int64_t rows = x->shape[0], cols = x->shape[1];
  for (int64_t i = 0; i < rows; i++) {
    const float *y = tensor_data(m->out) + i * cols, *g = tensor_data(dy) + i * cols;
    float dot = 0.0f;
    for (int64_t j = 0; j < cols; j++) dot += g[j] * y[j];
    k_softmax_back(y, g, tensor_data(m->dx) + i * cols, dot, cols);
  }
  *dx = m->dx;
  return 0;
}

static const nn_module_ops softmax_ops = {"Softmax", softmax_forward, softmax_backward,
                                          nn_describe_plain, NULL};

/* ---- Dropout ---------------------------------------------------------------- */

/* Training: keep each element with probability 1 - p and scale it by
 * 1/(1 - p) (inverted dropout), so evaluation is the identity. The mask
 * holds the per-element factor (0 or 1/(1 - p)) for the backward pass.
 * Whether backward applies the mask follows m->training at that time. */
static bool dropout_active(const nn_module *m) { return m->training && m->p > 0.0f; }

static int dropout_forward(nn_module *m, const tensor *x, const tensor **y) {
  int rc = nn_elementwise_begin(m, x);
  if (rc < 0) return rc;
  int64_t n = tensor_numel(x);
  if (!dropout_active(m)) {
    memcpy(tensor_data(m->out), tensor_data(x), (size_t)n * sizeof(float));
  } else {
    if ((rc = nn_ensure_like(&m->mask, x)) < 0) return rc;
    float *mk = tensor_data(m->mask);
    float scale = m->p >= 1.0f ? 0.0f : 1.0f / (1.0f - m->p);
    for (int64_t i = 0; i < n; i++) mk[i] = rng_uniform(&m->rng) < m->p ? 0.0f : scale;
    k_mul(tensor_data(x), mk, tensor_data(m->out), n);
  }
  *y = m->out;
  return 0;
}

static int dropout_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  char a[64], b[64];
  if (!dx) return 0;
  int rc = nn_elementwise_back_begin(m, x, dy, false);
  if (rc < 0) return rc;
  int64_t n = tensor_numel(x);
  if (!dropout_active(m)) {
    memcpy(tensor_data(m->dx), tensor_data(dy), (size_t)n * sizeof(float));
  } else {
    if (!m->mask || !tensor_same_shape(m->mask, x))
      return err_set(DRV_EINVAL, "nn.Dropout(%g): backward of input %s without a training "
                     "forward of it (mask %s)", (double)m->p, SHAPE(x, a),
                     m->mask ? SHAPE(m->mask, b) : "none");
    k_mul(tensor_data(dy), tensor_data(m->mask), tensor_data(m->dx), n);
  }
  *dx = m->dx;
  return 0;
}

static int dropout_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.Dropout(%g)", (double)m->p);
  return 0;
}

static const nn_module_ops dropout_ops = {"Dropout", dropout_forward, dropout_backward,
                                          dropout_describe, NULL};

nn_module *nn_relu(void) { return nn_module_new(&relu_ops); }
nn_module *nn_tanh(void) { return nn_module_new(&tanh_ops); }
nn_module *nn_sigmoid(void) { return nn_module_new(&sigmoid_ops); }
nn_module *nn_softmax(void) { return nn_module_new(&softmax_ops); }

nn_module *nn_dropout(float p, uint64_t seed) {
  if (!(p >= 0.0f && p <= 1.0f)) {
    err_set(DRV_EINVAL, "nn.Dropout: probability %g is outside [0, 1]", (double)p);
    return NULL;
  }
  nn_module *m = nn_module_new(&dropout_ops);
  if (!m) return NULL;
  m->p = p;
  rng_seed(&m->rng, seed);
  return m;
}

/* ---- Sequential -------------------------------------------------------------- */

static const nn_module_ops sequential_ops;

static bool is_sequential(const nn_module *m) { return m->ops == &sequential_ops; }

/* The tensor m's last forward returned. Leaves always return m->out; a
 * Sequential returns its last child's output (its own out only when it is
 * empty and copies its input). */
static const tensor *last_output(const nn_module *m) {
  while (is_sequential(m) && m->nchildren > 0) m = m->children[m->nchildren - 1];
  return m->out;
}

/* Re-raises a child's error with its 1-based position: "layer 3: ...";
 * nested positions join up, "layer 2.1: ...". */
static int child_error(int rc, int pos) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", err_msg());
  if (strncmp(msg, "layer ", 6) == 0) return err_set(rc, "layer %d.%s", pos, msg + 6);
  return err_set(rc, "layer %d: %s", pos, msg);
}

static int sequential_forward(nn_module *m, const tensor *x, const tensor **y) {
  if (m->nchildren == 0) { /* the identity */
    int rc = nn_ensure_like(&m->out, x);
    if (rc < 0 || (rc = tensor_copy(m->out, x)) < 0) return rc;
    *y = m->out;
    return 0;
  }
  const tensor *h = x;
  for (int i = 0; i < m->nchildren; i++) {
    int rc = nn_forward(m->children[i], h, &h);
    if (rc < 0) return child_error(rc, i + 1);
  }
  *y = h;
  return 0;
}

/* Walks the children in reverse; child i's input is child i-1's output from
 * the last forward. The first child computes an input gradient only when
 * our caller wants one. */
static int sequential_backward(nn_module *m, const tensor *x, const tensor *dy,
                               const tensor **dx) {
  if (m->nchildren == 0) {
    int rc = nn_check_grad(m, dy, x->ndim, x->shape);
    if (rc < 0 || !dx) return rc;
    if ((rc = nn_ensure_like(&m->dx, dy)) < 0 || (rc = tensor_copy(m->dx, dy)) < 0) return rc;
    *dx = m->dx;
    return 0;
  }
  const tensor *g = dy;
  for (int i = m->nchildren - 1; i >= 0; i--) {
    const tensor *in = i > 0 ? last_output(m->children[i - 1]) : x;
    if (!in)
      return err_set(DRV_EINVAL, "nn.Sequential: backward before forward (layer %d has no "
                     "output)", i);
    int rc = nn_backward(m->children[i], in, g, (i > 0 || dx) ? &g : NULL);
    if (rc < 0) return child_error(rc, i + 1);
  }
  if (dx) *dx = g;
  return 0;
}

/* Torch7's Sequential:__tostring__: children listed one per line, their own
 * continuation lines indented two more spaces per level, no final newline. */
int nn_describe_container(const nn_module *m, char *buf, size_t n, int indent) {
  nn_append(buf, n, "nn.%s {\n%*s[input", m->ops->type, indent + 2, "");
  const char *sep = m->ops == &sequential_ops ? " -> " : " | ";
  for (int i = 0; i < m->nchildren; i++) nn_append(buf, n, "%s(%d)", i ? sep : " -> ", i + 1);
  nn_append(buf, n, " -> output]");
  for (int i = 0; i < m->nchildren; i++) {
    nn_append(buf, n, "\n%*s(%d): ", indent + 2, "", i + 1);
    m->children[i]->ops->describe(m->children[i], buf, n, indent + 2);
  }
  nn_append(buf, n, "\n%*s}", indent, "");
  return 0;
}

static const nn_module_ops sequential_ops = {"Sequential", sequential_forward,
                                             sequential_backward, nn_describe_container, NULL};

nn_module *nn_sequential(void) { return nn_module_new(&sequential_ops); }

/* True when `needle` is `tree` or one of its descendants. */
static void mark_tree(nn_module *m, uint64_t stamp) {
  m->mark = stamp;
  for (int i = 0; i < m->nchildren; i++) mark_tree(m->children[i], stamp);
}

/* Walks `sub` for modules carrying `stamp`: *cycle when `seq` is one, else
 * the first other one in *dup. */
static void find_marked(nn_module *sub, uint64_t stamp, const nn_module *seq, bool *cycle,
                        nn_module **dup) {
  if (sub->mark == stamp) {
    if (sub == seq) *cycle = true;
    else if (!*dup) *dup = sub;
  }
  for (int i = 0; i < sub->nchildren; i++) find_marked(sub->children[i], stamp, seq, cycle, dup);
}

/* A module keeps the buffers of its last call, so it may appear only once
 * in a model (the backward pass reads each child's last output): cycles and
 * repeats are refused. The same module may still be shared by two models.
 * The check marks seq's tree and walks child's: linear in the two. A seq
 * that holds nothing and is in no container cannot be in child's tree nor
 * share a module with it, so wrapping a model in a new Sequential costs
 * nothing (it was a walk of the whole model per level: quadratic). */
int nn_sequential_add(nn_module *seq, nn_module *child) {
  static uint64_t stamps;
  char nm[96];
  if (!seq || !child || !nn_takes_children(seq))
    return err_set(DRV_EINVAL, "nn_sequential_add: %s", !seq || !child
                   ? "NULL module" : "not an nn.Sequential, nn.Concat or nn.Sum");
  if (seq->nparents > 0 || seq->nchildren > 0 || seq == child) {
    bool cycle = false;
    nn_module *dup = NULL;
    mark_tree(seq, ++stamps);
    find_marked(child, stamps, seq, &cycle, &dup);
    if (cycle)
      return err_set(DRV_EINVAL, "nn.%s: adding a container to itself would make a "
                     "cycle", seq->ops->type);
    if (dup)
      return err_set(DRV_EINVAL, "nn.%s: %s is already part of this model; a module "
                     "may appear only once (create a new one)", seq->ops->type,
                     nn_name_of(child, nm, sizeof nm));
  }
  if (util_grow(&seq->children, &seq->capchildren, (size_t)seq->nchildren + 1,
                sizeof *seq->children, 4) < 0)
    return err_set(DRV_ENOMEM, "out of memory adding to nn.Sequential");
  seq->children[seq->nchildren++] = nn_ref(child);
  child->nparents++;
  return 0;
}

bool nn_takes_children(const nn_module *m) {
  return m && (m->ops == &sequential_ops || strcmp(m->ops->type, "Concat") == 0 ||
               strcmp(m->ops->type, "Sum") == 0);
}

/* ---- common entry points -------------------------------------------------- */

nn_module *nn_ref(nn_module *m) {
  if (m) m->refs++;
  return m;
}

void nn_unref(nn_module *m) {
  if (!m || --m->refs > 0) return;
  if (m->ops->destroy) m->ops->destroy(m);
  for (int i = 0; i < m->nchildren; i++) {
    m->children[i]->nparents--;
    nn_unref(m->children[i]);
  }
  free(m->children);
  for (int i = 0; i < 2; i++) {
    tensor_free(m->params[i].value);
    tensor_free(m->params[i].grad);
  }
  for (int i = 0; i < 3; i++) tensor_free(m->buffers[i].value);
  tensor_free(m->out);
  tensor_free(m->dx);
  tensor_free(m->mask);
  tensor_free(m->cols);
  free(m->argmax);
  free(m->winpos);
  free(m);
}

int nn_forward(nn_module *m, const tensor *x, const tensor **y) {
  if (!m || !x || !y) return err_set(DRV_EINVAL, "nn_forward: NULL argument");
  return m->ops->forward(m, x, y);
}

int nn_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!m || !x || !dy) return err_set(DRV_EINVAL, "nn_backward: NULL argument");
  return m->ops->backward(m, x, dy, dx);
}

void nn_set_training(nn_module *m, bool training) {
  if (!m) return;
  m->training = training;
  for (int i = 0; i < m->nchildren; i++) nn_set_training(m->children[i], training);
}

void nn_set_sparse(nn_module *m, const nn_sparse *sp) {
  if (!m) return;
  m->sparse = sp;
  for (int i = 0; i < m->nchildren; i++) nn_set_sparse(m->children[i], sp);
}

void nn_zero_grad(nn_module *m) {
  if (!m) return;
  for (int i = 0; i < m->nparams; i++) tensor_fill(m->params[i].grad, 0.0f);
  if (m->tab) nn_sptab_zero_grad(m);
  for (int i = 0; i < m->nchildren; i++) nn_zero_grad(m->children[i]);
}

void nn_param_list_free(nn_param_list *l) {
  if (!l) return;
  free(l->items);
  l->items = NULL;
  l->n = l->cap = 0;
}

static int param_push(nn_param_list *l, const nn_param *p, const char *prefix) {
  if (util_grow(&l->items, &l->cap, (size_t)l->n + 1, sizeof *l->items, 8) < 0)
    return err_set(DRV_ENOMEM, "out of memory collecting parameters");
  nn_param *q = &l->items[l->n];
  int len = snprintf(q->name, sizeof q->name, "%s%s", prefix, p->name);
  if (len < 0 || (size_t)len >= sizeof q->name)
    return err_set(DRV_EINVAL, "parameter name %s%s is longer than %zu characters", prefix,
                   p->name, sizeof q->name - 1);
  q->value = p->value;
  q->grad = p->grad;
  l->n++;
  return 0;
}

/* Children are numbered from `first`: 1 for drover's names (Torch7's
 * 1-based nn.Sequential), 0 for PyTorch's. Buffers only when asked. */
static int collect(nn_module *m, const char *prefix, int first, bool buffers,
                   nn_param_list *out) {
  for (int i = 0; i < m->nparams; i++) {
    int rc = param_push(out, &m->params[i], prefix);
    if (rc < 0) return rc;
  }
  for (int i = 0; buffers && i < m->nbuffers; i++) {
    int rc = param_push(out, &m->buffers[i], prefix);
    if (rc < 0) return rc;
  }
  for (int i = 0; i < m->nchildren; i++) {
    char sub[64];
    int len = snprintf(sub, sizeof sub, "%s%d.", prefix, i + first);
    if (len < 0 || (size_t)len >= sizeof sub)
      return err_set(DRV_EINVAL, "model nested too deeply to name its parameters");
    int rc = collect(m->children[i], sub, first, buffers, out);
    if (rc < 0) return rc;
  }
  return 0;
}

/* The running statistics: buffers of one dimension or more (BatchNorm's
 * running_mean and running_var, not its 0-dimensional counter). */
static int collect_stats(nn_module *m, const char *prefix, int first, nn_param_list *out) {
  for (int i = 0; i < m->nbuffers; i++) {
    if (m->buffers[i].value->ndim < 1) continue;
    int rc = param_push(out, &m->buffers[i], prefix);
    if (rc < 0) return rc;
  }
  for (int i = 0; i < m->nchildren; i++) {
    char sub[64];
    int len = snprintf(sub, sizeof sub, "%s%d.", prefix, i + first);
    if (len < 0 || (size_t)len >= sizeof sub)
      return err_set(DRV_EINVAL, "model nested too deeply to name its parameters");
    int rc = collect_stats(m->children[i], sub, first, out);
    if (rc < 0) return rc;
  }
  return 0;
}

int nn_collect_synced(nn_module *m, bool torch_names, nn_param_list *out, int *ntrained) {
  if (!m || !out || !ntrained) return err_set(DRV_EINVAL, "nn_collect_synced: NULL argument");
  int first = torch_names ? 0 : 1;
  int rc = collect(m, "", first, false, out);
  *ntrained = out->n;
  return rc < 0 ? rc : collect_stats(m, "", first, out);
}

int nn_collect_params(nn_module *m, nn_param_list *out) {
  if (!m || !out) return err_set(DRV_EINVAL, "nn_collect_params: NULL argument");
  return collect(m, "", 1, false, out);
}

int nn_torch_params(nn_module *m, nn_param_list *out) {
  if (!m || !out) return err_set(DRV_EINVAL, "nn_torch_params: NULL argument");
  return collect(m, "", 0, false, out);
}

int nn_torch_state(nn_module *m, nn_param_list *out) {
  if (!m || !out) return err_set(DRV_EINVAL, "nn_torch_state: NULL argument");
  return collect(m, "", 0, true, out);
}

int64_t nn_num_params(nn_module *m) {
  int64_t n = 0;
  if (!m) return 0;
  for (int i = 0; i < m->nparams; i++) n += tensor_numel(m->params[i].value);
  for (int i = 0; i < m->nchildren; i++) n += nn_num_params(m->children[i]);
  return n;
}

int nn_describe(const nn_module *m, char *buf, size_t n) {
  if (!buf || n == 0) return 0;
  buf[0] = '\0';
  int rc = m->ops->describe(m, buf, n, 0);
  return rc < 0 ? rc : (int)strlen(buf);
}
