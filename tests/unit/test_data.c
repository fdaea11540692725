/* test_data.c - dataset operations: split, shuffle, shard, subset,
 * standardize, the batch iterator and synthetic data. The readers are tested
 * in test_data_read.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "harness.h"

/* ======================================================================
 * Helpers
 * ==================================================================== */

static float xat(const dataset *d, int64_t i, int64_t j) {
  return tensor_data(d->x)[i * d->features + j];
}
static float yat(const dataset *d, int64_t i) { return tensor_data(d->y)[i]; }

/* A hand-built dataset whose rows identify themselves: x[i][j] = 1000 i + j,
 * y[i] = i. */
static dataset *seq(int64_t n, int64_t f) {
  dataset *d = calloc(1, sizeof *d);
  CHECK(d);
  d->x = tensor_new2(n, f);
  d->y = tensor_new1(n);
  CHECK(d->x && d->y);
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < f; j++) tensor_data(d->x)[i * f + j] = (float)(1000 * i + j);
    tensor_data(d->y)[i] = (float)i;
  }
  d->n = n;
  d->features = f;
  d->classes = n;
  strcpy(d->source, "seq");
  return d;
}

/* Every row of a dataset derived from seq() is still a whole original row. */
static void check_rows_intact(const dataset *d) {
  for (int64_t i = 0; i < d->n; i++)
    for (int64_t j = 0; j < d->features; j++)
      CHECK_NEAR(xat(d, i, j), 1000 * yat(d, i) + (float)j, 0);
}

/* Marks the seq() ids of d in seen[], failing on a repeat. */
static void mark_ids(const dataset *d, char *seen, int64_t n) {
  for (int64_t i = 0; i < d->n; i++) {
    int64_t id = (int64_t)yat(d, i);
    CHECK(id >= 0 && id < n);
    CHECK(!seen[id]);
    seen[id] = 1;
  }
}

static void check_all_seen(const char *seen, int64_t n) {
  for (int64_t i = 0; i < n; i++) CHECK(seen[i]);
}

/* True when d and e hold the same rows in the same order. */
static int same_rows(const dataset *d, const dataset *e) {
  return d->n == e->n && d->features == e->features &&
         memcmp(tensor_data(d->x), tensor_data(e->x), (size_t)(d->n * d->features) * 4) == 0 &&
         memcmp(tensor_data(d->y), tensor_data(e->y), (size_t)d->n * 4) == 0;
}

/* ======================================================================
 * Operations
 * ==================================================================== */

TEST(data_split_sizes_determinism_and_cover) {
  dataset *d = seq(100, 3), *a, *b, *a2, *b2, *a3, *b3;
  CHECK_OK(data_split(d, 0.8, 1, &a, &b));
  CHECK_INT_EQ(a->n, 80);
  CHECK_INT_EQ(b->n, 20);
  CHECK_INT_EQ(a->features, 3);
  CHECK_INT_EQ(a->classes, 100);
  check_rows_intact(a);
  check_rows_intact(b);
  char seen[100] = {0};
  mark_ids(a, seen, 100);
  mark_ids(b, seen, 100);
  check_all_seen(seen, 100);
  /* Shuffled: the first part is not simply the first 80 rows. */
  int in_order = 1;
  for (int64_t i = 0; i < a->n; i++) in_order &= yat(a, i) == (float)i;
  CHECK(!in_order);
  CHECK_OK(data_split(d, 0.8, 1, &a2, &b2));
  CHECK(same_rows(a, a2) && same_rows(b, b2));
  CHECK_OK(data_split(d, 0.8, 2, &a3, &b3));
  CHECK(!same_rows(a, a3));
  /* The original is untouched. */
  for (int64_t i = 0; i < d->n; i++) CHECK_NEAR(yat(d, i), i, 0);
  data_free(a), data_free(b), data_free(a2), data_free(b2), data_free(a3), data_free(b3);
  /* Rounding and bad fractions. */
  CHECK_OK(data_split(d, 0.333, 5, &a, &b));
  CHECK_INT_EQ(a->n, 33);
  CHECK_INT_EQ(b->n, 67);
  data_free(a), data_free(b);
  CHECK_ERR(data_split(d, 1.0, 1, &a, &b), DRV_EINVAL, "fraction 1 is not strictly between 0 and 1");
  CHECK_ERR(data_split(d, 0.001, 1, &a, &b), DRV_EINVAL, "leaves one side empty");
  CHECK(a == NULL && b == NULL);
  data_free(d);
}

