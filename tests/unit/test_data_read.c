/* test_data_read.c - dataset readers on good files (values checked) and on
 * malformed ones (error code and message, with file and line or byte,
 * asserted). Binary fixtures are built byte by byte here. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "harness.h"

/* ======================================================================
 * Helpers
 * ==================================================================== */

static float xat(const dataset *d, int64_t i, int64_t j) {
  return tensor_data(d->x)[i * d->features + j];
}
static float yat(const dataset *d, int64_t i) { return tensor_data(d->y)[i]; }
static void put(unsigned char *p, uint64_t v, int size, int big) {
  for (int i = 0; i < size; i++) p[big ? size - 1 - i : i] = (unsigned char)(v >> (8 * i));
}
static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static uint64_t dbits(double f) {
  uint64_t u;
  memcpy(&u, &f, 8);
  return u;
}

/* IDX header (magic, type, dims) into buf; returns its length. */
static size_t idx_header(unsigned char *buf, int type, int ndim, const uint32_t *dims) {
  buf[0] = buf[1] = 0;
  buf[2] = (unsigned char)type;
  buf[3] = (unsigned char)ndim;
  for (int i = 0; i < ndim; i++) put(buf + 4 + 4 * i, dims[i], 4, 1);
  return 4 + 4 * (size_t)ndim;
}

/* A .npy file: magic, version, `dict` padded to a 64-byte boundary, then
 * `data`. Returns the total length. */
static size_t npy_file(unsigned char *buf, int version, const char *dict, const void *data,
                       size_t len) {
  size_t pre = version == 1 ? 10 : 12, dl = strlen(dict);
  size_t hlen = dl + 1;
  while ((pre + hlen) % 64) hlen++;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)version;
  buf[7] = 0;
  put(buf + 8, hlen, version == 1 ? 2 : 4, 0);
  memcpy(buf + pre, dict, dl);
  memset(buf + pre + dl, ' ', hlen - dl - 1);
  buf[pre + hlen - 1] = '\n';
  memcpy(buf + pre + hlen, data, len);
  return pre + hlen + len;
}

/* ======================================================================
 * CSV
 * ==================================================================== */

TEST(data_csv_reads_values) {
  const char *p = harness_write_str("a.csv", "1,2.5,3\n4,-5e-1,6\n");
  data_csv_opts o = {.label = -1, .header = 0};
  dataset *d;
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK_INT_EQ(d->n, 2);
  CHECK_INT_EQ(d->features, 2);
  CHECK_NEAR(xat(d, 0, 0), 1, 0);
  CHECK_NEAR(xat(d, 0, 1), 2.5, 0);
  CHECK_NEAR(xat(d, 1, 1), -0.5, 0);
  CHECK_NEAR(yat(d, 0), 3, 0);
  CHECK_NEAR(yat(d, 1), 6, 0);
  CHECK_INT_EQ(d->classes, 7);
  CHECK_STR_CONTAINS(d->source, "a.csv");
  data_free(d);

  /* Label first; a fractional label means no classes. */
  p = harness_write_str("b.csv", "0.5;1;2\n1;3;4\n");
  o = (data_csv_opts){.label = 0, .header = 0, .delimiter = ';'};
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK_NEAR(yat(d, 0), 0.5, 0);
  CHECK_NEAR(xat(d, 0, 0), 1, 0);
  CHECK_NEAR(xat(d, 1, 1), 4, 0);
  CHECK_INT_EQ(d->classes, 0);
  data_free(d);

  /* -2 counts from the end: the middle column. */
  o = (data_csv_opts){.label = -2, .header = 0, .delimiter = ';'};
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK_NEAR(yat(d, 1), 3, 0);
  CHECK_NEAR(xat(d, 1, 0), 1, 0);
  CHECK_NEAR(xat(d, 1, 1), 4, 0);
  data_free(d);
}

