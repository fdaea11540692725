/* test_nn_sparse.c - the id layers: finite-difference gradient checks of
 * every layer (w.r.t. the touched rows and the bias), the sparse update
 * against the dense nn.Embedding's, lazy per-row state, evaluation without
 * creating rows, refusals; and PyTorch's own values (EmbeddingBag with
 * per_sample_weights, SparseAdam, Adagrad on sparse=True embeddings),
 * printed by tests/unit/nn_sparse_torch.py from the same formulas.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "base/safetensors.h"
#include "numeric/nn.h"
#include "numeric/nn_sparse.h"
#include "numeric/optim.h"

#include "nn_sparse_torch.h"

#define N 10
#define D 3

/* The formulas nn_sparse_torch.py shares: weights and output gradients. */
static float wf(int64_t i, int64_t j) { return (float)(0.1 * (double)((i * 13 + j * 7) % 17 - 8)); }
static float cf(int64_t i, int64_t j, int s) {
  return (float)(0.1 * (double)((i * 5 + j * 3 + s) % 7 - 3));
}

static sptable *table_of(nn_module *m) {
  nn_table_list l = {0};
  CHECK_OK(nn_collect_tables(m, false, &l));
  CHECK_INT_EQ(l.n, 1);
  sptable *t = l.items[0].value;
  nn_table_list_free(&l);
  return t;
}

/* Rows 0..N-1 of m's table set to the shared formula. */
static void set_rows(nn_module *m) {
  sptable *t = table_of(m);
  for (int64_t i = 0; i < N; i++) {
    int64_t k = sptable_get(t, (uint64_t)i);
    CHECK(k >= 0);
    for (int64_t j = 0; j < D; j++) sptable_value(t, k)[j] = wf(i, j);
  }
}

static nn_spgrad *grad_of(nn_module *m) {
  nn_table_list l = {0};
  CHECK_OK(nn_collect_tables(m, false, &l));
  nn_spgrad *g = l.items[0].grad;
  nn_table_list_free(&l);
  return g;
}

/* The gradient row of id, or NULL when the id was not touched. */
static const float *grad_row(nn_spgrad *g, uint64_t id) {
  for (int64_t k = 0; k < g->n; k++)
    if (g->ids[k] == id) return g->rows + k * g->dim;
  return NULL;
}

/* The batch of the PyTorch case: bags {1,3} {3,7,9} {} {2}. */
static const int64_t bag_ptr[] = {0, 2, 5, 5, 6};
static const uint64_t bag_ids[] = {1, 3, 3, 7, 9, 2};
static const float bag_psw[] = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, 3.0f};

/* sum(y .* C) and its gradient C, for the finite differences. */
static double loss_of(const tensor *y, int s) {
  double l = 0;
  int64_t cols = y->shape[1];
  for (int64_t i = 0; i < y->shape[0]; i++)
    for (int64_t j = 0; j < cols; j++) l += (double)tensor_data(y)[i * cols + j] * cf(i, j, s);
  return l;
}

static tensor *c_tensor(int64_t rows, int64_t cols, int s) {
  tensor *c = tensor_new2(rows, cols);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) tensor_data(c)[i * cols + j] = cf(i, j, s);
  return c;
}

/* Central differences of sum(y .* C) w.r.t. every element of every row the
 * sparse gradient names, against that gradient; untouched ids have none. */
static void gradcheck(nn_module *m, const tensor *x) {
  const tensor *y;
  CHECK_OK(nn_forward(m, x, &y));
  tensor *c = c_tensor(y->shape[0], tensor_numel(y) / y->shape[0], 0);
  nn_zero_grad(m);
  CHECK_OK(nn_backward(m, x, c, NULL));
  nn_spgrad *g = grad_of(m);
  sptable *t = table_of(m);
  CHECK(g->n > 0);
  const float h = 1e-2f;
  for (int64_t r = 0; r < g->n; r++) {
    float *w = sptable_value(t, sptable_find(t, g->ids[r]));
    for (int64_t j = 0; j < D; j++) {
      float keep = w[j];
      w[j] = keep + h;
      CHECK_OK(nn_forward(m, x, &y));
      double up = loss_of(y, 0);
      w[j] = keep - h;
      CHECK_OK(nn_forward(m, x, &y));
      double down = loss_of(y, 0);
      w[j] = keep;
      CHECK_NEAR(g->rows[r * D + j], (up - down) / (2 * h), 2e-4);
    }
  }
  tensor_free(c);
}