TEST(data_shuffle_is_seeded_permutation) {
  dataset *d = seq(50, 2), *s1, *s2, *s3;
  CHECK_OK(data_shuffle(d, 9, &s1));
  CHECK_OK(data_shuffle(d, 9, &s2));
  CHECK_OK(data_shuffle(d, 10, &s3));
  CHECK_INT_EQ(s1->n, 50);
  check_rows_intact(s1);
  char seen[50] = {0};
  mark_ids(s1, seen, 50);
  check_all_seen(seen, 50);
  CHECK(same_rows(s1, s2));
  CHECK(!same_rows(s1, s3));
  CHECK(!same_rows(s1, d));
  data_free(s1), data_free(s2), data_free(s3), data_free(d);
}

TEST(data_shard_and_subset) {
  dataset *d = seq(10, 2), *s[3];
  char seen[10] = {0};
  const int64_t sizes[3] = {4, 3, 3};
  for (int i = 0; i < 3; i++) {
    CHECK_OK(data_shard(d, i, 3, &s[i]));
    CHECK_INT_EQ(s[i]->n, sizes[i]);
    check_rows_intact(s[i]);
    for (int64_t k = 0; k < s[i]->n; k++) CHECK_NEAR(yat(s[i], k), i + 3 * k, 0);
    mark_ids(s[i], seen, 10);
    data_free(s[i]);
  }
  check_all_seen(seen, 10);
  dataset *o;
  CHECK_ERR(data_shard(d, 3, 3, &o), DRV_EINVAL, "shard: index 3 is out of range for 3 shards");
  CHECK_ERR(data_shard(d, 0, 0, &o), DRV_EINVAL, "out of range for 0 shards");
  CHECK_ERR(data_shard(d, 11, 12, &o), DRV_EINVAL, "shard 11 of 12 of 'seq' (10 examples) is empty");

  const int64_t idx[4] = {7, 2, 2, 9};
  CHECK_OK(data_subset(d, idx, 4, &o));
  CHECK_INT_EQ(o->n, 4);
  for (int k = 0; k < 4; k++) CHECK_NEAR(yat(o, k), idx[k], 0);
  check_rows_intact(o);
  data_free(o);
  const int64_t bad[2] = {1, 10};
  CHECK_ERR(data_subset(d, bad, 2, &o), DRV_ERANGE, "subset: index 10 is out of range for 10 examples");
  CHECK(o == NULL);
  data_free(d);
}

TEST(data_standardize_fit_and_apply) {
  /* Feature 0 varies, feature 1 is constant, feature 2 has a large mean. */
  data_synth_opts so = {.n = 500, .features = 3, .classes = 2, .seed = 3};
  dataset *d, *train, *test, *t2, *e2;
  CHECK_OK(data_synthetic(&so, &d));
  float *x = tensor_data(d->x);
  for (int64_t i = 0; i < d->n; i++) {
    x[i * 3 + 0] = x[i * 3 + 0] * 10 - 3;
    x[i * 3 + 1] = 5;
    x[i * 3 + 2] = 1000 + x[i * 3 + 2];
  }
  CHECK_OK(data_split(d, 0.8, 1, &train, &test));
  tensor *before = tensor_clone(train->x), *tbefore = tensor_clone(test->x);
  data_stats *st;
  CHECK_OK(data_standardize(train, NULL, &t2, &st));
  CHECK_INT_EQ(st->features, 3);
  CHECK_NEAR(st->std[1], 1, 0);
  CHECK_NEAR(st->mean[1], 5, 0);
  for (int j = 0; j < 3; j++) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < t2->n; i++) s += xat(t2, i, j);
    double m = s / (double)t2->n;
    for (int64_t i = 0; i < t2->n; i++) ss += (xat(t2, i, j) - m) * (xat(t2, i, j) - m);
    CHECK_NEAR(m, 0, 1e-4);
    if (j == 1) {
      for (int64_t i = 0; i < t2->n; i++) CHECK(xat(t2, i, 1) == 0.0f); /* not NaN */
    } else {
      CHECK_NEAR(sqrt(ss / (double)t2->n), 1, 1e-3);
    }
  }
  /* Labels carried over; originals untouched. */
  for (int64_t i = 0; i < t2->n; i++) CHECK_NEAR(yat(t2, i), yat(train, i), 0);
  CHECK(tensor_max_abs_diff(before, train->x) == 0);
  /* Test set: transformed with the train statistics, not its own. */
  data_stats *none = (data_stats *)1;
  CHECK_OK(data_standardize(test, st, &e2, &none));
  CHECK(none == NULL);
  for (int64_t i = 0; i < e2->n; i++)
    for (int j = 0; j < 3; j++)
      CHECK_NEAR(xat(e2, i, j), (xat(test, i, j) - st->mean[j]) / st->std[j], 1e-5);
  CHECK(tensor_max_abs_diff(tbefore, test->x) == 0);
  /* Their own statistics would have given a different result. */
  dataset *e3;
  CHECK_OK(data_standardize(test, NULL, &e3, NULL));
  CHECK(tensor_max_abs_diff(e2->x, e3->x) > 1e-4);
  data_free(e3);
  /* Feature count mismatch. */
  st->features = 2;
  CHECK_ERR(data_standardize(test, st, &e3, NULL), DRV_ESHAPE,
            "standardize: statistics for 2 features");
  st->features = 3;
  tensor_free(before), tensor_free(tbefore);
  data_stats_free(st);
  data_free(d), data_free(train), data_free(test), data_free(t2), data_free(e2);
}

