/* tensor.c - float32 tensors: storage, views, copies and BLAS-backed math.
 *
 * Storage refcounts are plain ints: a tensor and its views belong to one
 * thread at a time (work handed to the thread pool takes its tensors along
 * and gives them back).
 */
#include "numeric/tensor.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/blockcache.h"
#include "base/err.h"
#include "base/util.h"

/* Blocks this large are aligned to 2 MiB and marked for transparent huge
 * pages: a dataset read in random batches otherwise spends much of its
 * gather time in TLB misses (Linux defaults THP to madvise-only). */

#define HUGE_ALIGN ((size_t)2 << 20)

/* ============================== storage ================================= */

/* zero: fill with zeros (tensor_new's promise); else the caller writes
 * every element. */
static tensor_storage *storage_new(int64_t n, bool zero) {
  if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(float) - 16) {
    err_set(DRV_ENOMEM, "tensor of %lld elements is too large", (long long)n);
    return NULL;
  }
  tensor_storage *s = malloc(sizeof *s);
  if (!s) goto nomem;
  /* Round up to whole cache lines; posix_memalign accepts any multiple. */
  size_t bytes = ((size_t)(n ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
  void *p = NULL;
  size_t align = bytes >= HUGE_ALIGN ? HUGE_ALIGN : 64;
  if (align == HUGE_ALIGN) bytes = (bytes + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
  if (align == HUGE_ALIGN && (p = blockcache_take(bytes))) {
    if (zero) memset(p, 0, bytes);
  } else {
    if (posix_memalign(&p, align, bytes) != 0) {
      free(s);
      goto nomem;
    }
#ifdef MADV_HUGEPAGE
    if (align == HUGE_ALIGN) madvise(p, bytes, MADV_HUGEPAGE); /* a hint: failure is fine */
#endif
    if (zero || align != HUGE_ALIGN) memset(p, 0, bytes);
  }
  s->data = p;
  s->capacity = (int64_t)(bytes / sizeof(float));
  s->refs = 1;
  s->mapped = 0;
  return s;
nomem:
  err_set(DRV_ENOMEM, "out of memory allocating a tensor of %lld elements", (long long)n);
  return NULL;
}

static void storage_unref(tensor_storage *s) {
  if (s && --s->refs == 0) {
    if (s->mapped) munmap(s->data, s->mapped);
    else blockcache_give(s->data, (size_t)s->capacity * sizeof(float));
    free(s);
  }
}

/* ============================== shapes ================================== */

static int check_shape(int ndim, const int64_t *shape, int64_t *numel) {
  if (ndim < 0 || ndim > TENSOR_MAXDIM)
    return err_set(DRV_EINVAL, "tensor: %d dimensions (at most %d)", ndim, TENSOR_MAXDIM);
  /* Strides are products of the sizes, so bound the product of the
   * non-zero sizes: a [0, 2^40, 2^40] tensor has no elements but would
   * still overflow its strides. */
  int64_t n = 1, nonzero = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return err_set(DRV_EINVAL, "tensor: negative size %lld in dimension %d",
                     (long long)shape[i], i + 1);
    if (shape[i] && nonzero > INT64_MAX / 4 / shape[i])
      return err_set(DRV_ENOMEM, "tensor: shape too large");
    if (shape[i]) nonzero *= shape[i];
    n *= shape[i];
  }
  /* An empty tensor's other sizes bound the loops over its outer
   * dimensions (a [2^60, 0] tensor has no elements and 2^60 rows). */
  if (n == 0 && nonzero > TENSOR_EMPTY_MAX)
    return err_set(DRV_ERANGE, "tensor: an empty tensor's non-zero sizes multiply to %lld "
                   "(at most %lld)", (long long)nonzero, (long long)TENSOR_EMPTY_MAX);
  *numel = n;
  return 0;
}

static void set_contiguous(tensor *t, int ndim, const int64_t *shape) {
  int64_t s = 1;
  t->ndim = ndim;
  for (int i = ndim - 1; i >= 0; i--) {
    t->shape[i] = shape[i];
    t->stride[i] = s;
    s *= shape[i];
  }
  for (int i = ndim; i < TENSOR_MAXDIM; i++) t->shape[i] = 1, t->stride[i] = 1;
  t->offset = 0;
}

int64_t tensor_numel(const tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

bool tensor_is_contiguous(const tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != s) return false;
    s *= t->shape[i];
  }
  return true;
}

