/* data_bin.c - binary datasets: the element decoding the binary formats
 * share (IDX, in data_idx.c, is big-endian; .npy usually little-endian),
 * and the NumPy .npy reader (format 1.0/2.0/3.0, C order).
 *
 * It validates the whole header and requires the file length to be exactly
 * header + data before allocating; error messages name the file and the
 * byte offset where it went wrong.
 */
#include "data/data.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>

#include <jansson.h>

#include "data/data_int.h"
#include "base/err.h"
#include "base/webhdfs.h"

/* ======================================================================
 * Binary element decoding (IDX is big-endian, .npy usually little-endian)
 * ==================================================================== */

uint64_t data__load_uint(const unsigned char *p, int size, bool big) {
  uint64_t v = 0;
  for (int i = 0; i < size; i++) v |= (uint64_t)p[big ? i : size - 1 - i] << (8 * (size - 1 - i));
  return v;
}

void data__decode(const unsigned char *src, data__el_type t, int64_t count, float *dst) {
  for (int64_t i = 0; i < count; i++, src += t.size) {
    uint64_t u = data__load_uint(src, t.size, t.big);
    float v;
    if (t.kind == EL_F && t.size == 4) {
      uint32_t w = (uint32_t)u;
      memcpy(&v, &w, 4);
    } else if (t.kind == EL_F) {
      double dv;
      memcpy(&dv, &u, 8);
      v = (float)dv;
    } else if (t.kind == EL_U) {
      v = (float)u;
    } else {
      /* Sign-extend from `size` bytes. */
      int shift = 64 - 8 * t.size;
      v = (float)((int64_t)(u << shift) >> shift);
    }
    dst[i] = v;
  }
}

int data__keep_shape(tensor *x, int ndim, const int64_t *dims) {
  if (ndim < 3 || ndim > TENSOR_MAXDIM) return 0;
  return tensor_resize(x, ndim, dims);
}

int data__check_finite(const char *path, const float *v, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows * cols; i++)
    if (!isfinite(v[i]))
      return err_set(DRV_EPARSE, "%s: row %lld, column %lld: %s is not a finite number", path,
                     (long long)(i / cols + 1), (long long)(i % cols + 1),
                     isnan(v[i]) ? "NaN" : v[i] > 0 ? "Inf" : "-Inf");
  return 0;
}

/* ======================================================================
 * NumPy .npy
 * ==================================================================== */

#define NPY_MAXDIM 32

typedef struct npy_file {
  filebuf fb;
  data__el_type type;
  char descr[16];
  int ndim;
  int64_t shape[NPY_MAXDIM];
  int64_t count;
  size_t data; /* offset of the first element */
} npy_file;

/* A cursor over the header dict; offsets in messages are file offsets. */
typedef struct npy_cur {
  const char *path, *base, *p, *end;
} npy_cur;

static int npy_bad(npy_cur *c, const char *what) {
  return err_set(DRV_EPARSE, "%s: byte %zu: malformed header: %s", c->path,
                 (size_t)(c->p - c->base), what);
}

static void npy_ws(npy_cur *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool npy_eat(npy_cur *c, char ch) {
  npy_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

/* A quoted Python string (no escapes: numpy never writes any here). */
static int npy_str(npy_cur *c, const char **s, size_t *len) {
  npy_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return npy_bad(c, "expected a string");
  char q = *c->p++;
  const char *close = memchr(c->p, q, (size_t)(c->end - c->p));
  if (!close) return npy_bad(c, "unterminated string");
  *s = c->p;
  *len = (size_t)(close - c->p);
  c->p = close + 1;
  return 0;
}

static int npy_shape(npy_cur *c, npy_file *f) {
  if (!npy_eat(c, '(')) return npy_bad(c, "shape: expected '('");
  f->ndim = 0;
  f->count = 1;
  for (;;) {
    if (npy_eat(c, ')')) return 0;
    npy_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return npy_bad(c, "shape: expected a number");
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *c->p - '0', &v))
        return err_set(DRV_ERANGE, "%s: byte %zu: shape too large", c->path,
                       (size_t)(c->p - c->base));
      c->p++;
    }
    npy_ws(c);
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 longs */
    if (f->ndim == NPY_MAXDIM) return npy_bad(c, "shape: too many dimensions");
    f->shape[f->ndim++] = v;
    if (__builtin_mul_overflow(f->count, v, &f->count) || f->count > DATA__MAX_ELEMS)
      return err_set(DRV_ERANGE, "%s: byte %zu: shape too large", c->path,
                     (size_t)(c->p - c->base));
    if (!npy_eat(c, ',') && !(npy_ws(c), c->p < c->end && *c->p == ')'))
      return npy_bad(c, "shape: expected ',' or ')'");
  }
}

