/* test_runsnap.c - the coordinator's metric store and the SNAPSHOT frame:
 * round trips of header, nodes and queue; series and events as deltas per
 * client; a series changed other than by appending (decimation) travels
 * whole; the per-frame bound on points; malformed attach frames refused;
 * the CPU % of a node from its heartbeats; the size of a 256-node frame. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "proto/runsnap.h"
#include "harness.h"
#include "proto/wire.h"

#define RUN_DIR "/srv/runs/mnist-20261121-105306"

/* ---- fixtures -------------------------------------------------------------- */

static void fill_node(runview_node *d, int role, int index, const char *state) {
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "%s:%d", wire_role_name(role), index);
  d->role = role;
  d->index = index;
  snprintf(d->host, sizeof d->host, "10.0.0.%d", 1 + index);
  d->pid = 4000 + 10 * role + index;
  snprintf(d->state, sizeof d->state, "%s", state);
  d->restarts = index % 3;
  d->steps = 1000 + index;
  d->examples_per_sec = 512.25 + index;
  d->cpu_pct = index % 2 ? 97.5 : -1;
  d->rss = (uint64_t)(40 + index) << 20;
  d->heartbeat_age = 0.25 * index;
  d->inflight = index % 3;
  d->backlog = -1;
  snprintf(d->got, sizeof d->got, "10.0.0.%d  2 threads, 4 cpus, 8.0G, slurm 77.%d on n%d", index,
           index, index);
  snprintf(d->links, sizeof d->links, role == ROLE_PS ? "coord=shm" : "coord=shm,ps:0=shm");
  if (index == 2)
    snprintf(d->log, sizeof d->log, "/var/log/elsewhere-%d.log", index);
  else if (index == 3)
    snprintf(d->log, sizeof d->log, RUN_DIR "/logs/other/%s-%d.log", wire_role_name(role), index);
  else
    snprintf(d->log, sizeof d->log, RUN_DIR "/logs/%s-%d.log", wire_role_name(role), index);
}

static void fill_store(runsnap_store *s, int nnodes) {
  runview *m = &s->m;
  snprintf(m->run, sizeof m->run, "mnist-20261121-105306");
  snprintf(m->launcher, sizeof m->launcher, "local");
  snprintf(m->tensorboard, sizeof m->tensorboard, "http://127.0.0.1:6006/");
  snprintf(m->state, sizeof m->state, "training");
  snprintf(m->mode, sizeof m->mode, "async");
  m->uptime = 83.5;
  m->step = 1200;
  m->total_steps = 4000;
  m->examples_per_sec = 3510.5;
  m->eta = 61.25;
  m->attach_clients = 2;
  m->nodes = calloc((size_t)nnodes, sizeof *m->nodes);
  CHECK(m->nodes);
  m->nnodes = m->capnodes = nnodes;
  for (int i = 0; i < nnodes; i++)
    fill_node(&m->nodes[i], i == 0 ? ROLE_PS : ROLE_WORKER, i == 0 ? 0 : i - 1,
              i % 4 == 3 ? "restarting" : "busy");
  m->queued = 6, m->capacity = 1024, m->running = 4, m->done = 1200;
  m->failed = 1, m->retried = 3, m->cancelled = 2;
}

/* Encodes a SNAPSHOT for cursor k as a whole frame (validated like conn.c
 * does) and applies it to client model c. Returns the frame's size. */
static size_t send_to(runsnap_store *s, runsnap_cursor *k, runview *c) {
  wire_wr w;
  wire_wr_init(&w);
  CHECK_OK(runsnap_encode(s, RUN_DIR, k, &w));
  CHECK_OK(wire_wr_finish(&w, WIRE_SNAPSHOT, 0));
  wire_header h;
  CHECK_OK(wire_header_decode(w.buf, WIRE_DEFAULT_MAX_FRAME, true, &h));
  const uint8_t *pl = w.buf + WIRE_HEADER_SIZE;
  CHECK_OK(wire_validate_payload(WIRE_SNAPSHOT, pl, h.len));
  char run_dir[1024];
  CHECK_OK(runsnap_apply(c, run_dir, sizeof run_dir, pl, h.len));
  CHECK(strcmp(run_dir, RUN_DIR) == 0);
  size_t n = w.len;
  wire_wr_free(&w);
  return n;
}

