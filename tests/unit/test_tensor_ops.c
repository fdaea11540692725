/* test_tensor_ops.c - broadcasting arithmetic, reductions along a
 * dimension, mm over views, index_select, cat/stack, and the messages that
 * name the shapes. */
#include "harness.h"
#include "numeric/tensor_ops.h"

static tensor *seq(int nd, const int64_t *shape) {
  tensor *t = tensor_new(nd, shape);
  float *p = tensor_data(t);
  for (int64_t i = 0; i < tensor_numel(t); i++) p[i] = (float)(i + 1);
  return t;
}

static float at2(const tensor *t, int64_t i, int64_t j) {
  int64_t idx[2] = {i, j};
  return tensor_get(t, idx);
}

TEST(tensor_ops_broadcast_add_and_compare) {
  int64_t sa[2] = {3, 1}, sb[2] = {1, 4};
  tensor *a = seq(2, sa), *b = seq(2, sb);
  tensor *c = tensor_binary(TOP_ADD, a, b);
  CHECK(c != NULL);
  CHECK_INT_EQ(c->shape[0], 3);
  CHECK_INT_EQ(c->shape[1], 4);
  CHECK_NEAR(at2(c, 2, 3), 3 + 4, 0);
  tensor *m = tensor_binary(TOP_GT, c, b);
  CHECK_NEAR(tensor_sum(m), 12, 0); /* a >= 1 everywhere */
  tensor *s = tensor_binary_scalar(TOP_SUB, a, 10, 1);
  CHECK_NEAR(tensor_get(s, (int64_t[]){2, 0}), 7, 0);
  tensor *q = tensor_transpose(c, 0, 1); /* a strided operand */
  tensor *d = tensor_binary(TOP_MUL, q, q);
  CHECK_NEAR(at2(d, 3, 2), 49, 0);
  tensor_free(a), tensor_free(b), tensor_free(c), tensor_free(m), tensor_free(s);
  tensor_free(q), tensor_free(d);
}

TEST(tensor_ops_broadcast_mismatch_names_shapes) {
  int64_t sa[2] = {2, 3}, sb[2] = {2, 2}, sc[1] = {3};
  tensor *a = seq(2, sa), *b = seq(2, sb), *c = seq(1, sc);
  CHECK(tensor_binary(TOP_ADD, a, b) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "cannot broadcast [2, 3] with [2, 2]");
  tensor *d = tensor_binary(TOP_DIV, a, c); /* [2, 3] / [3]: aligned at the last dimension */
  CHECK(d != NULL && d->ndim == 2 && d->shape[0] == 2 && d->shape[1] == 3);
  CHECK_NEAR(tensor_get(d, (int64_t[]){1, 2}), 6.0f / 3.0f, 1e-6); /* seq counts from 1 */
  CHECK(tensor_binary(TOP_ADD, b, c) == NULL); /* [2, 2] + [3] */
  CHECK_STR_CONTAINS(err_msg(), "cannot broadcast [2, 2] with [3] (dimension 2 of the result: 2 vs 3)");
  tensor_free(a), tensor_free(b), tensor_free(c), tensor_free(d);
}

TEST(tensor_ops_reduce_each_dim) {
  int64_t s[3] = {2, 3, 4};
  tensor *t = seq(3, s);
  tensor *r0 = tensor_reduce(TRED_SUM, t, 0, 0);
  CHECK_INT_EQ(r0->ndim, 2);
  CHECK_NEAR(at2(r0, 0, 0), 1 + 13, 0);
  tensor *r1 = tensor_reduce(TRED_MAX, t, 1, 1);
  CHECK_INT_EQ(r1->ndim, 3);
  CHECK_INT_EQ(r1->shape[1], 1);
  CHECK_NEAR(tensor_get(r1, (int64_t[]){1, 0, 3}), 24, 0);
  tensor *r2 = tensor_reduce(TRED_ARGMAX, t, 2, 0);
  CHECK_NEAR(at2(r2, 1, 2), 3, 0);
  tensor *m = tensor_reduce(TRED_MEAN, t, 2, 0);
  CHECK_NEAR(at2(m, 0, 0), 2.5, 1e-6);
  CHECK(tensor_reduce(TRED_SUM, t, 3, 0) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "[2, 3, 4]");
  tensor_free(t), tensor_free(r0), tensor_free(r1), tensor_free(r2), tensor_free(m);
}

TEST(tensor_ops_mm_views_and_errors) {
  int64_t s[2] = {2, 3};
  tensor *a = seq(2, s);
  tensor *at = tensor_transpose(a, 0, 1);
  tensor *p = tensor_mm(at, a); /* [3, 2] @ [2, 3] */
  CHECK(p != NULL);
  CHECK_NEAR(at2(p, 2, 2), 3 * 3 + 6 * 6, 0);
  CHECK(tensor_mm(a, a) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "cannot multiply [2, 3] by [2, 3]");
  tensor_free(a), tensor_free(at), tensor_free(p);
}

TEST(tensor_ops_index_cat_stack) {
  int64_t s[2] = {3, 2};
  tensor *a = seq(2, s);
  int64_t ids[3] = {2, 0, 2};
  tensor *g = tensor_index_select(a, 0, ids, 3);
  CHECK_NEAR(at2(g, 0, 1), 6, 0);
  CHECK_NEAR(at2(g, 1, 0), 1, 0);
  int64_t bad[1] = {3};
  CHECK(tensor_index_select(a, 0, bad, 1) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "outside 1..3");
  const tensor *two[2] = {a, g};
  tensor *c = tensor_cat(two, 2, 0);
  CHECK_INT_EQ(c->shape[0], 6);
  CHECK_NEAR(at2(c, 3, 1), 6, 0);
  tensor *st = tensor_stack(two, 2, 1); /* [3, 2, 2] */
  CHECK_INT_EQ(st->ndim, 3);
  CHECK_NEAR(tensor_get(st, (int64_t[]){0, 1, 1}), 6, 0);
  const tensor *mixed[2] = {a, c};
  CHECK(tensor_stack(mixed, 2, 0) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "tensor 2 is [6, 2], tensor 1 is [3, 2]");
  CHECK(tensor_cat(mixed, 2, 1) == NULL);
  tensor_free(a), tensor_free(g), tensor_free(c), tensor_free(st);
}

TEST(tensor_ops_unary_and_clamp) {
  int64_t s[1] = {4};
  tensor *a = seq(1, s);
  tensor *l = tensor_unary(TUN_LOG, a), *e = tensor_unary(TUN_EXP, l);
  CHECK(tensor_max_abs_diff(a, e) < 1e-5f);
  tensor *c = tensor_clamp(a, 2, 3);
  CHECK_NEAR(tensor_sum(c), 2 + 2 + 3 + 3, 0);
  CHECK(tensor_clamp(a, 3, 2) == NULL);
  tensor_free(a), tensor_free(l), tensor_free(e), tensor_free(c);
}