/* Understands descr strings like "<f4", "|u1", ">i8". */
static bool npy_dtype(const char *s, data__el_type *t) {
  char order = s[0], kind = s[1];
  if (!order || !kind || !strchr("<>|=", order)) return false;
  char *end;
  long size = strtol(s + 2, &end, 10);
  if (*end || end == s + 2) return false;
  t->big = order == '>';
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  if (order == '=' || order == '|') t->big = true;
#endif
  t->size = (int)size;
  switch (kind) {
  case 'f': t->kind = EL_F; return size == 4 || size == 8;
  case 'i': t->kind = EL_I; return size == 1 || size == 2 || size == 4 || size == 8;
  case 'u': t->kind = EL_U; return size == 1 || size == 2 || size == 4 || size == 8;
  case 'b': t->kind = EL_U; return size == 1;
  default: return false;
  }
}

/* Parses the header dict {'descr': ..., 'fortran_order': ..., 'shape': ...}. */
static int npy_dict(npy_cur *c, npy_file *f) {
  bool have_descr = false, have_order = false, have_shape = false;
  int rc;
  if (!npy_eat(c, '{')) return npy_bad(c, "expected '{'");
  while (!npy_eat(c, '}')) {
    const char *key, *val;
    size_t klen, vlen;
    if ((rc = npy_str(c, &key, &klen)) < 0) return rc;
    if (!npy_eat(c, ':')) return npy_bad(c, "expected ':' after a key");
    npy_ws(c);
    if (klen == 5 && memcmp(key, "descr", 5) == 0) {
      if (c->p < c->end && *c->p == '[')
        return err_set(DRV_EUNSUPPORTED, "%s: byte %zu: unsupported dtype: structured arrays",
                       c->path, (size_t)(c->p - c->base));
      if ((rc = npy_str(c, &val, &vlen)) < 0) return rc;
      snprintf(f->descr, sizeof f->descr, "%.*s", (int)vlen, val);
      if (vlen >= sizeof f->descr || !npy_dtype(f->descr, &f->type))
        return err_set(DRV_EUNSUPPORTED, "%s: unsupported dtype '%.*s'", c->path,
                       (int)(vlen > DATA__QUOTE_MAX ? DATA__QUOTE_MAX : vlen), val);
      have_descr = true;
    } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0) {
      const char *at = c->p;
      if ((size_t)(c->end - c->p) >= 4 && memcmp(c->p, "True", 4) == 0)
        return err_set(DRV_EUNSUPPORTED,
                       "%s: byte %zu: fortran_order is True; only C order is supported",
                       c->path, (size_t)(at - c->base));
      if ((size_t)(c->end - c->p) < 5 || memcmp(c->p, "False", 5) != 0)
        return npy_bad(c, "fortran_order: expected True or False");
      c->p += 5;
      have_order = true;
    } else if (klen == 5 && memcmp(key, "shape", 5) == 0) {
      if ((rc = npy_shape(c, f)) < 0) return rc;
      have_shape = true;
    } else {
      return npy_bad(c, "unknown key");
    }
    if (!npy_eat(c, ',') && !(npy_ws(c), c->p < c->end && *c->p == '}'))
      return npy_bad(c, "expected ',' or '}'");
  }
  if (!have_descr || !have_order || !have_shape)
    return npy_bad(c, !have_descr ? "no 'descr'" : !have_order ? "no 'fortran_order'" : "no 'shape'");
  return 0;
}

/* Writes "(3, 4)" into buf. */
static const char *npy_shape_str(const npy_file *f, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < f->ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)f->shape[i]);
  if (k < n) snprintf(buf + k, n - k, f->ndim == 1 ? ",)" : ")");
  return buf;
}

/* Validates a .npy header in f->fb (at least the whole header) for a file
 * of `len` bytes: magic, version, header, exact length. */
