/* coord_summaries.c - the chief's TensorBoard summaries when the chief
 * cannot see the run directory (docs/run-directory.md, "TensorBoard").
 *
 * A chief on a Spark executor, a YARN container or an ssh host without
 * the shared directory would write events/chief/ on its own disk, or
 * nowhere. Its RESULT frames reach the coordinator anyway and carry all
 * that the chief writes (the batch's loss and accuracy at the task id),
 * so the coordinator writes the same file from them. Who writes is the
 * REGISTER token's verdict (coord_ckpt_route.c), told to the chief in
 * REGISTERED (sees_rundir): it opens its writer only then, and the
 * coordinator writes only for a chief whose token did not match, so a
 * run never has both. */
#include <stdbool.h>

#include "base/log.h"
#include "cluster/coord/coord_int.h"
#include "run/events.h"

static bool coord_writes(const coord *c, int node) {
  return c->nodes[node].role == ROLE_CHIEF && !c->nodes[node].sees_rundir && c->rd.path[0];
}

void coord__summaries_register(coord *c, int node) {
  if (!coord_writes(c, node)) return;
  rundir_event(&c->rd, "summaries: the chief's through the coordinator (the run directory is "
                       "not visible on its host)");
  log_info("summaries: the chief cannot see the run directory; the coordinator writes its "
           "events/chief/ from its RESULTs");
}

void coord__summaries_result(coord *c, int node, const uint8_t *payload, uint32_t len) {
  if (!coord_writes(c, node)) return;
  if (!c->chief_events && !c->chief_events_tried) {
    c->chief_events_tried = true; /* a failure is said once, not per step */
    c->chief_events = events_run_open(c->rd.path, "chief");
  }
  events_run_result_payload(c->chief_events, payload, len);
}

void coord__summaries_tick(coord *c) { events_run_tick(c->chief_events); }

void coord__summaries_flush(coord *c) { events_run_flush(c->chief_events); }

void coord__summaries_close(coord *c) {
  events_run_close(c->chief_events);
  c->chief_events = NULL;
}
