/* manifest.c - a checkpoint's manifest: SHA-256 of its files (sha256.h),
 * a JSON document (jansson), written atomically. See manifest.h.
 */
#include "base/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/afile.h"
#include "base/err.h"
#include "base/sha256.h"
#include "base/util.h"

#define FORMAT "drover-manifest-1"
#define CHUNK (1 << 16)

/* ============================== hashing ================================== */

int manifest_hash_file(const char *path, char hex[65], uint64_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(errno));
  sha256_ctx st;
  if (sha256_init(&st) < 0) {
    close(fd);
    return DRV_ENOMEM;
  }
  static _Thread_local unsigned char buf[CHUNK];
  uint64_t total = 0;
  ssize_t k;
  while ((k = read(fd, buf, sizeof buf)) != 0) {
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      int e = errno;
      close(fd);
      sha256_drop(&st);
      return err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(e));
    }
    sha256_update(&st, buf, (size_t)k);
    total += (uint64_t)k;
  }
  close(fd);
  sha256_hex(&st, hex);
  *size = total;
  return 0;
}

/* The running hash of the current chunk, as a sha256_ctx in d->h. */
static int digest_open(manifest_digest *d) {
  sha256_ctx h;
  if (sha256_init(&h) < 0) return DRV_ENOMEM;
  d->h = h.md;
  return 0;
}

static void digest_close_chunk(manifest_digest *d) {
  sha256_ctx h = {d->h};
  char hex[65];
  sha256_hex(&h, hex);
  d->h = NULL;
  if (d->nchunks < MANIFEST_MAX_CHUNKS) memcpy(d->hexes + 64 * d->nchunks, hex, 64);
  d->nchunks++;
}

int manifest_digest_begin(manifest_digest *d, uint64_t size) {
  memset(d, 0, offsetof(manifest_digest, hexes));
  d->hexes[0] = '\0';
  d->size = size;
  d->chunk = manifest_chunk_size(size);
  return digest_open(d);
}

int manifest_digest_update(manifest_digest *d, const void *buf, size_t len) {
  if (!d->h || len > d->size - d->at)
    return err_set(DRV_ERANGE, "%zu bytes more than the %llu announced", len,
                   (unsigned long long)d->size);
  const uint8_t *p = buf;
  while (len) {
    size_t take = len;
    if (d->chunk && take > d->chunk - d->at % d->chunk) take = (size_t)(d->chunk - d->at % d->chunk);
    sha256_ctx h = {d->h};
    sha256_update(&h, p, take);
    p += take, len -= take, d->at += take;
    if (d->chunk && d->at % d->chunk == 0 && d->at < d->size) {
      digest_close_chunk(d);
      if (digest_open(d) < 0) return DRV_ENOMEM;
    }
  }
  return 0;
}

void manifest_digest_drop(manifest_digest *d) {
  sha256_ctx h = {d->h};
  if (d->h) sha256_drop(&h);
  d->h = NULL;
}

int manifest_digest_end(manifest_digest *d, char *out) {
  out[0] = '\0';
  if (!d->h || d->at != d->size) {
    manifest_digest_drop(d);
    return err_set(DRV_ERANGE, "%llu bytes of the %llu announced", (unsigned long long)d->at,
                   (unsigned long long)d->size);
  }
  digest_close_chunk(d);
  if (!d->chunk) {
    memcpy(out, d->hexes, 64);
    out[64] = '\0';
    return 0;
  }
  if (d->nchunks > MANIFEST_MAX_CHUNKS) return err_set(DRV_ERANGE, "too many chunks");
  /* chunk is under 2^44 (a chunk per 56th of a file): the prefix fits the 32 bytes kept */
  int pre = snprintf(out, 32, MANIFEST_CHUNKED "%llu:", (unsigned long long)d->chunk);
  if (pre < 0 || pre >= 32) return err_set(DRV_ERANGE, "chunk size %llu", (unsigned long long)d->chunk);
  memcpy(out + pre, d->hexes, 64 * d->nchunks);
  out[pre + 64 * d->nchunks] = '\0';
  return 0;
}

/* ============================== writing ================================== */

uint64_t manifest_chunk_size(uint64_t size) {
  const uint64_t min = 32u << 20, mib = 1u << 20;
  if (size <= min) return 0;
  uint64_t c = (size + MANIFEST_MAX_CHUNKS - 1) / MANIFEST_MAX_CHUNKS;
  c = (c + mib - 1) / mib * mib;
  return c < min ? min : c;
}

static bool all_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

