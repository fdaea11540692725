/* coord_fit.c - training on the cluster: SETUP of workers and the
 * evaluator, the stream of train-step tasks and their results (retried
 * once lost, counted once), evaluation, and the result. The variables on
 * the ps nodes (placement, initial values, pulling them back into the
 * caller's model) are in coord_vars.c.
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
 * accepted or dropped" and says which: a dropped one (a backup worker's,
 * one past the last global step) is no step of the fit and is not
 * counted, so res->steps, the epoch's loss, metrics.jsonl and progress
 * cover exactly the gradients the ps applied. A trainer is handed no
 * step past the last global step it can take part in (coord__fit_ready),
 * so without backup workers none is computed in vain.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"
#include "train/bineval.h"

/* SETUP of the trainers and the evaluator is in coord_setup.c. */

void coord__fit_node_lost(coord *c, int node) {
  coord_fit_state *f = c->fit;
  if (f && f->setup_ok) f->setup_ok[node] = false; /* SETUP again when it is back */
  if (f && f->taken) f->taken[node] = 0;          /* a new process: its own global steps */
  if (f && f->fresh) f->fresh[node] = true;
  if (f) coord__pos_node_lost(f, node);
  if (f) coord__feeders_node_lost(f, node);
  if (f && c->nodes[node].role == ROLE_PS) coord__ckpt_ps_lost(f, coord__ps_group(c, node));
}

void coord__fit_ps_promoted(coord *c, int k) {
  coord_fit_state *f = c->fit;
  if (!f) return;
  coord__ckpt_abandon(f, k); /* the lost primary's half of it will not come */
  if (f->ps[k]) { /* the link to the lost primary: the fit loop connects to the new one */
    conn *cn = f->ps[k];
    coord__ps_link_gone(f, k); /* a reply it owed comes from the new primary, asked again */
    conn_close(cn, "the ps group's primary changed");
  }
}

bool coord__fit_running(const coord *c) { return c->fit && c->fit->cfg; }

/* Sync: a worker's pull after its push waits for the next global step,
 * so each of its gradients is for a later step than the one before: one
 * whose applied gradients and steps in flight make sync_target already
 * could only compute a gradient the ps drops. Handing it none keeps a
 * step past the end from running at all (it used to, when the queue had
 * sent it before the coordinator learned the last step was applied). */
static bool sync_spent(const coord_fit_state *f, int node) {
  if (!f->sync || !f->taken) return false;
  return f->taken[node] + f->c->nodes[node].inflight >= f->sync_target;
}

/* The fit as the queue's producer: a node takes train steps once it is
 * set up for this fit. */
bool coord__fit_ready(void *ud, int node) {
  coord_fit_state *f = ud;
  return f->cfg && f->setup_ok && f->setup_ok[node] && !f->ck.restoring && !sync_spent(f, node) &&
         !coord__scale_holds(f, node);
}

void coord__fit_taken_reset(coord_fit_state *f) {
  if (f->taken) memset(f->taken, 0, (size_t)f->c->node_cap * sizeof *f->taken);
}

/* ============================== task results ============================== */

static void refill(void *ud);

const coord_producer_ops coord__fit_tasks = {
    .what = "train step",
    .task_kind = WIRE_TASK_TRAIN_STEP,
    .max_inflight = INFLIGHT_PER_WORKER,
    .ready = coord__fit_ready,
    .refill = refill,
    .done = coord__step_done,
};

/* The rate the ps applies to the update of train step f->done (its
 * shards count updates: every push async; sync, every global step, which
 * takes `replicas` of the counted (applied) gradients);
 * NAN without a schedule. For the metrics and the dashboard's chart. */
static double step_lr(const coord_fit_state *f) {
  const optim_cfg *o = f->args ? f->args->optim : NULL;
  if (!o || !optim_sched_active(&o->sched)) return NAN;
  int64_t k = f->sync && f->replicas > 0 ? (f->done - 1) / f->replicas : f->done - 1;
  return optim_sched_lr(&o->sched, o->lr, k, &f->plateau);
}

/* Adds step f->done to its epoch's sums; returns the epoch. */
static int64_t epoch_add(coord_fit_state *f, double loss, int64_t correct, int64_t examples) {
  /* A feeder that numbers no epochs sends 0: its batches are epoch 1, so
   * the first step opens the epoch's sums (accuracy included) as any
   * fit's does. */
  int64_t epoch = !f->feed.src ? (f->done - 1) / f->per_epoch + 1
                  : f->feed.epoch ? (int64_t)f->feed.epoch : 1;
  if (epoch != f->epoch_no) {
    f->epoch_no = epoch;
    f->epoch_loss = 0, f->epoch_seen = f->epoch_correct = 0, f->epoch_has_acc = true;
  }
  f->epoch_loss += loss * (double)examples;
  f->epoch_seen += examples;
  if (correct < 0) f->epoch_has_acc = false;
  else f->epoch_correct += correct;
  return epoch;
}

