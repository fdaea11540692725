/* conn_server.c - the listening side of conn.h: accepting connections and
 * bounding the ones that have not authenticated yet (in total and per
 * address), with drops and failed accepts logged at a bounded rate. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "net/conn.h"
#include "net/conn_int.h"
#include "base/err.h"
#include "base/log.h"

#define LISTEN_BACKLOG 128

/* The bound on waiting handshakes: a quarter of the descriptors, so a
 * flood leaves three quarters for nodes, logs and files. */
static uint32_t max_handshaking(const conn_opts *o) {
  if (o->max_handshaking) return o->max_handshaking;
  struct rlimit rl;
  rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur / 4 : 64;
  return n < 64 ? 64 : n > 1024 ? 1024 : (uint32_t)n;
}

/* One address may hold a quarter of the total (at least 16, at most the
 * total): a flood from one host leaves room for the others' handshakes. */
static uint32_t max_per_addr(const conn_opts *o, uint32_t total) {
  uint32_t n = o->max_per_addr ? o->max_per_addr : total / 4;
  if (n < 16) n = 16;
  return n > total ? total : n;
}

/* A counted, rate-limited log line: at most one a second per counter, with
 * the number of events since the last one. True when it is time to say. */
static bool say_now(conn_server *s, const uint64_t *said, double *at) {
  double now = (double)uv_now(s->tcp.loop);
  if (*said != 0 && now - *at < 1000) return false;
  *at = now;
  return true;
}

/* Drops `old`, a waiting handshake, for a newer one. */
static void drop_handshake(conn_server *s, conn *old, const char *bound, int held) {
  s->dropped++;
  if (say_now(s, &s->dropped_said, &s->said_at)) {
    log_warn("conn: %s: %" PRIu64 " connections dropped before they authenticated (%s: at "
             "most %d wait at once; the oldest goes)", s->addr, s->dropped - s->dropped_said,
             bound, held);
    s->dropped_said = s->dropped;
  }
  conn__fail(old, 0, "dropped before it authenticated: %d newer connections waiting", held);
}

/* Makes room for one more waiting handshake from `ip`: over the bound of
 * its address the oldest of that address goes, over the total bound the
 * oldest of all. The list is newest first, so the last match is the
 * oldest; a peer that authenticates does so within milliseconds and is
 * never the oldest. */
void conn__server_bound(conn_server *s, const char *ip) {
  conn *oldest = NULL, *mine = NULL;
  uint32_t from_ip = 0;
  for (conn *c = s->handshaking; c; c = c->next) {
    oldest = c;
    if (strcmp(c->ip, ip) == 0) from_ip++, mine = c;
  }
  if (mine && from_ip >= s->max_per_addr)
    drop_handshake(s, mine, ip, (int)from_ip);
  else if (oldest && (uint32_t)s->nhandshaking >= s->o.max_handshaking)
    drop_handshake(s, oldest, "in total", s->nhandshaking);
}

/* An accept that failed (out of descriptors: libuv then takes and closes
 * the pending connection itself) is logged at a bounded rate too. */
static void accept_failed(conn_server *s, int status) {
  s->failed++;
  if (!say_now(s, &s->failed_said, &s->failed_at)) return;
  log_warn("conn: accept on %s failed %" PRIu64 " times: %s", s->addr,
           s->failed - s->failed_said, uv_strerror(status));
  s->failed_said = s->failed;
}

void conn__server_adopt(conn_server *s, conn *c) {
  c->srv = s;
  s->nhandshaking++;
  c->next = s->handshaking;
  if (c->next) c->next->prev = c;
  s->handshaking = c;
}

static void on_connection(uv_stream_t *ls, int status) {
  conn_server *s = ls->data;
  struct sockaddr_storage ss;
  int len = sizeof ss, rc;
  conn *c;
  if (status < 0) {
    accept_failed(s, status);
    return;
  }
  c = conn__new(ls->loop, &s->o);
  if (!c) {
    /* libuv stops polling the listener until this connection is
     * accepted; nothing better to do when out of memory. */
    log_error("conn: no memory for a connection on %s", s->addr);
    return;
  }
  rc = uv_accept(ls, (uv_stream_t *)&c->tcp);
  if (rc == 0 && uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
    conn__format_addr((const struct sockaddr *)&ss, c->peer, sizeof c->peer);
    uv_ip_name((const struct sockaddr *)&ss, c->ip, sizeof c->ip);
  }
  conn__server_bound(s, c->ip);
  c->state = ST_WAIT_AUTH;
  conn__server_adopt(s, c);
  if (rc == 0) rc = conn__start(c);
  if (rc < 0) {
    conn__fail(c, DRV_EIO, "accept on %s failed: %s", s->addr, uv_strerror(rc));
    return;
  }
  uv_timer_start(&c->timer, conn__on_handshake_timeout, c->handshake_ms, 0);
  log_debug("conn %s: accepted on %s", c->peer, s->addr);
  if (conn__send_hello(c) < 0)
    conn__fail(c, DRV_EIO, "cannot send HELLO to %s: %s", c->peer, err_msg());
}

static void free_server(uv_handle_t *h) {
  conn_server *s = h->data;
  if (--s->open == 0) free(s);
}

int conn_server_handshaking(const conn_server *s) { return s ? s->nhandshaking : 0; }

int conn_listen(uv_loop_t *loop, const char *host, int port, const conn_opts *o,
                conn_server **out, int *bound_port) {
  struct sockaddr_storage ss;
  int len = sizeof ss, rc;
  conn_server *s;
  if ((rc = conn__prepare(o)) < 0 || (rc = conn__parse_addr(host, port, &ss)) < 0) return rc;
  s = calloc(1, sizeof *s);
  if (!s) return err_set(DRV_ENOMEM, "conn_listen: out of memory");
  s->o = *o;
  s->o.max_frame = conn__max_frame(o);
  s->o.max_handshaking = max_handshaking(o);
  s->max_per_addr = max_per_addr(o, s->o.max_handshaking);
  s->tcp.data = s;
  s->open = 1;
  s->link_fd = -1;
  uv_tcp_init(loop, &s->tcp); /* cannot fail without AF_ flags */
  rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&ss, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&s->tcp, LISTEN_BACKLOG, on_connection);
  if (rc == 0) rc = uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&ss, &len);
  if (rc < 0) {
    uv_close((uv_handle_t *)&s->tcp, free_server);
    return err_set(DRV_EIO, "cannot listen on %s:%d: %s", host, port, uv_strerror(rc));
  }
  conn__format_addr((const struct sockaddr *)&ss, s->addr, sizeof s->addr);
  /* Without a Unix socket co-located peers use TCP: said, not fatal. */
  if (conn__link_listen(s) < 0) log_warn("conn: %s: no same-host links: %s", s->addr, err_msg());
  if (bound_port)
    *bound_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  log_debug("conn: listening on %s", s->addr);
  *out = s;
  return 0;
}

/* Also closes the conns still in their handshake (err 0): nobody else can,
 * and they would keep the loop alive until their timeout. */
void conn_server_close(conn_server *s) {
  if (!s || uv_is_closing((uv_handle_t *)&s->tcp)) return;
  while (s->handshaking) conn__fail(s->handshaking, 0, "server %s closed", s->addr);
  conn__link_unlisten(s);
  uv_close((uv_handle_t *)&s->tcp, free_server);
}
