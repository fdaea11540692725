/* tensor_ops.c - broadcasting element-wise math, reductions along a
 * dimension, index_select, cat and stack over tensors of any strides.
 *
 * Every loop works on shapes padded to TENSOR_MAXDIM with leading 1s, so
 * that one four-deep loop with per-operand strides (0 where an operand is
 * broadcast) serves every rank without recursion.
 */
#include "numeric/tensor_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/err.h"
#include "base/util.h"

#define MD TENSOR_MAXDIM

/* A tensor's shape and strides padded on the left to MD dimensions. */
typedef struct padded {
  int64_t shape[MD];
  int64_t stride[MD];
  const float *data;
} padded;

static void pad(const tensor *t, padded *p) {
  int lead = MD - t->ndim;
  for (int d = 0; d < MD; d++) {
    p->shape[d] = d < lead ? 1 : t->shape[d - lead];
    p->stride[d] = d < lead || p->shape[d] == 1 ? 0 : t->stride[d - lead];
  }
  p->data = tensor_data(t);
}

/* ============================== names =================================== */

const char *tensor_binop_name(tensor_binop op) {
  static const char *const names[] = {"+",  "-",  "*",  "/",  "gt",      "ge",
                                      "lt", "le", "eq", "ne", "maximum", "minimum"};
  return (unsigned)op < sizeof names / sizeof *names ? names[op] : "?";
}

/* ============================== element-wise ============================ */

static inline float apply_bin(tensor_binop op, float x, float y) {
  switch (op) {
  case TOP_ADD: return x + y;
  case TOP_SUB: return x - y;
  case TOP_MUL: return x * y;
  case TOP_DIV: return x / y;
  case TOP_GT: return x > y;
  case TOP_GE: return x >= y;
  case TOP_LT: return x < y;
  case TOP_LE: return x <= y;
  case TOP_EQ: return x == y;
  case TOP_NE: return x != y;
  case TOP_MAXIMUM: return x > y || isnan(x) ? x : y;
  case TOP_MINIMUM: return x < y || isnan(x) ? x : y;
  }
  return NAN;
}

/* The broadcast result shape of a and b, as NumPy and PyTorch have it:
 * shapes aligned at their last dimension, the shorter one's missing
 * leading sizes taken as 1 (pad() reads them so); each pair of sizes
 * equal or one of them 1. */
static int broadcast_shape(const char *what, const tensor *a, const tensor *b, int *nd,
                           int64_t *shape) {
  char sa[64], sb[64];
  *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int d = 0; d < *nd; d++) {
    int da = d - (*nd - a->ndim), db = d - (*nd - b->ndim);
    int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
    if (x != y && x != 1 && y != 1)
      return err_set(DRV_ESHAPE, "%s: cannot broadcast %s with %s (dimension %d of the "
                     "result: %lld vs %lld)", what, tensor_shape_str(a, sa, sizeof sa),
                     tensor_shape_str(b, sb, sizeof sb), d + 1, (long long)x, (long long)y);
    shape[d] = x == 1 ? y : x;
  }
  return 0;
}

tensor *tensor_binary(tensor_binop op, const tensor *a, const tensor *b) {
  int nd = 0;
  int64_t shape[MD] = {0};
  if (broadcast_shape(tensor_binop_name(op), a, b, &nd, shape) < 0) return NULL;
  tensor *out = tensor_new(nd, shape);
  if (!out) return NULL;
  padded pa, pb, po;
  pad(a, &pa), pad(b, &pb), pad(out, &po);
  float *o = tensor_data(out);
  for (int64_t i = 0; i < po.shape[0]; i++)
    for (int64_t j = 0; j < po.shape[1]; j++)
      for (int64_t k = 0; k < po.shape[2]; k++) {
        const float *x = pa.data + i * pa.stride[0] + j * pa.stride[1] + k * pa.stride[2];
        const float *y = pb.data + i * pb.stride[0] + j * pb.stride[1] + k * pb.stride[2];
        for (int64_t l = 0; l < po.shape[3]; l++)
          *o++ = apply_bin(op, x[l * pa.stride[3]], y[l * pb.stride[3]]);
      }
  return out;
}

