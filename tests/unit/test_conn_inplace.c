/* test_conn_inplace.c - frames written and read in place (conn_inplace.c):
 * a PUSH encoded into the reservation (the ring of a shared-memory link, a
 * buffer on TCP) arrives whole; a large one on a link whose owner opted in
 * is read where it lies, its floats taken through conn_in_place and its
 * payload copied whole by conn_payload_copy; small frames, TCP and owners
 * that did not opt in get the usual copy; a reservation keeps the frames'
 * order behind a queued write; fields the peer rewrites in the ring after
 * the check change nothing the handler parses.
 */
#include <stdlib.h>

#include "harness.h"
#include "link_fixture.h"
#include "proto/wire_msgs.h"

#define BIG (256u << 10) /* floats: a 1 MiB tensor */
#define SMALL 1000u

static float *values(void) {
  static float v[BIG];
  for (size_t i = 0; i < BIG; i++) v[i] = (float)i * 0.5f - 7.0f;
  return v;
}

static void put_one(wire_wr *w, void *ud, uint32_t i) {
  (void)i;
  wire_put_item_var_tensor(w, ud);
}

/* PUSH { version 3, var 7: n floats } as wire_put_push encodes it. */
static void encode_push(wire_wr *w, const float *v, size_t n) {
  wire_item_var_tensor it = {.var = 7, .value = {.ndim = 1, .data = v}};
  it.value.shape[0] = (int64_t)n;
  wire_put_push(w, &(wire_msg_push){3, {1, .put = put_one, .ud = &it}});
}

static size_t push_len(size_t n) { return 8 + 4 + 4 + 1 + 8 + 4 * n; }

/* The same PUSH encoded into a reservation and committed. */
static void send_in_place(conn *c, const float *v, size_t n, uint32_t req) {
  size_t len = push_len(n);
  uint8_t *p = conn_send_reserve(c, len);
  wire_wr w;
  CHECK(p != NULL);
  CHECK(conn_send_reserve(c, 8) == NULL); /* one at a time */
  CHECK_STR_CONTAINS(err_msg(), "open already");
  wire_wr_init_fixed(&w, p - WIRE_HEADER_SIZE, WIRE_HEADER_SIZE + len);
  encode_push(&w, v, n);
  CHECK_INT_EQ(w.err, 0);
  CHECK_INT_EQ(w.len, WIRE_HEADER_SIZE + len);
  CHECK_OK(conn_send_commit(c, WIRE_PUSH, req));
}

/* What the server's frames showed: n1 read in place, n2 checked. */
static bool hostile;

static void check_push(lrec *r, const wire_header *h, const uint8_t *p) {
  wire_msg_push m;
  wire_item_var_tensor it;
  size_t n = h->req == 1 ? BIG : SMALL;
  CHECK_INT_EQ(h->type, WIRE_PUSH);
  CHECK_OK(wire_get_push(p, h->len, &m));
  wire_rd rd = wire_items_reader(&m.vars);
  wire_get_item_var_tensor(&rd, &it);
  CHECK_INT_EQ(it.value.shape[0], (int64_t)n);
  const uint8_t *data = conn_in_place(r->c, it.value.data);
  r->n1 += data != it.value.data;
  CHECK(memcmp(data, values(), 4 * n) == 0);
  /* the whole payload, floats included, as it was sent */
  wire_wr want;
  wire_wr_init(&want);
  encode_push(&want, values(), n);
  uint8_t *copy = malloc(h->len);
  CHECK(copy != NULL);
  conn_payload_copy(r->c, p, h->len, copy);
  CHECK_INT_EQ(want.len - WIRE_HEADER_SIZE, h->len);
  CHECK(memcmp(copy, want.buf + WIRE_HEADER_SIZE, h->len) == 0);
  free(copy);
  wire_wr_free(&want);
  if (hostile && data != it.value.data) {
    /* the peer rewrites count, var, ndim and dims in its ring now: what
     * the handler parses is the private copy, checked before */
    uint8_t *ring = (uint8_t *)conn_in_place(r->c, p);
    CHECK(ring != p);
    memset(ring + 8, 0xff, 4 + 4 + 1 + 8);
    CHECK_OK(wire_get_push(p, h->len, &m));
    CHECK_INT_EQ(m.vars.n, 1);
    rd = wire_items_reader(&m.vars);
    wire_get_item_var_tensor(&rd, &it);
    CHECK_INT_EQ(it.var, 7);
    CHECK_INT_EQ(it.value.shape[0], (int64_t)n);
  }
  r->n2++;
}

