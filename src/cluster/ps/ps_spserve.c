/* ps_spserve.c - a ps serving its shards of sparse tables (issue 26):
 * SPARSE_INIT from the coordinator, SPARSE_PULL (held in sync training as
 * a PULL is), SPARSE_PUSH (kept with its connection until the same
 * worker's PUSH, then staged for that PUSH, which applies it (async) or
 * sums it into the step only when the PUSH counts (sync: a late step's
 * rows are dropped with its dense gradient); with a replica the staging is
 * the primary's REPL of each, right before the PUSH's, so both apply the
 * same rows in the same order, and a PUSH taken already (its PUSH_ID)
 * drops its rows with it) and SPARSE_DUMP (every row held, for the
 * coordinator's copy of the trained table). The store is ps_sparse.c.
 */
#include "cluster/ps/ps.h"
#include "cluster/ps/ps_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/le.h"
#include "base/log.h"
#include "cluster/ps/ps_sparse.h"
#include "numeric/sptable.h"

static void reply_empty(conn *c, uint8_t type, uint32_t req) {
  if (!c) return; /* a replica applying its primary's frame */
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sparse_init_ok(&w, &(wire_msg_sparse_init_ok){0});
  conn_send_wr(c, &w, type, req);
}

int ps__on_sparse_init(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl) {
  wire_msg_sparse_init m;
  int rc = wire_get_sparse_init(pl, h->len, &m);
  if (rc < 0) return rc;
  /* m.shard is the ps group's, not this process's index: with ps replicas
   * a replica, a promoted one or a restarted one serves another group */
  if (!ps->sparse && !(ps->sparse = ps_sparse_new())) return DRV_ENOMEM;
  if ((rc = ps_sparse_init(ps->sparse, &m)) < 0) return rc;
  log_info("sparse table %u: %llu rows of %u, this ps shard %u of %u", m.table,
           (unsigned long long)m.rows, m.dim, m.shard, m.shards);
  reply_empty(c, WIRE_SPARSE_INIT_OK, h->req);
  return 0;
}

/* A decoded ITEMS list of sparse ids as an array (malloc'd, n + 1). */
static int ids_of(const wire_items *it, uint64_t **out) {
  uint64_t *ids = malloc(((size_t)it->n + 1) * sizeof *ids);
  if (!ids) return err_set(DRV_ENOMEM, "out of memory for %u ids", it->n);
  wire_rd r = wire_items_reader(it);
  for (uint32_t i = 0; i < it->n; i++) {
    wire_item_sparse_id x;
    wire_get_item_sparse_id(&r, &x);
    ids[i] = x.id;
  }
  *out = ids;
  return 0;
}

/* The reply to one SPARSE_PULL payload: its rows (ps_sparse_pull). */
int ps__sparse_pull_reply(ps_server *ps, conn *c, uint32_t req, const uint8_t *pl, uint32_t len) {
  wire_msg_sparse_pull m;
  int rc = wire_get_sparse_pull(pl, len, &m);
  if (rc < 0) return rc;
  int64_t dim = ps->sparse ? ps_sparse_dim(ps->sparse, m.table) : -1;
  if (dim < 0) return err_set(DRV_EINVAL, "SPARSE_PULL: this ps holds no table %u", m.table);
  size_t n = m.ids.n;
  if (n > WIRE_DEFAULT_MAX_FRAME / 4 / (size_t)dim)
    return err_set(DRV_ERANGE, "SPARSE_PULL: %zu rows of %lld floats do not fit one frame", n,
                   (long long)dim);
  uint64_t *ids;
  if ((rc = ids_of(&m.ids, &ids)) < 0) return rc;
  float *rows = malloc((n * (size_t)dim + 1) * sizeof *rows);
  if (!rows) {
    free(ids);
    return err_set(DRV_ENOMEM, "out of memory for %zu rows", n);
  }
  rc = ps_sparse_pull(ps->sparse, m.table, ids, n, rows);
  free(ids);
  if (rc == 0) {
    wire_wr w;
    wire_wr_init(&w);
    wire_put_sparse_pull_reply(&w, &(wire_msg_sparse_pull_reply){
        m.table, ps->version, {.ndim = 2, .shape = {(int64_t)n, dim}, .data = rows}});
    rc = conn_send_wr(c, &w, WIRE_SPARSE_PULL_REPLY, req);
  }
  free(rows);
  return rc;
}