/* The queue's done(): train step id is over on node, counted once (the
 * queue checked node held it). */
int coord__step_done(void *ud, int node, uint64_t id, const uint8_t *pl, uint32_t len) {
  coord_fit_state *f = ud;
  wire_msg_result m;
  char msg[1024];
  (void)id;
  int rc = wire_get_result(pl, len, &m);
  if (rc == 0) rc = wire_str_copy(m.message, msg, sizeof msg);
  if (rc < 0 || !f->cfg) return rc;
  uint64_t examples = m.examples;
  int32_t status = m.status;
  double loss = m.loss;
  int64_t correct = m.correct;
  coord_node *n = &f->c->nodes[node];
  char name[32];
  coord__node_name(n, name, sizeof name);
  if (status != 0 && (f->ck.restoring || strstr(msg, "ps:")) && coord__fit_running(f->c)) {
    /* a ps went away under it: run it again (after the rollback, if the
     * ps is lost; a ps that is not coming back fails the run anyway) */
    if (!f->sync && f->produced > f->done) f->produced--;
    log_warn("%s: train step lost: %s", name, msg);
    return 0;
  }
  if (status != 0) {
    coord__fail_fit(f, "%s: train step failed at step %lld: %s", name, (long long)f->done + 1, msg);
    return 0;
  }
  if (m.dropped) { /* no ps took its gradient: the fit did not train on it */
    f->dropped++;
    return 0;
  }
  if (f->taken) f->taken[node]++;
  n->steps++;
  n->examples += (int64_t)examples;
  f->done++;
  f->examples += (int64_t)examples;
  int64_t epoch = epoch_add(f, loss, correct, (int64_t)examples);
  double lr = step_lr(f);
  f->p.lr = lr;
  double acc = correct >= 0 && examples > 0 ? (double)correct / (double)examples : NAN;
  f->p.batch_loss = loss, f->p.batch_accuracy = acc;
  f->p.grad_norm = m.grad_norm; /* NaN unless the fit clips */
  metrics_step_line(&f->metrics, &(metrics_step){.time = progress_now() - f->t0, .step = f->done,
                                                 .epoch = epoch, .node = name, .loss = loss,
                                                 .accuracy = acc, .examples = (int64_t)examples,
                                                 .lr = lr, .grad_norm = m.grad_norm});
  events_run_scalar(f->events, "train/grad_norm", f->done, m.grad_norm); /* NaN: none */
  if (isfinite(lr)) {
    events_run_scalar(f->events, "train/learning_rate", f->done, lr);
    coord__dash_point(f->c, "train/learning_rate", f->done, lr);
  }
  events_run_scalar(f->events, "train/loss", f->done, loss);
  coord__dash_point(f->c, "train/loss", f->done, loss);
  if (!isnan(acc)) {
    events_run_scalar(f->events, "train/accuracy", f->done, acc);
    coord__dash_point(f->c, "train/accuracy", f->done, acc);
  }
  double elapsed = progress_now() - f->t0;
  if (elapsed > 0)
    events_run_scalar(f->events, "train/examples_per_sec", f->done, (double)f->examples / elapsed);
  const train_cfg *cfg = f->cfg;
  if (cfg->eval && cfg->eval_every > 0 && f->done % cfg->eval_every == 0) {
    if (f->evaluator >= 0) {
      wire_wr w;
      wire_wr_init(&w);
      wire_put_eval(&w, &(wire_msg_eval){(uint64_t)f->done, cfg->metrics});
      f->evals_out++;
      coord__send(f->c, f->evaluator, &w, WIRE_EVAL, 0);
    } else {
      f->local_eval_due = f->done;
    }
  }
  return 0;
}

/* A plateau schedule reduced the rate: every ps scales its shards' and
 * tables' rates from its next update on, or from the one after global step
 * `after`. The evals arrive asynchronously, so the ps take the reduction
 * a few steps after the eval that asked for it. */
