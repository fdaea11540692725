/* coord_dash.c - the coordinator's side of the dashboard: its metric store
 * (a runsnap_store: series and events as the run goes), the snapshot of the
 * run it refreshes on demand (header, nodes, queue), the attach clients
 * (ATTACH, SNAPSHOT at their rate, COMMAND), stopping a node and reading
 * its log.
 *
 * Attach clients arrive on the control listener like nodes and prove the
 * run's secret the same way (conn.c); coord.c hands their frames here once
 * the first one is ATTACH. Like the rest of the coordinator, callbacks
 * only record: SNAPSHOTs go out from the tick, and Lua lines wait in their
 * client's queue until coord_run_commands runs them between loop turns.
 * Every client is bounded: one frame per period at most, none while 1 MiB
 * is still queued to it (closed when that lasts 30 s), a few commands
 * waiting.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "proto/runsnap.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

#define ATTACH_MAX_CLIENTS 64
#define ATTACH_MAX_HZ 10.0          /* the tick's rate */
#define ATTACH_MAX_PENDING (1u << 20) /* bytes queued to a client: skip its snapshots */
#define ATTACH_MAX_COMMANDS 4       /* Lua lines waiting per client */
#define ATTACH_MAX_STALL 30.0       /* seconds a client may stay over ATTACH_MAX_PENDING */
#define THROUGHPUT_PERIOD 1.0       /* seconds between examples/s points */
#define ATTACH_LOG_LINES 40         /* a log tail's lines: the detail view's DASH_LOG_LINES */

typedef struct pending_cmd {
  uint32_t req;
  char *line; /* owned */
} pending_cmd;

typedef struct attach_peer {
  coord *c;
  conn *cn;
  uint64_t id;          /* for finding it again after a handler ran */
  bool control;
  double period, due;   /* seconds between snapshots; when the next is due */
  runsnap_cursor cursor;   /* what it has received */
  uint64_t bytes, frames, skipped;
  double since;
  double stalled;       /* since when its link has been too slow (0: it is not) */
  pending_cmd cmds[ATTACH_MAX_COMMANDS];
  int ncmds;
  struct attach_peer *link;
} attach_peer;

struct coord_dash_state {
  runsnap_store store;
  double t0;            /* the run's start (monotonic) */
  coord_cpu *cpu;       /* per node */
  attach_peer *clients;
  int nclients;
  uint64_t next_id;
  coord_command_fn handler;
  void *handler_ud;
  bool in_command;      /* a handler is running (no nesting) */
  char *local_cmd;      /* a line from the in-process dashboard, waiting */
  bool closing;         /* coord_free: no more events for detaches */
  double tp_at;         /* throughput: the last sample (0: none) */
  int64_t tp_examples;
  double tp_last;       /* examples/s of the last sample */
};

/* ============================== the store ================================= */

double coord__cpu_update(coord_cpu *s, pid_t pid, uint64_t cpu_ms, double at) {
  if (at <= 0) return s->pct = -1; /* no heartbeat yet */
  if (s->at <= 0 || pid != s->pid || cpu_ms < s->ms) {
    *s = (coord_cpu){pid, cpu_ms, at, -1};
    return s->pct;
  }
  if (at > s->at) {
    /* ms of CPU per second of wall time: 10 ms/s is 1 % of one core */
    s->pct = (double)(cpu_ms - s->ms) / ((at - s->at) * 10.0);
    s->ms = cpu_ms;
    s->at = at;
  }
  return s->pct;
}

static void on_event(void *ud, const char *text) {
  coord *c = ud;
  coord_dash_state *d = c->dash;
  if (d) runsnap_store_event(&d->store, progress_now() - d->t0, text);
}