static void add_points(runsnap_store *s, const char *tag, int from, int n) {
  for (int i = from; i < from + n; i++)
    CHECK_OK(runsnap_store_point(s, tag, (runview_point){i, 0.5 * i, 1.0 / (1 + i)}));
}

/* The client's series `tag` holds exactly the store's points. */
static void check_same_series(const runview *store, const runview *client, const char *tag) {
  const runview_series *a = runview_find_series(store, tag), *b = runview_find_series(client, tag);
  CHECK(a && b);
  CHECK_INT_EQ(b->n, a->n);
  for (int i = 0; i < a->n; i++) {
    const runview_point *p = runview_series_at(a, i), *q = runview_series_at(b, i);
    CHECK(p->step == q->step && p->wall == q->wall && p->value == q->value);
  }
}

/* ---- round trips ------------------------------------------------------------ */

TEST(runsnap_header_nodes_queue_round_trip) {
  runsnap_store s;
  runsnap_store_init(&s);
  fill_store(&s, 5);
  runsnap_cursor k = {0};
  runview c;
  runview_init(&c);
  send_to(&s, &k, &c);
  const runview *m = &s.m;
  CHECK(strcmp(c.run, "mnist-20261121-105306") == 0);
  CHECK(strcmp(c.launcher, "local") == 0 && strcmp(c.state, "training") == 0);
  CHECK(strcmp(c.mode, "async") == 0);
  CHECK(strcmp(c.tensorboard, "http://127.0.0.1:6006/") == 0);
  CHECK(c.uptime == 83.5 && c.step == 1200 && c.total_steps == 4000);
  CHECK(c.examples_per_sec == 3510.5 && c.eta == 61.25 && c.attach_clients == 2);
  CHECK(c.queued == 6 && c.capacity == 1024 && c.running == 4 && c.done == 1200);
  CHECK(c.failed == 1 && c.retried == 3 && c.cancelled == 2);
  CHECK_INT_EQ(c.nnodes, 5);
  for (int i = 0; i < 5; i++) {
    const runview_node *a = &m->nodes[i], *b = &c.nodes[i];
    CHECK(strcmp(a->name, b->name) == 0 && strcmp(a->host, b->host) == 0);
    CHECK(strcmp(a->state, b->state) == 0 && strcmp(a->log, b->log) == 0);
    CHECK(a->role == b->role && a->index == b->index && a->pid == b->pid);
    CHECK(a->restarts == b->restarts && a->steps == b->steps && a->inflight == b->inflight);
    CHECK(a->examples_per_sec == b->examples_per_sec && a->cpu_pct == b->cpu_pct);
    CHECK(a->rss == b->rss && a->heartbeat_age == b->heartbeat_age && a->backlog == b->backlog);
  }
  CHECK(strcmp(c.nodes[2].log, RUN_DIR "/logs/worker-1.log") == 0);
  CHECK(strcmp(c.nodes[2].got, "10.0.0.1  2 threads, 4 cpus, 8.0G, slurm 77.1 on n1") == 0);
  CHECK(strcmp(c.nodes[0].links, "coord=shm") == 0);
  CHECK(strcmp(c.nodes[2].links, "coord=shm,ps:0=shm") == 0);
  CHECK(strcmp(c.nodes[3].log, "/var/log/elsewhere-2.log") == 0);
  CHECK(strcmp(c.nodes[4].log, RUN_DIR "/logs/other/worker-3.log") == 0);
  /* The nodes shrink with the cluster's table, too. */
  s.m.nnodes = 2;
  send_to(&s, &k, &c);
  CHECK_INT_EQ(c.nnodes, 2);
  runsnap_cursor_free(&k);
  runview_free(&c);
  runsnap_store_free(&s);
}