void coord__send_lr_scale(coord_fit_state *f, uint64_t after) {
  for (int k = 0; k < f->nps; k++) {
    if (!f->ps[k]) continue; /* lost: the rollback sends the scale again */
    wire_wr w;
    wire_wr_init(&w);
    wire_put_lr_scale(&w, &(wire_msg_lr_scale){f->plateau.scale, after});
    if (conn_send_wr(f->ps[k], &w, WIRE_LR_SCALE, 0) < 0)
      log_warn("ps:%d: cannot send the reduced learning rate: %s", k, err_msg());
  }
  rundir_event(&f->c->rd, "plateau: learning rate scaled by %g", f->plateau.scale);
}

/* Sync: a global step no ps has passed yet (its pushes come from the
 * tasks queued so far), after which every ps takes a reduction: one step
 * for all of them, where each would take it on arrival at its own. Async:
 * 0, on arrival (each push has a step of its own anyway). */
static uint64_t lr_scale_after(const coord_fit_state *f) {
  if (!f->sync || f->replicas == 0) return 0;
  return (uint64_t)((f->produced + f->replicas - 1) / f->replicas);
}

/* The controls an eval drives, as train_fit applies them in process: a
 * plateau schedule and early stopping (fit_loop ends the fit at its next
 * turn). */
static void eval_controls(coord_fit_state *f, int64_t step, const train_eval *e) {
  const optim_cfg *o = f->args ? f->args->optim : NULL;
  if (!f->looping || !f->cfg) return; /* the final eval changes nothing */
  if (o && o->sched.kind == OSCHED_PLATEAU) {
    double v = train_eval_value(e, o->sched.metric);
    if (optim_plateau_observe(&o->sched, &f->plateau, o->lr, v) == 1)
      coord__send_lr_scale(f, lr_scale_after(f));
  }
  if (train_stop_observe(&f->cfg->stop, &f->stopper, step, e) && !f->stopped_early) {
    f->stopped_early = true;
    /* async: the workers went on while the eval ran, so both steps */
    rundir_event(&f->c->rd,
                 "fit: stopping early at step %lld (the eval of step %lld): no better %s since step %lld",
                 (long long)f->done, (long long)step, optim_metric_name(f->cfg->stop.metric),
                 (long long)f->stopper.best_step);
    coord__sync_stop_begin(f); /* sync: the workers' held steps must end too */
  }
}

static void eval_done(coord_fit_state *f, int64_t step, const train_eval *e) {
  f->p.eval_loss = e->loss;
  f->p.eval_accuracy = e->accuracy;
  f->p.eval_auc = e->auc;
  f->p.eval_logloss = e->logloss;
  f->last_eval_step = step;
  f->eval_fresh = true;
  train_progress p = f->p;
  p.step = step;
  progress_eval(&f->out, &p);
  metrics_eval_line(&f->metrics, progress_now() - f->t0, step, e, f->p.metrics);
  metrics_eval_events(f->events, step, e, f->p.metrics); /* NaN: skipped */
  coord__dash_point(f->c, "eval/loss", step, e->loss);
  coord__dash_point(f->c, "eval/accuracy", step, e->accuracy);
  coord__dash_point(f->c, "eval/auc", step, e->auc);
  coord__dash_point(f->c, "eval/logloss", step, e->logloss);
  eval_controls(f, step, e);
}

static int on_eval_result(coord_fit_state *f, const uint8_t *pl, uint32_t len) {
  wire_msg_eval_result m;
  char msg[1024];
  int rc = wire_get_eval_result(pl, len, &m);
  if (rc == 0) rc = wire_str_copy(m.message, msg, sizeof msg);
  if (rc < 0) return rc;
  if (f->evals_out > 0) f->evals_out--;
  if (m.status != 0) {
    coord__fail_fit(f, "evaluator:0: evaluation failed: %s", msg);
    return 0;
  }
  eval_done(f, (int64_t)m.step,
            &(train_eval){.loss = m.loss, .accuracy = m.accuracy, .auc = m.auc,
                          .logloss = m.logloss});
  return 0;
}

int coord__fit_frame(coord *c, int node, const wire_header *h, const uint8_t *pl) {
  coord_fit_state *f = c->fit;
  if (h->type == WIRE_FEED_END) { /* w:terminate(): of a feed, perhaps one just over */
    if (f) coord__feed_worker_end(f, node);
    return 0;
  }
  if (!f) return err_set(DRV_EPROTO, "%s outside a fit", wire_type_name(h->type));
  switch (h->type) {
  case WIRE_SETUP_OK:
    if (f->setup_ok) f->setup_ok[node] = true;
    coord__feeders_node_ready(f, node); /* direct feeders waiting for it */
    return 0;
  case WIRE_EVAL_RESULT:
    return f->cfg ? on_eval_result(f, pl, h->len) : 0;
  case WIRE_POSITION_OK:
  case WIRE_ROLLBACK_OK:
    return coord__pos_frame(f, node, h, pl);
  default:
    return err_set(DRV_EPROTO, "unexpected %s", wire_type_name(h->type));
  }
}

