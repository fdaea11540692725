/* data_stream.c - rows of CSV or libsvm text as they arrive (data_stream.h).
 *
 * Bytes are read without blocking into a buffer; whole lines are parsed
 * into a growing block of rows (features as float32, one label each) and
 * handed out from its front. A partial last line waits for the rest, or
 * for the end of the stream, where it counts as a line. CSV's first row
 * fixes the number of columns; a first row that is not numbers is a
 * header and is skipped.
 */
#include "data/data_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "data/data_int.h"

#define READ_CHUNK 65536
#define LINE_MAX_BYTES (1 << 24) /* a line longer than 16 MiB is not a row */
#define FEATURES_MAX ((int64_t)1 << 24)

struct data_stream {
  data_stream_opts o;
  int fd;
  bool own_fd, regular, eof;
  char name[256];
  char *buf;          /* bytes not parsed yet */
  size_t len, cap;
  int64_t line;       /* lines consumed (for messages) */
  int64_t features;   /* -1 until the first row (CSV) */
  int label;          /* CSV: the label's column, resolved */
  float *xs, *ys;     /* parsed rows, not handed out yet */
  int64_t rows, caprows;
  int64_t handed;
  /* Ids (o.ncategorical, o.sparse): the buffered rows' CSR beside xs
   * (sptr[rows + 1], from 0), and the rows handed out last (`out`). */
  int *catcols;       /* CSV: the categorical columns (o.ncategorical, 0-based) */
  uint8_t *cat;       /* cat[j]: column j is one (ncols entries, from the first row) */
  int64_t ncols;
  int64_t *sptr;
  uint64_t *sids;
  float *svals;       /* libsvm: the weights */
  int64_t capnnz;
  data_sparse out;
  nn_sparse outsp;
};

static bool has_ids(const data_stream *s) { return s->o.ncategorical > 0 || s->o.sparse; }

/* The ids' bound: buckets or libsvm's features. */
static uint64_t id_bound(const data_stream *s) {
  return s->o.sparse ? (uint64_t)s->o.features : s->o.buckets;
}

static int check_id_opts(const data_stream_opts *o) {
  if (o->sparse && o->format != DATA_STREAM_LIBSVM)
    return err_set(DRV_EINVAL, "data.stream: sparse = true is for libsvm streams (a CSV stream "
                   "has ids from categorical columns)");
  if (o->ncategorical > 0 && o->format != DATA_STREAM_CSV)
    return err_set(DRV_EINVAL, "data.stream: categorical columns are for CSV streams");
  if (o->ncategorical > 0 && (o->buckets < 1 || o->buckets > DATA_MAX_BUCKETS))
    return err_set(DRV_EINVAL, "data.stream: buckets %llu is out of range (1 to 2^40)",
                   (unsigned long long)o->buckets);
  if (o->format == DATA_STREAM_LIBSVM &&
      (o->features <= 0 || o->features > (o->sparse ? (int64_t)DATA_MAX_BUCKETS : FEATURES_MAX)))
    return err_set(DRV_EINVAL, "data.stream: a libsvm stream needs features = n (its columns%s)",
                   o->sparse ? ", at most 2^40" : "");
  return 0;
}

int data_stream_open(const char *path, const data_stream_opts *o, data_stream **out) {
  *out = NULL;
  int rc = check_id_opts(o);
  if (rc < 0) return rc;
  data_stream *s = calloc(1, sizeof *s);
  if (!s) return err_set(DRV_ENOMEM, "out of memory");
  s->o = *o;
  s->o.categorical = NULL; /* borrowed: cat[] keeps them once the columns are known */
  if (o->ncategorical > 0 && !(s->catcols = calloc((size_t)o->ncategorical, sizeof(int)))) {
    free(s);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  if (o->ncategorical > 0)
    memcpy(s->catcols, o->categorical, (size_t)o->ncategorical * sizeof(int));
  if (!s->o.delimiter) s->o.delimiter = ',';
  s->features = o->format == DATA_STREAM_LIBSVM ? (o->sparse ? 0 : o->features) : -1;
  bool in = strcmp(path, "-") == 0;
  snprintf(s->name, sizeof s->name, "%s", in ? "stdin" : path);
  s->fd = in ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
  if (s->fd < 0) {
    int e = errno;
    free(s->catcols);
    free(s);
    return err_set(DRV_EIO, "data.stream: cannot open '%s': %s", path, strerror(e));
  }
  s->own_fd = !in;
  struct stat st;
  s->regular = fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode);
  if (!s->regular) {
    int fl = fcntl(s->fd, F_GETFL);
    if (fl >= 0) fcntl(s->fd, F_SETFL, fl | O_NONBLOCK);
  }
  *out = s;
  return 0;
}

