/* coord.c - the coordinator's cluster lifecycle: run directory, listener,
 * launching, reservation, heartbeats, failure detection, shutdown.
 * Training on the cluster is in coord_fit.c; shared state in coord_int.h.
 *
 * Callbacks (network, timers, child exits) only record what happened;
 * the waiting functions decide what to do next between turns of the loop
 * (coord__pump). That keeps every decision in one place and makes the
 * callbacks safe to run at any time.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/coord/coord_int.h"
#include "launch/detach.h"
#include "base/err.h"
#include "base/log.h"
#include "train/progress.h"
#include "proto/wire_msgs.h"
#include "base/util.h"

/* ============================== small helpers ============================ */

const char *coord__node_name(const coord_node *n, char *buf, size_t len) {
  snprintf(buf, len, "%s:%d", wire_role_name(n->role), n->index);
  return buf;
}

int coord__find_node(const coord *c, int role, int index) {
  /* coord__make_nodes lays roles out in order, each by index: look there
   * first (a scan per REGISTER made the reservation of 10,000 nodes
   * quadratic, 9% of it), then anywhere. */
  if (role >= 0 && role < ROLE_COUNT && index >= 0) {
    int at = index;
    for (int r = 0; r < role; r++) at += coord__processes(c, r);
    if (at < c->nnodes && c->nodes[at].role == role && c->nodes[at].index == index) return at;
  }
  for (int i = 0; i < c->nnodes; i++)
    if (c->nodes[i].role == role && c->nodes[i].index == index) return i;
  return -1;
}

/* The message of a failure: logged, an "error" event, and kept when it is
 * the run's first. Counts nothing: the caller's failure was counted. */
static void vkeep_failure(coord *c, const char *fmt, va_list ap) {
  char msg[sizeof c->failure];
  vsnprintf(msg, sizeof msg, fmt, ap);
  log_error("%s", msg);
  rundir_event(&c->rd, "error %s", msg);
  if (!c->failure[0]) snprintf(c->failure, sizeof c->failure, "%s", msg);
}

void coord__keep_failure(coord *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vkeep_failure(c, fmt, ap);
  va_end(ap);
}

/* A failure no node's state shows (a node's report, out of memory, the
 * fit's): counted here; a node's own failure is counted by its change to
 * a failure state (coord__node_set_state). */

void coord__fail(coord *c, const char *fmt, ...) {
  va_list ap;
  c->failures++;
  va_start(ap, fmt);
  vkeep_failure(c, fmt, ap);
  va_end(ap);
}

void coord_note(coord *c, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  rundir_event(&c->rd, "%s", msg);
}


/* ============================== control connections ===================== */

static void send_spec_one(coord *c, int to);

typedef struct peer {
  coord *c;
  conn *cn;
  int node;     /* index into c->nodes once registered, else -1 */
  void *attach; /* an attach client's state once it sent ATTACH (coord_dash.c) */
  void *feeder; /* an external feeder's once it sent FEED_OPEN (coord_feed_ext.c) */
  void *predictor; /* a predict client's once it sent PREDICT_OPEN (coord_serve.c) */
  struct peer *prev, *next; /* in c->peers */
} peer;

_Static_assert((int)CONN_TRANSPORT_AUTO == WIRE_TRANSPORT_AUTO &&
                   (int)CONN_TRANSPORT_UNIX == WIRE_TRANSPORT_UNIX &&
                   (int)CONN_TRANSPORT_TCP == WIRE_TRANSPORT_TCP,
               "REGISTERED's transport numbers are conn.h's modes");

static void send_registered(coord *c, conn *cn, bool ok, const char *msg, bool sees_rundir) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_registered(&w, &(wire_msg_registered){.ok = ok,
                                                 .message = WIRE_STR(msg),
                                                 .sees_rundir = sees_rundir,
                                                 .transport = (uint8_t)c->transport});
  conn_send_wr(cn, &w, WIRE_REGISTERED, 0);
}

static void send_heartbeat(coord *c, conn *cn) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_heartbeat(&w, &(wire_msg_heartbeat){.seq = c->hb_seq,
                                               .interval_ms = coord__hb_interval_ms(c)});
  conn_send_wr(cn, &w, WIRE_HEARTBEAT, 0);
}

/* REGISTERED { ok = 0, why }, then the close once it is written: the node
 * should learn why. */
static void refuse(coord *c, conn *cn, const char *why) {
  send_registered(c, cn, false, why, false);
  conn_shutdown(cn, "registration refused");
}