/* Applies (or, sync, sums) one SPARSE_PUSH payload. */
static int push_payload(ps_server *ps, const uint8_t *pl, uint32_t len) {
  wire_msg_sparse_push m;
  int rc = wire_get_sparse_push(pl, len, &m);
  if (rc < 0) return rc;
  int64_t dim = ps->sparse ? ps_sparse_dim(ps->sparse, m.table) : -1;
  if (dim < 0) return err_set(DRV_EINVAL, "SPARSE_PUSH: this ps holds no table %u", m.table);
  if (m.grads.ndim != 2 || m.grads.shape[0] != (int64_t)m.ids.n || m.grads.shape[1] != dim)
    return err_set(DRV_ESHAPE, "SPARSE_PUSH: %u ids of table %u need gradients [%u, %lld]",
                   m.ids.n, m.table, m.ids.n, (long long)dim);
  uint64_t *ids;
  if ((rc = ids_of(&m.ids, &ids)) < 0) return rc;
  size_t n = m.ids.n;
  float *g = malloc((n * (size_t)dim + 1) * sizeof *g);
  if (!g) rc = err_set(DRV_ENOMEM, "out of memory for %zu row gradients", n);
  if (rc == 0) {
    wire_tensor_to(&m.grads, g);
    for (size_t k = 0; k < n * (size_t)dim && rc == 0; k++)
      if (!(g[k] - g[k] == 0))
        rc = err_set(DRV_ERANGE, "SPARSE_PUSH refused: the gradient of table %u holds a NaN or "
                     "Inf at element %zu; no row changed", m.table, k);
  }
  if (rc == 0) rc = ps_sparse_push(ps->sparse, m.table, ids, n, g, ps->version);
  free(g);
  free(ids);
  return rc;
}

static void pending_drop(sp_pending *q, int *n) {
  for (int k = 0; k < *n; k++) free(q[k].payload);
  *n = 0;
}

void ps__sparse_pending_drop(peer *pe) { pending_drop(pe->sp, &pe->nsp); }

void ps__sparse_pending_free(peer *pe) {
  pending_drop(pe->sp, &pe->nsp);
  free(pe->sp);
  pe->sp = NULL;
  pe->capsp = 0;
}

/* Room for one more in a list of kept SPARSE_PUSHes. */
static int pending_room(sp_pending **q, int n, int *cap) {
  if (n < *cap) return 0;
  int nc = *cap ? 2 * *cap : 4;
  sp_pending *np = realloc(*q, (size_t)nc * sizeof *np);
  if (!np) return err_set(DRV_ENOMEM, "out of memory");
  *q = np;
  *cap = nc;
  return 0;
}

int ps__sparse_stage(ps_server *ps, uint8_t *payload, uint32_t len) {
  if (pending_room(&ps->spq, ps->nspq, &ps->capspq) < 0) {
    free(payload);
    return DRV_ENOMEM;
  }
  ps->spq[ps->nspq++] = (sp_pending){payload, len};
  return 0;
}

int ps__sparse_stage_copy(ps_server *ps, const uint8_t *pl, uint32_t len) {
  uint8_t *copy = malloc((size_t)len + 1);
  if (!copy) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(copy, pl, len);
  return ps__sparse_stage(ps, copy, len);
}

void ps__sparse_staged_drop(ps_server *ps) { pending_drop(ps->spq, &ps->nspq); }

int ps__sparse_staged_apply(ps_server *ps) {
  int rc = 0;
  for (int k = 0; k < ps->nspq && rc == 0; k++)
    rc = push_payload(ps, ps->spq[k].payload, ps->spq[k].len);
  ps__sparse_staged_drop(ps);
  return rc;
}

int ps__sparse_with_push(ps_server *ps, peer *pe) {
  int rc = 0;
  for (int k = 0; k < pe->nsp; k++) {
    sp_pending p = pe->sp[k];
    int f = rc < 0 ? rc : ps__repl_forward_owned(ps, pe, WIRE_SPARSE_PUSH, p.payload, p.len);
    if (f < 0) free(p.payload), rc = f;
    else if (f == 0) rc = ps__sparse_stage(ps, p.payload, p.len);
  }
  pe->nsp = 0;
  return rc;
}

