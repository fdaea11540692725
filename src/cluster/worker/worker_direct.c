/* worker_direct.c - direct feeders: a worker listens, when the
 * coordinator asks (FEED_LISTEN), for external feeders on its host that
 * send their batches here instead of through the coordinator (wire_msgs.h,
 * "Direct feeding"; coord_feed_direct.c keeps the accounting).
 *
 * A feeder authenticates with the feed key (auth_feed_key: derived from
 * the control key it holds; the coordinator hands it to the worker in
 * FEED_LISTEN), as a control client; its connection may send FEED_BATCH
 * only, checked at the header. Node identities are refused: the
 * listener's node secret is a random key nobody holds. Each FEED_BATCH's
 * task is the feeder's slot: its batches become train steps in arrival
 * order, acknowledged by FEED_ACK (worker.c's reply), and seqs must
 * increase per slot. A slot's connection closing (the feeder done, or
 * lost, or FEED_DIRECT_CLOSE) is reported with the last seq taken
 * (FEED_DIRECT_END): batches taken are trained all the same.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"
#include "cluster/worker/worker_int.h"

typedef struct dslot {
  uint32_t slot;
  uint64_t received; /* the last seq taken */
  uint64_t batches;  /* taken from this slot's connections */
  conn *cn;          /* its connection, NULL when none is open */
  struct dslot *next;
} dslot;

struct wdirect {
  worker *w;
  conn_server *srv;
  int port;
  auth_secret key;    /* the feed key: what a feeder proves */
  auth_secret nobody; /* the node secret no peer holds */
  conn_opts opts;
  conn_accept accept;
  dslot *slots;
};

static dslot *find_slot(struct wdirect *d, uint32_t slot, bool make) {
  for (dslot *s = d->slots; s; s = s->next)
    if (s->slot == slot) return s;
  dslot *s = make ? calloc(1, sizeof *s) : NULL;
  if (!s) return NULL;
  s->slot = slot;
  s->next = d->slots;
  d->slots = s;
  return s;
}

static void send_end(worker *w, const dslot *s) {
  wire_wr m;
  wire_wr_init(&m);
  wire_put_feed_direct_end(&m, &(wire_msg_feed_direct_end){s->slot, s->received});
  w->send(w->ud, &m, WIRE_FEED_DIRECT_END, 0);
}

/* ============================== connections ============================== */

/* A connection's own: the listener's state and its slot (its first
 * batch's). Freed in on_close. */
typedef struct dpeer {
  struct wdirect *d;
  dslot *s;
} dpeer;

static void on_ready(conn *cn) {
  struct wdirect *d = conn_ud(cn); /* the listener's, until now */
  dpeer *p = calloc(1, sizeof *p);
  if (!p) {
    conn_set_ud(cn, NULL);
    conn_close(cn, "out of memory");
    return;
  }
  p->d = d;
  conn_set_ud(cn, p);
  log_info("direct feeder connected from %s", conn_peer(cn));
}

static void on_frame(conn *cn, const wire_header *h, const uint8_t *pl) {
  dpeer *p = conn_ud(cn);
  struct wdirect *d = p->d;
  dslot *s = p->s;
  worker *w = d->w;
  int rc;
  if (h->type != WIRE_FEED_BATCH) {
    rc = err_set(DRV_EPROTO, "a direct feeder does not send %s", wire_type_name(h->type));
  } else if (h->len < 8) {
    rc = err_set(DRV_EPARSE, "FEED_BATCH too short");
  } else {
    uint64_t task = 0, seq = 0;
    for (int i = 7; i >= 0; i--) task = task << 8 | pl[i]; /* the payload's first field */
    if (task > UINT32_MAX) {
      rc = err_set(DRV_EPROTO, "FEED_BATCH slot %" PRIu64 " out of range", task);
    } else if (!s && !(s = find_slot(d, (uint32_t)task, true))) {
      rc = err_set(DRV_ENOMEM, "out of memory");
    } else if (s->slot != task) {
      rc = err_set(DRV_EPROTO, "FEED_BATCH for slot %" PRIu64 " on slot %u's connection", task,
                   s->slot);
    } else {
      if (s->cn && s->cn != cn) conn_close(s->cn, "a newer connection feeds its slot");
      s->cn = cn;
      p->s = s;
      rc = worker__direct_batch(w, s->slot, pl, h->len, &seq);
      if (rc == 0 && seq <= s->received)
        rc = err_set(DRV_EPROTO, "slot %u: batch %" PRIu64 " after %" PRIu64, s->slot, seq,
                     s->received);
      if (rc == 0) {
        s->received = seq;
        s->batches++;
      }
    }
  }
  if (rc < 0) {
    log_warn("direct feeder %s: %s", conn_peer(cn), err_msg());
    conn_close(cn, "bad direct feeder frame");
  }
}

