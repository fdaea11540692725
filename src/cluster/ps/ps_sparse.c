/* ps_sparse.c - a ps's shards of sparse tables: SPARSE_INIT's fields kept
 * per table, requests checked before anything is created, pushes applied
 * by the optimizer's own per-row update (see ps_sparse.h). */
#include "cluster/ps/ps_sparse.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "numeric/optim.h"
#include "numeric/optim_sched.h"
#include "numeric/sptable.h"

typedef struct sp_shard {
  sptable *t; /* NULL: no SPARSE_INIT for this number */
  optim_cfg optim;
  uint32_t shard, shards;
  bool sync;
  double lr_scale; /* a plateau schedule's factor (LR_SCALE); 0 means 1 */
  nn_spgrad acc; /* sync: this step's summed row gradients */
} sp_shard;

struct ps_sparse {
  sp_shard tables[PS_SPARSE_MAX_TABLES];
};

ps_sparse *ps_sparse_new(void) {
  ps_sparse *s = calloc(1, sizeof *s);
  if (!s) err_set(DRV_ENOMEM, "ps: no memory for the sparse tables");
  return s;
}

void ps_sparse_free(ps_sparse *s) {
  if (!s) return;
  for (int i = 0; i < PS_SPARSE_MAX_TABLES; i++) {
    sptable_free(s->tables[i].t);
    nn_spgrad_free(&s->tables[i].acc);
  }
  free(s);
}

static int init_slots(sptable *t, const optim_cfg *c) {
  float init[SPTABLE_MAX_SLOTS] = {0};
  int ns = optim_nslots(c);
  if (ns > SPTABLE_MAX_SLOTS)
    return err_set(DRV_EINVAL, "SPARSE_INIT: %s's %d slots do not fit a sparse table",
                   optim_kind_name(c->kind), ns);
  float *p[SPTABLE_MAX_SLOTS] = {&init[0], &init[1]};
  if (ns) optim_slots_init(c, p, 1);
  return sptable_set_slots(t, ns, init);
}

int ps_sparse_init(ps_sparse *s, const wire_msg_sparse_init *m) {
  if (m->table >= PS_SPARSE_MAX_TABLES)
    return err_set(DRV_EINVAL, "SPARSE_INIT: table %u is past the %d a ps holds", m->table,
                   PS_SPARSE_MAX_TABLES);
  if (m->shards == 0 || m->shard >= m->shards)
    return err_set(DRV_EINVAL, "SPARSE_INIT: shard %u of %u", m->shard, m->shards);
  int rc = optim_cfg_check(&m->optim);
  if (rc < 0) return rc;
  sptable *t = sptable_new(m->rows, m->dim, (float)m->std, m->seed);
  if (!t) /* sptable_new said why */
    return m->rows >= 1 && m->rows <= SPTABLE_MAX_ROWS && m->dim >= 1 && m->dim <= SPTABLE_MAX_DIM
               ? DRV_ENOMEM
               : DRV_EINVAL;
  rc = init_slots(t, &m->optim);
  if (rc < 0) {
    sptable_free(t);
    return rc;
  }
  sp_shard *sh = &s->tables[m->table];
  sptable_free(sh->t);
  nn_spgrad_free(&sh->acc);
  *sh = (sp_shard){.t = t, .optim = m->optim, .shard = m->shard, .shards = m->shards,
                   .sync = m->mode, .acc = {.dim = m->dim}};
  return 0;
}

/* The table of a request (*out) whose ids are well-formed and all this
 * shard's; 0 or the error. */
static int checked(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n,
                   const char *what, sp_shard **out) {
  sp_shard *sh = table < PS_SPARSE_MAX_TABLES ? &s->tables[table] : NULL;
  if (!sh || !sh->t) return err_set(DRV_EINVAL, "%s: this ps holds no table %u", what, table);
  int rc = sptable_check_ids(sptable_rows(sh->t), sptable_dim(sh->t), ids, n, what);
  if (rc < 0) return rc;
  for (size_t i = 0; i < n; i++)
    if (sptable_owner(ids[i], sh->shards) != sh->shard)
      return err_set(DRV_EINVAL, "%s: id %llu of table %u is ps %u's, not this ps's (%u)", what,
                     (unsigned long long)ids[i], table, sptable_owner(ids[i], sh->shards),
                     sh->shard);
  *out = sh;
  return 0;
}

