/* coord_scale.c - c:scale { worker = N }: the worker count changed at run
 * time, between fits, on the local launcher.
 *
 * Shrinking: the highest-indexed workers go READY -> REMOVING (SHUTDOWN,
 * no tasks) -> REMOVED once they exited; their exit is no loss
 * (coord__node_lost), and the next fit or feed plans without them
 * (coord__scaled_away), so shards, the sync quorum and backup workers are
 * computed for the workers left.
 *
 * Growing: removed workers come back first, lowest index first (REMOVED
 * -> RELAUNCHED -> READY, as a restart), then new ones take the next
 * indices in the room the table was given at start (worker = { max }: the
 * table never moves, a launcher's task holds its node's address). Each is
 * launched, registers, gets SPEC (and SETUP after a c:setup) and the next
 * fit plans with it.
 *
 * Closures queued or running go on: a removed worker finishes the one it
 * runs (SHUTDOWN's grace), the ones queued on it go back to the queue
 * when it exits (at least once, as after any loss), and a new worker
 * takes closures once it registered.
 *
 * Launchers. Added workers are started by the workers' launcher, which
 * first says whether they fit (launch_ops.room: a Slurm allocation's
 * CPUs, ssh hosts' free slots); a launcher without that word cannot add
 * or remove nodes yet and c:scale refuses, naming it. A removed worker's
 * exit is its step's, container's or ssh's end, as for a local process.
 *
 * During a fit: coord_scale_fit.c. Refused, with the reason: a launcher
 * that cannot scale, a fed fit, another change under way. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"
#include "train/progress.h"


bool coord__scaled_away(const coord_node *n) {
  return n->state == NODE_REMOVING || n->state == NODE_REMOVED;
}

int coord_scale_count(const coord *c, int role) {
  int k = 0;
  for (int i = 0; i < c->nnodes; i++)
    if (c->nodes[i].role == role && !coord__scaled_away(&c->nodes[i])) k++;
  return k;
}

/* Refusals that hold whatever the count asked. */
static int check_can(const coord *c, int role) {
  if (role == ROLE_PS)
    return err_set(DRV_EUNSUPPORTED, "c:scale: ps cannot be scaled: they hold the model's shards, "
                                     "placed when the cluster starts; only workers can be scaled");
  if (role == ROLE_EVALUATOR || role == ROLE_CHIEF)
    return err_set(DRV_EUNSUPPORTED, "c:scale: %s cannot be scaled: a cluster has 0 or 1 %s, "
                   "fixed when it starts; only workers can be scaled", wire_role_name(role),
                   wire_role_name(role));
  if (role != ROLE_WORKER) return err_set(DRV_EUNSUPPORTED, "c:scale: only workers can be scaled");
  const char *l = coord_role_launcher(&c->opts, ROLE_WORKER);
  const launcher *L = c->role_launch[ROLE_WORKER];
  if (!L || !L->ops->room)
    return err_set(DRV_EUNSUPPORTED, "c:scale: launcher '%s' cannot add or remove nodes yet", l);
  if (c->shutting_down || c->shut_down) return err_set(DRV_EINVAL, "c:scale: the cluster was shut down");
  if (c->failures) return err_set(DRV_ENODE, "c:scale: %s", c->failure);
  return 0;
}

static int check_count(const coord *c, int have, int want) {
  int lo = c->opts.worker_min > 1 ? c->opts.worker_min : 1, hi = c->opts.worker_max;
  if (hi && want > hi)
    return err_set(DRV_EINVAL, "c:scale: worker = %d is above max = %d", want, hi);
  if (want < lo)
    return err_set(DRV_EINVAL, "c:scale: worker = %d is below %s = %d", want,
                   c->opts.worker_min > 1 ? "min" : "the least one", lo);
  if (want > have && !hi)
    return err_set(DRV_EINVAL, "c:scale: adding workers (%d -> %d) needs worker = { max = N } "
                               "in drover.cluster", have, want);
  return 0;
}

/* The launcher's word on the `add` workers grow() starts: the removed
 * ones, lowest index first, then new indices (worker_slot's order). */
