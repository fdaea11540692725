/* test_sptable.c - the lazily-filled row table: creation on first touch,
 * deterministic rows whatever the order, the index under growth, slots and
 * counts, limits; and nn_sparse_check. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "numeric/sparse.h"
#include "numeric/sptable.h"

TEST(sptable_creates_on_first_touch) {
  sptable *t = sptable_new(1ULL << 40, 16, 1.0f, 7);
  CHECK(t);
  CHECK_INT_EQ(sptable_held(t), 0);
  CHECK_INT_EQ(sptable_find(t, 123), -1);
  int64_t k = sptable_get(t, 123);
  CHECK_INT_EQ(k, 0);
  CHECK_INT_EQ(sptable_get(t, (1ULL << 40) - 1), 1);
  CHECK_INT_EQ(sptable_get(t, 123), 0);
  CHECK_INT_EQ(sptable_find(t, 123), 0);
  CHECK_INT_EQ(sptable_held(t), 2);
  CHECK_INT_EQ(sptable_id(t, 1), (1ULL << 40) - 1);
  CHECK_ERR(sptable_get(t, 1ULL << 40), DRV_ERANGE, "outside");
  CHECK_INT_EQ(sptable_held(t), 2);
  /* A declared 2^40 x 16 table (64 TiB dense) holds two rows in kilobytes. */
  CHECK(sptable_bytes(t) < 1u << 20);
  sptable_free(t);
}

/* The same rows from two tables with the same seed, created in different
 * orders, are bit-identical; another seed gives other values. */
TEST(sptable_rows_deterministic_any_order) {
  sptable *a = sptable_new(1000000, 5, 0.5f, 42), *b = sptable_new(1000000, 5, 0.5f, 42);
  sptable *c = sptable_new(1000000, 5, 0.5f, 43);
  CHECK(a && b && c);
  for (uint64_t i = 0; i < 3000; i++) CHECK(sptable_get(a, i * 7919 % 1000000) >= 0);
  for (uint64_t i = 3000; i-- > 0;) CHECK(sptable_get(b, i * 7919 % 1000000) >= 0);
  for (uint64_t i = 0; i < 3000; i++) {
    uint64_t id = i * 7919 % 1000000;
    int64_t ka = sptable_find(a, id), kb = sptable_find(b, id);
    CHECK(ka >= 0 && kb >= 0);
    CHECK(memcmp(sptable_value(a, ka), sptable_value(b, kb), 5 * sizeof(float)) == 0);
  }
  CHECK(sptable_get(c, 7919) >= 0);
  CHECK(memcmp(sptable_value(c, 0), sptable_value(a, sptable_find(a, 7919)), 20) != 0);
  sptable_free(a);
  sptable_free(b);
  sptable_free(c);
}

/* Values look like N(0, std^2): mean and variance over many rows. */
TEST(sptable_init_is_normal_with_std) {
  sptable *t = sptable_new(1ULL << 30, 3, 0.25f, 1);
  CHECK(t);
  double s = 0, s2 = 0;
  int n = 0;
  for (uint64_t id = 0; id < 20000; id++) {
    float row[3];
    sptable_init_row(t, id * 104729, row);
    for (int j = 0; j < 3; j++, n++) s += row[j], s2 += (double)row[j] * row[j];
  }
  CHECK_NEAR(s / n, 0.0, 0.01);
  CHECK_NEAR(s2 / n, 0.0625, 0.003);
  sptable *z = sptable_new(10, 4, 0.0f, 1);
  float zr[4] = {1, 1, 1, 1};
  sptable_init_row(z, 3, zr);
  for (int j = 0; j < 4; j++) CHECK(zr[j] == 0.0f);
  sptable_free(z);
  sptable_free(t);
}

/* Many rows: the index grows, row pointers taken early stay valid, every
 * id maps back to its own row. */
TEST(sptable_index_growth_keeps_rows) {
  sptable *t = sptable_new(1ULL << 40, 2, 1.0f, 3);
  CHECK(t);
  CHECK(sptable_get(t, 5) == 0);
  float *first = sptable_value(t, 0), keep[2];
  memcpy(keep, first, sizeof keep);
  for (uint64_t i = 0; i < 100000; i++) CHECK(sptable_get(t, i * 1000003ULL) >= 0);
  CHECK(memcmp(first, keep, sizeof keep) == 0);
  CHECK(sptable_value(t, 0) == first);
  for (int64_t k = 0; k < sptable_held(t); k++)
    CHECK_INT_EQ(sptable_find(t, sptable_id(t, k)), k);
  sptable_free(t);
}

TEST(sptable_slots_and_counts) {
  sptable *t = sptable_new(100, 3, 1.0f, 9);
  CHECK(sptable_get(t, 4) == 0);
  *sptable_count(t, 0) = 5;
  float init[2] = {0.1f, 0.0f};
  CHECK_OK(sptable_set_slots(t, 2, init));
  CHECK_INT_EQ(sptable_nslots(t), 2);
  CHECK_INT_EQ(*sptable_count(t, 0), 0);
  CHECK(sptable_get(t, 99) == 1);
  for (int64_t k = 0; k < 2; k++)
    for (int j = 0; j < 3; j++) {
      CHECK(sptable_slot(t, k, 0)[j] == 0.1f);
      CHECK(sptable_slot(t, k, 1)[j] == 0.0f);
    }
  CHECK_ERR(sptable_set_slots(t, 3, init), DRV_EINVAL, "slots");
  sptable_free(t);
}

