/* safetensors_read.c - reading safetensors files (see safetensors.h).
 *
 * The reader trusts nothing: the file may be truncated, bit-flipped or
 * written by another program, so every length is bounded by the file's
 * size before it is used, and the tensors must tile the data exactly.
 */
#include "base/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"

static int host_is_le(void) {
  const uint16_t one = 1;
  uint8_t b;
  memcpy(&b, &one, 1);
  return b == 1;
}

/* ============================== reading ================================== */

/* Element types the reader converts to float. */
static const struct {
  const char *name;
  int size;
} dtypes[] = {{"F32", 4}, {"F64", 8}, {"F16", 2}, {"BF16", 2}, {"I64", 8}};
/* I64: PyTorch's integer buffers, e.g. BatchNorm's num_batches_tracked. */
enum { DT_F32, DT_F64, DT_F16, DT_BF16, DT_I64 };

typedef struct reader {
  const char *path;
  int fd;
  uint64_t size;      /* of the file */
  uint64_t hlen;      /* N */
  uint64_t data_len;  /* size - 8 - N */
  const uint8_t *mem; /* the file's bytes (safetensors_read_mem), or NULL: fd */
} reader;

/* One tensor while reading: where its bytes are and how to convert them. */
typedef struct item {
  safetensors_tensor t;
  uint64_t begin, end;
  int dtype;
} item;

static int bad(const reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const reader *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return err_set(DRV_EPARSE, "cannot read '%s': %s", r->path, msg);
}

/* pread of exactly len bytes at off; a short read is a truncated file. */
static int read_at(const reader *r, void *buf, size_t len, uint64_t off) {
  if (r->mem) {
    if (off > r->size || len > r->size - off) return bad(r, "the bytes end early");
    memcpy(buf, r->mem + off, len);
    return 0;
  }
  char *p = buf;
  while (len) {
    ssize_t k = pread(r->fd, p, len, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return err_set(DRV_EIO, "cannot read '%s': %s", r->path, strerror(errno));
    if (k == 0) return bad(r, "the file ends early (truncated while being read?)");
    p += k;
    len -= (size_t)k;
    off += (uint64_t)k;
  }
  return 0;
}

/* The header length, bounded by the file's size, and the header text
 * (malloc'ed, NUL-terminated) into *text. */
static int read_header(reader *r, char **text) {
  if (r->size < 8)
    return bad(r, "%llu bytes is too short for a safetensors file (8-byte header length)",
               (unsigned long long)r->size);
  uint8_t len8[8];
  int rc = read_at(r, len8, 8, 0);
  if (rc < 0) return rc;
  r->hlen = 0;
  for (int i = 7; i >= 0; i--) r->hlen = r->hlen << 8 | len8[i];
  if (r->hlen > SAFETENSORS_MAX_HEADER)
    return bad(r, "header length %llu is over the %u-byte limit: not a safetensors file, or "
               "corrupted", (unsigned long long)r->hlen, SAFETENSORS_MAX_HEADER);
  if (r->hlen > r->size - 8)
    return bad(r, "header length %llu runs past the end of the file (%llu bytes): truncated, "
               "or not a safetensors file", (unsigned long long)r->hlen,
               (unsigned long long)r->size);
  r->data_len = r->size - 8 - r->hlen;
  *text = malloc(r->hlen + 1);
  if (!*text) return err_set(DRV_ENOMEM, "cannot read '%s': out of memory", r->path);
  (*text)[r->hlen] = '\0';
  rc = read_at(r, *text, r->hlen, 8);
  if (rc < 0) return rc;
  if (r->hlen == 0 || (*text)[0] != '{')
    return bad(r, "the header does not start with '{': not a safetensors file, or corrupted");
  return 0;
}

/* "__metadata__": an object of strings, copied into f->meta. */
static int parse_meta(const reader *r, json_t *obj, safetensors_file *f) {
  if (!json_is_object(obj)) return bad(r, "__metadata__ is not an object");
  size_t n = json_object_size(obj), k = 0;
  char **meta = calloc(2 * n + 1, sizeof *meta);
  if (!meta) return err_set(DRV_ENOMEM, "cannot read '%s': out of memory", r->path);
  free(f->meta);
  f->meta = meta;
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    if (!json_is_string(v)) return bad(r, "__metadata__ value of '%.64s' is not a string", key);
    if (!(meta[k] = strdup(key)) || !(meta[k + 1] = strdup(json_string_value(v))))
      return err_set(DRV_ENOMEM, "cannot read '%s': out of memory", r->path);
    k += 2;
  }
  return 0;
}