/* ============================== the fit loop ============================== */

/* Sync: asks every ps to answer once it applied the last global step. */
int coord__send_sync_probes(coord_fit_state *f) {
  /* Probes of an interrupted earlier fit were answered by VAR_INIT (their
   * replies came before its VAR_INIT_OK): count this fit's only. */
  f->sync_reached = 0;
  f->sync_applied = 0;
  memset(f->probed, 0, (size_t)f->nps * sizeof *f->probed);
  for (int k = 0; k < f->nps; k++) {
    if (!f->ps[k]) return err_set(DRV_ENODE, "ps:%d is not connected", k);
    int rc = coord__send_sync_probe(f, k);
    if (rc < 0) return rc;
  }
  return 0;
}

int coord__send_sync_probe(coord_fit_state *f, int k) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_pull(&w, &(wire_msg_pull){.min_version = (uint64_t)f->sync_target}); /* no vars */
  return conn_send_wr(f->ps[k], &w, WIRE_PULL, SYNC_PROBE_REQ);
}

static bool sync_over(const coord_fit_state *f) { return f->sync_reached >= f->nps; }

/* The queue's refill(): keeps enough of the fit's train steps queued for
 * every trainer; the queue (coord_sched.c) sends them, retries them, and
 * counts them once. */
static void refill(void *ud) {
  coord_fit_state *f = ud;
  coord *c = f->c;
  if (!f->looping || f->ck.restoring || f->feed.src) return; /* a feed queues its own */
  /* An eval the coordinator runs itself is due: the steps in flight end,
   * no more are sent until it ran (fit_loop, between turns). Workers
   * keep the rings or sockets full, so one turn could otherwise take in
   * hundreds of results: the eval "of step 20" saw the model of step 371,
   * and the evals between were never run (early stopping counts them). */
  if (f->local_eval_due) return;
  if (f->sync && sync_over(f)) { /* every ps applied the last step */
    coord__sched_drop(c, f->producer, false);
    return;
  }
  int64_t want = (int64_t)f->ntrainers * INFLIGHT_PER_WORKER;
  while (coord__sched_queued(c, f->producer) < want && (f->sync || f->produced < f->total)) {
    if (coord__sched_add(c, f->producer) < 0) {
      coord__fail_fit(f, "cannot queue a train step: %s", err_msg());
      return;
    }
    f->produced++;
  }
}

/* The global step: exact once the ps answered the end-of-fit probe; until
 * then each global step takes `replicas` of the counted (applied)
 * gradients. The ETA goes by it. */
static void sync_progress(coord_fit_state *f, train_progress *p) {
  int64_t g = f->sync_applied > 0 ? f->sync_applied
                                  : f->done / (f->replicas ? (int64_t)f->replicas : 1);
  if (g > f->sync_target) g = f->sync_target;
  p->global_step = g;
  p->global_steps = f->sync_target;
  int64_t batches = g * (int64_t)f->replicas;
  p->global_epoch = f->per_epoch > 0 && batches > 0 ? (batches - 1) / f->per_epoch + 1 : 1;
  if (p->global_epoch > p->epochs) p->global_epoch = p->epochs;
  p->eta = g > 0 ? p->elapsed / (double)g * (double)(f->sync_target - g) : 0;
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
  if (p->total_steps <= 0) p->eta = -1; /* a feed of unknown length */
  if (f->sync) sync_progress(f, p);
  for (int t = 0; t < f->ntrainers; t++) {
    coord_node *n = &f->c->nodes[f->trainers[t]];
    n->examples_per_sec = p->elapsed > 0 ? (double)(n->examples - f->examples0[t]) / p->elapsed : 0;
  }
}

/* rc is a ps lost while the coordinator waited for it, and the fit
 * restores it (a restart, no replica): the fit loop goes on. */
static bool lost_to_restore(const coord_fit_state *f, int rc) {
  return rc < 0 && f->ck.restoring && !f->c->failures;
}

