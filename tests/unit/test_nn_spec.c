/* test_nn_spec.c - model specs: round trips through text, rebuilt models
 * computing what the original does, positioned error messages, losses by
 * name. */
#include <stdint.h>

#include "harness.h"
#include "numeric/nn.h"
#include "numeric/tensor.h"

/* nn_spec of m into a fixed buffer, checked for truncation. */
static const char *spec_of(const nn_module *m, char *buf, size_t n) {
  int len = nn_spec(m, buf, n);
  CHECK_OK(len);
  CHECK((size_t)len < n);
  CHECK_INT_EQ(strlen(buf), len);
  return buf;
}

static void expect_bad(const char *spec, const char *needle, int line) {
  rng_t r;
  rng_seed(&r, 1);
  nn_module *m = nn_from_spec(spec, &r);
  if (m) {
    nn_unref(m);
    harness_fail(__FILE__, line, "spec \"%s\" was accepted", spec);
  }
  if (!strstr(err_msg(), needle))
    harness_fail(__FILE__, line, "spec \"%s\": message \"%s\" lacks \"%s\"", spec, err_msg(),
                 needle);
}
#define EXPECT_BAD(spec, needle) expect_bad(spec, needle, __LINE__)

TEST(nn_spec_roundtrip_nested) {
  const char *specs[] = {
      "Sequential(Linear(64,128),ReLU,Dropout(0.5),Linear(128,10))",
      ("Sequential(Sequential(Linear(3,4),Tanh),Sequential(),Sequential(Sequential(Sigmoid)),"
       "Linear(4,2),Softmax)"),
      "Linear(1,1)",
      "Dropout(0)",
      "Sequential()",
      ("Sequential(Unflatten(1,8,8),Conv2d(1,4,3,1,1,1,1),LeakyReLU(0.100000001),"
       "MaxPool2d(2,2,0),Conv2d(4,6,3,2,2,2,0),GELU,AvgPool2d(3,1,1),Flatten,Identity)"),
      "Unflatten(2)",
      "Sequential(Conv2d(2,3,3:5,2:1,0:2,1:3,1),Conv2d(3,3,1:2,1,1:0,2,0))",
      "Sequential(MaxPool2d(2:3,1:2,1:0),AvgPool2d(3:1,2,0),MaxPool2d(1:2,1:2,0))",
      ("Sequential(Embedding(10,4),Flatten,LayerNorm(8,9.99999975e-06),Linear(8,3),"
       "BatchNorm1d(3,0.00100000005,0.300000012))"),
      "BatchNorm2d(4,9.99999975e-06,0.100000001)",
      "Sequential(Residual(Sequential(Linear(4,4),ReLU)),Concat(Linear(4,2),Identity),Linear(6,1))",
      "Concat()",
      "Sum(Linear(4,1),Sequential(Linear(4,3),ReLU,Linear(3,1)))",
  };
  rng_t r;
  rng_seed(&r, 7);
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    nn_module *m = nn_from_spec(specs[i], &r);
    if (!m) harness_fail(__FILE__, __LINE__, "%s: %s", specs[i], err_msg());
    char buf[512];
    const char *back = spec_of(m, buf, sizeof buf);
    if (strcmp(back, specs[i]) != 0)
      harness_fail(__FILE__, __LINE__, "\"%s\" came back as \"%s\"", specs[i], back);
    nn_unref(m);
  }
}

/* A model built with the constructors has the spec its structure says, and
 * Dropout's probability survives the text exactly. */
TEST(nn_spec_of_built_model) {
  rng_t r;
  rng_seed(&r, 3);
  nn_module *inner = nn_sequential();
  nn_module *parts[] = {nn_linear(5, 6, &r), nn_dropout(0.1f, 9), nn_tanh()};
  for (int i = 0; i < 3; i++) {
    CHECK_OK(nn_sequential_add(inner, parts[i]));
    nn_unref(parts[i]);
  }
  nn_module *m = nn_sequential();
  nn_module *last = nn_linear(6, 2, &r);
  CHECK_OK(nn_sequential_add(m, inner));
  CHECK_OK(nn_sequential_add(m, last));
  nn_unref(inner);
  nn_unref(last);

  char buf[256];
  char expect[256];
  snprintf(expect, sizeof expect, "Sequential(Sequential(Linear(5,6),Dropout(%.9g),Tanh),"
           "Linear(6,2))", (double)0.1f);
  CHECK(strcmp(spec_of(m, buf, sizeof buf), expect) == 0);

  nn_module *back = nn_from_spec(buf, &r);
  CHECK(back != NULL);
  float p0 = m->children[0]->children[1]->p, p1 = back->children[0]->children[1]->p;
  CHECK(memcmp(&p0, &p1, sizeof p0) == 0); /* bit-exact, not merely close */
  nn_unref(back);

  /* snprintf semantics: the needed length whatever the buffer. */
  int need = nn_spec(m, NULL, 0);
  CHECK_INT_EQ(need, strlen(expect));
  char small[10];
  CHECK_INT_EQ(nn_spec(m, small, sizeof small), need);
  CHECK(strcmp(small, "Sequentia") == 0);
  nn_unref(m);
}

