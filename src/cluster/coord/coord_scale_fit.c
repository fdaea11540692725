/* coord_scale_fit.c - c:scale while a fit runs (the rest of c:scale is
 * coord_scale.c), and a worker lost past its restarts shrinking a
 * running fit (worker = { min }). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"
#include "train/progress.h"

/* During a fit (every launcher that scales; a fed fit too). The fit's
 * trainers and their shards follow at once in an async fit; a sync fit
 * changes its quorum at a global-step boundary (the barrier):
 *
 *   async, growing: the new workers start; the trainers are listed again
 *     (node order), every one set up now is sent SETUP with its shard of
 *     the new count (a worker's SETUP waits for the step it is computing),
 *     and a new one gets its SETUP as it registers and takes steps once
 *     it answered. Shrinking: the highest-indexed workers go REMOVING
 *     (SHUTDOWN: the step each is computing finishes and is counted, the
 *     one queued behind it goes back to the queue when it exits) and the
 *     others are set up again with the shards of the count left. f->total
 *     does not change: the step count stays exact.
 *   sync: the new workers start and are set up (their shard of the new
 *     count) but take no step yet. Once they all answered (at once when
 *     shrinking), the barrier is asked at global step `at`: the highest a
 *     trainer was given a step for (taken + in flight), moved to the end
 *     of the trainers' pass over their shards (train.reshard "epoch").
 *     Every ps gets SYNC_STOP { hold_at = at, leave_from } and, behind
 *     it, a probe (a PULL of no variables, SCALE_REQ): the ps makes the
 *     barrier B at least `at` and past any version a trainer pulled,
 *     holds trainers' pulls of B, and answers the probe at B (ps_push.c,
 *     "barrier"). Here a trainer is not sent steps past `at` (its count
 *     of applied gradients, which never runs ahead of its global step);
 *     the ps's hold is what makes it exact. Once every ps answered: the
 *     leaving workers get SHUTDOWN, the others their new shards (SETUP
 *     supersede: their steps waiting at B end, dropped), and once those
 *     are set up SYNC_STOP { replicas, leave_from } gives every ps the
 *     new quorum from B on (the leaving workers' ps connections closed),
 *     then the new workers take steps. The fit's global steps do not
 *     change; each one averages the gradients of the workers it had.
 *     With ps replicas the primary forwards SYNC_STOP to its replica as
 *     it forwards an update, and REPL_SYNC carries the quorum: a replica
 *     promoted keeps it (not a barrier under way: it is sent again).
 *   fed (async): no shards, no SETUP again: the feed's consumers are the
 *     trainers listed again; a removed worker's batches not started go
 *     back to the queue as it exits (the queue's rule). A direct feeder's
 *     batches are not the queue's: a shrink removing its worker is
 *     refused (coord__feeders_direct_to_beyond). */

enum { SC_NONE, SC_JOIN, SC_BARRIER, SC_QUORUM, SC_SETTLE };

static bool is_trainer(const coord_node *n) { return n->role == ROLE_WORKER || n->role == ROLE_CHIEF; }

/* Trainers after the change: not taken away, not leaving at the barrier. */
static int trainers_after(const coord_fit_state *f, int want) {
  int chiefs = 0;
  for (int i = 0; i < f->c->nnodes; i++)
    if (f->c->nodes[i].role == ROLE_CHIEF) chiefs++;
  return chiefs + want;
}

