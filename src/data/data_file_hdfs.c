/* data_file_hdfs.c - a data file on HDFS, read through WebHDFS without a
 * local copy. A byte range is one OPEN with offset and length; the stream
 * is OPENs of DATA_FILE_CHUNK bytes in turn, through one buffer, because
 * webhdfs_open pushes bytes at a callback while data_file_read's callers
 * pull: a chunk per request keeps the memory bounded without a thread.
 * gzip is inflated here (several members one after another, trailing
 * garbage ignored, as gzread does).
 */
#include "data/data_file_hdfs.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/err.h"
#include "base/webhdfs.h"

typedef struct data_file_remote {
  char url[WEBHDFS_URL_MAX]; /* the webhdfs:// form of f->path */
  unsigned char *buf;        /* DATA_FILE_CHUNK bytes, made by the first read */
  size_t len, at;            /* the chunk's bytes, and the next one to hand out */
  size_t chunk;              /* bytes of the next OPEN: doubles up to DATA_FILE_CHUNK */
  int64_t next;              /* byte of the file the next chunk starts at */
  z_stream z;
  bool z_init, mid, done;    /* inflate set up; inside a member; nothing more */
} data_file_remote;

static _Atomic uint64_t opens, fetched;

void data_file_hdfs_counts(uint64_t *o, uint64_t *b) {
  *o = atomic_load(&opens);
  *b = atomic_load(&fetched);
}

/* err_msg() of a failed webhdfs call as "VERB 'PATH': REASON": the
 * resolved URL it starts with is replaced by the path the user gave. */
static int fail(data_file *f, int rc, const char *verb) {
  const char *m = err_msg(), *url = f->remote ? f->remote->url : "";
  size_t ul = strlen(url);
  const char *at = ul ? strstr(m, url) : NULL; /* "webhdfs OPEN URL: why" */
  if (at && at[ul] == ':' && at[ul + 1] == ' ') m = at + ul + 2;
  return err_set(rc, "cannot %s '%s': %s", verb, f->path, m);
}

typedef struct sink {
  unsigned char *dst;
  size_t cap, got;
} sink;

static int take(void *ud, const char *buf, size_t n) {
  sink *s = ud;
  if (n > s->cap - s->got) n = s->cap - s->got; /* never more than asked for */
  memcpy(s->dst + s->got, buf, n);
  s->got += n;
  return 0;
}

/* Up to n bytes at `at` into dst: *got of them (fewer at the end). */
static int fetch(data_file *f, int64_t at, size_t n, void *dst, size_t *got) {
  sink s = {dst, n, 0};
  atomic_fetch_add(&opens, 1);
  int rc = n ? webhdfs_open(f->remote->url, (uint64_t)at, n, take, &s) : 0;
  atomic_fetch_add(&fetched, s.got);
  *got = s.got;
  return rc < 0 ? fail(f, rc, "read") : 0;
}

int data_file_hdfs_open(data_file *f) {
  data_file_remote *r = calloc(1, sizeof *r);
  if (!r) return err_set(DRV_ENOMEM, "cannot open '%s': out of memory", f->path);
  f->remote = r;
  int rc = webhdfs_resolve(f->path, r->url, sizeof r->url);
  webhdfs_info st;
  if (rc == 0) rc = webhdfs_stat(r->url, &st);
  if (rc == 0 && st.is_dir) rc = err_set(DRV_EIO, "%s: is a directory", r->url);
  if (rc == 0 && st.size > (uint64_t)INT64_MAX) rc = err_set(DRV_ERANGE, "%s: too large", r->url);
  if (rc < 0) {
    rc = fail(f, rc, "open");
    data_file_hdfs_close(f);
    return rc;
  }
  f->size = (int64_t)st.size;
  unsigned char magic[2];
  size_t got = 0;
  if (f->size >= 2 && (rc = fetch(f, 0, 2, magic, &got)) < 0) {
    data_file_hdfs_close(f);
    return rc;
  }
  f->gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  return 0;
}

int data_file_hdfs_pread(data_file *f, void *buf, size_t n, int64_t at) {
  size_t got = 0;
  int rc = at >= 0 && at <= f->size && n <= (uint64_t)(f->size - at) ? fetch(f, at, n, buf, &got) : 0;
  if (rc < 0) return rc;
  if (got < n)
    return err_set(DRV_EIO, "%s: byte %lld: the file ends there (did it change while it was "
                   "read?)", f->path, (long long)(at + (int64_t)got));
  return 0;
}

