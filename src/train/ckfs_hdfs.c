/* ckfs_hdfs.c - checkpoint directories on HDFS (ckfs.h) through WebHDFS:
 * LISTSTATUS to find steps, MKDIRS, DELETE for pruning, the manifest
 * uploaded under a temporary name and committed by RENAME, and files
 * checked against it as OPEN streams them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/rundir.h"
#include "base/sha256.h"
#include "base/util.h"
#include "base/webhdfs.h"
#include "train/ckfs_int.h"

/* A manifest is a few KB; more is not one. */
#define MANIFEST_READ_MAX (16u << 20)

static int hdfs_list(const char *dir, ckpt_entry **out, bool all) {
  *out = NULL;
  webhdfs_entry *e;
  size_t ne;
  int rc = webhdfs_list(dir, &e, &ne);
  if (rc == DRV_ENOENT) return 0;
  if (rc < 0) return rc;
  size_t n = 0, cap = 0;
  for (size_t i = 0; rc == 0 && i < ne; i++) {
    int64_t step = rundir_step_of(e[i].name);
    if (step < 0 || !e[i].is_dir) continue;
    if ((rc = util_grow(out, &cap, n + 1, sizeof **out, 8)) < 0) break;
    ckpt_entry *c = &(*out)[n];
    c->step = step;
    snprintf(c->path, sizeof c->path, "%s/%s", dir, e[i].name);
    if (all || ckfs_committed(c->path)) n++;
  }
  webhdfs_list_free(e, ne);
  if (rc < 0) {
    free(*out);
    *out = NULL;
    return rc;
  }
  ckfs__sort(*out, (int)n);
  return (int)n;
}

static bool hdfs_committed(const char *step) {
  char url[WEBHDFS_URL_MAX];
  webhdfs_info st;
  snprintf(url, sizeof url, "%s/" MANIFEST_NAME, step);
  return webhdfs_stat(url, &st) == 0 && !st.is_dir;
}

static int hdfs_mkdirs(const char *dir) { return webhdfs_mkdirs(dir, 0); }

static void hdfs_remove(const char *step) { webhdfs_delete(step, 1); }

static int hdfs_manifest_read(const char *step, manifest *m) {
  memset(m, 0, sizeof *m);
  char url[WEBHDFS_URL_MAX], *text;
  size_t len;
  snprintf(url, sizeof url, "%s/" MANIFEST_NAME, step);
  int rc = webhdfs_read_all(url, &text, &len, MANIFEST_READ_MAX);
  if (rc == DRV_ENOENT) { /* as manifest_read says "no checkpoint" */
    err_set(DRV_EIO, "'%s' has no %s", step, MANIFEST_NAME);
    errno = ENOENT;
    return DRV_EIO;
  }
  if (rc < 0) return rc;
  rc = manifest_parse(url, text, len, m);
  free(text);
  errno = 0;
  return rc;
}

/* The digest of a file as OPEN streams it: one SHA-256, or the chunked
 * form when its manifest has chunks (manifest_digest). */
typedef struct hasher {
  const manifest_file *f;
  sha256_ctx whole;
  manifest_digest chunks;
  uint64_t seen;
} hasher;

static int hash_piece(void *ud, const char *buf, size_t n) {
  hasher *h = ud;
  h->seen += n;
  if (h->f->chunks) (void)manifest_digest_update(&h->chunks, buf, n); /* too long: the size check */
  else sha256_update(&h->whole, buf, n);
  return 0;
}

static int verify_file(const char *step, const manifest_file *f) {
  char url[WEBHDFS_URL_MAX], digest[MANIFEST_DIGEST_MAX];
  snprintf(url, sizeof url, "%s/%s", step, f->name);
  hasher h = {.f = f};
  int rc = f->chunks ? manifest_digest_begin(&h.chunks, f->size) : sha256_init(&h.whole);
  if (rc < 0) return rc;
  rc = webhdfs_open(url, 0, WEBHDFS_TO_END, hash_piece, &h);
  if (f->chunks) {
    if (rc == 0 && h.seen == f->size) manifest_digest_end(&h.chunks, digest);
    else manifest_digest_drop(&h.chunks);
  } else
    sha256_hex(&h.whole, digest);
  if (rc < 0) return rc;
  if (h.seen != f->size)
    return err_set(DRV_EIO, "'%s' is %llu bytes, its manifest says %llu (truncated?)", url,
                   (unsigned long long)h.seen, (unsigned long long)f->size);
  if (!manifest_digest_matches(f, digest))
    return err_set(DRV_EIO, "'%s' does not match its manifest's sha256 (corrupted)", url);
  return 0;
}

static int hdfs_manifest_verify(const char *step, const manifest *m) {
  int rc = 0;
  for (int i = 0; i < m->nfiles && rc == 0; i++) rc = verify_file(step, &m->files[i]);
  return rc;
}

static int hdfs_manifest_commit(const char *step, const char *const *files, const uint64_t *sizes,
                                const char *const *hexes, const char *const *meta) {
  char *text, tmp[WEBHDFS_URL_MAX], url[WEBHDFS_URL_MAX];
  int rc = manifest_encode(step, files, sizes, hexes, meta, &text);
  if (rc < 0) return rc;
  snprintf(tmp, sizeof tmp, "%s/" MANIFEST_NAME ".tmp", step);
  snprintf(url, sizeof url, "%s/" MANIFEST_NAME, step);
  rc = webhdfs_create(tmp, text, strlen(text), 1, 0);
  free(text);
  if (rc == 0) rc = webhdfs_rename(tmp, url);
  if (rc < 0) {
    char why[2048];
    snprintf(why, sizeof why, "%s", err_msg());
    webhdfs_delete(tmp, 0);
    return err_set(rc, "cannot commit %s: %s", url, why);
  }
  return 0;
}

const ckfs_ops ckfs__hdfs = {hdfs_list, hdfs_committed, hdfs_mkdirs, hdfs_remove,
                             hdfs_manifest_read, hdfs_manifest_verify, hdfs_manifest_commit};
