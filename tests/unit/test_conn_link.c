/* test_conn_link.c - conns between two ends of one process over a same-host
 * link (conn_shm.c): which transport each mode picks, round trips, order,
 * a frame many times the ring's size, a slow reader behind a full ring, a
 * wrong secret, and conn_shutdown. The hand-made and hostile peers are in
 * test_conn_link_peer.c. Each case sets the process's transport mode
 * itself (test_conn.c sets TCP) and runs under a watchdog.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "link_fixture.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include "net/conn_int.h"

/* ---- which path ---------------------------------------------------------- */

static void hb_to_client(lrec *r) { lfx_send_push(r->c, "from the server", 15, 5); }
static void push_on_ready(lrec *r) { lfx_send_push(r->c, "hello, ps: payload", 18, 42); }

static void cli_collect(lrec *r, const wire_header *h, const uint8_t *p) {
  if (h->req == 5) {
    CHECK_INT_EQ(h->len, 15);
    CHECK(memcmp(p, "from the server", 15) == 0);
    r->n1++;
    return;
  }
  lfx_record(r, h, p);
}

/* A round trip both ways under `mode` (and the server's offer on or off):
 * both ends report `want`, and a clean close is clean on both. */
static void roundtrip(conn_transport_mode mode, bool offer, const char *want) {
  lfx f;
  lrec cl;
  char pid[64], host[64];
  bool moved = strcmp(want, "tcp") != 0;
  lfx_init(&f, want, 10000, mode);
  lfx_listen(&f, 0);
  conn_server_set_offer(f.srv, offer);
  f.srv_ready = hb_to_client;
  f.cli_ready = push_on_ready;
  f.cli_frame = cli_collect;
  lfx_connect(&f, &cl);
  CHECK_STR_CONTAINS(conn_transport(cl.c), "tcp"); /* until it moves */
  LFX_RUN_UNTIL(&f, cl.n1 == 1 && cl.last_len > 0);
  CHECK_INT_EQ(cl.ready, 1);
  CHECK_INT_EQ(f.nsrv, 1);
  CHECK(strcmp(conn_transport(cl.c), want) == 0);
  CHECK(strcmp(conn_transport(f.srv_recs[0].c), want) == 0);
  CHECK_INT_EQ(f.moved, moved ? 1 : 0); /* the TCP conn it left closed cleanly */
  CHECK_INT_EQ(f.ncloses, 0);
  /* the echo: same type, req and bytes */
  CHECK_INT_EQ(cl.last_type, WIRE_PUSH);
  CHECK_INT_EQ(cl.last_req, 42);
  CHECK_INT_EQ(cl.last_len, 18);
  CHECK(memcmp(cl.last, "hello, ps: payload", 18) == 0);
  /* names: the client keeps the address it dialled; the server names a
   * same-host peer by its process */
  snprintf(pid, sizeof pid, "local pid %d", (int)getpid());
  CHECK_STR_CONTAINS(conn_peer(cl.c), "127.0.0.1:");
  CHECK_STR_CONTAINS(conn_peer(f.srv_recs[0].c), moved ? pid : "127.0.0.1:");
  CHECK_OK(conn_local_host(cl.c, host, sizeof host));
  CHECK_STR_CONTAINS(host, "127.0.0.1");
  conn_close(cl.c, "bye");
  LFX_RUN_UNTIL(&f, cl.closed && f.srv_recs[0].closed);
  CHECK_INT_EQ(cl.err, 0);
  CHECK_STR_CONTAINS(cl.why, "bye");
  CHECK_INT_EQ(f.srv_recs[0].err, 0);
  CHECK_STR_CONTAINS(f.srv_recs[0].why, moved ? "closed by local pid" : "closed by 127.0.0.1:");
  lfx_finish(&f, &cl, 1);
}

TEST(link_auto_is_shared_memory_both_ends) { roundtrip(CONN_TRANSPORT_AUTO, true, "shm"); }
TEST(link_unix_mode_is_a_unix_socket) { roundtrip(CONN_TRANSPORT_UNIX, true, "unix"); }
TEST(link_tcp_mode_stays_on_tcp) { roundtrip(CONN_TRANSPORT_TCP, true, "tcp"); }
TEST(link_not_offered_stays_on_tcp) { roundtrip(CONN_TRANSPORT_AUTO, false, "tcp"); }

