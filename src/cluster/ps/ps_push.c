/* ps_push.c - a ps applying gradients: PUSH checked (layout, shapes,
 * finite values), applied at once (async) or accumulated until `replicas`
 * of them arrived (sync), and a resent push (PUSH_ID) recognised and not
 * applied twice. ps.c serves the connections and calls ps__apply. */
#include "cluster/ps/ps.h"
#include "cluster/ps/ps_int.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "base/err.h"
#include "base/log.h"
#include "base/le.h"
#include "numeric/optim.h"
#include "cluster/ps/ps_sparse.h"
#include "proto/wire_msgs.h"

typedef struct push_item {
  shard *s;
  const uint8_t *grad; /* the floats in the frame (or in a link's ring): unaligned */
  const float *copy;   /* the checked copy in ps->scratch, or NULL (a very large push) */
} push_item;

/* Gradients of one PUSH up to this size are copied into the scratch all
 * at once, checked while they are copied; a larger one is checked where
 * it lies and copied shard by shard, so the scratch stays one shard. */
#define COPY_ALL_MAX ((size_t)64 << 20)

/* The first non-finite float of n at p (unaligned), or -1: one pass
 * over the exponents that vectorizes (all ones: Inf or NaN), then a
 * search only when there is something to find. */
static int64_t first_nonfinite(const uint8_t *p, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, p + 4 * i, sizeof u);
    bad |= (u & 0x7f800000u) == 0x7f800000u;
  }
  if (!bad) return -1;
  for (size_t i = 0; i < n; i++) {
    float g;
    memcpy(&g, p + 4 * i, sizeof g);
    if (!isfinite(g)) return (int64_t)i;
  }
  return -1;
}

/* The same pass copying the floats to dst (aligned, private) as it goes:
 * what is checked is the copy, which no peer can change afterwards (a
 * gradient read in place lies in memory the peer shares), and it costs
 * about one copy where a check and then a copy cost two. */
static int64_t copy_checked(float *dst, const uint8_t *p, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, p + 4 * i, sizeof u);
    bad |= (u & 0x7f800000u) == 0x7f800000u;
    memcpy(dst + i, &u, sizeof u);
  }
  return bad ? first_nonfinite((const uint8_t *)dst, n) : -1;
}

/* Who sent a frame, as the ps log names it: the identity the peer proved
 * at the handshake ("worker:1") and its address, so an operator finds the
 * node, not only a port. The primary forwarding a replicated push: c NULL. */
static const char *sender(const conn *c, char *buf, size_t n) {
  if (!c) return "the primary";
  if (conn_cap(c) != AUTH_CAP_NODE) snprintf(buf, n, "%s", conn_peer(c));
  else if (conn_role(c) == AUTH_ROLE_COORD) snprintf(buf, n, "the coordinator (%s)", conn_peer(c));
  else snprintf(buf, n, "%s:%u (%s)", wire_role_name(conn_role(c)), conn_index(c), conn_peer(c));
  return buf;
}

/* A NaN or Inf gradient would poison the variable for every worker: the
 * push is refused whole, naming the node it came from (the worker's own
 * error, at the coordinator, names the step too). */
static int refuse_nonfinite(const conn *c, uint32_t var, const uint8_t *grad, int64_t at) {
  float g;
  memcpy(&g, grad + 4 * at, sizeof g);
  char who[128];
  return err_set(DRV_ERANGE, "PUSH from %s refused: the gradient for var %u holds %s at "
                 "element %lld; no variable changed", sender(c, who, sizeof who), var,
                 isnan(g) ? "NaN" : g > 0 ? "Inf" : "-Inf", (long long)at);
}

static int grow_scratch(ps_server *ps, size_t n);

/* Every gradient finite, checked before any is applied, so that a bad
 * request changes nothing: checked as they are copied into the scratch
 * (each at a 64-byte boundary), or, past COPY_ALL_MAX, where they lie. */
