/* test_data_sparse.c - a dataset's sparse part: the categorical hash's
 * fixed vectors, CSV categorical columns (missing values, Criteo lines,
 * gzip, errors), sparse libsvm (indices near 2^32 without a dense
 * matrix), the row operations and lazy loading carrying the ids, batches'
 * nn_sparse, and the training loop handing them to the model. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data.h"
#include "harness.h"
#include "numeric/nn.h"
#include "numeric/optim.h"
#include "train/train.h"

/* ---- helpers ------------------------------------------------------------- */

static uint64_t hid(uint32_t col, const char *s, uint64_t buckets) {
  return data_hash_id(col, s, strlen(s), buckets);
}

/* Row i's ids (count in *m). */
static const uint64_t *row_ids(const dataset *d, int64_t i, int64_t *m) {
  *m = d->sp.ptr[i + 1] - d->sp.ptr[i];
  return d->sp.ids + d->sp.ptr[i];
}

/* A CSV of n rows "k,v<k>,<k*10>,w<k % 3>,label" (k = 0..n-1): column 1
 * tells the row, columns 2 and 4 are categorical; label k % 2. */
static const char *rows_csv(int n) {
  static char buf[1 << 16];
  size_t len = 0;
  for (int k = 0; k < n; k++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%d,v%d,%d,w%d,%d\n", k, k, k * 10, k % 3,
                            k % 2);
  return harness_write_str("rows.csv", buf);
}

static const int rows_cat[] = {1, 3};
static data_csv_opts rows_opts(void) {
  return (data_csv_opts){.label = -1, .header = 0, .delimiter = ',', .categorical = rows_cat,
                         .ncategorical = 2, .buckets = 1000003, .has_missing = true};
}

