/* ckfs.c - checkpoint directories (see ckfs.h): the local kind, the
 * dispatch by name, and the copies between a local directory and HDFS
 * that in-process checkpoints, restores and exports use. */
#include "train/ckfs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/rundir.h"
#include "base/util.h"
#include "base/webhdfs.h"
#include "train/ckfs_int.h"

/* ============================== local ==================================== */

/* A step directory has no subdirectory: its files, then itself. */
static void local_remove(const char *path) {
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(path);
}

static bool local_committed(const char *step) {
  char p[4400];
  snprintf(p, sizeof p, "%s/%s", step, MANIFEST_NAME);
  return access(p, F_OK) == 0;
}

static int by_step(const void *a, const void *b) {
  const ckpt_entry *x = a, *y = b;
  return x->step < y->step ? -1 : x->step > y->step;
}

void ckfs__sort(ckpt_entry *e, int n) {
  if (n > 1) qsort(e, (size_t)n, sizeof *e, by_step);
}

static int local_list(const char *dir, ckpt_entry **out, bool all) {
  *out = NULL;
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT ? 0 : err_set(DRV_EIO, "cannot list '%s': %s", dir, strerror(errno));
  size_t n = 0, cap = 0;
  struct dirent *e;
  int rc = 0;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    int64_t step = rundir_step_of(e->d_name);
    if (step < 0) continue;
    if ((rc = util_grow(out, &cap, n + 1, sizeof **out, 8)) < 0) break;
    ckpt_entry *c = &(*out)[n];
    c->step = step;
    snprintf(c->path, sizeof c->path, "%s/%s", dir, e->d_name);
    if (all || local_committed(c->path)) n++;
  }
  closedir(d);
  if (rc < 0) {
    free(*out);
    *out = NULL;
    return rc;
  }
  ckfs__sort(*out, (int)n);
  return (int)n;
}

static const ckfs_ops local_ops = {local_list, local_committed, rundir_mkdirs, local_remove,
                                   manifest_read, manifest_verify, manifest_commit_hashed};

/* ============================== dispatch ================================= */

int ckfs_is_remote(const char *dir) { return webhdfs_is_url(dir); }

static const ckfs_ops *ops(const char *dir) {
  return webhdfs_is_url(dir) ? &ckfs__hdfs : &local_ops;
}

int ckfs_list(const char *dir, ckpt_entry **out, bool all) { return ops(dir)->list(dir, out, all); }
bool ckfs_committed(const char *step) { return ops(step)->committed(step); }
int ckfs_mkdirs(const char *dir) { return ops(dir)->mkdirs(dir); }
void ckfs_remove(const char *step) { ops(step)->remove(step); }
int ckfs_manifest_read(const char *step, manifest *m) { return ops(step)->manifest_read(step, m); }

int ckfs_manifest_verify(const char *step, const manifest *m) {
  return ops(step)->manifest_verify(step, m);
}

int ckfs_manifest_commit(const char *step, const char *const *files, const uint64_t *sizes,
                         const char *const *hexes, const char *const *meta) {
  return ops(step)->manifest_commit(step, files, sizes, hexes, meta);
}

/* ============================== copies =================================== */

int ckfs_tmpdir(char *buf, size_t n) {
  const char *t = getenv("TMPDIR");
  if (!t || !*t) t = "/tmp";
  if ((size_t)snprintf(buf, n, "%s/drover-ckpt-XXXXXX", t) >= n)
    return err_set(DRV_ERANGE, "TMPDIR '%s' is too long", t);
  if (!mkdtemp(buf)) return err_set(DRV_EIO, "cannot create a directory in '%s': %s", t, strerror(errno));
  return 0;
}

void ckfs_drop_copy(const char *local) { local_remove(local); }

typedef struct file_rd {
  FILE *f;
  const char *path;
} file_rd;

static long long read_local(void *ud, char *buf, size_t cap) {
  file_rd *r = ud;
  size_t k = fread(buf, 1, cap, r->f);
  if (k == 0 && ferror(r->f)) return err_set(DRV_EIO, "cannot read '%s': %s", r->path, strerror(errno));
  return (long long)k;
}

/* local/name to url (replacing what is there). */
static int upload(const char *local, const char *name, const char *url) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", local, name);
  struct stat st;
  file_rd r = {fopen(path, "rb"), path};
  if (!r.f || fstat(fileno(r.f), &st) != 0) {
    int rc = err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(errno));
    if (r.f) fclose(r.f);
    return rc;
  }
  int rc = webhdfs_create_stream(url, (int64_t)st.st_size, read_local, &r, 1, 0);
  fclose(r.f);
  return rc;
}

int ckfs_publish(const char *local, const char *step, const char *const *files) {
  char url[WEBHDFS_URL_MAX], tmp[WEBHDFS_URL_MAX];
  int rc = webhdfs_mkdirs(step, 0);
  for (int i = 0; rc == 0 && files[i]; i++) {
    snprintf(url, sizeof url, "%s/%s", step, files[i]);
    rc = upload(local, files[i], url);
  }
  snprintf(tmp, sizeof tmp, "%s/" MANIFEST_NAME ".tmp", step);
  snprintf(url, sizeof url, "%s/" MANIFEST_NAME, step);
  if (rc == 0) rc = upload(local, MANIFEST_NAME, tmp);
  if (rc == 0) rc = webhdfs_rename(tmp, url);
  return rc;
}

typedef struct file_wr {
  FILE *f;
  const char *path;
} file_wr;

static int write_local(void *ud, const char *buf, size_t n) {
  file_wr *w = ud;
  if (fwrite(buf, 1, n, w->f) != n)
    return err_set(DRV_EIO, "cannot write '%s': %s", w->path, strerror(errno));
  return 0;
}

/* url to local/name. */
static int download(const char *url, const char *local, const char *name) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", local, name);
  file_wr w = {fopen(path, "wb"), path};
  if (!w.f) return err_set(DRV_EIO, "cannot write '%s': %s", path, strerror(errno));
  int rc = webhdfs_open(url, 0, WEBHDFS_TO_END, write_local, &w);
  if (fclose(w.f) != 0 && rc == 0) rc = err_set(DRV_EIO, "cannot write '%s': %s", path, strerror(errno));
  return rc;
}

int ckfs_fetch(const char *step, char *local, size_t n, int *copied) {
  *copied = 0;
  if (!webhdfs_is_url(step)) {
    snprintf(local, n, "%s", step);
    return 0;
  }
  manifest m;
  int rc = ckfs_manifest_read(step, &m);
  if (rc == 0) rc = ckfs_tmpdir(local, n);
  if (rc == 0) *copied = 1;
  char url[WEBHDFS_URL_MAX];
  for (int i = 0; rc == 0 && i < m.nfiles; i++) {
    snprintf(url, sizeof url, "%s/%s", step, m.files[i].name);
    rc = download(url, local, m.files[i].name);
  }
  snprintf(url, sizeof url, "%s/" MANIFEST_NAME, step);
  if (rc == 0) rc = download(url, local, MANIFEST_NAME);
  manifest_free(&m);
  if (rc < 0 && *copied) {
    ckfs_drop_copy(local);
    *copied = 0;
  }
  return rc;
}
