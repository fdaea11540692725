/* node.c - the node agent (`drover node`): one libuv loop that connects to
 * the coordinator, registers, watches the coordinator's heartbeats, sends
 * its own, and hands the frames of its role to ps.c or worker.c.
 *
 * Life of a node:
 *   start     a ps first listens on its data port (REGISTER carries it)
 *   connect   to the coordinator; authenticate (conn.c)
 *   register  REGISTER -> REGISTERED (a refusal ends the node: status 1)
 *   run       SPEC (workers connect to every ps), SETUP, TASK, CALL, EVAL ...
 *             HEARTBEAT out every heartbeat_ms; the coordinator watched
 *   stop      SHUTDOWN: queued work is dropped, the running task finishes
 *             (within grace_ms), the last replies are flushed, status 0
 * The coordinator's connection closing, or staying silent past timeout_ms,
 * ends the node with status 3 at once: nodes never outlive it. Stopping
 * closes every handle and lets uv_run return; node_main then closes the
 * loop and returns the status.
 */
#include "cluster/node.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "proto/auth.h"
#include "net/conn.h"
#include "base/err.h"
#include "base/rundir.h"
#include "run/events.h"
#include "proto/keyring.h"
#include "base/log.h"
#include "proto/nodeinfo.h"
#include "net/nodeout.h"
#include "cluster/ps/ps.h"
#include "numeric/tensor.h"
#include "proto/wire_msgs.h"
#include "cluster/worker/worker.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_LOST = 3 };

#define DRAIN_POLL_MS 5
#define FAIL_FLUSH_MS 1000 /* how long an ERROR may take to leave */

typedef struct node {
  uv_loop_t loop;
  const node_opts *o;
  uint32_t heartbeat_ms, timeout_ms;
  /* The interval the coordinator asks for (HEARTBEAT interval_ms, at least
   * heartbeat_ms) and when ours last went: the timer still runs every
   * heartbeat_ms for this node's own duties, but a big cluster's nodes
   * speak less often, or 10,000 of them would keep the coordinator busy. */
  uint32_t hb_interval_ms;
  uint64_t hb_sent_at;
  char who[32];
  keyring keys; /* the node's key file (keyring.h): its keys here and at the ps */
  conn_opts copts;
  conn *coord;
  ps_server *ps;
  int data_port;
  worker *wk;
  events_writer *summaries; /* the chief's TensorBoard file (events.c) */
  uv_timer_t hb, watch, drain;
  uv_check_t flush;     /* sends the batched CALL_RESULTs after the reads */
  bool timers_live;
  uint8_t *batch;       /* whole CALL_RESULT frames waiting (owned) */
  size_t batch_len, batch_cap;
  uint64_t hb_seq;
  char links[192];      /* the LINKS last sent ("" none yet) */
  wire_item_table_stat stats[64]; /* the SPARSE_STATS last sent (nstats of them) */
  int nstats;
  bool registered;
  int redials;          /* connections to the coordinator closed before REGISTERED */
  bool shutting_down;   /* SHUTDOWN received (or failing): draining */
  bool failing;         /* a fatal protocol or setup error: frames ignored */
  uint64_t drain_deadline;
  bool stopping;        /* everything is being closed */
  int status;
  char *fwd;            /* --log-forward: records not sent yet (owned) */
  size_t fwd_len, fwd_cap;
  uint64_t fwd_dropped; /* bytes of records dropped (FWD_MAX reached) */
  nodeout *out;         /* --log-forward: stdout and stderr captured (nodeout.c) */
  uv_signal_t term;     /* --log-forward: SIGTERM forwards what is left first */
  bool term_live;
} node;

/* Dials of the coordinator after one closed before REGISTERED. */
#define NODE_REDIALS 5

/* --log-forward keeps at most this much of the log while the coordinator
 * is out of reach (before REGISTERED); beyond, records are dropped and
 * counted. */
#define FWD_MAX (256 * 1024)
/* Once registered, records are dropped (and counted) while this much is
 * still unsent to the coordinator: a closure printing in a loop must not
 * grow the node's memory without bound. */
#define FWD_PENDING_MAX (4 * 1024 * 1024)

static void node_stop(node *n, int status);

/* ============================== resources ================================ */

static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  if (!f) return 0;
  int got = fscanf(f, "%llu %llu", &size, &resident);
  fclose(f);
  long page = sysconf(_SC_PAGESIZE);
  return got == 2 && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

