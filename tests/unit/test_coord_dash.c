/* test_coord_dash.c - a real coordinator (1 ps + 2 workers: the drover
 * binary beside this one, or $DROVER) with attach clients on the same
 * loop: snapshots of the nodes, deltas of the series after a fit, the
 * events, a node's log tail, commands (read-only refused, no handler, a handler, stopping a
 * node that is then restarted), a malformed ATTACH and a wrong secret
 * closing only their own connection, a silent client closed at the end,
 * and the bytes a client receives
 * during a fit. Every wait is bounded; the coordinator ends what it
 * started (coord_shutdown, coord_free). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "ui/attach.h"
#include "net/conn.h"
#include "cluster/coord/coord.h"
#include "cluster/coord/coord_int.h"
#include "ui/dash.h"
#include "proto/runsnap.h"
#include "harness.h"
#include "train/progress.h"

/* ---- fixture ----------------------------------------------------------------- */

typedef struct fixture {
  uv_loop_t loop;
  coord *c;
  auth_secret secret;
  char host[64];
  int port;
} fixture;

static void start(fixture *f) {
  char exe[PATH_MAX] = "";
  const char *env = getenv("DROVER");
  if (env && *env) {
    snprintf(exe, sizeof exe, "%s", env);
  } else {
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 16);
    CHECK(k > 0);
    exe[k] = '\0';
    strcpy(strrchr(exe, '/') + 1, "drover");
  }
  if (access(exe, X_OK) != 0) harness_fail(__FILE__, __LINE__, "no drover binary at %s", exe);
  setenv("DROVER_LAUNCH_EXE", exe, 1);
  CHECK_INT_EQ(uv_loop_init(&f->loop), 0);
  coord_opts o;
  coord_opts_default(&o);
  o.count[ROLE_PS] = 1;
  o.count[ROLE_WORKER] = 2;
  o.runs_base = "runs";
  o.name = "dash";
  o.reservation_timeout = 30;
  CHECK_OK(coord_start(&f->loop, &o, &f->c));
  char path[1200];
  snprintf(path, sizeof path, "%s/control.key", coord_run_dir(f->c));
  CHECK_OK(auth_secret_load(path, &f->secret));
  const char *addr = coord_address(f->c);
  const char *colon = strrchr(addr, ':');
  snprintf(f->host, sizeof f->host, "%.*s", (int)(colon - addr), addr);
  f->port = atoi(colon + 1);
}

static void stop(fixture *f, attach_client **clients, int n) {
  char report[2048];
  CHECK_INT_EQ(coord_shutdown(f->c, 5, 30, report, sizeof report), 0);
  coord_free(f->c);
  for (int i = 0; i < n; i++) {
    if (!clients[i]) continue;
    /* The run ended: they learn it from their connection closing. */
    double deadline = progress_now() + 5;
    while (!attach_client_closed(clients[i], NULL) && progress_now() < deadline) {
      uv_run(&f->loop, UV_RUN_NOWAIT);
      usleep(1000);
    }
    const char *why;
    CHECK(attach_client_closed(clients[i], &why));
    CHECK_STR_CONTAINS(why, "the run ended");
    attach_client_close(clients[i]);
  }
  for (int i = 0; i < 4; i++) uv_run(&f->loop, UV_RUN_NOWAIT);
  CHECK_INT_EQ(uv_loop_close(&f->loop), 0);
}

static attach_client *attach(fixture *f, bool control, double hz) {
  attach_client *a;
  CHECK_OK(attach_client_open(&f->loop, f->host, f->port, &f->secret, control, hz, &a));
  CHECK_OK(attach_client_wait(a, 10));
  return a;
}

/* Pumps as coord__pump does (commands between turns) until cond or the
 * deadline; returns whether cond came true. */
static bool pump_until(fixture *f, bool (*cond)(void *), void *arg, double timeout) {
  double deadline = progress_now() + timeout;
  while (!cond(arg)) {
    if (progress_now() > deadline) return false;
    coord_run_commands(f->c);
    uv_run(&f->loop, UV_RUN_ONCE);
  }
  return true;
}

static bool never(void *arg) {
  (void)arg;
  return false;
}

static void pump_for(fixture *f, double seconds) { pump_until(f, never, NULL, seconds); }

