/* data_recipe.c - files mode: a dataset read from a file remembers how to
 * read it again (dataset.recipe, JSON), and a cluster worker rebuilds its
 * own shard from that recipe instead of receiving the rows.
 *
 * A recipe is the reader and its resolved options (an absolute path, the
 * label column, the header, the class names, libsvm's feature count and
 * index base), the file's row count `n`, and the operations applied since,
 * in order: split {frac, seed, part}, shuffle {seed}, shard {i, n},
 * standardize {mean, std}. The row operations compose into one list of
 * the file's rows, computed with the same permutations as data.c, so a
 * worker's shard is row for row what data_shard of the coordinator's
 * dataset would be. Only those rows are read: gathered from a mapped .npy,
 * or the only lines of a CSV or libsvm file that are parsed.
 */
#include "data/data.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/data_int.h"
#include "base/err.h"
#include "base/webhdfs.h"

/* ============================== building ================================= */

static int bad(const char *what) {
  return err_set(DRV_EPROTO, "files mode: the dataset's recipe is malformed (%s)", what);
}

const char *data__abspath(const char *path, char *buf, size_t n) {
  if (webhdfs_is_url(path)) return webhdfs_resolve(path, buf, n) == 0 ? buf : path;
  char *r = realpath(path, NULL);
  if (!r || strlen(r) >= n) {
    free(r);
    return path;
  }
  memcpy(buf, r, strlen(r) + 1);
  free(r);
  return buf;
}

