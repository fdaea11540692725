/* test_conn.c - conn: handshake, framing both ways (small, many, 64 MiB),
 * refusal of wrong secrets and of hostile raw peers, timeouts, close and
 * send_ref lifetimes. Each case runs its own loop on 127.0.0.1 with a
 * watchdog timer that fails it if a wait never ends (link_fixture.h's,
 * with the process's transport TCP: these cases are about TCP, peer
 * addresses and kernel buffers; same-host links have test_conn_link.c). */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <uv.h>

#include "proto/auth.h"
#include "net/conn.h"
#include "harness.h"
#include "link_fixture.h"
#include "base/log.h"
#include "proto/wire.h"

/* HELLO: nonce, server kind, host id, link token. */
#define HELLO_LEN (WIRE_NONCE_SIZE + 1 + WIRE_HOST_ID_SIZE + WIRE_LINK_SIZE)

/* ---- round trips ------------------------------------------------------- */

static void hb_to_client(lrec *r) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_u64(&w, 7);
  wire_wr_u64(&w, 123456789);
  wire_wr_u64(&w, 42);
  wire_wr_u32(&w, 500);
  CHECK_OK(conn_send_wr(r->c, &w, WIRE_HEARTBEAT, 5));
}

static void push_on_ready(lrec *r) { lfx_send_push(r->c, "hello, ps: payload", 18, 42); }

static void cli_collect(lrec *r, const wire_header *h, const uint8_t *p) {
  if (h->type == WIRE_HEARTBEAT) {
    wire_rd rd;
    wire_rd_init(&rd, p, h->len);
    CHECK_INT_EQ(wire_rd_u64(&rd), 7);
    CHECK_INT_EQ(wire_rd_u64(&rd), 123456789);
    CHECK_INT_EQ(wire_rd_u64(&rd), 42);
    CHECK_INT_EQ(wire_rd_u32(&rd), 500);
    CHECK_OK(wire_rd_done(&rd, WIRE_HEARTBEAT));
    CHECK_INT_EQ(h->req, 5);
    r->n1++;
    return;
  }
  lfx_record(r, h, p);
}

TEST(conn_roundtrip_both_ways) {
  lfx f;
  lrec cl;
  char want[64];
  lfx_init(&f, "roundtrip", 5000, CONN_TRANSPORT_TCP);
  lfx_listen(&f, 0);
  f.srv_ready = hb_to_client;
  f.cli_ready = push_on_ready;
  f.cli_frame = cli_collect;
  lfx_connect(&f, &cl);
  snprintf(want, sizeof want, "127.0.0.1:%d", f.port);
  CHECK_STR_CONTAINS(conn_peer(cl.c), want);
  CHECK(!conn_is_ready(cl.c));
  LFX_RUN_UNTIL(&f, cl.n1 == 1 && cl.last_len > 0);
  CHECK_INT_EQ(cl.ready, 1);
  CHECK_INT_EQ(f.nsrv, 1);
  CHECK(conn_is_ready(f.srv_recs[0].c));
  CHECK_STR_CONTAINS(conn_peer(f.srv_recs[0].c), "127.0.0.1:");
  /* the echo of the PUSH: same type, req and bytes */
  CHECK_INT_EQ(cl.last_type, WIRE_PUSH);
  CHECK_INT_EQ(cl.last_req, 42);
  CHECK_INT_EQ(cl.last_len, 18);
  CHECK(memcmp(cl.last, "hello, ps: payload", 18) == 0);
  CHECK_INT_EQ(f.srv_recs[0].frames, 1);
  /* a clean close on one side is a clean close (err 0) on both */
  conn_close(cl.c, "bye");
  conn_close(cl.c, "again"); /* idempotent */
  LFX_RUN_UNTIL(&f, cl.closed && f.srv_recs[0].closed);
  CHECK_INT_EQ(cl.err, 0);
  CHECK_STR_CONTAINS(cl.why, "bye");
  CHECK_INT_EQ(f.srv_recs[0].err, 0);
  CHECK_STR_CONTAINS(f.srv_recs[0].why, "closed by 127.0.0.1:");
  lfx_finish(&f, &cl, 1);
}

/* Frames the owner sends before the handshake ends are held and written,
 * in order, once it has: the peer drops any frame before authentication
 * (a checkpoint's probe on a ps link being dialled again once hung a fit).
 * Held frames of a handshake that fails are finished at the close. */
static void in_order(lrec *r, const wire_header *h, const uint8_t *p) {
  CHECK_INT_EQ(h->req, (uint32_t)r->n1 + 1);
  lfx_record(r, h, p);
  r->n1++;
}

static void held_done(void *arg) { ((lfx *)arg)->counter++; }

