/* runsnap.c - the coordinator's metric store and the SNAPSHOT frame:
 * tracking how each series changes, encoding a snapshot for one attach
 * client from its cursor, and applying a snapshot to a client's model
 * (see runsnap.h; the layout is in wire.h).
 *
 * The store never looks inside runview_add_point: a client replays the
 * same appends on its copy, so whatever the model does to a full series
 * (decimate it, drop the oldest) happens there too. Only a series found
 * changed since the store last left it (its n or head moved) is resent
 * whole.
 */
#include "proto/runsnap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/rundir.h"
#include "proto/wire_msgs.h"

/* ============================== the store ================================= */

void runsnap_store_init(runsnap_store *s) {
  memset(s, 0, sizeof *s);
  runview_init(&s->m);
}

void runsnap_store_free(runsnap_store *s) {
  runview_free(&s->m);
  for (int i = 0; i < s->ntrack; i++) free(s->track[i].log);
  free(s->track);
  memset(s, 0, sizeof *s);
}

static runview_series *series_no(runview *m, int i) {
  if (i == 0) return &m->throughput;
  return i - 1 < m->nmetrics ? &m->metrics[i - 1] : NULL;
}

/* The series number of tag; m->nmetrics + 1 for a tag not seen yet. */
static int series_of(const runview *m, const char *tag) {
  if (strcmp(tag, RUNSNAP_THROUGHPUT_TAG) == 0) return 0;
  for (int i = 0; i < m->nmetrics; i++)
    if (strcmp(m->metrics[i].tag, tag) == 0) return i + 1;
  return m->nmetrics + 1;
}

static int grow_track(runsnap_store *s, int want) {
  if (want <= s->ntrack) return 0;
  if (want > s->captrack) {
    int cap = s->captrack ? 2 * s->captrack : 8;
    while (cap < want) cap *= 2;
    runsnap_track *t = realloc(s->track, (size_t)cap * sizeof *t);
    if (!t) return err_set(DRV_ENOMEM, "out of memory");
    s->track = t;
    s->captrack = cap;
  }
  memset(s->track + s->ntrack, 0, (size_t)(want - s->ntrack) * sizeof *s->track);
  s->ntrack = want;
  return 0;
}

int runsnap_store_point(runsnap_store *s, const char *tag, runview_point p) {
  int i = series_of(&s->m, tag);
  if (i > RUNSNAP_MAX_SERIES)
    return err_set(DRV_ERANGE, "more than %d metric tags: '%s' dropped", RUNSNAP_MAX_SERIES,
                   tag);
  int rc = grow_track(s, i + 1);
  if (rc < 0) return rc;
  runsnap_track *t = &s->track[i];
  if (!t->log && !(t->log = malloc(RUNSNAP_LOG * sizeof *t->log)))
    return err_set(DRV_ENOMEM, "out of memory");
  const runview_series *se = series_no(&s->m, i);
  if ((se ? se->n : 0) != t->n || (se ? se->head : 0) != t->head) t->gen++; /* behind our back */
  if ((rc = runview_add_point(&s->m, tag, p)) < 0) return rc;
  se = series_no(&s->m, i);
  if (!se) return err_set(DRV_EINVAL, "dash store: series '%s' did not appear", tag);
  t->log[t->added % RUNSNAP_LOG] = p;
  t->added++;
  t->n = se->n;
  t->head = se->head;
  return 0;
}

int runsnap_store_event(runsnap_store *s, double wall, const char *text) {
  int rc = runview_add_event(&s->m, wall, text);
  if (rc == 0) s->events_added++;
  return rc;
}

void runsnap_cursor_free(runsnap_cursor *k) {
  free(k->series);
  free(k->got);
  free(k->links);
  memset(k, 0, sizeof *k);
}

/* ============================== encoding ================================== */

/* What client k lacks of series i: 0 (nothing), the whole series
 * (*reset), or the points appended since its cursor. */
