/* coord_fit.c - training on the cluster: variable placement over the ps
 * nodes, their initial values, SETUP of workers and the evaluator, the
 * stream of train-step tasks and their results, evaluation, and pulling the
 * trained values back into the caller's model.
 *
 * Async data parallelism: each worker pulls the current values, computes
 * a gradient on a batch of its own data shard, and pushes it; each ps
 * applies pushes on arrival with the shard's own optimizer state. A
 * worker answers RESULT only once every ps acknowledged its push, so a
 * RESULT means "this step's update is applied".
 *
 * Sync (see coord_fit in coord.h and ps.c): VAR_INIT tells each ps the
 * mode, the gradients per update (n - k) and the fit's global steps. The
 * task stream is no longer a fixed count: trainers get tasks until every
 * ps has applied the last global step, which the coordinator learns from
 * a PULL of no variables with that min_version (the ps holds it until
 * then). Past that step a ps holds nothing and ignores pushes, so steps
 * still running end at once. A RESULT then means "this gradient was
 * accepted or dropped", and res->steps counts them all.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "coord_int.h"
#include "err.h"
#include "events.h"
#include "log.h"
#include "progress.h"

#define INFLIGHT_PER_WORKER 2 /* a queued task hides the RESULT -> TASK round trip */
#define PS_CONNECT_TIMEOUT 10.0
#define MAX_SHARDS 1024
#define TASK_QUEUED (-1) /* task owner: not sent yet, or back in the queue */
#define TASK_DONE (-2)
#define SYNC_PROBE_REQ 0xfffffff0u /* the PULL that waits for the last global step */

typedef struct shard {
  int ps;
  int64_t row0, rows;
} shard;

typedef struct fvar {
  tensor *value; /* the model's parameter (borrowed) */
  int nshards;
  shard *sh;
} fvar;

typedef struct pslink {
  coord_fit_state *f;
  int ps;
} pslink;

struct coord_fit_state {
  coord *c;
  int nps;
  conn **ps;       /* coordinator -> ps data connections */
  pslink *links;
  int ps_ready;
  nn_param_list params;
  fvar *vars;
  int nvars;
  bool placed;
  int pending; /* ps replies outstanding: VAR_INIT_OK, PULL_REPLY */
  /* the fit in progress (cfg NULL when none) */
  const train_cfg *cfg;
  int *trainers; /* node indices of chief and workers, shard order */
  int64_t *examples0; /* each trainer's example count when this fit began */
  int ntrainers;
  int evaluator; /* node index or -1 */
  const coord_fit_args *args; /* while a fit sets up or runs */
  bool *setup_ok;  /* per node: SETUP_OK came for this fit */
  /* Train-step tasks 1..total: owner[id] is the node running it, or
   * TASK_QUEUED / TASK_DONE, so a step retried after a loss counts once.
   * Steps of a lost node wait in `retry` (a ring) ahead of new ones. */
  int32_t *owner;
  uint64_t id_base; /* task k of this fit goes out as id_base + k: ids
                       stay unique across fits, so a late RESULT of an
                       earlier (interrupted) fit is told apart */
  int64_t *retry, retry_head, retry_len;
  int64_t total, next, done, per_epoch, examples;
  /* sync: global steps to apply, gradients per step, ps that applied
   * them all (replies to the probe) */
  int64_t sync_target, sync_applied;
  uint32_t replicas;
  int sync_reached;
  bool sync;
  int64_t epoch_seen, epoch_correct, epoch_no;
  double epoch_loss;
  bool epoch_has_acc;
  int evals_out;           /* EVAL sent, EVAL_RESULT not yet back */
  int64_t last_eval_step;  /* step of the last finished evaluation */
  int64_t local_eval_due;  /* step at which a local eval is owed, 0 none */
  bool eval_fresh;         /* an eval finished since the last on_progress */
  train_progress p;
  progress out;
  double t0;
  FILE *metrics;
  events_writer *events; /* events/coordinator/: TensorBoard's global view */
};

/* ============================== ps connections ============================ */

static void fail_fit(coord_fit_state *f, const char *fmt, const char *a, const char *b) {
  coord *c = f->c;
  c->failures++;
  coord_fail(c, fmt, a, b);
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
  wire_rd r;
  wire_rd_init(&r, pl, len);
  *version = wire_rd_u64(&r);
  uint32_t n = wire_rd_u32(&r);
  for (uint32_t i = 0; i < n && wire_rd_ok(&r); i++) {
    uint32_t var = wire_rd_u32(&r);
    int ndim;
    int64_t shape[TENSOR_MAXDIM];
    const uint8_t *data;
    if (wire_rd_tensor_view(&r, &ndim, shape, &data) == 0) copy_shard(f, ps, var, shape, ndim, data);
  }
  return wire_rd_done(&r, WIRE_PULL_REPLY);
}

