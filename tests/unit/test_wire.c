/* test_wire.c - the wire protocol: header checks and their messages, every
 * field type through writer and reader, reader failures (every truncation
 * of every message, bad strings and tensor headers), the optimizer layout,
 * the message table, and a deterministic random-bytes smoke test. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "numeric/optim.h"
#include "numeric/rng.h"
#include "numeric/tensor.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"

/* The payload of a finished writer. */
#define PAYLOAD(w) ((w).buf + WIRE_HEADER_SIZE)
#define PAYLOAD_LEN(w) ((w).len - WIRE_HEADER_SIZE)

static const uint8_t all_types[] = {
#define XX(num, NAME, name, pre_auth, max, from) num,
    WIRE_TYPE_MAP(XX)
#undef XX
};
#define NTYPES (sizeof all_types)

/* ======================================================================
 * Header
 * ==================================================================== */

static void header_bytes(uint8_t *out, uint8_t type, uint32_t len) {
  wire_header h = {type, 0, 7, len};
  wire_header_encode(&h, out);
}

TEST(wire_header_round_trip) {
  uint8_t b[WIRE_HEADER_SIZE];
  wire_header h = {WIRE_PUSH, 0x0102, 0xdeadbeef, 1u << 20}, g;
  wire_header_encode(&h, b);
  /* The layout of wire.h, byte by byte. */
  CHECK(memcmp(b, "DRV1", 4) == 0);
  CHECK_INT_EQ(b[4], WIRE_VERSION);
  CHECK_INT_EQ(b[5], WIRE_PUSH);
  CHECK_INT_EQ(b[6], 0x02);
  CHECK_INT_EQ(b[7], 0x01);
  CHECK_INT_EQ(b[8], 0xef);
  CHECK_INT_EQ(b[11], 0xde);
  CHECK_INT_EQ(b[12], 0x00);
  CHECK_INT_EQ(b[14], 0x10);
  CHECK_OK(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g));
  CHECK_INT_EQ(g.type, h.type);
  CHECK_INT_EQ(g.flags, h.flags);
  CHECK_INT_EQ(g.req, h.req);
  CHECK_INT_EQ(g.len, h.len);
  /* Handshake frames pass before authentication. */
  header_bytes(b, WIRE_HELLO, 73);
  CHECK_OK(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, false, &g));
  CHECK_INT_EQ(g.len, 73);
  header_bytes(b, WIRE_AUTH, 70);
  CHECK_OK(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, false, &g));
}

TEST(wire_header_rejections_name_the_reason) {
  uint8_t b[WIRE_HEADER_SIZE];
  wire_header g;
  header_bytes(b, WIRE_PUSH, 100);
  memcpy(b, "AAAA", 4);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g), DRV_EPARSE,
            "bad magic 0x41414141");
  header_bytes(b, WIRE_PUSH, 100);
  b[4] = 2;
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g), DRV_EPARSE,
            "unsupported protocol version 2");
  header_bytes(b, 0x7f, 100);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g), DRV_EPARSE,
            "unknown frame type 0x7f");
  header_bytes(b, 0, 0);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g), DRV_EPARSE,
            "unknown frame type 0x00");
  header_bytes(b, WIRE_PUSH, 300000000);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g), DRV_EPARSE,
            "frame of 300000000 bytes exceeds the maximum 268435456");
  header_bytes(b, WIRE_PUSH, 2000);
  CHECK_ERR(wire_header_decode(b, 1000, true, &g), DRV_EPARSE,
            "frame of 2000 bytes exceeds the maximum 1000");
  header_bytes(b, WIRE_PUSH, 100);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, false, &g), DRV_EPARSE,
            "PUSH before authentication");
  header_bytes(b, WIRE_HELLO, 5);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, false, &g), DRV_EPARSE,
            "HELLO payload of 5 bytes, expected 73");
  header_bytes(b, WIRE_REGISTER, 5);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g), DRV_EPARSE,
            "REGISTER payload of 5 bytes, expected 59 to 32827");
  header_bytes(b, WIRE_ERROR, 5000);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g), DRV_EPARSE,
            "ERROR payload of 5000 bytes");
  header_bytes(b, WIRE_PUSH, 2);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g), DRV_EPARSE,
            "PUSH payload of 2 bytes, expected at least 12");
  header_bytes(b, WIRE_TASK, 16);
  CHECK_ERR(wire_header_decode(b, WIRE_DEFAULT_MAX_FRAME, true, &g), DRV_EPARSE,
            "TASK payload of 16 bytes, expected 17");
}

/* ======================================================================
 * The message table and roles
 * ==================================================================== */