/* Every row of d carries the ids of the row its x says it is. */
static void check_rows_ids(const dataset *d) {
  CHECK(d->sp.bound == 1000003 && d->sp.fields == 2 && d->sp.ptr && d->features == 2);
  for (int64_t i = 0; i < d->n; i++) {
    int k = (int)tensor_data(d->x)[i * 2];
    char a[32], b[32];
    snprintf(a, sizeof a, "v%d", k);
    snprintf(b, sizeof b, "w%d", k % 3);
    int64_t m;
    const uint64_t *ids = row_ids(d, i, &m);
    CHECK_INT_EQ(m, 2);
    CHECK(ids[0] == hid(2, a, 1000003) && ids[1] == hid(4, b, 1000003));
    CHECK_NEAR(tensor_data(d->x)[i * 2 + 1], k * 10, 0);
    CHECK_NEAR(tensor_data(d->y)[i], k % 2, 0);
  }
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  CHECK(f && fscanf(f, "%ld %ld", &pages, &res) == 2);
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ---- the hash -------------------------------------------------------------- */

/* The documented vectors (docs/data.md; tests/cli/test_data_sparse.sh
 * computes them again in Python): hosts and runs must agree on them. */
TEST(data_hash_fixed_vectors) {
  CHECK_INT_EQ(hid(15, "", 1 << 24), 11300265);
  CHECK_INT_EQ(hid(14, "05db9164", 1 << 24), 6262175);
  CHECK_INT_EQ(hid(40, "e8b83407", 1 << 24), 7816080);
  CHECK_INT_EQ(hid(2, "hello", 1 << 24), 4719108);
  CHECK(hid(15, "", DATA_MAX_BUCKETS) == 626204110249ULL);
  CHECK(hid(14, "05db9164", DATA_MAX_BUCKETS) == 357662952863ULL);
  CHECK(hid(40, "e8b83407", DATA_MAX_BUCKETS) == 149543142288ULL);
  CHECK(hid(2, "hello", DATA_MAX_BUCKETS) == 1040393437700ULL);
  /* the column is part of the hash; every id is below the buckets */
  CHECK(hid(14, "a", 1 << 24) != hid(15, "a", 1 << 24));
  CHECK_INT_EQ(hid(3, "anything", 1), 0);
}

/* ---- CSV categorical columns ------------------------------------------------ */

TEST(data_csv_categorical_missing_and_ids) {
  const char *p = harness_write_str("m.tsv", "1\t5\t\t68fd1e64\t\n0\t\t2.5\t\tabc\n");
  int cat[] = {3, 4};
  data_csv_opts o = {.label = 0, .header = -1, .delimiter = '\t', .categorical = cat,
                     .ncategorical = 2, .buckets = 1 << 24, .has_missing = true, .missing = -1};
  dataset *d = NULL;
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK_INT_EQ(d->n, 2); /* empty fields do not make the first line a header */
  CHECK_INT_EQ(d->features, 2);
  CHECK(!d->header_guessed);
  CHECK_NEAR(tensor_data(d->x)[0], 5, 0);
  CHECK_NEAR(tensor_data(d->x)[1], -1, 0); /* missing */
  CHECK_NEAR(tensor_data(d->x)[2], -1, 0);
  CHECK_NEAR(tensor_data(d->x)[3], 2.5, 0);
  int64_t m;
  const uint64_t *ids = row_ids(d, 0, &m);
  CHECK_INT_EQ(m, 2);
  CHECK(ids[0] == hid(4, "68fd1e64", 1 << 24) && ids[1] == hid(5, "", 1 << 24));
  ids = row_ids(d, 1, &m);
  CHECK(ids[0] == hid(4, "", 1 << 24) && ids[1] == hid(5, "abc", 1 << 24));
  CHECK(hid(4, "", 1 << 24) != hid(5, "", 1 << 24)); /* missing: its column's own id */
  CHECK(d->sp.vals == NULL && d->sp.fields == 2 && d->sp.bound == (1 << 24));
  data_free(d);
}

/* Criteo's display-advertising lines: label, 13 integers, 26 hex
 * strings, tab-separated, any field empty; gzip read as is. */
static const char criteo[] =
    "0\t1\t1\t5\t0\t1382\t4\t15\t2\t181\t1\t2\t\t2\t68fd1e64\t80e26c9b\tfb936136\t7b4723c4\t"
    "25c83c98\t7e0ccccf\tde7995b8\t1f89b562\ta73ee510\ta8cd5504\tb2cb9c98\t37c9c164\t2824a5f6\t"
    "1adce6ef\t8ba8b39a\t891b62e7\te5ba7672\tf54016b9\t21ddcdc9\tb1252a9d\t07b5194c\t\t3a171ecb\t"
    "c5c50484\te8b83407\t9727dd16\n"
    "1\t\t0\t\t\t\t\t\t\t\t\t\t\t\t05db9164\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n";

static data_csv_opts criteo_opts(int *cat) {
  for (int i = 0; i < 26; i++) cat[i] = 14 + i;
  return (data_csv_opts){.label = 0, .header = -1, .delimiter = '\t', .categorical = cat,
                         .ncategorical = 26, .buckets = 1 << 24, .has_missing = true};
}

static void check_criteo(const dataset *d) {
  CHECK_INT_EQ(d->n, 2);
  CHECK_INT_EQ(d->features, 13);
  CHECK_INT_EQ(d->classes, 2);
  CHECK_NEAR(tensor_data(d->x)[4], 1382, 0);
  CHECK_NEAR(tensor_data(d->x)[11], 0, 0); /* empty integer: 0 */
  CHECK_NEAR(tensor_data(d->y)[1], 1, 0);
  int64_t m;
  const uint64_t *ids = row_ids(d, 0, &m);
  CHECK_INT_EQ(m, 26);
  CHECK(ids[0] == hid(15, "68fd1e64", 1 << 24) && ids[25] == hid(40, "9727dd16", 1 << 24));
  CHECK(ids[21] == hid(36, "", 1 << 24));
  ids = row_ids(d, 1, &m);
  CHECK(ids[0] == hid(15, "05db9164", 1 << 24) && ids[1] == hid(16, "", 1 << 24));
}

TEST(data_csv_criteo_plain_and_gzip) {
  int cat[26];
  data_csv_opts o = criteo_opts(cat);
  dataset *d = NULL;
  CHECK_OK(data_read_csv(harness_write_str("day.tsv", criteo), &o, &d));
  check_criteo(d);
  data_free(d);
  gzFile gz = gzopen("day.tsv.gz", "wb");
  CHECK(gz && gzwrite(gz, criteo, (unsigned)strlen(criteo)) == (int)strlen(criteo));
  gzclose(gz);
  CHECK_OK(data_open_csv("day.tsv.gz", &o, &d));
  CHECK(data_is_lazy(d) && d->sp.fields == 26 && d->features == 13);
  CHECK_OK(data_load(d));
  check_criteo(d);
  data_free(d);
}

TEST(data_csv_categorical_errors) {
  int cat[26];
  data_csv_opts o = criteo_opts(cat);
  dataset *d = NULL;
  const char *bad = "0\t1\t1\t5\t0\t1382\t4\t15\t2\t181\t1\t2\t\t2\t68fd1e64\n";
  char buf[4096];
  snprintf(buf, sizeof buf, "%s%s", criteo, bad);
  CHECK_ERR(data_open_csv(harness_write_str("bad.tsv", buf), &o, &d), DRV_EPARSE,
            "bad.tsv:3: expected 40 fields, found 15");
  snprintf(buf, sizeof buf, "%s1\tx%s", criteo, strchr(criteo, '\t') + 2);
  CHECK_ERR(data_read_csv(harness_write_str("x.tsv", buf), &o, &d), DRV_EPARSE,
            "x.tsv:3: field 2: 'x' is not a number");
  o.buckets = DATA_MAX_BUCKETS + 1;
  CHECK_ERR(data_open_csv(harness_write_str("b.tsv", criteo), &o, &d), DRV_EINVAL,
            "buckets 1099511627777 is out of range (1 to 2^40)");
  o.buckets = 0;
  CHECK_ERR(data_open_csv("b.tsv", &o, &d), DRV_EINVAL, "out of range");
  o.buckets = 1 << 24;
  cat[0] = 0; /* the label */
  CHECK_ERR(data_open_csv("b.tsv", &o, &d), DRV_EINVAL, "categorical column 1 is the label column");
  cat[0] = 40;
  CHECK_ERR(data_open_csv("b.tsv", &o, &d), DRV_EINVAL,
            "b.tsv:1: categorical column 41 is out of range: the file has 40 columns");
  /* without a missing value, an empty numeric field is an error */
  data_csv_opts plain = {.label = 0, .header = 0, .delimiter = ','};
  CHECK_ERR(data_read_csv(harness_write_str("e.csv", "1,2\n0,\n"), &plain, &d), DRV_EPARSE,
            "e.csv:2: field 2 is empty (a value for empty fields: { missing = 0 })");
}

/* ---- sparse libsvm ----------------------------------------------------------- */

TEST(data_libsvm_sparse_near_2_32_without_dense_rows) {
  const char *p = harness_write_str("big.svm", "1 1:0.5 4294967295:2 4294967296:3\n"
                                               "0 7:1\n"
                                               "1\n");
  long before = rss_kib();
  data_libsvm_opts o = {.features = (int64_t)1 << 32, .sparse = true};
  dataset *d = NULL;
  CHECK_OK(data_read_libsvm(p, &o, &d));
  CHECK(rss_kib() - before < 16 * 1024); /* 2^32 dense floats a row would be 16 GiB */
  CHECK_INT_EQ(d->n, 3);
  CHECK_INT_EQ(d->features, 0);
  CHECK_INT_EQ(d->x->shape[1], 0);
  CHECK(d->sp.bound == (uint64_t)1 << 32 && d->sp.weighted && d->sp.fields == 0);
  int64_t m;
  const uint64_t *ids = row_ids(d, 0, &m);
  CHECK_INT_EQ(m, 3);
  CHECK(ids[0] == 0 && ids[1] == 4294967294ULL && ids[2] == 4294967295ULL);
  CHECK_NEAR(d->sp.vals[2], 3, 0);
  ids = row_ids(d, 1, &m);
  CHECK(m == 1 && ids[0] == 6);
  row_ids(d, 2, &m);
  CHECK_INT_EQ(m, 0);
  data_free(d);
  /* lazy and loaded from the recipe: the same rows */
  CHECK_OK(data_open_libsvm(p, &(data_libsvm_opts){.sparse = true}, &d));
  CHECK(data_is_lazy(d) && d->sp.bound == (uint64_t)1 << 32);
  CHECK_STR_CONTAINS(d->recipe, "\"sparse\":true");
  CHECK_OK(data_load(d));
  ids = row_ids(d, 0, &m);
  CHECK(m == 3 && ids[2] == 4294967295ULL && d->sp.vals[0] == 0.5f);
  CHECK(rss_kib() - before < 32 * 1024);
  data_free(d);
  /* dense rows refuse such indices, naming the way out */
  CHECK_ERR(data_read_libsvm(p, NULL, &d), DRV_ERANGE, "{ sparse = true }");
  o.features = 4294967295LL;
  CHECK_ERR(data_read_libsvm(p, &o, &d), DRV_ERANGE, "beyond the 4294967295 features");
}

/* ---- operations, lazy loading, files mode -------------------------------------- */

TEST(data_sparse_operations_carry_ids) {
  data_csv_opts o = rows_opts();
  dataset *d = NULL, *a = NULL, *b = NULL, *s = NULL, *h = NULL, *z = NULL;
  CHECK_OK(data_read_csv(rows_csv(50), &o, &d));
  CHECK(!data_is_lazy(d));
  check_rows_ids(d);
  /* in memory (no recipe) */
  free(d->recipe);
  d->recipe = NULL;
  CHECK_OK(data_split(d, 0.7, 3, &a, &b));
  CHECK_INT_EQ(a->n + b->n, 50);
  check_rows_ids(a);
  check_rows_ids(b);
  CHECK_OK(data_shuffle(d, 5, &s));
  check_rows_ids(s);
  CHECK(tensor_data(s->x)[0] != 0 || tensor_data(s->x)[2] != 2); /* really shuffled */
  CHECK_OK(data_shard(s, 1, 4, &h));
  CHECK_INT_EQ(h->n, 13);
  check_rows_ids(h);
  data_stats *st = NULL;
  CHECK_OK(data_standardize(h, NULL, &z, &st));
  CHECK(z->sp.ptr != h->sp.ptr && memcmp(z->sp.ids, h->sp.ids, 24 * sizeof(uint64_t)) == 0);
  data_stats_free(st);
  data_free(z);
  int64_t idx[] = {49, 0, 49};
  CHECK_OK(data_subset(d, idx, 3, &z));
  check_rows_ids(z);
  CHECK_NEAR(tensor_data(z->x)[4], 49, 0);
  data_free(z);
  data_free(d), data_free(a), data_free(b), data_free(s), data_free(h);
}

TEST(data_sparse_lazy_recipe_and_files_mode) {
  data_csv_opts o = rows_opts();
  dataset *d = NULL, *a = NULL, *b = NULL, *z = NULL, *w = NULL;
  CHECK_OK(data_open_csv(rows_csv(40), &o, &d));
  CHECK(data_is_lazy(d) && data_has_sparse(d) && d->sp.fields == 2 && d->features == 2);
  CHECK_STR_CONTAINS(d->recipe, "\"categorical\":[1,3]");
  CHECK_STR_CONTAINS(d->recipe, "\"buckets\":1000003");
  CHECK_OK(data_split(d, 0.5, 9, &a, &b));
  CHECK(data_is_lazy(a) && a->sp.bound == 1000003);
  CHECK_OK(data_standardize(a, NULL, &z, NULL)); /* statistics of the dense columns */
  CHECK(data_is_lazy(z) && z->sp.fields == 2);
  CHECK_OK(data_load(a));
  check_rows_ids(a);
  CHECK_OK(data_load(z));
  CHECK_INT_EQ(z->n, a->n);
  CHECK(memcmp(z->sp.ids, a->sp.ids, (size_t)a->n * 2 * sizeof(uint64_t)) == 0);
  /* a worker's shard from the recipe: data_shard's rows, ids and all */
  CHECK_OK(data_from_recipe(b->recipe, strlen(b->recipe), 1, 3, &w));
  dataset *ref = NULL;
  CHECK_OK(data_shard(b, 1, 3, &ref)); /* lazy too: b has a recipe */
  CHECK_OK(data_load(ref));
  CHECK_INT_EQ(w->n, ref->n);
  check_rows_ids(w);
  CHECK(memcmp(w->sp.ids, ref->sp.ids, (size_t)w->n * 2 * sizeof(uint64_t)) == 0);
  data_free(ref);
  data_free(w), data_free(z), data_free(a), data_free(b), data_free(d);
  /* standardize needs dense columns */
  dataset *l = NULL;
  CHECK_OK(data_read_libsvm(harness_write_str("s.svm", "1 3:1\n0 5:2\n"),
                            &(data_libsvm_opts){.sparse = true}, &l));
  CHECK_ERR(data_standardize(l, NULL, &z, NULL), DRV_EINVAL, "has no dense features");
  data_free(l);
}

/* ---- batches ------------------------------------------------------------------ */

TEST(data_iter_sparse_batches) {
  data_csv_opts o = rows_opts();
  dataset *d = NULL;
  CHECK_OK(data_read_csv(rows_csv(23), &o, &d));
  data_iter it;
  CHECK_OK(data_iter_init(&it, d, 5, true, 7));
  const tensor *x, *y;
  int64_t seen = 0, batches = 0;
  const uint64_t *first_ids = NULL;
  for (int epoch = 0; epoch < 2; epoch++, data_iter_reset(&it))
    while (data_iter_next(&it, &x, &y) > 0) {
      const nn_sparse *sp = data_iter_sparse(&it);
      CHECK(sp && sp->rows == x->shape[0] && sp->fields == 2 && sp->vals == NULL);
      CHECK_OK(nn_sparse_check(sp));
      for (int64_t i = 0; i < sp->rows; i++) {
        int k = (int)tensor_data(x)[i * 2];
        char a[32];
        snprintf(a, sizeof a, "v%d", k);
        CHECK(sp->ptr[i] == 2 * i && sp->ids[sp->ptr[i]] == hid(2, a, 1000003));
      }
      /* warm: the same buffers batch after batch */
      if (batches++ == 1) first_ids = sp->ids;
      if (batches > 2 && sp->rows == 5) CHECK(sp->ids == first_ids);
      seen += sp->rows;
    }
  CHECK_INT_EQ(seen, 46);
  data_iter_free(&it);
  data_free(d);
  /* a dense dataset has no ids */
  data_synth_opts so = {.n = 10, .features = 3, .classes = 2, .seed = 1};
  CHECK_OK(data_synthetic(&so, &d));
  CHECK_OK(data_iter_init(&it, d, 4, false, 0));
  CHECK(data_iter_next(&it, &x, &y) == 1 && data_iter_sparse(&it) == NULL);
  data_iter_free(&it);
  data_free(d);
}

/* ---- the training loop hands the ids to the model ------------------------------- */

/* A Linear whose forward checks that the model was given this batch's
 * ids: row i's ids are those of the example its x says it is. */
static nn_module_ops spy_ops;
static const nn_module_ops *linear_ops;
static int spy_calls, spy_null;

static int spy_forward(nn_module *m, const tensor *x, const tensor **y) {
  spy_calls++;
  const nn_sparse *sp = m->sparse;
  if (!sp) {
    spy_null++;
    return linear_ops->forward(m, x, y);
  }
  CHECK_INT_EQ(sp->rows, x->shape[0]);
  for (int64_t i = 0; i < sp->rows; i++) {
    int k = (int)tensor_data(x)[i * x->shape[1]];
    char a[32];
    snprintf(a, sizeof a, "v%d", k);
    CHECK(sp->ptr[i + 1] - sp->ptr[i] == 2 && sp->ids[sp->ptr[i]] == hid(2, a, 1000003));
  }
  return linear_ops->forward(m, x, y);
}

TEST(train_hands_batch_ids_to_model) {
  data_csv_opts o = rows_opts();
  dataset *d = NULL;
  CHECK_OK(data_read_csv(rows_csv(30), &o, &d));
  rng_t r;
  rng_seed(&r, 1);
  nn_module *lin = nn_linear(2, 1, &r), *m = nn_sequential();
  linear_ops = lin->ops;
  spy_ops = *lin->ops;
  spy_ops.forward = spy_forward;
  lin->ops = &spy_ops;
  CHECK_OK(nn_sequential_add(m, lin));
  nn_unref(lin);
  nn_loss *loss = nn_mse();
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(m, &pl));
  optim_cfg oc;
  optim_cfg_default(&oc, OPTIM_SGD);
  oc.lr = 1e-6f;
  optim_t *opt = optim_new(&oc, &pl);
  train_cfg c = {.batch = 7, .epochs = 2, .shuffle = true, .seed = 3, .eval = d, .eval_every = 4};
  train_result res;
  CHECK_OK(train_fit(m, loss, opt, d, &c, &res));
  CHECK_INT_EQ(res.steps, 10);
  CHECK(spy_calls >= 10 + 2 * 5); /* steps and evals (5 batches each) */
  CHECK_INT_EQ(spy_null, 0);
  CHECK(m->sparse == NULL && lin->sparse == NULL); /* not left pointing at freed batches */
  /* predict hands each batch its rows' ids */
  nn_sparse all = {.rows = d->n, .ptr = d->sp.ptr, .ids = d->sp.ids, .fields = 2};
  tensor *out = NULL;
  int before = spy_calls;
  CHECK_OK(train_predict(m, d->x, &all, 8, &out));
  CHECK_INT_EQ(spy_calls - before, 4);
  CHECK_INT_EQ(spy_null, 0);
  tensor_free(out);
  /* a dense predict gives none */
  CHECK_OK(train_predict(m, d->x, NULL, 64, &out));
  CHECK_INT_EQ(spy_null, 1);
  tensor_free(out);
  optim_free(opt);
  nn_param_list_free(&pl);
  nn_loss_unref(loss);
  nn_unref(m);
  data_free(d);
}

