/* data_sparse.c - a dataset's sparse part: the categorical hash, building
 * the CSR row by row as a reader parses, gathering rows for the row
 * operations, checks, and the per-batch nn_sparse of data_iter.
 *
 * The hash is part of the file format users rely on (a model trained on
 * one host predicts on ids hashed on another), so it is fixed and written
 * out here byte by byte rather than taken from a library that may change.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "data/data_int.h"
#include "base/err.h"
#include "base/le.h"
#include "base/util.h"

/* ============================== the hash ================================= */

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= FNV_PRIME;
  }
  return h;
}

/* fmix64: FNV-1a's low bits are weak; the finalizer spreads every input
 * bit, so `mod buckets` of any size is uniform. */
uint64_t data_hash_id(uint32_t column, const char *s, size_t len, uint64_t buckets) {
  unsigned char col[4] = {(unsigned char)column, (unsigned char)(column >> 8),
                          (unsigned char)(column >> 16), (unsigned char)(column >> 24)};
  uint64_t h = fnv1a(FNV_OFFSET, col, 4);
  h = fnv1a(h, (const unsigned char *)s, len);
  return util_fmix64(h) % buckets;
}

bool data_has_sparse(const dataset *d) { return d && d->sp.bound > 0; }

/* ============================== building ================================= */

void data__sparse_free(data_sparse *s) {
  free(s->ptr);
  free(s->ids);
  free(s->vals);
  s->ptr = NULL;
  s->ids = NULL;
  s->vals = NULL;
}

/* Room for `rows` rows and `nnz` entries in b. */
static bool sp_reserve(data_spbuild *b, int64_t rows, int64_t nnz) {
  if (rows + 1 > b->cap_rows) {
    int64_t c = b->cap_rows ? b->cap_rows * 2 : 1024;
    while (c < rows + 1) c *= 2;
    int64_t *np = realloc(b->s.ptr, (size_t)c * sizeof *np);
    if (!np) return false;
    b->s.ptr = np;
    b->cap_rows = c;
  }
  if (nnz > b->cap) {
    int64_t c = b->cap ? b->cap * 2 : 4096;
    while (c < nnz) c *= 2;
    uint64_t *ni = realloc(b->s.ids, (size_t)c * sizeof *ni);
    if (ni) b->s.ids = ni;
    float *nv = b->s.weighted ? realloc(b->s.vals, (size_t)c * sizeof *nv) : NULL;
    if (nv) b->s.vals = nv;
    if (!ni || (b->s.weighted && !nv)) return false;
    b->cap = c;
  }
  return true;
}

int data__sp_add(data_spbuild *b, const char *path, const data__ids *r) {
  int64_t at = b->rows ? b->s.ptr[b->rows] : 0;
  if (!sp_reserve(b, b->rows + 1, at + r->n))
    return err_set(DRV_ENOMEM, "%s: out of memory for the sparse part", path);
  b->s.ptr[0] = 0;
  memcpy(b->s.ids + at, r->ids, (size_t)r->n * sizeof *r->ids);
  for (int64_t k = 0; b->s.weighted && k < r->n; k++) b->s.vals[at + k] = r->vals ? r->vals[k] : 1;
  b->s.ptr[++b->rows] = at + r->n;
  return 0;
}

void data__sp_take(data_spbuild *b, data_sparse *dst) {
  if (!b->s.ptr && (b->s.ptr = malloc(sizeof *b->s.ptr))) b->s.ptr[0] = 0;
  data__sparse_free(dst);
  *dst = b->s;
  memset(b, 0, sizeof *b);
}

/* dst's arrays for `rows` rows and nnz entries (values when weighted). */
static int sparse_alloc(data_sparse *dst, int64_t rows, int64_t nnz) {
  dst->ptr = malloc((size_t)(rows + 1) * sizeof *dst->ptr);
  dst->ids = malloc((size_t)(nnz ? nnz : 1) * sizeof *dst->ids);
  dst->vals = dst->weighted ? malloc((size_t)(nnz ? nnz : 1) * sizeof *dst->vals) : NULL;
  if (!dst->ptr || !dst->ids || (dst->weighted && !dst->vals)) {
    data__sparse_free(dst);
    return err_set(DRV_ENOMEM, "out of memory for %lld sparse entries", (long long)nnz);
  }
  return 0;
}

