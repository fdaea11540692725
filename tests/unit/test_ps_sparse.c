/* test_ps_sparse.c - a ps's shards of sparse tables: two shards split a
 * table's ids by sptable_owner and each holds only its own; pulled rows
 * are the deterministic initial rows; a push steps the rows exactly as the
 * in-process optimizer does; foreign, unsorted and out-of-range ids, an
 * unknown table and bad SPARSE_INIT fields are refused; a step schedule
 * rates each update by the ps's step, a plateau one by LR_SCALE's factor; sync
 * pushes are summed per row and applied once per step. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "cluster/ps/ps_sparse.h"
#include "numeric/optim.h"
#include "numeric/sptable.h"

#define DIM 4

static wire_msg_sparse_init init_msg(uint32_t shard, uint32_t shards) {
  wire_msg_sparse_init m = {.table = 2, .rows = 1ULL << 24, .dim = DIM, .std = 0.1,
                            .seed = 77, .shard = shard, .shards = shards};
  optim_cfg_default(&m.optim, OPTIM_ADAGRAD);
  m.optim.lr = 0.5f;
  return m;
}

/* The ids below 200 that ps `k` of 2 owns, sorted; their count. */
static size_t owned(uint32_t k, uint64_t *ids) {
  size_t n = 0;
  for (uint64_t id = 0; id < 200; id++)
    if (sptable_owner(id, 2) == k) ids[n++] = id;
  return n;
}

TEST(ps_sparse_shards_hold_only_their_rows) {
  ps_sparse *ps[2] = {ps_sparse_new(), ps_sparse_new()};
  CHECK(ps[0] && ps[1]);
  sptable *local = sptable_new(1ULL << 24, DIM, 0.1f, 77); /* the in-process twin */
  CHECK(local);
  wire_msg_sparse_init m0 = init_msg(0, 2), m1 = init_msg(1, 2);
  CHECK_OK(ps_sparse_init(ps[0], &m0));
  CHECK_OK(ps_sparse_init(ps[1], &m1));
  float init[2] = {0, 0}, *ip[2] = {&init[0], &init[1]};
  optim_slots_init(&m0.optim, ip, 1);
  CHECK_OK(sptable_set_slots(local, optim_nslots(&m0.optim), init));
  uint64_t ids[2][200];
  size_t n[2] = {owned(0, ids[0]), owned(1, ids[1])};
  CHECK(n[0] > 70 && n[1] > 70 && n[0] + n[1] == 200);
  static float rows[200 * DIM], grads[200 * DIM], want[DIM];
  for (int i = 0; i < 200 * DIM; i++) grads[i] = (float)(i % 7) - 3.0f;
  for (int k = 0; k < 2; k++) {
    CHECK_OK(ps_sparse_pull(ps[k], 2, ids[k], n[k], rows));
    CHECK_INT_EQ(ps_sparse_held(ps[k], 2), 0); /* a pull creates nothing: a push does */
    sptable_init_row(local, ids[k][n[k] - 1], want);
    CHECK(memcmp(rows + (n[k] - 1) * DIM, want, sizeof want) == 0);
    CHECK_OK(ps_sparse_push(ps[k], 2, ids[k], n[k], grads, 0));
    CHECK_OK(optim_table_update(&m0.optim, local, ids[k], grads, (int64_t)n[k]));
    CHECK_OK(ps_sparse_pull(ps[k], 2, ids[k], n[k], rows));
    for (size_t i = 0; i < n[k]; i++)
      CHECK(memcmp(rows + i * DIM, sptable_value(local, sptable_find(local, ids[k][i])),
                   sizeof want) == 0);
    CHECK_INT_EQ(ps_sparse_held(ps[k], 2), (int64_t)n[k]);
    /* The other shard's first id: refused, and not created. */
    CHECK_ERR(ps_sparse_pull(ps[k], 2, ids[1 - k], 1, rows), DRV_EINVAL, "not this ps's");
    CHECK_INT_EQ(ps_sparse_held(ps[k], 2), (int64_t)n[k]);
  }
  CHECK_INT_EQ(ps_sparse_held(ps[0], 3), -1);
  sptable_free(local);
  ps_sparse_free(ps[0]);
  ps_sparse_free(ps[1]);
}

