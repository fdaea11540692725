/* ps.c - the parameter server role: variable shards with their optimizer
 * state, served over the ps's data port (VAR_INIT, PULL, PUSH).
 *
 * Async (the default): each PUSH is applied on arrival. Sync (VAR_INIT's
 * mode 1, like SyncReplicasOptimizer): the ps has a version, the number of
 * updates it applied this fit. A PUSH names the version its gradient was
 * computed on: one for the current version is summed into each shard's
 * accumulator, and the `replicas`-th of them applies ONE update with the
 * average; one for an older version is late and dropped (counted, logged).
 * A PULL with min_version above the version is held until that update, so
 * a worker's pull right behind its push gets the values after the
 * aggregation. Held replies may overtake later requests of the same
 * connection (clients match replies by request id; a worker sends nothing
 * while its pull is held). Once the version reaches the fit's target,
 * nothing is held any more and further pushes are ignored, so workers
 * still running steps at the end never wait for gradients that will not
 * come. A fit stopped early lowers the target (SYNC_STOP, ps_push.c and
 * coord_stop.c).
 *
 * Each shard keeps its values in a refcounted "blob" laid out as the whole
 * PULL_REPLY payload for that shard alone: version, count (1), var id,
 * tensor header (all from wire_put_pull_reply), then the floats, 64-byte
 * aligned for the optimizer kernels. A PULL of one
 * variable is then sent without copying (conn_send_ref), while a PULL of
 * several copies each shard's header+floats into one frame.
 *
 * Zero-copy and async updates: conn_send_ref only borrows the bytes until
 * the write completes, and a PUSH may arrive (and be applied) before that.
 * So the reply holds a reference on the blob, and a PUSH that finds its
 * shard's blob shared updates a fresh copy instead (copy-on-write): a reply
 * in flight always carries the values as they were when the PULL was
 * served, never a half-applied update.
 */
#include "cluster/ps/ps.h"
#include "cluster/ps/ps_int.h"
#include "cluster/ps/ps_sparse.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "net/conn.h"
#include "base/err.h"
#include "base/log.h"
#include "base/le.h"
#include "numeric/optim.h"
#include "base/safetensors.h"
#include "base/util.h"
#include "proto/wire_msgs.h"


/* The one item of a blob's PULL_REPLY, without its floats; `at` records
 * where in the frame it starts. */
typedef struct blob_head {
  wire_item_var_tensor item;
  size_t at;
} blob_head;

static void put_head(wire_wr *w, void *ud, uint32_t i) {
  (void)i;
  blob_head *bh = ud;
  bh->at = w->len - WIRE_HEADER_SIZE;
  wire_put_item_var_tensor(w, &bh->item);
}

/* A blob for `var` with the given shape; values uninitialised. */
static ps_blob *blob_new(uint32_t var, int ndim, const int64_t *shape, size_t n) {
  blob_head bh = {.item = {.var = var, .value = {.ndim = ndim}}}; /* data NULL: header only */
  memcpy(bh.item.value.shape, shape, (size_t)ndim * sizeof *shape);
  wire_wr hw;
  wire_wr_init(&hw);
  wire_put_pull_reply(&hw, &(wire_msg_pull_reply){0, {1, .put = put_head, .ud = &bh}});
  ps_blob *b = hw.err ? NULL : calloc(1, sizeof *b);
  if (!b) {
    wire_wr_free(&hw);
    return NULL;
  }
  b->hdr = hw.len - WIRE_HEADER_SIZE;
  b->item = bh.at;
  size_t pre = ps__round64(b->hdr);
  b->mem = aligned_alloc(64, pre + ps__round64(n * sizeof(float) + 1));
  if (!b->mem) {
    wire_wr_free(&hw);
    free(b);
    return NULL;
  }
  b->data = (float *)((uint8_t *)b->mem + pre);
  b->payload = (uint8_t *)b->data - b->hdr;
  b->len = b->hdr + n * sizeof(float);
  b->refs = 1;
  memcpy(b->payload, hw.buf + WIRE_HEADER_SIZE, b->hdr); /* version 0: set when served */
  wire_wr_free(&hw);
  return b;
}