static uint64_t cpu_ms(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* ============================== sending ================================== */

/* CALL_RESULTs are batched: a burst of short closures (one read of many
 * CALLs) answers with one write instead of a syscall each. The batch
 * leaves after the loop's reads (a uv_check), and before any other frame,
 * so the order on the wire is the order sent. */
static void flush_batch(node *n) {
  if (!n->batch_len) return;
  uint8_t *b = n->batch;
  size_t len = n->batch_len;
  n->batch = NULL;
  n->batch_len = n->batch_cap = 0;
  if (n->coord) conn_send(n->coord, b, len); /* takes b */
  else free(b);
}

static void on_flush(uv_check_t *h) {
  node *n = h->data;
  flush_batch(n);
  uv_check_stop(h);
}

static int batch_frame(node *n, wire_wr *w, uint8_t type, uint32_t req) {
  int rc = wire_wr_finish(w, type, req);
  if (rc < 0) return rc;
  if (n->batch_len + w->len > n->batch_cap) {
    size_t cap = n->batch_cap ? 2 * n->batch_cap : 4096;
    while (cap < n->batch_len + w->len) cap *= 2;
    uint8_t *nb = realloc(n->batch, cap);
    if (!nb) {
      wire_wr_free(w);
      return err_set(DRV_ENOMEM, "out of memory");
    }
    n->batch = nb;
    n->batch_cap = cap;
  }
  memcpy(n->batch + n->batch_len, w->buf, w->len);
  n->batch_len += w->len;
  wire_wr_free(w);
  if (!n->stopping) uv_check_start(&n->flush, on_flush);
  return 0;
}

static int send_coord(void *ud, wire_wr *w, uint8_t type, uint32_t req) {
  node *n = ud;
  if (!n->coord) {
    wire_wr_free(w);
    return err_set(DRV_EIO, "no coordinator connection");
  }
  if (type == WIRE_CALL_RESULT) return batch_frame(n, w, type, req);
  flush_batch(n);
  if (type == WIRE_RESULT) events_run_result(n->summaries, w); /* NULL unless chief */
  return conn_send_wr(n->coord, w, type, req);
}

static void send_error(node *n, int code, const char *msg) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_error(&w, &(wire_msg_error){.code = code, .message = WIRE_STR(msg)});
  send_coord(n, &w, WIRE_ERROR, 0);
}

/* ============================== log forwarding =========================== */

static void fwd_send(node *n, const char *s, size_t len) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_log(&w, &(wire_msg_log){.text = {s, (uint32_t)len}});
  send_coord(n, &w, WIRE_LOG, 0);
}

/* Sends what is kept, in LOG frames of whole records where they fit. */
static void fwd_flush(node *n) {
  if (!n->registered || !n->coord || n->stopping) return;
  if (n->fwd_dropped) {
    char line[160];
    int k = snprintf(line, sizeof line, "drover: %llu bytes of this node's log were dropped "
                     "before the coordinator could take them\n",
                     (unsigned long long)n->fwd_dropped);
    fwd_send(n, line, (size_t)k);
    n->fwd_dropped = 0;
  }
  size_t off = 0;
  while (off < n->fwd_len) {
    size_t k = n->fwd_len - off;
    if (k > WIRE_MAX_STR) {
      const char *nl = memrchr(n->fwd + off, '\n', WIRE_MAX_STR);
      k = nl ? (size_t)(nl - (n->fwd + off)) + 1 : WIRE_MAX_STR;
    }
    fwd_send(n, n->fwd + off, k);
    off += k;
  }
  n->fwd_len = 0;
}

/* log.c's sink: keep the record, send it when registered. */
static void fwd_record(void *ud, const char *rec, size_t len) {
  node *n = ud;
  bool backlog = n->registered && n->coord && conn_pending(n->coord) > FWD_PENDING_MAX;
  if (backlog || len > FWD_MAX - n->fwd_len) {
    n->fwd_dropped += len;
    return;
  }
  if (n->fwd_len + len > n->fwd_cap) {
    size_t cap = n->fwd_cap ? n->fwd_cap : 4096;
    while (cap < n->fwd_len + len) cap *= 2;
    char *b = realloc(n->fwd, cap);
    if (!b) {
      n->fwd_dropped += len;
      return;
    }
    n->fwd = b;
    n->fwd_cap = cap;
  }
  memcpy(n->fwd + n->fwd_len, rec, len);
  n->fwd_len += len;
  fwd_flush(n);
}