TEST(runsnap_series_and_events_travel_as_deltas) {
  runsnap_store s;
  runsnap_store_init(&s);
  fill_store(&s, 2);
  add_points(&s, "train/loss", 0, 5);
  add_points(&s, RUNSNAP_THROUGHPUT_TAG, 0, 3);
  CHECK_OK(runsnap_store_event(&s, 0.5, "node up worker:0"));
  runsnap_cursor k = {0};
  runview c;
  runview_init(&c);
  send_to(&s, &k, &c);
  check_same_series(&s.m, &c, "train/loss");
  CHECK_INT_EQ(c.throughput.n, 3);
  CHECK_INT_EQ(c.nevents, 1);

  /* Two more loss points and an event: a fresh model that gets only this
   * frame holds exactly them, and the real client holds everything. */
  add_points(&s, "train/loss", 5, 2);
  add_points(&s, "eval/loss", 5, 1);
  CHECK_OK(runsnap_store_event(&s, 1.5, "node lost worker:1: killed by signal 9"));
  runsnap_cursor k2 = k;
  k2.series = malloc((size_t)k.nseries * sizeof *k2.series);
  CHECK(k2.series);
  memcpy(k2.series, k.series, (size_t)k.nseries * sizeof *k.series);
  k2.got = calloc((size_t)k.ngot + 1, sizeof *k2.got);
  CHECK(k2.got);
  memcpy(k2.got, k.got, (size_t)k.ngot * sizeof *k.got);
  k2.links = calloc((size_t)k.nlinks + 1, sizeof *k2.links);
  CHECK(k2.links);
  memcpy(k2.links, k.links, (size_t)k.nlinks * sizeof *k.links);
  runview only;
  runview_init(&only);
  send_to(&s, &k2, &only);
  send_to(&s, &k, &c);
  const runview_series *d = runview_find_series(&only, "train/loss");
  CHECK(d && d->n == 2 && runview_series_at(d, 0)->step == 5 && runview_series_at(d, 1)->step == 6);
  CHECK_INT_EQ(only.throughput.n, 0);
  CHECK(runview_find_series(&only, "eval/loss") && runview_find_series(&only, "eval/loss")->n == 1);
  CHECK_INT_EQ(only.nevents, 1);
  CHECK(strstr(runview_event_at(&only, 0)->text, "node lost worker:1"));
  check_same_series(&s.m, &c, "train/loss");
  check_same_series(&s.m, &c, "eval/loss");
  CHECK_INT_EQ(c.nevents, 2);

  /* Nothing new: a frame with no points and no events, much smaller. */
  runview none;
  runview_init(&none);
  size_t empty = send_to(&s, &k2, &none);
  CHECK_INT_EQ(none.throughput.n + none.nmetrics + none.nevents, 0);
  runsnap_cursor k3 = {0};
  size_t full = send_to(&s, &k3, &none);
  CHECK(empty < full);
  runsnap_cursor_free(&k3);
  runsnap_cursor_free(&k);
  runsnap_cursor_free(&k2);
  runview_free(&c);
  runview_free(&only);
  runview_free(&none);
  runsnap_store_free(&s);
}

TEST(runsnap_events_ring_overflow) {
  runsnap_store s;
  runsnap_store_init(&s);
  runsnap_cursor k = {0};
  runview c;
  runview_init(&c);
  char text[64];
  for (int i = 0; i < 10; i++) {
    snprintf(text, sizeof text, "event %d", i);
    CHECK_OK(runsnap_store_event(&s, i, text));
  }
  send_to(&s, &k, &c);
  for (int i = 10; i < 10 + RUNVIEW_EVENTS_MAX + 44; i++) {
    snprintf(text, sizeof text, "event %d", i);
    CHECK_OK(runsnap_store_event(&s, i, text));
  }
  send_to(&s, &k, &c);
  CHECK_INT_EQ(c.nevents, s.m.nevents);
  for (int i = 0; i < c.nevents; i++)
    CHECK(strcmp(runview_event_at(&c, i)->text, runview_event_at(&s.m, i)->text) == 0);
  CHECK(strcmp(runview_event_at(&c, c.nevents - 1)->text, "event 309") == 0);
  runsnap_cursor_free(&k);
  runview_free(&c);
  runsnap_store_free(&s);
}