int coord__scale_fit_check(coord_fit_state *f, int have, int want) {
  coord *c = f->c;
  if (!f->looping)
    return err_set(DRV_EAGAIN, "c:scale: the fit is ending; scale after it");
  if (f->feed.src && want < have) {
    int node = coord__feeders_direct_to_beyond(f, want);
    if (node >= 0) {
      char name[32];
      return err_set(DRV_EAGAIN, "c:scale: worker %d -> %d would remove %s, which an external "
                     "feeder feeds directly (feeder direct = true); scale down once it ended, "
                     "or feed through the coordinator", have, want,
                     coord__node_name(&c->nodes[node], name, sizeof name));
    }
  }
  if (f->sc.active && f->sc.from == f->sc.want)
    return err_set(DRV_EAGAIN, "c:scale: the workers left after a lost one are getting their "
                               "new shards; scale once that is over");
  if (f->sc.active)
    return err_set(DRV_EAGAIN, "c:scale: worker %d -> %d asked during this fit is not over yet",
                   f->sc.from, f->sc.want);
  if (f->sync && want != have) {
    int n = trainers_after(f, want), b = f->args ? f->args->backup_workers : 0;
    if (b >= n)
      return err_set(DRV_EINVAL, "c:scale: worker = %d leaves %d trainer%s for backup_workers = %d",
                     want, n, n == 1 ? "" : "s", b);
  }
  return 0;
}

static int alloc_marks(coord_fit_state *f) {
  size_t cap = (size_t)f->c->node_cap;
  if (!f->sc.joining) f->sc.joining = calloc(cap, sizeof *f->sc.joining);
  if (!f->sc.leaving) f->sc.leaving = calloc(cap, sizeof *f->sc.leaving);
  if (!f->sc.seen) f->sc.seen = calloc((size_t)f->nps + 1, sizeof *f->sc.seen);
  if (!f->sc.joining || !f->sc.leaving || !f->sc.seen) return err_set(DRV_ENOMEM, "out of memory");
  memset(f->sc.joining, 0, cap * sizeof *f->sc.joining);
  memset(f->sc.leaving, 0, cap * sizeof *f->sc.leaving);
  return 0;
}

/* The fit's trainers listed again in node order: chief and workers not
 * taken away; each keeps its example count at the fit's start, a new one
 * counts from now. */
static void relist(coord_fit_state *f) {
  coord *c = f->c;
  int *t = f->trainers;
  int64_t *e0 = f->examples0;
  int old = f->ntrainers, k = 0;
  int64_t *keep = malloc((size_t)c->node_cap * sizeof *keep); /* per node, -1 new */
  if (!keep) return; /* the old list stays: shards as before */
  for (int i = 0; i < c->nnodes; i++) keep[i] = -1;
  for (int j = 0; j < old; j++) keep[t[j]] = e0[j];
  for (int i = 0; i < c->nnodes; i++) {
    coord_node *n = &c->nodes[i];
    if (!is_trainer(n) || coord__scaled_away(n)) continue;
    t[k] = i;
    e0[k++] = keep[i] >= 0 ? keep[i] : n->examples;
  }
  f->ntrainers = k;
  free(keep);
  if (f->feed.src) coord__feed_relist(f);
}

/* SETUP of every trainer (but the ones joining: theirs is of the new count
 * already) with its shard of the count now. */
static void reshard(coord_fit_state *f) {
  if (f->feed.src) return; /* no shards: fed batches go to whoever is ready */
  for (int t = 0; t < f->ntrainers; t++) {
    if (f->sc.joining && f->sc.joining[f->trainers[t]]) continue;
    if (coord__setup_trainer(f->c, t) < 0) {
      coord__fail_fit(f, "c:scale: SETUP of the trainers' new shards: %s", err_msg());
      return;
    }
  }
}

/* SHUTDOWN to node i, which goes REMOVING. */
static void remove_node(coord *c, int i) {
  if (coord__node_set_state(c, i, NODE_REMOVING, ": scaled away") < 0) return;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_shutdown(&w, &(wire_msg_shutdown){COORD_SCALE_GRACE_MS});
  coord__send(c, i, &w, WIRE_SHUTDOWN, 0);
}

/* Sync, shrinking: the highest-indexed workers beyond want leave at the
 * barrier. */