/* The host other nodes dial for our data port: bind_host, unless that is
 * a wildcard (remote launchers bind 0.0.0.0 so that any interface takes
 * workers): then the local address of our connection to the coordinator,
 * the interface that routes towards the cluster. (One node per process:
 * the static buffer is ours.) */
static const char *advertised_host(node *n) {
  static char buf[64];
  const char *b = n->o->bind_host;
  if (strcmp(b, "0.0.0.0") != 0 && strcmp(b, "::") != 0) return b;
  if (n->coord && conn_local_host(n->coord, buf, sizeof buf) == 0) return buf;
  log_warn("no local address for the coordinator connection: advertising %s", b);
  return b;
}

/* What <run_dir>/ckpt-token holds ("" when it cannot be read): the
 * coordinator compares it with what it wrote there, to learn whether this
 * host sees the run directory (coord_ckpt_route.c). */
static void read_rundir_token(const node_opts *o, char *out, size_t n) {
  char path[4200];
  out[0] = '\0';
  if (!o->run_dir || snprintf(path, sizeof path, "%s/" RUNDIR_CKPT_TOKEN, o->run_dir) >=
                         (int)sizeof path)
    return;
  FILE *f = fopen(path, "re");
  if (!f) return;
  size_t k = fread(out, 1, n - 1, f);
  fclose(f);
  out[k] = '\0';
  out[strcspn(out, "\n")] = '\0';
}

static void send_register(node *n) {
  const node_opts *o = n->o;
  char token[80];
  read_rundir_token(o, token, sizeof token);
  node_info ni;
  nodeinfo_probe(&ni);
  wire_msg_register m = {.role = (uint8_t)o->role,
                         .index = (uint32_t)o->index,
                         .pid = (uint32_t)getpid(),
                         .host = WIRE_STR(advertised_host(n)),
                         .port = (uint16_t)n->data_port};
  nodeinfo_to_msg(&ni, &m);
  m.rundir_token = WIRE_STR(token);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_register(&w, &m);
  send_coord(n, &w, WIRE_REGISTER, 0);
}

/* The transport of each connection this node dialled besides the
 * coordinator's (a worker's ps links, a primary's to its replica), in
 * LINKS when it changed: looked at with each heartbeat, sent only on a
 * change, so that 10,000 nodes say nothing while their links stay. */
static void put_stat(wire_wr *w, void *ud, uint32_t i) {
  wire_put_item_table_stat(w, &((const wire_item_table_stat *)ud)[i]);
}

static void send_links(node *n) {
  char now[sizeof n->links];
  if (n->wk) worker_links(n->wk, now, sizeof now);
  else ps_links(n->ps, now, sizeof now);
  if (strcmp(now, n->links) == 0) return;
  memcpy(n->links, now, sizeof now);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_links(&w, &(wire_msg_links){.links = WIRE_STR(now)});
  send_coord(n, &w, WIRE_LINKS, 0);
}

/* Sparse tables' figures (rows held on a ps; a worker's last step's rows
 * and bytes) in SPARSE_STATS when they changed, like LINKS. */
#define NODE_MAX_TABLE_STATS 64
static void send_sparse_stats(node *n) {
  wire_item_table_stat now[NODE_MAX_TABLE_STATS];
  int k = n->wk ? worker_sparse_stats(n->wk, now, NODE_MAX_TABLE_STATS)
                : ps_sparse_stats(n->ps, now, NODE_MAX_TABLE_STATS);
  bool same = k == n->nstats;
  for (int i = 0; same && i < k; i++) /* field by field: the structs have padding */
    same = now[i].table == n->stats[i].table && now[i].held == n->stats[i].held &&
           now[i].touched == n->stats[i].touched && now[i].bytes == n->stats[i].bytes;
  if (same) return;
  memcpy(n->stats, now, (size_t)k * sizeof *now);
  n->nstats = k;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sparse_stats(&w, &(wire_msg_sparse_stats){{(uint32_t)k, .put = put_stat, .ud = n->stats}});
  send_coord(n, &w, WIRE_SPARSE_STATS, 0);
}

/* ============================== timers =================================== */

static void on_heartbeat(uv_timer_t *t) {
  node *n = t->data;
  uint64_t now = uv_now(&n->loop);
  if (n->wk) worker_tick(n->wk); /* link retries keep their own pace */
  if (n->hb_sent_at && now - n->hb_sent_at + n->heartbeat_ms / 2 < n->hb_interval_ms) return;
  n->hb_sent_at = now;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_heartbeat(&w, &(wire_msg_heartbeat){n->hb_seq++, rss_bytes(), cpu_ms(), 0});
  send_coord(n, &w, WIRE_HEARTBEAT, 0);
  send_links(n);
  send_sparse_stats(n);
  events_run_tick(n->summaries); /* the last steps before a pause reach the disk */
}