int ps_sparse_pull(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n, float *out) {
  sp_shard *sh;
  int rc = checked(s, table, ids, n, "SPARSE_PULL", &sh);
  if (rc < 0) return rc;
  int64_t dim = sptable_dim(sh->t);
  for (size_t i = 0; i < n; i++) { /* a row not held yet: its initial values, not created */
    int64_t k = sptable_find(sh->t, ids[i]);
    if (k < 0) sptable_init_row(sh->t, ids[i], out + (int64_t)i * dim);
    else memcpy(out + (int64_t)i * dim, sptable_value(sh->t, k), (size_t)dim * sizeof(float));
  }
  return 0;
}

int ps_sparse_put_rows(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n,
                       const float *rows) {
  sp_shard *sh;
  int rc = checked(s, table, ids, n, "SPARSE_LOAD", &sh);
  int64_t dim = rc < 0 ? 0 : sptable_dim(sh->t);
  for (size_t i = 0; i < n && rc == 0; i++) {
    int64_t k = sptable_put(sh->t, ids[i], rows + (int64_t)i * dim);
    if (k < 0) rc = (int)k;
  }
  return rc;
}

/* Sync: adds one push's rows to the step's sums (a row's first gradient
 * is copied, so one worker's update is bit for bit an async one). */
static int accumulate(sp_shard *sh, const uint64_t *ids, size_t n, const float *grads) {
  int64_t dim = sptable_dim(sh->t);
  for (size_t i = 0; i < n; i++) {
    int64_t before = sh->acc.n;
    float *row = nn_spgrad_row(&sh->acc, ids[i]);
    if (!row) return DRV_ENOMEM;
    const float *g = grads + (int64_t)i * dim;
    if (sh->acc.n > before)
      memcpy(row, g, (size_t)dim * sizeof(float));
    else
      for (int64_t j = 0; j < dim; j++) row[j] += g[j];
  }
  return 0;
}

/* The table's optimizer at the rate its schedule gives for `step` (the
 * updates before this one, as a dense shard counts them): *tmp, or the
 * config itself when it has no schedule. */
static const optim_cfg *cfg_at(const sp_shard *sh, uint64_t step, optim_cfg *tmp) {
  if (!optim_sched_active(&sh->optim.sched)) return &sh->optim;
  *tmp = sh->optim;
  tmp->lr = (float)optim_sched_lr(&sh->optim.sched, sh->optim.lr, (int64_t)step,
                                  &(optim_plateau){.scale = sh->lr_scale});
  return tmp;
}

int ps_sparse_set_lr_scale(ps_sparse *s, double scale) {
  int took = 0;
  for (int i = 0; s && i < PS_SPARSE_MAX_TABLES; i++) {
    sp_shard *sh = &s->tables[i];
    if (!sh->t || sh->optim.sched.kind != OSCHED_PLATEAU) continue;
    sh->lr_scale = scale;
    took++;
  }
  return took;
}

int ps_sparse_push(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n,
                   const float *grads, uint64_t step) {
  sp_shard *sh;
  int rc = checked(s, table, ids, n, "SPARSE_PUSH", &sh);
  if (rc < 0) return rc;
  if (sh->sync) return accumulate(sh, ids, n, grads);
  optim_cfg tmp;
  return optim_table_update(cfg_at(sh, step, &tmp), sh->t, ids, grads, (int64_t)n);
}

int ps_sparse_apply_sync(ps_sparse *s, uint32_t pushes, uint64_t step) {
  for (int i = 0; i < PS_SPARSE_MAX_TABLES; i++) {
    sp_shard *sh = &s->tables[i];
    if (!sh->t || !sh->sync || sh->acc.n == 0) continue;
    if (pushes > 1) {
      float scale = 1.0f / (float)pushes;
      for (int64_t k = 0; k < sh->acc.n * sh->acc.dim; k++) sh->acc.rows[k] *= scale;
    }
    optim_cfg tmp;
    int rc = optim_table_update(cfg_at(sh, step, &tmp), sh->t, sh->acc.ids, sh->acc.rows,
                                sh->acc.n);
    nn_spgrad_clear(&sh->acc);
    if (rc < 0) return rc;
  }
  return 0;
}

int64_t ps_sparse_held(const ps_sparse *s, uint32_t table) {
  if (table >= PS_SPARSE_MAX_TABLES || !s->tables[table].t) return -1;
  return sptable_held(s->tables[table].t);
}

int64_t ps_sparse_dim(const ps_sparse *s, uint32_t table) {
  if (table >= PS_SPARSE_MAX_TABLES || !s->tables[table].t) return -1;
  return sptable_dim(s->tables[table].t);
}

