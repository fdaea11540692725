/* data.h - datasets: readers, seeded operations, batching, sharding.
 *
 * A dataset is an immutable pair of dense float32 tensors in memory:
 * x [n, features] (IDX images and 3- or 4-D .npy arrays keep their shape,
 * [n, h, w] or [n, c, h, w]; `features` is then the elements of one example)
 * and y [n] (a label or class id per example) or [n, k]
 * (multi-output targets). Every operation returns a NEW dataset and leaves
 * its input untouched; each dataset owns its tensors and is freed with
 * data_free(). Readers either return a complete dataset or fail with a
 * message naming the file, the line (or byte offset) and what was wrong;
 * nothing is half-loaded.
 *
 * A dataset read from a file may be LAZY (data_open_csv, data_open_libsvm,
 * data_open_idx, and every split, shuffle, shard or standardize of a dataset with a
 * recipe): x and y are NULL, n, features, classes and names are known, and
 * the rows are read from the file on first use (data_load). Operations
 * that need values (data_subset, data_iter_init, ...) refuse a lazy
 * dataset; load it first. This is how a coordinator holds a dataset its
 * workers read themselves without holding its rows.
 */
#ifndef DROVER_DATA_H
#define DROVER_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "numeric/rng.h"
#include "numeric/sparse.h"
#include "numeric/tensor.h"

/* A dataset's sparse part: ids (and weights) per example as CSR, beside
 * the dense x (sparse.h's layout, for all n rows). Hashed categorical
 * columns give `fields` ids per row and no weights; libsvm { sparse = true }
 * gives any number of (id, value) pairs per row. bound > 0 says there is a
 * sparse part (also while the dataset is lazy: the arrays are NULL then). */
typedef struct data_sparse {
  int64_t *ptr;   /* n + 1 offsets from 0, owned; NULL while lazy */
  uint64_t *ids;  /* ptr[n] ids, each < bound, owned */
  float *vals;    /* ptr[n] weights, owned; NULL when !weighted (all ones) */
  int fields;     /* > 0: one id per categorical column per row, in file order */
  bool weighted;  /* vals present (libsvm) */
  uint64_t bound; /* ids are < bound (the buckets, libsvm's features); 0: none */
} data_sparse;

/* Ids of hashed categorical values: fmix64(fnv1a64(column as 4 bytes,
 * little-endian, 1-based; then the field's bytes)) mod buckets, where
 * fmix64 is MurmurHash3's 64-bit finalizer. Every categorical column
 * shares [0, buckets); the column in the hash keeps equal strings of two
 * columns apart, and an empty field (missing) is its column's own id. */
uint64_t data_hash_id(uint32_t column, const char *s, size_t len, uint64_t buckets);
/* Largest buckets (and libsvm sparse feature count) accepted: 2^40. */
#define DATA_MAX_BUCKETS ((uint64_t)1 << 40)

typedef struct dataset {
  tensor *x;        /* [n, features] or [n, ...] of features elements, contiguous, owned */
  tensor *y;        /* [n] or [n, k], contiguous, owned */
  int64_t n;        /* examples */
  int64_t features; /* x columns */
  int64_t classes;  /* max label + 1 when every y is a non-negative integer
                       and y is 1-D; else 0 */
  char source[256]; /* where it came from ("digits.csv", "synthetic"), for
                       messages and printing */
  /* How to build it again from files (JSON, owned; NULL: built in memory,
   * by data_synthetic, data_subset or by hand): the reader, its path and
   * options, the row count, then the operations (split, shuffle, shard,
   * standardize) in order. A cluster worker rebuilds its own shard from it
   * (data_from_recipe) instead of receiving the rows. */
  char *recipe;
  /* classes = "names": the label strings, id i is names[i] (owned, NULL
   * when the labels were numbers); nnames == classes then. */
  char **names;
  int64_t nnames;
  bool unlabeled;     /* read without a label column (label = false): y is zeros */
  bool header_guessed; /* CSV: the first line was detected as a header */
  /* The shapes of x and y with n rows, known while the dataset is lazy
   * (set by every constructor; x_shape[0] and y_shape[0] are n). */
  int x_ndim, y_ndim;
  int64_t x_shape[TENSOR_MAXDIM], y_shape[2];
  data_sparse sp;     /* the sparse part; sp.bound == 0: none */
} dataset;