TEST(conn_frames_before_ready_are_held) {
  lfx f;
  lrec cl, bad;
  lfx_init(&f, "held", 5000, CONN_TRANSPORT_TCP);
  lfx_listen(&f, 0);
  f.cli_frame = in_order;
  lfx_connect(&f, &cl);
  CHECK(!conn_is_ready(cl.c));
  lfx_send_push(cl.c, "the first frame.", 16, 1);
  CHECK_OK(conn_send_ref(cl.c, WIRE_PUSH, 2, "the second one..", 16, held_done, &f));
  lfx_send_push(cl.c, "and the third...", 16, 3);
  LFX_RUN_UNTIL(&f, cl.n1 == 3);
  CHECK_INT_EQ(f.counter, 1);
  CHECK(memcmp(cl.last, "and the third...", 16) == 0);
  CHECK_INT_EQ(f.srv_recs[0].frames, 3);
  /* a wrong secret: nothing reaches the server, the borrowed payload's
   * done still runs once */
  auth_secret wrong;
  memset(&wrong, 0x5a, sizeof wrong);
  lfx_connect_full(&f, &bad, &wrong, 0, f.port);
  CHECK_OK(conn_send_ref(bad.c, WIRE_PUSH, 1, "never written...", 16, held_done, &f));
  LFX_RUN_UNTIL(&f, bad.closed);
  CHECK_INT_EQ(f.counter, 2);
  CHECK_INT_EQ(bad.frames, 0);
  CHECK_INT_EQ(f.nsrv, 1);
  lfx_finish(&f, (lrec[]){cl}, 1);
  free(bad.last);
}

/* 64 MiB out with conn_send_ref, checked at the server, echoed back with
 * conn_send and compared at the client. */
#define BIG (64u << 20)
static uint8_t *big_payload;

static void big_done(void *arg) { ((lfx *)arg)->counter++; }

static void big_send(lrec *r) {
  CHECK_OK(conn_send_ref(r->c, WIRE_PUSH, 9, big_payload, BIG, big_done, r->f));
  CHECK_INT_EQ(conn_pending(r->c), BIG + WIRE_HEADER_SIZE);
  CHECK_INT_EQ(r->f->counter, 0); /* never synchronously */
}

static void big_check_at_server(lrec *r, const wire_header *h, const uint8_t *p) {
  CHECK_INT_EQ(h->len, BIG);
  CHECK(memcmp(p, big_payload, BIG) == 0); /* it crossed the socket */
  lfx_echo(r, h, p);
}

static void big_check_at_client(lrec *r, const wire_header *h, const uint8_t *p) {
  CHECK_INT_EQ(h->type, WIRE_PUSH);
  CHECK_INT_EQ(h->req, 9);
  CHECK_INT_EQ(h->len, BIG);
  CHECK(memcmp(p, big_payload, BIG) == 0);
  r->n1++;
}

TEST(conn_64mib_roundtrip) {
  lfx f;
  lrec cl;
  lfx_init(&f, "64 MiB round trip", 20000, CONN_TRANSPORT_TCP);
  big_payload = malloc(BIG);
  CHECK(big_payload);
  lfx_fill(big_payload, BIG, 99);
  lfx_listen(&f, 0);
  f.cli_ready = big_send;
  f.srv_frame = big_check_at_server;
  f.cli_frame = big_check_at_client;
  lfx_connect(&f, &cl);
  LFX_RUN_UNTIL(&f, cl.n1 == 1);
  CHECK_INT_EQ(f.counter, 1);
  CHECK_INT_EQ(conn_pending(cl.c), 0);
  CHECK_INT_EQ(f.srv_recs[0].frames, 1);
  lfx_finish(&f, &cl, 1);
  free(big_payload);
}

/* Many small frames of varying length: both directions keep order. */
#define NSMALL 20000

/* At least PUSH's smallest payload (version and count: 12 bytes). */
static size_t small_len(long i) { return 12 + (size_t)(i % 53); }

static void small_fill(uint8_t *p, long i) {
  uint32_t v = (uint32_t)i;
  memcpy(p, &v, 4);
  for (size_t k = 4; k < small_len(i); k++) p[k] = (uint8_t)(i * 31 + (long)k);
}

static void small_check(lrec *r, const wire_header *h, const uint8_t *p) {
  uint8_t want[64];
  long i = r->n1++;
  CHECK_INT_EQ(h->req, i);
  CHECK_INT_EQ(h->len, small_len(i));
  small_fill(want, i);
  CHECK(memcmp(p, want, h->len) == 0);
}

static void small_at_server(lrec *r, const wire_header *h, const uint8_t *p) {
  small_check(r, h, p);
  lfx_echo(r, h, p);
}

static void small_send_all(lrec *r) {
  uint8_t buf[64];
  size_t total = 0;
  for (long i = 0; i < NSMALL; i++) {
    small_fill(buf, i);
    lfx_send_push(r->c, buf, small_len(i), (uint32_t)i);
    total += WIRE_HEADER_SIZE + small_len(i);
  }
  /* nothing has completed yet: write callbacks run from the loop */
  CHECK_INT_EQ(conn_pending(r->c), total);
}

TEST(conn_many_small_frames_in_order) {
  lfx f;
  lrec cl;
  lfx_init(&f, "many small frames", 10000, CONN_TRANSPORT_TCP);
  lfx_listen(&f, 0);
  f.cli_ready = small_send_all;
  f.srv_frame = small_at_server;
  f.cli_frame = small_check;
  lfx_connect(&f, &cl);
  LFX_RUN_UNTIL(&f, cl.n1 == NSMALL);
  CHECK_INT_EQ(f.srv_recs[0].n1, NSMALL);
  LFX_RUN_UNTIL(&f, conn_pending(cl.c) == 0);
  lfx_finish(&f, &cl, 1);
}

