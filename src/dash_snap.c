/* dash_snap.c - the coordinator's metric store and the SNAPSHOT frame:
 * tracking how each series changes, encoding a snapshot for one attach
 * client from its cursor, and applying a snapshot to a client's model
 * (see dash_snap.h; the layout is in wire.h).
 *
 * The store never looks inside dash_model_add_point: a client replays the
 * same appends on its copy, so whatever the model does to a full series
 * (decimate it, drop the oldest) happens there too. Only a series found
 * changed since the store last left it (its n or head moved) is resent
 * whole.
 */
#include "dash_snap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

/* ============================== the store ================================= */

void dash_store_init(dash_store *s) {
  memset(s, 0, sizeof *s);
  dash_model_init(&s->m);
}

void dash_store_free(dash_store *s) {
  dash_model_free(&s->m);
  for (int i = 0; i < s->ntrack; i++) free(s->track[i].log);
  free(s->track);
  memset(s, 0, sizeof *s);
}

static dash_series *series_no(dash_model *m, int i) {
  if (i == 0) return &m->throughput;
  return i - 1 < m->nmetrics ? &m->metrics[i - 1] : NULL;
}

/* The series number of tag; m->nmetrics + 1 for a tag not seen yet. */
static int series_of(const dash_model *m, const char *tag) {
  if (strcmp(tag, DASH_THROUGHPUT_TAG) == 0) return 0;
  for (int i = 0; i < m->nmetrics; i++)
    if (strcmp(m->metrics[i].tag, tag) == 0) return i + 1;
  return m->nmetrics + 1;
}

static int grow_track(dash_store *s, int want) {
  if (want <= s->ntrack) return 0;
  if (want > s->captrack) {
    int cap = s->captrack ? 2 * s->captrack : 8;
    while (cap < want) cap *= 2;
    dash_track *t = realloc(s->track, (size_t)cap * sizeof *t);
    if (!t) return drv_error(DRV_ENOMEM, "out of memory");
    s->track = t;
    s->captrack = cap;
  }
  memset(s->track + s->ntrack, 0, (size_t)(want - s->ntrack) * sizeof *s->track);
  s->ntrack = want;
  return 0;
}

int dash_store_point(dash_store *s, const char *tag, dash_point p) {
  int i = series_of(&s->m, tag);
  if (i > DASH_SNAP_MAX_SERIES)
    return drv_error(DRV_ERANGE, "more than %d metric tags: '%s' dropped", DASH_SNAP_MAX_SERIES,
                     tag);
  int rc = grow_track(s, i + 1);
  if (rc < 0) return rc;
  dash_track *t = &s->track[i];
  if (!t->log && !(t->log = malloc(DASH_SNAP_LOG * sizeof *t->log)))
    return drv_error(DRV_ENOMEM, "out of memory");
  const dash_series *se = series_no(&s->m, i);
  if ((se ? se->n : 0) != t->n || (se ? se->head : 0) != t->head) t->gen++; /* behind our back */
  if ((rc = dash_model_add_point(&s->m, tag, p)) < 0) return rc;
  se = series_no(&s->m, i);
  if (!se) return drv_error(DRV_EINVAL, "dash store: series '%s' did not appear", tag);
  t->log[t->added % DASH_SNAP_LOG] = p;
  t->added++;
  t->n = se->n;
  t->head = se->head;
  return 0;
}

int dash_store_event(dash_store *s, double wall, const char *text) {
  int rc = dash_model_add_event(&s->m, wall, text);
  if (rc == 0) s->events_added++;
  return rc;
}

void dash_cursor_free(dash_cursor *k) {
  free(k->series);
  free(k->got);
  memset(k, 0, sizeof *k);
}

/* ============================== encoding ================================== */

/* What client k lacks of series i: 0 (nothing), the whole series
 * (*reset), or the points appended since its cursor. */