static void opt_in(lrec *r) { conn_set_in_place(r->c, true); }

/* A small frame ahead of the large one: copied alone, so that the large
 * one can still be read where it lies. */
static void big_then_small(lrec *r) {
  send_in_place(r->c, values(), SMALL, 2);
  send_in_place(r->c, values(), BIG, 1);
  send_in_place(r->c, values(), SMALL, 2);
}

/* The three PUSHes under `mode`, the server opted in or not: how many of them
 * it read in place. */
static long run(conn_transport_mode mode, bool in_place, const char *want) {
  lfx f;
  lrec cl;
  lfx_init(&f, want, 20000, mode);
  f.typed = true;
  lfx_listen(&f, 0);
  f.srv_frame = check_push;
  f.srv_ready = in_place ? opt_in : NULL;
  f.cli_ready = big_then_small;
  lfx_connect(&f, &cl);
  LFX_RUN_UNTIL(&f, f.nsrv == 1 && f.srv_recs[0].n2 == 3);
  CHECK(strcmp(conn_transport(cl.c), want) == 0);
  long n = f.srv_recs[0].n1;
  lfx_finish(&f, &cl, 1);
  return n;
}

TEST(inplace_large_push_read_where_it_lies) {
  hostile = false;
  CHECK_INT_EQ(run(CONN_TRANSPORT_AUTO, true, "shm"), 1); /* the large one only */
}

TEST(inplace_not_on_tcp_nor_without_opting_in) {
  hostile = false;
  CHECK_INT_EQ(run(CONN_TRANSPORT_TCP, true, "tcp"), 0);
  CHECK_INT_EQ(run(CONN_TRANSPORT_UNIX, true, "unix"), 0);
  CHECK_INT_EQ(run(CONN_TRANSPORT_AUTO, false, "shm"), 0);
}

TEST(inplace_fields_rewritten_in_the_ring_change_nothing) {
  hostile = true;
  CHECK_INT_EQ(run(CONN_TRANSPORT_AUTO, true, "shm"), 1);
  hostile = false;
}

/* A reservation behind a write still queued (a frame larger than the
 * ring) is a buffer, not ring room: the frames keep their order. A
 * cancelled one sends nothing; a closing conn reserves nothing. */
static void order_cli(lrec *r) {
  size_t big = 3u << 20;
  uint8_t *frame = calloc(1, WIRE_HEADER_SIZE + big);
  CHECK(frame != NULL);
  wire_header h = {.type = WIRE_PUSH, .req = 10, .len = (uint32_t)big};
  wire_header_encode(&h, frame);
  CHECK(conn_send_reserve(r->c, 100) != NULL);
  conn_send_cancel(r->c);
  CHECK_OK(conn_send(r->c, frame, WIRE_HEADER_SIZE + big));
  CHECK(conn_pending(r->c) > 0);
  uint8_t *p = conn_send_reserve(r->c, 12);
  CHECK(p != NULL);
  memcpy(p, "after it all", 12);
  CHECK_OK(conn_send_commit(r->c, WIRE_PUSH, 11));
}

static void order_srv(lrec *r, const wire_header *h, const uint8_t *p) {
  r->n1 = r->n1 * 100 + h->req;
  if (h->req == 11) CHECK(h->len == 12 && memcmp(p, "after it all", 12) == 0);
}

TEST(inplace_reservation_keeps_the_order) {
  lfx f;
  lrec cl;
  lfx_init(&f, "order", 20000, CONN_TRANSPORT_AUTO);
  lfx_listen(&f, 0);
  f.srv_frame = order_srv;
  f.cli_ready = order_cli;
  lfx_connect(&f, &cl);
  LFX_RUN_UNTIL(&f, f.nsrv == 1 && f.srv_recs[0].n1 >= 1011);
  CHECK_INT_EQ(f.srv_recs[0].n1, 1011); /* 10, then 11, and nothing else */
  CHECK(strcmp(conn_transport(cl.c), "shm") == 0);
  conn_close(cl.c, "bye");
  CHECK(conn_send_reserve(cl.c, 5) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "closing");
  lfx_finish(&f, &cl, 1);
}
