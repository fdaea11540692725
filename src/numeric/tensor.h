/* tensor.h - float32 tensors over refcounted storage, BLAS-backed ops.
 *
 * A tensor is a header (shape, strides in elements, offset) over a storage
 * block shared by reference count, as in Torch7's TH: views (narrow,
 * transpose, reshape of a contiguous tensor) share storage with their source,
 * and writing through one is seen through the other. Freeing a tensor drops
 * its reference; the storage goes when its last view does.
 *
 * Ownership: every function that returns `tensor *` gives the caller a new
 * header it must tensor_free(). Functions taking `const tensor *` borrow it.
 * Functions returning NULL or a negative code leave a message in err_msg().
 *
 * Element-wise helpers require contiguous tensors (they return DRV_EINVAL
 * otherwise); tensor_gemm accepts 2-D tensors that are row-major or
 * transposed views and picks the BLAS transpose flag from the strides.
 */
#ifndef DROVER_TENSOR_H
#define DROVER_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "numeric/rng.h"

#define TENSOR_MAXDIM 4
/* The product of an empty tensor's non-zero sizes, at most: they bound the
 * loops over its outer dimensions (a [2^60, 0] tensor has 2^60 rows). The
 * wire's shape check applies the same limit. */
#define TENSOR_EMPTY_MAX ((int64_t)1 << 32)

typedef struct tensor_storage {
  float *data;     /* 64-byte aligned */
  int64_t capacity; /* elements allocated */
  int refs;
  size_t mapped;    /* > 0: data is an mmap of that many bytes (tensor_map), unmapped at the end */
} tensor_storage;

typedef struct tensor {
  int ndim;                       /* 0..TENSOR_MAXDIM; 0 is a scalar */
  int64_t shape[TENSOR_MAXDIM];
  int64_t stride[TENSOR_MAXDIM];  /* in elements */
  int64_t offset;                 /* in elements, into storage->data */
  tensor_storage *storage;        /* never NULL */
} tensor;

/* ---- creation and lifetime ------------------------------------------- */

/* New contiguous zero-filled tensor. NULL on bad shape or out of memory. */
tensor *tensor_new(int ndim, const int64_t *shape);
/* The same, its contents undefined: for a caller that writes every element
 * at once (a decoded batch), sparing a pass over memory. */
tensor *tensor_new_uninit(int ndim, const int64_t *shape);
tensor *tensor_new1(int64_t n);
tensor *tensor_new2(int64_t rows, int64_t cols);
/* New contiguous tensor holding a copy of `n` floats from `src`. */
tensor *tensor_from(int ndim, const int64_t *shape, const float *src);
/* A tensor over a private read-write mapping of a file (a .npy file's
 * data): `base` is what mmap returned for `map_bytes` bytes, `offset` the
 * first element's index in floats from base. Takes over the mapping
 * (munmap when the last view goes); writes stay private (copy on write).
 * Pages are read when touched, so a process that never reads the data
 * never holds it. NULL on a bad shape or one that does not fit the map
 * (the mapping is then NOT unmapped: the caller still owns it). */
tensor *tensor_map(void *base, size_t map_bytes, int64_t offset, int ndim, const int64_t *shape);
/* Drops the header and one storage reference. NULL is fine. */
void tensor_free(tensor *t);

/* Reshapes `t` in place to a contiguous tensor of the given shape, reusing
 * its storage when `t` is its only user and the capacity suffices, else
 * allocating new storage (contents then undefined, not preserved). Made for
 * per-layer buffers reused across batches of varying size. */
int tensor_resize(tensor *t, int ndim, const int64_t *shape);
int tensor_resize2(tensor *t, int64_t rows, int64_t cols);

/* ---- views (share storage) -------------------------------------------- */

tensor *tensor_view(const tensor *t);
/* Elements [start, start+len) along `dim`. */
tensor *tensor_narrow(const tensor *t, int dim, int64_t start, int64_t len);
/* Swap two dimensions (no copy). */
tensor *tensor_transpose(const tensor *t, int d0, int d1);
/* Same elements, new shape; `t` must be contiguous. One dim may be -1. */
tensor *tensor_reshape(const tensor *t, int ndim, const int64_t *shape);

/* ---- copies ------------------------------------------------------------ */

/* New contiguous copy of any (strided) tensor. */
tensor *tensor_clone(const tensor *t);
/* Copies src into dst element by element; both must have the same number of
 * elements (shapes may differ, as for a reshape). Any strides. */
int tensor_copy(tensor *dst, const tensor *src);

/* ---- queries ----------------------------------------------------------- */

int64_t tensor_numel(const tensor *t);
bool tensor_is_contiguous(const tensor *t);
bool tensor_same_shape(const tensor *a, const tensor *b);
/* Pointer to the first element (storage data + offset). */
static inline float *tensor_data(const tensor *t) { return t->storage->data + t->offset; }
/* Writes "[128, 784]" into buf; returns buf. */
const char *tensor_shape_str(const tensor *t, char *buf, size_t n);
/* Element at a multi-index (strided); for tests and printing, not hot loops. */
float tensor_get(const tensor *t, const int64_t *idx);
void tensor_set(tensor *t, const int64_t *idx, float v);

/* ---- filling ----------------------------------------------------------- */

int tensor_fill(tensor *t, float v);
int tensor_uniform(tensor *t, rng_t *r, float lo, float hi);
int tensor_normal(tensor *t, rng_t *r, float mean, float std);

/* ---- math (contiguous unless stated) ------------------------------------ */

/* c = alpha * op(a) @ op(b) + beta * c, all 2-D, through cblas_sgemm.
 * ta/tb request a transpose of a/b on top of their own strides. A shape
 * mismatch returns DRV_ESHAPE with both shapes in the message. c must be
 * row-major contiguous (or have a contiguous inner dimension). */
int tensor_gemm(float alpha, const tensor *a, bool ta, const tensor *b, bool tb,
                float beta, tensor *c);
/* y += alpha * x (same numel). */
int tensor_axpy(float alpha, const tensor *x, tensor *y);
int tensor_scale(tensor *t, float alpha);
/* m[i, :] += v for every row i; m is [r, c], v has c elements. */
int tensor_add_rowvec(tensor *m, const tensor *v);
/* out = beta * out + column sums of m ([r, c] -> c elements). */
int tensor_sum_rows(const tensor *m, tensor *out, float beta);
/* Sum of all elements, accumulated in double. */
double tensor_sum(const tensor *t);
/* Index of the maximum of each row of a [r, c] matrix into out[r]. */
int tensor_argmax_rows(const tensor *m, int64_t *out);
/* Largest |a - b| over elements of two same-shape tensors (any strides). */
float tensor_max_abs_diff(const tensor *a, const tensor *b);

/* Sets the number of BLAS threads (OpenBLAS); n <= 0 leaves the default. */
void tensor_set_threads(int n);
/* The BLAS threads in effect. */
int tensor_threads(void);

#endif
