/* coord_sparse.c - a model's sparse tables on a cluster (issue 26): each
 * table is sharded by row over every ps (sptable_owner), created there by
 * SPARSE_INIT with the table's seed, so every process computes the same
 * initial rows and none ever holds the whole table; workers pull and push
 * only the rows their batch touches (worker_sparse.c). The coordinator's
 * own copy of a table (its model's, for c:save, evals and the result) is
 * filled by SPARSE_DUMP as the dense values are by PULL: only the rows
 * some ps holds, i.e. the ones training touched.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "numeric/nn_sparse.h"
#include "numeric/optim_sched.h"
#include "numeric/sptable.h"
#include "proto/wire_msgs.h"

/* A table's rows as the fit found them (a second fit, a loaded model),
 * grouped by owner (sptable_route): ps k's ids are ids[offs[k] ..
 * offs[k + 1]), rows in the same order. SPARSE_LOAD sends them after each
 * SPARSE_INIT: at the start, and again when a lost ps makes the fit start
 * over without a checkpoint. */
typedef struct coord_tinit {
  uint64_t *ids;
  float *rows;
  size_t *offs;
  int64_t n;
} coord_tinit;

static void tinit_free(coord_fit_state *f) {
  for (int i = 0; f->tinit && i < f->tables.n; i++) {
    free(f->tinit[i].ids);
    free(f->tinit[i].rows);
    free(f->tinit[i].offs);
  }
  free(f->tinit);
  f->tinit = NULL;
}

void coord__sparse_free(coord_fit_state *f) {
  tinit_free(f);
  nn_table_list_free(&f->tables);
}

static int tinit_take(coord_fit_state *f, int i) {
  const sptable *t = f->tables.items[i].value;
  coord_tinit *ti = &f->tinit[i];
  int64_t n = sptable_held(t), dim = sptable_dim(t);
  if (n == 0) return 0;
  uint64_t *held = malloc((size_t)n * sizeof *held);
  ti->ids = malloc((size_t)n * sizeof *ti->ids);
  ti->rows = malloc((size_t)n * (size_t)dim * sizeof *ti->rows);
  ti->offs = malloc(((size_t)f->nps + 1) * sizeof *ti->offs);
  int rc = held && ti->ids && ti->rows && ti->offs ? 0 : err_set(DRV_ENOMEM, "out of memory");
  for (int64_t k = 0; rc == 0 && k < n; k++) held[k] = sptable_id(t, k);
  int64_t u = rc == 0 ? sptable_route(held, (size_t)n, (uint32_t)f->nps, ti->ids, ti->offs) : 0;
  if (u < 0) rc = (int)u;
  for (int64_t k = 0; rc == 0 && k < u; k++)
    memcpy(ti->rows + k * dim, sptable_value(t, sptable_find(t, ti->ids[k])),
           (size_t)dim * sizeof *ti->rows);
  ti->n = rc == 0 ? u : 0;
  free(held);
  return rc;
}

/* What a cluster does not do with tables yet, refused before anything
 * starts rather than trained wrong: an nn.Embedding { sparse = true } whose
 * ids a layer computes (a worker gathers them from x before its pull), or
 * one next to tables that read the batch's ids (one route of ids a step). */
static int refuse(const nn_module *model, const nn_table_list *tl, int i) {
  const nn_table *t = &tl->items[i];
  nn_idlayer l, l0;
  char front[96];
  int rc = nn_idlayer_get(t->owner, &l);
  if (rc == 0) rc = nn_idlayer_get(tl->items[0].owner, &l0);
  if (rc < 0) return rc;
  if ((l.kind == NN_ID_EMBEDDING) != (l0.kind == NN_ID_EMBEDDING))
    return err_set(DRV_EUNSUPPORTED, "cluster: sparse table %s: nn.Embedding { sparse = true } "
                   "next to nn.EmbeddingBag or nn.SparseLinear in one model is not supported "
                   "yet (the first reads ids from x, the others the batch's ids)", t->name);
  if (l.kind != NN_ID_EMBEDDING) return 0;
  if ((rc = nn_reads_x(model, t->owner, front, sizeof front)) != 0) return rc < 0 ? rc : 0;
  return err_set(DRV_EUNSUPPORTED, "cluster: sparse table %s with nn.Embedding { sparse = true }"
                 ": its ids are computed by %s in front of it: the worker cannot know them "
                 "before its pull; put it first or use nn.EmbeddingBag", t->name, front);
}

