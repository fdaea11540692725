/* worker_sparse.c - a worker's sparse tables (issue 26): the model's
 * tables hold only the rows of the batch at hand. Before its pull a train
 * job draws its batch (an eval job takes its whole set), dedupes its ids
 * and groups them by the ps that owns each (sptable_route: fmix64(id) mod
 * nps); each ps is asked for its rows of every table (SPARSE_PULL, held
 * in sync training behind the push before it, as PULL is), which replace
 * the table's contents; after compute each table's row gradients go back
 * grouped the same way (SPARSE_PUSH), each ps's before its PUSH, which a
 * sync ps sums them with. Bytes per step follow the unique ids touched,
 * never the table's size.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "base/err.h"
#include "numeric/nn_sparse.h"
#include "numeric/sptable.h"
#include "proto/wire_msgs.h"
#include "cluster/worker/worker_int.h"

/* One table's row gradients grouped by ps: ps p's ids are
 * ids[offs[p] .. offs[p + 1]), their rows gathered in `rows` (same order). */
typedef struct wsp_push {
  uint64_t *ids;
  float *rows;
  size_t cap, rows_cap, *offs;
  /* for SPARSE_STATS: this step's SPARSE_* payload bytes so far, and the
   * last whole step's unique rows and bytes */
  uint64_t bytes, last_touched, last_bytes;
} wsp_push;

/* An nn.Embedding { sparse = true } reads its ids from x: supported when x
 * reaches it unchanged (the worker gathers them before its pull), and
 * then for every table of the model, all sharing one route of ids. */
static int check_embedding(const wstate *st, int *nemb) {
  *nemb = 0;
  for (int i = 0; i < st->tables.n; i++) {
    const nn_table *t = &st->tables.items[i];
    nn_idlayer l;
    int rc = nn_idlayer_get(t->owner, &l);
    if (rc < 0) return rc;
    if (l.kind != NN_ID_EMBEDDING) continue;
    (*nemb)++;
    char front[96];
    if ((rc = nn_reads_x(st->model, t->owner, front, sizeof front)) < 0) return rc;
    if (rc == 0)
      return err_set(DRV_EUNSUPPORTED, "SETUP: table %s: nn.Embedding { sparse = true } on a "
                     "cluster: its ids are computed by %s in front of it: the worker cannot "
                     "know them before its pull; put it first or use nn.EmbeddingBag", t->name,
                     front);
  }
  if (*nemb > 0 && *nemb < st->tables.n)
    return err_set(DRV_EUNSUPPORTED, "SETUP: nn.Embedding { sparse = true } next to "
                   "nn.EmbeddingBag or nn.SparseLinear in one model on a cluster is not "
                   "supported yet (the first reads ids from x, the others the batch's ids)");
  return 0;
}

int worker__sparse_bind(wstate *st) {
  int rc = nn_collect_tables(st->model, false, &st->tables), nemb = 0;
  if (rc < 0 || st->tables.n == 0) return rc;
  if ((rc = check_embedding(st, &nemb)) < 0) return rc;
  if (nemb == 0 && st->data && !data_has_sparse(st->data) && st->data->n > 0)
    return err_set(DRV_EINVAL, "SETUP: the model reads ids (sparse tables) but %s has none",
                   st->data->source);
  if (!(st->push = calloc((size_t)st->tables.n, sizeof *st->push)))
    return err_set(DRV_ENOMEM, "out of memory");
  return 0;
}

void worker__sparse_free(wstate *st) {
  for (int i = 0; st->push && i < st->tables.n; i++) {
    free(st->push[i].ids);
    free(st->push[i].rows);
    free(st->push[i].offs);
  }
  free(st->push);
  nn_table_list_free(&st->tables);
  free(st->route);
  free(st->offs);
}

int worker__nps_involved(const worker *w, const wstate *st) {
  return st->tables.n > 0 && w->nlinks > st->nparts ? w->nlinks : st->nparts;
}

bool worker__involves(const worker *w, const wstate *st, int p) {
  if (st->tables.n > 0) return p < w->nlinks;
  return p < st->nparts && st->parts[p].n > 0;
}

/* Room for n entries in *buf (elements of size sz) with *cap. */
static int room(void **buf, size_t *cap, size_t n, size_t sz) {
  if (n <= *cap && *buf) return 0;
  void *p = realloc(*buf, (n + 1) * sz);
  if (!p) return err_set(DRV_ENOMEM, "out of memory for %zu sparse entries", n);
  *buf = p;
  *cap = n;
  return 0;
}

/* The ids of every table of an x-reading model: x's values, checked by
 * each table as its forward checks them. *ids is malloc'd. */
static int ids_of_x(const wstate *st, const tensor *x, uint64_t **ids, size_t *n) {
  int rc = 0;
  for (int t = 0; t < st->tables.n && rc == 0; t++) {
    free(*ids);
    rc = nn_embedding_ids(st->tables.items[t].owner, x, ids, n);
  }
  return rc;
}

