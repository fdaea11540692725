/* wire_check.c - the structural validator of every message layout in
 * wire.h (wire_validate_payload).
 *
 * wire_validate_payload() walks a payload exactly as its receiver will,
 * with no allocation and no copy of tensor data, and checks what a
 * receiver would otherwise index with (roles) or branch on (flags). It is
 * the executable form of the layouts in wire.h: conn.c runs it on every
 * authenticated frame, and the fuzz target and the unit tests run it.
 */
#include <inttypes.h>
#include <math.h>

#include "err.h"
#include "wire_int.h"

/* A u32 count of items each at least min_item bytes long; refusing counts
 * that cannot fit keeps a hostile count from spinning a loop. */
static uint32_t rd_count(wire_rd *r, size_t min_item, const char *what) {
  uint32_t n = wire_rd_u32(r);
  if (!r->err && n > wire_rd_left(r) / min_item)
    wire__rd_fail(r, "%s count %" PRIu32 " cannot fit in the %zu bytes left", what, n,
                  wire_rd_left(r));
  return r->err ? 0 : n;
}

static void rd_role(wire_rd *r) {
  unsigned role = wire_rd_u8(r);
  if (!r->err && role >= ROLE_COUNT) wire__rd_fail(r, "unknown role %u", role);
}

static void rd_flag(wire_rd *r, const char *what) {
  unsigned v = wire_rd_u8(r);
  if (!r->err && v > 1) wire__rd_fail(r, "%s is %u (expected 0 or 1)", what, v);
}

static void rd_skip_str(wire_rd *r) {
  char s[WIRE_MAX_STR + 1];
  wire_rd_str(r, s, sizeof s);
}

static void rd_skip_tensor(wire_rd *r) {
  int nd;
  int64_t shape[TENSOR_MAXDIM];
  const uint8_t *data;
  wire_rd_tensor_view(r, &nd, shape, &data);
}

/* SETUP's variable table: name, shape header without data, shards. */
static void rd_setup_vars(wire_rd *r) {
  uint32_t nvars = rd_count(r, 4 + 1 + 8 + 4, "SETUP variable");
  for (uint32_t v = 0; v < nvars && !r->err; v++) {
    rd_skip_str(r);
    size_t at = r->off;
    unsigned nd = wire_rd_u8(r);
    int64_t dims[TENSOR_MAXDIM];
    if (!r->err && (nd < 1 || nd > TENSOR_MAXDIM))
      wire__rd_fail(r, "variable %" PRIu32 " has %u dimensions (expected 1 to %d)", v, nd,
              TENSOR_MAXDIM);
    if (!r->err) wire__rd_shape(r, "variable shape", at, nd, dims);
    uint32_t nshards = rd_count(r, 4 + 8 + 8, "SETUP shard");
    for (uint32_t s = 0; s < nshards && !r->err; s++) {
      wire_rd_u32(r);
      wire_rd_u64(r);
      wire_rd_u64(r);
    }
  }
}

static void rd_var_tensors(wire_rd *r, const char *what) {
  uint32_t n = rd_count(r, 4 + TENSOR_MIN, what);
  for (uint32_t i = 0; i < n && !r->err; i++) {
    wire_rd_u32(r);
    rd_skip_tensor(r);
  }
}

/* SNAPSHOT: header, queue, nodes, series (points), events. */
static void rd_snapshot(wire_rd *r) {
  for (int i = 0; i < 4; i++) rd_skip_str(r); /* run_dir, launcher, state, mode */
  wire__rd_take(r, 5 * 8 + 4 + 7 * 8, "snapshot header and queue");
  uint32_t n = rd_count(r, 1 + 4 * 4 + 6 * 8 + 4 * 4, "SNAPSHOT node");
  for (uint32_t i = 0; i < n && !r->err; i++) {
    rd_role(r);
    wire__rd_take(r, 4 * 4 + 6 * 8, "node");
    for (int k = 0; k < 4; k++) rd_skip_str(r); /* state, host, log, got */
  }
  n = rd_count(r, 4 + 1 + 4, "SNAPSHOT series");
  for (uint32_t i = 0; i < n && !r->err; i++) {
    rd_skip_str(r);
    rd_flag(r, "SNAPSHOT series reset");
    uint32_t pts = rd_count(r, 3 * 8, "SNAPSHOT point");
    wire__rd_take(r, (size_t)pts * 3 * 8, "points");
  }
  n = rd_count(r, 8 + 4, "SNAPSHOT event");
  for (uint32_t i = 0; i < n && !r->err; i++) {
    wire_rd_f64(r);
    rd_skip_str(r);
  }
}