TEST(wire_table_is_consistent) {
  int known = 0;
  for (int t = 0; t < 256; t++) known += wire_msg((uint8_t)t) != NULL;
  CHECK_INT_EQ(known, (int)NTYPES);
#define XX(num, nm, lc, pa, mx, fr)                                     \
  do {                                                         \
    const wire_msg_info *m = wire_msg(num);                    \
    CHECK(m != NULL);                                          \
    CHECK_INT_EQ(m->type, num);                                \
    CHECK(strcmp(m->name, #nm) == 0);                          \
    CHECK(strcmp(wire_type_name(num), #nm) == 0);             \
    CHECK(m->min_len <= m->max_len);                           \
    CHECK_INT_EQ(m->pre_auth, num == WIRE_HELLO || num == WIRE_AUTH || num == WIRE_AUTH_OK); \
    CHECK(!m->pre_auth || m->from == 0); /* no server table holds the handshake */ \
    CHECK(m->from < (1u << WIRE_PEER_COUNT));                  \
  } while (0);
  WIRE_TYPE_MAP(XX)
#undef XX
  for (size_t i = 0; i < NTYPES; i++)
    for (size_t j = i + 1; j < NTYPES; j++)
      CHECK(strcmp(wire_msg(all_types[i])->name, wire_msg(all_types[j])->name) != 0);
  CHECK(strcmp(wire_type_name(0x7f), "type 0x7f") == 0);
  /* The fixed sizes the handshake and the task loop rely on. */
  CHECK_INT_EQ(wire_msg(WIRE_HELLO)->max_len,
               WIRE_NONCE_SIZE + 1 + WIRE_HOST_ID_SIZE + WIRE_LINK_SIZE);
  CHECK_INT_EQ(wire_msg(WIRE_AUTH)->min_len, WIRE_NONCE_SIZE + WIRE_MAC_SIZE + 6); /* who, role, u32 index */
  CHECK_INT_EQ(wire_msg(WIRE_AUTH_OK)->min_len, WIRE_MAC_SIZE);
  CHECK_INT_EQ(wire_msg(WIRE_HEARTBEAT)->min_len, 28);
  CHECK_INT_EQ(wire_msg(WIRE_TASK)->max_len, 17);
  CHECK_INT_EQ(wire_msg(WIRE_PUSH)->max_len, UINT32_MAX);
}

TEST(wire_role_names_round_trip) {
  const char *names[] = {"ps", "chief", "worker", "evaluator"};
  for (int i = 0; i < ROLE_COUNT; i++) {
    CHECK(strcmp(wire_role_name(i), names[i]) == 0);
    CHECK_INT_EQ(wire_role_from_name(names[i]), i);
  }
  CHECK(strcmp(wire_role_name(ROLE_COUNT), "?") == 0);
  CHECK(strcmp(wire_role_name(-1), "?") == 0);
  CHECK_INT_EQ(wire_role_from_name("Worker"), -1);
  CHECK_INT_EQ(wire_role_from_name(""), -1);
  CHECK_INT_EQ(wire_role_from_name(NULL), -1);
}

/* ======================================================================
 * Fields
 * ==================================================================== */

TEST(wire_scalar_fields_round_trip_little_endian) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_u32(&w, 0x01020304u);
  wire_wr_u8(&w, 0xab);
  wire_wr_u16(&w, 0xbeef);
  wire_wr_u64(&w, UINT64_MAX - 1);
  wire_wr_i32(&w, INT32_MIN);
  wire_wr_i64(&w, -1234567890123LL);
  wire_wr_f64(&w, -0.0);
  wire_wr_f64(&w, DBL_MAX);
  wire_wr_f64(&w, 1.0);
  CHECK_OK(wire_wr_finish(&w, WIRE_ERROR, 42));
  const uint8_t *p = PAYLOAD(w);
  CHECK(memcmp(p, "\x04\x03\x02\x01", 4) == 0); /* explicit little-endian */
  CHECK_INT_EQ(PAYLOAD_LEN(w), 4 + 1 + 2 + 8 + 4 + 8 + 3 * 8);
  CHECK(memcmp(p + PAYLOAD_LEN(w) - 8, "\0\0\0\0\0\0\xf0\x3f", 8) == 0); /* 1.0 */
  wire_header h;
  CHECK_OK(wire_header_decode(w.buf, WIRE_DEFAULT_MAX_FRAME, true, &h));
  CHECK_INT_EQ(h.req, 42);
  CHECK_INT_EQ(h.len, PAYLOAD_LEN(w));
  wire_rd r;
  wire_rd_init(&r, p, h.len);
  CHECK_INT_EQ(wire_rd_u32(&r), 0x01020304u);
  CHECK_INT_EQ(wire_rd_u8(&r), 0xab);
  CHECK_INT_EQ(wire_rd_u16(&r), 0xbeef);
  CHECK(wire_rd_u64(&r) == UINT64_MAX - 1);
  CHECK_INT_EQ(wire_rd_i32(&r), INT32_MIN);
  CHECK_INT_EQ(wire_rd_i64(&r), -1234567890123LL);
  double z = wire_rd_f64(&r);
  CHECK(z == 0.0 && signbit(z));
  CHECK(wire_rd_f64(&r) == DBL_MAX);
  CHECK(wire_rd_f64(&r) == 1.0);
  CHECK_OK(wire_rd_done(&r, WIRE_ERROR));
  wire_wr_free(&w);
}

TEST(wire_strings_and_bytes_round_trip) {
  static char longest[WIRE_MAX_STR + 1], over[WIRE_MAX_STR + 100];
  memset(longest, 'x', WIRE_MAX_STR);
  memset(over, 'y', sizeof over - 1);
  const uint8_t blob[5] = {0, 1, 0, 255, 0}; /* bytes may hold NULs */
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_str(&w, "");
  wire_wr_str(&w, "worker:1 on host-a");
  wire_wr_str(&w, longest);
  wire_wr_str(&w, over); /* truncated at WIRE_MAX_STR */
  wire_wr_str(&w, NULL); /* as "" */
  wire_wr_bytes(&w, blob, sizeof blob);
  wire_wr_bytes(&w, NULL, 0);
  wire_wr_raw(&w, "tail", 4);
  CHECK_OK(wire_wr_finish(&w, WIRE_ERROR, 0));
  wire_rd r;
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  static char s[WIRE_MAX_STR + 1];
  wire_rd_str(&r, s, sizeof s);
  CHECK(strcmp(s, "") == 0);
  wire_rd_str(&r, s, sizeof s);
  CHECK(strcmp(s, "worker:1 on host-a") == 0);
  wire_rd_str(&r, s, sizeof s);
  CHECK(strcmp(s, longest) == 0);
  wire_rd_str(&r, s, sizeof s);
  CHECK_INT_EQ(strlen(s), WIRE_MAX_STR);
  CHECK(strspn(s, "y") == WIRE_MAX_STR);
  wire_rd_str(&r, s, sizeof s);
  CHECK(strcmp(s, "") == 0);
  const uint8_t *b;
  CHECK_INT_EQ(wire_rd_bytes(&r, &b), 5);
  CHECK(memcmp(b, blob, 5) == 0);
  CHECK_INT_EQ(wire_rd_bytes(&r, &b), 0);
  CHECK_INT_EQ(wire_rd_u32(&r), 0x6c696174); /* "tail" */
  CHECK_OK(wire_rd_done(&r, WIRE_ERROR));
  wire_wr_free(&w);
}

/* A tensor of `ndim` dims filled with distinct values. */
static tensor *filled(int ndim, const int64_t *shape, float base) {
  tensor *t = tensor_new(ndim, shape);
  CHECK(t != NULL);
  float *p = tensor_data(t);
  for (int64_t i = 0; i < tensor_numel(t); i++) p[i] = base + (float)i * 0.5f - 3.25f;
  return t;
}

TEST(wire_tensors_round_trip_1_to_4_dims) {
  const int64_t shapes[4][4] = {{7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 2}};
  wire_wr w;
  wire_wr_init(&w);
  tensor *src[4];
  for (int d = 0; d < 4; d++) {
    src[d] = filled(d + 1, shapes[d], (float)d * 100);
    wire_wr_tensor(&w, src[d]);
  }
  int64_t zero_shape[2] = {0, 5};
  tensor *empty = tensor_new(2, zero_shape);
  wire_wr_tensor(&w, empty);
  CHECK_OK(wire_wr_finish(&w, WIRE_PUSH, 0));
  wire_rd r;
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  for (int d = 0; d < 4; d++) {
    tensor *got = wire_rd_tensor(&r);
    CHECK(got != NULL);
    CHECK(tensor_same_shape(got, src[d]));
    CHECK_NEAR(tensor_max_abs_diff(got, src[d]), 0, 0);
    tensor_free(got);
  }
  tensor *got = wire_rd_tensor(&r);
  CHECK(got && got->ndim == 2 && got->shape[0] == 0 && got->shape[1] == 5);
  tensor_free(got);
  CHECK_OK(wire_rd_done(&r, WIRE_PUSH));
  /* The view form points at the raw little-endian floats. */
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  int nd;
  int64_t shape[TENSOR_MAXDIM];
  const uint8_t *data;
  CHECK_OK(wire_rd_tensor_view(&r, &nd, shape, &data));
  CHECK_INT_EQ(nd, 1);
  CHECK_INT_EQ(shape[0], 7);
  float f;
  memcpy(&f, data + 4, 4);
  CHECK(f == tensor_data(src[0])[1]);
  for (int d = 0; d < 4; d++) tensor_free(src[d]);
  tensor_free(empty);
  wire_wr_free(&w);
}

TEST(wire_strided_tensor_is_written_contiguous) {
  int64_t shape[3] = {4, 5, 6};
  tensor *base = filled(3, shape, 1);
  tensor *tr = tensor_transpose(base, 0, 2);       /* [6, 5, 4], inner stride 30 */
  tensor *nar = tensor_narrow(base, 2, 1, 3);      /* [4, 5, 3], rows with gaps */
  tensor *one_d = tensor_narrow(tr, 0, 2, 1);      /* [1, 5, 4] */
  tensor *srcs[3] = {tr, nar, one_d};
  wire_wr w;
  wire_wr_init(&w);
  for (int i = 0; i < 3; i++) wire_wr_tensor(&w, srcs[i]);
  CHECK_OK(wire_wr_finish(&w, WIRE_PUSH, 0));
  wire_rd r;
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  for (int i = 0; i < 3; i++) {
    /* The wire image equals the row-major contiguous clone's bytes. */
    tensor *clone = tensor_clone(srcs[i]);
    int nd;
    int64_t sh[TENSOR_MAXDIM];
    const uint8_t *data;
    CHECK_OK(wire_rd_tensor_view(&r, &nd, sh, &data));
    CHECK_INT_EQ(nd, 3);
    for (int d = 0; d < 3; d++) CHECK_INT_EQ(sh[d], srcs[i]->shape[d]);
    CHECK(memcmp(data, tensor_data(clone), (size_t)tensor_numel(clone) * 4) == 0);
    tensor_free(clone);
  }
  CHECK_OK(wire_rd_done(&r, WIRE_PUSH));
  /* Reading into a strided destination scatters back through its strides. */
  int64_t shape2[3] = {4, 5, 6};
  tensor *base2 = tensor_new(3, shape2);
  tensor *tr2 = tensor_transpose(base2, 0, 2);
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  CHECK_OK(wire_rd_tensor_into(&r, tr2));
  CHECK_NEAR(tensor_max_abs_diff(base2, base), 0, 0);
  tensor_free(tr2);
  tensor_free(base2);
  tensor_free(tr);
  tensor_free(nar);
  tensor_free(one_d);
  tensor_free(base);
  wire_wr_free(&w);
}

TEST(wire_scalar_tensor_travels_as_one_element) {
  tensor *s = tensor_new(0, NULL);
  CHECK(s != NULL);
  tensor_data(s)[0] = 2.5f;
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_tensor(&w, s);
  CHECK_OK(wire_wr_finish(&w, WIRE_PUSH, 0));
  wire_rd r;
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  tensor *got = wire_rd_tensor(&r);
  CHECK(got && got->ndim == 1 && got->shape[0] == 1 && tensor_data(got)[0] == 2.5f);
  CHECK_OK(wire_rd_done(&r, WIRE_PUSH));
  tensor_free(got);
  tensor_free(s);
  wire_wr_free(&w);
}

TEST(wire_writer_grows_geometrically) {
  wire_wr w;
  wire_wr_init(&w);
  size_t grows = 0, cap = w.cap;
  for (int i = 0; i < 100000; i++) {
    wire_wr_u64(&w, (uint64_t)i);
    if (w.cap != cap) grows++, cap = w.cap;
  }
  CHECK_INT_EQ(w.len, WIRE_HEADER_SIZE + 800000);
  CHECK(w.cap >= w.len && w.cap < 2 * w.len);
  CHECK(grows <= 13); /* 256 B doubling to 1 MiB */
  CHECK_OK(wire_wr_finish(&w, WIRE_PUSH, 0));
  wire_rd r;
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  for (int i = 0; i < 100000; i++)
    if (wire_rd_u64(&r) != (uint64_t)i) CHECK(!"value lost in growth");
  CHECK_OK(wire_rd_done(&r, WIRE_PUSH));
  wire_wr_free(&w);
}

/* ======================================================================
 * Reader failures
 * ==================================================================== */

/* Reads what kitchen_sink() wrote; returns wire_rd_done's answer. */
static int read_sink(const uint8_t *p, size_t n) {
  wire_rd r;
  wire_rd_init(&r, p, n);
  char s[64];
  const uint8_t *b;
  wire_rd_u8(&r);
  wire_rd_u16(&r);
  wire_rd_u32(&r);
  wire_rd_u64(&r);
  wire_rd_i32(&r);
  wire_rd_i64(&r);
  wire_rd_f64(&r);
  wire_rd_str(&r, s, sizeof s);
  wire_rd_bytes(&r, &b);
  tensor *t = wire_rd_tensor(&r);
  optim_cfg c;
  wire_rd_optim(&r, &c);
  wire_rd_str(&r, s, sizeof s);
  tensor_free(t);
  CHECK(r.off <= r.len);
  return wire_rd_done(&r, WIRE_PUSH);
}

TEST(wire_every_truncation_fails_cleanly) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_u8(&w, 1);
  wire_wr_u16(&w, 2);
  wire_wr_u32(&w, 3);
  wire_wr_u64(&w, 4);
  wire_wr_i32(&w, -5);
  wire_wr_i64(&w, -6);
  wire_wr_f64(&w, 7.5);
  wire_wr_str(&w, "seven");
  wire_wr_bytes(&w, "abc", 3);
  int64_t shape[2] = {2, 3};
  tensor *t = filled(2, shape, 0);
  wire_wr_tensor(&w, t);
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_ADAM);
  wire_wr_optim(&w, &c);
  wire_wr_str(&w, "");
  CHECK_OK(wire_wr_finish(&w, WIRE_PUSH, 0));
  size_t n = PAYLOAD_LEN(w);
  CHECK_OK(read_sink(PAYLOAD(w), n));
  /* Each prefix on the heap at its exact size, so ASan sees any overread. */
  for (size_t k = 0; k < n; k++) {
    uint8_t *cut = malloc(k ? k : 1);
    memcpy(cut, PAYLOAD(w), k);
    CHECK_ERR(read_sink(cut, k), DRV_EPARSE, "truncated");
    CHECK_STR_CONTAINS(err_msg(), "PUSH: ");
    free(cut);
  }
  uint8_t *longer = malloc(n + 1);
  memcpy(longer, PAYLOAD(w), n);
  longer[n] = 0;
  CHECK_ERR(read_sink(longer, n + 1), DRV_EPARSE, "PUSH: 1 unexpected bytes");
  free(longer);
  tensor_free(t);
  wire_wr_free(&w);
}

/* A payload of raw bytes built with the writer, to describe bad input. */
static wire_rd rd_over(wire_wr *w) {
  wire_rd r;
  CHECK_OK(wire_wr_finish(w, WIRE_PUSH, 0));
  wire_rd_init(&r, PAYLOAD(*w), PAYLOAD_LEN(*w));
  return r;
}

TEST(wire_bad_strings_are_refused) {
  char s[WIRE_MAX_STR + 8];
  static char big[WIRE_MAX_STR + 1];
  memset(big, 'z', sizeof big);
  wire_wr w;
  wire_rd r;

  wire_wr_init(&w); /* declared one byte over the limit, bytes present */
  wire_wr_bytes(&w, big, WIRE_MAX_STR + 1);
  r = rd_over(&w);
  wire_rd_str(&r, s, sizeof s);
  CHECK(!wire_rd_ok(&r) && s[0] == '\0');
  CHECK_ERR(wire_rd_done(&r, WIRE_ERROR), DRV_EPARSE,
            "ERROR: string of 4097 bytes at offset 0 exceeds the limit 4096");
  wire_wr_free(&w);

  wire_wr_init(&w);
  wire_wr_bytes(&w, "ab\0cd", 5);
  r = rd_over(&w);
  wire_rd_str(&r, s, sizeof s);
  CHECK_ERR(wire_rd_done(&r, WIRE_ERROR), DRV_EPARSE, "contains a NUL byte at position 2");
  wire_wr_free(&w);

  wire_wr_init(&w); /* valid, but longer than the caller's buffer */
  wire_wr_str(&w, "abcdefgh");
  r = rd_over(&w);
  wire_rd_str(&r, s, 8);
  CHECK(s[0] == '\0');
  CHECK_ERR(wire_rd_done(&r, WIRE_ERROR), DRV_EPARSE, "does not fit in 7");
  wire_wr_free(&w);

  wire_wr_init(&w); /* a length that runs past the end */
  wire_wr_u32(&w, 100);
  wire_wr_raw(&w, "abc", 3);
  r = rd_over(&w);
  const uint8_t *b;
  CHECK_INT_EQ(wire_rd_bytes(&r, &b), 0);
  CHECK(b == NULL);
  CHECK_ERR(wire_rd_done(&r, WIRE_ERROR), DRV_EPARSE, "100 bytes needed, 3 left");
  wire_wr_free(&w);
}

/* A tensor header with the given dims followed by `floats` floats. */
static int read_bad_tensor(int ndim, const uint64_t *dims, size_t floats) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_u8(&w, (uint8_t)ndim);
  for (int i = 0; i < ndim; i++) wire_wr_u64(&w, dims[i]);
  for (size_t i = 0; i < floats; i++) wire_wr_u32(&w, 0);
  wire_rd r = rd_over(&w);
  tensor *t = wire_rd_tensor(&r);
  CHECK(t == NULL);
  int rc = wire_rd_done(&r, WIRE_PUSH);
  wire_wr_free(&w);
  return rc;
}