/* The rebuilt model, given the original's weights, computes the same
 * function bit for bit; before the copy it differs (fresh weights). */
TEST(nn_spec_rebuild_same_output) {
  rng_t r;
  rng_seed(&r, 11);
  nn_module *orig = nn_from_spec("Sequential(Sequential(Linear(5,7),Tanh),Linear(7,4),ReLU,"
                                 "Linear(4,3),Softmax)", &r);
  CHECK(orig != NULL);
  char spec[256];
  spec_of(orig, spec, sizeof spec);

  rng_t r2;
  rng_seed(&r2, 12345);
  nn_module *copy = nn_from_spec(spec, &r2);
  CHECK(copy != NULL);

  tensor *x = tensor_new2(6, 5);
  CHECK(x != NULL);
  CHECK_OK(tensor_uniform(x, &r, -2.0f, 2.0f));
  const tensor *y0, *y1;
  CHECK_OK(nn_forward(orig, x, &y0));
  tensor *want = tensor_clone(y0);
  CHECK_OK(nn_forward(copy, x, &y1));
  CHECK(tensor_max_abs_diff(want, y1) > 1e-4f);

  nn_param_list a = {0}, b = {0};
  CHECK_OK(nn_collect_params(orig, &a));
  CHECK_OK(nn_collect_params(copy, &b));
  CHECK_INT_EQ(a.n, 6);
  CHECK_INT_EQ(b.n, a.n);
  for (int i = 0; i < a.n; i++) {
    CHECK(strcmp(a.items[i].name, b.items[i].name) == 0);
    CHECK(tensor_same_shape(a.items[i].value, b.items[i].value));
    CHECK_OK(tensor_copy(b.items[i].value, a.items[i].value));
  }
  CHECK_OK(nn_forward(copy, x, &y1));
  CHECK(tensor_max_abs_diff(want, y1) == 0.0f);

  nn_param_list_free(&a);
  nn_param_list_free(&b);
  tensor_free(want);
  tensor_free(x);
  nn_unref(orig);
  nn_unref(copy);
}

/* Weights and Dropout seeds come from the rng handed in, in order. */
TEST(nn_spec_uses_rng) {
  rng_t r1, r2;
  rng_seed(&r1, 5);
  rng_seed(&r2, 5);
  nn_module *a = nn_from_spec("Linear(3,2)", &r1);
  nn_module *b = nn_linear(3, 2, &r2);
  CHECK(a && b);
  CHECK(tensor_max_abs_diff(a->params[0].value, b->params[0].value) == 0.0f);
  CHECK(tensor_max_abs_diff(a->params[1].value, b->params[1].value) == 0.0f);
  nn_unref(a);
  nn_unref(b);

  /* Same seed, same dropout masks; another seed, other masks. */
  const char *s = "Sequential(Dropout(0.5))";
  rng_t ra, rb, rc;
  rng_seed(&ra, 1);
  rng_seed(&rb, 1);
  rng_seed(&rc, 2);
  nn_module *da = nn_from_spec(s, &ra), *db = nn_from_spec(s, &rb), *dc = nn_from_spec(s, &rc);
  CHECK(da && db && dc);
  tensor *x = tensor_new2(8, 16);
  CHECK_OK(tensor_fill(x, 1.0f));
  const tensor *ya, *yb, *yc;
  CHECK_OK(nn_forward(da, x, &ya));
  CHECK_OK(nn_forward(db, x, &yb));
  CHECK_OK(nn_forward(dc, x, &yc));
  CHECK(tensor_max_abs_diff(ya, yb) == 0.0f);
  CHECK(tensor_max_abs_diff(ya, yc) > 0.0f);
  tensor_free(x);
  nn_unref(da);
  nn_unref(db);
  nn_unref(dc);
}

