/* conn.c - framed, authenticated libuv TCP connections: read framing, the
 * HELLO/AUTH/AUTH_OK handshake, write queue and lifetimes (see conn.h).
 *
 * Reading. Each conn has one read buffer holding [rstart, rend) of bytes
 * not yet dispatched. A frame's 16-byte header is validated with
 * wire_header_decode() as soon as it is complete, before any room is made
 * for its payload, so an oversized or unknown frame never allocates. Once
 * valid, the buffer is grown to hold exactly that frame, and libuv reads
 * straight into the rest of it: a payload of hundreds of MB is copied at
 * most once (only the few KB that arrived with its header) and never read
 * into a second buffer. Buffers above RBUF_RETAIN are released after their
 * frame so that an idle conn does not pin a huge allocation.
 *
 * Closing. Every path (owner, protocol error, I/O error, handshake timeout)
 * goes through conn__fail(), which records the first reason and closes both
 * handles; the conn is freed when the second close callback runs, after
 * libuv has cancelled queued writes (their buffers freed, `done` called)
 * and right after on_close. Error codes passed to on_close: DRV_EPARSE for
 * a malformed or unexpected frame, DRV_EIO for I/O failures, a failed
 * handshake (wrong secret) and timeouts, DRV_ERANGE for an unsendable
 * frame; 0 for a clean close.
 *
 * Shutting down (conn_shutdown) is closing after the write queue: libuv's
 * uv_shutdown calls back once every queued write has completed, and the
 * conn then closes as above. The handshake timer, idle once ready, bounds
 * the wait (a peer that does not read). Reading goes on meanwhile, frames
 * dropped, so that the peer's EOF is seen and the socket is not closed
 * with unread bytes (which would reset the connection and could destroy
 * the very frame being flushed).
 */
#include "net/conn.h"
#include "net/conn_int.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <sodium.h>

#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

#define DEFAULT_HANDSHAKE_MS 5000
#define DEFAULT_SHUTDOWN_MS 5000
#define RBUF_DEFAULT (64u << 10)
#define RBUF_RETAIN (32u << 20)
/* Move a short partial frame to the front when less than this is left at
 * the buffer's end, so that reads of small frames stay large. */
#define RBUF_MIN_TAIL 4096u

void conn__fail(conn *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- helpers ------------------------------------------------------------- */

/* A write to a peer that has gone raises SIGPIPE, whose default action ends
 * the process; a network peer must never be able to do that, so the conn
 * module ignores it unless the program installed a handler of its own. */
static void ignore_sigpipe(void) {
  static bool done;
  struct sigaction sa;
  if (done) return;
  done = true;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
  }
}

/* Parses a numeric IPv4 or IPv6 address (a ':' means IPv6). */
int conn__parse_addr(const char *host, int port, struct sockaddr_storage *ss) {
  int rc;
  if (!host || port < 0 || port > 65535)
    return err_set(DRV_EINVAL, "bad address %s:%d", host ? host : "(null)", port);
  if (strchr(host, ':'))
    rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss);
  else
    rc = uv_ip4_addr(host, port, (struct sockaddr_in *)ss);
  if (rc < 0)
    return err_set(DRV_EINVAL, "'%s' is not a numeric IPv4 or IPv6 address", host);
  return 0;
}

