/* safetensors.c - writing and reading safetensors files (see safetensors.h).
 *
 * The writer builds the header with jansson, pads it with spaces to a
 * multiple of 8 as the reference implementation does, and streams each
 * tensor's floats straight from the caller's memory into a temporary file
 * that is then fsynced and renamed into place. The reader trusts nothing:
 * the file may be truncated, bit-flipped or written by another program, so
 * every length is bounded by the file's size before it is used, and the
 * tensors must tile the data exactly.
 */
#include "base/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/afile.h"
#include "base/err.h"
#include "base/manifest.h"
#include "base/sha256.h"
#include "base/util.h"

/* Swapping through a buffer of this many floats on a big-endian host. */
#define SWAP_CHUNK 16384
/* Threads that hash a big file's chunks as it is written (the writer is
 * one more): on 2 cores, two hash streams keep up with an fsync'd write. */
#define HASH_THREADS 2

static int host_is_le(void) {
  const uint16_t one = 1;
  uint8_t b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static uint32_t bswap32(uint32_t x) { return __builtin_bswap32(x); }

/* ============================== writing ================================== */

/* Orders entries by name, as the reference writer does for tensors of one
 * dtype; strcmp compares as unsigned bytes, like Rust's String ordering. */
static int cmp_entry_name(const void *a, const void *b) {
  const safetensors_entry *x = *(const safetensors_entry *const *)a;
  const safetensors_entry *y = *(const safetensors_entry *const *)b;
  return strcmp(x->name, y->name);
}

/* Bytes of one F32 entry, checking its shape. */
static int entry_bytes(const char *path, const safetensors_entry *e, uint64_t *bytes) {
  if (!e->name || !*e->name || strcmp(e->name, "__metadata__") == 0)
    return err_set(DRV_EINVAL, "cannot write '%s': a tensor name is empty or "
                   "\"__metadata__\"", path);
  if (e->ndim < 0 || e->ndim > SAFETENSORS_MAX_DIM || (e->ndim && !e->shape))
    return err_set(DRV_EINVAL, "cannot write '%s': tensor '%s' has %d dimensions (0..%d)",
                   path, e->name, e->ndim, SAFETENSORS_MAX_DIM);
  size_t n = sizeof(float);
  for (int d = 0; d < e->ndim; d++)
    if (e->shape[d] < 0 || !util_mul_ok(n, (size_t)e->shape[d], &n))
      return err_set(DRV_ERANGE, "cannot write '%s': tensor '%s' has a negative or too "
                     "large size", path, e->name);
  if (n && !e->data)
    return err_set(DRV_EINVAL, "cannot write '%s': tensor '%s' has no data", path, e->name);
  *bytes = n;
  return 0;
}

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The "__metadata__" object, keys sorted; NULL (with a message) on error. */
static json_t *meta_json(const char *path, const char *const *meta) {
  size_t n = 0;
  while (meta && meta[n]) {
    if (!meta[n + 1]) {
      err_set(DRV_EINVAL, "cannot write '%s': metadata key '%s' has no value", path, meta[n]);
      return NULL;
    }
    n += 2;
  }
  const char **keys = malloc((n / 2 + 1) * sizeof *keys);
  json_t *obj = json_object();
  if (!keys || !obj) goto oom;
  for (size_t i = 0; i < n / 2; i++) keys[i] = meta[2 * i];
  qsort(keys, n / 2, sizeof *keys, cmp_str_ptr);
  for (size_t i = 0; i < n / 2; i++) {
    size_t j = 0;
    while (meta[j] != keys[i]) j += 2;
    if ((i && strcmp(keys[i - 1], keys[i]) == 0) ||
        json_object_set_new(obj, keys[i], json_string(meta[j + 1])) < 0) {
      err_set(DRV_EINVAL, "cannot write '%s': metadata key '%s' is repeated or not UTF-8",
              path, keys[i]);
      free(keys);
      json_decref(obj);
      return NULL;
    }
  }
  free(keys);
  return obj;
oom:
  free(keys);
  json_decref(obj);
  err_set(DRV_ENOMEM, "cannot write '%s': out of memory", path);
  return NULL;
}

/* One tensor's header entry: {"dtype":"F32","shape":[...],"data_offsets":[b,e]}. */
static json_t *entry_json(const safetensors_entry *e, uint64_t begin, uint64_t end) {
  json_t *shape = json_array();
  for (int d = 0; shape && d < e->ndim; d++)
    if (json_array_append_new(shape, json_integer(e->shape[d])) < 0) {
      json_decref(shape);
      return NULL;
    }
  return json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape", shape, "data_offsets",
                   (json_int_t)begin, (json_int_t)end);
}

