/* coord_feed_ext.c - external feeders (train = { feed = "external" }):
 * clients on the coordinator's control port (clients/python, a Spark
 * executor) that send FEED_BATCHes under credit (wire_msgs.h, "Feed").
 *
 * A feeder authenticates as attach clients do and sends FEED_OPEN. While
 * an external fit runs it holds `window` credits: each FEED_BATCH uses
 * one, and each of its batches trained returns one (FEED_CREDIT). Its
 * batches join the feed's producer like a source's (the payload kept as
 * sent, its task id patched in on the way to a worker), so a lost
 * worker's batches are retried and each counts once. FEED_END from the
 * feeder: no more batches; the coordinator answers FEED_END once its
 * batches are trained, and the fit ends when every feeder that opened has
 * ended (feed_timeout fails a fit that no feeder joins or feeds).
 *
 * Keyed feeders (FEED_OPEN's key: a Spark partition of one pass, say): a
 * keyed feeder that leaves stays in the list detached (no connection), so
 * that a feeder opening later in the same fit with its key takes over its
 * slot index and counts: the batches the coordinator took already are not
 * sent again (the first FEED_CREDIT's `sent` tells the newcomer how many
 * to skip), and those still queued are trained once and credited to the
 * newcomer. A still-connected holder of the key is closed: the newest
 * wins (a hung executor, a speculative copy).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_feeders_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

#define FEEDER_WINDOW_MAX 64 /* credits a feeder holds at most */

static struct coord_feeders *feeders(coord_fit_state *f) {
  if (!f->feed.ext && (f->feed.ext = calloc(1, sizeof *f->feed.ext)) &&
      !(f->feed.ext->port = calloc((size_t)f->c->node_cap + 1, sizeof *f->feed.ext->port))) {
    free(f->feed.ext);
    f->feed.ext = NULL;
  }
  return f->feed.ext;
}

static bool external_running(const coord_fit_state *f) {
  return f && f->feed.src && f->feed.src->external;
}

bool coord__feeders_external(const coord_fit_state *f) { return external_running(f); }

uint64_t coord__feeder_outstanding(const coord_feeder *d) {
  uint64_t n = d->inflight > 0 ? (uint64_t)d->inflight : 0;
  if (d->route < 0) return n;
  /* direct: up to FEED_END's last seq; a feeder gone without one, up to
   * what its worker reported taking once it did */
  uint64_t upto = d->last ? d->last : !d->cn && d->wait_node < 0 ? d->received : UINT64_MAX;
  if (upto == UINT64_MAX) return UINT64_MAX;
  return n + (upto > d->acked ? upto - d->acked : 0);
}

void coord__feeder_credit(coord_feeder *d, uint32_t credits, uint64_t acked) {
  if (!d->cn) return; /* a keyed feeder's slot, detached: nobody to tell */
  const coord_fit_state *f = d->c ? d->c->fit : NULL;
  uint32_t epochs = external_running(f) && f->feed.src->epochs > 0 &&
                            f->feed.src->epochs <= UINT32_MAX
                        ? (uint32_t)f->feed.src->epochs
                        : 0;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_feed_credit(&w, &(wire_msg_feed_credit){credits, d->sent, d->trained, epochs, acked});
  conn_send_wr(d->cn, &w, WIRE_FEED_CREDIT, 0);
}

static void send_credit(coord_feeder *d, uint32_t credits) { coord__feeder_credit(d, credits, 0); }

void coord__feeder_send_end(coord_feeder *d, int32_t status, const char *msg) {
  if (d->answered || !d->cn) return;
  d->answered = true;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_feed_end(&w, &(wire_msg_feed_end){status, d->trained, WIRE_STR(msg)});
  conn_send_wr(d->cn, &w, WIRE_FEED_END, 0);
  conn_shutdown(d->cn, "feed over");
}

/* Every feeder the fit waits for came and has ended: the feed is over
 * and the fit ends at its next turn. A feeder opening now is for the
 * next fit (a PySpark program's next feed): it waits for that one. */
