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
 * instead, this file is a small program that writes the seed corpus: one
 * valid frame per message type, into the directory named by argv[1].
 * See tests/fuzz/README.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim.h"
#include "tensor.h"
#include "wire.h"

/* Defined in wire.c; not (yet) in wire.h. */


static const uint8_t all_types[] = {
#define XX(num, NAME, name, pre_auth, max) num,
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

/* A valid payload of `type`, per the layouts in wire.h. */
static void sample(wire_wr *w, uint8_t type, const tensor *t) {
  static const uint8_t nonce[64] = {1, 2, 3, 4, 5, 6, 7, 8};
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_ADAM);
  switch ((wire_type)type) {
  case WIRE_HELLO: wire_wr_raw(w, nonce, 32); wire_wr_u8(w, 0); break;
  case WIRE_AUTH: wire_wr_raw(w, nonce, 64); break;
  case WIRE_AUTH_OK: wire_wr_raw(w, nonce, 32); break;
  case WIRE_REGISTER:
    wire_wr_u8(w, ROLE_PS); wire_wr_u32(w, 0); wire_wr_u32(w, 100); wire_wr_str(w, "127.0.0.1");
    wire_wr_u16(w, 4100); wire_wr_str(w, "n01"); wire_wr_u32(w, 2); wire_wr_u32(w, 2);
    wire_wr_u64(w, 1u << 30); wire_wr_str(w, ""); wire_wr_str(w, "12"); wire_wr_str(w, "0");
    wire_wr_str(w, "n01");
    break;
  case WIRE_REGISTERED: wire_wr_u8(w, 1); wire_wr_str(w, ""); break;
  case WIRE_SPEC:
    wire_wr_u32(w, 1);
    wire_wr_u8(w, ROLE_PS); wire_wr_u32(w, 0); wire_wr_str(w, "127.0.0.1"); wire_wr_u16(w, 4100);
    break;
  case WIRE_HEARTBEAT: wire_wr_u64(w, 1); wire_wr_u64(w, 2); wire_wr_u64(w, 3); break;
  case WIRE_SHUTDOWN: wire_wr_u32(w, 5000); break;
  case WIRE_ERROR: wire_wr_i32(w, -1005); wire_wr_str(w, "bad frame"); break;
  case WIRE_VAR_INIT:
    wire_wr_u32(w, 0); wire_wr_u64(w, 0); wire_wr_u8(w, 1); wire_wr_u32(w, 2);
    wire_wr_u64(w, 50); wire_wr_optim(w, &c); wire_wr_tensor(w, t);
    break;
  case WIRE_VAR_INIT_OK:
  case WIRE_SETUP_OK: break;
  case WIRE_SETUP:
    wire_wr_str(w, "Sequential{Linear(3,2)}"); wire_wr_str(w, "MSE");
    wire_wr_u64(w, 32); wire_wr_u64(w, 7); wire_wr_u32(w, 1);
    wire_wr_str(w, "0.weight"); wire_wr_u8(w, 2); wire_wr_u64(w, 2); wire_wr_u64(w, 3);
    wire_wr_u32(w, 1); wire_wr_u32(w, 0); wire_wr_u64(w, 0); wire_wr_u64(w, 2);
    wire_wr_tensor(w, t); wire_wr_tensor(w, t);
    break;
  case WIRE_TASK: wire_wr_u64(w, 1); wire_wr_u8(w, WIRE_TASK_TRAIN_STEP); wire_wr_u64(w, 0); break;
  case WIRE_RESULT:
    wire_wr_u64(w, 1); wire_wr_i32(w, 0); wire_wr_f64(w, 0.5); wire_wr_i64(w, 30);
    wire_wr_u64(w, 32); wire_wr_str(w, "");
    break;
  case WIRE_EVAL: wire_wr_u64(w, 10); break;
  case WIRE_CALL: wire_wr_u64(w, 3); wire_wr_bytes(w, "\x1bLua", 4); break;
  case WIRE_CALL_RESULT: wire_wr_u64(w, 3); wire_wr_i32(w, -1); wire_wr_bytes(w, "boom", 4); break;
  case WIRE_PUSH_OK: wire_wr_u64(w, 10); wire_wr_u8(w, 1); break;
  case WIRE_EVAL_RESULT:
    wire_wr_u64(w, 10); wire_wr_i32(w, 0); wire_wr_f64(w, 0.2); wire_wr_f64(w, 0.9);
    wire_wr_u64(w, 100); wire_wr_str(w, "");
    break;
  case WIRE_PULL:
    wire_wr_u64(w, 3); wire_wr_u32(w, 2); wire_wr_u32(w, 0); wire_wr_u32(w, 1);
    break;
  case WIRE_PULL_REPLY:
  case WIRE_PUSH:
    wire_wr_u64(w, 3);
    wire_wr_u32(w, 2);
    wire_wr_u32(w, 0); wire_wr_tensor(w, t);
    wire_wr_u32(w, 1); wire_wr_tensor(w, t);
    break;
  case WIRE_ATTACH: wire_wr_u8(w, 0); wire_wr_f64(w, 10.0); break;
  case WIRE_SNAPSHOT:
    wire_wr_str(w, "/tmp/runs/cluster-1"); wire_wr_str(w, "local"); wire_wr_str(w, "idle");
    wire_wr_str(w, "sync");
    wire_wr_f64(w, 3.0); wire_wr_i64(w, 10); wire_wr_i64(w, 10); wire_wr_f64(w, 100.0);
    wire_wr_f64(w, 0.0); wire_wr_u32(w, 1);
    for (int i = 0; i < 7; i++) wire_wr_i64(w, 7 - i);
    wire_wr_u32(w, 2);
    for (int k = 0; k < 2; k++) {
      wire_wr_u8(w, k ? ROLE_WORKER : ROLE_PS); wire_wr_u32(w, 0); wire_wr_u32(w, 100 + k);
      wire_wr_u32(w, k); wire_wr_u32(w, 0); wire_wr_i64(w, 5 * k); wire_wr_i64(w, -1);
      wire_wr_u64(w, 1u << 20); wire_wr_f64(w, 10.0); wire_wr_f64(w, -1); wire_wr_f64(w, 0.1);
      wire_wr_str(w, "ready"); wire_wr_str(w, "127.0.0.1"); wire_wr_str(w, "logs/ps-0.log");
      wire_wr_str(w, "127.0.0.1  2 threads, 2 cpus, 1.0G");
    }
    wire_wr_u32(w, 2);
    wire_wr_str(w, "examples/s"); wire_wr_u8(w, 0); wire_wr_u32(w, 1);
    wire_wr_f64(w, 10); wire_wr_f64(w, 2.0); wire_wr_f64(w, 100.0);
    wire_wr_str(w, "eval/accuracy"); wire_wr_u8(w, 1); wire_wr_u32(w, 0);
    wire_wr_u32(w, 2);
    wire_wr_f64(w, 0.1); wire_wr_str(w, "cluster ready: 2 nodes");
    wire_wr_f64(w, 2.9); wire_wr_str(w, "fit done: 10 steps");
    break;
  case WIRE_COMMAND: wire_wr_u8(w, WIRE_COMMAND_STOP_NODE); wire_wr_str(w, "worker:0"); break;
  case WIRE_COMMAND_REPLY: wire_wr_i32(w, -1013); wire_wr_str(w, "refused: read-only"); break;
  }
}

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
  int64_t shape[2] = {2, 3};
  tensor *t = tensor_new(2, shape);
  if (!t) return 1;
  for (int i = 0; i < 6; i++) tensor_data(t)[i] = (float)i - 2.5f;
  for (size_t i = 0; i < NTYPES; i++) {
    wire_wr w;
    wire_wr_init(&w);
    sample(&w, all_types[i], t);
    if (wire_wr_finish(&w, all_types[i], 1) < 0) return 1;
    size_t n = w.len - WIRE_HEADER_SIZE;
    if (wire_validate_payload(all_types[i], w.buf + WIRE_HEADER_SIZE, n) < 0) {
      fprintf(stderr, "seeds_wire: %s seed does not validate\n", wire_type_name(all_types[i]));
      return 1;
    }
    char path[4096];
    /* The frame, and the "selector byte + payload" form of the same. */
    snprintf(path, sizeof path, "%s/frame-%s", argv[1], wire_type_name(all_types[i]));
    if (write_file(path, w.buf, w.len) < 0) return 1;
    w.buf[WIRE_HEADER_SIZE - 1] = (uint8_t)i; /* the selector, just before the payload */
    snprintf(path, sizeof path, "%s/typed-%s", argv[1], wire_type_name(all_types[i]));
    if (write_file(path, w.buf + WIRE_HEADER_SIZE - 1, w.len - WIRE_HEADER_SIZE + 1) < 0) return 1;
    wire_wr_free(&w);
  }
  tensor_free(t);
  return 0;
}

#endif
