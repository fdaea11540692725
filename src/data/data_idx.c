/* data_idx.c - IDX (the MNIST format, big-endian): images and labels files,
 * read whole (data_read_idx) or as a lazy dataset of files mode
 * (data_open_idx), whose rows each worker reads itself.
 *
 * data_open_idx streams each file once through a small buffer (data_file:
 * gzip or plain), checking the header, the exact length and, where the
 * values matter, every value (floats must be finite; labels give the
 * classes), and keeps a recipe: the paths, the files' sizes and the images'
 * dimensions. A worker then reads only its rows: of a plain file the byte
 * ranges that hold them (header + row * rowbytes, neighbours gathered into
 * reads of up to 1 MiB), of a gzip file the stream, skipping the rest.
 * Errors name the file and the byte, the same for both ways of reading.
 */
#include "data/data.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>

#include "data/data_file.h"
#include "data/data_int.h"
#include "base/err.h"
#include "base/webhdfs.h"

#define IDX_MAXDIM 16
/* Bytes of one read: a chunk streamed, a span of rows read at once. */
#define IDX_CHUNK ((size_t)1 << 20)

typedef struct idx_head {
  data__el_type type;
  int ndim;
  int64_t dims[IDX_MAXDIM];
  int64_t count;  /* product of dims */
  size_t header;  /* bytes before the data */
} idx_head;

static bool idx_type(int code, data__el_type *t) {
  switch (code) {
  case 0x08: *t = (data__el_type){EL_U, 1, true}; return true;
  case 0x09: *t = (data__el_type){EL_I, 1, true}; return true;
  case 0x0B: *t = (data__el_type){EL_I, 2, true}; return true;
  case 0x0C: *t = (data__el_type){EL_I, 4, true}; return true;
  case 0x0D: *t = (data__el_type){EL_F, 4, true}; return true;
  case 0x0E: *t = (data__el_type){EL_F, 8, true}; return true;
  default: return false;
  }
}

/* The header from its first `have` bytes at b (fewer than it needs only
 * when the file ends there): magic, type and dimensions. */
static int idx_parse(const char *path, const unsigned char *b, size_t have, idx_head *h) {
  if (have < 4)
    return err_set(DRV_EPARSE, "%s: byte %zu: file ends inside the 4-byte IDX magic", path, have);
  if (b[0] || b[1])
    return err_set(DRV_EPARSE, "%s: byte 0: bad magic 0x%02x%02x, expected 0x0000 (not an IDX file?)",
                   path, b[0], b[1]);
  if (!idx_type(b[2], &h->type))
    return err_set(DRV_EPARSE, "%s: byte 2: unknown IDX type 0x%02x", path, b[2]);
  h->ndim = b[3];
  if (h->ndim == 0 || h->ndim > IDX_MAXDIM)
    return err_set(DRV_EPARSE, "%s: byte 3: %d dimensions (expected 1 to %d)", path, h->ndim,
                   IDX_MAXDIM);
  h->header = 4 + 4 * (size_t)h->ndim;
  if (have < h->header)
    return err_set(DRV_EPARSE, "%s: byte %zu: file ends inside the dimensions", path, have);
  h->count = 1;
  for (int i = 0; i < h->ndim; i++) {
    size_t at = 4 + 4 * (size_t)i;
    h->dims[i] = (int64_t)data__load_uint(b + at, 4, true);
    if (h->dims[i] == 0)
      return err_set(DRV_EPARSE, "%s: byte %zu: dimension %d is 0", path, at, i);
    if (__builtin_mul_overflow(h->count, h->dims[i], &h->count) || h->count > DATA__MAX_ELEMS)
      return err_set(DRV_ERANGE, "%s: byte %zu: dimensions too large", path, at);
  }
  return 0;
}

/* A file of len bytes must be exactly header + data. */
static int idx_check_len(const char *path, const idx_head *h, uint64_t len) {
  uint64_t want = h->header + (uint64_t)h->count * (uint64_t)h->type.size;
  if (len < want)
    return err_set(DRV_EPARSE,
                   "%s: byte %llu: file ends early: expected %llu bytes (%zu-byte header + %lld "
                   "values of %d bytes)", path, (unsigned long long)len, (unsigned long long)want,
                   h->header, (long long)h->count, h->type.size);
  if (len > want)
    return err_set(DRV_EPARSE, "%s: byte %llu: %llu unexpected bytes after the data", path,
                   (unsigned long long)want, (unsigned long long)(len - want));
  return 0;
}