static uint64_t points_due(const runsnap_store *s, const runsnap_cursor *k, int i, bool *reset) {
  const runview_series *se = series_no((runview *)&s->m, i);
  const runsnap_track *t = &s->track[i];
  const runsnap_seen *seen = i < k->nseries ? &k->series[i] : NULL;
  *reset = !seen || !seen->known || seen->gen != t->gen;
  if (*reset) return se ? (uint64_t)se->n : 0;
  return t->added - seen->added;
}

/* Index j of `sent` evenly spaced over [0, count): the first at 0 and the
 * last at count - 1 (just the last when sent is 1). */
static uint64_t spaced(int j, int sent, uint64_t count) {
  if (sent <= 1) return count - 1;
  return (uint64_t)((double)j * (double)(count - 1) / (sent - 1) + 0.5);
}

static void put_point(wire_wr *w, const runview_point *p) {
  wire_put_item_snap_point(w, &(wire_item_snap_point){p->step, p->wall, p->value});
}

/* One series of a snapshot, as its points callback sees it. */
typedef struct series_out {
  const runview_series *se;
  const runsnap_track *t;
  uint64_t avail;
  int sent;
  bool reset;
} series_out;

/* A reset: the series (at most RUNSNAP_MAX_RESET of it). A delta: the
 * `due` points appended since the client's cursor, from the log (at most
 * RUNSNAP_MAX_POINTS of them; of more than the log holds, its newest). */
static void put_series_point(wire_wr *w, void *ud, uint32_t j) {
  const series_out *so = ud;
  uint64_t x = spaced((int)j, so->sent, so->avail);
  if (so->reset)
    put_point(w, runview_series_at(so->se, (int)x));
  else
    put_point(w, &so->t->log[(so->t->added - so->avail + x) % RUNSNAP_LOG]);
}

static void write_series(wire_wr *w, const runview_series *se, const runsnap_track *t, uint64_t due,
                         bool reset) {
  series_out so = {se, t, reset || due < RUNSNAP_LOG ? due : RUNSNAP_LOG, 0, reset};
  int most = reset ? RUNSNAP_MAX_RESET : RUNSNAP_MAX_POINTS;
  so.sent = so.avail > (uint64_t)most ? most : (int)so.avail;
  wire_put_item_snap_series(w, &(wire_item_snap_series){
                                   WIRE_STR(se->tag), reset,
                                   {(uint32_t)so.sent, .put = put_series_point, .ud = &so}});
}

/* A node's log as it travels: "" for the coordinator's usual
 * RUN_DIR/logs/ROLE-INDEX.log, else the part under the run directory, else
 * the path itself. */
static const char *log_on_wire(const runview_node *d, const char *dir) {
  size_t n = strlen(dir);
  if (!n || strncmp(d->log, dir, n) != 0 || d->log[n] != '/') return d->log;
  const char *rel = d->log + n + 1;
  char usual[96];
  rundir_node_log(usual, sizeof usual, NULL, wire_role_name(d->role), d->index);
  return strcmp(rel, usual) == 0 ? "" : rel;
}

/* FNV-1a, never 0 (0 marks "not sent yet"). */
static uint32_t hash_str(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h ? h : 1;
}

/* A node's `got` changes only when it registers, its `links` when one
 * comes up or goes: a client gets each once per change, and "" otherwise
 * (the decoder keeps what it had), which keeps a 256-node frame small.
 * seen (k->got, k->links) has room for every node. */
static const char *once_on_wire(const char *s, uint32_t *seen, int i) {
  uint32_t h = hash_str(s);
  if (seen[i] == h) return "";
  seen[i] = h;
  return s;
}

/* What the snapshot's list callbacks need. */
typedef struct snap_out {
  const runsnap_store *s;
  const char *run_dir;
  runsnap_cursor *k;
  int track; /* the next track to look at for a due series */
} snap_out;

