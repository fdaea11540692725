/* data_read.c - text dataset readers (CSV, libsvm/svmlight) and the
 * helpers every reader shares (data_int.h); IDX and .npy are in data_bin.c.
 *
 * The data_read_* readers load the whole file into memory, validate all of
 * it and only then hand back a dataset; data_open_libsvm and
 * data__svm_stream stream it line by line instead (data_lines.c). On any error it frees what it built and returns
 * a negative DRV_E* code whose message names the file (as the caller spelled
 * it), the line (text formats) or the byte offset (binary formats), and what
 * was wrong. Sizes read from a file are checked for overflow and for absurd
 * values before anything is allocated from them.
 */
#include "data/data.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include <zlib.h>

#include "data/data_int.h"
#include "base/err.h"
#include "base/webhdfs.h"

/* Lines between polls of the interrupt flag. */
#define POLL_LINES DATA__POLL_LINES
#define QUOTE_MAX DATA__QUOTE_MAX

/* ======================================================================
 * Shared helpers
 * ==================================================================== */

/* A file on HDFS, whole, in one OPEN (the eager readers hold it anyway). */
static int read_url(const char *path, filebuf *fb) {
  data_file f;
  int rc = data_file_open(&f, path);
  if (rc == 0 && (uint64_t)f.size >= SIZE_MAX / 2)
    rc = err_set(DRV_ERANGE, "%s: too large to hold", path);
  if (rc == 0 && !(fb->data = malloc((size_t)f.size + 1)))
    rc = err_set(DRV_ENOMEM, "%s: out of memory reading the file", path);
  if (rc == 0) rc = data_file_pread(&f, fb->data, (size_t)f.size, 0);
  data_file_close(&f);
  if (rc < 0) {
    free(fb->data);
    fb->data = NULL;
    return rc;
  }
  fb->data[f.size] = '\0';
  fb->len = (size_t)f.size;
  return 0;
}

/* The file's bytes as they are stored. */
static int read_raw(const char *path, filebuf *fb) {
  fb->data = NULL;
  fb->len = 0;
  if (webhdfs_is_url(path)) return read_url(path, fb);
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(DRV_EIO, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = (size_t)1 << 16, len = 0;
  struct stat st;
  /* Size the buffer from the file when we can; +2 so EOF is seen without
   * growing. */
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
      (uint64_t)st.st_size < SIZE_MAX / 2)
    cap = (size_t)st.st_size + 2;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return err_set(DRV_ENOMEM, "%s: out of memory reading the file", path);
  }
  for (;;) {
    if (len + 1 >= cap) {
      if (cap > SIZE_MAX / 2) break; /* cannot grow: treated as a read error */
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        fclose(f);
        return err_set(DRV_ENOMEM, "%s: out of memory reading the file", path);
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - 1 - len, f);
    len += got;
    if (got == 0) break;
  }
  if (ferror(f) || len + 1 >= cap) {
    int e = errno;
    free(buf);
    fclose(f);
    return err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(e ? e : EIO));
  }
  fclose(f);
  buf[len] = '\0';
  fb->data = buf;
  fb->len = len;
  return 0;
}

/* Decompressed data are bounded as a dataset's elements are, so a small
 * "zip bomb" fails by name instead of taking the memory. */
#define GZ_MAX ((size_t)DATA__MAX_ELEMS)

/* Inflates the gzip members in `in` (one after another, as `cat a.gz b.gz`
 * makes) into a new NUL-terminated buffer in *out. */