static void mark_leaving(coord_fit_state *f, int want) {
  coord *c = f->c;
  int keep = 0;
  for (int i = 0; i < c->nnodes; i++) {
    coord_node *n = &c->nodes[i];
    if (n->role == ROLE_WORKER && !coord__scaled_away(n) && keep++ >= want) f->sc.leaving[i] = true;
  }
}

/* The barrier to ps group k (ps_push.c, "barrier"), with the quorum of
 * the steps before it (fewer after a loss meanwhile), then the probe its
 * ps answers once it reached the barrier's version (on one connection:
 * in that order). */
static void send_barrier(coord_fit_state *f, int k) {
  wire_wr w;
  wire_wr_init(&w);
  uint64_t at = f->sc.at > 0 ? (uint64_t)f->sc.at : 1; /* 0 says "no barrier" */
  wire_put_sync_stop(&w, &(wire_msg_sync_stop){.replicas = f->replicas, .hold_at = at,
                                               .leave_from = f->sc.leave_from});
  if (!f->ps[k] || conn_send_wr(f->ps[k], &w, WIRE_SYNC_STOP, 0) < 0) f->sc.requorum = true;
}

static void send_probe(coord_fit_state *f, int k) {
  send_barrier(f, k);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_pull(&w, &(wire_msg_pull){.min_version = (uint64_t)f->sc.at}); /* no vars */
  if (!f->ps[k] || conn_send_wr(f->ps[k], &w, WIRE_PULL, SCALE_REQ) < 0) f->sc.reprobe = true;
}

/* Batches in a pass over each of `shards` shards of n rows (data_shard:
 * strided, ceil(n / shards) or floor rows each); 0 when they differ, so
 * the passes end at different global steps. */
static int64_t pass_batches(int64_t n, int shards, int64_t batch) {
  if (shards < 1 || batch < 1 || n < shards) return 0;
  int64_t lo = n / shards, hi = (n + shards - 1) / shards;
  int64_t a = (lo + batch - 1) / batch, b = (hi + batch - 1) / batch;
  return a == b ? a : 0;
}

/* Sync, sharded data (train.reshard = "epoch", the default): the barrier
 * waits for the end of the trainers' pass over their shards, so that the
 * shards of the new count begin with an epoch and every example is seen
 * once in each (a pass's rows are its shard's, all of them). `at` as
 * asked when the passes do not end together (then "epoch" cannot be kept:
 * said in events.log) or end after the fit. */
static int64_t epoch_barrier(coord_fit_state *f, int64_t at) {
  const coord_fit_args *a = f->args;
  if (f->feed.src || !a || !a->train || a->cfg->reshard_step) return at;
  int64_t nb = pass_batches(a->train->n, f->sc.shards, a->cfg->batch);
  if (nb <= 0) {
    rundir_event(&f->c->rd, "scale: the %d shards' passes are not of one length: the shards "
                 "change at the next global step, within an epoch", f->sc.shards);
    return at;
  }
  int64_t into = at - f->sc.epoch0;
  int64_t end = f->sc.epoch0 + (into <= 0 ? 0 : (into + nb - 1) / nb * nb);
  if (end > at)
    rundir_event(&f->c->rd, "scale: waiting for the end of the trainers' epoch (%lld global "
                 "steps a pass over their shards)", (long long)nb);
  return end;
}

static void begin_barrier(coord_fit_state *f) {
  coord *c = f->c;
  int64_t at = 0;
  for (int t = 0; t < f->ntrainers; t++) {
    int i = f->trainers[t];
    if (f->sc.joining[i] || f->fresh[i]) continue;
    int64_t g = f->taken[i] + c->nodes[i].inflight;
    if (g > at) at = g;
  }
  at = epoch_barrier(f, at);
  f->sc.at = f->sc.crossed = at;
  f->sc.leave_from = 0;
  for (int i = 0; i < c->nnodes; i++)
    if (f->sc.leaving[i] && (!f->sc.leave_from || (uint32_t)c->nodes[i].index < f->sc.leave_from))
      f->sc.leave_from = (uint32_t)c->nodes[i].index;
  f->sc.phase = SC_BARRIER;
  f->sc.probed = 0;
  f->sc.reprobe = false;
  memset(f->sc.seen, 0, (size_t)f->nps * sizeof *f->sc.seen);
  if (f->sc.from == f->sc.want) /* after a lost worker: its shards only (coord__scale_fit_lost) */
    rundir_event(&c->rd, "sync: the trainers left get new shards at global step %lld", (long long)at);
  else
    rundir_event(&c->rd, "scale: the sync quorum changes at global step %lld (or at the first "
                 "the workers have not begun)", (long long)at);
  for (int k = 0; k < f->nps; k++) send_probe(f, k);
}