/* A client that gets every point mirrors the store exactly, also through
 * what the model does to a full series (it replays the same appends). */
TEST(runsnap_client_mirrors_a_full_series) {
  runsnap_store s;
  runsnap_store_init(&s);
  runsnap_cursor k = {0};
  runview c;
  runview_init(&c);
  for (int from = 0; from < 3 * RUNVIEW_SERIES_MAX + 100; from += RUNSNAP_MAX_POINTS) {
    add_points(&s, "train/loss", from, RUNSNAP_MAX_POINTS);
    send_to(&s, &k, &c);
    check_same_series(&s.m, &c, "train/loss");
  }
  runsnap_cursor_free(&k);
  runview_free(&c);
  runsnap_store_free(&s);
}

TEST(runsnap_points_per_frame_are_bounded) {
  runsnap_store s;
  runsnap_store_init(&s);
  runsnap_cursor k = {0};
  runview c;
  runview_init(&c);
  add_points(&s, "train/loss", 0, 10);
  send_to(&s, &k, &c);
  add_points(&s, "train/loss", 10, 1000); /* far behind: a thinned delta */
  send_to(&s, &k, &c);
  const runview_series *se = runview_find_series(&c, "train/loss");
  CHECK_INT_EQ(se->n, 10 + RUNSNAP_MAX_POINTS);
  CHECK(runview_series_at(se, 10)->step == 10);          /* the whole gap, */
  CHECK(runview_series_at(se, se->n - 1)->step == 1009); /* the newest always */
  for (int i = 1; i < se->n; i++)
    CHECK(runview_series_at(se, i)->step > runview_series_at(se, i - 1)->step);
  /* Further behind than the store's log: its newest RUNSNAP_LOG points. */
  add_points(&s, "train/loss", 1010, 5000);
  send_to(&s, &k, &c);
  se = runview_find_series(&c, "train/loss");
  CHECK(runview_series_at(se, se->n - RUNSNAP_MAX_POINTS)->step == 6010 - RUNSNAP_LOG);
  CHECK(runview_series_at(se, se->n - 1)->step == 6009);
  /* A new client gets the series whole, up to RUNSNAP_MAX_RESET points,
   * from its first point to its newest. */
  runsnap_cursor k2 = {0};
  runview fresh;
  runview_init(&fresh);
  send_to(&s, &k2, &fresh);
  const runview_series *all = runview_find_series(&s.m, "train/loss");
  se = runview_find_series(&fresh, "train/loss");
  CHECK_INT_EQ(se->n, all->n < RUNSNAP_MAX_RESET ? all->n : RUNSNAP_MAX_RESET);
  CHECK(runview_series_at(se, 0)->step == runview_series_at(all, 0)->step);
  CHECK(runview_series_at(se, se->n - 1)->step == 6009);
  runsnap_cursor_free(&k2);
  runview_free(&fresh);
  runsnap_cursor_free(&k);
  runview_free(&c);
  runsnap_store_free(&s);
}

/* A series changed behind the store (not through runsnap_store_point) gets a
 * new generation: it travels whole, flagged reset, to every client. */