void data_free(dataset *d); /* NULL is fine */

/* True when d has a sparse part (hashed categorical columns, sparse libsvm). */
bool data_has_sparse(const dataset *d);

/* The sparse part as bytes for a SETUP (a worker's shard of it): 4
 * fields, 1 weighted, 8 bound, 8 nnz, then ptr (n + 1 int64), ids (nnz
 * uint64) and, when weighted, vals (nnz float32), little-endian. *len 0
 * (and *out NULL) when d has none. The caller frees *out. DRV_ENOMEM,
 * DRV_ERANGE (sizes that overflow). */
int data_sparse_encode(const dataset *d, uint8_t **out, size_t *len);
/* The same for rows [r0, r0 + rows) of d (a predict batch's ids): the
 * part of a dataset of those rows. DRV_ERANGE on a range outside d. */
int data_sparse_encode_rows(const dataset *d, int64_t r0, int64_t rows, uint8_t **out,
                            size_t *len);
/* The inverse into d (whose n and source are set, and which has no
 * sparse part yet), every offset, count and id checked (`what` names the
 * message in errors): DRV_EPARSE on bytes that are not such a part. */
int data_sparse_decode(dataset *d, const uint8_t *p, size_t len, const char *what);
/* A batch's ids (a FEED_BATCH's) as bytes, data_sparse_encode's layout
 * for sp->rows rows; bound: the ids' bound (the dataset's buckets or
 * features), 0 for one above the largest id (each layer checks its ids
 * against its own size). *len 0 when sp is NULL. The caller frees *out.
 * DRV_EINVAL (sp's structure), DRV_ERANGE (an id not below bound). */
int data_sparse_batch_encode(const nn_sparse *sp, uint64_t bound, uint8_t **out, size_t *len);
/* The inverse for `rows` rows into *s (owned: data_sparse_free), checked
 * as data_sparse_decode does; len 0: *s has none (bound 0). DRV_EPARSE. */
int data_sparse_batch_decode(data_sparse *s, int64_t rows, const uint8_t *p, size_t len,
                             const char *what);
/* Frees s's arrays and zeroes it (NULL is fine). */
void data_sparse_free(data_sparse *s);
/* The nn_sparse of s's first `rows` rows: s's arrays, lent. */
nn_sparse data_sparse_view(const data_sparse *s, int64_t rows);

/* True when d's rows are not in memory (x and y NULL; see above). */
bool data_is_lazy(const dataset *d);
/* Reads a lazy dataset's rows from its files (its recipe) into d itself,
 * so pointers to d stay valid; nothing when d is loaded. Errors name the
 * file and line, as the readers' do; d stays lazy then. */
int data_load(dataset *d);

/* ---- readers ----------------------------------------------------------- */

typedef struct data_csv_opts {
  int label;       /* label column, 0-based; negative counts from the end (-1 = last) */
  int header;      /* 1 skip the first line, 0 none, -1 detect (non-numeric) */
  char delimiter;  /* ',' by default; 0 means ',' */
  bool no_label;   /* every column is a feature; y is zeros (label ignored) */
  int classes;     /* 0 labels are numbers, class ids when they look like
                      ids (data__wrap); 1 names: label strings mapped to
                      ids in sorted order (dataset.names); -1 a target,
                      never class ids */
  /* Set by the Lua side: the label column as the user wrote it (1-based
   * or negative), for messages; 0 means label + 1 / label. */
  int label_given;
  /* The class names a recipe fixed (the coordinator's), used instead of
   * the sorted names of this file's rows; NULL to collect them. */
  char *const *names;
  int64_t nnames;
  /* Rows to parse (data rows, 0-based), NULL for all: a worker parses its
   * shard only. keep has `keep_n` entries, the file's data rows. */
  const uint8_t *keep;
  int64_t keep_n;
  /* Categorical columns (0-based file columns, ascending, never the
   * label): their strings are hashed into ids (data_hash_id with the
   * 1-based column) in [0, buckets), the dataset's sparse part with one
   * field per column; the other columns stay dense x. */
  const int *categorical;
  int ncategorical;
  uint64_t buckets;  /* 1 .. DATA_MAX_BUCKETS when ncategorical > 0 */
  /* has_missing: an empty numeric feature field reads as `missing`
   * (else it is an error naming file:line). */
  bool has_missing;
  float missing;
} data_csv_opts;