TEST(wire_bad_tensor_headers_are_refused) {
  uint64_t d[5] = {1, 1, 1, 1, 1};
  CHECK_ERR(read_bad_tensor(0, d, 1), DRV_EPARSE, "has 0 dimensions (expected 1 to 4)");
  CHECK_ERR(read_bad_tensor(5, d, 1), DRV_EPARSE, "has 5 dimensions");
  uint64_t huge[1] = {(uint64_t)1 << 40};
  CHECK_ERR(read_bad_tensor(1, huge, 0), DRV_EPARSE, "dimension 1 is 1099511627776 (limit 2^40)");
  /* Four dims under 2^40 whose product overflows 64 bits. */
  uint64_t wide[4] = {(1ull << 40) - 1, (1ull << 40) - 1, (1ull << 40) - 1, 3};
  CHECK_ERR(read_bad_tensor(4, wide, 4), DRV_EPARSE, "dimensions multiply past 2^40 elements");
  /* No elements, but strides derived from the other dims would overflow
   * (found by the fuzzer: tensor_new computed them). */
  uint64_t hollow[4] = {0, 1ull << 30, 1ull << 30, 1};
  CHECK_ERR(read_bad_tensor(4, hollow, 0), DRV_EPARSE, "dimensions multiply past 2^40 elements");
  /* No elements, other dims under 2^40 but past what tensor_new takes for
   * an empty tensor (2^32): the validator and the tensor agree (fuzzer). */
  uint64_t rows[2] = {1ull << 33, 0};
  CHECK_ERR(read_bad_tensor(2, rows, 0), DRV_EPARSE, "other dimensions multiply past 2^32");
  uint64_t ten[2] = {2, 5};
  CHECK_ERR(read_bad_tensor(2, ten, 9), DRV_EPARSE,
            "tensor at offset 0 is truncated: shape [2, 5] needs 40 bytes, 36 left");
  CHECK_ERR(read_bad_tensor(1, ten, 1), DRV_EPARSE, "needs 8 bytes, 4 left");
  /* Dims larger than the remaining bytes, each well under 2^40. */
  uint64_t big[3] = {1u << 20, 1u << 10, 1u << 9};
  CHECK_ERR(read_bad_tensor(3, big, 2), DRV_EPARSE, "needs 2199023255552 bytes, 8 left");
  /* An empty tensor with moderate other dims is fine. */
  wire_wr w0;
  wire_wr_init(&w0);
  wire_wr_u8(&w0, 3);
  wire_wr_u64(&w0, 0);
  wire_wr_u64(&w0, 1000);
  wire_wr_u64(&w0, 1000);
  wire_rd r0 = rd_over(&w0);
  tensor *t0 = wire_rd_tensor(&r0);
  CHECK(t0 && tensor_numel(t0) == 0 && t0->shape[2] == 1000);
  CHECK_OK(wire_rd_done(&r0, WIRE_PUSH));
  tensor_free(t0);
  wire_wr_free(&w0);
  /* A shape that does not match the destination. */
  int64_t shape[2] = {3, 4};
  tensor *want = tensor_new(2, shape);
  wire_wr w;
  wire_wr_init(&w);
  int64_t other[2] = {4, 3};
  tensor *sent = tensor_new(2, other);
  wire_wr_tensor(&w, sent);
  wire_rd r = rd_over(&w);
  CHECK_ERR(wire_rd_tensor_into(&r, want), DRV_EPARSE,
            "tensor of [4, 3] where [3, 4] was expected");
  tensor_free(want);
  tensor_free(sent);
  wire_wr_free(&w);
}