static int push_check(ps_server *ps, const conn *c, push_item *it, uint32_t count) {
  size_t total = 0;
  for (uint32_t k = 0; k < count; k++) total += ps__round64(it[k].s->n * sizeof(float));
  bool copy = total <= COPY_ALL_MAX;
  if (copy && total) {
    int rc = grow_scratch(ps, total / sizeof(float));
    if (rc < 0) return rc;
  }
  size_t off = 0;
  for (uint32_t k = 0; k < count; k++) {
    shard *s = it[k].s;
    float *dst = ps->scratch + off / sizeof(float);
    int64_t at = copy ? copy_checked(dst, it[k].grad, s->n) : first_nonfinite(it[k].grad, s->n);
    if (at >= 0) return refuse_nonfinite(c, s->var, copy ? (const uint8_t *)dst : it[k].grad, at);
    it[k].copy = copy ? dst : NULL;
    off += ps__round64(s->n * sizeof(float));
  }
  return 0;
}

/* Reads and checks every gradient of a PUSH before applying any, so that a
 * bad request changes nothing. */
static int push_parse(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl,
                      push_item **out, uint32_t *nout, uint64_t *version) {
  wire_msg_push m;
  int rc = wire_get_push(pl, h->len, &m);
  if (rc < 0) return rc;
  *version = m.version;
  uint32_t count = m.vars.n;
  push_item *it = calloc((size_t)count + 1, sizeof *it);
  if (!it) return err_set(DRV_ENOMEM, "out of memory");
  wire_rd r = wire_items_reader(&m.vars);
  for (uint32_t k = 0; k < count && rc == 0; k++) {
    wire_item_var_tensor vt;
    wire_get_item_var_tensor(&r, &vt);
    uint32_t var = vt.var;
    int nd = vt.value.ndim;
    const int64_t *shape = vt.value.shape;
    /* Read in place (conn.h), the floats lie in the link's ring: what is
     * checked and applied is push_check's private copy. (Past COPY_ALL_MAX
     * they are checked there and copied after: a peer rewriting them in
     * between changes values only, and one that means to can send any
     * finite values anyway; the check is for a worker's honest NaN.) */
    it[k].grad = c ? conn_in_place(c, vt.value.data) : vt.value.data;
    int i = ps__shard_find(ps, var);
    if (i < 0) {
      rc = err_set(DRV_EINVAL, "PUSH: unknown var %u", var);
      break;
    }
    shard *s = &ps->shards[i];
    bool same = nd == s->ndim;
    for (int d = 0; same && d < nd; d++) same = shape[d] == s->shape[d];
    if (!same) {
      char a[96], b[96];
      rc = err_set(DRV_ESHAPE, "PUSH: gradient for var %u is %s but the shard is %s", var,
                   ps__shape_str(nd, shape, a, sizeof a), ps__shape_str(s->ndim, s->shape, b, sizeof b));
      break;
    }
    for (uint32_t j = 0; j < k; j++)
      if (it[j].s == s) {
        rc = err_set(DRV_EINVAL, "PUSH: var %u appears twice", var);
        break;
      }
    it[k].s = s;
  }
  if (rc == 0) rc = push_check(ps, c, it, count);
  if (rc < 0) {
    free(it);
    return rc;
  }
  *out = it;
  *nout = count;
  return 0;
}

static int grow_scratch(ps_server *ps, size_t n) {
  if (n <= ps->scratch_cap) return 0;
  float *p = aligned_alloc(64, ps__round64(n * sizeof(float)));
  if (!p) return err_set(DRV_ENOMEM, "out of memory for a %zu-element gradient", n);
  free(ps->scratch);
  ps->scratch = p;
  ps->scratch_cap = n;
  return 0;
}

/* One update of s from gradient g, at the rate the config's schedule
 * gives for this shard's update count: the step the ps is at (async: every
 * worker's push counts; sync: every aggregated step). */
static void update_shard(shard *s, const float *g) {
  const optim_cfg *c = &s->cfg;
  optim_cfg at;
  if (optim_sched_active(&c->sched)) {
    at = *c;
    at.lr = (float)optim_sched_lr(&c->sched, c->lr, s->updates,
                                  &(optim_plateau){.scale = s->lr_scale});
    c = &at;
  }
  optim_update(c, s->val->data, g, s->slots, s->n, ++s->updates);
}

