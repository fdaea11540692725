/* data.c - datasets: lifetime, seeded operations (split, shuffle, shard,
 * subset), standardisation, batching and the synthetic MNIST-shaped
 * generator. The file readers live in data_read.c and data_bin.c.
 *
 * Every operation builds a new dataset by gathering whole rows of x and y
 * with memcpy; inputs are never modified. Derived datasets keep their
 * parent's `classes` and `source`, so that a test split that happens to miss
 * the highest label still tells a model how many outputs it needs.
 */
#include "data/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_int.h"
#include "base/err.h"
#include <jansson.h>

/* Rows of the teacher product computed per GEMM in data_synthetic. */
#define SYNTH_CHUNK 4096
/* Largest synthetic dataset, in elements of x (4 GiB of floats). */
#define SYNTH_MAX_ELEMS ((int64_t)1 << 30)

void data_free(dataset *d) {
  if (!d) return;
  tensor_free(d->x);
  tensor_free(d->y);
  free(d->recipe);
  data__sparse_free(&d->sp);
  for (int64_t i = 0; d->names && i < d->nnames; i++) free(d->names[i]);
  free(d->names);
  free(d);
}

/* ======================================================================
 * Building datasets
 * ==================================================================== */

/* Floats per example in y: 1 for [n], k for [n, k]. */
static int64_t y_width(const dataset *d) { return d->n ? tensor_numel(d->y) / d->n : 1; }

/* x's shape with n examples: [n, features] or [n, h, w], [n, c, h, w]. */
static int x_shape(const dataset *d, int64_t n, int64_t *shape) {
  memcpy(shape, d->x->shape, (size_t)d->x->ndim * sizeof *shape);
  shape[0] = n;
  return d->x->ndim;
}

static int check_dataset(const dataset *d, const char *op) {
  if (d && d->n > 0 && data_is_lazy(d))
    return err_set(DRV_EINVAL, "%s: dataset '%s' is not loaded (its rows are read from its file "
                   "on first use: data_load)", op, d->source);
  if (!d || !d->x || !d->y || d->n <= 0)
    return err_set(DRV_EINVAL, "%s: no dataset or an empty one", op);
  /* Datasets may be assembled by hand (bindings, tests): check the shape
   * invariants the row copies below rely on. */
  if (d->x->ndim < 2 || d->x->shape[0] != d->n || tensor_numel(d->x) != d->n * d->features ||
      d->y->ndim < 1 || d->y->ndim > 2 || d->y->shape[0] != d->n)
    return err_set(DRV_EINVAL, "%s: dataset '%s' is inconsistent: %lld examples, %lld features",
                   op, d->source, (long long)d->n, (long long)d->features);
  if (!tensor_is_contiguous(d->x) || !tensor_is_contiguous(d->y))
    return err_set(DRV_EINVAL, "%s: dataset '%s' has non-contiguous tensors", op, d->source);
  if (d->sp.bound && (!d->sp.ptr || !d->sp.ids || d->sp.ptr[0] != 0 || d->sp.ptr[d->n] < 0))
    return err_set(DRV_EINVAL, "%s: dataset '%s' has an inconsistent sparse part", op, d->source);
  return 0;
}

/* A new dataset of n rows shaped like `like` (same features, same y width),
 * inheriting its classes and source; contents zero. */
static int new_like(const dataset *like, int64_t n, dataset **out) {
  *out = NULL;
  dataset *d = calloc(1, sizeof *d);
  if (!d) return err_set(DRV_ENOMEM, "out of memory");
  int64_t yshape[2] = {n, y_width(like)}, xs[TENSOR_MAXDIM];
  d->x = tensor_new(x_shape(like, n, xs), xs);
  d->y = d->x ? tensor_new(like->y->ndim == 2 ? 2 : 1, yshape) : NULL;
  if (!d->y) {
    data_free(d);
    return err_set(DRV_ENOMEM, "out of memory for %lld x %lld values", (long long)n,
                   (long long)like->features);
  }
  d->n = n;
  d->features = like->features;
  d->classes = like->classes;
  d->unlabeled = like->unlabeled;
  memcpy(d->source, like->source, sizeof d->source);
  if (like->names && (d->names = calloc((size_t)like->nnames + 1, sizeof *d->names))) {
    d->nnames = like->nnames;
    for (int64_t i = 0; i < like->nnames; i++)
      if (!(d->names[i] = strdup(like->names[i]))) d->nnames = i, i = like->nnames;
  }
  *out = d;
  return 0;
}