int coord__dash_start(coord *c) {
  coord_dash_state *d = calloc(1, sizeof *d);
  if (!d || !(d->cpu = calloc((size_t)(c->node_cap ? c->node_cap : 1), sizeof *d->cpu))) {
    free(d);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  for (int i = 0; i < c->nnodes; i++) d->cpu[i].pct = -1;
  runsnap_store_init(&d->store);
  d->t0 = progress_now();
  c->dash = d;
  rundir_set_hook(&c->rd, on_event, c);
  return 0;
}

void coord__dash_point(coord *c, const char *tag, int64_t step, double value) {
  coord_dash_state *d = c->dash;
  if (!d || !isfinite(value)) return;
  runsnap_store_point(&d->store, tag, (runview_point){(double)step, progress_now() - d->t0, value});
}

/* Once a second while a fit runs: examples/s since the last sample. */
static void sample_throughput(coord *c, double now) {
  coord_dash_state *d = c->dash;
  coord_fit_state *f = c->fit;
  if (!f || !f->cfg) {
    d->tp_at = d->tp_last = 0;
    return;
  }
  if (d->tp_at <= 0 || f->examples < d->tp_examples) { /* a new fit */
    d->tp_at = now;
    d->tp_examples = f->examples;
    return;
  }
  if (now - d->tp_at < THROUGHPUT_PERIOD) return;
  d->tp_last = (double)(f->examples - d->tp_examples) / (now - d->tp_at);
  runsnap_store_point(&d->store, RUNSNAP_THROUGHPUT_TAG,
                   (runview_point){(double)f->done, now - d->t0, d->tp_last});
  d->tp_at = now;
  d->tp_examples = f->examples;
}

/* ============================== the snapshot ============================== */

/* Copies s into dst[n], truncated (model strings are fixed-size). */
static void put(char *dst, size_t n, const char *s) {
  size_t k = strlen(s);
  if (k >= n) k = n - 1;
  memcpy(dst, s, k);
  dst[k] = '\0';
}

static const char *run_state(const coord *c) {
  if (c->shut_down) return "shut down";
  if (c->shutting_down) return "stopping";
  if (c->failures || c->failure[0]) return "failed";
  if (!c->spec_sent) return "starting";
  if (c->fit && c->fit->cfg) return "training";
  const coord_sched *s = &c->sched;
  if (s->queued + s->running > 0)
    return "running";
  return "idle";
}

static void fill_header(coord *c, runview *m, double now) {
  coord_dash_state *d = c->dash;
  const char *base = strrchr(c->rd.path, '/');
  put(m->run, sizeof m->run, base ? base + 1 : c->rd.path);
  char where[sizeof m->launcher];
  put(m->launcher, sizeof m->launcher, coord__launch_where(c, where, sizeof where));
  put(m->tensorboard, sizeof m->tensorboard, coord_tensorboard_url(c));
  char tables[sizeof m->tables];
  coord_tables_summary(c, tables, sizeof tables);
  put(m->tables, sizeof m->tables, tables);
  put(m->state, sizeof m->state, run_state(c));
  m->uptime = now - d->t0;
  m->attach_clients = d->nclients;
  const coord_fit_state *f = c->fit;
  bool fitted = f && (f->cfg || f->p.total_steps > 0);
  put(m->mode, sizeof m->mode, !fitted ? "" : f->sync ? "sync" : "async");
  bool sync = fitted && f->p.global_steps > 0; /* global steps, as the progress line */
  m->step = fitted ? (sync ? f->p.global_step : f->done) : 0;
  m->total_steps = fitted ? (sync ? f->p.global_steps : f->p.total_steps) : 0;
  if (!fitted) {
    m->examples_per_sec = 0;
    m->eta = -1;
  } else if (f->cfg) { /* in progress: the latest rate */
    m->examples_per_sec = d->tp_last > 0 ? d->tp_last : f->p.examples_per_sec;
    m->eta = f->done > 0 ? f->p.eta : -1;
  } else { /* the last fit: its average */
    m->examples_per_sec = f->p.examples_per_sec;
    m->eta = 0;
  }
  m->feed_per_sec = f && f->feed.src ? f->feed.rate : -1; /* batches trained per second */
}

static int fill_nodes(coord *c, runview *m, double now) {
  coord_dash_state *d = c->dash;
  if (m->capnodes < c->nnodes) {
    runview_node *nn = realloc(m->nodes, (size_t)c->nnodes * sizeof *nn);
    if (!nn) return err_set(DRV_ENOMEM, "out of memory");
    m->nodes = nn;
    m->capnodes = c->nnodes;
  }
  m->nnodes = c->nnodes;
  for (int i = 0; i < c->nnodes; i++) {
    const coord_node *n = &c->nodes[i];
    runview_node *o = &m->nodes[i];
    memset(o, 0, sizeof *o);
    coord__node_name(n, o->name, sizeof o->name);
    o->role = n->role;
    o->index = n->index;
    /* the machine's name when known; its address goes in `got` */
    put(o->host, sizeof o->host, n->got.hostname[0] ? n->got.hostname : n->host);
    if (n->joined) {
      char what[160];
      snprintf(o->got, sizeof o->got, "%s  %s", n->host,
               nodeinfo_format(&n->got, what, sizeof what));
    }
    o->pid = (int)n->pid;
    put(o->where, sizeof o->where, n->where);
    coord_node_links(c, i, o->links, sizeof o->links);
    put(o->state, sizeof o->state, coord_state_name(coord_node_status(n)));
    o->restarts = n->restarts;
    o->steps = n->steps;
    o->examples_per_sec = n->examples_per_sec;
    o->cpu_pct = d->cpu[i].pct; /* sampled every tick */
    o->rss = n->rss;
    o->heartbeat_age = c->ctl[i] ? now - n->last_seen : -1;
    o->inflight = n->inflight;
    /* during a feed: the fed batches sent to it and not yet answered (its
     * input queue; at most FEED_WINDOW); otherwise unknown */
    bool trainer = n->role == ROLE_WORKER || n->role == ROLE_CHIEF;
    o->backlog = trainer ? coord_feed_backlog(c, i) : -1;
    put(o->log, sizeof o->log, n->log);
  }
  return 0;
}

static void refresh(coord *c) {
  runview *m = &c->dash->store.m;
  double now = progress_now();
  fill_header(c, m, now);
  fill_nodes(c, m, now);
  coord_queue q;
  coord_queue_stats(c, &q);
  m->queued = q.queued, m->capacity = q.capacity, m->running = q.running, m->done = q.done;
  m->failed = q.failed, m->retried = q.retried, m->cancelled = q.cancelled;
  m->version++;
}

const runview *coord_dash(coord *c) {
  refresh(c);
  return &c->dash->store.m;
}

/* ============================== attach clients ============================ */

static void send_snapshot(coord *c, attach_peer *a, double now) {
  if (conn_pending(a->cn) > ATTACH_MAX_PENDING) { /* a slow link: it gets the next one */
    a->skipped++;
    if (!a->stalled) a->stalled = now;
    if (now - a->stalled > ATTACH_MAX_STALL) conn_close(a->cn, "attach client too slow");
    return;
  }
  a->stalled = 0;
  wire_wr w;
  wire_wr_init(&w);
  if (runsnap_encode(&c->dash->store, c->rd.path, &a->cursor, &w) < 0) {
    log_warn("attach %s: %s", conn_peer(a->cn), err_msg());
    wire_wr_free(&w);
    return;
  }
  size_t bytes = w.len;
  if (conn_send_wr(a->cn, &w, WIRE_SNAPSHOT, 0) == 0) {
    a->bytes += bytes;
    a->frames++;
  }
}

/* A node's CPU share moves only when its heartbeat brings a new sample:
 * updated then, not by a walk over every node each tick. */
void coord__dash_heartbeat(coord *c, int i) {
  coord_dash_state *d = c->dash;
  if (!d || i < 0 || i >= c->nnodes) return;
  const coord_node *n = &c->nodes[i];
  coord__cpu_update(&d->cpu[i], n->pid, n->cpu_ms, n->cpu_at);
}

void coord__dash_tick(coord *c, double now) {
  coord_dash_state *d = c->dash;
  if (!d) return;
  sample_throughput(c, now);
  bool fresh = false;
  for (attach_peer *a = d->clients; a; a = a->link) {
    if (now < a->due) continue;
    if (!fresh) refresh(c), fresh = true;
    send_snapshot(c, a, now);
    a->due += a->period;
    if (a->due < now) a->due = now + a->period; /* the loop was not pumped for a while */
  }
}

static void reply(attach_peer *a, uint32_t req, int status, const char *text) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_command_reply(&w, &(wire_msg_command_reply){status, WIRE_STR(text)});
  conn_send_wr(a->cn, &w, WIRE_COMMAND_REPLY, req);
}