/* One update of s from its checked gradient. */
static int apply(ps_server *ps, const push_item *it) {
  shard *s = it->s;
  const float *g = it->copy;
  int rc;
  if (!g) {
    if ((rc = grow_scratch(ps, s->n)) < 0) return rc;
    /* The frame's floats are not aligned (their offset depends on the
     * header sizes before them): copied where the kernels may load them. */
    memcpy(ps->scratch, it->grad, s->n * sizeof(float));
    g = ps->scratch;
  }
  if ((rc = ps__blob_own(s)) < 0) return rc;
  update_shard(s, g);
  return 0;
}

/* Sync: adds one gradient to s's sum for this version (the first one is
 * copied, so one replica's update is bit for bit an async one). */
static int accumulate(const push_item *it) {
  shard *s = it->s;
  const uint8_t *grad = it->copy ? (const uint8_t *)it->copy : it->grad;
  if (!s->acc && !(s->acc = aligned_alloc(64, ps__round64(s->n * sizeof(float) + 1))))
    return err_set(DRV_ENOMEM, "out of memory for var %u's gradient sum", s->var);
  if (s->acc_n++ == 0) {
    memcpy(s->acc, grad, s->n * sizeof(float));
    return 0;
  }
  for (size_t i = 0; i < s->n; i++) {
    float g;
    memcpy(&g, grad + 4 * i, sizeof g);
    s->acc[i] += g;
  }
  return 0;
}

/* Sync: ONE update per shard with the average of its summed gradients;
 * then the version moves on and the PULLs waiting for it are answered. */
static int apply_sync(ps_server *ps) {
  for (int i = 0; i < ps->nshards; i++) {
    shard *s = &ps->shards[i];
    if (s->acc_n == 0) continue;
    if (s->acc_n > 1) {
      float scale = 1.0f / (float)s->acc_n;
      for (size_t k = 0; k < s->n; k++) s->acc[k] *= scale;
    }
    int rc = ps__blob_own(s);
    if (rc < 0) return rc;
    update_shard(s, s->acc);
    s->acc_n = 0;
  }
  if (ps->sparse) { /* the step's summed rows, averaged over the same pushes */
    int rc = ps_sparse_apply_sync(ps->sparse, ps->agg, ps->version);
    if (rc < 0) return rc;
  }
  ps->agg = 0;
  ps->version++;
  ps__lr_scale_tick(ps);
  ps__ckpt_version_reached(ps);
  if (ps->version == ps->target)
    log_info("sync training: %llu updates applied, dropped %llu late gradients",
             (unsigned long long)ps->version, (unsigned long long)ps->dropped);
  ps__serve_held(ps);
  return 0;
}

/* Sync: whether a PUSH computed on `version` counts (*applied; not when
 * late or past the target), its gradients summed when it does. */
static int push_sync_dense(ps_server *ps, const push_item *it, uint32_t n, uint64_t version,
                           bool *applied) {
  *applied = false;
  /* The fit's updates are done; capped by SYNC_STOP, the gradients of the
   * version it is at are still summed (up to one update's worth) in case
   * the coordinator's final target is one further: a worker whose
   * gradient was ignored here would wait for that update for ever. */
  bool summing = ps->capped && version == ps->version && ps->agg < ps->replicas;
  if (ps->version >= ps->target && !summing) return 0;
  if (version > ps->version && ps->restored) { /* computed before a RESTORE rolled back */
    ps->dropped++;
    return 0;
  }
  if (version > ps->version)
    return err_set(DRV_EINVAL, "PUSH: gradient for version %llu but the ps is at version %llu",
                   (unsigned long long)version, (unsigned long long)ps->version);
  if (version < ps->version) {
    ps->dropped++;
    log_info("dropped a late gradient for version %llu (now %llu): %llu late gradients dropped",
             (unsigned long long)version, (unsigned long long)ps->version,
             (unsigned long long)ps->dropped);
    return 0;
  }
  for (uint32_t k = 0; k < n; k++) {
    int rc = accumulate(&it[k]);
    if (rc < 0) return rc;
  }
  *applied = true;
  return 0;
}