/* This job's ids (the batch's, or x's for an x-reading model): *own set
 * when they are malloc'd for the caller to free. */
static int job_ids(worker *w, job *j, const uint64_t **ids, size_t *n, uint64_t **own) {
  wstate *st = j->st;
  bool from_x = nn_tables_read_x(&st->tables);
  const tensor *x = NULL;
  if (j->kind == JOB_EVAL) { /* every row of the eval set */
    const data_sparse *sp = &st->data->sp;
    *ids = sp->ids;
    *n = sp->ptr ? (size_t)sp->ptr[st->data->n] : 0;
    x = st->data->x;
  } else if (j->fx) { /* a fed batch: its own ids */
    if (!from_x && !j->fsp.bound)
      return err_set(DRV_EINVAL, "a fed batch without ids: the model reads ids (sparse tables)");
    *ids = j->fsp.ids;
    *n = from_x ? 0 : (size_t)j->fsp.ptr[j->fx->shape[0]];
    x = j->fx;
  } else {
    if (st->has_iter) { /* the position before this batch; its version once pulled */
      j->drawn = w->batches + 1;
      worker__pos_batch(w, j);
    }
    int rc = worker__next_batch(st, &j->px, &j->py);
    if (rc < 0) return rc;
    x = j->px;
    if (!from_x) {
      const nn_sparse *sp = data_iter_sparse(&st->it);
      *ids = sp->ids;
      *n = (size_t)sp->ptr[sp->rows];
    }
  }
  if (!from_x) return 0;
  int rc = x && x->shape[0] > 0 ? ids_of_x(st, x, own, n) : 0;
  *ids = *own;
  if (!x || x->shape[0] == 0) *n = 0;
  return rc;
}

int worker__sparse_route(worker *w, job *j) {
  wstate *st = j->st;
  const uint64_t *ids = NULL;
  uint64_t *own = NULL;
  size_t n = 0;
  int rc = job_ids(w, j, &ids, &n, &own);
  for (int t = 0; t < st->tables.n && rc == 0; t++) {
    uint64_t rows = sptable_rows(st->tables.items[t].value);
    for (size_t k = 0; k < n; k++)
      if (ids[k] >= rows) {
        rc = err_set(DRV_ERANGE, "table %s: id %" PRIu64 " is outside 0..%" PRIu64,
                     st->tables.items[t].name, ids[k], rows - 1);
        break;
      }
    sptable_clear(st->tables.items[t].value);
  }
  st->nps = (uint32_t)w->nlinks;
  size_t ocap = st->nps;
  if (rc == 0) rc = room((void **)&st->route, &st->route_cap, n, sizeof *st->route);
  if (rc == 0) {
    free(st->offs);
    if (!(st->offs = malloc((ocap + 1) * sizeof *st->offs)))
      rc = err_set(DRV_ENOMEM, "out of memory");
  }
  if (rc == 0) {
    int64_t u = sptable_route(ids, n, st->nps, st->route, st->offs);
    if (u < 0) rc = (int)u;
    st->touched = u < 0 ? 0 : (uint64_t)u;
  }
  free(own);
  for (int t = 0; t < st->tables.n; t++) st->push[t].bytes = 0;
  return rc;
}

static void put_ids(wire_wr *w, void *ud, uint32_t k) {
  wire_put_item_sparse_id(w, &(wire_item_sparse_id){((const uint64_t *)ud)[k]});
}

int worker__sparse_pull(worker *w, job *j, int p, uint64_t min_version, int *sent) {
  wstate *st = j->st;
  *sent = 0;
  size_t a = st->offs[p], n = st->offs[p + 1] - a;
  if (n == 0) return 0;
  for (int t = 0; t < st->tables.n; t++) {
    wire_wr m;
    wire_wr_init(&m);
    wire_put_sparse_pull(&m, &(wire_msg_sparse_pull){
                                 (uint32_t)t, min_version, {(uint32_t)n, .put = put_ids, .ud = st->route + a}});
    st->push[t].bytes += m.len;
    int rc = worker__link_send(w->links[p], &m, WIRE_SPARSE_PULL, WIRE_SPARSE_PULL_REPLY, j);
    if (rc < 0) return rc;
    (*sent)++;
  }
  return 0;
}

