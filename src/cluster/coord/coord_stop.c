/* coord_stop.c - ending a sync fit early (stop = { ... } on a cluster).
 *
 * An async fit stops by dropping its queued steps: each step's update is
 * applied on arrival, so nothing waits on another worker. A sync fit
 * cannot: a worker's pull for the next global step is held by the ps until
 * `replicas` gradients of the current one arrived, and the task stream is
 * what brings them. Dropping it left workers' steps waiting at the ps
 * until the next fit's VAR_INIT answered them; those steps then pushed a
 * gradient computed on the old fit's version into the new fit, and the ps
 * closed their connections ("gradient for version 5 but the ps is at
 * version 0"), or summed it into the new fit's first update.
 *
 * So the coordinator lowers the fit's last global step instead, and the
 * fit ends the way a sync fit always ends (coord_fit.c): the task stream
 * goes on until every ps answered the end-of-fit probe, past that target
 * a ps holds no PULL and ignores pushes, and every running step returns.
 * The target must be the same on every ps (the shards of one global
 * step) and at or above where each ps already is:
 *
 *   1. cap: SYNC_STOP {0} to every ps, each followed by a PULL of no
 *      variables (STOP_REQ). A ps's target becomes at most version + 1,
 *      the step it is summing; at its cap it still sums that step's
 *      gradients (without applying them) in case the final target is one
 *      further. The PULL's reply, read behind the cap, is the version.
 *   2. end: the final target is the highest cap; SYNC_STOP {target} to
 *      every ps, which applies a step summed meanwhile at once. The
 *      end-of-fit probes are answered at that target.
 *
 * A promoted primary is sent the phase it missed (ps_ready); a rollback's
 * VAR_INIT carries the lowered target once it is final, and starts phase 1
 * again before that.
 */
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

static int send_stop(coord_fit_state *f, int k, uint64_t target) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sync_stop(&w, &(wire_msg_sync_stop){.target = target});
  int rc = conn_send_wr(f->ps[k], &w, WIRE_SYNC_STOP, 0);
  if (rc < 0 || target) return rc;
  wire_wr_init(&w);
  wire_put_pull(&w, &(wire_msg_pull){.min_version = 0}); /* no vars: the version */
  return conn_send_wr(f->ps[k], &w, WIRE_PULL, STOP_REQ);
}

/* Phase 1 to group k's ps (not connected: ps_ready sends it). */
static void cap_one(coord_fit_state *f, int k) {
  if (f->ps[k] && send_stop(f, k, 0) < 0)
    log_warn("sync stop: cannot reach ps:%d: %s", k, err_msg());
}

void coord__sync_stop_begin(coord_fit_state *f) {
  if (!f->sync || f->stop_phase != 0) return;
  f->stop_phase = 1;
  f->stop_target = 0;
  f->stop_waiting = f->nps;
  memset(f->stop_seen, 0, (size_t)f->nps * sizeof *f->stop_seen);
  for (int k = 0; k < f->nps; k++) cap_one(f, k);
}

/* Phase 2: every ps ends at the highest cap. */
static void end_all(coord_fit_state *f) {
  f->stop_phase = 2;
  f->sync_target = f->stop_target;
  f->p.global_steps = f->sync_target;
  rundir_event(&f->c->rd, "fit: sync training ends at global step %lld",
               (long long)f->sync_target);
  for (int k = 0; k < f->nps; k++)
    if (f->ps[k] && send_stop(f, k, (uint64_t)f->stop_target) < 0)
      log_warn("sync stop: cannot reach ps:%d: %s", k, err_msg());
}

void coord__sync_stop_reply(coord_fit_state *f, int k, uint64_t version) {
  if (f->stop_phase != 1 || k < 0 || k >= f->nps || f->stop_seen[k]) return;
  f->stop_seen[k] = true;
  int64_t cap = (int64_t)version + 1;
  if (cap > f->sync_target) cap = f->sync_target;
  if (cap > f->stop_target) f->stop_target = cap;
  if (--f->stop_waiting == 0) end_all(f);
}

void coord__sync_stop_again(coord_fit_state *f, int k) {
  if (f->stop_phase == 1 && k >= 0 && !f->stop_seen[k]) {
    cap_one(f, k);
  } else if (f->stop_phase == 1 && k < 0) { /* a rollback's VAR_INIT undid every cap */
    f->stop_phase = 0;
    coord__sync_stop_begin(f);
  } else if (f->stop_phase == 2 && k >= 0 && f->ps[k] &&
             send_stop(f, k, (uint64_t)f->stop_target) < 0) {
    log_warn("sync stop: cannot reach ps:%d: %s", k, err_msg());
  }
}
