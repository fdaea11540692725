/* ps_repl_sync.c - a new replica's copy of its primary's whole state,
 * streamed in frames of a bounded size (docs/ARCHITECTURE.md, "ps
 * replicas").
 *
 * A ps's state (values, optimizer slots and gradient sums of every shard)
 * may weigh several times the 256 MiB frame limit: Adam keeps two slots
 * beside each value. So the primary sends it as REPL_SYNC (everything but
 * the shards, and how many follow), then per shard REPL_SHARD (its
 * description) and REPL_PIECEs of at most DROVER_REPL_PIECE bytes (4 MiB
 * by default), then REPL_SYNC_END. All of it is queued in one loop
 * callback, so it is one snapshot: no push is applied between two pieces
 * (the memory is what the single frame took before: one copy of the
 * state in the send queue until the socket drains).
 *
 * The replica builds the new state apart (repl_stage) and switches to it
 * at REPL_SYNC_END, once every part of every shard arrived exactly, in
 * order; a stream cut short (the primary lost, a bad frame) leaves the
 * replica as it was, not in sync, and the coordinator pairs it again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "numeric/optim.h"
#include "cluster/ps/ps_int.h"
#include "cluster/ps/ps_sparse.h"

_Static_assert(WIRE_PIECE_LAST == WIRE_PIECE_SLOT0 + OPTIM_MAX_SLOTS - 1,
               "REPL_PIECE parts: the value, the gradient sum, each optimizer slot");

#define PIECE_DEFAULT (4u << 20)
#define PIECE_MAX (64u << 20)
#define PS_REPL_MAX_SHARDS 65536u /* as PULL's variables (WIRE_PULL_MAX) */

/* A REPL_SYNC being received. */
typedef struct repl_stage {
  peer *from;                /* the connection that proved the token */
  wire_msg_repl_sync head;   /* its fields (clients: copied below) */
  uint32_t *cl_id;
  uint64_t *cl_seq;
  uint32_t ncl;
  shard *shards;             /* in arrival order */
  uint32_t nshards;          /* received so far (head.shards announced) */
  size_t got[WIRE_PIECE_LAST + 1]; /* the last shard's floats received, per part */
  repl_tstage *tables;       /* the sparse tables after the shards (ps_repl_sparse.c) */
  uint64_t bytes;            /* float bytes received in all */
  uint32_t frames;
} repl_stage;

/* ============================== primary =================================== */

int ps__repl_piece_bytes(size_t *out) {
  const char *e = getenv("DROVER_REPL_PIECE");
  *out = PIECE_DEFAULT;
  if (!e || !*e) return 0;
  char *end;
  unsigned long long v = strtoull(e, &end, 10);
  if (*end || e[0] == '-' || v < 4 || v > PIECE_MAX || v % 4)
    return err_set(DRV_EINVAL, "DROVER_REPL_PIECE=%s: a byte count, a multiple of 4 in 4..%u",
                   e, PIECE_MAX);
  *out = (size_t)v;
  return 0;
}

static void put_client(wire_wr *w, void *ud, uint32_t i) {
  const ps_server *ps = ud;
  wire_put_item_repl_client(w, &(wire_item_repl_client){ps->cl_id[i], ps->cl_seq[i]});
}

/* n floats of `part` from data, in REPL_PIECEs of at most piece bytes. */
static int send_part(conn *c, uint8_t part, const float *data, size_t n, size_t piece,
                     uint32_t *frames) {
  size_t per = piece / sizeof(float);
  for (size_t off = 0; off < n; off += per) {
    size_t k = n - off < per ? n - off : per;
    wire_wr w;
    wire_wr_init(&w);
    wire_put_repl_piece(&w, &(wire_msg_repl_piece){
                                part, off, {(const uint8_t *)(data + off), (uint32_t)(k * 4)}});
    int rc = conn_send_wr(c, &w, WIRE_REPL_PIECE, 0);
    if (rc < 0) return rc;
    ++*frames;
  }
  return 0;
}