static uint64_t points_due(const dash_store *s, const dash_cursor *k, int i, bool *reset) {
  const dash_series *se = series_no((dash_model *)&s->m, i);
  const dash_track *t = &s->track[i];
  const dash_seen *seen = i < k->nseries ? &k->series[i] : NULL;
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

static void write_point(wire_wr *w, const dash_point *p) {
  wire_wr_f64(w, p->step);
  wire_wr_f64(w, p->wall);
  wire_wr_f64(w, p->value);
}

/* A reset: the series (at most DASH_SNAP_MAX_RESET of it). A delta: the
 * `due` points appended since the client's cursor, from the log (at most
 * DASH_SNAP_MAX_POINTS of them; of more than the log holds, its newest). */
static void write_series(wire_wr *w, const dash_series *se, const dash_track *t, uint64_t due,
                         bool reset) {
  uint64_t avail = reset || due < DASH_SNAP_LOG ? due : DASH_SNAP_LOG;
  int most = reset ? DASH_SNAP_MAX_RESET : DASH_SNAP_MAX_POINTS;
  int sent = avail > (uint64_t)most ? most : (int)avail;
  wire_wr_str(w, se->tag);
  wire_wr_u8(w, reset ? 1 : 0);
  wire_wr_u32(w, (uint32_t)sent);
  for (int j = 0; j < sent; j++) {
    uint64_t x = spaced(j, sent, avail);
    if (reset)
      write_point(w, dash_series_at(se, (int)x));
    else
      write_point(w, &t->log[(t->added - avail + x) % DASH_SNAP_LOG]);
  }
}

/* A node's log as it travels: "" for the coordinator's usual
 * RUN_DIR/logs/ROLE-INDEX.log, else the part under the run directory, else
 * the path itself. */
static const char *log_on_wire(const dash_node *d, const char *dir) {
  size_t n = strlen(dir);
  if (!n || strncmp(d->log, dir, n) != 0 || d->log[n] != '/') return d->log;
  const char *rel = d->log + n + 1;
  char usual[96];
  snprintf(usual, sizeof usual, "logs/%s-%d.log", wire_role_name(d->role), d->index);
  return strcmp(rel, usual) == 0 ? "" : rel;
}

static void write_header(wire_wr *w, const dash_model *m, const char *run_dir) {
  wire_wr_str(w, run_dir);
  wire_wr_str(w, m->launcher);
  wire_wr_str(w, m->state);
  wire_wr_str(w, m->mode);
  wire_wr_f64(w, m->uptime);
  wire_wr_i64(w, m->step);
  wire_wr_i64(w, m->total_steps);
  wire_wr_f64(w, m->examples_per_sec);
  wire_wr_f64(w, m->eta);
  wire_wr_u32(w, (uint32_t)m->attach_clients);
  const int64_t q[7] = {m->queued, m->capacity, m->running, m->done,
                        m->failed, m->retried, m->cancelled};
  for (int i = 0; i < 7; i++) wire_wr_i64(w, q[i]);
}

/* FNV-1a, never 0 (0 marks "not sent yet"). */
static uint32_t hash_str(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h ? h : 1;
}

/* A node's `got` changes only when it registers: a client gets it once
 * per change, and "" otherwise (the decoder keeps what it had), which
 * keeps a 256-node frame small. k->got has room for every node. */
static const char *got_on_wire(const dash_node *d, dash_cursor *k, int i) {
  uint32_t h = hash_str(d->got);
  if (k->got[i] == h) return "";
  k->got[i] = h;
  return d->got;
}

static void write_nodes(wire_wr *w, const dash_model *m, const char *run_dir, dash_cursor *k) {
  wire_wr_u32(w, (uint32_t)m->nnodes);
  for (int i = 0; i < m->nnodes; i++) {
    const dash_node *d = &m->nodes[i];
    wire_wr_u8(w, (uint8_t)d->role);
    wire_wr_u32(w, (uint32_t)d->index);
    wire_wr_u32(w, (uint32_t)d->pid);
    wire_wr_u32(w, (uint32_t)d->restarts);
    wire_wr_u32(w, (uint32_t)d->inflight);
    wire_wr_i64(w, d->steps);
    wire_wr_i64(w, d->backlog);
    wire_wr_u64(w, d->rss);
    wire_wr_f64(w, d->examples_per_sec);
    wire_wr_f64(w, d->cpu_pct);
    wire_wr_f64(w, d->heartbeat_age);
    wire_wr_str(w, d->state);
    wire_wr_str(w, d->host);
    wire_wr_str(w, log_on_wire(d, run_dir));
    wire_wr_str(w, got_on_wire(d, k, i));
  }
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

int dash_snap_encode(const dash_store *s, const char *run_dir, dash_cursor *k, wire_wr *w) {
  const dash_model *m = &s->m;
  if (grow_zeroed((void **)&k->series, &k->nseries, s->ntrack, sizeof *k->series) < 0 ||
      grow_zeroed((void **)&k->got, &k->ngot, m->nnodes, sizeof *k->got) < 0)
    return drv_error(DRV_ENOMEM, "out of memory");
  write_header(w, m, run_dir);
  write_nodes(w, m, run_dir, k);
  uint32_t nseries = 0;
  bool reset;
  for (int i = 0; i < s->ntrack; i++) nseries += points_due(s, k, i, &reset) > 0;
  wire_wr_u32(w, nseries);
  for (int i = 0; i < s->ntrack; i++) {
    uint64_t due = points_due(s, k, i, &reset);
    if (due > 0) write_series(w, series_no((dash_model *)m, i), &s->track[i], due, reset);
  }
  uint64_t fresh = s->events_added - k->events_added;
  int nev = fresh > (uint64_t)m->nevents ? m->nevents : (int)fresh;
  wire_wr_u32(w, (uint32_t)nev);
  for (int i = m->nevents - nev; i < m->nevents; i++) {
    const dash_event *e = dash_model_event(m, i);
    wire_wr_f64(w, e->wall);
    wire_wr_str(w, e->text);
  }
  if (w->err) {
    memset(k->got, 0, (size_t)k->ngot * sizeof *k->got); /* the frame is dropped: send again */
    return drv_error(DRV_ENOMEM, "out of memory encoding a snapshot");
  }
  for (int i = 0; i < s->ntrack; i++)
    k->series[i] = (dash_seen){true, s->track[i].gen, s->track[i].added};
  k->events_added = s->events_added;
  return 0;
}

/* ============================== applying ================================== */

/* A node's fixed fields and its three string lengths (wire.h). */
#define NODE_MIN_BYTES (1 + 4 * 4 + 6 * 8 + 3 * 4)

static int apply_header(dash_model *m, wire_rd *r, char *run_dir, size_t n) {
  wire_rd_str(r, run_dir, n);
  wire_rd_str(r, m->launcher, sizeof m->launcher);
  wire_rd_str(r, m->state, sizeof m->state);
  wire_rd_str(r, m->mode, sizeof m->mode);
  m->uptime = wire_rd_f64(r);
  m->step = wire_rd_i64(r);
  m->total_steps = wire_rd_i64(r);
  m->examples_per_sec = wire_rd_f64(r);
  m->eta = wire_rd_f64(r);
  m->attach_clients = (int)(wire_rd_u32(r) & 0x7fffffff);
  int64_t *q[7] = {&m->queued, &m->capacity, &m->running, &m->done,
                   &m->failed, &m->retried, &m->cancelled};
  for (int i = 0; i < 7; i++) *q[i] = wire_rd_i64(r);
  if (!wire_rd_ok(r)) return DRV_EPARSE;
  const char *base = strrchr(run_dir, '/');
  snprintf(m->run, sizeof m->run, "%s", base ? base + 1 : run_dir);
  return 0;
}

static int read_node(wire_rd *r, dash_node *d, const char *run_dir) {
  char got[sizeof d->got];
  memcpy(got, d->got, sizeof got); /* "" on the wire: unchanged */
  memset(d, 0, sizeof *d);
  d->role = wire_rd_u8(r);
  d->index = (int)(wire_rd_u32(r) & 0x7fffffff);
  d->pid = (int)wire_rd_u32(r);
  d->restarts = (int)(wire_rd_u32(r) & 0x7fffffff);
  d->inflight = (int)(wire_rd_u32(r) & 0x7fffffff);
  d->steps = wire_rd_i64(r);
  d->backlog = wire_rd_i64(r);
  d->rss = wire_rd_u64(r);
  d->examples_per_sec = wire_rd_f64(r);
  d->cpu_pct = wire_rd_f64(r);
  d->heartbeat_age = wire_rd_f64(r);
  wire_rd_str(r, d->state, sizeof d->state);
  wire_rd_str(r, d->host, sizeof d->host);
  char log[sizeof d->log];
  wire_rd_str(r, log, sizeof log);
  wire_rd_str(r, d->got, sizeof d->got);
  if (!wire_rd_ok(r)) return DRV_EPARSE;
  if (!d->got[0]) memcpy(d->got, got, sizeof got);
  if (d->role < 0 || d->role >= ROLE_COUNT)
    return drv_error(DRV_EPARSE, "SNAPSHOT: node role %d", d->role);
  snprintf(d->name, sizeof d->name, "%s:%d", wire_role_name(d->role), d->index);
  int k;
  if (!log[0])
    k = snprintf(d->log, sizeof d->log, "%s/logs/%s-%d.log", run_dir, wire_role_name(d->role),
                 d->index);
  else if (log[0] == '/')
    k = snprintf(d->log, sizeof d->log, "%s", log);
  else
    k = snprintf(d->log, sizeof d->log, "%s/%s", run_dir, log);
  if (k < 0 || (size_t)k >= sizeof d->log)
    return drv_error(DRV_EPARSE, "SNAPSHOT: the log path of %s is too long", d->name);
  return 0;
}

static int apply_nodes(dash_model *m, wire_rd *r, const char *run_dir) {
  uint32_t count = wire_rd_u32(r);
  if (!wire_rd_ok(r)) return DRV_EPARSE;
  if (count > DASH_SNAP_MAX_NODES || count > wire_rd_left(r) / NODE_MIN_BYTES)
    return drv_error(DRV_EPARSE, "SNAPSHOT: %u nodes", count);
  if ((int)count > m->capnodes) {
    dash_node *nn = realloc(m->nodes, count * sizeof *nn);
    if (!nn) return drv_error(DRV_ENOMEM, "out of memory");
    memset(nn + m->capnodes, 0, (count - (uint32_t)m->capnodes) * sizeof *nn);
    m->nodes = nn;
    m->capnodes = (int)count;
  }
  m->nnodes = 0;
  for (uint32_t i = 0; i < count; i++) {
    int rc = read_node(r, &m->nodes[i], run_dir);
    if (rc < 0) return rc;
    m->nnodes++;
  }
  return 0;
}

static dash_series *client_series(dash_model *m, const char *tag) {
  return (dash_series *)dash_model_series(m, tag);
}

static int apply_series(dash_model *m, wire_rd *r) {
  uint32_t count = wire_rd_u32(r);
  for (uint32_t i = 0; i < count && wire_rd_ok(r); i++) {
    char tag[sizeof m->throughput.tag];
    wire_rd_str(r, tag, sizeof tag);
    unsigned reset = wire_rd_u8(r);
    uint32_t pts = wire_rd_u32(r);
    if (!wire_rd_ok(r)) break;
    if (!tag[0] || pts > wire_rd_left(r) / 24)
      return drv_error(DRV_EPARSE, "SNAPSHOT: series '%s' of %u points", tag, pts);
    dash_series *se = client_series(m, tag);
    if (!se && m->nmetrics >= DASH_SNAP_MAX_SERIES)
      return drv_error(DRV_EPARSE, "SNAPSHOT: more than %d series", DASH_SNAP_MAX_SERIES);
    if (se && reset) se->n = se->head = 0;
    for (uint32_t j = 0; j < pts; j++) {
      dash_point p;
      p.step = wire_rd_f64(r);
      p.wall = wire_rd_f64(r);
      p.value = wire_rd_f64(r);
      int rc = dash_model_add_point(m, tag, p);
      if (rc < 0) return rc;
    }
  }
  return wire_rd_ok(r) ? 0 : DRV_EPARSE;
}

static int apply_events(dash_model *m, wire_rd *r) {
  uint32_t count = wire_rd_u32(r);
  for (uint32_t i = 0; i < count && wire_rd_ok(r); i++) {
    dash_event e;
    e.wall = wire_rd_f64(r);
    wire_rd_str(r, e.text, sizeof e.text);
    if (!wire_rd_ok(r)) break;
    int rc = dash_model_add_event(m, e.wall, e.text);
    if (rc < 0) return rc;
  }
  return wire_rd_ok(r) ? 0 : DRV_EPARSE;
}

int dash_snap_apply(dash_model *m, char *run_dir, size_t n, const uint8_t *p, size_t len) {
  wire_rd r;
  wire_rd_init(&r, p, len);
  int rc;
  if ((rc = apply_header(m, &r, run_dir, n)) < 0 || (rc = apply_nodes(m, &r, run_dir)) < 0 ||
      (rc = apply_series(m, &r)) < 0 || (rc = apply_events(m, &r)) < 0) {
    if (r.err) return wire_rd_done(&r, WIRE_SNAPSHOT);
    return rc;
  }
  m->version++;
  return wire_rd_done(&r, WIRE_SNAPSHOT);
}