static int gunzip(const char *path, const filebuf *in, filebuf *out) {
  z_stream z = {0};
  size_t cap = in->len < GZ_MAX / 4 ? in->len * 4 + 64 : GZ_MAX, len = 0;
  char *buf = malloc(cap);
  if (!buf || inflateInit2(&z, 15 + 16) != Z_OK) {
    free(buf);
    return err_set(DRV_ENOMEM, "%s: out of memory decompressing the file", path);
  }
  z.next_in = (unsigned char *)in->data;
  size_t left = in->len;
  int zr = Z_OK;
  while (zr != Z_STREAM_END || left > 0) {
    if (zr == Z_STREAM_END && inflateReset(&z) != Z_OK) break; /* the next member */
    if (len + 1 >= cap) {
      char *nb = cap < GZ_MAX ? realloc(buf, cap * 2 < GZ_MAX ? cap * 2 : GZ_MAX) : NULL;
      if (!nb) {
        free(buf);
        inflateEnd(&z);
        return err_set(cap < GZ_MAX ? DRV_ENOMEM : DRV_ERANGE, "%s: %s", path, cap < GZ_MAX
                       ? "out of memory decompressing the file"
                       : "decompresses to more than 16 GiB");
      }
      buf = nb;
      cap = cap * 2 < GZ_MAX ? cap * 2 : GZ_MAX;
    }
    uInt chunk = left > UINT32_MAX ? UINT32_MAX : (uInt)left;
    z.avail_in = chunk;
    z.next_out = (unsigned char *)buf + len;
    z.avail_out = (uInt)(cap - 1 - len > UINT32_MAX ? UINT32_MAX : cap - 1 - len);
    size_t before_out = z.avail_out;
    zr = inflate(&z, Z_NO_FLUSH);
    left -= chunk - z.avail_in;
    len += before_out - z.avail_out;
    if (zr != Z_OK && zr != Z_STREAM_END && !(zr == Z_BUF_ERROR && len + 1 >= cap)) {
      size_t at = in->len - left;
      free(buf);
      const char *why = z.msg ? z.msg : zr == Z_BUF_ERROR ? "the file ends inside the data" : "corrupt";
      inflateEnd(&z);
      return err_set(DRV_EPARSE, "%s: byte %zu of the gzip file: %s", path, at, why);
    }
    if (zr == Z_OK && left == 0 && z.avail_out > 0) {
      free(buf);
      inflateEnd(&z);
      return err_set(DRV_EPARSE, "%s: byte %zu of the gzip file: the file ends inside the data",
                     path, in->len);
    }
  }
  inflateEnd(&z);
  buf[len] = '\0';
  out->data = buf;
  out->len = len;
  return 0;
}

/* See data_int.h for the contracts of the data__ helpers. */
int data__read_all(const char *path, filebuf *fb) {
  int rc = read_raw(path, fb);
  if (rc < 0 || fb->len < 2 || (unsigned char)fb->data[0] != 0x1f ||
      (unsigned char)fb->data[1] != 0x8b)
    return rc;
  filebuf plain;
  rc = gunzip(path, fb, &plain);
  free(fb->data);
  *fb = rc < 0 ? (filebuf){NULL, 0} : plain;
  return rc;
}

/* The last component of a path, for dataset->source. */
static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

int data__wrap(tensor *x, tensor *y, const char *path, dataset **out) {
  dataset *d = calloc(1, sizeof *d);
  if (!d) {
    tensor_free(x);
    tensor_free(y);
    return err_set(DRV_ENOMEM, "%s: out of memory", path);
  }
  d->x = x;
  d->y = y;
  d->n = x->shape[0];
  d->features = d->n ? tensor_numel(x) / d->n : x->shape[1]; /* x may be [n, h, w] */
  snprintf(d->source, sizeof d->source, "%s", base_name(path));
  d->classes = data__classes_of(y);
  *out = d;
  return 0;
}

int64_t data__classes_of(const tensor *y) {
  if (y->ndim != 1) return 0;
  const float *yv = tensor_data(y);
  int64_t ny = tensor_numel(y);
  data_classes c = {0};
  for (int64_t i = 0; i < ny && (i == 0 || c.ids); i++) data__classes_add(&c, yv[i]);
  return data__classes_end(&c);
}