static void put_node(wire_wr *w, void *ud, uint32_t i) {
  snap_out *o = ud;
  const runview_node *d = &o->s->m.nodes[i];
  wire_put_item_snap_node(w, &(wire_item_snap_node){
                                 .role = (uint8_t)d->role,
                                 .index = (uint32_t)d->index,
                                 .pid = (uint32_t)d->pid,
                                 .restarts = (uint32_t)d->restarts,
                                 .inflight = (uint32_t)d->inflight,
                                 .steps = d->steps,
                                 .backlog = d->backlog,
                                 .rss = d->rss,
                                 .examples_per_sec = d->examples_per_sec,
                                 .cpu_pct = d->cpu_pct,
                                 .heartbeat_age = d->heartbeat_age,
                                 .state = WIRE_STR(d->state),
                                 .host = WIRE_STR(d->host),
                                 .log = WIRE_STR(log_on_wire(d, o->run_dir)),
                                 .got = WIRE_STR(once_on_wire(d->got, o->k->got, (int)i)),
                                 .where = WIRE_STR(d->where),
                                 .links = WIRE_STR(once_on_wire(d->links, o->k->links, (int)i))});
}

/* The next series with points due (the callback is called in order). */
static void put_series(wire_wr *w, void *ud, uint32_t i) {
  (void)i;
  snap_out *o = ud;
  bool reset;
  for (;; o->track++) {
    uint64_t due = points_due(o->s, o->k, o->track, &reset);
    if (due == 0) continue;
    write_series(w, series_no((runview *)&o->s->m, o->track), &o->s->track[o->track], due,
                 reset);
    o->track++;
    return;
  }
}

/* Event i of the last n: the model's events from nevents - n on. */
static void put_event(wire_wr *w, void *ud, uint32_t i) {
  const snap_out *o = ud;
  const runview *m = &o->s->m;
  uint64_t fresh = o->s->events_added - o->k->events_added;
  int nev = fresh > (uint64_t)m->nevents ? m->nevents : (int)fresh;
  const runview_event *e = runview_event_at(m, m->nevents - nev + (int)i);
  wire_put_item_snap_event(w, &(wire_item_snap_event){e->wall, WIRE_STR(e->text)});
}

/* Grows the array *p of *n elements of `size` bytes to `want`, the new
 * ones zeroed: 0, or -1 (unchanged) when out of memory. */
static int grow_zeroed(void **p, int *n, int want, size_t size) {
  if (*n >= want) return 0;
  char *a = realloc(*p, (size_t)want * size);
  if (!a) return -1;
  memset(a + (size_t)*n * size, 0, (size_t)(want - *n) * size);
  *p = a;
  *n = want;
  return 0;
}

int runsnap_encode(const runsnap_store *s, const char *run_dir, runsnap_cursor *k, wire_wr *w) {
  const runview *m = &s->m;
  if (grow_zeroed((void **)&k->series, &k->nseries, s->ntrack, sizeof *k->series) < 0 ||
      grow_zeroed((void **)&k->got, &k->ngot, m->nnodes, sizeof *k->got) < 0 ||
      grow_zeroed((void **)&k->links, &k->nlinks, m->nnodes, sizeof *k->links) < 0)
    return err_set(DRV_ENOMEM, "out of memory");
  uint32_t nseries = 0;
  bool reset;
  for (int i = 0; i < s->ntrack; i++) nseries += points_due(s, k, i, &reset) > 0;
  uint64_t fresh = s->events_added - k->events_added;
  int nev = fresh > (uint64_t)m->nevents ? m->nevents : (int)fresh;
  snap_out o = {s, run_dir, k, 0};
  wire_put_snapshot(w, &(wire_msg_snapshot){
                           .run_dir = WIRE_STR(run_dir),
                           .launcher = WIRE_STR(m->launcher),
                           .tensorboard = WIRE_STR(m->tensorboard),
                           .state = WIRE_STR(m->state),
                           .mode = WIRE_STR(m->mode),
                           .uptime = m->uptime,
                           .step = m->step,
                           .total_steps = m->total_steps,
                           .examples_per_sec = m->examples_per_sec,
                           .eta = m->eta,
                           .feed_per_sec = m->feed_per_sec,
                           .attach_clients = (uint32_t)m->attach_clients,
                           .queued = m->queued,
                           .capacity = m->capacity,
                           .running = m->running,
                           .done = m->done,
                           .failed = m->failed,
                           .retried = m->retried,
                           .cancelled = m->cancelled,
                           .nodes = {(uint32_t)m->nnodes, .put = put_node, .ud = &o},
                           .series = {nseries, .put = put_series, .ud = &o},
                           .events = {(uint32_t)nev, .put = put_event, .ud = &o},
                           .tables = WIRE_STR(m->tables)});
  if (w->err) {
    /* the frame is dropped: send them again */
    memset(k->got, 0, (size_t)k->ngot * sizeof *k->got);
    memset(k->links, 0, (size_t)k->nlinks * sizeof *k->links);
    return err_set(DRV_ENOMEM, "out of memory encoding a snapshot");
  }
  for (int i = 0; i < s->ntrack; i++)
    k->series[i] = (runsnap_seen){true, s->track[i].gen, s->track[i].added};
  k->events_added = s->events_added;
  return 0;
}