/* ---- refusals ---------------------------------------------------------- */

TEST(conn_wrong_secret_refused) {
  lfx f;
  lrec cl[2];
  auth_secret other;
  char logline[4096] = "";
  FILE *log = tmpfile();
  CHECK(log);
  lfx_init(&f, "wrong secret", 5000, CONN_TRANSPORT_TCP);
  log_setup(log, "test", LOG_WARN);
  lfx_listen(&f, 0);
  CHECK_OK(auth_secret_generate(&other));
  f.cli_ready = push_on_ready;
  lfx_connect_full(&f, &cl[0], &other, 0, f.port);
  LFX_RUN_UNTIL(&f, cl[0].closed && f.ncloses == 1);
  CHECK_INT_EQ(cl[0].ready, 0);
  CHECK(cl[0].err < 0);
  CHECK_STR_CONTAINS(cl[0].why, "closed the connection during the handshake (wrong secret?)");
  CHECK_INT_EQ(f.nsrv, 0);
  CHECK(f.closes[0].err < 0);
  CHECK_STR_CONTAINS(f.closes[0].why, "authentication failed");
  CHECK_STR_CONTAINS(f.closes[0].why, "127.0.0.1:");
  /* logged as a warning that names the peer */
  rewind(log);
  CHECK(fread(logline, 1, sizeof logline - 1, log) > 0);
  CHECK_STR_CONTAINS(logline, " W conn: authentication failed: 127.0.0.1:");
  fclose(log);
  log_setup(NULL, "test", LOG_WARN);
  /* the server still takes a client that holds the secret */
  lfx_connect(&f, &cl[1]);
  LFX_RUN_UNTIL(&f, cl[1].last_len > 0);
  CHECK_INT_EQ(cl[1].ready, 1);
  CHECK_INT_EQ(cl[1].last_len, 18);
  lfx_finish(&f, cl, 2);
}

/* ---- hostile raw peers (blocking sockets in a thread) -------------------- */

/* From a chosen loopback source address (127.0.0.2: another host to the
 * server's per-address bound). */
static int raw_connect_from(int port, const char *src) {
  struct sockaddr_in a;
  struct timeval tv = {5, 0};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  CHECK_INT_EQ(uv_ip4_addr(src, 0, &a), 0);
  CHECK_INT_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  CHECK_INT_EQ(uv_ip4_addr("127.0.0.1", port, &a), 0);
  CHECK_INT_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

static int raw_connect(int port) {
  struct sockaddr_in a;
  struct timeval tv = {5, 0};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  CHECK_INT_EQ(uv_ip4_addr("127.0.0.1", port, &a), 0);
  CHECK_INT_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* The server may close before all is sent: errors are fine here. */
static void raw_send(int fd, const void *p, size_t n) {
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return;
    p = (const uint8_t *)p + k;
    n -= (size_t)k;
  }
}

static void raw_recv(int fd, void *p, size_t n) {
  while (n) {
    ssize_t k = recv(fd, p, n, 0);
    CHECK(k > 0);
    p = (uint8_t *)p + k;
    n -= (size_t)k;
  }
}

/* Reads until the server closes; fails on the receive timeout. */
static void raw_expect_closed(int fd) {
  uint8_t buf[4096];
  for (;;) {
    ssize_t k = recv(fd, buf, sizeof buf, 0);
    if (k == 0 || (k < 0 && errno == ECONNRESET)) break;
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) harness_fail(__FILE__, __LINE__, "server did not close: %s", strerror(errno));
  }
  close(fd);
}

static void raw_header(uint8_t *out, uint8_t type, uint32_t len) {
  wire_header h = {.type = type, .flags = 0, .req = 0, .len = len};
  wire_header_encode(&h, out);
}

/* A correct client handshake done by hand; `good_mac` false sends a MAC
 * under the wrong key. */
static void raw_handshake(int fd, const auth_secret *s, bool good_mac) {
  uint8_t in[WIRE_HEADER_SIZE + HELLO_LEN], out[WIRE_HEADER_SIZE + 70] = {0}, nc[32], mac[32];
  wire_header h;
  auth_secret wrong;
  raw_recv(fd, in, sizeof in);
  CHECK_OK(wire_header_decode(in, WIRE_DEFAULT_MAX_FRAME, false, &h));
  CHECK_INT_EQ(h.type, WIRE_HELLO);
  auth_nonce(nc);
  memset(&wrong, 0x5a, sizeof wrong);
  auth_client_mac(good_mac ? s : &wrong, in + WIRE_HEADER_SIZE, nc, mac);
  raw_header(out, WIRE_AUTH, 70); /* who, role, index: 0 (node ps:0) */
  memcpy(out + WIRE_HEADER_SIZE, nc, 32);
  memcpy(out + WIRE_HEADER_SIZE + 32, mac, 32);
  raw_send(fd, out, sizeof out);
  if (!good_mac) return;
  raw_recv(fd, out, WIRE_HEADER_SIZE + 32);
  CHECK_OK(wire_header_decode(out, WIRE_DEFAULT_MAX_FRAME, false, &h));
  CHECK_INT_EQ(h.type, WIRE_AUTH_OK);
  auth_server_mac(s, nc, in + WIRE_HEADER_SIZE, mac);
  CHECK(auth_mac_equal(out + WIRE_HEADER_SIZE, mac));
}