static bool closing(coord_fit_state *f) {
  const struct coord_feeders *x = f->feed.ext;
  int want = f->feed.src->feeders > 0 ? f->feed.src->feeders : 1;
  return x && x->opened >= want && x->ended >= x->opened;
}

uint32_t coord__feeder_window(const coord_fit_state *f, const coord_feeder *d) {
  uint32_t win = 2 * (uint32_t)(f->feed.ntrainers > 0 ? f->feed.ntrainers : 1) * FEED_WINDOW;
  if (d->window > 0 && d->window < win) win = d->window;
  return win > FEEDER_WINDOW_MAX ? FEEDER_WINDOW_MAX : win;
}

/* Its window, once per fit: the credits it may have in flight. */
void coord__feeder_grant(coord_fit_state *f, coord_feeder *d) {
  if (d->granted || d->ended || d->wait_node >= 0 || !external_running(f)) return;
  uint32_t win = coord__feeder_window(f, d);
  /* a keyed feeder taking over: its predecessor's batches still queued (or
   * held by its worker) hold part of the window; their credits come back
   * as they train */
  uint64_t held = (d->inflight > 0 ? (uint64_t)d->inflight : 0) +
                  (d->route >= 0 && d->sent > d->acked ? d->sent - d->acked : 0);
  win = held >= win ? 0 : win - (uint32_t)held;
  d->granted = true;
  d->credits = win;
  feeders(f)->opened++;
  /* a taken-over direct slot: acked tells the newcomer which of the
   * batches it skips its worker still trains (after acked) */
  coord__feeder_credit(d, win, d->route >= 0 ? d->acked : 0);
}

void coord__feeders_begin(coord_fit_state *f) {
  struct coord_feeders *x = feeders(f);
  if (!x) return;
  x->opened = x->ended = 0;
  x->failed[0] = '\0';
  /* keys are a fit's: the slots an earlier fit's keyed feeders left go */
  for (coord_feeder **p = &x->list; *p;) {
    coord_feeder *d = *p;
    if (d->cn) {
      p = &d->next;
    } else {
      *p = d->next;
      free(d);
    }
  }
  for (coord_feeder *d = x->list; d; d = d->next) {
    d->granted = false;
    d->sent = d->trained = 0;
    d->inflight = 0;
    d->route = d->wait_node = -1;
    d->acked = d->received = d->last = d->direct_trained = 0;
    coord__feeder_route(f, d);
  }
}

/* ============================== frames ================================== */

static void ended(coord_fit_state *f, coord_feeder *d);

/* The slot and counts of key's earlier feeder, if one opened in this fit:
 * d takes them over. A detached slot is freed; a connected holder is
 * closed (its frames from now on are not read: it is no longer keyed). */
static void take_over(coord_fit_state *f, struct coord_feeders *x, coord_feeder *d) {
  for (coord_feeder **p = &x->list; *p; p = &(*p)->next) {
    coord_feeder *o = *p;
    if (o == d || o->index < 0 || strcmp(o->key, d->key) != 0) continue;
    d->index = o->index;
    d->sent = o->sent;
    d->trained = o->trained;
    d->inflight = o->inflight;
    coord__feeder_take_direct(f, d, o);
    rundir_event(&d->c->rd, "feeder %s takes over key %s from %s (%s): %" PRIu64
                 " batches taken already, %" PRIu64 " trained", d->name, d->key, o->name,
                 o->cn ? "still connected: closed" : "gone", o->sent, o->trained);
    if (o->cn) {
      o->index = -1; /* its batches' credits are d's now */
      o->key[0] = '\0';
      o->answered = true;
      ended(f, o);
      conn_close(o->cn, "a newer feeder took over its key");
    } else {
      *p = o->next;
      free(o);
    }
    return;
  }
}