/* ============================== applying ================================== */

static int apply_header(runview *m, const wire_msg_snapshot *w, char *run_dir, size_t n) {
  int rc = wire_str_copy(w->run_dir, run_dir, n);
  if (rc == 0) rc = wire_str_copy(w->launcher, m->launcher, sizeof m->launcher);
  if (rc == 0) rc = wire_str_copy(w->tensorboard, m->tensorboard, sizeof m->tensorboard);
  if (rc == 0) rc = wire_str_copy(w->state, m->state, sizeof m->state);
  if (rc == 0) rc = wire_str_copy(w->mode, m->mode, sizeof m->mode);
  if (rc == 0) rc = wire_str_copy(w->tables, m->tables, sizeof m->tables);
  if (rc < 0) return rc;
  m->uptime = w->uptime;
  m->step = w->step;
  m->total_steps = w->total_steps;
  m->examples_per_sec = w->examples_per_sec;
  m->eta = w->eta;
  m->feed_per_sec = w->feed_per_sec;
  m->attach_clients = (int)(w->attach_clients & 0x7fffffff);
  m->queued = w->queued, m->capacity = w->capacity, m->running = w->running;
  m->done = w->done, m->failed = w->failed, m->retried = w->retried;
  m->cancelled = w->cancelled;
  const char *base = strrchr(run_dir, '/');
  snprintf(m->run, sizeof m->run, "%s", base ? base + 1 : run_dir);
  return 0;
}

static int read_node(const wire_item_snap_node *w, runview_node *d, const char *run_dir) {
  char got[sizeof d->got], links[sizeof d->links];
  memcpy(got, d->got, sizeof got); /* "" on the wire: unchanged */
  memcpy(links, d->links, sizeof links);
  memset(d, 0, sizeof *d);
  d->role = w->role; /* below ROLE_COUNT: validated */
  d->index = (int)(w->index & 0x7fffffff);
  d->pid = (int)w->pid;
  d->restarts = (int)(w->restarts & 0x7fffffff);
  d->inflight = (int)(w->inflight & 0x7fffffff);
  d->steps = w->steps;
  d->backlog = w->backlog;
  d->rss = w->rss;
  d->examples_per_sec = w->examples_per_sec;
  d->cpu_pct = w->cpu_pct;
  d->heartbeat_age = w->heartbeat_age;
  char log[sizeof d->log];
  int rc = wire_str_copy(w->state, d->state, sizeof d->state);
  if (rc == 0) rc = wire_str_copy(w->host, d->host, sizeof d->host);
  if (rc == 0) rc = wire_str_copy(w->log, log, sizeof log);
  if (rc == 0) rc = wire_str_copy(w->got, d->got, sizeof d->got);
  if (rc == 0) rc = wire_str_copy(w->where, d->where, sizeof d->where);
  if (rc == 0) rc = wire_str_copy(w->links, d->links, sizeof d->links);
  if (rc < 0) return rc;
  if (!d->got[0]) memcpy(d->got, got, sizeof got);
  if (!d->links[0]) memcpy(d->links, links, sizeof links);
  snprintf(d->name, sizeof d->name, "%s:%d", wire_role_name(d->role), d->index);
  int k;
  if (!log[0])
    k = rundir_node_log(d->log, sizeof d->log, run_dir, wire_role_name(d->role), d->index);
  else if (log[0] == '/')
    k = snprintf(d->log, sizeof d->log, "%s", log);
  else
    k = snprintf(d->log, sizeof d->log, "%s/%s", run_dir, log);
  if (k < 0 || (size_t)k >= sizeof d->log)
    return err_set(DRV_EPARSE, "SNAPSHOT: the log path of %s is too long", d->name);
  return 0;
}

