/* nn_int.h - internals shared by nn.c and nn_loss.c; not a public API. */
#ifndef DROVER_NN_INT_H
#define DROVER_NN_INT_H

#include <stdint.h>

#include "tensor.h"

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

#endif