/* Copies rows idx[0..k) of src's x and y into dst's x and y (row 0 on). */
static void gather(const dataset *src, const int64_t *idx, int64_t k, float *dx, float *dy) {
  const float *sx = tensor_data(src->x), *sy = tensor_data(src->y);
  size_t xw = (size_t)src->features, yw = (size_t)y_width(src);
  for (int64_t i = 0; i < k; i++) {
    memcpy(dx + (size_t)i * xw, sx + (size_t)idx[i] * xw, xw * sizeof(float));
    memcpy(dy + (size_t)i * yw, sy + (size_t)idx[i] * yw, yw * sizeof(float));
  }
}

static void gather_y(const dataset *src, const int64_t *idx, int64_t k, float *dy) {
  const float *sy = tensor_data(src->y);
  size_t yw = (size_t)y_width(src);
  for (int64_t i = 0; i < k; i++) memcpy(dy + (size_t)i * yw, sy + (size_t)idx[i] * yw, yw * sizeof(float));
}

/* ======================================================================
 * Operations
 * ==================================================================== */

int data_subset(const dataset *d, const int64_t *idx, int64_t k, dataset **out) {
  *out = NULL;
  int rc = check_dataset(d, "subset");
  if (rc < 0) return rc;
  if (k <= 0 || !idx) return err_set(DRV_EINVAL, "subset: %lld examples requested", (long long)k);
  for (int64_t i = 0; i < k; i++)
    if (idx[i] < 0 || idx[i] >= d->n)
      return err_set(DRV_ERANGE, "subset: index %lld is out of range for %lld examples",
                     (long long)idx[i], (long long)d->n);
  if ((rc = new_like(d, k, out)) < 0) return rc;
  gather(d, idx, k, tensor_data((*out)->x), tensor_data((*out)->y));
  if ((rc = data__sparse_gather(&d->sp, idx, k, &(*out)->sp)) < 0) {
    data_free(*out);
    *out = NULL;
  }
  return rc;
}

/* A fresh permutation of 0..n-1 from `seed`; the caller frees it. */
static int64_t *permutation(int64_t n, uint64_t seed) {
  int64_t *perm = malloc((size_t)n * sizeof *perm);
  if (!perm) {
    err_set(DRV_ENOMEM, "out of memory for a permutation of %lld", (long long)n);
    return NULL;
  }
  rng_t r;
  rng_seed(&r, seed);
  rng_permutation(&r, perm, n);
  return perm;
}

/* A lazy dataset of n rows like d, its recipe d's with `op` appended. */
static int lazy_op(const dataset *d, int64_t n, json_t *op, dataset **out) {
  int rc = data__lazy_like(d, n, out);
  if (rc < 0) {
    json_decref(op);
    return rc;
  }
  data__recipe_op(d, *out, op);
  if (!(*out)->recipe) {
    data_free(*out);
    *out = NULL;
    return err_set(DRV_ENOMEM, "out of memory");
  }
  return 0;
}

int data_shuffle(const dataset *d, uint64_t seed, dataset **out) {
  *out = NULL;
  if (d && d->recipe && d->n > 0) return lazy_op(d, d->n, data__op_seeded("shuffle", seed), out);
  int rc = check_dataset(d, "shuffle");
  if (rc < 0) return rc;
  int64_t *perm = permutation(d->n, seed);
  if (!perm) return DRV_ENOMEM;
  rc = data_subset(d, perm, d->n, out);
  free(perm);
  if (rc == 0) data__recipe_op(d, *out, data__op_seeded("shuffle", seed));
  return rc;
}