bool tensor_same_shape(const tensor *a, const tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

const char *tensor_shape_str(const tensor *t, char *buf, size_t n) {
  size_t len = 0;
  len += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->ndim && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  if (len < n) snprintf(buf + len, n - len, "]");
  return buf;
}

/* ============================== lifetime ================================ */

static tensor *new_tensor(int ndim, const int64_t *shape, bool zero) {
  int64_t n;
  if (check_shape(ndim, shape, &n) < 0) return NULL;
  tensor *t = malloc(sizeof *t);
  if (!t) {
    err_set(DRV_ENOMEM, "out of memory");
    return NULL;
  }
  t->storage = storage_new(n, zero);
  if (!t->storage) {
    free(t);
    return NULL;
  }
  set_contiguous(t, ndim, shape);
  return t;
}

tensor *tensor_new(int ndim, const int64_t *shape) { return new_tensor(ndim, shape, true); }

tensor *tensor_new_uninit(int ndim, const int64_t *shape) { return new_tensor(ndim, shape, false); }

tensor *tensor_new1(int64_t n) { return tensor_new(1, &n); }

tensor *tensor_new2(int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  return tensor_new(2, shape);
}

tensor *tensor_from(int ndim, const int64_t *shape, const float *src) {
  tensor *t = tensor_new_uninit(ndim, shape);
  if (t) memcpy(tensor_data(t), src, (size_t)tensor_numel(t) * sizeof(float));
  return t;
}

tensor *tensor_map(void *base, size_t map_bytes, int64_t offset, int ndim, const int64_t *shape) {
  int64_t n;
  if (check_shape(ndim, shape, &n) < 0) return NULL;
  if (offset < 0 || (uint64_t)offset > map_bytes / sizeof(float) ||
      (uint64_t)n > map_bytes / sizeof(float) - (uint64_t)offset) {
    err_set(DRV_ERANGE, "tensor_map: %lld elements at %lld do not fit %zu bytes", (long long)n,
            (long long)offset, map_bytes);
    return NULL;
  }
  tensor *t = malloc(sizeof *t);
  tensor_storage *s = malloc(sizeof *s);
  if (!t || !s) {
    free(t);
    free(s);
    err_set(DRV_ENOMEM, "out of memory");
    return NULL;
  }
  s->data = base;
  s->capacity = (int64_t)(map_bytes / sizeof(float));
  s->refs = 1;
  s->mapped = map_bytes;
  t->storage = s;
  set_contiguous(t, ndim, shape);
  t->offset = offset;
  return t;
}

void tensor_free(tensor *t) {
  if (!t) return;
  storage_unref(t->storage);
  free(t);
}

int tensor_resize(tensor *t, int ndim, const int64_t *shape) {
  int64_t n;
  int rc = check_shape(ndim, shape, &n);
  if (rc < 0) return rc;
  if (t->storage->refs != 1 || t->storage->capacity < n) {
    tensor_storage *s = storage_new(n, true);
    if (!s) return DRV_ENOMEM;
    storage_unref(t->storage);
    t->storage = s;
  }
  set_contiguous(t, ndim, shape);
  return 0;
}

int tensor_resize2(tensor *t, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  return tensor_resize(t, 2, shape);
}

/* ============================== views =================================== */

tensor *tensor_view(const tensor *t) {
  tensor *v = malloc(sizeof *v);
  if (!v) {
    err_set(DRV_ENOMEM, "out of memory");
    return NULL;
  }
  *v = *t;
  v->storage->refs++;
  return v;
}

tensor *tensor_narrow(const tensor *t, int dim, int64_t start, int64_t len) {
  if (dim < 0 || dim >= t->ndim || start < 0 || len < 0 || start + len > t->shape[dim]) {
    char s[64];
    err_set(DRV_ERANGE, "narrow: [%lld, %lld) of dimension %d is outside %s",
            (long long)start, (long long)(start + len), dim + 1,
            tensor_shape_str(t, s, sizeof s));
    return NULL;
  }
  tensor *v = tensor_view(t);
  if (!v) return NULL;
  v->offset += start * t->stride[dim];
  v->shape[dim] = len;
  return v;
}

tensor *tensor_transpose(const tensor *t, int d0, int d1) {
  if (d0 < 0 || d1 < 0 || d0 >= t->ndim || d1 >= t->ndim) {
    err_set(DRV_ERANGE, "transpose: dimensions %d, %d of a %d-D tensor", d0 + 1, d1 + 1,
            t->ndim);
    return NULL;
  }
  tensor *v = tensor_view(t);
  if (!v) return NULL;
  int64_t s = v->shape[d0], st = v->stride[d0];
  v->shape[d0] = v->shape[d1], v->stride[d0] = v->stride[d1];
  v->shape[d1] = s, v->stride[d1] = st;
  return v;
}

tensor *tensor_reshape(const tensor *t, int ndim, const int64_t *shape) {
  char a[64];
  if (ndim < 0 || ndim > TENSOR_MAXDIM) {
    err_set(DRV_EINVAL, "reshape: %d dimensions (at most %d)", ndim, TENSOR_MAXDIM);
    return NULL;
  }
  if (!tensor_is_contiguous(t)) {
    err_set(DRV_EINVAL, "reshape: tensor %s is not contiguous (clone it first)",
            tensor_shape_str(t, a, sizeof a));
    return NULL;
  }
  int64_t s[TENSOR_MAXDIM], n = tensor_numel(t), m;
  size_t known = 1; /* overflows are refused: 2^62 x 4 must not pass as 0 */
  int infer = -1;
  for (int i = 0; i < ndim; i++) {
    s[i] = shape[i];
    if (s[i] == -1 && infer < 0) infer = i;
    else if (s[i] < 0 || !util_mul_ok(known, (size_t)s[i], &known) || known > INT64_MAX) goto bad;
  }
  if (infer >= 0) {
    if (known == 0 || n % (int64_t)known) goto bad;
    s[infer] = n / (int64_t)known;
  } else if ((int64_t)known != n) goto bad;
  /* The strides are products of the non-zero sizes: [0, 2^62, 4] has no
   * elements but cannot be strided either. */
  if (check_shape(ndim, s, &m) < 0 || m != n) goto bad;
  tensor *v = tensor_view(t);
  if (!v) return NULL;
  int64_t off = v->offset;
  set_contiguous(v, ndim, s);
  v->offset = off;
  return v;
bad:
  err_set(DRV_ESHAPE, "reshape: cannot view %s (%lld elements) with the requested shape",
          tensor_shape_str(t, a, sizeof a), (long long)n);
  return NULL;
}

/* ============================== copies ================================== */

/* Calls fn(ptr) for each element of t in row-major order. The caller's
 * state travels through `ud`. Used for the rare strided paths only. */
static void each_element(const tensor *t, void (*fn)(float *p, void *ud), void *ud) {
  int64_t idx[TENSOR_MAXDIM] = {0}, n = tensor_numel(t);
  float *base = t->storage->data + t->offset;
  for (int64_t k = 0; k < n; k++) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
    fn(base + off, ud);
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
  }
}

