/* data_lazy.c - lazy datasets: a file's dataset known by its recipe, its
 * row count and its shapes, its rows read where and when they are used.
 *
 * A coordinator that trains a cluster on a file never needs the rows: the
 * workers read their shards themselves (data_recipe.c). So data.csv and
 * data.libsvm stream the file once (checking every row and collecting the
 * labels' classes) and keep only what the recipe needs, and split,
 * shuffle, shard and standardize of a dataset with a recipe append to the
 * recipe instead of copying rows. In-process use loads the rows on first
 * access (data_load), from the same recipe a worker reads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "data/data_int.h"
#include "base/err.h"

bool data_is_lazy(const dataset *d) { return d && !d->x && !d->y; }

void data__note_shapes(dataset *d) {
  if (!d->x || !d->y) return;
  d->x_ndim = d->x->ndim;
  memcpy(d->x_shape, d->x->shape, sizeof d->x_shape);
  d->y_ndim = d->y->ndim;
  d->y_shape[0] = d->y->shape[0];
  d->y_shape[1] = d->y->ndim == 2 ? d->y->shape[1] : 1;
}

int data__lazy_like(const dataset *like, int64_t n, dataset **out) {
  *out = NULL;
  dataset *d = calloc(1, sizeof *d);
  if (!d) return err_set(DRV_ENOMEM, "out of memory");
  d->n = n;
  d->features = like->features;
  d->classes = like->classes;
  d->unlabeled = like->unlabeled;
  d->sp = (data_sparse){.fields = like->sp.fields, .weighted = like->sp.weighted,
                        .bound = like->sp.bound};
  memcpy(d->source, like->source, sizeof d->source);
  if (like->x) {
    d->x_ndim = like->x->ndim;
    memcpy(d->x_shape, like->x->shape, sizeof d->x_shape);
    d->y_ndim = like->y->ndim;
    d->y_shape[1] = like->y->ndim == 2 ? like->y->shape[1] : 1;
  } else {
    d->x_ndim = like->x_ndim;
    memcpy(d->x_shape, like->x_shape, sizeof d->x_shape);
    d->y_ndim = like->y_ndim;
    d->y_shape[1] = like->y_shape[1];
  }
  d->x_shape[0] = d->y_shape[0] = n;
  if (like->names) {
    if (!(d->names = calloc((size_t)like->nnames + 1, sizeof *d->names))) {
      data_free(d);
      return err_set(DRV_ENOMEM, "out of memory");
    }
    for (int64_t i = 0; i < like->nnames; i++, d->nnames = i)
      if (!(d->names[i] = strdup(like->names[i]))) {
        data_free(d);
        return err_set(DRV_ENOMEM, "out of memory");
      }
  }
  *out = d;
  return 0;
}

int data_load(dataset *d) {
  if (!data_is_lazy(d)) return 0;
  if (!d->recipe)
    return err_set(DRV_EINVAL, "dataset '%s' has neither rows nor a recipe", d->source);
  dataset *full = NULL;
  int rc = data_from_recipe(d->recipe, strlen(d->recipe), 0, 1, &full);
  if (rc < 0) return rc;
  if (full->n != d->n || full->features != d->features || full->sp.bound != d->sp.bound ||
      full->sp.fields != d->sp.fields) {
    rc = err_set(DRV_EINVAL, "%s: has %lld x %lld values now, %lld x %lld when it was first "
                 "read", d->source, (long long)full->n, (long long)full->features,
                 (long long)d->n, (long long)d->features);
    data_free(full);
    return rc;
  }
  d->x = full->x;
  d->y = full->y;
  full->x = full->y = NULL;
  d->sp = full->sp;
  memset(&full->sp, 0, sizeof full->sp);
  data_free(full);
  data__note_shapes(d);
  return 0;
}

/* ============================== classes ================================== */

/* Most distinct ids tracked: labels are float ids below 2^24. */
#define CLASSES_MAX ((int64_t)1 << 24)

void data__classes_add(data_classes *c, float v) {
  if (c->n++ == 0) {
    c->ids = true;
    c->min = c->max = v;
  }
  if (!c->ids) return;
  if (!(v >= 0 && v < 16777216.0f) || v != (float)(int64_t)v) {
    c->ids = false;
    return;
  }
  if (v > c->max) c->max = v;
  if (v < c->min) c->min = v;
  int64_t id = (int64_t)v;
  if (id >= c->cap) { /* grows by doubling up to 2^24 ids (16 MiB at most) */
    int64_t cap = c->cap ? c->cap : 1024;
    while (cap <= id) cap *= 2;
    if (cap > CLASSES_MAX) cap = CLASSES_MAX;
    uint8_t *ns = realloc(c->seen, (size_t)cap);
    if (!ns) { /* counted as all in use, as data__classes_of does */
      c->distinct = -1;
      return;
    }
    memset(ns + c->cap, 0, (size_t)(cap - c->cap));
    c->seen = ns;
    c->cap = cap;
  }
  if (c->distinct >= 0 && !c->seen[id]) c->seen[id] = 1, c->distinct++;
}

int64_t data__classes_end(data_classes *c) {
  free(c->seen);
  c->seen = NULL;
  if (c->n == 0 || !c->ids) return 0;
  int64_t k = (int64_t)c->max + 1;
  if (k <= 16) return k;
  if (c->min > 1) return 0; /* ids start at 0 (or 1); a target of 25..346 is not ids */
  if (c->distinct < 0) return k;
  return c->distinct * 2 >= k ? k : 0; /* most ids in use */
}

int data__stats_from_sums(int64_t f, int64_t n, const double *k, const double *s1,
                          const double *s2, data_stats **out) {
  *out = NULL;
  data_stats *s = calloc(1, sizeof *s);
  if (s) {
    s->features = f;
    s->mean = malloc((size_t)(f ? f : 1) * sizeof *s->mean);
    s->std = malloc((size_t)(f ? f : 1) * sizeof *s->std);
  }
  if (!s || !s->mean || !s->std || n < 1) {
    data_stats_free(s);
    return n < 1 ? err_set(DRV_EINVAL, "standardize: no rows")
                 : err_set(DRV_ENOMEM, "standardize: out of memory");
  }
  for (int64_t j = 0; j < f; j++) {
    double m1 = s1[j] / (double)n, var = s2[j] / (double)n - m1 * m1;
    s->mean[j] = (float)(k[j] + m1);
    double sd = var > 0 ? sqrt(var) : 0;
    /* Variation below float resolution is rounding noise: a constant. */
    s->std[j] = sd > 4 * 1.1920929e-7 * fabs((double)s->mean[j]) && sd > 0 ? (float)sd : 1.0f;
  }
  *out = s;
  return 0;
}

int data__fill_row(void *ud, const float *x, int64_t features, float y, const data__ids *ids) {
  data_fill *c = ud;
  if (ids) {
    int rc = data__sp_add(&c->sp, c->path, ids);
    if (rc < 0) return rc;
  }
  if (!c->x) {
    int rc = data__alloc_xy(c->path, c->kept, features, &c->x, &c->y);
    if (rc < 0) return rc;
  }
  if (c->row >= c->kept || c->x->shape[1] != features)
    return err_set(DRV_EINVAL, "%s: more rows or other features than expected", c->path);
  memcpy(tensor_data(c->x) + c->row * features, x, (size_t)features * sizeof *x);
  tensor_data(c->y)[c->row++] = y;
  return 0;
}