TEST(data_csv_header_crlf_blank_spaces) {
  const char *p =
      harness_write_str("h.csv", "\xEF\xBB\xBF" "a,b,label\r\n 1.5 , 2 ,0\r\n\r\n  \r\n3,4,1\r\n\r\n");
  data_csv_opts o = {.label = -1, .header = -1};
  dataset *d;
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK_INT_EQ(d->n, 2);
  CHECK_NEAR(xat(d, 0, 0), 1.5, 0);
  CHECK_NEAR(xat(d, 0, 1), 2, 0);
  CHECK_NEAR(xat(d, 1, 0), 3, 0);
  CHECK_NEAR(yat(d, 1), 1, 0);
  CHECK_INT_EQ(d->classes, 2);
  data_free(d);
  o.header = 1;
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK_INT_EQ(d->n, 2);
  data_free(d);
  /* No header claimed: the text line is an error naming line 1. */
  o.header = 0;
  CHECK_ERR(data_read_csv(p, &o, &d), DRV_EPARSE, "h.csv:1: field 1: 'a' is not a number");
  CHECK(d == NULL);

  /* Detection leaves an all-numeric first line as data; header=1 skips it. */
  p = harness_write_str("n.csv", "1,2\n3,4\n");
  o.header = -1;
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK_INT_EQ(d->n, 2);
  data_free(d);
  o.header = 1;
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK_INT_EQ(d->n, 1);
  CHECK_NEAR(xat(d, 0, 0), 3, 0);
  data_free(d);
  /* Default options: last column, detected header. */
  CHECK_OK(data_read_csv(p, NULL, &d));
  CHECK_NEAR(yat(d, 1), 4, 0);
  data_free(d);
}

/* A reader's error case: the file (written from `text`, or read as it is
 * when text is NULL), the options, and the code and message expected. */
typedef struct bad_case {
  const char *file, *text;
  int label, header; /* CSV */
  int64_t features;  /* libsvm */
  int code;
  const char *msg;
} bad_case;

static const bad_case csv_bad[] = {
    {"bad.csv", "1,2,3\n4,5,6\n7,8\n", -1, 0, 0, DRV_EPARSE, "bad.csv:3: expected 3 fields, found 2"},
    {"bad.csv", "1,2,3\n\n4,5,6,7\n", -1, 0, 0, DRV_EPARSE, "bad.csv:3: expected 3 fields, found 4"},
    {"bad.csv", "1,2,3\n4,abc,6\n", -1, 0, 0, DRV_EPARSE, "bad.csv:2: field 2: 'abc' is not a number"},
    {"bad.csv", "1,2,3\n4,5 6,6\n", -1, 0, 0, DRV_EPARSE, "bad.csv:2: field 2: '5 6' is not a number"},
    {"bad.csv", "1,2,3\n4,,6\n", -1, 0, 0, DRV_EPARSE, "bad.csv:2: field 2 is empty"},
    {"bad.csv", "1,2,3\r\n4,5,nan\r\n", -1, 0, 0, DRV_EPARSE,
     "bad.csv:2: field 3: 'nan' is not a finite number"},
    {"bad.csv", "1,2,3\n4,5,1e99\n", -1, 0, 0, DRV_EPARSE, "bad.csv:2: field 3: '1e99' is not a finite"},
    {"empty.csv", "", -1, 0, 0, DRV_EPARSE, "empty.csv: empty file"},
    {"blank.csv", "\n  \r\n\n", -1, 0, 0, DRV_EPARSE, "blank.csv: no data"},
    {"head.csv", "a,b,c\n", -1, -1, 0, DRV_EPARSE, "head.csv: no data rows after the header"},
    {"one.csv", "1\n2\n", -1, -1, 0, DRV_EPARSE, "one.csv:1: one field per line"},
    {"lab.csv", "\n1,2,3\n", 3, -1, 0, DRV_EINVAL,
     "lab.csv:2: label column 4 is out of range: the file has 3 columns"},
    {"lab.csv", "\n1,2,3\n", -4, -1, 0, DRV_EINVAL, "label column -4 is out of range"},
    {"nope.csv", NULL, -1, -1, 0, DRV_EIO, "cannot open 'nope.csv': No such file or directory"},
    {".", NULL, -1, -1, 0, DRV_EIO, "cannot read '.': Is a directory"},
};