/* ERROR { code, why }, then the close once it is written: the client
 * should learn why. */
static void refuse(conn *cn, int code, const char *why) {
  log_warn("attach from %s refused: %s", conn_peer(cn), why);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_error(&w, &(wire_msg_error){code, WIRE_STR(why)});
  conn_send_wr(cn, &w, WIRE_ERROR, 0);
  conn_shutdown(cn, "attach refused");
}

static void on_attach(coord *c, conn *cn, void **slot, const uint8_t *pl, uint32_t len) {
  coord_dash_state *d = c->dash;
  wire_msg_attach m;
  if (wire_get_attach(pl, len, &m) < 0) { /* conn.c validated it: cannot happen */
    conn_close(cn, "malformed ATTACH");
    return;
  }
  bool control = m.control;
  double hz = m.hz;
  /* The key decides, not the client: a view key never controls. */
  if (control && conn_cap(cn) != AUTH_CAP_CONTROL) {
    log_warn("refused ATTACH --control from %s: it holds the view key", conn_peer(cn));
    refuse(cn, DRV_EPERM, "refused: --control needs the run's control key (control.key); "
                          "this client proved the view key");
    return;
  }
  if (d->nclients >= ATTACH_MAX_CLIENTS) {
    char why[80];
    snprintf(why, sizeof why, "too many attach clients (%d)", ATTACH_MAX_CLIENTS);
    refuse(cn, DRV_ERANGE, why);
    return;
  }
  attach_peer *a = calloc(1, sizeof *a);
  if (!a) {
    conn_close(cn, "out of memory");
    return;
  }
  a->c = c;
  a->cn = cn;
  a->id = ++d->next_id;
  a->control = control;
  a->period = 1.0 / (hz < ATTACH_MAX_HZ ? hz : ATTACH_MAX_HZ);
  a->since = progress_now();
  a->due = a->since + a->period;
  a->link = d->clients;
  d->clients = a;
  d->nclients++;
  *slot = a;
  conn_set_accept(cn, coord__accept_attach());
  log_info("attach from %s (%s, %.3g Hz)", conn_peer(cn), control ? "control" : "read-only",
           1.0 / a->period);
  rundir_event(&c->rd, "attach %s (%s)", conn_peer(cn), control ? "control" : "read-only");
  refresh(c); /* the first snapshot at once: `drover attach --print` waits for it */
  send_snapshot(c, a, a->since);
}