static int npy_parse(const char *path, npy_file *f, size_t len) {
  const unsigned char *b = (const unsigned char *)f->fb.data;
  size_t have = f->fb.len;
  if (have < 6 || memcmp(b, "\x93NUMPY", 6) != 0)
    return err_set(DRV_EPARSE, "%s: byte 0: not a .npy file (bad magic)", path);
  if (have < 10) return err_set(DRV_EPARSE, "%s: byte %zu: file ends inside the header", path, len);
  size_t hlen, start;
  if (b[6] == 1) {
    hlen = (size_t)data__load_uint(b + 8, 2, false);
    start = 10;
  } else if (b[6] == 2 || b[6] == 3) {
    if (have < 12) return err_set(DRV_EPARSE, "%s: byte %zu: file ends inside the header", path, len);
    hlen = (size_t)data__load_uint(b + 8, 4, false);
    start = 12;
  } else {
    return err_set(DRV_EUNSUPPORTED, "%s: byte 6: unsupported .npy version %d.%d", path, b[6], b[7]);
  }
  if (hlen > have - start)
    return err_set(DRV_EPARSE, "%s: byte 8: header of %zu bytes runs past the end of the file",
                   path, hlen);
  npy_cur c = {path, f->fb.data, f->fb.data + start, f->fb.data + start + hlen};
  int rc = npy_dict(&c, f);
  if (rc < 0) return rc;
  f->data = start + hlen;
  char sh[128];
  if (f->count == 0)
    return err_set(DRV_EPARSE, "%s: empty array of shape %s", path, npy_shape_str(f, sh, sizeof sh));
  uint64_t want = f->data + (uint64_t)f->count * (uint64_t)f->type.size;
  if (len != want)
    return err_set(DRV_EPARSE, "%s: byte %llu: file is %zu bytes, expected %llu for shape %s of '%s'",
                   path, (unsigned long long)(len < want ? len : want), len,
                   (unsigned long long)want, npy_shape_str(f, sh, sizeof sh), f->descr);
  return 0;
}

/* Reads and validates a whole .npy file. */
static int npy_open(const char *path, npy_file *f) {
  int rc = data__read_all(path, &f->fb);
  return rc < 0 ? rc : npy_parse(path, f, f->fb.len);
}

/* Little-endian float32 in C order, the layout a tensor has: such an x is
 * memory-mapped rather than read, so only the rows used are ever read. */
static bool npy_mappable(const npy_file *f) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return false;
#else
  return f->type.kind == EL_F && f->type.size == 4 && !f->type.big && f->data % sizeof(float) == 0;
#endif
}

/* check_finite for a mapped file, read through a small buffer with pread:
 * the refusal of NaN and Inf stays the same as for a file read, while the
 * process never holds the rows (page cache is not its memory). */
static int check_finite_fd(const char *path, int fd, size_t at, int64_t count, int64_t cols) {
  enum { CHUNK = 1 << 18 }; /* floats per read: 1 MiB */
  float *buf = malloc(CHUNK * sizeof *buf);
  if (!buf) return err_set(DRV_ENOMEM, "out of memory");
  int rc = 0;
  for (int64_t done = 0; done < count && rc == 0;) {
    int64_t k = count - done < CHUNK ? count - done : CHUNK;
    ssize_t got = pread(fd, buf, (size_t)k * sizeof *buf, (off_t)(at + (size_t)done * sizeof *buf));
    if (got != (ssize_t)((size_t)k * sizeof *buf)) {
      rc = err_set(DRV_EIO, "cannot read '%s': %s", path, got < 0 ? strerror(errno) : "short read");
      break;
    }
    for (int64_t i = 0; i < k && rc == 0; i++)
      if (!isfinite(buf[i])) {
        int64_t e = done + i;
        rc = err_set(DRV_EPARSE, "%s: row %lld, column %lld: %s is not a finite number", path,
                     (long long)(e / cols + 1), (long long)(e % cols + 1),
                     isnan(buf[i]) ? "NaN" : buf[i] > 0 ? "Inf" : "-Inf");
      }
    done += k;
  }
  free(buf);
  return rc;
}