static int send_shard(conn *c, const shard *s, size_t piece, uint32_t *frames) {
  wire_wr w;
  wire_wr_init(&w);
  wire_msg_repl_shard m = {.var = s->var, .row0 = s->row0, .updates = s->updates,
                           .lr_scale = s->lr_scale, .acc_n = s->acc_n, .optim = s->cfg,
                           .shape = {.ndim = s->ndim}};
  memcpy(m.shape.shape, s->shape, sizeof m.shape.shape);
  wire_put_repl_shard(&w, &m);
  int rc = conn_send_wr(c, &w, WIRE_REPL_SHARD, 0);
  if (rc < 0) return rc;
  ++*frames;
  rc = send_part(c, WIRE_PIECE_VALUE, s->val->data, s->n, piece, frames);
  if (rc == 0 && s->acc_n) rc = send_part(c, WIRE_PIECE_ACC, s->acc, s->n, piece, frames);
  int ns = optim_nslots(&s->cfg);
  for (int j = 0; j < ns && rc == 0; j++)
    rc = send_part(c, (uint8_t)(WIRE_PIECE_SLOT0 + j), s->slots[j], s->n, piece, frames);
  return rc;
}

int ps__repl_send_sync(ps_server *ps, conn *c) {
  size_t piece = ps->repl_piece;
  int rc;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_repl_sync(&w, &(wire_msg_repl_sync){
                             .token = ps->token, .sync = ps->sync, .replicas = ps->replicas,
                             .target = ps->target, .version = ps->version,
                             .dropped = ps->dropped, .pushes = ps->pushes, .agg = ps->agg,
                             .restored = ps->restored, .capped = ps->capped,
                             .shards = (uint32_t)ps->nshards,
                             .clients = {(uint32_t)ps->ncl, .put = put_client, .ud = ps}});
  if ((rc = conn_send_wr(c, &w, WIRE_REPL_SYNC, 0)) < 0) return rc;
  uint32_t frames = 1;
  uint64_t bytes = 0;
  for (int i = 0; i < ps->nshards && rc == 0; i++) {
    const shard *s = &ps->shards[i];
    rc = send_shard(c, s, piece, &frames);
    bytes += (uint64_t)s->n * 4 * (1 + (s->acc_n > 0) + (uint64_t)optim_nslots(&s->cfg));
  }
  uint32_t tables = 0;
  if (rc == 0) rc = ps__repl_send_tables(ps, c, &frames, &tables);
  if (rc < 0) return rc;
  wire_wr_init(&w);
  wire_put_repl_sync_end(&w, &(wire_msg_repl_sync_end){(uint32_t)ps->nshards, bytes, tables});
  if ((rc = conn_send_wr(c, &w, WIRE_REPL_SYNC_END, 0)) < 0) return rc;
  log_info("state sent to the replica: %d shards, %llu bytes, %u sparse tables in %u frames of "
           "at most %zu bytes", ps->nshards, (unsigned long long)bytes, tables, frames + 1, piece);
  return 0;
}

/* ============================== replica =================================== */

static void stage_free(repl_stage *st) {
  if (!st) return;
  for (uint32_t i = 0; i < st->nshards; i++) ps__shard_clear(&st->shards[i]);
  free(st->shards);
  free(st->cl_id);
  free(st->cl_seq);
  ps__repl_tables_free(st->tables);
  free(st);
}

void ps__repl_sync_drop(ps_server *ps) {
  stage_free(ps->stage);
  ps->stage = NULL;
}

const peer *ps__repl_stage_from(const ps_server *ps) { return ps->stage ? ps->stage->from : NULL; }

/* REPL_SYNC: a new stream (one already under way is abandoned). */
static int on_begin(ps_server *ps, peer *pe, const uint8_t *pl, uint32_t len) {
  wire_msg_repl_sync m;
  int rc = wire_get_repl_sync(pl, len, &m);
  if (rc < 0) return rc;
  if (m.token != ps->token)
    return err_set(DRV_EPERM, "REPL_SYNC without the token the coordinator gave");
  if (m.shards > PS_REPL_MAX_SHARDS)
    return err_set(DRV_EPARSE, "REPL_SYNC of %u shards (at most %u)", m.shards,
                   PS_REPL_MAX_SHARDS);
  ps__repl_sync_drop(ps);
  repl_stage *st = calloc(1, sizeof *st);
  if (!st) return err_set(DRV_ENOMEM, "out of memory");
  st->from = pe;
  st->head = m;
  st->head.clients = (wire_items){0};
  st->frames = 1;
  st->shards = calloc((size_t)m.shards + 1, sizeof *st->shards);
  st->cl_id = calloc((size_t)m.clients.n + 1, sizeof *st->cl_id);
  st->cl_seq = calloc((size_t)m.clients.n + 1, sizeof *st->cl_seq);
  if (!st->shards || !st->cl_id || !st->cl_seq) {
    stage_free(st);
    return err_set(DRV_ENOMEM, "out of memory for a REPL_SYNC of %u shards", m.shards);
  }
  wire_rd r = wire_items_reader(&m.clients);
  for (uint32_t i = 0; i < m.clients.n; i++) {
    wire_item_repl_client it;
    wire_get_item_repl_client(&r, &it);
    st->cl_id[i] = it.client;
    st->cl_seq[i] = it.seq;
  }
  st->ncl = m.clients.n;
  ps->stage = st;
  return 0;
}