/* A chunked digest "sha256-chunks:C:hex..." for a file of `size` bytes:
 * its entry (chunk, sha256_chunks) or NULL when it is not one. */
static json_t *chunked_json(const char *name, uint64_t size, const char *d) {
  size_t pre = strlen(MANIFEST_CHUNKED);
  if (strncmp(d, MANIFEST_CHUNKED, pre) != 0) return NULL;
  char *end;
  unsigned long long c = strtoull(d + pre, &end, 10);
  if (c == 0 || *end != ':') return NULL;
  const char *hex = end + 1;
  uint64_t n = (size + c - 1) / c;
  if (n == 0 || n > MANIFEST_MAX_CHUNKS || strlen(hex) != n * 64 || !all_hex(hex, n * 64))
    return NULL;
  json_t *list = json_array();
  for (uint64_t i = 0; list && i < n; i++)
    if (json_array_append_new(list, json_stringn(hex + 64 * i, 64)) < 0) {
      json_decref(list);
      list = NULL;
    }
  if (!list) return NULL;
  return json_pack("{s:s, s:I, s:I, s:o}", "name", name, "size", (json_int_t)size, "chunk",
                   (json_int_t)c, "sha256_chunks", list);
}

/* The "files" list into *out, hashing each file unless hexes gives its
 * hash and sizes its size; a negative code with a message. */
static int files_json(const char *dir, const char *const *files, const uint64_t *sizes,
                      const char *const *hexes, json_t **out) {
  json_t *arr = *out = json_array();
  if (!arr) return err_set(DRV_ENOMEM, "out of memory writing a manifest");
  for (int i = 0; files && files[i]; i++) {
    char path[4096], hex[65];
    uint64_t size;
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    int rc = 0;
    json_t *chunked = hexes && hexes[i] ? chunked_json(files[i], sizes[i], hexes[i]) : NULL;
    if (chunked) {
      if (json_array_append_new(arr, chunked) < 0) rc = err_set(DRV_ENOMEM, "out of memory");
      if (rc == 0) continue;
      json_decref(arr);
      *out = NULL;
      return rc;
    }
    if (hexes && hexes[i] && strlen(hexes[i]) == 64) {
      snprintf(hex, sizeof hex, "%s", hexes[i]);
      size = sizes[i];
    } else {
      rc = manifest_hash_file(path, hex, &size);
    }
    if (rc == 0 && json_array_append_new(arr, json_pack("{s:s, s:I, s:s}", "name", files[i],
                                                        "size", (json_int_t)size, "sha256", hex)) < 0)
      rc = err_set(DRV_ENOMEM, "out of memory writing a manifest");
    if (rc < 0) {
      json_decref(arr);
      *out = NULL;
      return rc;
    }
  }
  return 0;
}

static json_t *meta_json(const char *const *meta) {
  json_t *o = json_object();
  for (int i = 0; o && meta && meta[i] && meta[i + 1]; i += 2)
    if (json_object_set_new(o, meta[i], json_string(meta[i + 1])) < 0) {
      json_decref(o);
      return NULL;
    }
  return o;
}

int manifest_commit(const char *dir, const char *const *files, const char *const *meta) {
  return manifest_commit_hashed(dir, files, NULL, NULL, meta);
}

int manifest_encode(const char *dir, const char *const *files, const uint64_t *sizes,
                    const char *const *hexes, const char *const *meta, char **text) {
  *text = NULL;
  json_t *fl;
  int rc = files_json(dir, files, sizes, hexes, &fl);
  if (rc < 0) return rc;
  json_t *root = json_pack("{s:s, s:o, s:o}", "format", FORMAT, "files", fl, "meta",
                           meta_json(meta));
  *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
  json_decref(root);
  if (!*text) return err_set(DRV_ENOMEM, "cannot write the manifest in '%s': out of memory", dir);
  return 0;
}

int manifest_commit_hashed(const char *dir, const char *const *files, const uint64_t *sizes,
                           const char *const *hexes, const char *const *meta) {
  if (!dir) return err_set(DRV_EINVAL, "manifest_commit: NULL directory");
  char *text;
  int rc = manifest_encode(dir, files, sizes, hexes, meta, &text);
  if (rc < 0) return rc;
  char path[4150];
  snprintf(path, sizeof path, "%s/%s", dir, MANIFEST_NAME);
  afile f;
  rc = afile_open(&f, path);
  if (rc == 0) {
    afile_write(&f, text, strlen(text));
    rc = afile_commit(&f, 0644);
  }
  free(text);
  return rc;
}

