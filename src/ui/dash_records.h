/* dash_records.h - a finished run as the dashboard shows it: a runview
 * rebuilt from what the run directory keeps (rundir.h): metrics.jsonl
 * (the scalar series, examples/s), events.log (the events, how long it
 * ran) and nodes.tsv (the nodes), for `drover attach` on a run that has
 * ended, and `drover attach A B`, which overlays two runs' metrics.
 */
#ifndef DROVER_DASH_RECORDS_H
#define DROVER_DASH_RECORDS_H

#include "proto/runview.h"

/* Fills m (initialised or freed first) from run directory `dir`: state
 * `state` ("done", "failed"; as runs_state says), the banner "finished at
 * LOCAL-TIME (exit N)" (`ended` is events.log's last UTC time stamp; N is
 * events.log's "process exit: N" when it has one, else 0 for a run that is
 * done and 1 otherwise). Missing files leave their part empty.
 * 0, DRV_EIO (dir unreadable), DRV_ENOMEM. */
int dash_records_load(const char *dir, const char *state, const char *ended, runview *m);

/* Moves b's metric series into a's overlay (b is left without them), with
 * b's run name; a tag only b has gets an empty series of its own in a, so
 * that its panel is there. 0 or DRV_ENOMEM. */
int dash_records_overlay(runview *a, runview *b);

#endif
