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
 * Refused, with the reason: a change during a fit or while closures are
 * queued or running (their plan, shards and quorum were fixed when they
 * began), and any launcher but "local". */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"
#include "train/progress.h"

#define SCALE_GRACE_MS 5000 /* a worker's time to finish and exit */
#define SCALE_TIMEOUT 30.0  /* then it is killed; its exit still ends it */

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
  if (role != ROLE_WORKER) return err_set(DRV_EUNSUPPORTED, "c:scale: only workers can be scaled");
  const char *l = coord_role_launcher(&c->opts, ROLE_WORKER);
  if (strcmp(l, "local") != 0)
    return err_set(DRV_EUNSUPPORTED, "c:scale: launcher '%s' cannot add or remove nodes yet", l);
  if (c->shutting_down || c->shut_down) return err_set(DRV_EINVAL, "c:scale: the cluster was shut down");
  if (c->failures) return err_set(DRV_ENODE, "c:scale: %s", c->failure);
  if (coord__fit_running(c))
    return err_set(DRV_EAGAIN, "c:scale: not during a fit yet (its shards and sync quorum are "
                              "fixed at its start); scale between fits");
  if (c->sched.calls_queued || c->sched.calls_running)
    return err_set(DRV_EAGAIN, "c:scale: not while closures are queued or running (%lld, %lld)",
                   (long long)c->sched.calls_queued, (long long)c->sched.calls_running);
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

int coord__scale_room(const coord_opts *o) {
  return o->worker_max > o->count[ROLE_WORKER] ? o->worker_max - o->count[ROLE_WORKER] : 0;
}

/* A worker slot to start: the lowest-indexed removed one, else a new one
 * at the next index; -1 when the table has no room. */
static int worker_slot(coord *c) {
  int next = 0;
  for (int i = 0; i < c->nnodes; i++) {
    if (c->nodes[i].role != ROLE_WORKER) continue;
    if (c->nodes[i].state == NODE_REMOVED) return i;
    if (c->nodes[i].index >= next) next = c->nodes[i].index + 1;
  }
  if (c->nnodes >= c->node_cap) return -1;
  coord_node *n = &c->nodes[c->nnodes];
  memset(n, 0, sizeof *n);
  n->role = ROLE_WORKER;
  n->index = next;
  n->state = NODE_STARTING;
  return c->nnodes++;
}

/* Launches one more worker; 0 or negative. */
static int add_one(coord *c) {
  int i = worker_slot(c);
  if (i < 0) return err_set(DRV_ERANGE, "c:scale: no room for another worker");
  coord_node *n = &c->nodes[i];
  bool back = n->state == NODE_REMOVED;
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

static int grow(coord *c, int have, int want) {
  for (int k = have; k < want; k++) {
    int rc = add_one(c);
    if (rc < 0) return rc;
  }
  return 0;
}

static bool none_removing(coord *c, void *arg) {
  (void)arg;
  for (int i = 0; i < c->nnodes; i++)
    if (c->nodes[i].state == NODE_REMOVING) return false;
  return true;
}
/* SHUTDOWN to the highest-indexed workers beyond `want`. */
static void remove_beyond(coord *c, int want) {
  int keep = 0;
  for (int i = 0; i < c->nnodes; i++) {
    coord_node *n = &c->nodes[i];
    if (n->role != ROLE_WORKER || coord__scaled_away(n)) continue;
    if (keep++ < want) continue;
    if (coord__node_set_state(c, i, NODE_REMOVING, ": scaled away") < 0) continue;
    wire_wr w;
    wire_wr_init(&w);
    wire_put_shutdown(&w, &(wire_msg_shutdown){SCALE_GRACE_MS});
    coord__send(c, i, &w, WIRE_SHUTDOWN, 0);
  }
}

int coord_scale_begin(coord *c, int role, int want, const char *by, char *out, size_t n) {
  int rc = check_can(c, role);
  int have = coord_scale_count(c, role);
  if (rc < 0 || (rc = check_count(c, have, want)) < 0) {
    snprintf(out, n, "%s", err_msg());
    return rc;
  }
  if (want == have) {
    snprintf(out, n, "worker = %d already", have);
    return 0;
  }
  rundir_event(&c->rd, "scale: worker %d -> %d (requested by %s)", have, want, by);
  if (want < have) {
    remove_beyond(c, want);
  } else if ((rc = grow(c, have, want)) < 0) {
    snprintf(out, n, "%s", err_msg());
    return rc;
  }
  snprintf(out, n, "scaling: worker %d -> %d", have, want);
  return 0;
}

/* The change asked is over: no worker removing, every one kept up. */
static bool settled(coord *c, void *arg) { return none_removing(c, arg) && workers_up(c, arg); }

int coord_scale(coord *c, int role, int want, const char *by) {
  char out[512];
  int have = coord_scale_count(c, role);
  int rc = coord_scale_begin(c, role, want, by, out, sizeof out);
  if (rc < 0 || want == have) return rc;
  double limit = want > have ? c->opts.reservation_timeout : SCALE_TIMEOUT;
  rc = coord__pump(c, settled, NULL, limit, want > have);
  if (rc == DRV_ETIMEDOUT && want < have) { /* killed: the exit ends each in REMOVED */
    for (int i = 0; i < c->nnodes; i++)
      if (c->nodes[i].state == NODE_REMOVING) coord__signal(c, i, SIGKILL);
    rc = coord__pump(c, none_removing, NULL, SCALE_TIMEOUT, false);
  }
  if (rc == DRV_ETIMEDOUT)
    return err_set(rc, "c:scale: worker %d -> %d not done within %g s", have, want, limit);
  if (rc < 0) return err_set(rc, "c:scale: %s", err_msg());
  rundir_event(&c->rd, "scale: worker %d -> %d done", have, want);
  return 0;
}
