/* runsnap.h - a runview on the wire: the coordinator's metric store
 * (a model that knows what changed), one cursor per attach client, the
 * SNAPSHOT payload (layout in wire.h), and applying one to a client's copy.
 *
 * Header, queue and nodes travel whole in every SNAPSHOT. Series and
 * events travel as deltas: a client's cursor remembers, per series, how
 * many points it has received and the series' generation then, and the
 * store keeps the last RUNSNAP_LOG points appended to each series as
 * they came. A client gets the points appended since its cursor, in order,
 * and appends them to its copy with runview_add_point: whatever the
 * model does to a full series (drop every second point, or the oldest)
 * then happens to its copy as it did to the store's. A series that
 * changed other than through runsnap_store_point gets a new generation, and
 * travels whole (reset) to each client, as it does to a new client.
 *
 * Bytes are bounded: a delta carries at most RUNSNAP_MAX_POINTS points
 * of a series, a reset at most RUNSNAP_MAX_RESET. A client further
 * behind (a fast fit records a loss per step) gets that many of the points
 * it lacks, evenly spaced, the newest always among them; its copy is then
 * thinner than the store's, never out of order.
 *
 * Series are numbered in the store: 0 is the throughput chart (tag
 * "examples/s"), 1 + i is m.metrics[i]. On the wire a series is named by
 * its tag.
 */
#ifndef DROVER_RUNSNAP_H
#define DROVER_RUNSNAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/runview.h"
#include "proto/wire.h"

#define RUNSNAP_THROUGHPUT_TAG "examples/s" /* runview.throughput's tag */
#define RUNSNAP_MAX_SERIES 64    /* metric tags kept (more are dropped) */
#define RUNSNAP_MAX_NODES 65536  /* nodes a client accepts in one frame */
#define RUNSNAP_MAX_POINTS 128   /* points of one series per delta */
#define RUNSNAP_MAX_RESET 1024   /* points of one series sent whole */
#define RUNSNAP_LOG 1024         /* points appended kept per series for deltas */

/* What the store knows of one series' history. */
typedef struct runsnap_track {
  uint64_t added;  /* points ever appended */
  uint32_t gen;    /* bumped when the series changed behind the store */
  int n, head;     /* the series as the store left it */
  runview_point *log; /* point number a at log[a % RUNSNAP_LOG] (owned) */
} runsnap_track;

typedef struct runsnap_store {
  runview m;        /* header, nodes and queue are the owner's to fill */
  runsnap_track *track;   /* per series number (see above) */
  int ntrack, captrack;
  uint64_t events_added; /* events ever added */
} runsnap_store;

void runsnap_store_init(runsnap_store *s);
void runsnap_store_free(runsnap_store *s);
/* Appends a point to series `tag` (through runview_add_point) and
 * records how the series changed. DRV_ERANGE (nothing added) for a new
 * tag past RUNSNAP_MAX_SERIES; DRV_ENOMEM. */
int runsnap_store_point(runsnap_store *s, const char *tag, runview_point p);
/* Appends an event (text truncated to the model's size). */
int runsnap_store_event(runsnap_store *s, double wall, const char *text);

/* What one client has received. Zeroed: nothing yet. */
typedef struct runsnap_seen {
  bool known;
  uint32_t gen;
  uint64_t added;
} runsnap_seen;

typedef struct runsnap_cursor {
  runsnap_seen *series; /* per series number (owned) */
  int nseries;
  uint64_t events_added;
  uint32_t *got;     /* per node: hash of the `got` it last had (owned) */
  int ngot;
  uint32_t *links;   /* per node: hash of the `links` it last had (owned) */
  int nlinks;
} runsnap_cursor;

void runsnap_cursor_free(runsnap_cursor *k);

/* Writes a SNAPSHOT payload for the client at cursor k into w (which the
 * caller initialised and later finishes): s->m's header, queue and nodes,
 * and the points and events k has not had; then advances k. run_dir is
 * the run directory's path (node log paths go relative to it). 0, or
 * DRV_ENOMEM (w's error; k unchanged then). */
int runsnap_encode(const runsnap_store *s, const char *run_dir, runsnap_cursor *k, wire_wr *w);

/* Applies a SNAPSHOT payload (len bytes, borrowed) to a client's model m:
 * replaces header, queue and nodes (each node's log path made absolute
 * again, its name "role:index"), appends or resets the series it carries
 * and appends its events; bumps m->version. run_dir[n] gets the run
 * directory. Every count and string is checked against the model's
 * sizes; DRV_EPARSE names the first that does not fit (m may then be
 * partly updated: the caller drops the connection), DRV_ENOMEM. */
int runsnap_apply(runview *m, char *run_dir, size_t n, const uint8_t *p, size_t len);

#endif