void coord__attach_gone(coord *c, void *attach) {
  coord_dash_state *d = c->dash;
  attach_peer *a = attach;
  for (attach_peer **p = &d->clients; *p; p = &(*p)->link)
    if (*p == a) {
      *p = a->link;
      d->nclients--;
      break;
    }
  double t = progress_now() - a->since;
  char what[160];
  int k = snprintf(what, sizeof what, "after %.1f s: %llu snapshots, %llu bytes", t,
                   (unsigned long long)a->frames, (unsigned long long)a->bytes);
  if (t >= 1 && k > 0 && (size_t)k < sizeof what)
    k += snprintf(what + k, sizeof what - (size_t)k, " (%.0f bytes/s)", (double)a->bytes / t);
  if (a->skipped && k > 0 && (size_t)k < sizeof what)
    snprintf(what + k, sizeof what - (size_t)k, ", %llu skipped (slow link)",
             (unsigned long long)a->skipped);
  log_info("detach %s %s", conn_peer(a->cn), what);
  if (!d->closing) rundir_event(&c->rd, "detach %s %s", conn_peer(a->cn), what);
  for (int i = 0; i < a->ncmds; i++) free(a->cmds[i].line);
  runsnap_cursor_free(&a->cursor);
  free(a);
}

/* ============================== commands ================================== */

void coord_set_command_handler(coord *c, coord_command_fn fn, void *ud) {
  c->dash->handler = fn;
  c->dash->handler_ud = ud;
}

