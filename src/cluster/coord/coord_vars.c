/* coord_vars.c - the model's variables on the ps nodes, seen from the
 * coordinator: connections to each ps, placement (greedy by size, large
 * variables split by rows), initial values (VAR_INIT) and pulling the
 * values back. The fit itself is in coord_fit.c. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "base/log.h"
#include "numeric/nn_sparse.h"
#include "proto/wire_msgs.h"

/* ============================== ps connections ============================ */

void coord__fail_fit(coord_fit_state *f, const char *fmt, ...) {
  char msg[sizeof f->c->failure];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  coord__fail(f->c, "%s", msg);
}

static void copy_shard(coord_fit_state *f, int ps, uint32_t var, const int64_t *shape, int ndim,
                       const uint8_t *data) {
  if (var >= (uint32_t)f->nvars) return;
  fvar *v = &f->vars[var];
  for (int s = 0; s < v->nshards; s++) {
    if (v->sh[s].ps != ps) continue;
    int64_t row = tensor_numel(v->value) / (v->value->shape[0] ? v->value->shape[0] : 1);
    if (ndim != v->value->ndim || shape[0] != v->sh[s].rows) return;
    memcpy(tensor_data(v->value) + v->sh[s].row0 * row, data,
           (size_t)(v->sh[s].rows * row) * sizeof(float));
  }
}

static int on_pull_reply(coord_fit_state *f, int ps, const uint8_t *pl, uint32_t len,
                         uint64_t *version) {
  wire_msg_pull_reply m;
  int rc = wire_get_pull_reply(pl, len, &m);
  if (rc < 0) return rc;
  *version = m.version;
  wire_rd r = wire_items_reader(&m.vars);
  for (uint32_t i = 0; i < m.vars.n; i++) {
    wire_item_var_tensor it;
    wire_get_item_var_tensor(&r, &it);
    copy_shard(f, ps, it.var, it.value.shape, it.value.ndim, it.value.data);
  }
  return 0;
}

static void ps_frame(conn *cn, const wire_header *h, const uint8_t *pl) {
  pslink *l = conn_ud(cn);
  coord_fit_state *f = l->f;
  char name[32];
  snprintf(name, sizeof name, "ps:%d", l->ps);
  switch (h->type) {
  case WIRE_VAR_INIT_OK:
  case WIRE_SPARSE_INIT_OK:
    coord__ps_replied(f, l->ps);
    return;
  case WIRE_SPARSE_DUMP_REPLY:
    if (coord__sparse_dump_reply(f, l->ps, pl, h->len) < 0) {
      coord__fail_fit(f, "%s: %s", name, err_msg());
      conn_close(cn, "bad SPARSE_DUMP_REPLY");
    }
    coord__ps_replied(f, l->ps);
    return;
  case WIRE_CHECKPOINT_OK:
  case WIRE_RESTORE_OK:
    coord__ckpt_frame(f, l->ps, h, pl);
    return;
  case WIRE_CKPT_FILE:
  case WIRE_CKPT_PIECE:
  case WIRE_CKPT_FILE_END:
    coord__xfer_frame(f, l->ps, h, pl);
    return;
  case WIRE_PULL_REPLY: {
    uint64_t version = 0;
    if (h->req == CK_PROBE_REQ) {
      coord__ckpt_frame(f, l->ps, h, pl);
      return;
    }
    if (on_pull_reply(f, l->ps, pl, h->len, &version) < 0) {
      coord__fail_fit(f, "%s: %s", name, err_msg());
      conn_close(cn, "bad PULL_REPLY");
    }
    if (h->req == SCALE_REQ) {
      coord__scale_probe_reply(f, l->ps, version);
      return;
    }
    if (h->req == STOP_REQ) {
      coord__sync_stop_reply(f, l->ps, version);
      return;
    }
    if (h->req == SYNC_PROBE_REQ) {
      if (f->ck.restoring) return; /* answered by the rollback's VAR_INIT: asked again after */
      if (f->probed[l->ps]) return; /* asked again after a promotion: counted already */
      f->probed[l->ps] = true;
      f->sync_reached++;
      if (f->sync_applied == 0 || (int64_t)version < f->sync_applied)
        f->sync_applied = (int64_t)version;
      rundir_event(&f->c->rd, "sync: %s applied %llu global steps", name,
                   (unsigned long long)version);
      return;
    }
    coord__ps_replied(f, l->ps);
    return;
  }
  case WIRE_PUSH_OK:
    return;
  case WIRE_ERROR: {
    char msg[512];
    wire_rd_error(pl, h->len, msg, sizeof msg);
    coord__fail_fit(f, "%s refused a request: %s", name, msg);
    return;
  }
  default:
    log_warn("%s sent an unexpected %s", name, wire_type_name(h->type));
    conn_close(cn, "unexpected frame");
  }
}

