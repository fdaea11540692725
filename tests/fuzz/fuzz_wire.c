/* fuzz_wire.c - libFuzzer target for the wire decoder.
 *
 * Each input is tried three ways:
 *   1. as a frame: wire_header_decode (before and after authentication),
 *      then, for a valid header, wire_validate_payload over the payload
 *      bytes that follow (all of them, or the prefix that arrived);
 *   2. as "type selector byte + payload", so that the per-type payload
 *      walkers are reached without first guessing a valid header;
 *   3. for tensor messages that validate, decoded with wire_rd_tensor and
 *      re-encoded with wire_wr_tensor: the bytes must come back identical.
 * Payloads are copied to heap buffers of their exact size, so ASan catches
 * a read one byte past the end even in the middle of the input.
 *
 * Run it with `make fuzz` (clang, -fsanitize=fuzzer,address,undefined;
 * FUZZ_TIME=seconds, 60 by default). Compiled with -DFUZZ_WIRE_SEEDS
 * instead, this file is a small program that writes the seed corpus: the
 * sample frames of every message type (wire_sample, generated from the
 * field lists of wire_msgs.h), into the directory named by argv[1].
 * See tests/fuzz/README.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/optim.h"
#include "numeric/tensor.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"

static const uint8_t all_types[] = {
#define XX(num, NAME, name, pre_auth, max, from) num,
    WIRE_TYPE_MAP(XX)
#undef XX
};
#define NTYPES (sizeof all_types)

#ifndef FUZZ_WIRE_SEEDS

static uint8_t *exact_copy(const uint8_t *p, size_t n) {
  uint8_t *b = malloc(n ? n : 1);
  if (!b) abort();
  if (n) memcpy(b, p, n);
  return b;
}

/* Decodes the version, (count, var, tensor)* layout of PUSH and
 * PULL_REPLY and writes it back. */
static void tensor_round_trip(uint8_t type, const uint8_t *p, size_t n) {
  wire_rd r;
  wire_rd_init(&r, p, n);
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_u64(&w, wire_rd_u64(&r));
  uint32_t count = wire_rd_u32(&r);
  wire_wr_u32(&w, count);
  for (uint32_t i = 0; i < count && wire_rd_ok(&r); i++) {
    wire_wr_u32(&w, wire_rd_u32(&r));
    tensor *t = wire_rd_tensor(&r);
    if (!t) break;
    wire_wr_tensor(&w, t);
    tensor_free(t);
  }
  /* The payload validated, so reading it again must succeed too. */
  if (wire_rd_done(&r, type) < 0) __builtin_trap();
  if (wire_wr_finish(&w, type, 0) < 0) return; /* out of memory only */
  if (w.len - WIRE_HEADER_SIZE != n || memcmp(w.buf + WIRE_HEADER_SIZE, p, n) != 0)
    __builtin_trap();
  wire_wr_free(&w);
}

static void try_payload(uint8_t type, const uint8_t *data, size_t n) {
  uint8_t *p = exact_copy(data, n);
  int rc = wire_validate_payload(type, p, n);
  if (rc == 0 && (type == WIRE_PUSH || type == WIRE_PULL_REPLY)) tensor_round_trip(type, p, n);
  free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size >= WIRE_HEADER_SIZE) {
    for (int authed = 0; authed < 2; authed++) {
      wire_header h;
      if (wire_header_decode(data, WIRE_DEFAULT_MAX_FRAME, authed, &h) < 0) continue;
      size_t avail = size - WIRE_HEADER_SIZE;
      try_payload(h.type, data + WIRE_HEADER_SIZE, avail < h.len ? avail : h.len);
    }
  }
  if (size >= 1) try_payload(all_types[data[0] % NTYPES], data + 1, size - 1);
  return 0;
}

#else /* FUZZ_WIRE_SEEDS: write the seed corpus */

static int write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "seeds_wire: cannot write %s\n", path);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: seeds_wire DIR\n");
    return 2;
  }
  for (size_t i = 0; i < NTYPES; i++) {
    for (unsigned v = 0; v < WIRE_SAMPLE_VARIANTS; v++) {
      wire_wr w;
      if (wire_sample(all_types[i], v, &w) < 0) return 1;
      size_t n = w.len - WIRE_HEADER_SIZE;
      const char *name = wire_type_name(all_types[i]);
      if (wire_validate_payload(all_types[i], w.buf + WIRE_HEADER_SIZE, n) < 0) {
        fprintf(stderr, "seeds_wire: %s sample %u does not validate\n", name, v);
        return 1;
      }
      char path[4096];
      /* The frame, and the "selector byte + payload" form of the same. */
      snprintf(path, sizeof path, "%s/frame-%s-%u", argv[1], name, v);
      if (write_file(path, w.buf, w.len) < 0) return 1;
      w.buf[WIRE_HEADER_SIZE - 1] = (uint8_t)i; /* the selector, just before the payload */
      snprintf(path, sizeof path, "%s/typed-%s-%u", argv[1], name, v);
      if (write_file(path, w.buf + WIRE_HEADER_SIZE - 1, n + 1) < 0) return 1;
      wire_wr_free(&w);
    }
  }
  return 0;
}

#endif
