/* worker_setup.c - what a SETUP frame builds for a worker, chief or
 * evaluator: the model (from its nn spec), the loss, the variable table
 * with its placement on the ps nodes, the node's data and batch iterator.
 *
 * Everything is checked before the state is used: each variable's shape
 * against the model parameter of the same position, each variable's shards
 * against its rows (they must tile them exactly, at most one per ps), the
 * data's shapes. A SETUP that fails any check builds nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "numeric/rng.h"
#include "proto/wire_msgs.h"
#include "cluster/worker/worker_int.h"

void worker__state_free(wstate *st) {
  if (!st) return;
  if (st->has_iter) data_iter_free(&st->it);
  data_free(st->data);
  for (uint32_t i = 0; i < st->nvars; i++) {
    free(st->vars[i].name);
    free(st->vars[i].shards);
    if (st->vars[i].stat) tensor_free(st->vars[i].grad);
  }
  free(st->vars);
  for (int p = 0; p < st->nparts; p++) {
    free(st->parts[p].var);
    free(st->parts[p].shard);
  }
  free(st->parts);
  nn_param_list_free(&st->params);
  worker__sparse_free(st);
  nn_loss_unref(st->loss);
  nn_unref(st->model);
  free(st);
}

static const char *dims_str(int ndim, const int64_t *dims, char *buf, size_t n) {
  size_t len = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < ndim && len < n; d++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? ", " : "", (long long)dims[d]);
  if (len < n) snprintf(buf + len, n - len, "]");
  return buf;
}

/* ============================== reading ================================== */

/* One variable's entry of the table (validated): name, shape, shards. */
static int read_var(const wire_item_setup_var *it, wvar *v) {
  v->ndim = it->shape.ndim;
  v->row_elems = 1;
  for (int d = 0; d < v->ndim; d++) {
    v->dims[d] = it->shape.shape[d];
    if (d > 0) v->row_elems *= (size_t)v->dims[d];
  }
  v->nshards = it->shards.n;
  if (!(v->name = strndup(it->name.s, it->name.len)) ||
      !(v->shards = calloc((size_t)v->nshards + 1, sizeof *v->shards)))
    return err_set(DRV_ENOMEM, "out of memory");
  wire_rd r = wire_items_reader(&it->shards);
  for (uint32_t s = 0; s < v->nshards; s++) {
    wire_item_setup_shard sh;
    wire_get_item_setup_shard(&r, &sh);
    v->shards[s].ps = sh.ps;
    v->shards[s].row0 = sh.row0;
    v->shards[s].rows = sh.rows;
  }
  return 0;
}

static tensor *tensor_of(const wire_tensor *v) {
  tensor *t = tensor_new(v->ndim, v->shape);
  if (t) wire_tensor_to(v, tensor_data(t));
  return t;
}

/* A SETUP's fields into st (model spec and loss name into the buffers);
 * x and y come back as new tensors. */
static int read_setup(const uint8_t *p, size_t len, wstate *st, char *spec, size_t nspec,
                      char *loss, size_t nloss, tensor **x, tensor **y, dataset **files,
                      wire_bytes *sparse) {
  wire_msg_setup m;
  int rc = wire_get_setup(p, len, &m);
  if (rc == 0) rc = wire_str_copy(m.model, spec, nspec);
  if (rc == 0) rc = wire_str_copy(m.loss, loss, nloss);
  if (rc < 0) return rc;
  *sparse = m.sparse; /* a view into p, which outlives the build */
  st->batch = (int64_t)m.batch;
  st->seed = m.seed;
  st->shuffle = m.shuffle;
  if (!isfinite(m.clip_norm) || m.clip_norm < 0)
    return err_set(DRV_EINVAL, "SETUP: clip_norm must be finite and >= 0 (got %g)", m.clip_norm);
  st->clip_norm = m.clip_norm;
  if (!(st->vars = calloc((size_t)m.vars.n + 1, sizeof *st->vars)))
    return err_set(DRV_ENOMEM, "out of memory");
  wire_rd r = wire_items_reader(&m.vars);
  for (uint32_t i = 0; i < m.vars.n; i++) {
    wire_item_setup_var it;
    wire_get_item_setup_var(&r, &it);
    st->nvars = i + 1;
    if ((rc = read_var(&it, &st->vars[i])) < 0) return rc;
  }
  if (m.recipe.len > 0) { /* files mode: read this node's shard itself */
    rc = data_from_recipe((const char *)m.recipe.p, m.recipe.len, m.shard, m.shards, files);
    if (rc < 0) return err_set(rc, "SETUP: files mode: %s", err_msg());
    return 0;
  }
  if (!(*x = tensor_of(&m.x)) || !(*y = tensor_of(&m.y)))
    return err_set(DRV_ENOMEM, "out of memory for the SETUP data");
  return 0;
}

/* ============================== checking ================================= */

static int cmp_shard_row(const void *a, const void *b) {
  const wshard *x = a, *y = b;
  return x->row0 < y->row0 ? -1 : x->row0 > y->row0;
}