static void on_register(coord *c, conn *cn, peer *p, const uint8_t *pl, uint32_t len) {
  wire_msg_register m;
  char host[64];
  node_info got;
  if (wire_get_register(pl, len, &m) < 0 || wire_str_copy(m.host, host, sizeof host) < 0 ||
      nodeinfo_from_msg(&m, &got) < 0) {
    log_warn("%s: %s", conn_peer(cn), err_msg());
    conn_close(cn, "malformed REGISTER");
    return;
  }
  int role = m.role, index = (int)m.index, port = m.port;
  pid_t pid = (pid_t)m.pid;
  char name[32];
  snprintf(name, sizeof name, "%s:%d", wire_role_name(role), index);
  int i = coord__find_node(c, role, index);
  char msg[160] = "";
  if (p->node >= 0)
    snprintf(msg, sizeof msg, "this connection already registered");
  else if (role != conn_role(cn) || (uint32_t)index != conn_index(cn))
    snprintf(msg, sizeof msg, "%s authenticated as %s:%u", name, wire_role_name(conn_role(cn)),
             (unsigned)conn_index(cn));
  else if (i < 0)
    snprintf(msg, sizeof msg, "%s is not part of this cluster", name);
  else if (c->ctl[i])
    snprintf(msg, sizeof msg, "duplicate %s: already registered by pid %d", name,
             (int)c->nodes[i].pid);
  /* An external node lost is waited for at once (no back-off: there is
   * no process to start): its peer may register again straight away. */
  if (i >= 0 && coord__external(c) && c->nodes[i].state == NODE_RESTARTING)
    coord__check_restarts(c, progress_now());
  /* Besides the first start, only the process the coordinator started
   * again after a loss may register: the states the table lets become
   * READY. */
  bool again = i >= 0 && (c->nodes[i].state == NODE_RELAUNCHED ||
                          (c->nodes[i].state == NODE_STARTING && c->spec_sent)); /* c:scale's */
  if (!msg[0] && !coord__state_legal(c->nodes[i].state, NODE_READY))
    snprintf(msg, sizeof msg, "%s is %s", name, coord_state_name(c->nodes[i].state));
  if (msg[0]) {
    log_warn("refused REGISTER from %s (pid %d): %s", conn_peer(cn), (int)pid, msg);
    rundir_event(&c->rd, "refused %s (pid %d): %s", name, (int)pid, msg);
    refuse(c, cn, msg);
    return;
  }
  coord_node *n = &c->nodes[i];
  p->node = i;
  c->ctl[i] = cn;
  conn_set_accept(cn, coord__accept_node(role));
  n->pid = pid;
  n->links[0] = '\0'; /* a new process: it dialled nothing yet */
  snprintf(n->host, sizeof n->host, "%s", host);
  n->port = port;
  bool saw = n->sees_rundir;
  coord__route_register(c, i, m.rundir_token);
  coord__summaries_register(c, i);
  coord__node_set_state(c, i, NODE_READY, " pid %d host %s%s%.0d", (int)pid, host,
                        port ? " port " : "", port);
  coord__node_info(c, i, &got);
  n->last_seen = progress_now();
  n->closed_at = 0;
  if (!n->joined) c->registered++; /* a node lost before it registered comes here once */
  n->joined = true;
  send_registered(c, cn, true, "", n->sees_rundir); /* a chief: who writes its summaries */
  send_heartbeat(c, cn); /* the interval now: a big cluster's nodes start slow */
  coord__node_key_forget(c, i);
  log_info("%s registered from %s (pid %d)", name, conn_peer(cn), (int)pid);
  if (again && role == ROLE_PS && saw != n->sees_rundir && c->fit)
    coord__route_say(c, c->ngroups); /* back on a host that sees it differently */
  if (again && c->spec_sent) {
    send_spec_one(c, i);
    int k = coord__ps_group(c, i);
    if (k >= 0 && c->ps_repl[k] >= 0) c->ps_pair[k] = true; /* paired by the tick */
    if (!coord__repl_is_replica(c, i)) coord__fit_node_back(c, i);
  }
}

static void on_heartbeat(coord_node *n, const uint8_t *pl, uint32_t len) {
  wire_msg_heartbeat m;
  if (wire_get_heartbeat(pl, len, &m) == 0)
    n->rss = m.rss, n->cpu_ms = m.cpu_ms, n->cpu_at = progress_now();
}