static int apply_nodes(runview *m, const wire_items *nodes, const char *run_dir) {
  uint32_t count = nodes->n;
  if (count > RUNSNAP_MAX_NODES) return err_set(DRV_EPARSE, "SNAPSHOT: %u nodes", count);
  if ((int)count > m->capnodes) {
    runview_node *nn = realloc(m->nodes, count * sizeof *nn);
    if (!nn) return err_set(DRV_ENOMEM, "out of memory");
    memset(nn + m->capnodes, 0, (count - (uint32_t)m->capnodes) * sizeof *nn);
    m->nodes = nn;
    m->capnodes = (int)count;
  }
  m->nnodes = 0;
  wire_rd r = wire_items_reader(nodes);
  for (uint32_t i = 0; i < count; i++) {
    wire_item_snap_node it;
    wire_get_item_snap_node(&r, &it);
    int rc = read_node(&it, &m->nodes[i], run_dir);
    if (rc < 0) return rc;
    m->nnodes++;
  }
  return 0;
}

static runview_series *client_series(runview *m, const char *tag) {
  return (runview_series *)runview_find_series(m, tag);
}

static int apply_one_series(runview *m, const wire_item_snap_series *w) {
  char tag[sizeof m->throughput.tag];
  int rc = wire_str_copy(w->tag, tag, sizeof tag);
  if (rc < 0) return rc;
  if (!tag[0]) return err_set(DRV_EPARSE, "SNAPSHOT: series '%s' of %u points", tag, w->points.n);
  runview_series *se = client_series(m, tag);
  if (!se && m->nmetrics >= RUNSNAP_MAX_SERIES)
    return err_set(DRV_EPARSE, "SNAPSHOT: more than %d series", RUNSNAP_MAX_SERIES);
  if (se && w->reset) se->n = se->head = 0;
  wire_rd r = wire_items_reader(&w->points);
  for (uint32_t j = 0; j < w->points.n; j++) {
    wire_item_snap_point p;
    wire_get_item_snap_point(&r, &p);
    if ((rc = runview_add_point(m, tag, (runview_point){p.step, p.wall, p.value})) < 0) return rc;
  }
  return 0;
}

static int apply_series(runview *m, const wire_items *series) {
  wire_rd r = wire_items_reader(series);
  for (uint32_t i = 0; i < series->n; i++) {
    wire_item_snap_series it;
    wire_get_item_snap_series(&r, &it);
    int rc = apply_one_series(m, &it);
    if (rc < 0) return rc;
  }
  return 0;
}

static int apply_events(runview *m, const wire_items *events) {
  wire_rd r = wire_items_reader(events);
  for (uint32_t i = 0; i < events->n; i++) {
    wire_item_snap_event it;
    wire_get_item_snap_event(&r, &it);
    runview_event e;
    int rc = wire_str_copy(it.text, e.text, sizeof e.text);
    if (rc == 0) rc = runview_add_event(m, it.wall, e.text);
    if (rc < 0) return rc;
  }
  return 0;
}

int runsnap_apply(runview *m, char *run_dir, size_t n, const uint8_t *p, size_t len) {
  wire_msg_snapshot w;
  int rc;
  if ((rc = wire_get_snapshot(p, len, &w)) < 0 || (rc = apply_header(m, &w, run_dir, n)) < 0 ||
      (rc = apply_nodes(m, &w.nodes, run_dir)) < 0 || (rc = apply_series(m, &w.series)) < 0 ||
      (rc = apply_events(m, &w.events)) < 0)
    return rc;
  m->version++;
  return 0;
}