static const bad_case libsvm_bad[] = {
    {"f.svm", "1 1:1\n1 3:1 2:1\n", 0, 0, 0, DRV_EPARSE,
     "f.svm:2: index 2 after 3: indices must be ascending"},
    {"f.svm", "1 2:1 2:1\n", 0, 0, 0, DRV_EPARSE, "f.svm:1: index 2 after 2"},
    {"f.svm", "1 0:1\n", 0, 0, 0, DRV_EPARSE, "f.svm:1: index 0: indices start at 1"},
    {"f.svm", "\n# c\nx 1:1\n", 0, 0, 0, DRV_EPARSE, "f.svm:3: label 'x' is not a number"},
    {"f.svm", "1 1:1\n1 2:abc\n", 0, 0, 0, DRV_EPARSE, "f.svm:2: index 2: 'abc' is not a number"},
    {"f.svm", "1 7\n", 0, 0, 0, DRV_EPARSE, "f.svm:1: '7' is not index:value"},
    {"f.svm", "1 a:2\n", 0, 0, 0, DRV_EPARSE, "f.svm:1: 'a:2': bad feature index"},
    {"f.svm", "1 1:1\n0 2:1 3:1\n", 0, 0, 2, DRV_ERANGE, "f.svm:2: index 3 is beyond the 2 features"},
    {"f.svm", "1 99999999999:1\n", 0, 0, 0, DRV_ERANGE, "f.svm:1: index 99999999999 is too large"},
    {"e.svm", "", 0, 0, 0, DRV_EPARSE, "e.svm: empty file"},
    {"c.svm", "# only\n\n", 0, 0, 0, DRV_EPARSE, "c.svm: no examples"},
    {"z.svm", "1\n0\n", 0, 0, 0, DRV_EPARSE, "z.svm: no feature indices"},
    {"missing.svm", NULL, 0, 0, 0, DRV_EIO, "cannot open 'missing.svm'"},
};

/* Runs each case through its reader (csv when libsvm is false): the code,
 * the message, and no dataset left behind. */
static void check_bad(const bad_case *cases, size_t n, bool libsvm) {
  for (size_t i = 0; i < n; i++) {
    const bad_case *c = &cases[i];
    const char *p = c->text ? harness_write_str(c->file, c->text) : c->file;
    data_csv_opts o = {.label = c->label, .header = c->header};
    dataset *d = (dataset *)&o; /* any non-NULL value: a failure must reset it */
    int rc = libsvm ? data_read_libsvm(p, &(data_libsvm_opts){.features = c->features}, &d) : data_read_csv(p, &o, &d);
    if (rc != c->code || !strstr(err_msg(), c->msg))
      harness_fail(__FILE__, __LINE__, "case %zu (%s): %s \"%s\", expected %s \"%s\"", i, c->file,
                   err_name(rc), err_msg(), err_name(c->code), c->msg);
    CHECK(d == NULL);
  }
}

TEST(data_csv_malformed) { check_bad(csv_bad, sizeof csv_bad / sizeof *csv_bad, false); }

TEST(data_readers_and_synthetic_stop_on_interrupt) {
  /* Long enough for the readers to poll the flag. */
  size_t rows = 20000, k = 0;
  char *text = malloc(rows * 8 + 1);
  CHECK(text);
  for (size_t i = 0; i < rows; i++) k += (size_t)sprintf(text + k, "%zu,%zu\n", i % 10, i % 3);
  const char *p = harness_write_str("long.csv", text);
  data_csv_opts o = {.label = -1, .header = 0};
  dataset *d;
  CHECK_OK(data_read_csv(p, &o, &d));
  CHECK_INT_EQ(d->n, (int64_t)rows);
  CHECK_INT_EQ(d->classes, 3);
  data_free(d);
  err_interrupt_request();
  CHECK_ERR(data_read_csv(p, &o, &d), DRV_EINTERRUPTED, "long.csv: interrupted");
  CHECK(d == NULL);
  data_synth_opts so = {.n = 100, .features = 4, .classes = 3, .seed = 1};
  CHECK_ERR(data_synthetic(&so, &d), DRV_EINTERRUPTED, "synthetic: interrupted");
  err_interrupt_clear();
  CHECK_OK(data_synthetic(&so, &d));
  data_free(d);
  free(text);
}