static int parse_dtype(const reader *r, const char *name, json_t *v, int *dtype) {
  if (!json_is_string(v)) return bad(r, "tensor '%.64s': dtype is not a string", name);
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strcmp(json_string_value(v), dtypes[i].name) == 0) {
      *dtype = (int)i;
      return 0;
    }
  return err_set(DRV_EUNSUPPORTED, "cannot read '%s': tensor '%.64s' has dtype '%.16s'; "
                 "drover reads F32, F64, F16, BF16 and I64", r->path, name, json_string_value(v));
}

/* A JSON integer in [0, INT64_MAX], or -1. */
static int64_t nonneg(json_t *v) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
  return (int64_t)json_integer_value(v);
}

/* Shape and offsets of one tensor, checked against each other and the
 * data's length. */
static int parse_extent(const reader *r, const char *name, json_t *shape, json_t *offs, item *it) {
  if (!json_is_array(shape) || json_array_size(shape) > SAFETENSORS_MAX_DIM)
    return bad(r, "tensor '%.64s': shape is not a list of at most %d sizes", name,
               SAFETENSORS_MAX_DIM);
  it->t.ndim = (int)json_array_size(shape);
  size_t numel = 1, bytes;
  for (int d = 0; d < it->t.ndim; d++) {
    int64_t s = nonneg(json_array_get(shape, (size_t)d));
    if (s < 0) return bad(r, "tensor '%.64s': shape has a size that is not an integer >= 0", name);
    if (!util_mul_ok(numel, (size_t)s, &numel))
      return bad(r, "tensor '%.64s': the shape's element count overflows", name);
    it->t.shape[d] = s;
  }
  if (!util_mul_ok(numel, (size_t)dtypes[it->dtype].size, &bytes) || numel > INT64_MAX)
    return bad(r, "tensor '%.64s': the shape's byte size overflows", name);
  it->t.numel = (int64_t)numel;
  int64_t b = json_is_array(offs) && json_array_size(offs) == 2 ? nonneg(json_array_get(offs, 0)) : -1;
  int64_t e = b >= 0 ? nonneg(json_array_get(offs, 1)) : -1;
  if (b < 0 || e < b)
    return bad(r, "tensor '%.64s': data_offsets is not [begin, end] with 0 <= begin <= end", name);
  if ((uint64_t)e > r->data_len)
    return bad(r, "tensor '%.64s': data_offsets [%lld, %lld] run past the data's %llu bytes "
               "(truncated?)", name, (long long)b, (long long)e, (unsigned long long)r->data_len);
  if ((uint64_t)(e - b) != bytes)
    return bad(r, "tensor '%.64s': data_offsets cover %lld bytes, its shape and dtype need %zu",
               name, (long long)(e - b), bytes);
  it->begin = (uint64_t)b;
  it->end = (uint64_t)e;
  return 0;
}

/* One tensor entry: exactly dtype, shape and data_offsets. */
static int parse_tensor(const reader *r, const char *name, json_t *v, item *it) {
  if (!json_is_object(v)) return bad(r, "tensor '%.64s' is not an object", name);
  json_t *dtype = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
  json_t *offs = json_object_get(v, "data_offsets");
  if (!dtype || !shape || !offs || json_object_size(v) != 3)
    return bad(r, "tensor '%.64s' must have exactly dtype, shape and data_offsets", name);
  it->t.name = strdup(name);
  if (!it->t.name) return err_set(DRV_ENOMEM, "cannot read '%s': out of memory", r->path);
  int rc = parse_dtype(r, name, dtype, &it->dtype);
  return rc < 0 ? rc : parse_extent(r, name, shape, offs, it);
}

