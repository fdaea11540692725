/* runview.h - what the dashboard draws: a snapshot of one run, as plain
 * data. The coordinator fills one from its own state (runview_fill, in
 * runview.c); an attach client rebuilds one from the frames it receives
 * (runview_apply). The dashboard's drawing and input code reads only
 * this struct: it never touches sockets or the coordinator.
 *
 * Ownership: a runview owns every array it points to; runview_free
 * releases them. Strings are fixed-size, NUL-terminated, truncated.
 */
#ifndef DROVER_RUNVIEW_H
#define DROVER_RUNVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/nodestate.h"

/* Points kept per series. A full series drops every second point (keeping
 * its first and newest), so the whole history stays at a lower resolution. */
#define RUNVIEW_SERIES_MAX 4096
#define RUNVIEW_EVENTS_MAX 256  /* events kept (oldest dropped) */

typedef struct runview_node {
  char name[32];          /* "worker:1" */
  int role, index;        /* wire_role, index */
  char host[64];
  int pid;
  char state[NODESTATE_SHOWN_MAX]; /* a shown name of nodestate.h: "starting",
                                     "busy", "restarting"... */
  int restarts;
  int64_t steps;          /* train steps completed */
  double examples_per_sec;
  double cpu_pct;         /* of one core, over the last heartbeats; <0 unknown */
  uint64_t rss;           /* bytes; 0 unknown */
  double heartbeat_age;   /* seconds since its last frame; <0 unknown */
  int inflight;           /* tasks (closures, train steps) it holds */
  int64_t backlog;        /* input batches waiting on it; <0 unknown */
  char log[512];          /* path of its log file (for the detail view) */
  char got[192];          /* what it got where it runs: address, threads,
                             cpus, memory, GPUs, Slurm job.step (detail view) */
  char where[200];        /* its launcher and place: "local", "yarn container_... @ h" */
  char links[160];        /* each connection's transport, "coord=shm,ps:0-1=shm" (the
                             coordinator's, then those it dialled); "-" none, "" unknown */
} runview_node;

/* One scalar series, TensorBoard-style: points in arrival order. */
typedef struct runview_point {
  double step;            /* global step (x axis "step") */
  double wall;            /* seconds since the run started (x axis "wall") */
  double value;
} runview_point;

typedef struct runview_series {
  char tag[64];           /* "train/loss", "eval/accuracy", ... */
  runview_point *pts;        /* ring of at most RUNVIEW_SERIES_MAX (owned); cap > 0
                             whenever n > 0 */
  int n, head, cap;       /* n points; oldest at pts[head] */
} runview_series;

typedef struct runview_event {
  double wall;            /* seconds since the run started */
  char text[200];         /* "node lost worker:1: killed by signal 9" */
} runview_event;

typedef struct runview {
  /* header */
  char run[160];          /* run directory's base name */
  char launcher[160];     /* "local"; "yarn application_... http://..." */
  char tensorboard[128];  /* the URL of the TensorBoard serving the run, or "" */
  char state[16];         /* "starting", "running", "training", "idle",
                             "failed", "shut down" */
  char mode[8];           /* "async" / "sync" / "" (no fit yet) */
  double uptime;          /* seconds */
  int64_t step, total_steps; /* of the fit in progress (or the last) */
  double examples_per_sec, eta; /* eta: seconds, <0 unknown */
  double feed_per_sec;    /* batches/s a feed delivers; <0: no feed */
  int attach_clients;
  /* sparse tables (coord_tables_summary): a line per table, "NAME ROWSxDIM
   * HELD TOUCHED BYTES" (held: rows on the ps; touched: unique rows of a
   * worker's step; bytes: its SPARSE_* bytes per step), "" for none */
  char tables[512];
  /* nodes, in the coordinator's order (ps first) */
  runview_node *nodes;
  int nnodes, capnodes;
  /* the task queue (coord_queue_stats) */
  int64_t queued, capacity, running, done, failed, retried, cancelled;
  /* charts */
  runview_series throughput; /* tag "examples/s", over wall time */
  runview_series *metrics;   /* one per tag, in first-seen order */
  int nmetrics, capmetrics;
  /* events, oldest first (a ring like the series) */
  runview_event *events;
  int nevents, events_head, capevents;
  uint64_t version;       /* bumped by every fill/apply that changed something */
  /* Local to this process (never sent in a snapshot): a note the status
   * line shows in place of the key hints ("run finished - q to leave"),
   * and a second run's metrics drawn over these (`drover attach A B`),
   * matched by tag, with that run's name. */
  char banner[160];
  runview_series *overlay;   /* owned */
  int noverlay;
  char overlay_run[160];
} runview;

/* An empty model (throughput's tag set). runview_free releases every
 * array it owns and leaves it empty again; NULL is fine. */
void runview_init(runview *m);
void runview_free(runview *m);

/* Makes dst (initialised or freed) a deep copy of src: 0 or DRV_ENOMEM
 * (dst empty then). */
int runview_copy(runview *dst, const runview *src);
/* The overlay series `tag` (runview.overlay), or NULL. */
const runview_series *runview_overlay(const runview *m, const char *tag);

/* Makes the model hold n nodes: nodes kept keep their fields, new ones are
 * zeroed. 0 or DRV_ENOMEM (the model unchanged). */
int runview_set_nnodes(runview *m, int n);
/* The node named `name` ("worker:1"), or NULL. */
const runview_node *runview_find_node(const runview *m, const char *name);

/* Appends a point to the series `tag` (made on first use; "examples/s" is
 * the throughput series) and bumps m->version. 0 or DRV_ENOMEM. */
int runview_add_point(runview *m, const char *tag, runview_point p);
/* The series `tag`, or NULL. */
const runview_series *runview_find_series(const runview *m, const char *tag);
/* Point i (0 = oldest) of a series. */
static inline const runview_point *runview_series_at(const runview_series *s, int i) {
  return &s->pts[(s->head + i) % s->cap];
}
/* Appends an event, text truncated to fit (the oldest goes when
 * RUNVIEW_EVENTS_MAX are kept), and bumps m->version. 0 or DRV_ENOMEM. */
int runview_add_event(runview *m, double wall, const char *text);
/* Event i, 0 = oldest. */
static inline const runview_event *runview_event_at(const runview *m, int i) {
  return &m->events[(m->events_head + i) % m->capevents];
}

#endif