/* CSV of numbers; every row must have the same number of fields. Blank
 * lines are skipped. */
int data_read_csv(const char *path, const data_csv_opts *o, dataset **out);
/* The same file as a lazy dataset (o->keep must be NULL): the file is
 * streamed once through a small buffer, every row parsed and checked (so
 * a malformed file fails here, naming file and line) and counted, the
 * label's classes or names collected, and nothing kept but the recipe. */
int data_open_csv(const char *path, const data_csv_opts *o, dataset **out);

typedef struct data_libsvm_opts {
  int64_t features; /* 0 infers it from the largest index */
  int zero_based;   /* 0 indices start at 1, 1 at 0 (scikit-learn's
                       dump_svmlight_file), -1 auto: zero-based when an
                       index 0 appears */
  const uint8_t *keep; /* as in data_csv_opts (examples, 0-based) */
  int64_t keep_n;
  /* Rows stay sparse: x is [n, 0] and the (index, value) pairs are the
   * sparse part (ids 0-based, weighted), indices up to 2^32; features
   * (or the largest index) is its bound. No dense matrix is made. */
  bool sparse;
} data_libsvm_opts;

/* libsvm/svmlight: "label idx:val idx:val ..." with ascending indices;
 * densified. o may be NULL (1-based, features inferred). */
int data_read_libsvm(const char *path, const data_libsvm_opts *o, dataset **out);
/* The same as a lazy dataset, streamed and checked like data_open_csv. */
int data_open_libsvm(const char *path, const data_libsvm_opts *o, dataset **out);
/* IDX (MNIST) files: images of any unsigned byte/int/float IDX type,
 * flattened to rows; labels a 1-D IDX file (may be NULL: y is zeros).
 * Values are kept as stored (pixels stay 0..255). */
int data_read_idx(const char *images, const char *labels, dataset **out);
/* The same as a lazy dataset (files mode): each file is streamed once
 * (gzip or plain) and checked as data_read_idx checks it, the labels'
 * classes collected; nothing is kept but the recipe (paths, sizes, the
 * images' dimensions). A worker then reads its rows by byte ranges (plain)
 * or by streaming (gzip). A pipe is read whole (data_read_idx). */
int data_open_idx(const char *images, const char *labels, dataset **out);
/* NumPy .npy (format 1.0/2.0/3.0), C order, dtypes <f4 <f8 |u1 <i8 (and
 * <i4): x is 2-D (or N-D, flattened to rows), labels 1-D (may be NULL). */
int data_read_npy(const char *x_path, const char *y_path, dataset **out);

typedef struct data_synth_opts {
  int64_t n, features, classes;
  uint64_t seed;
} data_synth_opts;

/* MNIST-shaped data: x uniform in [0, 1), y = argmax(W (x - 0.5)) for a
 * fixed random teacher W ~ N(0, 1) drawn from the seed, so that a model can
 * really learn it. */
int data_synthetic(const data_synth_opts *o, dataset **out);

/* ---- files mode (data_recipe.c) ----------------------------------------- */

/* Builds shard `shard` of `nshards` (data_shard's rows) of the dataset
 * that `recipe` (dataset.recipe) describes, reading only what it needs:
 * the rows of a mapped .npy, the shard's lines of a CSV or libsvm file.
 * The result is what data_shard of the coordinator's dataset would be, row
 * for row (its recipe is NULL). */
int data_from_recipe(const char *recipe, size_t len, int64_t shard, int64_t nshards,
                     dataset **out);

/* The recipe with, for each file of it found among files[0..n) (absolute
 * paths as realpath gives them), the name the launcher shipped it under,
 * names[i]: a worker that sees neither the coordinator's path nor the path
 * as the script gave it opens that name in its directory. *out is a new
 * string (the caller's), or NULL when no file of the recipe was shipped. */
