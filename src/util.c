/* util.c - growing arrays, freeing handles (see util.h). */
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

int util_grow_(void *pp, size_t *cap, size_t need, size_t size, size_t min_cap, int zero) {
  size_t n = *cap ? *cap : (min_cap ? min_cap : 1);
  while (n < need) {
    if (n > SIZE_MAX / 2)
      return drv_error(DRV_ERANGE, "array of %zu elements is too large", need);
    n *= 2;
  }
  size_t bytes;
  if (!util_mul_ok(n, size, &bytes))
    return drv_error(DRV_ERANGE, "array of %zu elements of %zu bytes is too large", n, size);
  void *old;
  memcpy(&old, pp, sizeof old);
  char *p = realloc(old, bytes);
  if (!p) return drv_error(DRV_ENOMEM, "out of memory growing an array to %zu bytes", bytes);
  if (zero) memset(p + *cap * size, 0, (n - *cap) * size);
  memcpy(pp, &p, sizeof p);
  *cap = n;
  return 0;
}

void util_free_handle(uv_handle_t *h) { free(h); }