TEST(sptable_refuses_bad_sizes) {
  CHECK(!sptable_new((1ULL << 40) + 1, 4, 1.0f, 0));
  CHECK_STR_CONTAINS(err_msg(), "2^40");
  CHECK(!sptable_new(10, 0, 1.0f, 0));
  CHECK(!sptable_new(10, (1LL << 20) + 1, 1.0f, 0));
  CHECK(!sptable_new(10, 4, -1.0f, 0));
  CHECK(!sptable_new(10, 4, NAN, 0));
  /* The largest row still gets a chunk of one row, not 2^10 of them. */
  sptable *t = sptable_new(4, 1LL << 20, 0.0f, 0);
  CHECK(t && sptable_get(t, 3) == 0);
  CHECK(sptable_bytes(t) < (size_t)5 << 20);
  sptable_free(t);
}

/* Every id has one owner below nps, the same on every call; consecutive
 * (unhashed) ids spread evenly over the ps nodes; one ps owns everything. */
TEST(sptable_owner_spreads_ids) {
  uint32_t count[3] = {0};
  for (uint64_t id = 0; id < 30000; id++) {
    uint32_t k = sptable_owner(id, 3);
    CHECK(k < 3);
    CHECK_INT_EQ(sptable_owner(id, 3), k);
    CHECK_INT_EQ(sptable_owner(id, 1), 0);
    CHECK_INT_EQ(sptable_owner(id, 0), 0);
    count[k]++;
  }
  for (int k = 0; k < 3; k++) CHECK(count[k] > 9500 && count[k] < 10500);
  /* Not id mod nps: the finalizer decides (a fixed, documented choice). */
  int differ = 0;
  for (uint64_t id = 0; id < 64; id++) differ += sptable_owner(id, 2) != id % 2;
  CHECK(differ > 0);
}

/* A request's ids: sorted unique and below the declared rows, and a row
 * count whose bytes overflow a size refused before any allocation. */
TEST(sptable_check_ids_refuses_bad_requests) {
  uint64_t ok[] = {0, 5, 99}, dup[] = {1, 1}, unsorted[] = {3, 2}, big[] = {7, 100};
  CHECK_INT_EQ(sptable_check_ids(100, 16, ok, 3, "SPARSE_PULL"), 0);
  CHECK_INT_EQ(sptable_check_ids(100, 16, ok, 0, "SPARSE_PULL"), 0);
  CHECK_ERR(sptable_check_ids(100, 16, dup, 2, "SPARSE_PULL"), DRV_EINVAL, "sorted and unique");
  CHECK_ERR(sptable_check_ids(100, 16, unsorted, 2, "SPARSE_PUSH"), DRV_EINVAL, "id 2 after 3");
  CHECK_ERR(sptable_check_ids(100, 16, big, 2, "SPARSE_PULL"), DRV_ERANGE,
            "id 100 is outside the table's 100 rows");
  CHECK_ERR(sptable_check_ids(100, 0, ok, 3, "X"), DRV_EINVAL, "row size 0");
  CHECK_ERR(sptable_check_ids(100, SPTABLE_MAX_DIM + 1, ok, 3, "X"), DRV_EINVAL, "row size");
  CHECK_ERR(sptable_check_ids(100, SPTABLE_MAX_DIM, ok, SIZE_MAX / 8, "X"), DRV_ERANGE,
            "overflow");
}

/* A batch's ids with repeats, routed over 3 ps nodes: each id once, in
 * its owner's range, sorted there (what each SPARSE_PULL carries). */
TEST(sptable_route_dedupes_and_groups_by_owner) {
  uint64_t ids[] = {40, 7, 99, 7, 40, 3, 1000000, 99, 5, 6, 8, 9};
  size_t n = sizeof ids / sizeof ids[0];
  uint64_t out[12];
  size_t offs[4];
  CHECK_INT_EQ(sptable_route(ids, n, 3, out, offs), 9);
  CHECK_INT_EQ(offs[0], 0);
  CHECK_INT_EQ(offs[3], 9);
  for (uint32_t k = 0; k < 3; k++) {
    for (size_t i = offs[k]; i < offs[k + 1]; i++) CHECK_INT_EQ(sptable_owner(out[i], 3), k);
    CHECK_OK(sptable_check_ids(2000000, 4, out + offs[k], offs[k + 1] - offs[k], "route"));
  }
  CHECK_INT_EQ(sptable_route(ids, 0, 3, out, offs), 0);
  CHECK_INT_EQ(offs[3], 0);
  CHECK_ERR(sptable_route(ids, n, 0, out, offs), DRV_EINVAL, "0 ps");
}

TEST(sparse_check_structure) {
  int64_t ptr[] = {0, 2, 4, 6};
  uint64_t ids[6] = {1, 2, 3, 4, 5, 6};
  nn_sparse sp = {3, ptr, ids, NULL, 2};
  CHECK_OK(nn_sparse_check(&sp));
  sp.fields = 3;
  CHECK_ERR(nn_sparse_check(&sp), DRV_EINVAL, "row 0 has 2 entries");
  sp.fields = 0;
  int64_t bad[] = {0, 3, 2, 6};
  sp.ptr = bad;
  CHECK_ERR(nn_sparse_check(&sp), DRV_EINVAL, "row 1");
  int64_t off[] = {1, 2, 4, 6};
  sp.ptr = off;
  CHECK_ERR(nn_sparse_check(&sp), DRV_EINVAL, "ptr[0]");
}