TEST(data_csv_digits) {
  data_csv_opts o = {.label = -1, .header = 0};
  dataset *d;
  CHECK_OK(data_read_csv(harness_src("examples/data/digits.csv"), &o, &d));
  CHECK_INT_EQ(d->n, 1797);
  CHECK_INT_EQ(d->features, 64);
  CHECK_INT_EQ(d->classes, 10);
  CHECK_INT_EQ(d->x->shape[0], 1797);
  CHECK_INT_EQ(d->x->shape[1], 64);
  CHECK_INT_EQ(d->y->ndim, 1);
  /* First row: 0,0,5,13,9,1,0,0,0,0,13,15,... label 0; then labels 1, 2. */
  const float first[12] = {0, 0, 5, 13, 9, 1, 0, 0, 0, 0, 13, 15};
  for (int j = 0; j < 12; j++) CHECK_NEAR(xat(d, 0, j), first[j], 0);
  CHECK_NEAR(yat(d, 0), 0, 0);
  CHECK_NEAR(yat(d, 1), 1, 0);
  CHECK_NEAR(yat(d, 2), 2, 0);
  for (int64_t i = 0; i < d->n * d->features; i++) {
    float v = tensor_data(d->x)[i];
    CHECK(v >= 0 && v <= 16);
  }
  CHECK_STR_CONTAINS(d->source, "digits.csv");
  data_free(d);
  /* Detection finds no header in it either. */
  o.header = -1;
  CHECK_OK(data_read_csv(harness_src("examples/data/digits.csv"), &o, &d));
  CHECK_INT_EQ(d->n, 1797);
  data_free(d);
}

/* ======================================================================
 * libsvm
 * ==================================================================== */

TEST(data_libsvm_reads_values) {
  const char *p = harness_write_str("a.svm",
                                    "# a comment line\n"
                                    "1 1:0.5 3:2   # trailing comment\n"
                                    "\n"
                                    "0 qid:7 2:1.5\r\n"
                                    "2\n");
  dataset *d;
  CHECK_OK(data_read_libsvm(p, NULL, &d));
  CHECK_INT_EQ(d->n, 3);
  CHECK_INT_EQ(d->features, 3);
  const float want[3][3] = {{0.5f, 0, 2}, {0, 1.5f, 0}, {0, 0, 0}};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) CHECK_NEAR(xat(d, i, j), want[i][j], 0);
  CHECK_NEAR(yat(d, 0), 1, 0);
  CHECK_NEAR(yat(d, 1), 0, 0);
  CHECK_NEAR(yat(d, 2), 2, 0);
  CHECK_INT_EQ(d->classes, 3);
  data_free(d);

  /* A given feature count pads; +1/-1 labels give no classes. */
  p = harness_write_str("b.svm", "+1 2:1\n-1 1:-3\n");
  CHECK_OK(data_read_libsvm(p, &(data_libsvm_opts){.features = 5}, &d));
  CHECK_INT_EQ(d->features, 5);
  CHECK_NEAR(xat(d, 0, 1), 1, 0);
  CHECK_NEAR(xat(d, 1, 0), -3, 0);
  CHECK_NEAR(xat(d, 1, 4), 0, 0);
  CHECK_NEAR(yat(d, 1), -1, 0);
  CHECK_INT_EQ(d->classes, 0);
  data_free(d);
}

TEST(data_libsvm_malformed) {
  check_bad(libsvm_bad, sizeof libsvm_bad / sizeof *libsvm_bad, true);
}

/* ======================================================================
 * IDX
 * ==================================================================== */

