/* ps_sparse.c - a ps's shards of sparse tables: SPARSE_INIT's fields kept
 * per table, requests checked before anything is created, pushes applied
 * by the optimizer's own per-row update (see ps_sparse.h). */
#include "cluster/ps/ps_sparse.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "numeric/optim.h"
#include "numeric/sptable.h"

typedef struct sp_shard {
  sptable *t; /* NULL: no SPARSE_INIT for this number */
  optim_cfg optim;
  uint32_t shard, shards;
  bool sync;
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
  for (int i = 0; i < PS_SPARSE_MAX_TABLES; i++) sptable_free(s->tables[i].t);
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
  *sh = (sp_shard){.t = t, .optim = m->optim, .shard = m->shard, .shards = m->shards,
                   .sync = m->mode};
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
  for (size_t i = 0; i < n; i++) {
    int64_t k = sptable_get(sh->t, ids[i]);
    if (k < 0) return (int)k;
    memcpy(out + (int64_t)i * dim, sptable_value(sh->t, k), (size_t)dim * sizeof(float));
  }
  return 0;
}

int ps_sparse_push(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n,
                   const float *grads) {
  sp_shard *sh;
  int rc = checked(s, table, ids, n, "SPARSE_PUSH", &sh);
  if (rc < 0) return rc;
  if (sh->sync)
    return err_set(DRV_EUNSUPPORTED, "SPARSE_PUSH: sparse tables in a sync fit on a cluster "
                                     "are not supported yet");
  return optim_table_update(&sh->optim, sh->t, ids, grads, (int64_t)n);
}

int64_t ps_sparse_held(const ps_sparse *s, uint32_t table) {
  if (table >= PS_SPARSE_MAX_TABLES || !s->tables[table].t) return -1;
  return sptable_held(s->tables[table].t);
}