/* One hostile client: an optional handshake, then `send` bytes that start
 * with a header (type, len) or with garbage, then maybe EOF. `reason` is
 * what the server must say when it closes the connection. */
enum { HS_NONE, HS_GOOD, HS_BAD_MAC };
static const struct hostile_case {
  int handshake;
  bool garbage;
  uint8_t type;
  uint32_t len;
  size_t send;
  bool eof;
  const char *reason;
} hostile_cases[] = {
    {HS_NONE, true, 0, 0, 256, false, "bad magic"},
    {HS_NONE, false, WIRE_AUTH, 70, 9, true, "closed the connection during the handshake"},
    {HS_NONE, false, WIRE_AUTH, 1u << 30, 116, false, "frame of 1073741824 bytes exceeds"},
    {HS_NONE, false, 0x7f, 4, 20, false, "unknown frame type 0x7f"},
    {HS_NONE, false, WIRE_PUSH, 12, 28, false, "frame type PUSH before authentication"},
    {HS_NONE, false, WIRE_HELLO, HELLO_LEN, WIRE_HEADER_SIZE + HELLO_LEN, false,
     "unexpected HELLO frame"},
    {HS_BAD_MAC, false, 0, 0, 0, false, "authentication failed"},
    {HS_GOOD, true, 0, 0, 256, false, "bad magic"},
    {HS_GOOD, false, WIRE_PUSH, 1u << 30, 80, false, "frame of 1073741824 bytes exceeds"},
    {HS_GOOD, false, WIRE_AUTH, 70, 86, false, "unexpected AUTH frame from 127.0.0.1:"},
};
#define NHOSTILE (int)(sizeof hostile_cases / sizeof hostile_cases[0])

typedef struct hostile {
  lfx *f;
  uv_async_t done;
  bool finished;
} hostile;

static void hostile_thread(void *arg) {
  hostile *H = arg;
  uint8_t buf[256];
  for (int i = 0; i < NHOSTILE; i++) {
    const struct hostile_case *k = &hostile_cases[i];
    int fd = raw_connect(H->f->port);
    if (k->handshake != HS_NONE) raw_handshake(fd, &H->f->secret, k->handshake == HS_GOOD);
    lfx_fill(buf, sizeof buf, (uint64_t)i + 1);
    if (k->garbage)
      buf[0] = 'X'; /* never the magic */
    else
      raw_header(buf, k->type, k->len);
    raw_send(fd, buf, k->send);
    if (k->eof) shutdown(fd, SHUT_WR);
    raw_expect_closed(fd);
  }
  uv_async_send(&H->done);
}

static void hostile_done(uv_async_t *a) { ((hostile *)a->data)->finished = true; }

TEST(conn_hostile_raw_clients_close_only_themselves) {
  lfx f;
  lrec good;
  hostile H = {.f = &f};
  uv_thread_t th;
  lfx_init(&f, "hostile clients", 10000, CONN_TRANSPORT_TCP);
  lfx_listen(&f, 0);
  lfx_connect(&f, &good);
  LFX_RUN_UNTIL(&f, good.ready && f.nsrv == 1);
  uv_async_init(&f.loop, &H.done, hostile_done);
  H.done.data = &H;
  CHECK_INT_EQ(uv_thread_create(&th, hostile_thread, &H), 0);
  LFX_RUN_UNTIL(&f, H.finished && f.ncloses == NHOSTILE);
  uv_thread_join(&th);
  for (int i = 0; i < NHOSTILE; i++) {
    if (!strstr(f.closes[i].why, hostile_cases[i].reason) ||
        !strstr(f.closes[i].why, "127.0.0.1:") || f.closes[i].err >= 0)
      harness_fail(__FILE__, __LINE__, "case %d: \"%s\" (err %d), wanted \"%s\"", i,
                   f.closes[i].why, f.closes[i].err, hostile_cases[i].reason);
  }
  /* the three that authenticated were ready before they misbehaved */
  CHECK_INT_EQ(f.nsrv, 4);
  /* the good conn never noticed */
  CHECK(!good.closed && !f.srv_recs[0].closed);
  lfx_send_push(good.c, "still here, ps", 14, 77);
  LFX_RUN_UNTIL(&f, good.last_len > 0);
  CHECK_INT_EQ(good.last_req, 77);
  CHECK(memcmp(good.last, "still here, ps", 14) == 0);
  uv_close((uv_handle_t *)&H.done, NULL);
  lfx_finish(&f, &good, 1);
}

/* ---- timeouts ------------------------------------------------------------ */

/* A listening socket that is never accepted from: the kernel completes
 * the connect, and then nothing is ever sent. */