static int local_eval(coord *c, const coord_fit_args *a, int64_t step) {
  coord_fit_state *f = c->fit;
  int rc = coord__pull_all(c);
  train_eval e;
  if (rc == 0)
    rc = train_evaluate_metrics(a->model, a->loss, a->cfg->eval, a->cfg->batch, a->cfg->metrics,
                                &e);
  if (rc < 0) return rc;
  eval_done(f, step, &e);
  return 0;
}

static bool fit_finished(coord *c, void *arg) {
  (void)arg;
  coord_fit_state *f = c->fit;
  if (coord__sched_running(c, f->producer) > 0) return false;
  if (f->ck.restoring || f->ck.state != CK_IDLE) return false;
  if (f->feed.src) return coord__feed_over(f) && f->evals_out == 0;
  if (f->sync) return sync_over(f) && f->evals_out == 0;
  return f->done >= f->total && f->evals_out == 0;
}

static bool turn_done(coord *c, void *arg) {
  (void)c;
  return *(int *)arg > 0 ? true : (++*(int *)arg, false);
}

/* The progress callback asked to stop: the fit ends as early stopping
 * ends it (an async fit drops its queued steps, a sync one lowers its
 * last global step), and, as train_fit does, without a final eval. */
static void stop_by_progress(coord_fit_state *f) {
  f->stopped = true;
  rundir_event(&f->c->rd, "fit: its progress function stopped it at step %lld",
               (long long)f->done);
  coord__sync_stop_begin(f);
}

/* Pumps one turn of the loop at a time, acting between turns. */
static int fit_loop(coord *c, const coord_fit_args *a) {
  coord_fit_state *f = c->fit;
  const train_cfg *cfg = a->cfg;
  while (!fit_finished(c, NULL)) {
    coord__ps_reconnect(f);
    int rc = coord__ckpt_restore_tick(f);
    if (rc < 0) return rc;
    coord__ckpt_tick(f);
    coord__scale_tick(f);
    if ((rc = coord__feed_tick(f)) < 0) return rc;
    coord__dispatch(c);
    int turn = 0;
    rc = coord__pump(c, turn_done, &turn, 0, true);
    if (rc < 0) return rc;
    if (f->local_eval_due) {
      int64_t step = f->local_eval_due;
      f->local_eval_due = 0;
      rc = local_eval(c, a, step);
      if (lost_to_restore(f, rc))
        rundir_event(&c->rd, "eval at step %" PRId64 " skipped: %s", step, err_msg());
      else if (rc < 0)
        return rc;
    }
    update_progress(f);
    progress_step(&f->out, &f->p, false);
    if (cfg->on_progress && !f->stopped) {
      f->p.is_eval = f->eval_fresh;
      f->eval_fresh = false;
      if (cfg->on_progress(cfg->ud, &f->p) != 0) stop_by_progress(f);
      f->p.is_eval = false;
    }
    /* async: fit_finish drops the steps still queued; sync ends at the
     * lowered target, as any sync fit ends (coord_stop.c) */
    if ((f->stopped_early || f->stopped) && !f->sync) return 0;
  }
  return 0;
}