/* The offer is the server's, the taking the client's: a server listening
 * in auto offers, a client whose mode is then tcp declines. */
TEST(link_tcp_client_declines_the_offer) {
  lfx f;
  lrec cl;
  uint8_t host[WIRE_HOST_ID_SIZE], token[WIRE_LINK_SIZE];
  static const uint8_t zero[WIRE_HOST_ID_SIZE];
  lfx_init(&f, "declined offer", 10000, CONN_TRANSPORT_AUTO);
  lfx_listen(&f, 0);
  lfx_offer(&f, host, token);
  CHECK(memcmp(host, zero, sizeof host) != 0);
  CHECK(memcmp(token, zero, sizeof token) != 0);
  conn_set_transport(CONN_TRANSPORT_TCP);
  f.cli_ready = push_on_ready;
  lfx_connect(&f, &cl);
  LFX_RUN_UNTIL(&f, cl.last_len > 0);
  CHECK_STR_CONTAINS(conn_transport(cl.c), "tcp");
  CHECK_STR_CONTAINS(conn_transport(f.srv_recs[0].c), "tcp");
  CHECK_INT_EQ(f.moved, 0);
  lfx_finish(&f, &cl, 1);
}

/* A conn's own mode wins over the process's, both ways: a server and a
 * client of their own auto in a process of tcp link through shared memory,
 * and a client of its own tcp in a process of auto stays on TCP (two
 * clusters of one REPL, each with its transport). */
TEST(link_own_transport_wins_over_the_process_mode) {
  lfx f;
  lrec cl[2];
  lfx_init(&f, "own modes", 10000, CONN_TRANSPORT_TCP);
  f.so.own_transport = true;
  f.so.transport = CONN_TRANSPORT_AUTO;
  lfx_listen(&f, 0);
  f.cli_ready = push_on_ready;
  lfx_connect_own(&f, &cl[0], CONN_TRANSPORT_AUTO);
  LFX_RUN_UNTIL(&f, cl[0].last_len > 0);
  CHECK_STR_CONTAINS(conn_transport(cl[0].c), "shm");
  CHECK_STR_CONTAINS(conn_transport(f.srv_recs[0].c), "shm");
  conn_set_transport(CONN_TRANSPORT_AUTO); /* the offer stands: the server's own mode */
  lfx_connect_own(&f, &cl[1], CONN_TRANSPORT_TCP);
  LFX_RUN_UNTIL(&f, cl[1].last_len > 0);
  CHECK_STR_CONTAINS(conn_transport(cl[1].c), "tcp");
  CHECK_INT_EQ(f.moved, 1);
  lfx_finish(&f, cl, 2);
}

/* A TCP client that closes after the offered HELLO has moved to a link
 * only if it is on this host: the server asks whether the peer's address
 * is one of its own (a remote client closing there failed its handshake,
 * and is logged so). */
static bool local4(const char *ip) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  CHECK_INT_EQ(inet_pton(AF_INET, ip, &a.sin_addr), 1);
  return conn__addr_is_local((struct sockaddr *)&a);
}

static bool local6(const char *ip) {
  struct sockaddr_in6 a = {.sin6_family = AF_INET6};
  CHECK_INT_EQ(inet_pton(AF_INET6, ip, &a.sin6_addr), 1);
  return conn__addr_is_local((struct sockaddr *)&a);
}

TEST(link_offer_taken_only_by_peers_of_this_host) {
  CHECK(local4("127.0.0.1") && local4("127.3.4.5"));
  CHECK(local6("::1") && local6("::ffff:127.0.0.1"));
  CHECK(!local4("192.0.2.7") && !local6("2001:db8::7") && !local6("::ffff:192.0.2.7"));
  struct ifaddrs *all;
  int seen = 0;
  CHECK_INT_EQ(getifaddrs(&all), 0);
  for (struct ifaddrs *i = all; i; i = i->ifa_next) /* each interface's own address */
    if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)) {
      CHECK(conn__addr_is_local(i->ifa_addr));
      seen++;
    }
  freeifaddrs(all);
  CHECK(seen > 0);
}

/* ---- many frames, big frames --------------------------------------------- */

#define NSMALL 20000

static size_t small_len(long i) { return 12 + (size_t)(i % 53); }

