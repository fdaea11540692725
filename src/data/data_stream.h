/* data_stream.h - rows of CSV or libsvm text read as they arrive: from a
 * pipe, stdin, a socket, or a file that may grow. Nothing blocks: a read
 * takes what the descriptor has now and parses whole lines only, so the
 * caller (the coordinator's loop) polls the descriptor and asks again.
 */
#ifndef DROVER_DATA_STREAM_H
#define DROVER_DATA_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "data/data.h"
#include "numeric/sparse.h"
#include "numeric/tensor.h"

enum { DATA_STREAM_CSV = 0, DATA_STREAM_LIBSVM = 1 };

typedef struct data_stream_opts {
  int format;       /* DATA_STREAM_CSV or DATA_STREAM_LIBSVM */
  int label;        /* CSV: label column, 0-based; negative counts from the end (-1 last) */
  char delimiter;   /* CSV: ',' when 0 */
  int64_t features; /* libsvm: columns (required); CSV: 0, taken from the first row */
  bool follow;      /* a regular file: at its end, wait for more (tail -f); pipes end at EOF */
  /* Ids (issue 26), as data.csv and data.libsvm make them: CSV columns
   * (0-based, borrowed for data_stream_open) whose strings hash into ids
   * below buckets (data_hash_id), empty numeric fields reading as
   * `missing`; or libsvm rows kept sparse (sparse: x is [k, 0], each
   * index:value pair an id index - 1 with its weight, below features,
   * up to 2^40). A batch's ids: data_stream_sparse. */
  const int *categorical;
  int ncategorical;
  uint64_t buckets;
  float missing;
  bool sparse;
} data_stream_opts;

typedef struct data_stream data_stream;

/* Opens path ("-": standard input, which is set non-blocking) for reading
 * rows. 0 with *out (the caller's: data_stream_close), or a negative code. */
int data_stream_open(const char *path, const data_stream_opts *o, data_stream **out);

/* Parses what has arrived. 1 with *x [k, features] and *y [k] (the
 * caller's), min <= k <= max rows (fewer than min only at the end of the
 * stream); 0 at the end with no row left; DRV_EAGAIN when fewer than min
 * rows are there yet; DRV_EPARSE for a malformed line ("stdin:12: ...");
 * DRV_EIO when the read fails. */
int data_stream_read(data_stream *s, int64_t min, int64_t max, tensor **x, tensor **y);

/* The ids of the rows the last data_stream_read gave (the stream's, valid
 * until its next read), *bound their bound (buckets, features); NULL when
 * the stream has none. */
const nn_sparse *data_stream_sparse(const data_stream *s, uint64_t *bound);
/* Whether the stream's rows have ids (categorical columns, sparse
 * libsvm), and *bound theirs. */
bool data_stream_has_ids(const data_stream *s, uint64_t *bound);
/* data_stream_read's rows as a new dataset (the caller's: data_free),
 * with their ids as its sparse part; same returns. */
int data_stream_read_dataset(data_stream *s, int64_t min, int64_t max, dataset **out);

/* The descriptor to poll for more (a pipe, socket or terminal), or -1 for
 * a regular file (poll it with a timer). */
int data_stream_fd(const data_stream *s);
/* Rows handed out so far, and the stream's name ("stdin", the path). */
int64_t data_stream_rows(const data_stream *s);
const char *data_stream_name(const data_stream *s);
/* Whether the end was reached (and every row handed out). */
bool data_stream_ended(const data_stream *s);
/* Why the stream cannot be opened again and read from its start ("stdin",
 * "a pipe or a socket"); NULL for a file, which can. */
const char *data_stream_no_replay(const data_stream *s);

void data_stream_close(data_stream *s); /* NULL is fine; stdin is left open */

#endif