static void blob_unref(void *arg) {
  ps_blob *b = arg;
  if (!b || --b->refs > 0) return;
  free(b->mem);
  free(b);
}

/* Makes s's blob private before it changes: a zero-copy reply may still
 * be reading the current one (copy-on-write, see the file comment). */
int ps__blob_own(shard *s) {
  if (s->val->refs == 1) return 0;
  ps_blob *nb = blob_new(s->var, s->ndim, s->shape, s->n);
  if (!nb) return err_set(DRV_ENOMEM, "out of memory for var %u", s->var);
  memcpy(nb->data, s->val->data, s->n * sizeof(float));
  blob_unref(s->val);
  s->val = nb;
  return 0;
}

void ps__shard_clear(shard *s) {
  blob_unref(s->val);
  free(s->acc);
  for (int k = 0; k < OPTIM_MAX_SLOTS; k++) free(s->slots[k]);
  memset(s, 0, sizeof *s);
}

/* Index of var's shard, or -(insertion point) - 1. */
int ps__shard_find(const ps_server *ps, uint32_t var) {
  int lo = 0, hi = ps->nshards - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (ps->shards[mid].var == var) return mid;
    if (ps->shards[mid].var < var)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -lo - 1;
}

const char *ps__shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t len = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < ndim && len < n; d++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (len < n) snprintf(buf + len, n - len, "]");
  return buf;
}

/* ============================== replies ================================== */

/* Sends ERROR {code, message} and closes the connection after it: a bad
 * request ends that client's connection only. Frames it sent after the
 * bad one are ignored (conn_shutdown drops them). */
static void reject(peer *pe, conn *c, int code, const char *msg) {
  log_warn("closing data connection %s: %s", conn_peer(c), msg);
  pe->doomed = true;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_error(&w, &(wire_msg_error){code, WIRE_STR(msg)});
  conn_send_wr(c, &w, WIRE_ERROR, 0);
  conn_shutdown(c, "bad request");
}

void ps__reject(peer *pe, int code, const char *msg) { reject(pe, pe->c, code, msg); }

static void reply_empty(conn *c, uint8_t type, uint32_t req) {
  if (!c) return; /* a replica applying its primary's frame */
  wire_wr w;
  wire_wr_init(&w);
  conn_send_wr(c, &w, type, req);
}

/* ============================== VAR_INIT ================================= */


/* A new fit: its mode, version 0, no gradient summed. */
static void sync_reset(ps_server *ps, bool sync, uint32_t replicas, uint64_t target) {
  /* Each variable's VAR_INIT calls this: say the mode when it changes. */
  bool news = sync && (!ps->sync || ps->replicas != replicas || ps->target != target);
  ps->target = 0; /* PULLs held from an earlier fit wait no more */
  ps__serve_held(ps);
  if (news)
    log_info("sync training: %u gradients per update, %llu updates", replicas,
             (unsigned long long)target);
  ps->sync = sync;
  ps->replicas = replicas;
  ps->target = target;
  ps->version = ps->dropped = 0;
  ps->lr_scale_next = 0;
  ps->agg = 0;
  ps->capped = false;
  ps->hold_at = ps->served_hi = 0, ps->served = false, ps->leave_from = 0;
  ps->leave_pending = 0;
  for (int i = 0; i < ps->nshards; i++) ps->shards[i].acc_n = 0;
}

int ps__store_shard(ps_server *ps, const shard *s) {
  int i = ps__shard_find(ps, s->var);
  if (i >= 0) {
    ps__shard_clear(&ps->shards[i]);
    ps->shards[i] = *s;
    return 0;
  }
  i = -i - 1;
  if (ps->nshards == ps->capshards) {
    int cap = ps->capshards ? 2 * ps->capshards : 16;
    shard *ns = realloc(ps->shards, (size_t)cap * sizeof *ns);
    if (!ns) return err_set(DRV_ENOMEM, "out of memory for the shard table");
    ps->shards = ns;
    ps->capshards = cap;
  }
  memmove(&ps->shards[i + 1], &ps->shards[i], (size_t)(ps->nshards - i) * sizeof *ps->shards);
  ps->shards[i] = *s;
  ps->nshards++;
  return 0;
}