void coord__scale_probe_reply(coord_fit_state *f, int k, uint64_t version) {
  if (!f->sc.active || f->sc.phase != SC_BARRIER || k < 0 || k >= f->nps || f->sc.seen[k]) return;
  if (f->ck.restoring) { /* answered by the rollback's VAR_INIT */
    f->sc.reprobe = true;
    return;
  }
  if ((int64_t)version > f->sc.crossed) f->sc.crossed = (int64_t)version; /* its barrier */
  f->sc.seen[k] = true;
  f->sc.probed++;
}

/* The joining wait until the new quorum. The ps hold every other
 * trainer at the barrier (a pull of its version waits there), so each
 * gives the gradients of the steps before it whatever its counts say (a
 * backup worker's dropped gradients, a restart); here a trainer is only
 * kept from being sent steps it would take past `at` by its count of
 * gradients applied (taken), which falls short of its global step when
 * some were dropped but never passes it: never held too early. Without
 * that, a step sent as the barrier goes out could pull version `at`
 * first and move the barrier one step on. A restarted one's count says
 * nothing (f->fresh): the ps alone hold it. */
bool coord__scale_holds(const coord_fit_state *f, int node) {
  if (!f->sc.active || !f->sync) return false;
  if (f->sc.joining[node]) return f->sc.phase != SC_SETTLE;
  if (f->sc.phase != SC_BARRIER) return false;
  return !f->fresh[node] && f->taken[node] + f->c->nodes[node].inflight >= f->sc.at;
}

/* To every ps; one whose link is down (a replica being promoted) gets it
 * again once the link is back (coord__scale_tick): taking it twice is
 * taking it once. */
static void send_quorum(coord_fit_state *f, uint32_t replicas) {
  for (int k = 0; k < f->nps; k++) {
    wire_wr w;
    wire_wr_init(&w);
    wire_put_sync_stop(&w, &(wire_msg_sync_stop){.replicas = replicas,
                                                 .leave_from = f->sc.leave_from});
    if (!f->ps[k] || conn_send_wr(f->ps[k], &w, WIRE_SYNC_STOP, 0) < 0) f->sc.requorum = true;
  }
}

void coord__scale_ps_gone(coord_fit_state *f, int k) {
  if (!f->sc.active || !f->sync || k < 0 || k >= f->nps) return;
  /* what it took may not have reached its replica: said again */
  if (f->sc.phase == SC_BARRIER && f->sc.seen && !f->sc.seen[k]) f->sc.reprobe = true;
  if (f->sc.phase == SC_SETTLE) f->sc.requorum = true;
}

/* Every ps applied the global steps before its barrier, and holds the
 * trainers' pulls of it: the new membership from there on (sc.crossed:
 * the highest of the ps's barriers, at or past `at`). The trainers left
 * get their new shards first, superseding the steps they were sent that
 * wait at the barrier (their batches are the old shards'); the new
 * quorum goes to the ps once they are set up (coord__scale_tick). */