int worker__sparse_take(job *j, int p, const uint8_t *pl, size_t len, uint64_t *version) {
  wstate *st = j->st;
  wire_msg_sparse_pull_reply m;
  int rc = wire_get_sparse_pull_reply(pl, len, &m);
  if (rc < 0) return rc;
  if (m.table >= (uint32_t)st->tables.n)
    return err_set(DRV_EPARSE, "SPARSE_PULL_REPLY from ps:%d: no table %u", p, m.table);
  sptable *t = st->tables.items[m.table].value;
  size_t a = st->offs[p], n = st->offs[p + 1] - a;
  int64_t dim = sptable_dim(t);
  if (m.rows.ndim != 2 || m.rows.shape[0] != (int64_t)n || m.rows.shape[1] != dim)
    return err_set(DRV_ESHAPE, "SPARSE_PULL_REPLY from ps:%d: %zu rows of %" PRId64
                   " were asked for", p, n, dim);
  *version = m.version;
  st->push[m.table].bytes += len;
  float row[256], *buf = dim <= 256 ? row : malloc((size_t)dim * sizeof *buf);
  if (!buf) return err_set(DRV_ENOMEM, "out of memory");
  const uint8_t *src = m.rows.data;
  for (size_t i = 0; i < n && rc == 0; i++) {
    memcpy(buf, src + i * (size_t)dim * 4, (size_t)dim * 4); /* unaligned in the frame */
    int64_t k = sptable_put(t, st->route[a + i], buf);
    if (k < 0) rc = (int)k;
  }
  if (buf != row) free(buf);
  return rc;
}

int worker__sparse_push_prep(wstate *st) {
  for (int t = 0; t < st->tables.n; t++) {
    nn_spgrad *g = st->tables.items[t].grad;
    wsp_push *pu = &st->push[t];
    size_t n = (size_t)g->n, dim = (size_t)g->dim;
    int rc = room((void **)&pu->ids, &pu->cap, n, sizeof *pu->ids);
    if (rc == 0 && n * dim > pu->rows_cap) {
      free(pu->rows);
      pu->rows_cap = 0;
      if (!(pu->rows = malloc((n * dim + 1) * sizeof *pu->rows)))
        rc = err_set(DRV_ENOMEM, "out of memory for %zu row gradients", n);
      else
        pu->rows_cap = n * dim;
    }
    if (rc == 0) {
      free(pu->offs);
      if (!(pu->offs = malloc(((size_t)st->nps + 1) * sizeof *pu->offs)))
        rc = err_set(DRV_ENOMEM, "out of memory");
    }
    if (rc == 0) {
      int64_t u = sptable_route(g->ids, n, st->nps, pu->ids, pu->offs);
      if (u < 0) rc = (int)u;
    }
    for (size_t i = 0; i < n && rc == 0; i++) { /* ids unique: each row found, none added */
      const float *row = nn_spgrad_row(g, pu->ids[i]);
      if (!row) return DRV_ENOMEM;
      memcpy(pu->rows + i * dim, row, dim * sizeof *row);
    }
    if (rc < 0) return rc;
  }
  return 0;
}

/* A SPARSE_PUSH (m, consumed) appended to l's frames for its PUSH. */
static int keep_frame(ps_link *l, wire_wr *m) {
  int rc = wire_wr_finish(m, WIRE_SPARSE_PUSH, 0);
  uint8_t *p = rc < 0 ? NULL : realloc(l->pre, l->npre + m->len);
  if (rc == 0 && !p) rc = err_set(DRV_ENOMEM, "out of memory for a kept SPARSE_PUSH");
  if (rc == 0) {
    memcpy(p + l->npre, m->buf, m->len);
    l->pre = p;
    l->npre += m->len;
  }
  wire_wr_free(m);
  return rc;
}

int worker__sparse_push(worker *w, job *j, int p) {
  wstate *st = j->st;
  ps_link *l = w->links[p];
  for (int t = 0; t < st->tables.n; t++) {
    const wsp_push *pu = &st->push[t];
    size_t a = pu->offs[p], n = pu->offs[p + 1] - a;
    if (n == 0) continue;
    int64_t dim = st->tables.items[t].grad->dim;
    wire_wr m;
    wire_wr_init(&m);
    wire_put_sparse_push(&m, &(wire_msg_sparse_push){
        (uint32_t)t, l->version, {(uint32_t)n, .put = put_ids, .ud = pu->ids + a},
        {.ndim = 2, .shape = {(int64_t)n, dim}, .data = pu->rows + a * (size_t)dim}});
    st->push[t].bytes += m.len;
    int rc = w->ps_replicated ? keep_frame(l, &m) /* sent with its PUSH: worker_ps.c */
                              : conn_send_wr(l->c, &m, WIRE_SPARSE_PUSH, 0); /* no reply */
    if (rc < 0) { /* the job fails: no PUSH takes these */
      free(l->pre);
      l->pre = NULL;
      l->npre = 0;
      return rc;
    }
  }
  return 0;
}

void worker__sparse_step_done(wstate *st) {
  for (int t = 0; t < st->tables.n; t++) {
    st->push[t].last_touched = st->touched;
    st->push[t].last_bytes = st->push[t].bytes;
  }
}

int worker_sparse_stats(const worker *w, wire_item_table_stat *out, int max) {
  const wstate *st = w->st;
  int n = st && st->push ? st->tables.n : 0;
  if (n > max) n = max;
  for (int t = 0; t < n; t++)
    out[t] = (wire_item_table_stat){(uint32_t)t, 0, st->push[t].last_touched,
                                    st->push[t].last_bytes};
  return n;
}