int ps__shard_make(shard *s, uint32_t var, uint64_t row0, const optim_cfg *cfg,
                   const wire_tensor *value) {
  *s = (shard){.var = var, .row0 = row0, .cfg = *cfg, .ndim = value->ndim};
  memcpy(s->shape, value->shape, sizeof s->shape);
  s->n = 1;
  for (int d = 0; d < s->ndim; d++) s->n *= (size_t)s->shape[d];
  s->val = blob_new(s->var, s->ndim, s->shape, s->n);
  if (!s->val) return err_set(DRV_ENOMEM, "out of memory for var %u", s->var);
  if (value->data) memcpy(s->val->data, value->data, s->n * sizeof(float));
  else memset(s->val->data, 0, s->n * sizeof(float));
  int ns = optim_nslots(&s->cfg);
  for (int k = 0; k < ns; k++)
    if (!(s->slots[k] = aligned_alloc(64, ps__round64(s->n * sizeof(float) + 1)))) {
      ps__shard_clear(s);
      return err_set(DRV_ENOMEM, "out of memory for var %u's optimizer state", var);
    }
  optim_slots_init(&s->cfg, s->slots, s->n);
  return 0;
}

static int on_var_init(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl) {
  wire_msg_var_init m;
  int rc = wire_get_var_init(pl, h->len, &m);
  if (rc < 0) return rc;
  bool mode = m.mode;
  uint32_t replicas = m.replicas;
  uint64_t target = m.target;
  if (mode && replicas == 0) return err_set(DRV_EINVAL, "VAR_INIT: sync training with 0 replicas");
  shard s;
  if ((rc = ps__shard_make(&s, m.var, m.row0, &m.optim, &m.value)) < 0) return rc;
  if ((rc = ps__store_shard(ps, &s)) < 0) {
    ps__shard_clear(&s);
    return rc;
  }
  sync_reset(ps, mode, replicas, target);
  char shp[96];
  log_info("var %u: %s from row %llu, %s", s.var, ps__shape_str(s.ndim, s.shape, shp, sizeof shp),
           (unsigned long long)s.row0, optim_kind_name(s.cfg.kind));
  reply_empty(c, WIRE_VAR_INIT_OK, h->req);
  return 0;
}

/* ============================== PULL ===================================== */

/* Reads a PULL's variables into a new array of shard indices. */
static int pull_parse(ps_server *ps, const uint8_t *pl, uint32_t len, uint64_t *min_version,
                      int **out, uint32_t *nout) {
  wire_msg_pull m;
  int rc = wire_get_pull(pl, len, &m);
  if (rc < 0) return rc;
  *min_version = m.min_version;
  uint32_t count = m.vars.n;
  int *idx = malloc(((size_t)count + 1) * sizeof *idx);
  if (!idx) return err_set(DRV_ENOMEM, "out of memory");
  wire_rd r = wire_items_reader(&m.vars);
  for (uint32_t k = 0; k < count; k++) {
    wire_item_var_id v;
    wire_get_item_var_id(&r, &v);
    int i = ps__shard_find(ps, v.var);
    if (i < 0) {
      free(idx);
      return err_set(DRV_EINVAL, "PULL: unknown var %u", v.var);
    }
    idx[k] = i;
  }
  *out = idx;
  *nout = count;
  return 0;
}

typedef struct blob_list {
  const ps_server *ps;
  const int *idx;
} blob_list;

/* Item k of a PULL_REPLY of several shards: shard idx[k]'s item as its
 * blob has it encoded (var id, tensor header, floats). */
static void put_blob(wire_wr *w, void *ud, uint32_t k) {
  const blob_list *l = ud;
  const ps_blob *b = l->ps->shards[l->idx[k]].val;
  wire_wr_raw(w, b->payload + b->item, b->len - b->item);
}