static nn_module *bag(nn_bag_mode mode, nn_bags bags) {
  rng_t r;
  rng_seed(&r, 5);
  nn_bag_opts o = {mode, bags, 1.0f};
  nn_module *m = nn_embedding_bag(N, D, &o, &r);
  CHECK(m);
  set_rows(m);
  return m;
}

TEST(nn_sparse_bag_gradcheck) {
  tensor *x = tensor_new2(4, 2);
  nn_sparse sp = {4, bag_ptr, bag_ids, bag_psw, 0};
  nn_module *m = bag(NN_BAG_SUM, NN_BAGS_ALL);
  nn_set_sparse(m, &sp);
  gradcheck(m, x);
  CHECK(!grad_row(grad_of(m), 0) && grad_row(grad_of(m), 3));
  nn_unref(m);
  sp.vals = NULL;
  m = bag(NN_BAG_MEAN, NN_BAGS_ALL);
  nn_set_sparse(m, &sp);
  gradcheck(m, x);
  nn_unref(m);
  /* Per field: three rows of two fields, field j at columns j*D. */
  int64_t fptr[] = {0, 2, 4, 6};
  uint64_t fids[] = {1, 4, 1, 1, 8, 4};
  nn_sparse fs = {3, fptr, fids, NULL, 2};
  tensor *x3 = tensor_new2(3, 1);
  m = bag(NN_BAG_SUM, NN_BAGS_AUTO);
  nn_set_sparse(m, &fs);
  const tensor *y;
  CHECK_OK(nn_forward(m, x3, &y));
  CHECK_INT_EQ(y->shape[1], 2 * D);
  CHECK(tensor_data(y)[2 * 2 * D + D + 1] == wf(4, 1));
  CHECK(tensor_data(y)[1 * 2 * D + 0] == wf(1, 0));
  gradcheck(m, x3);
  nn_unref(m);
  tensor_free(x);
  tensor_free(x3);
}

TEST(nn_sparse_linear_gradcheck_and_bias) {
  rng_t r;
  rng_seed(&r, 1);
  nn_module *m = nn_sparse_linear(N, D, 0.0f, &r);
  CHECK(m);
  set_rows(m);
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(m, &pl));
  CHECK_INT_EQ(pl.n, 1);
  CHECK(strcmp(pl.items[0].name, "bias") == 0);
  float *b = tensor_data(pl.items[0].value);
  b[0] = 0.5f, b[1] = -1.0f, b[2] = 2.0f;
  tensor *x = tensor_new2(4, 3);
  nn_sparse sp = {4, bag_ptr, bag_ids, bag_psw, 0};
  nn_set_sparse(m, &sp);
  const tensor *y;
  CHECK_OK(nn_forward(m, x, &y));
  /* The empty row is the bias alone; row 0 is 0.5 W[1] - W[3] + bias. */
  CHECK(tensor_data(y)[2 * D + 1] == -1.0f);
  CHECK_NEAR(tensor_data(y)[0], 0.5 * wf(1, 0) - wf(3, 0) + 0.5, 1e-6);
  gradcheck(m, x);
  for (int j = 0; j < D; j++)
    CHECK_NEAR(tensor_data(pl.items[0].grad)[j], cf(0, j, 0) + cf(1, j, 0) + cf(2, j, 0) +
               cf(3, j, 0), 1e-6);
  nn_param_list_free(&pl);
  nn_unref(m);
  tensor_free(x);
}

TEST(nn_sparse_embedding_gradcheck) {
  rng_t r;
  rng_seed(&r, 2);
  nn_module *m = nn_embedding_sparse(N, D, 1.0f, &r);
  CHECK(m);
  set_rows(m);
  float ids[] = {4, 2, 4, 9};
  tensor *x = tensor_from(1, (int64_t[]){4}, ids);
  gradcheck(m, x);
  CHECK_INT_EQ(grad_of(m)->n, 3);
  float bad = 10;
  tensor *xb = tensor_from(1, (int64_t[]){1}, &bad);
  const tensor *y;
  CHECK_ERR(nn_forward(m, xb, &y), DRV_ERANGE, "expected an id in 0..9");
  tensor_free(xb);
  tensor_free(x);
  nn_unref(m);
}

/* One optimizer on the dense nn.Embedding and on the table-backed one
 * with the same weights, over batches with repeated ids: the touched rows
 * match, untouched rows do not move, and the table holds only the rows
 * its batches touched. */
