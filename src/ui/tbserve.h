/* tbserve.h - `drover tensorboard [RUN...]`: one TensorBoard (run/tboard.h)
 * serving runs side by side, in the foreground until Ctrl-C.
 *
 * Each run is served under its own name (its directory's name; a second
 * run of the same name gets "-2"), as TensorBoard's logdir_spec
 * "name:/abs/run/events,...": TensorBoard lists "name/coordinator",
 * "name/chief", "name/train"... and overlays the runs' curves. Without RUN,
 * every run under the runs directory that has events/. A run may still be
 * running: TensorBoard reads its files as they grow.
 */
#ifndef DROVER_TBSERVE_H
#define DROVER_TBSERVE_H

#include <stdio.h>

#include "run/tboard.h"

typedef struct tbserve_opts {
  const char *runs;          /* where names are looked up ("runs") */
  const char *const *names;  /* RUN arguments (runs_find's rule); may be 0 */
  int nnames;
  tboard_opts tb;            /* port (0: TensorBoard's way), bind */
} tbserve_opts;

/* Starts TensorBoard, says its URL and the runs on out, and waits until
 * SIGINT, SIGTERM or SIGHUP (then stops it: 0) or until it exits by
 * itself (DRV_EIO saying how). Errors before the start: a run not found or
 * without events/ (DRV_EINVAL), none at all, a name or path a logdir_spec
 * cannot carry, TensorBoard missing or its port taken (tboard_check). */
int tbserve_main(const tbserve_opts *o, FILE *out);

#endif