/* Sends the PULL_REPLY for the shards idx[0..count) (consumed). */
static int pull_reply(ps_server *ps, conn *c, uint32_t req, int *idx, uint32_t count) {
  if (count == 1) {
    /* Zero-copy: the conn borrows the blob until the write is done; the
     * reference taken here keeps it (see the file comment for PUSH). The
     * version in its header is rewritten only in a blob no reply reads. */
    shard *s = &ps->shards[idx[0]];
    free(idx);
    ps_blob *b = s->val;
    /* The version is PULL_REPLY's first field, a u64. */
    if (le_get(b->payload, 8) != ps->version) {
      int rc = ps__blob_own(s);
      if (rc < 0) return rc;
      b = s->val;
      le_put(b->payload, ps->version, 8);
    }
    b->refs++;
    return conn_send_ref(c, WIRE_PULL_REPLY, req, b->payload, b->len, blob_unref, b);
  }
  /* Several shards in one frame: one copy each (the frame must be
   * contiguous), straight into a shared-memory link's ring when it has
   * room (conn_send_reserve), after which later pushes may update in
   * place. The payload: version, count, then each blob's item. */
  size_t len = 8 + 4;
  for (uint32_t k = 0; k < count; k++) {
    const ps_blob *b = ps->shards[idx[k]].val;
    len += b->len - b->item;
  }
  uint8_t *room = conn_send_reserve(c, len);
  if (!room) {
    free(idx);
    return err_set(DRV_EIO, "PULL_REPLY of %zu bytes: %s", len, err_msg());
  }
  wire_wr w;
  wire_wr_init_fixed(&w, room - WIRE_HEADER_SIZE, WIRE_HEADER_SIZE + len);
  blob_list l = {ps, idx};
  wire_put_pull_reply(&w, &(wire_msg_pull_reply){ps->version, {count, .put = put_blob, .ud = &l}});
  free(idx);
  if (w.err || w.len != WIRE_HEADER_SIZE + len) {
    conn_send_cancel(c);
    return err_set(DRV_EINVAL, "PULL_REPLY: %zu bytes encoded where %zu were reserved",
                   w.len - WIRE_HEADER_SIZE, len);
  }
  return conn_send_commit(c, WIRE_PULL_REPLY, req);
}

/* A worker's or the chief's connection (not the evaluator's nor the
 * coordinator's): the PULLs c:scale's barrier holds and counts. */
static bool trainer_peer(const peer *pe) {
  if (!pe || !pe->c) return false;
  int role = conn_role(pe->c);
  return role == ROLE_WORKER || role == ROLE_CHIEF;
}

/* A sync fit still summing updates: what may hold a PULL. */
static bool sync_live(const ps_server *ps) { return ps->sync && !ps->stopping && !ps__sync_done(ps); }

/* A trainer's PULL held by c:scale's barrier (ps_push.c): one of a
 * worker that left, or one that would get version hold_at or later. */
static bool barrier_holds(const ps_server *ps, const peer *pe) {
  if (!trainer_peer(pe) || !sync_live(ps)) return false;
  if (ps->leave_from && conn_role(pe->c) == ROLE_WORKER && conn_index(pe->c) >= ps->leave_from)
    return true;
  return ps->hold_at && ps->version >= ps->hold_at;
}

/* Whether a PULL for min_version must wait (sync, before the target). A
 * probe (no variables, the coordinator's) waits for the barrier too. */
static bool must_hold(const ps_server *ps, const peer *pe, uint64_t min_version, bool probe) {
  /* After a RESTORE rolled the version back, a worker's PULL behind a
   * push made before it asks for a version far ahead: it gets the
   * restored values now (a live one asks for exactly the next version). */
  if (ps->rs) return true; /* a RESTORE's file is being read: its values come first */
  if (!probe && barrier_holds(ps, pe)) return true;
  if (ps->restored && !probe && min_version > ps->version + 1) return false;
  if (probe && ps->hold_at && ps->version < ps->hold_at && sync_live(ps)) return true;
  return sync_live(ps) && min_version > ps->version;
}

/* A trainer got the values of this version: a barrier begins past it. */
static void note_served(ps_server *ps, const peer *pe) {
  if (!ps->sync || !trainer_peer(pe)) return;
  if (!ps->served || ps->version > ps->served_hi) ps->served_hi = ps->version;
  ps->served = true;
}