static void cross(coord_fit_state *f) {
  coord *c = f->c;
  for (int i = 0; i < c->nnodes; i++)
    if (f->sc.leaving[i]) remove_node(c, i);
  relist(f);
  f->sc.was = f->replicas;
  f->replicas = (uint32_t)(f->ntrainers - (f->args ? f->args->backup_workers : 0));
  for (int i = 0; i < c->nnodes; i++)
    if (f->sc.joining[i]) f->taken[i] = f->sc.crossed; /* its first gradient is of step `at` */
  f->sc.supersede = true;
  reshard(f);
  f->sc.supersede = false;
  f->sc.epoch0 = f->sc.crossed, f->sc.shards = f->ntrainers; /* each pass begins anew */
  memset(f->sc.leaving, 0, (size_t)c->node_cap * sizeof *f->sc.leaving);
  f->sc.phase = SC_QUORUM;
  if (f->sc.crossed < f->sync_target)
    f->p.total_steps = f->done + (f->sync_target - f->sc.crossed) * (int64_t)f->replicas;
}

/* The trainers have their new shards: the ps the new quorum. */
static void quorum_now(coord_fit_state *f) {
  f->sc.requorum = false;
  send_quorum(f, f->replicas);
  f->sc.phase = SC_SETTLE;
  if (f->sc.was != f->replicas)
    rundir_event(&f->c->rd, "sync: %u gradients per global step from global step %lld (were %u)",
                 f->replicas, (long long)f->sc.crossed, f->sc.was);
}

int coord__scale_fit(coord_fit_state *f, int have, int want) {
  coord *c = f->c;
  int rc = alloc_marks(f);
  if (rc < 0) return rc;
  f->sc.from = have, f->sc.want = want;
  if (want < have && f->sync) {
    mark_leaving(f, want);
  } else if (want < have) {
    coord__scale_remove_beyond(c, want);
  } else {
    int before = c->nnodes;
    bool *was = calloc((size_t)c->node_cap, sizeof *was);
    if (!was) return err_set(DRV_ENOMEM, "out of memory");
    for (int i = 0; i < before; i++) was[i] = !coord__scaled_away(&c->nodes[i]);
    rc = coord__scale_grow(c, have, want);
    for (int i = 0; i < c->nnodes; i++)
      if (is_trainer(&c->nodes[i]) && !was[i] && !coord__scaled_away(&c->nodes[i]))
        f->sc.joining[i] = true, f->setup_ok[i] = false;
    free(was);
    if (rc < 0 && c->nnodes == before) return rc; /* none launched */
  }
  f->sc.active = true;
  if (!f->sync) {
    relist(f);
    memset(f->sc.joining, 0, (size_t)c->node_cap * sizeof *f->sc.joining);
    reshard(f);
    f->sc.phase = SC_SETTLE;
  } else if (want > have) {
    relist(f); /* the new ones are set up as they register; steps from the barrier */
    f->sc.phase = SC_JOIN;
  } else {
    begin_barrier(f);
  }
  return rc;
}

static bool joined(const coord_fit_state *f) {
  for (int i = 0; i < f->c->nnodes; i++)
    if (f->sc.joining[i] && !f->setup_ok[i]) return false;
  return true;
}

/* Every trainer but the joining (held until the quorum) set up. */
static bool set_up(const coord_fit_state *f) {
  for (int t = 0; t < f->ntrainers; t++) {
    int i = f->trainers[t];
    if (!f->sc.joining[i] && !f->setup_ok[i]) return false;
  }
  return true;
}

/* The change is over: no worker removing, every trainer set up. */
static bool fit_settled(const coord_fit_state *f) {
  if (!coord__scale_none_removing(f->c, NULL)) return false;
  for (int t = 0; t < f->ntrainers; t++)
    if (!f->setup_ok[f->trainers[t]]) return false;
  return true;
}