TEST(wire_reads_after_a_failure_return_zero) {
  const uint8_t two[2] = {0xff, 0xff};
  wire_rd r;
  wire_rd_init(&r, two, 2);
  CHECK_INT_EQ(wire_rd_u32(&r), 0);
  CHECK(!wire_rd_ok(&r));
  CHECK_INT_EQ(wire_rd_u8(&r), 0); /* a byte remains, but the reader has failed */
  CHECK_STR_CONTAINS(r.why, "truncated u32 at offset 0: 4 bytes needed, 2 left");
  wire_rd_init(&r, NULL, 0);
  CHECK_OK(wire_rd_done(&r, WIRE_SETUP_OK));
}

TEST(wire_rd_done_rejects_trailing_bytes) {
  const uint8_t p[10] = {1, 0, 0, 0, 0, 0, 0, 0, 1, 9};
  wire_rd r;
  wire_rd_init(&r, p, sizeof p);
  CHECK_INT_EQ(wire_rd_u64(&r), 1);
  CHECK_INT_EQ(wire_rd_u8(&r), 1);
  CHECK_ERR(wire_rd_done(&r, WIRE_PUSH_OK), DRV_EPARSE, "PUSH_OK: 1 unexpected bytes");
  CHECK_ERR(wire_validate_payload(WIRE_PUSH_OK, p, sizeof p), DRV_EPARSE, "PUSH_OK");
}