static int check_room(coord *c, int add) {
  launcher *l = c->role_launch[ROLE_WORKER];
  int *idx = malloc((size_t)add * sizeof *idx), k = 0, next = 0;
  if (!idx) return err_set(DRV_ENOMEM, "out of memory");
  for (int i = 0; i < c->nnodes; i++) {
    const coord_node *n = &c->nodes[i];
    if (n->role != ROLE_WORKER) continue;
    if (n->state == NODE_REMOVED && n->exited && k < add) idx[k++] = n->index;
    if (n->index >= next) next = n->index + 1;
  }
  while (k < add) idx[k++] = next++;
  int rc = l->ops->room(l, ROLE_WORKER, idx, add, c->opts.res[ROLE_WORKER].cpus);
  free(idx);
  if (rc < 0) {
    char why[512];
    snprintf(why, sizeof why, "%s", err_msg());
    return err_set(rc, "c:scale: %s", why);
  }
  return 0;
}

int coord__scale_room(const coord_opts *o) {
  return o->worker_max > o->count[ROLE_WORKER] ? o->worker_max - o->count[ROLE_WORKER] : 0;
}

/* A worker slot to start: the lowest-indexed removed one, else a new one
 * at the next index; -1 when the table has no room. */
static int worker_slot(coord *c) {
  int next = 0;
  for (int i = 0; i < c->nnodes; i++) {
    if (c->nodes[i].role != ROLE_WORKER) continue;
    if (c->nodes[i].state == NODE_REMOVED && c->nodes[i].exited) return i;
    if (c->nodes[i].index >= next) next = c->nodes[i].index + 1;
  }
  if (c->nnodes >= c->node_cap) return -1;
  coord_node *n = &c->nodes[c->nnodes];
  memset(n, 0, sizeof *n);
  n->role = ROLE_WORKER;
  n->index = next;
  n->state = NODE_STARTING;
  n->launcher = coord_role_launcher(&c->opts, ROLE_WORKER);
  return c->nnodes++;
}

/* Launches one more worker; 0 or negative. */
static int add_one(coord *c) {
  int i = worker_slot(c);
  if (i < 0) return err_set(DRV_ERANGE, "c:scale: no room for another worker");
  coord_node *n = &c->nodes[i];
  bool back = n->state == NODE_REMOVED;
  n->restarts = 0; /* a new process: restarts of its own (one lost past its own came here) */
  n->exited = false;
  n->exit_status = 0;
  n->term_signal = 0;
  n->closed_at = 0;
  n->inflight = 0;
  n->restart_at = progress_now(); /* a RELAUNCHED node's registration clock */
  int rc = coord__launch_node(c, i);
  if (rc < 0) {
    n->exited = true;
    return rc;
  }
  char name[32];
  coord__node_name(n, name, sizeof name);
  if (back)
    coord__node_set_state(c, i, NODE_RELAUNCHED, ": scaled up pid %d", (int)n->pid);
  else
    rundir_event(&c->rd, "node start %s pid %d (scaled up)", name, (int)n->pid);
  return 0;
}

/* Every worker not taken away is up (or the run failed). */
static bool workers_up(coord *c, void *arg) {
  (void)arg;
  for (int i = 0; i < c->nnodes; i++) {
    const coord_node *n = &c->nodes[i];
    if (n->role == ROLE_WORKER && !coord__scaled_away(n) && !(coord__state_flags(n->state) & NS_REGISTERED))
      return false;
  }
  return true;
}

int coord__scale_grow(coord *c, int have, int want) {
  for (int k = have; k < want; k++) {
    int rc = add_one(c);
    if (rc < 0) return rc;
  }
  return 0;
}

/* A removed worker is gone once its launcher reported its exit: a Spark
 * driver, an srun or a container ends a moment after the node's
 * connection, and its slot must not be started again under the old
 * process (whose exit would then be taken for the new one's). */
bool coord__scale_none_removing(coord *c, void *arg) {
  (void)arg;
  for (int i = 0; i < c->nnodes; i++) {
    const coord_node *n = &c->nodes[i];
    if (n->state == NODE_REMOVING || (n->state == NODE_REMOVED && !n->exited)) return false;
  }
  return true;
}
/* SHUTDOWN to the highest-indexed workers beyond `want`. */
void coord__scale_remove_beyond(coord *c, int want) {
  int keep = 0;
  for (int i = 0; i < c->nnodes; i++) {
    coord_node *n = &c->nodes[i];
    if (n->role != ROLE_WORKER || coord__scaled_away(n)) continue;
    if (keep++ < want) continue;
    if (coord__node_set_state(c, i, NODE_REMOVING, ": scaled away") < 0) continue;
    wire_wr w;
    wire_wr_init(&w);
    wire_put_shutdown(&w, &(wire_msg_shutdown){COORD_SCALE_GRACE_MS});
    coord__send(c, i, &w, WIRE_SHUTDOWN, 0);
  }
}

