/* wire_vectors.c - the C side of the shared wire test vectors (see
 * wire_vectors.h): a JSON dump of every decoded message, generated like
 * the codecs from the field lists of wire_msgs.h (one X-macro per field
 * kind), and the unit binary's --wire-vectors mode that writes the
 * vectors and decodes frames written elsewhere. */
#include "wire_vectors.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"

/* ---- values ---------------------------------------------------------------- */

static json_t *hex(const uint8_t *p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  char *s = malloc(2 * n + 1);
  if (!s) return NULL;
  for (size_t i = 0; i < n; i++) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  json_t *j = json_stringn(s, 2 * n);
  free(s);
  return j;
}

static json_t *u64(uint64_t v) {
  if (v <= INT64_MAX) return json_integer((json_int_t)v);
  char b[32];
  snprintf(b, sizeof b, "%" PRIu64, v);
  return json_string(b);
}

static json_t *f64(double v) {
  if (isfinite(v)) return json_real(v);
  return json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

static json_t *str(wire_str s) {
  json_t *j = json_stringn(s.s, s.len);
  return j ? j : json_pack("{s:o}", "hex", hex((const uint8_t *)s.s, s.len));
}

static json_t *shape(const wire_tensor *t) {
  json_t *a = json_array();
  for (int i = 0; i < t->ndim; i++) json_array_append_new(a, json_integer(t->shape[i]));
  return a;
}

static json_t *tensor_json(const wire_tensor *t) {
  int64_t n = wire_tensor_numel(t);
  float *f = malloc(n ? (size_t)n * sizeof *f : 1);
  if (!f) return NULL;
  wire_tensor_to(t, f);
  json_t *data = json_array();
  for (int64_t i = 0; i < n; i++) json_array_append_new(data, f64(f[i]));
  free(f);
  return json_pack("{s:o,s:o}", "shape", shape(t), "data", data);
}

static json_t *optim_json(const optim_cfg *c) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_optim(&w, c);
  json_t *j = w.err ? NULL : hex(w.buf + WIRE_HEADER_SIZE, w.len - WIRE_HEADER_SIZE);
  wire_wr_free(&w);
  return j;
}

/* ---- the dump, one line per field kind -------------------------------------- */

#define SET_(f, v) json_object_set_new(o, #f, (v));
#define DUMP_(kind, ...) DUMP_##kind(__VA_ARGS__)
#define DUMP_U8(f) SET_(f, json_integer(m->f))
#define DUMP_U16(f) SET_(f, json_integer(m->f))
#define DUMP_U32(f) SET_(f, json_integer(m->f))
#define DUMP_U64(f) SET_(f, u64(m->f))
#define DUMP_I32(f) SET_(f, json_integer(m->f))
#define DUMP_I64(f) SET_(f, json_integer(m->f))
#define DUMP_F64(f) SET_(f, f64(m->f))
#define DUMP_FLAG(f, what) SET_(f, json_boolean(m->f))
#define DUMP_ROLE(f) SET_(f, json_integer(m->f))
#define DUMP_ENUM(f, max, what) SET_(f, json_integer(m->f))
#define DUMP_POS(f, what) SET_(f, f64(m->f))
#define DUMP_RAW(f, size) SET_(f, hex(m->f, size))
#define DUMP_STR(f) SET_(f, str(m->f))
#define DUMP_BYTES(f) SET_(f, hex(m->f.p, m->f.len))
#define DUMP_SHAPE(f) SET_(f, shape(&m->f))
#define DUMP_TENSOR(f) SET_(f, tensor_json(&m->f))
#define DUMP_OPTIM(f) SET_(f, optim_json(&m->f))
#define DUMP_ITEMS(f, item, what) SET_(f, list_##item(&m->f))
#define DUMP_EMPTY(f) (void)m;

#define XX(name) static json_t *list_##name(const wire_items *it);
WIRE_ITEM_MAP(XX)
#undef XX

#define XX(name)                                               \
  static json_t *item_##name(const wire_item_##name *m) {      \
    json_t *o = json_object();                                 \
    WIRE_ITEM_##name(DUMP_) return o;                          \
  }                                                            \
  static json_t *list_##name(const wire_items *it) {           \
    json_t *a = json_array();                                  \
    wire_rd r = wire_items_reader(it);                         \
    for (uint32_t i = 0; i < it->n; i++) {                     \
      wire_item_##name m;                                      \
      wire_get_item_##name(&r, &m);                            \
      json_array_append_new(a, item_##name(&m));               \
    }                                                          \
    return a;                                                  \
  }
WIRE_ITEM_MAP(XX)
#undef XX

/* Decodes a payload of `type` into its fields' JSON and re-encodes the
 * decoded message into w (the caller finishes it). */
