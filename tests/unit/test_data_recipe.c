/* test_data_recipe.c - files mode: every shard a worker rebuilds from a
 * dataset's recipe is, row for row and bit for bit, data_shard of the
 * coordinator's dataset, for CSV, libsvm and .npy, after split, shuffle,
 * shard and standardize (IDX too, plain and gzip); a changed file is
 * refused; a shipped file is found by the name it was shipped under. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <zlib.h>

#include "data/data.h"
#include "harness.h"

/* a and b hold the same rows, bit for bit */
static void same(const dataset *a, const dataset *b) {
  CHECK(a->n == b->n);
  CHECK(a->features == b->features);
  CHECK(memcmp(tensor_data(a->x), tensor_data(b->x), (size_t)tensor_numel(a->x) * 4) == 0);
  CHECK(memcmp(tensor_data(a->y), tensor_data(b->y), (size_t)tensor_numel(a->y) * 4) == 0);
}

/* Every shard of n from lazy's recipe against data_shard(eager), eager
 * being the same rows built in memory by the eager operations. */
static void shards_match(const dataset *lazy, const dataset *eager, int64_t n) {
  CHECK(lazy->recipe != NULL && eager->recipe == NULL);
  CHECK(lazy->n == eager->n);
  for (int64_t i = 0; i < n; i++) {
    dataset *want, *got;
    CHECK_OK(data_shard(eager, i, n, &want));
    CHECK_OK(data_from_recipe(lazy->recipe, strlen(lazy->recipe), i, n, &got));
    same(want, got);
    data_free(want);
    data_free(got);
  }
}

/* d's rows in memory without a recipe: its operations are eager. */
static dataset *eager_copy(const dataset *d) {
  int64_t *idx = malloc((size_t)d->n * sizeof *idx);
  for (int64_t i = 0; i < d->n; i++) idx[i] = i;
  dataset *e = NULL;
  CHECK_OK(data_subset(d, idx, d->n, &e));
  free(idx);
  CHECK(e->recipe == NULL);
  return e;
}

/* The usual chain: split, shuffle, standardize; both halves. The lazy
 * operations (d has a recipe) against the eager ones on a copy; the
 * streamed statistics against the ones fitted in memory. */