static int64_t row_bytes(const idx_head *h) {
  return h->count / h->dims[0] * h->type.size;
}

/* ============================== whole files ============================== */

static int labels_match(const char *images, const char *labels, const idx_head *im,
                        const idx_head *lb) {
  if (lb->ndim != 1)
    return err_set(DRV_ESHAPE, "%s: byte 3: labels must be 1-D, found %d dimensions", labels,
                   lb->ndim);
  if (lb->dims[0] != im->dims[0])
    return err_set(DRV_ESHAPE, "%s: byte 4: %lld labels but %s has %lld images", labels,
                   (long long)lb->dims[0], images, (long long)im->dims[0]);
  return 0;
}

/* Reads and validates a whole IDX file into fb. */
static int idx_load(const char *path, filebuf *fb, idx_head *h) {
  int rc = data__read_all(path, fb);
  if (rc == 0) rc = idx_parse(path, (const unsigned char *)fb->data, fb->len, h);
  return rc < 0 ? rc : idx_check_len(path, h, fb->len);
}

int data_read_idx(const char *images, const char *labels, dataset **out) {
  *out = NULL;
  filebuf fi = {0}, fl = {0};
  idx_head im, lb;
  tensor *x = NULL, *y = NULL;
  int rc = idx_load(images, &fi, &im);
  if (rc == 0 && labels && (rc = idx_load(labels, &fl, &lb)) == 0)
    rc = labels_match(images, labels, &im, &lb);
  if (rc < 0) goto done;
  int64_t rows = im.dims[0];
  if ((rc = data__alloc_xy(images, rows, im.count / rows, &x, &y)) < 0) goto done;
  data__decode((const unsigned char *)fi.data + im.header, im.type, im.count, tensor_data(x));
  if ((rc = data__keep_shape(x, im.ndim, im.dims)) < 0) goto done;
  if (labels)
    data__decode((const unsigned char *)fl.data + lb.header, lb.type, rows, tensor_data(y));
  if ((rc = data__check_finite(images, tensor_data(x), rows, im.count / rows)) < 0 ||
      (labels && (rc = data__check_finite(labels, tensor_data(y), rows, 1)) < 0))
    goto done;
  rc = data__wrap(x, y, images, out);
  x = y = NULL;
done:
  tensor_free(x);
  tensor_free(y);
  free(fi.data);
  free(fl.data);
  return rc;
}

/* ============================== streaming ================================ */

/* The header, read from the start of f's stream. */
static int read_head(data_file *f, idx_head *h) {
  unsigned char b[4 + 4 * IDX_MAXDIM];
  size_t got = 0, more = 0;
  int rc = data_file_read(f, b, 4, &got);
  if (rc == 0 && got == 4 && b[3] >= 1 && b[3] <= IDX_MAXDIM)
    rc = data_file_read(f, b + 4, 4 * (size_t)b[3], &more);
  return rc < 0 ? rc : idx_parse(f->path, b, got + more, h);
}

/* What a check of the values needs: the file, its columns, the labels'
 * classes (NULL for images). */
typedef struct idx_check {
  const char *path;
  const idx_head *h;
  data_classes *classes;
  float *v;          /* [IDX_CHUNK / size] decoded */
} idx_check;

/* Checks count elements at src, the first being element e0 of the file. */
static int check_values(idx_check *c, const unsigned char *src, int64_t count, int64_t e0) {
  data__decode(src, c->h->type, count, c->v);
  int64_t cols = c->h->count / c->h->dims[0];
  for (int64_t i = 0; i < count; i++) {
    float v = c->v[i];
    if (!isfinite(v))
      return err_set(DRV_EPARSE, "%s: row %lld, column %lld: %s is not a finite number", c->path,
                     (long long)((e0 + i) / cols + 1), (long long)((e0 + i) % cols + 1),
                     isnan(v) ? "NaN" : v > 0 ? "Inf" : "-Inf");
    if (c->classes) data__classes_add(c->classes, v);
  }
  return 0;
}

/* Streams the data after the header through the check (NULL: counted
 * only), then holds the length to the header's. */
static int stream_data(data_file *f, const idx_head *h, idx_check *c, unsigned char *buf) {
  uint64_t done = 0;
  int size = h->type.size;
  for (;;) {
    size_t got;
    int rc = data_file_read(f, buf, IDX_CHUNK, &got);
    if (rc < 0) return rc;
    if (c && (rc = check_values(c, buf, (int64_t)(got / (size_t)size),
                                (int64_t)(done / (uint64_t)size))) < 0)
      return rc;
    done += got;
    if (got < IDX_CHUNK) break;
    if (err_interrupted()) return data__interrupted(f->path);
  }
  return idx_check_len(f->path, h, h->header + done);
}