/* Maps x of a plain (not gzipped) regular .npy file of float32: 1 with
 * *x set, 0 when the file is not of that kind (the caller reads it), or a
 * negative code. Only the header is read. */
static int npy_map(const char *path, npy_file *f, tensor **x, bool check) {
  *x = NULL;
  if (webhdfs_is_url(path)) return 0; /* nothing to map: read (or, a worker, ranges) */
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(DRV_EIO, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  unsigned char head[12];
  int rc = 0;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 12 ||
      pread(fd, head, sizeof head, 0) != (ssize_t)sizeof head || memcmp(head, "\x93NUMPY", 6) != 0)
    goto out; /* a pipe, gzip, or something npy_open explains */
  size_t hlen = head[6] == 1 ? (size_t)data__load_uint(head + 8, 2, false) + 10
                             : (size_t)data__load_uint(head + 8, 4, false) + 12;
  if (hlen > (size_t)st.st_size || hlen > ((size_t)1 << 24)) goto out;
  if (!(f->fb.data = malloc(hlen + 1))) {
    rc = err_set(DRV_ENOMEM, "out of memory");
    goto out;
  }
  if (pread(fd, f->fb.data, hlen, 0) != (ssize_t)hlen) goto out;
  f->fb.data[hlen] = '\0';
  f->fb.len = hlen;
  if ((rc = npy_parse(path, f, (size_t)st.st_size)) < 0 || !npy_mappable(f) || f->ndim == 0) {
    rc = rc < 0 ? rc : 0;
    goto out;
  }
  if (check && (rc = check_finite_fd(path, fd, f->data, f->count, f->count / f->shape[0])) < 0)
    goto out;
  void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (base == MAP_FAILED) goto out; /* read it instead */
  int64_t rows = f->shape[0], dims[TENSOR_MAXDIM] = {rows, rows ? f->count / rows : 0};
  int nd = 2;
  if (f->ndim >= 3 && f->ndim <= TENSOR_MAXDIM) {
    nd = f->ndim;
    memcpy(dims, f->shape, (size_t)nd * sizeof *dims);
  }
  if (!(*x = tensor_map(base, (size_t)st.st_size, (int64_t)(f->data / sizeof(float)), nd, dims))) {
    munmap(base, (size_t)st.st_size);
    rc = DRV_ENOMEM;
    goto out;
  }
  rc = 1;
out:
  close(fd);
  if (rc <= 0) {
    free(f->fb.data);
    f->fb = (filebuf){NULL, 0};
  }
  return rc;
}

/* x of the .npy at x_path: mapped when it is little-endian float32, else
 * read and decoded into rows. *rows and *fx describe it. */
static int npy_x(const char *x_path, npy_file *fx, tensor **x, int64_t *rows, bool *mapped,
                 bool check) {
  int rc = npy_map(x_path, fx, x, check);
  if (rc < 0) return rc;
  *mapped = rc == 1;
  if (!*mapped && (rc = npy_open(x_path, fx)) < 0) return rc;
  if (fx->ndim == 0)
    return err_set(DRV_ESHAPE, "%s: x must have at least 1 dimension, shape is ()", x_path);
  *rows = fx->shape[0];
  if (*mapped) return 0;
  tensor *y;
  if ((rc = data__alloc_xy(x_path, *rows, fx->count / *rows, x, &y)) < 0) return rc;
  tensor_free(y);
  data__decode((const unsigned char *)fx->fb.data + fx->data, fx->type, fx->count, tensor_data(*x));
  if ((rc = data__keep_shape(*x, fx->ndim, fx->shape)) < 0) return rc;
  return data__check_finite(x_path, tensor_data(*x), *rows, fx->count / *rows);
}

int data_read_npy(const char *x_path, const char *y_path, dataset **out) {
  return data__read_npy(x_path, y_path, true, out);
}