int data__alloc_xy(const char *path, int64_t rows, int64_t cols, tensor **x, tensor **y) {
  int64_t total;
  *x = *y = NULL;
  if (rows <= 0 || cols < 0 || __builtin_mul_overflow(rows, cols, &total) ||
      total > DATA__MAX_ELEMS)
    return err_set(DRV_ERANGE, "%s: %lld x %lld values is too large", path,
                   (long long)rows, (long long)cols);
  *x = tensor_new2(rows, cols);
  *y = *x ? tensor_new1(rows) : NULL;
  if (!*y) {
    tensor_free(*x);
    *x = NULL;
    return err_set(DRV_ENOMEM, "%s: out of memory for %lld x %lld values", path,
                   (long long)rows, (long long)cols);
  }
  return 0;
}

/* strtof must not depend on the process locale (a REPL may have called
 * setlocale and made ',' the decimal point), so numbers parse in "C". */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void c_locale_init(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }


static bool is_blank_char(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

/* Parses all of the NUL-terminated s (blanks around it allowed) as a finite
 * float. */
int data__parse_float(const char *s, float *v) {
  while (is_blank_char(*s)) s++;
  if (!*s) return NUM_BAD;
  /* Fast path for short integers (pixels, counts, labels), which are most
   * fields of most files: exact in a double, so one rounding to float, the
   * same as strtof's. */
  const char *p = s + (*s == '-' || *s == '+');
  int64_t iv = 0;
  int digits = 0;
  while (*p >= '0' && *p <= '9' && digits < 15) iv = iv * 10 + (*p++ - '0'), digits++;
  if (digits > 0 && (*p == '\0' || is_blank_char(*p))) {
    while (is_blank_char(*p)) p++;
    if (!*p) {
      *v = (float)(*s == '-' ? -(double)iv : (double)iv);
      return NUM_OK;
    }
  }
  pthread_once(&c_locale_once, c_locale_init);
  char *e;
  float f = c_locale ? strtof_l(s, &e, c_locale) : strtof(s, &e);
  if (e == s) return NUM_BAD;
  while (is_blank_char(*e)) e++;
  if (*e) return NUM_BAD;
  if (!isfinite(f)) return NUM_INF;
  *v = f;
  return NUM_OK;
}

/* s without surrounding blanks, for quoting a field back in a message. */
const char *data__trimmed(const char *s, int *len) {
  while (is_blank_char(*s)) s++;
  size_t n = strlen(s);
  while (n && is_blank_char(s[n - 1])) n--;
  *len = n > QUOTE_MAX ? QUOTE_MAX : (int)n;
  return s;
}


/* Next line as [*s, *e) without its line ending; false at the end. The
 * byte at *e may be overwritten with a NUL by the caller. */
bool data__next_line(line_iter *li, char **s, char **e) {
  if (li->p >= li->end) return false;
  char *nl = memchr(li->p, '\n', (size_t)(li->end - li->p));
  char *stop = nl ? nl : li->end;
  *s = li->p;
  *e = stop;
  if (*e > *s && (*e)[-1] == '\r') (*e)--;
  li->p = nl ? nl + 1 : li->end;
  li->lineno++;
  return true;
}

bool data__is_blank_line(const char *s, const char *e) {
  for (; s < e; s++)
    if (!is_blank_char(*s)) return false;
  return true;
}

int data__interrupted(const char *path) {
  return err_set(DRV_EINTERRUPTED, "%s: interrupted", path);
}

/* ======================================================================
 * libsvm / svmlight
 * ==================================================================== */

/* The sparse rows as parsed, before densifying. */
typedef struct sparse {
  float *labels;     /* [n] */
  int64_t *rowptr;   /* [n + 1]: row i holds entries [rowptr[i], rowptr[i+1]) */
  int64_t cap_rows;  /* capacity of labels and rowptr */
  int64_t *col;      /* feature index per entry, as written */
  float *val;        /* value per entry */
  int64_t cap_nnz;   /* capacity of col and val */
  int64_t n, nnz;
  int64_t max_index; /* largest index seen, as written */
  int64_t min_index; /* smallest index seen, as written (-1: none yet) */
  int zero_based;    /* as data_libsvm_opts */
  bool keep_sparse;  /* data_libsvm_opts.sparse: indices up to 2^40 */
  uint64_t *ids;     /* streaming a sparse file: the row's 0-based ids */
  int64_t cap_ids;
} sparse;

static void sparse_free(sparse *sp) {
  free(sp->labels);
  free(sp->rowptr);
  free(sp->col);
  free(sp->val);
  free(sp->ids);
}

/* Reallocates *p to hold `n` elements of `size` bytes; false on failure
 * (*p is then unchanged). */
static bool resize_array(void **p, int64_t n, size_t size) {
  if ((uint64_t)n > SIZE_MAX / size) return false;
  void *np = realloc(*p, (size_t)n * size);
  if (!np) return false;
  *p = np;
  return true;
}

/* Makes room for `rows` rows (plus the closing rowptr) and `nnz` entries. */
static bool sparse_reserve(sparse *sp, int64_t rows, int64_t nnz) {
  if (rows + 1 > sp->cap_rows) {
    int64_t c = sp->cap_rows ? sp->cap_rows * 2 : 1024;
    if (!resize_array((void **)&sp->labels, c, sizeof(float)) ||
        !resize_array((void **)&sp->rowptr, c, sizeof(int64_t)))
      return false;
    sp->cap_rows = c;
  }
  if (nnz > sp->cap_nnz) {
    int64_t c = sp->cap_nnz ? sp->cap_nnz * 2 : 4096;
    if (!resize_array((void **)&sp->col, c, sizeof(int64_t)) ||
        !resize_array((void **)&sp->val, c, sizeof(float)))
      return false;
    sp->cap_nnz = c;
  }
  return true;
}

/* Parses one "idx:val" token of line `lineno` and appends it to the row. */
static int svm_entry(const char *path, int64_t lineno, char *tok, int64_t features,
                     int64_t *prev, sparse *sp) {
  char *colon = strchr(tok, ':');
  int len = (int)strnlen(tok, QUOTE_MAX);
  if (!colon)
    return err_set(DRV_EPARSE, "%s:%lld: '%.*s' is not index:value", path,
                   (long long)lineno, len, tok);
  if (colon - tok == 3 && memcmp(tok, "qid", 3) == 0) return 0; /* svmlight query id */
  char *end;
  errno = 0;
  long long idx = strtoll(tok, &end, 10);
  if (end != colon || colon == tok || errno == ERANGE)
    return err_set(DRV_EPARSE, "%s:%lld: '%.*s': bad feature index", path,
                   (long long)lineno, len, tok);
  if (idx < 0 || (idx < 1 && sp->zero_based == 0))
    return err_set(DRV_EPARSE, "%s:%lld: index %lld: indices start at 1%s", path,
                   (long long)lineno, idx,
                   idx == 0 ? " (a zero-based file, as scikit-learn's dump_svmlight_file writes "
                                "by default: { zero_based = true } or \"auto\")" : "");
  if (idx <= *prev)
    return err_set(DRV_EPARSE, "%s:%lld: index %lld after %lld: indices must be ascending",
                   path, (long long)lineno, idx, (long long)*prev);
  if (features > 0 && sp->zero_based >= 0 && idx + (sp->zero_based == 1) > features)
    return err_set(DRV_ERANGE, "%s:%lld: index %lld is beyond the %lld features", path,
                   (long long)lineno, idx, (long long)features);
  if (idx > (sp->keep_sparse ? (long long)DATA_MAX_BUCKETS : INT32_MAX))
    return err_set(DRV_ERANGE, "%s:%lld: index %lld is too large%s", path, (long long)lineno, idx,
                   sp->keep_sparse ? "" : " for dense rows (a sparse dataset: { sparse = true })");
  float v;
  int rc = data__parse_float(colon + 1, &v);
  if (rc != NUM_OK)
    return err_set(DRV_EPARSE, "%s:%lld: index %lld: '%.*s' is not a %snumber", path,
                   (long long)lineno, idx, (int)strnlen(colon + 1, QUOTE_MAX), colon + 1,
                   rc == NUM_INF ? "finite " : "");
  if (!sparse_reserve(sp, sp->n + 1, sp->nnz + 1))
    return err_set(DRV_ENOMEM, "%s: out of memory", path);
  sp->col[sp->nnz] = idx; /* shifted to 0-based once the file is read */
  sp->val[sp->nnz] = v;
  sp->nnz++;
  *prev = idx;
  if (idx > sp->max_index) sp->max_index = idx;
  if (sp->min_index < 0 || idx < sp->min_index) sp->min_index = idx;
  return 0;
}

/* Parses one non-blank, comment-stripped line [s, e) into a sparse row. */
static int svm_line(const char *path, int64_t lineno, char *s, char *e, int64_t features,
                    sparse *sp) {
  *e = '\0';
  char *save = NULL;
  char *tok = strtok_r(s, " \t\r\f\v", &save);
  float label;
  int rc = data__parse_float(tok, &label);
  if (rc != NUM_OK)
    return err_set(DRV_EPARSE, "%s:%lld: label '%.*s' is not a %snumber", path,
                   (long long)lineno, (int)strnlen(tok, QUOTE_MAX), tok,
                   rc == NUM_INF ? "finite " : "");
  if (!sparse_reserve(sp, sp->n + 1, sp->nnz))
    return err_set(DRV_ENOMEM, "%s: out of memory", path);
  sp->labels[sp->n] = label;
  sp->rowptr[sp->n] = sp->nnz;
  int64_t prev = -1; /* indices ascend from 0 or 1 */
  while ((tok = strtok_r(NULL, " \t\r\f\v", &save)))
    if ((rc = svm_entry(path, lineno, tok, features, &prev, sp)) < 0) return rc;
  sp->n++;
  sp->rowptr[sp->n] = sp->nnz;
  return 0;
}

/* Densifies the parsed rows into a new dataset; zb says whether the
 * indices were zero-based. */
static int svm_dense(const char *path, const sparse *sp, int64_t features, bool zb, dataset **out) {
  int64_t nfeat = features ? features : sp->max_index + zb;
  if (nfeat == 0)
    return err_set(DRV_EPARSE, "%s: no feature indices, cannot infer the feature count", path);
  tensor *x, *y;
  int rc = data__alloc_xy(path, sp->n, nfeat, &x, &y);
  if (rc < 0) return rc;
  float *xv = tensor_data(x), *yv = tensor_data(y);
  for (int64_t i = 0; i < sp->n; i++) {
    yv[i] = sp->labels[i];
    for (int64_t k = sp->rowptr[i]; k < sp->rowptr[i + 1]; k++) {
      int64_t c = (int64_t)sp->col[k] - !zb;
      if (c >= nfeat) {
        tensor_free(x);
        tensor_free(y);
        return err_set(DRV_ERANGE, "%s: example %lld: index %lld is beyond the %lld features",
                       path, (long long)i + 1, (long long)sp->col[k], (long long)nfeat);
      }
      xv[i * nfeat + c] = sp->val[k];
    }
  }
  return data__wrap(x, y, path, out);
}

/* The parsed rows as a dataset with an empty x [n, 0] and the entries as
 * its sparse part (0-based ids below the feature count, weighted): no
 * dense matrix, whatever the feature count. Takes sp's arrays. */
static int svm_sparse(const char *path, sparse *sp, int64_t features, bool zb, dataset **out) {
  uint64_t bound = features ? (uint64_t)features : (uint64_t)(sp->max_index + zb);
  if (bound == 0 || bound > DATA_MAX_BUCKETS)
    return err_set(bound ? DRV_ERANGE : DRV_EPARSE, "%s: %s", path,
                   bound ? "more than 2^40 features" : "no feature indices, cannot infer the "
                   "feature count");
  tensor *x, *y;
  int rc = data__alloc_xy(path, sp->n, 0, &x, &y);
  if (rc < 0) return rc;
  memcpy(tensor_data(y), sp->labels, (size_t)sp->n * sizeof(float));
  uint64_t *ids = (uint64_t *)sp->col; /* in place: an int64 becomes a uint64 */
  for (int64_t k = 0; k < sp->nnz; k++) {
    ids[k] = (uint64_t)(sp->col[k] - !zb);
    if (ids[k] >= bound) {
      tensor_free(x);
      tensor_free(y);
      return err_set(DRV_ERANGE, "%s: index %llu is beyond the %llu features", path,
                     (unsigned long long)ids[k] + !zb, (unsigned long long)bound);
    }
  }
  if ((rc = data__wrap(x, y, path, out)) < 0) return rc;
  (*out)->sp = (data_sparse){.ptr = sp->rowptr, .ids = ids, .vals = sp->val, .weighted = true,
                             .bound = bound};
  sp->rowptr = NULL;
  sp->col = NULL;
  sp->val = NULL;
  return 0;
}

/* The examples in o->keep, streamed: a worker reads its shard of a file
 * it never holds whole (the recipe gives the features and index base). */
static int svm_read_kept(const char *path, const data_libsvm_opts *o, dataset **out) {
  data_fill fill = {.path = path};
  if (o->sparse) fill.sp.s = (data_sparse){.weighted = true, .bound = (uint64_t)o->features};
  for (int64_t i = 0; i < o->keep_n; i++) fill.kept += o->keep[i] != 0;
  int rc = data__svm_stream(path, o, data__fill_row, &fill, NULL);
  if (rc == 0 && fill.row != fill.kept)
    rc = err_set(DRV_EINVAL, "%s: %lld examples read, %lld expected", path,
                 (long long)fill.row, (long long)fill.kept);
  if (rc < 0) {
    tensor_free(fill.x);
    tensor_free(fill.y);
    data__sparse_free(&fill.sp.s);
    return rc;
  }
  rc = data__wrap(fill.x, fill.y, path, out);
  if (rc == 0 && o->sparse) data__sp_take(&fill.sp, &(*out)->sp);
  data__sparse_free(&fill.sp.s);
  return rc;
}

/* The recipe of a libsvm file: features is the bound of a sparse one. */
static void svm_recipe(dataset *d, const char *path, int64_t features, bool zb, bool sparse) {
  char abs[4096];
  json_t *r = json_pack("{s:s, s:s, s:s, s:I, s:b}", "format", "libsvm", "path",
                        data__abspath(path, abs, sizeof abs), "given", path, "features",
                        (json_int_t)features, "zero_based", zb);
  if (r && sparse) json_object_set_new(r, "sparse", json_true());
  data__set_recipe(d, r);
}

int data_read_libsvm(const char *path, const data_libsvm_opts *o, dataset **out) {
  *out = NULL;
  data_libsvm_opts def = {0};
  if (!o) o = &def;
  int64_t features = o->features;
  if (features < 0)
    return err_set(DRV_EINVAL, "%s: feature count %lld is negative", path, (long long)features);
  if (o->keep && features > 0 && o->zero_based >= 0) return svm_read_kept(path, o, out);
  filebuf fb;
  int rc = data__read_all(path, &fb);
  if (rc < 0) return rc;
  sparse sp = {.min_index = -1, .zero_based = o->zero_based, .keep_sparse = o->sparse};
  line_iter li = {fb.data, fb.data + fb.len, 0};
  char *s, *e;
  int64_t example = -1;
  while (data__next_line(&li, &s, &e)) {
    if (li.lineno % POLL_LINES == 0 && err_interrupted()) {
      rc = data__interrupted(path);
      goto done;
    }
    char *hash = memchr(s, '#', (size_t)(e - s));
    if (hash) e = hash;
    if (data__is_blank_line(s, e)) continue;
    if (o->keep && (++example >= o->keep_n || !o->keep[example])) continue;
    if ((rc = svm_line(path, li.lineno, s, e, features, &sp)) < 0) goto done;
  }
  if (o->keep && example + 1 != o->keep_n) {
    rc = err_set(DRV_EINVAL, "%s: has %lld examples now, %lld when it was first read: a worker "
                 "must see the same file", path, (long long)example + 1, (long long)o->keep_n);
    goto done;
  }
  if (sp.n == 0) {
    rc = err_set(DRV_EPARSE, "%s: %s", path, fb.len ? "no examples" : "empty file");
    goto done;
  }
  bool zb = o->zero_based == 1 || (o->zero_based < 0 && sp.min_index == 0);
  if ((rc = o->sparse ? svm_sparse(path, &sp, features, zb, out)
                       : svm_dense(path, &sp, features, zb, out)) < 0)
    goto done;
  if (!o->keep) svm_recipe(*out, path, o->sparse ? (int64_t)(*out)->sp.bound : (*out)->features,
                           zb, o->sparse);
done:
  sparse_free(&sp);
  free(fb.data);
  return rc;
}

/* ======================================================================
 * libsvm, streamed (lazy datasets and their statistics)
 * ==================================================================== */

/* Densifies the one row in sp into row [nfeat] (zeroed first). */
static int svm_row(const char *path, int64_t lineno, const sparse *sp, bool zb, float *row,
                   int64_t nfeat) {
  memset(row, 0, (size_t)nfeat * sizeof *row);
  for (int64_t k = 0; k < sp->nnz; k++) {
    int64_t c = (int64_t)sp->col[k] - !zb;
    if (c >= nfeat)
      return err_set(DRV_ERANGE, "%s:%lld: index %lld is beyond the %lld features", path,
                     (long long)lineno, (long long)sp->col[k], (long long)nfeat);
    row[c] = sp->val[k];
  }
  return 0;
}

/* The one row in sp as 0-based ids (sp->ids grown as needed) for fn. */
static int svm_ids(const char *path, sparse *sp, bool zb, data__ids *r) {
  if (sp->nnz > sp->cap_ids) {
    int64_t c = sp->cap_ids ? sp->cap_ids : 64;
    while (c < sp->nnz) c *= 2;
    if (!resize_array((void **)&sp->ids, c, sizeof *sp->ids))
      return err_set(DRV_ENOMEM, "%s: out of memory", path);
    sp->cap_ids = c;
  }
  for (int64_t k = 0; k < sp->nnz; k++) sp->ids[k] = (uint64_t)(sp->col[k] - !zb);
  *r = (data__ids){sp->ids, sp->val, sp->nnz};
  return 0;
}

/* One streamed row handed to fn: densified, or its ids (o->sparse). */
static int svm_emit(const char *path, int64_t lineno, const data_libsvm_opts *o, sparse *sp,
                    float *row, data__row_fn fn, void *ud) {
  bool zb = o->zero_based == 1;
  if (o->sparse) {
    data__ids r;
    int rc = svm_ids(path, sp, zb, &r);
    return rc < 0 ? rc : fn(ud, row, 0, sp->labels[0], &r);
  }
  int rc = svm_row(path, lineno, sp, zb, row, o->features);
  return rc < 0 ? rc : fn(ud, row, o->features, sp->labels[0], NULL);
}

/* The features and index base the stream found, checked. */
static int svm_shape(const char *path, const data_libsvm_opts *o, const sparse *sp,
                     data_scan *scan) {
  bool zb = o->zero_based == 1 || (o->zero_based < 0 && sp->min_index == 0);
  int64_t nfeat = o->features ? o->features : sp->max_index + zb;
  if (o->sparse && (uint64_t)nfeat > DATA_MAX_BUCKETS)
    return err_set(DRV_ERANGE, "%s: %lld features: at most 2^40", path, (long long)nfeat);
  if (nfeat == 0)
    return err_set(DRV_EPARSE, "%s: no feature indices, cannot infer the feature count", path);
  if (sp->max_index - !zb >= nfeat)
    return err_set(DRV_ERANGE, "%s: index %lld is beyond the %lld features", path,
                   (long long)sp->max_index, (long long)nfeat);
  scan->features = o->sparse ? 0 : nfeat;
  scan->bound = o->sparse ? (uint64_t)nfeat : 0;
  scan->zero_based = zb;
  return 0;
}

int data__svm_stream(const char *path, const data_libsvm_opts *o, data__row_fn fn, void *ud,
                     data_scan *scan) {
  if (o->features < 0 || (fn && (o->features == 0 || o->zero_based < 0)))
    return err_set(DRV_EINVAL, "%s: streaming rows needs the feature count and index base", path);
  data_lines l;
  int rc = data__lines_open(&l, path);
  if (rc < 0) return rc;
  sparse sp = {.min_index = -1, .zero_based = o->zero_based, .keep_sparse = o->sparse};
  float *row = fn ? malloc((size_t)(o->sparse ? 1 : o->features) * sizeof *row) : NULL;
  if (fn && !row) rc = err_set(DRV_ENOMEM, "%s: out of memory", path);
  data_classes cls = {0};
  char *s, *e;
  int64_t example = -1;
  bool any = false;
  while (rc == 0 && (rc = data__lines_next(&l, &s, &e)) == 1) {
    rc = 0;
    if (l.lineno % POLL_LINES == 0 && err_interrupted()) {
      rc = data__interrupted(path);
      break;
    }
    any = true;
    char *hash = memchr(s, '#', (size_t)(e - s));
    if (hash) e = hash;
    if (data__is_blank_line(s, e)) continue;
    if (o->keep && (++example >= o->keep_n || !o->keep[example])) continue;
    if (!o->keep) example++;
    sp.n = sp.nnz = 0; /* one row at a time; the index range is kept */
    if ((rc = svm_line(path, l.lineno, s, e, o->features, &sp)) < 0) break;
    data__classes_add(&cls, sp.labels[0]);
    if (fn && (rc = svm_emit(path, l.lineno, o, &sp, row, fn, ud)) < 0) break;
  }
  data__lines_close(&l);
  free(row);
  if (rc == 0 && o->keep && example + 1 != o->keep_n)
    rc = err_set(DRV_EINVAL, "%s: has %lld examples now, %lld when it was first read: a worker "
                 "must see the same file", path, (long long)example + 1, (long long)o->keep_n);
  else if (rc == 0 && example < 0)
    rc = err_set(DRV_EPARSE, "%s: %s", path, any ? "no examples" : "empty file");
  data_scan sc = {.rows = example + 1, .classes = data__classes_end(&cls), .label = 0};
  if (rc == 0 && !o->keep) rc = svm_shape(path, o, &sp, &sc);
  if (rc == 0 && scan) *scan = sc;
  sparse_free(&sp);
  return rc;
}

int data_open_libsvm(const char *path, const data_libsvm_opts *o, dataset **out) {
  *out = NULL;
  data_libsvm_opts def = {0};
  if (!o) o = &def;
  if (o->keep) return err_set(DRV_EINVAL, "%s: a lazy dataset is the whole file", path);
  data_scan sc;
  int rc = data__svm_stream(path, o, NULL, NULL, &sc);
  if (rc < 0) return rc;
  dataset *d = calloc(1, sizeof *d);
  if (!d) return err_set(DRV_ENOMEM, "%s: out of memory", path);
  snprintf(d->source, sizeof d->source, "%s", base_name(path));
  d->n = sc.rows;
  d->features = sc.features;
  d->classes = sc.classes;
  d->x_ndim = 2;
  d->x_shape[0] = d->y_shape[0] = d->n;
  d->x_shape[1] = d->features;
  d->y_ndim = 1;
  d->y_shape[1] = 1;
  if (o->sparse) d->sp = (data_sparse){.weighted = true, .bound = sc.bound};
  svm_recipe(d, path, o->sparse ? (int64_t)sc.bound : d->features, sc.zero_based, o->sparse);
  if (!d->recipe) {
    data_free(d);
    return err_set(DRV_ENOMEM, "%s: out of memory", path);
  }
  *out = d;
  return 0;
}