/* ============================== rows ==================================== */

static int grow_rows(data_stream *s) {
  if (s->rows < s->caprows) return 0;
  int64_t cap = s->caprows ? 2 * s->caprows : 256;
  if (cap > INT64_MAX / 4 / (s->features + 1))
    return err_set(DRV_ENOMEM, "%s: too many rows buffered", s->name);
  if (has_ids(s)) {
    int64_t *np = realloc(s->sptr, (size_t)(cap + 1) * sizeof *np);
    if (!np) return err_set(DRV_ENOMEM, "out of memory");
    s->sptr = np;
    if (s->caprows == 0) s->sptr[0] = 0;
  }
  float *nx = realloc(s->xs, (size_t)(cap * s->features + 1) * sizeof *nx); /* [k, 0]: sparse */
  if (!nx) return err_set(DRV_ENOMEM, "out of memory");
  s->xs = nx;
  float *ny = realloc(s->ys, (size_t)cap * sizeof *ny);
  if (!ny) return err_set(DRV_ENOMEM, "out of memory");
  s->ys = ny;
  s->caprows = cap;
  return 0;
}

/* A number out of a float's range (1e999, 1e39) or nan: an error naming
 * the line and the field, as data.csv's. */
static int not_finite(const data_stream *s, const char *what, const char *p, const char *end) {
  return err_set(DRV_EPARSE, "%s:%lld: %s: '%.*s' is not a finite number", s->name,
                 (long long)s->line, what, (int)(end - p), p);
}

/* Numbers of a CSV line into vals (at most n); the count, -1 when a field
 * is not a number (the first line is then a header), or a negative DRV_E*
 * code when one is out of range (still a number: its line is data). */
static int64_t csv_fields(const data_stream *s, char *p, double *vals, int64_t n) {
  int64_t k = 0;
  for (;;) {
    char *end;
    while (*p == ' ' || *p == '\t') p++;
    double v = strtod(p, &end);
    if (end == p) return -1;
    if (!isfinite((float)v)) {
      char what[32];
      snprintf(what, sizeof what, "field %lld", (long long)k + 1);
      return not_finite(s, what, p, end);
    }
    while (*end == ' ' || *end == '\t' || *end == '\r') end++;
    if (k < n) vals[k] = v;
    k++;
    if (*end == '\0') return k;
    if (*end != s->o.delimiter) return -1;
    p = end + 1;
  }
}

static int csv_first_row(data_stream *s, int64_t cols) {
  if (cols < 2 || cols > FEATURES_MAX)
    return err_set(DRV_EPARSE, "%s:%lld: a row needs a label and at least one feature (got %lld "
                   "field%s)", s->name, (long long)s->line, (long long)cols, cols == 1 ? "" : "s");
  int label = s->o.label < 0 ? (int)(cols + s->o.label) : s->o.label;
  if (label < 0 || label >= cols)
    return err_set(DRV_EINVAL, "%s: label column %d is out of range: rows have %lld columns",
                   s->name, s->o.label < 0 ? s->o.label : s->o.label + 1, (long long)cols);
  s->label = label;
  s->features = cols - 1;
  return 0;
}

static int parse_csv(data_stream *s, char *line) {
  double vals[4096];
  double *v = vals;
  int64_t cap = s->features > 0 ? s->features + 1 : (int64_t)(sizeof vals / sizeof *vals);
  if (cap > (int64_t)(sizeof vals / sizeof *vals) && !(v = malloc((size_t)cap * sizeof *v)))
    return err_set(DRV_ENOMEM, "out of memory");
  int64_t k = csv_fields(s, line, v, cap);
  int rc = k < -1 ? (int)k : 0;
  if (rc < 0) goto done;
  if (k < 0 && s->features < 0 && s->handed + s->rows == 0 && s->line == 1) {
    goto done; /* a header */
  }
  if (k < 0) {
    rc = err_set(DRV_EPARSE, "%s:%lld: not a row of numbers", s->name, (long long)s->line);
    goto done;
  }
  if (s->features < 0 && (rc = csv_first_row(s, k)) < 0) goto done;
  if (k != s->features + 1) {
    rc = err_set(DRV_EPARSE, "%s:%lld: %lld fields where the first row had %lld", s->name,
                 (long long)s->line, (long long)k, (long long)s->features + 1);
    goto done;
  }
  if ((rc = grow_rows(s)) < 0) goto done;
  float *x = s->xs + s->rows * s->features;
  for (int64_t c = 0, j = 0; c < k; c++)
    if (c == s->label) s->ys[s->rows] = (float)v[c];
    else x[j++] = (float)v[c];
  s->rows++;
done:
  if (v != vals) free(v);
  return rc;
}

