/* data_file.c - a data file's bytes: a byte range by pread, a stream by
 * zlib's gzread (which passes a plain file through as it is), so every
 * reader built on it takes `.gz` too; a URL's by WebHDFS (data_file_hdfs.c).
 * See data_file.h for why so few calls.
 */
#include "data/data_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/err.h"
#include "base/webhdfs.h"
#include "data/data_file_hdfs.h"

int data_file_open(data_file *f, const char *path) {
  memset(f, 0, sizeof *f);
  f->path = path;
  f->fd = -1;
  if (webhdfs_is_url(path)) return data_file_hdfs_open(f);
  f->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (f->fd < 0) return err_set(DRV_EIO, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  f->size = fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
  unsigned char magic[2];
  f->gzip = f->size >= 2 && pread(f->fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  return 0;
}

int data_file_pread(data_file *f, void *buf, size_t n, int64_t at) {
  if (f->remote) return data_file_hdfs_pread(f, buf, n, at);
  size_t done = 0;
  while (done < n) {
    ssize_t k = pread(f->fd, (char *)buf + done, n - done, (off_t)(at + (int64_t)done));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return err_set(DRV_EIO, "cannot read '%s': %s", f->path, strerror(errno));
    if (k == 0)
      return err_set(DRV_EIO, "%s: byte %lld: the file ends there (did it change while it was "
                     "read?)", f->path, (long long)(at + (int64_t)done));
    done += (size_t)k;
  }
  return 0;
}

/* The stream's read error, with the byte of the compressed file. */
static int gz_error(data_file *f) {
  int code;
  const char *msg = gzerror(f->gz, &code);
  if (code == Z_ERRNO)
    return err_set(DRV_EIO, "cannot read '%s': %s", f->path, strerror(errno ? errno : EIO));
  if (code == Z_BUF_ERROR) msg = "the file ends inside the data";
  return err_set(DRV_EPARSE, "%s: byte %lld of the gzip file: %s", f->path,
                 (long long)gzoffset(f->gz), msg && *msg ? msg : "corrupt");
}

int data_file_read(data_file *f, void *buf, size_t n, size_t *got) {
  *got = 0;
  if (f->remote) {
    int rc = data_file_hdfs_read(f, buf, n, got);
    f->pos += (int64_t)*got;
    return rc;
  }
  if (!f->gz) {
    /* A descriptor of its own: gzclose closes it, f->fd stays ours. */
    int fd = dup(f->fd);
    if (fd < 0 || !(f->gz = gzdopen(fd, "rb"))) {
      if (fd >= 0) close(fd);
      return err_set(DRV_ENOMEM, "cannot read '%s': out of memory", f->path);
    }
    gzbuffer(f->gz, 1 << 17);
  }
  while (*got < n) {
    size_t want = n - *got > (1u << 30) ? (1u << 30) : n - *got;
    int k = gzread(f->gz, (char *)buf + *got, (unsigned)want);
    if (k < 0) return gz_error(f);
    if (k == 0) {
      int code;
      gzerror(f->gz, &code);
      if (code != Z_OK) return gz_error(f); /* a cut gzip file ends with an error */
      break;
    }
    *got += (size_t)k;
  }
  f->pos += (int64_t)*got;
  return 0;
}

void data_file_close(data_file *f) {
  if (f->gz) gzclose_r(f->gz);
  if (f->fd > 0) close(f->fd);
  data_file_hdfs_close(f);
  f->gz = NULL;
  f->fd = -1;
}

size_t data_file_span(const data_file *f, size_t local) {
  return f->remote ? 4 * DATA_FILE_CHUNK : local;
}
