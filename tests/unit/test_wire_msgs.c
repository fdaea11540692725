/* test_wire_msgs.c - the codecs generated from wire_msgs.h: every sample
 * of every message decodes, re-encodes to the same bytes and validates;
 * every truncation is refused; lists, strings and tensors read back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"

#define PAYLOAD(w) ((w).buf + WIRE_HEADER_SIZE)
#define PAYLOAD_LEN(w) ((w).len - WIRE_HEADER_SIZE)

/* Decodes the payload as its type and writes it back with the encoder:
 * 0 when the bytes match, -1 when they differ, or the decoder's error. */
static int round_trip(uint8_t type, const uint8_t *p, size_t n) {
  wire_wr w;
  wire_wr_init(&w);
  int rc = DRV_EINVAL;
  switch (type) {
#define XX(num, NAME, name, pre_auth, max, from) \
  case num: {                                    \
    wire_msg_##name m;                           \
    rc = wire_get_##name(p, n, &m);              \
    if (rc == 0) wire_put_##name(&w, &m);        \
    break;                                       \
  }
    WIRE_TYPE_MAP(XX)
#undef XX
  }
  if (rc == 0) rc = wire_wr_finish(&w, type, 0);
  if (rc == 0 && (PAYLOAD_LEN(w) != n || memcmp(PAYLOAD(w), p, n) != 0)) rc = -1;
  wire_wr_free(&w);
  return rc;
}

TEST(wire_msgs_every_sample_round_trips) {
#define XX(num, NAME, name, pre_auth, max, from)                                        \
  for (unsigned v = 0; v < WIRE_SAMPLE_VARIANTS; v++) {                                 \
    wire_wr w;                                                                          \
    CHECK_OK(wire_sample(num, v, &w));                                                  \
    wire_header h;                                                                      \
    CHECK_OK(wire_header_decode(w.buf, WIRE_DEFAULT_MAX_FRAME, true, &h));              \
    CHECK(h.type == num && h.req == v + 1 && h.len == PAYLOAD_LEN(w));                  \
    CHECK_OK(wire_validate_payload(num, PAYLOAD(w), h.len));                            \
    if (round_trip(num, PAYLOAD(w), h.len) != 0)                                        \
      harness_fail(__FILE__, __LINE__, "%s sample %u does not round-trip: %s", #NAME, v, \
                   err_msg());                                                       \
    wire_wr_free(&w);                                                                   \
  }
  WIRE_TYPE_MAP(XX)
#undef XX
  wire_wr w;
  CHECK_ERR(wire_sample(0x7f, 0, &w), DRV_EINVAL, "unknown frame type 0x7f");
}