TEST(data_idx_ubyte_images_and_labels) {
  unsigned char im[64], lb[16];
  uint32_t dims[3] = {2, 2, 3};
  size_t n = idx_header(im, 0x08, 3, dims);
  for (int i = 0; i < 12; i++) im[n + i] = (unsigned char)(i * 20 + 15); /* up to 235 */
  char *ip = strdup(harness_write("t-images.idx", im, n + 12));
  uint32_t ldim = 2;
  size_t m = idx_header(lb, 0x08, 1, &ldim);
  lb[m] = 7;
  lb[m + 1] = 3;
  char *lp = strdup(harness_write("t-labels.idx", lb, m + 2));
  dataset *d;
  CHECK_OK(data_read_idx(ip, lp, &d));
  CHECK_INT_EQ(d->n, 2);
  CHECK_INT_EQ(d->features, 6);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 6; j++) CHECK_NEAR(xat(d, i, j), (i * 6 + j) * 20 + 15, 0);
  CHECK_NEAR(yat(d, 0), 7, 0);
  CHECK_NEAR(yat(d, 1), 3, 0);
  CHECK_INT_EQ(d->classes, 8);
  data_free(d);
  /* No labels: y is zeros. */
  CHECK_OK(data_read_idx(ip, NULL, &d));
  CHECK_NEAR(yat(d, 0), 0, 0);
  CHECK_NEAR(yat(d, 1), 0, 0);
  data_free(d);
  free(ip);
  free(lp);
}