/* ======================================================================
 * The optimizer layout
 * ==================================================================== */

static void optim_round_trip(const optim_cfg *c) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_optim(&w, c);
  CHECK_OK(wire_wr_finish(&w, WIRE_VAR_INIT, 0));
  CHECK_INT_EQ(PAYLOAD_LEN(w), 106); /* kind, 13 fields as f64, flags */
  wire_rd r;
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  optim_cfg g;
  CHECK_OK(wire_rd_optim(&r, &g));
  CHECK_OK(wire_rd_done(&r, WIRE_VAR_INIT));
  CHECK_INT_EQ(g.kind, c->kind);
  CHECK_INT_EQ(g.nesterov, c->nesterov);
  CHECK(g.lr == c->lr && g.momentum == c->momentum && g.dampening == c->dampening);
  CHECK(g.weight_decay == c->weight_decay && g.beta1 == c->beta1 && g.beta2 == c->beta2);
  CHECK(g.eps == c->eps && g.alpha == c->alpha && g.lr_decay == c->lr_decay);
  CHECK(g.initial_accumulator == c->initial_accumulator);
  CHECK(g.beta == c->beta && g.l1 == c->l1 && g.l2 == c->l2);
  wire_wr_free(&w);
}

TEST(wire_optim_round_trip) {
  for (int k = OPTIM_SGD; k <= OPTIM_FTRL; k++) {
    optim_cfg c;
    optim_cfg_default(&c, (optim_kind)k);
    c.lr = 0.0123f;
    c.weight_decay = 1e-4f;
    if (k == OPTIM_SGD) c.momentum = 0.9f, c.nesterov = true;
    if (k == OPTIM_RMSPROP) c.momentum = 0.5f, c.alpha = 0.95f;
    if (k == OPTIM_ADAGRAD) c.lr_decay = 0.01f, c.initial_accumulator = 0.1f;
    if (k == OPTIM_ADAM) c.beta1 = 0.8f, c.eps = 1e-7f;
    if (k == OPTIM_FTRL) c.weight_decay = 0, c.beta = 0.5f, c.l1 = 0.01f, c.l2 = 0.02f;
    optim_round_trip(&c);
  }
}