/* The coordinator's silence this node tolerates: its timeout, and at
 * least eight of the cluster's heartbeat intervals (a grown cluster's
 * coordinator speaks every second one). */
static uint64_t silence_ms(const node *n) {
  uint64_t eight = 8 * (uint64_t)n->hb_interval_ms;
  return n->timeout_ms > eight ? n->timeout_ms : eight;
}

static void on_silence(uv_timer_t *t) {
  node *n = t->data;
  log_error("no word from the coordinator for %llu ms; exiting",
            (unsigned long long)silence_ms(n));
  node_stop(n, EXIT_LOST);
}

/* Any frame from the coordinator proves it alive: restart the clock. */
static void watch_restart(node *n) {
  if (n->registered && !n->shutting_down && !n->stopping)
    uv_timer_start(&n->watch, on_silence, silence_ms(n), 0);
}

static int on_coord_heartbeat(node *n, const uint8_t *pl, uint32_t len) {
  wire_msg_heartbeat m;
  int rc = wire_get_heartbeat(pl, len, &m);
  if (rc < 0) return rc;
  uint32_t iv = m.interval_ms > n->heartbeat_ms ? m.interval_ms : n->heartbeat_ms;
  if (iv > 3600000) iv = 3600000; /* an hour: past any cluster's need, and no overflow */
  if (iv != n->hb_interval_ms) log_debug("heartbeats every %u ms", (unsigned)iv);
  n->hb_interval_ms = iv;
  return 0;
}

/* After SHUTDOWN (or a fatal error): polls until the running task is done
 * and the last replies have left, or the grace is over; then stops. */
static void on_drain(uv_timer_t *t) {
  node *n = t->data;
  bool busy = n->wk && worker_pending(n->wk) > 0;
  bool flushed = !n->coord || conn_pending(n->coord) == 0;
  if ((!busy && flushed) || uv_now(&n->loop) >= n->drain_deadline) node_stop(n, n->status);
}

static void begin_drain(node *n, uint32_t grace_ms) {
  n->shutting_down = true;
  n->drain_deadline = uv_now(&n->loop) + grace_ms;
  uv_timer_stop(&n->hb);
  uv_timer_stop(&n->watch);
  uv_timer_start(&n->drain, on_drain, 0, DRAIN_POLL_MS);
}

/* The worker's last job is over: check at once rather than at the next poll. */
static void work_idle(void *ud) {
  node *n = ud;
  if (!n->stopping) on_drain(&n->drain);
}

static void close_timer(uv_timer_t *t) {
  if (!uv_is_closing((uv_handle_t *)t)) uv_close((uv_handle_t *)t, NULL);
}

/* Closes everything; uv_run returns once the last handle is gone (a task
 * on the thread pool finishes first). The first status wins. */
static void node_stop(node *n, int status) {
  if (n->stopping) return;
  log_info("stopping (status %d)", status); /* forwarded (LOG) while the connection lives */
  if (n->out) { /* the last lines of stdout and stderr, before the connection goes */
    nodeout_finish(n->out);
    log_setup(stderr, n->who, LOG_INFO); /* fd 2 is the original again */
    nodeout_close(n->out);
    n->out = NULL;
  }
  if (n->term_live) uv_close((uv_handle_t *)&n->term, NULL);
  n->term_live = false;
  n->stopping = true;
  n->status = status;
  flush_batch(n);
  if (n->timers_live) {
    close_timer(&n->hb);
    close_timer(&n->watch);
    close_timer(&n->drain);
    if (!uv_is_closing((uv_handle_t *)&n->flush)) uv_close((uv_handle_t *)&n->flush, NULL);
  }
  if (n->wk) worker_close(n->wk);
  if (n->ps) ps_stop(n->ps);
  if (n->coord) {
    conn *c = n->coord;
    n->coord = NULL;
    conn_close(c, "node stopping");
  }
}

/* ============================== control frames =========================== */

/* The coordinator's verdict on our run directory token decides who writes
 * the chief's summaries, so that a run never has two writers, and a chief
 * whose run directory is some other disk (a tmpfs, a stale copy) writes
 * none there: the coordinator writes them from our RESULTs
 * (coord_summaries.c). Our first RESULT follows REGISTERED. */