typedef struct cmd_wait {
  attach_client *a;
  int status;
  char text[WIRE_MAX_STR + 1];
} cmd_wait;

static bool replied(void *arg) {
  cmd_wait *w = arg;
  return attach_client_reply(w->a, &w->status, w->text, sizeof w->text);
}

/* Sends a command and pumps (running commands) until its reply. */
static int command(fixture *f, attach_client *a, int kind, const char *text, char *out) {
  cmd_wait w = {.a = a};
  CHECK_OK(attach_client_send(a, kind, text));
  if (!pump_until(f, replied, &w, 10)) harness_fail(__FILE__, __LINE__, "no reply to '%s'", text);
  memcpy(out, w.text, sizeof w.text);
  return w.status;
}

static bool has_event(const runview *m, const char *needle) {
  for (int i = 0; i < m->nevents; i++)
    if (strstr(runview_event_at(m, i)->text, needle)) return true;
  return false;
}

static int echo_calls;
static int echo(void *ud, const char *line, char *out, size_t n) {
  (*(int *)ud)++;
  snprintf(out, n, "you said: %s", line);
  return strcmp(line, "error()") == 0 ? DRV_EINVAL : 0;
}

/* ---- a fit ---------------------------------------------------------------------- */

typedef struct fit_setup {
  nn_module *model;
  nn_loss *loss;
  dataset *data;
  optim_cfg opt;
  train_cfg cfg;
  coord_fit_args args;
  double stop_after; /* seconds, 0: run the epochs */
  double t0;
  useconds_t pause;  /* per turn of the fit loop: a slower fit */
} fit_setup;

static int stop_later(void *ud, const train_progress *p) {
  fit_setup *s = ud;
  (void)p;
  if (s->pause) usleep(s->pause);
  return s->stop_after > 0 && progress_now() - s->t0 > s->stop_after;
}

static void fit_prepare(fit_setup *s, int64_t epochs) {
  memset(s, 0, sizeof *s);
  rng_t r;
  rng_seed(&r, 7);
  s->model = nn_sequential();
  nn_module *l1 = nn_linear(16, 32, &r), *act = nn_relu(), *l2 = nn_linear(32, 4, &r);
  CHECK(s->model && l1 && act && l2);
  CHECK_OK(nn_sequential_add(s->model, l1));
  CHECK_OK(nn_sequential_add(s->model, act));
  CHECK_OK(nn_sequential_add(s->model, l2));
  nn_unref(l1), nn_unref(act), nn_unref(l2);
  s->loss = nn_cross_entropy();
  data_synth_opts d = {.n = 512, .features = 16, .classes = 4, .seed = 3};
  CHECK_OK(data_synthetic(&d, &s->data));
  optim_cfg_default(&s->opt, OPTIM_SGD);
  s->opt.lr = 0.05f;
  s->cfg = (train_cfg){.batch = 16, .epochs = epochs, .shuffle = true, .seed = 1,
                       .on_progress = stop_later, .ud = s};
  s->args = (coord_fit_args){s->model, s->loss, &s->opt, s->data, &s->cfg, false, 0, NULL, NULL};
}

static void fit_release(fit_setup *s) {
  nn_unref(s->model);
  nn_loss_unref(s->loss);
  data_free(s->data);
}

/* ---- tests ------------------------------------------------------------------------ */

static bool worker1_back(void *arg) {
  fixture *f = arg;
  int n;
  const coord_node *nodes = coord_nodes(f->c, &n);
  return nodes[2].restarts == 1 && nodes[2].state == NODE_READY;
}

typedef struct seen_state {
  attach_client *a;
  const char *node, *state;
} seen_state;

static bool client_sees(void *arg) {
  seen_state *s = arg;
  const runview_node *d = runview_find_node(attach_client_model(s->a), s->node);
  return d && strcmp(d->state, s->state) == 0;
}

typedef struct tail_wait {
  attach_client *a;
  char text[WIRE_MAX_STR + 1];
} tail_wait;

static bool tail_arrived(void *arg) {
  tail_wait *w = arg;
  return attach_client_log_tail(w->a, "worker:0", w->text, sizeof w->text) == 0;
}

/* The dashboard's detail view under attach: worker:0's log comes from the
 * coordinator, read-only clients too, as the file reads on its host. */