/* The padded header text (malloc'ed, length *len, a multiple of 8) for the
 * entries in `order`. */
static char *header_text(const char *path, const safetensors_entry *const *order, size_t n,
                         const char *const *meta, size_t *len) {
  json_t *root = json_object();
  if (!root) goto oom;
  if (meta && meta[0]) {
    json_t *m = meta_json(path, meta);
    if (!m) {
      json_decref(root);
      return NULL;
    }
    json_object_set_new(root, "__metadata__", m);
  }
  uint64_t off = 0, bytes = 0;
  for (size_t i = 0; i < n; i++) {
    entry_bytes(path, order[i], &bytes); /* checked already */
    json_t *e = entry_json(order[i], off, off + bytes);
    if (!e || json_object_set_new(root, order[i]->name, e) < 0) {
      json_decref(root);
      err_set(DRV_EINVAL, "cannot write '%s': tensor name '%s' is not valid UTF-8", path,
              order[i]->name);
      return NULL;
    }
    off += bytes;
  }
  char *text = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!text) goto oom;
  size_t k = strlen(text), padded = k + (8 - k % 8) % 8;
  char *out = realloc(text, padded + 1);
  if (!out) {
    free(text);
    goto oom;
  }
  memset(out + k, ' ', padded - k);
  out[padded] = '\0';
  *len = padded;
  return out;
oom:
  err_set(DRV_ENOMEM, "cannot write '%s': out of memory building the header", path);
  return NULL;
}

/* Floats as little-endian bytes: straight from memory on a little-endian
 * host, byte-swapped through a small buffer otherwise. */
static void write_floats(afile *f, const float *data, size_t count) {
  if (host_is_le()) {
    afile_write(f, data, count * sizeof *data);
    return;
  }
  uint32_t buf[SWAP_CHUNK];
  while (count) {
    size_t k = count < SWAP_CHUNK ? count : SWAP_CHUNK;
    memcpy(buf, data, k * sizeof *buf);
    for (size_t i = 0; i < k; i++) buf[i] = bswap32(buf[i]);
    if (afile_write(f, buf, k * sizeof *buf) < 0) return;
    data += k;
    count -= k;
  }
}

/* The file's bytes as they lie in memory (a little-endian host): the
 * length, the header, each tensor's floats. What the hashing thread reads
 * while the writer writes the same bytes. */
typedef struct file_parts {
  uint8_t len8[8];
  const char *header;
  size_t hlen;
  const safetensors_entry *const *order;
  size_t n;
  uint64_t size;      /* of the file */
  uint64_t chunk;     /* manifest_chunk_size(size); 0: one hash of the whole */
  uint64_t nchunks;
  _Atomic uint64_t next; /* the next chunk a hashing thread takes */
  char *hexes;        /* 64 hex digits per chunk */
  _Atomic int failed;
  char *digest;       /* the result (MANIFEST_DIGEST_MAX bytes), "" until done */
} file_parts;

static size_t entry_count(const safetensors_entry *e) {
  size_t count = 1;
  for (int d = 0; d < e->ndim; d++) count *= (size_t)e->shape[d];
  return count;
}

/* Feeds h the file's bytes [begin, end) from the parts in memory. */
static void hash_range(const file_parts *fp, sha256_ctx *h, uint64_t begin, uint64_t end) {
  uint64_t at = 0;
  for (size_t p = 0; p < fp->n + 2 && at < end; p++) {
    const void *data = p == 0 ? (const void *)fp->len8 : p == 1 ? (const void *)fp->header
                                                                : fp->order[p - 2]->data;
    uint64_t len = p == 0 ? 8 : p == 1 ? fp->hlen : entry_count(fp->order[p - 2]) * sizeof(float);
    uint64_t lo = begin > at ? begin : at, hi = end < at + len ? end : at + len;
    if (lo < hi) sha256_update(h, (const uint8_t *)data + (lo - at), (size_t)(hi - lo));
    at += len;
  }
}