int data__sparse_gather(const data_sparse *src, const int64_t *idx, int64_t k, data_sparse *dst) {
  *dst = (data_sparse){.fields = src->fields, .weighted = src->weighted, .bound = src->bound};
  if (!src->bound) return 0;
  int64_t nnz = 0;
  for (int64_t i = 0; i < k; i++) nnz += src->ptr[idx[i] + 1] - src->ptr[idx[i]];
  if (sparse_alloc(dst, k, nnz) < 0) return DRV_ENOMEM;
  dst->ptr[0] = 0;
  for (int64_t i = 0; i < k; i++) {
    int64_t a = src->ptr[idx[i]], m = src->ptr[idx[i] + 1] - a, at = dst->ptr[i];
    memcpy(dst->ids + at, src->ids + a, (size_t)m * sizeof *dst->ids);
    if (src->weighted) memcpy(dst->vals + at, src->vals + a, (size_t)m * sizeof *dst->vals);
    dst->ptr[i + 1] = at + m;
  }
  return 0;
}

int data__sparse_copy(const data_sparse *src, int64_t n, data_sparse *dst) {
  *dst = (data_sparse){.fields = src->fields, .weighted = src->weighted, .bound = src->bound};
  if (!src->bound || !src->ptr) return 0;
  int64_t nnz = src->ptr[n];
  if (sparse_alloc(dst, n, nnz) < 0) return DRV_ENOMEM;
  memcpy(dst->ptr, src->ptr, (size_t)(n + 1) * sizeof *dst->ptr);
  memcpy(dst->ids, src->ids, (size_t)nnz * sizeof *dst->ids);
  if (src->weighted) memcpy(dst->vals, src->vals, (size_t)nnz * sizeof *dst->vals);
  return 0;
}

int data__sparse_check(const dataset *d, const char *op) {
  const data_sparse *s = &d->sp;
  if (!s->bound) return 0;
  if (!s->ptr || !s->ids || (s->weighted && !s->vals) || s->ptr[0] != 0)
    return err_set(DRV_EINVAL, "%s: dataset '%s' has an inconsistent sparse part", op, d->source);
  for (int64_t i = 0; i < d->n; i++) {
    int64_t m = s->ptr[i + 1] - s->ptr[i];
    if (m < 0 || (s->fields > 0 && m != s->fields))
      return err_set(DRV_EINVAL, "%s: dataset '%s': row %lld of the sparse part has %lld entries",
                     op, d->source, (long long)i + 1, (long long)m);
  }
  for (int64_t k = 0; k < s->ptr[d->n]; k++)
    if (s->ids[k] >= s->bound)
      return err_set(DRV_EINVAL, "%s: dataset '%s': id %llu is not below %llu", op, d->source,
                     (unsigned long long)s->ids[k], (unsigned long long)s->bound);
  return 0;
}

/* ============================== on the wire ============================== */

#define SP_HEAD (4 + 1 + 8 + 8)

/* The bytes of rows [r0, r0 + n) of the CSR s (vals NULL when
 * unweighted), their offsets from 0 on the wire. */
static int encode_rows(const data_sparse *s, int64_t r0, uint64_t n, const char *what,
                       uint8_t **out, size_t *len) {
  int64_t base = s->ptr[r0];
  uint64_t nnz = (uint64_t)(s->ptr[r0 + (int64_t)n] - base);
  uint64_t per = 8 + (s->weighted ? 4 : 0);
  if (n >= SIZE_MAX / 16 || nnz >= (SIZE_MAX - SP_HEAD - 8 * (n + 1)) / per)
    return err_set(DRV_ERANGE, "%s: its sparse part is too large to send", what);
  size_t total = SP_HEAD + 8 * (size_t)(n + 1) + (size_t)(per * nnz);
  uint8_t *p = malloc(total);
  if (!p) return err_set(DRV_ENOMEM, "out of memory for %zu bytes of sparse rows", total);
  le_put(p, (uint32_t)s->fields, 4);
  p[4] = s->weighted;
  le_put(p + 5, s->bound, 8);
  le_put(p + 13, nnz, 8);
  uint8_t *q = p + SP_HEAD;
  for (uint64_t i = 0; i <= n; i++, q += 8) le_put(q, (uint64_t)(s->ptr[r0 + (int64_t)i] - base), 8);
  for (uint64_t k = 0; k < nnz; k++, q += 8) le_put(q, s->ids[base + (int64_t)k], 8);
  if (s->weighted) memcpy(q, s->vals + base, 4 * (size_t)nnz);
  *out = p;
  *len = total;
  return 0;
}

