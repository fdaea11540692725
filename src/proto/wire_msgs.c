/* wire_msgs.c - everything generated from the field lists of wire_msgs.h:
 * the message table with each payload's size limits, per message an
 * encoder and a decoder, the validator conn.c runs on every frame, and
 * sample frames for the tests and the fuzz corpus.
 *
 * Each part is one X-macro per field kind, applied to every field list;
 * nothing here names a message except the table's row macro. A new field
 * kind needs one line in each part (and in the struct part of the header).
 */
#include "proto/wire_msgs.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/le.h"
#include "proto/wire_int.h"

/* ======================================================================
 * Sizes: the smallest and largest bytes each field kind can take
 * ==================================================================== */

#define OPTIM_SIZE (1 + 10 * 8 + 1) /* kind u8, ten f64, nesterov u8 */
#define UNBOUNDED ((uint64_t)1 << 32) /* only the receiver's max_frame bounds it */

#define MIN_(kind, ...) +MIN_##kind(__VA_ARGS__)
#define MIN_U8(f) 1
#define MIN_U16(f) 2
#define MIN_U32(f) 4
#define MIN_U64(f) 8
#define MIN_I32(f) 4
#define MIN_I64(f) 8
#define MIN_F64(f) 8
#define MIN_FLAG(f, what) 1
#define MIN_ROLE(f) 1
#define MIN_ENUM(f, max, what) 1
#define MIN_POS(f, what) 8
#define MIN_RAW(f, size) (size)
#define MIN_STR(f) 4
#define MIN_BYTES(f) 4
#define MIN_SHAPE(f) (1 + 8)
#define MIN_TENSOR(f) TENSOR_MIN
#define MIN_OPTIM(f) OPTIM_SIZE
#define MIN_ITEMS(f, item, what) 4
#define MIN_EMPTY(f) 0

#define MAX_(kind, ...) +MAX_##kind(__VA_ARGS__)
#define MAX_U8(f) 1
#define MAX_U16(f) 2
#define MAX_U32(f) 4
#define MAX_U64(f) 8
#define MAX_I32(f) 4
#define MAX_I64(f) 8
#define MAX_F64(f) 8
#define MAX_FLAG(f, what) 1
#define MAX_ROLE(f) 1
#define MAX_ENUM(f, max, what) 1
#define MAX_POS(f, what) 8
#define MAX_RAW(f, size) (size)
#define MAX_STR(f) (4 + WIRE_MAX_STR)
#define MAX_BYTES(f) UNBOUNDED
#define MAX_SHAPE(f) (1 + 8 * TENSOR_MAXDIM)
#define MAX_TENSOR(f) UNBOUNDED
#define MAX_OPTIM(f) OPTIM_SIZE
#define MAX_ITEMS(f, item, what) UNBOUNDED
#define MAX_EMPTY(f) 0

/* The smallest item of each list, to bound a count by the bytes left. */
enum {
#define XX(name) ITEM_MIN_##name = 0 WIRE_ITEM_##name(MIN_),
  WIRE_ITEM_MAP(XX)
#undef XX
};

#define CLAMP32(x) ((x) > UINT32_MAX ? UINT32_MAX : (uint32_t)(x))

/* Indexed by type number, so that a lookup is one load; unknown types are
 * the rows left zero (name NULL). min_len: every string empty, every
 * list empty, every tensor [0]; max_len: the row's, else the layout's. */