static void chief_summaries(node *n, bool sees_rundir) {
  if (n->o->role != ROLE_CHIEF || !n->o->run_dir || n->summaries) return;
  if (sees_rundir)
    n->summaries = events_run_open(n->o->run_dir, "chief");
  else
    log_info("summaries: the run directory is not visible here; the coordinator writes them");
}

_Static_assert((int)CONN_TRANSPORT_AUTO == WIRE_TRANSPORT_AUTO &&
                   (int)CONN_TRANSPORT_UNIX == WIRE_TRANSPORT_UNIX &&
                   (int)CONN_TRANSPORT_TCP == WIRE_TRANSPORT_TCP,
               "REGISTERED's transport numbers are conn.h's modes");

/* The cluster's transport, whatever this process's DROVER_TRANSPORT said:
 * for the links dialled from now on (a worker's to the ps nodes, after
 * SPEC; a primary's to its replica), and what a ps offers its clients.
 * (The coordinator's link was dialled before; the launchers that can pass
 * the cluster's choice in the environment did.) */
static void follow_transport(node *n, uint8_t transport) {
  conn_transport_mode m = (conn_transport_mode)transport;
  conn_set_transport(m);
  ps_set_offer(n->ps, m != CONN_TRANSPORT_TCP);
  log_info("the cluster's transport: %s; the coordinator's link: %s",
           conn_transport_mode_name(m), n->coord ? conn_transport(n->coord) : "-");
}

static int on_registered(node *n, const uint8_t *pl, uint32_t len) {
  wire_msg_registered m;
  int rc = wire_get_registered(pl, len, &m);
  if (rc < 0) return rc;
  if (!m.ok) {
    log_error("the coordinator refused this node: %.*s", (int)m.message.len, m.message.s);
    node_stop(n, EXIT_FAIL);
    return 0;
  }
  if (n->registered) return 0;
  n->registered = true;
  log_info("registered");
  follow_transport(n, m.transport);
  chief_summaries(n, m.sees_rundir);
  fwd_flush(n);
  uv_timer_start(&n->hb, on_heartbeat, 0, n->heartbeat_ms);
  watch_restart(n);
  return 0;
}

static int on_spec(node *n, const uint8_t *pl, uint32_t len) {
  wire_msg_spec m;
  int rc = wire_get_spec(pl, len, &m);
  if (rc < 0) return rc;
  uint32_t count = m.nodes.n;
  node_addr *a = calloc((size_t)count + 1, sizeof *a);
  if (!a) return err_set(DRV_ENOMEM, "out of memory");
  int nps = 0;
  wire_rd r = wire_items_reader(&m.nodes);
  for (uint32_t i = 0; i < count && rc == 0; i++) {
    wire_item_spec_node it;
    wire_get_item_spec_node(&r, &it);
    a[i].role = it.role;
    a[i].index = it.index;
    a[i].port = it.port;
    a[i].proc = it.proc;
    rc = wire_str_copy(it.host, a[i].host, sizeof a[i].host);
    if (a[i].role == ROLE_PS) nps++;
  }
  if (rc == 0) {
    log_info("cluster spec: %d ps", nps);
    if (n->wk) rc = worker_spec(n->wk, a, (int)count, m.ps_replicated);
  }
  free(a);
  return rc;
}

/* PS_ROLE: this ps's place in its replica group (ps_repl.c). */
static int on_ps_role(node *n, const uint8_t *pl, uint32_t len) {
  wire_msg_ps_role m;
  char host[64];
  int rc = wire_get_ps_role(pl, len, &m);
  if (rc == 0) rc = wire_str_copy(m.host, host, sizeof host);
  if (rc < 0) return rc;
  return ps_set_role(n->ps, m.role, m.token, host, m.port, m.ps);
}

/* A replica ready for its primary, then in sync: PS_ROLE_OK to the coordinator. */
static void ps_role_done(void *ud, int status, bool synced, uint64_t version, const char *msg) {
  node *n = ud;
  if (!n->coord) return;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_ps_role_ok(&w, &(wire_msg_ps_role_ok){status, synced, version, WIRE_STR(msg)});
  conn_send_wr(n->coord, &w, WIRE_PS_ROLE_OK, 0);
}

static int on_shutdown(node *n, const uint8_t *pl, uint32_t len) {
  wire_msg_shutdown m;
  int rc = wire_get_shutdown(pl, len, &m);
  if (rc < 0) return rc;
  uint32_t grace = m.grace_ms;
  if (n->shutting_down) return 0;
  log_info("shutdown requested (grace %u ms)", grace);
  begin_drain(n, grace);
  if (n->wk) worker_drain(n->wk, work_idle, n);
  return 0;
}