static int plan(coord *c, const coord_fit_args *a) {
  coord_fit_state *f = c->fit;
  free(f->trainers);
  free(f->examples0);
  f->trainers = malloc((size_t)c->node_cap * sizeof *f->trainers);
  f->examples0 = malloc((size_t)c->node_cap * sizeof *f->examples0);
  if (!f->trainers || !f->examples0) return err_set(DRV_ENOMEM, "out of memory");
  f->ntrainers = 0;
  f->evaluator = -1;
  for (int i = 0; i < c->nnodes; i++) {
    int role = c->nodes[i].role;
    if (coord__scaled_away(&c->nodes[i])) continue;
    if (role == ROLE_CHIEF || role == ROLE_WORKER) {
      f->examples0[f->ntrainers] = c->nodes[i].examples;
      f->trainers[f->ntrainers++] = i;
    }
    if (role == ROLE_EVALUATOR) f->evaluator = i;
  }
  const train_cfg *cfg = a->cfg;
  /* Before any step, not at the first eval. */
  if (cfg->metrics && bineval_check(a->loss, -1) < 0) return DRV_EINVAL;
  if (a->feed) {
    /* feed mode: as many steps as the source gives batches (known for a
     * dataset, for the progress line) */
    /* sync needs the global steps up front (VAR_INIT) and may drop a
     * gradient (a backup worker's, a stale one): a fed batch must train
     * once, and a source's length is not known (docs/ARCHITECTURE.md) */
    if (a->sync) return err_set(DRV_EINVAL, "cluster: train.feed trains asynchronously (sync "
                                "training needs its global steps up front and may drop a "
                                "batch's gradient); remove mode = \"sync\"");
    f->total = a->feed->batches;
    if (cfg->max_steps > 0 && (f->total == 0 || cfg->max_steps < f->total)) f->total = cfg->max_steps;
    f->per_epoch = a->feed->batches > 0 && cfg->epochs > 0 ? a->feed->batches / cfg->epochs : 0;
  } else {
    if (!a->train) return err_set(DRV_EINVAL, "cluster: no training data");
    if (a->train->n < f->ntrainers)
      return err_set(DRV_EINVAL, "cluster: %lld training examples for %d workers",
                     (long long)a->train->n, f->ntrainers);
    f->per_epoch = (a->train->n + cfg->batch - 1) / cfg->batch;
    if (__builtin_mul_overflow(cfg->epochs, f->per_epoch, &f->total))
      return err_set(DRV_EINVAL, "cluster: %lld epochs of %lld steps are too many steps to count",
                     (long long)cfg->epochs, (long long)f->per_epoch);
    if (cfg->max_steps > 0 && cfg->max_steps < f->total) f->total = cfg->max_steps;
  }
  int64_t worker_steps = f->total;
  f->sync = a->sync;
  f->sync_target = f->sync_applied = 0;
  f->sync_reached = 0;
  f->replicas = 0;
  if (a->sync) {
    if (a->backup_workers < 0 || a->backup_workers >= f->ntrainers)
      return err_set(DRV_EINVAL, "cluster: backup_workers is %d but there %s %d trainer%s",
                     a->backup_workers, f->ntrainers == 1 ? "is" : "are", f->ntrainers,
                     f->ntrainers == 1 ? "" : "s");
    f->replicas = (uint32_t)(f->ntrainers - a->backup_workers);
    f->sync_target = (worker_steps + f->replicas - 1) / f->replicas;
  }
  free(f->setup_ok);
  free(f->taken);
  free(f->fresh);
  f->setup_ok = calloc((size_t)c->node_cap, sizeof *f->setup_ok);
  f->taken = calloc((size_t)c->node_cap, sizeof *f->taken);
  f->fresh = calloc((size_t)c->node_cap, sizeof *f->fresh);
  if (!f->setup_ok || !f->taken || !f->fresh) return err_set(DRV_ENOMEM, "out of memory");
  f->produced = f->done = f->examples = f->dropped = 0;
  f->sc.epoch0 = 0, f->sc.shards = f->ntrainers;
  f->epoch_no = 0;
  f->evals_out = 0;
  f->last_eval_step = -1;
  f->local_eval_due = 0;
  memset(&f->p, 0, sizeof f->p);
  f->p.total_steps = f->sync ? f->sync_target * (int64_t)f->replicas : f->total;
  f->p.epochs = cfg->epochs;
  f->p.loss = f->p.accuracy = f->p.eval_loss = f->p.eval_accuracy = NAN;
  f->p.eval_auc = f->p.eval_logloss = NAN;
  f->p.metrics = cfg->metrics;
  f->p.batch_loss = f->p.batch_accuracy = NAN;
  f->p.lr = f->p.grad_norm = NAN; /* the ps applies the rate; grad_norm: each RESULT's */
  return 0;
}

/* After a fit or a setup the nodes keep the model and their shard, and a
 * worker restarted later is set up again from these (closures may train
 * through w): the caller keeps the model, loss and data alive (coord.h). */
static void keep_args(coord_fit_state *f, const coord_fit_args *a) {
  f->kept_cfg = *a->cfg;
  f->kept_cfg.eval = NULL;
  f->kept_cfg.progress = NULL;
  f->kept_cfg.on_progress = NULL;
  f->kept_cfg.ud = NULL;
  f->kept = *a;
  f->kept.cfg = &f->kept_cfg;
  f->kept.ckpt = NULL; /* the caller's; f->ckpol has the fit's copy */
  f->kept.feed = NULL;  /* borrowed for the fit only */
  f->args = &f->kept;
}

/* A fit with checkpoint = {...} ends with a checkpoint of its last step
 * (the final eval in its manifest), so the newest is the trained model. */
static void final_checkpoint(coord_fit_state *f) {
  f->cfg = NULL; /* coord_checkpoint: now, not requested */
  if (coord_checkpoint(f->c) < 0) log_warn("the final checkpoint: %s", err_msg());
}

/* The fit loop, then the trained values pulled back. A ps lost as the
 * loop ended (killed after its last step, noticed only while the
 * coordinator pulls) is restored like one lost during the fit: the loop
 * runs again, restores from the checkpoint and does the steps since. */