/* ======================================================================
 * Iterator
 * ==================================================================== */

/* Runs one epoch, recording the ids in order; returns the batch count. */
static int run_epoch(data_iter *it, int64_t *order, int64_t n, int64_t batch) {
  const tensor *x, *y;
  int64_t seen = 0;
  int batches = 0, r;
  tensor *bx = it->bx;
  while ((r = data_iter_next(it, &x, &y)) == 1) {
    int64_t m = x->shape[0];
    CHECK(x == bx); /* batch tensors are reused */
    CHECK_INT_EQ(x->shape[1], it->d->features);
    CHECK_INT_EQ(y->shape[0], m);
    CHECK(m == batch || (seen + m == n && m < batch));
    for (int64_t i = 0; i < m; i++) {
      float id = tensor_data(y)[i];
      for (int64_t j = 0; j < x->shape[1]; j++)
        CHECK_NEAR(tensor_data(x)[i * x->shape[1] + j], 1000 * id + (float)j, 0);
      CHECK(seen < n);
      order[seen++] = (int64_t)id;
    }
    batches++;
  }
  CHECK_INT_EQ(r, 0);
  CHECK_INT_EQ(seen, n);
  char *mark = calloc((size_t)n, 1);
  for (int64_t i = 0; i < n; i++) {
    CHECK(!mark[order[i]]);
    mark[order[i]] = 1;
  }
  free(mark);
  /* Stays at the end until reset. */
  CHECK_INT_EQ(data_iter_next(it, &x, &y), 0);
  return batches;
}