/* "1.2.3.4:5" or "[::1]:5". */
void conn__format_addr(const struct sockaddr *sa, char *out, size_t n) {
  char ip[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  uv_ip_name(sa, ip, sizeof ip);
  if (sa->sa_family == AF_INET6) {
    port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    snprintf(out, n, "[%s]:%d", ip, port);
  } else {
    port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
    snprintf(out, n, "%s:%d", ip, port);
  }
}

uint32_t conn__max_frame(const conn_opts *o) {
  return o->max_frame ? o->max_frame : WIRE_DEFAULT_MAX_FRAME;
}

/* A conn with its two handles initialised (timer not started). */
conn *conn__new(uv_loop_t *loop, const conn_opts *o) {
  conn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  if (uv_tcp_init(loop, &c->tcp) < 0) {
    free(c);
    return NULL;
  }
  uv_timer_init(loop, &c->timer); /* cannot fail */
  c->tcp.data = c->timer.data = c;
  c->open_handles = 2;
  c->tcp_open = true;
  c->secret = o->secret;
  c->control = o->control;
  c->view = o->view;
  c->accept = o->accept;
  c->derive = o->derive_node_keys;
  c->who = o->who;
  c->role = o->role;
  c->index = o->index;
  c->cbs = o->cbs;
  c->ud = o->ud;
  c->max_frame = conn__max_frame(o);
  c->handshake_ms = o->handshake_ms ? o->handshake_ms : DEFAULT_HANDSHAKE_MS;
  c->shutdown_ms = o->shutdown_ms ? o->shutdown_ms : DEFAULT_SHUTDOWN_MS;
  c->opaque = o->opaque;
  c->server_kind = o->server_kind;
  c->mode = (uint8_t)conn__opts_mode(o);
  strcpy(c->peer, "?");
  return c;
}

/* Validates the options and readies libsodium and SIGPIPE. */
int conn__prepare(const conn_opts *o) {
  if (!o || !o->secret || !o->cbs)
    return err_set(DRV_EINVAL, "conn: options need a secret and callbacks");
  ignore_sigpipe();
  return auth_init();
}

static void unlink_server(conn *c) {
  if (!c->srv) return;
  c->srv->nhandshaking--;
  if (c->prev)
    c->prev->next = c->next;
  else
    c->srv->handshaking = c->next;
  if (c->next) c->next->prev = c->prev;
  c->srv = NULL;
  c->prev = c->next = NULL;
}

/* ---- closing ------------------------------------------------------------- */

void conn__finish_wreq(wreq *w) {
  free(w->frame);
  if (w->done) w->done(w->arg);
  free(w);
}

void conn__on_handle_closed(uv_handle_t *h) {
  conn *c = h->data;
  if (--c->open_handles > 0) return;
  conn__link_free(c);
  while (c->held) { /* sent during a handshake that never ended */
    wreq *w = c->held;
    c->held = w->next;
    conn__finish_wreq(w);
  }
  while (c->dropped) {
    wreq *w = c->dropped;
    c->dropped = w->next;
    conn__finish_wreq(w);
  }
  conn_send_cancel(c); /* a reservation left open (a caller's bug): its buffer */
  free(c->rbuf);
  if (c->cbs->on_close) c->cbs->on_close(c, c->close_err, c->why);
  free(c);
}

/* Closes the conn with the first reason given (later calls do nothing).
 * Queued writes are cancelled by libuv before the close callbacks run. */
void conn__fail(conn *c, int err, const char *fmt, ...) {
  va_list ap;
  if (c->closing) return;
  c->closing = true;
  c->close_err = err;
  unlink_server(c);
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  if (err)
    log_warn("conn: %s", c->why); /* every error reason names the peer */
  else
    log_debug("conn %s: closed (%s)", c->peer, c->why);
  if (c->tcp_open) uv_close((uv_handle_t *)&c->tcp, conn__on_handle_closed);
  c->tcp_open = false;
  uv_close((uv_handle_t *)&c->timer, conn__on_handle_closed);
  conn__link_close(c);
}

void conn_close(conn *c, const char *why) {
  if (c) conn__fail(c, 0, "%s", why ? why : "closed");
}

/* The write queue is empty (status 0), or a write failed and closed the
 * conn already, or uv_close cancelled the request (UV_ECANCELED, with the
 * conn still allocated: libuv cancels it before the close callbacks). */
static void on_shutdown(uv_shutdown_t *req, int status) {
  conn *c = req->data;
  char why[sizeof c->why];
  if (c->closing) return;
  memcpy(why, c->why, sizeof why); /* conn__fail formats into c->why */
  if (status < 0 && status != UV_ECANCELED)
    conn__fail(c, DRV_EIO, "shutdown of %s failed: %s", c->peer, uv_strerror(status));
  else
    conn__fail(c, 0, "%s", why);
}

static void on_shutdown_timeout(uv_timer_t *t) {
  conn *c = t->data;
  conn__fail(c, DRV_EIO, "%s: closed with %zu bytes unsent after %u ms (the peer does not read)",
            c->peer, c->pending, (unsigned)c->shutdown_ms);
}

void conn_shutdown(conn *c, const char *why) {
  if (!c || c->closing || c->shutting) return;
  c->shutting = true;
  snprintf(c->why, sizeof c->why, "%s", why ? why : "closed");
  log_debug("conn %s: shutting down (%s), %zu bytes to write", c->peer, c->why, c->pending);
  /* Still connecting: the peer has seen nothing, and libuv would hold the
   * request until the connect completes. */
  c->shutdown_req.data = c;
  if (c->link ? conn__link_flushed(c)
              : (c->state == ST_CONNECTING ||
                 uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) < 0)) {
    conn__fail(c, 0, "%s", why ? why : "closed");
    return;
  }
  uv_timer_stop(&c->timer); /* the handshake's, if it was running */
  uv_timer_start(&c->timer, on_shutdown_timeout, c->shutdown_ms, 0);
}