static void small_check(lrec *r, const wire_header *h, const uint8_t *p) {
  uint8_t want[64];
  long i = r->n1++;
  CHECK_INT_EQ(h->req, i);
  CHECK_INT_EQ(h->len, small_len(i));
  lfx_fill(want, h->len, (uint64_t)i);
  CHECK(memcmp(p, want, h->len) == 0);
}

static void small_at_server(lrec *r, const wire_header *h, const uint8_t *p) {
  small_check(r, h, p);
  lfx_echo(r, h, p);
}

static void small_send_all(lrec *r) {
  uint8_t buf[64];
  for (long i = 0; i < NSMALL; i++) {
    lfx_fill(buf, small_len(i), (uint64_t)i);
    lfx_send_push(r->c, buf, small_len(i), (uint32_t)i);
  }
}

TEST(link_many_small_frames_in_order) {
  lfx f;
  lrec cl;
  lfx_init(&f, "many small frames", 20000, CONN_TRANSPORT_AUTO);
  lfx_listen(&f, 0);
  f.srv_frame = small_at_server;
  f.cli_frame = small_check;
  f.cli_ready = small_send_all;
  lfx_connect(&f, &cl);
  LFX_RUN_UNTIL(&f, cl.n1 == NSMALL);
  CHECK_INT_EQ(f.srv_recs[0].n1, NSMALL);
  CHECK_STR_CONTAINS(conn_transport(cl.c), "shm");
  LFX_RUN_UNTIL(&f, conn_pending(cl.c) == 0 && conn_pending(f.srv_recs[0].c) == 0);
  lfx_finish(&f, &cl, 1);
}

/* 64 MiB out with conn_send_ref through a 2 MiB ring, checked at the
 * server, echoed back with conn_send and compared at the client. */
#define BIG (64u << 20)
static uint8_t *big;

static void big_done(void *arg) { ((lfx *)arg)->counter++; }

static void big_send(lrec *r) {
  CHECK_OK(conn_send_ref(r->c, WIRE_PUSH, 9, big, BIG, big_done, r->f));
  /* a write counts as pending until its last byte is out, as on TCP */
  CHECK_INT_EQ(conn_pending(r->c), BIG + WIRE_HEADER_SIZE);
  CHECK_INT_EQ(r->f->counter, 0); /* `done` never runs synchronously */
}

static void big_at_server(lrec *r, const wire_header *h, const uint8_t *p) {
  CHECK_INT_EQ(h->len, BIG);
  CHECK(memcmp(p, big, BIG) == 0);
  lfx_echo(r, h, p);
}

static void big_at_client(lrec *r, const wire_header *h, const uint8_t *p) {
  CHECK_INT_EQ(h->req, 9);
  CHECK_INT_EQ(h->len, BIG);
  CHECK(memcmp(p, big, BIG) == 0);
  r->n1++;
}

static void big_roundtrip(conn_transport_mode mode, const char *want) {
  lfx f;
  lrec cl;
  lfx_init(&f, "64 MiB round trip", 60000, mode);
  big = malloc(BIG);
  CHECK(big);
  lfx_fill(big, BIG, 99);
  lfx_listen(&f, 0);
  f.cli_ready = big_send;
  f.srv_frame = big_at_server;
  f.cli_frame = big_at_client;
  lfx_connect(&f, &cl);
  LFX_RUN_UNTIL(&f, cl.n1 == 1);
  CHECK(strcmp(conn_transport(cl.c), want) == 0);
  CHECK_INT_EQ(f.counter, 1);
  CHECK_INT_EQ(conn_pending(cl.c), 0);
  CHECK_INT_EQ(f.srv_recs[0].frames, 1);
  lfx_finish(&f, &cl, 1);
  free(big);
}

TEST(link_64mib_frame_streams_through_the_ring) { big_roundtrip(CONN_TRANSPORT_AUTO, "shm"); }
TEST(link_64mib_frame_over_a_unix_socket) { big_roundtrip(CONN_TRANSPORT_UNIX, "unix"); }

/* ---- a slow reader ------------------------------------------------------- */

/* The server on its own thread and loop; its on_frame stops at the first
 * frame until the client has seen the ring fill, and checks every frame's
 * order and bytes. */
#define RING (64u << 10)
#define SLOW_FRAMES 44
typedef struct slow {
  uv_loop_t loop;
  uv_async_t stop;
  uv_sem_t listening;
  auth_secret *secret;
  conn_server *srv;
  conn *c;
  int port;
  atomic_int stalled, go;
  atomic_long got;
} slow;