static const wire_msg_info msg_table[256] = {
#define XX(num, NAME, name, pre_auth, max, from)                                    \
  [num] = {num, #NAME, 0 WIRE_MSG_##name(MIN_),                                    \
           (uint64_t)(max) > 0 ? (uint32_t)(max) : CLAMP32((uint64_t)0 WIRE_MSG_##name(MAX_)), \
           pre_auth, from},
    WIRE_TYPE_MAP(XX)
#undef XX
};

const wire_msg_info *wire_msg(uint8_t type) {
  return msg_table[type].name ? &msg_table[type] : NULL;
}

const char *wire_type_name(uint8_t type) {
  static _Thread_local char buf[16];
  if (msg_table[type].name) return msg_table[type].name;
  snprintf(buf, sizeof buf, "type 0x%02x", type);
  return buf;
}

_Static_assert(WIRE_PEER_COUNT <= 32, "a `from` column is a uint32_t of WIRE_FROM() bits");

const char *wire_peer_what(wire_peer p) {
  static const char *const what[WIRE_PEER_COUNT] = {
#define XX(NAME, what) what,
      WIRE_PEER_MAP(XX)
#undef XX
  };
  return (unsigned)p < WIRE_PEER_COUNT ? what[p] : "?";
}

const char *wire_peer_allow(wire_peer p, bool allow[256], uint32_t max_len[256]) {
  for (int t = 0; t < 256; t++)
    if ((unsigned)p < WIRE_PEER_COUNT && (msg_table[t].from & (1u << p)))
      allow[t] = true, max_len[t] = msg_table[t].max_len;
  return wire_peer_what(p);
}

/* ======================================================================
 * Encoders
 * ==================================================================== */

static void put_shape(wire_wr *w, const wire_tensor *t) {
  wire_wr_u8(w, (uint8_t)t->ndim);
  for (int i = 0; i < t->ndim && i < TENSOR_MAXDIM; i++) wire_wr_u64(w, (uint64_t)t->shape[i]);
}

int64_t wire_tensor_numel(const wire_tensor *v) {
  int64_t n = 1;
  for (int i = 0; i < v->ndim && i < TENSOR_MAXDIM; i++) n *= v->shape[i];
  return n;
}

static void put_tensor(wire_wr *w, const wire_tensor *t) {
  if (t->t) {
    wire_wr_tensor(w, t->t);
    return;
  }
  put_shape(w, t);
  if (t->data) wire_wr_raw(w, t->data, (size_t)wire_tensor_numel(t) * 4);
}

static void put_items(wire_wr *w, const wire_items *it) {
  wire_wr_u32(w, it->n);
  if (!it->put) {
    wire_wr_raw(w, it->p, it->len);
    return;
  }
  for (uint32_t i = 0; i < it->n; i++) it->put(w, it->ud, i);
}

#define PUT_(kind, ...) PUT_##kind(__VA_ARGS__)
#define PUT_U8(f) wire_wr_u8(w, m->f);
#define PUT_U16(f) wire_wr_u16(w, m->f);
#define PUT_U32(f) wire_wr_u32(w, m->f);
#define PUT_U64(f) wire_wr_u64(w, m->f);
#define PUT_I32(f) wire_wr_i32(w, m->f);
#define PUT_I64(f) wire_wr_i64(w, m->f);
#define PUT_F64(f) wire_wr_f64(w, m->f);
#define PUT_FLAG(f, what) wire_wr_u8(w, m->f ? 1 : 0);
#define PUT_ROLE(f) wire_wr_u8(w, m->f);
#define PUT_ENUM(f, max, what) wire_wr_u8(w, m->f);
#define PUT_POS(f, what) wire_wr_f64(w, m->f);
#define PUT_RAW(f, size) wire_wr_raw(w, m->f, size);
#define PUT_STR(f) wire_wr_strv(w, m->f);
#define PUT_BYTES(f) wire_wr_bytes(w, m->f.p, m->f.len);
#define PUT_SHAPE(f) put_shape(w, &m->f);
#define PUT_TENSOR(f) put_tensor(w, &m->f);
#define PUT_OPTIM(f) wire_wr_optim(w, &m->f);
#define PUT_ITEMS(f, item, what) put_items(w, &m->f);
#define PUT_EMPTY(f) (void)w, (void)m;

#define XX(num, NAME, name, pre_auth, max, from) \
  void wire_put_##name(wire_wr *w, const wire_msg_##name *m) { WIRE_MSG_##name(PUT_) }
WIRE_TYPE_MAP(XX)
#undef XX

#define XX(name) \
  void wire_put_item_##name(wire_wr *w, const wire_item_##name *m) { WIRE_ITEM_##name(PUT_) }
WIRE_ITEM_MAP(XX)
#undef XX

/* ======================================================================
 * Decoders
 * ==================================================================== */

/* A u32 count of items each at least min_item bytes long; refusing counts
 * that cannot fit keeps a hostile count from spinning a loop. */
static uint32_t rd_count(wire_rd *r, size_t min_item, const char *what) {
  uint32_t n = wire_rd_u32(r);
  if (!r->err && n > wire_rd_left(r) / (min_item ? min_item : 1))
    wire__rd_fail(r, "%s count %" PRIu32 " cannot fit in the %zu bytes left", what, n,
                  wire_rd_left(r));
  return r->err ? 0 : n;
}

static uint8_t rd_role(wire_rd *r) {
  unsigned role = wire_rd_u8(r);
  if (!r->err && role >= ROLE_COUNT) wire__rd_fail(r, "unknown role %u", role);
  return (uint8_t)role;
}

static bool rd_flag(wire_rd *r, const char *what) {
  unsigned v = wire_rd_u8(r);
  if (!r->err && v > 1) wire__rd_fail(r, "%s is %u (expected 0 or 1)", what, v);
  return v == 1;
}

static uint8_t rd_enum(wire_rd *r, unsigned max, const char *what) {
  unsigned v = wire_rd_u8(r);
  if (!r->err && v > max) wire__rd_fail(r, "unknown %s %u", what, v);
  return (uint8_t)v;
}

static double rd_pos(wire_rd *r, const char *what) {
  double v = wire_rd_f64(r);
  if (!r->err && !(isfinite(v) && v > 0)) wire__rd_fail(r, "%s is %g", what, v);
  return v;
}

/* A shape without data: ndim 1..4, then dims checked like a tensor's. */
static void rd_shape(wire_rd *r, wire_tensor *t) {
  memset(t, 0, sizeof *t);
  size_t at = r->off;
  unsigned nd = wire_rd_u8(r);
  if (!r->err && (nd < 1 || nd > TENSOR_MAXDIM))
    wire__rd_fail(r, "shape at offset %zu has %u dimensions (expected 1 to %d)", at, nd,
                  TENSOR_MAXDIM);
  if (r->err) return;
  if (wire__rd_shape(r, "shape", at, nd, t->shape) >= 0) t->ndim = (int)nd;
}

static void rd_tensor(wire_rd *r, wire_tensor *t) {
  const uint8_t *data;
  memset(t, 0, sizeof *t);
  wire_rd_tensor_view(r, &t->ndim, t->shape, &data);
  t->data = data;
}

/* Walks a list's items with `each` (which decodes one and drops it), so a
 * decoded list is known valid before anyone iterates over it. */
static void rd_items(wire_rd *r, wire_items *it, size_t min_item, const char *what,
                     void (*each)(wire_rd *r)) {
  memset(it, 0, sizeof *it);
  uint32_t n = rd_count(r, min_item, what);
  size_t start = r->off;
  for (uint32_t i = 0; i < n && !r->err; i++) each(r);
  if (r->err) return;
  *it = (wire_items){.n = n, .p = r->p + start, .len = r->off - start};
}

wire_rd wire_items_reader(const wire_items *it) {
  wire_rd r;
  wire_rd_init(&r, it->p, it->len);
  return r;
}

/* One var_tensor item at r's offset: copied field by field from src into
 * r's payload (dst) ahead of the reader, which checks each from there. */
static int copy_item_meta(wire_rd *r, uint8_t *dst, const uint8_t *src) {
  size_t at = r->off, left = r->len - at;
  if (left < 5) return DRV_EPARSE;
  memcpy(dst + at, src + at, 5); /* var, ndim */
  unsigned nd = dst[at + 4];
  if (nd < 1 || nd > TENSOR_MAXDIM || left - 5 < 8 * (size_t)nd) return DRV_EPARSE;
  memcpy(dst + at + 5, src + at + 5, 8 * (size_t)nd);
  int ndim;
  int64_t shape[TENSOR_MAXDIM];
  const uint8_t *data;
  wire_rd_u32(r);
  return wire_rd_tensor_view(r, &ndim, shape, &data);
}

int wire_copy_tensor_meta(uint8_t type, uint8_t *dst, const uint8_t *src, size_t len) {
  if (type != WIRE_PUSH && type != WIRE_PULL_REPLY)
    return err_set(DRV_EINVAL, "%s is not read in place", wire_type_name(type));
  if (len < 12) return err_set(DRV_EPARSE, "%s of %zu bytes", wire_type_name(type), len);
  memcpy(dst, src, 12); /* version, count */
  wire_rd r;
  wire_rd_init(&r, dst, len);
  wire_rd_u64(&r);
  uint32_t n = wire_rd_u32(&r);
  for (uint32_t i = 0; i < n; i++)
    if (copy_item_meta(&r, dst, src) < 0 || r.err)
      return err_set(DRV_EPARSE, "%s: item %u does not parse", wire_type_name(type), i);
  if (r.off != len) return err_set(DRV_EPARSE, "%s: %zu bytes after its items",
                                   wire_type_name(type), len - r.off);
  return 0;
}

void wire_tensor_to(const wire_tensor *v, float *dst) {
  wire__f32_from_wire(dst, v->data, (size_t)wire_tensor_numel(v));
}

#define GET_(kind, ...) GET_##kind(__VA_ARGS__)
#define GET_U8(f) m->f = wire_rd_u8(r);
#define GET_U16(f) m->f = wire_rd_u16(r);
#define GET_U32(f) m->f = wire_rd_u32(r);
#define GET_U64(f) m->f = wire_rd_u64(r);
#define GET_I32(f) m->f = wire_rd_i32(r);
#define GET_I64(f) m->f = wire_rd_i64(r);
#define GET_F64(f) m->f = wire_rd_f64(r);
#define GET_FLAG(f, what) m->f = rd_flag(r, what);
#define GET_ROLE(f) m->f = rd_role(r);
#define GET_ENUM(f, max, what) m->f = rd_enum(r, max, what);
#define GET_POS(f, what) m->f = rd_pos(r, what);
#define GET_RAW(f, size) m->f = wire__rd_take(r, size, #f);
#define GET_STR(f) wire_rd_str_view(r, &m->f);
#define GET_BYTES(f) m->f.len = wire_rd_bytes(r, &m->f.p);
#define GET_SHAPE(f) rd_shape(r, &m->f);
#define GET_TENSOR(f) rd_tensor(r, &m->f);
#define GET_OPTIM(f) wire_rd_optim(r, &m->f);
#define GET_ITEMS(f, item, what) rd_items(r, &m->f, ITEM_MIN_##item, what, skip_##item);
#define GET_EMPTY(f) m->f = 0;

#define XX(name)                                                 \
  static void skip_##name(wire_rd *r) {                          \
    wire_item_##name it;                                         \
    wire_get_item_##name(r, &it);                                \
  }                                                              \
  void wire_get_item_##name(wire_rd *r, wire_item_##name *m) {   \
    memset(m, 0, sizeof *m);                                     \
    WIRE_ITEM_##name(GET_)                                       \
  }
