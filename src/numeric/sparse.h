/* sparse.h - a batch's sparse input: ids (and weights) per example, as CSR.
 *
 * Click-through and recommendation data is mostly ids: hashed categorical
 * columns (every example has one id per field) and libsvm rows (a few of
 * 2^32 features set). A dense [N, features] matrix of them would be mostly
 * zeros, or not fit at all, so a batch carries them beside its dense x as
 * compressed sparse rows: example i's entries are ids[ptr[i] .. ptr[i+1])
 * with weights vals[...] (NULL: every weight is 1, as for hashed ids).
 *
 * When every example has exactly `fields` entries, entry j of an example is
 * field j (the categorical columns in file order): a per-field bag then
 * looks each field up in its own table or part of one. libsvm rows have
 * fields == 0 (any number of entries per example).
 *
 * The layers that read it (nn.Embedding with sparse ids, nn.EmbeddingBag,
 * nn.SparseLinear) take it from the model: nn_set_sparse(model, sp) before
 * nn_forward and nn_backward hands the same batch to every such layer in
 * the tree. The arrays are borrowed: they must stay unchanged until the
 * backward that follows the forward has returned.
 */
#ifndef DROVER_SPARSE_H
#define DROVER_SPARSE_H

#include <stdint.h>

typedef struct nn_sparse {
  int64_t rows;        /* examples: the batch's N */
  const int64_t *ptr;  /* rows + 1 offsets, ptr[0] == 0, non-decreasing */
  const uint64_t *ids; /* ptr[rows] ids; each layer checks them against its size */
  const float *vals;   /* ptr[rows] weights, or NULL for all ones */
  int fields;          /* > 0: every row has exactly this many entries, one per field */
} nn_sparse;

/* Checks the structure (ptr monotone from 0, fields consistent with ptr);
 * DRV_EINVAL naming the first bad row. Ids are checked by their layer. */
int nn_sparse_check(const nn_sparse *sp);

#endif