/* split of a dataset with a recipe: two lazy datasets. */
static int split_lazy(const dataset *d, double frac, uint64_t seed, int64_t na, dataset **a,
                      dataset **b) {
  json_t *op = data__op_seeded("split", seed);
  if (op) json_object_set_new(op, "frac", json_real(frac));
  int rc = lazy_op(d, na, json_deep_copy(op), a);
  if (op) json_object_set_new(op, "part", json_integer(1));
  if (rc == 0) rc = lazy_op(d, d->n - na, op, b);
  else json_decref(op);
  if (rc < 0) {
    data_free(*a);
    *a = NULL;
  }
  return rc;
}

int data_split(const dataset *d, double frac, uint64_t seed, dataset **a, dataset **b) {
  *a = *b = NULL;
  int rc = d && d->recipe && d->n > 0 ? 0 : check_dataset(d, "split");
  if (rc < 0) return rc;
  if (!(frac > 0 && frac < 1))
    return err_set(DRV_EINVAL, "split: fraction %g is not strictly between 0 and 1", frac);
  int64_t na = (int64_t)llround(frac * (double)d->n);
  if (na < 1 || na > d->n - 1)
    return err_set(DRV_EINVAL, "split: %g of %lld examples leaves one side empty", frac,
                   (long long)d->n);
  if (d->recipe) return split_lazy(d, frac, seed, na, a, b);
  int64_t *perm = permutation(d->n, seed);
  if (!perm) return DRV_ENOMEM;
  rc = data_subset(d, perm, na, a);
  if (rc >= 0) rc = data_subset(d, perm + na, d->n - na, b);
  free(perm);
  if (rc < 0) {
    data_free(*a);
    *a = NULL;
    return rc;
  }
  json_t *op = data__op_seeded("split", seed);
  if (op) json_object_set_new(op, "frac", json_real(frac));
  data__recipe_op(d, *a, json_deep_copy(op));
  if (op) json_object_set_new(op, "part", json_integer(1));
  data__recipe_op(d, *b, op);
  return rc;
}

int data_shard(const dataset *d, int64_t i, int64_t n, dataset **out) {
  *out = NULL;
  int rc = d && d->recipe && d->n > 0 ? 0 : check_dataset(d, "shard");
  if (rc < 0) return rc;
  if (n < 1 || i < 0 || i >= n)
    return err_set(DRV_EINVAL, "shard: index %lld is out of range for %lld shards",
                   (long long)i, (long long)n);
  if (i >= d->n)
    return err_set(DRV_EINVAL, "shard: shard %lld of %lld of '%s' (%lld examples) is empty",
                   (long long)i, (long long)n, d->source, (long long)d->n);
  int64_t k = (d->n - 1 - i) / n + 1;
  if (d->recipe)
    return lazy_op(d, k, json_pack("{s:s, s:I, s:I}", "op", "shard", "i", (json_int_t)i, "n",
                                   (json_int_t)n), out);
  int64_t *idx = malloc((size_t)k * sizeof *idx);
  if (!idx) return err_set(DRV_ENOMEM, "out of memory");
  for (int64_t j = 0; j < k; j++) idx[j] = i + j * n;
  rc = data_subset(d, idx, k, out);
  free(idx);
  if (rc == 0)
    data__recipe_op(d, *out, json_pack("{s:s, s:I, s:I}", "op", "shard", "i", (json_int_t)i, "n",
                                       (json_int_t)n));
  return rc;
}

/* ======================================================================
 * Standardisation
 * ==================================================================== */

void data_stats_free(data_stats *s) {
  if (!s) return;
  free(s->mean);
  free(s->std);
  free(s);
}

/* Per-feature mean and population standard deviation of d, accumulated in
 * double over two passes (no cancellation for large means). */