static void rd_layout(wire_rd *r, uint8_t type) {
  switch ((wire_type)type) {
  case WIRE_HELLO:
    wire__rd_take(r, WIRE_NONCE_SIZE, "nonce");
    rd_flag(r, "server kind");
    break;
  case WIRE_AUTH: wire__rd_take(r, WIRE_NONCE_SIZE + WIRE_MAC_SIZE, "nonce and MAC"); break;
  case WIRE_AUTH_OK: wire__rd_take(r, WIRE_MAC_SIZE, "MAC"); break;
  case WIRE_REGISTER:
    rd_role(r);
    wire_rd_u32(r); /* index */
    wire_rd_u32(r); /* pid */
    rd_skip_str(r); /* host */
    wire_rd_u16(r); /* port */
    rd_skip_str(r); /* hostname */
    wire_rd_u32(r); /* threads */
    wire_rd_u32(r); /* cpus */
    wire_rd_u64(r); /* memory */
    for (int i = 0; i < 4; i++) rd_skip_str(r); /* gpus, slurm job, step, node */
    break;
  case WIRE_REGISTERED:
    rd_flag(r, "REGISTERED ok");
    rd_skip_str(r);
    break;
  case WIRE_SPEC: {
    uint32_t n = rd_count(r, 1 + 4 + 4 + 2, "SPEC node");
    for (uint32_t i = 0; i < n && !r->err; i++) {
      rd_role(r);
      wire_rd_u32(r);
      rd_skip_str(r);
      wire_rd_u16(r);
    }
    break;
  }
  case WIRE_HEARTBEAT: wire__rd_take(r, 24, "heartbeat"); break;
  case WIRE_SHUTDOWN: wire_rd_u32(r); break;
  case WIRE_ERROR:
    wire_rd_i32(r);
    rd_skip_str(r);
    break;
  case WIRE_VAR_INIT: {
    optim_cfg c;
    wire_rd_u32(r);
    wire_rd_u64(r);
    rd_flag(r, "VAR_INIT mode");
    wire_rd_u32(r); /* replicas */
    wire_rd_u64(r); /* target */
    wire_rd_optim(r, &c);
    rd_skip_tensor(r);
    break;
  }
  case WIRE_VAR_INIT_OK:
  case WIRE_SETUP_OK: break;
  case WIRE_SETUP:
    rd_skip_str(r); /* model spec */
    rd_skip_str(r); /* loss */
    wire_rd_u64(r); /* batch */
    wire_rd_u64(r); /* seed */
    rd_setup_vars(r);
    rd_skip_tensor(r); /* x */
    rd_skip_tensor(r); /* y */
    break;
  case WIRE_TASK: wire__rd_take(r, 17, "task"); break;
  case WIRE_RESULT:
  case WIRE_EVAL_RESULT:
    wire__rd_take(r, 36, type == WIRE_RESULT ? "result" : "eval result");
    rd_skip_str(r);
    break;
  case WIRE_EVAL: wire_rd_u64(r); break;
  case WIRE_CALL: {
    const uint8_t *b;
    wire_rd_u64(r);
    wire_rd_bytes(r, &b);
    break;
  }
  case WIRE_CALL_RESULT: {
    const uint8_t *b;
    wire_rd_u64(r);
    wire_rd_i32(r);
    wire_rd_bytes(r, &b);
    break;
  }
  case WIRE_PUSH_OK:
    wire_rd_u64(r);
    rd_flag(r, "PUSH_OK applied");
    break;
  case WIRE_PULL: {
    wire_rd_u64(r); /* min_version */
    uint32_t n = rd_count(r, 4, "PULL variable");
    wire__rd_take(r, (size_t)n * 4, "variable numbers");
    break;
  }
  case WIRE_PULL_REPLY:
    wire_rd_u64(r); /* version */
    rd_var_tensors(r, "PULL_REPLY variable");
    break;
  case WIRE_PUSH:
    wire_rd_u64(r); /* version */
    rd_var_tensors(r, "PUSH variable");
    break;
  case WIRE_ATTACH: {
    rd_flag(r, "ATTACH control");
    double hz = wire_rd_f64(r);
    if (!r->err && !(isfinite(hz) && hz > 0)) wire__rd_fail(r, "ATTACH hz is %g", hz);
    break;
  }
  case WIRE_SNAPSHOT: rd_snapshot(r); break;
  case WIRE_COMMAND: {
    unsigned kind = wire_rd_u8(r);
    if (!r->err && kind > WIRE_COMMAND_LOG_TAIL) wire__rd_fail(r, "unknown COMMAND kind %u", kind);
    rd_skip_str(r);
    break;
  }
  case WIRE_COMMAND_REPLY:
    wire_rd_i32(r);
    rd_skip_str(r);
    break;
  }
}

int wire_validate_payload(uint8_t type, const uint8_t *p, size_t n) {
  const wire_msg_info *m = wire_msg(type);
  if (!m) return drv_error(DRV_EPARSE, "unknown frame type 0x%02x", type);
  if (n < m->min_len || n > m->max_len)
    return drv_error(DRV_EPARSE, "%s payload of %zu bytes, expected %" PRIu32 " to %" PRIu32,
                     m->name, n, m->min_len, m->max_len);
  wire_rd r;
  wire_rd_init(&r, p, n);
  rd_layout(&r, type);
  return wire_rd_done(&r, type);
}