static void ps_ready(conn *cn) {
  pslink *l = conn_ud(cn);
  coord_fit_state *f = l->f;
  f->ps_ready++;
  /* a promoted primary: the early stop's phase it missed (before the
   * probe, which its target answers), and the end-of-fit probe the lost
   * one held, asked again */
  if (f->looping && f->sync && !f->ck.restoring && f->ps[l->ps] == cn)
    coord__sync_stop_again(f, l->ps);
  if (f->looping && f->sync && !f->ck.restoring && !f->probed[l->ps] && f->ps[l->ps] == cn)
    coord__send_sync_probe(f, l->ps);
}

void coord__ps_link_gone(coord_fit_state *f, int k) {
  f->ps[k] = NULL;
  coord__scale_ps_gone(f, k);
  coord__xfer_abort(f, k, "its connection closed during the transfer");
  /* A version probe or CHECKPOINT sent on it is never answered: without
   * this the checkpoint waits for good (a link to a promoted replica
   * that closed during its handshake) and no later one starts. */
  if (f->cfg) coord__ckpt_abandon(f, k);
  if (f->pend_ps[k] > 0) { /* the replies it owed will never come */
    f->pend_ps[k] = 0;
    f->lost_replies++;
    f->lost_reply_ps = k;
  }
}

static void ps_close(conn *cn, int err, const char *why) {
  pslink *l = conn_ud(cn);
  coord_fit_state *f = l->f;
  coord *c = f->c;
  if (f->ps[l->ps] == cn) coord__ps_link_gone(f, l->ps);
  if (conn_was_ready(cn)) f->ps_ready--;
  if (!conn_was_ready(cn)) {
    /* Never authenticated (refused, or its handshake dropped by a flood at
     * the ps): nothing was at stake; coord__connect_ps dials again. */
    if (err && !c->shutting_down) log_warn("connecting to ps:%d: %s", l->ps, why);
  } else if (c->opts.ps_replicas) {
    /* The node's loss, if it is one, promotes its replica or rolls back
     * (coord.c, coord_repl.c); otherwise the fit loop connects again. */
  } else if (!c->shutting_down && f->cfg) {
    coord__ckpt_ps_lost(f, l->ps); /* a ps that is not restarted fails the run (coord.c) */
  } else if (!f->c->shutting_down && err) {
    /* Between fits no data is at stake: a ps that died is counted once,
     * by its node's state (LOST), and a later fit that needs the link
     * dials it again and fails there if it cannot. Counting the link too
     * made one ps death "2 node failures". */
    log_warn("lost the connection to ps:%d: %s", l->ps, why);
    rundir_event(&c->rd, "lost the connection to ps:%d: %s", l->ps, why);
  }
  coord__conn_gone(c); /* may free c and f */
}

static const conn_cbs ps_cbs = {ps_ready, ps_frame, ps_close};

const char *coord__ps_data_transport(const coord *c, int node) {
  const coord_fit_state *f = c->fit;
  for (int k = 0; f && f->ps && k < f->nps; k++)
    if (f->ps[k] && coord__ps_node(c, k) == node) return conn_transport(f->ps[k]);
  return NULL;
}