TEST(ps_sparse_refuses_bad_requests) {
  ps_sparse *s = ps_sparse_new();
  CHECK(s);
  wire_msg_sparse_init m = init_msg(0, 1);
  CHECK_OK(ps_sparse_init(s, &m));
  float rows[2 * DIM] = {0};
  uint64_t unsorted[2] = {9, 4}, past[1] = {1ULL << 24};
  CHECK_ERR(ps_sparse_pull(s, 2, unsorted, 2, rows), DRV_EINVAL, "sorted and unique");
  CHECK_ERR(ps_sparse_push(s, 2, past, 1, rows, 0), DRV_ERANGE, "outside the table");
  CHECK_ERR(ps_sparse_pull(s, 5, past, 0, rows), DRV_EINVAL, "no table 5");
  CHECK_INT_EQ(ps_sparse_held(s, 2), 0);
  wire_msg_sparse_init bad = init_msg(2, 2);
  CHECK_ERR(ps_sparse_init(s, &bad), DRV_EINVAL, "shard 2 of 2");
  bad = init_msg(0, 1), bad.table = PS_SPARSE_MAX_TABLES;
  CHECK_ERR(ps_sparse_init(s, &bad), DRV_EINVAL, "past the");
  bad = init_msg(0, 1), bad.rows = (1ULL << 40) + 1;
  CHECK(ps_sparse_init(s, &bad) == DRV_EINVAL);
  ps_sparse_free(s);
}

/* A plateau schedule: LR_SCALE's factor rates the next updates of the
 * tables with the schedule (lr * scale) and not the others'; a table made
 * again (SPARSE_INIT) starts unreduced. */
TEST(ps_sparse_plateau_scale_rates_its_tables) {
  ps_sparse *s = ps_sparse_new();
  sptable *local = sptable_new(1ULL << 24, DIM, 0.1f, 77);
  sptable *plain = sptable_new(1ULL << 24, DIM, 0.1f, 77);
  CHECK(s && local && plain);
  wire_msg_sparse_init m = init_msg(0, 1), o = init_msg(0, 1);
  optim_cfg_default(&m.optim, OPTIM_SGD);
  m.optim.lr = 0.5f;
  m.optim.sched.kind = OSCHED_PLATEAU, m.optim.sched.factor = 0.5f, m.optim.sched.patience = 1;
  o.table = 3, o.optim = m.optim, o.optim.sched = (optim_sched){0};
  CHECK_OK(ps_sparse_init(s, &m));
  CHECK_OK(ps_sparse_init(s, &o));
  CHECK_INT_EQ(ps_sparse_set_lr_scale(s, 0.25), 1);
  uint64_t ids[2] = {3, 9};
  float g[2 * DIM] = {1, 2, 3, 4, 5, 6, 7, 8}, rows[2 * DIM];
  CHECK_OK(ps_sparse_push(s, 2, ids, 2, g, 4));
  CHECK_OK(ps_sparse_push(s, 3, ids, 2, g, 4));
  optim_cfg at = m.optim;
  at.sched = (optim_sched){0}, at.lr = 0.5f * 0.25f;
  CHECK_OK(optim_table_update(&at, local, ids, g, 2));
  at.lr = 0.5f;
  CHECK_OK(optim_table_update(&at, plain, ids, g, 2));
  CHECK_OK(ps_sparse_pull(s, 2, ids, 2, rows));
  CHECK(memcmp(rows, sptable_value(local, sptable_find(local, 3)), DIM * sizeof(float)) == 0);
  CHECK(memcmp(rows + DIM, sptable_value(local, sptable_find(local, 9)), DIM * sizeof(float)) == 0);
  CHECK_OK(ps_sparse_pull(s, 3, ids, 2, rows)); /* no plateau schedule: the base rate */
  CHECK(memcmp(rows, sptable_value(plain, sptable_find(plain, 3)), DIM * sizeof(float)) == 0);
  CHECK_OK(ps_sparse_init(s, &m)); /* made again: unreduced until LR_SCALE comes again */
  sptable_free(local);
  local = sptable_new(1ULL << 24, DIM, 0.1f, 77);
  CHECK(local);
  CHECK_OK(ps_sparse_push(s, 2, ids, 2, g, 4));
  CHECK_OK(optim_table_update(&at, local, ids, g, 2));
  CHECK_OK(ps_sparse_pull(s, 2, ids, 2, rows));
  CHECK(memcmp(rows, sptable_value(local, sptable_find(local, 3)), DIM * sizeof(float)) == 0);
  sptable_free(local);
  sptable_free(plain);
  ps_sparse_free(s);
}

/* A step schedule: an async push at the ps's step 10 is rated as the
 * in-process optimizer's eleventh update would be (lr * gamma). */
TEST(ps_sparse_schedule_rates_by_the_ps_step) {
  ps_sparse *s = ps_sparse_new();
  sptable *local = sptable_new(1ULL << 24, DIM, 0.1f, 77);
  CHECK(s && local);
  wire_msg_sparse_init m = init_msg(0, 1);
  optim_cfg_default(&m.optim, OPTIM_SGD);
  m.optim.lr = 0.5f;
  m.optim.sched.kind = OSCHED_STEP, m.optim.sched.step_size = 10, m.optim.sched.gamma = 0.25f;
  CHECK_OK(ps_sparse_init(s, &m));
  uint64_t ids[2] = {3, 9};
  float g[2 * DIM] = {1, 2, 3, 4, 5, 6, 7, 8}, rows[2 * DIM];
  CHECK_OK(ps_sparse_push(s, 2, ids, 2, g, 10));
  optim_cfg at = m.optim;
  at.lr = 0.5f * 0.25f;
  CHECK_OK(optim_table_update(&at, local, ids, g, 2));
  CHECK_OK(ps_sparse_pull(s, 2, ids, 2, rows));
  CHECK(memcmp(rows, sptable_value(local, sptable_find(local, 3)), DIM * sizeof(float)) == 0);
  CHECK(memcmp(rows + DIM, sptable_value(local, sptable_find(local, 9)), DIM * sizeof(float)) == 0);
  sptable_free(local);
  ps_sparse_free(s);
}