static void ctl_frame(conn *cn, const wire_header *h, const uint8_t *pl) {
  peer *p = conn_ud(cn);
  coord *c = p->c;
  if (p->predictor || h->type == WIRE_PREDICT_OPEN) {
    coord__predictor_frame(c, cn, &p->predictor, p->node >= 0 || p->attach || p->feeder, h, pl);
    if (p->predictor) conn_set_accept(cn, coord__accept_predictor());
    return;
  }
  if (p->feeder || h->type == WIRE_FEED_OPEN) {
    coord__feeder_frame(c, cn, &p->feeder, p->node >= 0 || p->attach, h, pl);
    if (p->feeder) conn_set_accept(cn, coord__accept_feeder());
    return;
  }
  if (p->attach || h->type == WIRE_ATTACH) {
    coord__attach_frame(c, cn, &p->attach, p->node >= 0, h, pl);
    return;
  }
  if (h->type == WIRE_REGISTER) {
    on_register(c, cn, p, pl, h->len);
    return;
  }
  if (p->node < 0) {
    log_warn("%s sent %s before REGISTER", conn_peer(cn), wire_type_name(h->type));
    conn_close(cn, "frame before REGISTER");
    return;
  }
  /* A node declared lost is no longer heard: its work went elsewhere. */
  if (c->ctl[p->node] != cn) return;
  coord_node *n = &c->nodes[p->node];
  n->last_seen = progress_now();
  switch (h->type) {
  case WIRE_HEARTBEAT:
    on_heartbeat(n, pl, h->len);
    coord__dash_heartbeat(c, p->node);
    break;
  case WIRE_PS_ROLE_OK:
    if (coord__repl_frame(c, p->node, h, pl) < 0) conn_close(cn, "malformed PS_ROLE_OK");
    break;
  case WIRE_LOG:
    coord__node_log(n, pl, h->len);
    break;
  case WIRE_LINKS:
    if (coord__node_links(n, pl, h->len) < 0) conn_close(cn, "malformed LINKS");
    break;
  case WIRE_SPARSE_STATS:
    if (coord__node_sparse_stats(n, pl, h->len) < 0) conn_close(cn, "malformed SPARSE_STATS");
    break;
  case WIRE_ERROR: {
    char msg[512], name[32];
    wire_rd_error(pl, h->len, msg, sizeof msg);
    coord__node_name(n, name, sizeof name);
    coord__fail(c, "%s reported: %s", name, msg);
    break;
  }
  case WIRE_FEED_LISTEN_OK:
  case WIRE_FEED_ACK:
  case WIRE_FEED_DIRECT_END:
    if (coord__feeders_worker_frame(c, p->node, h, pl) < 0) {
      log_warn("%s: %s", conn_peer(cn), err_msg());
      conn_close(cn, "bad direct feed frame");
    }
    break;
  default: {
    bool result = h->type == WIRE_CALL_RESULT || h->type == WIRE_RESULT ||
                  h->type == WIRE_PREDICT_RESULT; /* the queue's */
    if (h->type == WIRE_RESULT) coord__summaries_result(c, p->node, pl, h->len);
    if ((result ? coord__sched_frame(c, p->node, h, pl) : coord__fit_frame(c, p->node, h, pl)) < 0) {
      log_warn("%s: %s", conn_peer(cn), err_msg());
      conn_close(cn, "unexpected frame");
    }
  }
  }
}

static void ctl_ready(conn *cn) {
  peer *p = malloc(sizeof *p);
  coord *c = conn_ud(cn);
  if (!p) {
    conn_set_ud(cn, NULL); /* ctl_close: nothing of ours */
    conn_close(cn, "out of memory");
    return;
  }
  *p = (peer){.c = c, .cn = cn, .node = -1, .next = c->peers};
  conn_set_accept(cn, coord__accept_fresh(conn_cap(cn)));
  if (p->next) p->next->prev = p;
  c->peers = p;
  c->open_conns++; /* ctl_close follows */
  conn_set_ud(cn, p);
}