/* Starts connecting to group k's ps. */
static int connect_one(coord_fit_state *f, int k) {
  coord *c = f->c;
  int i = coord__ps_node(c, k);
  f->links[k] = (pslink){f, k, {{0}}};
  coord__ps_coord_key(c, (uint32_t)c->nodes[i].index, &f->links[k].key);
  conn_opts o = {.secret = &f->links[k].key, .who = AUTH_WHO_NODE, .role = AUTH_ROLE_COORD,
                 .cbs = &ps_cbs, .ud = &f->links[k], .own_transport = true,
                 .transport = (int)c->transport};
  int rc = conn_connect(c->loop, c->nodes[i].host, c->nodes[i].port, &o, &f->ps[k]);
  if (rc < 0) {
    f->ps[k] = NULL;
    return rc;
  }
  c->open_conns++; /* ps_close follows */
  return 0;
}

/* Every link is up; one that closed before it was (a handshake a flood at
 * the ps dropped) is dialled again, at most every PS_REDIAL seconds. */
static bool ps_all_ready(coord *c, void *arg) {
  double *redial_at = arg;
  coord_fit_state *f = c->fit;
  double now = progress_now();
  if (now >= *redial_at) {
    for (int k = 0; k < f->nps; k++)
      if (!f->ps[k]) connect_one(f, k);
    *redial_at = now + PS_REDIAL;
  }
  return f->ps_ready == f->nps;
}

static bool nothing_pending(coord *c, void *arg) {
  (void)arg;
  const coord_fit_state *f = c->fit;
  for (int k = 0; k < f->nps; k++)
    if (f->pend_ps[k]) return false;
  return true;
}

int coord__ps_request(coord_fit_state *f, int k, wire_wr *w, uint8_t type, uint32_t req) {
  if (!f->ps[k]) {
    wire_wr_free(w);
    return err_set(DRV_ENODE, "ps:%d is not connected", k);
  }
  int rc = conn_send_wr(f->ps[k], w, type, req);
  if (rc < 0) return rc;
  f->pend_ps[k]++;
  return 0;
}

void coord__ps_replied(coord_fit_state *f, int k) {
  if (k < 0 || k >= f->nps || f->pend_ps[k] == 0) return;
  f->pend_ps[k]--;
}

double coord__reply_bound(const coord_fit_state *f) {
  double bytes = 0;
  for (int i = 0; i < f->nvars; i++) bytes += (double)tensor_numel(f->vars[i].value) * 4.0;
  return PS_REPLY_TIMEOUT + bytes / PS_REPLY_BYTES_PER_S;
}

/* Forgets what is outstanding: nobody waits for it any more. */
static void forget_replies(coord_fit_state *f) {
  memset(f->pend_ps, 0, (size_t)f->nps * sizeof *f->pend_ps);
  f->lost_replies = 0;
}

/* Group *arg's ps process is known gone: it exited, or its loss was
 * counted (a failure, or a restart on its way). */
static bool ps_node_gone(coord *c, void *arg) {
  const coord_node *n = &c->nodes[coord__ps_node(c, *(const int *)arg)];
  return c->failures || n->exited || n->state == NODE_LOST || n->state == NODE_RESTARTING;
}

int coord__wait_replies(coord_fit_state *f, const char *what) {
  double bound = coord__reply_bound(f);
  int rc = coord__pump(f->c, nothing_pending, NULL, bound, true);
  if (rc == DRV_ETIMEDOUT) {
    char who[256] = "";
    size_t len = 0;
    for (int k = 0; k < f->nps && len < sizeof who; k++)
      if (f->pend_ps[k] > 0) len += (size_t)snprintf(who + len, sizeof who - len, " ps:%d", k);
    rc = err_set(DRV_ETIMEDOUT, "no %s from%s within %.0f s", what, who, bound);
  } else if (rc == 0 && f->lost_replies > 0) {
    /* Its process may be gone too: that loss (a node failure, with its
     * exit status and log, or a restart) is the better message. */
    int k = f->lost_reply_ps;
    coord__pump(f->c, ps_node_gone, &k, LOST_NODE_GRACE, false);
    if (f->c->failures) rc = err_set(DRV_ENODE, "%s", f->c->failure);
    else rc = err_set(DRV_ENODE, "ps:%d was lost before it sent %s", k, what);
  }
  if (rc < 0) forget_replies(f);
  f->lost_replies = 0;
  return rc;
}

