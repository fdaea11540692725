/* test_tensor.c - tensors: views share storage, copies, gemm against a
 * naive product for every transpose combination, error messages. */
#include "harness.h"
#include "numeric/tensor.h"

static tensor *seq2(int64_t r, int64_t c) {
  tensor *t = tensor_new2(r, c);
  float *p = tensor_data(t);
  for (int64_t i = 0; i < r * c; i++) p[i] = (float)(i + 1);
  return t;
}

TEST(tensor_new_zeroed_contiguous) {
  int64_t shape[3] = {2, 3, 4};
  tensor *t = tensor_new(3, shape);
  CHECK(t != NULL);
  CHECK_INT_EQ(tensor_numel(t), 24);
  CHECK(tensor_is_contiguous(t));
  CHECK_INT_EQ(t->stride[0], 12);
  CHECK_NEAR(tensor_sum(t), 0.0, 0);
  CHECK(((uintptr_t)tensor_data(t) & 63) == 0);
  char buf[64];
  CHECK(strcmp(tensor_shape_str(t, buf, sizeof buf), "[2, 3, 4]") == 0);
  tensor_free(t);
}

TEST(tensor_bad_shape_is_an_error) {
  int64_t shape[2] = {2, -3};
  CHECK(tensor_new(2, shape) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "negative size -3");
  int64_t big[5] = {1, 1, 1, 1, 1};
  CHECK(tensor_new(5, big) == NULL);
}

TEST(tensor_empty_but_huge_shape_is_refused) {
  /* Found by fuzzing the wire decoder: no elements, overflowing strides. */
  int64_t shape[4] = {0, (int64_t)1 << 40, (int64_t)1 << 40, 1};
  CHECK(tensor_new(4, shape) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "too large");
  int64_t ok[3] = {0, 1000, 1000};
  tensor *t = tensor_new(3, ok);
  CHECK(t != NULL);
  CHECK_INT_EQ(tensor_numel(t), 0);
  tensor_free(t);
}

TEST(tensor_views_share_storage) {
  tensor *t = seq2(4, 3);
  tensor *row = tensor_narrow(t, 0, 1, 2); /* rows 1..2 */
  CHECK(row != NULL);
  CHECK_INT_EQ(row->shape[0], 2);
  CHECK_NEAR(tensor_get(row, (int64_t[]){0, 0}), 4.0, 0);
  tensor_set(row, (int64_t[]){1, 2}, -1.0f);
  CHECK_NEAR(tensor_get(t, (int64_t[]){2, 2}), -1.0, 0);
  tensor *tr = tensor_transpose(t, 0, 1);
  CHECK(!tensor_is_contiguous(tr));
  CHECK_NEAR(tensor_get(tr, (int64_t[]){2, 1}), tensor_get(t, (int64_t[]){1, 2}), 0);
  /* Freeing the source keeps views alive (storage refcount). */
  tensor_free(t);
  CHECK_NEAR(tensor_get(tr, (int64_t[]){0, 3}), 10.0, 0);
  tensor_free(row);
  tensor_free(tr);
}

TEST(tensor_narrow_out_of_range) {
  tensor *t = seq2(4, 3);
  CHECK(tensor_narrow(t, 1, 2, 2) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "outside [4, 3]");
  tensor_free(t);
}

TEST(tensor_reshape_and_clone) {
  tensor *t = seq2(4, 3);
  tensor *r = tensor_reshape(t, 2, (int64_t[]){2, -1});
  CHECK(r != NULL);
  CHECK_INT_EQ(r->shape[1], 6);
  CHECK_NEAR(tensor_get(r, (int64_t[]){1, 0}), 7.0, 0);
  tensor *tr = tensor_transpose(t, 0, 1);
  CHECK(tensor_reshape(tr, 1, (int64_t[]){12}) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "not contiguous");
  tensor *c = tensor_clone(tr);
  CHECK(tensor_is_contiguous(c));
  CHECK_INT_EQ(c->shape[0], 3);
  CHECK_NEAR(tensor_data(c)[1], 4.0, 0); /* c[0][1] = t[1][0] */
  CHECK(tensor_max_abs_diff(c, tr) == 0.0f);
  CHECK(tensor_reshape(t, 2, (int64_t[]){5, 2}) == NULL);
  tensor_free(t), tensor_free(r), tensor_free(tr), tensor_free(c);
}

TEST(tensor_resize_reuses_storage) {
  tensor *t = tensor_new2(8, 8);
  float *before = tensor_data(t);
  CHECK_OK(tensor_resize2(t, 4, 8));
  CHECK(tensor_data(t) == before);
  CHECK_OK(tensor_resize2(t, 16, 16));
  CHECK_INT_EQ(tensor_numel(t), 256);
  /* A shared storage is never resized under its other users. */
  tensor *v = tensor_view(t);
  float *shared = tensor_data(v);
  CHECK_OK(tensor_resize2(t, 2, 2));
  CHECK(tensor_data(t) != shared);
  tensor_free(v), tensor_free(t);
}

static void naive(const tensor *a, bool ta, const tensor *b, bool tb, double *out,
                  int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t p = 0; p < k; p++) {
        float x = ta ? tensor_get(a, (int64_t[]){p, i}) : tensor_get(a, (int64_t[]){i, p});
        float y = tb ? tensor_get(b, (int64_t[]){j, p}) : tensor_get(b, (int64_t[]){p, j});
        s += (double)x * y;
      }
      out[i * n + j] = s;
    }
}

