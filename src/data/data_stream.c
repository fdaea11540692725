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
};

int data_stream_open(const char *path, const data_stream_opts *o, data_stream **out) {
  *out = NULL;
  if (o->format == DATA_STREAM_LIBSVM && (o->features <= 0 || o->features > FEATURES_MAX))
    return err_set(DRV_EINVAL, "data.stream: a libsvm stream needs features = n (its columns)");
  data_stream *s = calloc(1, sizeof *s);
  if (!s) return err_set(DRV_ENOMEM, "out of memory");
  s->o = *o;
  if (!s->o.delimiter) s->o.delimiter = ',';
  s->features = o->format == DATA_STREAM_LIBSVM ? o->features : -1;
  bool in = strcmp(path, "-") == 0;
  snprintf(s->name, sizeof s->name, "%s", in ? "stdin" : path);
  s->fd = in ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
  if (s->fd < 0) {
    int e = errno;
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
  float *nx = realloc(s->xs, (size_t)(cap * s->features) * sizeof *nx);
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
    char *line = s->buf + at;
    at = nl ? end + 1 : s->len;
    while (*line == ' ' || *line == '\t' || *line == '\r') line++;
    if (*line == '\0') continue;
    rc = s->o.format == DATA_STREAM_LIBSVM ? parse_libsvm(s, line) : parse_csv(s, line);
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

void data_stream_close(data_stream *s) {
  if (!s) return;
  if (s->own_fd) close(s->fd);
  free(s->buf);
  free(s->xs);
  free(s->ys);
  free(s);
}