coord_fit_state *coord__fit_state(coord *c) {
  if (c->fit) return c->fit;
  coord_fit_state *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->c = c;
  f->nps = c->opts.count[ROLE_PS];
  f->ps = calloc((size_t)f->nps, sizeof *f->ps);
  f->links = calloc((size_t)f->nps, sizeof *f->links);
  f->probed = calloc((size_t)f->nps + 1, sizeof *f->probed);
  f->stop_seen = calloc((size_t)f->nps + 1, sizeof *f->stop_seen);
  f->pend_ps = calloc((size_t)f->nps + 1, sizeof *f->pend_ps);
  f->evaluator = -1;
  if (!f->ps || !f->links || !f->probed || !f->stop_seen || !f->pend_ps ||
      (f->producer = coord__sched_add_producer(c, &coord__fit_tasks, f)) < 0 ||
      (f->feed.producer = coord__sched_add_producer(c, &coord__feed_tasks, f)) < 0) {
    free(f->ps), free(f->links), free(f->probed), free(f->stop_seen), free(f->pend_ps), free(f);
    return NULL;
  }
  c->fit = f;
  return f;
}

void coord__ps_reconnect(coord_fit_state *f) {
  coord *c = f->c;
  if (!c->opts.ps_replicas || f->ck.restoring || c->shutting_down) return;
  for (int k = 0; k < f->nps; k++) {
    int i = coord__ps_node(c, k);
    if (f->ps[k] || !c->ctl[i] || c->nodes[i].state != NODE_READY) continue;
    if (connect_one(f, k) < 0) log_warn("ps group %d: %s", k, err_msg());
  }
}

int coord__connect_ps(coord *c) {
  coord_fit_state *f = c->fit;
  for (int k = 0; k < f->nps; k++) {
    if (f->ps[k]) continue;
    int rc = connect_one(f, k);
    if (rc < 0) return rc;
  }
  double redial_at = progress_now() + PS_REDIAL;
  int rc = coord__pump(c, ps_all_ready, &redial_at, PS_CONNECT_TIMEOUT, true);
  if (rc == DRV_ETIMEDOUT) return err_set(rc, "could not reach every ps within %g s", PS_CONNECT_TIMEOUT);
  return rc;
}

/* ============================== placement ================================= */

void coord__free_vars(coord_fit_state *f) {
  for (int i = 0; i < f->nvars; i++) free(f->vars[i].sh);
  free(f->vars);
  f->vars = NULL;
  f->nvars = 0;
  nn_param_list_free(&f->params);
  nn_param_list_free(&f->torch);
  coord__sparse_free(f);
  f->placed = false;
}

/* A worker pulls and pushes all its shards on one ps in one frame (PULL,
 * PULL_REPLY, PUSH; a primary forwards a PUSH in a REPL, 25 bytes more),
 * so what a ps holds must fit a frame: refused here, before any VAR_INIT,
 * with the remedy, rather than a ps closing the connection. load[s]:
 * elements on ps s. */
static int check_frames(coord_fit_state *f, const int64_t *load) {
  const uint64_t slack = 64u << 10; /* headers: the frame's, each variable's, REPL's */
  for (int s = 0; s < f->nps; s++) {
    uint64_t bytes = (uint64_t)load[s] * sizeof(float) + (uint64_t)f->nvars * 64 + slack;
    if (bytes <= WIRE_DEFAULT_MAX_FRAME) continue;
    return err_set(DRV_EINVAL,
                   "ps:%d would hold %.1f MiB of parameters, and a worker pulls and pushes "
                   "them in one frame of at most %u MiB: use more ps (a variable of "
                   "split_threshold elements or more is split by rows over all of them)",
                   s, (double)load[s] * sizeof(float) / (1 << 20), WIRE_DEFAULT_MAX_FRAME >> 20);
  }
  return 0;
}