/* A SETUP's sparse part: libsvm's weighted rows and hashed fields both come
 * back as they went; bytes that are not such a part (truncated, a lying
 * count, offsets that run backwards, an id past the bound) are refused
 * and leave the dataset without one. */
TEST(data_sparse_setup_bytes_round_trip_and_refusals) {
  const char *p = harness_write_str("enc.svm", "1 1:0.5 4:3 9:2\n0 7:1\n1\n");
  dataset *d = NULL;
  CHECK_OK(data_read_libsvm(p, &(data_libsvm_opts){.features = 16, .sparse = true}, &d));
  uint8_t *b = NULL;
  size_t n = 0;
  CHECK_OK(data_sparse_encode(d, &b, &n));
  CHECK(b && n == 21 + 8 * 4 + 12 * 4);
  dataset e = {.n = d->n, .source = "e"};
  CHECK_OK(data_sparse_decode(&e, b, n, "SETUP"));
  CHECK(e.sp.weighted && e.sp.bound == 16 && e.sp.fields == 0);
  CHECK(memcmp(e.sp.ptr, d->sp.ptr, 4 * sizeof *e.sp.ptr) == 0);
  CHECK(memcmp(e.sp.ids, d->sp.ids, 4 * sizeof *e.sp.ids) == 0);
  CHECK(memcmp(e.sp.vals, d->sp.vals, 4 * sizeof *e.sp.vals) == 0);
  free(e.sp.ptr), free(e.sp.ids), free(e.sp.vals);
  dataset f = {.n = d->n, .source = "f"};
  CHECK_ERR(data_sparse_decode(&f, b, n - 1, "SETUP"), DRV_EPARSE, "does not match");
  b[13] = 5; /* nnz 5 where 4 are there */
  CHECK_ERR(data_sparse_decode(&f, b, n, "SETUP"), DRV_EPARSE, "SETUP");
  b[13] = 4;
  uint8_t *ptr1 = b + 21 + 8;
  ptr1[0] = 9; /* row 0 ends past row 1's end */
  CHECK_ERR(data_sparse_decode(&f, b, n, "SETUP"), DRV_EPARSE, "inconsistent");
  ptr1[0] = 3;
  b[21 + 32] = 16; /* the first id: 16, past the bound */
  CHECK_ERR(data_sparse_decode(&f, b, n, "SETUP"), DRV_EPARSE, "inconsistent");
  CHECK(f.sp.ptr == NULL && f.sp.bound == 0);
  free(b);
  data_free(d);
  /* none: no bytes */
  dataset g = {.n = 3};
  CHECK_OK(data_sparse_encode(&g, &b, &n));
  CHECK(b == NULL && n == 0);
  CHECK_OK(data_sparse_decode(&g, NULL, 0, "SETUP"));
}