void coord__scale_tick(coord_fit_state *f) {
  if (!f->sc.active) return;
  if (f->sc.phase == SC_JOIN && joined(f)) begin_barrier(f);
  if (f->sc.phase == SC_BARRIER && f->sc.reprobe && !f->ck.restoring) {
    f->sc.reprobe = false;
    for (int k = 0; k < f->nps; k++)
      if (!f->sc.seen[k]) send_probe(f, k);
  }
  if (f->sc.phase == SC_BARRIER && f->sc.probed >= f->nps) cross(f);
  if (f->sc.phase == SC_QUORUM && set_up(f)) quorum_now(f);
  if (f->sc.requorum && f->sc.phase != SC_QUORUM) { /* a link was down: again */
    f->sc.requorum = false;
    if (f->sc.phase == SC_BARRIER) /* a loss's quorum, with the barrier kept */
      for (int k = 0; k < f->nps; k++) send_barrier(f, k);
    else
      send_quorum(f, f->replicas);
  }
  if (f->sc.phase == SC_SETTLE && fit_settled(f) && !f->sc.requorum) {
    f->sc.active = false;
    f->sc.leave_from = 0; /* said: a later quorum (a loss) must not repeat it */
    memset(f->sc.joining, 0, (size_t)f->c->node_cap * sizeof *f->sc.joining);
    if (f->sc.from == f->sc.want)
      rundir_event(&f->c->rd, "sync: the trainers left have their new shards (at step %lld)",
                   (long long)f->done);
    else
      rundir_event(&f->c->rd, "scale: worker %d -> %d done (during the fit, at step %lld)",
                   f->sc.from, f->sc.want, (long long)f->done);
    coord__fit_workers(f); /* metrics.jsonl at the same step */
  }
}

void coord__scale_fit_end(coord_fit_state *f) {
  coord *c = f->c;
  if (!f->sc.active) return;
  for (int i = 0; i < c->nnodes; i++)
    if (f->sc.leaving && f->sc.leaving[i]) remove_node(c, i);
  f->sc.active = false;
  memset(f->sc.joining, 0, (size_t)c->node_cap * sizeof *f->sc.joining);
  memset(f->sc.leaving, 0, (size_t)c->node_cap * sizeof *f->sc.leaving);
  int rc = coord__pump(c, coord__scale_settled, NULL, COORD_SCALE_TIMEOUT, false);
  if (rc < 0)
    rundir_event(&c->rd, "scale: worker %d -> %d not settled as the fit ended: %s", f->sc.from,
                 f->sc.want, err_msg());
  else
    rundir_event(&c->rd, "scale: worker %d -> %d done (as the fit ended)", f->sc.from, f->sc.want);
}

/* ============================== a lost worker ============================= */

/* worker = { min }: a worker lost past its restarts (or whose restart
 * failed) shrinks the cluster while at least min are left, instead of
 * failing the run. It goes REMOVED (scaled up again later, it is a new
 * process with restarts of its own), its tasks go back to the queue, and
 * a running fit goes on with the workers left:
 *
 *   async: the trainers are listed again and set up with the shards of
 *     the count left; its steps in flight run again elsewhere, so the
 *     step count stays exact.
 *   sync: the global step being summed lacks its gradient (one it pushed
 *     to some ps before it died counts there, in place of a survivor's,
 *     which that ps drops as late): every ps gets the quorum of the count
 *     left at once (SYNC_STOP {replicas}, as c:scale's barrier sends it),
 *     and one already met is applied. The global steps do not change.
 *
 * A fed fit goes on too: the lost worker's batches go back to the queue
 * (the queue's rule, as without min) and the feed's consumers are the
 * trainers left (relist).
 *
 * Not shrunk (the loss fails the run, as without min): a chief, a sync fit whose backup workers would be all its trainers, fewer
 * than min left. */

/* Workers that would be left without node i: not taken away, not over. */
static int workers_left(const coord *c, int i) {
  int k = 0;
  for (int j = 0; j < c->nnodes; j++) {
    const coord_node *n = &c->nodes[j];
    if (j != i && n->role == ROLE_WORKER && !coord__scaled_away(n) &&
        !(coord__state_flags(n->state) & NS_FINAL))
      k++;
  }
  return k;
}