static int on_open(coord *c, conn *cn, void **state, const uint8_t *pl, uint32_t len) {
  coord_fit_state *f = coord__fit_state(c);
  wire_msg_feed_open m;
  int rc = wire_get_feed_open(pl, len, &m);
  if (rc < 0) return rc;
  struct coord_feeders *x = f ? feeders(f) : NULL;
  coord_feeder *d = x ? calloc(1, sizeof *d) : NULL;
  if (!d) return err_set(DRV_ENOMEM, "out of memory");
  d->c = c;
  d->cn = cn;
  if (wire_str_copy(m.name, d->name, sizeof d->name) < 0 || !d->name[0])
    snprintf(d->name, sizeof d->name, "%s", conn_peer(cn));
  if (wire_str_copy(m.key, d->key, sizeof d->key) < 0) {
    free(d);
    return err_set(DRV_EINVAL, "FEED_OPEN key longer than %zu bytes", sizeof d->key - 1);
  }
  if (wire_str_copy(m.host, d->host, sizeof d->host) < 0) d->host[0] = '\0';
  d->direct_ok = m.direct;
  d->route = d->wait_node = -1;
  d->window = m.window;
  d->index = x->count++;
  d->next = x->list;
  x->list = d;
  *state = d;
  rundir_event(&c->rd, "feeder %s connected from %s", d->name, conn_peer(cn));
  if (d->key[0]) take_over(f, x, d);
  if (external_running(f) && !closing(f)) coord__feeder_route(f, d);
  else send_credit(d, 0); /* credits come with an external fit */
  return 0;
}

/* A batch from feeder d: kept as sent (header room in front), into the queue. */
static int on_batch(coord_fit_state *f, coord_feeder *d, const uint8_t *pl, uint32_t len) {
  wire_msg_feed_batch m;
  int rc = wire_get_feed_batch(pl, len, &m);
  if (rc < 0) return rc;
  if (d->ended) return err_set(DRV_EPROTO, "FEED_BATCH after FEED_END");
  if (!external_running(f) || d->credits == 0)
    return err_set(DRV_EPROTO, "FEED_BATCH without credit");
  if (d->route >= 0)
    return err_set(DRV_EPROTO, "FEED_BATCH to the coordinator from a feeder routed to a worker");
  if (m.x.ndim < 2 || m.y.ndim > 2 || m.x.shape[0] != m.y.shape[0] || m.x.shape[0] < 1)
    return err_set(DRV_ESHAPE, "FEED_BATCH %" PRIu64 ": x and y do not match (x [n, ...], y [n] "
                   "or [n, k], n >= 1)", m.seq);
  if (m.mode != WIRE_FEED_TRAIN) return err_set(DRV_EPROTO, "FEED_BATCH mode must be TRAIN");
  if ((rc = coord__feed_check_ids(&m)) < 0) return rc;
  if (len > UINT32_MAX - WIRE_HEADER_SIZE) return err_set(DRV_ERANGE, "FEED_BATCH too large");
  uint8_t *buf = malloc((size_t)len + WIRE_HEADER_SIZE);
  if (!buf) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(buf + WIRE_HEADER_SIZE, pl, len);
  rc = coord__feed_queue_raw(f, buf, len + WIRE_HEADER_SIZE, d->index);
  if (rc < 0) return rc;
  d->credits--;
  d->sent++;
  d->inflight++;
  coord__dispatch_later(f->c);
  return 0;
}

static void ended(coord_fit_state *f, coord_feeder *d) {
  if (d->ended) return;
  d->ended = true;
  if (d->granted && f && f->feed.ext) f->feed.ext->ended++;
  /* a feeder that sent nothing (a PySpark driver holding the fit open) is
   * answered when the feed is over (coord__feeders_end): its FEED_END
   * answer then says every batch of the fit was trained */
  if (coord__feeder_outstanding(d) == 0 && d->sent > 0) coord__feeder_send_end(d, 0, "");
  (void)f;
}