/* The shards of v must tile rows [0, dims[0]) exactly, one per ps at most.
 * (Sorting a copy leaves the table's order, which PUSH does not depend on,
 * untouched anyway.) */
static int check_shards(uint32_t i, const wvar *v) {
  if (v->nshards == 0)
    return err_set(DRV_EINVAL, "SETUP: variable %u (%s) has no shards", i, v->name);
  wshard *s = malloc((size_t)v->nshards * sizeof *s);
  if (!s) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(s, v->shards, (size_t)v->nshards * sizeof *s);
  qsort(s, v->nshards, sizeof *s, cmp_shard_row);
  uint64_t next = 0;
  int rc = 0;
  for (uint32_t k = 0; k < v->nshards && rc == 0; k++) {
    if (s[k].ps >= WORKER_MAX_PS)
      rc = err_set(DRV_ERANGE, "SETUP: variable %u (%s) is placed on ps:%u (limit %d)", i,
                   v->name, s[k].ps, WORKER_MAX_PS);
    else if (s[k].row0 != next || s[k].rows == 0 || s[k].rows > (uint64_t)v->dims[0] - next)
      rc = err_set(DRV_EINVAL,
                   "SETUP: the shards of variable %u (%s) do not tile its %lld rows "
                   "(a shard at row %llu of %llu rows, expected row %llu)",
                   i, v->name, (long long)v->dims[0], (unsigned long long)s[k].row0,
                   (unsigned long long)s[k].rows, (unsigned long long)next);
    for (uint32_t j = 0; j < k && rc == 0; j++)
      if (s[j].ps == s[k].ps)
        rc = err_set(DRV_EINVAL, "SETUP: variable %u (%s) has two shards on ps:%u", i,
                     v->name, s[k].ps);
    next = s[k].row0 + s[k].rows;
  }
  if (rc == 0 && next != (uint64_t)v->dims[0])
    rc = err_set(DRV_EINVAL, "SETUP: the shards of variable %u (%s) cover %llu of %lld rows", i,
                 v->name, (unsigned long long)next, (long long)v->dims[0]);
  free(s);
  return rc;
}

/* Binds var i to the model's parameter i, whose shape must be the same. */
static int bind_params(wstate *st) {
  if (st->params.n != (int)st->nvars)
    return err_set(DRV_EINVAL, "SETUP: %u variables for a model with %d parameters", st->nvars,
                   st->params.n);
  for (uint32_t i = 0; i < st->nvars; i++) {
    wvar *v = &st->vars[i];
    const nn_param *pa = &st->params.items[i];
    bool same = pa->value->ndim == v->ndim;
    for (int d = 0; same && d < v->ndim; d++) same = pa->value->shape[d] == v->dims[d];
    if (!same) {
      char a[96], b[96];
      return err_set(DRV_ESHAPE, "SETUP: variable %u (%s) has shape %s but parameter %s is %s",
                     i, v->name, dims_str(v->ndim, v->dims, a, sizeof a), pa->name,
                     dims_str(pa->value->ndim, pa->value->shape, b, sizeof b));
    }
    int rc = check_shards(i, v);
    if (rc < 0) return rc;
    v->value = pa->value;
    v->grad = pa->grad;
    if ((int)i >= st->ntrained) {
      v->stat = true;
      if (!(v->grad = tensor_new(pa->value->ndim, pa->value->shape)))
        return err_set(DRV_ENOMEM, "out of memory");
    }
  }
  return 0;
}

/* Groups the shards by ps: what each PULL and PUSH lists. */
static int build_parts(wstate *st) {
  int nparts = 0;
  for (uint32_t i = 0; i < st->nvars; i++)
    for (uint32_t k = 0; k < st->vars[i].nshards; k++)
      if ((int)st->vars[i].shards[k].ps + 1 > nparts) nparts = (int)st->vars[i].shards[k].ps + 1;
  if (nparts && !(st->parts = calloc((size_t)nparts, sizeof *st->parts)))
    return err_set(DRV_ENOMEM, "out of memory");
  st->nparts = nparts;
  for (int pass = 0; pass < 2; pass++) { /* count, then fill */
    for (uint32_t i = 0; i < st->nvars; i++)
      for (uint32_t k = 0; k < st->vars[i].nshards; k++) {
        ps_part *p = &st->parts[st->vars[i].shards[k].ps];
        if (pass == 1) {
          p->var[p->n] = i;
          p->shard[p->n] = k;
        }
        p->n++;
      }
    if (pass == 1) break;
    for (int p = 0; p < nparts; p++) {
      ps_part *pp = &st->parts[p];
      pp->var = malloc(((size_t)pp->n + 1) * sizeof *pp->var);
      pp->shard = malloc(((size_t)pp->n + 1) * sizeof *pp->shard);
      if (!pp->var || !pp->shard) return err_set(DRV_ENOMEM, "out of memory");
      pp->n = 0;
    }
  }
  return 0;
}