static int parse_libsvm(data_stream *s, char *p) {
  char *end;
  double label = strtod(p, &end);
  if (end == p) return err_set(DRV_EPARSE, "%s:%lld: no label", s->name, (long long)s->line);
  if (!isfinite((float)label)) return not_finite(s, "the label", p, end);
  int rc = grow_rows(s);
  if (rc < 0) return rc;
  float *x = s->xs + s->rows * s->features;
  memset(x, 0, (size_t)s->features * sizeof *x);
  p = end;
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (*p == '\0' || *p == '#') break;
    long long idx = strtoll(p, &end, 10);
    if (end == p || *end != ':' || idx < 1 || idx > s->features)
      return err_set(DRV_EPARSE, "%s:%lld: bad index:value pair (indices are 1..%lld)", s->name,
                     (long long)s->line, (long long)s->features);
    p = end + 1;
    double v = strtod(p, &end);
    if (end == p)
      return err_set(DRV_EPARSE, "%s:%lld: index %lld has no value", s->name, (long long)s->line, idx);
    if (!isfinite((float)v)) {
      char what[40];
      snprintf(what, sizeof what, "index %lld", idx);
      return not_finite(s, what, p, end);
    }
    x[idx - 1] = (float)v;
    p = end;
  }
  s->ys[s->rows++] = (float)label;
  return 0;
}

/* ============================== rows with ids ============================ */

/* Room for `more` ids past the buffered rows' and the row being parsed. */
static int grow_ids(data_stream *s, int64_t more) {
  int64_t need = s->sptr[s->rows] + more;
  if (need <= s->capnnz) return 0;
  int64_t cap = s->capnnz ? 2 * s->capnnz : 4096;
  while (cap < need) cap *= 2;
  uint64_t *ni = realloc(s->sids, (size_t)cap * sizeof *ni);
  if (ni) s->sids = ni;
  float *nv = s->o.sparse ? realloc(s->svals, (size_t)cap * sizeof *nv) : NULL;
  if (nv) s->svals = nv;
  if (!ni || (s->o.sparse && !nv)) return err_set(DRV_ENOMEM, "out of memory for ids");
  s->capnnz = cap;
  return 0;
}

/* The first row's columns: which are categorical, the label, the features. */
static int csv_id_columns(data_stream *s, int64_t cols) {
  int ncat = s->o.ncategorical;
  if (cols < 2 || cols > FEATURES_MAX)
    return err_set(DRV_EPARSE, "%s:%lld: a row needs a label and a feature (got %lld field%s)",
                   s->name, (long long)s->line, (long long)cols, cols == 1 ? "" : "s");
  int label = s->o.label < 0 ? (int)(cols + s->o.label) : s->o.label;
  if (label < 0 || label >= cols)
    return err_set(DRV_EINVAL, "%s: label column %d is out of range: rows have %lld columns",
                   s->name, s->o.label < 0 ? s->o.label : s->o.label + 1, (long long)cols);
  if (!(s->cat = calloc((size_t)cols, 1))) return err_set(DRV_ENOMEM, "out of memory");
  for (int i = 0; i < ncat; i++) {
    int c = s->catcols[i];
    if (c < 0 || c >= cols || c == label || s->cat[c])
      return err_set(DRV_EINVAL, "%s: categorical column %d is %s", s->name, c + 1,
                     c < 0 || c >= cols ? "out of range" : c == label ? "the label column"
                                                                     : "listed twice");
    s->cat[c] = 1;
  }
  s->ncols = cols;
  s->label = label;
  s->features = cols - 1 - ncat;
  return 0;
}

/* Whether a first line is a header: a field other than the categorical
 * ones that is neither empty (missing) nor a number, as data.csv says. */
static bool csv_id_header(const data_stream *s, char **f, int64_t cols) {
  for (int64_t j = 0; j < cols; j++) {
    float v;
    int len;
    data__trimmed(f[j], &len);
    if (!s->cat[j] && len > 0 && data__parse_float(f[j], &v) == NUM_BAD) return true;
  }
  return false;
}

