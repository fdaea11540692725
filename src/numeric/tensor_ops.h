/* tensor_ops.h - element-wise arithmetic with broadcasting, reductions
 * along a dimension, gathers and joins: the tensor math a Lua script uses
 * for a custom metric or a data transform (nn and train keep their own
 * fused loops in tensor.c and nn*.c).
 *
 * Every function takes its inputs as borrowed `const tensor *` of any
 * strides and returns a NEW contiguous tensor the caller owns and must
 * tensor_free(), or NULL with a message in err_msg() naming the shapes
 * involved. Dimensions are 0-based here; the Lua binding adds one.
 *
 * Broadcasting follows PyTorch for tensors of the same rank: two sizes
 * match when they are equal or one of them is 1 ([4, 1] op [1, 3] is
 * [4, 3]). A 0-D tensor broadcasts against anything.
 */
#ifndef DROVER_TENSOR_OPS_H
#define DROVER_TENSOR_OPS_H

#include <stdint.h>

#include "numeric/tensor.h"

/* Binary element-wise operations; the comparisons give 0/1 masks. */
typedef enum tensor_binop {
  TOP_ADD, TOP_SUB, TOP_MUL, TOP_DIV,
  TOP_GT, TOP_GE, TOP_LT, TOP_LE, TOP_EQ, TOP_NE,
  TOP_MAXIMUM, TOP_MINIMUM
} tensor_binop;

/* Unary element-wise operations. */
typedef enum tensor_unop { TUN_NEG, TUN_EXP, TUN_LOG, TUN_SQRT, TUN_ABS } tensor_unop;

/* Reductions along one dimension. */
typedef enum tensor_redop { TRED_SUM, TRED_MEAN, TRED_MAX, TRED_MIN, TRED_ARGMAX } tensor_redop;

/* Short name of an operation for messages ("+", "gt", ...). Never NULL. */
const char *tensor_binop_name(tensor_binop op);

/* a op b with broadcasting (see above); DRV_ESHAPE names both shapes. */
tensor *tensor_binary(tensor_binop op, const tensor *a, const tensor *b);
/* a op s, or s op a when `scalar_first` (for 1 - t, 2 / t). */
tensor *tensor_binary_scalar(tensor_binop op, const tensor *a, float s, int scalar_first);
tensor *tensor_unary(tensor_unop op, const tensor *a);
/* Each element clamped into [lo, hi]; lo > hi is DRV_EINVAL. */
tensor *tensor_clamp(const tensor *a, float lo, float hi);

/* Reduces dimension `dim`: the result has that dimension removed, or kept
 * with size 1 when `keepdim` (so that it broadcasts back against `a`).
 * ARGMAX gives 0-based positions as floats (the numbering of class labels);
 * MAX/MIN/ARGMAX of an empty dimension is DRV_EINVAL. */
tensor *tensor_reduce(tensor_redop op, const tensor *a, int dim, int keepdim);

/* [n, k] @ [k, m] -> [n, m] through BLAS; DRV_ESHAPE names both shapes. */
tensor *tensor_mm(const tensor *a, const tensor *b);

/* The slices of `a` along `dim` at the 0-based positions ids[0..n):
 * shape of `a` with that dimension's size replaced by n. */
tensor *tensor_index_select(const tensor *a, int dim, const int64_t *ids, int64_t n);

/* Joins n >= 1 tensors along `dim`: cat needs the same rank and equal sizes
 * off `dim`; stack needs equal shapes and inserts a new dimension `dim`
 * (0..ndim). */
tensor *tensor_cat(const tensor *const *ts, int n, int dim);
tensor *tensor_stack(const tensor *const *ts, int n, int dim);

#endif
