/* util.c - growing arrays, freeing handles, whole writes and directory
 * syncs (see util.h). */
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"

int util_grow_(void *pp, size_t *cap, size_t need, size_t size, size_t min_cap, int zero) {
  size_t n = *cap ? *cap : (min_cap ? min_cap : 1);
  while (n < need) {
    if (n > SIZE_MAX / 2)
      return err_set(DRV_ERANGE, "array of %zu elements is too large", need);
    n *= 2;
  }
  size_t bytes;
  if (!util_mul_ok(n, size, &bytes))
    return err_set(DRV_ERANGE, "array of %zu elements of %zu bytes is too large", n, size);
  void *old;
  memcpy(&old, pp, sizeof old);
  char *p = realloc(old, bytes);
  if (!p) return err_set(DRV_ENOMEM, "out of memory growing an array to %zu bytes", bytes);
  if (zero) memset(p + *cap * size, 0, (n - *cap) * size);
  memcpy(pp, &p, sizeof p);
  *cap = n;
  return 0;
}

void util_free_handle(uv_handle_t *h) { free(h); }

int util_write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    ssize_t k = write(fd, p, len);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) {
      errno = EIO;
      return -1;
    }
    p += k;
    len -= (size_t)k;
  }
  return 0;
}

int util_sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd) < 0 && errno != EINVAL ? -1 : 0;
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

int util_sync_parent(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return -1;
  int rc = util_sync_dir(dir);
  int e = errno;
  free(dir);
  errno = e;
  return rc;
}

FILE *util_fopen_append(const char *path, mode_t mode) {
  int fd = util_open(path, O_WRONLY | O_APPEND | O_CREAT, mode);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "a");
  if (!f) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return f;
}

/* ---- descriptors in reserve --------------------------------------------- */

static int fd_reserve[UTIL_FD_RESERVE] = {-1, -1, -1, -1};

int util_fd_reserve(void) {
  int held = 0;
  for (int i = 0; i < UTIL_FD_RESERVE; i++) {
    if (fd_reserve[i] < 0) fd_reserve[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd_reserve[i] >= 0) held++;
  }
  return held;
}

void util_fd_release(void) {
  for (int i = 0; i < UTIL_FD_RESERVE; i++) {
    if (fd_reserve[i] >= 0) close(fd_reserve[i]);
    fd_reserve[i] = -1;
  }
}

static bool fd_reserved(void) {
  for (int i = 0; i < UTIL_FD_RESERVE; i++)
    if (fd_reserve[i] >= 0) return true;
  return false;
}

int util_open(const char *path, int flags, mode_t mode) {
  int fd = open(path, flags | O_CLOEXEC, mode);
  if (fd >= 0 || (errno != EMFILE && errno != ENFILE) || !fd_reserved()) return fd;
  util_fd_release();
  fd = open(path, flags | O_CLOEXEC, mode);
  int e = errno;
  util_fd_reserve();
  errno = e;
  return fd;
}

bool util_fault_first(void) {
  const char *once = getenv("DROVER_FAULT_ONCE");
  if (!once) return true;
  int fd = open(once, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  close(fd);
  return true;
}
