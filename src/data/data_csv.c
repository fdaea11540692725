/* data_csv.c - the CSV reader: numbers, a label column (or none), class
 * names in the label column, a detected header that is reported, and the
 * rows of one shard only (files mode, data_recipe.c).
 *
 * The whole-file reader makes two passes over the file's bytes: the first
 * counts the non-blank lines and takes the shape from the first one; the
 * second parses the rows. The streamed form (data__csv_stream) makes one
 * pass through a small buffer: a lazy dataset's scan (data_open_csv), a
 * worker's shard (the rows kept) and the statistics of a recipe.
 * Errors name the file, the line and the field; nothing is half-loaded.
 */
#include "data/data.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_int.h"
#include "base/err.h"

/* Class names of the label column: collected unsorted while parsing, then
 * sorted and the ids remapped (or fixed up front by a recipe). */
typedef struct names {
  char **v;
  int64_t n, cap;
  bool fixed; /* from the recipe: lookups only */
} names;

static void names_free(names *nm) {
  if (!nm->fixed)
    for (int64_t i = 0; i < nm->n; i++) free(nm->v[i]);
  if (!nm->fixed) free(nm->v);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The id of name s (trimmed): found, or appended when collecting. */
static int name_id(names *nm, const char *path, int64_t lineno, const char *s, float *id) {
  int len;
  const char *t = data__trimmed(s, &len);
  size_t tl = strlen(t);
  while (tl && (t[tl - 1] == ' ' || t[tl - 1] == '\t' || t[tl - 1] == '\r')) tl--;
  if (tl == 0) return err_set(DRV_EPARSE, "%s:%lld: the label is empty", path, (long long)lineno);
  if (nm->fixed) {
    int64_t lo = 0, hi = nm->n - 1;
    while (lo <= hi) {
      int64_t mid = (lo + hi) / 2;
      int c = strncmp(nm->v[mid], t, tl);
      if (c == 0 && nm->v[mid][tl] != '\0') c = 1;
      if (c == 0) {
        *id = (float)mid;
        return 0;
      }
      if (c < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    return err_set(DRV_EPARSE, "%s:%lld: class '%.*s' is not one of the %lld the file had when "
                   "it was first read", path, (long long)lineno, len, t, (long long)nm->n);
  }
  for (int64_t i = nm->n - 1; i >= 0; i--)
    if (strncmp(nm->v[i], t, tl) == 0 && nm->v[i][tl] == '\0') {
      *id = (float)i;
      return 0;
    }
  if (nm->n >= (1 << 24))
    return err_set(DRV_ERANGE, "%s:%lld: more than %d class names", path, (long long)lineno, 1 << 24);
  if (nm->n == nm->cap) {
    int64_t c = nm->cap ? nm->cap * 2 : 16;
    char **nv = realloc(nm->v, (size_t)c * sizeof *nv);
    if (!nv) return err_set(DRV_ENOMEM, "%s: out of memory", path);
    nm->v = nv;
    nm->cap = c;
  }
  if (!(nm->v[nm->n] = strndup(t, tl))) return err_set(DRV_ENOMEM, "%s: out of memory", path);
  *id = (float)nm->n++;
  return 0;
}

/* Sorts the collected names and renumbers y by them: ids do not depend on
 * the order rows come in. */
static int names_sort(names *nm, tensor *y) {
  int64_t n = nm->n;
  char **orig = malloc((size_t)(n ? n : 1) * sizeof *orig);
  int64_t *newid = malloc((size_t)(n ? n : 1) * sizeof *newid);
  if (!orig || !newid) {
    free(orig);
    free(newid);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  memcpy(orig, nm->v, (size_t)n * sizeof *orig);
  qsort(nm->v, (size_t)n, sizeof *nm->v, cmp_str);
  for (int64_t i = 0; i < n; i++) {
    char **at = bsearch(&orig[i], nm->v, (size_t)n, sizeof *nm->v, cmp_str);
    newid[i] = at - nm->v;
  }
  float *yv = tensor_data(y);
  for (int64_t r = 0; r < y->shape[0]; r++) yv[r] = (float)newid[(int64_t)yv[r]];
  free(orig);
  free(newid);
  return 0;
}

/* ============================== fields =================================== */

/* Splits [s, e) in place at each `delim` into NUL-terminated fields, storing
 * at most `max` field starts; returns how many fields the line has. */
static int64_t split_fields(char *s, char *e, char delim, char **fields, int64_t max) {
  int64_t n = 0;
  char *start = s;
  for (char *p = s;; p++) {
    if (p == e || *p == delim) {
      if (n < max) fields[n] = start;
      n++;
      *p = '\0';
      if (p == e) return n;
      start = p + 1;
    }
  }
}

static int64_t count_fields(const char *s, const char *e, char delim) {
  int64_t n = 1;
  for (; s < e; s++) n += *s == delim;
  return n;
}

/* True when some field of the line [s, e) other than the columns with
 * skip[j] (class names, categorical strings; NULL: none) is not a number
 * at all: the line is a header. A number out of a float's range (1e999) is
 * still a number, so its line is data and the value the same error as on
 * any other line. Works on a copy. */
static int line_has_text(const char *s, const char *e, char delim, const uint8_t *skip,
                         bool empty_ok, bool *text) {
  size_t len = (size_t)(e - s);
  char *copy = malloc(len + 1);
  if (!copy) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(copy, s, len);
  copy[len] = '\0';
  *text = false;
  char *p = copy;
  for (int64_t j = 0;; j++) {
    char *d = strchr(p, delim);
    if (d) *d = '\0';
    float v;
    int len;
    data__trimmed(p, &len);
    bool missing = empty_ok && len == 0; /* a missing value, not a name */
    if (!(skip && skip[j]) && !missing && data__parse_float(p, &v) == NUM_BAD) *text = true;
    if (!d || *text) break;
    p = d + 1;
  }
  free(copy);
  return 0;
}

/* What each column of a line is. */
enum { COL_DENSE = 0, COL_LABEL = 1, COL_CAT = 2 };

typedef struct csv_ctx {
  const char *path;
  char delim;
  int64_t nf, label; /* label -1: none */
  int classes;       /* as data_csv_opts */
  names nm;
  /* Categorical columns (data_csv_opts): kind[nf] says what each column
   * is once nf is known; a row's ids go to ids[ncat]. */
  const data_csv_opts *o;
  uint8_t *kind;
  uint64_t *ids;
  int ncat;
} csv_ctx;

static void ctx_free(csv_ctx *cx) {
  names_free(&cx->nm);
  free(cx->kind);
  free(cx->ids);
  cx->kind = NULL;
  cx->ids = NULL;
}

/* cx->kind and cx->ids for nf columns (label resolved), the categorical
 * columns checked against the line `lineno` that gave nf. */
static int csv_kinds(csv_ctx *cx, int64_t lineno) {
  const data_csv_opts *o = cx->o;
  cx->ncat = o->ncategorical;
  cx->kind = calloc((size_t)cx->nf, 1);
  cx->ids = malloc((size_t)(cx->ncat ? cx->ncat : 1) * sizeof *cx->ids);
  if (!cx->kind || !cx->ids) return err_set(DRV_ENOMEM, "%s: out of memory", cx->path);
  if (cx->label >= 0) cx->kind[cx->label] = COL_LABEL;
  for (int i = 0; i < cx->ncat; i++) {
    int c = o->categorical[i];
    if (c < 0 || c >= cx->nf)
      return err_set(DRV_EINVAL, "%s:%lld: categorical column %d is out of range: the file has "
                     "%lld columns", cx->path, (long long)lineno, c + 1, (long long)cx->nf);
    if (cx->kind[c] != COL_DENSE)
      return err_set(DRV_EINVAL, "%s: categorical column %d is %s", cx->path, c + 1,
                     cx->kind[c] == COL_LABEL ? "the label column" : "listed twice");
    cx->kind[c] = COL_CAT;
  }
  if (cx->ncat && !(o->buckets >= 1 && o->buckets <= DATA_MAX_BUCKETS))
    return err_set(DRV_EINVAL, "%s: buckets %llu is out of range (1 to 2^40)", cx->path,
                   (unsigned long long)o->buckets);
  return 0;
}

/* The columns header detection skips: class names and categorical ones. */
static uint8_t *header_skip(const csv_ctx *cx) {
  uint8_t *skip = calloc((size_t)cx->nf, 1);
  for (int64_t j = 0; skip && j < cx->nf; j++)
    skip[j] = cx->kind[j] == COL_CAT || (cx->kind[j] == COL_LABEL && cx->classes == 1);
  return skip;
}

static int csv_header(const csv_ctx *cx, const char *s, const char *e, bool *header) {
  uint8_t *skip = header_skip(cx);
  if (!skip) return err_set(DRV_ENOMEM, "%s: out of memory", cx->path);
  int rc = line_has_text(s, e, cx->delim, skip, cx->o->has_missing, header);
  free(skip);
  return rc;
}

/* Features (dense x columns) of a line of nf fields. */
static int64_t csv_features(const csv_ctx *cx) { return cx->nf - (cx->label >= 0) - cx->ncat; }

/* Parses one data row (already split into `nf` fields) into x_row / *y
 * and the categorical columns' ids into cx->ids. */
static int csv_row(csv_ctx *cx, int64_t lineno, char **fields, float *x_row, float *y) {
  for (int64_t j = 0, k = 0, c = 0; j < cx->nf; j++) {
    float v;
    if (cx->kind[j] == COL_CAT) {
      uint64_t id = data_hash_id((uint32_t)j + 1, fields[j], strlen(fields[j]), cx->o->buckets);
      cx->ids[c++] = id;
      continue;
    }
    if (j == cx->label && cx->classes == 1) {
      int rc = name_id(&cx->nm, cx->path, lineno, fields[j], y);
      if (rc < 0) return rc;
      continue;
    }
    int rc = data__parse_float(fields[j], &v);
    if (rc != NUM_OK) {
      int len;
      const char *t = data__trimmed(fields[j], &len);
      if (len == 0 && j != cx->label && cx->o->has_missing) {
        x_row[k++] = cx->o->missing;
        continue;
      }
      if (len == 0)
        return err_set(DRV_EPARSE, "%s:%lld: field %lld is empty%s", cx->path, (long long)lineno,
                       (long long)j + 1, j == cx->label ? "" : " (a value for empty fields: "
                       "{ missing = 0 })");
      return err_set(DRV_EPARSE, "%s:%lld: field %lld: '%.*s' is not a %snumber%s", cx->path,
                     (long long)lineno, (long long)j + 1, len, t, rc == NUM_INF ? "finite " : "",
                     j == cx->label && rc == NUM_BAD
                           ? " (class names in the label column: { classes = \"names\" })"
                           : "");
    }
    if (j == cx->label) *y = v;
    else x_row[k++] = v;
  }
  return 0;
}

/* Fills x and y from the buffer: second pass, after the shape is known.
 * keep (NULL: all) says which data rows to parse. */
static int csv_fill(csv_ctx *cx, filebuf *fb, bool skip_first, const uint8_t *keep, tensor *x,
                    tensor *y) {
  char **fields = malloc((size_t)cx->nf * sizeof *fields);
  if (!fields) return err_set(DRV_ENOMEM, "%s: out of memory", cx->path);
  line_iter li = {fb->data, fb->data + fb->len, 0};
  float *xv = tensor_data(x), *yv = tensor_data(y);
  int64_t row = 0, data_row = -1, cols = x->shape[0] ? tensor_numel(x) / x->shape[0] : 0;
  char *s, *e;
  int rc = 0;
  while (rc == 0 && data__next_line(&li, &s, &e)) {
    if (li.lineno % DATA__POLL_LINES == 0 && err_interrupted()) {
      rc = data__interrupted(cx->path);
      break;
    }
    if (data__is_blank_line(s, e)) continue;
    if (skip_first) {
      skip_first = false;
      continue;
    }
    if (keep && !keep[++data_row]) continue;
    int64_t got = split_fields(s, e, cx->delim, fields, cx->nf);
    if (got != cx->nf)
      rc = err_set(DRV_EPARSE, "%s:%lld: expected %lld fields, found %lld", cx->path,
                   (long long)li.lineno, (long long)cx->nf, (long long)got);
    else
      rc = csv_row(cx, li.lineno, fields, xv + row * cols, yv + row);
    row++;
  }
  free(fields);
  return rc;
}

/* ============================== the reader =============================== */

/* The recipe of a whole file read: what a worker needs to read its shard. */
static void set_csv_recipe(dataset *d, const char *path, const csv_ctx *cx, bool header) {
  char abs[4096];
  json_t *r = json_pack("{s:s, s:s, s:s, s:I, s:b, s:s#, s:I}", "format", "csv", "path",
                        data__abspath(path, abs, sizeof abs), "given", path, "label", (json_int_t)cx->label,
                        "header", header, "delimiter", &cx->delim, (int)1, "classes",
                        (json_int_t)cx->classes);
  if (r && d->names) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < d->nnames; i++) json_array_append_new(a, json_string(d->names[i]));
    json_object_set_new(r, "names", a);
  }
  const data_csv_opts *o = cx->o;
  if (r && o && o->ncategorical > 0) {
    json_t *a = json_array();
    for (int i = 0; a && i < o->ncategorical; i++) json_array_append_new(a, json_integer(o->categorical[i]));
    json_object_set_new(r, "categorical", a);
    json_object_set_new(r, "buckets", json_integer((json_int_t)o->buckets));
  }
  if (r && o && o->has_missing) json_object_set_new(r, "missing", json_real(o->missing));
  data__set_recipe(d, r);
}

/* The label column from the options, checked against nf fields. */
static int resolve_label(const char *path, int64_t first_no, const data_csv_opts *o, int64_t nf,
                         int64_t *label) {
  if (o->no_label) {
    *label = -1;
    return 0;
  }
  if (nf < 2)
    return err_set(DRV_EPARSE, "%s:%lld: one field per line: need features and a label "
                   "(a file of features only: { label = false })", path, (long long)first_no);
  *label = o->label < 0 ? nf + o->label : o->label;
  if (*label < 0 || *label >= nf) {
    int given = o->label_given ? o->label_given : o->label >= 0 ? o->label + 1 : o->label;
    return err_set(DRV_EINVAL, "%s:%lld: label column %d is out of range: the file has %lld "
                   "columns (1 is the first, -1 the last)", path, (long long)first_no, given,
                   (long long)nf);
  }
  return 0;
}

/* Finishes a dataset read: names, flags, recipe. */
static int csv_finish(csv_ctx *cx, const data_csv_opts *o, bool header, tensor *x, tensor *y,
                      dataset **out) {
  int rc = cx->classes == 1 && !cx->nm.fixed ? names_sort(&cx->nm, y) : 0;
  if (rc == 0) rc = data__wrap(x, y, cx->path, out);
  else tensor_free(x), tensor_free(y);
  if (rc < 0) return rc;
  dataset *d = *out;
  d->header_guessed = o->header < 0 && header;
  d->unlabeled = o->no_label;
  if (o->no_label || cx->classes == -1) d->classes = 0;
  if (cx->classes == 1) {
    if (cx->nm.fixed) {
      /* a worker's shard: the coordinator's names */
      d->names = calloc((size_t)cx->nm.n + 1, sizeof *d->names);
      for (int64_t i = 0; d->names && i < cx->nm.n; i++) d->names[i] = strdup(cx->nm.v[i]);
    } else {
      d->names = cx->nm.v;
      cx->nm.v = NULL;
    }
    d->nnames = d->classes = cx->nm.n;
    cx->nm.n = 0;
  }
  if (!o->keep) set_csv_recipe(d, cx->path, cx, header);
  return 0;
}

/* The rows in o->keep, streamed: a worker reads its shard of a file it
 * never holds whole. The class names, if any, are the recipe's. */
static int csv_read_kept(const char *path, const data_csv_opts *o, dataset **out) {
  data_fill fill = {.path = path};
  fill.sp.s = (data_sparse){.fields = o->ncategorical, .bound = o->ncategorical ? o->buckets : 0};
  for (int64_t i = 0; i < o->keep_n; i++) fill.kept += o->keep[i] != 0;
  data_scan sc;
  int rc = data__csv_stream(path, o, data__fill_row, &fill, &sc);
  if (rc == 0 && fill.row != fill.kept)
    rc = err_set(DRV_EINVAL, "%s: %lld rows read, %lld expected", path, (long long)fill.row,
                 (long long)fill.kept);
  if (rc < 0) {
    tensor_free(fill.x);
    tensor_free(fill.y);
    data__sparse_free(&fill.sp.s);
    return rc;
  }
  csv_ctx cx = {.path = path, .classes = o->classes, .label = sc.label, .o = o};
  if (o->names) cx.nm = (names){(char **)o->names, o->nnames, o->nnames, true};
  rc = csv_finish(&cx, o, sc.header, fill.x, fill.y, out);
  if (rc == 0 && fill.sp.s.bound) data__sp_take(&fill.sp, &(*out)->sp);
  data__sparse_free(&fill.sp.s);
  return rc;
}

/* A file with categorical columns read whole: streamed once to check it
 * and count its rows (data_open_csv), then its rows read (data_load). */
static int csv_read_streamed(const char *path, const data_csv_opts *o, dataset **out) {
  int rc = data_open_csv(path, o, out);
  if (rc == 0 && (rc = data_load(*out)) < 0) {
    data_free(*out);
    *out = NULL;
  }
  return rc;
}

int data_read_csv(const char *path, const data_csv_opts *o, dataset **out) {
  *out = NULL;
  data_csv_opts def = {.label = -1, .header = -1, .delimiter = ','};
  if (!o) o = &def;
  if (o->keep && (o->classes != 1 || o->names || o->ncategorical > 0))
    return csv_read_kept(path, o, out);
  if (o->ncategorical > 0 && !o->keep) return csv_read_streamed(path, o, out);
  csv_ctx cx = {.path = path, .delim = o->delimiter ? o->delimiter : ',', .classes = o->classes,
                .o = o};
  if (o->names) cx.nm = (names){(char **)o->names, o->nnames, o->nnames, true};
  if (cx.delim == '\n' || cx.delim == '\r' || cx.delim == '.' || cx.delim == '-' || cx.delim == '+')
    return err_set(DRV_EINVAL, "%s: delimiter '%c' cannot separate numbers", path, cx.delim);
  filebuf fb;
  int rc = data__read_all(path, &fb);
  if (rc < 0) return rc;
  /* A UTF-8 byte order mark is not part of the first field. */
  char *text = fb.data;
  if (fb.len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) text += 3;
  filebuf body = {text, fb.len - (size_t)(text - fb.data)};

  line_iter li = {body.data, body.data + body.len, 0};
  char *s, *e, *first_s = NULL, *first_e = NULL;
  int64_t lines = 0, first_no = 0;
  while (data__next_line(&li, &s, &e)) {
    if (data__is_blank_line(s, e)) continue;
    if (!first_s) first_s = s, first_e = e, first_no = li.lineno;
    lines++;
  }
  tensor *x = NULL, *y = NULL;
  bool header = o->header > 0;
  if (!first_s) {
    rc = err_set(DRV_EPARSE, "%s: %s", path, fb.len ? "no data, only blank lines" : "empty file");
    goto fail;
  }
  cx.nf = count_fields(first_s, first_e, cx.delim);
  if ((rc = resolve_label(path, first_no, o, cx.nf, &cx.label)) < 0) goto fail;
  if ((rc = csv_kinds(&cx, first_no)) < 0) goto fail;
  if (o->header < 0 && (rc = csv_header(&cx, first_s, first_e, &header)) < 0) goto fail;
  int64_t rows = lines - header, kept = rows;
  if (rows == 0) {
    rc = err_set(DRV_EPARSE, "%s: no data rows after the header", path);
    goto fail;
  }
  if (o->keep) {
    if (o->keep_n != rows) {
      rc = err_set(DRV_EINVAL, "%s: has %lld data rows now, %lld when it was first read: "
                   "a worker must see the same file", path, (long long)rows, (long long)o->keep_n);
      goto fail;
    }
    kept = 0;
    for (int64_t i = 0; i < rows; i++) kept += o->keep[i] != 0;
  }
  if ((rc = data__alloc_xy(path, kept, cx.nf - (cx.label >= 0), &x, &y)) < 0) goto fail;
  if ((rc = csv_fill(&cx, &body, header, o->keep, x, y)) < 0) goto fail;
  free(fb.data);
  rc = csv_finish(&cx, o, header, x, y, out);
  ctx_free(&cx);
  return rc;
fail:
  ctx_free(&cx);
  tensor_free(x);
  tensor_free(y);
  free(fb.data);
  return rc;
}

/* ============================== streaming ================================ */

/* The first non-blank line: the shape, the label column, the header. */
static int csv_first(csv_ctx *cx, const data_csv_opts *o, int64_t lineno, const char *s,
                     const char *e, bool *header) {
  cx->nf = count_fields(s, e, cx->delim);
  int rc = resolve_label(cx->path, lineno, o, cx->nf, &cx->label);
  if (rc == 0) rc = csv_kinds(cx, lineno);
  if (rc == 0 && o->header < 0) rc = csv_header(cx, s, e, header);
  return rc;
}

/* One data line of the stream: split, parsed into row / *y. */
static int csv_line(csv_ctx *cx, int64_t lineno, char *s, char *e, char **fields, float *row,
                    float *y) {
  int64_t got = split_fields(s, e, cx->delim, fields, cx->nf);
  if (got != cx->nf)
    return err_set(DRV_EPARSE, "%s:%lld: expected %lld fields, found %lld", cx->path,
                   (long long)lineno, (long long)cx->nf, (long long)got);
  return csv_row(cx, lineno, fields, row, y);
}

/* What the stream found, into scan (names handed over, sorted). */
static void csv_scan_out(csv_ctx *cx, const data_csv_opts *o, int64_t rows, bool header,
                         data_classes *cls, data_scan *scan) {
  int64_t classes = data__classes_end(cls);
  if (!scan) return;
  memset(scan, 0, sizeof *scan);
  scan->rows = rows;
  scan->features = csv_features(cx);
  scan->header = header;
  scan->label = cx->label;
  scan->classes = o->no_label || cx->classes == -1 ? 0 : classes;
  if (cx->classes == 1 && !cx->nm.fixed) {
    qsort(cx->nm.v, (size_t)cx->nm.n, sizeof *cx->nm.v, cmp_str);
    scan->names = cx->nm.v;
    scan->nnames = scan->classes = cx->nm.n;
    cx->nm.v = NULL;
    cx->nm.n = 0;
  }
}

int data__csv_stream(const char *path, const data_csv_opts *o, data__row_fn fn, void *ud,
                     data_scan *scan) {
  csv_ctx cx = {.path = path, .delim = o->delimiter ? o->delimiter : ',', .classes = o->classes,
                .o = o};
  if (o->names) cx.nm = (names){(char **)o->names, o->nnames, o->nnames, true};
  if (cx.delim == '\n' || cx.delim == '\r' || cx.delim == '.' || cx.delim == '-' || cx.delim == '+')
    return err_set(DRV_EINVAL, "%s: delimiter '%c' cannot separate numbers", path, cx.delim);
  data_lines l;
  int rc = data__lines_open(&l, path);
  if (rc < 0) return rc;
  char *s, *e, **fields = NULL;
  float *row = NULL, y = 0;
  bool header = o->header > 0, any = false, first = true;
  int64_t data_row = -1;
  data_classes cls = {0};
  while ((rc = data__lines_next(&l, &s, &e)) == 1) {
    if (l.lineno % DATA__POLL_LINES == 0 && err_interrupted()) {
      rc = data__interrupted(path);
      break;
    }
    any = true;
    if (l.lineno == 1 && e - s >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3; /* a BOM */
    if (data__is_blank_line(s, e)) continue;
    if (first) {
      first = false;
      if ((rc = csv_first(&cx, o, l.lineno, s, e, &header)) < 0) break;
      fields = malloc((size_t)cx.nf * sizeof *fields);
      row = malloc((size_t)cx.nf * sizeof *row);
      if (!fields || !row) {
        rc = err_set(DRV_ENOMEM, "%s: out of memory", path);
        break;
      }
      if (header) continue;
    }
    if (o->keep && (++data_row >= o->keep_n || !o->keep[data_row])) continue;
    if (!o->keep) data_row++;
    if ((rc = csv_line(&cx, l.lineno, s, e, fields, row, &y)) < 0) break;
    if (!o->no_label && cx.classes == 0) data__classes_add(&cls, y);
    data__ids ids = {cx.ids, NULL, cx.ncat};
    if (fn && (rc = fn(ud, row, csv_features(&cx), y, cx.ncat ? &ids : NULL)) < 0) break;
  }
  data__lines_close(&l);
  free(fields);
  free(row);
  if (rc == 0 && first)
    rc = err_set(DRV_EPARSE, "%s: %s", path, any ? "no data, only blank lines" : "empty file");
  else if (rc == 0 && data_row < 0)
    rc = err_set(DRV_EPARSE, "%s: no data rows after the header", path);
  else if (rc == 0 && o->keep && data_row + 1 != o->keep_n)
    rc = err_set(DRV_EINVAL, "%s: has %lld data rows now, %lld when it was first read: "
                 "a worker must see the same file", path, (long long)data_row + 1,
                 (long long)o->keep_n);
  if (rc == 0) csv_scan_out(&cx, o, data_row + 1, header, &cls, scan);
  else data__classes_end(&cls);
  ctx_free(&cx);
  return rc;
}

int data_open_csv(const char *path, const data_csv_opts *o, dataset **out) {
  *out = NULL;
  data_csv_opts def = {.label = -1, .header = -1, .delimiter = ','};
  if (!o) o = &def;
  if (o->keep) return err_set(DRV_EINVAL, "%s: a lazy dataset is the whole file", path);
  data_scan sc;
  int rc = data__csv_stream(path, o, NULL, NULL, &sc);
  if (rc < 0) return rc;
  dataset *d = calloc(1, sizeof *d);
  if (!d) {
    for (int64_t i = 0; i < sc.nnames; i++) free(sc.names[i]);
    free(sc.names);
    return err_set(DRV_ENOMEM, "%s: out of memory", path);
  }
  const char *base = strrchr(path, '/');
  snprintf(d->source, sizeof d->source, "%s", base ? base + 1 : path);
  d->n = sc.rows;
  d->features = sc.features;
  d->classes = sc.classes;
  d->names = sc.names;
  d->nnames = sc.nnames;
  d->unlabeled = o->no_label;
  d->header_guessed = o->header < 0 && sc.header;
  d->x_ndim = 2;
  d->x_shape[0] = d->y_shape[0] = d->n;
  d->x_shape[1] = d->features;
  d->y_ndim = 1;
  d->y_shape[1] = 1;
  if (o->ncategorical > 0) d->sp = (data_sparse){.fields = o->ncategorical, .bound = o->buckets};
  csv_ctx cx = {.path = path, .delim = o->delimiter ? o->delimiter : ',', .label = sc.label,
                .classes = o->classes, .o = o};
  set_csv_recipe(d, path, &cx, sc.header);
  if (!d->recipe) {
    data_free(d);
    return err_set(DRV_ENOMEM, "%s: out of memory", path);
  }
  *out = d;
  return 0;
}
