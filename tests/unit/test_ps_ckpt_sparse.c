/* test_ps_ckpt_sparse.c - a ps's shards of sparse tables through its
 * checkpoint file: the snapshot names the tensors by the table's name
 * (ids, rows, Adam's two slots, counts, the shard in the metadata); a
 * fresh store restored from the file holds the same rows, and its next
 * lazy-Adam step is bit for bit the original's (slots and per-row counts
 * came back); a restore drops rows held before; a table the request does
 * not name, a missing tensor, an id of another ps or twice are refused
 * with nothing changed; an empty shard goes through too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/safetensors.h"
#include "cluster/ps/ps_ckpt_sparse.h"
#include "cluster/ps/ps_sparse.h"
#include "numeric/optim.h"
#include "numeric/sptable.h"

#define DIM 3
#define TABLE 2

static ps_sparse *adam_shard(uint32_t shard) {
  wire_msg_sparse_init m = {.table = TABLE, .rows = 1ULL << 30, .dim = DIM, .std = 0.2,
                            .seed = 9, .shard = shard, .shards = 2};
  optim_cfg_default(&m.optim, OPTIM_ADAM);
  m.optim.lr = 0.05f;
  ps_sparse *s = ps_sparse_new();
  if (s && ps_sparse_init(s, &m) < 0) {
    ps_sparse_free(s);
    return NULL;
  }
  return s;
}

/* The first n ids from `from` that shard 1 of 2 owns. */
static void owned(uint64_t from, uint64_t *ids, size_t n) {
  for (uint64_t id = from; n; id++)
    if (sptable_owner(id, 2) == 1) *ids++ = id, n--;
}

static uint32_t vars[2] = {7, PS_SPARSE_VAR | TABLE};
static char n0[] = "1.weight", n1[] = "0.1.weight";
static char *names[2] = {n0, n1};

/* s's snapshot as a file read back into *f. */
static int round_trip(const ps_sparse *s, safetensors_file *f) {
  ps_spsnap p;
  int rc = ps_spsnap_take(s, vars, names, 2, &p);
  const char *meta[8] = {0};
  for (size_t i = 0; rc == 0 && i < p.nmeta; i++) meta[i] = p.meta[i];
  uint8_t *buf = NULL;
  size_t len;
  char digest[128];
  if (rc == 0) rc = safetensors_encode("ps-1", p.e, p.n, meta, &buf, &len, digest);
  if (rc == 0) rc = safetensors_read_mem("ps-1", buf, len, f);
  free(buf);
  ps_spsnap_free(&p);
  return rc;
}

TEST(ps_ckpt_sparse_round_trip_is_bit_exact) {
  ps_sparse *a = adam_shard(1), *b = adam_shard(1);
  CHECK(a && b);
  uint64_t ids[6];
  owned(100, ids, 6);
  float g[6 * DIM], ra[6 * DIM], rb[6 * DIM];
  for (int i = 0; i < 6 * DIM; i++) g[i] = 0.1f * (float)(i % 5) - 0.2f;
  CHECK_OK(ps_sparse_push(a, TABLE, ids, 6, g, 0));
  CHECK_OK(ps_sparse_push(a, TABLE, ids + 2, 3, g, 0)); /* rows 2..4: counts 2, the rest 1 */
  uint64_t stray[1];
  owned(5000, stray, 1);
  CHECK_OK(ps_sparse_push(b, TABLE, stray, 1, g, 0)); /* held before the restore */
  safetensors_file f;
  CHECK_OK(round_trip(a, &f));
  const safetensors_tensor *t = safetensors_find(&f, "0.1.weight.ids");
  CHECK(t && t->i64 && t->shape[0] == 6);
  t = safetensors_find(&f, "optim.0.1.weight.count");
  CHECK(t && t->i64 && t->i64[0] == 1 && t->i64[2] == 2);
  CHECK(safetensors_find(&f, "0.1.weight.rows") && safetensors_find(&f, "optim.0.1.weight.0") &&
        safetensors_find(&f, "optim.0.1.weight.1"));
  CHECK(safetensors_meta(&f, "0.1.weight.shard") &&
        strcmp(safetensors_meta(&f, "0.1.weight.shard"), "1/2") == 0);
  CHECK_OK(ps_spsnap_restore(b, &f, vars, names, 2));
  safetensors_free(&f);
  CHECK_INT_EQ(ps_sparse_held(b, TABLE), 6); /* the stray row went */
  float init[DIM];
  sptable_init_row(ps_sparse_table(b, TABLE), stray[0], init);
  CHECK_OK(ps_sparse_pull(b, TABLE, stray, 1, rb));
  CHECK(memcmp(rb, init, sizeof init) == 0);
  /* the next step: lazy Adam reads each row's moments and count */
  CHECK_OK(ps_sparse_push(a, TABLE, ids, 6, g, 0));
  CHECK_OK(ps_sparse_push(b, TABLE, ids, 6, g, 0));
  CHECK_OK(ps_sparse_pull(a, TABLE, ids, 6, ra));
  CHECK_OK(ps_sparse_pull(b, TABLE, ids, 6, rb));
  CHECK(memcmp(ra, rb, sizeof ra) == 0);
  ps_sparse_free(a);
  ps_sparse_free(b);
}