/* Sync: what a PUSH computed on `version` does, with the SPARSE_PUSHes its
 * sender sent before it (staged: ps__sparse_with_push, or its primary's
 * REPLs of them on a replica). */
static int push_sync(ps_server *ps, const push_item *it, uint32_t n, uint64_t version,
                     bool *applied) {
  int rc = push_sync_dense(ps, it, n, version, applied);
  if (rc == 0 && *applied) rc = ps__sparse_staged_apply(ps); /* they join the step */
  else ps__sparse_staged_drop(ps); /* late or past the target: dropped with it */
  if (rc < 0 || !*applied) return rc;
  /* at a barrier's version the update waits for the new quorum (no
   * trainer can have pulled it: belt and braces) */
  bool at_barrier = ps->hold_at && ps->version >= ps->hold_at;
  return ++ps->agg >= ps->replicas && ps->version < ps->target && !at_barrier ? apply_sync(ps) : 0;
}

/* ============================== barrier ================================== */

/* c:scale during a sync fit (coord_scale_fit.c) changes the quorum at one
 * version B of this ps, so that every update has one quorum, a leaving
 * worker's gradient never counts from B on and a joining one's only from
 * B on, whatever the workers' counts say (a backup worker's dropped
 * gradients, a restarted worker, skipped steps):
 *
 *   SYNC_STOP { hold_at = at, leave_from }: the barrier. B is at, or
 *     past every version a trainer has pulled here (a gradient of it may
 *     be on its way), or the version now: the highest. Trainers' PULLs of
 *     version B or later are held; the probe behind it (PULL, no
 *     variables) is answered once the version reaches B. With replicas
 *     too (a worker lost meanwhile): the quorum of the updates before B.
 *   SYNC_STOP { replicas, leave_from }: the new quorum from B on. The
 *     workers of index leave_from and up have left: their connections are
 *     closed (a PULL of theirs held at B fails; they are shutting down)
 *     and their PULLs held if they dial again. The held PULLs go on. */
static void barrier(ps_server *ps, uint64_t at, uint32_t leave_from) {
  uint64_t b = at > ps->version ? at : ps->version;
  if (ps->served && ps->served_hi + 1 > b) b = ps->served_hi + 1;
  if (ps->hold_at > b) b = ps->hold_at; /* asked again (a probe after a promotion) */
  ps->hold_at = b;
  ps->leave_pending = leave_from;
  log_info("sync training: barrier at update %llu (asked %llu, now %llu)", (unsigned long long)b,
           (unsigned long long)at, (unsigned long long)ps->version);
}

static void drop_leaving(ps_server *ps) {
  if (!ps->leave_from) return;
  char msg[96];
  for (int i = 0; i < ps->peers.n; i++) {
    peer *pe = ps->peers.items[i];
    if (pe->doomed || !pe->c || conn_role(pe->c) != ROLE_WORKER ||
        conn_index(pe->c) < ps->leave_from)
      continue;
    snprintf(msg, sizeof msg, "worker:%u left the cluster at update %llu (c:scale)",
             conn_index(pe->c), (unsigned long long)ps->version);
    ps__reject(pe, DRV_ENODE, msg);
  }
}

/* The new quorum, from the barrier's version on (or at once, without one:
 * a lost worker's); one already met is applied at once. */
static int quorum(ps_server *ps, uint32_t replicas, uint32_t leave_from) {
  log_info("sync training: %u gradients per update from update %llu (were %u)", replicas,
           (unsigned long long)ps->version + 1, ps->replicas);
  ps->replicas = replicas;
  ps->hold_at = 0;
  ps->leave_from = leave_from ? leave_from : ps->leave_pending;
  ps->leave_pending = 0;
  drop_leaving(ps);
  if (ps->version < ps->target && ps->agg >= ps->replicas) return apply_sync(ps);
  ps__serve_held(ps);
  return 0;
}