void coord__feeder_frame(coord *c, conn *cn, void **state, bool other, const wire_header *h,
                         const uint8_t *pl) {
  coord_feeder *d = *state;
  coord_fit_state *f = c->fit;
  int rc = 0;
  if (other) {
    rc = err_set(DRV_EPROTO, "FEED_OPEN on a node's or an attach client's connection");
  } else if (!d) {
    rc = h->type == WIRE_FEED_OPEN ? on_open(c, cn, state, pl, h->len)
                                   : err_set(DRV_EPROTO, "unexpected frame");
  } else if (h->type == WIRE_FEED_BATCH) {
    rc = on_batch(f, d, pl, h->len);
  } else if (h->type == WIRE_FEED_END) {
    wire_msg_feed_end m;
    char msg[400];
    if ((rc = wire_get_feed_end(pl, h->len, &m)) == 0 && (rc = wire_str_copy(m.message, msg, sizeof msg)) == 0) {
      if (d->route >= 0) d->last = m.batches; /* its direct batches: up to this seq */
      if (m.status != 0 && f && f->feed.ext && external_running(f))
        snprintf(f->feed.ext->failed, sizeof f->feed.ext->failed, "feeder %s gave up: %s", d->name, msg);
      rundir_event(&c->rd, "feeder %s ended after %" PRIu64 " batches", d->name, d->sent);
      ended(f, d);
    }
  } else {
    rc = err_set(DRV_EPROTO, "a feeder does not send %s", wire_type_name(h->type));
  }
  if (rc < 0) {
    log_warn("%s: %s", conn_peer(cn), err_msg());
    conn_close(cn, "bad feeder frame");
  }
}

void coord__feeder_gone(coord *c, void *state) {
  coord_feeder *d = state;
  coord_fit_state *f = c->fit;
  if (!d->ended)
    rundir_event(&c->rd, "feeder %s left without FEED_END, %" PRIu64 " batches taken", d->name,
                 d->sent);
  d->cn = NULL; /* closing: nothing more goes out */
  ended(f, d);
  struct coord_feeders *x = f ? f->feed.ext : NULL;
  if (x && d->key[0] && d->index >= 0) {
    /* keyed: its slot stays, detached, for a feeder that takes it over */
    d->ended = true;
    d->answered = false;
    d->granted = false;
    coord__feeder_direct_gone(f, d);
    return;
  }
  for (coord_feeder **p = x ? &x->list : NULL; p && *p; p = &(*p)->next)
    if (*p == d) {
      *p = d->next;
      break;
    }
  free(d);
}

/* ============================== the feed's side ========================= */

void coord__feeder_trained(coord_fit_state *f, int index) {
  struct coord_feeders *x = f->feed.ext;
  for (coord_feeder *d = x ? x->list : NULL; d; d = d->next) {
    if (d->index != index) continue;
    d->trained++;
    d->inflight--;
    if (d->ended) {
      if (coord__feeder_outstanding(d) == 0) coord__feeder_send_end(d, 0, "");
    } else if (external_running(f)) {
      d->credits++;
      send_credit(d, 1);
    }
    return;
  }
}

int coord__feeders_check(coord_fit_state *f, bool *over) {
  struct coord_feeders *x = feeders(f);
  *over = false;
  if (!x) return err_set(DRV_ENOMEM, "out of memory");
  if (x->failed[0]) return err_set(DRV_EIO, "%s", x->failed);
  int want = f->feed.src->feeders > 0 ? f->feed.src->feeders : 1;
  /* every feeder that joined has ended (its batches are the queue's now),
   * and as many as the fit waits for */
  *over = x->opened >= want && x->ended >= x->opened;
  return 0;
}

void coord__feeders_end(coord_fit_state *f, int rc) {
  struct coord_feeders *x = f->feed.ext;
  for (coord_feeder *d = x ? x->list : NULL; d; d = d->next) {
    if (!d->granted) continue;
    d->granted = false;
    if (rc == 0 && coord__feeder_outstanding(d) == 0) coord__feeder_send_end(d, 0, "");
    else coord__feeder_send_end(d, rc < 0 ? rc : DRV_ECANCELLED, rc < 0 ? err_msg() : "the fit ended");
  }
}

void coord__feeders_free(coord_fit_state *f) {
  struct coord_feeders *x = f->feed.ext;
  if (!x) return;
  for (coord_feeder *d = x->list, *next; d; d = next) {
    next = d->next;
    if (d->cn) d->c = NULL; /* their peers free them */
    else free(d);          /* a keyed feeder's slot, detached */
  }
  free(x->port);
  free(x);
  f->feed.ext = NULL;
}
