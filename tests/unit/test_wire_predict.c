/* test_wire_predict.c - the predict-client messages (wire_msgs.h, "Predict
 * from a client"): PREDICT_OPEN, PREDICT_REQUEST and PREDICT_REPLY read
 * back what was written (rows, batch, outputs, a refusal with no rows);
 * truncations and a tensor whose shape claims more bytes than the frame
 * holds, or whose size product overflows, are refused. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"

#define PAYLOAD(w) ((w).buf + WIRE_HEADER_SIZE)
#define PAYLOAD_LEN(w) ((w).len - WIRE_HEADER_SIZE)

TEST(wire_predict_request_and_reply_read_back) {
  int64_t shape[2] = {3, 4};
  tensor *x = tensor_new(2, shape);
  CHECK(x != NULL);
  for (int i = 0; i < 12; i++) tensor_data(x)[i] = (float)i - 5.5f;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_predict_request(&w, &(wire_msg_predict_request){.req = 7, .batch = 2, .x = {.t = x}});
  CHECK_OK(wire_wr_finish(&w, WIRE_PREDICT_REQUEST, 0));
  CHECK_OK(wire_validate_payload(WIRE_PREDICT_REQUEST, PAYLOAD(w), PAYLOAD_LEN(w)));
  wire_msg_predict_request m;
  CHECK_OK(wire_get_predict_request(PAYLOAD(w), PAYLOAD_LEN(w), &m));
  CHECK_INT_EQ(m.req, 7);
  CHECK_INT_EQ(m.batch, 2);
  CHECK_INT_EQ(m.x.ndim, 2);
  CHECK_INT_EQ(m.x.shape[0], 3);
  CHECK_INT_EQ(m.x.shape[1], 4);
  float back[12];
  wire_tensor_to(&m.x, back);
  CHECK(memcmp(back, tensor_data(x), sizeof back) == 0);
  for (size_t cut = 0; cut < PAYLOAD_LEN(w); cut++) /* every truncation is refused */
    CHECK(wire_get_predict_request(PAYLOAD(w), cut, &m) < 0);
  wire_wr_free(&w);

  /* a refusal: no rows, the code and why */
  static const float none[1];
  wire_wr_init(&w);
  wire_put_predict_reply(&w, &(wire_msg_predict_reply){
                                 .req = 7, .status = DRV_EAGAIN,
                                 .y = {.ndim = 1, .shape = {0}, .data = none},
                                 .message = WIRE_STR("c:serve { predict = exp }")});
  CHECK_OK(wire_wr_finish(&w, WIRE_PREDICT_REPLY, 0));
  wire_msg_predict_reply r;
  CHECK_OK(wire_get_predict_reply(PAYLOAD(w), PAYLOAD_LEN(w), &r));
  CHECK_INT_EQ(r.req, 7);
  CHECK_INT_EQ(r.status, DRV_EAGAIN);
  CHECK_INT_EQ(wire_tensor_numel(&r.y), 0);
  char msg[64];
  CHECK_OK(wire_str_copy(r.message, msg, sizeof msg));
  CHECK(strcmp(msg, "c:serve { predict = exp }") == 0);
  wire_wr_free(&w);

  /* an answer: [3, 4] outputs */
  wire_wr_init(&w);
  wire_put_predict_reply(&w, &(wire_msg_predict_reply){.req = 8, .y = {.t = x}, .message = WIRE_STR("")});
  CHECK_OK(wire_wr_finish(&w, WIRE_PREDICT_REPLY, 0));
  CHECK_OK(wire_get_predict_reply(PAYLOAD(w), PAYLOAD_LEN(w), &r));
  CHECK_INT_EQ(r.status, 0);
  CHECK_INT_EQ(r.y.shape[0], 3);
  wire_tensor_to(&r.y, back);
  CHECK(back[11] == 5.5f);
  wire_wr_free(&w);

  wire_wr_init(&w);
  wire_put_predict_open(&w, &(wire_msg_predict_open){.name = WIRE_STR("spark-3")});
  CHECK_OK(wire_wr_finish(&w, WIRE_PREDICT_OPEN, 0));
  wire_msg_predict_open o;
  CHECK_OK(wire_get_predict_open(PAYLOAD(w), PAYLOAD_LEN(w), &o));
  CHECK(o.name.len == 7 && memcmp(o.name.s, "spark-3", 7) == 0);
  wire_wr_free(&w);
  tensor_free(x);
}

/* Hand-made PREDICT_REQUESTs whose tensor lies about its size. */
TEST(wire_predict_request_refuses_lying_shapes) {
  uint8_t p[96];
  memset(p, 0, sizeof p);
  p[0] = 1;  /* req 1 */
  p[16] = 2; /* ndim 2 */
  uint64_t big = (uint64_t)1 << 62;
  memcpy(p + 17, &big, 8);           /* rows 2^62 ... */
  uint64_t four = 4;
  memcpy(p + 25, &four, 8);          /* ... x 4: the byte count overflows */
  wire_msg_predict_request m;
  CHECK(wire_get_predict_request(p, sizeof p, &m) < 0);
  CHECK(wire_validate_payload(WIRE_PREDICT_REQUEST, p, sizeof p) < 0);
  uint64_t two = 2;
  memcpy(p + 17, &two, 8);           /* [2, 4]: 32 bytes wanted, 31 there */
  CHECK(wire_get_predict_request(p, 16 + 1 + 16 + 31, &m) < 0);
  CHECK(wire_get_predict_request(p, 16 + 1 + 16 + 32, &m) < 0); /* no sparse length */
  CHECK_OK(wire_get_predict_request(p, 16 + 1 + 16 + 32 + 4, &m));      /* sparse: empty */
  CHECK_INT_EQ(m.sparse.len, 0);
  CHECK_INT_EQ(wire_tensor_numel(&m.x), 8);
}