/* Floats expected in `part` of shard s. */
static size_t part_len(const shard *s, int part) {
  if (part == WIRE_PIECE_VALUE) return s->n;
  if (part == WIRE_PIECE_ACC) return s->acc_n ? s->n : 0;
  return part - WIRE_PIECE_SLOT0 < optim_nslots(&s->cfg) ? s->n : 0;
}

/* Whether the last shard received all its parts (none yet: true). */
static bool last_complete(const repl_stage *st) {
  if (st->nshards == 0) return true;
  const shard *s = &st->shards[st->nshards - 1];
  for (int p = 0; p <= WIRE_PIECE_LAST; p++)
    if (st->got[p] != part_len(s, p)) return false;
  return true;
}

/* The elements of a shape from the wire into *n; false when they overflow
 * what one shard can hold (its value, gradient sum and slots addressed in
 * bytes). */
static bool shape_numel(const wire_tensor *shape, size_t *n) {
  size_t cap = SIZE_MAX / sizeof(float) / (2 + OPTIM_MAX_SLOTS);
  *n = 1;
  for (int d = 0; d < shape->ndim; d++) {
    uint64_t k = (uint64_t)shape->shape[d];
    if (k != 0 && *n > cap / k) return false;
    *n *= (size_t)k;
  }
  return true;
}

static int on_shard(repl_stage *st, const uint8_t *pl, uint32_t len) {
  wire_msg_repl_shard m;
  int rc = wire_get_repl_shard(pl, len, &m);
  if (rc < 0) return rc;
  if (st->nshards >= st->head.shards)
    return err_set(DRV_EPARSE, "REPL_SHARD: more shards than the %u announced", st->head.shards);
  if (!last_complete(st)) return err_set(DRV_EPARSE, "REPL_SHARD before the last one was whole");
  if (st->nshards && m.var <= st->shards[st->nshards - 1].var)
    return err_set(DRV_EPARSE, "REPL_SHARD: var %u out of order", m.var);
  size_t n;
  if (!shape_numel(&m.shape, &n))
    return err_set(DRV_EPARSE, "REPL_SHARD: var %u's shape is too large", m.var);
  shard *s = &st->shards[st->nshards];
  wire_tensor zeros = m.shape; /* data NULL: values zeroed, pieces fill them */
  zeros.data = NULL;
  if ((rc = ps__shard_make(s, m.var, m.row0, &m.optim, &zeros)) < 0) return rc;
  st->nshards++; /* stage_free clears it from now on */
  s->updates = m.updates;
  s->lr_scale = m.lr_scale;
  s->acc_n = m.acc_n;
  if (m.acc_n && !(s->acc = aligned_alloc(64, ps__round64(s->n * sizeof(float) + 1))))
    return err_set(DRV_ENOMEM, "out of memory for var %u's gradient sum", m.var);
  memset(st->got, 0, sizeof st->got);
  return 0;
}

static int on_piece(repl_stage *st, const uint8_t *pl, uint32_t len) {
  wire_msg_repl_piece m;
  int rc = wire_get_repl_piece(pl, len, &m);
  if (rc < 0) return rc;
  if (st->nshards == 0) return err_set(DRV_EPARSE, "REPL_PIECE before any REPL_SHARD");
  shard *s = &st->shards[st->nshards - 1];
  size_t want = part_len(s, m.part), k = m.data.len / sizeof(float);
  if (m.data.len % sizeof(float) || k == 0 || m.offset != st->got[m.part] || k > want - st->got[m.part])
    return err_set(DRV_EPARSE, "REPL_PIECE: var %u part %u: %u bytes at %llu do not follow %zu of %zu",
                   s->var, m.part, m.data.len, (unsigned long long)m.offset, st->got[m.part], want);
  float *dst = m.part == WIRE_PIECE_VALUE ? s->val->data
               : m.part == WIRE_PIECE_ACC ? s->acc
                                          : s->slots[m.part - WIRE_PIECE_SLOT0];
  memcpy(dst + m.offset, m.data.p, m.data.len);
  st->got[m.part] += k;
  st->bytes += m.data.len;
  return 0;
}