static void ctl_close(conn *cn, int err, const char *why) {
  if (!conn_was_ready(cn)) {
    if (err) log_warn("connection from %s dropped: %s", conn_peer(cn), why);
    return; /* never authenticated: ud is the coord, nothing of ours */
  }
  peer *p = conn_ud(cn);
  if (!p) return;
  coord *c = p->c;
  if (p->attach) coord__attach_gone(c, p->attach);
  if (p->feeder) coord__feeder_gone(c, p->feeder);
  if (p->predictor) coord__predictor_gone(c, p->predictor);
  if (p->node >= 0 && c->ctl[p->node] == cn) {
    c->ctl[p->node] = NULL;
    coord_node *n = &c->nodes[p->node];
    /* A node of the external launcher has no process of ours: after
     * SHUTDOWN its connection closing is its clean exit. */
    if (c->shutting_down && !n->exited && coord__external(c) && coord__launcher(c, p->node))
      coord__on_exit(coord__launcher(c, p->node), n, 0, 0);
    /* A process that dies closes its socket and exits at about the same
     * time; the exit status says more, so wait a moment for it (on_tick). */
    if (!c->shutting_down && n->state != NODE_DONE) {
      n->closed_at = progress_now();
      if (err) log_warn("%s: connection closed: %s", conn_peer(cn), why);
    }
  }
  if (p->prev)
    p->prev->next = p->next;
  else
    c->peers = p->next;
  if (p->next) p->next->prev = p->prev;
  free(p);
  coord__conn_gone(c); /* may free c */
}

static const conn_cbs ctl_cbs = {ctl_ready, ctl_frame, ctl_close};

void coord__send(coord *c, int node, wire_wr *w, uint8_t type, uint32_t req) {
  if (c->ctl[node])
    conn_send_wr(c->ctl[node], w, type, req);
  else
    wire_wr_free(w);
}

/* ============================== the tick ================================= */

/* The interval heartbeats go at, both ways: the cluster's heartbeat_ms up
 * to HB_NODES_FULL nodes, then growing with the count (1 ms a node at the
 * default 500 ms: 10 s at 10,000 nodes), so the frames per second the
 * coordinator reads and writes stay bounded: 1,500 a second at 10,000
 * nodes, where a fixed 500 ms made 40,000 (28% of a core on loopback).
 * A node that dies closes its connection and is found by that within
 * CLOSE_GRACE whatever the interval; heartbeats find the hung ones. */
#define HB_NODES_FULL 500
uint32_t coord__hb_interval_ms(const coord *c) {
  uint64_t base = c->opts.heartbeat_ms;
  uint64_t grown = c->nnodes > HB_NODES_FULL ? base * (uint64_t)c->nnodes / HB_NODES_FULL : base;
  return grown > 3600000 ? 3600000 : (uint32_t)grown;
}

/* The coordinator's own heartbeats only tell nodes it lives, and a node
 * waits eight intervals (and at least its timeout, a minute when launched)
 * before it gives up: in a grown cluster they go every second interval,
 * a quarter of the frames less. */
static double coord_send_every(const coord *c) {
  double iv = coord__hb_interval_ms(c) / 1000.0;
  return c->nnodes > HB_NODES_FULL ? 2 * iv : iv;
}

/* Silence past this is a lost node: the cluster's heartbeat_timeout, and at
 * least four intervals. */
static double silence_limit(const coord *c) {
  double timeout = c->opts.heartbeat_timeout_ms / 1000.0;
  double four = 4.0 * coord__hb_interval_ms(c) / 1000.0;
  return timeout > four ? timeout : four;
}

/* events.log says the interval when it is not the cluster's own setting,
 * and each time it changes. */
static void note_interval(coord *c) {
  uint32_t iv = coord__hb_interval_ms(c);
  if (iv != c->hb_said && (c->hb_said || iv != c->opts.heartbeat_ms))
    rundir_event(&c->rd, "heartbeats every %.1f s for %d nodes (silence limit %.0f s)",
                 iv / 1000.0, c->nnodes, silence_limit(c));
  c->hb_said = iv;
}

static void send_heartbeats(coord *c) {
  for (int i = 0; i < c->nnodes; i++)
    if (c->ctl[i]) send_heartbeat(c, c->ctl[i]);
  c->hb_seq++;
}

#define CLOSE_GRACE 1.0 /* seconds between a closed connection and "lost" */

static void check_silence(coord *c, double now) {
  double limit = silence_limit(c);
  for (int i = 0; i < c->nnodes; i++) {
    coord_node *n = &c->nodes[i];
    if (n->closed_at > 0 && !n->exited && now - n->closed_at > CLOSE_GRACE)
      coord__node_lost(c, i, "its connection closed");
    if (!c->ctl[i] || n->state == NODE_LOST || now - n->last_seen <= limit) continue;
    char why[96];
    snprintf(why, sizeof why, "silent for %.1f s (heartbeat timeout %.1f s)",
             now - n->last_seen, limit);
    coord__node_lost(c, i, why);
  }
}