TEST(nn_spec_whitespace) {
  rng_t r;
  rng_seed(&r, 1);
  nn_module *m = nn_from_spec(" Sequential ( Linear( 2 , 3 ) ,\n ReLU , Dropout( 0.25 ) ) ", &r);
  if (!m) harness_fail(__FILE__, __LINE__, "%s", err_msg());
  char buf[128];
  CHECK(strcmp(spec_of(m, buf, sizeof buf), "Sequential(Linear(2,3),ReLU,Dropout(0.25))") == 0);
  nn_unref(m);
}

TEST(nn_spec_errors) {
  /* Positions are 1-based characters. */
  EXPECT_BAD("Sequential(Linear(4,3) ReLU)", "model spec: position 24: expected ',' or ')'");
  EXPECT_BAD("Sequential(Linear(4,3)", "position 23: expected ',' or ')', found end of spec");
  EXPECT_BAD("Sequential(Conv3d(3,3))", "unknown layer 'Conv3d' at position 12");
  EXPECT_BAD("Sequential(Conv2d(3,3))", "position 22: expected ','");
  EXPECT_BAD("Conv2d(1,2,3,1,0,1,2)", "bias flag of 0 or 1");
  EXPECT_BAD("Conv2d(1,2,3:0,1,0,1,1)", "Conv2d kernel size must be positive");
  EXPECT_BAD("MaxPool2d(2,2,3)", "padding in 0..kernel/2");
  EXPECT_BAD("AvgPool2d(4:2,1,2:2)", "nn.AvgPool2d(4x2, stride 1x1, padding 2x2)");
  EXPECT_BAD("MaxPool2d(2:0,1,0)", "pool kernel size must be positive");
  EXPECT_BAD("Unflatten(1,2,3,4)", "at most 3 sizes");
  EXPECT_BAD("relu", "unknown layer 'relu' at position 1");
  EXPECT_BAD("Linear(0,3)", "position 8: Linear input size must be positive");
  EXPECT_BAD("Linear(3,0)", "position 10: Linear output size must be positive");
  EXPECT_BAD("Linear(3)", "position 9: expected ','");
  EXPECT_BAD("Linear(-3,2)", "position 8: expected Linear input size");
  EXPECT_BAD("Linear(99999999999,3)", "larger than");
  EXPECT_BAD("Linear", "position 7: expected '(', found end of spec");
  EXPECT_BAD("Dropout(1.5)", "dropout probability 1.5 is outside [0, 1]");
  EXPECT_BAD("Dropout(nan)", "position 9: expected a dropout probability");
  EXPECT_BAD("Dropout(0.5x)", "position 12: expected ')'");
  EXPECT_BAD("", "position 1: expected a layer name, found end of spec");
  EXPECT_BAD("Sequential(ReLU,", "position 17: expected a layer name");
  EXPECT_BAD("ReLU)", "position 5: expected end of spec");
  EXPECT_BAD("Sequential(,)", "position 12: expected a layer name, found ','");

  char deep[100 * 11 + 1] = "";
  for (int i = 0; i < 100; i++) strcat(deep, "Sequential(");
  EXPECT_BAD(deep, "nested deeper than");

  rng_t r;
  rng_seed(&r, 1);
  CHECK(nn_from_spec(NULL, &r) == NULL);
  CHECK(nn_from_spec("Linear(2,2)", NULL) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "needs an rng");
}

TEST(nn_loss_from_name) {
  const char *names[] = {"CrossEntropy", "MSE", "BCEWithLogits"};
  for (int i = 0; i < 3; i++) {
    nn_loss *l = nn_loss_from_name(names[i]);
    CHECK(l != NULL);
    CHECK(strcmp(l->ops->type, names[i]) == 0);
    nn_loss_unref(l);
  }
  CHECK(nn_loss_from_name("Hinge") == NULL);
  CHECK_STR_CONTAINS(err_msg(), "unknown loss 'Hinge'");
  CHECK(nn_loss_from_name("mse") == NULL);
  CHECK(nn_loss_from_name(NULL) == NULL);
}

TEST(nn_loss_names_of_issue16) {
  const char *names[] = {"L1", "NLL", "Huber", "Huber(0.25)"};
  for (int i = 0; i < 4; i++) {
    nn_loss *l = nn_loss_from_name(names[i]);
    CHECK(l != NULL);
    char buf[64];
    nn_loss_spec(l, buf, sizeof buf);
    CHECK(strcmp(buf, names[i]) == 0);
    nn_loss_unref(l);
  }
  CHECK(nn_loss_from_name("Huber(x)") == NULL);
  CHECK_STR_CONTAINS(err_msg(), "expected Huber(delta)");
  CHECK(nn_loss_from_name("Huber(-1)") == NULL);
  CHECK_STR_CONTAINS(err_msg(), "must be positive");
}