static int fit_stats(const dataset *d, data_stats **out) {
  int64_t f = d->features;
  data_stats *s = calloc(1, sizeof *s);
  double *acc = calloc((size_t)f, sizeof *acc);
  if (s) {
    s->features = f;
    s->mean = malloc((size_t)f * sizeof *s->mean);
    s->std = malloc((size_t)f * sizeof *s->std);
  }
  if (!s || !acc || !s->mean || !s->std) {
    data_stats_free(s);
    free(acc);
    return err_set(DRV_ENOMEM, "standardize: out of memory");
  }
  const float *x = tensor_data(d->x);
  for (int64_t i = 0; i < d->n; i++)
    for (int64_t j = 0; j < f; j++) acc[j] += x[i * f + j];
  for (int64_t j = 0; j < f; j++) s->mean[j] = (float)(acc[j] / (double)d->n);
  memset(acc, 0, (size_t)f * sizeof *acc);
  for (int64_t i = 0; i < d->n; i++)
    for (int64_t j = 0; j < f; j++) {
      double dv = (double)x[i * f + j] - s->mean[j];
      acc[j] += dv * dv;
    }
  for (int64_t j = 0; j < f; j++) {
    double sd = sqrt(acc[j] / (double)d->n);
    /* Variation below float resolution is rounding noise: treat the
     * feature as constant, so it maps to 0 rather than to noise or NaN. */
    s->std[j] = sd > 4 * 1.1920929e-7 * fabs((double)s->mean[j]) && sd > 0 ? (float)sd : 1.0f;
  }
  free(acc);
  *out = s;
  return 0;
}

/* r's x and y: d's standardised by s (r shaped like d). */
static void apply_stats(const dataset *d, const data_stats *s, dataset *r) {
  const float *x = tensor_data(d->x);
  float *rx = tensor_data(r->x);
  int64_t f = d->features;
  for (int64_t i = 0; i < d->n; i++)
    for (int64_t j = 0; j < f; j++) rx[i * f + j] = (x[i * f + j] - s->mean[j]) / s->std[j];
  memcpy(tensor_data(r->y), tensor_data(d->y), (size_t)tensor_numel(d->y) * sizeof(float));
  data__recipe_op(d, r, data__op_stats(s));
}

int data_standardize(const dataset *d, const data_stats *stats, dataset **out,
                     data_stats **stats_out) {
  *out = NULL;
  if (stats_out) *stats_out = NULL;
  bool lazy = d && d->recipe && d->n > 0;
  int rc = lazy ? 0 : check_dataset(d, "standardize");
  if (rc < 0) return rc;
  if (d->features == 0)
    return err_set(DRV_EINVAL, "standardize: dataset '%s' has no dense features (its ids are "
                   "not standardized)", d->source);
  data_stats *fitted = NULL;
  if (!stats) {
    if ((rc = lazy ? data__recipe_stats(d->recipe, d->features, &fitted) : fit_stats(d, &fitted)) < 0) return rc;
    stats = fitted;
  } else if (stats->features != d->features) {
    return err_set(DRV_ESHAPE, "standardize: statistics for %lld features, '%s' has %lld",
                   (long long)stats->features, d->source, (long long)d->features);
  }
  if (fitted && fitted->features != d->features) {
    data_stats_free(fitted);
    return err_set(DRV_ESHAPE, "standardize: '%s' has %lld features now", d->source,
                   (long long)d->features);
  }
  dataset *r;
  /* A recipe applies the statistics where the rows are read. */
  rc = lazy ? lazy_op(d, d->n, data__op_stats(stats), &r) : new_like(d, d->n, &r);
  if (rc < 0) {
    data_stats_free(fitted);
    return rc;
  }
  if (!lazy) apply_stats(d, stats, r);
  if (!lazy && (rc = data__sparse_copy(&d->sp, d->n, &r->sp)) < 0) {
    data_free(r);
    data_stats_free(fitted);
    return rc;
  }
  *out = r;
  if (stats_out) *stats_out = fitted;
  else data_stats_free(fitted);
  return 0;
}

/* ======================================================================
 * Batching
 * ==================================================================== */

/* The order of the current epoch: identity, or the epoch's permutation. */
static void iter_order(data_iter *it) {
  if (!it->shuffle) {
    for (int64_t i = 0; i < it->d->n; i++) it->perm[i] = i;
    return;
  }
  rng_t r;
  rng_seed(&r, rng_derive(it->seed, (uint64_t)it->epoch));
  rng_permutation(&r, it->perm, it->d->n);
}