int ps__on_sparse_push(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl) {
  (void)ps;
  /* checked now (a bad one closes the connection at once), applied or
   * summed with the PUSH that follows it */
  wire_msg_sparse_push m;
  int rc = wire_get_sparse_push(pl, h->len, &m);
  if (rc < 0) return rc;
  if ((rc = pending_room(&pe->sp, pe->nsp, &pe->capsp)) < 0) return rc;
  uint8_t *copy = malloc(h->len + 1);
  if (!copy) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(copy, pl, h->len);
  pe->sp[pe->nsp++] = (sp_pending){copy, h->len};
  return 0;
}

int ps__on_sparse_dump(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl) {
  wire_msg_sparse_dump m;
  int rc = wire_get_sparse_dump(pl, h->len, &m);
  if (rc < 0) return rc;
  const sptable *t = ps->sparse ? ps_sparse_table(ps->sparse, m.table) : NULL;
  if (!t) return err_set(DRV_EINVAL, "SPARSE_DUMP: this ps holds no table %u", m.table);
  int64_t n = sptable_held(t), dim = sptable_dim(t);
  if ((uint64_t)n * (uint64_t)dim * 4 + (uint64_t)n * 8 + 1024 > WIRE_DEFAULT_MAX_FRAME)
    return err_set(DRV_ERANGE, "SPARSE_DUMP: table %u's %lld rows here do not fit one frame",
                   m.table, (long long)n);
  int64_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
  float *rows = malloc(((size_t)n * (size_t)dim + 1) * sizeof *rows);
  if (!ids || !rows) {
    free(ids), free(rows);
    return err_set(DRV_ENOMEM, "out of memory for %lld rows", (long long)n);
  }
  sptable_copy_ids(t, ids);
  sptable_copy_rows(t, -1, rows);
  uint8_t *raw = (uint8_t *)ids; /* the ids as the list's bytes: u64 little-endian */
  for (int64_t k = 0; k < n; k++) le_put(raw + 8 * k, (uint64_t)ids[k], 8);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sparse_dump_reply(&w, &(wire_msg_sparse_dump_reply){
      m.table, {(uint32_t)n, .p = raw, .len = (size_t)n * 8},
      {.ndim = 2, .shape = {n, dim}, .data = rows}});
  rc = conn_send_wr(c, &w, WIRE_SPARSE_DUMP_REPLY, h->req);
  free(ids);
  free(rows);
  return rc;
}

int ps_sparse_stats(const ps_server *ps, wire_item_table_stat *out, int max) {
  int n = 0;
  if (ps && ps->role == WIRE_PS_REPLICA) return 0; /* its group's rows: its primary's figures */
  for (uint32_t t = 0; ps && ps->sparse && t < PS_SPARSE_MAX_TABLES && n < max; t++) {
    int64_t held = ps_sparse_held(ps->sparse, t);
    if (held >= 0) out[n++] = (wire_item_table_stat){t, (uint64_t)held, 0, 0};
  }
  return n;
}

int ps__on_sparse_load(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl) {
  wire_msg_sparse_load m;
  int rc = wire_get_sparse_load(pl, h->len, &m);
  if (rc < 0) return rc;
  int64_t dim = ps->sparse ? ps_sparse_dim(ps->sparse, m.table) : -1;
  if (dim < 0) return err_set(DRV_EINVAL, "SPARSE_LOAD: this ps holds no table %u", m.table);
  if (m.rows.ndim != 2 || m.rows.shape[0] != (int64_t)m.ids.n || m.rows.shape[1] != dim)
    return err_set(DRV_ESHAPE, "SPARSE_LOAD: %u ids of table %u need rows [%u, %lld]", m.ids.n,
                   m.table, m.ids.n, (long long)dim);
  uint64_t *ids;
  if ((rc = ids_of(&m.ids, &ids)) < 0) return rc;
  size_t n = m.ids.n;
  float *rows = malloc((n * (size_t)dim + 1) * sizeof *rows);
  if (!rows) rc = err_set(DRV_ENOMEM, "out of memory for %zu rows", n);
  if (rc == 0) {
    wire_tensor_to(&m.rows, rows);
    rc = ps_sparse_put_rows(ps->sparse, m.table, ids, n, rows);
  }
  free(rows);
  free(ids);
  if (rc == 0) reply_empty(c, WIRE_SPARSE_INIT_OK, h->req);
  return rc;
}