/* A frame of a kind this node's role does not take is a protocol error. */
static int wrong_frame(node *n, const wire_header *h) {
  return err_set(DRV_EPARSE, "a %s does not take %s from the coordinator",
                 wire_role_name(n->o->role), wire_type_name(h->type));
}

static int dispatch(node *n, const wire_header *h, const uint8_t *pl) {
  if (!n->registered && h->type != WIRE_REGISTERED && h->type != WIRE_ERROR)
    return err_set(DRV_EPARSE, "%s before REGISTERED", wire_type_name(h->type));
  switch (h->type) {
  case WIRE_REGISTERED: return on_registered(n, pl, h->len);
  case WIRE_HEARTBEAT: /* its arrival is what counts (watch_restart), and its interval */
    return on_coord_heartbeat(n, pl, h->len);
  case WIRE_PS_ROLE:
    if (!n->ps) return wrong_frame(n, h);
    return on_ps_role(n, pl, h->len);
  case WIRE_SPEC: return on_spec(n, pl, h->len);
  case WIRE_SHUTDOWN: return on_shutdown(n, pl, h->len);
  case WIRE_ERROR: {
    char msg[WIRE_MAX_STR + 1];
    wire_rd_error(pl, h->len, msg, sizeof msg);
    log_error("the coordinator reported an error: %s", msg);
    node_stop(n, EXIT_FAIL);
    return 0;
  }
  case WIRE_PREDICT_MODEL:
  case WIRE_PREDICT_ROWS:
  case WIRE_PREDICT:
    if (!n->wk) return wrong_frame(n, h);
    if (n->shutting_down) return 0;
    if (h->type == WIRE_PREDICT_MODEL) return worker_predict_model(n->wk, pl, h->len);
    if (h->type == WIRE_PREDICT_ROWS) return worker_predict_rows(n->wk, pl, h->len);
    return worker_predict(n->wk, h->req, pl, h->len);
  case WIRE_FEED_LISTEN:
  case WIRE_FEED_DIRECT_CLOSE:
    if (!n->wk) return wrong_frame(n, h);
    if (n->shutting_down) return 0;
    if (h->type == WIRE_FEED_LISTEN) return worker_feed_listen(n->wk, n->o->bind_host, pl, h->len);
    return worker_feed_direct_close(n->wk, pl, h->len);
  case WIRE_SETUP:
  case WIRE_TASK:
  case WIRE_CALL:
  case WIRE_EVAL:
  case WIRE_POSITION:
  case WIRE_ROLLBACK:
  case WIRE_FEED_BATCH:
  case WIRE_FEED_END:
    if (!n->wk) return wrong_frame(n, h);
    if (n->shutting_down) return 0; /* too late for new work */
    if (h->type == WIRE_POSITION) return worker_position(n->wk, h->req, pl, h->len);
    if (h->type == WIRE_ROLLBACK) return worker_rollback(n->wk, h->req, pl, h->len);
    if (h->type == WIRE_FEED_BATCH) return worker_feed_batch(n->wk, h->req, pl, h->len);
    if (h->type == WIRE_FEED_END) return worker_feed_end(n->wk, pl, h->len);
    if (h->type == WIRE_SETUP) return worker_setup(n->wk, h->req, pl, h->len);
    if (h->type == WIRE_TASK) return worker_task(n->wk, h->req, pl, h->len);
    if (h->type == WIRE_CALL) return worker_call(n->wk, h->req, pl, h->len);
    return worker_eval(n->wk, h->req, pl, h->len);
  default: return wrong_frame(n, h);
  }
}

static void coord_ready(conn *c) {
  node *n = conn_ud(c);
  log_info("connected to the coordinator at %s", conn_peer(c));
  send_register(n);
}

/* A setup we cannot build or a frame we cannot take: tell the
 * coordinator why, let it go out (bounded), and stop with status 1. */
static void fail_node(node *n, int rc, const char *msg) {
  if (n->failing) return;
  log_error("%s", msg);
  send_error(n, rc, msg);
  n->failing = true;
  n->status = EXIT_FAIL;
  begin_drain(n, FAIL_FLUSH_MS);
  if (n->wk) worker_drain(n->wk, work_idle, n);
}