/* Field j (not categorical) of a row: the label, or the next x value. */
static int csv_id_value(data_stream *s, const char *f, int64_t j, float *v) {
  int rc = data__parse_float(f, v);
  if (rc == NUM_OK) return 0;
  int len;
  const char *t = data__trimmed(f, &len);
  if (len == 0 && j != s->label) {
    *v = s->o.missing;
    return 0;
  }
  if (len == 0)
    return err_set(DRV_EPARSE, "%s:%lld: field %lld (the label) is empty", s->name,
                   (long long)s->line, (long long)j + 1);
  return err_set(DRV_EPARSE, "%s:%lld: field %lld: '%.*s' is not a %snumber", s->name,
                 (long long)s->line, (long long)j + 1, len, t, rc == NUM_INF ? "finite " : "");
}

/* A CSV row of the fields f[cols] into x, y and the ids. */
static int csv_id_row(data_stream *s, char **f, int64_t cols) {
  int rc;
  if (cols != s->ncols)
    return err_set(DRV_EPARSE, "%s:%lld: %lld fields where the first row had %lld", s->name,
                   (long long)s->line, (long long)cols, (long long)s->ncols);
  if ((rc = grow_rows(s)) < 0 || (rc = grow_ids(s, s->o.ncategorical)) < 0) return rc;
  float *x = s->xs + s->rows * s->features, y = 0;
  int64_t at = s->sptr[s->rows];
  for (int64_t j = 0, k = 0; j < cols; j++) {
    if (s->cat[j]) {
      s->sids[at++] = data_hash_id((uint32_t)j + 1, f[j], strlen(f[j]), s->o.buckets);
      continue;
    }
    float v;
    if ((rc = csv_id_value(s, f[j], j, &v)) < 0) return rc;
    if (j == s->label) y = v;
    else x[k++] = v;
  }
  s->ys[s->rows] = y;
  s->sptr[++s->rows] = at;
  return 0;
}

/* A CSV line with categorical columns: split at the delimiter, the
 * categorical fields hashed whole, as data.csv hashes them. */
static int parse_csv_ids(data_stream *s, char *line) {
  size_t n = strlen(line);
  if (n && line[n - 1] == '\r') line[--n] = '\0';
  int64_t cols = 1;
  for (char *p = line; *p; p++) cols += *p == s->o.delimiter;
  if (cols > FEATURES_MAX + 1)
    return err_set(DRV_EPARSE, "%s:%lld: %lld fields", s->name, (long long)s->line, (long long)cols);
  char **f = malloc((size_t)cols * sizeof *f);
  if (!f) return err_set(DRV_ENOMEM, "out of memory");
  f[0] = line;
  for (int64_t k = 1; k < cols; k++) {
    char *d = strchr(f[k - 1], s->o.delimiter);
    *d = '\0';
    f[k] = d + 1;
  }
  int rc = 0;
  bool first = !s->cat;
  if (first) rc = csv_id_columns(s, cols);
  bool header = rc == 0 && first && s->line == 1 && csv_id_header(s, f, cols);
  if (rc == 0 && !header) rc = csv_id_row(s, f, cols);
  free(f);
  return rc;
}

/* One "index:value" token of a sparse libsvm row into id (index - 1) and
 * weight, indices ascending from 1 up to features (as data.libsvm's). */
static int libsvm_id(const data_stream *s, char *tok, long long *prev, uint64_t *id, float *v) {
  char *end, *colon = strchr(tok, ':');
  long long idx = colon ? strtoll(tok, &end, 10) : 0;
  if (!colon || end != colon || idx < 1 || idx > s->o.features || idx <= *prev)
    return err_set(DRV_EPARSE, "%s:%lld: '%s' is not index:value (indices ascend in 1..%lld)",
                   s->name, (long long)s->line, tok, (long long)s->o.features);
  int rc = data__parse_float(colon + 1, v);
  if (rc != NUM_OK)
    return err_set(DRV_EPARSE, "%s:%lld: index %lld: '%s' is not a %snumber", s->name,
                   (long long)s->line, idx, colon + 1, rc == NUM_INF ? "finite " : "");
  *id = (uint64_t)(idx - 1);
  *prev = idx;
  return 0;
}