static void sparse_equals_dense(optim_kind kind) {
  rng_t r;
  rng_seed(&r, 3);
  nn_module *dense = nn_embedding(N, D, &r), *sparse = nn_embedding_sparse(N, D, 1.0f, &r);
  float *dw = tensor_data(dense->params[0].value);
  for (int64_t i = 0; i < N * D; i++) dw[i] = wf(i / D, i % D);
  optim_cfg c;
  optim_cfg_default(&c, kind);
  c.lr = 0.1f;
  c.initial_accumulator = 0.1f;
  nn_param_list dp = {0}, sp = {0};
  nn_table_list tl = {0};
  CHECK_OK(nn_collect_params(dense, &dp));
  CHECK_OK(nn_collect_params(sparse, &sp));
  CHECK_INT_EQ(sp.n, 0);
  CHECK_OK(nn_collect_tables(sparse, false, &tl));
  optim_t *od = optim_new(&c, &dp), *os = optim_new(&c, &sp);
  CHECK(od && os);
  CHECK_OK(optim_bind_tables(os, &tl));
  static const float steps[3][4] = {{1, 3, 3, -1}, {3, 5, -1}, {0, 1, 9, 9}};
  static const int lens[3] = {3, 2, 4};
  sptable *t = tl.items[0].value;
  for (int s = 0; s < 3; s++) {
    tensor *x = tensor_from(1, (int64_t[]){lens[s]}, steps[s]);
    tensor *g = c_tensor(lens[s], D, s + 1);
    const tensor *y;
    for (int side = 0; side < 2; side++) {
      nn_module *m = side ? sparse : dense;
      if (side) /* the rows this batch creates: the formula, before their first read */
        for (int i = 0; i < lens[s]; i++)
          if (sptable_find(t, (uint64_t)steps[s][i]) < 0) {
            int64_t k = sptable_get(t, (uint64_t)steps[s][i]);
            for (int j = 0; j < D; j++) sptable_value(t, k)[j] = wf((int64_t)steps[s][i], j);
          }
      CHECK_OK(nn_forward(m, x, &y));
      CHECK_OK(nn_backward(m, x, g, NULL));
      CHECK_OK(optim_step_zero_grad(side ? os : od));
    }
    tensor_free(x);
    tensor_free(g);
  }
  CHECK_INT_EQ(sptable_held(t), 5); /* 0 1 3 5 9 */
  for (int64_t i = 0; i < N; i++) {
    int64_t k = sptable_find(t, (uint64_t)i);
    for (int64_t j = 0; j < D; j++) {
      if (k < 0)
        CHECK(dw[i * D + j] == wf(i, j));
      else
        CHECK_NEAR(sptable_value(t, k)[j], dw[i * D + j], 1e-6);
    }
  }
  CHECK_INT_EQ(*sptable_count(t, sptable_find(t, 3)), 2);
  CHECK_INT_EQ(*sptable_count(t, sptable_find(t, 9)), 1);
  CHECK_INT_EQ(grad_of(sparse)->n, 0);
  optim_free(od);
  optim_free(os);
  nn_param_list_free(&dp);
  nn_param_list_free(&sp);
  nn_table_list_free(&tl);
  nn_unref(dense);
  nn_unref(sparse);
}

TEST(nn_sparse_sgd_equals_dense) { sparse_equals_dense(OPTIM_SGD); }
TEST(nn_sparse_adagrad_equals_dense) { sparse_equals_dense(OPTIM_ADAGRAD); }

/* PyTorch's values for the same bags, weights and output gradient. */
static void bag_vs_torch(nn_bag_mode mode, const float *psw, const float *ty, const float *tdw) {
  nn_module *m = bag(mode, NN_BAGS_ALL);
  nn_sparse sp = {4, bag_ptr, bag_ids, psw, 0};
  nn_set_sparse(m, &sp);
  tensor *x = tensor_new2(4, 1), *c = c_tensor(4, D, 0);
  const tensor *y;
  CHECK_OK(nn_forward(m, x, &y));
  for (int i = 0; i < 4 * D; i++) CHECK_NEAR(tensor_data(y)[i], ty[i], 1e-5);
  CHECK_OK(nn_backward(m, x, c, NULL));
  nn_spgrad *g = grad_of(m);
  for (int64_t i = 0; i < N; i++) {
    const float *row = grad_row(g, (uint64_t)i);
    for (int j = 0; j < D; j++) CHECK_NEAR(row ? row[j] : 0.0f, tdw[i * D + j], 1e-5);
  }
  tensor_free(x);
  tensor_free(c);
  nn_unref(m);
}

TEST(nn_sparse_bag_vs_torch) {
  bag_vs_torch(NN_BAG_SUM, bag_psw, torch_bag_sum_y, torch_bag_sum_dw);
  bag_vs_torch(NN_BAG_MEAN, NULL, torch_bag_mean_y, torch_bag_mean_dw);
}