static void set_json(dataset *d, json_t *r) {
  free(d->recipe);
  d->recipe = r ? json_dumps(r, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(r);
}

void data__set_recipe(dataset *d, json_t *base) {
  if (!d || !base) {
    json_decref(base);
    return;
  }
  json_object_set_new(base, "n", json_integer((json_int_t)d->n));
  json_object_set_new(base, "ops", json_array());
  set_json(d, base);
}

/* dst's recipe: src's with `op` appended (taken); none when src has none. */
void data__recipe_op(const dataset *src, dataset *dst, json_t *op) {
  json_t *r = src->recipe && op ? json_loads(src->recipe, 0, NULL) : NULL;
  json_t *ops = r ? json_object_get(r, "ops") : NULL;
  if (!ops || json_array_append_new(ops, op) < 0) {
    if (!ops) json_decref(op);
    json_decref(r);
    free(dst->recipe);
    dst->recipe = NULL;
    return;
  }
  set_json(dst, r);
}

json_t *data__op_seeded(const char *name, uint64_t seed) {
  return json_pack("{s:s, s:I}", "op", name, "seed", (json_int_t)(int64_t)seed);
}

json_t *data__op_stats(const data_stats *s) {
  json_t *m = json_array(), *sd = json_array();
  for (int64_t j = 0; m && sd && j < s->features; j++) {
    json_array_append_new(m, json_real(s->mean[j]));
    json_array_append_new(sd, json_real(s->std[j]));
  }
  return m && sd ? json_pack("{s:s, s:o, s:o}", "op", "standardize", "mean", m, "std", sd)
                 : (json_decref(m), json_decref(sd), NULL);
}

int data_recipe_shipped(const char *recipe, const char *const *files, const char *const *names,
                        int n, char **out) {
  *out = NULL;
  json_t *rec = n > 0 ? json_loads(recipe, 0, NULL) : NULL;
  if (!rec) return n > 0 ? bad("not JSON") : 0;
  static const char *const keys[] = {"path", "x", "y"};
  bool any = false;
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
    const char *abs = json_string_value(json_object_get(rec, keys[k]));
    for (int i = 0; abs && i < n; i++) {
      if (strcmp(abs, files[i]) != 0) continue;
      char sk[32];
      snprintf(sk, sizeof sk, "%s_shipped", keys[k]);
      json_object_set_new(rec, sk, json_string(names[i]));
      any = true;
      break;
    }
  }
  if (any && !(*out = json_dumps(rec, JSON_COMPACT | JSON_REAL_PRECISION(17)))) {
    json_decref(rec);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  json_decref(rec);
  return 0;
}

/* ============================== rows ==================================== */

typedef struct rows {
  int64_t *v, n;
} rows;

/* r = r[from], r[from + step], ... (k of them), in place: entry j is
 * written after every entry at from + j' * step (j' >= j) is read. */
static void take(rows *r, int64_t from, int64_t k, int64_t step) {
  for (int64_t j = 0; j < k; j++) r->v[j] = r->v[from + j * step];
  r->n = k;
}

/* r = r[perm[from .. from + k)], built in the permutation's own array:
 * entry j is written after entries from + j' (j' >= j) are read, so a
 * coordinator streaming statistics of a split holds two lists, not three. */
static int op_perm(rows *r, uint64_t seed, int64_t from, int64_t k) {
  int64_t *perm = malloc((size_t)(r->n ? r->n : 1) * sizeof *perm);
  if (!perm) return err_set(DRV_ENOMEM, "out of memory");
  rng_t g;
  rng_seed(&g, seed);
  rng_permutation(&g, perm, r->n);
  for (int64_t j = 0; j < k; j++) perm[j] = r->v[perm[from + j]];
  free(r->v);
  int64_t *fit = realloc(perm, (size_t)(k ? k : 1) * sizeof *perm);
  r->v = fit ? fit : perm;
  r->n = k;
  return 0;
}

/* shard (i, n) of r: rows i, i + n, ... as data_shard takes them. */
static int op_shard(rows *r, int64_t i, int64_t n) {
  if (n < 1 || i < 0 || i >= n || i >= r->n)
    return err_set(DRV_EINVAL, "files mode: shard %lld of %lld of %lld rows is empty",
                   (long long)i, (long long)n, (long long)r->n);
  take(r, i, (r->n - 1 - i) / n + 1, n);
  return 0;
}

/* Applies one row operation of the recipe to r. */
static int apply_op(rows *r, json_t *op) {
  const char *name = json_string_value(json_object_get(op, "op"));
  uint64_t seed = (uint64_t)(int64_t)json_integer_value(json_object_get(op, "seed"));
  if (!name) return bad("an operation without a name");
  if (strcmp(name, "shuffle") == 0) return op_perm(r, seed, 0, r->n);
  if (strcmp(name, "split") == 0) {
    double frac = json_number_value(json_object_get(op, "frac"));
    int64_t na = (int64_t)llround(frac * (double)r->n);
    if (na < 1 || na > r->n - 1) return bad("split");
    bool second = json_integer_value(json_object_get(op, "part")) == 1;
    return op_perm(r, seed, second ? na : 0, second ? r->n - na : na);
  }
  if (strcmp(name, "shard") == 0)
    return op_shard(r, json_integer_value(json_object_get(op, "i")),
                    json_integer_value(json_object_get(op, "n")));
  if (strcmp(name, "standardize") == 0) return 0; /* applied to the rows read */
  return bad(name);
}

/* ============================== reading ================================== */

/* Where a worker finds the recipe's file `key` ("path", "x" or "y"): the
 * coordinator's absolute path when it exists here (a shared file system),
 * else the path as the script gave it (KEY_given, "given" for "path"),
 * relative to the node's directory, where the launcher's `files = {...}`
 * land on another host, else the name the launcher shipped it under
 * (KEY_shipped: an absolute path ships by its last component;
 * data_recipe_shipped). *out is NULL for a key the recipe has not (no
 * labels), the absolute path when nothing exists (its reader says why). */
static int file_of(json_t *rec, const char *key, const char **out) {
  char gk[32], sk[32];
  snprintf(gk, sizeof gk, "%s", strcmp(key, "path") == 0 ? "given" : key);
  if (strcmp(key, "path") != 0) snprintf(gk, sizeof gk, "%s_given", key);
  snprintf(sk, sizeof sk, "%s_shipped", key);
  const char *abs = json_string_value(json_object_get(rec, key));
  const char *given = json_string_value(json_object_get(rec, gk));
  const char *shipped = json_string_value(json_object_get(rec, sk));
  *out = abs;
  if (!abs || webhdfs_is_url(abs) || access(abs, R_OK) == 0) return 0;
  if (given && access(given, R_OK) == 0) return (*out = given), 0;
  if (!shipped) return 0;
  if (access(shipped, R_OK) == 0) return (*out = shipped), 0;
  return err_set(DRV_EIO, "cannot open '%s' (nor '%s', the name it was shipped under): %s", abs,
                 shipped, strerror(errno));
}

/* The categorical columns of a CSV recipe into o (cat has room for
 * DATA__MAX_CAT); false when the recipe's list is malformed. */
#define DATA__MAX_CAT 4096
static bool csv_cat_opts(json_t *rec, int *cat, data_csv_opts *o) {
  json_t *a = json_object_get(rec, "categorical"), *m = json_object_get(rec, "missing");
  size_t n = json_array_size(a);
  if (n > DATA__MAX_CAT) return false;
  for (size_t i = 0; i < n; i++) cat[i] = (int)json_integer_value(json_array_get(a, i));
  o->categorical = n ? cat : NULL;
  o->ncategorical = (int)n;
  o->buckets = (uint64_t)json_integer_value(json_object_get(rec, "buckets"));
  o->has_missing = json_is_number(m);
  o->missing = (float)json_number_value(m);
  return true;
}

/* The CSV reader's options of the recipe, reading the rows in keep
 * (keep_n of them). Returns the class names' array *o points into (the
 * caller frees it; the strings are rec's), NULL when out of memory or
 * malformed. The categorical columns go to cat (DATA__MAX_CAT ints). */
static char **csv_opts(json_t *rec, const uint8_t *keep, int64_t keep_n, int *cat,
                       data_csv_opts *o) {
  json_t *names = json_object_get(rec, "names");
  int64_t nn = (int64_t)json_array_size(names);
  char **nv = calloc((size_t)nn + 1, sizeof *nv);
  for (int64_t i = 0; nv && i < nn; i++) nv[i] = (char *)json_string_value(json_array_get(names, i));
  const char *delim = json_string_value(json_object_get(rec, "delimiter"));
  int64_t label = json_integer_value(json_object_get(rec, "label"));
  *o = (data_csv_opts){.label = (int)label, .header = json_is_true(json_object_get(rec, "header")),
                       .delimiter = delim ? delim[0] : ',', .no_label = label < 0,
                       .classes = (int)json_integer_value(json_object_get(rec, "classes")),
                       .names = nn ? nv : NULL, .nnames = nn, .keep = keep, .keep_n = keep_n};
  if (nv && !csv_cat_opts(rec, cat, o)) {
    free(nv);
    return NULL;
  }
  return nv;
}

static data_libsvm_opts svm_opts(json_t *rec, const uint8_t *keep, int64_t keep_n) {
  return (data_libsvm_opts){.features = json_integer_value(json_object_get(rec, "features")),
                            .zero_based = json_is_true(json_object_get(rec, "zero_based")),
                            .keep = keep, .keep_n = keep_n,
                            .sparse = json_is_true(json_object_get(rec, "sparse"))};
}

/* A .npy's rows listed in r: the mapping itself when r is the whole file
 * in order, else a copy of those rows. */
static int npy_rows(json_t *rec, const rows *r, int64_t n, dataset **out) {
  const char *xp, *yp;
  dataset *base = NULL;
  int rc = file_of(rec, "x", &xp);
  if (rc == 0) rc = file_of(rec, "y", &yp);
  if (rc == 0 && !xp) rc = bad("no path");
  if (rc == 0 && webhdfs_is_url(xp)) return data__npy_rows(xp, yp, r->v, r->n, n, out);
  if (rc == 0) rc = data__read_npy(xp, yp, false, &base);
  if (rc == 0 && base->n != n)
    rc = err_set(DRV_EINVAL, "%s: has %lld rows now, %lld when it was first read: a worker "
                 "must see the same file", base->source, (long long)base->n, (long long)n);
  bool identity = rc == 0 && r->n == n;
  for (int64_t i = 0; identity && i < n; i++) identity = r->v[i] == i;
  if (identity) { /* the whole file in order: keep the mapping, copy nothing */
    *out = base;
    free(base->recipe);
    base->recipe = NULL;
    return 0;
  }
  if (rc == 0) rc = data_subset(base, r->v, r->n, out);
  data_free(base);
  return rc;
}

static int idx_rows(json_t *rec, const rows *r, dataset **out) {
  const char *xp, *yp;
  int rc = file_of(rec, "x", &xp);
  if (rc == 0) rc = file_of(rec, "y", &yp);
  if (rc == 0 && !xp) rc = bad("no path");
  return rc < 0 ? rc : data__idx_rows(rec, xp, yp, r->v, r->n, out);
}

/* A CSV or libsvm file's rows listed in r, in r's order, read with only
 * those parsed. */
static int text_rows(json_t *rec, const char *fmt, const rows *r, int64_t n, dataset **out) {
  const char *path;
  int rc = file_of(rec, "path", &path);
  if (rc < 0) return rc;
  if (!path) return bad("no path");
  dataset *base = NULL;
  uint8_t *keep = calloc((size_t)n, 1);
  int64_t *rank = malloc((size_t)n * sizeof *rank);
  if (!keep || !rank) {
    free(keep);
    free(rank);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  for (int64_t j = 0; j < r->n; j++) keep[r->v[j]] = 1;
  if (strcmp(fmt, "csv") == 0) {
    data_csv_opts o;
    int *cat = malloc(DATA__MAX_CAT * sizeof *cat);
    char **nv = cat ? csv_opts(rec, keep, n, cat, &o) : NULL;
    rc = nv ? data_read_csv(path, &o, &base) : err_set(DRV_ENOMEM, "out of memory");
    free(nv);
    free(cat);
  } else {
    data_libsvm_opts o = svm_opts(rec, keep, n);
    rc = data_read_libsvm(path, &o, &base);
  }
  if (rc == 0) { /* base holds the kept rows in file order */
    for (int64_t i = 0, k = 0; i < n; i++) rank[i] = keep[i] ? k++ : -1;
    int64_t *at = malloc((size_t)r->n * sizeof *at);
    if (!at) rc = err_set(DRV_ENOMEM, "out of memory");
    for (int64_t j = 0; at && j < r->n; j++) at[j] = rank[r->v[j]];
    if (at) rc = data_subset(base, at, r->n, out);
    free(at);
  }
  data_free(base);
  free(keep);
  free(rank);
  return rc;
}

/* The file's rows listed in r, in r's order, reading only those. */
static int read_rows(json_t *rec, const rows *r, int64_t n, dataset **out) {
  const char *fmt = json_string_value(json_object_get(rec, "format"));
  *out = NULL;
  if (!fmt) return bad("no format");
  if (strcmp(fmt, "npy") == 0) return npy_rows(rec, r, n, out);
  if (strcmp(fmt, "idx") == 0) return idx_rows(rec, r, out);
  if (strcmp(fmt, "csv") == 0 || strcmp(fmt, "libsvm") == 0) return text_rows(rec, fmt, r, n, out);
  return bad(fmt);
}

/* The recipe's standardisations, in order, on d (replaced). */
static int standardize_all(json_t *ops, dataset **d) {
  size_t i;
  json_t *op;
  json_array_foreach(ops, i, op) {
    const char *name = json_string_value(json_object_get(op, "op"));
    if (!name || strcmp(name, "standardize") != 0) continue;
    json_t *m = json_object_get(op, "mean"), *s = json_object_get(op, "std");
    int64_t f = (int64_t)json_array_size(m);
    if (f != (int64_t)json_array_size(s) || f != (*d)->features) return bad("standardize");
    data_stats st = {f, malloc((size_t)f * sizeof(float)), malloc((size_t)f * sizeof(float))};
    int rc = st.mean && st.std ? 0 : err_set(DRV_ENOMEM, "out of memory");
    for (int64_t j = 0; rc == 0 && j < f; j++) {
      st.mean[j] = (float)json_number_value(json_array_get(m, (size_t)j));
      st.std[j] = (float)json_number_value(json_array_get(s, (size_t)j));
    }
    dataset *out = NULL;
    if (rc == 0) rc = data_standardize(*d, &st, &out, NULL);
    free(st.mean);
    free(st.std);
    if (rc < 0) return rc;
    data_free(*d);
    *d = out;
  }
  return 0;
}

/* The recipe's rows (its operations applied to 0..n-1) into r; *n the
 * file's rows. */
static int recipe_rows(json_t *rec, rows *r, int64_t *n) {
  json_t *ops = json_object_get(rec, "ops");
  *n = json_integer_value(json_object_get(rec, "n"));
  r->v = NULL;
  r->n = 0;
  if (!(*n > 0 && *n <= DATA__MAX_ELEMS && json_is_array(ops))) return bad("no rows");
  if (!(r->v = malloc((size_t)*n * sizeof *r->v))) return err_set(DRV_ENOMEM, "out of memory");
  r->n = *n;
  for (int64_t i = 0; i < *n; i++) r->v[i] = i;
  size_t i;
  json_t *op;
  int rc = 0;
  json_array_foreach(ops, i, op) if (rc == 0) rc = apply_op(r, op);
  return rc;
}

/* With DROVER_HDFS_TRACE set, what reading a shard fetched from HDFS, on
 * stderr (a node's log): the tests' evidence that a worker read ranges. */
static void trace_hdfs(json_t *rec, int64_t shard, int64_t nshards, uint64_t o0, uint64_t b0) {
  const char *p = json_string_value(json_object_get(rec, "path"));
  if (!p) p = json_string_value(json_object_get(rec, "x"));
  if (!getenv("DROVER_HDFS_TRACE") || !webhdfs_is_url(p)) return;
  uint64_t o, b;
  data_file_hdfs_counts(&o, &b);
  fprintf(stderr, "hdfs-trace: shard %lld of %lld of %s: %llu OPEN requests, %llu bytes\n",
          (long long)shard, (long long)nshards, p, (unsigned long long)(o - o0),
          (unsigned long long)(b - b0));
}

int data_from_recipe(const char *recipe, size_t len, int64_t shard, int64_t nshards,
                     dataset **out) {
  *out = NULL;
  json_error_t jerr;
  json_t *rec = json_loadb(recipe, len, 0, &jerr);
  if (!rec) return bad(jerr.text);
  json_t *ops = json_object_get(rec, "ops");
  int64_t n;
  rows r = {NULL, 0};
  int rc = recipe_rows(rec, &r, &n);
  if (rc == 0) rc = op_shard(&r, shard, nshards);
  uint64_t o0, b0;
  data_file_hdfs_counts(&o0, &b0);
  if (rc == 0) rc = read_rows(rec, &r, n, out);
  if (rc == 0) rc = standardize_all(ops, out);
  if (rc == 0) trace_hdfs(rec, shard, nshards, o0, b0);
  if (rc < 0) {
    data_free(*out);
    *out = NULL;
  }
  free(r.v);
  json_decref(rec);
  return rc;
}

/* ============================== statistics =============================== */

/* Shifted sums of the rows streamed, after the recipe's earlier
 * standardisations (in order). */
typedef struct stat_acc {
  int64_t f, n;
  double *k, *s1, *s2; /* k: the first row, the shift */
  int64_t nstd;
  float **mean, **std; /* [nstd][f] */
  float *tmp;          /* [f] */
} stat_acc;

static int acc_row(void *ud, const float *x, int64_t f, float y, const data__ids *ids) {
  (void)ids; /* standardize sees the dense columns only */
  stat_acc *a = ud;
  (void)y;
  if (f != a->f)
    return err_set(DRV_ESHAPE, "standardize: a row of %lld features, the dataset has %lld",
                   (long long)f, (long long)a->f);
  const float *v = x;
  if (a->nstd) {
    memcpy(a->tmp, x, (size_t)f * sizeof *x);
    for (int64_t s = 0; s < a->nstd; s++)
      for (int64_t j = 0; j < f; j++) a->tmp[j] = (a->tmp[j] - a->mean[s][j]) / a->std[s][j];
    v = a->tmp;
  }
  if (a->n++ == 0)
    for (int64_t j = 0; j < f; j++) a->k[j] = v[j];
  for (int64_t j = 0; j < f; j++) {
    double d = (double)v[j] - a->k[j];
    a->s1[j] += d;
    a->s2[j] += d * d;
  }
  return 0;
}

static void acc_free(stat_acc *a) {
  for (int64_t s = 0; s < a->nstd; s++) free(a->mean[s]), free(a->std[s]);
  free(a->mean);
  free(a->std);
  free(a->k);
  free(a->s1);
  free(a->s2);
  free(a->tmp);
}

/* The accumulator for f features and the recipe's standardize ops. */
static int acc_init(stat_acc *a, int64_t f, json_t *ops) {
  memset(a, 0, sizeof *a);
  a->f = f;
  size_t n = json_array_size(ops), i;
  a->k = calloc((size_t)f, sizeof *a->k);
  a->s1 = calloc((size_t)f, sizeof *a->s1);
  a->s2 = calloc((size_t)f, sizeof *a->s2);
  a->tmp = calloc((size_t)f, sizeof *a->tmp);
  a->mean = calloc(n + 1, sizeof *a->mean);
  a->std = calloc(n + 1, sizeof *a->std);
  if (!a->k || !a->s1 || !a->s2 || !a->tmp || !a->mean || !a->std)
    return err_set(DRV_ENOMEM, "standardize: out of memory");
  json_t *op;
  json_array_foreach(ops, i, op) {
    const char *name = json_string_value(json_object_get(op, "op"));
    if (!name || strcmp(name, "standardize") != 0) continue;
    json_t *m = json_object_get(op, "mean"), *s = json_object_get(op, "std");
    if ((int64_t)json_array_size(m) != f || (int64_t)json_array_size(s) != f) return bad("standardize");
    int64_t k = a->nstd++;
    a->mean[k] = malloc((size_t)f * sizeof(float));
    a->std[k] = malloc((size_t)f * sizeof(float));
    if (!a->mean[k] || !a->std[k]) return err_set(DRV_ENOMEM, "standardize: out of memory");
    for (int64_t j = 0; j < f; j++) {
      a->mean[k][j] = (float)json_number_value(json_array_get(m, (size_t)j));
      a->std[k][j] = (float)json_number_value(json_array_get(s, (size_t)j));
    }
  }
  return 0;
}

/* The kept rows of a .npy, in file order, from its mapping; the pages
 * passed are dropped (MADV_DONTNEED: a private mapping never written
 * reads them again from the file), so the file never sits in our RSS. */
static int npy_each(json_t *rec, const uint8_t *keep, int64_t n, stat_acc *a) {
  dataset *d = NULL;
  const char *xp;
  int rc = file_of(rec, "x", &xp);
  if (rc == 0) rc = xp ? data__read_npy(xp, NULL, false, &d) : bad("no path");
  if (rc < 0) return rc;
  if (d->n != n || d->features != a->f) {
    rc = err_set(DRV_EINVAL, "%s: has %lld x %lld values now, %lld x %lld when it was first read",
                 d->source, (long long)d->n, (long long)d->features, (long long)n, (long long)a->f);
    data_free(d);
    return rc;
  }
  const float *x = tensor_data(d->x);
  bool mapped = d->x->storage->mapped > 0;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), done = (uintptr_t)x & ~(page - 1);
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    if (keep[i]) rc = acc_row(a, x + i * a->f, a->f, 0, NULL);
    uintptr_t upto = (uintptr_t)(x + i * a->f) & ~(page - 1);
    if (mapped && upto - done >= ((uintptr_t)1 << 22)) { /* every 4 MiB */
      madvise((void *)done, upto - done, MADV_DONTNEED);
      done = upto;
    }
    if (i % 65536 == 0 && err_interrupted()) rc = data__interrupted(d->source);
  }
  data_free(d);
  return rc;
}

