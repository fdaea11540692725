/* safetensors.c - writing and reading safetensors files (see safetensors.h).
 *
 * The writer builds the header with jansson, pads it with spaces to a
 * multiple of 8 as the reference implementation does, and streams each
 * tensor's elements (F32, or I64 for ids) straight from the caller's memory
 * into a temporary file that is then fsynced and renamed into place. The
 * reader is safetensors_read.c.
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

/* Reverses the bytes of n elements of el (4 or 8) bytes, in place. */
static void swap_elems(void *p, size_t n, size_t el) {
  if (el == 8) {
    uint64_t *w = p;
    for (size_t i = 0; i < n; i++) w[i] = __builtin_bswap64(w[i]);
  } else {
    uint32_t *w = p;
    for (size_t i = 0; i < n; i++) w[i] = __builtin_bswap32(w[i]);
  }
}

/* ============================== writing ================================== */

/* Orders entries as the reference writer does: by dtype, larger first (its
 * Dtype enum orders I64 after F32 and it sorts descending), then by name;
 * strcmp compares as unsigned bytes, like Rust's String ordering. */
static int cmp_entry_name(const void *a, const void *b) {
  const safetensors_entry *x = *(const safetensors_entry *const *)a;
  const safetensors_entry *y = *(const safetensors_entry *const *)b;
  if ((x->i64 != NULL) != (y->i64 != NULL)) return x->i64 ? -1 : 1;
  return strcmp(x->name, y->name);
}

static size_t entry_elem(const safetensors_entry *e) { return e->i64 ? 8 : 4; }
static const void *entry_ptr(const safetensors_entry *e) {
  return e->i64 ? (const void *)e->i64 : (const void *)e->data;
}

/* Bytes of one entry, checking its shape. */
static int entry_bytes(const char *path, const safetensors_entry *e, uint64_t *bytes) {
  if (!e->name || !*e->name || strcmp(e->name, "__metadata__") == 0)
    return err_set(DRV_EINVAL, "cannot write '%s': a tensor name is empty or "
                   "\"__metadata__\"", path);
  if (e->ndim < 0 || e->ndim > SAFETENSORS_MAX_DIM || (e->ndim && !e->shape))
    return err_set(DRV_EINVAL, "cannot write '%s': tensor '%s' has %d dimensions (0..%d)",
                   path, e->name, e->ndim, SAFETENSORS_MAX_DIM);
  size_t n = entry_elem(e);
  for (int d = 0; d < e->ndim; d++)
    if (e->shape[d] < 0 || !util_mul_ok(n, (size_t)e->shape[d], &n))
      return err_set(DRV_ERANGE, "cannot write '%s': tensor '%s' has a negative or too "
                     "large size", path, e->name);
  if (n && !entry_ptr(e))
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

/* One tensor's header entry: {"dtype":"F32","shape":[...],"data_offsets":[b,e]}
 * (or "I64"). */
static json_t *entry_json(const safetensors_entry *e, uint64_t begin, uint64_t end) {
  json_t *shape = json_array();
  for (int d = 0; shape && d < e->ndim; d++)
    if (json_array_append_new(shape, json_integer(e->shape[d])) < 0) {
      json_decref(shape);
      return NULL;
    }
  return json_pack("{s:s, s:o, s:[I,I]}", "dtype", e->i64 ? "I64" : "F32", "shape", shape, "data_offsets",
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

/* An entry's elements as little-endian bytes: straight from memory on a
 * little-endian host, byte-swapped through a small buffer otherwise. */
static void write_entry(afile *f, const safetensors_entry *e, size_t count) {
  size_t el = entry_elem(e);
  const uint8_t *data = entry_ptr(e);
  if (host_is_le()) {
    afile_write(f, data, count * el);
    return;
  }
  uint32_t buf[SWAP_CHUNK];
  size_t per = sizeof buf / el;
  while (count) {
    size_t k = count < per ? count : per;
    memcpy(buf, data, k * el);
    swap_elems(buf, k, el);
    if (afile_write(f, buf, k * el) < 0) return;
    data += k * el;
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
static size_t entry_nbytes(const safetensors_entry *e) { return entry_count(e) * entry_elem(e); }

/* Feeds h the file's bytes [begin, end) from the parts in memory. */
static void hash_range(const file_parts *fp, sha256_ctx *h, uint64_t begin, uint64_t end) {
  uint64_t at = 0;
  for (size_t p = 0; p < fp->n + 2 && at < end; p++) {
    const void *data = p == 0 ? (const void *)fp->len8 : p == 1 ? (const void *)fp->header
                                                                : entry_ptr(fp->order[p - 2]);
    uint64_t len = p == 0 ? 8 : p == 1 ? fp->hlen : entry_nbytes(fp->order[p - 2]);
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
  for (size_t i = 0; i < fp->n; i++) fp->size += entry_nbytes(fp->order[i]);
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
  for (size_t i = 0; i < n && !f.err; i++) write_entry(&f, order[i], entry_count(order[i]));
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
    size_t b = entry_nbytes(order[i]); /* bounded by entry_bytes */
    if (b > SIZE_MAX - total) return err_set(DRV_ERANGE, "cannot encode '%s': too large", name);
    total += b;
  }
  uint8_t *p = *buf = malloc(total);
  if (!p) return err_set(DRV_ENOMEM, "cannot encode '%s': out of memory for %zu bytes", name, total);
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  memcpy(p + 8, header, hlen);
  size_t at = 8 + hlen;
  for (size_t i = 0; i < n; i++) {
    size_t count = entry_count(order[i]), el = entry_elem(order[i]);
    memcpy(p + at, entry_ptr(order[i]), count * el);
    if (!host_is_le()) swap_elems(p + at, count, el);
    at += count * el;
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