/* Three steps of the optimizer on a table-backed nn.Embedding, as
 * nn_sparse_torch.py runs them. */
static void optim_vs_torch(optim_kind kind, const float steps[3][4], const int *lens,
                           const float *want) {
  rng_t r;
  rng_seed(&r, 4);
  nn_module *m = nn_embedding_sparse(N, D, 1.0f, &r);
  set_rows(m);
  optim_cfg c;
  optim_cfg_default(&c, kind);
  c.lr = 0.1f;
  c.initial_accumulator = 0.1f;
  nn_param_list pl = {0};
  nn_table_list tl = {0};
  CHECK_OK(nn_collect_tables(m, false, &tl));
  optim_t *o = optim_new(&c, &pl);
  CHECK(o);
  CHECK_OK(optim_bind_tables(o, &tl));
  for (int s = 0; s < 3; s++) {
    tensor *x = tensor_from(1, (int64_t[]){lens[s]}, steps[s]), *g = c_tensor(lens[s], D, s + 1);
    const tensor *y;
    CHECK_OK(nn_forward(m, x, &y));
    CHECK_OK(nn_backward(m, x, g, NULL));
    CHECK_OK(optim_step_zero_grad(o));
    tensor_free(x);
    tensor_free(g);
  }
  sptable *t = tl.items[0].value;
  for (int64_t i = 0; i < N; i++)
    for (int j = 0; j < D; j++)
      CHECK_NEAR(sptable_value(t, sptable_find(t, (uint64_t)i))[j], want[i * D + j], 1e-5);
  optim_free(o);
  nn_table_list_free(&tl);
  nn_unref(m);
}

TEST(nn_sparse_sparse_adam_vs_torch) {
  static const float steps[3][4] = {{1, 3, 3}, {3, 1, 1, 3}, {1, 3}};
  optim_vs_torch(OPTIM_ADAM, steps, (const int[]){3, 4, 2}, torch_adam_w);
}

TEST(nn_sparse_adagrad_vs_torch) {
  static const float steps[3][4] = {{1, 3, 3}, {3, 5}, {0, 1, 9, 9}};
  optim_vs_torch(OPTIM_ADAGRAD, steps, (const int[]){3, 2, 4}, torch_adagrad_w);
}

/* Lazy Adam: a row first touched at step 2 takes a first step (t = 1):
 * |delta| = lr for every element with a nonzero gradient. */
TEST(nn_sparse_lazy_adam_row_count) {
  rng_t r;
  rng_seed(&r, 6);
  nn_module *m = nn_embedding_sparse(N, D, 1.0f, &r);
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_ADAM);
  c.lr = 0.01f;
  nn_param_list pl = {0};
  nn_table_list tl = {0};
  CHECK_OK(nn_collect_tables(m, false, &tl));
  optim_t *o = optim_new(&c, &pl);
  CHECK_OK(optim_bind_tables(o, &tl));
  float a = 2, b = 7;
  tensor *x = tensor_from(1, (int64_t[]){1}, &a), *g = tensor_new2(1, D);
  tensor_fill(g, 0.5f);
  const tensor *y;
  CHECK_OK(nn_forward(m, x, &y));
  CHECK_OK(nn_backward(m, x, g, NULL));
  CHECK_OK(optim_step_zero_grad(o));
  tensor_data(x)[0] = b;
  CHECK_OK(nn_forward(m, x, &y));
  float before[D];
  memcpy(before, tensor_data(y), sizeof before);
  CHECK_OK(nn_backward(m, x, g, NULL));
  CHECK_OK(optim_step_zero_grad(o));
  sptable *t = tl.items[0].value;
  int64_t k = sptable_find(t, 7);
  CHECK_INT_EQ(*sptable_count(t, k), 1);
  CHECK_INT_EQ(*sptable_count(t, sptable_find(t, 2)), 1);
  for (int j = 0; j < D; j++) CHECK_NEAR(sptable_value(t, k)[j], before[j] - 0.01f, 1e-6);
  tensor_free(x);
  tensor_free(g);
  optim_free(o);
  nn_table_list_free(&tl);
  nn_unref(m);
}

/* clip_norm: the norm counts the sparse rows; the scaled update is the
 * clipped one. */