TEST(runsnap_series_changed_behind_the_store_travels_whole) {
  runsnap_store s;
  runsnap_store_init(&s);
  runsnap_cursor k = {0};
  runview c;
  runview_init(&c);
  add_points(&s, "train/loss", 0, 10);
  add_points(&s, "train/accuracy", 0, 10);
  send_to(&s, &k, &c);
  runview_series *se = (runview_series *)runview_find_series(&s.m, "train/loss");
  uint32_t gen = s.track[1].gen;
  for (int i = 0; i < 5; i++) se->pts[(se->head + i) % se->cap] = *runview_series_at(se, 2 * i + 1);
  se->n = 5;
  add_points(&s, "train/loss", 10, 1);
  add_points(&s, "train/accuracy", 10, 1);
  CHECK(s.track[1].gen != gen);
  runview only;
  runview_init(&only);
  runsnap_cursor k2 = {0};
  k2.series = calloc((size_t)k.nseries, sizeof *k2.series);
  k2.nseries = k.nseries;
  memcpy(k2.series, k.series, (size_t)k.nseries * sizeof *k.series);
  k2.events_added = k.events_added;
  send_to(&s, &k2, &only);
  send_to(&s, &k, &c);
  CHECK_INT_EQ(runview_find_series(&only, "train/loss")->n, 6);   /* whole */
  CHECK_INT_EQ(runview_find_series(&only, "train/accuracy")->n, 1); /* delta */
  check_same_series(&s.m, &c, "train/loss");
  check_same_series(&s.m, &c, "train/accuracy");
  runsnap_cursor_free(&k);
  runsnap_cursor_free(&k2);
  runview_free(&c);
  runview_free(&only);
  runsnap_store_free(&s);
}

TEST(runsnap_too_many_tags_are_dropped) {
  runsnap_store s;
  runsnap_store_init(&s);
  char tag[32];
  for (int i = 0; i < RUNSNAP_MAX_SERIES; i++) {
    snprintf(tag, sizeof tag, "m/%d", i);
    CHECK_OK(runsnap_store_point(&s, tag, (runview_point){0, 0, 1}));
  }
  CHECK_ERR(runsnap_store_point(&s, "one/more", (runview_point){0, 0, 1}), DRV_ERANGE, "one/more");
  CHECK_OK(runsnap_store_point(&s, "m/3", (runview_point){1, 1, 2})); /* known tags still take points */
  CHECK_INT_EQ(s.m.nmetrics, RUNSNAP_MAX_SERIES);
  runsnap_store_free(&s);
}

/* ---- malformed frames -------------------------------------------------------- */

static void snapshot_payload(wire_wr *w, const char *state, uint32_t nodes, int role) {
  wire_wr_init(w);
  wire_wr_str(w, RUN_DIR); wire_wr_str(w, "local"); wire_wr_str(w, ""); /* tensorboard */
  wire_wr_str(w, "idle"); wire_wr_str(w, "");
  for (int i = 0; i < 6; i++) wire_wr_f64(w, 0); /* uptime .. feed_per_sec */
  wire_wr_u32(w, 0);
  for (int i = 0; i < 7; i++) wire_wr_i64(w, 0);
  wire_wr_u32(w, nodes);
  for (uint32_t i = 0; i < (nodes < 4 ? nodes : 1); i++) {
    wire_wr_u8(w, (uint8_t)role);
    for (int f = 0; f < 4; f++) wire_wr_u32(w, 1);
    for (int f = 0; f < 6; f++) wire_wr_u64(w, 0);
    wire_wr_str(w, state); wire_wr_str(w, "h"); wire_wr_str(w, "logs/x.log"); wire_wr_str(w, "");
    wire_wr_str(w, ""); /* where */
    wire_wr_str(w, ""); /* links */
  }
  wire_wr_u32(w, 0);
  wire_wr_u32(w, 0);
  wire_wr_str(w, ""); /* tables */
}

static int apply_raw(wire_wr *w) {
  runview m;
  runview_init(&m);
  char dir[1024];
  int rc = wire_validate_payload(WIRE_SNAPSHOT, w->buf + WIRE_HEADER_SIZE,
                                 w->len - WIRE_HEADER_SIZE);
  if (rc == 0)
    rc = runsnap_apply(&m, dir, sizeof dir, w->buf + WIRE_HEADER_SIZE, w->len - WIRE_HEADER_SIZE);
  runview_free(&m);
  wire_wr_free(w);
  return rc;
}

