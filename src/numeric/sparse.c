/* sparse.c - the structural check of a batch's sparse input (sparse.h). */
#include "numeric/sparse.h"

#include <stddef.h>

#include "base/err.h"

int nn_sparse_check(const nn_sparse *sp) {
  if (!sp || sp->rows < 0 || !sp->ptr || (sp->rows > 0 && sp->ptr[sp->rows] > 0 && !sp->ids))
    return err_set(DRV_EINVAL, "sparse input: missing rows, offsets or ids");
  if (sp->ptr[0] != 0)
    return err_set(DRV_EINVAL, "sparse input: ptr[0] is %lld, not 0", (long long)sp->ptr[0]);
  if (sp->fields < 0)
    return err_set(DRV_EINVAL, "sparse input: fields is %d", sp->fields);
  for (int64_t i = 0; i < sp->rows; i++) {
    int64_t n = sp->ptr[i + 1] - sp->ptr[i];
    if (n < 0)
      return err_set(DRV_EINVAL, "sparse input: row %lld has offsets %lld..%lld (decreasing)",
                     (long long)i, (long long)sp->ptr[i], (long long)sp->ptr[i + 1]);
    if (sp->fields > 0 && n != sp->fields)
      return err_set(DRV_EINVAL, "sparse input: row %lld has %lld entries, not one per field (%d)",
                     (long long)i, (long long)n, sp->fields);
  }
  return 0;
}
