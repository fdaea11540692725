/* data_write.c - writing a tensor (predictions) as CSV or .npy, each
 * through a temporary file renamed over the target, so a reader never
 * sees half a file.
 */
#include "data/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* Opens "<path>.tmp.<pid>" for writing; tmp receives its name. */
static FILE *open_tmp(const char *path, char *tmp, size_t n) {
  if ((size_t)snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid()) >= n) {
    err_set(DRV_EINVAL, "%s: path too long", path);
    return NULL;
  }
  FILE *f = fopen(tmp, "wb");
  if (!f) err_set(DRV_EIO, "cannot write '%s': %s", path, strerror(errno));
  return f;
}

/* Closes f and renames tmp over path; removes tmp on any failure. */
static int commit(FILE *f, const char *tmp, const char *path) {
  int bad = ferror(f);
  if (fclose(f) != 0) bad = 1;
  if (bad || rename(tmp, path) != 0) {
    int e = errno;
    remove(tmp);
    return err_set(DRV_EIO, "cannot write '%s': %s", path, strerror(e ? e : EIO));
  }
  return 0;
}

static int check_2d(const char *path, const tensor *t, const char *what) {
  if (!t || t->ndim < 1 || t->ndim > 2 || !tensor_is_contiguous(t))
    return err_set(DRV_ESHAPE, "%s: %s writes a contiguous 1-D or 2-D tensor", path, what);
  return 0;
}

int data_write_csv(const char *path, const tensor *t) {
  int rc = check_2d(path, t, "write_csv");
  if (rc < 0) return rc;
  char tmp[4200];
  FILE *f = open_tmp(path, tmp, sizeof tmp);
  if (!f) return DRV_EIO;
  int64_t rows = t->shape[0], cols = t->ndim == 2 ? t->shape[1] : 1;
  const float *v = tensor_data(t);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      fprintf(f, "%.9g%c", (double)v[i * cols + j], j + 1 == cols ? '\n' : ',');
  return commit(f, tmp, path);
}

int data_write_npy(const char *path, const tensor *t) {
  int rc = check_2d(path, t, "write_npy");
  if (rc < 0) return rc;
  char dict[160], tmp[4200];
  int len = t->ndim == 1
                ? snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld,), }",
                           (long long)t->shape[0])
                : snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
                           (long long)t->shape[0], (long long)t->shape[1]);
  /* magic (6) + version (2) + length (2) + dict, padded with spaces and a
   * newline to a multiple of 64, as numpy writes it */
  int total = (10 + len + 1 + 63) / 64 * 64, hlen = total - 10;
  unsigned char head[256];
  memcpy(head, "\x93NUMPY\x01\x00", 8);
  head[8] = (unsigned char)(hlen & 0xff);
  head[9] = (unsigned char)(hlen >> 8);
  memcpy(head + 10, dict, (size_t)len);
  memset(head + 10 + len, ' ', (size_t)(hlen - len - 1));
  head[total - 1] = '\n';
  FILE *f = open_tmp(path, tmp, sizeof tmp);
  if (!f) return DRV_EIO;
  fwrite(head, 1, (size_t)total, f);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "data_write_npy writes the host's floats as <f4"
#endif
  fwrite(tensor_data(t), sizeof(float), (size_t)tensor_numel(t), f);
  return commit(f, tmp, path);
}
