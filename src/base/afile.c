/* afile.c - a file replaced whole or not at all (see afile.h).
 *
 * How the bytes of a big file are written was measured on a ps's 151 MB
 * checkpoint against `dd bs=1M conv=fsync` of the same bytes (issue 12,
 * tests/bench/checkpoint.lua), on a 2-core Firecracker VM:
 *
 * - Pieces of 1 MiB. The page cache takes folios as large as a write
 *   allows (ext4's large folios, Linux 6.x): one 16 MiB write(2) takes
 *   2 MiB folios (order 9), 1 MiB writes take order 8. Order 9 is the
 *   order at which a VM with free page reporting (virtio-balloon) hands
 *   free memory back to the host, so those folios are mostly memory the
 *   host must fault in again, 4 KiB at a time, as the copy first touches
 *   it: 16 MiB writes ran at ~430 MB/s in about half of the checkpoints
 *   (a first touch of 2 MiB pages free for 2 s runs at 300-490 MB/s
 *   there, of reused ones at 9 GB/s) and at ~4 GB/s otherwise. dd's 1 MiB
 *   writes never stalled. The pieces end at multiples of 1 MiB in the
 *   file so that all but the first folios are whole 1 MiB ones.
 * - Writeback started every 8 MiB (sync_file_range WRITE, which does not
 *   wait): the device writes while the rest is copied and hashed, and the
 *   fsync that makes the file durable waits for the last few MiB only
 *   (5-15 ms instead of 45-70 ms for 151 MB). It is a hint; the fsync in
 *   afile_commit is what the crash-safety rests on. */
#include "base/afile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"

int afile_open(afile *f, const char *path) {
  static atomic_uint counter; /* two writers in one process never share a name */
  f->fd = -1;
  f->err = 0;
  f->pos = f->started = 0;
  f->path = path;
  for (int tries = 0; tries < 100; tries++) {
    int k = snprintf(f->tmp, sizeof f->tmp, "%s.tmp-%ld-%u", path, (long)getpid(),
                     atomic_fetch_add(&counter, 1));
    if (k < 0 || (size_t)k >= sizeof f->tmp)
      return err_set(DRV_ERANGE, "cannot write '%s': path too long", path);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (f->fd >= 0) return 0;
    if (errno != EEXIST) break;
  }
  return err_set(DRV_EIO, "cannot write '%s': %s", path, strerror(errno));
}

/* Asks the kernel to start writing what was written since the last time
 * (the fsync of the commit still waits for all of it). */
static void start_writeback(afile *f) {
#ifdef SYNC_FILE_RANGE_WRITE
  (void)sync_file_range(f->fd, (off_t)f->started, (off_t)(f->pos - f->started),
                        SYNC_FILE_RANGE_WRITE);
#endif
  f->started = f->pos;
}

int afile_write(afile *f, const void *buf, size_t len) {
  if (f->err) return -1;
  const char *p = buf;
  while (len) {
    size_t k = AFILE_PIECE - (size_t)(f->pos % AFILE_PIECE);
    if (k > len) k = len;
    if (util_write_all(f->fd, p, k) < 0) {
      f->err = errno;
      return -1;
    }
    p += k, len -= k, f->pos += k;
    if (f->pos - f->started >= AFILE_WRITEBACK) start_writeback(f);
  }
  return 0;
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
    return err_set(DRV_EIO, "cannot write '%s': %s failed: %s", f->path, failed, strerror(e));
  }
  if (util_sync_parent(f->path) < 0)
    return err_set(DRV_EIO, "cannot write '%s': syncing its directory failed: %s", f->path,
                   strerror(errno));
  return 0;
}

void afile_abort(afile *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  unlink(f->tmp);
}