/* How often every node's silence and restart are looked at: each tick up
 * to HB_NODES_FULL nodes, then less often as the count grows (a walk over
 * 10,000 node records ten times a second was a third of the coordinator's
 * idle CPU). A closed connection is still found within CLOSE_GRACE plus
 * one sweep. */
static double sweep_period(const coord *c) {
  double tick = TICK_MS / 1000.0;
  return c->nnodes > HB_NODES_FULL ? tick * c->nnodes / HB_NODES_FULL : tick;
}

/* Runs every TICK_MS while the cluster lives: heartbeats out, silence in.
 * It also keeps uv_run(UV_RUN_ONCE) returning often enough for the pump to
 * notice Ctrl-C. */
static void on_tick(uv_timer_t *t) {
  coord *c = t->data;
  double now = progress_now();
  /* If the loop was not pumped for a while (Lua busy elsewhere), nobody
   * could read heartbeats: restart the silence clocks rather than blame
   * the nodes for our own absence. */
  if (now - c->last_tick > 2.0 * (TICK_MS / 1000.0) + 0.5)
    for (int i = 0; i < c->nnodes; i++) c->nodes[i].last_seen = now;
  c->last_tick = now;
  coord__nodes_file(c, false);
  tboard_run_poll(&c->rd, &c->tb); /* one that died is said, once */
  coord__summaries_tick(c);
  note_interval(c);
  if (now - c->last_heartbeat >= coord_send_every(c)) {
    send_heartbeats(c);
    c->last_heartbeat = now;
  }
  if (!c->shutting_down) {
    if (now - c->last_sweep >= sweep_period(c)) {
      check_silence(c, now);
      coord__check_restarts(c, now);
      c->last_sweep = now;
    }
    coord__repl_tick(c);
  }
  coord__dash_tick(c, now);
  coord__run_stop_tick(c, now);
}

/* ============================== pumping ================================== */

int coord__pump(coord *c, bool (*done)(coord *c, void *arg), void *arg, double timeout,
               bool fail_on_loss) {
  double deadline = timeout > 0 ? progress_now() + timeout : 0;
  while (!done(c, arg)) {
    if (err_interrupted()) return err_set(DRV_EINTERRUPTED, "interrupted");
    if (fail_on_loss && c->failures) return err_set(DRV_ENODE, "%s", c->failure);
    if (deadline && progress_now() > deadline) return DRV_ETIMEDOUT;
    coord_run_commands(c); /* attach clients' Lua lines: between turns, never in a callback */
    uv_run(c->loop, UV_RUN_ONCE);
  }
  return 0;
}

static bool all_registered(coord *c, void *arg) {
  (void)arg;
  return c->registered == c->nnodes;
}

static bool replicas_in_sync(coord *c, void *arg) {
  (void)arg;
  for (int k = 0; k < c->ngroups; k++)
    if (c->ps_repl[k] >= 0 && c->nodes[c->ps_repl[k]].state != NODE_REPLICA) return false;
  return true;
}

static int reservation_error(coord *c) {
  char msg[8192];
  size_t len = (size_t)snprintf(msg, sizeof msg,
                                "reservation timed out after %g s: %d of %d nodes registered; missing",
                                c->opts.reservation_timeout, c->registered, c->nnodes);
  for (int i = 0; i < c->nnodes && len < sizeof msg; i++) {
    if (c->ctl[i]) continue;
    char name[32];
    len += (size_t)snprintf(msg + len, sizeof msg - len, " %s",
                            coord__node_name(&c->nodes[i], name, sizeof name));
  }
  for (int i = 0; i < c->nnodes && len < sizeof msg; i++) {
    if (c->ctl[i]) continue;
    char name[32], tail[1200];
    rundir_tail(c->nodes[i].log, 5, tail, sizeof tail);
    len += (size_t)snprintf(msg + len, sizeof msg - len, "\n--- %s (%s)%s%s",
                            coord__node_name(&c->nodes[i], name, sizeof name), c->nodes[i].log,
                            tail[0] ? ":\n" : ": (empty log)", tail);
  }
  rundir_event(&c->rd, "reservation timed out");
  return err_set(DRV_ETIMEDOUT, "%s", msg);
}