static void ps_frame(conn *cn, const wire_header *h, const uint8_t *pl) {
  pslink *l = conn_ud(cn);
  coord_fit_state *f = l->f;
  char name[32];
  snprintf(name, sizeof name, "ps:%d", l->ps);
  switch (h->type) {
  case WIRE_VAR_INIT_OK:
    f->pending--;
    return;
  case WIRE_PULL_REPLY: {
    uint64_t version = 0;
    if (on_pull_reply(f, l->ps, pl, h->len, &version) < 0) {
      fail_fit(f, "%s: %s", name, drv_errmsg());
      conn_close(cn, "bad PULL_REPLY");
    }
    if (h->req == SYNC_PROBE_REQ) {
      f->sync_reached++;
      if (f->sync_applied == 0 || (int64_t)version < f->sync_applied)
        f->sync_applied = (int64_t)version;
      rundir_event(&f->c->rd, "sync: %s applied %llu global steps", name,
                   (unsigned long long)version);
      return;
    }
    f->pending--;
    return;
  }
  case WIRE_PUSH_OK:
    return;
  case WIRE_ERROR: {
    char msg[512];
    wire_rd_error(pl, h->len, msg, sizeof msg);
    fail_fit(f, "%s refused a request: %s", name, msg);
    return;
  }
  default:
    log_warn("%s sent an unexpected %s", name, wire_type_name(h->type));
    conn_close(cn, "unexpected frame");
  }
}

static void ps_ready(conn *cn) {
  pslink *l = conn_ud(cn);
  l->f->ps_ready++;
}

static void ps_close(conn *cn, int err, const char *why) {
  pslink *l = conn_ud(cn);
  coord_fit_state *f = l->f;
  if (f->ps[l->ps] == cn) f->ps[l->ps] = NULL;
  if (conn_was_ready(cn)) f->ps_ready--;
  if (!f->c->shutting_down && (err || f->cfg)) {
    char name[32];
    snprintf(name, sizeof name, "ps:%d", l->ps);
    fail_fit(f, "lost the connection to %s: %s", name, err ? why : "closed");
  }
}

static const conn_cbs ps_cbs = {ps_ready, ps_frame, ps_close};

static bool ps_all_ready(coord *c, void *arg) {
  (void)arg;
  return c->fit->ps_ready == c->fit->nps;
}

static bool nothing_pending(coord *c, void *arg) {
  (void)arg;
  return c->fit->pending == 0;
}

static coord_fit_state *fit_state(coord *c) {
  if (c->fit) return c->fit;
  coord_fit_state *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->c = c;
  f->nps = c->opts.count[ROLE_PS];
  f->ps = calloc((size_t)f->nps, sizeof *f->ps);
  f->links = calloc((size_t)f->nps, sizeof *f->links);
  f->evaluator = -1;
  if (!f->ps || !f->links) {
    free(f->ps), free(f->links), free(f);
    return NULL;
  }
  c->fit = f;
  return f;
}

static int connect_ps(coord *c) {
  coord_fit_state *f = c->fit;
  for (int k = 0; k < f->nps; k++) {
    if (f->ps[k]) continue;
    int i = coord_find_node(c, ROLE_PS, k);
    f->links[k] = (pslink){f, k};
    conn_opts o = {.secret = &c->secret, .cbs = &ps_cbs, .ud = &f->links[k]};
    int rc = conn_connect(c->loop, c->nodes[i].host, c->nodes[i].port, &o, &f->ps[k]);
    if (rc < 0) return rc;
  }
  int rc = coord_pump(c, ps_all_ready, NULL, PS_CONNECT_TIMEOUT, true);
  if (rc == DRV_ETIMEDOUT) return drv_error(rc, "could not reach every ps within %g s", PS_CONNECT_TIMEOUT);
  return rc;
}

/* ============================== placement ================================= */

static void free_vars(coord_fit_state *f) {
  for (int i = 0; i < f->nvars; i++) free(f->vars[i].sh);
  free(f->vars);
  f->vars = NULL;
  f->nvars = 0;
  nn_param_list_free(&f->params);
  f->placed = false;
}

