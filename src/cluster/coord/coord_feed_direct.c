/* coord_feed_direct.c - direct feeders: a keyed external feeder whose
 * host runs a worker of the fit sends its batches to that worker, and
 * their bytes never cross the coordinator (wire_msgs.h, "Direct
 * feeding"; docs/ARCHITECTURE.md, "Direct feeders").
 *
 * The coordinator keeps the accounting the keyed feeders stand on:
 *   routing   FEED_OPEN (direct 1, host H, a key) -> the worker of the fit
 *             whose REGISTER hostname is H (the one with fewest direct
 *             feeders), asked once to listen (FEED_LISTEN with the feed
 *             key) -> FEED_ROUTE to the feeder, then its credit
 *   acks      the worker trains each batch as a train step and sends
 *             FEED_ACK (slot, seq, the RESULT's fields) in arrival order:
 *             the slot's `acked` is a prefix of its seqs; each one is a
 *             trained batch of the fit (coord__step_done) and a credit
 *             back to the feeder, naming the seq (FEED_CREDIT.acked)
 *   a lost worker   every slot routed to it falls back: FEED_ROUTE port 0
 *             and a new window; the feeder sends again, through the
 *             coordinator, every batch not acked (it keeps them), and
 *             what the worker took but had not acked is void (sent =
 *             acked). As with the queue, a batch counts once: a worker
 *             that trained one and died before its ack has it trained
 *             again elsewhere.
 *   a lost feeder   its worker goes on training what it took; a feeder
 *             opening with the key (Spark's retry) waits until that
 *             worker has closed the old connection and said the last seq
 *             it took (FEED_DIRECT_CLOSE -> FEED_DIRECT_END), then skips
 *             that many (its first credit's sent) and keeps those after
 *             `acked` in case the worker is lost before acking them.
 *   the end   a direct feeder's FEED_END carries its last seq; the fit's
 *             feed is over once every slot's batches are acked
 *             (coord__feeders_direct_pending) as well as the queue empty.
 * A failed direct batch that a lost ps explains (as feed_again decides)
 * makes its slot fall back too; any other failure fails the fit, as a
 * fed batch's does.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_feeders_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

static coord_feeder *slot_of(struct coord_feeders *x, uint32_t slot) {
  for (coord_feeder *d = x ? x->list : NULL; d; d = d->next)
    if (d->index >= 0 && (uint32_t)d->index == slot) return d;
  return NULL;
}

/* The fit's worker on host `host` with the fewest direct feeders, or -1. */
static int local_worker(coord_fit_state *f, const char *host) {
  coord *c = f->c;
  struct coord_feeders *x = f->feed.ext;
  int best = -1, best_n = 0;
  for (int t = 0; t < f->feed.ntrainers; t++) {
    int i = f->feed.trainers[t];
    if (!c->ctl[i] || x->port[i] == -2 || strcmp(c->nodes[i].got.hostname, host) != 0) continue;
    int n = 0;
    for (coord_feeder *d = x->list; d; d = d->next) n += d->route == i;
    if (best < 0 || n < best_n) best = i, best_n = n;
  }
  return best;
}

static void send_route(coord_fit_state *f, coord_feeder *d, int node, int port) {
  char name[32] = "";
  if (!d->cn) return;
  if (node >= 0) coord__node_name(&f->c->nodes[node], name, sizeof name);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_feed_route(&w, &(wire_msg_feed_route){WIRE_STR(name),
                                                 WIRE_STR(node >= 0 ? f->c->nodes[node].host : ""),
                                                 (uint16_t)(port > 0 ? port : 0),
                                                 (uint32_t)d->index});
  conn_send_wr(d->cn, &w, WIRE_FEED_ROUTE, 0);
}

static void send_close(coord *c, int node, uint32_t slot) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_feed_direct_close(&w, &(wire_msg_feed_direct_close){slot});
  coord__send(c, node, &w, WIRE_FEED_DIRECT_CLOSE, 0);
}

static void route_to(coord_fit_state *f, coord_feeder *d, int node) {
  char name[32];
  if (d->route != node) d->acked = d->received = d->sent; /* acks count from here */
  d->route = node;
  d->wait_node = -1;
  send_route(f, d, node, f->feed.ext->port[node]);
  rundir_event(&f->c->rd, "feeder %s on %s feeds %s directly (%s:%d, slot %d, from batch %" PRIu64 ")",
               d->name, d->host, coord__node_name(&f->c->nodes[node], name, sizeof name),
               f->c->nodes[node].host, f->feed.ext->port[node], d->index, d->sent + 1);
  coord__feeder_grant(f, d);
}

