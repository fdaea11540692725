/* nn_file.c - a model's parameters in a safetensors file, under the names
 * PyTorch gives the same nn.Sequential, with the model's spec beside them
 * and its sparse tables' held rows (nn_tabfile.h).
 *
 * drover and PyTorch agree on the layout of every parameter (Linear's
 * weight is [out, in] in both), so values go across unchanged; only the
 * names differ from nn_collect_params' Torch7-style 1-based ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "numeric/nn.h"
#include "numeric/nn_tabfile.h"
#include "base/safetensors.h"

/* ============================== saving =================================== */

/* m's spec as a new string; NULL with a message. */
static char *spec_string(const nn_module *m) {
  int len = nn_spec(m, NULL, 0);
  if (len < 0) return NULL;
  char *s = malloc((size_t)len + 1);
  if (!s) {
    err_set(DRV_ENOMEM, "out of memory writing the model's spec");
    return NULL;
  }
  nn_spec(m, s, (size_t)len + 1);
  return s;
}

/* Parameters and buffers, then the tables: by id (max_bytes 0) or dense. */
static int save_model(nn_module *m, const char *path, size_t max_bytes) {
  if (!m || !path) return err_set(DRV_EINVAL, "nn_save: NULL argument");
  char *spec = spec_string(m);
  if (!spec) return err_set(DRV_EUNSUPPORTED, "cannot save '%s': %s", path, err_msg());
  nn_param_list pl = {0};
  nn_tabfile tf = {0};
  int rc = nn_torch_state(m, &pl);
  if (rc == 0)
    rc = max_bytes ? nn_tabfile_dense(m, max_bytes, &tf) : nn_tabfile_entries(m, false, &tf);
  safetensors_entry *e = rc < 0 ? NULL : calloc((size_t)pl.n + tf.n + 1, sizeof *e);
  if (rc == 0 && !e) rc = err_set(DRV_ENOMEM, "cannot save '%s': out of memory", path);
  for (int i = 0; rc == 0 && i < pl.n; i++) {
    const tensor *v = pl.items[i].value; /* module-owned buffers are contiguous */
    e[i] = (safetensors_entry){pl.items[i].name, v->ndim, v->shape, tensor_data(v), NULL};
  }
  if (rc == 0 && tf.n) memcpy(e + pl.n, tf.e, tf.n * sizeof *e);
  const char *meta[] = {"format", "pt", NN_SPEC_META_KEY, spec, NULL};
  if (rc == 0) rc = safetensors_write(path, e, (size_t)pl.n + tf.n, meta);
  free(e);
  nn_tabfile_free(&tf);
  nn_param_list_free(&pl);
  free(spec);
  return rc;
}

int nn_save(nn_module *m, const char *path) { return save_model(m, path, 0); }

int nn_save_dense(nn_module *m, const char *path, size_t max_bytes) {
  return save_model(m, path, max_bytes ? max_bytes : 1);
}

/* ============================== loading ================================== */

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < ndim && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Every parameter has a tensor of its shape in f, and f nothing else but
 * the tables' entries (nn_tabfile.h). */
static int check_match(nn_module *m, const nn_param_list *pl, const safetensors_file *f,
                       const char *path) {
  for (int i = 0; i < pl->n; i++) {
    const safetensors_tensor *t = safetensors_find(f, pl->items[i].name);
    if (!t)
      return err_set(DRV_EINVAL, "cannot load '%s': it has no tensor '%s' (the model's "
                     "parameters: %d; the file's tensors: %zu)", path, pl->items[i].name,
                     pl->n, f->n);
    const tensor *v = pl->items[i].value;
    int same = t->ndim == v->ndim;
    for (int d = 0; same && d < v->ndim; d++) same = t->shape[d] == v->shape[d];
    if (!same) {
      char a[128], b[128];
      shape_str(t->ndim, t->shape, a, sizeof a);
      shape_str(v->ndim, v->shape, b, sizeof b);
      return err_set(DRV_ESHAPE, "cannot load '%s': tensor '%s' is %s in the file, the "
                     "model's is %s", path, pl->items[i].name, a, b);
    }
  }
  for (size_t j = 0; j < f->n; j++) {
    int found = 0;
    for (int i = 0; !found && i < pl->n; i++) found = !strcmp(pl->items[i].name, f->tensors[j].name);
    if (!found) found = nn_tabfile_owns(m, false, f->tensors[j].name);
    if (!found)
      return err_set(DRV_EINVAL, "cannot load '%s': tensor '%s' is not a parameter of the "
                     "model", path, f->tensors[j].name);
  }
  return 0;
}

/* Checks everything first, so a failed load leaves m as it was. */
static int load_from(nn_module *m, const safetensors_file *f, const char *path) {
  nn_param_list pl = {0};
  int rc = nn_torch_state(m, &pl);
  if (rc == 0) rc = check_match(m, &pl, f, path);
  if (rc == 0) rc = nn_tabfile_check(m, false, f, path);
  for (int i = 0; rc == 0 && i < pl.n; i++) {
    const safetensors_tensor *t = safetensors_find(f, pl.items[i].name);
    if (t->numel) memcpy(tensor_data(pl.items[i].value), t->data, (size_t)t->numel * sizeof(float));
  }
  if (rc == 0) rc = nn_tabfile_load(m, false, f, path);
  nn_param_list_free(&pl);
  return rc;
}

int nn_load_params(nn_module *m, const char *path) {
  if (!m || !path) return err_set(DRV_EINVAL, "nn_load_params: NULL argument");
  safetensors_file f;
  int rc = safetensors_read(path, &f);
  if (rc == 0) rc = load_from(m, &f, path);
  safetensors_free(&f);
  return rc;
}

nn_module *nn_load(const char *path, rng_t *r) {
  if (!path || !r) {
    err_set(DRV_EINVAL, "nn_load: NULL argument");
    return NULL;
  }
  safetensors_file f;
  nn_module *m = NULL;
  int rc = safetensors_read(path, &f);
  const char *spec = rc == 0 ? safetensors_meta(&f, NN_SPEC_META_KEY) : NULL;
  if (rc == 0 && !spec)
    err_set(DRV_EUNSUPPORTED, "cannot load '%s': it has no model spec (metadata \"%s\"), "
            "as when PyTorch wrote it: build the same model and load the values into it",
            path, NN_SPEC_META_KEY);
  if (spec) {
    m = nn_from_spec(spec, r);
    if (!m) err_set(DRV_EPARSE, "cannot load '%s': %s", path, err_msg());
  }
  if (m && load_from(m, &f, path) < 0) {
    nn_unref(m);
    m = NULL;
  }
  safetensors_free(&f);
  return m;
}