void conn__on_handshake_timeout(uv_timer_t *t) {
  conn *c = t->data;
  conn__fail(c, DRV_EIO, "handshake with %s timed out after %u ms", c->peer,
            (unsigned)c->handshake_ms);
}

/* ---- writing ------------------------------------------------------------- */

static void on_written(uv_write_t *req, int status) {
  wreq *w = (wreq *)req;
  conn *c = w->c;
  c->pending -= w->bytes;
  if (status < 0 && status != UV_ECANCELED)
    conn__fail(c, DRV_EIO, "write to %s failed: %s", c->peer, uv_strerror(status));
  conn__finish_wreq(w);
}

/* Queues w's buffers; on failure w goes to the dropped list (finished in
 * the close callback) and the conn closes. */
static int queue_write(conn *c, wreq *w, uv_buf_t *bufs, unsigned nbufs) {
  int rc;
  if (c->closing || c->shutting) {
    w->next = c->dropped;
    c->dropped = w;
    return err_set(DRV_EIO, "conn %s is closing", c->peer);
  }
  w->c = c;
  if (c->state != ST_READY && !c->hs_send) { /* written when the handshake ends */
    memcpy(w->bufs, bufs, nbufs * sizeof *bufs);
    w->nbufs = nbufs;
    w->next = NULL;
    if (!c->held_tail) c->held_tail = &c->held;
    *c->held_tail = w;
    c->held_tail = &w->next;
    return 0;
  }
  if (c->link) {
    memcpy(w->bufs, bufs, nbufs * sizeof *bufs);
    w->nbufs = nbufs;
    conn__link_write(c, w);
    return 0;
  }
  rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, nbufs, on_written);
  if (rc < 0) {
    w->next = c->dropped;
    c->dropped = w;
    conn__fail(c, DRV_EIO, "write to %s failed: %s", c->peer, uv_strerror(rc));
    return err_set(DRV_EIO, "%s", c->why);
  }
  c->pending += w->bytes;
  return 0;
}

int conn_send(conn *c, uint8_t *frame, size_t len) {
  wreq *w;
  uv_buf_t buf;
  if (c->closing || c->shutting) {
    free(frame);
    return err_set(DRV_EIO, "conn %s is closing", c->peer);
  }
  if (len < WIRE_HEADER_SIZE) {
    free(frame);
    return err_set(DRV_EINVAL, "conn_send: a frame of %zu bytes has no header", len);
  }
  if (len > UINT32_MAX) { /* wire lengths (and uv_buf_t's) are 32-bit */
    free(frame);
    conn__fail(c, DRV_ERANGE, "frame of %zu bytes to %s is too large", len, c->peer);
    return err_set(DRV_ERANGE, "%s", c->why);
  }
  w = calloc(1, sizeof *w);
  if (!w) {
    free(frame);
    return err_set(DRV_ENOMEM, "conn_send: out of memory");
  }
  w->frame = frame;
  w->bytes = len;
  buf = uv_buf_init((char *)frame, (unsigned)len);
  return queue_write(c, w, &buf, 1);
}