/* Calls fn(x, ctx) for every element of a, in row-major order, into a new
 * contiguous tensor of a's shape. */
typedef float (*map_fn)(float x, const float *ctx);

static tensor *map(const tensor *a, map_fn fn, const float *ctx) {
  tensor *out = tensor_new(a->ndim, a->shape);
  if (!out) return NULL;
  padded pa;
  pad(a, &pa);
  float *o = tensor_data(out);
  for (int64_t i = 0; i < pa.shape[0]; i++)
    for (int64_t j = 0; j < pa.shape[1]; j++)
      for (int64_t k = 0; k < pa.shape[2]; k++) {
        const float *x = pa.data + i * pa.stride[0] + j * pa.stride[1] + k * pa.stride[2];
        for (int64_t l = 0; l < pa.shape[3]; l++) *o++ = fn(x[l * pa.stride[3]], ctx);
      }
  return out;
}

/* ctx: {op, s, scalar_first} */
static float scalar_fn(float x, const float *ctx) {
  tensor_binop op = (tensor_binop)(int)ctx[0];
  return ctx[2] != 0 ? apply_bin(op, ctx[1], x) : apply_bin(op, x, ctx[1]);
}

tensor *tensor_binary_scalar(tensor_binop op, const tensor *a, float s, int scalar_first) {
  float ctx[3] = {(float)op, s, scalar_first ? 1.0f : 0.0f};
  return map(a, scalar_fn, ctx);
}

static float unary_fn(float x, const float *ctx) {
  switch ((tensor_unop)(int)ctx[0]) {
  case TUN_NEG: return -x;
  case TUN_EXP: return expf(x);
  case TUN_LOG: return logf(x);
  case TUN_SQRT: return sqrtf(x);
  case TUN_ABS: return fabsf(x);
  }
  return NAN;
}

tensor *tensor_unary(tensor_unop op, const tensor *a) {
  float ctx[1] = {(float)op};
  return map(a, unary_fn, ctx);
}

static float clamp_fn(float x, const float *ctx) {
  return x < ctx[0] ? ctx[0] : x > ctx[1] ? ctx[1] : x;
}

tensor *tensor_clamp(const tensor *a, float lo, float hi) {
  if (lo > hi) {
    err_set(DRV_EINVAL, "clamp: lower bound %g above upper bound %g", (double)lo, (double)hi);
    return NULL;
  }
  float ctx[2] = {lo, hi};
  return map(a, clamp_fn, ctx);
}

/* ============================== reductions ============================== */

/* One reduction over n values spaced `stride` apart. */
static float reduce_line(tensor_redop op, const float *x, int64_t n, int64_t stride) {
  if (op == TRED_SUM || op == TRED_MEAN) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i * stride];
    return (float)(op == TRED_MEAN ? (n ? s / (double)n : NAN) : s);
  }
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++) {
    float v = x[i * stride], b = x[best * stride];
    if (isnan(b)) break; /* NaN wins, as in PyTorch */
    if (isnan(v) || (op == TRED_MIN ? v < b : v > b)) best = i;
  }
  return op == TRED_ARGMAX ? (float)best : x[best * stride];
}

static const char *red_name(tensor_redop op) {
  static const char *const names[] = {"sum", "mean", "max", "min", "argmax"};
  return names[op];
}