/* A libsvm line kept sparse: the label, then its pairs as ids and weights. */
static int parse_libsvm_ids(data_stream *s, char *line) {
  char *save = NULL, *tok = strtok_r(line, " \t\r\f\v", &save);
  float label;
  int rc = data__parse_float(tok, &label);
  if (rc != NUM_OK)
    return err_set(DRV_EPARSE, "%s:%lld: the label: '%s' is not a %snumber", s->name,
                   (long long)s->line, tok, rc == NUM_INF ? "finite " : "");
  if ((rc = grow_rows(s)) < 0) return rc;
  int64_t at = s->sptr[s->rows];
  long long prev = 0;
  while ((tok = strtok_r(NULL, " \t\r\f\v", &save)) && tok[0] != '#') {
    if (strncmp(tok, "qid:", 4) == 0) continue; /* svmlight's query id */
    if ((rc = grow_ids(s, at - s->sptr[s->rows] + 1)) < 0) return rc;
    if ((rc = libsvm_id(s, tok, &prev, &s->sids[at], &s->svals[at])) < 0) return rc;
    at++;
  }
  s->ys[s->rows] = label;
  s->sptr[++s->rows] = at;
  return 0;
}

/* Hands the first k buffered rows' ids out (s->out), the rest moved to the front. */
static int take_ids(data_stream *s, int64_t k) {
  data_sparse *o = &s->out;
  int64_t nnz = s->sptr[k];
  data__sparse_free(o);
  *o = (data_sparse){.fields = s->o.sparse ? 0 : s->o.ncategorical, .weighted = s->o.sparse,
                     .bound = id_bound(s)};
  o->ptr = malloc((size_t)(k + 1) * sizeof *o->ptr);
  o->ids = malloc((size_t)(nnz + 1) * sizeof *o->ids);
  o->vals = o->weighted ? malloc((size_t)(nnz + 1) * sizeof *o->vals) : NULL;
  if (!o->ptr || !o->ids || (o->weighted && !o->vals)) {
    data__sparse_free(o);
    return err_set(DRV_ENOMEM, "out of memory for ids");
  }
  memcpy(o->ptr, s->sptr, (size_t)(k + 1) * sizeof *o->ptr);
  memcpy(o->ids, s->sids, (size_t)nnz * sizeof *o->ids);
  if (o->weighted) memcpy(o->vals, s->svals, (size_t)nnz * sizeof *o->vals);
  int64_t left = s->sptr[s->rows] - nnz;
  memmove(s->sids, s->sids + nnz, (size_t)left * sizeof *s->sids);
  if (o->weighted) memmove(s->svals, s->svals + nnz, (size_t)left * sizeof *s->svals);
  for (int64_t i = k; i <= s->rows; i++) s->sptr[i - k] = s->sptr[i] - nnz;
  s->outsp = data_sparse_view(o, k);
  return 0;
}

bool data_stream_has_ids(const data_stream *s, uint64_t *bound) {
  *bound = has_ids(s) ? id_bound(s) : 0;
  return has_ids(s);
}

const nn_sparse *data_stream_sparse(const data_stream *s, uint64_t *bound) {
  *bound = has_ids(s) ? id_bound(s) : 0;
  return has_ids(s) && s->out.ptr ? &s->outsp : NULL;
}

/* ============================== lines =================================== */

/* Parses every whole line in the buffer (and, at the end, the last one). */
static int parse_lines(data_stream *s, int64_t want) {
  size_t at = 0;
  int rc = 0;
  while (rc == 0 && s->rows < want) {
    char *nl = memchr(s->buf + at, '\n', s->len - at);
    if (!nl && !(s->eof && at < s->len)) break;
    size_t end = nl ? (size_t)(nl - s->buf) : s->len;
    s->buf[end] = '\0'; /* buf keeps one byte spare */
    s->line++;
    char *raw = s->buf + at, *line = raw;
    at = nl ? end + 1 : s->len;
    while (*line == ' ' || *line == '\t' || *line == '\r') line++;
    if (*line == '\0') continue;
    if (s->o.ncategorical > 0) rc = parse_csv_ids(s, raw); /* a field's spaces are its string's */
    else if (s->o.sparse) rc = parse_libsvm_ids(s, line);
    else rc = s->o.format == DATA_STREAM_LIBSVM ? parse_libsvm(s, line) : parse_csv(s, line);
  }
  memmove(s->buf, s->buf + at, s->len - at);
  s->len -= at;
  return rc;
}

/* Reads what the descriptor has now (a chunk at a time, up to `budget`):
 * the bytes read, or a negative code. */