/* Large variables are split by rows over every ps; the others go whole to
 * the least loaded ps, largest first (TensorFlow's greedy byte-size
 * strategy), so the load is balanced and the placement deterministic. */
int coord__place(coord_fit_state *f, nn_module *model) {
  coord__free_vars(f);
  int ntorch = 0;
  int rc = coord__sparse_place(f, model);
  if (rc == 0) rc = nn_collect_synced(model, false, &f->params, &f->ntrained);
  if (rc == 0) rc = nn_collect_synced(model, true, &f->torch, &ntorch);
  if (rc < 0) return rc;
  f->nvars = f->params.n;
  f->vars = calloc((size_t)f->nvars, sizeof *f->vars);
  int *order = malloc((size_t)f->nvars * sizeof *order);
  int64_t *load = calloc((size_t)f->nps, sizeof *load);
  if (!f->vars || !order || !load) {
    free(order), free(load);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  for (int i = 0; i < f->nvars; i++) order[i] = i, f->vars[i].value = f->params.items[i].value;
  for (int i = 1; i < f->nvars; i++) /* stable insertion sort, largest first */
    for (int j = i; j > 0 && tensor_numel(f->vars[order[j]].value) >
                                 tensor_numel(f->vars[order[j - 1]].value); j--) {
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  for (int k = 0; k < f->nvars && rc == 0; k++) {
    fvar *v = &f->vars[order[k]];
    int64_t rows = v->value->shape[0], numel = tensor_numel(v->value);
    bool split = f->nps > 1 && numel >= f->c->opts.split_threshold && rows >= f->nps;
    v->nshards = split ? f->nps : 1;
    v->sh = calloc((size_t)v->nshards, sizeof *v->sh);
    if (!v->sh) {
      rc = err_set(DRV_ENOMEM, "out of memory");
      break;
    }
    if (split) {
      int64_t row0 = 0;
      for (int s = 0; s < f->nps; s++) {
        int64_t r = rows / f->nps + (s < rows % f->nps);
        v->sh[s] = (shard){s, row0, r};
        load[s] += r * (numel / rows);
        row0 += r;
      }
    } else {
      int best = 0;
      for (int s = 1; s < f->nps; s++)
        if (load[s] < load[best]) best = s;
      v->sh[0] = (shard){best, 0, rows};
      load[best] += numel;
    }
  }
  free(order);
  if (rc == 0) rc = check_frames(f, load);
  free(load);
  if (rc == 0) f->placed = true;
  for (int i = 0; i < f->nvars && rc == 0; i++) {
    char where[512];
    size_t len = 0;
    for (int s = 0; s < f->vars[i].nshards && len < sizeof where; s++) {
      const shard *sh = &f->vars[i].sh[s];
      len += (size_t)snprintf(where + len, sizeof where - len, "%sps:%d rows %lld-%lld",
                              s ? ", " : "", sh->ps, (long long)sh->row0,
                              (long long)(sh->row0 + sh->rows - 1));
    }
    rundir_event(&f->c->rd, "placement %s: %s", f->params.items[i].name, where);
  }
  return rc;
}

/* The running statistics' "optimizer": workers push the change their
 * batches made (the values they pulled minus their own), which plain SGD
 * at rate 1 adds: async, every worker's change lands in turn; sync, the ps
 * averages the changes, so the statistics become the workers' average. */
static optim_cfg stats_cfg(void) {
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  c.lr = 1.0f;
  return c;
}

int coord__init_vars(coord_fit_state *f, const optim_cfg *opt) {
  const optim_cfg stats = stats_cfg();
  for (int i = 0; i < f->nvars; i++) {
    fvar *v = &f->vars[i];
    for (int s = 0; s < v->nshards; s++) {
      tensor *part = tensor_narrow(v->value, 0, v->sh[s].row0, v->sh[s].rows);
      if (!part) return DRV_ENOMEM;
      wire_wr w;
      wire_wr_init(&w);
      wire_put_var_init(&w, &(wire_msg_var_init){.var = (uint32_t)i,
                                                 .row0 = (uint64_t)v->sh[s].row0,
                                                 .mode = f->sync,
                                                 .replicas = f->replicas,
                                                 .target = (uint64_t)f->sync_target,
                                                 .optim = i < f->ntrained ? *opt : stats,
                                                 .value = {.t = part}});
      tensor_free(part);
      int rc = coord__ps_request(f, v->sh[s].ps, &w, WIRE_VAR_INIT, (uint32_t)i);
      if (rc < 0) return rc;
    }
  }
  return coord__sparse_init(f, opt);
}

/* PULL's variables for one ps, one per shard it holds: the cursor walks
 * the shards in order, as the encoder asks for them. */
typedef struct pull_cursor {
  const coord_fit_state *f;
  int ps, var, shard;
} pull_cursor;

static void put_var_id(wire_wr *w, void *ud, uint32_t i) {
  (void)i;
  pull_cursor *pc = ud;
  for (;;) {
    const fvar *v = &pc->f->vars[pc->var];
    if (pc->shard == v->nshards) {
      pc->var++, pc->shard = 0;
      continue;
    }
    if (v->sh[pc->shard++].ps == pc->ps) break;
  }
  wire_put_item_var_id(w, &(wire_item_var_id){(uint32_t)pc->var});
}

/* One PULL per ps for the variables (or shards) it holds. */
static int pull_once(coord *c) {
  coord_fit_state *f = c->fit;
  if (c->opts.ps_replicas) { /* a link lost to a promotion is made again first */
    int rc = coord__connect_ps(c);
    if (rc < 0) return rc;
  }
  for (int k = 0; k < f->nps; k++) {
    wire_wr w;
    wire_wr_init(&w);
    uint32_t n = 0;
    for (int i = 0; i < f->nvars; i++)
      for (int s = 0; s < f->vars[i].nshards; s++) n += f->vars[i].sh[s].ps == k;
    if (n == 0) {
      wire_wr_free(&w);
      continue;
    }
    pull_cursor pc = {f, k, 0, 0};
    /* min_version 0: the values as they are */
    wire_put_pull(&w, &(wire_msg_pull){0, {n, .put = put_var_id, .ud = &pc}});
    int rc = coord__ps_request(f, k, &w, WIRE_PULL, 0);
    if (rc < 0) {
      forget_replies(f); /* the ones sent are not waited for */
      return rc;
    }
  }
  int rc = coord__sparse_dump(f); /* the tables' rows, by SPARSE_DUMP */
  if (rc < 0) {
    forget_replies(f);
    return rc;
  }
  return coord__wait_replies(f, "PULL_REPLY");
}

/* With replicas, a primary lost during the pull is replaced by its
 * replica: the pull is made again there (once per ps at most). */
int coord__pull_all(coord *c) {
  int rc = pull_once(c);
  for (int tries = 1; rc == DRV_ENODE && c->opts.ps_replicas && !c->failures &&
                      tries <= c->fit->nps; tries++)
    rc = pull_once(c);
  return rc;
}

int coord_pull(coord *c, nn_module *model) {
  if (!c->fit || !c->fit->placed) return 0;
  nn_param_list now = {0};
  int ntrained = 0;
  int rc = nn_collect_synced(model, false, &now, &ntrained);
  bool same = rc == 0 && now.n == c->fit->nvars;
  for (int i = 0; same && i < now.n; i++) same = now.items[i].value == c->fit->vars[i].value;
  nn_param_list_free(&now);
  if (rc < 0) return rc;
  if (!same) return err_set(DRV_EINVAL, "cluster: this model is not the one the cluster trained");
  return coord__pull_all(c);
}

