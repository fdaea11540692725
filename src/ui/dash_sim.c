/* dash_sim.c - a simulated run feeding the dashboard (see dash_sim.h):
 * a deterministic state machine per node advanced in 0.1 s ticks, metrics
 * shaped like a training run, and the `drover _dash-sim` driver.
 */
#include "ui/dash_sim.h"

#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/rundir.h"
#include "proto/nodestate.h"
#include "proto/wire.h"
#include "base/util.h"

#define DT 0.1              /* simulated seconds per tick */
#define MAX_TICKS 6000      /* per advance: a stalled caller does not stall more */
#define BATCH 64            /* examples per step */
#define STEPS_PER_WORKER 2  /* per second, on average */
#define RUN_SECONDS 900     /* the fit's length at full speed */
#define EVAL_EVERY 15.0     /* seconds */
#define LOSS_RATE 1.0 / 6000 /* per worker per tick: about one loss a worker in 10 minutes */

typedef struct sim_node {
  node_state st;  /* shown in its runview_node's state */
  double until;   /* the current phase ends (lost, restarting, starting) */
  double rate;    /* steps per second while busy */
  double steps;
  double log_at;  /* next log line */
} sim_node;

struct dash_sim {
  runview m;
  sim_node *sn;
  dash_sim_opts o;
  char log_dir[400];
  double t, step, steps_per_sec;
  double next_tp, next_lr, next_eval, next_ckpt;
  bool scripted_loss, finished;
  uint64_t rng;
  int64_t closure;
  double clock0; /* first get(): seconds on the monotonic clock; <0 before */
};

/* ============================== randomness =============================== */