/* ============================== reading ================================== */

/* A file's chunk hashes into f (chunks owned by f); -1 when malformed. */
static int read_chunks(json_t *list, uint64_t size, json_int_t chunk, manifest_file *f) {
  size_t n = json_array_size(list);
  if (!json_is_array(list) || chunk <= 0 || n == 0 || n > MANIFEST_MAX_CHUNKS ||
      n != (size + (uint64_t)chunk - 1) / (uint64_t)chunk)
    return -1;
  if (!(f->chunks = malloc(64 * n + 1))) return -1;
  for (size_t i = 0; i < n; i++) {
    const char *h = json_string_value(json_array_get(list, i));
    if (!h || strlen(h) != 64 || !all_hex(h, 64)) {
      free(f->chunks);
      f->chunks = NULL;
      return -1;
    }
    memcpy(f->chunks + 64 * i, h, 64);
  }
  f->chunks[64 * n] = '\0';
  f->chunk = (uint64_t)chunk;
  f->sha256[0] = '\0';
  return 0;
}

static int read_files(const char *path, json_t *arr, manifest *m) {
  size_t i;
  json_t *v;
  if (!json_is_array(arr) || json_array_size(arr) > MANIFEST_MAX_FILES)
    return err_set(DRV_EPARSE, "'%s': \"files\" is not a list of at most %d files", path,
                   MANIFEST_MAX_FILES);
  json_array_foreach(arr, i, v) {
    const char *name, *hex = NULL;
    json_int_t size, chunk = 0;
    json_t *list = NULL;
    manifest_file *f = &m->files[m->nfiles];
    if (json_unpack(v, "{s:s, s:I, s?s, s?I, s?o !}", "name", &name, "size", &size, "sha256", &hex,
                    "chunk", &chunk, "sha256_chunks", &list) < 0 ||
        size < 0 || strlen(name) >= sizeof f->name || strchr(name, '/') ||
        (hex ? strlen(hex) != 64 || list : read_chunks(list, (uint64_t)size, chunk, f) < 0))
      return err_set(DRV_EPARSE, "'%s': file entry %zu is not {name, size, sha256} nor {name, "
                     "size, chunk, sha256_chunks}", path, i);
    snprintf(f->name, sizeof f->name, "%s", name);
    if (hex) memcpy(f->sha256, hex, 65);
    f->size = (uint64_t)size;
    m->nfiles++;
  }
  return 0;
}

static int read_meta(const char *path, json_t *obj, manifest *m) {
  size_t n = json_is_object(obj) ? json_object_size(obj) : 0, k = 0;
  if (!json_is_object(obj)) return err_set(DRV_EPARSE, "'%s': \"meta\" is not an object", path);
  m->meta = calloc(2 * n + 1, sizeof *m->meta);
  if (!m->meta) return err_set(DRV_ENOMEM, "out of memory reading '%s'", path);
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    if (!json_is_string(v)) return err_set(DRV_EPARSE, "'%s': meta \"%s\" is not a string", path, key);
    m->meta[k++] = strdup(key);
    m->meta[k++] = strdup(json_string_value(v));
    if (!m->meta[k - 1] || !m->meta[k - 2]) return err_set(DRV_ENOMEM, "out of memory");
  }
  return 0;
}

static int parse_root(const char *path, json_t *root, manifest *m) {
  const char *format = json_string_value(json_object_get(root, "format"));
  int rc = format && strcmp(format, FORMAT) == 0
               ? 0 : err_set(DRV_EPARSE, "'%s' is not a drover manifest (format)", path);
  if (rc == 0) rc = read_files(path, json_object_get(root, "files"), m);
  if (rc == 0) rc = read_meta(path, json_object_get(root, "meta"), m);
  json_decref(root);
  return rc;
}

int manifest_parse(const char *name, const char *text, size_t len, manifest *m) {
  memset(m, 0, sizeof *m);
  json_error_t jerr;
  json_t *root = json_loadb(text, len, 0, &jerr);
  if (!root) return err_set(DRV_EPARSE, "cannot read '%s': %s", name, jerr.text);
  return parse_root(name, root, m);
}

int manifest_read(const char *dir, manifest *m) {
  memset(m, 0, sizeof *m);
  char path[4150];
  snprintf(path, sizeof path, "%s/%s", dir, MANIFEST_NAME);
  if (access(path, F_OK) != 0) {
    int e = errno;
    err_set(DRV_EIO, "'%s' has no %s: %s", dir, MANIFEST_NAME, strerror(e));
    errno = e;
    return DRV_EIO;
  }
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (!root) return err_set(DRV_EPARSE, "cannot read '%s': %s", path, jerr.text);
  int rc = parse_root(path, root, m);
  errno = 0;
  return rc;
}

