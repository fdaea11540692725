/* test_sparse_feed.c - a batch's ids on the wire (FEED_BATCH.sparse,
 * data_sparse_batch_encode/decode): hashed fields and weighted rows come
 * back as they went, the bound is the ids' own when none is given, and
 * bytes that are not such a batch (another row count, offsets that run
 * backwards, an id past the bound, a short header) are refused with
 * nothing kept: the sender's protocol error. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/err.h"
#include "data/data.h"

TEST(sparse_feed_batch_ids_round_trip) {
  const int64_t ptr[] = {0, 2, 4, 6};
  const uint64_t ids[] = {5, 9, 0, 9, 7, 1};
  nn_sparse sp = {.rows = 3, .ptr = ptr, .ids = ids, .fields = 2};
  uint8_t *b = NULL;
  size_t n = 0;
  CHECK_OK(data_sparse_batch_encode(&sp, 16, &b, &n));
  CHECK(b && n == 21 + 8 * 4 + 8 * 6);
  data_sparse s;
  CHECK_OK(data_sparse_batch_decode(&s, 3, b, n, "FEED_BATCH 1's ids"));
  CHECK(s.bound == 16 && s.fields == 2 && !s.weighted && !s.vals);
  CHECK(memcmp(s.ptr, ptr, sizeof ptr) == 0 && memcmp(s.ids, ids, sizeof ids) == 0);
  nn_sparse v = data_sparse_view(&s, 3);
  CHECK(v.rows == 3 && v.ptr == s.ptr && v.ids == s.ids && v.fields == 2 && !v.vals);
  data_sparse_free(&s);
  CHECK(s.ptr == NULL && s.bound == 0);
  free(b);
  /* weighted rows of any length, the bound their own (largest id + 1) */
  const int64_t wptr[] = {0, 3, 3};
  const uint64_t wids[] = {2, 40, 41};
  const float vals[] = {0.5f, -2, 3};
  nn_sparse w = {.rows = 2, .ptr = wptr, .ids = wids, .vals = vals};
  CHECK_OK(data_sparse_batch_encode(&w, 0, &b, &n));
  CHECK_OK(data_sparse_batch_decode(&s, 2, b, n, "w"));
  CHECK(s.bound == 42 && s.weighted && s.fields == 0);
  CHECK(memcmp(s.vals, vals, sizeof vals) == 0 && s.ptr[1] == 3 && s.ptr[2] == 3);
  data_sparse_free(&s);
  free(b);
  /* no ids: no bytes, and no bytes decode to none */
  CHECK_OK(data_sparse_batch_encode(NULL, 0, &b, &n));
  CHECK(b == NULL && n == 0);
  CHECK_OK(data_sparse_batch_decode(&s, 4, NULL, 0, "none"));
  CHECK(s.bound == 0 && s.ptr == NULL);
}

TEST(sparse_feed_batch_ids_refusals) {
  const int64_t ptr[] = {0, 1, 3};
  const uint64_t ids[] = {3, 4, 5};
  nn_sparse sp = {.rows = 2, .ptr = ptr, .ids = ids};
  uint8_t *b = NULL;
  size_t n = 0;
  CHECK_ERR(data_sparse_batch_encode(&sp, 5, &b, &n), DRV_ERANGE, "id 5 is not below 5");
  CHECK(b == NULL);
  const int64_t back[] = {0, 2, 1};
  nn_sparse bad = {.rows = 2, .ptr = back, .ids = ids};
  CHECK(data_sparse_batch_encode(&bad, 8, &b, &n) == DRV_EINVAL && b == NULL);
  CHECK_OK(data_sparse_batch_encode(&sp, 8, &b, &n));
  data_sparse s;
  CHECK_ERR(data_sparse_batch_decode(&s, 3, b, n, "FEED_BATCH 7's ids"), DRV_EPARSE,
            "FEED_BATCH 7's ids: the sparse part's header does not match");
  CHECK_ERR(data_sparse_batch_decode(&s, 2, b, 20, "x"), DRV_EPARSE, "a sparse part of 20 bytes");
  uint8_t *p1 = b + 21 + 8;
  p1[0] = 4; /* row 0 ends past row 1's end */
  CHECK_ERR(data_sparse_batch_decode(&s, 2, b, n, "x"), DRV_EPARSE, "inconsistent");
  p1[0] = 1;
  b[21 + 24] = 8; /* the first id: 8, at the bound */
  CHECK_ERR(data_sparse_batch_decode(&s, 2, b, n, "x"), DRV_EPARSE, "inconsistent");
  CHECK(s.ptr == NULL && s.bound == 0);
  CHECK_ERR(data_sparse_batch_decode(&s, -1, b, n, "x"), DRV_EPARSE, "ids for -1 rows");
  free(b);
}