static void check_log_tail(fixture *f, attach_client *ro, const char *worker0_log) {
  char local[WIRE_MAX_STR + 1], out[WIRE_MAX_STR + 1];
  tail_wait w = {.a = ro};
  CHECK_INT_EQ(attach_client_log_tail(ro, "worker:0", w.text, sizeof w.text), DASH_LOG_PENDING);
  CHECK_STR_CONTAINS(w.text, "asking the coordinator");
  CHECK(pump_until(f, tail_arrived, &w, 10));
  rundir_log_tail(worker0_log, DASH_LOG_LINES, local, sizeof local);
  CHECK(strcmp(w.text, local) == 0);
  CHECK(local[0] && local[0] != '(');
  CHECK_INT_EQ(command(f, ro, WIRE_COMMAND_LOG_TAIL, "worker:0", out), 0);
  CHECK(strcmp(out, local) == 0);
  CHECK_INT_EQ(command(f, ro, WIRE_COMMAND_LOG_TAIL, "worker:9", out), DRV_EINVAL);
  CHECK_STR_CONTAINS(out, "no node 'worker:9'");
}

TEST(coord_dash_attach_clients_and_commands) {
  fixture f;
  start(&f);
  attach_client *ro = attach(&f, false, 10), *ctl = attach(&f, true, 4);
  pump_for(&f, 0.4);
  const runview *m = attach_client_model(ro);
  CHECK(strcmp(attach_client_run_dir(ro), coord_run_dir(f.c)) == 0);
  CHECK(strncmp(m->run, "dash-", 5) == 0);
  CHECK(strcmp(m->launcher, "local") == 0);
  CHECK(strcmp(m->state, "idle") == 0);
  CHECK_INT_EQ(m->attach_clients, 2);
  CHECK_INT_EQ(m->nnodes, 3);
  const char *names[] = {"ps:0", "worker:0", "worker:1"};
  int n;
  const coord_node *nodes = coord_nodes(f.c, &n);
  for (int i = 0; i < 3; i++) {
    const runview_node *d = runview_find_node(m, names[i]);
    CHECK(d && strcmp(d->state, "ready") == 0 && d->pid == nodes[i].pid);
    CHECK(d->heartbeat_age >= 0 && d->heartbeat_age < 5);
    CHECK(strcmp(d->log, nodes[i].log) == 0);
  }
  CHECK(has_event(m, "cluster ready: 3 nodes"));
  CHECK(has_event(m, "attach "));

  char out[WIRE_MAX_STR + 1];
  check_log_tail(&f, ro, nodes[1].log);
  CHECK_INT_EQ(command(&f, ro, WIRE_COMMAND_LUA, "c:nodes()", out), DRV_EPERM);
  CHECK_STR_CONTAINS(out, "read-only");
  CHECK_INT_EQ(command(&f, ro, WIRE_COMMAND_STOP_NODE, "worker:1", out), DRV_EPERM);
  CHECK_INT_EQ(command(&f, ctl, WIRE_COMMAND_LUA, "return 1", out), DRV_EUNSUPPORTED);
  CHECK_STR_CONTAINS(out, "takes no Lua commands");
  coord_set_command_handler(f.c, echo, &echo_calls);
  CHECK_INT_EQ(command(&f, ctl, WIRE_COMMAND_LUA, "hello", out), 0);
  CHECK(strcmp(out, "you said: hello") == 0);
  CHECK_INT_EQ(command(&f, ctl, WIRE_COMMAND_LUA, "error()", out), DRV_EINVAL);
  CHECK_INT_EQ(echo_calls, 2);
  CHECK_INT_EQ(command(&f, ctl, WIRE_COMMAND_STOP_NODE, "worker:7", out), DRV_EINVAL);
  CHECK_STR_CONTAINS(out, "no node 'worker:7'");

  /* Stop worker:1: lost, restarted after its back-off, ready again. */
  pid_t old = nodes[2].pid;
  CHECK_INT_EQ(command(&f, ctl, WIRE_COMMAND_STOP_NODE, "worker:1", out), 0);
  CHECK_STR_CONTAINS(out, "stopping worker:1");
  CHECK(pump_until(&f, worker1_back, &f, 20));
  CHECK(nodes[2].pid != old);
  seen_state back = {ro, "worker:1", "ready"};
  CHECK(pump_until(&f, client_sees, &back, 5));
  m = attach_client_model(ro);
  CHECK_INT_EQ(runview_find_node(m, "worker:1")->restarts, 1);
  CHECK(has_event(m, "node stop worker:1"));
  CHECK(has_event(m, "node lost worker:1: killed by signal 15"));
  CHECK(has_event(m, "node restart worker:1 (1 of 3)"));

  /* A fit: the header and the series follow. */
  fit_setup s;
  fit_prepare(&s, 4);
  train_result res;
  CHECK_OK(coord_fit(f.c, &s.args, &res));
  pump_for(&f, 0.6);
  m = attach_client_model(ro);
  const runview *store = coord_dash(f.c);
  CHECK_INT_EQ(m->step, res.steps);
  CHECK_INT_EQ(m->total_steps, res.steps);
  CHECK(strcmp(m->mode, "async") == 0 && strcmp(m->state, "idle") == 0);
  CHECK(m->eta == 0 && m->examples_per_sec > 0);
  CHECK_INT_EQ(runview_find_node(m, "worker:0")->steps + runview_find_node(m, "worker:1")->steps,
               res.steps);
  const runview_series *a = runview_find_series(m, "train/loss"), *b = runview_find_series(store, "train/loss");
  CHECK(a && b && b->n == res.steps && a->n > 0);
  CHECK(runview_series_at(a, a->n - 1)->value == runview_series_at(b, b->n - 1)->value);
  CHECK(runview_series_at(a, a->n - 1)->step == (double)res.steps);
  CHECK(runview_find_series(m, "train/accuracy") != NULL);
  CHECK(has_event(m, "fit done"));

  /* A client that leaves changes nothing for the others. */
  size_t frames0, frames1, bytes;
  attach_client_close(ro);
  ro = NULL;
  attach_client_stats(ctl, &bytes, &frames0);
  pump_for(&f, 0.8);
  attach_client_stats(ctl, &bytes, &frames1);
  CHECK(frames1 >= frames0 + 2);
  CHECK_INT_EQ(attach_client_model(ctl)->attach_clients, 1);
  CHECK(has_event(coord_dash(f.c), "detach "));
  fit_release(&s);
  attach_client *all[] = {ro, ctl};
  stop(&f, all, 2);
}