/* acc_row for each row of the file with keep[i], in file order. */
static int each_row(json_t *rec, const char *fmt, const uint8_t *keep, int64_t n, stat_acc *a) {
  if (strcmp(fmt, "npy") == 0) return npy_each(rec, keep, n, a);
  const char *path;
  int rc = file_of(rec, strcmp(fmt, "idx") == 0 ? "x" : "path", &path);
  if (rc == 0 && !path) rc = bad("no path");
  if (rc < 0) return rc;
  if (strcmp(fmt, "idx") == 0) return data__idx_each_x(rec, path, keep, acc_row, a);
  if (strcmp(fmt, "libsvm") == 0) {
    data_libsvm_opts o = svm_opts(rec, keep, n);
    return data__svm_stream(path, &o, acc_row, a, NULL);
  }
  if (strcmp(fmt, "csv") != 0) return bad(fmt);
  data_csv_opts o;
  int *cat = malloc(DATA__MAX_CAT * sizeof *cat);
  char **nv = cat ? csv_opts(rec, keep, n, cat, &o) : NULL;
  rc = nv ? data__csv_stream(path, &o, acc_row, a, NULL) : err_set(DRV_ENOMEM, "out of memory");
  free(nv);
  free(cat);
  return rc;
}

int data__recipe_stats(const char *recipe, int64_t f, data_stats **out) {
  *out = NULL;
  json_error_t jerr;
  json_t *rec = json_loads(recipe, 0, &jerr);
  if (!rec) return bad(jerr.text);
  const char *fmt = json_string_value(json_object_get(rec, "format"));
  int64_t n = 0;
  rows r = {NULL, 0};
  stat_acc a;
  memset(&a, 0, sizeof a);
  uint8_t *keep = NULL;
  int rc = recipe_rows(rec, &r, &n);
  if (rc == 0 && !fmt) rc = bad("no format");
  if (rc == 0 && (keep = calloc((size_t)n, 1)) == NULL) rc = err_set(DRV_ENOMEM, "out of memory");
  for (int64_t j = 0; rc == 0 && j < r.n; j++) keep[r.v[j]] = 1;
  if (rc == 0 && f <= 0) rc = bad("no feature count");
  if (rc == 0) rc = acc_init(&a, f, json_object_get(rec, "ops"));
  if (rc == 0) rc = each_row(rec, fmt, keep, n, &a);
  if (rc == 0 && a.n != r.n)
    rc = err_set(DRV_EINVAL, "standardize: %lld rows read, %lld expected", (long long)a.n,
                 (long long)r.n);
  if (rc == 0) rc = data__stats_from_sums(f, a.n, a.k, a.s1, a.s2, out);
  acc_free(&a);
  free(keep);
  free(r.v);
  json_decref(rec);
  return rc;
}