/* Why a loss cannot shrink a running fit ("" when it can). */
static void fit_refuses(const coord *c, int left, char *why, size_t n) {
  const coord_fit_state *f = c->fit;
  why[0] = '\0';
  if (!coord__fit_running(c)) return;
  int b = f->args ? f->args->backup_workers : 0;
  if (f->sync && trainers_after(f, left) <= b)
    snprintf(why, n, "; %d worker%s left for backup_workers = %d", left, left == 1 ? "" : "s", b);
}

bool coord__scale_lost(coord *c, int i, const char *why, char *left, size_t n) {
  coord_node *nd = &c->nodes[i];
  int min = c->opts.worker_min;
  left[0] = '\0';
  if (nd->role != ROLE_WORKER || c->shutting_down || min <= 0) return false;
  int k = workers_left(c, i);
  if (k < min) {
    snprintf(left, n, "; %d worker%s left, below min = %d", k, k == 1 ? "" : "s", min);
    return false;
  }
  fit_refuses(c, k, left, n);
  if (left[0]) return false;
  char name[32];
  coord__node_name(nd, name, sizeof name);
  if (coord__node_set_state(c, i, NODE_REMOVED, ": %s", why) < 0) return false;
  nd->restart_at = 0;
  log_warn("%s lost past its restarts: the cluster shrinks to %d workers (min %d)", name, k, min);
  rundir_event(&c->rd, "%s lost past its restarts: cluster shrinks to %d workers (min %d)", name,
               k, min);
  coord__sched_node_lost(c, i);
  coord__fit_node_lost(c, i);
  if (coord__fit_running(c)) coord__scale_fit_lost(c->fit, i);
  return true;
}

/* The global step the trainers are at: the highest a trainer gave. */
static int64_t global_at(const coord_fit_state *f) {
  int64_t g = 0;
  for (int t = 0; t < f->ntrainers; t++)
    if (f->taken[f->trainers[t]] > g) g = f->taken[f->trainers[t]];
  return g;
}

void coord__scale_fit_lost(coord_fit_state *f, int i) {
  coord *c = f->c;
  bool counted = false; /* in the quorum: a trainer, not one joining at a barrier */
  for (int t = 0; t < f->ntrainers; t++)
    if (f->trainers[t] == i) counted = !(f->sc.joining && f->sc.joining[i]);
  if (f->sc.joining) f->sc.joining[i] = false;
  if (f->sc.leaving) f->sc.leaving[i] = false;
  relist(f);
  if (f->sync && counted && f->replicas > 1) {
    uint32_t was = f->replicas--;
    if (f->sc.active && f->sc.phase == SC_BARRIER) /* the ps keep their barrier */
      for (int k = 0; k < f->nps; k++) send_barrier(f, k);
    else
      send_quorum(f, f->replicas);
    int64_t g = global_at(f);
    if (g < f->sync_target)
      f->p.total_steps = f->done + (f->sync_target - g) * (int64_t)f->replicas;
    rundir_event(&c->rd, "sync: %u gradients per global step from the one being summed "
                 "(about global step %lld; were %u): a worker was lost", f->replicas,
                 (long long)g, was);
  }
  if (!f->sync) {
    reshard(f);
    coord__fit_workers(f); /* a sync fit's is written as its barrier settles */
  } else if (!f->sc.active && alloc_marks(f) == 0) {
    /* new shards for the trainers left: at a global-step boundary, with no
     * step in flight, as c:scale's barrier gives them (one mid-step left
     * the trainers' steps and the ps's versions apart) */
    f->sc.from = f->sc.want = f->ntrainers;
    f->sc.active = true;
    begin_barrier(f);
  } /* else c:scale's barrier under way reshards as it crosses */
}

void coord__scale_free(coord_fit_state *f) {
  free(f->sc.joining);
  free(f->sc.leaving);
  free(f->sc.seen);
}
