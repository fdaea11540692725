/* nn_tabfile.c - a model's sparse tables in safetensors files (see
 * nn_tabfile.h): the held rows gathered out of the table's arenas into
 * contiguous copies to write, and read back by id.
 */
#include "numeric/nn_tabfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "numeric/nn_sparse.h"

/* Entries per table: ids and rows; the state's ids, slots and counts. */
static int per_table(const sptable *t, bool state) { return state ? 2 + sptable_nslots(t) : 2; }

static void entry_name(char *buf, size_t n, bool state, const char *table, const char *what) {
  snprintf(buf, n, "%s%s.%s", state ? "optim." : "", table, what);
}

/* A new owned buffer of n bytes (at least 1), or NULL. */
static void *own(nn_tabfile *t, size_t n) {
  void *p = malloc(n ? n : 1);
  if (p) t->bufs[t->nbufs++] = p;
  return p;
}

static void add_entry(nn_tabfile *out, const char *name, int ndim, int64_t h, int64_t dim,
                      const float *f, const int64_t *i) {
  size_t j = out->n++;
  snprintf(out->names[j], sizeof out->names[j], "%s", name);
  out->shapes[j][0] = h;
  out->shapes[j][1] = dim;
  out->e[j] = (safetensors_entry){out->names[j], ndim, out->shapes[j], f, i};
}

/* One table's entries: copies of its ids, rows or slots, and counts. */
static int table_entries(const nn_table *tb, bool state, nn_tabfile *out) {
  const sptable *t = tb->value;
  int64_t h = sptable_held(t), d = sptable_dim(t);
  size_t rows = (size_t)h * (size_t)d * sizeof(float); /* held rows exist in memory */
  char name[96];
  int64_t *ids = own(out, (size_t)h * sizeof *ids);
  if (!ids) return DRV_ENOMEM;
  sptable_copy_ids(t, ids);
  entry_name(name, sizeof name, state, tb->name, "ids");
  add_entry(out, name, 1, h, 0, NULL, ids);
  for (int s = state ? 0 : -1; s < (state ? sptable_nslots(t) : 0); s++) {
    float *v = own(out, rows);
    if (!v) return DRV_ENOMEM;
    sptable_copy_rows(t, s, v);
    char what[16];
    snprintf(what, sizeof what, "%d", s);
    entry_name(name, sizeof name, state, tb->name, s < 0 ? "rows" : what);
    add_entry(out, name, 2, h, d, v, NULL);
  }
  if (!state) return 0;
  int64_t *counts = own(out, (size_t)h * sizeof *counts);
  if (!counts) return DRV_ENOMEM;
  sptable_copy_counts(t, counts);
  entry_name(name, sizeof name, state, tb->name, "count");
  add_entry(out, name, 1, h, 0, NULL, counts);
  return 0;
}

int nn_tabfile_entries(nn_module *m, bool state, nn_tabfile *out) {
  memset(out, 0, sizeof *out);
  nn_table_list tl = {0};
  int rc = nn_collect_tables(m, true, &tl);
  size_t n = 0;
  for (int i = 0; rc == 0 && i < tl.n; i++) n += (size_t)per_table(tl.items[i].value, state);
  if (rc == 0 && n) {
    out->e = calloc(n, sizeof *out->e);
    out->bufs = calloc(n, sizeof *out->bufs);
    out->names = calloc(n, sizeof *out->names);
    out->shapes = calloc(n, sizeof *out->shapes);
    if (!out->e || !out->bufs || !out->names || !out->shapes) rc = DRV_ENOMEM;
  }
  for (int i = 0; rc == 0 && i < tl.n; i++) rc = table_entries(&tl.items[i], state, out);
  nn_table_list_free(&tl);
  if (rc == DRV_ENOMEM) err_set(rc, "out of memory gathering a sparse table's rows to write");
  if (rc < 0) nn_tabfile_free(out);
  return rc;
}

/* Every row of a table into a new [rows, dim] copy. */
static int dense_entry(const nn_table *tb, size_t max_bytes, nn_tabfile *out) {
  const sptable *t = tb->value;
  uint64_t rows = sptable_rows(t);
  size_t d = (size_t)sptable_dim(t), bytes;
  if (rows > SIZE_MAX / d / sizeof(float) || (bytes = (size_t)rows * d * sizeof(float)) > max_bytes)
    return err_set(DRV_ERANGE, "table '%s' is %llu rows of %zu: %.1f GiB dense, more than the "
                   "%.1f GiB a dense export writes (its rows by id are in the checkpoint's "
                   "model.safetensors: %s.ids, %s.rows)", tb->name, (unsigned long long)rows, d,
                   (double)rows * (double)d * 4.0 / 1073741824.0, (double)max_bytes / 1073741824.0,
                   tb->name, tb->name);
  float *v = own(out, bytes);
  if (!v) return err_set(DRV_ENOMEM, "out of memory for table '%s' dense (%zu bytes)", tb->name, bytes);
  for (uint64_t id = 0; id < rows; id++) {
    int64_t k = sptable_find(t, id);
    if (k >= 0) memcpy(v + id * d, sptable_value(t, k), d * sizeof *v);
    else sptable_init_row(t, id, v + id * d);
  }
  add_entry(out, tb->name, 2, (int64_t)rows, (int64_t)d, v, NULL);
  return 0;
}

