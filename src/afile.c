/* afile.c - a file replaced whole or not at all (see afile.h). */
#include "afile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "util.h"

int afile_open(afile *f, const char *path) {
  static atomic_uint counter; /* two writers in one process never share a name */
  f->fd = -1;
  f->err = 0;
  f->path = path;
  for (int tries = 0; tries < 100; tries++) {
    int k = snprintf(f->tmp, sizeof f->tmp, "%s.tmp-%ld-%u", path, (long)getpid(),
                     atomic_fetch_add(&counter, 1));
    if (k < 0 || (size_t)k >= sizeof f->tmp)
      return drv_error(DRV_ERANGE, "cannot write '%s': path too long", path);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (f->fd >= 0) return 0;
    if (errno != EEXIST) break;
  }
  return drv_error(DRV_EIO, "cannot write '%s': %s", path, strerror(errno));
}

int afile_write(afile *f, const void *buf, size_t len) {
  if (f->err) return -1;
  if (util_write_all(f->fd, buf, len) == 0) return 0;
  f->err = errno;
  return -1;
}

int afile_commit(afile *f, mode_t mode) {
  const char *failed = f->err ? "write" : NULL;
  int e = f->err;
  if (!failed && fchmod(f->fd, mode & 07777) < 0) failed = "chmod", e = errno;
  if (!failed && fsync(f->fd) < 0) failed = "sync", e = errno;
  if (close(f->fd) < 0 && !failed) failed = "close", e = errno;
  f->fd = -1;
  if (!failed && rename(f->tmp, f->path) < 0) failed = "rename", e = errno;
  if (failed) {
    unlink(f->tmp);
    return drv_error(DRV_EIO, "cannot write '%s': %s failed: %s", f->path, failed, strerror(e));
  }
  if (util_sync_parent(f->path) < 0)
    return drv_error(DRV_EIO, "cannot write '%s': syncing its directory failed: %s", f->path,
                     strerror(errno));
  return 0;
}

void afile_abort(afile *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  unlink(f->tmp);
}