static void gather_one(float *p, void *ud) {
  float **out = ud;
  *(*out)++ = *p;
}

static void scatter_one(float *p, void *ud) {
  const float **in = ud;
  *p = *(*in)++;
}

int tensor_copy(tensor *dst, const tensor *src) {
  char a[64], b[64];
  int64_t n = tensor_numel(src);
  if (tensor_numel(dst) != n)
    return err_set(DRV_ESHAPE, "copy: %s into %s: element counts differ",
                   tensor_shape_str(src, a, sizeof a), tensor_shape_str(dst, b, sizeof b));
  if (tensor_is_contiguous(dst) && tensor_is_contiguous(src)) {
    memmove(tensor_data(dst), tensor_data(src), (size_t)n * sizeof(float));
    return 0;
  }
  float *tmp = malloc((size_t)(n ? n : 1) * sizeof(float));
  if (!tmp) return err_set(DRV_ENOMEM, "out of memory");
  float *w = tmp;
  each_element(src, gather_one, &w);
  const float *r = tmp;
  each_element(dst, scatter_one, &r);
  free(tmp);
  return 0;
}

tensor *tensor_clone(const tensor *t) {
  tensor *c = tensor_new(t->ndim, t->shape);
  if (c && tensor_copy(c, t) < 0) {
    tensor_free(c);
    return NULL;
  }
  return c;
}

static int64_t flat_offset(const tensor *t, const int64_t *idx) {
  int64_t off = t->offset;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
  return off;
}

float tensor_get(const tensor *t, const int64_t *idx) {
  return t->storage->data[flat_offset(t, idx)];
}

void tensor_set(tensor *t, const int64_t *idx, float v) {
  t->storage->data[flat_offset(t, idx)] = v;
}

/* ============================== filling ================================= */

static int need_contiguous(const tensor *t, const char *op) {
  char a[64];
  if (tensor_is_contiguous(t)) return 0;
  return err_set(DRV_EINVAL, "%s: tensor %s is not contiguous", op,
                 tensor_shape_str(t, a, sizeof a));
}