/* The worker's fatal errors (a SETUP built on the thread pool that failed). */
static void worker_fatal(void *ud, int rc, const char *msg) { fail_node(ud, rc, msg); }

static void coord_frame(conn *c, const wire_header *h, const uint8_t *pl) {
  node *n = conn_ud(c);
  if (n->stopping || c != n->coord) return;
  watch_restart(n);
  if (n->failing) return;
  int rc = dispatch(n, h, pl);
  if (rc < 0) fail_node(n, rc, err_msg());
}

static void coord_close(conn *c, int err, const char *why) {
  node *n = conn_ud(c);
  if (c != n->coord) return; /* our own close in node_stop */
  n->coord = NULL;
  if (n->shutting_down) {
    node_stop(n, n->status); /* the coordinator went first: fine */
    return;
  }
  (void)err; /* clean or not, the coordinator is gone */
  why = why && why[0] ? why : "connection closed";
  /* Before REGISTERED the coordinator may have dropped our handshake for
   * newer ones (a flood of connections that never authenticate: the
   * oldest of an address goes, conn_server.c); a restarted node that gave
   * up at once would spend its restarts on it. */
  if (!n->registered && n->redials < NODE_REDIALS) {
    n->redials++;
    log_warn("the coordinator closed the connection before this node registered (%s): "
             "dialling again (%d of %d)", why, n->redials, NODE_REDIALS);
    if (conn_connect(&n->loop, n->o->coord_host, n->o->coord_port, &n->copts, &n->coord) == 0)
      return;
    why = err_msg();
  }
  log_error("lost the coordinator: %s", why);
  node_stop(n, EXIT_LOST);
}

static const conn_cbs coord_cbs = {coord_ready, coord_frame, coord_close};

/* ============================== main ===================================== */

/* SIGTERM with --log-forward: what stdout and stderr hold goes to the
 * coordinator first, then the signal ends the node as it would have. */
