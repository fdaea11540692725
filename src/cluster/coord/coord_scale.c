/* coord_scale.c - c:scale { worker = N }: the worker count changed at run
 * time, between fits, on the local launcher.
 *
 * What is built: shrinking. The highest-indexed workers go READY ->
 * REMOVING (SHUTDOWN, no tasks) -> REMOVED once they exited; their exit is
 * no loss (coord__node_lost), and the next fit or feed plans without them
 * (coord__scaled_away), so shards, the sync quorum and backup workers are
 * computed for the workers left. What is refused, with the reason: growing
 * (the node table and every per-node array are sized once, at start), a
 * change during a fit or while closures are queued or running (their
 * plan, shards and quorum were fixed when they began), and any launcher
 * but "local". */
#include <signal.h>
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

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
  if (want > have)
    return err_set(DRV_EUNSUPPORTED, "c:scale: adding workers (%d -> %d) is not built yet; "
                                     "only shrinking is", have, want);
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

int coord_scale(coord *c, int role, int want, const char *by) {
  int rc = check_can(c, role);
  int have = coord_scale_count(c, role);
  if (rc < 0 || (rc = check_count(c, have, want)) < 0) return rc;
  if (want == have) return 0;
  rundir_event(&c->rd, "scale: worker %d -> %d (requested by %s)", have, want, by);
  remove_beyond(c, want);
  rc = coord__pump(c, none_removing, NULL, SCALE_TIMEOUT, false);
  if (rc == DRV_ETIMEDOUT) { /* killed: the exit ends each in REMOVED */
    for (int i = 0; i < c->nnodes; i++)
      if (c->nodes[i].state == NODE_REMOVING) coord__signal(c, i, SIGKILL);
    rc = coord__pump(c, none_removing, NULL, SCALE_TIMEOUT, false);
  }
  if (rc < 0) return err_set(rc, "c:scale: workers did not exit: %s", err_msg());
  return 0;
}