/* REPL_SYNC_END: the staged state replaces the replica's. */
static int on_end(ps_server *ps, repl_stage *st, const uint8_t *pl, uint32_t len) {
  wire_msg_repl_sync_end m;
  int rc = wire_get_repl_sync_end(pl, len, &m);
  if (rc < 0) return rc;
  if (m.shards != st->head.shards || st->nshards != m.shards || !last_complete(st) ||
      m.bytes != st->bytes)
    return err_set(DRV_EPARSE, "REPL_SYNC_END: %u of %u shards, %llu of %llu bytes received",
                   st->nshards, m.shards, (unsigned long long)st->bytes,
                   (unsigned long long)m.bytes);
  struct ps_sparse *sp;
  if ((rc = ps__repl_tables_end(st->tables, m.tables, &sp)) < 0) return rc;
  ps_sparse_free(ps->sparse); /* the primary's tables, or none */
  ps->sparse = sp;
  ps__sparse_staged_drop(ps);
  for (int i = 0; i < ps->nshards; i++) ps__shard_clear(&ps->shards[i]);
  ps->nshards = 0;
  ps->ncl = 0;
  for (uint32_t i = 0; i < st->nshards && rc == 0; i++) {
    rc = ps__store_shard(ps, &st->shards[i]); /* taken over: cleared here on failure only */
    if (rc == 0) st->shards[i] = (shard){0};
  }
  for (uint32_t i = 0; i < st->ncl && rc == 0; i++) rc = ps__client_note(ps, st->cl_id[i], st->cl_seq[i]);
  const wire_msg_repl_sync *h = &st->head;
  ps->sync = h->sync;
  ps->replicas = h->replicas;
  ps->target = h->target;
  ps->version = h->version;
  ps->dropped = h->dropped;
  ps->pushes = h->pushes;
  ps->agg = h->agg;
  ps->restored = h->restored;
  ps->capped = h->capped;
  return rc;
}

int ps__repl_sync_frame(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl) {
  if (h->type == WIRE_REPL_SYNC) return on_begin(ps, pe, pl, h->len);
  repl_stage *st = ps->stage;
  if (!st || st->from != pe)
    return err_set(DRV_EPERM, "%s without a REPL_SYNC on this connection",
                   wire_type_name(h->type));
  st->frames++;
  int rc;
  switch (h->type) {
  case WIRE_REPL_SHARD: rc = on_shard(st, pl, h->len); break;
  case WIRE_REPL_PIECE: rc = on_piece(st, pl, h->len); break;
  case WIRE_REPL_TABLE:
  case WIRE_REPL_ROWS: /* after every shard, whole */
    rc = st->nshards == st->head.shards && last_complete(st)
             ? ps__repl_tables_frame(&st->tables, h, pl)
             : err_set(DRV_EPARSE, "%s before the last shard", wire_type_name(h->type));
    break;
  default: {
    rc = on_end(ps, st, pl, h->len);
    char msg[160];
    snprintf(msg, sizeof msg, "%u shards, %llu bytes in %u frames%s%s", st->nshards,
             (unsigned long long)st->bytes, st->frames, ps->capped ? ", capped (SYNC_STOP)" : "",
             rc == 0 && ps->sparse ? ", sparse tables" : "");
    ps->stage = NULL;
    stage_free(st);
    if (rc < 0) {
      ps__repl_notify(ps, rc, true, err_msg());
      return rc;
    }
    ps->primary = pe;
    ps->synced = true;
    log_info("replica of %s: %s, at version %llu", conn_peer(pe->c), msg,
             (unsigned long long)ps->version);
    ps__repl_notify(ps, 0, true, msg);
    return 0;
  }
  }
  if (rc < 0) ps__repl_sync_drop(ps);
  return rc;
}