TEST(data_iter_epochs) {
  dataset *d = seq(10, 3);
  data_iter it, it2;
  int64_t e0[10], e1[10], again0[10], again1[10];
  CHECK_OK(data_iter_init(&it, d, 4, true, 42));
  CHECK_INT_EQ(run_epoch(&it, e0, 10, 4), 3); /* 4 + 4 + 2 */
  data_iter_reset(&it);
  CHECK_INT_EQ(it.epoch, 1);
  CHECK_INT_EQ(run_epoch(&it, e1, 10, 4), 3);
  CHECK(memcmp(e0, e1, sizeof e0) != 0);
  int ident = 1;
  for (int i = 0; i < 10; i++) ident &= e0[i] == i;
  CHECK(!ident);
  /* Same seed, same orders epoch by epoch. */
  CHECK_OK(data_iter_init(&it2, d, 4, true, 42));
  run_epoch(&it2, again0, 10, 4);
  data_iter_reset(&it2);
  run_epoch(&it2, again1, 10, 4);
  CHECK(memcmp(e0, again0, sizeof e0) == 0);
  CHECK(memcmp(e1, again1, sizeof e1) == 0);
  data_iter_free(&it2);
  /* A different seed, a different order. */
  CHECK_OK(data_iter_init(&it2, d, 4, true, 43));
  run_epoch(&it2, again0, 10, 4);
  CHECK(memcmp(e0, again0, sizeof e0) != 0);
  data_iter_free(&it2);
  data_iter_free(&it);
  /* Without shuffle: in order, every epoch; a batch bigger than n. */
  CHECK_OK(data_iter_init(&it, d, 3, false, 42));
  for (int e = 0; e < 2; e++) {
    CHECK_INT_EQ(run_epoch(&it, e0, 10, 3), 4);
    for (int i = 0; i < 10; i++) CHECK_INT_EQ(e0[i], i);
    data_iter_reset(&it);
  }
  data_iter_free(&it);
  CHECK_OK(data_iter_init(&it, d, 64, true, 1));
  CHECK_INT_EQ(run_epoch(&it, e0, 10, 10), 1);
  data_iter_free(&it);
  CHECK_ERR(data_iter_init(&it, d, 0, true, 1), DRV_EINVAL, "batch: size 0");
  const tensor *bx, *by;
  CHECK_ERR(data_iter_next(&it, &bx, &by), DRV_EINVAL, "not initialised");
  data_iter_free(&it); /* safe after a failed init */
  data_free(d);
}

/* ======================================================================
 * Synthetic
 * ==================================================================== */

TEST(data_synthetic_deterministic_and_learnable) {
  data_synth_opts o = {.n = 3000, .features = 30, .classes = 10, .seed = 1};
  dataset *a, *b, *c;
  CHECK_OK(data_synthetic(&o, &a));
  CHECK_OK(data_synthetic(&o, &b));
  o.seed = 2;
  CHECK_OK(data_synthetic(&o, &c));
  CHECK_INT_EQ(a->n, 3000);
  CHECK_INT_EQ(a->features, 30);
  CHECK_INT_EQ(a->classes, 10);
  CHECK_STR_CONTAINS(a->source, "synthetic");
  CHECK(same_rows(a, b));
  CHECK(tensor_max_abs_diff(a->x, c->x) > 0);
  CHECK(tensor_max_abs_diff(a->y, c->y) > 0);
  int64_t count[10] = {0};
  for (int64_t i = 0; i < a->n; i++) {
    float y = yat(a, i);
    CHECK(y >= 0 && y < 10 && y == floorf(y));
    count[(int)y]++;
  }
  for (int k = 0; k < 10; k++) CHECK(count[k] > 0);
  for (int64_t i = 0; i < a->n * a->features; i++) {
    float v = tensor_data(a->x)[i];
    CHECK(v >= 0 && v < 1);
  }
  /* The labels come from one linear teacher: the same inputs from a longer
   * run of the same seed get the same labels (the teacher does not depend
   * on n), which is what makes the data learnable. */
  data_free(c);
  o.seed = 1;
  o.n = 5000;
  CHECK_OK(data_synthetic(&o, &c));
  CHECK(memcmp(tensor_data(a->x), tensor_data(c->x), 3000 * 30 * 4) == 0);
  CHECK(memcmp(tensor_data(a->y), tensor_data(c->y), 3000 * 4) == 0);
  data_free(a), data_free(b), data_free(c);
  o.n = 0;
  CHECK_ERR(data_synthetic(&o, &a), DRV_EINVAL, "synthetic: n, features and classes must be positive");
  o.n = (int64_t)1 << 40;
  o.features = 1 << 20;
  CHECK_ERR(data_synthetic(&o, &a), DRV_ERANGE, "too large");
  CHECK(a == NULL);
}

TEST(data_synthetic_mnist_shape) {
  data_synth_opts o = {.n = 60000, .features = 784, .classes = 10, .seed = 1};
  dataset *d;
  CHECK_OK(data_synthetic(&o, &d));
  CHECK_INT_EQ(d->n, 60000);
  CHECK_INT_EQ(d->features, 784);
  int64_t count[10] = {0};
  for (int64_t i = 0; i < d->n; i++) count[(int)yat(d, i)]++;
  /* Every class appears, none swamps the rest. */
  for (int k = 0; k < 10; k++) CHECK(count[k] > 600 && count[k] < 20000);
  data_free(d);
}