/* An optimizer layout with one field or byte overwritten. */
static int read_optim_with(int field, double value, int kind, int nesterov) {
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_u8(&w, (uint8_t)kind);
  for (int i = 0; i < 13; i++) {
    double v = i == 0 ? c.lr : 0.0;
    wire_wr_f64(&w, i == field ? value : v);
  }
  wire_wr_u8(&w, (uint8_t)nesterov);
  wire_rd r = rd_over(&w);
  optim_cfg g;
  int rc = wire_rd_optim(&r, &g);
  CHECK(rc == DRV_EPARSE || rc == 0);
  rc = wire_rd_done(&r, WIRE_VAR_INIT);
  wire_wr_free(&w);
  return rc;
}

TEST(wire_invalid_optim_is_refused) {
  CHECK_OK(read_optim_with(-1, 0, OPTIM_SGD, 0));
  CHECK_ERR(read_optim_with(-1, 0, 9, 0), DRV_EPARSE, "VAR_INIT: unknown optimizer kind 9");
  CHECK_ERR(read_optim_with(-1, 0, OPTIM_SGD, 2), DRV_EPARSE, "nesterov flag is 2");
  CHECK_ERR(read_optim_with(-1, 0, OPTIM_SGD, 1), DRV_EPARSE,
            "nesterov requires momentum > 0"); /* optim_cfg_check's words */
  CHECK_ERR(read_optim_with(0, -1.0, OPTIM_SGD, 0), DRV_EPARSE, "lr");
  CHECK_ERR(read_optim_with(0, NAN, OPTIM_SGD, 0), DRV_EPARSE, "lr is not a finite float");
  CHECK_ERR(read_optim_with(3, 1e300, OPTIM_SGD, 0), DRV_EPARSE,
            "weight_decay is not a finite float");
  CHECK_ERR(read_optim_with(2, 1.5, OPTIM_SGD, 0), DRV_EPARSE, "dampening");
}