/* A hashing thread: takes chunks in turn until none is left. */
static void *hash_chunks(void *arg) {
  file_parts *fp = arg;
  for (;;) {
    uint64_t i = atomic_fetch_add(&fp->next, 1);
    if (i >= fp->nchunks) return NULL;
    uint64_t begin = i * fp->chunk, end = begin + fp->chunk < fp->size ? begin + fp->chunk : fp->size;
    sha256_ctx h;
    if (sha256_init(&h) < 0) {
      atomic_store(&fp->failed, 1);
      return NULL;
    }
    hash_range(fp, &h, begin, end);
    char hex[65];
    sha256_hex(&h, hex);
    memcpy(fp->hexes + 64 * i, hex, 64);
  }
}

/* Hashes the file from memory: one SHA-256 of a small file, or its chunks
 * on up to HASH_THREADS threads (this one and helpers), into fp->digest. */
static void *hash_parts(void *arg) {
  file_parts *fp = arg;
  fp->digest[0] = '\0';
  fp->size = 8 + fp->hlen;
  for (size_t i = 0; i < fp->n; i++) fp->size += entry_count(fp->order[i]) * sizeof(float);
  fp->chunk = manifest_chunk_size(fp->size);
  fp->nchunks = fp->chunk ? (fp->size + fp->chunk - 1) / fp->chunk : 1;
  if (!fp->chunk) fp->chunk = fp->size ? fp->size : 1;
  if (!(fp->hexes = malloc(64 * fp->nchunks + 1))) return NULL;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int helpers = (int)((cpus > HASH_THREADS ? HASH_THREADS : cpus) - 1), started = 0;
  pthread_t th[HASH_THREADS];
  while (started < helpers && (uint64_t)started + 1 < fp->nchunks &&
         pthread_create(&th[started], NULL, hash_chunks, fp) == 0)
    started++;
  hash_chunks(fp);
  for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
  if (!atomic_load(&fp->failed)) {
    fp->hexes[64 * fp->nchunks] = '\0';
    if (fp->nchunks == 1 && fp->chunk >= fp->size)
      snprintf(fp->digest, MANIFEST_DIGEST_MAX, "%s", fp->hexes);
    else
      snprintf(fp->digest, MANIFEST_DIGEST_MAX, MANIFEST_CHUNKED "%llu:%s",
               (unsigned long long)fp->chunk, fp->hexes);
  }
  free(fp->hexes);
  fp->hexes = NULL;
  return NULL;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Header length, header, then each tensor's data, through a temporary
 * renamed over path (afile.h); see safetensors_write. With `fp`, threads
 * hash the same bytes meanwhile (little-endian hosts; fp->digest stays ""
 * otherwise, or when the thread cannot start). */
static int commit_file(const char *path, const char *header, size_t hlen,
                       const safetensors_entry *const *order, size_t n, file_parts *fp,
                       safetensors_times *tm) {
  double t0 = now_ms();
  afile f;
  int rc = afile_open(&f, path);
  if (rc < 0) return rc;
  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  pthread_t th;
  bool hashing = false;
  if (fp && host_is_le()) {
    char *digest = fp->digest;
    *fp = (file_parts){.header = header, .hlen = hlen, .order = order, .n = n, .digest = digest};
    memcpy(fp->len8, len8, 8);
    hashing = pthread_create(&th, NULL, hash_parts, fp) == 0;
  }
  afile_write(&f, len8, 8);
  afile_write(&f, header, hlen);
  for (size_t i = 0; i < n && !f.err; i++) write_floats(&f, order[i]->data, entry_count(order[i]));
  double t1 = now_ms();
  /* The fsync overlaps the hash (from memory): waiting for the hash first
   * made the write take the hash's time plus the fsync's. */
  rc = afile_commit(&f, 0644);
  double t2 = now_ms();
  if (hashing) pthread_join(th, NULL);
  if (tm) *tm = (safetensors_times){t1 - t0, t2 - t1, now_ms() - t2};
  return rc;
}

static int write_file(const char *path, const safetensors_entry *t, size_t n,
                      const char *const *meta, file_parts *fp, safetensors_times *tm);

int safetensors_write(const char *path, const safetensors_entry *t, size_t n,
                      const char *const *meta) {
  return write_file(path, t, n, meta, NULL, NULL);
}

int safetensors_write_hashed(const char *path, const safetensors_entry *t, size_t n,
                             const char *const *meta, char *digest, uint64_t *size,
                             safetensors_times *times) {
  file_parts fp = {.digest = digest};
  digest[0] = '\0';
  int rc = write_file(path, t, n, meta, &fp, times);
  if (rc < 0) return rc;
  if (digest[0]) { /* hashed from memory as it was written */
    *size = fp.size;
    return 0;
  }
  return manifest_hash_file(path, digest, size); /* digest has room for 65 */
}

int safetensors_layout(const char *name, const safetensors_entry *t, size_t n,
                       const char *const *meta, const safetensors_entry ***order, char **header,
                       size_t *hlen) {
  *header = NULL, *hlen = 0;
  const safetensors_entry **o = *order = malloc((n ? n : 1) * sizeof *o);
  if (!o) return err_set(DRV_ENOMEM, "cannot write '%s': out of memory", name);
  int rc = 0;
  uint64_t bytes;
  for (size_t i = 0; i < n && rc == 0; i++) {
    o[i] = &t[i];
    rc = entry_bytes(name, &t[i], &bytes);
  }
  if (rc == 0) qsort(o, n, sizeof *o, cmp_entry_name);
  for (size_t i = 1; i < n && rc == 0; i++)
    if (strcmp(o[i - 1]->name, o[i]->name) == 0)
      rc = err_set(DRV_EINVAL, "cannot write '%s': two tensors are named '%s'", name, o[i]->name);
  if (rc == 0 && !(*header = header_text(name, o, n, meta, hlen))) rc = DRV_EINVAL;
  if (rc < 0) {
    free(o);
    *order = NULL;
  }
  return rc;
}

static int write_file(const char *path, const safetensors_entry *t, size_t n,
                      const char *const *meta, file_parts *fp, safetensors_times *tm) {
  if (!path || (n && !t)) return err_set(DRV_EINVAL, "safetensors_write: NULL argument");
  const safetensors_entry **order;
  char *header;
  size_t hlen;
  int rc = safetensors_layout(path, t, n, meta, &order, &header, &hlen);
  if (rc == 0) rc = commit_file(path, header, hlen, order, n, fp, tm);
  free(header);
  free(order);
  return rc;
}

static int encode_into(const char *name, const safetensors_entry *const *order, size_t n,
                       const char *header, size_t hlen, uint8_t **buf, size_t *len) {
  size_t total = 8 + hlen;
  for (size_t i = 0; i < n; i++) {
    size_t b = entry_count(order[i]) * sizeof(float); /* bounded by entry_bytes */
    if (b > SIZE_MAX - total) return err_set(DRV_ERANGE, "cannot encode '%s': too large", name);
    total += b;
  }
  uint8_t *p = *buf = malloc(total);
  if (!p) return err_set(DRV_ENOMEM, "cannot encode '%s': out of memory for %zu bytes", name, total);
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  memcpy(p + 8, header, hlen);
  size_t at = 8 + hlen;
  for (size_t i = 0; i < n; i++) {
    size_t count = entry_count(order[i]);
    memcpy(p + at, order[i]->data, count * sizeof(float));
    if (!host_is_le()) {
      uint32_t *w = (uint32_t *)(void *)(p + at);
      for (size_t k = 0; k < count; k++) w[k] = bswap32(w[k]);
    }
    at += count * sizeof(float);
  }
  *len = total;
  return 0;
}

int safetensors_encode(const char *name, const safetensors_entry *t, size_t n,
                       const char *const *meta, uint8_t **buf, size_t *len, char *digest) {
  *buf = NULL, *len = 0, digest[0] = '\0';
  const safetensors_entry **order;
  char *header;
  size_t hlen;
  int rc = safetensors_layout(name, t, n, meta, &order, &header, &hlen);
  /* The hash (a big file's chunks on two threads) from the entries while
   * the copy is made, as a hashed write does. */
  file_parts fp = {.digest = digest};
  pthread_t th;
  bool hashing = false;
  if (rc == 0 && host_is_le()) {
    fp = (file_parts){.header = header, .hlen = hlen, .order = order, .n = n, .digest = digest};
    for (int i = 0; i < 8; i++) fp.len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    hashing = pthread_create(&th, NULL, hash_parts, &fp) == 0;
  }
  if (rc == 0) rc = encode_into(name, order, n, header, hlen, buf, len);
  if (hashing) pthread_join(th, NULL);
  free(header);
  free(order);
  if (rc == 0 && digest[0]) return 0;
  manifest_digest d;
  if (rc == 0 && (rc = manifest_digest_begin(&d, *len)) == 0 &&
      (rc = manifest_digest_update(&d, *buf, *len)) == 0)
    rc = manifest_digest_end(&d, digest);
  if (rc < 0) {
    free(*buf);
    *buf = NULL, *len = 0;
  }
  return rc;
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