const sptable *ps_sparse_table(const ps_sparse *s, uint32_t table) {
  return table < PS_SPARSE_MAX_TABLES ? s->tables[table].t : NULL;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* r's ids: inside the table, this shard's, none twice. */
static int check_load(const sp_shard *sh, uint32_t table, const ps_sparse_rows *r) {
  int64_t *sorted = malloc((r->n + 1) * sizeof *sorted);
  if (!sorted) return err_set(DRV_ENOMEM, "RESTORE: out of memory for %zu ids", r->n);
  if (r->n) memcpy(sorted, r->ids, r->n * sizeof *sorted);
  qsort(sorted, r->n, sizeof *sorted, cmp_i64);
  int rc = 0;
  for (size_t i = 0; i < r->n && rc == 0; i++) {
    int64_t id = sorted[i];
    if (id < 0 || (uint64_t)id >= sptable_rows(sh->t))
      rc = err_set(DRV_ERANGE, "RESTORE: id %lld is outside table %u", (long long)id, table);
    else if (i && sorted[i - 1] == id)
      rc = err_set(DRV_EINVAL, "RESTORE: id %lld of table %u is there twice", (long long)id, table);
    else if (sptable_owner((uint64_t)id, sh->shards) != sh->shard)
      rc = err_set(DRV_EINVAL, "RESTORE: id %lld of table %u is ps %u's, not this ps's (%u)",
                   (long long)id, table, sptable_owner((uint64_t)id, sh->shards), sh->shard);
  }
  free(sorted);
  return rc;
}

int ps_sparse_load(ps_sparse *s, uint32_t table, const ps_sparse_rows *r) {
  sp_shard *sh = table < PS_SPARSE_MAX_TABLES ? &s->tables[table] : NULL;
  if (!sh || !sh->t) return err_set(DRV_EINVAL, "RESTORE: this ps holds no table %u", table);
  if (r->nslots != sptable_nslots(sh->t))
    return err_set(DRV_EINVAL, "RESTORE: table %u has %d optimizer slots, %s keeps %d", table,
                   r->nslots, optim_kind_name(sh->optim.kind), sptable_nslots(sh->t));
  int rc = check_load(sh, table, r);
  if (rc < 0) return rc;
  size_t d = (size_t)sptable_dim(sh->t);
  sptable_clear(sh->t);
  nn_spgrad_clear(&sh->acc);
  for (size_t i = 0; i < r->n; i++) {
    int64_t k = sptable_put(sh->t, (uint64_t)r->ids[i], r->values + i * d);
    if (k < 0) return (int)k;
    for (int j = 0; j < r->nslots; j++)
      memcpy(sptable_slot(sh->t, k, j), r->slots[j] + i * d, d * sizeof(float));
    *sptable_count(sh->t, k) = r->counts[i];
  }
  return 0;
}

void ps_sparse_shard(const ps_sparse *s, uint32_t table, uint32_t *shard, uint32_t *shards) {
  const sp_shard *sh = table < PS_SPARSE_MAX_TABLES ? &s->tables[table] : NULL;
  *shard = sh && sh->t ? sh->shard : 0;
  *shards = sh && sh->t ? sh->shards : 0;
}

int ps_sparse_describe(const ps_sparse *s, uint32_t table, wire_msg_repl_table *out) {
  const sp_shard *sh = table < PS_SPARSE_MAX_TABLES ? &s->tables[table] : NULL;
  if (!sh || !sh->t) return -1;
  *out = (wire_msg_repl_table){.table = table, .rows = sptable_rows(sh->t),
                               .dim = (uint32_t)sptable_dim(sh->t), .std = sptable_std(sh->t),
                               .seed = sptable_seed(sh->t), .shard = sh->shard,
                               .shards = sh->shards, .mode = sh->sync, .optim = sh->optim,
                               .lr_scale = sh->lr_scale, .held = (uint64_t)sptable_held(sh->t),
                               .acc = (uint64_t)sh->acc.n};
  return 0;
}

int ps_sparse_set_table_scale(ps_sparse *s, uint32_t table, double scale) {
  if (table >= PS_SPARSE_MAX_TABLES || !s->tables[table].t) return -1;
  s->tables[table].lr_scale = scale;
  return 0;
}

const nn_spgrad *ps_sparse_acc(const ps_sparse *s, uint32_t table) {
  return table < PS_SPARSE_MAX_TABLES && s->tables[table].t ? &s->tables[table].acc : NULL;
}

int ps_sparse_acc_add(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n,
                      const float *rows) {
  sp_shard *sh;
  int rc = checked(s, table, ids, n, "REPL_ROWS", &sh);
  return rc < 0 ? rc : accumulate(sh, ids, n, rows);
}
