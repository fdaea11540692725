/* ps_ckpt_sparse.c - the tables of a ps's checkpoint file (see
 * ps_ckpt_sparse.h): copies of the held rows in the table's index order,
 * and their way back through ps_sparse_load. */
#include "cluster/ps/ps_ckpt_sparse.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

static const char *table_name(uint32_t table, const uint32_t *vars, char *const *names,
                              uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (vars[i] == (PS_SPARSE_VAR | table)) return names[i];
  return NULL;
}

static char *format(const char *fmt, const char *name, const char *what) {
  size_t len = strlen(fmt) + strlen(name) + strlen(what) + 1;
  char *s = malloc(len);
  if (s) snprintf(s, len, fmt, name, what);
  return s;
}

/* Appends entry `name` (owned from here, NULL: out of memory) over data
 * (owned from here). */
static int add(ps_spsnap *p, char *name, int64_t rows, int64_t dim, float *f, int64_t *i) {
  size_t j = p->n;
  p->shapes[j][0] = rows;
  p->shapes[j][1] = dim;
  p->e[j] = (safetensors_entry){name, i ? 1 : 2, p->shapes[j], f, i};
  p->n++;
  if (!name || (!f && !i)) return err_set(DRV_ENOMEM, "out of memory for a table's checkpoint");
  return 0;
}

/* Table t's four kinds of entries and its shard's metadata. */
static int take_table(ps_spsnap *p, const sptable *t, const char *name, uint32_t shard,
                      uint32_t shards) {
  int64_t h = sptable_held(t), d = sptable_dim(t);
  size_t rows = ((size_t)h * (size_t)d + 1) * sizeof(float);
  int64_t *ids = malloc(((size_t)h + 1) * sizeof *ids);
  if (ids) sptable_copy_ids(t, ids);
  int rc = add(p, format("%s%s", name, ".ids"), h, 0, NULL, ids);
  float *v = rc == 0 ? malloc(rows) : NULL;
  if (v) sptable_copy_rows(t, -1, v);
  if (rc == 0) rc = add(p, format("%s%s", name, ".rows"), h, d, v, NULL);
  for (int s = 0; s < sptable_nslots(t) && rc == 0; s++) {
    char what[16];
    snprintf(what, sizeof what, ".%d", s);
    if ((v = malloc(rows))) sptable_copy_rows(t, s, v);
    rc = add(p, format("optim.%s%s", name, what), h, d, v, NULL);
  }
  int64_t *counts = rc == 0 ? malloc(((size_t)h + 1) * sizeof *counts) : NULL;
  if (counts) sptable_copy_counts(t, counts);
  if (rc == 0) rc = add(p, format("optim.%s%s", name, ".count"), h, 0, NULL, counts);
  char val[32];
  snprintf(val, sizeof val, "%u/%u", shard, shards);
  if (rc == 0) {
    p->meta[p->nmeta++] = format("%s%s", name, ".shard");
    p->meta[p->nmeta++] = strdup(val);
    if (!p->meta[p->nmeta - 2] || !p->meta[p->nmeta - 1]) rc = err_set(DRV_ENOMEM, "out of memory");
  }
  return rc;
}

/* Room for every table's entries: 4 + slots each, 2 metadata strings. */
static int reserve(ps_spsnap *p, const ps_sparse *s) {
  size_t cap = 0, tables = 0;
  for (uint32_t i = 0; s && i < PS_SPARSE_MAX_TABLES; i++) {
    const sptable *t = ps_sparse_table(s, i);
    if (t) cap += 3 + (size_t)sptable_nslots(t), tables++;
  }
  p->e = calloc(cap + 1, sizeof *p->e);
  p->shapes = calloc(cap + 1, sizeof *p->shapes);
  p->meta = calloc(2 * tables + 1, sizeof *p->meta);
  p->cap = cap;
  if (!p->e || !p->shapes || !p->meta) return err_set(DRV_ENOMEM, "out of memory");
  return 0;
}