int conn_send_wr(conn *c, wire_wr *w, uint8_t type, uint32_t req) {
  int rc = wire_wr_finish(w, type, req);
  uint8_t *frame = w->buf;
  size_t len = w->len;
  w->buf = NULL;
  w->len = w->cap = 0;
  if (rc < 0) return rc;
  return conn_send(c, frame, len);
}

int conn_send_ref(conn *c, uint8_t type, uint32_t req, const void *payload, size_t len,
                  void (*done)(void *arg), void *arg) {
  conn_piece one = {payload, len};
  return conn_send_refv(c, type, req, &one, 1, done, arg);
}

int conn_send_refv(conn *c, uint8_t type, uint32_t req, const conn_piece *pieces, int n,
                   void (*done)(void *arg), void *arg) {
  uv_buf_t bufs[1 + CONN_MAX_PIECES];
  size_t len = 0;
  bool fits = n >= 0 && n <= CONN_MAX_PIECES;
  for (int i = 0; fits && i < n; i++) {
    fits = pieces[i].len <= UINT32_MAX - WIRE_HEADER_SIZE - len;
    len += fits ? pieces[i].len : 0;
  }
  wreq *w = calloc(1, sizeof *w);
  if (!w) {
    /* Nowhere to remember `done` for later: the only synchronous call. */
    if (done) done(arg);
    return err_set(DRV_ENOMEM, "conn_send_ref: out of memory");
  }
  w->done = done;
  w->arg = arg;
  w->bytes = WIRE_HEADER_SIZE + len;
  if (!fits) {
    /* Closing keeps the "done runs once, from the loop" promise. */
    if (!c->closing)
      conn__fail(c, DRV_ERANGE, "a payload of %d pieces to %s does not fit a frame", n, c->peer);
    queue_write(c, w, NULL, 0);
    return err_set(DRV_ERANGE, "a payload of %d pieces does not fit a frame", n);
  }
  wire_header h = {.type = type, .flags = 0, .req = req, .len = (uint32_t)len};
  wire_header_encode(&h, w->hdr);
  int nb = 0;
  bufs[nb++] = uv_buf_init((char *)w->hdr, WIRE_HEADER_SIZE);
  for (int i = 0; i < n; i++)
    if (pieces[i].len) bufs[nb++] = uv_buf_init((char *)pieces[i].p, (unsigned)pieces[i].len);
  return queue_write(c, w, bufs, (unsigned)nb);
}

/* ---- handshake ----------------------------------------------------------- */

/* A handshake frame goes out at once, ahead of anything held. */
static int send_handshake(conn *c, wire_wr *w, uint8_t type) {
  c->hs_send = true;
  int rc = conn_send_wr(c, w, type, 0);
  c->hs_send = false;
  return rc;
}

int conn__send_hello(conn *c) {
  wire_wr w;
  uint8_t host[WIRE_HOST_ID_SIZE] = {0}, link[WIRE_LINK_SIZE] = {0};
  /* A TCP peer may be on this host: offer it the server's Unix socket. */
  if (!c->link && c->srv && c->srv->offer && c->srv->link_fd >= 0) {
    conn__host_id(host);
    memcpy(link, c->srv->link_token, sizeof link);
    c->offered = true;
  }
  wire_wr_init(&w);
  auth_nonce(c->ns);
  wire_put_hello(&w, &(wire_msg_hello){c->ns, c->server_kind, host, link});
  return send_handshake(c, &w, WIRE_HELLO);
}

/* Handshake payloads are fixed-size raw fields (nonce[32], mac[32], see
 * wire_msgs.h); the header check already enforced the exact length, so a
 * decoding failure (rc < 0) only guards against a change of the layouts. */
static bool handshake_ok(conn *c, int rc) {
  if (rc == 0) return true;
  conn__fail(c, DRV_EPARSE, "%s (from %s)", err_msg(), c->peer);
  return false;
}