static int fit_run(coord *c, const coord_fit_args *a) {
  coord_fit_state *f = c->fit;
  for (;;) {
    f->looping = true;
    int rc = fit_loop(c, a);
    f->looping = false;
    coord__sched_drop(c, f->producer, true); /* a step still running is ignored */
    if (rc == 0 && f->ck.state != CK_IDLE) rc = coord__ckpt_wait(f);
    if (rc == 0) rc = coord__pull_all(c);
    if (!lost_to_restore(f, rc)) return rc;
    rundir_event(&c->rd, "%s as the fit ended: the fit goes on after its restore", err_msg());
  }
}

static int fit_finish(coord *c, const coord_fit_args *a, int rc, train_result *res) {
  coord_fit_state *f = c->fit;
  f->looping = false;
  coord__sched_drop(c, f->producer, true); /* a step still running is ignored */
  coord__sched_drop(c, f->feed.producer, true);
  coord__feed_end(f, rc);
  coord__scale_fit_end(f);
  bool ended = rc == 0 && !f->stopped; /* as planned, or by early stopping */
  if (ended && a->cfg->eval && f->last_eval_step != f->done) rc = local_eval(c, a, f->done);
  if (ended && rc == 0 && f->has_ckpt && f->ck.last_step != f->done) final_checkpoint(f);
  coord__ckpt_fit_end(f);
  f->prev_steps = f->done; /* the next fit's checkpoints are numbered after */
  update_progress(f);
  progress_step(&f->out, &f->p, true);
  progress_end(&f->out);
  if (res) train_result_fill(res, &f->p, &f->stopper, f->stopped_early, f->stopped);
  metrics_close(&f->metrics);
  events_run_flush(f->events);
  coord__summaries_flush(c);
  f->cfg = NULL;
  keep_args(f, a);
  if (f->sync)
    rundir_event(&c->rd, "sync: %lld train steps' gradients dropped, not counted",
                 (long long)f->dropped);
  rundir_event(&c->rd, "fit %s: %lld steps", rc == 0 ? "done" : "failed", (long long)f->done);
  return rc;
}

static bool no_task_in_flight(coord *c, void *arg) {
  (void)arg;
  for (int i = 0; i < c->nnodes; i++)
    if (c->nodes[i].inflight > 0) return false;
  return true;
}

/* A fit that stopped early (its progress function, early stopping) left
 * the steps still running on the workers, ignored. Their pulls and pushes
 * must end before VAR_INIT resets the ps: a ps in sync mode would hold a
 * stale async step's pull for good, and its worker would never answer
 * SETUP. Bounded: a node lost meanwhile has its tasks taken back. */
static void drain_tasks(coord *c) {
  if (no_task_in_flight(c, NULL)) return;
  if (coord__pump(c, no_task_in_flight, NULL, 60, false) == DRV_ETIMEDOUT)
    rundir_event(&c->rd, "fit: starting with tasks of before still running after 60 s");
}

/* Everything before the train steps: the plan, the ps connections, the
 * placement, the initial values, SETUP of every node. */
static int prepare(coord *c, const coord_fit_args *a) {
  if (c->shut_down || c->shutting_down) return err_set(DRV_EINVAL, "cluster: it was shut down");
  if (c->failures) return err_set(DRV_ENODE, "cluster: %s", c->failure);
  const train_cfg *cfg = a->cfg;
  if (cfg->batch <= 0 || cfg->epochs <= 0)
    return err_set(DRV_EINVAL, "cluster: batch and epochs must be positive");
  drain_tasks(c);
  coord_fit_state *f = coord__fit_state(c);
  if (!f) return err_set(DRV_ENOMEM, "out of memory");
  int rc;
  f->args = a;
  if ((rc = plan(c, a)) < 0 || (rc = coord__connect_ps(c)) < 0 || (rc = coord__place(f, a->model)) < 0 ||
      (rc = coord__init_vars(f, a->optim)) < 0 || (rc = coord__wait_replies(f, "VAR_INIT_OK")) < 0 ||
      (rc = coord__setup_nodes(c, a)) < 0) {
    f->args = NULL;
    return rc;
  }
  return 0;
}

int coord_setup(coord *c, const coord_fit_args *a) {
  int rc = prepare(c, a);
  if (rc < 0) return rc;
  keep_args(c->fit, a);
  rundir_event(&c->rd, "setup: %d workers, %d variables over %d ps", c->fit->ntrainers,
               c->fit->nvars, c->fit->nps);
  return 0;
}