void coord__feeder_route(coord_fit_state *f, coord_feeder *d) {
  struct coord_feeders *x = f->feed.ext;
  if (!x || d->granted || d->ended || d->wait_node >= 0 || !coord__feeders_external(f)) return;
  coord *c = f->c;
  if (d->route >= 0) { /* a taken-over direct slot: on with its worker */
    if (c->ctl[d->route] && x->port[d->route] > 0) route_to(f, d, d->route);
    else coord__feeder_grant(f, d); /* its worker went: node_lost made it fall back */
    return;
  }
  /* only a keyed feeder with no batch taken yet: a slot's seqs are either
   * the queue's or one worker's from its start (acks are a prefix) */
  bool fresh = d->sent == 0 && d->inflight == 0;
  int w = d->direct_ok && d->key[0] && d->host[0] && fresh ? local_worker(f, d->host) : -1;
  if (w < 0) {
    if (d->direct_ok)
      rundir_event(&c->rd, "feeder %s feeds through the coordinator: %s%s", d->name,
                   !d->key[0] ? "it has no key" : !fresh ? "its key's batches went there before"
                                                          : "no worker of the fit on its host ",
                   d->key[0] && fresh ? (d->host[0] ? d->host : "(not given)") : "");
    coord__feeder_grant(f, d);
    return;
  }
  if (x->port[w] == 0) {
    wire_wr m;
    wire_wr_init(&m);
    wire_put_feed_listen(&m, &(wire_msg_feed_listen){c->feed_key.key});
    coord__send(c, w, &m, WIRE_FEED_LISTEN, 0);
    x->port[w] = -1;
  }
  if (x->port[w] > 0 && coord__fit_ready(f, w)) {
    route_to(f, d, w);
    return;
  }
  /* credit once the worker listens (or says it cannot) and is set up for
   * the fit (a batch before its SETUP would fail) */
  d->wait_node = w;
}

void coord__feeders_tick(coord_fit_state *f) {
  struct coord_feeders *x = f->feed.ext;
  /* a feeder that waits for its worker to be set up for the fit: the
   * fit's begin may find the worker set up already (no SETUP_OK comes) or
   * not yet running the fit (coord__fit_ready false at SETUP_OK) */
  for (coord_feeder *d = x ? x->list : NULL; d; d = d->next)
    if (d->wait_node >= 0 && d->route < 0 && x->port[d->wait_node] != -1 &&
        (x->port[d->wait_node] == -2 || coord__fit_ready(f, d->wait_node))) {
      d->wait_node = -1;
      coord__feeder_route(f, d);
    }
}

void coord__feeders_node_ready(coord_fit_state *f, int node) {
  struct coord_feeders *x = f->feed.ext;
  for (coord_feeder *d = x ? x->list : NULL; d; d = d->next)
    if (d->wait_node == node && d->route < 0) {
      d->wait_node = -1;
      coord__feeder_route(f, d);
    }
}

void coord__feeder_take_direct(coord_fit_state *f, coord_feeder *d, const coord_feeder *o) {
  d->route = o->route;
  d->acked = o->acked;
  d->received = o->received;
  d->direct_trained = o->direct_trained;
  d->last = 0;
  if (o->route < 0) return;
  /* what the worker took of the slot is known once its connection is
   * closed: the newcomer's credit waits for FEED_DIRECT_END */
  d->wait_node = o->route;
  send_close(f->c, o->route, (uint32_t)d->index);
}

void coord__feeder_direct_gone(coord_fit_state *f, coord_feeder *d) {
  if (d->route < 0 || !f->c->ctl[d->route] || (d->last && d->acked >= d->last)) return;
  d->reporting = true;
  send_close(f->c, d->route, (uint32_t)d->index);
}

/* The slot's worker is gone or failed it: its feeder sends every batch
 * not acked through the coordinator. */
static void fall_back(coord_fit_state *f, coord_feeder *d, const char *why) {
  rundir_event(&f->c->rd, "feeder %s: %s; its batches after %" PRIu64 " go through the coordinator",
               d->name, why, d->acked);
  d->route = -1;
  d->reporting = false;
  d->sent = d->acked; /* what the worker held unacked is void */
  d->received = d->acked;
  d->last = 0;
  if (d->wait_node >= 0) d->wait_node = -1;
  if (!d->cn || d->ended) return;
  send_route(f, d, -1, 0);
  if (!d->granted) {
    coord__feeder_route(f, d);
    return;
  }
  uint32_t win = coord__feeder_window(f, d);
  d->credits = d->inflight >= (int64_t)win ? 0 : win - (uint32_t)(d->inflight > 0 ? d->inflight : 0);
  coord__feeder_credit(d, d->credits, d->acked);
}