/* Client: HELLO { ns, server_kind } -> AUTH { nc, mac_c }. The server kind
 * is not checked: what we dialled is what we meant. */
static void on_hello(conn *c, const wire_header *h, const uint8_t *payload) {
  wire_wr w;
  wire_msg_hello hello;
  uint8_t mac[AUTH_MAC_SIZE];
  if (!handshake_ok(c, wire_get_hello(payload, h->len, &hello))) return;
  if (!c->link && conn__link_try(c, hello.host, hello.link)) return; /* HELLO again there */
  memcpy(c->ns, hello.nonce, AUTH_NONCE_SIZE);
  auth_nonce(c->nc);
  auth_client_mac(c->secret, c->ns, c->nc, mac);
  wire_wr_init(&w);
  wire_put_auth(&w, &(wire_msg_auth){c->nc, mac, c->who, c->role, c->index});
  c->cap = c->who == AUTH_WHO_NODE ? AUTH_CAP_NODE : AUTH_CAP_NONE; /* a client learns no more */
  c->state = ST_WAIT_OK;
  if (send_handshake(c, &w, WIRE_AUTH) < 0)
    conn__fail(c, DRV_EIO, "cannot send AUTH to %s: %s", c->peer, err_msg());
}

/* The frames the owner sent during the handshake, in their order. */
static void flush_held(conn *c) {
  wreq *w = c->held;
  c->held = NULL;
  c->held_tail = &c->held;
  while (w) {
    wreq *next = w->next;
    uv_buf_t bufs[1 + CONN_MAX_PIECES];
    memcpy(bufs, w->bufs, w->nbufs * sizeof *bufs);
    queue_write(c, w, bufs, w->nbufs); /* on failure w is in c->dropped */
    w = next;
  }
}

static void become_ready(conn *c) {
  c->state = ST_READY;
  unlink_server(c);
  uv_timer_stop(&c->timer);
  log_debug("conn %s: authenticated", c->peer);
  flush_held(c);
  if (c->cbs->on_ready && !c->closing) c->cbs->on_ready(c);
}


/* The key of the identity AUTH claims whose MAC matches, and the
 * capability it gives; NULL when none does (`tmp` holds a derived key). */
static const auth_secret *check_identity(conn *c, const wire_msg_auth *a, auth_secret *tmp,
                                         auth_cap *cap) {
  uint8_t want[AUTH_MAC_SIZE];
  const auth_secret *keys[2] = {c->secret, NULL};
  auth_cap caps[2] = {AUTH_CAP_NODE, AUTH_CAP_NONE};
  if (a->who == AUTH_WHO_CLIENT) {
    keys[0] = c->control, caps[0] = AUTH_CAP_CONTROL;
    keys[1] = c->view, caps[1] = AUTH_CAP_VIEW;
  } else if (c->derive) {
    auth_node_key(c->secret, a->role, a->index, tmp);
    keys[0] = tmp;
  }
  for (int i = 0; i < 2; i++) {
    if (!keys[i]) continue;
    auth_client_mac(keys[i], c->ns, c->nc, want);
    if (auth_mac_equal(a->mac, want)) {
      *cap = caps[i];
      return keys[i];
    }
  }
  return NULL;
}