static int hold(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl,
                uint64_t min_version, bool probe) {
  if (ps->nheld == ps->capheld) {
    int cap = ps->capheld ? 2 * ps->capheld : 8;
    held_pull *nh = realloc(ps->held, (size_t)cap * sizeof *nh);
    if (!nh) return err_set(DRV_ENOMEM, "out of memory");
    ps->held = nh;
    ps->capheld = cap;
  }
  uint8_t *copy = malloc(h->len + 1);
  if (!copy) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(copy, pl, h->len);
  ps->held[ps->nheld++] = (held_pull){pe, h->req, min_version, copy, h->len, probe, h->type};
  return 0;
}

static void reject(peer *pe, conn *c, int code, const char *msg);

/* Answers the held PULLs that need wait no more, in arrival order. */
void ps__serve_held(ps_server *ps) {
  int keep = 0;
  for (int k = 0; k < ps->nheld; k++) {
    held_pull hp = ps->held[k];
    if (must_hold(ps, hp.pe, hp.min_version, hp.probe) && !hp.pe->doomed) {
      ps->held[keep++] = hp;
      continue;
    }
    uint64_t mv;
    int *idx;
    uint32_t count;
    int rc = 0;
    if (!hp.pe->doomed) note_served(ps, hp.pe);
    if (!hp.pe->doomed && hp.type == WIRE_SPARSE_PULL) {
      rc = ps__sparse_pull_reply(ps, hp.pe->c, hp.req, hp.payload, hp.len);
      if (rc < 0) reject(hp.pe, hp.pe->c, rc, err_msg());
    } else if (!hp.pe->doomed) {
      rc = pull_parse(ps, hp.payload, hp.len, &mv, &idx, &count);
      if (rc == 0) rc = pull_reply(ps, hp.pe->c, hp.req, idx, count);
      if (rc < 0) reject(hp.pe, hp.pe->c, rc, err_msg());
    }
    free(hp.payload);
  }
  ps->nheld = keep;
}

/* Forgets the held PULLs of a connection that closed. */
static void drop_held(ps_server *ps, const peer *pe) {
  int keep = 0;
  for (int k = 0; k < ps->nheld; k++)
    if (ps->held[k].pe == pe)
      free(ps->held[k].payload);
    else
      ps->held[keep++] = ps->held[k];
  ps->nheld = keep;
}

/* Fault injection for tests: DROVER_FAULT=die:ps:INDEX:coord-pull kills
 * this ps with SIGKILL when a PULL of variables comes from the
 * coordinator (what it sends as a fit ends, for a local eval and for
 * c:save), so that a loss while the coordinator waits for that reply is
 * certain; DROVER_FAULT_ONCE as for a worker (util_fault_first). */
static void maybe_die_at_pull(const ps_server *ps, const conn *c, uint32_t count) {
  const char *f = getenv("DROVER_FAULT");
  char want[64];
  snprintf(want, sizeof want, "die:ps:%u:coord-pull", ps->index);
  if (count == 0 || !f || strcmp(f, want) != 0 || conn_role(c) != AUTH_ROLE_COORD) return;
  if (!util_fault_first()) return;
  log_warn("DROVER_FAULT: SIGKILL at the coordinator's PULL");
  raise(SIGKILL);
}

static int on_pull(ps_server *ps, peer *pe, conn *c, const wire_header *h, const uint8_t *pl) {
  uint64_t min_version;
  int *idx;
  uint32_t count;
  int rc = pull_parse(ps, pl, h->len, &min_version, &idx, &count);
  if (rc < 0) return rc;
  maybe_die_at_pull(ps, c, count);
  if (must_hold(ps, pe, min_version, count == 0)) {
    free(idx);
    return hold(ps, pe, h, pl, min_version, count == 0);
  }
  if (count) note_served(ps, pe);
  return pull_reply(ps, c, h->req, idx, count);
}

/* SPARSE_PULL: held as a PULL is (sync), so that rows pulled behind a
 * push are the ones its update made. */