/* ---- bad clients ------------------------------------------------------------------ */

typedef struct raw {
  bool closed;
  int err;
  char why[200];
} raw;

static void raw_ready(conn *cn) {
  /* ATTACH { control 1, hz NaN }: a layout the coordinator refuses. */
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_u8(&w, 1);
  wire_wr_f64(&w, NAN);
  conn_send_wr(cn, &w, WIRE_ATTACH, 0);
}

static void raw_frame(conn *cn, const wire_header *h, const uint8_t *pl) {
  (void)cn, (void)h, (void)pl;
}

static void raw_close(conn *cn, int err, const char *why) {
  raw *r = conn_ud(cn);
  r->closed = true;
  r->err = err;
  snprintf(r->why, sizeof r->why, "%s", why);
}

static bool raw_closed(void *arg) { return ((raw *)arg)->closed; }

static bool is_ready(void *arg) { return conn_is_ready(arg); }

TEST(coord_dash_bad_clients_close_only_themselves) {
  fixture f;
  start(&f);
  attach_client *good = attach(&f, false, 10);

  static const conn_cbs cbs = {raw_ready, raw_frame, raw_close};
  raw r = {0};
  conn_opts o = {.secret = &f.secret, .who = AUTH_WHO_CLIENT, .cbs = &cbs, .ud = &r,
                 .opaque = true};
  conn *cn;
  CHECK_OK(conn_connect(&f.loop, f.host, f.port, &o, &cn));
  CHECK(pump_until(&f, raw_closed, &r, 10));
  CHECK_INT_EQ(r.err, 0); /* closed by the coordinator: EOF */

  auth_secret wrong = f.secret;
  wrong.key[0] ^= 1;
  attach_client *bad;
  CHECK_OK(attach_client_open(&f.loop, f.host, f.port, &wrong, true, 4, &bad));
  CHECK_ERR(attach_client_wait(bad, 10), DRV_EIO, "wrong secret");
  attach_client_close(bad);

  size_t b0, f0, b1, f1;
  attach_client_stats(good, &b0, &f0);
  pump_for(&f, 0.5);
  attach_client_stats(good, &b1, &f1);
  CHECK(f1 >= f0 + 3);
  CHECK_INT_EQ(attach_client_model(good)->attach_clients, 1);
  int n;
  const coord_node *nodes = coord_nodes(f.c, &n);
  for (int i = 0; i < n; i++) CHECK(nodes[i].state == NODE_READY);

  /* Authenticated, then silent (neither REGISTER nor ATTACH): coord_free
   * closes it too, or the loop would not close. */
  static const conn_cbs idle_cbs = {NULL, raw_frame, raw_close};
  raw idle = {0};
  o.cbs = &idle_cbs;
  o.ud = &idle;
  CHECK_OK(conn_connect(&f.loop, f.host, f.port, &o, &cn));
  CHECK(pump_until(&f, is_ready, cn, 10));
  attach_client *all[] = {good};
  stop(&f, all, 1);
  CHECK(idle.closed);
  CHECK_INT_EQ(idle.err, 0);
}