static void on_command(coord *c, attach_peer *a, uint32_t req, const uint8_t *pl, uint32_t len) {
  wire_msg_command m;
  char text[WIRE_MAX_STR + 1], out[1024];
  if (wire_get_command(pl, len, &m) < 0 || wire_str_copy(m.text, text, sizeof text) < 0) {
    conn_close(a->cn, "malformed COMMAND");
    return;
  }
  unsigned kind = m.kind;
  if (kind == WIRE_COMMAND_LOG_TAIL) { /* reading, so read-only clients may */
    char tail[WIRE_MAX_STR + 1];
    reply(a, req, coord_node_log_tail(c, text, ATTACH_LOG_LINES, tail, sizeof tail), tail);
    return;
  }
  if (kind == WIRE_COMMAND_STOP_PLAN) { /* asking changes nothing */
    reply(a, req, coord_stop_plan(c, text, out, sizeof out), out);
    return;
  }
  if (!a->control) {
    reply(a, req, DRV_EPERM, "refused: this client attached read-only (attach with --control "
                             "to send commands)");
    return;
  }
  if (kind == WIRE_COMMAND_STOP_RUN) {
    int rc = coord__run_stop(c, strcmp(text, "now") == 0, out, sizeof out);
    log_info("attach %s: stop the run: %s", conn_peer(a->cn), out);
    reply(a, req, rc, out);
    return;
  }
  if (kind == WIRE_COMMAND_SCALE) {
    char who[96];
    snprintf(who, sizeof who, "drover scale from %s", conn_peer(a->cn));
    int rc = coord_scale_text(c, text, who, out, sizeof out);
    log_info("%s: %s: %s", who, text, out);
    reply(a, req, rc, out);
    return;
  }
  if (kind == WIRE_COMMAND_STOP_NODE) {
    char who[96];
    snprintf(who, sizeof who, "attach %s", conn_peer(a->cn));
    int rc = coord_stop_node(c, text, out, sizeof out);
    log_info("%s: stop %s: %s", who, text, out);
    reply(a, req, rc, out);
    return;
  }
  if (a->ncmds == ATTACH_MAX_COMMANDS) {
    reply(a, req, DRV_ERANGE, "refused: too many commands waiting to run");
    return;
  }
  char *line = strdup(text);
  if (!line) {
    reply(a, req, DRV_ENOMEM, "out of memory");
    return;
  }
  a->cmds[a->ncmds++] = (pending_cmd){req, line};
}

static attach_peer *find_client(coord_dash_state *d, uint64_t id) {
  for (attach_peer *a = d->clients; a; a = a->link)
    if (a->id == id) return a;
  return NULL;
}

int coord_queue_command(coord *c, const char *line, char *out, size_t n) {
  coord_dash_state *d = c->dash;
  if (!d || !d->handler) {
    snprintf(out, n, "this run takes no Lua commands");
    return DRV_EUNSUPPORTED;
  }
  if (d->local_cmd) {
    snprintf(out, n, "a command is already waiting to run");
    return DRV_ERANGE;
  }
  if (!(d->local_cmd = strdup(line))) {
    snprintf(out, n, "out of memory");
    return DRV_ENOMEM;
  }
  snprintf(out, n, "queued; its reply goes to the events");
  return 0;
}

/* The in-process dashboard's line: its reply becomes an event. */
static void run_local_command(coord *c) {
  coord_dash_state *d = c->dash;
  char *line = d->local_cmd, out[WIRE_MAX_STR];
  d->local_cmd = NULL;
  out[0] = '\0';
  d->in_command = true;
  int rc = d->handler(d->handler_ud, line, out, sizeof out);
  d->in_command = false;
  rundir_event(&c->rd, "command %s %s %s", line, rc < 0 ? "failed:" : "->", out);
  free(line);
}

int coord_run_commands(coord *c) {
  coord_dash_state *d = c->dash;
  int ran = 0;
  if (!d || d->in_command) return 0;
  if (d->local_cmd && d->handler && !c->shutting_down && !c->shut_down) {
    run_local_command(c);
    ran++;
  }
  for (;;) {
    attach_peer *a = d->clients;
    while (a && a->ncmds == 0) a = a->link;
    if (!a) break;
    pending_cmd cmd = a->cmds[0];
    memmove(a->cmds, a->cmds + 1, (size_t)--a->ncmds * sizeof *a->cmds);
    uint64_t id = a->id;
    char out[WIRE_MAX_STR];
    int rc;
    out[0] = '\0';
    if (c->shutting_down || c->shut_down) {
      rc = DRV_EINVAL;
      snprintf(out, sizeof out, "refused: the cluster is shutting down");
    } else if (!d->handler) {
      rc = DRV_EUNSUPPORTED;
      snprintf(out, sizeof out, "refused: this run takes no Lua commands");
    } else {
      d->in_command = true;
      rc = d->handler(d->handler_ud, cmd.line, out, sizeof out);
      d->in_command = false;
    }
    free(cmd.line);
    ran++;
    /* The handler may have pumped the loop: the client may be gone. */
    if ((a = find_client(d, id)) != NULL) reply(a, cmd.req, rc, out);
  }
  return ran;
}

/* ============================== frames ==================================== */

void coord__attach_frame(coord *c, conn *cn, void **attach, bool is_node, const wire_header *h,
                         const uint8_t *pl) {
  attach_peer *a = *attach;
  if (!a && h->type == WIRE_ATTACH && !is_node) {
    on_attach(c, cn, attach, pl, h->len);
    return;
  }
  if (a && h->type == WIRE_COMMAND) {
    on_command(c, a, h->req, pl, h->len);
    return;
  }
  log_warn("%s sent %s %s", conn_peer(cn), wire_type_name(h->type),
           is_node ? "on a node's connection" : a ? "after ATTACH" : "before ATTACH");
  conn_close(cn, "unexpected frame");
}