static int cmp_item(const void *a, const void *b) {
  const item *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* The tensors, sorted by offset, must tile [0, data_len) exactly. */
static int check_tiling(const reader *r, item *items, size_t n) {
  qsort(items, n, sizeof *items, cmp_item);
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (items[i].begin < at)
      return bad(r, "tensors '%.64s' and '%.64s' overlap (bytes %llu.. and ..%llu)",
                 items[i - 1].t.name, items[i].t.name, (unsigned long long)items[i].begin,
                 (unsigned long long)at);
    if (items[i].begin > at)
      return bad(r, "a gap of %llu bytes before tensor '%.64s'",
                 (unsigned long long)(items[i].begin - at), items[i].t.name);
    at = items[i].end;
  }
  if (at != r->data_len)
    return bad(r, "%llu bytes after the last tensor (not a safetensors file, or corrupted)",
               (unsigned long long)(r->data_len - at));
  return 0;
}

static float half_to_float(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float f = e == 0 ? ldexpf((float)m, -24)
            : e == 31 ? (m ? NAN : INFINITY)
                      : ldexpf((float)(m | 0x400), e - 25);
  return (h & 0x8000) ? -f : f;
}

/* Little-endian raw element i of `size` bytes, as an unsigned integer. */
static uint64_t raw_le(const uint8_t *p, int size, size_t i) {
  uint64_t v = 0;
  for (int k = size - 1; k >= 0; k--) v = v << 8 | p[i * (size_t)size + (size_t)k];
  return v;
}

/* Converts n elements of dtype from raw little-endian bytes to floats. */
static void convert(int dtype, const uint8_t *raw, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t v = raw_le(raw, dtypes[dtype].size, i);
    if (dtype == DT_F32) {
      uint32_t b = (uint32_t)v;
      memcpy(&out[i], &b, 4);
    } else if (dtype == DT_F64) {
      double d;
      memcpy(&d, &v, 8);
      out[i] = (float)d;
    } else if (dtype == DT_F16) {
      out[i] = half_to_float((uint16_t)v);
    } else if (dtype == DT_I64) {
      out[i] = (float)(int64_t)v;
    } else {
      uint32_t b = (uint32_t)v << 16;
      memcpy(&out[i], &b, 4);
    }
  }
}

/* One tensor's bytes into a new float array; F32 on a little-endian host
 * is read in place, the rest through a raw buffer. */
static int read_item(const reader *r, item *it) {
  size_t n = (size_t)it->t.numel, bytes = (size_t)(it->end - it->begin);
  if (n == 0) return 0;
  it->t.data = malloc(n * sizeof(float));
  int direct = it->dtype == DT_F32 && host_is_le();
  uint8_t *raw = direct ? (uint8_t *)it->t.data : malloc(bytes);
  if (!it->t.data || !raw) {
    if (!direct) free(raw);
    return err_set(DRV_ENOMEM, "cannot read '%s': out of memory for tensor '%.64s' (%zu "
                   "bytes)", r->path, it->t.name, bytes);
  }
  int rc = read_at(r, raw, bytes, 8 + r->hlen + it->begin);
  if (rc == 0 && !direct) convert(it->dtype, raw, it->t.data, n);
  if (rc == 0 && it->dtype == DT_I64) { /* exact, beside the floats */
    if (!(it->t.i64 = malloc(n * sizeof *it->t.i64)))
      rc = err_set(DRV_ENOMEM, "cannot read '%s': out of memory for tensor '%.64s'", r->path,
                   it->t.name);
    for (size_t i = 0; rc == 0 && i < n; i++) it->t.i64[i] = (int64_t)raw_le(raw, 8, i);
  }
  if (!direct) free(raw);
  return rc;
}

/* Parses the header object into items (malloc'ed, *n of them), filling
 * f->meta on the way. */