static int raw_listener(int *port) {
  struct sockaddr_in a;
  socklen_t alen = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  uv_ip4_addr("127.0.0.1", 0, &a);
  CHECK_INT_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  CHECK_INT_EQ(listen(fd, 4), 0);
  CHECK_INT_EQ(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

TEST(conn_silent_peers_time_out) {
  lfx f;
  lrec cl;
  uint8_t hello[WIRE_HEADER_SIZE + HELLO_LEN];
  uint64_t t0;
  int fd, port;
  lfx_init(&f, "silent peers", 5000, CONN_TRANSPORT_TCP);
  lfx_listen(&f, 300);
  /* a client that connects and never answers HELLO */
  t0 = uv_now(&f.loop);
  fd = raw_connect(f.port);
  LFX_RUN_UNTIL(&f, f.ncloses == 1);
  CHECK(uv_now(&f.loop) - t0 >= 290);
  CHECK(f.closes[0].err < 0);
  CHECK_STR_CONTAINS(f.closes[0].why, "timed out after 300 ms");
  CHECK_STR_CONTAINS(f.closes[0].why, "127.0.0.1:");
  raw_recv(fd, hello, sizeof hello); /* the HELLO, then EOF */
  raw_expect_closed(fd);
  /* a server that never sends HELLO */
  fd = raw_listener(&port);
  uv_update_time(&f.loop);
  t0 = uv_now(&f.loop);
  lfx_connect_full(&f, &cl, &f.secret, 250, port);
  LFX_RUN_UNTIL(&f, cl.closed);
  CHECK(uv_now(&f.loop) - t0 >= 240);
  CHECK_INT_EQ(cl.ready, 0);
  CHECK(cl.err < 0);
  CHECK_STR_CONTAINS(cl.why, "timed out after 250 ms");
  close(fd);
  lfx_finish(&f, &cl, 1);
}

/* A fake server that answers AUTH with a wrong AUTH_OK MAC: the client
 * must refuse it. */
static void fake_server_thread(void *arg) {
  int *fds = arg, fd;
  uint8_t out[WIRE_HEADER_SIZE + HELLO_LEN], in[WIRE_HEADER_SIZE + 64];
  struct timeval tv = {5, 0};
  fd = accept(fds[0], NULL, NULL);
  CHECK(fd >= 0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  raw_header(out, WIRE_HELLO, HELLO_LEN);
  auth_nonce(out + WIRE_HEADER_SIZE);
  out[WIRE_HEADER_SIZE + 32] = 1;
  raw_send(fd, out, sizeof out);
  raw_recv(fd, in, sizeof in);
  raw_header(out, WIRE_AUTH_OK, 32);
  memset(out + WIRE_HEADER_SIZE, 0xab, 32);
  raw_send(fd, out, WIRE_HEADER_SIZE + 32);
  raw_expect_closed(fd);
}

TEST(conn_client_refuses_server_without_secret) {
  lfx f;
  lrec cl;
  int fds[1], port;
  uv_thread_t th;
  lfx_init(&f, "fake server", 5000, CONN_TRANSPORT_TCP);
  fds[0] = raw_listener(&port);
  CHECK_INT_EQ(uv_thread_create(&th, fake_server_thread, fds), 0);
  lfx_connect_full(&f, &cl, &f.secret, 0, port);
  LFX_RUN_UNTIL(&f, cl.closed);
  uv_thread_join(&th);
  close(fds[0]);
  CHECK_INT_EQ(cl.ready, 0);
  CHECK(cl.err < 0);
  CHECK_STR_CONTAINS(cl.why, "authentication failed: server 127.0.0.1:");
  lfx_finish(&f, &cl, 1);
}

/* ---- closing ------------------------------------------------------------- */

static void close_on_first(lrec *r, const wire_header *h, const uint8_t *p) {
  (void)h;
  (void)p;
  conn_close(r->c, "enough");
  conn_close(r->c, "twice");
  CHECK_ERR(conn_send(r->c, malloc(WIRE_HEADER_SIZE), WIRE_HEADER_SIZE), DRV_EIO, "closing");
  CHECK(!conn_is_ready(r->c));
}

static void three_frames(lrec *r) {
  for (uint32_t i = 0; i < 3; i++) lfx_send_push(r->c, "abcdefghijkl", 12, i);
}

static void close_when_ready(lrec *r) { conn_close(r->c, "ready, going"); }

TEST(conn_close_inside_callbacks_and_before_ready) {
  lfx f;
  lrec cl[3];
  lfx_init(&f, "close in callbacks", 5000, CONN_TRANSPORT_TCP);
  lfx_listen(&f, 0);
  f.srv_frame = close_on_first;
  f.cli_ready = three_frames;
  lfx_connect(&f, &cl[0]);
  LFX_RUN_UNTIL(&f, cl[0].closed && f.nsrv == 1 && f.srv_recs[0].closed);
  CHECK_INT_EQ(f.srv_recs[0].frames, 1); /* the rest were dropped */
  CHECK_INT_EQ(f.srv_recs[0].err, 0);
  CHECK_STR_CONTAINS(f.srv_recs[0].why, "enough");
  CHECK_INT_EQ(cl[0].err, 0);
  /* closed before the connect completed: on_close once, err 0 */
  f.cli_ready = NULL;
  lfx_connect(&f, &cl[1]);
  conn_close(cl[1].c, "never mind");
  conn_close(cl[1].c, "twice");
  LFX_RUN_UNTIL(&f, cl[1].closed);
  CHECK_INT_EQ(cl[1].ready, 0);
  CHECK_INT_EQ(cl[1].err, 0);
  CHECK_STR_CONTAINS(cl[1].why, "never mind");
  /* closed by the owner inside on_ready */
  f.cli_ready = close_when_ready;
  lfx_connect(&f, &cl[2]);
  LFX_RUN_UNTIL(&f, cl[2].closed);
  CHECK_INT_EQ(cl[2].ready, 1);
  CHECK_STR_CONTAINS(cl[2].why, "ready, going");
  /* a few more turns: no second on_close anywhere (on_close_cb fails) */
  for (int i = 0; i < 5; i++) uv_run(&f.loop, UV_RUN_NOWAIT);
  lfx_finish(&f, cl, 3);
}

/* send_ref: done once after the write, once for a write dropped by a close,
 * and once for a send refused because the conn is closing - always before
 * on_close and never synchronously. */
static void ref_done(void *arg) { ((lrec *)arg)->n1++; }

static void ref_closed(lrec *r) { r->n2 = r->n1; /* done calls seen by on_close */ }

static const char ref_payload[] = "borrowed payload, kept alive by the caller";
static uint8_t one_mib[1u << 20];

TEST(conn_send_ref_done_runs_once) {
  lfx f;
  lrec cl[2];
  lfx_init(&f, "send_ref", 5000, CONN_TRANSPORT_TCP);
  lfx_listen(&f, 0);
  f.cli_closed = ref_closed;
  lfx_connect(&f, &cl[0]);
  LFX_RUN_UNTIL(&f, cl[0].ready);
  CHECK_OK(conn_send_ref(cl[0].c, WIRE_PUSH, 3, ref_payload, sizeof ref_payload, ref_done,
                         &cl[0]));
  CHECK_INT_EQ(cl[0].n1, 0);
  LFX_RUN_UNTIL(&f, cl[0].last_len > 0);
  CHECK_INT_EQ(cl[0].n1, 1);
  CHECK_INT_EQ(cl[0].last_req, 3);
  CHECK_INT_EQ(cl[0].last_len, sizeof ref_payload);
  CHECK(memcmp(cl[0].last, ref_payload, sizeof ref_payload) == 0);
  /* in pieces (an empty one among them): one frame, the pieces in order */
  conn_piece parts[3] = {{"head:", 5}, {"", 0}, {ref_payload, sizeof ref_payload}};
  CHECK_OK(conn_send_refv(cl[0].c, WIRE_PUSH, 6, parts, 3, ref_done, &cl[0]));
  LFX_RUN_UNTIL(&f, cl[0].last_req == 6);
  CHECK_INT_EQ(cl[0].n1, 2);
  CHECK_INT_EQ(cl[0].last_len, 5 + sizeof ref_payload);
  CHECK(memcmp(cl[0].last, "head:", 5) == 0);
  CHECK(memcmp(cl[0].last + 5, ref_payload, sizeof ref_payload) == 0);
  /* queued, then the conn closes at once; then a send on the closing conn */
  lfx_connect(&f, &cl[1]);
  LFX_RUN_UNTIL(&f, cl[1].ready);
  CHECK_OK(conn_send_ref(cl[1].c, WIRE_PUSH, 4, one_mib, 1u << 20,
                         ref_done, &cl[1]));
  conn_close(cl[1].c, "drop it");
  CHECK_ERR(conn_send_ref(cl[1].c, WIRE_PUSH, 5, ref_payload, sizeof ref_payload, ref_done,
                          &cl[1]),
            DRV_EIO, "closing");
  CHECK_INT_EQ(cl[1].n1, 0);
  LFX_RUN_UNTIL(&f, cl[1].closed);
  CHECK_INT_EQ(cl[1].n2, 2); /* both done calls came before on_close */
  for (int i = 0; i < 5; i++) uv_run(&f.loop, UV_RUN_NOWAIT);
  CHECK_INT_EQ(cl[1].n1, 2);
  CHECK_INT_EQ(cl[0].n1, 2);
  lfx_finish(&f, cl, 2);
}

/* ---- listening and connecting -------------------------------------------- */

TEST(conn_listen_connect_errors) {
  lfx f;
  lrec cl;
  conn *c = NULL;
  conn_server *s2 = NULL;
  int port = 0, used;
  conn_opts bad = {0};
  lfx_init(&f, "errors", 5000, CONN_TRANSPORT_TCP);
  CHECK_ERR(conn_listen(&f.loop, "localhost", 0, &f.so, &s2, &port), DRV_EINVAL, "numeric");
  CHECK_ERR(conn_listen(&f.loop, "127.0.0.1", 0, &bad, &s2, &port), DRV_EINVAL, "secret");
  CHECK_ERR(conn_connect(&f.loop, "example.org", 80, &f.so, &c), DRV_EINVAL, "numeric");
  CHECK_ERR(conn_connect(&f.loop, "127.0.0.1", 70000, &f.so, &c), DRV_EINVAL, "70000");
  lfx_listen(&f, 0);
  used = f.port;
  CHECK_ERR(conn_listen(&f.loop, "127.0.0.1", used, &f.so, &s2, &port), DRV_EIO,
            "address already in use");
  /* nothing listens on a port once its server is closed: refused */
  conn_server_close(f.srv);
  f.srv = NULL;
  uv_run(&f.loop, UV_RUN_NOWAIT);
  lfx_connect_full(&f, &cl, &f.secret, 0, used);
  LFX_RUN_UNTIL(&f, cl.closed);
  CHECK(cl.err < 0);
  CHECK_STR_CONTAINS(cl.why, "connect to 127.0.0.1:");
  CHECK_STR_CONTAINS(cl.why, "refused");
  lfx_finish(&f, &cl, 1);
}

/* conn_server_close also drops conns still in their handshake, so a loop
 * can end without waiting for their timeout. */
TEST(conn_server_close_drops_handshakes) {
  lfx f;
  uint8_t hello[WIRE_HEADER_SIZE + HELLO_LEN];
  int fd;
  lfx_init(&f, "server close", 3000, CONN_TRANSPORT_TCP);
  lfx_listen(&f, 60000);
  fd = raw_connect(f.port);
  /* wait for the accept, which sends HELLO */
  while (recv(fd, hello, sizeof hello, MSG_DONTWAIT | MSG_PEEK) < (ssize_t)sizeof hello)
    uv_run(&f.loop, UV_RUN_NOWAIT);
  conn_server_close(f.srv);
  f.srv = NULL;
  LFX_RUN_UNTIL(&f, f.ncloses == 1);
  CHECK_INT_EQ(f.closes[0].err, 0);
  CHECK_STR_CONTAINS(f.closes[0].why, "server 127.0.0.1:");
  raw_recv(fd, hello, sizeof hello);
  raw_expect_closed(fd);
  lfx_finish(&f, NULL, 0);
}

/* ---- send, then close ---------------------------------------------------- */

static uint8_t parting_words[256u << 10];

/* The server's answer to the first frame: a large frame, then the
 * shutdown; nothing may be sent after it. */
static void answer_and_shut(lrec *r, const wire_header *h, const uint8_t *p) {
  (void)h, (void)p;
  lfx_send_push(r->c, parting_words, sizeof parting_words, 9);
  conn_shutdown(r->c, "said my piece");
  conn_shutdown(r->c, "twice"); /* idempotent */
  CHECK(!conn_is_ready(r->c));
  CHECK_ERR(conn_send(r->c, malloc(WIRE_HEADER_SIZE), WIRE_HEADER_SIZE), DRV_EIO, "closing");
}

TEST(conn_shutdown_sends_then_closes) {
  lfx f;
  lrec cl[2];
  lfx_fill(parting_words, sizeof parting_words, 11);
  lfx_init(&f, "shutdown", 5000, CONN_TRANSPORT_TCP);
  lfx_listen(&f, 0);
  f.srv_frame = answer_and_shut;
  f.cli_ready = three_frames;
  lfx_connect(&f, &cl[0]);
  LFX_RUN_UNTIL(&f, cl[0].closed && f.nsrv == 1 && f.srv_recs[0].closed);
  /* the frame queued just before the shutdown arrived whole */
  CHECK_INT_EQ(cl[0].last_type, WIRE_PUSH);
  CHECK_INT_EQ(cl[0].last_req, 9);
  CHECK_INT_EQ(cl[0].last_len, sizeof parting_words);
  CHECK(memcmp(cl[0].last, parting_words, sizeof parting_words) == 0);
  CHECK_INT_EQ(cl[0].err, 0);
  CHECK_STR_CONTAINS(cl[0].why, "closed by 127.0.0.1:");
  /* the client's later frames never reached the owner */
  CHECK_INT_EQ(f.srv_recs[0].frames, 1);
  CHECK_INT_EQ(f.srv_recs[0].err, 0);
  CHECK_STR_CONTAINS(f.srv_recs[0].why, "said my piece");
  /* shut down before the connect completed: nothing to flush, a clean close */
  f.cli_ready = NULL;
  lfx_connect(&f, &cl[1]);
  conn_shutdown(cl[1].c, "changed my mind");
  LFX_RUN_UNTIL(&f, cl[1].closed);
  CHECK_INT_EQ(cl[1].ready, 0);
  CHECK_INT_EQ(cl[1].err, 0);
  CHECK_STR_CONTAINS(cl[1].why, "changed my mind");
  lfx_finish(&f, cl, 2);
}

/* A raw client that authenticates and then never reads until told to go. */
typedef struct deaf {
  lfx *f;
  uv_sem_t go;
} deaf;

static void deaf_thread(void *arg) {
  deaf *D = arg;
  int fd = raw_connect(D->f->port);
  raw_handshake(fd, &D->f->secret, true);
  uv_sem_wait(&D->go);
  close(fd);
}

static uint64_t shut_t0;

static void flood_then_shut(lrec *r) {
  for (int i = 0; i < 32; i++)
    CHECK_OK(conn_send_ref(r->c, WIRE_PUSH, (uint32_t)i, one_mib, sizeof one_mib, ref_done, r));
  shut_t0 = uv_now(&r->f->loop);
  conn_shutdown(r->c, "flooded");
  CHECK_ERR(conn_send_ref(r->c, WIRE_PUSH, 99, one_mib, 16, ref_done, r), DRV_EIO, "closing");
}

TEST(conn_shutdown_times_out_on_a_peer_that_does_not_read) {
  lfx f;
  deaf D = {.f = &f};
  uv_thread_t th;
  lfx_init(&f, "shutdown timeout", 5000, CONN_TRANSPORT_TCP);
  f.so.shutdown_ms = 300;
  lfx_listen(&f, 0);
  f.srv_ready = flood_then_shut;
  CHECK_INT_EQ(uv_sem_init(&D.go, 0), 0);
  CHECK_INT_EQ(uv_thread_create(&th, deaf_thread, &D), 0);
  LFX_RUN_UNTIL(&f, f.nsrv == 1 && f.srv_recs[0].closed);
  CHECK(uv_now(&f.loop) - shut_t0 >= 290);
  CHECK(f.srv_recs[0].err < 0);
  CHECK_STR_CONTAINS(f.srv_recs[0].why, "bytes unsent after 300 ms");
  /* 32 queued and one refused: each done ran once, all before on_close */
  CHECK_INT_EQ(f.srv_recs[0].n1, 33);
  uv_sem_post(&D.go);
  uv_thread_join(&th);
  uv_sem_destroy(&D.go);
  lfx_finish(&f, NULL, 0);
}

/* A flood of connections that never authenticate holds at most
 * max_handshaking descriptors: each new one drops the oldest, silently for
 * the owner (err 0) and in one counted log line; a client with the secret
 * still gets in. */
TEST(conn_unauthenticated_connections_are_bounded) {
  lfx f;
  lrec cl[1];
  enum { FLOOD = 30, BOUND = 8 };
  int fds[FLOOD];
  char logline[4096] = "";
  FILE *log = tmpfile();
  CHECK(log);
  lfx_init(&f, "handshake bound", 10000, CONN_TRANSPORT_TCP);
  log_setup(log, "test", LOG_WARN);
  f.so.max_handshaking = BOUND;
  lfx_listen(&f, 0);
  int most = 0;
  for (int i = 0; i < FLOOD; i++) {
    fds[i] = raw_connect(f.port);
    /* accepted one at a time: the bound holds at every step */
    LFX_RUN_UNTIL(&f, conn_server_handshaking(f.srv) == (i + 1 < BOUND ? i + 1 : BOUND) &&
                      f.ncloses == (i + 1 > BOUND ? i + 1 - BOUND : 0));
    if (conn_server_handshaking(f.srv) > most) most = conn_server_handshaking(f.srv);
  }
  CHECK_INT_EQ(most, BOUND);
  for (int i = 0; i < f.ncloses; i++) {
    CHECK_INT_EQ(f.closes[i].err, 0);
    CHECK_STR_CONTAINS(f.closes[i].why, "dropped before it authenticated");
  }
  raw_expect_closed(fds[0]); /* the oldest went first */
  rewind(log);
  CHECK(fread(logline, 1, sizeof logline - 1, log) > 0);
  CHECK_STR_CONTAINS(logline, "connections dropped before they authenticated");
  int lines = 0;
  for (const char *p = logline; (p = strstr(p, "dropped before they")); p++) lines++;
  CHECK_INT_EQ(lines, 1); /* 22 drops within a second: one line */
  fclose(log);
  log_setup(NULL, "test", LOG_WARN);
  f.cli_ready = push_on_ready;
  lfx_connect(&f, &cl[0]);
  LFX_RUN_UNTIL(&f, cl[0].last_len > 0);
  CHECK_INT_EQ(cl[0].ready, 1);
  for (int i = 1; i < FLOOD; i++) close(fds[i]);
  lfx_finish(&f, cl, 1);
}

/* One address holds at most max_per_addr waiting handshakes: its flood
 * drops its own oldest, never another address's. */
TEST(conn_unauthenticated_connections_are_bounded_per_address) {
  lfx f;
  enum { FLOOD = 24, PER = 16, OTHER = 4 }; /* under 32 closes in all */
  int fds[FLOOD], other[OTHER];
  lfx_init(&f, "per-address bound", 10000, CONN_TRANSPORT_TCP);
  f.so.max_handshaking = 40;
  f.so.max_per_addr = PER;
  lfx_listen(&f, 0);
  for (int i = 0; i < OTHER; i++) {
    other[i] = raw_connect_from(f.port, "127.0.0.2");
    LFX_RUN_UNTIL(&f, conn_server_handshaking(f.srv) == i + 1);
  }
  for (int i = 0; i < FLOOD; i++) {
    fds[i] = raw_connect(f.port);
    int held = i + 1 < PER ? i + 1 : PER;
    LFX_RUN_UNTIL(&f, conn_server_handshaking(f.srv) == OTHER + held &&
                      f.ncloses == (i + 1 > PER ? i + 1 - PER : 0));
  }
  for (int i = 0; i < f.ncloses; i++) CHECK_STR_CONTAINS(f.closes[i].why, "dropped before");
  raw_expect_closed(fds[0]); /* 127.0.0.1's oldest went */
  uint8_t hdr[WIRE_HEADER_SIZE];
  for (int i = 0; i < OTHER; i++) {
    /* 127.0.0.2's connections are still open: each got its HELLO */
    CHECK_INT_EQ((int)recv(other[i], hdr, sizeof hdr, MSG_PEEK), (int)sizeof hdr);
    close(other[i]);
  }
  for (int i = 1; i < FLOOD; i++) close(fds[i]);
  lfx_finish(&f, NULL, 0);
}