/* The coordinator's pass over one file: header, length and, for labels,
 * float types and gzip files (whose length is only known at their end),
 * every value. *bytes is the file's size as stored. */
static int scan_file(const char *path, idx_head *h, int64_t *bytes, data_classes *classes) {
  data_file f;
  int rc = data_file_open(&f, path);
  if (rc == 0) rc = read_head(&f, h);
  if (rc == 0 && !f.gzip) rc = idx_check_len(path, h, (uint64_t)f.size);
  bool values = classes || h->type.kind == EL_F;
  unsigned char *buf = NULL;
  float *v = NULL;
  if (rc == 0 && (values || f.gzip)) {
    buf = malloc(IDX_CHUNK);
    v = values ? malloc(IDX_CHUNK / (size_t)h->type.size * sizeof *v) : NULL;
    idx_check c = {path, h, classes, v};
    rc = buf && (v || !values) ? stream_data(&f, h, values ? &c : NULL, buf)
                               : err_set(DRV_ENOMEM, "%s: out of memory", path);
  }
  *bytes = f.size;
  free(buf);
  free(v);
  data_file_close(&f);
  return rc;
}

/* ============================== lazy dataset ============================= */

/* The recipe of the files as scanned. */
static json_t *idx_recipe(const char *images, const char *labels, const idx_head *im,
                          int64_t xbytes, int64_t ybytes) {
  char ax[4096], ay[4096];
  json_t *dims = json_array();
  for (int i = 0; dims && i < im->ndim; i++) json_array_append_new(dims, json_integer(im->dims[i]));
  return json_pack("{s:s, s:s, s:s, s:I, s:s?, s:s?, s:I, s:o, s:I}", "format", "idx", "x",
                   data__abspath(images, ax, sizeof ax), "x_given", images, "x_bytes",
                   (json_int_t)xbytes, "y", labels ? data__abspath(labels, ay, sizeof ay) : NULL,
                   "y_given", labels, "y_bytes", (json_int_t)ybytes, "dims", dims, "features",
                   (json_int_t)(im->count / im->dims[0]));
}

/* The lazy dataset of images (im) with `classes`, and its recipe. */
static int idx_lazy(const char *images, const char *labels, const idx_head *im, int64_t xbytes,
                    int64_t ybytes, int64_t classes, dataset **out) {
  dataset *d = calloc(1, sizeof *d);
  if (!d) return err_set(DRV_ENOMEM, "%s: out of memory", images);
  const char *base = strrchr(images, '/');
  snprintf(d->source, sizeof d->source, "%s", base ? base + 1 : images);
  d->n = im->dims[0];
  d->features = im->count / d->n;
  d->classes = classes;
  d->x_ndim = 2;
  d->x_shape[0] = d->y_shape[0] = d->n;
  d->x_shape[1] = d->features;
  if (im->ndim >= 3 && im->ndim <= TENSOR_MAXDIM) { /* data__keep_shape's rule */
    d->x_ndim = im->ndim;
    memcpy(d->x_shape, im->dims, (size_t)im->ndim * sizeof *im->dims);
  }
  d->y_ndim = 1;
  d->y_shape[1] = 1;
  data__set_recipe(d, idx_recipe(images, labels, im, xbytes, ybytes));
  if (!d->recipe) {
    data_free(d);
    return err_set(DRV_ENOMEM, "%s: out of memory", images);
  }
  *out = d;
  return 0;
}

/* Whether path is a file that can be read twice (not a pipe). A local
 * one is asked with stat: opening a FIFO to look would take its writer's
 * bytes (or let it finish) before the real read (idx-02 saw an empty pipe). */
static bool rereadable(const char *path) {
  struct stat st;
  if (!webhdfs_is_url(path)) return stat(path, &st) == 0 && S_ISREG(st.st_mode);
  data_file f;
  bool ok = data_file_open(&f, path) == 0 && f.size >= 0;
  data_file_close(&f);
  return ok;
}