/* SYNC_STOP: a cap (target 0) ends the fit after the global step being
 * summed, but a ps at its cap still holds PULLs (the end-of-fit probe
 * too) and sums that step's gradients: the final target (the highest cap
 * of every ps, so that the shards end at the same global step) may lie
 * one further, and an update summed meanwhile is applied at once. The
 * PULLs the final target frees are answered and a CHECKPOINT waiting for
 * a version past it is taken. */
int ps__on_sync_stop(ps_server *ps, const wire_header *h, const uint8_t *pl) {
  wire_msg_sync_stop m;
  int rc = wire_get_sync_stop(pl, h->len, &m);
  if (rc < 0) return rc;
  if (!ps->sync) return 0; /* nothing to end: an async fit ends with its task stream */
  if (m.hold_at) {
    if (m.replicas) ps->replicas = m.replicas; /* a worker lost during the barrier */
    barrier(ps, m.hold_at, m.leave_from);
    if (ps->version < ps->target && ps->version < ps->hold_at && ps->agg >= ps->replicas)
      return apply_sync(ps);
    return 0;
  }
  if (m.replicas) return quorum(ps, m.replicas, m.leave_from);
  ps->hold_at = 0; /* a stop ends a barrier: the workers' last steps must not wait */
  if (m.target == 0) {
    if (ps->version + 1 < ps->target) ps->target = ps->version + 1;
    ps->capped = true;
  } else {
    ps->target = m.target > ps->version ? m.target : ps->version;
    ps->capped = false;
  }
  log_info("sync training stops early: %s at update %llu (now %llu)",
           m.target ? "ends" : "capped", (unsigned long long)ps->target,
           (unsigned long long)ps->version);
  if (ps->version < ps->target && ps->agg >= ps->replicas) return apply_sync(ps);
  ps__ckpt_version_reached(ps);
  ps__serve_held(ps); /* capped: the workers' next pulls wait for the end */
  return 0;
}

/* A PUSH answered again: the client sent it once more after a ps
 * failover and this ps (or the replica it was) took it already. */
static int push_again(ps_server *ps, conn *c, uint32_t req) {
  if (!c) return 0;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_push_ok(&w, &(wire_msg_push_ok){ps->sync ? ps->version : ps->pushes, true});
  return conn_send_wr(c, &w, WIRE_PUSH_OK, req);
}

/* client, seq: the PUSH_ID before it (0: none). */
static int on_push(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl,
                   uint32_t client, uint64_t seq) {
  if (client && ps__client_seen(ps, client, seq)) return push_again(ps, c, h->req);
  push_item *it = NULL;
  uint32_t n = 0;
  uint64_t version;
  int rc = push_parse(ps, c, h, pl, &it, &n, &version);
  if (rc < 0) return rc;
  bool applied = true;
  if (ps->sync) {
    rc = push_sync(ps, it, n, version, &applied);
  } else {
    rc = ps__sparse_staged_apply(ps); /* the rows at the version before this push's */
    for (uint32_t k = 0; k < n && rc == 0; k++) rc = apply(ps, &it[k]);
    if (rc == 0) ps->version++;
  }
  free(it);
  if (rc == 0 && client) rc = ps__client_note(ps, client, seq);
  if (rc < 0) return rc;
  if (applied) ps->pushes++;
  if (!c) return 0;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_push_ok(&w, &(wire_msg_push_ok){ps->sync ? ps->version : ps->pushes, applied});
  return conn_send_wr(c, &w, WIRE_PUSH_OK, h->req);
}

/* Whatever happens to the PUSH, the SPARSE_PUSHes staged with it go too:
 * the next PUSH has its own. */
int ps__on_push(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl,
                uint32_t client, uint64_t seq) {
  int rc = on_push(ps, c, h, pl, client, seq);
  ps__sparse_staged_drop(ps);
  return rc;
}