int data_sparse_encode(const dataset *d, uint8_t **out, size_t *len) {
  return data_sparse_encode_rows(d, 0, d->n, out, len);
}

int data_sparse_encode_rows(const dataset *d, int64_t r0, int64_t rows, uint8_t **out,
                            size_t *len) {
  *out = NULL;
  *len = 0;
  const data_sparse *s = &d->sp;
  if (!s->bound) return 0;
  if (!s->ptr) return err_set(DRV_EINVAL, "dataset '%s': its sparse part is not loaded", d->source);
  if (r0 < 0 || rows < 0 || r0 > d->n || rows > d->n - r0)
    return err_set(DRV_ERANGE, "dataset '%s': rows %lld..%lld of %lld", d->source, (long long)r0,
                   (long long)(r0 + rows), (long long)d->n);
  char what[300];
  snprintf(what, sizeof what, "dataset '%s'", d->source);
  return encode_rows(s, r0, (uint64_t)rows, what, out, len);
}

int data_sparse_batch_encode(const nn_sparse *sp, uint64_t bound, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  if (!sp) return 0;
  int rc = nn_sparse_check(sp);
  if (rc < 0) return rc;
  uint64_t nnz = (uint64_t)sp->ptr[sp->rows], top = 0;
  for (uint64_t k = 0; k < nnz; k++) top = sp->ids[k] > top ? sp->ids[k] : top;
  if (bound == 0) bound = top + 1; /* the ids' own: each layer checks them against its size */
  if (top >= bound || bound > DATA_MAX_BUCKETS)
    return err_set(DRV_ERANGE, "a batch's id %llu is not below %llu", (unsigned long long)top,
                   (unsigned long long)(bound > DATA_MAX_BUCKETS ? DATA_MAX_BUCKETS : bound));
  /* encode_rows reads the arrays only: the casts lend them */
  data_sparse s = {.ptr = (int64_t *)sp->ptr, .ids = (uint64_t *)sp->ids,
                   .vals = (float *)sp->vals, .fields = sp->fields, .weighted = sp->vals != NULL,
                   .bound = bound};
  return encode_rows(&s, 0, (uint64_t)sp->rows, "a batch", out, len);
}

/* n rows of CSR from p into *out (owned), every offset, count and id
 * checked. */
static int decode_rows(data_sparse *out, uint64_t n, const uint8_t *p, size_t len,
                       const char *what) {
  if (len < SP_HEAD) return err_set(DRV_EPARSE, "%s: a sparse part of %zu bytes", what, len);
  data_sparse s = {.fields = (int)le_get(p, 4), .weighted = p[4] != 0,
                   .bound = le_get(p + 5, 8)};
  uint64_t nnz = le_get(p + 13, 8);
  uint64_t per = 8 + (s.weighted ? 4 : 0);
  if (s.fields < 0 || p[4] > 1 || s.bound == 0 || s.bound > DATA_MAX_BUCKETS ||
      n >= (len - SP_HEAD) / 8 || nnz > (len - SP_HEAD - 8 * (n + 1)) / per ||
      len != SP_HEAD + 8 * (n + 1) + per * nnz)
    return err_set(DRV_EPARSE, "%s: the sparse part's header does not match its %zu bytes (%llu "
                   "rows)", what, len, (unsigned long long)n);
  if (sparse_alloc(&s, (int64_t)n, (int64_t)nnz) < 0) return DRV_ENOMEM;
  const uint8_t *q = p + SP_HEAD;
  for (uint64_t i = 0; i <= n; i++, q += 8) s.ptr[i] = (int64_t)le_get(q, 8);
  for (uint64_t k = 0; k < nnz; k++, q += 8) s.ids[k] = le_get(q, 8);
  if (s.weighted) memcpy(s.vals, q, 4 * (size_t)nnz);
  int rc = 0;
  if (s.ptr[0] != 0 || (uint64_t)s.ptr[n] != nnz) rc = DRV_EPARSE;
  for (uint64_t i = 0; rc == 0 && i < n; i++) {
    int64_t m = s.ptr[i + 1] - s.ptr[i];
    if (s.ptr[i + 1] < s.ptr[i] || (s.fields > 0 && m != s.fields)) rc = DRV_EPARSE;
  }
  for (uint64_t k = 0; rc == 0 && k < nnz; k++)
    if (s.ids[k] >= s.bound) rc = DRV_EPARSE;
  if (rc < 0) {
    data__sparse_free(&s);
    return err_set(DRV_EPARSE, "%s: the sparse part's offsets or ids are inconsistent", what);
  }
  *out = s;
  return 0;
}