static json_t *payload_json(uint8_t type, const uint8_t *p, size_t n, wire_wr *w) {
  switch (type) {
#define XX(num, NAME, name, pre_auth, max, from)     \
  case num: {                                        \
    wire_msg_##name msg, *m = &msg;                  \
    if (wire_get_##name(p, n, m) < 0) return NULL;   \
    wire_put_##name(w, m);                           \
    json_t *o = json_object();                       \
    WIRE_MSG_##name(DUMP_) return o;                 \
  }
    WIRE_TYPE_MAP(XX)
#undef XX
  }
  err_set(DRV_EPARSE, "unknown frame type 0x%02x", type);
  return NULL;
}

char *wire_vectors_json(const uint8_t *buf, size_t len, int *same) {
  wire_header h;
  *same = 0;
  if (len < WIRE_HEADER_SIZE) {
    err_set(DRV_EPARSE, "%zu bytes: shorter than a header", len);
    return NULL;
  }
  if (wire_header_decode(buf, WIRE_DEFAULT_MAX_FRAME, true, &h) < 0) return NULL;
  if (h.len != len - WIRE_HEADER_SIZE) {
    err_set(DRV_EPARSE, "the header says %" PRIu32 " payload bytes, the file has %zu", h.len,
            len - WIRE_HEADER_SIZE);
    return NULL;
  }
  const uint8_t *p = buf + WIRE_HEADER_SIZE;
  if (wire_validate_payload(h.type, p, h.len) < 0) return NULL;
  wire_wr w;
  wire_wr_init(&w);
  json_t *fields = payload_json(h.type, p, h.len, &w);
  if (!fields) {
    wire_wr_free(&w);
    return NULL;
  }
  if (wire_wr_finish(&w, h.type, h.req) == 0) {
    *same = w.len == len && memcmp(w.buf, buf, len) == 0;
    wire_wr_free(&w);
  }
  json_t *o = json_pack("{s:s,s:I,s:o}", "type", wire_type_name(h.type), "req",
                        (json_int_t)h.req, "fields", fields);
  char *text = o ? json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
  json_decref(o);
  if (!text) err_set(DRV_ENOMEM, "cannot make the JSON of a %s frame", wire_type_name(h.type));
  return text;
}

/* ---- the --wire-vectors mode ------------------------------------------------- */

static int write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "wire-vectors: cannot write %s: %s\n", path, strerror(errno));
    if (f) fclose(f);
    return -1;
  }
  return 0;
}

static int write_one(const char *dir, uint8_t type, unsigned v) {
  wire_wr w;
  char path[4096];
  int same;
  if (wire_sample(type, v, &w) < 0) return -1;
  char *json = wire_vectors_json(w.buf, w.len, &same);
  int rc = -1;
  if (!json || !same) {
    fprintf(stderr, "wire-vectors: %s sample %u: %s\n", wire_type_name(type), v,
            json ? "does not re-encode to its bytes" : err_msg());
  } else {
    snprintf(path, sizeof path, "%s/%s-%u.bin", dir, wire_type_name(type), v);
    rc = write_file(path, w.buf, w.len);
    snprintf(path, sizeof path, "%s/%s-%u.json", dir, wire_type_name(type), v);
    size_t n = strlen(json);
    json[n] = '\n'; /* overwrites the NUL: written with its length */
    if (rc == 0) rc = write_file(path, json, n + 1);
  }
  free(json);
  wire_wr_free(&w);
  return rc;
}

static int write_all(const char *dir) {
  static const uint8_t types[] = {
#define XX(num, NAME, name, pre_auth, max, from) num,
      WIRE_TYPE_MAP(XX)
#undef XX
  };
  for (size_t i = 0; i < sizeof types; i++)
    for (unsigned v = 0; v < WIRE_SAMPLE_VARIANTS; v++)
      if (write_one(dir, types[i], v) < 0) return 1;
  return 0;
}

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    err_set(DRV_EIO, "cannot open: %s", strerror(errno));
    return NULL;
  }
  size_t cap = 4096, len = 0;
  uint8_t *b = malloc(cap);
  size_t k;
  while (b && (k = fread(b + len, 1, cap - len, f)) > 0) {
    len += k;
    if (len == cap) {
      uint8_t *nb = realloc(b, cap *= 2);
      if (!nb) free(b);
      b = nb;
    }
  }
  fclose(f);
  if (!b) err_set(DRV_ENOMEM, "out of memory");
  *n = len;
  return b;
}

static int decode_one(const char *path) {
  size_t n = 0;
  int same = 0;
  uint8_t *b = slurp(path, &n);
  char *json = b ? wire_vectors_json(b, n, &same) : NULL;
  free(b);
  json_t *o = json ? json_loads(json, 0, NULL) : json_pack("{s:s}", "error", err_msg());
  free(json);
  json_object_set_new(o, "file", json_string(path));
  if (json) json_object_set_new(o, "same", json_boolean(same));
  char *line = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
  json_decref(o);
  if (!line) return 1;
  printf("%s\n", line);
  free(line);
  return json && same ? 0 : 1;
}

int wire_vectors_main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[0], "write") == 0) return write_all(argv[1]);
  if (argc >= 1 && strcmp(argv[0], "decode") == 0) {
    int failed = 0;
    for (int i = 1; i < argc; i++) failed |= decode_one(argv[i]);
    return failed;
  }
  fprintf(stderr, "usage: unit_tests --wire-vectors write DIR | decode FILE...\n");
  return 2;
}