TEST(nn_sparse_clip_counts_tables) {
  rng_t r;
  rng_seed(&r, 7);
  nn_module *m = nn_sparse_linear(N, 1, 0.0f, &r);
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  c.lr = 1.0f;
  c.clip_norm = 1.0f;
  nn_param_list pl = {0};
  nn_table_list tl = {0};
  CHECK_OK(nn_collect_params(m, &pl));
  CHECK_OK(nn_collect_tables(m, false, &tl));
  optim_t *o = optim_new(&c, &pl);
  CHECK_OK(optim_bind_tables(o, &tl));
  int64_t ptr[] = {0, 1};
  uint64_t ids[] = {4};
  float v = 3.0f;
  nn_sparse sp = {1, ptr, ids, &v, 0};
  nn_set_sparse(m, &sp);
  tensor *x = tensor_new2(1, 1), *g = tensor_new2(1, 1);
  tensor_fill(g, 1.0f);
  const tensor *y;
  CHECK_OK(nn_forward(m, x, &y));
  CHECK_OK(nn_backward(m, x, g, NULL));
  CHECK_OK(optim_step_zero_grad(o));
  /* Gradients: bias 1, W[4] 3; norm sqrt(10); clipped to 1. */
  CHECK_NEAR(optim_grad_norm(o), sqrt(10.0), 1e-6);
  sptable *t = tl.items[0].value;
  CHECK_NEAR(sptable_value(t, sptable_find(t, 4))[0], -3.0 / sqrt(10.0), 1e-5);
  CHECK_NEAR(tensor_data(pl.items[0].value)[0], -1.0 / sqrt(10.0), 1e-5);
  tensor_free(x);
  tensor_free(g);
  optim_free(o);
  nn_param_list_free(&pl);
  nn_table_list_free(&tl);
  nn_unref(m);
}

/* Evaluation reads a missing row's initial values without creating it;
 * training creates it with the same values. */
TEST(nn_sparse_eval_does_not_create_rows) {
  rng_t r;
  rng_seed(&r, 8);
  nn_module *m = nn_embedding_bag(1ULL << 40, 4, NULL, &r);
  int64_t ptr[] = {0, 2};
  uint64_t ids[] = {123456789012ULL, 5};
  nn_sparse sp = {1, ptr, ids, NULL, 2};
  nn_set_sparse(m, &sp);
  tensor *x = tensor_new2(1, 1);
  const tensor *y;
  nn_set_training(m, false);
  CHECK_OK(nn_forward(m, x, &y));
  float ev[8];
  memcpy(ev, tensor_data(y), sizeof ev);
  CHECK_INT_EQ(sptable_held(table_of(m)), 0);
  nn_set_training(m, true);
  CHECK_OK(nn_forward(m, x, &y));
  CHECK(memcmp(ev, tensor_data(y), sizeof ev) == 0);
  CHECK_INT_EQ(sptable_held(table_of(m)), 2);
  tensor_free(x);
  nn_unref(m);
}

TEST(nn_sparse_refusals) {
  rng_t r;
  rng_seed(&r, 9);
  nn_bag_opts mean = {NN_BAG_MEAN, NN_BAGS_FIELD, 1.0f};
  nn_module *m = nn_embedding_bag(N, D, &mean, &r);
  tensor *x = tensor_new2(2, 1);
  const tensor *y;
  CHECK_ERR(nn_forward(m, x, &y), DRV_EINVAL, "no sparse input");
  int64_t ptr[] = {0, 1, 3};
  uint64_t ids[] = {1, 2, 3};
  float vals[] = {1, 1, 1};
  nn_sparse sp = {2, ptr, ids, NULL, 0};
  nn_set_sparse(m, &sp);
  CHECK_ERR(nn_forward(m, x, &y), DRV_EINVAL, "one id per field");
  sp.vals = vals;
  nn_unref(m);
  nn_bag_opts all = {NN_BAG_MEAN, NN_BAGS_ALL, 1.0f};
  m = nn_embedding_bag(N, D, &all, &r);
  nn_set_sparse(m, &sp);
  CHECK_ERR(nn_forward(m, x, &y), DRV_EINVAL, "per_sample_weights");
  sp.vals = NULL;
  ids[2] = N;
  CHECK_ERR(nn_forward(m, x, &y), DRV_ERANGE, "id 10 is outside 0..9");
  ids[2] = 3;
  tensor *x3 = tensor_new2(3, 1);
  CHECK_ERR(nn_forward(m, x3, &y), DRV_ESHAPE, "2 rows of ids");
  CHECK(!nn_embedding_bag((1ULL << 40) + 1, 4, NULL, &r));
  CHECK_STR_CONTAINS(err_msg(), "2^40");
  /* A model holding a table: listed, named, refused where dense paths
   * would lose it. */
  nn_module *seq = nn_sequential(), *cat = nn_concat(), *id = nn_identity();
  CHECK_OK(nn_sequential_add(cat, id));
  CHECK_OK(nn_sequential_add(cat, m));
  CHECK_OK(nn_sequential_add(seq, cat));
  nn_table_list tl = {0}, tt = {0};
  CHECK_OK(nn_collect_tables(seq, false, &tl));
  CHECK_OK(nn_collect_tables(seq, true, &tt));
  CHECK(strcmp(tl.items[0].name, "1.2.weight") == 0);
  CHECK(strcmp(tt.items[0].name, "0.1.weight") == 0);
  CHECK(nn_find_table(seq) == m);
  CHECK_INT_EQ(nn_num_params(seq), 0);
  CHECK_ERR(nn_refuse_tables(seq, "on a cluster"), DRV_EUNSUPPORTED,
            "sparse tables on a cluster are not supported yet: nn.EmbeddingBag(10, 3, mean, all)");
  CHECK_OK(nn_refuse_tables(id, "x"));
  nn_table_list_free(&tl);
  nn_table_list_free(&tt);
  nn_unref(id);
  nn_unref(cat);
  nn_unref(seq);
  nn_unref(m);
  tensor_free(x);
  tensor_free(x3);
}

