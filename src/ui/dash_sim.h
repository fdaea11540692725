/* dash_sim.h - a simulated run for the dashboard: nodes with roles whose
 * states change over time (lost, restarting, back), training-like metrics
 * (loss falling with noise, accuracy rising, evals every few steps,
 * throughput) and events. For `drover _dash-sim`, the screen tests and the
 * CPU benchmark, without a cluster.
 */
#ifndef DROVER_DASH_SIM_H
#define DROVER_DASH_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "ui/dash.h"
#include "proto/runview.h"

typedef struct dash_sim dash_sim;

typedef struct dash_sim_opts {
  int nodes;           /* total, ps first (8) */
  uint64_t seed;       /* same seed, same run (1) */
  bool read_only;      /* the source has no ':' and no 'k' */
  const char *log_dir; /* when set, each node appends lines to DIR/<role>-<i>.log */
  double warp;         /* start this many simulated seconds in (full charts) */
  /* for dash_sim_run */
  double hz;           /* redraws per second (4) */
  double seconds;      /* leave after this long; <= 0: only on q */
  const char *theme;   /* NULL: $DROVER_THEME or default */
} dash_sim_opts;

/* A simulation at time 0. 0 with *out (the caller's, for dash_sim_free),
 * or DRV_ENOMEM / DRV_EINVAL (nodes < 1 or > 100000). */
int dash_sim_new(const dash_sim_opts *o, dash_sim **out);
void dash_sim_free(dash_sim *s);

/* Moves the simulation to `t` seconds after its start (in 0.1 s ticks;
 * never backwards) and returns its model (owned by s). */
const runview *dash_sim_advance(dash_sim *s, double t);

/* A source over s on the wall clock: each get() advances s to the time
 * since the first get(). command echoes, kill_node marks the node lost;
 * both NULL when read_only. s must outlive the dashboard. */
dash_source dash_sim_source(dash_sim *s);

/* `drover _dash-sim`: the dashboard on a simulation until q, a signal or
 * o->seconds. Returns the exit status (messages on stderr). */
int dash_sim_run(const dash_sim_opts *o);

#endif