int data_iter_init(data_iter *it, const dataset *d, int64_t batch, bool shuffle, uint64_t seed) {
  memset(it, 0, sizeof *it);
  int rc = check_dataset(d, "batch");
  if (rc == 0) rc = data__sparse_check(d, "batch");
  if (rc < 0) return rc;
  if (batch < 1) return err_set(DRV_EINVAL, "batch: size %lld must be at least 1", (long long)batch);
  int64_t b = batch < d->n ? batch : d->n;
  int64_t yshape[2] = {b, y_width(d)}, xs[TENSOR_MAXDIM];
  it->perm = malloc((size_t)d->n * sizeof *it->perm);
  it->bx = tensor_new(x_shape(d, b, xs), xs);
  it->by = tensor_new(d->y->ndim == 2 ? 2 : 1, yshape);
  if (!it->perm || !it->bx || !it->by) {
    data_iter_free(it);
    return err_set(DRV_ENOMEM, "batch: out of memory");
  }
  it->d = d;
  it->batch = batch;
  it->shuffle = shuffle;
  it->seed = seed;
  iter_order(it);
  return 0;
}

/* Asks the cache for the rows of the batch after this one, so that they
 * arrive while the caller computes on this batch: gathering random rows
 * from a large dataset otherwise waits on memory (about 5% of a training
 * step for MNIST-sized rows). Prefetches are hints; they never fault. */