TEST(data_idx_every_type) {
  /* One 1-D "image" file per type: 3 rows of 1 feature, values -2.5.., with
   * labels as big-endian ints. */
  struct {
    int type, size, is_float, is_signed;
    double v[3];
  } cases[] = {
      {0x08, 1, 0, 0, {0, 128, 255}},        {0x09, 1, 0, 1, {-128, -1, 127}},
      {0x0B, 2, 0, 1, {-300, 0, 32767}},     {0x0C, 4, 0, 1, {-70000, 1, 2000000}},
      {0x0D, 4, 1, 1, {-2.5, 0.25, 1e6}},    {0x0E, 8, 1, 1, {-0.125, 3.5, -1e10}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    unsigned char buf[64];
    uint32_t dim = 3;
    size_t n = idx_header(buf, cases[c].type, 1, &dim);
    for (int i = 0; i < 3; i++) {
      double v = cases[c].v[i];
      uint64_t bits = cases[c].is_float ? (cases[c].size == 4 ? fbits((float)v) : dbits(v))
                                        : (uint64_t)(int64_t)v;
      put(buf + n + (size_t)i * cases[c].size, bits, cases[c].size, 1);
    }
    const char *p = harness_write("t.idx", buf, n + 3 * (size_t)cases[c].size);
    dataset *d;
    CHECK_OK(data_read_idx(p, NULL, &d));
    CHECK_INT_EQ(d->n, 3);
    CHECK_INT_EQ(d->features, 1);
    for (int i = 0; i < 3; i++) CHECK_NEAR(xat(d, i, 0), (float)cases[c].v[i], 0);
    data_free(d);
  }
  /* int32 labels work too. */
  unsigned char im[32], lb[32];
  uint32_t dims[2] = {2, 2};
  size_t n = idx_header(im, 0x08, 2, dims);
  memset(im + n, 1, 4);
  char *ip = strdup(harness_write("i.idx", im, n + 4));
  uint32_t ld = 2;
  size_t m = idx_header(lb, 0x0C, 1, &ld);
  put(lb + m, 9, 4, 1);
  put(lb + m + 4, 4, 4, 1);
  dataset *d;
  CHECK_OK(data_read_idx(ip, harness_write("l.idx", lb, m + 8), &d));
  CHECK_NEAR(yat(d, 0), 9, 0);
  CHECK_NEAR(yat(d, 1), 4, 0);
  CHECK_INT_EQ(d->classes, 10);
  data_free(d);
  free(ip);
}

TEST(data_idx_malformed) {
  unsigned char buf[64];
  uint32_t dims[2] = {2, 3};
  size_t n = idx_header(buf, 0x08, 2, dims);
  memset(buf + n, 5, 6);
  dataset *d;
  CHECK_OK(data_read_idx(harness_write("ok.idx", buf, n + 6), NULL, &d));
  data_free(d);

  buf[2] = 0x42;
  CHECK_ERR(data_read_idx(harness_write("t.idx", buf, n + 6), NULL, &d), DRV_EPARSE,
            "t.idx: byte 2: unknown IDX type 0x42");
  CHECK(d == NULL);
  buf[2] = 0x08;
  buf[1] = 0x01;
  CHECK_ERR(data_read_idx(harness_write("t.idx", buf, n + 6), NULL, &d), DRV_EPARSE,
            "t.idx: byte 0: bad magic");
  buf[1] = 0;
  CHECK_ERR(data_read_idx(harness_write("t.idx", buf, n + 5), NULL, &d), DRV_EPARSE,
            "t.idx: byte 17: file ends early: expected 18 bytes");
  CHECK_ERR(data_read_idx(harness_write("t.idx", buf, n + 7), NULL, &d), DRV_EPARSE,
            "t.idx: byte 18: 1 unexpected bytes after the data");
  CHECK_ERR(data_read_idx(harness_write("t.idx", buf, 3), NULL, &d), DRV_EPARSE,
            "t.idx: byte 3: file ends inside the 4-byte IDX magic");
  CHECK_ERR(data_read_idx(harness_write("t.idx", buf, 9), NULL, &d), DRV_EPARSE,
            "t.idx: byte 9: file ends inside the dimensions");
  buf[3] = 0;
  CHECK_ERR(data_read_idx(harness_write("t.idx", buf, n + 6), NULL, &d), DRV_EPARSE,
            "t.idx: byte 3: 0 dimensions");
  buf[3] = 2;
  put(buf + 8, 0, 4, 1);
  CHECK_ERR(data_read_idx(harness_write("t.idx", buf, n + 6), NULL, &d), DRV_EPARSE,
            "t.idx: byte 8: dimension 1 is 0");
  /* Absurd dimensions are refused before any allocation or overflow. */
  unsigned char big[32];
  uint32_t huge[4] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
  size_t hn = idx_header(big, 0x0E, 4, huge);
  CHECK_ERR(data_read_idx(harness_write("huge.idx", big, hn), NULL, &d), DRV_ERANGE,
            "huge.idx: byte 8: dimensions too large");

  /* Labels that disagree with the images. */
  n = idx_header(buf, 0x08, 2, (uint32_t[]){2, 3});
  memset(buf + n, 5, 6);
  char *ip = strdup(harness_write("img.idx", buf, n + 6));
  unsigned char lb[32];
  size_t m = idx_header(lb, 0x08, 1, (uint32_t[]){3});
  CHECK_ERR(data_read_idx(ip, harness_write("lab.idx", lb, m + 3), &d), DRV_ESHAPE,
            "lab.idx: byte 4: 3 labels but");
  CHECK_STR_CONTAINS(err_msg(), "img.idx has 2 images");
  m = idx_header(lb, 0x08, 2, (uint32_t[]){2, 1});
  CHECK_ERR(data_read_idx(ip, harness_write("lab.idx", lb, m + 2), &d), DRV_ESHAPE,
            "lab.idx: byte 3: labels must be 1-D, found 2 dimensions");
  CHECK_ERR(data_read_idx(ip, "nolabels.idx", &d), DRV_EIO, "cannot open 'nolabels.idx'");
  CHECK(d == NULL);
  free(ip);
}

/* ======================================================================
 * .npy
 * ==================================================================== */

TEST(data_npy_float32_with_int64_labels) {
  unsigned char buf[256];
  float xs[6] = {0.5f, -1, 2, 3.25f, 4, -5};
  unsigned char raw[24];
  for (int i = 0; i < 6; i++) put(raw + 4 * i, fbits(xs[i]), 4, 0);
  size_t n = npy_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", raw, 24);
  char *xp = strdup(harness_write("x.npy", buf, n));
  CHECK_INT_EQ((n - 24) % 64, 0);
  unsigned char ly[16];
  put(ly, 4, 8, 0);
  put(ly + 8, 1, 8, 0);
  n = npy_file(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", ly, 16);
  char *yp = strdup(harness_write("y.npy", buf, n));
  dataset *d;
  CHECK_OK(data_read_npy(xp, yp, &d));
  CHECK_INT_EQ(d->n, 2);
  CHECK_INT_EQ(d->features, 3);
  for (int i = 0; i < 6; i++) CHECK_NEAR(tensor_data(d->x)[i], xs[i], 0);
  CHECK_NEAR(yat(d, 0), 4, 0);
  CHECK_NEAR(yat(d, 1), 1, 0);
  CHECK_INT_EQ(d->classes, 5);
  CHECK_STR_CONTAINS(d->source, "x.npy");
  data_free(d);
  CHECK_OK(data_read_npy(xp, NULL, &d));
  CHECK_NEAR(yat(d, 1), 0, 0);
  data_free(d);
  free(xp);
  free(yp);
}

TEST(data_npy_other_dtypes_and_versions) {
  unsigned char buf[512], raw[64];
  dataset *d;
  /* float64, version 2 header, 3-D flattened to rows. */
  double dv[4] = {1.5, -2.25, 1e-3, 7};
  for (int i = 0; i < 4; i++) put(raw + 8 * i, dbits(dv[i]), 8, 0);
  size_t n = npy_file(buf, 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 1, 2), }", raw, 32);
  CHECK_OK(data_read_npy(harness_write("d.npy", buf, n), NULL, &d));
  CHECK_INT_EQ(d->n, 2);
  CHECK_INT_EQ(d->features, 2);
  for (int i = 0; i < 4; i++) CHECK_NEAR(tensor_data(d->x)[i], (float)dv[i], 0);
  data_free(d);
  /* uint8, version 3, double-quoted keys, keys in another order. */
  for (int i = 0; i < 4; i++) raw[i] = (unsigned char)(250 + i / 2 * 5 - i * 3);
  n = npy_file(buf, 3, "{\"shape\": (4,), \"fortran_order\": False, \"descr\": \"|u1\"}", raw, 4);
  CHECK_OK(data_read_npy(harness_write("u.npy", buf, n), NULL, &d));
  CHECK_INT_EQ(d->n, 4);
  CHECK_INT_EQ(d->features, 1);
  for (int i = 0; i < 4; i++) CHECK_NEAR(xat(d, i, 0), raw[i], 0);
  data_free(d);
  /* int32 and int8, negative values; big-endian float32. */
  int32_t iv[2] = {-7, 100000};
  for (int i = 0; i < 2; i++) put(raw + 4 * i, (uint32_t)iv[i], 4, 0);
  n = npy_file(buf, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }", raw, 8);
  CHECK_OK(data_read_npy(harness_write("i.npy", buf, n), NULL, &d));
  CHECK_NEAR(xat(d, 0, 0), -7, 0);
  CHECK_NEAR(xat(d, 0, 1), 100000, 0);
  data_free(d);
  raw[0] = 0xFF;
  raw[1] = 0x80;
  n = npy_file(buf, 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (1, 2), }", raw, 2);
  CHECK_OK(data_read_npy(harness_write("b.npy", buf, n), NULL, &d));
  CHECK_NEAR(xat(d, 0, 0), -1, 0);
  CHECK_NEAR(xat(d, 0, 1), -128, 0);
  data_free(d);
  put(raw, fbits(-3.5f), 4, 1);
  n = npy_file(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1, 1), }", raw, 4);
  CHECK_OK(data_read_npy(harness_write("be.npy", buf, n), NULL, &d));
  CHECK_NEAR(xat(d, 0, 0), -3.5, 0);
  data_free(d);
}