static void on_term(uv_signal_t *h, int sig) {
  node *n = h->data;
  log_warn("signal %d: forwarding the rest of the output, then exiting", sig);
  if (n->out) {
    nodeout_finish(n->out);
    log_setup(stderr, n->who, LOG_INFO);
  }
  uv_signal_stop(h);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* --log-forward: log records through log.c's sink, stdout and stderr
 * through nodeout.c; without a capture, records are still forwarded. */
static void forward_logs(node *n) {
  log_set_sink(fwd_record, n);
  FILE *log_out;
  if (nodeout_start(&n->loop, n->who, fwd_record, n, &n->out, &log_out) < 0) {
    log_warn("%s: only log records are forwarded", err_msg());
    return;
  }
  log_setup(log_out, n->who, LOG_INFO);
  nodeout_crash_guard(n->out);
  if (uv_signal_init(&n->loop, &n->term) == 0) {
    n->term.data = n;
    n->term_live = true;
    uv_signal_start(&n->term, on_term, SIGTERM);
  }
}

/* The key file is read once: from here on the keys in memory are the
 * node's, and a copy left on the node's machine (a shared run directory,
 * an ssh host's temporary directory, a Spark executor's) would outlive
 * the node for anyone who gets at that disk later. The coordinator writes
 * a fresh one before each start (coord__node_key_file). A directory the
 * node may not write (read-only) keeps it: a warning, not a failure. */
static void forget_key_file(void) {
  const char *path = getenv("DROVER_SECRET_FILE");
  if (path && unlink(path) < 0 && errno != ENOENT)
    log_warn("cannot remove the key file '%s' after reading it: %s", path, strerror(errno));
}

static int start(node *n) {
  const node_opts *o = n->o;
  int rc;
  if ((rc = auth_init()) < 0 || (rc = keyring_from_env(&n->keys)) < 0) return rc;
  /* A ps's file holds its own root, from which it checks its clients'
   * keys; no node's holds the run's secret (auth.h). */
  if (o->role == ROLE_PS && !n->keys.has_root)
    return err_set(DRV_EINVAL, "key file '%s' has no `root` key: it is not a ps's",
                   getenv("DROVER_SECRET_FILE"));
  forget_key_file(); /* only a file that is a key file of this role */
  if (o->role == ROLE_PS) {
    if ((rc = ps_start(&n->loop, &n->keys, (uint32_t)o->index, o->bind_host, &n->ps,
                        &n->data_port)) < 0)
      return rc;
    log_info("serving parameters on %s:%d", o->bind_host, n->data_port);
    ps_on_role(n->ps, ps_role_done, n);
  } else if (!(n->wk = worker_new(&n->loop, &n->keys, o->role, o->index, send_coord, n))) {
    return err_set(DRV_ENOMEM, "out of memory");
  } else {
    worker_set_calls(n->wk, o->calls);
    worker_set_fatal(n->wk, worker_fatal);
  }
  n->copts = (conn_opts){.secret = &n->keys.coord, .who = AUTH_WHO_NODE, .role = (uint8_t)o->role,
                         .index = (uint32_t)o->index, .cbs = &coord_cbs, .ud = n};
  return conn_connect(&n->loop, o->coord_host, o->coord_port, &n->copts, &n->coord);
}

static int check_opts(const node_opts *o) {
  if (!o->coord_host || o->coord_port <= 0 || o->coord_port > 65535)
    return err_set(DRV_EINVAL, "node: a coordinator address is required");
  if (o->role < 0 || o->role >= ROLE_COUNT)
    return err_set(DRV_EINVAL, "node: unknown role %d", o->role);
  if (o->index < 0) return err_set(DRV_EINVAL, "node: index %d is negative", o->index);
  if (!o->bind_host || !o->bind_host[0]) return err_set(DRV_EINVAL, "node: no bind address");
  return 0;
}

/* The thread pool and BLAS get `cpus` threads; libuv reads its pool size
 * from the environment when the pool first starts. */
static void set_threads(int cpus) {
  if (cpus <= 0) return;
  char v[16];
  snprintf(v, sizeof v, "%d", cpus);
  setenv("UV_THREADPOOL_SIZE", v, 0);
  tensor_set_threads(cpus);
}

/* Fault injection for tests (SQLite-style): DROVER_FAULT=hang:ROLE:INDEX
 * makes that one node hang before it contacts the coordinator, as a node
 * stuck on a slow file system or a dead host would, so that the
 * reservation timeout can be tested with real processes. */
static void maybe_hang(const char *who) {
  const char *f = getenv("DROVER_FAULT");
  if (!f || strncmp(f, "hang:", 5) != 0 || strcmp(f + 5, who) != 0) return;
  log_warn("DROVER_FAULT=%s: hanging before registration", f);
  for (;;) pause();
}

int node_main(const node_opts *o) {
  char who[32];
  snprintf(who, sizeof who, "%s:%d", wire_role_name(o->role), o->index);
  log_setup(stderr, who, LOG_INFO);
  maybe_hang(who);
  int rc = check_opts(o);
  if (rc < 0) {
    log_error("%s", err_msg());
    return EXIT_FAIL;
  }
  node *n = calloc(1, sizeof *n);
  if (!n) {
    log_error("out of memory");
    return EXIT_FAIL;
  }
  n->o = o;
  n->heartbeat_ms = o->heartbeat_ms ? o->heartbeat_ms : 500;
  n->hb_interval_ms = n->heartbeat_ms;
  n->timeout_ms = o->timeout_ms ? o->timeout_ms : 5000;
  set_threads(o->cpus);
  if ((rc = uv_loop_init(&n->loop)) < 0) {
    log_error("cannot start the event loop: %s", uv_strerror(rc));
    free(n);
    return EXIT_FAIL;
  }
  uv_timer_init(&n->loop, &n->hb);
  uv_timer_init(&n->loop, &n->watch);
  uv_timer_init(&n->loop, &n->drain);
  uv_check_init(&n->loop, &n->flush);
  n->hb.data = n->watch.data = n->drain.data = n;
  n->flush.data = n;
  n->timers_live = true;
  n->status = EXIT_OK;
  snprintf(n->who, sizeof n->who, "%s", who);
  if (o->log_forward) forward_logs(n);
  if ((rc = start(n)) < 0) {
    log_error("%s", err_msg());
    n->coord = NULL; /* never connected: no callback follows */
    node_stop(n, EXIT_FAIL);
  }
  uv_run(&n->loop, UV_RUN_DEFAULT);
  if (!n->stopping) { /* the loop ran dry without a decision: cannot happen */
    node_stop(n, EXIT_FAIL);
    uv_run(&n->loop, UV_RUN_DEFAULT);
  }
  int status = n->status;
  log_set_sink(NULL, NULL);
  free(n->fwd);
  if (uv_loop_close(&n->loop) != 0) log_warn("event loop closed with live handles");
  worker_free(n->wk);
  events_run_close(n->summaries);
  ps_free(n->ps);
  keyring_free(&n->keys);
  free(n->batch);
  free(n);
  log_info("exit status %d", status);
  return status;
}
