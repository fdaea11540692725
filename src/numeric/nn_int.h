/* nn_int.h - internals shared by nn.c and nn_loss.c; not a public API. */
#ifndef DROVER_NN_INT_H
#define DROVER_NN_INT_H

#include <stdint.h>

#include "numeric/nn.h"
#include "numeric/tensor.h"

/* GCC's -O2 vectorizer (the "very cheap" cost model) only takes loops whose
 * trip count is a known multiple of the vector width. A fixed eight-wide
 * inner block gives it one, so these passes compile to packed SIMD code
 * even when built without -fvect-cost-model=dynamic; the tail runs scalar.
 * The statement is written for one element index `i`. */
#define EACH(i, n, ...)                                       \
  do {                                                        \
    int64_t blk_ = 0, n_ = (n);                               \
    for (; blk_ + 8 <= n_; blk_ += 8)                         \
      for (int k_ = 0; k_ < 8; k_++) {                        \
        int64_t i = blk_ + k_;                                \
        __VA_ARGS__;                                          \
      }                                                       \
    for (int64_t i = blk_; i < n_; i++) {                     \
      __VA_ARGS__;                                            \
    }                                                         \
  } while (0)

#define SHAPE(t, buf) tensor_shape_str((t), (buf), sizeof(buf))

/* ---- helpers nn.c defines for every module file ------------------------- */

/* Makes *t a contiguous tensor of the given shape: allocated on first use,
 * afterwards resized in place (no allocation while the capacity lasts). */
int nn_ensure(tensor **t, int ndim, const int64_t *shape);
int nn_ensure_like(tensor **t, const tensor *like);
/* Appends printf-style text to the string in buf (size n), truncating. */
void nn_append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* One-line description of m, for error messages ("nn.Linear(64 -> 128)"). */
const char *nn_name_of(const nn_module *m, char *buf, size_t n);
int nn_need_contiguous(const nn_module *m, const tensor *t, const char *what);
/* dy must have the given shape (the output's); DRV_ESHAPE naming both. */
int nn_check_grad(const nn_module *m, const tensor *dy, int ndim, const int64_t *shape);
nn_module *nn_module_new(const nn_module_ops *ops);
/* The describe op of parameterless layers: "nn.ReLU". */
int nn_describe_plain(const nn_module *m, char *buf, size_t n, int indent);
/* The describe op of containers: Torch7's multi-line listing. */
int nn_describe_container(const nn_module *m, char *buf, size_t n, int indent);
/* Names p and allocates its value and gradient (zeroed); DRV_ENOMEM. */
int nn_param_init(nn_param *p, const char *name, int ndim, const int64_t *shape);
/* Float ids in x (1 to 3 dimensions, contiguous), each integral and in
 * 0..n-1: the Embeddings' input (nn_norm.c). DRV_ESHAPE / DRV_ERANGE. */
int nn_check_ids(const nn_module *m, const tensor *x, double n);
/* Element-wise layers: x contiguous, m->out shaped like x. */
int nn_elementwise_begin(nn_module *m, const tensor *x);
/* dy shaped like x; `need_out` layers also need the last forward's output
 * to have x's shape; m->dx shaped like x. */
int nn_elementwise_back_begin(nn_module *m, const tensor *x, const tensor *dy, bool need_out);

/* Id layers (nn_sparse.c): clears m->tab's sparse gradient. */
void nn_sptab_zero_grad(nn_module *m);

#endif