int data_recipe_shipped(const char *recipe, const char *const *files, const char *const *names,
                        int n, char **out);

/* ---- writers (data_write.c) --------------------------------------------- */

/* t (1-D: one value per line, 2-D: rows) as CSV of shortest round-trip
 * floats, or as a .npy of <f4 with t's shape. Written to a temporary file
 * renamed over `path`. */
int data_write_csv(const char *path, const tensor *t);
int data_write_npy(const char *path, const tensor *t);

/* ---- operations (all return new datasets) ------------------------------ */

/* Split, shuffle, shard and standardize of a dataset with a recipe give
 * lazy datasets (the recipe with the operation appended): no rows are
 * copied, and a file's rows are read once, where they are used. */

/* Seeded shuffle, then the first round(frac * n) examples go to *a, the
 * rest to *b. 0 < frac < 1. */
int data_split(const dataset *d, double frac, uint64_t seed, dataset **a, dataset **b);
int data_shuffle(const dataset *d, uint64_t seed, dataset **out);
/* Examples i, i+n, i+2n, ... (0 <= i < n), like tf.data's shard(n, i). */
int data_shard(const dataset *d, int64_t i, int64_t n, dataset **out);
/* Rows idx[0..k) in that order. */
int data_subset(const dataset *d, const int64_t *idx, int64_t k, dataset **out);

typedef struct data_stats {
  int64_t features;
  float *mean; /* owned */
  float *std;  /* owned; a constant feature gets 1 so it maps to 0 */
} data_stats;

/* Standardises x per feature: (x - mean) / std. With stats == NULL the
 * statistics are fitted on d and returned in *stats_out (caller frees with
 * data_stats_free); otherwise the given ones are applied (feature count
 * must match). stats_out may be NULL. A dataset with a recipe has its
 * statistics fitted by streaming its rows from the file once (one pass,
 * shifted sums in double; data__recipe_stats), loaded or not. */
int data_standardize(const dataset *d, const data_stats *stats, dataset **out,
                     data_stats **stats_out);
void data_stats_free(data_stats *s);

/* ---- batching ---------------------------------------------------------- */

/* Iterates over batches of a dataset, one epoch per data_iter_reset().
 * With shuffle, epoch e uses the permutation seeded by rng_derive(seed, e),
 * so a run is reproducible and resumable. The last batch of an epoch may be
 * smaller. The iterator borrows d (which must outlive it) and owns the
 * batch tensors it hands out (valid until the next call). */
typedef struct data_iter {
  const dataset *d;
  int64_t batch;
  bool shuffle;
  uint64_t seed;
  int64_t epoch;  /* epoch of the current pass, 0-based */
  int64_t pos;    /* next example position in this epoch */
  int64_t *perm;  /* owned, n entries */
  tensor *bx, *by;
  bool views;     /* unshuffled: x is a view of the dataset's rows (set by
                     the caller that only reads the batch, e.g. to encode it) */
  /* The batch's sparse part (data_has_sparse(d)): buffers grown to the
   * largest batch seen, then reused. */
  nn_sparse bsp;
  int64_t *bptr;
  uint64_t *bids;
  float *bvals;
  int64_t bcap;   /* entries bids/bvals hold */
} data_iter;

int data_iter_init(data_iter *it, const dataset *d, int64_t batch, bool shuffle,
                   uint64_t seed);
/* Next batch into *x, *y: returns 1, or 0 at the end of the epoch. */
int data_iter_next(data_iter *it, const tensor **x, const tensor **y);
/* The sparse part of the batch data_iter_next returned last (rows of x in
 * order), valid until the next call; NULL when the dataset has none. */
const nn_sparse *data_iter_sparse(const data_iter *it);
/* Starts the next epoch (reshuffling when shuffle). */
void data_iter_reset(data_iter *it);
/* Goes to position `pos` of (0-based) epoch `epoch`, as if that many
 * resets and batches had happened: a resumed fit reads the batches the
 * interrupted one would have read. DRV_EINVAL when pos is not in 0..n. */
int data_iter_seek(data_iter *it, int64_t epoch, int64_t pos);
void data_iter_free(data_iter *it);

#endif