/* ======================================================================
 * Every message layout
 * ==================================================================== */

/* A valid frame of `type` (wire_msgs.h's sample, variant 0). */
static void sample(wire_wr *w, uint8_t type) {
  wire_wr_free(w);
  CHECK_OK(wire_sample(type, 0, w));
}

TEST(wire_every_layout_validates_and_every_truncation_fails) {
  for (size_t i = 0; i < NTYPES; i++) {
    uint8_t type = all_types[i];
    wire_wr w;
    wire_wr_init(&w);
    sample(&w, type);
    wire_header h;
    CHECK_OK(wire_header_decode(w.buf, WIRE_DEFAULT_MAX_FRAME, true, &h));
    CHECK_OK(wire_validate_payload(type, PAYLOAD(w), h.len));
    for (size_t k = 0; k < h.len; k++) {
      uint8_t *cut = malloc(k ? k : 1);
      memcpy(cut, PAYLOAD(w), k);
      if (wire_validate_payload(type, cut, k) == 0)
        harness_fail(__FILE__, __LINE__, "%s prefix of %zu bytes accepted",
                     wire_type_name(type), k);
      free(cut);
    }
    uint8_t *longer = malloc(h.len + 1);
    memcpy(longer, PAYLOAD(w), h.len);
    longer[h.len] = 0;
    CHECK(wire_validate_payload(type, longer, h.len + 1) < 0);
    free(longer);
    wire_wr_free(&w);
  }
}

TEST(wire_validator_checks_roles_and_counts) {
  wire_wr w;
  wire_wr_init(&w);
  sample(&w, WIRE_REGISTER);
  PAYLOAD(w)[0] = ROLE_COUNT;
  CHECK_ERR(wire_validate_payload(WIRE_REGISTER, PAYLOAD(w), PAYLOAD_LEN(w)), DRV_EPARSE,
            "REGISTER: unknown role 4");
  wire_wr_free(&w);
  /* A count far beyond the bytes is refused before any loop runs. */
  const uint8_t pull[16] = {[8] = 0xff, 0xff, 0xff, 0xff};
  CHECK_ERR(wire_validate_payload(WIRE_PULL, pull, sizeof pull), DRV_EPARSE,
            "PULL variable count 4294967295 cannot fit in the 4 bytes left");
  const uint8_t hello[73] = {[32] = 2};
  CHECK_ERR(wire_validate_payload(WIRE_HELLO, hello, sizeof hello), DRV_EPARSE,
            "server kind is 2");
  CHECK_ERR(wire_validate_payload(0x7f, hello, sizeof hello), DRV_EPARSE,
            "unknown frame type 0x7f");
}