int coord__sparse_place(coord_fit_state *f, nn_module *model) {
  coord__sparse_free(f);
  int rc = nn_collect_tables(model, false, &f->tables);
  if (rc == 0 && f->tables.n && !(f->tinit = calloc((size_t)f->tables.n, sizeof *f->tinit)))
    rc = err_set(DRV_ENOMEM, "out of memory");
  for (int i = 0; i < f->tables.n && rc == 0; i++) {
    if ((rc = refuse(model, &f->tables, i)) < 0 || (rc = tinit_take(f, i)) < 0) break;
    const sptable *t = f->tables.items[i].value;
    rundir_event(&f->c->rd, "placement %s: a sparse table of %" PRIu64 " rows of %" PRId64
                 ", sharded by row over %d ps", f->tables.items[i].name, sptable_rows(t),
                 sptable_dim(t), f->nps);
  }
  if (rc < 0) coord__sparse_free(f);
  return rc;
}

static void put_id(wire_wr *w, void *ud, uint32_t k) {
  wire_put_item_sparse_id(w, &(wire_item_sparse_id){((const uint64_t *)ud)[k]});
}

/* SPARSE_LOAD of table i's starting rows that ps k owns, in frames of at
 * most 16 MiB of rows. */
static int load_rows(coord_fit_state *f, int i, int k) {
  const coord_tinit *ti = &f->tinit[i];
  if (ti->n == 0) return 0;
  int64_t dim = sptable_dim(f->tables.items[i].value);
  size_t per = ((size_t)16 << 20) / ((size_t)dim * 4 + 8) + 1;
  for (size_t a = ti->offs[k]; a < ti->offs[k + 1]; a += per) {
    size_t n = ti->offs[k + 1] - a < per ? ti->offs[k + 1] - a : per;
    wire_wr w;
    wire_wr_init(&w);
    wire_put_sparse_load(&w, &(wire_msg_sparse_load){
        (uint32_t)i, {(uint32_t)n, .put = put_id, .ud = ti->ids + a},
        {.ndim = 2, .shape = {(int64_t)n, dim}, .data = ti->rows + a * (size_t)dim}});
    int rc = coord__ps_request(f, k, &w, WIRE_SPARSE_LOAD, (uint32_t)i);
    if (rc < 0) return rc;
  }
  return 0;
}

int coord__sparse_init(coord_fit_state *f, const optim_cfg *opt) {
  for (int i = 0; i < f->tables.n; i++) {
    const sptable *t = f->tables.items[i].value;
    for (int k = 0; k < f->nps; k++) {
      wire_wr w;
      wire_wr_init(&w);
      wire_put_sparse_init(&w, &(wire_msg_sparse_init){
          .table = (uint32_t)i, .rows = sptable_rows(t), .dim = (uint32_t)sptable_dim(t),
          .std = sptable_std(t), .seed = sptable_seed(t), .shard = (uint32_t)k,
          .shards = (uint32_t)f->nps, .mode = f->sync, .replicas = f->replicas,
          .target = (uint64_t)f->sync_target, .optim = *opt});
      int rc = coord__ps_request(f, k, &w, WIRE_SPARSE_INIT, (uint32_t)i);
      if (rc == 0) rc = load_rows(f, i, k);
      if (rc < 0) return rc;
    }
  }
  return 0;
}

int coord__sparse_dump(coord_fit_state *f) {
  for (int i = 0; i < f->tables.n; i++) {
    sptable_clear(f->tables.items[i].value);
    for (int k = 0; k < f->nps; k++) {
      wire_wr w;
      wire_wr_init(&w);
      wire_put_sparse_dump(&w, &(wire_msg_sparse_dump){(uint32_t)i});
      int rc = coord__ps_request(f, k, &w, WIRE_SPARSE_DUMP, (uint32_t)i);
      if (rc < 0) return rc;
    }
  }
  return 0;
}

