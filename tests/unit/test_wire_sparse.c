/* test_wire_sparse.c - the sparse-table messages (wire_msgs.h, "Sparse
 * tables"): SPARSE_PUSH and SPARSE_PULL read back their ids and rows; a
 * count or a shape that claims more than the frame holds, or whose size
 * overflows, is refused by the decoder; decoded ids out of order or past
 * the declared rows are refused by sptable_check_ids; no server takes
 * these frames yet. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "numeric/sptable.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"

#define PAYLOAD(w) ((w).buf + WIRE_HEADER_SIZE)
#define PAYLOAD_LEN(w) ((w).len - WIRE_HEADER_SIZE)

static const uint64_t IDS[3] = {3, 9, 20};

static void put_id(wire_wr *w, void *ud, uint32_t i) {
  wire_put_item_sparse_id(w, &(wire_item_sparse_id){.id = ((const uint64_t *)ud)[i]});
}

/* The decoded ids of a list, at most cap of them; their count. */
static uint32_t read_ids(const wire_items *it, uint64_t *out, uint32_t cap) {
  wire_rd r = wire_items_reader(it);
  for (uint32_t i = 0; i < it->n && i < cap; i++) {
    wire_item_sparse_id x;
    wire_get_item_sparse_id(&r, &x);
    out[i] = x.id;
  }
  return it->n;
}

TEST(wire_sparse_push_reads_back_ids_and_rows) {
  float g[6] = {1, -2, 3.5f, 4, 0, -0.25f};
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sparse_push(&w, &(wire_msg_sparse_push){
                               .table = 1, .version = 5,
                               .ids = {.n = 3, .put = put_id, .ud = (void *)IDS},
                               .grads = {.ndim = 2, .shape = {3, 2}, .data = g}});
  CHECK_OK(wire_wr_finish(&w, WIRE_SPARSE_PUSH, 0));
  CHECK_OK(wire_validate_payload(WIRE_SPARSE_PUSH, PAYLOAD(w), PAYLOAD_LEN(w)));
  wire_msg_sparse_push m;
  CHECK_OK(wire_get_sparse_push(PAYLOAD(w), PAYLOAD_LEN(w), &m));
  CHECK_INT_EQ(m.table, 1);
  CHECK_INT_EQ(m.version, 5);
  uint64_t ids[3];
  CHECK_INT_EQ(read_ids(&m.ids, ids, 3), 3);
  CHECK(memcmp(ids, IDS, sizeof ids) == 0);
  CHECK_OK(sptable_check_ids(21, m.grads.shape[1], ids, m.ids.n, "SPARSE_PUSH"));
  CHECK_INT_EQ(m.grads.shape[0], 3);
  float back[6];
  wire_tensor_to(&m.grads, back);
  CHECK(memcmp(back, g, sizeof back) == 0);
  for (size_t cut = 0; cut < PAYLOAD_LEN(w); cut++) /* every truncation is refused */
    CHECK(wire_get_sparse_push(PAYLOAD(w), cut, &m) < 0);
  /* Decoded fine, yet id 20 is past a 20-row table: the ps refuses it. */
  CHECK_ERR(sptable_check_ids(20, 2, ids, 3, "SPARSE_PUSH"), DRV_ERANGE, "id 20 is outside");
  wire_wr_free(&w);
}

/* SPARSE_PULL: table u32, min_version u64, count u32, count u64 ids. */
TEST(wire_sparse_pull_refuses_lying_counts_and_bad_ids) {
  uint8_t p[4 + 8 + 4 + 16];
  memset(p, 0, sizeof p);
  uint32_t n = UINT32_MAX; /* 2^32 - 1 ids claimed, two there */
  memcpy(p + 12, &n, 4);
  wire_msg_sparse_pull m;
  CHECK(wire_get_sparse_pull(p, sizeof p, &m) < 0);
  CHECK(wire_validate_payload(WIRE_SPARSE_PULL, p, sizeof p) < 0);
  n = 2;
  memcpy(p + 12, &n, 4);
  uint64_t a = 7, b = 7;
  memcpy(p + 16, &a, 8);
  memcpy(p + 24, &b, 8);
  CHECK_OK(wire_get_sparse_pull(p, sizeof p, &m));
  uint64_t ids[2];
  CHECK_INT_EQ(read_ids(&m.ids, ids, 2), 2);
  CHECK_ERR(sptable_check_ids(100, 16, ids, 2, "SPARSE_PULL"), DRV_EINVAL, "sorted and unique");
}

/* SPARSE_PUSH whose grads claim 2^62 x 4 floats: the byte count overflows. */
TEST(wire_sparse_push_refuses_overflowing_shapes) {
  uint8_t p[4 + 8 + 4 + 1 + 16 + 32];
  memset(p, 0, sizeof p);
  p[16] = 2; /* ndim, after table, version and an empty id list */
  uint64_t big = (uint64_t)1 << 62, four = 4, two = 2;
  memcpy(p + 17, &big, 8);
  memcpy(p + 25, &four, 8);
  wire_msg_sparse_push m;
  CHECK(wire_get_sparse_push(p, sizeof p, &m) < 0);
  CHECK(wire_validate_payload(WIRE_SPARSE_PUSH, p, sizeof p) < 0);
  memcpy(p + 17, &two, 8); /* [2, 4]: 32 bytes, all there */
  CHECK_OK(wire_get_sparse_push(p, sizeof p, &m));
  CHECK(wire_get_sparse_push(p, sizeof p - 1, &m) < 0);
}

/* A ps takes the table's creation and its dump from the coordinator only,
 * row gradients from a trainer only, pulls from both; no other server
 * takes any of them (conn.c refuses them by type). */
TEST(wire_sparse_frames_are_taken_only_from_their_senders) {
  for (int p = 0; p < WIRE_PEER_COUNT; p++) {
    bool allow[256] = {false};
    uint32_t max_len[256] = {0};
    wire_peer_allow((wire_peer)p, allow, max_len);
    bool coord = p == WIRE_PEER_PS_COORD, trainer = p == WIRE_PEER_PS_TRAINER;
    CHECK(allow[WIRE_SPARSE_INIT] == coord && allow[WIRE_SPARSE_DUMP] == coord &&
          allow[WIRE_SPARSE_LOAD] == coord);
    CHECK(allow[WIRE_SPARSE_PUSH] == trainer);
    CHECK(allow[WIRE_SPARSE_PULL] == (coord || trainer));
    CHECK(!allow[WIRE_SPARSE_INIT_OK] && !allow[WIRE_SPARSE_PULL_REPLY] &&
          !allow[WIRE_SPARSE_DUMP_REPLY]);
  }
}