static double urand(dash_sim *s) { /* xorshift64*, in [0, 1) */
  s->rng ^= s->rng >> 12;
  s->rng ^= s->rng << 25;
  s->rng ^= s->rng >> 27;
  return (double)((s->rng * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

static double gauss(dash_sim *s) {
  double u = urand(s), v = urand(s);
  return sqrt(-2 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

/* ============================== nodes ==================================== */

static bool is_trainer(const runview_node *n) { return n->role == ROLE_WORKER || n->role == ROLE_CHIEF; }

static void set_state(dash_sim *s, int i, node_state st) {
  s->sn[i].st = st;
  snprintf(s->m.nodes[i].state, sizeof s->m.nodes[i].state, "%s", nodestate_shown(st));
}

static void event(dash_sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void event(dash_sim *s, const char *fmt, ...) {
  char text[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  runview_add_event(&s->m, s->t, text);
}

static void lose(dash_sim *s, int i, const char *why) {
  runview_node *n = &s->m.nodes[i];
  set_state(s, i, NODE_LOST);
  s->sn[i].until = s->t + 2;
  n->inflight = 0;
  n->examples_per_sec = 0;
  n->cpu_pct = -1;
  event(s, "node lost %s: %s", n->name, why);
  if (is_trainer(n)) {
    s->m.retried += 2;
    event(s, "closure %lld retried on another worker", (long long)++s->closure);
  }
}

/* One node's tick: the state machine lost -> restarting -> starting ->
 * ready -> busy (trainers) or ready (ps, evaluator). */
static void tick_node(dash_sim *s, int i) {
  runview_node *n = &s->m.nodes[i];
  sim_node *sn = &s->sn[i];
  bool alive = sn->st != NODE_LOST && sn->st != NODE_RESTARTING;
  if (sn->st == NODE_LOST && s->t >= sn->until) {
    set_state(s, i, NODE_RESTARTING);
    n->restarts++;
    sn->until = s->t + 1.5;
    event(s, "node restarting %s (restart %d)", n->name, n->restarts);
  } else if (sn->st == NODE_RESTARTING && s->t >= sn->until) {
    set_state(s, i, NODE_STARTING);
    n->pid += 101;
    n->heartbeat_age = 0;
    sn->until = s->t + 0.8;
  } else if (sn->st == NODE_STARTING && s->t >= sn->until) {
    set_state(s, i, NODE_READY);
    sn->until = s->t + 0.3;
    if (n->restarts) event(s, "node back %s", n->name);
  } else if (sn->st == NODE_READY && s->t >= sn->until && is_trainer(n) && !s->finished) {
    set_state(s, i, NODE_BUSY);
  }
  n->heartbeat_age = alive ? fmod(n->heartbeat_age + DT, 1.0) : n->heartbeat_age + DT;
  if (sn->st == NODE_BUSY && is_trainer(n)) {
    sn->rate = fmax(0.2, sn->rate + 0.05 * gauss(s));
    if (sn->rate > 2 * STEPS_PER_WORKER) sn->rate = 2 * STEPS_PER_WORKER;
    sn->steps += sn->rate * DT;
    n->steps = (int64_t)sn->steps;
    n->examples_per_sec = sn->rate * BATCH;
    n->cpu_pct = fmin(100, 88 + 6 * gauss(s));
    n->inflight = 2;
    n->backlog = (int64_t)fmax(0, (double)n->backlog + (urand(s) < 0.5 ? -1 : 1));
    if (n->backlog > 8) n->backlog = 8;
    s->steps_per_sec += sn->rate;
    /* Random losses spare worker:1, whose story is scripted (see tick). */
    if (urand(s) < LOSS_RATE && !(n->role == ROLE_WORKER && n->index == 1))
      lose(s, i, "killed by signal 9 (simulated)");
  } else if (alive) {
    n->cpu_pct = n->role == ROLE_PS && !s->finished ? fmin(100, 35 + 5 * gauss(s)) : 1 + urand(s);
    n->examples_per_sec = 0;
    n->inflight = 0;
  }
  if (alive) n->rss = (uint64_t)(n->role == ROLE_PS ? 420e6 : 260e6) + (uint64_t)(urand(s) * 8e6);
  if (s->o.log_dir && s->t >= sn->log_at) {
    sn->log_at = s->t + 2;
    char path[600];
    snprintf(path, sizeof path, "%s/%s-%d.log", s->log_dir, wire_role_name(n->role), n->index);
    FILE *f = util_fopen_append(path, 0644);
    if (f) {
      fprintf(f, "t=%.1f %s %s steps=%lld\n", s->t, n->name, n->state, (long long)n->steps);
      fclose(f);
    }
  }
}

/* ============================== metrics ================================== */

static void add(dash_sim *s, const char *tag, double v) {
  runview_add_point(&s->m, tag, (runview_point){floor(s->step), s->t, v});
}

/* Loss and accuracy as functions of progress p in [0, 1]. */
static double loss_at(double p) { return 0.08 + 2.2 * exp(-5 * p); }
static double acc_at(double p) { return 0.97 - 0.87 * exp(-6 * p); }

static void tick_metrics(dash_sim *s) {
  runview *m = &s->m;
  double p = m->total_steps ? s->step / (double)m->total_steps : 0;
  if (s->steps_per_sec > 0) {
    double noise = exp(0.12 * gauss(s));
    if (urand(s) < 0.01) noise *= 4; /* a spike now and then: the robust range ignores it */
    add(s, "train/loss", loss_at(p) * noise);
    add(s, "train/accuracy", fmin(1, acc_at(p) + 0.02 * gauss(s)));
  }
  if (s->t >= s->next_lr && s->steps_per_sec > 0) {
    s->next_lr = s->t + 1;
    add(s, "train/learning_rate", 0.05 * 0.5 * (1 + cos(M_PI * p)));
  }
  if (s->t >= s->next_tp) {
    s->next_tp = s->t + 0.5;
    m->examples_per_sec = s->steps_per_sec * BATCH;
    runview_add_point(m, "examples/s", (runview_point){floor(s->step), s->t, m->examples_per_sec});
  }
  if (s->t >= s->next_eval) {
    s->next_eval = s->t + EVAL_EVERY;
    double el = loss_at(p) * 1.1 * exp(0.03 * gauss(s)), ea = fmin(1, acc_at(p) - 0.02);
    add(s, "eval/loss", el);
    add(s, "eval/accuracy", ea);
    event(s, "eval at step %.0f: loss %.4f, accuracy %.4f", s->step, el, ea);
  }
  if (s->t >= s->next_ckpt) {
    s->next_ckpt = s->t + 60;
    if (s->step > 0) event(s, "checkpoint saved at step %.0f", s->step);
  }
}

static void tick(dash_sim *s) {
  runview *m = &s->m;
  s->t += DT;
  s->steps_per_sec = 0;
  /* The story the screen tests look for: worker:1 lost, back in seconds. */
  if (!s->scripted_loss && s->t >= 6) {
    s->scripted_loss = true;
    for (int i = 0; i < m->nnodes; i++)
      if (m->nodes[i].role == ROLE_WORKER && m->nodes[i].index == 1 &&
          s->sn[i].st == NODE_BUSY)
        lose(s, i, "killed by signal 9 (simulated)");
  }
  int64_t inflight = 0;
  for (int i = 0; i < m->nnodes; i++) {
    tick_node(s, i);
    inflight += m->nodes[i].inflight;
  }
  if (!s->finished) {
    s->step = fmin(s->step + s->steps_per_sec * DT, (double)m->total_steps);
    if (s->step >= (double)m->total_steps) {
      s->finished = true;
      snprintf(m->state, sizeof m->state, "idle");
      for (int i = 0; i < m->nnodes; i++)
        if (s->sn[i].st == NODE_BUSY) set_state(s, i, NODE_READY);
      event(s, "fit done: %lld steps", (long long)m->total_steps);
    }
  }
  m->step = (int64_t)s->step;
  m->uptime = s->t;
  m->eta = s->steps_per_sec > 0 ? ((double)m->total_steps - s->step) / s->steps_per_sec : -1;
  m->running = inflight;
  m->queued = s->finished ? 0 : (int64_t)(inflight + 4 * urand(s));
  m->done = m->step + s->closure;
  tick_metrics(s);
  m->version++;
}

/* ============================== life cycle =============================== */

int dash_sim_new(const dash_sim_opts *o, dash_sim **out) {
  if (o->nodes < 1 || o->nodes > 100000)
    return err_set(DRV_EINVAL, "a simulation needs 1 to 100000 nodes, not %d", o->nodes);
  dash_sim *s = calloc(1, sizeof *s);
  if (!s) return err_set(DRV_ENOMEM, "out of memory for the simulation");
  s->o = *o;
  if (o->log_dir) {
    snprintf(s->log_dir, sizeof s->log_dir, "%s", o->log_dir);
    s->o.log_dir = s->log_dir;
  }
  s->rng = o->seed ? o->seed : 1;
  s->next_eval = EVAL_EVERY;
  s->clock0 = -1;
  runview *m = &s->m;
  runview_init(m);
  s->sn = calloc((size_t)o->nodes, sizeof *s->sn);
  if (!s->sn || runview_set_nnodes(m, o->nodes) < 0) {
    dash_sim_free(s);
    return err_set(DRV_ENOMEM, "out of memory for %d simulated nodes", o->nodes);
  }
  /* ps first, then the chief, workers, an evaluator: the coordinator's order. */
  int n = o->nodes, nps = n >= 8 ? n / 8 : 1, chief = n >= 3, eval = n >= 4;
  int workers = n - nps - chief - eval, idx[4] = {0};
  for (int i = 0; i < n; i++) {
    runview_node *d = &m->nodes[i];
    d->role = i < nps ? ROLE_PS : i < nps + chief ? ROLE_CHIEF : i < n - eval ? ROLE_WORKER : ROLE_EVALUATOR;
    d->index = idx[d->role]++;
    snprintf(d->name, sizeof d->name, "%s:%d", wire_role_name(d->role), d->index);
    snprintf(d->host, sizeof d->host, "node%02d.sim", i / 8);
    d->pid = 40000 + i * 7;
    snprintf(d->got, sizeof d->got, "10.1.%d.%d  2 threads, 2 cpus, 4.0G, slurm 4242.%d on node%02d",
             i / 8, i % 8 + 10, i, i / 8);
    /* the coordinator elsewhere; ps:0 beside the first hosts' nodes */
    if (d->role == ROLE_PS) snprintf(d->links, sizeof d->links, "coord=tcp");
    else if (nps == 1) snprintf(d->links, sizeof d->links, "coord=tcp,ps:0=%s", i < 8 ? "shm" : "tcp");
    else snprintf(d->links, sizeof d->links, "coord=tcp,ps:0-%d=tcp", nps - 1);
    set_state(s, i, NODE_STARTING);
    d->backlog = is_trainer(d) ? 0 : -1;
    d->heartbeat_age = urand(s);
    if (s->o.log_dir)
      snprintf(d->log, sizeof d->log, "%s/%s-%d.log", s->log_dir, wire_role_name(d->role), d->index);
    s->sn[i].until = 0.5 + 1.5 * urand(s);
    s->sn[i].rate = STEPS_PER_WORKER * (0.8 + 0.4 * urand(s));
  }
  snprintf(m->run, sizeof m->run, "sim-%d-nodes", n);
  snprintf(m->launcher, sizeof m->launcher, "sim");
  snprintf(m->state, sizeof m->state, "training");
  snprintf(m->mode, sizeof m->mode, "async");
  m->total_steps = (int64_t)(workers + chief) * STEPS_PER_WORKER * RUN_SECONDS;
  m->capacity = 1024;
  m->eta = -1;
  event(s, "cluster up: %d nodes (%d ps, %d workers)", n, nps, workers + chief);
  if (o->warp > 0)
    while (s->t + DT <= o->warp) dash_sim_advance(s, o->warp);
  *out = s;
  return 0;
}

void dash_sim_free(dash_sim *s) {
  if (!s) return;
  runview_free(&s->m);
  free(s->sn);
  free(s);
}

const runview *dash_sim_advance(dash_sim *s, double t) {
  for (int k = 0; s->t + DT <= t + 1e-9 && k < MAX_TICKS; k++) tick(s);
  return &s->m;
}

/* ============================== the source =============================== */

static const runview *src_get(void *ud) {
  dash_sim *s = ud;
  double now = (double)uv_hrtime() / 1e9;
  if (s->clock0 < 0) s->clock0 = now;
  return dash_sim_advance(s, s->o.warp + now - s->clock0);
}

static int src_command(void *ud, const char *line, char *out, size_t n) {
  dash_sim *s = ud;
  if (strcmp(line, "step") == 0) snprintf(out, n, "%lld", (long long)s->m.step);
  else snprintf(out, n, "sim: no coordinator here (got '%s')", line);
  return 0;
}

static int src_kill(void *ud, const char *name, char *out, size_t n) {
  dash_sim *s = ud;
  for (int i = 0; i < s->m.nnodes; i++) {
    runview_node *d = &s->m.nodes[i];
    if (strcmp(d->name, name) != 0) continue;
    if (s->sn[i].st == NODE_LOST || s->sn[i].st == NODE_RESTARTING) {
      snprintf(out, n, "%s is already %s", name, d->state);
      return DRV_EINVAL;
    }
    lose(s, i, "stopped from the dashboard");
    return 0;
  }
  snprintf(out, n, "no node %s", name);
  return DRV_EINVAL;
}

/* The simulated nodes write their logs where the model says. */
static int src_log_tail(void *ud, const char *name, char *out, size_t n) {
  dash_sim *s = ud;
  const char *path = NULL;
  for (int i = 0; i < s->m.nnodes; i++)
    if (strcmp(s->m.nodes[i].name, name) == 0) path = s->m.nodes[i].log;
  rundir_log_tail(path, DASH_LOG_LINES, out, n);
  return 0;
}

dash_source dash_sim_source(dash_sim *s) {
  dash_source src = {.get = src_get,
                     .command = src_command,
                     .kill_node = src_kill,
                     .log_tail = src_log_tail,
                     .ud = s};
  if (s->o.read_only) src.command = NULL, src.kill_node = NULL;
  return src;
}

/* ============================== drover _dash-sim ========================= */

typedef struct sim_run {
  dash *d;
  uv_timer_t limit;
  uv_signal_t sig[3];
  bool done;
} sim_run;

static void on_closed(uv_handle_t *h) { (void)h; }

static void finish(sim_run *r) {
  if (r->done) return;
  r->done = true;
  uv_close((uv_handle_t *)&r->limit, on_closed);
  for (int i = 0; i < 3; i++) uv_close((uv_handle_t *)&r->sig[i], on_closed);
  dash_close(r->d); /* safe after q: the terminal is already back */
  r->d = NULL;
}

static void on_quit(void *ud) { finish(ud); }
static void on_limit(uv_timer_t *t) { finish(t->data); }
static void on_signal(uv_signal_t *h, int signo) {
  (void)signo;
  finish(h->data);
}

int dash_sim_run(const dash_sim_opts *o) {
  dash_sim *s;
  if (dash_sim_new(o, &s) < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    return 1;
  }
  uv_loop_t loop;
  if (uv_loop_init(&loop) < 0) {
    dash_sim_free(s);
    fputs("drover: cannot start the event loop\n", stderr);
    return 1;
  }
  sim_run r = {0};
  /* Signals first, so that ncurses leaves them to us and Ctrl-C or a kill
   * gives the terminal back. */
  static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; i++) {
    uv_signal_init(&loop, &r.sig[i]);
    r.sig[i].data = &r;
    uv_signal_start(&r.sig[i], on_signal, sigs[i]);
  }
  uv_timer_init(&loop, &r.limit);
  r.limit.data = &r;
  if (o->seconds > 0) uv_timer_start(&r.limit, on_limit, (uint64_t)(o->seconds * 1000), 0);
  dash_opts dopts;
  dash_opts_default(&dopts);
  if (o->hz > 0) dopts.hz = o->hz;
  dopts.theme = o->theme;
  dopts.on_quit = on_quit;
  dopts.ud = &r;
  int status = 0;
  if (dash_open(&loop, &dopts, dash_sim_source(s), &r.d) < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    r.done = true;
    uv_close((uv_handle_t *)&r.limit, on_closed);
    for (int i = 0; i < 3; i++) uv_close((uv_handle_t *)&r.sig[i], on_closed);
    status = 1;
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  dash_sim_free(s);
  return status;
}