static void on_close(conn *cn, int err, const char *why) {
  dpeer *p = conn_was_ready(cn) ? conn_ud(cn) : NULL;
  if (!p) return; /* never authenticated: ud is the listener's */
  struct wdirect *d = p->d;
  dslot *s = p->s;
  free(p);
  if (!s || s->cn != cn) return; /* no batch came, or a newer one holds the slot */
  s->cn = NULL;
  log_info("direct feeder of slot %u closed after batch %" PRIu64 " (%" PRIu64 " taken)%s%s",
           s->slot, s->received, s->batches, err ? ": " : "", err ? why : "");
  if (!d->w->closed) send_end(d->w, s);
}

static const conn_cbs direct_cbs = {on_ready, on_frame, on_close};

/* ============================== the coordinator's side =================== */

static void listen_ok(worker *w, int32_t status, int port, const char *msg) {
  wire_wr m;
  wire_wr_init(&m);
  wire_put_feed_listen_ok(&m, &(wire_msg_feed_listen_ok){status, (uint16_t)port, WIRE_STR(msg)});
  w->send(w->ud, &m, WIRE_FEED_LISTEN_OK, 0);
}

int worker_feed_listen(worker *w, const char *bind_host, const uint8_t *payload, size_t len) {
  wire_msg_feed_listen m;
  int rc = wire_get_feed_listen(payload, len, &m);
  if (rc < 0) return rc;
  if (w->role == ROLE_EVALUATOR) return err_set(DRV_EINVAL, "FEED_LISTEN sent to an evaluator");
  struct wdirect *d = w->direct;
  if (d && d->srv) { /* listening already (the key is the run's) */
    listen_ok(w, 0, d->port, "");
    return 0;
  }
  if (!d && !(d = w->direct = calloc(1, sizeof *d))) return err_set(DRV_ENOMEM, "out of memory");
  d->w = w;
  memcpy(d->key.key, m.key, sizeof d->key.key);
  if ((rc = auth_secret_generate(&d->nobody)) < 0) {
    listen_ok(w, rc, 0, err_msg());
    return 0;
  }
  d->accept.what = wire_peer_allow(WIRE_PEER_DIRECT_FEEDER, d->accept.allow, d->accept.max_len);
  d->opts = (conn_opts){.secret = &d->nobody, .control = &d->key, .accept = &d->accept,
                        .cbs = &direct_cbs, .ud = d};
  if ((rc = conn_listen(w->loop, bind_host, 0, &d->opts, &d->srv, &d->port)) < 0) {
    log_warn("cannot listen for direct feeders on %s: %s", bind_host, err_msg());
    d->srv = NULL;
    listen_ok(w, rc, 0, err_msg());
    return 0;
  }
  log_info("listening for direct feeders on %s:%d", bind_host, d->port);
  listen_ok(w, 0, d->port, "");
  return 0;
}

int worker_feed_direct_close(worker *w, const uint8_t *payload, size_t len) {
  wire_msg_feed_direct_close m;
  int rc = wire_get_feed_direct_close(payload, len, &m);
  if (rc < 0) return rc;
  dslot *s = w->direct ? find_slot(w->direct, m.slot, false) : NULL;
  if (s && s->cn) {
    conn_close(s->cn, "the coordinator closed its slot"); /* on_close reports it */
    return 0;
  }
  dslot none = {.slot = m.slot};
  send_end(w, s ? s : &none); /* nothing open: what it took, maybe nothing */
  return 0;
}

void worker__direct_close(worker *w) {
  struct wdirect *d = w->direct;
  if (!d) return;
  if (d->srv) conn_server_close(d->srv);
  d->srv = NULL;
  for (dslot *s = d->slots; s; s = s->next)
    if (s->cn) {
      conn *cn = s->cn;
      s->cn = NULL;
      conn_close(cn, "worker closing");
    }
}

void worker__direct_free(worker *w) {
  struct wdirect *d = w->direct;
  if (!d) return;
  for (dslot *s = d->slots, *next; s; s = next) {
    next = s->next;
    free(s);
  }
  memset(&d->key, 0, sizeof d->key);
  free(d);
  w->direct = NULL;
}
