/* data_int.h - internals shared by the dataset readers (data_read.c, the
 * text formats and these helpers; data_bin.c, the binary formats). Not part
 * of the public API: include data.h instead.
 */
#ifndef DROVER_DATA_INT_H
#define DROVER_DATA_INT_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "data/data.h"
#include "data/data_file.h"

/* Most elements a reader will allocate for x: a header or an index beyond
 * this is taken to be corrupt rather than a real dataset (2^34 floats is
 * already 64 GiB). */
#define DATA__MAX_ELEMS ((int64_t)1 << 34)
/* Longest field or token quoted back in a message. */
#define DATA__QUOTE_MAX 40

typedef struct filebuf {
  char *data; /* NUL-terminated copy of the file, owned */
  size_t len; /* bytes, not counting the NUL */
} filebuf;

/* Reads the whole file at `path` into fb; the caller frees fb->data (also
 * set to NULL on failure). Works for pipes as well as regular files. A
 * gzip file (by its magic bytes, whatever its name) is decompressed, so
 * every reader takes `.gz` files; corrupt or truncated ones are DRV_EPARSE
 * naming the byte of the compressed file.
 * "cannot open 'PATH': REASON" when the file cannot be opened. */
int data__read_all(const char *path, filebuf *fb);

/* Allocates zero-filled x [rows, cols] and y [rows], refusing absurd sizes
 * (DRV_ERANGE) before allocating. On failure both are NULL. */
int data__alloc_xy(const char *path, int64_t rows, int64_t cols, tensor **x, tensor **y);

/* Wraps x [n, f] and y [n] into a new dataset named after the last
 * component of `path`, working out `classes` from the labels. Takes
 * ownership of x and y: on failure both are freed. */
int data__wrap(tensor *x, tensor *y, const char *path, dataset **out);

/* ---- text parsing (data_read.c), shared by the CSV and libsvm readers -- */

enum { NUM_OK = 0, NUM_BAD = 1, NUM_INF = 2 };
/* Lines between polls of the interrupt flag. */
#define DATA__POLL_LINES 8192

/* Parses all of the NUL-terminated s (blanks around it allowed) as a finite
 * float in the "C" locale: NUM_OK, NUM_BAD or NUM_INF. */
int data__parse_float(const char *s, float *v);
/* s without surrounding blanks (*len capped at DATA__QUOTE_MAX), for
 * quoting a field back in a message. */
const char *data__trimmed(const char *s, int *len);

/* Walks a text buffer line by line; lines end in LF or CRLF. */
typedef struct line_iter {
  char *p, *end;
  int64_t lineno; /* 1-based number of the line last returned */
} line_iter;

/* Next line as [*s, *e) without its line ending; false at the end. The
 * byte at *e may be overwritten with a NUL by the caller. */
bool data__next_line(line_iter *li, char **s, char **e);
bool data__is_blank_line(const char *s, const char *e);
/* DRV_EINTERRUPTED naming the file. */
int data__interrupted(const char *path);

/* classes of 1-D labels: max + 1 when they look like class ids (integers
 * from 0 or 1 up, most ids in use or at most 16 of them), else 0: a
 * regression target of integers (ages, prices) is not 347 classes. */
int64_t data__classes_of(const tensor *y);

/* Sets d->recipe to the JSON object `base` (its "n" and "ops" added);
 * takes the reference. Out of memory leaves the recipe NULL (the data
 * are then shipped): never an error. */
struct json_t;
void data__set_recipe(dataset *d, struct json_t *base);
/* data_read_npy; check false skips the scan of a mapped x for NaN and Inf
 * (a worker reading a file the coordinator checked). */
int data__read_npy(const char *x_path, const char *y_path, bool check, dataset **out);
/* dst's recipe: src's with the operation `op` appended (taken); NULL when
 * src has none. */
void data__recipe_op(const dataset *src, dataset *dst, struct json_t *op);
/* {"op": name, "seed": seed} and {"op": "standardize", mean, std}. */
struct json_t *data__op_seeded(const char *name, uint64_t seed);
struct json_t *data__op_stats(const data_stats *s);
/* The form of path a recipe keeps, in buf: absolute, or for an hdfs://
 * URL its webhdfs:// form, which a node without HADOOP_CONF_DIR can use
 * (path itself when it cannot be resolved: the worker then reports it). */