int data_sparse_decode(dataset *d, const uint8_t *p, size_t len, const char *what) {
  if (len == 0) return 0;
  return decode_rows(&d->sp, (uint64_t)d->n, p, len, what);
}

int data_sparse_batch_decode(data_sparse *s, int64_t rows, const uint8_t *p, size_t len,
                             const char *what) {
  *s = (data_sparse){0};
  if (len == 0) return 0;
  if (rows < 0) return err_set(DRV_EPARSE, "%s: ids for %lld rows", what, (long long)rows);
  return decode_rows(s, (uint64_t)rows, p, len, what);
}

void data_sparse_free(data_sparse *s) {
  if (!s) return;
  data__sparse_free(s);
  *s = (data_sparse){0};
}

nn_sparse data_sparse_view(const data_sparse *s, int64_t rows) {
  return (nn_sparse){.rows = rows, .ptr = s->ptr, .ids = s->ids,
                     .vals = s->weighted ? s->vals : NULL, .fields = s->fields};
}

/* ============================== batches ================================== */

int data__iter_sparse_fill(data_iter *it, const int64_t *idx, int64_t m) {
  const data_sparse *s = &it->d->sp;
  if (!s->bound) return 0;
  int64_t nnz = 0;
  for (int64_t i = 0; i < m; i++) nnz += s->ptr[idx[i] + 1] - s->ptr[idx[i]];
  int64_t rows = it->batch < it->d->n ? it->batch : it->d->n;
  if (!it->bptr && !(it->bptr = malloc((size_t)(rows + 1) * sizeof *it->bptr)))
    return err_set(DRV_ENOMEM, "batch: out of memory");
  if (nnz > it->bcap) {
    int64_t c = it->bcap ? it->bcap : 256;
    while (c < nnz) c *= 2;
    uint64_t *ni = realloc(it->bids, (size_t)c * sizeof *ni);
    if (ni) it->bids = ni;
    float *nv = s->weighted ? realloc(it->bvals, (size_t)c * sizeof *nv) : NULL;
    if (nv) it->bvals = nv;
    if (!ni || (s->weighted && !nv)) return err_set(DRV_ENOMEM, "batch: out of memory");
    it->bcap = c;
  }
  it->bptr[0] = 0;
  for (int64_t i = 0; i < m; i++) {
    int64_t a = s->ptr[idx[i]], k = s->ptr[idx[i] + 1] - a, at = it->bptr[i];
    memcpy(it->bids + at, s->ids + a, (size_t)k * sizeof *it->bids);
    if (s->weighted) memcpy(it->bvals + at, s->vals + a, (size_t)k * sizeof *it->bvals);
    it->bptr[i + 1] = at + k;
  }
  it->bsp = (nn_sparse){.rows = m, .ptr = it->bptr, .ids = it->bids,
                        .vals = s->weighted ? it->bvals : NULL, .fields = s->fields};
  return 0;
}

const nn_sparse *data_iter_sparse(const data_iter *it) {
  return it && it->d && it->d->sp.bound && it->bptr ? &it->bsp : NULL;
}