int tensor_fill(tensor *t, float v) {
  int rc = need_contiguous(t, "fill");
  if (rc < 0) return rc;
  float *p = tensor_data(t);
  int64_t n = tensor_numel(t);
  if (v == 0.0f && !signbit(v)) {
    memset(p, 0, (size_t)n * sizeof(float));
    return 0;
  }
  for (int64_t i = 0; i < n; i++) p[i] = v;
  return 0;
}

int tensor_uniform(tensor *t, rng_t *r, float lo, float hi) {
  int rc = need_contiguous(t, "uniform");
  if (rc < 0) return rc;
  float *p = tensor_data(t);
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * rng_uniform(r);
  return 0;
}

int tensor_normal(tensor *t, rng_t *r, float mean, float std) {
  int rc = need_contiguous(t, "normal");
  if (rc < 0) return rc;
  float *p = tensor_data(t);
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++) p[i] = mean + std * rng_normal(r);
  return 0;
}

/* ============================== math ==================================== */

/* How a 2-D tensor is laid out for BLAS: row-major with leading dimension
 * ld (trans = false), or the transpose of a row-major matrix (a transposed
 * view; trans = true). Returns -1 for strides BLAS cannot take. */
static int blas_layout(const tensor *t, bool *trans, int64_t *ld) {
  int64_t r = t->shape[0], c = t->shape[1];
  if (t->stride[1] == 1 || c == 1) {
    *ld = r == 1 ? (c > 1 ? c : 1) : t->stride[0];
    if (*ld >= (c > 1 ? c : 1)) {
      *trans = false;
      return 0;
    }
  }
  if (t->stride[0] == 1 || r == 1) {
    *ld = c == 1 ? (r > 1 ? r : 1) : t->stride[1];
    if (*ld >= (r > 1 ? r : 1)) {
      *trans = true;
      return 0;
    }
  }
  return -1;
}

static int gemm_shape_error(const tensor *a, bool ta, const tensor *b, bool tb,
                            const tensor *c, const char *why) {
  char sa[64], sb[64], sc[64];
  return err_set(DRV_ESHAPE, "matrix product %s%s x %s%s -> %s: %s",
                 tensor_shape_str(a, sa, sizeof sa), ta ? "^T" : "",
                 tensor_shape_str(b, sb, sizeof sb), tb ? "^T" : "",
                 tensor_shape_str(c, sc, sizeof sc), why);
}

int tensor_gemm(float alpha, const tensor *a, bool ta, const tensor *b, bool tb,
                float beta, tensor *c) {
  if (a->ndim != 2 || b->ndim != 2 || c->ndim != 2)
    return gemm_shape_error(a, ta, b, tb, c, "all three must be 2-D");
  int64_t m = ta ? a->shape[1] : a->shape[0], k = ta ? a->shape[0] : a->shape[1];
  int64_t k2 = tb ? b->shape[1] : b->shape[0], n = tb ? b->shape[0] : b->shape[1];
  if (k != k2) return gemm_shape_error(a, ta, b, tb, c, "inner dimensions differ");
  if (c->shape[0] != m || c->shape[1] != n)
    return gemm_shape_error(a, ta, b, tb, c, "result has the wrong shape");
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return gemm_shape_error(a, ta, b, tb, c, "too large for BLAS");

  bool la, lb, lc;
  int64_t lda, ldb, ldc;
  if (blas_layout(c, &lc, &ldc) < 0 || (lc && m > 1 && n > 1))
    return err_set(DRV_EINVAL, "matrix product: the result must be row-major contiguous");
  if (lc) ldc = n > 1 ? n : 1; /* a row or column vector: treat as row-major */
  if (m == 0 || n == 0) return 0;
  if (k == 0) return tensor_scale(c, beta);

  tensor *ca = NULL, *cb = NULL; /* copies for strides BLAS cannot take */
  if (blas_layout(a, &la, &lda) < 0) {
    if (!(ca = tensor_clone(a))) return DRV_ENOMEM;
    blas_layout(ca, &la, &lda);
    a = ca;
  }
  if (blas_layout(b, &lb, &ldb) < 0) {
    if (!(cb = tensor_clone(b))) {
      tensor_free(ca);
      return DRV_ENOMEM;
    }
    blas_layout(cb, &lb, &ldb);
    b = cb;
  }
  cblas_sgemm(CblasRowMajor, (la != ta) ? CblasTrans : CblasNoTrans,
              (lb != tb) ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha,
              tensor_data(a), (int)lda, tensor_data(b), (int)ldb, beta, tensor_data(c),
              (int)ldc);
  tensor_free(ca);
  tensor_free(cb);
  return 0;
}

