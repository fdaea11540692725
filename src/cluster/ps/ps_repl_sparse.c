/* ps_repl_sparse.c - a ps's sparse tables in the REPL_SYNC stream (issue
 * 26): after the dense shards, per table REPL_TABLE (its SPARSE_INIT
 * fields, its plateau factor and how many rows follow) and REPL_ROWS of at most
 * DROVER_REPL_PIECE bytes: the held rows in the table's order with their
 * optimizer slots and lazy update counts, then (sync) the rows summed into
 * the step being aggregated. The replica rebuilds the tables apart and
 * takes them at REPL_SYNC_END with the rest (ps_repl_sync.c): the same
 * rows in the same order, so both go on bit for bit alike.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/le.h"
#include "cluster/ps/ps_int.h"
#include "cluster/ps/ps_sparse.h"
#include "numeric/sptable.h"

/* ============================== primary =================================== */

static void put_ids(wire_wr *w, void *ud, uint32_t k) {
  wire_put_item_sparse_id(w, &(wire_item_sparse_id){((const uint64_t *)ud)[k]});
}

/* A frame's rows: n ids, their values, slots (slot-major) and counts. */
typedef struct rows_buf {
  uint64_t *ids;
  float *values, *slots;
  uint8_t *counts;
} rows_buf;

static int send_rows(conn *c, bool acc, const rows_buf *b, size_t n, size_t dim, int nslots,
                     uint32_t *frames) {
  size_t vb = n * dim * sizeof(float);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_repl_rows(&w, &(wire_msg_repl_rows){
      acc, {(uint32_t)n, .put = put_ids, .ud = b->ids}, {(const uint8_t *)b->values, (uint32_t)vb},
      {(const uint8_t *)b->slots, acc ? 0 : (uint32_t)(vb * (size_t)nslots)},
      {b->counts, acc ? 0 : (uint32_t)(n * 8)}});
  int rc = conn_send_wr(c, &w, WIRE_REPL_ROWS, 0);
  if (rc == 0) ++*frames;
  return rc;
}

/* Rows [a, a + n) of table t into b. */
static void gather_held(const sptable *t, int64_t a, size_t n, rows_buf *b) {
  size_t dim = (size_t)sptable_dim(t);
  int ns = sptable_nslots(t);
  for (size_t i = 0; i < n; i++) {
    int64_t k = a + (int64_t)i;
    b->ids[i] = sptable_id(t, k);
    memcpy(b->values + i * dim, sptable_value(t, k), dim * sizeof(float));
    for (int j = 0; j < ns; j++)
      memcpy(b->slots + ((size_t)j * n + i) * dim, sptable_slot(t, k, j), dim * sizeof(float));
    le_put(b->counts + 8 * i, (uint64_t)*sptable_count(t, k), 8);
  }
}

/* One table: REPL_TABLE, its held rows, its step sums; `per` rows a frame. */
static int send_table(ps_server *ps, conn *c, const wire_msg_repl_table *m, size_t per,
                      rows_buf *b, uint32_t *frames) {
  const sptable *t = ps_sparse_table(ps->sparse, m->table);
  const nn_spgrad *acc = ps_sparse_acc(ps->sparse, m->table);
  size_t dim = m->dim;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_repl_table(&w, m);
  int rc = conn_send_wr(c, &w, WIRE_REPL_TABLE, 0);
  if (rc == 0) ++*frames;
  for (uint64_t a = 0; rc == 0 && a < m->held; a += per) {
    size_t n = m->held - a < per ? (size_t)(m->held - a) : per;
    gather_held(t, (int64_t)a, n, b);
    rc = send_rows(c, false, b, n, dim, sptable_nslots(t), frames);
  }
  for (uint64_t a = 0; rc == 0 && a < m->acc; a += per) {
    size_t n = m->acc - a < per ? (size_t)(m->acc - a) : per;
    rows_buf ab = {acc->ids + a, acc->rows + a * dim, NULL, NULL};
    rc = send_rows(c, true, &ab, n, dim, 0, frames);
  }
  return rc;
}

/* Rows a frame for a table of dim floats with ns slots: what fits piece
 * bytes, one at least. */
static size_t rows_per_frame(size_t piece, size_t dim, int ns) {
  size_t row = dim * sizeof(float) * (1 + (size_t)ns) + 16;
  return piece / row ? piece / row : 1;
}