static void chain(const dataset *d) {
  dataset *e = eager_copy(d);
  dataset *a, *b, *s, *z, *ea, *eb, *es, *ez, *loaded;
  data_stats *st, *est;
  CHECK_OK(data_split(d, 0.7, 5, &a, &b));
  CHECK(data_is_lazy(a) && data_is_lazy(b));
  CHECK_OK(data_shuffle(a, 9, &s));
  CHECK_OK(data_standardize(s, NULL, &z, &st));
  CHECK(data_is_lazy(z));
  CHECK_OK(data_split(e, 0.7, 5, &ea, &eb));
  CHECK_OK(data_shuffle(ea, 9, &es));
  CHECK_OK(data_standardize(es, NULL, &loaded, &est));
  for (int64_t j = 0; j < st->features; j++) {
    CHECK(fabsf(st->mean[j] - est->mean[j]) <= 1e-5f * (1 + fabsf(est->mean[j])));
    CHECK(fabsf(st->std[j] - est->std[j]) <= 1e-5f * (1 + fabsf(est->std[j])));
  }
  data_free(loaded);
  CHECK_OK(data_standardize(es, st, &ez, NULL)); /* the lazy statistics, applied eagerly */
  shards_match(d, e, 3);
  shards_match(a, ea, 2);
  shards_match(b, eb, 3);
  shards_match(s, es, 3);
  shards_match(z, ez, 3);
  dataset *bz, *ebz;
  CHECK_OK(data_standardize(b, st, &bz, NULL));
  CHECK_OK(data_standardize(eb, st, &ebz, NULL));
  shards_match(bz, ebz, 1);
  /* loaded in place on first use: the same rows */
  CHECK_OK(data_load(bz));
  CHECK(!data_is_lazy(bz));
  same(bz, ebz);
  data_free(bz);
  data_free(ebz);
  data_stats_free(st);
  data_stats_free(est);
  data_free(a);
  data_free(b);
  data_free(s);
  data_free(z);
  data_free(ea);
  data_free(eb);
  data_free(es);
  data_free(ez);
  data_free(e);
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

/* data_open_csv streams what data_read_csv reads whole: same shape,
 * classes, names and header guess; a line longer than the stream's
 * buffer (1 MiB), CRLF, a BOM and blank lines; loading gives the rows. */
TEST(data_lazy_csv_matches_the_reader) {
  enum { COLS = 300000, ROWS = 4 };
  size_t cap = (size_t)ROWS * COLS * 4 + 256, k = 0;
  char *text = malloc(cap);
  k += (size_t)snprintf(text + k, cap - k, "\xEF\xBB\xBF");
  for (int c = 0; c < COLS; c++) k += (size_t)snprintf(text + k, cap - k, "h,");
  k += (size_t)snprintf(text + k, cap - k, "label\r\n\r\n");
  for (int r = 0; r < ROWS; r++) {
    for (int c = 0; c < COLS; c++) k += (size_t)snprintf(text + k, cap - k, "%d,", (r + c) % 7);
    k += (size_t)snprintf(text + k, cap - k, "%s\r\n", r % 2 ? "cat" : "dog");
  }
  const char *p = harness_write("big.csv", text, k);
  free(text);
  data_csv_opts o = {.label = -1, .header = -1, .classes = 1};
  dataset *eager, *lazy;
  CHECK_OK(data_read_csv(p, &o, &eager));
  CHECK_OK(data_open_csv(p, &o, &lazy));
  CHECK(data_is_lazy(lazy) && !data_is_lazy(eager));
  CHECK(lazy->n == ROWS && lazy->features == COLS && lazy->classes == 2 && lazy->nnames == 2);
  CHECK(strcmp(lazy->names[0], "cat") == 0 && lazy->header_guessed == eager->header_guessed);
  CHECK(lazy->header_guessed);
  CHECK_OK(data_load(lazy));
  same(lazy, eager);
  data_free(eager);
  data_free(lazy);
  /* a malformed row is named, file and line, when the file is opened */
  p = harness_write_str("bad.csv", "1,2,0\n\n3,4,1\n5,6\n");
  CHECK_ERR(data_open_csv(p, NULL, &lazy), DRV_EPARSE, "bad.csv:4: expected 3 fields, found 2");
}

TEST(data_lazy_libsvm_matches_the_reader) {
  const char *p = harness_write_str("l.svm", "# comment\n1 0:1 3:2.5\n0 2:1 # tail\n\n1 1:-1\n");
  data_libsvm_opts o = {.zero_based = -1};
  dataset *eager, *lazy;
  CHECK_OK(data_read_libsvm(p, &o, &eager));
  CHECK_OK(data_open_libsvm(p, &o, &lazy));
  CHECK(lazy->n == 3 && lazy->features == 4 && lazy->classes == eager->classes);
  CHECK_OK(data_load(lazy));
  same(lazy, eager);
  data_free(eager);
  data_free(lazy);
  p = harness_write_str("b.svm", "1 1:1\n0 2:x\n");
  CHECK_ERR(data_open_libsvm(p, NULL, &lazy), DRV_EPARSE, "b.svm:2: index 2: 'x' is not a number");
}

/* ======================================================================
 * IDX (data_open_idx): plain by byte ranges, gzip streamed
 * ==================================================================== */

/* 37 rows of 2x3 big-endian float32 (0x0D) images and u8 labels 0..4. */
static size_t idx_images(unsigned char *buf) {
  static const unsigned char head[] = {0, 0, 0x0D, 3, 0, 0, 0, 37, 0, 0, 0, 2, 0, 0, 0, 3};
  memcpy(buf, head, sizeof head);
  for (int i = 0; i < 37 * 6; i++) {
    float v = (float)((i * 7) % 23) * 0.5f - 3;
    uint32_t u;
    memcpy(&u, &v, 4);
    for (int b = 0; b < 4; b++) buf[sizeof head + 4 * (size_t)i + (size_t)b] = (unsigned char)(u >> (24 - 8 * b));
  }
  return sizeof head + 37 * 6 * 4;
}

static size_t idx_labels(unsigned char *buf) {
  static const unsigned char head[] = {0, 0, 0x08, 1, 0, 0, 0, 37};
  memcpy(buf, head, sizeof head);
  for (int i = 0; i < 37; i++) buf[sizeof head + (size_t)i] = (unsigned char)(i % 5);
  return sizeof head + 37;
}

/* data_open_idx of the files (gz: gzipped copies) against data_read_idx. */
static void idx_case(bool gz) {
  unsigned char im[1024], lb[64];
  size_t ni = idx_images(im), nl = idx_labels(lb);
  char ip[4096], lp[4096];
  snprintf(ip, sizeof ip, "%s", harness_write(gz ? "i.idx.gz" : "i.idx", im, ni));
  snprintf(lp, sizeof lp, "%s", harness_write(gz ? "l.idx.gz" : "l.idx", lb, nl));
  if (gz) { /* the same bytes, compressed */
    gzFile f = gzopen(ip, "wb");
    CHECK(f && gzwrite(f, im, (unsigned)ni) == (int)ni && gzclose(f) == Z_OK);
    f = gzopen(lp, "wb");
    CHECK(f && gzwrite(f, lb, (unsigned)nl) == (int)nl && gzclose(f) == Z_OK);
  }
  dataset *lazy, *eager;
  CHECK_OK(data_open_idx(ip, lp, &lazy));
  CHECK(data_is_lazy(lazy) && lazy->recipe && lazy->n == 37 && lazy->features == 6);
  CHECK(lazy->classes == 5 && lazy->x_ndim == 3 && lazy->x_shape[1] == 2 && lazy->x_shape[2] == 3);
  CHECK_OK(data_read_idx(ip, lp, &eager));
  CHECK_OK(data_load(lazy));
  same(lazy, eager);
  CHECK(lazy->x->ndim == 3);
  chain(lazy);
  data_free(eager);
  data_free(lazy);
}

TEST(data_recipe_idx_shards_plain_and_gzip) {
  idx_case(false);
  idx_case(true);
}

/* A file of the run's `files` that a worker sees neither at the
 * coordinator's path nor as the script gave it is opened by the name it
 * was shipped under; if that is missing too, the error names both. */
TEST(data_recipe_shipped_name) {
  CHECK(system("mkdir -p far && printf '1,2,0\\n3,4,1\\n5,6,0\\n7,8,1\\n' > far/t.csv") == 0);
  char abs[4096];
  CHECK(realpath("far/t.csv", abs) != NULL);
  dataset *d, *got;
  CHECK_OK(data_open_csv(abs, NULL, &d));
  const char *files[] = {"/elsewhere/other.csv", abs}, *names[] = {"other.csv", "t.csv"};
  char *shipped = NULL;
  CHECK_OK(data_recipe_shipped(d->recipe, files, names, 1, &shipped));
  CHECK(shipped == NULL); /* none of the recipe's files was shipped */
  CHECK_OK(data_recipe_shipped(d->recipe, files, names, 2, &shipped));
  CHECK(shipped && strstr(shipped, "\"path_shipped\":\"t.csv\""));
  CHECK(rename("far", "hidden") == 0); /* the coordinator's path is gone here */
  CHECK_ERR(data_from_recipe(shipped, strlen(shipped), 0, 2, &got), DRV_EIO, "cannot open '");
  CHECK(strstr(err_msg(), abs) && strstr(err_msg(), "(nor 't.csv', the name it was shipped under)"));
  CHECK(system("cp hidden/t.csv t.csv") == 0); /* where the launcher puts it */
  CHECK_OK(data_from_recipe(shipped, strlen(shipped), 1, 2, &got));
  CHECK(got->n == 2 && tensor_data(got->x)[0] == 3 && tensor_data(got->y)[1] == 1);
  data_free(got);
  free(shipped);
  data_free(d);
}