/* Where an Embedding's ids come from (a cluster's worker gathers them
 * from x before its pull): x itself at the head of a chain or in a
 * Concat/Sum branch on x; else computed, the layer in front named. */
TEST(nn_sparse_embedding_reads_x) {
  rng_t r;
  rng_seed(&r, 3);
  nn_module *e = nn_embedding_sparse(N, D, 1.0f, &r), *e2 = nn_embedding_sparse(N, D, 1.0f, &r);
  nn_module *lin = nn_linear(2, 2, &r), *cat = nn_concat(), *id = nn_identity();
  nn_module *top = nn_sequential(), *other = nn_identity();
  CHECK_OK(nn_sequential_add(cat, id));
  CHECK_OK(nn_sequential_add(cat, e));
  CHECK_OK(nn_sequential_add(top, cat));
  CHECK_OK(nn_sequential_add(top, lin));
  CHECK_OK(nn_sequential_add(top, e2));
  char front[96];
  CHECK_INT_EQ(nn_reads_x(e, e, front, sizeof front), 1);
  CHECK_INT_EQ(nn_reads_x(top, e, front, sizeof front), 1);
  CHECK_INT_EQ(nn_reads_x(top, e2, front, sizeof front), 0);
  CHECK(strcmp(front, "nn.Linear(2 -> 2)") == 0);
  CHECK_ERR(nn_reads_x(top, other, front, sizeof front), DRV_EINVAL, "not in the model");
  float ids[] = {4, 2, 9, 0};
  tensor *x = tensor_from(2, (int64_t[]){2, 2}, ids);
  uint64_t *got;
  size_t n;
  CHECK_OK(nn_embedding_ids(e, x, &got, &n));
  CHECK_INT_EQ((long long)n, 4);
  CHECK(got[0] == 4 && got[1] == 2 && got[2] == 9 && got[3] == 0);
  free(got);
  tensor_data(x)[1] = 2.5f; /* tensor_from copies ids */
  CHECK_ERR(nn_embedding_ids(e, x, &got, &n), DRV_ERANGE,
            "input element 1 is 2.5, expected an id in 0..9");
  tensor_data(x)[1] = (float)N;
  CHECK_ERR(nn_embedding_ids(e, x, &got, &n), DRV_ERANGE, "input element 1 is 10");
  CHECK(got == NULL && n == 0);
  CHECK_ERR(nn_embedding_ids(lin, x, &got, &n), DRV_EINVAL, "not an nn.Embedding");
  tensor_free(x);
  nn_unref(other);
  nn_unref(id);
  nn_unref(top);
  nn_unref(cat);
  nn_unref(lin);
  nn_unref(e);
  nn_unref(e2);
}

/* An id layer's spec carries its table (rows up to 2^40, options, std and
 * seed): the model parsed back makes the same rows and the same spec. */
