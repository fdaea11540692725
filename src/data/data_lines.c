/* data_lines.c - a text file read line by line through a small buffer.
 *
 * The readers of data_read.c hold a whole file; a coordinator that only
 * needs a file's shape, its labels or its statistics streams it instead,
 * so a 300 MB CSV costs it a buffer of 1 MiB (or the longest line). zlib's
 * gzread reads plain files as they are and gzip files (members one after
 * another) decompressed, so every streaming reader takes `.gz` as well.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/data_int.h"
#include "base/err.h"

#define LINES_CHUNK ((size_t)1 << 20)
/* Longest line: beyond this a file is taken to be binary or corrupt. */
#define LINES_MAX ((size_t)1 << 30)

int data__lines_open(data_lines *l, const char *path) {
  memset(l, 0, sizeof *l);
  l->path = path;
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (!f)
    return err_set(errno ? DRV_EIO : DRV_ENOMEM, "cannot open '%s': %s", path,
                   errno ? strerror(errno) : "out of memory");
  gzbuffer(f, 1 << 17);
  l->gz = f;
  l->cap = LINES_CHUNK;
  if (!(l->buf = malloc(l->cap))) {
    data__lines_close(l);
    return err_set(DRV_ENOMEM, "%s: out of memory", path);
  }
  return 0;
}

void data__lines_close(data_lines *l) {
  if (l->gz) gzclose_r(l->gz);
  free(l->buf);
  l->gz = NULL;
  l->buf = NULL;
}

/* The read error of a gzip file, with the byte of the compressed file. */
static int gz_error(data_lines *l) {
  int code;
  const char *msg = gzerror(l->gz, &code);
  if (code == Z_ERRNO)
    return err_set(DRV_EIO, "cannot read '%s': %s", l->path, strerror(errno ? errno : EIO));
  long long at = (long long)gzoffset(l->gz);
  if (code == Z_BUF_ERROR) msg = "the file ends inside the data";
  return err_set(DRV_EPARSE, "%s: byte %lld of the gzip file: %s", l->path, at,
                 msg && *msg ? msg : "corrupt");
}

/* More bytes after the partial line [start, len): moved to the front, the
 * buffer doubled when the line fills it. 0, or a negative code. */
static int fill(data_lines *l) {
  if (l->start > 0) {
    memmove(l->buf, l->buf + l->start, l->len - l->start);
    l->len -= l->start;
    l->start = 0;
  }
  if (l->len + 1 >= l->cap) {
    if (l->cap >= LINES_MAX)
      return err_set(DRV_ERANGE, "%s:%lld: a line longer than %zu bytes", l->path,
                     (long long)l->lineno + 1, LINES_MAX);
    char *nb = realloc(l->buf, l->cap * 2);
    if (!nb) return err_set(DRV_ENOMEM, "%s: out of memory", l->path);
    l->buf = nb;
    l->cap *= 2;
  }
  size_t room = l->cap - 1 - l->len;
  int got = gzread(l->gz, l->buf + l->len, (unsigned)(room > LINES_CHUNK ? LINES_CHUNK : room));
  if (got < 0) return gz_error(l);
  if (got == 0) {
    int code;
    gzerror(l->gz, &code);
    if (code != Z_OK) return gz_error(l); /* a cut gzip file ends with an error */
    l->eof = true;
  }
  l->len += (size_t)got;
  return 0;
}

int data__lines_next(data_lines *l, char **s, char **e) {
  size_t scanned = l->start;
  for (;;) {
    char *nl = memchr(l->buf + scanned, '\n', l->len - scanned);
    if (nl || (l->eof && l->start < l->len)) {
      char *end = nl ? nl : l->buf + l->len;
      *s = l->buf + l->start;
      *e = end;
      if (*e > *s && (*e)[-1] == '\r') (*e)--;
      l->start = nl ? (size_t)(nl - l->buf) + 1 : l->len;
      l->buf[l->len] = '\0'; /* room kept by fill: a last line may be NUL-ended */
      l->lineno++;
      return 1;
    }
    if (l->eof) return 0;
    size_t done = l->len - l->start; /* scanned already, after the move */
    int rc = fill(l);
    if (rc < 0) return rc;
    scanned = l->start + done;
  }
}