int manifest_digest_matches(const manifest_file *f, const char *digest) {
  if (!f->chunks) return strlen(digest) == 64 && strcmp(digest, f->sha256) == 0;
  char want[MANIFEST_DIGEST_MAX];
  snprintf(want, sizeof want, MANIFEST_CHUNKED "%llu:%s", (unsigned long long)f->chunk, f->chunks);
  return strcmp(digest, want) == 0;
}

/* Finishes chunk i's hash (st) and compares it; `end` is where it ends. */
static int check_chunk(const char *path, const manifest_file *f, sha256_ctx *st, uint64_t i,
                       uint64_t end) {
  char hex[65];
  sha256_hex(st, hex);
  uint64_t n = (f->size + f->chunk - 1) / f->chunk;
  if (i >= n)
    return err_set(DRV_EIO, "'%s' is longer than its manifest's %llu bytes", path,
                   (unsigned long long)f->size);
  if (memcmp(hex, f->chunks + 64 * i, 64) != 0)
    return err_set(DRV_EIO, "'%s' does not match its manifest's sha256 of chunk %llu (bytes "
                   "%llu-%llu; corrupted)", path, (unsigned long long)i,
                   (unsigned long long)(i * f->chunk), (unsigned long long)end);
  return 0;
}

/* Hashes path chunk by chunk against f's chunk hashes. */
static int verify_chunks(const char *path, const manifest_file *f) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(errno));
  static _Thread_local unsigned char buf[CHUNK];
  uint64_t total = 0, in_chunk = 0, i = 0;
  sha256_ctx st;
  int rc = sha256_init(&st);
  bool open_ctx = rc == 0;
  while (rc == 0) {
    size_t want = sizeof buf < f->chunk - in_chunk ? sizeof buf : (size_t)(f->chunk - in_chunk);
    ssize_t k = read(fd, buf, want);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) rc = err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(errno));
    if (k <= 0) break;
    sha256_update(&st, buf, (size_t)k);
    total += (uint64_t)k, in_chunk += (uint64_t)k;
    if (in_chunk < f->chunk) continue;
    rc = check_chunk(path, f, &st, i++, total);
    in_chunk = 0;
    open_ctx = rc == 0 && sha256_init(&st) == 0;
    if (rc == 0 && !open_ctx) rc = DRV_ENOMEM;
  }
  close(fd);
  if (rc == 0 && total != f->size) {
    if (open_ctx) sha256_drop(&st);
    return err_set(DRV_EIO, "'%s' is %llu bytes, its manifest says %llu (truncated?)", path,
                   (unsigned long long)total, (unsigned long long)f->size);
  }
  if (rc == 0 && in_chunk > 0) return check_chunk(path, f, &st, i, total);
  if (open_ctx) sha256_drop(&st);
  return rc;
}

int manifest_verify(const char *dir, const manifest *m) {
  for (int i = 0; i < m->nfiles; i++) {
    const manifest_file *f = &m->files[i];
    char path[4200], hex[65];
    uint64_t size;
    snprintf(path, sizeof path, "%s/%s", dir, f->name);
    if (f->chunks) {
      int rc = verify_chunks(path, f);
      if (rc < 0) return rc;
      continue;
    }
    int rc = manifest_hash_file(path, hex, &size);
    if (rc < 0) return rc;
    if (size != f->size)
      return err_set(DRV_EIO, "'%s' is %llu bytes, its manifest says %llu (truncated?)", path,
                     (unsigned long long)size, (unsigned long long)f->size);
    if (strcmp(hex, f->sha256) != 0)
      return err_set(DRV_EIO, "'%s' does not match its manifest's sha256 (corrupted)", path);
  }
  return 0;
}

void manifest_free(manifest *m) {
  if (!m) return;
  for (int i = 0; i < m->nfiles; i++) {
    free(m->files[i].chunks);
    m->files[i].chunks = NULL;
  }
  for (char **p = m->meta; p && *p; p++) free(*p);
  free(m->meta);
  m->meta = NULL;
  m->nfiles = 0;
}

const char *manifest_meta(const manifest *m, const char *key) {
  for (char **p = m->meta; p && p[0] && p[1]; p += 2)
    if (strcmp(p[0], key) == 0) return p[1];
  return NULL;
}