/* Server: AUTH { nc, mac_c, who } -> AUTH_OK { mac_s } and ready. */
static void on_auth(conn *c, const wire_header *h, const uint8_t *payload) {
  wire_wr w;
  wire_msg_auth auth;
  auth_secret derived;
  uint8_t mac[AUTH_MAC_SIZE];
  auth_cap cap = AUTH_CAP_NONE;
  if (!handshake_ok(c, wire_get_auth(payload, h->len, &auth))) return;
  memcpy(c->nc, auth.nonce, AUTH_NONCE_SIZE);
  const auth_secret *key = check_identity(c, &auth, &derived, &cap);
  if (!key) {
    if (auth.who == AUTH_WHO_CLIENT)
      conn__fail(c, DRV_EIO, "authentication failed: %s holds neither the run's control key nor "
                "its view key", c->peer);
    else
      conn__fail(c, DRV_EIO, "authentication failed: %s does not hold the key of %s:%u",
                c->peer, auth.role == AUTH_ROLE_COORD ? "coordinator" : wire_role_name(auth.role),
                (unsigned)auth.index);
    return;
  }
  c->cap = cap;
  c->who = auth.who, c->role = auth.role, c->index = auth.index;
  auth_server_mac(key, c->nc, c->ns, mac);
  sodium_memzero(&derived, sizeof derived);
  wire_wr_init(&w);
  wire_put_auth_ok(&w, &(wire_msg_auth_ok){mac});
  if (send_handshake(c, &w, WIRE_AUTH_OK) < 0) {
    conn__fail(c, DRV_EIO, "cannot send AUTH_OK to %s: %s", c->peer, err_msg());
    return;
  }
  become_ready(c);
}

/* Client: AUTH_OK { mac_s } proves the server's secret. */
static void on_auth_ok(conn *c, const wire_header *h, const uint8_t *payload) {
  uint8_t want[AUTH_MAC_SIZE];
  wire_msg_auth_ok ok;
  if (!handshake_ok(c, wire_get_auth_ok(payload, h->len, &ok))) return;
  auth_server_mac(c->secret, c->nc, c->ns, want);
  if (!auth_mac_equal(ok.mac, want)) {
    conn__fail(c, DRV_EIO, "authentication failed: server %s does not hold the run's secret",
              c->peer);
    return;
  }
  become_ready(c);
}

/* ---- reading ------------------------------------------------------------- */

/* One whole frame, header already validated. */
void conn__dispatch(conn *c, const wire_header *h, const uint8_t *payload) {
  static const enum conn_state expect[] = {
      [WIRE_HELLO] = ST_WAIT_HELLO, [WIRE_AUTH] = ST_WAIT_AUTH, [WIRE_AUTH_OK] = ST_WAIT_OK};
  bool handshake = h->type == WIRE_HELLO || h->type == WIRE_AUTH || h->type == WIRE_AUTH_OK;
  if (c->shutting) return; /* the owner is done with this conn */
  if (c->state == ST_READY && !handshake) {
    /* Every payload is checked against its layout here, once, so that no
     * handler meets a malformed one. */
    if (!c->opaque && wire_validate_payload(h->type, payload, h->len) < 0) {
      conn__fail(c, DRV_EPARSE, "malformed %s from %s: %s", wire_type_name(h->type), c->peer,
                err_msg());
      return;
    }
    if (c->cbs->on_frame) c->cbs->on_frame(c, h, payload);
    return;
  }
  if (!handshake || expect[h->type] != c->state) {
    conn__fail(c, DRV_EPARSE, "unexpected %s frame from %s %s", wire_type_name(h->type),
              c->peer, c->state == ST_READY ? "after authentication" : "during the handshake");
    return;
  }
  if (h->type == WIRE_HELLO)
    on_hello(c, h, payload);
  else if (h->type == WIRE_AUTH)
    on_auth(c, h, payload);
  else
    on_auth_ok(c, h, payload);
}

/* Makes room after rend for the rest of the frame at rstart (or of its
 * header): compacts, or moves the partial frame into a buffer of exactly
 * the frame's size. */
static int make_room(conn *c) {
  size_t avail = c->rend - c->rstart;
  size_t need = c->have_hdr ? WIRE_HEADER_SIZE + (size_t)c->cur.len : WIRE_HEADER_SIZE;
  if (c->rcap < need) {
    size_t cap = need > RBUF_DEFAULT ? need : RBUF_DEFAULT;
    uint8_t *nb = malloc(cap);
    if (!nb) return err_set(DRV_ENOMEM, "no memory for a frame of %zu bytes", need);
    if (avail) memcpy(nb, c->rbuf + c->rstart, avail);
    free(c->rbuf);
    c->rbuf = nb;
    c->rcap = cap;
  } else if (c->rcap - c->rstart < need ||
             (c->rstart > 0 && avail <= RBUF_MIN_TAIL && c->rcap - c->rend < RBUF_MIN_TAIL)) {
    memmove(c->rbuf, c->rbuf + c->rstart, avail);
  } else {
    return 0;
  }
  c->rstart = 0;
  c->rend = avail;
  return 0;
}