tensor *tensor_reduce(tensor_redop op, const tensor *a, int dim, int keepdim) {
  char s[64];
  if (dim < 0 || dim >= a->ndim) {
    err_set(DRV_ERANGE, "%s: dimension %d of a %s tensor", red_name(op), dim + 1,
            tensor_shape_str(a, s, sizeof s));
    return NULL;
  }
  if (a->shape[dim] == 0 && op != TRED_SUM && op != TRED_MEAN) {
    err_set(DRV_EINVAL, "%s: dimension %d of %s is empty", red_name(op), dim + 1,
            tensor_shape_str(a, s, sizeof s));
    return NULL;
  }
  int64_t shape[MD] = {0};
  int nd = 0;
  for (int d = 0; d < a->ndim; d++)
    if (d != dim) shape[nd++] = a->shape[d];
    else if (keepdim) shape[nd++] = 1;
  tensor *out = tensor_new(nd, shape);
  if (!out) return NULL;
  padded pa;
  pad(a, &pa);
  int pd = dim + MD - a->ndim; /* the reduced dimension, padded */
  int64_t n = pa.shape[pd], st = a->stride[dim];
  pa.shape[pd] = 1;
  float *o = tensor_data(out);
  for (int64_t i = 0; i < pa.shape[0]; i++)
    for (int64_t j = 0; j < pa.shape[1]; j++)
      for (int64_t k = 0; k < pa.shape[2]; k++)
        for (int64_t l = 0; l < pa.shape[3]; l++) {
          const float *x = pa.data + i * pa.stride[0] + j * pa.stride[1] + k * pa.stride[2] +
                           l * pa.stride[3];
          *o++ = reduce_line(op, x, n, st);
        }
  return out;
}

/* ============================== products ================================ */

tensor *tensor_mm(const tensor *a, const tensor *b) {
  char sa[64], sb[64];
  if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0]) {
    err_set(DRV_ESHAPE, "mm: cannot multiply %s by %s (expects [n, k] @ [k, m])",
            tensor_shape_str(a, sa, sizeof sa), tensor_shape_str(b, sb, sizeof sb));
    return NULL;
  }
  tensor *out = tensor_new2(a->shape[0], b->shape[1]);
  if (!out) return NULL;
  /* gemm takes row-major or transposed views; anything else is copied. */
  tensor *ca = NULL, *cb = NULL;
  int rc = tensor_gemm(1.0f, a, false, b, false, 0.0f, out);
  if (rc < 0) {
    ca = tensor_clone(a), cb = tensor_clone(b);
    rc = ca && cb ? tensor_gemm(1.0f, ca, false, cb, false, 0.0f, out) : DRV_ENOMEM;
  }
  tensor_free(ca), tensor_free(cb);
  if (rc < 0) tensor_free(out), out = NULL;
  return out;
}

/* ============================== gathers and joins ======================= */

tensor *tensor_index_select(const tensor *a, int dim, const int64_t *ids, int64_t n) {
  char s[64];
  if (dim < 0 || dim >= a->ndim) {
    err_set(DRV_ERANGE, "index: dimension %d of a %s tensor", dim + 1,
            tensor_shape_str(a, s, sizeof s));
    return NULL;
  }
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= a->shape[dim]) {
      err_set(DRV_ERANGE, "index: position %lld (id %lld) is outside 1..%lld of dimension %d of %s",
              (long long)(i + 1), (long long)(ids[i] + 1), (long long)a->shape[dim], dim + 1,
              tensor_shape_str(a, s, sizeof s));
      return NULL;
    }
  int64_t shape[MD] = {0};
  for (int d = 0; d < a->ndim; d++) shape[d] = d == dim ? n : a->shape[d];
  tensor *out = tensor_new(a->ndim, shape);
  for (int64_t i = 0; out && i < n; i++) {
    tensor *src = tensor_narrow(a, dim, ids[i], 1), *dst = tensor_narrow(out, dim, i, 1);
    int rc = src && dst ? tensor_copy(dst, src) : DRV_ENOMEM;
    tensor_free(src), tensor_free(dst);
    if (rc < 0) tensor_free(out), out = NULL;
  }
  return out;
}