/* A predict batch's ids: rows [r0, r0 + n) of a sparse part encode with
 * offsets from 0 and decode to exactly those rows; a range outside the
 * dataset is refused. */
TEST(data_sparse_encode_rows_of_a_batch) {
  const char *p = harness_write_str("rows.svm", "1 1:0.5 4:3 9:2\n0 7:1\n1\n0 2:4 3:5\n");
  dataset *d = NULL;
  CHECK_OK(data_read_libsvm(p, &(data_libsvm_opts){.features = 16, .sparse = true}, &d));
  CHECK_OK(data_load(d));
  uint8_t *b = NULL;
  size_t n = 0;
  CHECK_OK(data_sparse_encode_rows(d, 1, 3, &b, &n)); /* rows 1..3: 1, 0 and 2 entries */
  dataset e = {.n = 3, .source = "e"};
  CHECK_OK(data_sparse_decode(&e, b, n, "PREDICT"));
  CHECK(e.sp.ptr[0] == 0 && e.sp.ptr[1] == 1 && e.sp.ptr[2] == 1 && e.sp.ptr[3] == 3);
  CHECK(e.sp.ids[0] == 6 && e.sp.ids[1] == 1 && e.sp.ids[2] == 2);
  CHECK(e.sp.vals[0] == 1 && e.sp.vals[1] == 4 && e.sp.vals[2] == 5);
  free(e.sp.ptr), free(e.sp.ids), free(e.sp.vals);
  free(b);
  CHECK_OK(data_sparse_encode_rows(d, 4, 0, &b, &n)); /* an empty range: no ids, still a part */
  CHECK(b && n == 21 + 8);
  free(b);
  CHECK_ERR(data_sparse_encode_rows(d, 2, 3, &b, &n), DRV_ERANGE, "rows 2..5 of 4");
  CHECK(b == NULL && n == 0);
  data_free(d);
}