static int on_sparse_pull(ps_server *ps, peer *pe, conn *c, const wire_header *h,
                          const uint8_t *pl) {
  wire_msg_sparse_pull m;
  int rc = wire_get_sparse_pull(pl, h->len, &m);
  if (rc < 0) return rc;
  if (must_hold(ps, pe, m.min_version, false)) return hold(ps, pe, h, pl, m.min_version, false);
  note_served(ps, pe);
  return ps__sparse_pull_reply(ps, c, h->req, pl, h->len);
}

static int on_lr_scale(ps_server *ps, const uint8_t *pl, uint32_t len);

int ps__apply(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl, uint32_t client,
              uint64_t seq) {
  switch (h->type) {
  case WIRE_LR_SCALE: return on_lr_scale(ps, pl, h->len); /* no answer: none is asked for */
  case WIRE_VAR_INIT: return on_var_init(ps, c, h, pl);
  case WIRE_PUSH: return ps__on_push(ps, c, h, pl, client, seq);
  case WIRE_RESTORE: return ps__on_restore(ps, c, h, pl);
  case WIRE_SYNC_STOP: return ps__on_sync_stop(ps, h, pl);
  case WIRE_CKPT_FILE:
  case WIRE_CKPT_PIECE:
  case WIRE_CKPT_FILE_END: return ps__xfer_frame(ps, h, pl);
  case WIRE_SPARSE_INIT: return ps__on_sparse_init(ps, c, h, pl);
  case WIRE_SPARSE_LOAD: return ps__on_sparse_load(ps, c, h, pl);
  case WIRE_SPARSE_PUSH: return ps__sparse_stage_copy(ps, pl, h->len); /* for the PUSH after it */
  default: return err_set(DRV_EPARSE, "a ps does not apply %s", wire_type_name(h->type));
  }
}

/* ============================== connections ============================== */

static void peers_remove(peer_list *l, peer *pe) {
  for (int i = 0; i < l->n; i++)
    if (l->items[i] == pe) {
      l->items[i] = l->items[--l->n];
      return;
    }
}

static void free_shards(ps_server *ps) {
  for (int i = 0; i < ps->nshards; i++) ps__shard_clear(&ps->shards[i]);
  free(ps->shards);
  ps->shards = NULL;
  ps->nshards = ps->capshards = 0;
  free(ps->scratch);
  ps->scratch = NULL;
  ps->scratch_cap = 0;
  for (int k = 0; k < ps->nheld; k++) free(ps->held[k].payload);
  ps->nheld = 0;
}

static void data_ready(conn *c) {
  ps_server *ps = conn_ud(c);
  peer_list *l = &ps->peers;
  conn_set_accept(c, ps__accept(c));
  if (ps->stopping) {
    conn_close(c, "ps stopping");
    return;
  }
  peer *pe = calloc(1, sizeof *pe);
  if (pe && l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 8;
    peer **ni = realloc(l->items, (size_t)cap * sizeof *ni);
    if (ni) {
      l->items = ni;
      l->cap = cap;
    }
  }
  if (!pe || l->n == l->cap) {
    free(pe);
    conn_close(c, "out of memory");
    return;
  }
  pe->tag = TAG_PEER;
  pe->ps = ps;
  pe->c = c;
  l->items[l->n++] = pe;
  conn_set_ud(c, pe);
  /* A large PUSH on a shared-memory link is used where it lies (ps_push.c
   * takes its floats through conn_in_place, ps_repl.c copies it whole). */
  conn_set_in_place(c, true);
  log_info("data connection from %s", conn_peer(c));
}

/* Every shard the plateau schedule drives (not running statistics) and
 * every table with the schedule at `scale` from the next update on. The
 * log names the version (global steps applied) it came after: tests
 * rebuild the run from it. */
static void set_lr_scale(ps_server *ps, double scale) {
  for (int i = 0; i < ps->nshards; i++)
    if (ps->shards[i].cfg.sched.kind == OSCHED_PLATEAU) ps->shards[i].lr_scale = scale;
  int tables = ps->sparse ? ps_sparse_set_lr_scale(ps->sparse, scale) : 0;
  log_info("learning rate scaled by %g (plateau) after version %llu, %d sparse tables", scale,
           (unsigned long long)ps->version, tables);
}