WIRE_ITEM_MAP(XX)
#undef XX

#define XX(num, NAME, name, pre_auth, max, from)                         \
  int wire_get_##name(const uint8_t *p, size_t n, wire_msg_##name *m) {  \
    wire_rd rd, *r = &rd;                                                \
    wire_rd_init(r, p, n);                                               \
    memset(m, 0, sizeof *m);                                             \
    WIRE_MSG_##name(GET_)                                                \
    return wire_rd_done(r, WIRE_##NAME);                                 \
  }
WIRE_TYPE_MAP(XX)
#undef XX

int32_t wire_rd_error(const uint8_t *payload, size_t len, char *msg, size_t n) {
  wire_msg_error m;
  if (wire_get_error(payload, len, &m) < 0 || wire_str_copy(m.message, msg, n) < 0) {
    snprintf(msg, n, "(malformed ERROR)");
    return DRV_EPARSE;
  }
  return m.code;
}

/* ======================================================================
 * The validator: each decoder, its result dropped
 * ==================================================================== */

int wire_validate_payload(uint8_t type, const uint8_t *p, size_t n) {
  const wire_msg_info *m = wire_msg(type);
  if (!m) return err_set(DRV_EPARSE, "unknown frame type 0x%02x", type);
  if (n < m->min_len || n > m->max_len)
    return err_set(DRV_EPARSE, "%s payload of %zu bytes, expected %" PRIu32 " to %" PRIu32,
                   m->name, n, m->min_len, m->max_len);
  switch (type) {
#define XX(num, NAME, name, pre_auth, max, from) \
  case num: {                                    \
    wire_msg_##name msg;                         \
    return wire_get_##name(p, n, &msg);          \
  }
    WIRE_TYPE_MAP(XX)
#undef XX
  }
  return 0; /* not reached: wire_msg() knows every type */
}