/* x [n, f] and y [n] or [n, k] as this node's dataset; takes them. */
static int make_dataset(wstate *st, tensor *x, tensor *y, const char *who) {
  char a[96], b[96];
  if (x->ndim < 2 || y->ndim < 1 || y->ndim > 2 || y->shape[0] != x->shape[0]) {
    int rc = err_set(DRV_ESHAPE, "SETUP: data x %s and y %s do not match (x must be [n, ...], "
                     "y [n] or [n, k])", dims_str(x->ndim, x->shape, a, sizeof a),
                     dims_str(y->ndim, y->shape, b, sizeof b));
    tensor_free(x);
    tensor_free(y);
    return rc;
  }
  /* No rows: a fed worker (feed mode); its batches come in FEED_BATCH. */
  dataset *d = calloc(1, sizeof *d);
  if (!d) {
    tensor_free(x);
    tensor_free(y);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  d->x = x;
  d->y = y;
  d->n = x->shape[0];
  d->features = 1; /* x may be [n, h, w] (n may be 0: a fed worker) */
  for (int k = 1; k < x->ndim; k++) d->features *= x->shape[k];
  /* classes as the readers define it: max label + 1 when every label of a
   * 1-D y is a non-negative integer (nothing here depends on it). */
  if (y->ndim == 1) {
    const float *v = tensor_data(y);
    float hi = -1;
    bool integral = true;
    for (int64_t i = 0; i < d->n && integral; i++) {
      integral = v[i] >= 0 && v[i] < 16777216.0f && floorf(v[i]) == v[i];
      if (v[i] > hi) hi = v[i];
    }
    d->classes = integral ? (int64_t)hi + 1 : 0;
  }
  snprintf(d->source, sizeof d->source, "%s's data", who);
  st->data = d;
  return 0;
}

/* ============================== building ================================= */

static int build(wstate *st, int role, int index, const char *spec, const char *lossname,
                 tensor *x, tensor *y, dataset *files, const wire_bytes *sparse) {
  char who[32];
  snprintf(who, sizeof who, "%s:%d", wire_role_name(role), index);
  int rc = 0;
  if (files) st->data = files;
  else rc = make_dataset(st, x, y, who);
  if (rc == 0 && !files) rc = data_sparse_decode(st->data, sparse->p, sparse->len, "SETUP");
  if (rc < 0) return rc;
  if (st->batch <= 0)
    return err_set(DRV_EINVAL, "SETUP: batch must be > 0 (got %lld)", (long long)st->batch);
  rng_t r;
  rng_seed(&r, st->seed);
  if (!(st->model = nn_from_spec(spec, &r)))
    return err_set(DRV_EINVAL, "SETUP: model '%s': %s", spec, err_msg());
  if (!(st->loss = nn_loss_from_name(lossname)))
    return err_set(DRV_EINVAL, "SETUP: loss '%s': %s", lossname, err_msg());
  rng_t *gens[WPOS_MAX_RNG];
  st->nrng = worker__rngs(st->model, gens, WPOS_MAX_RNG);
  for (int i = 0; i < st->nrng; i++) st->init_rng[i] = *gens[i];
  if ((rc = nn_collect_synced(st->model, false, &st->params, &st->ntrained)) < 0 ||
      (rc = bind_params(st)) < 0 ||
      (rc = build_parts(st)) < 0 ||
      (rc = worker__sparse_bind(st)) < 0)
    return rc;
  if (role == ROLE_EVALUATOR && st->data->n == 0)
    return err_set(DRV_EINVAL, "SETUP: the evaluation data is empty");
  if (role != ROLE_EVALUATOR && st->data->n > 0) {
    /* Worker 0 shuffles (or not) exactly as in-process training with the
     * same seed would, so a one-worker cluster reproduces it bit for bit. */
    uint64_t seed = index == 0 ? st->seed : rng_derive(st->seed, (uint64_t)index);
    if ((rc = data_iter_init(&st->it, st->data, st->batch, st->shuffle, seed)) < 0) return rc;
    st->has_iter = true;
  }
  if (role != ROLE_EVALUATOR) nn_set_training(st->model, true);
  snprintf(st->summary, sizeof st->summary, "%u variables, %lld examples%s, batch %lld, %s",
           st->nvars, (long long)st->data->n, files ? " read from its file" : "",
           (long long)st->batch, lossname);
  return 0;
}

int worker__state_parse(int role, int index, const uint8_t *p, size_t len, wstate **out) {
  *out = NULL;
  wstate *st = calloc(1, sizeof *st);
  char *spec = malloc(WIRE_MAX_STR + 1);
  if (!st || !spec) {
    free(st);
    free(spec);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  char lossname[64];
  tensor *x = NULL, *y = NULL;
  dataset *files = NULL;
  wire_bytes sparse = {0};
  int rc = read_setup(p, len, st, spec, WIRE_MAX_STR + 1, lossname, sizeof lossname, &x, &y, &files,
                      &sparse);
  if (rc < 0) {
    tensor_free(x);
    tensor_free(y);
    data_free(files);
  } else {
    rc = build(st, role, index, spec, lossname, x, y, files, &sparse); /* takes x, y and files */
  }
  free(spec);
  if (rc < 0) {
    worker__state_free(st);
    return rc;
  }
  *out = st;
  return 0;
}