/* The conn's accept table allows this header (else it is closed). */
bool conn__accepted(conn *c, const wire_header *h) {
  if (!c->accept) return true;
  uint32_t max = c->accept->max_len[h->type];
  if (!c->accept->allow[h->type]) {
    conn__fail(c, DRV_EPARSE, "refused %s from %s (%s): not accepted from it",
              wire_type_name(h->type), c->peer, c->accept->what);
    return false;
  }
  if (h->len > max) {
    conn__fail(c, DRV_EPARSE, "refused %s of %u bytes from %s (%s): at most %u",
              wire_type_name(h->type), (unsigned)h->len, c->peer, c->accept->what,
              (unsigned)max);
    return false;
  }
  return true;
}

/* Dispatches every whole frame in the buffer. */
static void process(conn *c) {
  while (!c->closing) {
    size_t avail = c->rend - c->rstart;
    if (!c->have_hdr) {
      if (avail < WIRE_HEADER_SIZE) break;
      if (wire_header_decode(c->rbuf + c->rstart, c->max_frame, c->state == ST_READY,
                             &c->cur) < 0) {
        conn__fail(c, DRV_EPARSE, "%s from %s", err_msg(), c->peer);
        return;
      }
      c->have_hdr = true;
      if (c->state == ST_READY && !conn__accepted(c, &c->cur)) return;
    }
    if (avail - WIRE_HEADER_SIZE < c->cur.len) break;
    c->have_hdr = false;
    c->rstart += WIRE_HEADER_SIZE + (size_t)c->cur.len;
    conn__dispatch(c, &c->cur, c->rbuf + c->rstart - c->cur.len);
  }
  if (c->closing) return;
  if (c->rstart == c->rend) c->rstart = c->rend = 0;
  if (c->rcap > RBUF_RETAIN && c->rend == 0 && !c->have_hdr) {
    free(c->rbuf); /* the next frame gets a buffer of its own size */
    c->rbuf = NULL;
    c->rcap = 0;
    return;
  }
  if (make_room(c) < 0) conn__fail(c, DRV_ENOMEM, "%s from %s", err_msg(), c->peer);
}

uint8_t *conn__rbuf_room(conn *c, size_t *room) {
  if (!c->rbuf) {
    c->rbuf = malloc(RBUF_DEFAULT);
    c->rcap = c->rbuf ? RBUF_DEFAULT : 0;
    c->rstart = c->rend = 0;
  }
  /* Never past the current frame when the buffer was sized for it. */
  *room = c->rcap - c->rend;
  if (*room > UINT32_MAX) *room = UINT32_MAX;
  return c->rbuf ? c->rbuf + c->rend : NULL;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  size_t room;
  uint8_t *p = conn__rbuf_room(h->data, &room);
  (void)suggested;
  *buf = uv_buf_init((char *)p, p ? (unsigned)room : 0);
}

void conn__got_bytes(conn *c, size_t n) {
  c->rend += n;
  process(c);
}

/* A TCP peer that can have taken the same-host offer: one whose address is
 * this host's (a remote client closing after HELLO failed its handshake). */
static bool peer_on_this_host(conn *c) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  if (!c->tcp_open || uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0) return true;
  return conn__addr_is_local((const struct sockaddr *)&ss);
}

void conn__got_eof(conn *c) {
  if (c->state == ST_READY)
    conn__fail(c, 0, "closed by %s", c->peer);
  else if (c->offered && c->state == ST_WAIT_AUTH && peer_on_this_host(c)) /* took the offer */
    conn__fail(c, 0, "%s moved to a same-host link", c->peer);
  else
    conn__fail(c, DRV_EIO, "%s closed the connection during the handshake%s", c->peer,
              c->state == ST_WAIT_OK ? " (wrong secret?)" : "");
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  conn *c = s->data;
  (void)buf;
  if (c->closing) return;
  if (nread == UV_EOF) {
    conn__got_eof(c);
    return;
  }
  if (nread == UV_ENOBUFS) {
    conn__fail(c, DRV_ENOMEM, "no memory to read from %s", c->peer);
    return;
  }
  if (nread < 0) {
    conn__fail(c, DRV_EIO, "read from %s failed: %s", c->peer, uv_strerror((int)nread));
    return;
  }
  conn__got_bytes(c, (size_t)nread);
}

