/* test_safetensors.c - the safetensors format: the exact bytes the writer
 * lays out, round trips, conversions, and a reader that refuses truncated,
 * bit-flipped and malformed files by name; models saved and loaded under
 * PyTorch's parameter names. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "numeric/nn.h"
#include "base/safetensors.h"
#include "numeric/tensor.h"

/* A file made by hand: the 8-byte length, the header as given, the data. */
static const char *craft(const char *name, const char *header, const void *data, size_t n) {
  size_t h = strlen(header);
  unsigned char *buf = malloc(8 + h + n + 1);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
  memcpy(buf + 8, header, h);
  if (n) memcpy(buf + 8 + h, data, n);
  const char *p = harness_write(name, buf, 8 + h + n);
  free(buf);
  return p;
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  CHECK(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  rewind(f);
  unsigned char *b = malloc(*n + 1);
  CHECK(fread(b, 1, *n, f) == *n);
  fclose(f);
  return b;
}

/* The header and data the reference writer produces for the same input:
 * sorted names, compact JSON, spaces up to a multiple of 8. */
TEST(safetensors_exact_layout) {
  const float a[1] = {1.5f}, b[2] = {-2.0f, 0.25f};
  const int64_t sa[1] = {1}, sb[2] = {1, 2};
  safetensors_entry e[2] = {{"b", 2, sb, b, NULL}, {"a", 1, sa, a, NULL}};
  const char *meta[] = {"format", "pt", NULL};
  CHECK_OK(safetensors_write("x.safetensors", e, 2, meta));
  size_t n;
  unsigned char *got = slurp("x.safetensors", &n);
  const char *want = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[4,12]}}";
  size_t w = strlen(want), padded = (w + 7) / 8 * 8;
  uint64_t h = 0;
  for (int i = 7; i >= 0; i--) h = h << 8 | got[i];
  CHECK_INT_EQ(h, padded);
  CHECK_INT_EQ(n, 8 + padded + 12);
  CHECK(memcmp(got + 8, want, w) == 0);
  for (size_t i = w; i < padded; i++) CHECK(got[8 + i] == ' ');
  CHECK(memcmp(got + 8 + padded, a, 4) == 0 && memcmp(got + 8 + padded + 4, b, 8) == 0);
  free(got);
  /* No temporary left beside it. */
  CHECK(access("x.safetensors.tmp-0-0", F_OK) != 0);
}

TEST(safetensors_roundtrip) {
  float w[6] = {1, 2, 3, 4, 5, 6}, s = 7;
  const int64_t sw[2] = {2, 3}, sz[2] = {0, 4};
  safetensors_entry e[3] = {{"w", 2, sw, w, NULL}, {"scalar", 0, NULL, &s, NULL}, {"empty", 2, sz, NULL, NULL}};
  const char *meta[] = {"z", "last", "a", "first", NULL};
  CHECK_OK(safetensors_write("r.safetensors", e, 3, meta));
  safetensors_file f;
  CHECK_OK(safetensors_read("r.safetensors", &f));
  CHECK_INT_EQ(f.n, 3);
  CHECK(strcmp(f.tensors[0].name, "empty") == 0); /* offset order = name order */
  const safetensors_tensor *t = safetensors_find(&f, "w");
  CHECK(t && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->numel == 6);
  CHECK(memcmp(t->data, w, sizeof w) == 0);
  t = safetensors_find(&f, "scalar");
  CHECK(t && t->ndim == 0 && t->numel == 1 && t->data[0] == 7);
  t = safetensors_find(&f, "empty");
  CHECK(t && t->numel == 0 && t->data == NULL);
  CHECK(strcmp(safetensors_meta(&f, "a"), "first") == 0);
  CHECK(strcmp(safetensors_meta(&f, "z"), "last") == 0);
  CHECK(safetensors_meta(&f, "nope") == NULL && safetensors_find(&f, "nope") == NULL);
  CHECK(strcmp(f.meta[0], "a") == 0); /* keys written sorted */
  safetensors_free(&f);
}

TEST(safetensors_write_refuses_bad_input) {
  float v = 1;
  const int64_t one = 1, neg = -1;
  safetensors_entry dup[2] = {{"x", 1, &one, &v, NULL}, {"x", 1, &one, &v, NULL}};
  CHECK_ERR(safetensors_write("d.safetensors", dup, 2, NULL), DRV_EINVAL, "two tensors are named 'x'");
  safetensors_entry meta_name = {"__metadata__", 1, &one, &v, NULL};
  CHECK_ERR(safetensors_write("d.safetensors", &meta_name, 1, NULL), DRV_EINVAL, "__metadata__");
  safetensors_entry negative = {"n", 1, &neg, &v, NULL};
  CHECK_ERR(safetensors_write("d.safetensors", &negative, 1, NULL), DRV_ERANGE, "'n'");
  const char *odd[] = {"key", NULL};
  CHECK_ERR(safetensors_write("d.safetensors", NULL, 0, odd), DRV_EINVAL, "has no value");
  CHECK(access("d.safetensors", F_OK) != 0);
}