int coord_scale_begin(coord *c, int role, int want, const char *by, char *out, size_t n) {
  int rc = check_can(c, role);
  int have = coord_scale_count(c, role);
  if (rc == 0 && coord__fit_running(c)) rc = coord__scale_fit_check(c->fit, have, want);
  if (rc == 0) rc = check_count(c, have, want);
  if (rc == 0 && want > have) rc = check_room(c, want - have);
  if (rc < 0) {
    snprintf(out, n, "%s", err_msg());
    return rc;
  }
  if (want == have) {
    snprintf(out, n, "worker = %d already", have);
    return 0;
  }
  rundir_event(&c->rd, "scale: worker %d -> %d (requested by %s)", have, want, by);
  if (coord__fit_running(c)) {
    rc = coord__scale_fit(c->fit, have, want);
    if (rc < 0) snprintf(out, n, "%s", err_msg());
    else snprintf(out, n, "scaling during the fit: worker %d -> %d", have, want);
    return rc;
  }
  if (want < have) {
    coord__scale_remove_beyond(c, want);
  } else if ((rc = coord__scale_grow(c, have, want)) < 0) {
    snprintf(out, n, "%s", err_msg());
    return rc;
  }
  snprintf(out, n, "scaling: worker %d -> %d", have, want);
  return 0;
}

/* "ROLE=": its role, and *v past the '='; -1 when text names none. */
static int text_role(const char *text, const char **v) {
  for (int r = 0; r < ROLE_COUNT; r++) {
    size_t k = strlen(wire_role_name(r));
    if (strncmp(text, wire_role_name(r), k) == 0 && text[k] == '=') {
      *v = text + k + 1;
      return r;
    }
  }
  return -1;
}

int coord_scale_text(coord *c, const char *text, const char *by, char *out, size_t n) {
  const char *v = text;
  int role = text_role(text, &v);
  bool rel = *v == '+' || *v == '-';
  char *end = NULL;
  long k = role >= 0 && (rel || (*v >= '0' && *v <= '9')) ? strtol(v, &end, 10) : 0;
  if (!end || *end || k < -COORD_MAX_PER_ROLE || k > COORD_MAX_PER_ROLE) {
    snprintf(out, n, "drover scale: expected worker=N (0..%d) or worker=+K, worker=-K, not "
             "'%.64s'", COORD_MAX_PER_ROLE, text);
    return DRV_EINVAL;
  }
  if (rel) k += coord_scale_count(c, role);
  return coord_scale_begin(c, role, (int)k, by, out, n);
}

/* The change asked is over: no worker removing, every one kept up. */
bool coord__scale_settled(coord *c, void *arg) {
  return coord__scale_none_removing(c, arg) && workers_up(c, arg);
}

int coord_scale(coord *c, int role, int want, const char *by) {
  char out[512];
  int have = coord_scale_count(c, role);
  int rc = coord_scale_begin(c, role, want, by, out, sizeof out);
  if (rc < 0) return err_set(rc, "%s", out);
  if (want == have || coord__fit_running(c)) return 0; /* the fit loop carries it out */
  double limit = want > have ? c->opts.reservation_timeout : COORD_SCALE_TIMEOUT;
  rc = coord__pump(c, coord__scale_settled, NULL, limit, want > have);
  if (rc == DRV_ETIMEDOUT && want < have) { /* killed: the exit ends each in REMOVED */
    for (int i = 0; i < c->nnodes; i++)
      if (c->nodes[i].state == NODE_REMOVING) coord__signal(c, i, SIGKILL);
    rc = coord__pump(c, coord__scale_none_removing, NULL, COORD_SCALE_TIMEOUT, false);
  }
  if (rc == DRV_ETIMEDOUT)
    return err_set(rc, "c:scale: worker %d -> %d not done within %g s", have, want, limit);
  if (rc < 0) return err_set(rc, "c:scale: %s", err_msg());
  rundir_event(&c->rd, "scale: worker %d -> %d done", have, want);
  return 0;
}