/* SPEC to node `to`: the ps nodes' role, index, host and port, what a
 * worker dials (coord__write_spec). Every node was once sent every node:
 * 10,000 nodes made that 10,000 frames of 300 KB queued at once, 2 GB.
 * `spec` is the payload built once for all (its build walks every node:
 * once per node made the reservation of 10,000 quadratic, 14% of it). */
static void send_spec(coord *c, int to, const wire_wr *spec) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_raw(&w, spec->buf + WIRE_HEADER_SIZE, spec->len - WIRE_HEADER_SIZE);
  coord__send(c, to, &w, WIRE_SPEC, 0);
}

/* The SPEC payload into spec; false (logged, nothing to free) on failure. */
static bool build_spec(coord *c, wire_wr *spec) {
  wire_wr_init(spec);
  if (coord__write_spec(c, spec) == 0 && !spec->err) return true;
  log_error("cannot build the SPEC: %s", err_msg());
  wire_wr_free(spec);
  return false;
}

/* One node's, a node registered again. */
static void send_spec_one(coord *c, int to) {
  wire_wr spec;
  if (!build_spec(c, &spec)) return;
  send_spec(c, to, &spec);
  wire_wr_free(&spec);
}

/* Every node's SPEC (only those connected when `connected`). */
static void spec_to_all(coord *c, bool connected) {
  wire_wr spec;
  if (!build_spec(c, &spec)) return;
  for (int i = 0; i < c->nnodes; i++)
    if (!connected || c->ctl[i]) send_spec(c, i, &spec);
  wire_wr_free(&spec);
}

void coord__spec_all(coord *c) { spec_to_all(c, true); }

static void send_spec_all(coord *c) {
  spec_to_all(c, false);
  c->spec_sent = true;
  rundir_event(&c->rd, "cluster ready: %d nodes", c->nnodes);
}

/* ============================== start ==================================== */

static int start_tick(coord *c) {
  c->tick = malloc(sizeof *c->tick);
  if (!c->tick) return err_set(DRV_ENOMEM, "out of memory");
  uv_timer_init(c->loop, c->tick);
  c->tick->data = c;
  c->last_tick = c->last_heartbeat = progress_now();
  uv_timer_start(c->tick, on_tick, TICK_MS, TICK_MS);
  return 0;
}

static int start_run(coord *c) {
  int rc;
  char path[1200];
  c->resume = c->opts.resume_dir != NULL;
  if ((rc = auth_init()) < 0 ||
      (rc = c->resume ? rundir_open(c->opts.resume_dir, &c->rd)
                      : rundir_create(c->opts.runs_base, c->opts.name, &c->rd)) < 0 ||
      (rc = coord__dash_start(c)) < 0)
    return rc;
  c->opts.resume_dir = NULL; /* borrowed for the call */
  if (c->resume) rundir_event(&c->rd, "cluster run resumed: pid %ld", (long)getpid());
  /* "e": close-on-exec, or every node would inherit the descriptor. */
  c->log = util_fopen_append(rundir_file(&c->rd, RUNDIR_COORD_LOG, path, sizeof path), 0644);
  if (!c->log) return err_set(DRV_EIO, "cannot open '%s': %s", path, strerror(errno));
  log_setup(c->log, "coordinator", LOG_INFO);
  coord__raise_fd_limit(c);
  util_fd_reserve(); /* for recovery under a flood of connections (util.h) */
  if ((rc = coord__keys_create(c)) < 0 || (rc = coord__route_init(c)) < 0) return rc;
  conn_opts co = {.secret = &c->secret, .derive_node_keys = true, .control = &c->control,
                  .view = &c->view, .cbs = &ctl_cbs, .ud = c, .server_kind = 0};
  if ((rc = coord__listen(c, &co)) < 0 || (rc = start_tick(c)) < 0) return rc;
  /* Before the nodes: its URL is printed while they start. */
  if (c->opts.tensorboard && (rc = tboard_run_start(&c->rd, &c->opts.tboard, &c->tb)) < 0)
    return rc;
  if ((rc = coord__ship_init(c)) < 0) return rc;
  rc = coord__open_launchers(c);
  if (rc < 0) return rc;
  log_info("listening on %s; run directory %s", c->addr, c->rd.path);
  return 0;
}