/* ======================================================================
 * Samples: every field filled from the variant number
 * ==================================================================== */

static const uint8_t sample_raw[64] = {1,  8,  15, 22, 29, 36, 43, 50, 57, 64, 71,
                                       78, 85, 92, 99, 106, 113, 120, 127, 134, 141};
static const float sample_floats[6] = {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f};
static const char *sample_str(const char *name, unsigned v) {
  static const char *const longer = "a string of forty-odd bytes: 127.0.0.1:4100";
  return v % 3 == 0 ? name : v % 3 == 1 ? "" : longer;
}

static void sample_tensor(wire_tensor *t, unsigned v) {
  memset(t, 0, sizeof *t);
  if (v % 3 == 2) { /* a tensor with no elements */
    t->ndim = 1;
    return;
  }
  t->ndim = 2;
  t->shape[0] = 2;
  t->shape[1] = 3;
  t->data = sample_floats; /* read as little-endian: any bytes are floats */
}

#define SAMPLE_(kind, ...) SAMPLE_##kind(__VA_ARGS__)
#define SAMPLE_U8(f) m->f = (uint8_t)(v + 1);
#define SAMPLE_U16(f) m->f = (uint16_t)(4100 + v);
#define SAMPLE_U32(f) m->f = 1000 * v + 2;
#define SAMPLE_U64(f) m->f = ((uint64_t)1 << 20) + v;
#define SAMPLE_I32(f) m->f = -(int32_t)v;
#define SAMPLE_I64(f) m->f = (int64_t)v - 1;
#define SAMPLE_F64(f) m->f = 0.25 * (v + 1);
#define SAMPLE_FLAG(f, what) m->f = v & 1;
#define SAMPLE_ROLE(f) m->f = (uint8_t)(v % ROLE_COUNT);
#define SAMPLE_ENUM(f, max, what) m->f = (uint8_t)(v % ((max) + 1));
#define SAMPLE_POS(f, what) m->f = 4.0 + v;
#define SAMPLE_RAW(f, size) m->f = sample_raw + v % 8;
#define SAMPLE_STR(f) m->f = WIRE_STR(sample_str(#f, v));
#define SAMPLE_BYTES(f) m->f = (wire_bytes){(const uint8_t *)"\x1bLua", v % 3 == 1 ? 0 : 4};
#define SAMPLE_SHAPE(f) sample_tensor(&m->f, 0);
#define SAMPLE_TENSOR(f) sample_tensor(&m->f, v);
#define SAMPLE_OPTIM(f) optim_cfg_default(&m->f, (optim_kind)(OPTIM_ADAM - v % 2));
#define SAMPLE_ITEMS(f, item, what) \
  m->f = (wire_items){.n = 2 - v % 3, .put = sample_put_##item, .ud = (void *)(uintptr_t)v};
#define SAMPLE_EMPTY(f) (void)v, m->f = 0;

/* An item list's sample items: item i of a list in variant v is variant v + i. */
#define XX(name) static void sample_put_##name(wire_wr *w, void *ud, uint32_t i);
WIRE_ITEM_MAP(XX)
#undef XX
#define XX(name)                                                   \
  static void sample_put_##name(wire_wr *w, void *ud, uint32_t i) { \
    unsigned v = (unsigned)(uintptr_t)ud + i;                       \
    wire_item_##name it, *m = &it;                                  \
    memset(m, 0, sizeof *m);                                        \
    WIRE_ITEM_##name(SAMPLE_)                                       \
    wire_put_item_##name(w, m);                                     \
  }
WIRE_ITEM_MAP(XX)
#undef XX

int wire_sample(uint8_t type, unsigned v, wire_wr *w) {
  wire_wr_init(w);
  switch (type) {
#define XX(num, NAME, name, pre_auth, max, from) \
  case num: {                                    \
    wire_msg_##name msg, *m = &msg;              \
    memset(m, 0, sizeof *m);                     \
    WIRE_MSG_##name(SAMPLE_)                     \
    wire_put_##name(w, m);                       \
    break;                                       \
  }
    WIRE_TYPE_MAP(XX)
#undef XX
  default:
    wire_wr_free(w);
    return err_set(DRV_EINVAL, "no sample of unknown frame type 0x%02x", type);
  }
  return wire_wr_finish(w, type, v + 1);
}
