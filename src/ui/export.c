/* export.c - writing the model of a run's checkpoint (see export.h). */
#include "ui/export.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/ckpt.h"
#include "base/afile.h"
#include "base/err.h"
#include "base/rundir.h"
#include "base/manifest.h"
#include "numeric/nn.h"
#include "numeric/nn_sparse.h"
#include "numeric/nn_tabfile.h"
#include "base/safetensors.h"
#include "ui/runs.h"

/* "8, 16, 24" (the last few when there are many) into buf. */
static const char *steps_of(const ckpt_entry *c, int n, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  int from = n > 20 ? n - 20 : 0;
  if (from) at += (size_t)snprintf(buf, len, "..., ");
  for (int i = from; i < n && at < len; i++)
    at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, i > from ? ", " : "", c[i].step);
  return buf;
}

static void warn_bad(void *ud, const char *msg) {
  if (ud) fprintf(ud, "drover: %s\n", msg);
}

/* The checkpoint to export into *found. */
static int pick(const export_opts *o, const char *ckdir, FILE *warn, ckpt_entry *found) {
  ckpt_entry *all;
  int n = ckpt_list(ckdir, &all);
  if (n < 0) return n;
  int rc = 0;
  if (n == 0) {
    rc = err_set(DRV_EINVAL, "run '%s' has no checkpoint (checkpoint = { every = STEPS } in "
                 "its experiment takes them)", o->run);
  } else if (o->step >= 0) {
    int i = 0;
    while (i < n && all[i].step != o->step) i++;
    char steps[400];
    if (i == n)
      rc = err_set(DRV_EINVAL, "run '%s' has no checkpoint of step %" PRId64 "; it has steps %s",
                   o->run, o->step, steps_of(all, n, steps, sizeof steps));
    else *found = all[i];
  } else {
    int got = ckpt_newest(ckdir, found, warn_bad, warn);
    if (got == 0)
      rc = err_set(DRV_EIO, "run '%s': none of its %d checkpoints is intact", o->run, n);
    else if (got < 0) rc = got;
  }
  free(all);
  return rc;
}

/* Copies src to dst through a temporary renamed over it (afile.h). */
static int copy_file(const char *src, const char *dst) {
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) return err_set(DRV_EIO, "cannot read '%s': %s", src, strerror(errno));
  afile out;
  int rc = afile_open(&out, dst);
  char buf[1 << 16];
  ssize_t k = 0;
  while (rc == 0 && !out.err && (k = read(in, buf, sizeof buf)) != 0) {
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      rc = err_set(DRV_EIO, "cannot read '%s': %s", src, strerror(errno));
      afile_abort(&out);
    } else {
      afile_write(&out, buf, (size_t)k);
    }
  }
  close(in);
  return rc < 0 ? rc : afile_commit(&out, 0644);
}

/* Copies tensor t of a ps file into the parameter named like it, at the
 * rows the file's metadata says (a split variable's shard). */
static int merge_tensor(nn_param_list *pl, const safetensors_file *f, const safetensors_tensor *t,
                        const char *file) {
  for (int i = 0; i < pl->n; i++) {
    tensor *v = pl->items[i].value;
    if (strcmp(pl->items[i].name, t->name) != 0) continue;
    char key[600];
    snprintf(key, sizeof key, "%s.row0", t->name);
    const char *r0 = safetensors_meta(f, key);
    int64_t row0 = r0 ? strtoll(r0, NULL, 10) : 0, rows = v->shape[0] ? v->shape[0] : 1;
    int64_t per_row = tensor_numel(v) / rows;
    if (row0 < 0 || (row0 * per_row + t->numel) > tensor_numel(v))
      return err_set(DRV_EINVAL, "%s: %s does not fit the model's %s", file, t->name,
                     pl->items[i].name);
    memcpy(tensor_data(v) + row0 * per_row, t->data, (size_t)t->numel * sizeof(float));
    return 0;
  }
  return err_set(DRV_EINVAL, "%s: %s is not a parameter of the model", file, t->name);
}

/* A model with sparse tables is written for PyTorch: each table dense
 * under nn.EmbeddingBag's name, when it fits in EXPORT_DENSE_MAX bytes. */
#define EXPORT_DENSE_MAX ((size_t)4 << 30)