static int64_t fill(data_stream *s, size_t budget) {
  int64_t total = 0;
  while (!s->eof && budget > 0) {
    if (s->cap - s->len < READ_CHUNK + 1) {
      if (s->cap > LINE_MAX_BYTES)
        return err_set(DRV_EPARSE, "%s:%lld: a line longer than %d bytes", s->name,
                       (long long)s->line + 1, LINE_MAX_BYTES);
      size_t cap = s->cap ? 2 * s->cap : 2 * READ_CHUNK;
      char *nb = realloc(s->buf, cap);
      if (!nb) return err_set(DRV_ENOMEM, "out of memory");
      s->buf = nb;
      s->cap = cap;
    }
    ssize_t got = read(s->fd, s->buf + s->len, s->cap - s->len - 1);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return total;
    if (got < 0) return err_set(DRV_EIO, "%s: %s", s->name, strerror(errno));
    if (got == 0) {
      if (!(s->regular && s->o.follow)) s->eof = true;
      return total;
    }
    s->len += (size_t)got;
    total += got;
    budget = (size_t)got < budget ? budget - (size_t)got : 0;
    if (memchr(s->buf + s->len - (size_t)got, '\n', (size_t)got)) return total; /* a line to parse */
  }
  return total;
}

int data_stream_read(data_stream *s, int64_t min, int64_t max, tensor **x, tensor **y) {
  *x = *y = NULL;
  if (min < 1) min = 1;
  if (max < min) max = min;
  int rc;
  for (int rounds = 0; s->rows < max && rounds < 64; rounds++) {
    bool was_eof = s->eof;
    int64_t got = fill(s, (size_t)1 << 22);
    if (got < 0) return (int)got;
    if ((rc = parse_lines(s, max)) < 0) return rc;
    if (got == 0 && s->eof == was_eof) break; /* nothing new */
  }
  if (s->rows < min && !(s->eof && s->len == 0 && s->rows > 0))
    return s->eof && s->len == 0 && s->rows == 0 ? 0 : DRV_EAGAIN;
  int64_t k = s->rows < max ? s->rows : max;
  if (!(*x = tensor_new2(k, s->features)) || !(*y = tensor_new1(k))) {
    tensor_free(*x), tensor_free(*y);
    *x = *y = NULL;
    return err_set(DRV_ENOMEM, "out of memory");
  }
  if (has_ids(s) && (rc = take_ids(s, k)) < 0) {
    tensor_free(*x), tensor_free(*y);
    *x = *y = NULL;
    return rc;
  }
  memcpy(tensor_data(*x), s->xs, (size_t)(k * s->features) * sizeof(float));
  memcpy(tensor_data(*y), s->ys, (size_t)k * sizeof(float));
  memmove(s->xs, s->xs + k * s->features, (size_t)((s->rows - k) * s->features) * sizeof(float));
  memmove(s->ys, s->ys + k, (size_t)(s->rows - k) * sizeof(float));
  s->rows -= k;
  s->handed += k;
  return 1;
}

int data_stream_fd(const data_stream *s) { return s->regular ? -1 : s->fd; }
int64_t data_stream_rows(const data_stream *s) { return s->handed; }
const char *data_stream_name(const data_stream *s) { return s->name; }
const char *data_stream_no_replay(const data_stream *s) {
  if (!s->own_fd) return "stdin";
  return s->regular ? NULL : "a pipe or a socket";
}
bool data_stream_ended(const data_stream *s) { return s->eof && s->len == 0 && s->rows == 0; }

int data_stream_read_dataset(data_stream *s, int64_t min, int64_t max, dataset **out) {
  *out = NULL;
  tensor *x, *y;
  int rc = data_stream_read(s, min, max, &x, &y);
  if (rc != 1) return rc;
  int64_t k = x->shape[0];
  if ((rc = data__wrap(x, y, s->name, out)) < 0) return rc;
  if (has_ids(s) && (rc = data__sparse_copy(&s->out, k, &(*out)->sp)) < 0) {
    data_free(*out);
    *out = NULL;
    return rc;
  }
  return 1;
}

void data_stream_close(data_stream *s) {
  if (!s) return;
  free(s->catcols);
  free(s->cat);
  free(s->sptr);
  free(s->sids);
  free(s->svals);
  data__sparse_free(&s->out);
  if (s->own_fd) close(s->fd);
  free(s->buf);
  free(s->xs);
  free(s->ys);
  free(s);
}
