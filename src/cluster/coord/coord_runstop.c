/* coord_runstop.c - `drover stop`: a control client ends the run.
 *
 * The run ends as Ctrl-C ends it, by the same path: the coordinator's
 * process raises SIGINT at itself, so the script's pcall sees an
 * interrupt (repl.c), the fit returns "interrupted", the cluster shuts
 * down as the Lua state closes, and the process exits 130 ("interrupted"
 * in `drover ls`, resumable from its newest checkpoint). Graceful, the
 * default, first asks the running fit for a checkpoint between two steps
 * (c:checkpoint()'s request) and raises once it is committed: the resume
 * loses nothing. "now" raises at the next tick (the reply goes out first).
 * A fit without checkpoints, or no fit, has nothing to save: at once too.
 *
 * A host that Ctrl-C does not end (the REPL) gives a stop handler
 * (coord_set_stop_handler): the run then ends by it, with the same
 * checkpoint first, and the reply and events.log say the cluster shuts
 * down while its host goes on.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/log.h"

enum { RUN_STOP_NONE, RUN_STOP_CHECKPOINT, RUN_STOP_NOW, RUN_STOP_RAISED };

/* Seconds to wait for the checkpoint (a ps being restored holds it). */
#define RUN_STOP_CKPT_WAIT 120.0

void coord_set_stop_handler(coord *c, coord_stop_fn fn, void *ud) {
  c->stop_fn = fn;
  c->stop_ud = ud;
}

/* How the run ends, for the reply. */
static const char *ending(const coord *c) {
  return c->stop_fn ? "its cluster shuts down (the REPL that hosts it goes on)"
                    : "the run ends as on Ctrl-C";
}

int coord__run_stop(coord *c, bool now, char *out, size_t n) {
  if (c->shutting_down || c->shut_down || c->run_stop == RUN_STOP_RAISED) {
    snprintf(out, n, "the run is already ending");
    return 0;
  }
  if (c->run_stop == RUN_STOP_NOW || (c->run_stop == RUN_STOP_CHECKPOINT && !now)) {
    snprintf(out, n, "the run is already stopping");
    return 0;
  }
  coord_fit_state *f = c->fit;
  c->run_stop_at = progress_now();
  if (!now && f && f->cfg && f->has_ckpt) {
    c->run_stop = RUN_STOP_CHECKPOINT;
    c->run_stop_step = f->done > 0 ? f->done : 1;
    f->ck.requested = true;
    snprintf(out, n, "stopping: a checkpoint of step %lld or the next, then %s",
             (long long)c->run_stop_step, ending(c));
  } else {
    c->run_stop = RUN_STOP_NOW;
    snprintf(out, n, "stopping: %s%s", ending(c),
             now ? " (no checkpoint first)" : ": no fit with checkpoints runs, nothing to save");
  }
  rundir_event(&c->rd, "stop requested (drover stop%s)", now ? " --now" : "");
  return 0;
}

/* Whether the checkpoint asked for is over: committed, or tried and
 * failed (no longer requested, none in progress, none of that step). */
static bool checkpoint_over(coord *c, bool *saved) {
  coord_fit_state *f = c->fit;
  *saved = false;
  if (!f || !f->cfg) return true; /* the fit ended meanwhile (with its final checkpoint) */
  *saved = f->ck.last_step >= c->run_stop_step;
  return *saved || (!f->ck.requested && f->ck.state == CK_IDLE && !f->ck.restoring);
}

void coord__run_stop_tick(coord *c, double now) {
  if (c->run_stop != RUN_STOP_CHECKPOINT && c->run_stop != RUN_STOP_NOW) return;
  if (c->shutting_down || c->shut_down) return;
  if (c->run_stop == RUN_STOP_CHECKPOINT) {
    bool saved;
    bool over = checkpoint_over(c, &saved);
    if (!over && now - c->run_stop_at < RUN_STOP_CKPT_WAIT) return;
    if (!saved && c->fit && c->fit->cfg)
      rundir_event(&c->rd, "stop: no checkpoint of step %lld (%s): stopping without it",
                   (long long)c->run_stop_step, over ? "it failed" : "not in time");
  }
  c->run_stop = RUN_STOP_RAISED;
  if (c->stop_fn) {
    rundir_event(&c->rd, "stopping the run: its cluster shuts down (drover stop; the REPL that "
                 "hosts it goes on)");
    c->stop_fn(c->stop_ud);
    return;
  }
  rundir_event(&c->rd, "stopping the run as on Ctrl-C (drover stop)");
  log_info("drover stop: raising SIGINT");
  kill(getpid(), SIGINT);
}