static void prefetch_next(const data_iter *it) {
  const dataset *d = it->d;
  int64_t end = it->pos + it->batch < d->n ? it->pos + it->batch : d->n;
  size_t row_bytes = (size_t)d->features * sizeof(float);
  const char *base = (const char *)tensor_data(d->x);
  for (int64_t i = it->pos; i < end; i++) {
    const char *row = base + (size_t)it->perm[i] * row_bytes;
    for (size_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(row + off, 0, 3);
  }
}

int data_iter_next(data_iter *it, const tensor **x, const tensor **y) {
  const dataset *d = it->d;
  if (!d) return err_set(DRV_EINVAL, "batch: iterator is not initialised");
  if (it->pos >= d->n) return 0;
  int64_t m = d->n - it->pos < it->batch ? d->n - it->pos : it->batch;
  int64_t yshape[2] = {m, y_width(d)}, xs[TENSOR_MAXDIM];
  int rc;
  /* Resizing in place keeps the storage: no allocation after the first
   * batch unless a caller still holds a view of the previous one. */
  if (it->views && !it->shuffle) { /* rows in order: x is a view of them, not a copy */
    tensor *v = tensor_narrow(d->x, 0, it->pos, m);
    if (!v || (rc = tensor_resize(it->by, it->by->ndim, yshape)) < 0) {
      tensor_free(v);
      return v ? rc : DRV_ENOMEM;
    }
    tensor_free(it->bx);
    it->bx = v;
    gather_y(d, it->perm + it->pos, m, tensor_data(it->by));
    if ((rc = data__iter_sparse_fill(it, it->perm + it->pos, m)) < 0) return rc;
    it->pos += m;
    *x = it->bx;
    *y = it->by;
    return 1;
  }
  if ((rc = tensor_resize(it->bx, x_shape(d, m, xs), xs)) < 0 ||
      (rc = tensor_resize(it->by, it->by->ndim, yshape)) < 0)
    return rc;
  gather(d, it->perm + it->pos, m, tensor_data(it->bx), tensor_data(it->by));
  if ((rc = data__iter_sparse_fill(it, it->perm + it->pos, m)) < 0) return rc;
  it->pos += m;
  prefetch_next(it);
  *x = it->bx;
  *y = it->by;
  return 1;
}

void data_iter_reset(data_iter *it) {
  if (!it->d) return;
  it->epoch++;
  it->pos = 0;
  iter_order(it);
}

int data_iter_seek(data_iter *it, int64_t epoch, int64_t pos) {
  if (!it->d) return err_set(DRV_EINVAL, "batch: iterator is not initialised");
  if (epoch < 0 || pos < 0 || pos > it->d->n)
    return err_set(DRV_EINVAL, "batch: cannot seek to position %lld of epoch %lld (%lld examples)",
                   (long long)pos, (long long)epoch, (long long)it->d->n);
  it->epoch = epoch;
  iter_order(it);
  it->pos = pos;
  return 0;
}

void data_iter_free(data_iter *it) {
  if (!it) return;
  free(it->perm);
  tensor_free(it->bx);
  tensor_free(it->by);
  free(it->bptr);
  free(it->bids);
  free(it->bvals);
  memset(it, 0, sizeof *it);
}

/* ======================================================================
 * Synthetic data
 * ==================================================================== */

/* y[i] = argmax_c (x_i . W_c - bias_c) for rows [start, start + m), where
 * bias_c = 0.5 * sum_j W_cj, i.e. argmax W (x - 0.5) without centring x. */
static int teacher_labels(const tensor *x, const tensor *w, const double *bias, int64_t start,
                          int64_t m, tensor *logits, float *y) {
  int64_t c = w->shape[0];
  tensor *xs = tensor_narrow(x, 0, start, m);
  if (!xs) return DRV_ENOMEM;
  int rc = tensor_resize2(logits, m, c);
  if (rc >= 0) rc = tensor_gemm(1.0f, xs, false, w, true, 0.0f, logits);
  tensor_free(xs);
  if (rc < 0) return rc;
  const float *l = tensor_data(logits);
  for (int64_t i = 0; i < m; i++) {
    int64_t best = 0;
    double bv = (double)l[i * c] - bias[0];
    for (int64_t k = 1; k < c; k++) {
      double v = (double)l[i * c + k] - bias[k];
      if (v > bv) bv = v, best = k;
    }
    y[start + i] = (float)best;
  }
  return 0;
}

int data_synthetic(const data_synth_opts *o, dataset **out) {
  *out = NULL;
  int64_t total;
  if (!o || o->n < 1 || o->features < 1 || o->classes < 1 || o->classes > (1 << 24))
    return err_set(DRV_EINVAL, "synthetic: n, features and classes must be positive");
  if (__builtin_mul_overflow(o->n, o->features, &total) || total > SYNTH_MAX_ELEMS ||
      o->classes * o->features > SYNTH_MAX_ELEMS)
    return err_set(DRV_ERANGE, "synthetic: %lld x %lld values is too large", (long long)o->n,
                   (long long)o->features);
  dataset *d = calloc(1, sizeof *d);
  tensor *w = tensor_new2(o->classes, o->features);
  tensor *logits = tensor_new2(1, o->classes);
  double *bias = calloc((size_t)o->classes, sizeof *bias);
  int rc = 0;
  if (d) d->x = tensor_new2(o->n, o->features);
  if (d && d->x) d->y = tensor_new1(o->n);
  if (!d || !d->y || !w || !logits || !bias) {
    rc = err_set(DRV_ENOMEM, "synthetic: out of memory for %lld x %lld values",
                 (long long)o->n, (long long)o->features);
    goto done;
  }
  /* Separate streams for the teacher and the inputs, so changing n does
   * not change the teacher. */
  rng_t rw, rx;
  rng_seed(&rw, rng_derive(o->seed, 0));
  rng_seed(&rx, rng_derive(o->seed, 1));
  float *wv = tensor_data(w), *xv = tensor_data(d->x), *yv = tensor_data(d->y);
  for (int64_t k = 0; k < o->classes; k++) {
    double s = 0;
    for (int64_t j = 0; j < o->features; j++) s += wv[k * o->features + j] = rng_normal(&rw);
    bias[k] = 0.5 * s;
  }
  for (int64_t i = 0; i < total; i++) xv[i] = rng_uniform(&rx);
  for (int64_t start = 0; start < o->n && rc >= 0; start += SYNTH_CHUNK) {
    if (err_interrupted()) {
      rc = err_set(DRV_EINTERRUPTED, "synthetic: interrupted");
      break;
    }
    int64_t m = o->n - start < SYNTH_CHUNK ? o->n - start : SYNTH_CHUNK;
    rc = teacher_labels(d->x, w, bias, start, m, logits, yv);
  }
  if (rc < 0) goto done;
  d->n = o->n;
  d->features = o->features;
  /* The teacher's class count, even if some class never wins on few rows. */
  d->classes = o->classes;
  snprintf(d->source, sizeof d->source, "synthetic");
  *out = d;
  d = NULL;
done:
  data_free(d);
  tensor_free(w);
  tensor_free(logits);
  free(bias);
  return rc;
}