int ps__repl_send_tables(ps_server *ps, conn *c, uint32_t *frames, uint32_t *ntables) {
  *ntables = 0;
  for (uint32_t t = 0; ps->sparse && t < PS_SPARSE_MAX_TABLES; t++) {
    wire_msg_repl_table m;
    if (ps_sparse_describe(ps->sparse, t, &m) < 0) continue;
    int ns = sptable_nslots(ps_sparse_table(ps->sparse, t));
    size_t per = rows_per_frame(ps->repl_piece, m.dim, ns);
    rows_buf b = {malloc(per * 8), malloc(per * m.dim * sizeof(float)),
                  malloc(per * m.dim * sizeof(float) * (size_t)(ns ? ns : 1)), malloc(per * 8)};
    int rc = b.ids && b.values && b.slots && b.counts
                 ? send_table(ps, c, &m, per, &b, frames)
                 : err_set(DRV_ENOMEM, "out of memory for table %u's REPL_ROWS", t);
    free(b.ids), free(b.values), free(b.slots), free(b.counts);
    if (rc < 0) return rc;
    ++*ntables;
  }
  return 0;
}

/* ============================== replica =================================== */

/* The tables of a REPL_SYNC being received: built in their own store. */
struct repl_tstage {
  ps_sparse *sp;
  uint32_t ntables;
  wire_msg_repl_table cur; /* the last REPL_TABLE */
  bool any;                /* one came */
  uint64_t got_held, got_acc;
  int nslots;
  /* its held rows, gathered until the last one (ps_sparse_load takes them whole) */
  int64_t *ids, *counts;
  float *values, *slots[SPTABLE_MAX_SLOTS];
};

static void rows_free(repl_tstage *st) {
  free(st->ids), free(st->counts), free(st->values);
  for (int j = 0; j < SPTABLE_MAX_SLOTS; j++) free(st->slots[j]), st->slots[j] = NULL;
  st->ids = st->counts = NULL;
  st->values = NULL;
}

void ps__repl_tables_free(repl_tstage *st) {
  if (!st) return;
  rows_free(st);
  ps_sparse_free(st->sp);
  free(st);
}

/* Whether the last table received all its rows (none yet: true). */
static bool table_whole(const repl_tstage *st) {
  return !st->any || (st->got_held == st->cur.held && st->got_acc == st->cur.acc);
}

/* The held rows gathered go into the table (all of them came). */
static int load_held(repl_tstage *st) {
  const float *slots[SPTABLE_MAX_SLOTS] = {st->slots[0], st->slots[1]};
  ps_sparse_rows r = {st->ids, st->cur.held, st->values, {slots[0], slots[1]}, st->nslots,
                      st->counts};
  int rc = st->cur.held ? ps_sparse_load(st->sp, st->cur.table, &r) : 0;
  rows_free(st);
  return rc;
}

static int on_table(repl_tstage *st, const uint8_t *pl, uint32_t len) {
  wire_msg_repl_table m;
  int rc = wire_get_repl_table(pl, len, &m);
  if (rc < 0) return rc;
  if (!table_whole(st)) return err_set(DRV_EPARSE, "REPL_TABLE before the last one was whole");
  if (st->any && m.table <= st->cur.table)
    return err_set(DRV_EPARSE, "REPL_TABLE: table %u out of order", m.table);
  if (!st->sp && !(st->sp = ps_sparse_new())) return DRV_ENOMEM;
  wire_msg_sparse_init init = {.table = m.table, .rows = m.rows, .dim = m.dim, .std = m.std,
                               .seed = m.seed, .shard = m.shard, .shards = m.shards,
                               .mode = m.mode, .optim = m.optim};
  if ((rc = ps_sparse_init(st->sp, &init)) < 0) return rc;
  if (!(m.lr_scale >= 0 && m.lr_scale <= 1))
    return err_set(DRV_EPARSE, "REPL_TABLE: table %u's rate factor %g", m.table, m.lr_scale);
  ps_sparse_set_table_scale(st->sp, m.table, m.lr_scale);
  uint64_t rows = sptable_rows(ps_sparse_table(st->sp, m.table));
  if (m.held > rows || m.acc > rows || m.held > SIZE_MAX / 8 / m.dim / (2 + SPTABLE_MAX_SLOTS))
    return err_set(DRV_EPARSE, "REPL_TABLE: table %u: %llu rows held", m.table,
                   (unsigned long long)m.held);
  st->cur = m;
  st->any = true;
  st->ntables++;
  st->got_held = st->got_acc = 0;
  st->nslots = sptable_nslots(ps_sparse_table(st->sp, m.table));
  size_t n = (size_t)m.held, d = m.dim;
  if (!n) return 0;
  st->ids = malloc(n * 8), st->counts = malloc(n * 8), st->values = malloc(n * d * 4);
  bool ok = st->ids && st->counts && st->values;
  for (int j = 0; j < st->nslots; j++) ok &= (st->slots[j] = malloc(n * d * 4)) != NULL;
  return ok ? 0 : err_set(DRV_ENOMEM, "out of memory for table %u's %zu rows", m.table, n);
}