int nn_tabfile_dense(nn_module *m, size_t max_bytes, nn_tabfile *out) {
  memset(out, 0, sizeof *out);
  nn_table_list tl = {0};
  int rc = nn_collect_tables(m, true, &tl);
  size_t n = rc == 0 ? (size_t)tl.n : 0;
  if (n) {
    out->e = calloc(n, sizeof *out->e);
    out->bufs = calloc(n, sizeof *out->bufs);
    out->names = calloc(n, sizeof *out->names);
    out->shapes = calloc(n, sizeof *out->shapes);
    if (!out->e || !out->bufs || !out->names || !out->shapes)
      rc = err_set(DRV_ENOMEM, "out of memory");
  }
  for (int i = 0; rc == 0 && i < tl.n; i++) rc = dense_entry(&tl.items[i], max_bytes, out);
  nn_table_list_free(&tl);
  if (rc < 0) nn_tabfile_free(out);
  return rc;
}

void nn_tabfile_free(nn_tabfile *t) {
  for (size_t i = 0; i < t->nbufs; i++) free(t->bufs[i]);
  free(t->bufs);
  free(t->e);
  free(t->names);
  free(t->shapes);
  memset(t, 0, sizeof *t);
}

bool nn_tabfile_owns(nn_module *m, bool state, const char *name) {
  nn_table_list tl = {0};
  bool owns = false;
  if (nn_collect_tables(m, true, &tl) < 0) return false;
  for (int i = 0; !owns && i < tl.n; i++) {
    const char *p = state ? (strncmp(name, "optim.", 6) == 0 ? name + 6 : NULL) : name;
    size_t k = strlen(tl.items[i].name);
    owns = p && strncmp(p, tl.items[i].name, k) == 0 &&
           ((!state && p[k] == '\0') ||
            (p[k] == '.' && (state || strcmp(p + k + 1, "ids") == 0 || strcmp(p + k + 1, "rows") == 0)));
  }
  nn_table_list_free(&tl);
  return owns;
}

/* ---- reading ------------------------------------------------------------------ */