TEST(wire_msgs_every_truncation_is_refused) {
#define XX(num, NAME, name, pre_auth, max, from)                                           \
  for (unsigned v = 0; v < WIRE_SAMPLE_VARIANTS; v++) {                                    \
    wire_wr w;                                                                             \
    CHECK_OK(wire_sample(num, v, &w));                                                     \
    size_t n = PAYLOAD_LEN(w);                                                             \
    for (size_t k = 0; k < n; k++) {                                                       \
      uint8_t *cut = malloc(k ? k : 1); /* exact size: ASan sees any overread */          \
      memcpy(cut, PAYLOAD(w), k);                                                          \
      wire_msg_##name m;                                                                   \
      if (wire_get_##name(cut, k, &m) == 0 || wire_validate_payload(num, cut, k) == 0)    \
        harness_fail(__FILE__, __LINE__, "%s sample %u: prefix of %zu bytes accepted",     \
                     #NAME, v, k);                                                         \
      free(cut);                                                                           \
    }                                                                                      \
    uint8_t *longer = malloc(n + 1);                                                       \
    memcpy(longer, PAYLOAD(w), n);                                                         \
    longer[n] = 0;                                                                         \
    wire_msg_##name m;                                                                     \
    CHECK_ERR(wire_get_##name(longer, n + 1, &m), DRV_EPARSE, "unexpected bytes");         \
    free(longer);                                                                          \
    wire_wr_free(&w);                                                                      \
  }
  WIRE_TYPE_MAP(XX)
#undef XX
}

/* Lists read back item by item, nested ones too, with their views. */
TEST(wire_msgs_lists_strings_and_tensors_read_back) {
  wire_wr w;
  CHECK_OK(wire_sample(WIRE_SETUP, 0, &w));
  wire_msg_setup m;
  CHECK_OK(wire_get_setup(PAYLOAD(w), PAYLOAD_LEN(w), &m));
  CHECK(m.model.len == 5 && memcmp(m.model.s, "model", 5) == 0);
  CHECK_INT_EQ(m.batch, (1 << 20));
  CHECK_INT_EQ(m.vars.n, 2);
  wire_rd r = wire_items_reader(&m.vars);
  for (uint32_t i = 0; i < m.vars.n; i++) {
    wire_item_setup_var v;
    wire_get_item_setup_var(&r, &v);
    CHECK_INT_EQ(v.shape.ndim, 2);
    CHECK_INT_EQ(v.shape.shape[1], 3);
    CHECK_INT_EQ(v.shards.n, 2 - i); /* item i is variant i */
    wire_rd sr = wire_items_reader(&v.shards);
    for (uint32_t s = 0; s < v.shards.n; s++) {
      wire_item_setup_shard sh;
      wire_get_item_setup_shard(&sr, &sh);
      CHECK_INT_EQ(sh.ps, 1000 * (i + s) + 2);
    }
    CHECK(wire_rd_done(&sr, WIRE_SETUP) == 0);
  }
  CHECK(wire_rd_done(&r, WIRE_SETUP) == 0);
  CHECK_INT_EQ(m.x.ndim, 2);
  CHECK_INT_EQ(wire_tensor_numel(&m.x), 6);
  float x[6];
  wire_tensor_to(&m.x, x);
  CHECK(x[0] == -2.5f && x[5] == 2.5f);
  char small[4];
  CHECK_ERR(wire_str_copy(m.model, small, sizeof small), DRV_EPARSE,
            "string of 5 bytes does not fit in 3");
  char big[8];
  CHECK_OK(wire_str_copy(m.model, big, sizeof big));
  CHECK(strcmp(big, "model") == 0);
  wire_wr_free(&w);
}

/* The checks the field kinds add: roles, flags, enums, positive numbers. */
TEST(wire_msgs_field_kinds_check_their_ranges) {
  wire_wr w;
  wire_wr_init(&w);
  wire_msg_attach a = {.control = true, .hz = 0};
  wire_put_attach(&w, &a);
  CHECK_OK(wire_wr_finish(&w, WIRE_ATTACH, 0));
  CHECK_ERR(wire_get_attach(PAYLOAD(w), PAYLOAD_LEN(w), &a), DRV_EPARSE, "ATTACH hz is 0");
  wire_wr_free(&w);
  wire_wr_init(&w);
  wire_msg_command c = {.kind = WIRE_COMMAND_LAST + 1, .text = WIRE_STR("x")};
  wire_put_command(&w, &c);
  CHECK_OK(wire_wr_finish(&w, WIRE_COMMAND, 0));
  CHECK_ERR(wire_get_command(PAYLOAD(w), PAYLOAD_LEN(w), &c), DRV_EPARSE, "unknown COMMAND kind");
  wire_wr_free(&w);
  wire_wr_init(&w);
  wire_msg_push_ok po = {.step = 3, .applied = true};
  wire_put_push_ok(&w, &po);
  CHECK_OK(wire_wr_finish(&w, WIRE_PUSH_OK, 0));
  PAYLOAD(w)[8] = 2;
  CHECK_ERR(wire_get_push_ok(PAYLOAD(w), PAYLOAD_LEN(w), &po), DRV_EPARSE,
            "PUSH_OK applied is 2 (expected 0 or 1)");
  wire_wr_free(&w);
}

/* Reading in place (conn_inplace.c): every sample PUSH and PULL_REPLY and
 * every truncation of them. The copy holds every field but the floats,
 * validates and decodes as the payload does, to the same shapes; its float
 * bytes are left alone; a layout that does not walk to the end is
 * refused, and another type is not read in place. */
TEST(wire_msgs_tensor_meta_copies_all_but_the_floats) {
  static const uint8_t types[] = {WIRE_PUSH, WIRE_PULL_REPLY};
  for (int t = 0; t < 2; t++)
    for (unsigned v = 0; v < WIRE_SAMPLE_VARIANTS; v++) {
      wire_wr w;
      CHECK_OK(wire_sample(types[t], v, &w));
      size_t n = PAYLOAD_LEN(w);
      uint8_t *dst = malloc(n);
      memset(dst, 0xa5, n);
      CHECK_OK(wire_copy_tensor_meta(types[t], dst, PAYLOAD(w), n));
      CHECK_OK(wire_validate_payload(types[t], dst, n));
      wire_msg_push m; /* PUSH and PULL_REPLY: version, var_tensor items */
      CHECK_OK(wire_get_push(dst, n, &m));
      wire_rd r = wire_items_reader(&m.vars);
      size_t floats = 0;
      for (uint32_t i = 0; i < m.vars.n; i++) {
        wire_item_var_tensor it;
        wire_get_item_var_tensor(&r, &it);
        size_t k = 4 * (size_t)wire_tensor_numel(&it.value);
        const uint8_t *at = it.value.data;
        for (size_t b = 0; b < k; b++) CHECK_INT_EQ(at[b], 0xa5); /* not copied */
        memcpy((uint8_t *)at, PAYLOAD(w) + (at - dst), k);      /* as conn_payload_copy */
        floats += k;
      }
      CHECK(memcmp(dst, PAYLOAD(w), n) == 0); /* every other byte was copied */
      CHECK(floats > 0 || m.vars.n == 0);
      for (size_t k = 0; k < n; k++)
        CHECK_ERR(wire_copy_tensor_meta(types[t], dst, PAYLOAD(w), k), DRV_EPARSE, "");
      CHECK_ERR(wire_copy_tensor_meta(WIRE_PULL, dst, PAYLOAD(w), n), DRV_EINVAL,
                "not read in place");
      free(dst);
      wire_wr_free(&w);
    }
}

/* A writer into a caller's frame: fields fill it exactly; one more byte
 * fails the writer and nothing is reallocated or freed. */
TEST(wire_wr_fixed_fills_the_callers_frame) {
  uint8_t frame[WIRE_HEADER_SIZE + 12];
  wire_wr w;
  wire_wr_init_fixed(&w, frame, sizeof frame);
  wire_wr_u64(&w, 0x0102030405060708ull);
  wire_wr_u32(&w, 9);
  CHECK_INT_EQ(w.err, 0);
  CHECK_INT_EQ(w.len, sizeof frame);
  CHECK(w.buf == frame);
  CHECK_INT_EQ(frame[WIRE_HEADER_SIZE], 0x08);
  CHECK_INT_EQ(frame[WIRE_HEADER_SIZE + 8], 9);
  wire_wr_u8(&w, 1);
  CHECK_INT_EQ(w.err, DRV_ERANGE);
  CHECK(w.buf == frame);
  CHECK_ERR(wire_wr_finish(&w, WIRE_PUSH, 1), DRV_ERANGE, "does not fit its 12 bytes");
  wire_wr_free(&w); /* the caller's: not freed (ASan would say) */
}