/* An unwritable place fails with the path and the reason, and leaves an
 * existing file as it was. */
TEST(safetensors_write_errors_name_the_path) {
  float v = 1;
  const int64_t one = 1;
  safetensors_entry e = {"x", 1, &one, &v, NULL};
  CHECK_ERR(safetensors_write("no/such/dir/m.safetensors", &e, 1, NULL), DRV_EIO,
            "cannot write 'no/such/dir/m.safetensors': No such file or directory");
  CHECK_OK(mkdir("isdir.safetensors", 0755));
  CHECK_ERR(safetensors_write("isdir.safetensors", &e, 1, NULL), DRV_EIO, "rename failed");
  CHECK(access("isdir.safetensors", F_OK) == 0);
}

#define EXPECT_READ_FAILS(path, needle)                                         \
  do {                                                                          \
    safetensors_file f_;                                                        \
    int rc_ = safetensors_read((path), &f_);                                    \
    safetensors_free(&f_);                                                      \
    if (rc_ >= 0) harness_fail(__FILE__, __LINE__, "%s was accepted", (path));  \
    CHECK_STR_CONTAINS(err_msg(), (needle));                                 \
    CHECK_STR_CONTAINS(err_msg(), (path));                                   \
  } while (0)

/* Every prefix of a valid file is refused (never a crash, never a
 * partial model), naming the file. */
TEST(safetensors_truncated) {
  float w[8] = {0};
  const int64_t s[1] = {8};
  safetensors_entry e[2] = {{"a", 1, s, w, NULL}, {"b", 1, s, w, NULL}};
  CHECK_OK(safetensors_write("t.safetensors", e, 2, NULL));
  size_t n;
  unsigned char *full = slurp("t.safetensors", &n);
  for (size_t k = 0; k < n; k++) {
    const char *p = harness_write("cut.safetensors", full, k);
    EXPECT_READ_FAILS(p, "cut.safetensors");
  }
  EXPECT_READ_FAILS(harness_write("cut.safetensors", full, 5), "too short");
  EXPECT_READ_FAILS(harness_write("cut.safetensors", full, 40), "runs past the end");
  EXPECT_READ_FAILS(harness_write("cut.safetensors", full, n - 1), "run past the data");
  free(full);
}

/* Each single-bit flip in the header either is refused or still reads as
 * a well-formed file; the ones that touch structure are refused. */
TEST(safetensors_bit_flipped_header) {
  float w[4] = {1, 2, 3, 4};
  const int64_t s[2] = {2, 2};
  safetensors_entry e[2] = {{"0.weight", 2, s, w, NULL}, {"0.bias", 1, s, w, NULL}};
  CHECK_OK(safetensors_write("f.safetensors", e, 2, NULL));
  size_t n;
  unsigned char *b = slurp("f.safetensors", &n);
  size_t h = b[0], refused = 0, flips = 0;
  for (size_t i = 0; i < 8 + h; i++)
    for (int bit = 0; bit < 8; bit++) {
      b[i] ^= (unsigned char)(1u << bit);
      const char *p = harness_write("flip.safetensors", b, n);
      safetensors_file f;
      int rc = safetensors_read(p, &f);
      if (rc < 0) {
        refused++;
        CHECK_STR_CONTAINS(err_msg(), "flip.safetensors");
      } else {
        CHECK(f.n <= 2);
      }
      safetensors_free(&f);
      b[i] ^= (unsigned char)(1u << bit);
      flips++;
    }
  CHECK(refused > flips / 2);
  b[8] ^= 0x01; /* '{' -> 'z' */
  EXPECT_READ_FAILS(harness_write("flip.safetensors", b, n), "does not start with '{'");
  b[8] ^= 0x01;
  b[7] ^= 0x80; /* the top byte of the length */
  EXPECT_READ_FAILS(harness_write("flip.safetensors", b, n), "over the 100000000-byte limit");
  free(b);
}