/* Sync: two workers' pushes are summed per row and averaged over the
 * step's pushes, then each touched row steps once (its count goes to 1);
 * nothing moves before the step is applied. */
TEST(ps_sparse_sync_sums_rows_then_steps_once) {
  ps_sparse *s = ps_sparse_new();
  sptable *local = sptable_new(1ULL << 24, DIM, 0.1f, 77);
  CHECK(s && local);
  wire_msg_sparse_init m = init_msg(0, 1);
  m.mode = true;
  CHECK_OK(ps_sparse_init(s, &m));
  float init[2] = {0, 0}, *ip[2] = {&init[0], &init[1]};
  optim_slots_init(&m.optim, ip, 1);
  CHECK_OK(sptable_set_slots(local, optim_nslots(&m.optim), init));
  uint64_t a[2] = {4, 8}, b[2] = {8, 15};
  float ga[2 * DIM] = {1, 2, 3, 4, 5, 6, 7, 8}, gb[2 * DIM] = {-1, 0.5f, 2, 2, 9, 9, 9, 9};
  float rows[3 * DIM], want[DIM];
  uint64_t all[3] = {4, 8, 15};
  CHECK_OK(ps_sparse_push(s, 2, a, 2, ga, 0));
  CHECK_OK(ps_sparse_push(s, 2, b, 2, gb, 0));
  CHECK_OK(ps_sparse_pull(s, 2, all, 3, rows)); /* not stepped yet */
  sptable_init_row(local, 8, want);
  CHECK(memcmp(rows + DIM, want, sizeof want) == 0);
  CHECK_OK(ps_sparse_apply_sync(s, 2, 0));
  float avg[3 * DIM];
  for (int j = 0; j < DIM; j++) {
    avg[j] = ga[j] * 0.5f;
    avg[DIM + j] = (ga[DIM + j] + gb[j]) * 0.5f;
    avg[2 * DIM + j] = gb[DIM + j] * 0.5f;
  }
  CHECK_OK(optim_table_update(&m.optim, local, all, avg, 3));
  CHECK_OK(ps_sparse_pull(s, 2, all, 3, rows));
  for (int i = 0; i < 3; i++)
    CHECK(memcmp(rows + i * DIM, sptable_value(local, sptable_find(local, all[i])),
                 sizeof want) == 0);
  CHECK_OK(ps_sparse_apply_sync(s, 2, 1)); /* an empty step moves nothing */
  CHECK_OK(ps_sparse_pull(s, 2, all, 1, rows));
  CHECK(memcmp(rows, sptable_value(local, sptable_find(local, 4)), sizeof want) == 0);
  sptable_free(local);
  ps_sparse_free(s);
}

/* SPARSE_LOAD's rows: put as they are, with fresh slots and counts, and
 * refused whole (nothing put) when one id is another shard's. */
TEST(ps_sparse_put_rows_then_pull_them) {
  ps_sparse *s = ps_sparse_new();
  CHECK(s);
  wire_msg_sparse_init m = init_msg(0, 2);
  CHECK_OK(ps_sparse_init(s, &m));
  uint64_t mine[200];
  size_t n = owned(0, mine);
  static float rows[200 * DIM], back[200 * DIM];
  for (size_t i = 0; i < n * DIM; i++) rows[i] = (float)i * 0.25f;
  CHECK_OK(ps_sparse_put_rows(s, 2, mine, n, rows));
  CHECK_INT_EQ(ps_sparse_held(s, 2), (int64_t)n);
  CHECK_OK(ps_sparse_pull(s, 2, mine, n, back));
  CHECK(memcmp(rows, back, n * DIM * sizeof(float)) == 0);
  uint64_t theirs[200];
  owned(1, theirs);
  uint64_t mixed[2] = {mine[0] < theirs[0] ? mine[0] : theirs[0],
                       mine[0] < theirs[0] ? theirs[0] : mine[0]};
  CHECK_ERR(ps_sparse_put_rows(s, 2, mixed, 2, rows), DRV_EINVAL, "not this ps's");
  CHECK_INT_EQ(ps_sparse_held(s, 2), (int64_t)n);
  ps_sparse_free(s);
}