int data_open_idx(const char *images, const char *labels, dataset **out) {
  *out = NULL;
  if (!rereadable(images) || (labels && !rereadable(labels)))
    return data_read_idx(images, labels, out); /* a pipe: held, as it cannot be read again */
  idx_head im, lb;
  int64_t xbytes = 0, ybytes = 0;
  data_classes cls = {0};
  int rc = scan_file(images, &im, &xbytes, NULL);
  if (rc == 0 && labels) rc = scan_file(labels, &lb, &ybytes, &cls);
  if (rc == 0 && labels) rc = labels_match(images, labels, &im, &lb);
  if (!labels) data__classes_add(&cls, 0); /* y is zeros, as data_read_idx's */
  int64_t classes = data__classes_end(&cls);
  return rc < 0 ? rc : idx_lazy(images, labels, &im, xbytes, ybytes, classes, out);
}

/* ============================== a worker's rows ========================== */

/* Opens the recipe's file `key` ("x" or "y") at path and reads its header:
 * the file must be the one the recipe was made from (same size, same
 * dimensions for the images, the recipe's row count for the labels). */
static int open_src(json_t *rec, const char *key, const char *path, data_file *f, idx_head *h) {
  char k[16];
  snprintf(k, sizeof k, "%s_bytes", key);
  int64_t bytes = json_integer_value(json_object_get(rec, k));
  int64_t n = json_integer_value(json_object_get(rec, "n"));
  int rc = data_file_open(f, path);
  if (rc == 0 && f->size != bytes)
    rc = err_set(DRV_EINVAL, "%s: %lld bytes here, %lld where the dataset was first read: a "
                 "worker must see the same file", path, (long long)f->size, (long long)bytes);
  if (rc == 0) rc = read_head(f, h);
  if (rc == 0 && !f->gzip) rc = idx_check_len(path, h, (uint64_t)f->size);
  if (rc < 0) return rc;
  json_t *dims = json_object_get(rec, "dims");
  int64_t cols = json_integer_value(json_object_get(rec, "features"));
  bool same = h->dims[0] == n && (key[0] == 'y' || ((size_t)h->ndim == json_array_size(dims) &&
                                                    h->count / n == cols));
  for (int i = 0; same && key[0] == 'x' && i < h->ndim; i++)
    same = h->dims[i] == json_integer_value(json_array_get(dims, (size_t)i));
  if (!same)
    return err_set(DRV_EINVAL, "%s: other dimensions than where the dataset was first read: a "
                   "worker must see the same file", path);
  return 0;
}

typedef int (*row_fn)(void *ud, int64_t row, const unsigned char *bytes);

/* A plain file: the kept rows by byte ranges, neighbours read together. */
static int walk_ranges(data_file *f, const idx_head *h, const uint8_t *keep, row_fn fn, void *ud,
                       unsigned char *buf, int64_t per) {
  int64_t n = h->dims[0], rb = row_bytes(h);
  int rc = 0;
  for (int64_t i = 0; i < n && rc == 0;) {
    if (!keep[i]) {
      i++;
      continue;
    }
    int64_t last = i, end = i + per < n ? i + per : n;
    for (int64_t j = i + 1; j < end; j++)
      if (keep[j]) last = j;
    rc = data_file_pread(f, buf, (size_t)((last - i + 1) * rb), (int64_t)h->header + i * rb);
    for (int64_t j = i; j <= last && rc == 0; j++)
      if (keep[j]) rc = fn(ud, j, buf + (j - i) * rb);
    i = last + 1;
    if (rc == 0 && err_interrupted()) rc = data__interrupted(f->path);
  }
  return rc;
}

/* A gzip file: streamed (past the header already), up to its last kept row. */
static int walk_stream(data_file *f, const idx_head *h, const uint8_t *keep, row_fn fn, void *ud,
                       unsigned char *buf, int64_t per) {
  int64_t n = h->dims[0], rb = row_bytes(h), last = n - 1;
  while (last >= 0 && !keep[last]) last--;
  int rc = 0;
  for (int64_t i = 0; i <= last && rc == 0; i += per) {
    int64_t k = i + per <= n ? per : n - i;
    size_t got;
    if ((rc = data_file_read(f, buf, (size_t)(k * rb), &got)) < 0) break;
    if (got < (size_t)(k * rb)) return idx_check_len(f->path, h, h->header + (uint64_t)(i * rb) + got);
    for (int64_t j = i; j < i + k && rc == 0; j++)
      if (keep[j]) rc = fn(ud, j, buf + (j - i) * rb);
    if (rc == 0 && err_interrupted()) rc = data__interrupted(f->path);
  }
  return rc;
}