TEST(data_npy_malformed) {
  unsigned char buf[512], raw[64] = {0};
  dataset *d;
  const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  size_t n = npy_file(buf, 1, good, raw, 16);
  char *xp = strdup(harness_write("x.npy", buf, n));
  CHECK_OK(data_read_npy(xp, NULL, &d));
  data_free(d);

  n = npy_file(buf, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 2), }", raw, 32);
  CHECK_ERR(data_read_npy(harness_write("c.npy", buf, n), NULL, &d), DRV_EUNSUPPORTED,
            "c.npy: unsupported dtype '<c8'");
  CHECK(d == NULL);
  n = npy_file(buf, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", raw, 8);
  CHECK_ERR(data_read_npy(harness_write("s.npy", buf, n), NULL, &d), DRV_EUNSUPPORTED,
            "s.npy: byte 20: unsupported dtype: structured");
  n = npy_file(buf, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", raw, 16);
  CHECK_ERR(data_read_npy(harness_write("f.npy", buf, n), NULL, &d), DRV_EUNSUPPORTED,
            "f.npy: byte 44: fortran_order is True");
  n = npy_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, }", raw, 16);
  CHECK_ERR(data_read_npy(harness_write("m.npy", buf, n), NULL, &d), DRV_EPARSE,
            "m.npy: byte 52: malformed header: no 'shape'");
  n = npy_file(buf, 1, "{'descr' '<f4', 'fortran_order': False, 'shape': (2, 2), }", raw, 16);
  CHECK_ERR(data_read_npy(harness_write("k.npy", buf, n), NULL, &d), DRV_EPARSE,
            "k.npy: byte 19: malformed header: expected ':' after a key");
  n = npy_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", raw, 16);
  CHECK_ERR(data_read_npy(harness_write("k.npy", buf, n), NULL, &d), DRV_EPARSE,
            "shape: expected a number");
  /* Length: one byte short, one too many. */
  n = npy_file(buf, 1, good, raw, 15);
  CHECK_ERR(data_read_npy(harness_write("t.npy", buf, n), NULL, &d), DRV_EPARSE,
            "t.npy: byte 143: file is 143 bytes, expected 144 for shape (2, 2) of '<f4'");
  n = npy_file(buf, 1, good, raw, 17);
  CHECK_ERR(data_read_npy(harness_write("t.npy", buf, n), NULL, &d), DRV_EPARSE,
            "t.npy: byte 144: file is 145 bytes, expected 144");
  /* Absurd shape: refused without overflow. */
  n = npy_file(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", raw, 8);
  CHECK_ERR(data_read_npy(harness_write("h.npy", buf, n), NULL, &d), DRV_ERANGE,
            "h.npy: byte");
  CHECK_STR_CONTAINS(err_msg(), "shape too large");
  n = npy_file(buf, 1, good, raw, 16);
  buf[6] = 9;
  CHECK_ERR(data_read_npy(harness_write("v.npy", buf, n), NULL, &d), DRV_EUNSUPPORTED,
            "v.npy: byte 6: unsupported .npy version 9.0");
  CHECK_ERR(data_read_npy(harness_write("g.npy", "PK\3\4 not npy", 13), NULL, &d), DRV_EPARSE,
            "g.npy: byte 0: not a .npy file");
  buf[6] = 1;
  buf[8] = 0xFF; /* header length past the end */
  CHECK_ERR(data_read_npy(harness_write("l.npy", buf, n), NULL, &d), DRV_EPARSE,
            "l.npy: byte 8: header of 255 bytes runs past the end of the file");

  /* Labels that do not fit x. */
  put(raw, 0, 8, 0);
  n = npy_file(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", raw, 24);
  CHECK_ERR(data_read_npy(xp, harness_write("y.npy", buf, n), &d), DRV_ESHAPE,
            "y.npy: 3 labels but");
  CHECK_STR_CONTAINS(err_msg(), "x.npy has 2 rows");
  n = npy_file(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 1), }", raw, 16);
  CHECK_ERR(data_read_npy(xp, harness_write("y.npy", buf, n), &d), DRV_ESHAPE,
            "y.npy: labels must be 1-D, shape is (2, 1)");
  n = npy_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", raw, 4);
  CHECK_ERR(data_read_npy(harness_write("sc.npy", buf, n), NULL, &d), DRV_ESHAPE,
            "sc.npy: x must have at least 1 dimension");
  n = npy_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", raw, 0);
  CHECK_ERR(data_read_npy(harness_write("z.npy", buf, n), NULL, &d), DRV_EPARSE,
            "z.npy: empty array of shape (0, 3)");
  CHECK(d == NULL);
  free(xp);
}
