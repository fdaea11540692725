/* test_wire_vectors.c - the committed wire vectors (tests/vectors) still
 * describe what the C side writes and reads: each sample frame is the
 * committed file byte for byte and decodes to the committed fields. A
 * message added since `make vectors` has no file yet and is checked by
 * tests/cli/test_pyclient_vectors.sh on fresh vectors. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"
#include "wire_vectors.h"

static uint8_t *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *b = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long len = ftell(f);
    b = len >= 0 ? malloc((size_t)len + 1) : NULL;
    rewind(f);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
      free(b);
      b = NULL;
    }
    *n = (size_t)len;
  }
  fclose(f);
  return b;
}

/* 1 when checked, 0 when the vector is not committed. */
static int check_vector(uint8_t type, unsigned v) {
  char path[512];
  snprintf(path, sizeof path, "tests/vectors/%s-%u.bin", wire_type_name(type), v);
  size_t nbin = 0, njson = 0;
  uint8_t *bin = read_all(harness_src(path), &nbin);
  if (!bin) return 0;
  snprintf(path, sizeof path, "tests/vectors/%s-%u.json", wire_type_name(type), v);
  char *want = (char *)read_all(harness_src(path), &njson);
  CHECK(want != NULL);
  want[njson] = '\0';
  wire_wr w;
  CHECK_OK(wire_sample(type, v, &w));
  if (w.len != nbin || memcmp(w.buf, bin, nbin) != 0)
    harness_fail(__FILE__, __LINE__,
                 "%s sample %u: the C side now writes other bytes than tests/vectors holds; a "
                 "changed layout breaks clients built before it (`make vectors` if deliberate)",
                 wire_type_name(type), v);
  int same = 0;
  char *got = wire_vectors_json(bin, nbin, &same);
  if (!got) harness_fail(__FILE__, __LINE__, "%s: %s", path, err_msg());
  CHECK(same);
  json_t *a = json_loads(got, 0, NULL), *b = json_loads(want, 0, NULL);
  if (!a || !b || !json_equal(a, b))
    harness_fail(__FILE__, __LINE__, "%s: decoded as %s", path, got);
  json_decref(a);
  json_decref(b);
  free(got);
  free(want);
  free(bin);
  wire_wr_free(&w);
  return 1;
}

TEST(wire_vectors_committed_match_the_c_side) {
  int checked = 0;
#define XX(num, NAME, name, pre_auth, max, from) \
  for (unsigned v = 0; v < WIRE_SAMPLE_VARIANTS; v++) checked += check_vector(num, v);
  WIRE_TYPE_MAP(XX)
#undef XX
  CHECK(checked >= 3 * 31); /* the messages of `make vectors`' first run */
}

TEST(wire_vectors_decode_refuses_what_is_not_a_frame) {
  int same = 1;
  CHECK(wire_vectors_json((const uint8_t *)"DRV1", 4, &same) == NULL && same == 0);
  wire_wr w;
  CHECK_OK(wire_sample(WIRE_PUSH, 0, &w));
  CHECK(wire_vectors_json(w.buf, w.len - 1, &same) == NULL); /* one byte short */
  CHECK(strstr(err_msg(), "the header says") != NULL);
  wire_wr_free(&w);
}