/* ============================== stopping a node =========================== */

/* "worker:1" into role and index. */
static bool parse_name(const char *name, int *role, int *index) {
  const char *colon = strchr(name, ':');
  char r[16];
  if (!colon || (size_t)(colon - name) >= sizeof r) return false;
  memcpy(r, name, (size_t)(colon - name));
  r[colon - name] = '\0';
  char *end;
  long i = strtol(colon + 1, &end, 10);
  if (end == colon + 1 || *end || i < 0 || i > 1 << 20) return false;
  *role = wire_role_from_name(r);
  *index = (int)i;
  return *role >= 0;
}

static bool running(const coord_node *n) {
  return !n->exited && n->pid > 0 && (coord__state_flags(n->state) & NS_PROCESS);
}

int coord_stop_node(coord *c, const char *name, char *out, size_t n) {
  int role, index, i = -1;
  if (parse_name(name, &role, &index)) i = coord__find_node(c, role, index);
  int rc = 0;
  if (i < 0)
    rc = err_set(DRV_EINVAL, "no node '%s' in this cluster", name);
  else if (c->shutting_down || c->shut_down || !coord__launcher(c, i))
    rc = err_set(DRV_EINVAL, "the cluster is shutting down");
  else if (!running(&c->nodes[i]))
    rc = err_set(DRV_EINVAL, "%s is not running (%s)", name,
                 coord_state_name(coord_node_status(&c->nodes[i])));
  if (rc < 0) {
    snprintf(out, n, "%s", err_msg());
    return rc;
  }
  coord_node *nd = &c->nodes[i];
  char who[32];
  coord__node_name(nd, who, sizeof who);
  char plan[256];
  coord__stop_plan(c, i, plan, sizeof plan);
  rundir_event(&c->rd, "node stop %s pid %d: requested from the dashboard%s%s", who, (int)nd->pid,
               plan[0] ? "; " : "", plan);
  coord__signal(c, i, SIGTERM);
  snprintf(out, n, "stopping %s (pid %d)%s%s", who, (int)nd->pid, plan[0] ? ": " : "", plan);
  return 0;
}

int coord_stop_plan(coord *c, const char *name, char *out, size_t n) {
  int role, index, i = -1;
  if (parse_name(name, &role, &index)) i = coord__find_node(c, role, index);
  if (i < 0) {
    snprintf(out, n, "no node '%s' in this cluster", name);
    return DRV_EINVAL;
  }
  if (c->nodes[i].role != ROLE_PS)
    snprintf(out, n, "it is restarted and its tasks run again");
  else
    coord__stop_plan(c, i, out, n);
  return 0;
}

int coord_node_log_tail(coord *c, const char *name, int lines, char *out, size_t n) {
  int role, index, i = -1;
  if (parse_name(name, &role, &index)) i = coord__find_node(c, role, index);
  if (i < 0) {
    snprintf(out, n, "(no node '%s' in this cluster)", name);
    return DRV_EINVAL;
  }
  rundir_log_tail(c->nodes[i].log, lines, out, n);
  return 0;
}

/* ============================== teardown ================================== */

void coord__dash_push(coord *c) {
  coord_dash_state *d = c->dash;
  if (!d || !d->clients) return;
  double now = progress_now();
  refresh(c);
  for (attach_peer *a = d->clients; a; a = a->link) send_snapshot(c, a, now);
}

void coord__dash_close(coord *c) {
  coord_dash_state *d = c->dash;
  if (!d) return;
  if (c->shut_down) coord__dash_push(c); /* "shut down": the run finished */
  d->closing = true;
  for (attach_peer *a = d->clients; a; a = a->link) conn_close(a->cn, "the run ended");
}

void coord__dash_free(coord *c) {
  coord_dash_state *d = c->dash;
  if (!d) return;
  rundir_set_hook(&c->rd, NULL, NULL);
  while (d->clients) coord__attach_gone(c, d->clients); /* their close callbacks never came */
  runsnap_store_free(&d->store);
  free(d->cpu);
  free(d->local_cmd);
  free(d);
  c->dash = NULL;
}