TEST(nn_sparse_spec_round_trip) {
  rng_t r;
  rng_seed(&r, 7);
  nn_bag_opts o = {NN_BAG_MEAN, NN_BAGS_ALL, 0.5f};
  nn_module *sum = nn_sum(), *cat = nn_concat();
  nn_module *parts[] = {nn_identity(), nn_embedding_bag(1ULL << 40, 4, &o, &r),
                        nn_embedding_sparse(100, 3, 1.0f, &r),
                        nn_sparse_linear(1ULL << 30, 1, 0.0f, &r)};
  for (int i = 0; i < 3; i++) CHECK_OK(nn_sequential_add(cat, parts[i]));
  CHECK_OK(nn_sequential_add(sum, parts[3]));
  CHECK_OK(nn_sequential_add(sum, cat));
  for (int i = 0; i < 4; i++) nn_unref(parts[i]);
  char a[512], b[512];
  CHECK(nn_spec(sum, a, sizeof a) > 0);
  CHECK_STR_CONTAINS(a, "SparseLinear(1073741824,1,0,");
  CHECK_STR_CONTAINS(a, "EmbeddingBag(1099511627776,4,1,2,0.5,");
  CHECK_STR_CONTAINS(a, "SparseEmbedding(100,3,1,");
  rng_t r2;
  rng_seed(&r2, 99); /* another generator: the seeds come from the spec */
  nn_module *back = nn_from_spec(a, &r2);
  CHECK(back != NULL);
  CHECK(nn_spec(back, b, sizeof b) > 0);
  CHECK(strcmp(a, b) == 0);
  nn_table_list t1 = {0}, t2 = {0};
  CHECK_OK(nn_collect_tables(sum, false, &t1));
  CHECK_OK(nn_collect_tables(back, false, &t2));
  CHECK_INT_EQ(t1.n, 3);
  CHECK_INT_EQ(t2.n, 3);
  for (int i = 0; i < t1.n; i++) {
    float x[4], y[4];
    sptable_init_row(t1.items[i].value, 123456789, x);
    sptable_init_row(t2.items[i].value, 123456789, y);
    CHECK(memcmp(x, y, (size_t)sptable_dim(t1.items[i].value) * sizeof *x) == 0);
    CHECK(sptable_seed(t1.items[i].value) == sptable_seed(t2.items[i].value));
  }
  nn_table_list_free(&t1);
  nn_table_list_free(&t2);
  /* Specs off the network are checked field by field. */
  const char *bad[][2] = {
      {"EmbeddingBag(1099511627777,4,0,0,1,5)", "table rows is larger than 1099511627776"},
      {"EmbeddingBag(10,4,2,0,1,5)", "EmbeddingBag mode (0 sum, 1 mean) is larger than 1"},
      {"EmbeddingBag(10,4,0,3,1,5)", "is larger than 2"},
      {"SparseLinear(10,1,0,18446744073709551616)", "a table's seed is larger than"},
      {"SparseEmbedding(2147483648,3,1,5)", "n at most 2147483647"},
      {"SparseLinear(0,1,0,5)", "rows"},
      {"SparseLinear(10,1,x,5)", "std"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK(nn_from_spec(bad[i][0], &r2) == NULL);
    CHECK_STR_CONTAINS(err_msg(), bad[i][1]);
  }
  nn_unref(back);
  nn_unref(cat);
  nn_unref(sum);
}

/* A model file holds a table's touched rows by id (I64 ids, F32 rows): a
 * loaded model answers as the saved one, holds the same rows, and a load
 * replaces the rows wholesale. Bad files are refused with nothing changed. */
TEST(nn_sparse_model_file_round_trip) {
  rng_t r;
  rng_seed(&r, 3);
  nn_module *m = nn_embedding_sparse(1000000, 3, 1.0f, &r);
  float idv[] = {5, 999999, 42, 5};
  tensor *x = tensor_from(1, (int64_t[]){4}, idv);
  const tensor *y;
  CHECK_OK(nn_forward(m, x, &y));
  nn_table_list tl = {0};
  CHECK_OK(nn_collect_tables(m, true, &tl));
  sptable *t = tl.items[0].value;
  CHECK_INT_EQ((int)sptable_held(t), 3);
  sptable_value(t, sptable_find(t, 42))[1] = 7.5f; /* no longer the initial value */
  CHECK_OK(nn_save(m, "tab.safetensors"));
  rng_t r2;
  rng_seed(&r2, 11);
  nn_module *back = nn_load("tab.safetensors", &r2);
  CHECK(back != NULL);
  nn_table_list tb = {0};
  CHECK_OK(nn_collect_tables(back, true, &tb));
  sptable *u = tb.items[0].value;
  CHECK_INT_EQ((int)sptable_held(u), 3);
  CHECK(sptable_value(u, sptable_find(u, 42))[1] == 7.5f);
  for (uint64_t id = 0; id < 3; id++) { /* 5, 999999, 42 in any order: equal rows */
    uint64_t ids[3] = {5, 999999, 42};
    CHECK(memcmp(sptable_value(t, sptable_find(t, ids[id])), sptable_value(u, sptable_find(u, ids[id])),
                 3 * sizeof(float)) == 0);
  }
  /* a load into a model that holds other rows: they are gone */
  float other[] = {7};
  tensor *x1 = tensor_from(1, (int64_t[]){1}, other);
  const tensor *y1;
  CHECK_OK(nn_forward(back, x1, &y1));
  CHECK_INT_EQ((int)sptable_held(u), 4);
  CHECK_OK(nn_load_params(back, "tab.safetensors"));
  CHECK_INT_EQ((int)sptable_held(u), 3);
  CHECK(sptable_find(u, 7) < 0);
  /* refusals: an id twice, an id outside, rows of another shape */
  const int64_t s3[] = {3}, s32[] = {3, 3}, s22[] = {2, 2};
  const int64_t twice[] = {1, 2, 1}, outside[] = {1, 2, 1000000};
  float rows[9] = {0};
  safetensors_entry e[2] = {{"weight.ids", 1, s3, NULL, twice}, {"weight.rows", 2, s32, rows, NULL}};
  const char *meta[] = {"format", "pt", NULL};
  CHECK_OK(safetensors_write("bad.safetensors", e, 2, meta));
  CHECK_ERR(nn_load_params(back, "bad.safetensors"), DRV_EINVAL, "holds id 1, twice");
  e[0].i64 = outside;
  CHECK_OK(safetensors_write("bad.safetensors", e, 2, meta));
  CHECK_ERR(nn_load_params(back, "bad.safetensors"), DRV_EINVAL, "holds id 1000000, outside the table");
  e[0].i64 = twice + 1;
  e[0].shape = (const int64_t[]){2};
  e[1].shape = s22;
  CHECK_OK(safetensors_write("bad.safetensors", e, 2, meta));
  CHECK_ERR(nn_load_params(back, "bad.safetensors"), DRV_ESHAPE, "must be F32 [2, 3]");
  CHECK_INT_EQ((int)sptable_held(u), 3); /* nothing changed */
  nn_table_list_free(&tl);
  nn_table_list_free(&tb);
  tensor_free(x);
  tensor_free(x1);
  nn_unref(back);
  nn_unref(m);
}

/* optim_table_update, what a ps is to run for a SPARSE_PUSH: each row gets
 * optim_update from its own initial values, slots and count (Adam: the
 * count decides the bias correction), rows pushed twice step twice, rows
 * never pushed are not created, and an id past the table is refused. */
TEST(optim_table_update_steps_each_row_with_its_own_count) {
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_ADAM);
  c.lr = 0.1f;
  sptable *t = sptable_new(100, 3, 0.5f, 9);
  CHECK(t);
  float init[2] = {0, 0};
  float *ip[2] = {&init[0], &init[1]};
  optim_slots_init(&c, ip, 1);
  CHECK_OK(sptable_set_slots(t, optim_nslots(&c), init));
  uint64_t ids[2] = {5, 2};
  float g[6] = {1, -1, 0.5f, 2, 0, -3};
  CHECK_OK(optim_table_update(&c, t, ids, g, 2));
  CHECK_OK(optim_table_update(&c, t, ids, g, 1)); /* row 5 again */
  CHECK_INT_EQ(sptable_held(t), 2);
  CHECK_INT_EQ(*sptable_count(t, sptable_find(t, 5)), 2);
  CHECK_INT_EQ(*sptable_count(t, sptable_find(t, 2)), 1);
  /* The same by hand: init rows, zeroed slots, optim_update per count. */
  float p5[3], p2[3], m5[3] = {0}, v5[3] = {0}, m2[3] = {0}, v2[3] = {0};
  sptable_init_row(t, 5, p5);
  sptable_init_row(t, 2, p2);
  optim_update(&c, p5, g, (float *[]){m5, v5}, 3, 1);
  optim_update(&c, p5, g, (float *[]){m5, v5}, 3, 2);
  optim_update(&c, p2, g + 3, (float *[]){m2, v2}, 3, 1);
  CHECK(memcmp(sptable_value(t, sptable_find(t, 5)), p5, sizeof p5) == 0);
  CHECK(memcmp(sptable_value(t, sptable_find(t, 2)), p2, sizeof p2) == 0);
  uint64_t bad[1] = {100};
  CHECK_ERR(optim_table_update(&c, t, bad, g, 1), DRV_ERANGE, "outside");
  sptable_free(t);
}