int data__read_npy(const char *x_path, const char *y_path, bool check, dataset **out) {
  *out = NULL;
  npy_file fx = {0}, fy = {0};
  tensor *x = NULL, *y = NULL;
  char sh[128];
  int64_t rows = 0;
  bool mapped = false;
  int rc = npy_x(x_path, &fx, &x, &rows, &mapped, check);
  if (rc < 0) goto done;
  if (y_path) {
    if ((rc = npy_open(y_path, &fy)) < 0) goto done;
    if (fy.ndim != 1) {
      rc = err_set(DRV_ESHAPE, "%s: labels must be 1-D, shape is %s", y_path,
                   npy_shape_str(&fy, sh, sizeof sh));
      goto done;
    }
    if (fy.shape[0] != rows) {
      rc = err_set(DRV_ESHAPE, "%s: %lld labels but %s has %lld rows", y_path,
                   (long long)fy.shape[0], x_path, (long long)rows);
      goto done;
    }
  }
  if (!(y = tensor_new1(rows))) {
    rc = DRV_ENOMEM;
    goto done;
  }
  if (y_path) data__decode((const unsigned char *)fy.fb.data + fy.data, fy.type, rows, tensor_data(y));
  if (y_path && (rc = data__check_finite(y_path, tensor_data(y), rows, 1)) < 0) goto done;
  rc = data__wrap(x, y, x_path, out);
  x = y = NULL;
  if (rc == 0) {
    char ax[4096], ay[4096];
    data__set_recipe(*out, json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:b}", "format", "npy", "x",
                                     data__abspath(x_path, ax, sizeof ax), "x_given", x_path,
                                     "y", y_path ? data__abspath(y_path, ay, sizeof ay) : NULL,
                                     "y_given", y_path, "mapped", mapped));
  }
done:
  tensor_free(x);
  tensor_free(y);
  free(fx.fb.data);
  free(fy.fb.data);
  return rc;
}

/* ======================================================================
 * A worker's rows of a .npy on HDFS: byte ranges, not the whole file
 * ==================================================================== */

/* The header of the plain .npy df into f (f->fb holds it): 1 when it is
 * one, 0 when not (gzip, or something npy_open explains). */
static int npy_head_ranged(data_file *df, npy_file *f) {
  unsigned char head[12];
  if (df->gzip || df->size < 12) return 0;
  int rc = data_file_pread(df, head, sizeof head, 0);
  if (rc < 0) return rc;
  if (memcmp(head, "\x93NUMPY", 6) != 0) return 0;
  size_t hlen = head[6] == 1 ? (size_t)data__load_uint(head + 8, 2, false) + 10
                             : (size_t)data__load_uint(head + 8, 4, false) + 12;
  if (hlen > (uint64_t)df->size || hlen > ((size_t)1 << 24)) return 0;
  if (!(f->fb.data = malloc(hlen + 1))) return err_set(DRV_ENOMEM, "out of memory");
  f->fb.len = hlen;
  f->fb.data[hlen] = '\0';
  if ((rc = data_file_pread(df, f->fb.data, hlen, 0)) < 0) return rc;
  if ((rc = npy_parse(df->path, f, (size_t)df->size)) < 0) return rc;
  return f->ndim > 0 ? 1 : 0;
}

typedef struct npy_pick {
  int64_t row, at; /* a file row, and where it goes in x */
} npy_pick;

static int cmp_pick(const void *a, const void *b) {
  int64_t x = ((const npy_pick *)a)->row, y = ((const npy_pick *)b)->row;
  return (x > y) - (x < y);
}

/* x's rows p[0..k) (sorted by file row) decoded into x: rows within a
 * span (data_file_span) of each other are one read, so a strided shard
 * costs a few large OPENs, not one per row. */
static int npy_gather(data_file *df, const npy_file *f, const npy_pick *p, int64_t k, tensor *x) {
  int64_t cols = f->count / f->shape[0], rb = cols * f->type.size;
  int64_t per = (int64_t)data_file_span(df, (size_t)1 << 20) / rb;
  if (per < 1) per = 1;
  unsigned char *buf = malloc((size_t)(per * rb));
  if (!buf) return err_set(DRV_ENOMEM, "%s: out of memory", df->path);
  int rc = 0;
  for (int64_t i = 0; i < k && rc == 0;) {
    int64_t j = i;
    while (j + 1 < k && p[j + 1].row < p[i].row + per) j++;
    int64_t first = p[i].row, span = p[j].row - first + 1;
    rc = data_file_pread(df, buf, (size_t)(span * rb), (int64_t)f->data + first * rb);
    for (int64_t q = i; q <= j && rc == 0; q++)
      data__decode(buf + (p[q].row - first) * rb, f->type, cols, tensor_data(x) + p[q].at * cols);
    i = j + 1;
    if (rc == 0 && err_interrupted()) rc = data__interrupted(df->path);
  }
  free(buf);
  return rc;
}