static int parse_header(const reader *r, json_t *root, safetensors_file *f, item **items,
                        size_t *n) {
  if (!json_is_object(root)) return bad(r, "the header is not a JSON object");
  *items = calloc(json_object_size(root) + 1, sizeof **items);
  if (!*items) return err_set(DRV_ENOMEM, "cannot read '%s': out of memory", r->path);
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    int rc = strcmp(key, "__metadata__") == 0 ? parse_meta(r, v, f)
                                              : parse_tensor(r, key, v, &(*items)[(*n)++]);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Everything after the file is open: header, layout, data. */
static int read_all(reader *r, safetensors_file *f) {
  char *text = NULL;
  int rc = read_header(r, &text);
  if (rc < 0) {
    free(text);
    return rc;
  }
  json_error_t jerr;
  json_t *root = json_loadb(text, (size_t)r->hlen, JSON_REJECT_DUPLICATES, &jerr);
  free(text);
  if (!root) return bad(r, "the header is not valid JSON (column %d: %s)", jerr.column, jerr.text);
  item *items = NULL;
  size_t n = 0;
  rc = parse_header(r, root, f, &items, &n);
  json_decref(root);
  if (rc == 0) rc = check_tiling(r, items, n);
  for (size_t i = 0; i < n && rc == 0; i++) rc = read_item(r, &items[i]);
  f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
  if (!f->tensors && rc == 0) rc = err_set(DRV_ENOMEM, "cannot read '%s': out of memory", r->path);
  for (size_t i = 0; i < n; i++) {
    if (f->tensors) f->tensors[f->n++] = items[i].t; /* handed over, freed with f */
    else {
      free(items[i].t.name);
      free(items[i].t.data);
      free(items[i].t.i64);
    }
  }
  free(items);
  return rc;
}

int safetensors_read(const char *path, safetensors_file *out) {
  if (!out) return err_set(DRV_EINVAL, "safetensors_read: NULL argument");
  memset(out, 0, sizeof *out);
  out->meta = calloc(1, sizeof *out->meta);
  if (!out->meta) return err_set(DRV_ENOMEM, "out of memory");
  if (!path) return err_set(DRV_EINVAL, "safetensors_read: NULL path");
  reader r = {path, open(path, O_RDONLY | O_CLOEXEC), 0, 0, 0, NULL};
  if (r.fd < 0) return err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(errno));
  struct stat st;
  int rc = fstat(r.fd, &st) < 0 ? err_set(DRV_EIO, "cannot read '%s': %s", path,
                                          strerror(errno))
           : !S_ISREG(st.st_mode) ? err_set(DRV_EINVAL, "cannot read '%s': not a regular file",
                                            path)
                                  : 0;
  r.size = (uint64_t)st.st_size;
  if (rc == 0) rc = read_all(&r, out);
  close(r.fd);
  return rc;
}

int safetensors_read_mem(const char *name, const void *buf, size_t len, safetensors_file *out) {
  if (!out) return err_set(DRV_EINVAL, "safetensors_read_mem: NULL argument");
  memset(out, 0, sizeof *out);
  out->meta = calloc(1, sizeof *out->meta);
  if (!out->meta) return err_set(DRV_ENOMEM, "out of memory");
  if (!buf && len) return err_set(DRV_EINVAL, "safetensors_read_mem: NULL bytes");
  reader r = {name ? name : "(memory)", -1, (uint64_t)len, 0, 0, buf ? buf : (const void *)""};
  return read_all(&r, out);
}

void safetensors_free(safetensors_file *f) {
  if (!f) return;
  for (size_t i = 0; i < f->n; i++) {
    free(f->tensors[i].name);
    free(f->tensors[i].data);
    free(f->tensors[i].i64);
  }
  free(f->tensors);
  for (size_t i = 0; f->meta && f->meta[i]; i++) free(f->meta[i]);
  free(f->meta);
  memset(f, 0, sizeof *f);
}

const char *safetensors_meta(const safetensors_file *f, const char *key) {
  for (size_t i = 0; f && f->meta && key && f->meta[i]; i += 2)
    if (strcmp(f->meta[i], key) == 0) return f->meta[i + 1];
  return NULL;
}

const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name) {
  for (size_t i = 0; f && name && i < f->n; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}
