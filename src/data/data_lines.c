/* data_lines.c - a text file read line by line through a small buffer.
 *
 * The readers of data_read.c hold a whole file; a coordinator that only
 * needs a file's shape, its labels or its statistics streams it instead,
 * so a 300 MB CSV costs it a buffer of 1 MiB (or the longest line).
 * data_file's stream reads plain files as they are and gzip files (members
 * one after another) decompressed, so every streaming reader takes `.gz`
 * as well, and a source data_file learns (HDFS) serves them all.
 */
#include <stdlib.h>
#include <string.h>

#include "data/data_int.h"
#include "base/err.h"

#define LINES_CHUNK ((size_t)1 << 20)
/* Longest line: beyond this a file is taken to be binary or corrupt. */
#define LINES_MAX ((size_t)1 << 30)

int data__lines_open(data_lines *l, const char *path) {
  memset(l, 0, sizeof *l);
  l->path = path;
  int rc = data_file_open(&l->f, path);
  if (rc < 0) return rc;
  l->cap = LINES_CHUNK;
  if (!(l->buf = malloc(l->cap))) {
    data__lines_close(l);
    return err_set(DRV_ENOMEM, "%s: out of memory", path);
  }
  return 0;
}

void data__lines_close(data_lines *l) {
  data_file_close(&l->f);
  free(l->buf);
  l->buf = NULL;
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
  size_t room = l->cap - 1 - l->len, got;
  int rc = data_file_read(&l->f, l->buf + l->len, room > LINES_CHUNK ? LINES_CHUNK : room, &got);
  if (rc < 0) return rc;
  if (got == 0) l->eof = true;
  l->len += got;
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