int coord_fit(coord *c, const coord_fit_args *a, train_result *res) {
  if (res) train_result_init(res);
  int rc = prepare(c, a);
  if (rc < 0) return rc;
  coord_fit_state *f = c->fit;
  const train_cfg *cfg = a->cfg;
  f->has_ckpt = a->ckpt != NULL;
  if (a->ckpt) f->ckpol = *a->ckpt;
  f->skipped = false;
  int resumed = 0;
  if ((rc = coord__ckpt_fit_begin(f)) < 0 || (resumed = rc = coord__ckpt_resume(f)) < 0 ||
      (resumed == 0 && f->sync && (rc = coord__send_sync_probes(f)) < 0) ||
      (a->feed && (rc = coord__feed_begin(f, a->feed, WIRE_FEED_TRAIN)) < 0)) {
    f->args = NULL;
    return rc;
  }
  if (resumed > 0) { /* `--resume`: this fit had ended before the checkpoint */
    coord__ckpt_fit_end(f);
    keep_args(f, a);
    return 0;
  }
  metrics_open(&f->metrics, &c->rd);
  if (!f->events) f->events = events_run_open(c->rd.path, "coordinator");
  f->cfg = cfg;
  f->stopped_early = false; /* the stopper was reset, or resumed, with the checkpoints */
  f->stopped = false;
  f->stop_phase = 0;
  progress_init(&f->out, cfg->progress, cfg->progress_tty);
  f->t0 = progress_now();
  f->workers_said = f->ntrainers; /* written with the first change only: a fit */
  f->workers_step0 = f->done;      /* that keeps its workers adds no line */
  if (a->feed)
    rundir_event(&c->rd, "fit: fed, %d workers, %d variables over %d ps", f->ntrainers, f->nvars,
                 f->nps);
  else if (f->sync)
    rundir_event(&c->rd, "fit: sync, %lld global steps of %u gradients on %d workers, "
                 "%d variables over %d ps", (long long)f->sync_target, f->replicas, f->ntrainers,
                 f->nvars, f->nps);
  else
    rundir_event(&c->rd, "fit: %lld steps on %d workers, %d variables over %d ps",
                 (long long)f->total, f->ntrainers, f->nvars, f->nps);
  rc = fit_run(c, a);
  return fit_finish(c, a, rc, res);
}

static void workers_point(coord_fit_state *f, double t, int64_t step, int n) {
  metrics_workers_line(&f->metrics, t, step, n);
  events_run_scalar(f->events, "cluster/workers", step, n);
  coord__dash_point(f->c, "cluster/workers", step, n);
}

/* At a membership change: the count the fit began with (once), then the
 * new one, at the step events.log names. */
void coord__fit_workers(coord_fit_state *f) {
  if (f->ntrainers == f->workers_said) return;
  if (f->workers_step0 >= 0) workers_point(f, 0, f->workers_step0, f->workers_said);
  f->workers_step0 = -1;
  f->workers_said = f->ntrainers;
  workers_point(f, progress_now() - f->t0, f->done, f->ntrainers);
}

bool coord_fit_skipped(const coord *c) { return c->fit && c->fit->skipped; }

int64_t coord_global_steps(const coord *c) {
  return c->fit && c->fit->sync ? c->fit->sync_applied : 0;
}

/* ============================== teardown ================================== */

void coord__fit_close(coord *c) {
  coord_fit_state *f = c->fit;
  if (!f) return;
  for (int k = 0; k < f->nps; k++)
    if (f->ps[k]) conn_close(f->ps[k], "coordinator done");
}

void coord__fit_free(coord *c) {
  coord_fit_state *f = c->fit;
  if (!f) return;
  /* The ps connections were closed and their close callbacks have run:
   * coord_free calls this from the last of them. */
  c->fit = NULL;
  coord__sched_remove_producer(c, f->producer);
  coord__sched_remove_producer(c, f->feed.producer);
  coord__feed_free(f);
  coord__ckpt_fit_end(f); /* before coord__free_vars: it walks f->nvars */
  coord__free_vars(f);
  free(f->trainers);
  free(f->examples0);
  free(f->setup_ok);
  free(f->taken);
  free(f->fresh);
  metrics_close(&f->metrics);
  events_run_close(f->events);
  free(f->ps);
  free(f->links);
  free(f->probed);
  free(f->stop_seen);
  coord__scale_free(f);
  free(f->pend_ps);
  free(f);
}