int ps_spsnap_take(const ps_sparse *s, const uint32_t *vars, char *const *names, uint32_t n,
                   ps_spsnap *out) {
  memset(out, 0, sizeof *out);
  int rc = reserve(out, s);
  for (uint32_t i = 0; s && i < PS_SPARSE_MAX_TABLES && rc == 0; i++) {
    const sptable *t = ps_sparse_table(s, i);
    if (!t) continue;
    const char *name = table_name(i, vars, names, n);
    uint32_t shard, shards;
    ps_sparse_shard(s, i, &shard, &shards);
    rc = name ? take_table(out, t, name, shard, shards)
              : err_set(DRV_EINVAL, "CHECKPOINT: no name for sparse table %u", i);
  }
  return rc;
}

void ps_spsnap_free(ps_spsnap *p) {
  for (size_t i = 0; i < p->n; i++) {
    free((void *)p->e[i].name);
    free((void *)p->e[i].data), free((void *)p->e[i].i64);
  }
  for (size_t i = 0; i < p->nmeta; i++) free(p->meta[i]);
  free(p->e), free(p->shapes), free(p->meta);
  memset(p, 0, sizeof *p);
}

/* ---- restore ------------------------------------------------------------------ */

/* f's tensor `prefix NAME suffix`: I64 [h] (i64) or F32 [h, dim]; h < 0
 * takes the tensor's own length. NULL with a message when it is not so. */
static const safetensors_tensor *need(const safetensors_file *f, const char *fmt, const char *name,
                                      const char *what, int64_t h, int64_t dim) {
  char key[700];
  snprintf(key, sizeof key, fmt, name, what);
  const safetensors_tensor *t = safetensors_find(f, key);
  /* an empty tensor's dtype is not kept (safetensors_read): I64 [0] passes */
  bool i64 = t && (t->i64 || t->numel == 0);
  bool ok = t && (dim ? !t->i64 && t->ndim == 2 && t->shape[1] == dim : i64 && t->ndim == 1) &&
            (h < 0 || t->shape[0] == h);
  if (ok) return t;
  if (!t) err_set(DRV_EINVAL, "RESTORE: the checkpoint has no %s (a sparse table's)", key);
  else if (dim) err_set(DRV_EINVAL, "RESTORE: %s must be F32 [%lld, %lld]", key, (long long)h,
                        (long long)dim);
  else err_set(DRV_EINVAL, "RESTORE: %s must be I64 of one dimension%s", key,
               h < 0 ? "" : ", as long as the ids");
  return NULL;
}

static int restore_table(ps_sparse *s, uint32_t table, const safetensors_file *f, const char *name) {
  const sptable *t = ps_sparse_table(s, table);
  int64_t d = sptable_dim(t);
  const safetensors_tensor *ids = need(f, "%s%s", name, ".ids", -1, 0), *x;
  if (!ids) return DRV_EINVAL;
  int64_t h = ids->shape[0];
  ps_sparse_rows r = {.ids = ids->i64, .n = (size_t)h, .nslots = sptable_nslots(t)};
  if (!(x = need(f, "%s%s", name, ".rows", h, d))) return DRV_EINVAL;
  r.values = x->data;
  for (int j = 0; j < r.nslots; j++) {
    char what[16];
    snprintf(what, sizeof what, ".%d", j);
    if (!(x = need(f, "optim.%s%s", name, what, h, d))) return DRV_EINVAL;
    r.slots[j] = x->data;
  }
  if (!(x = need(f, "optim.%s%s", name, ".count", h, 0))) return DRV_EINVAL;
  r.counts = x->i64;
  return ps_sparse_load(s, table, &r);
}

int ps_spsnap_restore(ps_sparse *s, const safetensors_file *f, const uint32_t *vars,
                      char *const *names, uint32_t n) {
  int rc = 0;
  for (uint32_t i = 0; s && i < PS_SPARSE_MAX_TABLES && rc == 0; i++) {
    if (!ps_sparse_table(s, i)) continue;
    const char *name = table_name(i, vars, names, n);
    rc = name ? restore_table(s, i, f, name)
              : err_set(DRV_EINVAL, "RESTORE: no name for sparse table %u", i);
  }
  return rc;
}