static const safetensors_tensor *need(const safetensors_file *f, bool state, const char *table,
                                      const char *what, const char *path) {
  char name[96];
  entry_name(name, sizeof name, state, table, what);
  const safetensors_tensor *t = safetensors_find(f, name);
  if (!t) err_set(DRV_EINVAL, "cannot load '%s': it has no tensor '%s' (a sparse table's)", path, name);
  return t;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The ids: I64 [h], each in [0, rows), none twice. */
static int check_ids(const safetensors_tensor *t, const sptable *tab, const char *path) {
  if (!(t->i64 || t->numel == 0) || t->ndim != 1) /* an empty one keeps no dtype */
    return err_set(DRV_EINVAL, "cannot load '%s': '%s' must be I64 of one dimension", path, t->name);
  int64_t h = t->shape[0];
  int64_t *s = malloc((size_t)(h ? h : 1) * sizeof *s);
  if (!s) return err_set(DRV_ENOMEM, "cannot load '%s': out of memory", path);
  memcpy(s, t->i64, (size_t)h * sizeof *s);
  qsort(s, (size_t)h, sizeof *s, cmp_i64);
  int rc = 0;
  for (int64_t k = 0; rc == 0 && k < h; k++)
    if (s[k] < 0 || (uint64_t)s[k] >= sptable_rows(tab) || (k && s[k] == s[k - 1]))
      rc = err_set(DRV_EINVAL, "cannot load '%s': '%s' holds id %lld, %s", path, t->name,
                   (long long)s[k], k && s[k] == s[k - 1] ? "twice" : "outside the table");
  free(s);
  return rc;
}

static int check_rows(const safetensors_tensor *t, int64_t h, int64_t dim, const char *path) {
  if (t->i64 || t->ndim != 2 || t->shape[0] != h || t->shape[1] != dim)
    return err_set(DRV_ESHAPE, "cannot load '%s': '%s' must be F32 [%lld, %lld] (the rows of "
                   "its ids)", path, t->name, (long long)h, (long long)dim);
  return 0;
}

/* The export's form: NAME F32 [rows, dim], every row (and no NAME.ids). */
static const safetensors_tensor *dense_of(const safetensors_file *f, const nn_table *tb) {
  char ids[96];
  entry_name(ids, sizeof ids, false, tb->name, "ids");
  const safetensors_tensor *t = safetensors_find(f, tb->name);
  return t && !safetensors_find(f, ids) && !t->i64 && t->ndim == 2 && (uint64_t)t->shape[0] == sptable_rows(tb->value) &&
                 t->shape[1] == sptable_dim(tb->value) ? t : NULL;
}

static int check_table(const nn_table *tb, bool state, const safetensors_file *f, const char *path) {
  const sptable *tab = tb->value;
  if (!state && dense_of(f, tb)) return 0;
  const safetensors_tensor *ids = need(f, state, tb->name, "ids", path), *t;
  if (!ids) return DRV_EINVAL;
  int rc = check_ids(ids, tab, path);
  int64_t h = ids->shape[0], d = sptable_dim(tab);
  if (rc == 0 && !state) rc = (t = need(f, false, tb->name, "rows", path)) ? check_rows(t, h, d, path) : DRV_EINVAL;
  for (int s = 0; rc == 0 && state && s < sptable_nslots(tab); s++) {
    char what[16];
    snprintf(what, sizeof what, "%d", s);
    rc = (t = need(f, true, tb->name, what, path)) ? check_rows(t, h, d, path) : DRV_EINVAL;
  }
  if (rc == 0 && state) {
    t = need(f, true, tb->name, "count", path);
    if (!t) return DRV_EINVAL;
    if (!t->i64 || t->ndim != 1 || t->shape[0] != h)
      return err_set(DRV_ESHAPE, "cannot load '%s': '%s' must be I64 [%lld]", path, t->name,
                     (long long)h);
  }
  return rc;
}

int nn_tabfile_check(nn_module *m, bool state, const safetensors_file *f, const char *path) {
  nn_table_list tl = {0};
  int rc = nn_collect_tables(m, true, &tl);
  for (int i = 0; rc == 0 && i < tl.n; i++) rc = check_table(&tl.items[i], state, f, path);
  nn_table_list_free(&tl);
  return rc;
}

static int load_table(const nn_table *tb, bool state, const safetensors_file *f, const char *path) {
  sptable *tab = tb->value;
  size_t d = (size_t)sptable_dim(tab);
  const safetensors_tensor *dense = state ? NULL : dense_of(f, tb);
  if (dense) {
    sptable_clear(tab);
    for (uint64_t id = 0; id < sptable_rows(tab); id++) {
      int64_t at = sptable_get(tab, id);
      if (at < 0) return (int)at;
      memcpy(sptable_value(tab, at), dense->data + id * d, d * sizeof(float));
    }
    return 0;
  }
  const safetensors_tensor *ids = need(f, state, tb->name, "ids", path);
  int64_t h = ids->shape[0];
  if (!state) {
    const float *rows = need(f, false, tb->name, "rows", path)->data;
    sptable_clear(tab);
    for (int64_t k = 0; k < h; k++) {
      int64_t at = sptable_get(tab, (uint64_t)ids->i64[k]);
      if (at < 0) return (int)at;
      memcpy(sptable_value(tab, at), rows + (size_t)k * d, d * sizeof *rows);
    }
    return 0;
  }
  const int64_t *counts = need(f, true, tb->name, "count", path)->i64;
  for (int64_t k = 0; k < h; k++) {
    int64_t at = sptable_find(tab, (uint64_t)ids->i64[k]);
    if (at < 0)
      return err_set(DRV_EINVAL, "cannot load '%s': optimizer state for row %lld of '%s', "
                     "which the model file does not hold", path, (long long)ids->i64[k], tb->name);
    for (int s = 0; s < sptable_nslots(tab); s++) {
      char what[16];
      snprintf(what, sizeof what, "%d", s);
      memcpy(sptable_slot(tab, at, s), need(f, true, tb->name, what, path)->data + (size_t)k * d,
             d * sizeof(float));
    }
    *sptable_count(tab, at) = counts[k];
  }
  return 0;
}

int nn_tabfile_load(nn_module *m, bool state, const safetensors_file *f, const char *path) {
  nn_table_list tl = {0};
  int rc = nn_collect_tables(m, true, &tl);
  for (int i = 0; rc == 0 && i < tl.n; i++) rc = load_table(&tl.items[i], state, f, path);
  nn_table_list_free(&tl);
  return rc;
}

/* One table's rows of a ps file, added to the table. */
static int merge_table(const nn_table *tb, const safetensors_file *f, const char *path) {
  char name[96];
  entry_name(name, sizeof name, false, tb->name, "ids");
  const safetensors_tensor *ids = safetensors_find(f, name), *rows;
  if (!ids) return 0;
  int rc = check_ids(ids, tb->value, path);
  int64_t h = ids->shape[0], d = sptable_dim(tb->value);
  if (rc == 0) rc = (rows = need(f, false, tb->name, "rows", path)) ? check_rows(rows, h, d, path)
                                                                     : DRV_EINVAL;
  for (int64_t k = 0; k < h && rc == 0; k++) {
    int64_t at = sptable_put(tb->value, (uint64_t)ids->i64[k], rows->data + (size_t)k * (size_t)d);
    if (at < 0) rc = (int)at;
  }
  return rc;
}

int nn_tabfile_merge(nn_module *m, const safetensors_file *f, const char *path) {
  nn_table_list tl = {0};
  int rc = nn_collect_tables(m, true, &tl);
  for (int i = 0; rc == 0 && i < tl.n; i++) rc = merge_table(&tl.items[i], f, path);
  nn_table_list_free(&tl);
  return rc;
}