TEST(runsnap_malformed_frames_are_refused) {
  wire_wr w;
  snapshot_payload(&w, "busy", 1, ROLE_WORKER);
  CHECK_OK(apply_raw(&w));
  snapshot_payload(&w, "busy", 1, ROLE_COUNT);
  CHECK_ERR(apply_raw(&w), DRV_EPARSE, "unknown role 4");
  snapshot_payload(&w, "busy", 0xffffffffu, ROLE_WORKER);
  CHECK_ERR(apply_raw(&w), DRV_EPARSE, "SNAPSHOT node count 4294967295 cannot fit");
  /* A string longer than the model's field: refused, not truncated. */
  snapshot_payload(&w, "a-state-far-too-long-for-the-model", 1, ROLE_WORKER);
  CHECK_ERR(apply_raw(&w), DRV_EPARSE, "does not fit in 15");
  /* Series: a point count past the bytes, an empty tag, a bad reset flag. */
  snapshot_payload(&w, "busy", 0, ROLE_WORKER);
  w.len -= 12; /* drop the series and event counts and the tables */
  wire_wr_u32(&w, 1); wire_wr_str(&w, "train/loss"); wire_wr_u8(&w, 0); wire_wr_u32(&w, 1000);
  wire_wr_u32(&w, 0); wire_wr_str(&w, "");
  CHECK_ERR(apply_raw(&w), DRV_EPARSE, "SNAPSHOT point count 1000 cannot fit");
  snapshot_payload(&w, "busy", 0, ROLE_WORKER);
  w.len -= 12;
  wire_wr_u32(&w, 1); wire_wr_str(&w, ""); wire_wr_u8(&w, 0); wire_wr_u32(&w, 0);
  wire_wr_u32(&w, 0); wire_wr_str(&w, "");
  CHECK_ERR(apply_raw(&w), DRV_EPARSE, "series '' of 0 points");
  snapshot_payload(&w, "busy", 0, ROLE_WORKER);
  w.len -= 12;
  wire_wr_u32(&w, 1); wire_wr_str(&w, "t"); wire_wr_u8(&w, 2); wire_wr_u32(&w, 0);
  wire_wr_u32(&w, 0); wire_wr_str(&w, "");
  CHECK_ERR(apply_raw(&w), DRV_EPARSE, "SNAPSHOT series reset is 2");

  uint8_t attach[9] = {1};
  double hz = 0;
  memcpy(attach + 1, &hz, 8);
  CHECK_ERR(wire_validate_payload(WIRE_ATTACH, attach, 9), DRV_EPARSE, "ATTACH hz is 0");
  hz = NAN;
  memcpy(attach + 1, &hz, 8);
  CHECK(wire_validate_payload(WIRE_ATTACH, attach, 9) < 0);
  hz = 4;
  memcpy(attach + 1, &hz, 8);
  attach[0] = 2;
  CHECK_ERR(wire_validate_payload(WIRE_ATTACH, attach, 9), DRV_EPARSE, "ATTACH control is 2");
  const uint8_t log_tail[5] = {WIRE_COMMAND_LOG_TAIL, 0, 0, 0, 0};
  CHECK_OK(wire_validate_payload(WIRE_COMMAND, log_tail, 5));
  const uint8_t cmd[5] = {WIRE_COMMAND_LAST + 1, 0, 0, 0, 0};
  CHECK_ERR(wire_validate_payload(WIRE_COMMAND, cmd, 5), DRV_EPARSE, "unknown COMMAND kind");
  const uint8_t cmd_long[5] = {0, 0xff, 0xff, 0, 0};
  CHECK_ERR(wire_validate_payload(WIRE_COMMAND, cmd_long, 5), DRV_EPARSE, "exceeds the limit");
  const uint8_t reply[7] = {0};
  CHECK_ERR(wire_validate_payload(WIRE_COMMAND_REPLY, reply, 7), DRV_EPARSE, "7 bytes");
}

/* ---- CPU % -------------------------------------------------------------------- */

