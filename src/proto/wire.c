/* wire.c - drover's framed binary protocol: header encoding and
 * validation, the payload writer and the bounds-checked payload reader
 * (the message table and the per-message codecs are in wire_msgs.c).
 *
 * Everything on the wire is little-endian and unaligned: integers are
 * assembled byte by byte and floats go through memcpy, so nothing here
 * depends on the host's byte order or on pointer alignment. The reader
 * never reads past its payload: each field first asks rd_take() for its
 * bytes, and the first failure turns every later read into a zero.
 */
#include "proto/wire.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/le.h"
#include "proto/wire_int.h"

/* A tensor dimension must be below 2^40: far beyond any real tensor, and
 * small enough that four of them cannot overflow int64 in any product
 * checked step by step against the bytes that remain. */
#define WIRE_MAX_DIM ((uint64_t)1 << 40)

/* ======================================================================
 * Roles
 * ==================================================================== */

static const char *const role_names[ROLE_COUNT] = {"ps", "chief", "worker", "evaluator"};

const char *wire_role_name(int role) {
  return role >= 0 && role < ROLE_COUNT ? role_names[role] : "?";
}

int wire_role_from_name(const char *name) {
  for (int i = 0; name && i < ROLE_COUNT; i++)
    if (strcmp(name, role_names[i]) == 0) return i;
  return -1;
}

/* ======================================================================
 * Tensors to and from the wire
 * ==================================================================== */

/* n float32s between host floats and little-endian wire bytes. On a
 * little-endian host both are one memcpy. */
static void f32_to_wire(uint8_t *dst, const float *src, size_t n) {
  if (LE_HOST) {
    memcpy(dst, src, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &src[i], 4);
    le_put(dst + 4 * i, u, 4);
  }
}

void wire__f32_from_wire(float *dst, const uint8_t *src, size_t n) {
  if (LE_HOST) {
    memcpy(dst, src, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)le_get(src + 4 * i, 4);
    memcpy(&dst[i], &u, 4);
  }
}

/* Copies a (possibly strided) tensor to a dense row-major little-endian
 * image (`out`), or fills it from one (`in`); exactly one is non-NULL.
 * Strided tensors go one innermost row at a time. */