/* The labels of rows[0..k) from the .npy at y_path (read whole: one value
 * a row), n of them expected, into y. */
static int npy_labels(const char *y_path, const char *x_path, int64_t n, const int64_t *rows,
                      int64_t k, tensor *y) {
  npy_file fy = {0};
  char sh[128];
  int rc = npy_open(y_path, &fy);
  if (rc == 0 && fy.ndim != 1)
    rc = err_set(DRV_ESHAPE, "%s: labels must be 1-D, shape is %s", y_path,
                 npy_shape_str(&fy, sh, sizeof sh));
  if (rc == 0 && fy.shape[0] != n)
    rc = err_set(DRV_ESHAPE, "%s: %lld labels but %s has %lld rows", y_path,
                 (long long)fy.shape[0], x_path, (long long)n);
  float *all = rc == 0 ? malloc((size_t)n * sizeof *all) : NULL;
  if (rc == 0 && !all) rc = err_set(DRV_ENOMEM, "%s: out of memory", y_path);
  if (rc == 0) data__decode((const unsigned char *)fy.fb.data + fy.data, fy.type, n, all);
  for (int64_t j = 0; rc == 0 && j < k; j++) tensor_data(y)[j] = all[rows[j]];
  if (rc == 0) rc = data__check_finite(y_path, tensor_data(y), k, 1);
  free(all);
  free(fy.fb.data);
  return rc;
}

/* Picks rows[0..k) of x (n rows) in file order; sorted copy in *out. */
static int npy_picks(const char *path, const int64_t *rows, int64_t k, int64_t n, npy_pick **out) {
  npy_pick *p = malloc((size_t)(k ? k : 1) * sizeof *p);
  if (!p) return err_set(DRV_ENOMEM, "%s: out of memory", path);
  for (int64_t j = 0; j < k; j++) {
    if (rows[j] < 0 || rows[j] >= n) {
      free(p);
      return err_set(DRV_EINVAL, "%s: row %lld of %lld: a worker must see the same file", path,
                     (long long)rows[j] + 1, (long long)n);
    }
    p[j] = (npy_pick){rows[j], j};
  }
  qsort(p, (size_t)k, sizeof *p, cmp_pick);
  *out = p;
  return 0;
}

int data__npy_rows(const char *x_path, const char *y_path, const int64_t *rows, int64_t k,
                   int64_t n, dataset **out) {
  *out = NULL;
  data_file df;
  npy_file fx = {0};
  npy_pick *p = NULL;
  tensor *x = NULL, *y = NULL;
  int rc = data_file_open(&df, x_path);
  int ranged = rc == 0 ? npy_head_ranged(&df, &fx) : rc;
  if (ranged == 0) { /* gzip: the whole file, then the rows */
    data_file_close(&df);
    free(fx.fb.data);
    dataset *base = NULL;
    rc = data__read_npy(x_path, y_path, false, &base);
    if (rc == 0) rc = data_subset(base, rows, k, out);
    data_free(base);
    return rc;
  }
  rc = ranged < 0 ? ranged : 0;
  if (rc == 0 && fx.shape[0] != n)
    rc = err_set(DRV_EINVAL, "%s: has %lld rows now, %lld when it was first read: a worker must "
                 "see the same file", x_path, (long long)fx.shape[0], (long long)n);
  if (rc == 0) rc = npy_picks(x_path, rows, k, n, &p);
  if (rc == 0) rc = data__alloc_xy(x_path, k, fx.count / n, &x, &y);
  if (rc == 0) rc = npy_gather(&df, &fx, p, k, x);
  if (rc == 0 && y_path) rc = npy_labels(y_path, x_path, n, rows, k, y);
  int64_t dims[NPY_MAXDIM];
  memcpy(dims, fx.shape, sizeof dims);
  dims[0] = k;
  if (rc == 0) rc = data__keep_shape(x, fx.ndim, dims);
  data_file_close(&df);
  free(fx.fb.data);
  free(p);
  if (rc < 0) {
    tensor_free(x);
    tensor_free(y);
    return rc;
  }
  return data__wrap(x, y, x_path, out);
}