/* Large variables are split by rows over every ps; the others go whole to
 * the least loaded ps, largest first (TensorFlow's greedy byte-size
 * strategy), so the load is balanced and the placement deterministic. */
static int place(coord_fit_state *f, nn_module *model) {
  free_vars(f);
  int rc = nn_collect_params(model, &f->params);
  if (rc < 0) return rc;
  f->nvars = f->params.n;
  f->vars = calloc((size_t)f->nvars, sizeof *f->vars);
  int *order = malloc((size_t)f->nvars * sizeof *order);
  int64_t *load = calloc((size_t)f->nps, sizeof *load);
  if (!f->vars || !order || !load) {
    free(order), free(load);
    return drv_error(DRV_ENOMEM, "out of memory");
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
      rc = drv_error(DRV_ENOMEM, "out of memory");
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

static int init_vars(coord_fit_state *f, const optim_cfg *opt) {
  for (int i = 0; i < f->nvars; i++) {
    fvar *v = &f->vars[i];
    for (int s = 0; s < v->nshards; s++) {
      tensor *part = tensor_narrow(v->value, 0, v->sh[s].row0, v->sh[s].rows);
      if (!part) return DRV_ENOMEM;
      wire_wr w;
      wire_wr_init(&w);
      wire_wr_u32(&w, (uint32_t)i);
      wire_wr_u64(&w, (uint64_t)v->sh[s].row0);
      wire_wr_u8(&w, f->sync);
      wire_wr_u32(&w, f->replicas);
      wire_wr_u64(&w, (uint64_t)f->sync_target);
      wire_wr_optim(&w, opt);
      wire_wr_tensor(&w, part);
      tensor_free(part);
      if (!f->ps[v->sh[s].ps]) return drv_error(DRV_ENODE, "ps:%d is not connected", v->sh[s].ps);
      f->pending++;
      int rc = conn_send_wr(f->ps[v->sh[s].ps], &w, WIRE_VAR_INIT, (uint32_t)i);
      if (rc < 0) return rc;
    }
  }
  return 0;
}

/* One PULL per ps for the variables (or shards) it holds. */
static int pull_all(coord *c) {
  coord_fit_state *f = c->fit;
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
    wire_wr_u64(&w, 0); /* min_version: the values as they are */
    wire_wr_u32(&w, n);
    for (int i = 0; i < f->nvars; i++)
      for (int s = 0; s < f->vars[i].nshards; s++)
        if (f->vars[i].sh[s].ps == k) wire_wr_u32(&w, (uint32_t)i);
    if (!f->ps[k]) {
      wire_wr_free(&w);
      return drv_error(DRV_ENODE, "ps:%d is not connected", k);
    }
    f->pending++;
    conn_send_wr(f->ps[k], &w, WIRE_PULL, 0);
  }
  return coord_pump(c, nothing_pending, NULL, 0, true);
}

int coord_pull(coord *c, nn_module *model) {
  if (!c->fit || !c->fit->placed) return 0;
  nn_param_list now = {0};
  int rc = nn_collect_params(model, &now);
  bool same = rc == 0 && now.n == c->fit->nvars;
  for (int i = 0; same && i < now.n; i++) same = now.items[i].value == c->fit->vars[i].value;
  nn_param_list_free(&now);
  if (rc < 0) return rc;
  if (!same) return drv_error(DRV_EINVAL, "cluster: this model is not the one the cluster trained");
  return pull_all(c);
}

/* ============================== setup ===================================== */

static void write_var_table(wire_wr *w, coord_fit_state *f) {
  wire_wr_u32(w, (uint32_t)f->nvars);
  for (int i = 0; i < f->nvars; i++) {
    fvar *v = &f->vars[i];
    wire_wr_str(w, f->params.items[i].name);
    wire_wr_u8(w, (uint8_t)v->value->ndim);
    for (int d = 0; d < v->value->ndim; d++) wire_wr_u64(w, (uint64_t)v->value->shape[d]);
    wire_wr_u32(w, (uint32_t)v->nshards);
    for (int s = 0; s < v->nshards; s++) {
      wire_wr_u32(w, (uint32_t)v->sh[s].ps);
      wire_wr_u64(w, (uint64_t)v->sh[s].row0);
      wire_wr_u64(w, (uint64_t)v->sh[s].rows);
    }
  }
}

static int send_setup(coord *c, int node, const coord_fit_args *a, const char *spec,
                      const dataset *d) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_str(&w, spec);
  wire_wr_str(&w, a->loss->ops->type);
  wire_wr_u64(&w, (uint64_t)a->cfg->batch);
  wire_wr_u64(&w, a->cfg->seed);
  write_var_table(&w, c->fit);
  wire_wr_tensor(&w, d->x);
  wire_wr_tensor(&w, d->y);
  c->fit->setup_ok[node] = false;
  coord_send(c, node, &w, WIRE_SETUP, 0);
  return 0;
}

