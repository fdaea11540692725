/* test_worker_feed.c - a worker's input queue (worker_feed.c) with ids:
 * FEED_BATCH frames of mode QUEUE held, then taken by rows across batches
 * as w:next_batch takes them, each row with its own ids. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "cluster/worker/worker_int.h"
#include "proto/wire_msgs.h"

typedef struct results {
  int n;
  uint64_t examples;
} results;

static int count_results(void *ud, wire_wr *w, uint8_t type, uint32_t req) {
  results *r = ud;
  (void)req;
  wire_msg_result m;
  if (type == WIRE_RESULT &&
      wire_get_result(w->buf + WIRE_HEADER_SIZE, w->len - WIRE_HEADER_SIZE, &m) == 0) {
    r->n++;
    r->examples += m.examples;
  }
  wire_wr_free(w);
  return 0;
}

/* Rows [r0, r0 + n) as a QUEUE batch: x[r] = {r, -r}, y[r] = r and, with
 * ids, row r's ids {3r, 3r + 1}. */
static void hold(worker *w, uint64_t task, int64_t r0, int64_t n, bool ids) {
  int64_t xs[2] = {n, 2}, ys[1] = {n};
  tensor *x = tensor_new(2, xs), *y = tensor_new(1, ys);
  int64_t *ptr = calloc((size_t)n + 1, sizeof *ptr);
  uint64_t *id = calloc((size_t)(2 * n), sizeof *id);
  for (int64_t r = 0; r < n; r++) {
    tensor_data(x)[2 * r] = (float)(r0 + r), tensor_data(x)[2 * r + 1] = (float)-(r0 + r);
    tensor_data(y)[r] = (float)(r0 + r);
    ptr[r + 1] = 2 * (r + 1);
    id[2 * r] = (uint64_t)(3 * (r0 + r)), id[2 * r + 1] = (uint64_t)(3 * (r0 + r) + 1);
  }
  nn_sparse sp = {.rows = n, .ptr = ptr, .ids = id, .fields = 2};
  uint8_t *b = NULL;
  size_t blen = 0;
  if (ids) CHECK_OK(data_sparse_batch_encode(&sp, 1000, &b, &blen));
  wire_wr m;
  wire_wr_init(&m);
  wire_put_feed_batch(&m, &(wire_msg_feed_batch){.task = task, .seq = task, .mode = WIRE_FEED_QUEUE,
                                                 .x = {.t = x}, .y = {.t = y},
                                                 .sparse = {b, (uint32_t)blen}});
  CHECK_OK(wire_wr_finish(&m, WIRE_FEED_BATCH, 0));
  CHECK_OK(worker_feed_batch(w, 1, m.buf + WIRE_HEADER_SIZE, m.len - WIRE_HEADER_SIZE));
  wire_wr_free(&m);
  free(b), free(ptr), free(id);
  tensor_free(x), tensor_free(y);
}

/* Takes up to n rows: their count; each row's x, y and ids must be the
 * row's own, and ids present exactly when `ids`. */
static int64_t take(worker *w, int64_t n, bool ids) {
  tensor *x, *y;
  data_sparse sp;
  CHECK_INT_EQ(worker__fed_take(w, n, &x, &y, &sp), 1);
  int64_t k = x->shape[0];
  CHECK(k >= 1 && k <= n && y->shape[0] == k);
  CHECK_INT_EQ(sp.bound != 0, ids);
  for (int64_t r = 0; r < k; r++) {
    float row = tensor_data(x)[2 * r];
    CHECK(tensor_data(x)[2 * r + 1] == -row && tensor_data(y)[r] == row);
    if (!ids) continue;
    CHECK_INT_EQ(sp.ptr[r + 1] - sp.ptr[r], 2);
    CHECK_INT_EQ(sp.ids[sp.ptr[r]], (uint64_t)(3 * row));
    CHECK_INT_EQ(sp.ids[sp.ptr[r] + 1], (uint64_t)(3 * row + 1));
  }
  CHECK(!ids || (sp.fields == 2 && sp.bound == 1000 && sp.ptr[0] == 0));
  tensor_free(x), tensor_free(y);
  data_sparse_free(&sp);
  return k;
}

TEST(worker_fed_queue_keeps_each_rows_ids) {
  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  keyring keys;
  memset(&keys, 0, sizeof keys);
  results res = {0};
  worker *w = worker_new(&loop, &keys, ROLE_WORKER, 0, count_results, &res);
  CHECK(w != NULL);
  hold(w, 1, 0, 5, true);   /* rows 0..4 */
  hold(w, 2, 5, 5, true);   /* rows 5..9 */
  hold(w, 3, 10, 4, false); /* rows 10..13, no ids: never merged with the others */
  hold(w, 4, 14, 3, true);  /* rows 14..16 */
  CHECK_INT_EQ(take(w, 3, true), 3);  /* split: rows 0..2 */
  CHECK_INT_EQ(take(w, 4, true), 4);  /* merged: 3, 4 and 5, 6 */
  CHECK_INT_EQ(res.n, 1);             /* the first batch is used up */
  CHECK_INT_EQ(take(w, 10, true), 3); /* 7..9: the next batch has no ids */
  CHECK_INT_EQ(take(w, 10, false), 4);
  CHECK_INT_EQ(take(w, 3, true), 3);  /* whole: handed over */
  tensor *x, *y;
  data_sparse sp;
  CHECK_INT_EQ(worker__fed_take(w, 1, &x, &y, &sp), 0);
  CHECK_INT_EQ(res.n, 4);
  CHECK_INT_EQ(res.examples, 17);
  /* a slice keeps the rows' ids too (w:train_step's copy) */
  hold(w, 5, 20, 4, true);
  CHECK_INT_EQ(worker__fed_take(w, 4, &x, &y, &sp), 1);
  data_sparse part;
  CHECK_OK(worker__sparse_slice(&part, &sp, 1, 2));
  CHECK(part.ptr[0] == 0 && part.ptr[2] == 4 && part.ids[0] == 63 && part.ids[3] == 67);
  data_sparse_free(&part);
  data_sparse_free(&sp);
  tensor_free(x), tensor_free(y);
  worker_close(w);
  uv_run(&loop, UV_RUN_DEFAULT);
  worker_free(w);
  CHECK(uv_loop_close(&loop) == 0);
}