/* The next chunk into r->buf; r->len 0 at the end of the file. */
static int refill(data_file *f) {
  data_file_remote *r = f->remote;
  if (!r->buf && !(r->buf = malloc(DATA_FILE_CHUNK)))
    return err_set(DRV_ENOMEM, "cannot read '%s': out of memory", f->path);
  r->len = r->at = 0;
  int64_t left = f->size - r->next;
  if (left <= 0) return 0;
  /* Small first: a reader after a header (IDX) must not fetch 4 MiB. */
  r->chunk = r->chunk ? (r->chunk < DATA_FILE_CHUNK / 2 ? r->chunk * 2 : DATA_FILE_CHUNK)
                      : (size_t)64 << 10;
  size_t want = (uint64_t)left < r->chunk ? (size_t)left : r->chunk;
  int rc = fetch(f, r->next, want, r->buf, &r->len);
  if (rc == 0 && r->len < want)
    rc = err_set(DRV_EIO, "%s: byte %lld: the file ends there (did it change while it was "
                 "read?)", f->path, (long long)(r->next + (int64_t)r->len));
  r->next += (int64_t)r->len;
  return rc;
}

static int read_plain(data_file *f, unsigned char *buf, size_t n, size_t *got) {
  data_file_remote *r = f->remote;
  while (*got < n) {
    int rc = r->at == r->len ? refill(f) : 0;
    if (rc < 0) return rc;
    if (r->len == 0) break;
    size_t k = r->len - r->at < n - *got ? r->len - r->at : n - *got;
    memcpy(buf + *got, r->buf + r->at, k);
    r->at += k;
    *got += k;
  }
  return 0;
}

/* DRV_EPARSE naming the byte of the compressed file inflate stopped at. */
static int gz_bad(data_file *f, const char *why) {
  data_file_remote *r = f->remote;
  return err_set(DRV_EPARSE, "%s: byte %lld of the gzip file: %s", f->path,
                 (long long)(r->next - (int64_t)r->z.avail_in), why);
}

/* Input for inflate: 0 with z.avail_in > 0, or 0 with none at the end. */
static int gz_input(data_file *f) {
  data_file_remote *r = f->remote;
  if (r->z.avail_in > 0) return 0;
  int rc = refill(f);
  r->z.next_in = r->buf;
  r->z.avail_in = (uInt)r->len;
  return rc;
}

/* After a member: another follows when gzip's first byte does. */
static int gz_next_member(data_file *f) {
  data_file_remote *r = f->remote;
  int rc = gz_input(f);
  if (rc < 0) return rc;
  if (r->z.avail_in == 0 || r->z.next_in[0] != 0x1f) r->done = true; /* garbage is ignored */
  else if (inflateReset(&r->z) != Z_OK) return gz_bad(f, "corrupt");
  else r->mid = true;
  return 0;
}

static int read_gzip(data_file *f, unsigned char *buf, size_t n, size_t *got) {
  data_file_remote *r = f->remote;
  if (!r->z_init) {
    if (inflateInit2(&r->z, 16 + MAX_WBITS) != Z_OK)
      return err_set(DRV_ENOMEM, "cannot read '%s': out of memory", f->path);
    r->z_init = r->mid = true;
  }
  while (*got < n && !r->done) {
    int rc = gz_input(f);
    if (rc < 0) return rc;
    if (r->z.avail_in == 0) return r->mid ? gz_bad(f, "the file ends inside the data") : 0;
    size_t room = n - *got > (1u << 30) ? (1u << 30) : n - *got;
    r->z.next_out = buf + *got;
    r->z.avail_out = (uInt)room;
    int z = inflate(&r->z, Z_NO_FLUSH);
    *got += room - r->z.avail_out;
    if (z == Z_STREAM_END) {
      r->mid = false;
      if ((rc = gz_next_member(f)) < 0) return rc;
    } else if (z != Z_OK && z != Z_BUF_ERROR) {
      return gz_bad(f, r->z.msg ? r->z.msg : "corrupt");
    }
  }
  return 0;
}

int data_file_hdfs_read(data_file *f, void *buf, size_t n, size_t *got) {
  return f->gzip ? read_gzip(f, buf, n, got) : read_plain(f, buf, n, got);
}

void data_file_hdfs_close(data_file *f) {
  data_file_remote *r = f->remote;
  if (!r) return;
  if (r->z_init) inflateEnd(&r->z);
  free(r->buf);
  free(r);
  f->remote = NULL;
}