int tensor_axpy(float alpha, const tensor *x, tensor *y) {
  char a[64], b[64];
  int64_t n = tensor_numel(x);
  if (n != tensor_numel(y))
    return err_set(DRV_ESHAPE, "axpy: %s and %s differ in size",
                   tensor_shape_str(x, a, sizeof a), tensor_shape_str(y, b, sizeof b));
  int rc = need_contiguous(x, "axpy");
  if (rc == 0) rc = need_contiguous(y, "axpy");
  if (rc < 0) return rc;
  const float *restrict xp = tensor_data(x);
  float *restrict yp = tensor_data(y);
  for (int64_t i = 0; i < n; i++) yp[i] += alpha * xp[i];
  return 0;
}

int tensor_scale(tensor *t, float alpha) {
  int rc = need_contiguous(t, "scale");
  if (rc < 0) return rc;
  if (alpha == 0.0f) return tensor_fill(t, 0.0f); /* beta = 0 must clear NaNs too */
  float *p = tensor_data(t);
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++) p[i] *= alpha;
  return 0;
}

static int rowvec_check(const tensor *m, const tensor *v, const char *op) {
  char a[64], b[64];
  if (m->ndim != 2 || tensor_numel(v) != m->shape[1])
    return err_set(DRV_ESHAPE, "%s: matrix %s and vector %s do not match", op,
                   tensor_shape_str(m, a, sizeof a), tensor_shape_str(v, b, sizeof b));
  int rc = need_contiguous(m, op);
  return rc < 0 ? rc : need_contiguous(v, op);
}

int tensor_add_rowvec(tensor *m, const tensor *v) {
  int rc = rowvec_check(m, v, "add_rowvec");
  if (rc < 0) return rc;
  int64_t r = m->shape[0], c = m->shape[1];
  const float *restrict vp = tensor_data(v);
  float *mp = tensor_data(m);
  for (int64_t i = 0; i < r; i++) {
    float *restrict row = mp + i * c;
    for (int64_t j = 0; j < c; j++) row[j] += vp[j];
  }
  return 0;
}

int tensor_sum_rows(const tensor *m, tensor *out, float beta) {
  int rc = rowvec_check(m, out, "sum_rows");
  if (rc < 0) return rc;
  int64_t r = m->shape[0], c = m->shape[1];
  float *restrict op = tensor_data(out);
  const float *mp = tensor_data(m);
  if (beta == 0.0f) memset(op, 0, (size_t)c * sizeof(float));
  else if (beta != 1.0f)
    for (int64_t j = 0; j < c; j++) op[j] *= beta;
  for (int64_t i = 0; i < r; i++) {
    const float *restrict row = mp + i * c;
    for (int64_t j = 0; j < c; j++) op[j] += row[j];
  }
  return 0;
}

static void sum_one(float *p, void *ud) { *(double *)ud += *p; }

double tensor_sum(const tensor *t) {
  double s = 0;
  if (tensor_is_contiguous(t)) {
    const float *p = tensor_data(t);
    int64_t n = tensor_numel(t);
    for (int64_t i = 0; i < n; i++) s += p[i];
  } else {
    each_element(t, sum_one, &s);
  }
  return s;
}

int tensor_argmax_rows(const tensor *m, int64_t *out) {
  char a[64];
  if (m->ndim != 2 || m->shape[1] < 1)
    return err_set(DRV_ESHAPE, "argmax_rows: %s is not a non-empty matrix",
                   tensor_shape_str(m, a, sizeof a));
  int rc = need_contiguous(m, "argmax_rows");
  if (rc < 0) return rc;
  int64_t r = m->shape[0], c = m->shape[1];
  const float *p = tensor_data(m);
  for (int64_t i = 0; i < r; i++) {
    const float *row = p + i * c;
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
      if (row[j] > row[best]) best = j;
    out[i] = best;
  }
  return 0;
}

float tensor_max_abs_diff(const tensor *a, const tensor *b) {
  if (!tensor_same_shape(a, b)) return INFINITY;
  int64_t n = tensor_numel(a);
  float *x = malloc((size_t)(n ? n : 1) * sizeof(float));
  float *y = malloc((size_t)(n ? n : 1) * sizeof(float));
  float worst = 0;
  if (!x || !y) {
    worst = INFINITY;
  } else {
    float *w = x;
    each_element(a, gather_one, &w);
    w = y;
    each_element(b, gather_one, &w);
    for (int64_t i = 0; i < n; i++) {
      float d = fabsf(x[i] - y[i]);
      if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
    }
  }
  free(x);
  free(y);
  return worst;
}

void tensor_set_threads(int n) {
  if (n > 0) openblas_set_num_threads(n);
}

int tensor_threads(void) { return openblas_get_num_threads(); }
