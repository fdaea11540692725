/* test_data_recipe.c - files mode: every shard a worker rebuilds from a
 * dataset's recipe is, row for row and bit for bit, data_shard of the
 * coordinator's dataset, for CSV, libsvm and .npy, after split, shuffle,
 * shard and standardize; a changed file is refused. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "harness.h"

/* a and b hold the same rows, bit for bit */
static void same(const dataset *a, const dataset *b) {
  CHECK(a->n == b->n);
  CHECK(a->features == b->features);
  CHECK(memcmp(tensor_data(a->x), tensor_data(b->x), (size_t)tensor_numel(a->x) * 4) == 0);
  CHECK(memcmp(tensor_data(a->y), tensor_data(b->y), (size_t)tensor_numel(a->y) * 4) == 0);
}

/* Every shard of n from d's recipe against data_shard(d). */
static void shards_match(const dataset *d, int64_t n) {
  CHECK(d->recipe != NULL);
  for (int64_t i = 0; i < n; i++) {
    dataset *want, *got;
    CHECK_OK(data_shard(d, i, n, &want));
    CHECK_OK(data_from_recipe(d->recipe, strlen(d->recipe), i, n, &got));
    same(want, got);
    data_free(want);
    data_free(got);
  }
}

/* The usual chain: split, shuffle, standardize; both halves. */
static void chain(const dataset *d) {
  dataset *a, *b, *s, *z;
  data_stats *st;
  CHECK_OK(data_split(d, 0.7, 5, &a, &b));
  CHECK_OK(data_shuffle(a, 9, &s));
  CHECK_OK(data_standardize(s, NULL, &z, &st));
  shards_match(d, 3);
  shards_match(a, 2);
  shards_match(b, 3);
  shards_match(z, 3);
  dataset *bz;
  CHECK_OK(data_standardize(b, st, &bz, NULL));
  shards_match(bz, 1);
  data_free(bz);
  data_stats_free(st);
  data_free(a);
  data_free(b);
  data_free(s);
  data_free(z);
}

TEST(data_recipe_csv_shards) {
  char text[8192];
  size_t k = 0;
  for (int i = 0; i < 50; i++)
    k += (size_t)snprintf(text + k, sizeof text - k, "%d,%g,%s\n", i, i * 0.37 - 3, i % 3 ? "b" : "a");
  const char *p = harness_write_str("r.csv", text);
  data_csv_opts o = {.label = -1, .header = 0, .classes = 1};
  dataset *d;
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK(d->nnames == 2 && d->classes == 2);
  chain(d);
  data_free(d);
}

TEST(data_recipe_libsvm_shards) {
  char text[8192];
  size_t k = 0;
  for (int i = 0; i < 40; i++)
    k += (size_t)snprintf(text + k, sizeof text - k, "%d 0:%d %d:%g\n", i % 2, i, 1 + i % 4, i * 0.5);
  const char *p = harness_write_str("r.svm", text);
  dataset *d;
  CHECK_OK(data_read_libsvm(p, &(data_libsvm_opts){.zero_based = -1}, &d));
  CHECK(d->features == 5);
  chain(d);
  data_free(d);
}

TEST(data_recipe_npy_shards_and_changed_files) {
  enum { ROWS = 33, COLS = 4 };
  char head[128];
  int len = snprintf(head, sizeof head, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }",
                     ROWS, COLS);
  int total = (10 + len + 1 + 63) / 64 * 64;
  unsigned char buf[128 + ROWS * COLS * 4];
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(total - 10);
  buf[9] = 0;
  memcpy(buf + 10, head, (size_t)len);
  memset(buf + 10 + len, ' ', (size_t)(total - 10 - len - 1));
  buf[total - 1] = '\n';
  for (int i = 0; i < ROWS * COLS; i++) {
    float v = (float)i * 0.25f - 7;
    memcpy(buf + total + 4 * i, &v, 4);
  }
  const char *p = harness_write("r.npy", buf, (size_t)total + ROWS * COLS * 4);
  char path[4096];
  snprintf(path, sizeof path, "%s", p);
  dataset *d;
  CHECK_OK(data_read_npy(path, NULL, &d));
  CHECK(d->x->storage->mapped > 0); /* float32: mapped, not read */
  chain(d);
  /* The file changed under the recipe: the worker says so, naming it. */
  harness_write("r.npy", buf, (size_t)total + (ROWS - 1) * COLS * 4);
  dataset *got = NULL;
  int rc = data_from_recipe(d->recipe, strlen(d->recipe), 0, 2, &got);
  CHECK(rc < 0 && got == NULL);
  data_free(d);
  CHECK_ERR(data_from_recipe("{\"n\": 3}", 8, 0, 1, &got), DRV_EPROTO, "recipe is malformed");
}