static int model_spec(const coord_fit_args *a, char *spec, size_t n) {
  int len = nn_spec(a->model, spec, n);
  if (len < 0) return len;
  if ((size_t)len >= n || len >= WIRE_MAX_STR)
    return drv_error(DRV_EINVAL, "cluster: the model's description (%d characters) is longer than "
                                 "the protocol's %d", len, WIRE_MAX_STR - 1);
  return 0;
}

/* SETUP for trainer t (shard t of the training data). */
static int setup_trainer(coord *c, int t, const char *spec) {
  coord_fit_state *f = c->fit;
  const coord_fit_args *a = f->args;
  dataset *part;
  int rc = data_shard(a->train, t, f->ntrainers, &part);
  if (rc < 0)
    return drv_error(rc, "cluster: shard %d of %d of the training data: %s", t, f->ntrainers,
                     drv_errmsg());
  send_setup(c, f->trainers[t], a, spec, part);
  data_free(part);
  return 0;
}

static bool all_set_up(coord *c, void *arg) {
  (void)arg;
  coord_fit_state *f = c->fit;
  for (int t = 0; t < f->ntrainers; t++)
    if (!f->setup_ok[f->trainers[t]]) return false;
  return f->evaluator < 0 || !f->args->cfg->eval || f->setup_ok[f->evaluator];
}

/* A node restarting now gets its SETUP when it registers again
 * (coord_fit_node_back); the wait covers it too. */
static int setup_nodes(coord *c, const coord_fit_args *a) {
  coord_fit_state *f = c->fit;
  char spec[8192];
  int rc = model_spec(a, spec, sizeof spec);
  for (int t = 0; t < f->ntrainers && rc == 0; t++) rc = setup_trainer(c, t, spec);
  if (rc < 0) return rc;
  if (f->evaluator >= 0 && a->cfg->eval) send_setup(c, f->evaluator, a, spec, a->cfg->eval);
  return coord_pump(c, all_set_up, NULL, 0, true);
}

static int trainer_of(const coord_fit_state *f, int node) {
  for (int t = 0; t < f->ntrainers; t++)
    if (f->trainers[t] == node) return t;
  return -1;
}

void coord_fit_node_back(coord *c, int node) {
  coord_fit_state *f = c->fit;
  if (!f || !f->args) return;
  int t = trainer_of(f, node);
  char spec[8192];
  if (t < 0) return; /* only trainers come back */
  if (model_spec(f->args, spec, sizeof spec) < 0 || setup_trainer(c, t, spec) < 0) {
    char name[32];
    fail_fit(f, "%s: %s", coord_node_name(&c->nodes[node], name, sizeof name), drv_errmsg());
  }
}

void coord_fit_node_lost(coord *c, int node) {
  coord_fit_state *f = c->fit;
  if (!f) return;
  if (f->setup_ok) f->setup_ok[node] = false;
  if (!f->owner || !f->cfg) return;
  int64_t n = 0;
  for (int64_t id = 1; id <= f->next; id++) {
    if (f->owner[id] != node) continue;
    f->owner[id] = TASK_QUEUED;
    f->retry[(f->retry_head + f->retry_len++) % f->total] = id;
    n++;
  }
  char name[32];
  if (n)
    rundir_event(&c->rd, "retry %lld train step%s of %s", (long long)n, n == 1 ? "" : "s",
                 coord_node_name(&c->nodes[node], name, sizeof name));
}

/* ============================== task results ============================== */