/* ======================================================================
 * Random bytes: no crash, no overread (run under ASan)
 * ==================================================================== */

TEST(wire_random_bytes_smoke) {
  rng_t rng;
  rng_seed(&rng, 20261121);
  uint8_t samples[NTYPES][1024];
  size_t sample_len[NTYPES];
  for (size_t i = 0; i < NTYPES; i++) {
    wire_wr w;
    wire_wr_init(&w);
    sample(&w, all_types[i]);
    sample_len[i] = PAYLOAD_LEN(w);
    CHECK(sample_len[i] <= sizeof samples[i]);
    memcpy(samples[i], PAYLOAD(w), sample_len[i]);
    wire_wr_free(&w);
  }
  int payloads_ok = 0;
  for (int iter = 0; iter < 20000; iter++) {
    size_t ti = rng_below(&rng, NTYPES), n;
    uint8_t *buf;
    if (iter % 2) { /* pure noise */
      n = rng_below(&rng, 200);
      buf = malloc(n ? n : 1);
      for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rng_u64(&rng);
    } else { /* a valid sample with a few bytes changed and a random cut */
      n = sample_len[ti] ? rng_below(&rng, sample_len[ti] + 1) : 0;
      buf = malloc(n ? n : 1);
      memcpy(buf, samples[ti], n);
      for (int m = 0; n && m < 3; m++) buf[rng_below(&rng, n)] = (uint8_t)rng_u64(&rng);
    }
    uint8_t hdr[WIRE_HEADER_SIZE];
    for (int k = 0; k < WIRE_HEADER_SIZE; k++) hdr[k] = (uint8_t)rng_u64(&rng);
    if (iter % 3 == 0) memcpy(hdr, "DRV1\x01", 5);
    if (iter % 6 == 0) hdr[5] = all_types[ti];
    wire_header h;
    (void)wire_header_decode(hdr, WIRE_DEFAULT_MAX_FRAME, iter % 4 != 0, &h);
    payloads_ok += wire_validate_payload(all_types[ti], buf, n) == 0;
    free(buf);
  }
  /* Both outcomes occur: the inputs reached past the first checks. */
  CHECK(payloads_ok > 0 && payloads_ok < 20000);
}

/* A schedule travels behind bit 7 of the nesterov byte; without one the
 * layout is the original 106 bytes (checked above). */
TEST(wire_optim_schedule_round_trip) {
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  c.momentum = 0.9f, c.nesterov = true;
  c.sched = (optim_sched){.kind = OSCHED_MULTISTEP, .warmup = 7, .start_factor = 0.25f,
                          .gamma = 0.5f, .nmilestones = 3, .milestones = {10, 20, 40}};
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_optim(&w, &c);
  CHECK_OK(wire_wr_finish(&w, WIRE_VAR_INIT, 0));
  CHECK_INT_EQ(PAYLOAD_LEN(w), 106 + 1 + 8 * 4 + 1 + 3 * 8 + 8 + 8);
  wire_rd r;
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  optim_cfg g;
  CHECK_OK(wire_rd_optim(&r, &g));
  CHECK_OK(wire_rd_done(&r, WIRE_VAR_INIT));
  CHECK(g.nesterov);
  CHECK(memcmp(&g.sched, &c.sched, sizeof g.sched) == 0);
  /* every truncation of the schedule fails cleanly */
  for (size_t k = 106; k < PAYLOAD_LEN(w); k++) {
    wire_rd_init(&r, PAYLOAD(w), k);
    CHECK(wire_rd_optim(&r, &g) < 0);
  }
  /* a bad milestone order is optim_cfg_check's error */
  PAYLOAD(w)[106 + 1 + 8 * 4 + 1 + 8] = 5; /* milestone 2: 20 -> 5 */
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  CHECK_ERR(wire_rd_optim(&r, &g), DRV_EPARSE, "increasing");
  wire_wr_free(&w);
  /* a plateau schedule travels whole (the ps applies its warmup, the
   * coordinator its reductions, by LR_SCALE) */
  c.sched = (optim_sched){.kind = OSCHED_PLATEAU, .warmup = 3, .start_factor = 0.5f,
                          .metric = OMETRIC_EVAL_AUC, .maximize = true, .factor = 0.5f,
                          .patience = 2, .threshold = 1e-3f, .min_lr = 1e-5f};
  wire_wr_init(&w);
  wire_wr_optim(&w, &c);
  CHECK_OK(wire_wr_finish(&w, WIRE_VAR_INIT, 0));
  wire_rd_init(&r, PAYLOAD(w), PAYLOAD_LEN(w));
  CHECK_OK(wire_rd_optim(&r, &g));
  CHECK_OK(wire_rd_done(&r, WIRE_VAR_INIT));
  CHECK(memcmp(&g.sched, &c.sched, sizeof g.sched) == 0);
  for (size_t k = 106; k < PAYLOAD_LEN(w); k++) {
    wire_rd_init(&r, PAYLOAD(w), k);
    CHECK(wire_rd_optim(&r, &g) < 0);
  }
  wire_wr_free(&w);
}