const char *data__abspath(const char *path, char *buf, size_t n);

/* ---- lazy datasets (data_lazy.c) ---------------------------------------- */

/* A lazy dataset of n rows shaped like `like` (features, classes, names,
 * flags, source and shapes), without a recipe: the caller sets it
 * (data__recipe_op). */
int data__lazy_like(const dataset *like, int64_t n, dataset **out);
/* Records x's and y's shapes in d->x_shape/y_shape (d loaded). */
void data__note_shapes(dataset *d);

/* ---- streaming (data_lines.c) ------------------------------------------- */

/* A text file read line by line through a small buffer (plain or gzip,
 * members one after another: data_file's stream): the coordinator streams
 * a file it must not hold. */
typedef struct data_lines {
  const char *path; /* borrowed */
  data_file f;      /* its stream */
  char *buf;        /* owned; lines point into it until the next call */
  size_t cap, start, len;
  int64_t lineno;   /* 1-based number of the line last returned */
  bool eof;
} data_lines;

/* "cannot open 'PATH': REASON" when it cannot be opened. */
int data__lines_open(data_lines *l, const char *path);
/* Next line as [*s, *e) without its line ending (*e may be overwritten
 * with a NUL): 1, 0 at the end, or a negative code naming the file (and
 * the byte of a gzip file that is corrupt or cut short). */
int data__lines_next(data_lines *l, char **s, char **e);
void data__lines_close(data_lines *l);

/* ---- sparse parts (data_sparse.c) --------------------------------------- */

/* One row's sparse entries as a reader hands them on (borrowed). */
typedef struct data__ids {
  const uint64_t *ids;
  const float *vals; /* NULL: all ones */
  int64_t n;
} data__ids;

/* A sparse part built row by row (arrays grown by doubling). */
typedef struct data_spbuild {
  data_sparse s; /* fields, weighted, bound set by the caller */
  int64_t rows, cap_rows, cap;
} data_spbuild;
/* Appends one row (r->vals required when s.weighted). */
int data__sp_add(data_spbuild *b, const char *path, const data__ids *r);
/* Moves the built arrays into dst (its shape fields too); b is empty after. */
void data__sp_take(data_spbuild *b, data_sparse *dst);
void data__sparse_free(data_sparse *s); /* the arrays; the shape stays */
/* dst (arrays NULL) = rows idx[0..k) of src, in that order; src's shape. */
int data__sparse_gather(const data_sparse *src, const int64_t *idx, int64_t k, data_sparse *dst);
/* dst (arrays NULL) = a copy of src's n rows. */
int data__sparse_copy(const data_sparse *src, int64_t n, data_sparse *dst);
/* The structure of d's loaded sparse part (ptr from 0, monotone, ids below
 * the bound, fields consistent), DRV_EINVAL naming `op` and d. */
int data__sparse_check(const dataset *d, const char *op);
/* The batch rows idx[0..m) of it's dataset into it->bsp: the buffers grow
 * to the largest batch seen, so a warm iterator allocates nothing. */
int data__iter_sparse_fill(data_iter *it, const int64_t *idx, int64_t m);

/* A row of a stream of rows: x [features], its label y and its sparse
 * entries (NULL when the reader has none); returns 0 or a negative code
 * that stops the stream. */
typedef int (*data__row_fn)(void *ud, const float *x, int64_t features, float y,
                            const data__ids *ids);
/* A data__row_fn that appends the rows to a [kept, features] x and a
 * [kept] y made on the first row, and their sparse entries to sp: a reader
 * of some rows of a file. */
typedef struct data_fill {
  const char *path;
  int64_t kept, row;
  tensor *x, *y; /* owned until taken */
  data_spbuild sp; /* owned until taken */
} data_fill;
int data__fill_row(void *ud, const float *x, int64_t features, float y, const data__ids *ids);