/* Sets TCP_NODELAY and starts reading and the handshake timer. */
int conn__start(conn *c) {
  int rc;
  uv_tcp_nodelay(&c->tcp, 1);
  rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  if (rc < 0) return rc;
  return 0;
}

/* ---- client -------------------------------------------------------------- */

static void on_connected(uv_connect_t *req, int status) {
  conn *c = req->data;
  int rc;
  if (c->closing) return; /* conn_close before the connect finished */
  if (status < 0) {
    conn__fail(c, DRV_EIO, "connect to %s failed: %s", c->peer, uv_strerror(status));
    return;
  }
  c->state = ST_WAIT_HELLO;
  if ((rc = conn__start(c)) < 0)
    conn__fail(c, DRV_EIO, "cannot read from %s: %s", c->peer, uv_strerror(rc));
}

int conn_connect(uv_loop_t *loop, const char *host, int port, const conn_opts *o,
                 conn **out) {
  struct sockaddr_storage ss;
  int rc;
  conn *c;
  if ((rc = conn__prepare(o)) < 0 || (rc = conn__parse_addr(host, port, &ss)) < 0) return rc;
  c = conn__new(loop, o);
  if (!c) return err_set(DRV_ENOMEM, "conn_connect: out of memory");
  conn__format_addr((const struct sockaddr *)&ss, c->peer, sizeof c->peer);
  c->state = ST_CONNECTING;
  c->connect_req.data = c;
  rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&ss, on_connected);
  if (rc < 0) {
    /* No callback for an immediate failure: close the handles quietly. */
    static const conn_cbs none = {0};
    c->cbs = &none;
    conn__fail(c, DRV_EIO, "connect to %s failed: %s", c->peer, uv_strerror(rc));
    return err_set(DRV_EIO, "%s", c->why);
  }
  /* The timer covers the TCP connect too: a black-holed address must not
   * hang the caller. */
  uv_timer_start(&c->timer, conn__on_handshake_timeout, c->handshake_ms, 0);
  *out = c;
  return 0;
}

/* ---- accessors ----------------------------------------------------------- */

void conn_set_accept(conn *c, const conn_accept *a) { c->accept = a; }
auth_cap conn_cap(const conn *c) { return c->state == ST_READY ? c->cap : AUTH_CAP_NONE; }
int conn_role(const conn *c) { return c->role; }
uint32_t conn_index(const conn *c) { return c->index; }
void *conn_ud(const conn *c) { return c->ud; }
void conn_set_ud(conn *c, void *ud) { c->ud = ud; }
bool conn_is_ready(const conn *c) {
  return c->state == ST_READY && !c->closing && !c->shutting;
}
bool conn_was_ready(const conn *c) { return c->state == ST_READY; }
const char *conn_peer(const conn *c) { return c->peer; }
size_t conn_pending(const conn *c) { return c->pending; }

int conn_local_host(const conn *c, char *out, size_t n) {
  struct sockaddr_storage ss;
  int len = sizeof ss, rc;
  if (c->local_ip[0]) { /* a client that moved to a same-host link */
    snprintf(out, n, "%s", c->local_ip);
    return 0;
  }
  if (!c->tcp_open) return err_set(DRV_EIO, "conn %s: no local address", c->peer);
  rc = uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&ss, &len);
  if (rc == 0) rc = uv_ip_name((const struct sockaddr *)&ss, out, n);
  if (rc < 0) return err_set(DRV_EIO, "conn %s: no local address: %s", c->peer, uv_strerror(rc));
  return 0;
}