/* fn for each kept row of the recipe's file `key` at path, in file order. */
static int walk(json_t *rec, const char *key, const char *path, const uint8_t *keep, row_fn fn,
                void *ud, idx_head *h) {
  data_file f;
  int rc = open_src(rec, key, path, &f, h);
  int64_t rb = rc == 0 ? row_bytes(h) : 1;
  int64_t per = (int64_t)(f.gzip ? IDX_CHUNK : data_file_span(&f, IDX_CHUNK)) / rb;
  if (per < 1) per = 1;
  unsigned char *buf = rc == 0 ? malloc((size_t)(per * rb)) : NULL;
  if (rc == 0 && !buf) rc = err_set(DRV_ENOMEM, "%s: out of memory", path);
  if (rc == 0)
    rc = f.gzip ? walk_stream(&f, h, keep, fn, ud, buf, per) : walk_ranges(&f, h, keep, fn, ud, buf, per);
  free(buf);
  data_file_close(&f);
  return rc;
}

/* Rows decoded into place: row r of the file goes to row at[r] of t. */
typedef struct place {
  const idx_head *h;
  const int64_t *at;
  float *t;
  int64_t cols;
} place;

static int place_row(void *ud, int64_t row, const unsigned char *bytes) {
  place *p = ud;
  data__decode(bytes, p->h->type, p->cols, p->t + p->at[row] * p->cols);
  return 0;
}

/* keep and at of the rows listed: at[r] the position of file row r. */
static int positions(int64_t n, const int64_t *rows, int64_t k, uint8_t **keep, int64_t **at) {
  *keep = calloc((size_t)n, 1);
  *at = malloc((size_t)n * sizeof **at);
  if (!*keep || !*at) return err_set(DRV_ENOMEM, "out of memory");
  for (int64_t j = 0; j < k; j++) {
    if (rows[j] < 0 || rows[j] >= n || (*keep)[rows[j]])
      return err_set(DRV_EPROTO, "files mode: the dataset's recipe is malformed (rows)");
    (*keep)[rows[j]] = 1;
    (*at)[rows[j]] = j;
  }
  return 0;
}

int data__idx_rows(json_t *rec, const char *x_path, const char *y_path, const int64_t *rows,
                   int64_t k, dataset **out) {
  *out = NULL;
  int64_t n = json_integer_value(json_object_get(rec, "n"));
  uint8_t *keep = NULL;
  int64_t *at = NULL;
  tensor *x = NULL, *y = NULL;
  idx_head hx, hy;
  int rc = n > 0 && n <= DATA__MAX_ELEMS ? positions(n, rows, k, &keep, &at)
                                         : err_set(DRV_EPROTO, "files mode: no rows in the recipe");
  int64_t cols = json_integer_value(json_object_get(rec, "features"));
  if (rc == 0) rc = data__alloc_xy(x_path, k, cols, &x, &y);
  place px = {&hx, at, x ? tensor_data(x) : NULL, cols}, py = {&hy, at, y ? tensor_data(y) : NULL, 1};
  if (rc == 0) rc = walk(rec, "x", x_path, keep, place_row, &px, &hx);
  if (rc == 0 && y_path) rc = walk(rec, "y", y_path, keep, place_row, &py, &hy);
  int64_t dims[IDX_MAXDIM];
  if (rc == 0) {
    memcpy(dims, hx.dims, sizeof dims);
    dims[0] = k;
    rc = data__keep_shape(x, hx.ndim, dims);
  }
  if (rc == 0) {
    rc = data__wrap(x, y, x_path, out);
    x = y = NULL;
  }
  tensor_free(x);
  tensor_free(y);
  free(keep);
  free(at);
  return rc;
}

/* Each row decoded and handed to a data__row_fn. */
typedef struct each {
  const idx_head *h;
  float *v;
  int64_t cols;
  data__row_fn fn;
  void *ud;
} each;

static int each_row(void *ud, int64_t row, const unsigned char *bytes) {
  each *e = ud;
  (void)row;
  data__decode(bytes, e->h->type, e->cols, e->v);
  return e->fn(e->ud, e->v, e->cols, 0, NULL);
}

int data__idx_each_x(json_t *rec, const char *x_path, const uint8_t *keep, data__row_fn fn,
                     void *ud) {
  idx_head h;
  int64_t cols = json_integer_value(json_object_get(rec, "features"));
  if (cols < 1 || cols > DATA__MAX_ELEMS)
    return err_set(DRV_EPROTO, "files mode: the recipe's features");
  each e = {&h, malloc((size_t)cols * sizeof(float)), cols, fn, ud};
  int rc = e.v ? walk(rec, "x", x_path, keep, each_row, &e, &h) : err_set(DRV_ENOMEM, "out of memory");
  free(e.v);
  return rc;
}