int coord__sparse_dump_reply(coord_fit_state *f, int ps, const uint8_t *pl, uint32_t len) {
  wire_msg_sparse_dump_reply m;
  int rc = wire_get_sparse_dump_reply(pl, len, &m);
  if (rc < 0) return rc;
  if (m.table >= (uint32_t)f->tables.n)
    return err_set(DRV_EPARSE, "SPARSE_DUMP_REPLY from ps:%d: no table %u", ps, m.table);
  sptable *t = f->tables.items[m.table].value;
  int64_t dim = sptable_dim(t);
  if (m.rows.ndim != 2 || m.rows.shape[0] != (int64_t)m.ids.n || m.rows.shape[1] != dim)
    return err_set(DRV_ESHAPE, "SPARSE_DUMP_REPLY from ps:%d: rows do not match its %u ids", ps,
                   m.ids.n);
  float *rows = malloc(((size_t)m.ids.n * (size_t)dim + 1) * sizeof *rows);
  if (!rows) return err_set(DRV_ENOMEM, "out of memory for %u rows", m.ids.n);
  wire_tensor_to(&m.rows, rows);
  wire_rd r = wire_items_reader(&m.ids);
  for (uint32_t i = 0; i < m.ids.n && rc == 0; i++) {
    wire_item_sparse_id it;
    wire_get_item_sparse_id(&r, &it);
    if (sptable_owner(it.id, (uint32_t)f->nps) != (uint32_t)ps) {
      rc = err_set(DRV_EPARSE, "SPARSE_DUMP_REPLY from ps:%d: id %" PRIu64 " is not its own", ps,
                   it.id);
      break;
    }
    int64_t k = sptable_get(t, it.id);
    if (k < 0) rc = (int)k;
    else memcpy(sptable_value(t, k), rows + (size_t)i * (size_t)dim, (size_t)dim * sizeof *rows);
  }
  free(rows);
  return rc;
}

/* ============================== figures =================================== */

#define COORD_MAX_TABLE_STATS 64

int coord__node_sparse_stats(coord_node *n, const uint8_t *pl, uint32_t len) {
  wire_msg_sparse_stats m;
  int rc = wire_get_sparse_stats(pl, len, &m);
  if (rc < 0) return rc;
  uint32_t k = m.tables.n < COORD_MAX_TABLE_STATS ? m.tables.n : COORD_MAX_TABLE_STATS;
  if (!n->tstats && !(n->tstats = calloc(COORD_MAX_TABLE_STATS, sizeof *n->tstats)))
    return err_set(DRV_ENOMEM, "out of memory");
  wire_rd r = wire_items_reader(&m.tables);
  for (uint32_t i = 0; i < k; i++) wire_get_item_table_stat(&r, &n->tstats[i]);
  n->ntstats = (int)k;
  return 0;
}

int coord_tables(const coord *c, coord_table_stat *out, int max) {
  const coord_fit_state *f = c->fit;
  int nt = f ? f->tables.n : 0;
  for (int t = 0; t < nt && t < max; t++) {
    const sptable *tab = f->tables.items[t].value;
    coord_table_stat *o = &out[t];
    *o = (coord_table_stat){f->tables.items[t].name, sptable_rows(tab), (uint64_t)sptable_dim(tab),
                            0, 0, 0};
    int workers = 0;
    for (int i = 0; i < c->nnodes; i++) {
      const coord_node *nd = &c->nodes[i];
      if (coord__scaled_away(nd)) continue; /* its figures are of a step long past */
      if (nd->role == ROLE_PS && coord__repl_is_replica(c, i)) continue; /* its primary's rows */
      for (int k = 0; k < nd->ntstats; k++) {
        const wire_item_table_stat *s = &nd->tstats[k];
        if (s->table != (uint32_t)t) continue;
        if (nd->role == ROLE_PS) {
          o->held += s->held;
        } else if (s->touched) {
          o->touched += (double)s->touched;
          o->bytes += (double)s->bytes;
          workers++;
        }
      }
    }
    if (workers) o->touched /= workers, o->bytes /= workers;
  }
  return nt;
}

void coord_tables_summary(const coord *c, char *out, size_t n) {
  coord_table_stat st[16];
  int nt = coord_tables(c, st, 16);
  size_t len = 0;
  if (n) out[0] = '\0';
  for (int t = 0; t < nt && t < 16; t++) {
    char line[160];
    int k = snprintf(line, sizeof line, "%s %" PRIu64 " %" PRIu64 " %" PRIu64 " %.0f %.0f\n",
                     st[t].name, st[t].rows, st[t].dim, st[t].held, st[t].touched, st[t].bytes);
    if (k < 0 || (size_t)k >= sizeof line || len + (size_t)k >= n) break;
    memcpy(out + len, line, (size_t)k + 1);
    len += (size_t)k;
  }
}