/* ---- bytes ---------------------------------------------------------------------------- */

/* What two clients (4 and 10 Hz) receive during a 3 s fit of 1 ps + 2
 * workers: bytes per second, bytes per frame and frames per second of each. */
typedef struct { double rate, per_frame, hz; } received;

static received received_since(attach_client *c, size_t b0, size_t n0, double secs) {
  size_t b, n;
  attach_client_stats(c, &b, &n);
  received r = {(double)(b - b0) / secs, n > n0 ? (double)(b - b0) / (double)(n - n0) : 0,
                (double)(n - n0) / secs};
  return r;
}

static void measure(fixture *f, attach_client *c4, attach_client *c10, useconds_t pause,
                    received *r4, received *r10, int64_t *steps) {
  size_t b4, b10, n4, n10;
  attach_client_stats(c4, &b4, &n4);
  attach_client_stats(c10, &b10, &n10);
  fit_setup s;
  fit_prepare(&s, 100000);
  s.stop_after = 3;
  s.pause = pause;
  s.t0 = progress_now();
  train_result res;
  coord_fit(f->c, &s.args, &res); /* stopped by stop_later: not an error here */
  double secs = progress_now() - s.t0;
  *r4 = received_since(c4, b4, n4, secs);
  *r10 = received_since(c10, b10, n10, secs);
  *steps = res.steps;
  if (getenv("DROVER_BENCH"))
    printf("bench: 1 ps + 2 workers, %lld steps in %.1f s (%.0f steps/s): %.0f bytes/s at 4 Hz "
           "(%.0f a frame, %.1f frames/s), %.0f at 10 Hz (%.0f, %.1f)\n", (long long)res.steps,
           secs, (double)res.steps / secs, r4->rate, r4->per_frame, r4->hz, r10->rate,
           r10->per_frame, r10->hz);
  fit_release(&s);
}

/* Bytes a client receives while 1 ps + 2 workers train: as fast as they
 * can (a loss point per step: the per-frame bound on points is what holds
 * this down), and at a more ordinary pace. Bounded per frame and in frames
 * per second (its rate, plus the frames a fit's start and end push), not
 * in bytes per second: a full frame at 4 Hz is already 95% of that bound. */
TEST(coord_dash_bytes_per_second_during_a_fit) {
  fixture f;
  start(&f);
  attach_client *c4 = attach(&f, false, 4), *c10 = attach(&f, false, 10);
  received r4, r10;
  int64_t steps;
  /* A frame holds at most RUNSNAP_MAX_POINTS points of each of the
   * three series (24 bytes each), the header, three nodes and the
   * fit's few events (~1.4 KB measured). */
  double most = 3 * RUNSNAP_MAX_POINTS * 24 + 2048;
  measure(&f, c4, c10, 0, &r4, &r10, &steps);
  CHECK(steps > 100);
  CHECK(r4.per_frame < most && r10.per_frame < most);
  CHECK(r4.hz < 4 + 1 && r10.hz < 10 + 1);
  CHECK(r4.rate < r10.rate);
  measure(&f, c4, c10, 10000, &r4, &r10, &steps); /* at most 100 turns a second */
  CHECK(steps > 10);
  CHECK(r4.per_frame < most && r10.per_frame < most);
  CHECK(r4.hz < 4 + 1 && r10.hz < 10 + 1);
  attach_client *all[] = {c4, c10};
  stop(&f, all, 2);
}