static size_t slow_len(uint32_t i) {
  return i == 1 ? 8u << 20 : i == 42 ? 3u << 20 : i == 43 ? 1u << 20 : 100 + 37 * i;
}

static void slow_ready(conn *c) { ((slow *)conn_ud(c))->c = c; }

static void slow_frame(conn *c, const wire_header *h, const uint8_t *p) {
  slow *S = conn_ud(c);
  long i = atomic_load(&S->got);
  uint8_t *want;
  if (i == 0) {
    atomic_store(&S->stalled, 1);
    for (int k = 0; !atomic_load(&S->go); k++) {
      if (k > 20000) harness_fail(__FILE__, __LINE__, "slow reader: never told to go on");
      usleep(1000);
    }
  }
  CHECK_INT_EQ(h->req, i);
  CHECK_INT_EQ(h->len, slow_len((uint32_t)i));
  want = malloc(h->len);
  CHECK(want);
  lfx_fill(want, h->len, (uint64_t)i + 1000);
  CHECK(memcmp(p, want, h->len) == 0);
  free(want);
  atomic_store(&S->got, i + 1);
}

static void slow_closed(conn *c, int err, const char *why) { (void)c, (void)err, (void)why; }

static const conn_cbs slow_cbs = {slow_ready, slow_frame, slow_closed};

static void slow_stop(uv_async_t *a) {
  slow *S = a->data;
  if (S->c) conn_close(S->c, "test over");
  conn_server_close(S->srv);
  uv_close((uv_handle_t *)a, NULL);
}

static void slow_thread(void *arg) {
  slow *S = arg;
  conn_opts o = {.secret = S->secret, .cbs = &slow_cbs, .ud = S, .opaque = true};
  CHECK_INT_EQ(uv_loop_init(&S->loop), 0);
  uv_async_init(&S->loop, &S->stop, slow_stop);
  S->stop.data = S;
  CHECK_OK(conn_listen(&S->loop, "127.0.0.1", 0, &o, &S->srv, &S->port));
  uv_sem_post(&S->listening);
  uv_run(&S->loop, UV_RUN_DEFAULT);
  CHECK_INT_EQ(uv_loop_close(&S->loop), 0);
}

static size_t slow_send(conn *c, uint32_t i) {
  size_t n = slow_len(i);
  uint8_t *p = malloc(n);
  CHECK(p);
  lfx_fill(p, n, (uint64_t)i + 1000);
  lfx_send_push(c, p, n, i);
  free(p);
  return WIRE_HEADER_SIZE + n;
}

TEST(link_slow_reader_behind_a_full_ring) {
  lfx f;
  lrec cl;
  slow S = {0};
  uv_thread_t th;
  size_t total = 0, p1, p2;
  lfx_init(&f, "slow reader", 60000, CONN_TRANSPORT_AUTO);
  setenv("DROVER_SHM_RING", "65536", 1);
  S.secret = &f.secret;
  CHECK_INT_EQ(uv_sem_init(&S.listening, 0), 0);
  CHECK_INT_EQ(uv_thread_create(&th, slow_thread, &S), 0);
  uv_sem_wait(&S.listening);
  f.port = S.port;
  lfx_connect(&f, &cl);
  LFX_RUN_UNTIL(&f, cl.ready);
  CHECK_STR_CONTAINS(conn_transport(cl.c), "shm");
  for (uint32_t i = 0; i < 43; i++) total += slow_send(cl.c, i);
  lfx_ticking(&f, true);
  LFX_RUN_UNTIL(&f, atomic_load(&S.stalled));
  /* The reader sits in its first frame: at most the ring and one read
   * buffer (64 KiB) left the writer, and nothing more moves. */
  lfx_run_for(&f, 100);
  p1 = conn_pending(cl.c);
  CHECK(p1 >= total - 2 * RING && p1 < total);
  lfx_run_for(&f, 100);
  p2 = conn_pending(cl.c);
  CHECK_INT_EQ(p2, p1);
  /* what is sent now waits whole */
  total += slow_send(cl.c, 43);
  CHECK_INT_EQ(conn_pending(cl.c), p1 + WIRE_HEADER_SIZE + slow_len(43));
  atomic_store(&S.go, 1);
  lfx_ticking(&f, true);
  LFX_RUN_UNTIL(&f, atomic_load(&S.got) == SLOW_FRAMES && conn_pending(cl.c) == 0);
  lfx_ticking(&f, false);
  CHECK(!cl.closed);
  uv_async_send(&S.stop);
  uv_thread_join(&th);
  LFX_RUN_UNTIL(&f, cl.closed);
  CHECK_INT_EQ(cl.err, 0);
  uv_sem_destroy(&S.listening);
  lfx_finish(&f, &cl, 1);
}