TEST(ps_ckpt_sparse_refusals_change_nothing) {
  ps_sparse *a = adam_shard(1), *b = adam_shard(1), *other = adam_shard(0);
  CHECK(a && b && other);
  uint64_t ids[4];
  owned(10, ids, 4);
  float g[4 * DIM] = {0.5f}, r[4 * DIM];
  CHECK_OK(ps_sparse_push(a, TABLE, ids, 4, g, 0));
  CHECK_OK(ps_sparse_push(b, TABLE, ids, 2, g, 0));
  ps_spsnap p;
  CHECK_ERR(ps_spsnap_take(a, vars, names, 1, &p), DRV_EINVAL, "no name for sparse table 2");
  ps_spsnap_free(&p);
  safetensors_file f;
  CHECK_OK(round_trip(a, &f));
  CHECK_ERR(ps_spsnap_restore(b, &f, vars, names, 1), DRV_EINVAL, "no name for sparse table 2");
  char bad[] = "0.2.weight";
  char *wrong[2] = {n0, bad};
  CHECK_ERR(ps_spsnap_restore(b, &f, vars, wrong, 2), DRV_EINVAL, "no 0.2.weight.ids");
  /* shard 0 cannot take shard 1's rows */
  CHECK_ERR(ps_spsnap_restore(other, &f, vars, names, 2), DRV_EINVAL, "not this ps's (0)");
  safetensors_free(&f);
  int64_t twice[2] = {(int64_t)ids[0], (int64_t)ids[0]}, counts[2] = {1, 1};
  float vals[2 * DIM] = {0}, s0[2 * DIM] = {0}, s1[2 * DIM] = {0};
  ps_sparse_rows rows = {.ids = twice, .n = 2, .values = vals, .slots = {s0, s1}, .nslots = 2,
                         .counts = counts};
  CHECK_ERR(ps_sparse_load(b, TABLE, &rows), DRV_EINVAL, "there twice");
  rows.nslots = 1;
  CHECK_ERR(ps_sparse_load(b, TABLE, &rows), DRV_EINVAL, "optimizer slots");
  CHECK_INT_EQ(ps_sparse_held(b, TABLE), 2);
  CHECK_OK(ps_sparse_pull(b, TABLE, ids, 2, r));
  float want[2 * DIM];
  CHECK_OK(ps_sparse_pull(a, TABLE, ids, 2, want)); /* one push each: equal rows */
  CHECK(memcmp(r, want, sizeof want) == 0);
  ps_sparse_free(a);
  ps_sparse_free(b);
  ps_sparse_free(other);
}

TEST(ps_ckpt_sparse_empty_shard) {
  ps_sparse *a = adam_shard(1), *b = adam_shard(1);
  CHECK(a && b);
  uint64_t ids[1];
  owned(3, ids, 1);
  float g[DIM] = {1, 1, 1};
  CHECK_OK(ps_sparse_push(b, TABLE, ids, 1, g, 0));
  safetensors_file f;
  CHECK_OK(round_trip(a, &f)); /* I64 [0]: the reader keeps no dtype */
  CHECK_OK(ps_spsnap_restore(b, &f, vars, names, 2));
  safetensors_free(&f);
  CHECK_INT_EQ(ps_sparse_held(b, TABLE), 0);
  ps_spsnap p;
  CHECK_OK(ps_spsnap_take(NULL, vars, names, 2, &p)); /* no tables at all */
  CHECK_INT_EQ((int64_t)p.n, 0);
  ps_spsnap_free(&p);
  ps_sparse_free(a);
  ps_sparse_free(b);
}