/* The ids of a REPL_ROWS into ids (n of them). */
static void read_ids(const wire_items *it, uint64_t *ids) {
  wire_rd r = wire_items_reader(it);
  for (uint32_t i = 0; i < it->n; i++) {
    wire_item_sparse_id x;
    wire_get_item_sparse_id(&r, &x);
    ids[i] = x.id;
  }
}

static int take_held(repl_tstage *st, const wire_msg_repl_rows *m, size_t n) {
  size_t d = st->cur.dim, at = (size_t)st->got_held;
  uint64_t *ids = (uint64_t *)(st->ids + at); /* the same bits: ids are below 2^40 */
  read_ids(&m->ids, ids);
  memcpy(st->values + at * d, m->values.p, n * d * 4);
  for (int j = 0; j < st->nslots; j++)
    memcpy(st->slots[j] + at * d, m->slots.p + (size_t)j * n * d * 4, n * d * 4);
  for (size_t i = 0; i < n; i++) st->counts[at + i] = (int64_t)le_get(m->counts.p + 8 * i, 8);
  st->got_held += n;
  return st->got_held == st->cur.held ? load_held(st) : 0;
}

static int take_acc(repl_tstage *st, const wire_msg_repl_rows *m, size_t n) {
  uint64_t *ids = malloc(n * 8 + 8);
  float *rows = malloc(n * st->cur.dim * 4 + 4);
  int rc = ids && rows ? 0 : err_set(DRV_ENOMEM, "out of memory for %zu summed rows", n);
  if (rc == 0) {
    read_ids(&m->ids, ids);
    memcpy(rows, m->values.p, n * st->cur.dim * 4);
    rc = ps_sparse_acc_add(st->sp, st->cur.table, ids, n, rows);
  }
  free(ids), free(rows);
  st->got_acc += n;
  return rc;
}

static int on_rows(repl_tstage *st, const uint8_t *pl, uint32_t len) {
  wire_msg_repl_rows m;
  int rc = wire_get_repl_rows(pl, len, &m);
  if (rc < 0) return rc;
  size_t n = m.ids.n, vb = n * st->cur.dim * 4;
  uint64_t left = m.acc ? st->cur.acc - st->got_acc : st->cur.held - st->got_held;
  bool fits = st->any && n > 0 && n <= left && m.values.len == vb &&
              m.slots.len == (m.acc ? 0 : vb * (size_t)st->nslots) &&
              m.counts.len == (m.acc ? 0 : n * 8) && (!m.acc || st->got_held == st->cur.held);
  if (!fits)
    return err_set(DRV_EPARSE, "REPL_ROWS: %zu %s rows do not follow table %u's %llu of %llu", n,
                   m.acc ? "summed" : "held", st->cur.table,
                   (unsigned long long)(m.acc ? st->got_acc : st->got_held),
                   (unsigned long long)(m.acc ? st->cur.acc : st->cur.held));
  return m.acc ? take_acc(st, &m, n) : take_held(st, &m, n);
}

int ps__repl_tables_frame(repl_tstage **stp, const wire_header *h, const uint8_t *pl) {
  if (!*stp && !(*stp = calloc(1, sizeof **stp))) return err_set(DRV_ENOMEM, "out of memory");
  return h->type == WIRE_REPL_TABLE ? on_table(*stp, pl, h->len) : on_rows(*stp, pl, h->len);
}

int ps__repl_tables_end(repl_tstage *st, uint32_t tables, struct ps_sparse **out) {
  *out = NULL;
  uint32_t got = st ? st->ntables : 0;
  if (got != tables || (st && !table_whole(st)))
    return err_set(DRV_EPARSE, "REPL_SYNC_END: %u of %u sparse tables received whole", got,
                   tables);
  if (st) *out = st->sp, st->sp = NULL;
  return 0;
}
