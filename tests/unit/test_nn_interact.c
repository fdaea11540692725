/* test_nn_interact.c - nn.DotInteraction: the pairs' values and DLRM's
 * order worked by hand, keep_first, the input gradient by central
 * differences, shape errors, the spec round trip and printing. */
#include <math.h>
#include <string.h>

#include "base/err.h"
#include "harness.h"
#include "numeric/nn.h"

/* sum(y .* w): its gradient with respect to x is backward(w). */
static double objective(nn_module *m, const tensor *x, const tensor *w) {
  const tensor *y;
  CHECK_OK(nn_forward(m, x, &y));
  double s = 0;
  for (int64_t i = 0; i < tensor_numel(y); i++) s += (double)tensor_data(y)[i] * tensor_data(w)[i];
  return s;
}

static void gradcheck(nn_module *m, tensor *x, rng_t *r) {
  const tensor *y, *dx;
  CHECK_OK(nn_forward(m, x, &y));
  tensor *w = tensor_new(y->ndim, y->shape);
  CHECK_OK(tensor_uniform(w, r, -1, 1));
  CHECK_OK(nn_backward(m, x, w, &dx));
  tensor *g = tensor_clone(dx);
  float *p = tensor_data(x);
  const float eps = 1e-2f;
  for (int64_t i = 0; i < tensor_numel(x); i++) {
    float save = p[i];
    p[i] = save + eps;
    double fp = objective(m, x, w);
    p[i] = save - eps;
    double fm = objective(m, x, w);
    p[i] = save;
    double num = (fp - fm) / (2.0 * eps), an = tensor_data(g)[i];
    if (!(fabs(num - an) <= 1e-3 + 1e-3 * fabs(num)))
      harness_fail(__FILE__, __LINE__, "dx[%lld]: analytic %.7g, numeric %.7g", (long long)i,
                   an, num);
  }
  tensor_free(w);
  tensor_free(g);
}

TEST(nn_dot_interaction_values_in_dlrm_order) {
  /* one row of 3 vectors of 2: a = (1, 2), b = (3, -1), c = (0.5, 4) */
  tensor *x = tensor_from(2, (int64_t[]){1, 6}, (float[]){1, 2, 3, -1, 0.5f, 4});
  nn_module *m = nn_dot_interaction(3, false), *k = nn_dot_interaction(3, true);
  const tensor *y;
  CHECK_OK(nn_forward(m, x, &y));
  CHECK(y->ndim == 2 && y->shape[0] == 1 && y->shape[1] == 3);
  /* (1,0) b.a = 1, (2,0) c.a = 8.5, (2,1) c.b = -2.5 */
  CHECK(tensor_data(y)[0] == 1 && tensor_data(y)[1] == 8.5f && tensor_data(y)[2] == -2.5f);
  CHECK_OK(nn_forward(k, x, &y));
  CHECK(y->shape[1] == 5);
  const float want[] = {1, 2, 1, 8.5f, -2.5f};
  CHECK(memcmp(tensor_data(y), want, sizeof want) == 0);
  char buf[128];
  nn_describe(k, buf, sizeof buf);
  CHECK(strcmp(buf, "nn.DotInteraction(3, keep_first)") == 0);
  nn_unref(m), nn_unref(k);
  tensor_free(x);
}

TEST(nn_dot_interaction_gradient_by_finite_differences) {
  rng_t r;
  rng_seed(&r, 5);
  tensor *x = tensor_new2(4, 5 * 3);
  CHECK_OK(tensor_uniform(x, &r, -1, 1));
  nn_module *m = nn_dot_interaction(5, false), *k = nn_dot_interaction(5, true);
  gradcheck(m, x, &r);
  gradcheck(k, x, &r);
  /* inside a model: Linear -> DotInteraction -> Linear, dx through all;
   * [N, 8] is 2 vectors of 4: the first kept and one pair, 5 wide */
  nn_module *seq = nn_sequential(), *l1 = nn_linear(6, 8, &r), *l2 = nn_linear(4 + 1, 1, &r);
  nn_module *d = nn_dot_interaction(2, true);
  CHECK_OK(nn_sequential_add(seq, l1));
  CHECK_OK(nn_sequential_add(seq, d));
  CHECK_OK(nn_sequential_add(seq, l2));
  tensor *xs = tensor_new2(3, 6);
  CHECK_OK(tensor_uniform(xs, &r, -1, 1));
  gradcheck(seq, xs, &r);
  nn_unref(l1), nn_unref(d), nn_unref(l2), nn_unref(seq), nn_unref(m), nn_unref(k);
  tensor_free(x), tensor_free(xs);
}

TEST(nn_dot_interaction_shapes_and_spec) {
  CHECK(nn_dot_interaction(1, false) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "fields must be 2 to 4096");
  nn_module *m = nn_dot_interaction(4, true);
  tensor *x = tensor_new2(2, 10);
  const tensor *y;
  CHECK_ERR(nn_forward(m, x, &y), DRV_ESHAPE, "input [2, 10] is not [N, 4 * d]");
  char spec[128];
  CHECK_OK(nn_spec(m, spec, sizeof spec));
  CHECK(strcmp(spec, "DotInteraction(4,1)") == 0);
  rng_t r;
  rng_seed(&r, 1);
  nn_module *back = nn_from_spec("Sequential(Linear(8,12),DotInteraction(3,0))", &r);
  CHECK(back != NULL);
  CHECK_OK(nn_spec(back, spec, sizeof spec));
  CHECK(strcmp(spec, "Sequential(Linear(8,12),DotInteraction(3,0))") == 0);
  CHECK(nn_from_spec("DotInteraction(1,0)", &r) == NULL);
  CHECK(nn_from_spec("DotInteraction(3,2)", &r) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "keep_first is 0 or 1");
  nn_unref(m), nn_unref(back);
  tensor_free(x);
}