static void metrics_line(coord_fit_state *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void metrics_line(coord_fit_state *f, const char *fmt, ...) {
  if (!f->metrics) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(f->metrics, "{\"time\":%.3f,", progress_now() - f->t0);
  vfprintf(f->metrics, fmt, ap);
  fputs("}\n", f->metrics);
  va_end(ap);
}

static int on_result(coord_fit_state *f, int node, const uint8_t *pl, uint32_t len) {
  wire_rd r;
  char msg[1024];
  wire_rd_init(&r, pl, len);
  uint64_t id = wire_rd_u64(&r);
  int32_t status = wire_rd_i32(&r);
  double loss = wire_rd_f64(&r);
  int64_t correct = wire_rd_i64(&r);
  uint64_t examples = wire_rd_u64(&r);
  wire_rd_str(&r, msg, sizeof msg);
  int rc = wire_rd_done(&r, WIRE_RESULT);
  if (rc < 0) return rc;
  if (id <= f->id_base || id - f->id_base > (uint64_t)f->total) {
    log_info("RESULT for task %llu of an earlier fit; ignored", (unsigned long long)id);
    return 0;
  }
  id -= f->id_base;
  if (id > (uint64_t)f->next)
    return drv_error(DRV_EPROTO, "RESULT for task %llu, which was never sent",
                     (unsigned long long)(id + f->id_base));
  coord_node *n = &f->c->nodes[node];
  char name[32];
  coord_node_name(n, name, sizeof name);
  int32_t owner = f->owner[id];
  if (owner >= 0 && f->c->nodes[owner].inflight > 0) f->c->nodes[owner].inflight--;
  if (owner == TASK_DONE) {
    log_info("%s: task %llu had already completed; ignored", name, (unsigned long long)id);
    return 0;
  }
  if (status != 0) {
    fail_fit(f, "%s: train step failed: %s", name, msg);
    return 0;
  }
  f->owner[id] = TASK_DONE;
  n->steps++;
  n->examples += (int64_t)examples;
  f->done++;
  f->examples += (int64_t)examples;
  int64_t epoch = (f->done - 1) / f->per_epoch + 1;
  if (epoch != f->epoch_no) {
    f->epoch_no = epoch;
    f->epoch_loss = 0, f->epoch_seen = f->epoch_correct = 0, f->epoch_has_acc = true;
  }
  f->epoch_loss += loss * (double)examples;
  f->epoch_seen += (int64_t)examples;
  if (correct < 0) f->epoch_has_acc = false;
  else f->epoch_correct += correct;
  metrics_line(f, "\"step\":%" PRId64 ",\"node\":\"%s\",\"loss\":%.6g,\"examples\":%" PRIu64, f->done,
               name, loss, examples);
  events_run_scalar(f->events, "train/loss", f->done, loss);
  if (correct >= 0 && examples > 0)
    events_run_scalar(f->events, "train/accuracy", f->done, (double)correct / (double)examples);
  double elapsed = progress_now() - f->t0;
  if (elapsed > 0)
    events_run_scalar(f->events, "train/examples_per_sec", f->done, (double)f->examples / elapsed);
  const train_cfg *cfg = f->cfg;
  if (cfg->eval && cfg->eval_every > 0 && f->done % cfg->eval_every == 0) {
    if (f->evaluator >= 0) {
      wire_wr w;
      wire_wr_init(&w);
      wire_wr_u64(&w, (uint64_t)f->done);
      f->evals_out++;
      coord_send(f->c, f->evaluator, &w, WIRE_EVAL, 0);
    } else {
      f->local_eval_due = f->done;
    }
  }
  return 0;
}

static void eval_done(coord_fit_state *f, int64_t step, double loss, double acc) {
  f->p.eval_loss = loss;
  f->p.eval_accuracy = acc;
  f->last_eval_step = step;
  f->eval_fresh = true;
  train_progress p = f->p;
  p.step = step;
  progress_eval(&f->out, &p);
  metrics_line(f, "\"step\":%" PRId64 ",\"eval_loss\":%.6g,\"eval_accuracy\":%.6g", step, loss,
               isnan(acc) ? -1.0 : acc);
  events_run_scalar(f->events, "eval/loss", step, loss);
  events_run_scalar(f->events, "eval/accuracy", step, acc); /* NaN: skipped */
}

static int on_eval_result(coord_fit_state *f, const uint8_t *pl, uint32_t len) {
  wire_rd r;
  char msg[1024];
  wire_rd_init(&r, pl, len);
  uint64_t step = wire_rd_u64(&r);
  int32_t status = wire_rd_i32(&r);
  double loss = wire_rd_f64(&r), acc = wire_rd_f64(&r);
  wire_rd_u64(&r);
  wire_rd_str(&r, msg, sizeof msg);
  int rc = wire_rd_done(&r, WIRE_EVAL_RESULT);
  if (rc < 0) return rc;
  if (f->evals_out > 0) f->evals_out--;
  if (status != 0) {
    fail_fit(f, "%s: evaluation failed: %s", "evaluator:0", msg);
    return 0;
  }
  eval_done(f, (int64_t)step, loss, acc);
  return 0;
}

int coord_fit_frame(coord *c, int node, const wire_header *h, const uint8_t *pl) {
  coord_fit_state *f = c->fit;
  if (!f) return drv_error(DRV_EPROTO, "%s outside a fit", wire_type_name(h->type));
  switch (h->type) {
  case WIRE_SETUP_OK:
    if (f->setup_ok) f->setup_ok[node] = true;
    return 0;
  case WIRE_RESULT:
    return f->cfg ? on_result(f, node, pl, h->len) : 0;
  case WIRE_EVAL_RESULT:
    return f->cfg ? on_eval_result(f, pl, h->len) : 0;
  default:
    return drv_error(DRV_EPROTO, "unexpected %s", wire_type_name(h->type));
  }
}

/* ============================== the fit loop ============================== */

/* The next task to send: a retried one first, else a new one; 0: none. */
static int64_t next_task(coord_fit_state *f) {
  while (f->retry_len > 0) {
    int64_t id = f->retry[f->retry_head];
    f->retry_head = (f->retry_head + 1) % f->total;
    f->retry_len--;
    if (f->owner[id] == TASK_QUEUED) return id; /* else it completed after all */
  }
  return f->next < f->total ? ++f->next : 0;
}

/* Sync: asks every ps to answer once it applied the last global step. */
static int send_sync_probes(coord_fit_state *f) {
  /* Probes of an interrupted earlier fit were answered by VAR_INIT (their
   * replies came before its VAR_INIT_OK): count this fit's only. */
  f->sync_reached = 0;
  f->sync_applied = 0;
  for (int k = 0; k < f->nps; k++) {
    if (!f->ps[k]) return drv_error(DRV_ENODE, "ps:%d is not connected", k);
    wire_wr w;
    wire_wr_init(&w);
    wire_wr_u64(&w, (uint64_t)f->sync_target);
    wire_wr_u32(&w, 0);
    int rc = conn_send_wr(f->ps[k], &w, WIRE_PULL, SYNC_PROBE_REQ);
    if (rc < 0) return rc;
  }
  return 0;
}

static bool sync_over(const coord_fit_state *f) { return f->sync_reached >= f->nps; }

static void dispatch(coord_fit_state *f) {
  coord *c = f->c;
  if (f->sync && sync_over(f)) return;
  for (int t = 0; t < f->ntrainers; t++) {
    int i = f->trainers[t];
    coord_node *n = &c->nodes[i];
    if (!c->ctl[i] || !f->setup_ok[i] || (n->state != NODE_READY && n->state != NODE_BUSY))
      continue;
    int64_t id;
    while (n->inflight < INFLIGHT_PER_WORKER && (id = next_task(f)) > 0) {
      wire_wr w;
      wire_wr_init(&w);
      wire_wr_u64(&w, f->id_base + (uint64_t)id);
      wire_wr_u8(&w, WIRE_TASK_TRAIN_STEP);
      wire_wr_u64(&w, 0);
      f->owner[id] = i;
      n->inflight++;
      n->state = NODE_BUSY;
      coord_send(c, i, &w, WIRE_TASK, 0);
    }
  }
}

static void update_progress(coord_fit_state *f) {
  train_progress *p = &f->p;
  p->step = f->done;
  p->epoch = f->epoch_no ? f->epoch_no : 1;
  p->loss = f->epoch_seen ? f->epoch_loss / (double)f->epoch_seen : NAN;
  p->accuracy = f->epoch_seen && f->epoch_has_acc ? (double)f->epoch_correct / (double)f->epoch_seen
                                                  : NAN;
  p->elapsed = progress_now() - f->t0;
  p->examples_per_sec = p->elapsed > 0 ? (double)f->examples / p->elapsed : 0;
  p->eta = p->step > 0 ? p->elapsed / (double)p->step * (double)(p->total_steps - p->step) : 0;
  for (int t = 0; t < f->ntrainers; t++) {
    coord_node *n = &f->c->nodes[f->trainers[t]];
    n->examples_per_sec = p->elapsed > 0 ? (double)(n->examples - f->examples0[t]) / p->elapsed : 0;
  }
}

static int local_eval(coord *c, const coord_fit_args *a, int64_t step) {
  coord_fit_state *f = c->fit;
  int rc = pull_all(c);
  double loss, acc;
  if (rc == 0)
    rc = train_evaluate(a->model, a->loss, a->cfg->eval, a->cfg->batch, &loss, &acc);
  if (rc < 0) return rc;
  eval_done(f, step, loss, acc);
  return 0;
}

static bool fit_finished(coord *c, void *arg) {
  (void)arg;
  coord_fit_state *f = c->fit;
  for (int t = 0; t < f->ntrainers; t++)
    if (c->nodes[f->trainers[t]].inflight) return false;
  if (f->sync) return sync_over(f) && f->evals_out == 0;
  return f->done >= f->total && f->evals_out == 0;
}

static bool turn_done(coord *c, void *arg) {
  (void)c;
  return *(int *)arg > 0 ? true : (++*(int *)arg, false);
}

/* Pumps one turn of the loop at a time, acting between turns. */
static int fit_loop(coord *c, const coord_fit_args *a) {
  coord_fit_state *f = c->fit;
  const train_cfg *cfg = a->cfg;
  while (!fit_finished(c, NULL)) {
    dispatch(f);
    int turn = 0;
    int rc = coord_pump(c, turn_done, &turn, 0, true);
    if (rc < 0) return rc;
    if (f->local_eval_due) {
      int64_t step = f->local_eval_due;
      f->local_eval_due = 0;
      if ((rc = local_eval(c, a, step)) < 0) return rc;
    }
    update_progress(f);
    progress_step(&f->out, &f->p, false);
    if (cfg->on_progress) {
      f->p.is_eval = f->eval_fresh;
      f->eval_fresh = false;
      if ((rc = cfg->on_progress(cfg->ud, &f->p)) != 0) return rc;
      f->p.is_eval = false;
    }
  }
  return 0;
}

static int plan(coord *c, const coord_fit_args *a) {
  coord_fit_state *f = c->fit;
  free(f->trainers);
  free(f->examples0);
  f->trainers = malloc((size_t)c->nnodes * sizeof *f->trainers);
  f->examples0 = malloc((size_t)c->nnodes * sizeof *f->examples0);
  if (!f->trainers || !f->examples0) return drv_error(DRV_ENOMEM, "out of memory");
  f->ntrainers = 0;
  f->evaluator = -1;
  for (int i = 0; i < c->nnodes; i++) {
    int role = c->nodes[i].role;
    if (role == ROLE_CHIEF || role == ROLE_WORKER) {
      f->examples0[f->ntrainers] = c->nodes[i].examples;
      f->trainers[f->ntrainers++] = i;
    }
    if (role == ROLE_EVALUATOR) f->evaluator = i;
  }
  if (a->train->n < f->ntrainers)
    return drv_error(DRV_EINVAL, "cluster: %lld training examples for %d workers",
                     (long long)a->train->n, f->ntrainers);
  const train_cfg *cfg = a->cfg;
  f->per_epoch = (a->train->n + cfg->batch - 1) / cfg->batch;
  f->total = cfg->epochs * f->per_epoch;
  if (cfg->max_steps > 0 && cfg->max_steps < f->total) f->total = cfg->max_steps;
  int64_t worker_steps = f->total;
  f->sync = a->sync;
  f->sync_target = f->sync_applied = 0;
  f->sync_reached = 0;
  f->replicas = 0;
  if (a->sync) {
    if (a->backup_workers < 0 || a->backup_workers >= f->ntrainers)
      return drv_error(DRV_EINVAL, "cluster: backup_workers is %d but there %s %d trainer%s",
                       a->backup_workers, f->ntrainers == 1 ? "is" : "are", f->ntrainers,
                       f->ntrainers == 1 ? "" : "s");
    f->replicas = (uint32_t)(f->ntrainers - a->backup_workers);
    f->sync_target = (worker_steps + f->replicas - 1) / f->replicas;
    /* Task ids: each trainer pushes at most once per global step (its
     * pushed versions only grow), plus the tasks in flight at the end. */
    f->total = f->ntrainers * (f->sync_target + 2 * INFLIGHT_PER_WORKER);
  }
  free(f->owner);
  free(f->retry);
  free(f->setup_ok);
  f->id_base += (uint64_t)f->next; /* past every id the previous fit sent */
  for (int t = 0; t < f->ntrainers; t++) c->nodes[f->trainers[t]].inflight = 0;
  f->owner = calloc((size_t)f->total + 1, sizeof *f->owner);
  f->retry = malloc((size_t)f->total * sizeof *f->retry);
  f->setup_ok = calloc((size_t)c->nnodes, sizeof *f->setup_ok);
  if (!f->owner || !f->retry || !f->setup_ok) return drv_error(DRV_ENOMEM, "out of memory");
  for (int64_t id = 0; id <= f->total; id++) f->owner[id] = TASK_QUEUED;
  f->retry_head = f->retry_len = 0;
  f->next = f->done = f->examples = 0;
  f->epoch_no = 0;
  f->evals_out = 0;
  f->last_eval_step = -1;
  f->local_eval_due = 0;
  memset(&f->p, 0, sizeof f->p);
  f->p.total_steps = f->sync ? f->sync_target * (int64_t)f->replicas : f->total;
  f->p.epochs = cfg->epochs;
  f->p.loss = f->p.accuracy = f->p.eval_loss = f->p.eval_accuracy = NAN;
  return 0;
}

static int fit_finish(coord *c, const coord_fit_args *a, int rc, train_result *res) {
  coord_fit_state *f = c->fit;
  if (rc == 0) rc = pull_all(c);
  if (rc == 0 && a->cfg->eval && f->last_eval_step != f->done) rc = local_eval(c, a, f->done);
  update_progress(f);
  progress_step(&f->out, &f->p, true);
  progress_end(&f->out);
  if (res) train_result_set(res, &f->p);
  for (int i = 0; i < c->nnodes; i++)
    if (c->nodes[i].state == NODE_BUSY) c->nodes[i].state = NODE_READY;
  if (f->metrics) fclose(f->metrics);
  f->metrics = NULL;
  events_run_flush(f->events);
  f->cfg = NULL;
  f->args = NULL;
  rundir_event(&c->rd, "fit %s: %lld steps", rc == 0 ? "done" : "failed", (long long)f->done);
  return rc;
}

int coord_fit(coord *c, const coord_fit_args *a, train_result *res) {
  if (res) {
    memset(res, 0, sizeof *res);
    res->loss = res->accuracy = res->eval_loss = res->eval_accuracy = NAN;
  }
  if (c->shut_down || c->shutting_down) return drv_error(DRV_EINVAL, "cluster: it was shut down");
  if (c->failures) return drv_error(DRV_ENODE, "cluster: %s", c->failure);
  const train_cfg *cfg = a->cfg;
  if (cfg->batch <= 0 || cfg->epochs <= 0)
    return drv_error(DRV_EINVAL, "cluster: batch and epochs must be positive");
  coord_fit_state *f = fit_state(c);
  if (!f) return drv_error(DRV_ENOMEM, "out of memory");
  int rc;
  f->args = a;
  if ((rc = plan(c, a)) < 0 || (rc = connect_ps(c)) < 0 || (rc = place(f, a->model)) < 0 ||
      (rc = init_vars(f, a->optim)) < 0 || (rc = coord_pump(c, nothing_pending, NULL, 0, true)) < 0 ||
      (rc = setup_nodes(c, a)) < 0 || (f->sync && (rc = send_sync_probes(f)) < 0)) {
    f->args = NULL;
    return rc;
  }
  char path[1200];
  f->metrics = fopen(rundir_file(&c->rd, "metrics.jsonl", path, sizeof path), "a");
  if (!f->events) f->events = events_run_open(c->rd.path, "coordinator");
  f->cfg = cfg;
  progress_init(&f->out, cfg->progress, cfg->progress_tty);
  f->t0 = progress_now();
  if (f->sync)
    rundir_event(&c->rd, "fit: sync, %lld global steps of %u gradients on %d workers, "
                 "%d variables over %d ps", (long long)f->sync_target, f->replicas, f->ntrainers,
                 f->nvars, f->nps);
  else
    rundir_event(&c->rd, "fit: %lld steps on %d workers, %d variables over %d ps",
                 (long long)f->total, f->ntrainers, f->nvars, f->nps);
  rc = fit_loop(c, a);
  return fit_finish(c, a, rc, res);
}

int64_t coord_global_steps(const coord *c) {
  return c->fit && c->fit->sync ? c->fit->sync_applied : 0;
}

/* ============================== teardown ================================== */

void coord_fit_close(coord *c) {
  coord_fit_state *f = c->fit;
  if (!f) return;
  for (int k = 0; k < f->nps; k++)
    if (f->ps[k]) conn_close(f->ps[k], "coordinator done");
}

void coord_fit_free(coord *c) {
  coord_fit_state *f = c->fit;
  if (!f) return;
  /* The ps connections were closed and their close callbacks have run:
   * coord_free pumps the loop before calling this. */
  c->fit = NULL;
  free_vars(f);
  free(f->trainers);
  free(f->examples0);
  free(f->owner);
  free(f->retry);
  free(f->setup_ok);
  if (f->metrics) fclose(f->metrics);
  events_run_close(f->events);
  free(f->ps);
  free(f->links);
  free(f);
}