TEST(coord_cpu_percent_from_heartbeats) {
  coord_cpu s = {0};
  CHECK(coord__cpu_update(&s, 100, 0, 0) < 0);          /* no heartbeat yet */
  CHECK(coord__cpu_update(&s, 100, 1000, 10.0) < 0);    /* the first sample: a baseline */
  CHECK(coord__cpu_update(&s, 100, 1000, 10.0) < 0);    /* nothing new */
  CHECK_NEAR(coord__cpu_update(&s, 100, 1250, 10.5), 50.0, 1e-9); /* 250 ms in 0.5 s */
  CHECK_NEAR(coord__cpu_update(&s, 100, 1250, 10.5), 50.0, 1e-9); /* kept until the next */
  CHECK_NEAR(coord__cpu_update(&s, 100, 2250, 11.0), 200.0, 1e-9); /* two cores busy */
  CHECK_NEAR(coord__cpu_update(&s, 100, 2250, 12.0), 0.0, 1e-9);   /* idle */
  CHECK(coord__cpu_update(&s, 101, 40, 12.5) < 0);      /* restarted: a new baseline */
  CHECK_NEAR(coord__cpu_update(&s, 101, 140, 13.5), 10.0, 1e-9);
  CHECK(coord__cpu_update(&s, 101, 100, 14.0) < 0);     /* CPU time went back */
}

/* ---- size ---------------------------------------------------------------------- */

/* The frame for a 256-node cluster in steady state (a few new points per
 * series, one event): what an attach client receives per update. */
TEST(runsnap_256_nodes_frame_size) {
  runsnap_store s;
  runsnap_store_init(&s);
  fill_store(&s, 256);
  add_points(&s, "train/loss", 0, 100);
  add_points(&s, "train/accuracy", 0, 100);
  add_points(&s, RUNSNAP_THROUGHPUT_TAG, 0, 100);
  runsnap_cursor k = {0};
  runview c;
  runview_init(&c);
  size_t first = send_to(&s, &k, &c);
  add_points(&s, "train/loss", 100, 10);
  add_points(&s, "train/accuracy", 100, 10);
  add_points(&s, RUNSNAP_THROUGHPUT_TAG, 100, 1);
  CHECK_OK(runsnap_store_event(&s, 9, "node restart worker:17 (1 of 3) pid 4242"));
  size_t steady = send_to(&s, &k, &c);
  CHECK_INT_EQ(c.nnodes, 256);
  /* `got` went in the first frame only, and the client kept it. */
  CHECK(strcmp(c.nodes[200].got, s.m.nodes[200].got) == 0 && c.nodes[200].got[0]);
  snprintf(s.m.nodes[7].got, sizeof s.m.nodes[7].got, "moved  1 threads, 1 cpus, 2.0G");
  send_to(&s, &k, &c);
  CHECK(strcmp(c.nodes[7].got, "moved  1 threads, 1 cpus, 2.0G") == 0);
  CHECK(strcmp(c.nodes[8].got, s.m.nodes[8].got) == 0);
  /* So do `links`, sent again when they change. */
  CHECK(strcmp(c.nodes[200].links, "coord=shm,ps:0=shm") == 0);
  snprintf(s.m.nodes[9].links, sizeof s.m.nodes[9].links, "coord=shm,ps:0=tcp");
  send_to(&s, &k, &c);
  CHECK(strcmp(c.nodes[9].links, "coord=shm,ps:0=tcp") == 0);
  CHECK(strcmp(c.nodes[10].links, "coord=shm,ps:0=shm") == 0);
  /* ~94 bytes a node: the whole table stays under 27 KiB a frame. */
  CHECK(steady < 27 * 1024);
  CHECK(first > steady);
  if (getenv("DROVER_BENCH"))
    printf("bench: 256 nodes: first frame %zu bytes, steady frame %zu bytes = %.0f bytes/s at "
           "4 Hz, %.0f at 10 Hz\n", first, steady, 4.0 * steady, 10.0 * steady);
  runsnap_cursor_free(&k);
  runview_free(&c);
  runsnap_store_free(&s);
}