static void tensor_transfer(const tensor *t, uint8_t *out, const uint8_t *in) {
  int nd = t->ndim;
  if (nd == 0 || tensor_is_contiguous(t)) {
    size_t n = (size_t)tensor_numel(t);
    if (out)
      f32_to_wire(out, tensor_data(t), n);
    else
      wire__f32_from_wire(tensor_data(t), in, n);
    return;
  }
  if (tensor_numel(t) == 0) return;
  int64_t idx[TENSOR_MAXDIM] = {0};
  int64_t inner = t->shape[nd - 1], istride = t->stride[nd - 1];
  size_t pos = 0; /* byte offset in the dense image */
  for (;;) {
    float *row = tensor_data(t);
    for (int d = 0; d < nd - 1; d++) row += idx[d] * t->stride[d];
    for (int64_t i = 0; i < inner; i += istride == 1 ? inner : 1) {
      size_t k = istride == 1 ? (size_t)inner : 1; /* a contiguous row is one copy */
      if (out)
        f32_to_wire(out + pos, row + i * istride, k);
      else
        wire__f32_from_wire(row + i * istride, in + pos, k);
      pos += 4 * k;
    }
    int d = nd - 2;
    while (d >= 0 && ++idx[d] == t->shape[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

/* "[3, 4]" into buf. */
static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t len = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, i ? ", " : "", shape[i]);
  if (len < n) snprintf(buf + len, n - len, "]");
  return buf;
}

/* ======================================================================
 * Header
 * ==================================================================== */

void wire_header_encode(const wire_header *h, uint8_t *out) {
  le_put(out, WIRE_MAGIC, 4);
  out[4] = WIRE_VERSION;
  out[5] = h->type;
  le_put(out + 6, h->flags, 2);
  le_put(out + 8, h->req, 4);
  le_put(out + 12, h->len, 4);
}

int wire_header_decode(const uint8_t *in, uint32_t max_frame, bool authed, wire_header *h) {
  uint32_t magic = (uint32_t)le_get(in, 4);
  if (magic != WIRE_MAGIC)
    return err_set(DRV_EPARSE, "bad magic 0x%08" PRIx32 " (expected 0x%08x, \"DRV1\")",
                   magic, WIRE_MAGIC);
  if (in[4] != WIRE_VERSION)
    return err_set(DRV_EPARSE, "unsupported protocol version %u (this is version %u)",
                   in[4], WIRE_VERSION);
  h->type = in[5];
  h->flags = (uint16_t)le_get(in + 6, 2);
  h->req = (uint32_t)le_get(in + 8, 4);
  h->len = (uint32_t)le_get(in + 12, 4);
  const wire_msg_info *m = wire_msg(h->type);
  if (!m) return err_set(DRV_EPARSE, "unknown frame type 0x%02x", h->type);
  if (!authed && !m->pre_auth)
    return err_set(DRV_EPARSE, "frame type %s before authentication", m->name);
  if (h->len > max_frame)
    return err_set(DRV_EPARSE, "frame of %" PRIu32 " bytes exceeds the maximum %" PRIu32,
                   h->len, max_frame);
  if (h->len < m->min_len || h->len > m->max_len) {
    if (m->min_len == m->max_len)
      return err_set(DRV_EPARSE, "%s payload of %" PRIu32 " bytes, expected %" PRIu32,
                     m->name, h->len, m->min_len);
    if (m->max_len == UINT32_MAX)
      return err_set(DRV_EPARSE, "%s payload of %" PRIu32 " bytes, expected at least %" PRIu32,
                     m->name, h->len, m->min_len);
    return err_set(DRV_EPARSE,
                   "%s payload of %" PRIu32 " bytes, expected %" PRIu32 " to %" PRIu32, m->name,
                   h->len, m->min_len, m->max_len);
  }
  return 0;
}

/* ======================================================================
 * Writer
 * ==================================================================== */

#define WR_INITIAL_CAP 256

void wire_wr_init(wire_wr *w) {
  w->fixed = false;
  w->len = WIRE_HEADER_SIZE;
  w->err = 0;
  w->cap = WR_INITIAL_CAP;
  w->buf = malloc(w->cap);
  if (!w->buf) {
    w->cap = 0;
    w->err = DRV_ENOMEM;
  }
}

void wire_wr_init_fixed(wire_wr *w, uint8_t *buf, size_t cap) {
  *w = (wire_wr){.buf = buf, .len = WIRE_HEADER_SIZE, .cap = cap, .fixed = true};
  if (!buf || cap < WIRE_HEADER_SIZE) w->err = DRV_ERANGE;
}

/* Room for n more bytes, returned for filling; NULL once the writer has
 * failed. Capacity doubles, so a frame built field by field costs O(len). */
static uint8_t *wr_reserve(wire_wr *w, size_t n) {
  if (w->err) return NULL;
  if (n > (size_t)UINT32_MAX - (w->len - WIRE_HEADER_SIZE)) {
    w->err = DRV_ERANGE; /* the header's len field could not say it */
    return NULL;
  }
  if (n > w->cap - w->len && w->fixed) {
    w->err = DRV_ERANGE;
    return NULL;
  }
  if (n > w->cap - w->len) {
    size_t need = w->len + n, cap = w->cap ? w->cap : WR_INITIAL_CAP;
    while (cap < need) cap *= 2; /* need < 2^32 + 16: no overflow */
    uint8_t *nb = realloc(w->buf, cap);
    if (!nb) {
      w->err = DRV_ENOMEM;
      return NULL;
    }
    w->buf = nb;
    w->cap = cap;
  }
  uint8_t *p = w->buf + w->len;
  w->len += n;
  return p;
}

static void wr_le(wire_wr *w, uint64_t v, int n) {
  uint8_t *p = wr_reserve(w, (size_t)n);
  if (p) le_put(p, v, n);
}

void wire_wr_u8(wire_wr *w, uint8_t v) { wr_le(w, v, 1); }
void wire_wr_u16(wire_wr *w, uint16_t v) { wr_le(w, v, 2); }
void wire_wr_u32(wire_wr *w, uint32_t v) { wr_le(w, v, 4); }
void wire_wr_u64(wire_wr *w, uint64_t v) { wr_le(w, v, 8); }
void wire_wr_i32(wire_wr *w, int32_t v) { wr_le(w, (uint32_t)v, 4); }
void wire_wr_i64(wire_wr *w, int64_t v) { wr_le(w, (uint64_t)v, 8); }

void wire_wr_f64(wire_wr *w, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  wr_le(w, u, 8);
}

void wire_wr_raw(wire_wr *w, const void *p, size_t n) {
  uint8_t *d = wr_reserve(w, n);
  if (d && n) memcpy(d, p, n);
}

void wire_wr_bytes(wire_wr *w, const void *p, uint32_t n) {
  wire_wr_u32(w, n);
  wire_wr_raw(w, p, n);
}

void wire_wr_str(wire_wr *w, const char *s) {
  size_t n = s ? strnlen(s, WIRE_MAX_STR) : 0;
  wire_wr_bytes(w, s, (uint32_t)n);
}

void wire_wr_strv(wire_wr *w, wire_str s) {
  if (!s.len) {
    wire_wr_str(w, s.s);
    return;
  }
  wire_wr_bytes(w, s.s, s.len < WIRE_MAX_STR ? s.len : WIRE_MAX_STR);
}

/* A 0-D tensor travels as [1]: wire tensors have 1..4 dimensions. */
void wire_wr_tensor(wire_wr *w, const tensor *t) {
  int nd = t->ndim ? t->ndim : 1;
  wire_wr_u8(w, (uint8_t)nd);
  for (int i = 0; i < nd; i++) wire_wr_u64(w, t->ndim ? (uint64_t)t->shape[i] : 1);
  uint8_t *d = wr_reserve(w, (size_t)tensor_numel(t) * 4);
  if (d) tensor_transfer(t, d, NULL);
}

/* The float fields of optim_cfg in their wire order (see VAR_INIT). */
static const struct {
  const char *name;
  size_t off;
} optim_fields[] = {
    {"lr", offsetof(optim_cfg, lr)},
    {"momentum", offsetof(optim_cfg, momentum)},
    {"dampening", offsetof(optim_cfg, dampening)},
    {"weight_decay", offsetof(optim_cfg, weight_decay)},
    {"beta1", offsetof(optim_cfg, beta1)},
    {"beta2", offsetof(optim_cfg, beta2)},
    {"eps", offsetof(optim_cfg, eps)},
    {"alpha", offsetof(optim_cfg, alpha)},
    {"lr_decay", offsetof(optim_cfg, lr_decay)},
    {"initial_accumulator", offsetof(optim_cfg, initial_accumulator)},
    {"beta", offsetof(optim_cfg, beta)},
    {"l1", offsetof(optim_cfg, l1)},
    {"l2", offsetof(optim_cfg, l2)},
};
#define OPTIM_NFIELDS (sizeof optim_fields / sizeof optim_fields[0])

/* Bit 7 of the nesterov byte: a learning-rate schedule follows, as
 * u8 kind, i64 warmup, f64 start_factor, i64 step_size, f64 gamma,
 * u8 n, i64 milestones[n], i64 T_max, f64 eta_min, and for a plateau
 * schedule u8 metric (optim_metric: loss, accuracy, AUC, log loss),
 * u8 maximize, f64 factor, i64 patience,
 * f64 threshold, f64 min_lr. A config without one keeps the original
 * layout. A ps applies a plateau schedule's warmup; its reductions come
 * from the coordinator, which watches the evals (LR_SCALE). clip_norm
 * does not travel here: workers clip before they push (SETUP). */
#define OPTIM_SCHED_FLAG 0x80

static void wr_sched(wire_wr *w, const optim_sched *s) {
  wire_wr_u8(w, (uint8_t)s->kind);
  wire_wr_i64(w, s->warmup);
  wire_wr_f64(w, s->start_factor);
  wire_wr_i64(w, s->step_size);
  wire_wr_f64(w, s->gamma);
  wire_wr_u8(w, (uint8_t)s->nmilestones);
  for (int i = 0; i < s->nmilestones; i++) wire_wr_i64(w, s->milestones[i]);
  wire_wr_i64(w, s->t_max);
  wire_wr_f64(w, s->eta_min);
  if (s->kind != OSCHED_PLATEAU) return;
  wire_wr_u8(w, (uint8_t)s->metric);
  wire_wr_u8(w, s->maximize ? 1 : 0);
  wire_wr_f64(w, s->factor);
  wire_wr_i64(w, s->patience);
  wire_wr_f64(w, s->threshold);
  wire_wr_f64(w, s->min_lr);
}

void wire_wr_optim(wire_wr *w, const optim_cfg *c) {
  wire_wr_u8(w, (uint8_t)c->kind);
  for (size_t i = 0; i < OPTIM_NFIELDS; i++) {
    float f;
    memcpy(&f, (const char *)c + optim_fields[i].off, sizeof f);
    wire_wr_f64(w, f);
  }
  bool sched = optim_sched_active(&c->sched);
  wire_wr_u8(w, (uint8_t)((c->nesterov ? 1 : 0) | (sched ? OPTIM_SCHED_FLAG : 0)));
  if (sched) wr_sched(w, &c->sched);
}

int wire_wr_finish(wire_wr *w, uint8_t type, uint32_t req) {
  if (w->err || !w->buf) {
    if (!w->err) w->err = DRV_ENOMEM; /* finished or freed already */
    int rc = w->err == DRV_ENOMEM
                 ? err_set(DRV_ENOMEM, "out of memory building a %s frame", wire_type_name(type))
             : w->fixed ? err_set(w->err, "%s payload does not fit its %zu bytes",
                                  wire_type_name(type), w->cap - WIRE_HEADER_SIZE)
                        : err_set(w->err, "%s payload exceeds 4 GiB", wire_type_name(type));
    wire_wr_free(w);
    return rc;
  }
  wire_header h = {type, 0, req, (uint32_t)(w->len - WIRE_HEADER_SIZE)};
  wire_header_encode(&h, w->buf);
  return 0;
}

void wire_wr_free(wire_wr *w) {
  if (!w->fixed) free(w->buf);
  w->buf = NULL;
  w->len = w->cap = 0;
}

/* ======================================================================
 * Reader
 * ==================================================================== */

void wire_rd_init(wire_rd *r, const uint8_t *payload, size_t len) {
  static const uint8_t empty[1];
  r->p = payload ? payload : empty; /* NULL + 0 is undefined behaviour */
  r->len = payload ? len : 0;
  r->off = 0;
  r->err = 0;
  r->why[0] = '\0';
}

/* Records the first failure (later ones are consequences of it). */
__attribute__((format(printf, 2, 3))) static void rd_fail(wire_rd *r, const char *fmt, ...) {
  if (r->err) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why, sizeof r->why, fmt, ap);
  va_end(ap);
  r->err = DRV_EPARSE;
  err_set(DRV_EPARSE, "%s", r->why);
}

static size_t rd_left(const wire_rd *r) { return r->len - r->off; }

/* The next n bytes, or NULL (and a failure) when fewer remain. */
static const uint8_t *rd_take(wire_rd *r, size_t n, const char *what) {
  if (r->err) return NULL;
  if (n > rd_left(r)) {
    rd_fail(r, "truncated %s at offset %zu: %zu bytes needed, %zu left", what, r->off, n,
            rd_left(r));
    return NULL;
  }
  const uint8_t *p = r->p + r->off;
  r->off += n;
  return p;
}

static uint64_t rd_le(wire_rd *r, int n, const char *what) {
  const uint8_t *p = rd_take(r, (size_t)n, what);
  return p ? le_get(p, n) : 0;
}

uint8_t wire_rd_u8(wire_rd *r) { return (uint8_t)rd_le(r, 1, "u8"); }
uint16_t wire_rd_u16(wire_rd *r) { return (uint16_t)rd_le(r, 2, "u16"); }
uint32_t wire_rd_u32(wire_rd *r) { return (uint32_t)rd_le(r, 4, "u32"); }
uint64_t wire_rd_u64(wire_rd *r) { return rd_le(r, 8, "u64"); }
int32_t wire_rd_i32(wire_rd *r) { return (int32_t)(uint32_t)rd_le(r, 4, "i32"); }
int64_t wire_rd_i64(wire_rd *r) { return (int64_t)rd_le(r, 8, "i64"); }

double wire_rd_f64(wire_rd *r) {
  uint64_t u = rd_le(r, 8, "f64");
  double d;
  memcpy(&d, &u, 8);
  return d;
}

const uint8_t *wire_rd_raw(wire_rd *r, size_t n) { return rd_take(r, n, "bytes"); }

uint32_t wire_rd_bytes(wire_rd *r, const uint8_t **p) {
  uint32_t n = (uint32_t)rd_le(r, 4, "bytes length");
  *p = rd_take(r, n, "bytes");
  return *p ? n : 0;
}

void wire_rd_str_view(wire_rd *r, wire_str *out) {
  *out = (wire_str){"", 0};
  size_t at = r->off;
  uint32_t len = (uint32_t)rd_le(r, 4, "string length");
  if (r->err) return;
  if (len > WIRE_MAX_STR) {
    rd_fail(r, "string of %" PRIu32 " bytes at offset %zu exceeds the limit %d", len, at,
            WIRE_MAX_STR);
    return;
  }
  const uint8_t *s = rd_take(r, len, "string");
  if (!s) return;
  const uint8_t *nul = memchr(s, 0, len);
  if (nul) {
    rd_fail(r, "string at offset %zu contains a NUL byte at position %td", at, nul - s);
    return;
  }
  if (len) *out = (wire_str){(const char *)s, len};
}

void wire_rd_str(wire_rd *r, char *out, size_t n) {
  if (n) out[0] = '\0';
  size_t at = r->off;
  wire_str s;
  wire_rd_str_view(r, &s);
  if (r->err) return;
  if (s.len >= n) {
    rd_fail(r, "string of %" PRIu32 " bytes at offset %zu does not fit in %zu", s.len, at,
            n ? n - 1 : 0);
    return;
  }
  memcpy(out, s.s, s.len);
  out[s.len] = '\0';
}

int wire_str_copy(wire_str s, char *out, size_t n) {
  if (s.len >= n) {
    if (n) out[0] = '\0';
    return err_set(DRV_EPARSE, "string of %" PRIu32 " bytes does not fit in %zu", s.len,
                   n ? n - 1 : 0);
  }
  if (s.len) memcpy(out, s.s, s.len);
  out[s.len] = '\0';
  return 0;
}

/* Reads the nd dims of a shape starting at offset `at` and checks them:
 * each below 2^40 and the product of the nonzero ones below 2^40 too, so
 * that any element count or stride a receiver derives fits in int64 - also
 * for a tensor with no elements, whose other dims no data size bounds.
 * Returns the element count (0 when a dim is 0), or -1 after a failure. */
static int64_t rd_shape(wire_rd *r, const char *what, size_t at, unsigned nd, int64_t *dims) {
  uint64_t prod = 1;
  bool empty = false;
  for (unsigned i = 0; i < nd; i++) {
    uint64_t d = rd_le(r, 8, "dimension");
    if (r->err) return -1;
    if (d >= WIRE_MAX_DIM) {
      rd_fail(r, "%s at offset %zu: dimension %u is %" PRIu64 " (limit 2^40)", what, at, i + 1,
              d);
      return -1;
    }
    dims[i] = (int64_t)d;
    if (d == 0) {
      empty = true;
    } else if (prod > (WIRE_MAX_DIM - 1) / d) {
      rd_fail(r, "%s at offset %zu: dimensions multiply past 2^40 elements", what, at);
      return -1;
    } else {
      prod *= d;
    }
  }
  if (empty && prod > (uint64_t)TENSOR_EMPTY_MAX) {
    rd_fail(r, "%s at offset %zu: an empty tensor's other dimensions multiply past 2^32", what,
            at);
    return -1;
  }
  return empty ? 0 : (int64_t)prod;
}

int wire_rd_tensor_view(wire_rd *r, int *ndim, int64_t shape[TENSOR_MAXDIM],
                        const uint8_t **data) {
  *ndim = 0;
  *data = NULL;
  memset(shape, 0, TENSOR_MAXDIM * sizeof *shape);
  size_t at = r->off;
  unsigned nd = wire_rd_u8(r);
  if (r->err) return DRV_EPARSE;
  if (nd < 1 || nd > TENSOR_MAXDIM) {
    rd_fail(r, "tensor at offset %zu has %u dimensions (expected 1 to %d)", at, nd,
            TENSOR_MAXDIM);
    return DRV_EPARSE;
  }
  int64_t dims[TENSOR_MAXDIM];
  int64_t numel = rd_shape(r, "tensor", at, nd, dims);
  if (numel < 0) return DRV_EPARSE;
  if ((uint64_t)numel > rd_left(r) / 4) { /* numel < 2^40: no overflow below */
    char sb[128];
    rd_fail(r, "tensor at offset %zu is truncated: shape %s needs %" PRIu64 " bytes, %zu left",
            at, shape_str((int)nd, dims, sb, sizeof sb), (uint64_t)numel * 4, rd_left(r));
    return DRV_EPARSE;
  }
  *data = r->p + r->off;
  r->off += (size_t)numel * 4;
  *ndim = (int)nd;
  memcpy(shape, dims, nd * sizeof *dims);
  return 0;
}

tensor *wire_rd_tensor(wire_rd *r) {
  int nd;
  int64_t shape[TENSOR_MAXDIM];
  const uint8_t *data;
  if (wire_rd_tensor_view(r, &nd, shape, &data) < 0) return NULL;
  tensor *t = tensor_new(nd, shape);
  if (!t) {
    char sb[128];
    rd_fail(r, "cannot allocate a tensor of %s: %s", shape_str(nd, shape, sb, sizeof sb),
            err_msg());
    return NULL;
  }
  tensor_transfer(t, NULL, data);
  return t;
}

int wire_rd_tensor_into(wire_rd *r, tensor *dst) {
  int nd;
  int64_t shape[TENSOR_MAXDIM];
  const uint8_t *data;
  if (wire_rd_tensor_view(r, &nd, shape, &data) < 0) return DRV_EPARSE;
  bool same = nd == dst->ndim;
  for (int i = 0; same && i < nd; i++) same = shape[i] == dst->shape[i];
  if (!same) {
    char a[128], b[128];
    rd_fail(r, "tensor of %s where %s was expected", shape_str(nd, shape, a, sizeof a),
            shape_str(dst->ndim, dst->shape, b, sizeof b));
    return DRV_EPARSE;
  }
  tensor_transfer(dst, NULL, data);
  return 0;
}

/* A float field of a schedule: finite as a float, else a parse error. */
static float rd_sched_float(wire_rd *r, const char *name) {
  double v = wire_rd_f64(r);
  if (!r->err && (!isfinite(v) || fabs(v) > FLT_MAX))
    rd_fail(r, "schedule %s is not a finite float (%g)", name, v);
  return (float)v;
}

static int rd_sched(wire_rd *r, optim_sched *s) {
  memset(s, 0, sizeof *s);
  unsigned kind = wire_rd_u8(r);
  s->warmup = wire_rd_i64(r);
  s->start_factor = rd_sched_float(r, "start_factor");
  s->step_size = wire_rd_i64(r);
  s->gamma = rd_sched_float(r, "gamma");
  unsigned n = wire_rd_u8(r);
  if (!r->err && n > OSCHED_MAX_MILESTONES) rd_fail(r, "schedule has %u milestones", n);
  for (unsigned i = 0; !r->err && i < n; i++) s->milestones[i] = wire_rd_i64(r);
  s->nmilestones = (int)n;
  s->t_max = wire_rd_i64(r);
  s->eta_min = rd_sched_float(r, "eta_min");
  if (r->err) return DRV_EPARSE;
  if (kind > OSCHED_PLATEAU) {
    rd_fail(r, "unknown schedule kind %u", kind);
    return DRV_EPARSE;
  }
  s->kind = (optim_sched_kind)kind;
  if (kind == OSCHED_PLATEAU) {
    unsigned metric = wire_rd_u8(r), maximize = wire_rd_u8(r);
    s->factor = rd_sched_float(r, "factor");
    s->patience = wire_rd_i64(r);
    s->threshold = rd_sched_float(r, "threshold");
    s->min_lr = rd_sched_float(r, "min_lr");
    if (!r->err && (metric > OMETRIC_EVAL_LOGLOSS || maximize > 1))
      rd_fail(r, "plateau schedule metric %u / mode %u", metric, maximize);
    if (r->err) return DRV_EPARSE;
    s->metric = (optim_metric)metric;
    s->maximize = maximize == 1;
  }
  return 0;
}

int wire_rd_optim(wire_rd *r, optim_cfg *c) {
  double v[OPTIM_NFIELDS];
  optim_sched sched = {0};
  unsigned kind = wire_rd_u8(r);
  for (size_t i = 0; i < OPTIM_NFIELDS; i++) v[i] = wire_rd_f64(r);
  unsigned nesterov = wire_rd_u8(r);
  if (r->err) return DRV_EPARSE;
  if ((nesterov & OPTIM_SCHED_FLAG) && rd_sched(r, &sched) < 0) return DRV_EPARSE;
  nesterov &= ~(unsigned)OPTIM_SCHED_FLAG;
  if (kind > OPTIM_FTRL) {
    rd_fail(r, "unknown optimizer kind %u", kind);
    return DRV_EPARSE;
  }
  if (nesterov > 1) {
    rd_fail(r, "optimizer nesterov flag is %u (expected 0 or 1)", nesterov);
    return DRV_EPARSE;
  }
  memset(c, 0, sizeof *c);
  c->kind = (optim_kind)kind;
  c->nesterov = nesterov;
  c->sched = sched;
  for (size_t i = 0; i < OPTIM_NFIELDS; i++) {
    /* A finite double can still be infinite as a float: refuse both. */
    if (!isfinite(v[i]) || fabs(v[i]) > FLT_MAX) {
      rd_fail(r, "optimizer %s is not a finite float (%g)", optim_fields[i].name, v[i]);
      return DRV_EPARSE;
    }
    float f = (float)v[i];
    memcpy((char *)c + optim_fields[i].off, &f, sizeof f);
  }
  if (optim_cfg_check(c) < 0) {
    rd_fail(r, "%s", err_msg());
    return DRV_EPARSE;
  }
  return 0;
}

int wire_rd_done(wire_rd *r, uint8_t type) {
  if (r->err) return err_set(DRV_EPARSE, "%s: %s", wire_type_name(type), r->why);
  if (r->off != r->len)
    return err_set(DRV_EPARSE, "%s: %zu unexpected bytes after the payload's last field",
                   wire_type_name(type), rd_left(r));
  return 0;
}

/* The reader's internals, for the layout validator (wire_msgs.c). */
void wire__rd_fail(wire_rd *r, const char *fmt, ...) {
  if (r->err) return;
  char why[sizeof r->why];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  rd_fail(r, "%s", why);
}

const uint8_t *wire__rd_take(wire_rd *r, size_t n, const char *what) {
  return rd_take(r, n, what);
}

int64_t wire__rd_shape(wire_rd *r, const char *what, size_t at, unsigned nd, int64_t *dims) {
  return rd_shape(r, what, at, nd, dims);
}