/* ---- refusal and closing ------------------------------------------------- */

TEST(link_wrong_secret_refused_over_the_link) {
  lfx f;
  lrec cl[2];
  auth_secret other;
  int err = 0;
  const char *why;
  lfx_init(&f, "wrong secret", 10000, CONN_TRANSPORT_AUTO);
  lfx_listen(&f, 0);
  CHECK_OK(auth_secret_generate(&other));
  f.cli_ready = push_on_ready;
  lfx_connect_with(&f, &cl[0], &other);
  LFX_RUN_UNTIL(&f, cl[0].closed && f.ncloses == 1);
  CHECK_INT_EQ(f.moved, 1); /* refused on the link, not on TCP */
  CHECK_INT_EQ(cl[0].ready, 0);
  CHECK(cl[0].err < 0);
  CHECK_STR_CONTAINS(cl[0].why, "closed the connection during the handshake (wrong secret?)");
  CHECK_INT_EQ(f.nsrv, 0);
  why = lfx_close_with(&f, "authentication failed", &err);
  CHECK(why && err < 0);
  CHECK_STR_CONTAINS(why, "local pid");
  /* the server still takes a client that holds the secret */
  lfx_connect(&f, &cl[1]);
  LFX_RUN_UNTIL(&f, cl[1].last_len > 0);
  CHECK_STR_CONTAINS(conn_transport(cl[1].c), "shm");
  CHECK_INT_EQ(cl[1].last_len, 18);
  lfx_finish(&f, cl, 2);
}

/* More than the ring holds, then the shutdown: it waits for the reader. */
#define PARTING (5u << 20)
static uint8_t *parting;
static const char *shut_want;

static void answer_and_shut(lrec *r, const wire_header *h, const uint8_t *p) {
  (void)h, (void)p;
  CHECK(strcmp(conn_transport(r->c), shut_want) == 0);
  lfx_send_push(r->c, parting, PARTING, 9);
  conn_shutdown(r->c, "said my piece");
  CHECK(!conn_is_ready(r->c));
  CHECK_ERR(conn_send(r->c, malloc(WIRE_HEADER_SIZE), WIRE_HEADER_SIZE), DRV_EIO, "closing");
}

static void three_frames(lrec *r) {
  for (uint32_t i = 0; i < 3; i++) lfx_send_push(r->c, "abcdefghijkl", 12, i);
}

static void shutdown_flushes(conn_transport_mode mode, const char *want) {
  lfx f;
  lrec cl;
  parting = malloc(PARTING);
  shut_want = want;
  CHECK(parting);
  lfx_fill(parting, PARTING, 11);
  lfx_init(&f, "shutdown", 20000, mode);
  lfx_listen(&f, 0);
  f.srv_frame = answer_and_shut;
  f.cli_ready = three_frames;
  lfx_connect(&f, &cl);
  LFX_RUN_UNTIL(&f, cl.closed && f.nsrv == 1 && f.srv_recs[0].closed);
  /* the frame queued just before the shutdown arrived whole */
  CHECK_INT_EQ(cl.last_req, 9);
  CHECK_INT_EQ(cl.last_len, PARTING);
  CHECK(memcmp(cl.last, parting, PARTING) == 0);
  CHECK_INT_EQ(cl.err, 0);
  CHECK_STR_CONTAINS(cl.why, "closed by 127.0.0.1:");
  /* the client's later frames never reached the owner */
  CHECK_INT_EQ(f.srv_recs[0].frames, 1);
  CHECK_INT_EQ(f.srv_recs[0].err, 0);
  CHECK_STR_CONTAINS(f.srv_recs[0].why, "said my piece");
  CHECK_INT_EQ(f.moved, 1);
  lfx_finish(&f, &cl, 1);
  free(parting);
}

TEST(link_shutdown_sends_then_closes) { shutdown_flushes(CONN_TRANSPORT_AUTO, "shm"); }
TEST(link_shutdown_sends_then_closes_unix) { shutdown_flushes(CONN_TRANSPORT_UNIX, "unix"); }