/* One ps file into the model: its dense shards at their rows, the rows
 * of its sparse tables it held (ps_ckpt_sparse.h) by id. */
static int merge_file(nn_module *model, nn_param_list *pl, const char *path) {
  safetensors_file f;
  int rc = safetensors_read(path, &f);
  if (rc == 0) rc = nn_tabfile_merge(model, &f, path);
  for (size_t t = 0; t < f.n && rc == 0; t++)
    if (strncmp(f.tensors[t].name, "optim.", 6) != 0 && !nn_tabfile_owns(model, false, f.tensors[t].name))
      rc = merge_tensor(pl, &f, &f.tensors[t], path);
  safetensors_free(&f);
  return rc;
}

/* A cluster checkpoint: one file per ps, each with its shards; rebuilt
 * into the model its manifest describes and written as one file (its
 * tables gathered from every ps file, then written dense). */
static int export_cluster(const char *dir, const char *local, const manifest *m,
                          const char *out) {
  const char *spec = manifest_meta(m, NN_SPEC_META_KEY);
  if (!spec || !spec[0]) return err_set(DRV_EINVAL, "%s: the manifest has no model spec", dir);
  rng_t r;
  rng_seed(&r, 1);
  nn_module *model = nn_from_spec(spec, &r);
  if (!model) return DRV_EINVAL;
  nn_param_list pl = {0};
  /* Parameters and buffers: the ps files hold BatchNorm's running
   * statistics too (num_batches_tracked stays 0: it is not on a ps). */
  int rc = nn_torch_state(model, &pl);
  for (int k = 0; k < m->nfiles && rc == 0; k++) {
    char path[PATH_MAX + 100];
    snprintf(path, sizeof path, "%s/%s", local, m->files[k].name);
    rc = merge_file(model, &pl, path);
  }
  if (rc == 0) rc = nn_find_table(model) ? nn_save_dense(model, out, EXPORT_DENSE_MAX) : nn_save(model, out);
  nn_param_list_free(&pl);
  nn_unref(model);
  return rc;
}

/* An in-process checkpoint's model file: copied as it is, or rewritten
 * with its tables dense. */
static int export_model_file(const char *src, const char *out) {
  rng_t r;
  rng_seed(&r, 1);
  nn_module *model = nn_load(src, &r);
  if (!model || !nn_find_table(model)) {
    nn_unref(model);
    return copy_file(src, out);
  }
  int rc = nn_save_dense(model, out, EXPORT_DENSE_MAX);
  nn_unref(model);
  return rc;
}

/* The checkpoint in the local directory `path` (a copy of an HDFS one
 * read into it, or the run directory's) to o->out. */
static int export_step(const export_opts *o, const ckpt_entry *c, const char *path) {
  char src[PATH_MAX + 4200];
  manifest m;
  int rc = ckpt_open(path, &m);
  const char *kind = rc == 0 ? manifest_meta(&m, "kind") : NULL;
  if (kind && strcmp(kind, "cluster") == 0) {
    rc = export_cluster(c->path, path, &m, o->out);
    manifest_free(&m);
    return rc;
  }
  manifest_free(&m);
  if (rc < 0) {
    char why[1024];
    snprintf(why, sizeof why, "%s", err_msg()); /* err_set reuses its buffer */
    return err_set(DRV_EIO, "checkpoint step-%" PRId64 " of run '%s' is damaged: %s", c->step,
                   o->run, why);
  }
  snprintf(src, sizeof src, "%s/" CKPT_MODEL, path);
  return export_model_file(src, o->out);
}

int export_model(const export_opts *o, FILE *warn, int64_t *step) {
  char dir[PATH_MAX], ckdir[PATH_MAX + 16], local[4096];
  int rc = runs_find(o->runs, o->run, dir, sizeof dir);
  if (rc < 0) return rc;
  rundir_ckdir(dir, ckdir, sizeof ckdir); /* the run directory's, or on HDFS */
  ckpt_entry c;
  if ((rc = pick(o, ckdir, warn, &c)) < 0) return rc;
  int copied;
  if ((rc = ckfs_fetch(c.path, local, sizeof local, &copied)) < 0) return rc;
  rc = export_step(o, &c, local);
  if (copied) ckfs_drop_copy(local);
  if (rc == 0 && step) *step = c.step;
  return rc;
}