TEST(tensor_gemm_all_transposes_and_views) {
  rng_t r;
  rng_seed(&r, 7);
  const int64_t m = 5, n = 4, k = 3;
  for (int mode = 0; mode < 16; mode++) {
    bool ta = mode & 1, tb = mode & 2, va = mode & 4, vb = mode & 8;
    /* Build op(a) = [m, k] either stored directly or as a transposed view. */
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    tensor *as = va ? tensor_new2(ac, ar) : tensor_new2(ar, ac);
    tensor *bs = vb ? tensor_new2(bc, br) : tensor_new2(br, bc);
    tensor_uniform(as, &r, -1, 1);
    tensor_uniform(bs, &r, -1, 1);
    tensor *a = va ? tensor_transpose(as, 0, 1) : tensor_view(as);
    tensor *b = vb ? tensor_transpose(bs, 0, 1) : tensor_view(bs);
    tensor *c = tensor_new2(m, n);
    tensor_fill(c, 1.0f);
    CHECK_OK(tensor_gemm(2.0f, a, ta, b, tb, 0.5f, c));
    double want[20];
    naive(a, ta, b, tb, want, m, n, k);
    for (int64_t i = 0; i < m * n; i++) CHECK_NEAR(tensor_data(c)[i], 2 * want[i] + 0.5, 1e-5);
    tensor_free(as), tensor_free(bs), tensor_free(a), tensor_free(b), tensor_free(c);
  }
}

TEST(tensor_gemm_shape_error_names_both_shapes) {
  tensor *a = tensor_new2(128, 784), *b = tensor_new2(256, 785), *c = tensor_new2(128, 256);
  CHECK_ERR(tensor_gemm(1, a, false, b, true, 0, c), DRV_ESHAPE, "[128, 784] x [256, 785]^T");
  CHECK_STR_CONTAINS(err_msg(), "inner dimensions differ");
  tensor_free(a), tensor_free(b), tensor_free(c);
}

TEST(tensor_gemm_strided_rows) {
  /* A narrowed column block has row stride > cols: BLAS takes it via lda. */
  tensor *big = seq2(4, 6);
  tensor *a = tensor_narrow(big, 1, 2, 3); /* [4, 3], stride 6 */
  tensor *b = seq2(3, 2), *c = tensor_new2(4, 2);
  CHECK_OK(tensor_gemm(1, a, false, b, false, 0, c));
  double want[8];
  naive(a, false, b, false, want, 4, 2, 3);
  for (int i = 0; i < 8; i++) CHECK_NEAR(tensor_data(c)[i], want[i], 1e-4);
  tensor_free(big), tensor_free(a), tensor_free(b), tensor_free(c);
}

TEST(tensor_rowvec_ops) {
  tensor *m = seq2(3, 2);
  tensor *v = tensor_from(1, (int64_t[]){2}, (float[]){10, 20});
  CHECK_OK(tensor_add_rowvec(m, v));
  CHECK_NEAR(tensor_data(m)[5], 26.0, 0);
  tensor *s = tensor_new1(2);
  tensor_fill(s, 1.0f);
  CHECK_OK(tensor_sum_rows(m, s, 1.0f));
  CHECK_NEAR(tensor_data(s)[0], 1 + 11 + 13 + 15, 0);
  CHECK_NEAR(tensor_data(s)[1], 1 + 22 + 24 + 26, 0);
  int64_t am[3];
  tensor_data(m)[0] = 100;
  CHECK_OK(tensor_argmax_rows(m, am));
  CHECK(am[0] == 0 && am[1] == 1 && am[2] == 1);
  tensor *w = tensor_new1(3);
  CHECK_ERR(tensor_add_rowvec(m, w), DRV_ESHAPE, "[3, 2]");
  CHECK_OK(tensor_axpy(-1.0f, m, m));
  CHECK_NEAR(tensor_sum(m), 0, 0);
  tensor_free(m), tensor_free(v), tensor_free(s), tensor_free(w);
}

TEST(tensor_copy_strided) {
  tensor *t = seq2(3, 4);
  tensor *tr = tensor_transpose(t, 0, 1);
  tensor *dst = tensor_new2(4, 3);
  CHECK_OK(tensor_copy(dst, tr));
  CHECK_NEAR(tensor_data(dst)[1], 5.0, 0);
  tensor *bad = tensor_new2(2, 2);
  CHECK_ERR(tensor_copy(bad, t), DRV_ESHAPE, "element counts differ");
  tensor_free(t), tensor_free(tr), tensor_free(dst), tensor_free(bad);
}

TEST(tensor_rng_reproducible) {
  rng_t a, b;
  rng_seed(&a, 42);
  rng_seed(&b, 42);
  tensor *x = tensor_new2(10, 10), *y = tensor_new2(10, 10);
  tensor_normal(x, &a, 0, 1);
  tensor_normal(y, &b, 0, 1);
  CHECK(memcmp(tensor_data(x), tensor_data(y), 100 * sizeof(float)) == 0);
  rng_seed(&b, 43);
  tensor_normal(y, &b, 0, 1);
  CHECK(memcmp(tensor_data(x), tensor_data(y), 100 * sizeof(float)) != 0);
  /* Normal samples have roughly unit variance. */
  tensor *z = tensor_new1(20000);
  tensor_normal(z, &a, 0, 1);
  double s2 = 0;
  for (int i = 0; i < 20000; i++) s2 += tensor_data(z)[i] * tensor_data(z)[i];
  CHECK_NEAR(s2 / 20000, 1.0, 0.05);
  int64_t perm[50], seen[50] = {0};
  rng_permutation(&a, perm, 50);
  for (int i = 0; i < 50; i++) seen[perm[i]]++;
  for (int i = 0; i < 50; i++) CHECK_INT_EQ(seen[i], 1);
  tensor_free(x), tensor_free(y), tensor_free(z);
}