void ps__lr_scale_tick(ps_server *ps) {
  if (ps->lr_scale_next > 0 && ps->version >= ps->lr_scale_after) {
    set_lr_scale(ps, ps->lr_scale_next);
    ps->lr_scale_next = 0;
  }
}

/* LR_SCALE: the coordinator's plateau schedule reduced the rate, from
 * now on or (sync) from the update after global step m.after, which this
 * ps may not have reached yet: then it waits (ps__lr_scale_tick), so
 * that every ps changes rate at the same step. Replicated like a PUSH,
 * so a promoted replica goes on at the scaled rate. */
static int on_lr_scale(ps_server *ps, const uint8_t *pl, uint32_t len) {
  wire_msg_lr_scale m;
  int rc = wire_get_lr_scale(pl, len, &m);
  if (rc < 0) return rc;
  if (!(m.scale > 0 && m.scale <= 1))
    return err_set(DRV_EPARSE, "LR_SCALE: scale must be in (0, 1] (got %g)", m.scale);
  ps->lr_scale_next = 0; /* a newer one replaces one still waiting */
  if (ps->sync && m.after > ps->version) {
    ps->lr_scale_next = m.scale, ps->lr_scale_after = m.after;
    return 0;
  }
  set_lr_scale(ps, m.scale);
  return 0;
}

static void data_frame(conn *c, const wire_header *h, const uint8_t *pl) {
  peer *pe = conn_ud(c);
  ps_server *ps = pe->ps;
  int rc;
  if (pe->doomed) return;
  bool replica = ps->role == WIRE_PS_REPLICA;
  uint32_t client = 0;
  uint64_t seq = 0;
  switch (h->type) {
  case WIRE_PUSH_ID: {
    wire_msg_push_id m;
    if ((rc = wire_get_push_id(pl, h->len, &m)) == 0) pe->next_client = m.client, pe->next_seq = m.seq;
    break;
  }
  case WIRE_VAR_INIT:
  case WIRE_PUSH:
  case WIRE_RESTORE:
  case WIRE_SYNC_STOP:
  case WIRE_LR_SCALE:
  case WIRE_CKPT_FILE: /* a RESTORE's file: the replica gets it too */
  case WIRE_CKPT_PIECE:
  case WIRE_CKPT_FILE_END:
  case WIRE_SPARSE_INIT:
  case WIRE_SPARSE_LOAD:
    if (replica) goto not_primary;
    if (h->type == WIRE_PUSH) { /* its PUSH_ID, if one came before it */
      pe->pushed = true; /* a RESTORE closes it (ps_ckpt.c) */
      client = pe->next_client, seq = pe->next_seq;
      pe->next_client = 0;
      rc = ps__sparse_with_push(ps, pe); /* its SPARSE_PUSHes go first */
      if (rc < 0) break;
    }
    rc = ps__repl_forward(ps, pe, h, pl, client, seq); /* the replica first, then here */
    if (rc == 0) rc = ps__apply(ps, c, h, pl, client, seq);
    break;
  case WIRE_PULL:
    if (replica) goto not_primary;
    rc = on_pull(ps, pe, c, h, pl);
    break;
  case WIRE_SPARSE_PULL:
    if (replica) goto not_primary;
    rc = on_sparse_pull(ps, pe, c, h, pl);
    break;
  case WIRE_SPARSE_PUSH:
    if (replica) goto not_primary;
    rc = ps__on_sparse_push(ps, pe, h, pl);
    break;
  case WIRE_SPARSE_DUMP:
    if (replica) goto not_primary;
    rc = ps__on_sparse_dump(ps, c, h, pl);
    break;
  case WIRE_CHECKPOINT:
    if (replica) goto not_primary;
    rc = ps__on_checkpoint(ps, pe, h, pl);
    break;
  case WIRE_REPL_SYNC:
  case WIRE_REPL_SHARD:
  case WIRE_REPL_PIECE:
  case WIRE_REPL_SYNC_END:
  case WIRE_REPL_TABLE:
  case WIRE_REPL_ROWS:
  case WIRE_REPL: rc = ps__repl_frame(ps, pe, h, pl); break;
  case WIRE_HEARTBEAT: return; /* harmless keep-alive from a client */
  default:
    rc = err_set(DRV_EPARSE, "a ps does not serve %s", wire_type_name(h->type));
  }
  if (rc < 0) reject(pe, c, rc, err_msg());
  return;
not_primary: /* a client early after a promotion comes again (SPEC, back-off) */
  reject(pe, c, DRV_ENODE, "this ps is a replica: it serves its primary only");
}