void coord__feeders_node_lost(coord_fit_state *f, int node) {
  struct coord_feeders *x = f->feed.ext;
  if (!x || node < 0 || node >= f->c->nnodes) return;
  x->port[node] = 0; /* a relaunched worker listens anew when asked */
  char name[64], why[160];
  coord__node_name(&f->c->nodes[node], name, sizeof name);
  snprintf(why, sizeof why, "%s, which it fed directly, was lost", name);
  for (coord_feeder *d = x->list; d; d = d->next) {
    /* done with it: FEED_END came and every batch is acknowledged. A keyed
     * feeder gone without FEED_END (its process died with the worker, and
     * its connection's end was seen first) falls back: its successor's
     * batches go through the coordinator, as said. */
    if (d->route == node && d->ended && d->last && coord__feeder_outstanding(d) == 0) {
      d->route = -1;
    } else if (d->route == node) {
      fall_back(f, d, why);
    } else if (d->wait_node == node) { /* waited for it to listen */
      d->wait_node = -1;
      coord__feeder_route(f, d);
    }
  }
}

int coord__feeders_direct_to_beyond(const coord_fit_state *f, int want) {
  const struct coord_feeders *x = f->feed.ext;
  const coord *c = f->c;
  int keep = 0;
  for (int i = 0; x && i < c->nnodes; i++) {
    const coord_node *n = &c->nodes[i];
    if (n->role != ROLE_WORKER || coord__scaled_away(n) || keep++ < want) continue;
    for (const coord_feeder *d = x->list; d; d = d->next)
      if ((d->route == i && !(d->ended && coord__feeder_outstanding(d) == 0)) || d->wait_node == i)
        return i;
  }
  return -1;
}

bool coord__feeders_direct_pending(const coord_fit_state *f) {
  const struct coord_feeders *x = f->feed.ext;
  for (const coord_feeder *d = x ? x->list : NULL; d; d = d->next) {
    if (d->index < 0 || d->route < 0) continue;
    /* a slot whose feeder left: what its worker took and has not acked */
    if (d->reporting || (d->granted ? coord__feeder_outstanding(d) > 0 : d->received > d->acked))
      return true;
  }
  return false;
}

bool coord__feeders_direct_who(coord_fit_state *f, char *buf, size_t n) {
  const struct coord_feeders *x = f->feed.ext;
  char name[32];
  for (const coord_feeder *d = x ? x->list : NULL; d; d = d->next) {
    if (d->index < 0 || d->route < 0 || !(d->reporting || coord__feeder_outstanding(d) > 0))
      continue;
    snprintf(buf, n, "waited for %s, fed directly by feeder %s, to acknowledge its batch %" PRIu64,
             coord__node_name(&f->c->nodes[d->route], name, sizeof name), d->name, d->acked + 1);
    return true;
  }
  return false;
}

/* ============================== worker frames ============================ */

static int on_listen_ok(coord_fit_state *f, int node, const uint8_t *pl, uint32_t len) {
  wire_msg_feed_listen_ok m;
  char msg[256], name[32];
  int rc = wire_get_feed_listen_ok(pl, len, &m);
  if (rc == 0) rc = wire_str_copy(m.message, msg, sizeof msg);
  if (rc < 0) return rc;
  struct coord_feeders *x = f->feed.ext;
  if (!x) return 0;
  coord__node_name(&f->c->nodes[node], name, sizeof name);
  x->port[node] = m.status == 0 && m.port > 0 ? m.port : -2;
  if (x->port[node] > 0)
    rundir_event(&f->c->rd, "%s listens for direct feeders on port %d", name, x->port[node]);
  else
    rundir_event(&f->c->rd, "%s cannot listen for direct feeders: %s", name, msg);
  coord__feeders_node_ready(f, node);
  return 0;
}