/* Labels seen one at a time, for data__classes_of's rule. */
typedef struct data_classes {
  int64_t n;
  float min, max;
  bool ids;        /* every label so far a non-negative integer < 2^24 */
  uint8_t *seen;   /* owned; seen[id] for ids < cap */
  int64_t cap, distinct;
} data_classes;
void data__classes_add(data_classes *c, float v);
/* The classes (as data__classes_of) and frees c's memory. */
int64_t data__classes_end(data_classes *c);

/* What a streaming pass over a text file found (data_open_*). */
typedef struct data_scan {
  int64_t rows, features;
  int64_t classes;   /* of the labels (data__classes_of's rule; CSV names: their count) */
  bool header;       /* CSV: the first line is a header */
  char **names;      /* CSV classes = "names": sorted, owned */
  int64_t nnames;
  int64_t label;     /* CSV: resolved label column, -1 none */
  bool zero_based;   /* libsvm */
  uint64_t bound;    /* libsvm sparse: the feature count (ids' bound) */
} data_scan;

/* Streams the CSV file: with o->keep, parses the kept data rows only and
 * calls fn for each (in file order; fn may be NULL); without, parses and
 * checks every row. scan (may be NULL) gets what was found. */
int data__csv_stream(const char *path, const data_csv_opts *o, data__row_fn fn, void *ud,
                     data_scan *scan);
/* The same for libsvm; fn needs o->features > 0 (rows are densified). */
int data__svm_stream(const char *path, const data_libsvm_opts *o, data__row_fn fn, void *ud,
                     data_scan *scan);
/* Mean and std of the rows (of f features) of the dataset `recipe`
 * describes, streamed from its file once (data_recipe.c). */
int data__recipe_stats(const char *recipe, int64_t f, data_stats **out);
/* The statistics from shifted sums (s1 = sum of x - k, s2 = sum of
 * (x - k)^2 over n rows), with fit_stats' rule for constant features. */
int data__stats_from_sums(int64_t f, int64_t n, const double *k, const double *s1,
                          const double *s2, data_stats **out);

/* ---- binary elements (data_bin.c), shared by IDX and .npy ---------------- */

typedef enum { EL_U, EL_I, EL_F } data__el_kind;
typedef struct data__el_type {
  data__el_kind kind;
  int size; /* bytes: 1, 2, 4 or 8 */
  bool big; /* big-endian in the file */
} data__el_type;

uint64_t data__load_uint(const unsigned char *p, int size, bool big);
/* Converts `count` elements of type t at src to floats at dst. */
void data__decode(const unsigned char *src, data__el_type t, int64_t count, float *dst);
/* Gives x [rows, features] the file's shape when it has 3 or 4 dimensions
 * (images [n, h, w], [n, c, h, w]); more stay flattened to [n, features]. */
int data__keep_shape(tensor *x, int ndim, const int64_t *dims);
/* Non-finite values poison a fit (its loss becomes NaN): refused at load,
 * as the CSV reader does, naming the first one's row (1-based, as a user
 * counts them) and column. */
int data__check_finite(const char *path, const float *v, int64_t rows, int64_t cols);

/* The rows `rows[0..k)` (in that order) of the .npy x at x_path, n rows in
 * all, and their labels from y_path (NULL: zeros): a plain file by byte
 * ranges (a file on HDFS, where nothing is mapped), a gzip one read whole. */
int data__npy_rows(const char *x_path, const char *y_path, const int64_t *rows, int64_t k,
                   int64_t n, dataset **out);

/* ---- IDX in files mode (data_idx.c) ------------------------------------- */

/* The rows `rows[0..k)` (file rows, in that order) of the IDX dataset of
 * the recipe rec ({"format": "idx", ...}), read from x_path and y_path (y
 * may be NULL: zeros) as the worker found them: a plain file by byte
 * ranges, a gzip file streamed. The files must be the ones the recipe
 * describes (their size, dimensions), else the error names the file. */
struct json_t;
int data__idx_rows(struct json_t *rec, const char *x_path, const char *y_path,
                   const int64_t *rows, int64_t k, dataset **out);
/* fn(x row, features, 0) for each row i of the file with keep[i], in file
 * order: standardize's statistics (the labels are not read). */
int data__idx_each_x(struct json_t *rec, const char *x_path, const uint8_t *keep,
                     data__row_fn fn, void *ud);

#endif