static void data_close(conn *c, int err, const char *why) {
  const int *tag = conn_ud(c);
  if (*tag == TAG_SERVER) { /* never authenticated */
    const ps_server *ps = conn_ud(c);
    if (err && !ps->stopping) log_warn("data connection %s dropped: %s", conn_peer(c), why);
    return;
  }
  peer *pe = conn_ud(c);
  if (err && !pe->ps->stopping) log_warn("data connection %s closed: %s", conn_peer(c), why);
  peers_remove(&pe->ps->peers, pe);
  drop_held(pe->ps, pe);
  ps__xfer_peer_gone(pe->ps, c);
  ps__ckpt_peer_gone(pe->ps, pe);
  ps__restore_peer_gone(pe->ps, c);
  ps__repl_peer_gone(pe->ps, pe);
  ps__sparse_pending_free(pe);
  free(pe);
}

static const conn_cbs data_cbs = {data_ready, data_frame, data_close};

/* ============================== lifetime ================================= */

int ps_start(uv_loop_t *loop, const keyring *keys, uint32_t index, const char *host,
             ps_server **out, int *port) {
  *out = NULL;
  size_t piece;
  int rc = ps__repl_piece_bytes(&piece);
  if (rc < 0) return rc;
  ps_server *ps = calloc(1, sizeof *ps);
  if (!ps) return err_set(DRV_ENOMEM, "out of memory");
  ps->repl_piece = piece;
  ps->tag = TAG_SERVER;
  ps->loop = loop;
  ps->keys = keys;
  ps->index = index;
  /* The cluster's transport comes with REGISTERED, after this listen: a
   * listener for same-host links whatever this process's own mode, which
   * says only whether it is offered until then (ps_set_offer). */
  ps->opts = (conn_opts){.secret = &keys->root, .derive_node_keys = true, .cbs = &data_cbs, .ud = ps,
                         .server_kind = 1, .own_transport = true, .transport = CONN_TRANSPORT_AUTO};
  conn_transport_mode mode = conn_get_transport();
  rc = conn_listen(loop, host, 0, &ps->opts, &ps->server, port);
  if (rc < 0) {
    free(ps);
    return rc;
  }
  conn_server_set_offer(ps->server, mode != CONN_TRANSPORT_TCP);
  *out = ps;
  return 0;
}

void ps_set_offer(ps_server *ps, bool offer) {
  if (ps && ps->server) conn_server_set_offer(ps->server, offer);
}

void ps_stop(ps_server *ps) {
  if (!ps || ps->stopping) return;
  ps->stopping = true;
  conn_server_close(ps->server);
  ps->server = NULL;
  ps__repl_stop(ps);
  /* Blobs lent to queued zero-copy replies stay alive through their own
   * references until conn drops those writes. */
  free_shards(ps);
  /* on_close removes each conn from the list (from the loop, later). */
  for (int i = 0; i < ps->peers.n; i++) conn_close(ps->peers.items[i]->c, "ps stopping");
}

void ps_free(ps_server *ps) {
  if (!ps) return;
  free_shards(ps);
  ps__ckpt_free_spare(ps);
  ps__xfer_drop(ps);
  if (ps->server) conn_server_close(ps->server);
  free(ps->peers.items);
  free(ps->held);
  ps_sparse_free(ps->sparse);
  ps__sparse_staged_drop(ps);
  free(ps->spq);
  ps__repl_free(ps);
  free(ps);
}

uint64_t ps_updates(const ps_server *ps) { return ps->pushes; }