TEST(safetensors_layout_errors) {
  float d[4] = {1, 2, 3, 4};
  EXPECT_READ_FAILS(craft("o.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                          d, 12),
                    "tensors 'a' and 'b' overlap");
  EXPECT_READ_FAILS(craft("g.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                          d, 12),
                    "a gap of 4 bytes before tensor 'b'");
  EXPECT_READ_FAILS(craft("x.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                          d, 8),
                    "4 bytes after the last tensor");
  EXPECT_READ_FAILS(craft("s.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
                          d, 8),
                    "cover 8 bytes, its shape and dtype need 12");
  EXPECT_READ_FAILS(craft("v.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
                                  "\"data_offsets\":[0,8]}}", d, 8),
                    "overflows");
  EXPECT_READ_FAILS(craft("n.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
                          d, 4),
                    "not an integer >= 0");
  EXPECT_READ_FAILS(craft("r.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}",
                          d, 4),
                    "0 <= begin <= end");
}

TEST(safetensors_header_errors) {
  float d[2] = {1, 2};
  EXPECT_READ_FAILS(craft("j.st", "{\"a\":", d, 0), "not valid JSON");
  EXPECT_READ_FAILS(craft("a.st", " {}", d, 0), "does not start with '{'");
  EXPECT_READ_FAILS(craft("k.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                          d, 8),
                    "duplicate");
  EXPECT_READ_FAILS(craft("u.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
                                  "\"extra\":1}}", d, 4),
                    "exactly dtype, shape and data_offsets");
  EXPECT_READ_FAILS(craft("m.st", "{\"__metadata__\":{\"k\":1}}", d, 0), "is not a string");
  EXPECT_READ_FAILS(craft("i.st", "{\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                          d, 4),
                    "dtype 'I32'");
  EXPECT_READ_FAILS("missing.st", "No such file");
  /* Trailing spaces are padding, and an empty file of tensors is fine. */
  safetensors_file f;
  CHECK_OK(safetensors_read(craft("e.st", "{}      ", d, 0), &f));
  CHECK_INT_EQ(f.n, 0);
  safetensors_free(&f);
}

/* I64 (PyTorch's num_batches_tracked) is read as float too. */
TEST(safetensors_reads_i64) {
  int64_t v[2] = {-7, 123456};
  const char *p = craft("l.st", "{\"n\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}",
                        v, sizeof v);
  safetensors_file f;
  CHECK_OK(safetensors_read(p, &f));
  CHECK(safetensors_find(&f, "n")->data[0] == -7.0f);
  CHECK(safetensors_find(&f, "n")->data[1] == 123456.0f);
  safetensors_free(&f);
}

/* I64 tensors are written (before the F32 ones, as the reference writer
 * orders dtypes) and read back exactly, past float's 2^24. */
TEST(safetensors_writes_i64) {
  const int64_t ids[3] = {-5, (1LL << 40) + 1, INT64_MAX}, s3[] = {3}, s1[] = {1};
  const float w[1] = {0.5f};
  safetensors_entry e[2] = {{"a", 1, s1, w, NULL}, {"z.ids", 1, s3, NULL, ids}};
  CHECK_OK(safetensors_write("i.st", e, 2, NULL));
  safetensors_file f;
  CHECK_OK(safetensors_read("i.st", &f));
  CHECK_INT_EQ((int)f.n, 2);
  CHECK(strcmp(f.tensors[0].name, "z.ids") == 0); /* its bytes come first */
  const safetensors_tensor *t = safetensors_find(&f, "z.ids");
  CHECK(t->i64 && t->i64[0] == -5 && t->i64[1] == (1LL << 40) + 1 && t->i64[2] == INT64_MAX);
  CHECK(safetensors_find(&f, "a")->i64 == NULL);
  CHECK(safetensors_find(&f, "a")->data[0] == 0.5f);
  safetensors_free(&f);
  FILE *fp = fopen("i.st", "rb");
  char head[256] = {0};
  CHECK(fp && fread(head, 1, sizeof head - 1, fp) > 8);
  fclose(fp);
  CHECK(strstr(head + 8, "\"z.ids\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]}"));
}

/* F64, F16 and BF16 tensors are read as float. */
TEST(safetensors_converts_dtypes) {
  unsigned char data[8 + 4 + 4];
  double x = -3.25;
  memcpy(data, &x, 8);
  const unsigned char f16[4] = {0x00, 0x3c, 0x01, 0x00};  /* 1.0, 2^-24 */
  const unsigned char bf16[4] = {0x80, 0x3f, 0x20, 0xc1}; /* 1.0, -10.0 */
  memcpy(data + 8, f16, 4);
  memcpy(data + 12, bf16, 4);
  const char *p = craft("c.st", "{\"d\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
                                "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]},"
                                "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]}}",
                        data, sizeof data);
  safetensors_file f;
  CHECK_OK(safetensors_read(p, &f));
  CHECK(safetensors_find(&f, "d")->data[0] == -3.25f);
  CHECK(safetensors_find(&f, "h")->data[0] == 1.0f);
  CHECK(safetensors_find(&f, "h")->data[1] == ldexpf(1.0f, -24));
  CHECK(safetensors_find(&f, "b")->data[0] == 1.0f);
  CHECK(safetensors_find(&f, "b")->data[1] == -10.0f);
  safetensors_free(&f);
}

/* ============================== models =================================== */

static nn_module *mlp(uint64_t seed) {
  rng_t r;
  rng_seed(&r, seed);
  nn_module *m = nn_from_spec("Sequential(Linear(3,5),ReLU,Sequential(Linear(5,4),Tanh),"
                              "Dropout(0.25),Linear(4,2))", &r);
  CHECK(m);
  nn_set_training(m, false);
  return m;
}

TEST(nn_torch_param_names) {
  nn_module *m = mlp(1);
  nn_param_list pl = {0};
  CHECK_OK(nn_torch_params(m, &pl));
  const char *want[] = {"0.weight", "0.bias", "2.0.weight", "2.0.bias", "4.weight", "4.bias"};
  CHECK_INT_EQ(pl.n, 6);
  for (int i = 0; i < 6; i++) CHECK(strcmp(pl.items[i].name, want[i]) == 0);
  CHECK_INT_EQ(pl.items[0].value->shape[0], 5); /* [out, in], as PyTorch */
  nn_param_list_free(&pl);
  nn_unref(m);
}

static void same_outputs(nn_module *a, nn_module *b) {
  float xs[6] = {0.5f, -1, 2, 0.1f, 0.2f, -0.3f};
  tensor *x = tensor_from(2, (int64_t[]){2, 3}, xs);
  const tensor *ya, *yb;
  CHECK_OK(nn_forward(a, x, &ya));
  tensor *keep = tensor_clone(ya);
  CHECK_OK(nn_forward(b, x, &yb));
  for (int64_t i = 0; i < 4; i++) CHECK(tensor_data(keep)[i] == tensor_data(yb)[i]);
  tensor_free(keep);
  tensor_free(x);
}

TEST(nn_save_and_load) {
  nn_module *m = mlp(1);
  CHECK_OK(nn_save(m, "m.safetensors"));
  safetensors_file f;
  CHECK_OK(safetensors_read("m.safetensors", &f));
  CHECK(strcmp(safetensors_meta(&f, "format"), "pt") == 0);
  CHECK(strcmp(safetensors_meta(&f, NN_SPEC_META_KEY),
               "Sequential(Linear(3,5),ReLU,Sequential(Linear(5,4),Tanh),Dropout(0.25),"
               "Linear(4,2))") == 0);
  safetensors_free(&f);
  rng_t r;
  rng_seed(&r, 99);
  nn_module *back = nn_load("m.safetensors", &r);
  if (!back) harness_fail(__FILE__, __LINE__, "%s", err_msg());
  nn_set_training(back, false);
  same_outputs(m, back);
  nn_module *other = mlp(2); /* same architecture, other values */
  CHECK_OK(nn_load_params(other, "m.safetensors"));
  same_outputs(m, other);
  nn_unref(back);
  nn_unref(other);
  nn_unref(m);
}

/* Mismatches are refused as PyTorch's strict load_state_dict refuses them,
 * and the model keeps its values. */
TEST(nn_load_params_mismatch) {
  rng_t r;
  rng_seed(&r, 5);
  nn_module *small = nn_from_spec("Sequential(Linear(3,5))", &r);
  nn_module *wide = nn_from_spec("Sequential(Linear(3,6))", &r);
  nn_module *two = nn_from_spec("Sequential(Linear(3,5),ReLU,Linear(5,1))", &r);
  CHECK_OK(nn_save(small, "small.safetensors"));
  float before = tensor_data(wide->children[0]->params[0].value)[0];
  CHECK_ERR(nn_load_params(wide, "small.safetensors"), DRV_ESHAPE,
            "tensor '0.weight' is [5, 3] in the file, the model's is [6, 3]");
  CHECK(tensor_data(wide->children[0]->params[0].value)[0] == before);
  CHECK_ERR(nn_load_params(two, "small.safetensors"), DRV_EINVAL, "it has no tensor '2.weight'");
  CHECK_OK(nn_save(two, "two.safetensors"));
  CHECK_ERR(nn_load_params(small, "two.safetensors"), DRV_EINVAL,
            "tensor '2.bias' is not a parameter of the model");
  /* A file without a spec (as PyTorch writes) loads only into a model. */
  float w[15] = {0}, b[5] = {0};
  const int64_t sw[2] = {5, 3}, sb[1] = {5};
  safetensors_entry e[2] = {{"0.weight", 2, sw, w, NULL}, {"0.bias", 1, sb, b, NULL}};
  CHECK_OK(safetensors_write("torch.safetensors", e, 2, NULL));
  CHECK(nn_load("torch.safetensors", &r) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "has no model spec");
  CHECK_OK(nn_load_params(small, "torch.safetensors"));
  CHECK(tensor_data(small->children[0]->params[0].value)[0] == 0.0f);
  nn_unref(small);
  nn_unref(wide);
  nn_unref(two);
}