/* One train step's outcome, as a RESULT payload, for the fit's accounting. */
static int step_done(coord_fit_state *f, int node, const wire_msg_feed_ack *m) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_result(&w, &(wire_msg_result){.task = 0, .status = 0, .loss = m->loss,
                                         .correct = m->correct, .examples = m->examples,
                                         .message = WIRE_STR(""), .grad_norm = m->grad_norm});
  int rc = w.err ? err_set(DRV_ENOMEM, "out of memory")
                 : coord__step_done(f, node, 0, w.buf + WIRE_HEADER_SIZE,
                                    (uint32_t)(w.len - WIRE_HEADER_SIZE));
  wire_wr_free(&w);
  return rc;
}

static int on_ack(coord_fit_state *f, int node, const uint8_t *pl, uint32_t len) {
  wire_msg_feed_ack m;
  char msg[512], name[32];
  int rc = wire_get_feed_ack(pl, len, &m);
  if (rc == 0) rc = wire_str_copy(m.message, msg, sizeof msg);
  if (rc < 0) return rc;
  coord_feeder *d = slot_of(f->feed.ext, m.slot);
  coord__node_name(&f->c->nodes[node], name, sizeof name);
  /* a slot that fell back (its batches go through the queue now), or an
   * ack already counted: nothing more */
  if (!d || d->route != node || m.seq <= d->acked || !f->feed.src) return 0;
  if (m.status != 0) {
    if ((f->ck.restoring || strstr(msg, "ps:")) && coord__fit_running(f->c)) {
      char why[640];
      snprintf(why, sizeof why, "batch %" PRIu64 " failed on %s with a ps (%s)", m.seq, name, msg);
      send_close(f->c, node, m.slot);
      fall_back(f, d, why);
      return 0;
    }
    coord__fail_fit(f, "%s: fed batch failed: %s", name, msg);
    return 0;
  }
  if (m.seq != d->acked + 1)
    log_warn("%s acknowledged batch %" PRIu64 " of feeder %s after %" PRIu64 " (out of order)", name,
             m.seq, d->name, d->acked);
  d->acked = m.seq;
  if (d->sent < m.seq) d->sent = m.seq;
  if (d->received < m.seq) d->received = m.seq;
  d->trained++;
  d->direct_trained++;
  f->feed.seq++; /* a batch of the fit's feed, as one queued is */
  f->feed.trained++;
  f->feed.last_progress = progress_now();
  if (d->ended) {
    if (coord__feeder_outstanding(d) == 0) coord__feeder_send_end(d, 0, "");
  } else if (coord__feeders_external(f) && d->granted) {
    d->credits++;
    coord__feeder_credit(d, 1, m.seq);
  }
  return step_done(f, node, &m);
}

static int on_direct_end(coord_fit_state *f, int node, const uint8_t *pl, uint32_t len) {
  wire_msg_feed_direct_end m;
  int rc = wire_get_feed_direct_end(pl, len, &m);
  if (rc < 0) return rc;
  coord_feeder *d = slot_of(f->feed.ext, m.slot);
  if (!d || d->route != node) return 0;
  if (d->received < m.received) d->received = m.received;
  if (d->sent < d->received) d->sent = d->received;
  d->reporting = false;
  if (d->wait_node == node) { /* a takeover waited for what the worker took */
    d->wait_node = -1;
    rundir_event(&f->c->rd, "feeder %s: the worker took batches up to %" PRIu64 " of key %s "
                 "(%" PRIu64 " acknowledged): it skips those", d->name, d->received, d->key, d->acked);
    coord__feeder_route(f, d);
  }
  return 0;
}

int coord__feeders_worker_frame(coord *c, int node, const wire_header *h, const uint8_t *pl) {
  coord_fit_state *f = c->fit;
  if (!f || !f->feed.ext) return 0; /* no feed: a late frame of one over */
  switch (h->type) {
  case WIRE_FEED_LISTEN_OK: return on_listen_ok(f, node, pl, h->len);
  case WIRE_FEED_ACK: return on_ack(f, node, pl, h->len);
  case WIRE_FEED_DIRECT_END: return on_direct_end(f, node, pl, h->len);
  default: return err_set(DRV_EPROTO, "unexpected %s", wire_type_name(h->type));
  }
}

void coord__feeders_summary(coord_fit_state *f) {
  const struct coord_feeders *x = f->feed.ext;
  uint64_t direct = 0;
  for (const coord_feeder *d = x ? x->list : NULL; d; d = d->next)
    if (d->index >= 0) direct += d->direct_trained;
  if (direct)
    rundir_event(&f->c->rd, "feed: %" PRIu64 " batches trained by the worker their feeder sent "
                 "them to directly", direct);
}