int coord_start(uv_loop_t *loop, const coord_opts *o, coord **out) {
  *out = NULL;
  int rc = coord__check_opts(o);
  /* Refused before anything is made: no run directory for a run that
   * cannot have what it asked for. */
  if (rc == 0 && o->tensorboard) rc = tboard_check(&o->tboard);
  if (rc < 0) return rc;
  coord *c = calloc(1, sizeof *c);
  if (!c) return err_set(DRV_ENOMEM, "out of memory");
  c->loop = loop;
  c->opts = *o;
  char workers[160]; /* `--resume`: the worker count the run had */
  if ((rc = coord__ckpt_resume_workers(&c->opts, workers, sizeof workers)) < 0) {
    free(c);
    return rc;
  }
  const char *strict = getenv("DROVER_STRICT_STATES");
  c->strict_states = strict && strcmp(strict, "1") == 0;
  if ((rc = coord__make_nodes(c)) < 0 || (rc = start_run(c)) < 0)
    goto fail;
  if (workers[0]) rundir_event(&c->rd, "%s", workers);
  if ((rc = coord__launch_all(c)) < 0) goto fail;
  rc = coord__pump(c, all_registered, NULL, o->reservation_timeout, true);
  if (rc == DRV_ETIMEDOUT) rc = reservation_error(c);
  if (rc < 0) goto fail;
  if ((rc = coord__repl_place(c)) < 0) goto fail; /* before any pairing */
  coord__nodes_file(c, true);
  send_spec_all(c);
  coord__repl_tick(c); /* ps replicas: each takes its primary's (empty) state */
  rc = coord__pump(c, replicas_in_sync, NULL, o->reservation_timeout, true);
  if (rc == DRV_ETIMEDOUT) rc = err_set(rc, "the ps replicas were not in sync within %g s",
                                        o->reservation_timeout);
  if (rc < 0) goto fail;
  detach_notify(c->rd.path); /* `drover run --detach`: the parent waits for this */
  *out = c;
  return 0;
fail: {
  /* coord_free logs and kills; keep the message of the real failure. */
  char msg[8192];
  snprintf(msg, sizeof msg, "%s", err_msg());
  if (c->rd.events) rundir_event(&c->rd, "start failed: %s", msg);
  coord_free(c);
  return err_set(rc, "%s", msg);
}
}

/* ============================== shutdown ================================= */

static bool roles_exited(coord *c, void *arg) {
  bool ps = *(bool *)arg;
  for (int i = 0; i < c->nnodes; i++)
    if ((c->nodes[i].role == ROLE_PS) == ps && !c->nodes[i].exited) return false;
  return true;
}

/* SHUTDOWN to every node of one group (ps or not), then wait. */
static void stop_group(coord *c, bool ps, double grace, double deadline) {
  for (int i = 0; i < c->nnodes; i++) {
    if ((c->nodes[i].role == ROLE_PS) != ps || c->nodes[i].exited) continue;
    if (!c->ctl[i]) { /* restarted and not registered yet: it holds nothing */
      /* An external node has no process of ours that could exit: waiting
       * for one held the shutdown to its whole timeout. */
      if (coord__external(c)) {
        c->nodes[i].exited = true;
        coord__node_set_state(c, i, NODE_DONE, ": not registered again (shutdown)");
      } else {
        coord__signal(c, i, SIGTERM);
      }
      continue;
    }
    wire_wr w;
    wire_wr_init(&w);
    wire_put_shutdown(&w, &(wire_msg_shutdown){(uint32_t)(grace * 1000)});
    coord__send(c, i, &w, WIRE_SHUTDOWN, 0);
  }
  double left = deadline - progress_now();
  if (left > 0) coord__pump(c, roles_exited, &ps, left, false);
}

static bool none_running(coord *c, void *arg) {
  (void)arg;
  return coord__running(c) == 0;
}

static int failure_report(coord *c, char *buf, size_t n) {
  size_t len = 0;
  if (n) buf[0] = '\0';
  for (int i = 0; i < c->nnodes && len < n; i++) {
    coord_node *nd = &c->nodes[i];
    if (!(coord__state_flags(nd->state) & NS_FAILURE)) continue;
    char name[32];
    coord__node_name(nd, name, sizeof name);
    len += (size_t)snprintf(buf + len, n - len, "%s%s %s", len ? "; " : "", name,
                            coord_state_name(nd->state));
    if (nd->exited && len < n) {
      if (nd->term_signal)
        len += (size_t)snprintf(buf + len, n - len, " (signal %d)", nd->term_signal);
      else
        len += (size_t)snprintf(buf + len, n - len, " (status %lld)", (long long)nd->exit_status);
    }
  }
  if (c->failure[0] && len < n)
    snprintf(buf + len, n - len, "%sfirst failure: %s", len ? "\n" : "", c->failure);
  return c->failures;
}