/* The shape of cat(ts, dim), overflow-checked. */
static int cat_shape(const tensor *const *ts, int n, int dim, int64_t *shape) {
  char s0[64], si[64];
  if (n < 1) return err_set(DRV_EINVAL, "cat: no tensors to join");
  const tensor *t0 = ts[0];
  if (dim < 0 || dim >= t0->ndim)
    return err_set(DRV_ERANGE, "cat: dimension %d of a %s tensor", dim + 1,
                   tensor_shape_str(t0, s0, sizeof s0));
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    int same = ts[i]->ndim == t0->ndim;
    for (int d = 0; same && d < t0->ndim; d++) same = d == dim || ts[i]->shape[d] == t0->shape[d];
    if (!same)
      return err_set(DRV_ESHAPE, "cat: tensor %d is %s, tensor 1 is %s (only dimension %d may differ)",
                     i + 1, tensor_shape_str(ts[i], si, sizeof si),
                     tensor_shape_str(t0, s0, sizeof s0), dim + 1);
    if (__builtin_add_overflow(total, (size_t)ts[i]->shape[dim], &total) || total > INT64_MAX / 4)
      return err_set(DRV_ENOMEM, "cat: joined size too large");
  }
  for (int d = 0; d < t0->ndim; d++) shape[d] = d == dim ? (int64_t)total : t0->shape[d];
  return 0;
}

tensor *tensor_cat(const tensor *const *ts, int n, int dim) {
  int64_t shape[MD] = {0};
  if (cat_shape(ts, n, dim, shape) < 0) return NULL;
  tensor *out = tensor_new(ts[0]->ndim, shape);
  int64_t at = 0;
  for (int i = 0; out && i < n; i++) {
    tensor *dst = tensor_narrow(out, dim, at, ts[i]->shape[dim]);
    int rc = dst ? tensor_copy(dst, ts[i]) : DRV_ENOMEM;
    tensor_free(dst);
    at += ts[i]->shape[dim];
    if (rc < 0) tensor_free(out), out = NULL;
  }
  return out;
}

/* A view of t with a size-1 dimension inserted at `dim`. */
static tensor *unsqueeze(const tensor *t, int dim) {
  tensor *v = tensor_view(t);
  if (!v) return NULL;
  for (int d = t->ndim; d > dim; d--) v->shape[d] = t->shape[d - 1], v->stride[d] = t->stride[d - 1];
  v->shape[dim] = 1, v->stride[dim] = 1;
  v->ndim = t->ndim + 1;
  return v;
}

tensor *tensor_stack(const tensor *const *ts, int n, int dim) {
  char s0[64], si[64];
  if (n < 1) {
    err_set(DRV_EINVAL, "stack: no tensors to join");
    return NULL;
  }
  if (ts[0]->ndim >= MD || dim < 0 || dim > ts[0]->ndim) {
    err_set(DRV_ERANGE, "stack: dimension %d for %s tensors (at most %d dimensions)", dim + 1,
            tensor_shape_str(ts[0], s0, sizeof s0), MD);
    return NULL;
  }
  for (int i = 1; i < n; i++)
    if (!tensor_same_shape(ts[i], ts[0])) {
      err_set(DRV_ESHAPE, "stack: tensor %d is %s, tensor 1 is %s (shapes must be equal)", i + 1,
              tensor_shape_str(ts[i], si, sizeof si), tensor_shape_str(ts[0], s0, sizeof s0));
      return NULL;
    }
  size_t bytes = 0;
  tensor **vs = util_mul_ok((size_t)n, sizeof *vs, &bytes) ? calloc(1, bytes) : NULL;
  tensor *out = NULL;
  int ok = vs != NULL;
  for (int i = 0; ok && i < n; i++) ok = (vs[i] = unsqueeze(ts[i], dim)) != NULL;
  if (ok) out = tensor_cat((const tensor *const *)vs, n, dim);
  else err_set(DRV_ENOMEM, "out of memory");
  for (int i = 0; vs && i < n; i++) tensor_free(vs[i]);
  free(vs);
  return out;
}