int coord_shutdown(coord *c, double grace, double timeout, char *buf, size_t n) {
  if (c->shut_down) return failure_report(c, buf, n);
  c->shutting_down = true;
  rundir_event(&c->rd, "shutdown (grace %.1f s, timeout %.1f s)", grace, timeout);
  coord__dash_push(c); /* "stopping": attach clients learn the run is ending */
  double deadline = progress_now() + (timeout > 0 ? timeout : 0);
  for (int i = 0; i < c->nnodes; i++) /* lost, waiting out its back-off: not started again */
    if (c->nodes[i].state == NODE_RESTARTING)
      coord__node_set_state(c, i, NODE_DONE, ": not started again (shutdown)");
  stop_group(c, false, grace, deadline);
  stop_group(c, true, grace, deadline);
  if (coord__running(c) > 0) {
    for (int i = 0; i < c->nnodes; i++)
      if (!c->nodes[i].exited) {
        char name[32];
        log_warn("%s did not stop in time; killing it",
                 coord__node_name(&c->nodes[i], name, sizeof name));
        coord__signal(c, i, SIGKILL);
      }
    coord__pump(c, none_running, NULL, 5.0, false);
  }
  for (int i = 0; i < c->nnodes; i++)
    if (c->ctl[i]) conn_close(c->ctl[i], "shutdown");
  coord__fit_close(c);
  coord__summaries_close(c);
  tboard_run_stop(&c->rd, &c->tb);
  c->shut_down = true;
  rundir_event(&c->rd, "shutdown complete: %d node failure%s", c->failures,
               c->failures == 1 ? "" : "s");
  unlink(rundir_file(&c->rd, RUNDIR_COORDINATOR, (char[1200]){0}, 1200));
  return failure_report(c, buf, n);
}

static void free_handle(uv_handle_t *h) { free(h); }

/* What coord_free frees once no close callback can use c any more. */
static void finish_free(coord *c) {
  coord__fit_free(c);
  coord__sched_free(c);
  coord__dash_free(c);
  coord__serve_free(c);
  coord__summaries_close(c);
  log_setup(NULL, "drover", LOG_INFO);
  if (c->log) fclose(c->log);
  rundir_close(&c->rd);
  coord__repl_free(c);
  coord__ship_free(c);
  for (int i = 0; c->nodes && i < c->node_cap; i++) free(c->nodes[i].tstats);
  free(c->nodes);
  free(c->ctl);
  *c->freed = true;
  free(c);
}

void coord__conn_gone(coord *c) {
  if (--c->open_conns == 0 && c->freeing) finish_free(c);
}

/* Starts every close; the struct is freed by the last close callback that
 * uses it (the peers' and ps links'), which the loop runs next. The timer,
 * the check and the listener free only their own handles. */
void coord_free(coord *c) {
  if (!c) return;
  uv_loop_t *loop = c->loop;
  bool freed = false;
  c->shutting_down = true; /* what closes from here on is not a failure */
  coord__close_launchers(c); /* SIGKILLs what is left */
  if (c->rd.events) tboard_run_stop(&c->rd, &c->tb);
  for (int i = 0; i < c->nnodes; i++)
    if (c->ctl[i]) conn_close(c->ctl[i], "coordinator closing");
  coord__fit_close(c);
  coord__dash_close(c);
  for (peer *p = c->peers; p; p = p->next) conn_close(p->cn, "coordinator closing");
  if (c->server) conn_server_close(c->server);
  if (c->tick) uv_close((uv_handle_t *)c->tick, free_handle);
  coord__sched_close(c);
  c->freed = &freed;
  c->freeing = true;
  if (c->open_conns == 0) finish_free(c);
  while (!freed) uv_run(loop, UV_RUN_ONCE);
}

/* ============================== queries ================================== */

const char *coord_run_dir(const coord *c) { return c->rd.path; }
const char *coord_failure(const coord *c) { return c->failure; }
const char *coord_address(const coord *c) { return c->addr; }
const char *coord_tensorboard_url(const coord *c) { return c->tb ? tboard_url(c->tb) : ""; }

int coord_tensorboard(coord *c, const tboard_opts *o) {
  if (c->tb || c->shutting_down) return 0;
  return tboard_run_start(&c->rd, o, &c->tb);
}

const coord_node *coord_nodes(const coord *c, int *count) {
  *count = c->nnodes;
  return c->nodes;
}
