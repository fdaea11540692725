/* nn_sparse.c - the id layers over lazily-filled tables: EmbeddingBag,
 * SparseLinear and the table-backed Embedding (see nn_sparse.h), their
 * sparse gradients, and the walk that lists a model's tables.
 */
#include "numeric/nn_sparse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "numeric/nn_int.h"

enum { K_BAG, K_LINEAR, K_EMBEDDING };

/* An id layer's own state, m->tab. */
typedef struct nn_sptab {
  int kind;
  nn_bag_opts o;   /* EmbeddingBag's; SparseLinear: sum over all entries */
  sptable *t;
  nn_spgrad g;
  float *scratch;  /* one row: a missing row's initial values in evaluation */
} nn_sptab;

/* ---- sparse gradients ------------------------------------------------------- */

void nn_spgrad_clear(nn_spgrad *g) {
  if (g->mapcap) memset(g->map, 0, g->mapcap * sizeof *g->map);
  g->n = 0;
}

void nn_spgrad_free(nn_spgrad *g) {
  free(g->ids);
  free(g->rows);
  free(g->map);
  memset(g, 0, sizeof *g);
}

static size_t spgrad_slot(const nn_spgrad *g, uint64_t id) {
  size_t mask = g->mapcap - 1, i = (size_t)((id ^ (id >> 29)) * 0x9e3779b97f4a7c15ULL) & mask;
  while (g->map[i] && g->ids[g->map[i] - 1] != id) i = (i + 1) & mask;
  return i;
}

/* Keeps the map at most half full, rebuilding it from ids when it grows. */
static int spgrad_reserve(nn_spgrad *g) {
  size_t need = (size_t)g->n + 1;
  if (util_grow(&g->ids, &g->cap, need, sizeof *g->ids, 64) < 0) return DRV_ENOMEM;
  if ((size_t)g->dim > SIZE_MAX / sizeof(float) / g->cap) return DRV_ENOMEM;
  float *rows = realloc(g->rows, g->cap * (size_t)g->dim * sizeof *rows);
  if (!rows) return DRV_ENOMEM;
  g->rows = rows;
  if (need * 2 <= g->mapcap) return 0;
  size_t cap = g->mapcap ? g->mapcap * 2 : 128;
  int64_t *map = calloc(cap, sizeof *map);
  if (!map) return DRV_ENOMEM;
  free(g->map);
  g->map = map;
  g->mapcap = cap;
  for (int64_t k = 0; k < g->n; k++) g->map[spgrad_slot(g, g->ids[k])] = k + 1;
  return 0;
}

float *nn_spgrad_row(nn_spgrad *g, uint64_t id) {
  if (g->mapcap) {
    int64_t at = g->map[spgrad_slot(g, id)];
    if (at) return g->rows + (at - 1) * g->dim;
  }
  if (spgrad_reserve(g) < 0) {
    err_set(DRV_ENOMEM, "out of memory for a sparse gradient (%lld rows)", (long long)g->n);
    return NULL;
  }
  int64_t k = g->n++;
  g->ids[k] = id;
  g->map[spgrad_slot(g, id)] = k + 1;
  float *row = g->rows + k * g->dim;
  memset(row, 0, (size_t)g->dim * sizeof *row);
  return row;
}

void nn_sptab_zero_grad(nn_module *m) { nn_spgrad_clear(&m->tab->g); }

/* ---- reading rows ----------------------------------------------------------------- */

/* Row `id` of m's table: created when training; in evaluation the held row
 * or, without creating it, its initial values (in the scratch row). */
static int read_row(nn_module *m, uint64_t id, const float **row) {
  nn_sptab *s = m->tab;
  char nm[96];
  if (id >= sptable_rows(s->t))
    return err_set(DRV_ERANGE, "%s: id %llu is outside 0..%llu", nn_name_of(m, nm, sizeof nm),
                   (unsigned long long)id, (unsigned long long)(sptable_rows(s->t) - 1));
  int64_t k = m->training ? sptable_get(s->t, id) : sptable_find(s->t, id);
  if (k == -1 && !m->training) {
    sptable_init_row(s->t, id, s->scratch);
    *row = s->scratch;
    return 0;
  }
  if (k < 0) return (int)k;
  *row = sptable_value(s->t, k);
  return 0;
}

/* ---- EmbeddingBag and SparseLinear ---------------------------------------------- */

/* Checks the batch against x and resolves the bags; *width is the output's
 * columns. */
static int bag_begin(nn_module *m, const tensor *x, nn_bags *bags, int64_t *width) {
  const nn_sparse *sp = m->sparse;
  const nn_sptab *s = m->tab;
  char nm[96], a[64];
  if (!sp)
    return err_set(DRV_EINVAL, "%s: the batch has no sparse input (ids); a dataset with "
                   "categorical or sparse columns gives one", nn_name_of(m, nm, sizeof nm));
  int rc = nn_sparse_check(sp);
  if (rc < 0) return rc;
  if (x->ndim < 1 || x->shape[0] != sp->rows)
    return err_set(DRV_ESHAPE, "%s: input %s does not have the batch's %lld rows of ids",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a), (long long)sp->rows);
  *bags = s->o.bags == NN_BAGS_AUTO ? (sp->fields > 0 ? NN_BAGS_FIELD : NN_BAGS_ALL) : s->o.bags;
  if (*bags == NN_BAGS_FIELD && sp->fields <= 0)
    return err_set(DRV_EINVAL, "%s: bags = \"field\" needs one id per field; this batch's rows "
                   "have any number of ids (use bags = \"all\")", nn_name_of(m, nm, sizeof nm));
  if (s->o.mode == NN_BAG_MEAN && sp->vals)
    return err_set(DRV_EINVAL, "%s: mode \"mean\" takes no per-entry weights (as PyTorch's "
                   "per_sample_weights, only with mode \"sum\")", nn_name_of(m, nm, sizeof nm));
  *width = sptable_dim(s->t) * (*bags == NN_BAGS_FIELD ? sp->fields : 1);
  return 0;
}

/* Entry e's weight in its bag of entries a..b. */
static float bag_weight(const nn_module *m, int64_t a, int64_t b, int64_t e) {
  float w = m->sparse->vals ? m->sparse->vals[e] : 1.0f;
  return m->tab->o.mode == NN_BAG_MEAN ? w / (float)(b - a) : w;
}

static int bag_forward(nn_module *m, const tensor *x, const tensor **y) {
  nn_bags bags;
  int64_t width, d = sptable_dim(m->tab->t);
  int rc = bag_begin(m, x, &bags, &width);
  if (rc < 0 || (rc = nn_ensure(&m->out, 2, (int64_t[]){x->shape[0], width})) < 0) return rc;
  tensor_fill(m->out, 0.0f);
  const nn_sparse *sp = m->sparse;
  for (int64_t i = 0; i < sp->rows; i++) {
    int64_t a = sp->ptr[i], b = sp->ptr[i + 1];
    float *yi = tensor_data(m->out) + i * width;
    for (int64_t e = a; e < b; e++) {
      const float *row;
      if ((rc = read_row(m, sp->ids[e], &row)) < 0) return rc;
      float w = bag_weight(m, a, b, e), *dst = yi + (bags == NN_BAGS_FIELD ? (e - a) * d : 0);
      for (int64_t j = 0; j < d; j++) dst[j] += w * row[j];
    }
  }
  if (m->tab->kind == K_LINEAR) {
    const float *bias = tensor_data(m->params[0].value);
    for (int64_t i = 0; i < sp->rows; i++)
      for (int64_t j = 0; j < d; j++) tensor_data(m->out)[i * d + j] += bias[j];
  }
  *y = m->out;
  return 0;
}

/* The input gradient of layers whose x only gives N: zeros like x. */
static int zero_dx(nn_module *m, const tensor *x, const tensor **dx) {
  if (!dx) return 0;
  int rc = nn_ensure_like(&m->dx, x);
  if (rc < 0 || (rc = tensor_fill(m->dx, 0.0f)) < 0) return rc;
  *dx = m->dx;
  return 0;
}

static int bag_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  nn_bags bags;
  int64_t width, d = sptable_dim(m->tab->t);
  int rc = bag_begin(m, x, &bags, &width);
  if (rc < 0 || (rc = nn_check_grad(m, dy, 2, (int64_t[]){x->shape[0], width})) < 0) return rc;
  const nn_sparse *sp = m->sparse;
  for (int64_t i = 0; i < sp->rows; i++) {
    int64_t a = sp->ptr[i], b = sp->ptr[i + 1];
    const float *gi = tensor_data(dy) + i * width;
    for (int64_t e = a; e < b; e++) {
      float *row = nn_spgrad_row(&m->tab->g, sp->ids[e]);
      if (!row) return DRV_ENOMEM;
      float w = bag_weight(m, a, b, e);
      const float *src = gi + (bags == NN_BAGS_FIELD ? (e - a) * d : 0);
      for (int64_t j = 0; j < d; j++) row[j] += w * src[j];
    }
  }
  if (m->tab->kind == K_LINEAR) {
    float *db = tensor_data(m->params[0].grad);
    for (int64_t i = 0; i < sp->rows; i++)
      for (int64_t j = 0; j < d; j++) db[j] += tensor_data(dy)[i * d + j];
  }
  return zero_dx(m, x, dx);
}

/* ---- Embedding { sparse = true } ---------------------------------------------- */

/* Every id integral and in 0..n-1, as nn.Embedding's. */
static int emb_check(const nn_module *m, const tensor *x) {
  return nn_check_ids(m, x, (double)sptable_rows(m->tab->t));
}

static void emb_shape(const nn_module *m, const tensor *x, int64_t *shape) {
  for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
  shape[x->ndim] = sptable_dim(m->tab->t);
}

static int emb_forward(nn_module *m, const tensor *x, const tensor **y) {
  int64_t shape[4], d = sptable_dim(m->tab->t);
  int rc = emb_check(m, x);
  if (rc < 0) return rc;
  emb_shape(m, x, shape);
  if ((rc = nn_ensure(&m->out, x->ndim + 1, shape)) < 0) return rc;
  const float *ids = tensor_data(x);
  for (int64_t i = 0; i < tensor_numel(x); i++) {
    const float *row;
    if ((rc = read_row(m, (uint64_t)ids[i], &row)) < 0) return rc;
    memcpy(tensor_data(m->out) + i * d, row, (size_t)d * sizeof *row);
  }
  *y = m->out;
  return 0;
}

static int emb_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  int64_t shape[4], d = sptable_dim(m->tab->t);
  int rc = emb_check(m, x);
  if (rc < 0) return rc;
  emb_shape(m, x, shape);
  if ((rc = nn_check_grad(m, dy, x->ndim + 1, shape)) < 0) return rc;
  const float *ids = tensor_data(x), *g = tensor_data(dy);
  for (int64_t i = 0; i < tensor_numel(x); i++) {
    float *row = nn_spgrad_row(&m->tab->g, (uint64_t)ids[i]);
    if (!row) return DRV_ENOMEM;
    for (int64_t j = 0; j < d; j++) row[j] += g[i * d + j];
  }
  return zero_dx(m, x, dx);
}

/* ---- describe, destroy, construct ------------------------------------------------- */

static int sp_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  const nn_sptab *s = m->tab;
  unsigned long long rows = (unsigned long long)sptable_rows(s->t);
  long long d = (long long)sptable_dim(s->t);
  if (s->kind == K_LINEAR) {
    nn_append(buf, n, "nn.SparseLinear(%llu -> %lld)", rows, d);
  } else if (s->kind == K_EMBEDDING) {
    nn_append(buf, n, "nn.Embedding(%llu, %lld, sparse)", rows, d);
  } else {
    nn_append(buf, n, "nn.EmbeddingBag(%llu, %lld, %s%s)", rows, d,
              s->o.mode == NN_BAG_MEAN ? "mean" : "sum",
              s->o.bags == NN_BAGS_FIELD ? ", field" : s->o.bags == NN_BAGS_ALL ? ", all" : "");
  }
  return 0;
}

static void sp_destroy(nn_module *m) {
  if (!m->tab) return;
  sptable_free(m->tab->t);
  nn_spgrad_free(&m->tab->g);
  free(m->tab->scratch);
  free(m->tab);
  m->tab = NULL;
}

static const nn_module_ops bag_ops = {"EmbeddingBag", bag_forward, bag_backward, sp_describe,
                                      sp_destroy};
static const nn_module_ops linear_ops = {"SparseLinear", bag_forward, bag_backward,
                                         sp_describe, sp_destroy};
static const nn_module_ops emb_ops = {"Embedding", emb_forward, emb_backward, sp_describe,
                                      sp_destroy};

static nn_module *sp_new(const nn_module_ops *ops, int kind, uint64_t n, int64_t dim,
                         float std, uint64_t seed) {
  nn_module *m = nn_module_new(ops);
  nn_sptab *s = m ? calloc(1, sizeof *s) : NULL;
  if (!s) {
    nn_unref(m);
    err_set(DRV_ENOMEM, "out of memory creating nn.%s", ops->type);
    return NULL;
  }
  m->tab = s;
  s->kind = kind;
  s->o = NN_BAG_DEFAULTS;
  s->g.dim = dim;
  char msg[256];
  if (!(s->t = sptable_new(n, dim, std, seed))) {
    snprintf(msg, sizeof msg, "%s", err_msg());
    nn_unref(m);
    err_set(DRV_EINVAL, "nn.%s(%llu, %lld): %s", ops->type, (unsigned long long)n,
            (long long)dim, msg);
    return NULL;
  }
  if (!(s->scratch = malloc((size_t)dim * sizeof *s->scratch))) {
    nn_unref(m);
    err_set(DRV_ENOMEM, "out of memory creating nn.%s", ops->type);
    return NULL;
  }
  m->in_features = (int64_t)n;
  m->out_features = dim;
  return m;
}

/* The bag's options, checked: they may come from a spec off the network. */
static nn_module *bag_new(uint64_t n, int64_t dim, const nn_bag_opts *o, uint64_t seed) {
  if ((o->mode != NN_BAG_SUM && o->mode != NN_BAG_MEAN) ||
      (o->bags != NN_BAGS_AUTO && o->bags != NN_BAGS_FIELD && o->bags != NN_BAGS_ALL)) {
    err_set(DRV_EINVAL, "nn.EmbeddingBag: mode %d or bags %d is not known", (int)o->mode,
            (int)o->bags);
    return NULL;
  }
  nn_module *m = sp_new(&bag_ops, K_BAG, n, dim, o->std, seed);
  if (m) m->tab->o = *o;
  return m;
}

static nn_module *linear_new(uint64_t n, int64_t out, float std, uint64_t seed) {
  nn_module *m = sp_new(&linear_ops, K_LINEAR, n, out, std, seed);
  if (!m) return NULL;
  m->tab->o.bags = NN_BAGS_ALL;
  m->nparams = 1;
  if (nn_param_init(&m->params[0], "bias", 1, (int64_t[]){out}) < 0) {
    nn_unref(m);
    err_set(DRV_ENOMEM, "out of memory creating nn.SparseLinear");
    return NULL;
  }
  return m;
}

static nn_module *embedding_new(uint64_t n, int64_t dim, float std, uint64_t seed) {
  if (n == 0 || n > INT32_MAX) {
    err_set(DRV_EINVAL, "nn.Embedding(%llu, %lld): sizes must be positive, n at most %d",
            (unsigned long long)n, (long long)dim, INT32_MAX);
    return NULL;
  }
  return sp_new(&emb_ops, K_EMBEDDING, n, dim, std, seed);
}

static bool have_rng(rng_t *r, const char *type) {
  if (!r) err_set(DRV_EINVAL, "nn.%s: an rng is required", type);
  return r != NULL;
}

nn_module *nn_embedding_bag(uint64_t n, int64_t dim, const nn_bag_opts *o, rng_t *r) {
  nn_bag_opts d = NN_BAG_DEFAULTS;
  return have_rng(r, "EmbeddingBag") ? bag_new(n, dim, o ? o : &d, rng_u64(r)) : NULL;
}

nn_module *nn_sparse_linear(uint64_t n, int64_t out, float std, rng_t *r) {
  return have_rng(r, "SparseLinear") ? linear_new(n, out, std, rng_u64(r)) : NULL;
}

nn_module *nn_embedding_sparse(int64_t n, int64_t dim, float std, rng_t *r) {
  if (n <= 0) n = 0; /* refused by embedding_new */
  return have_rng(r, "Embedding") ? embedding_new((uint64_t)n, dim, std, rng_u64(r)) : NULL;
}

int nn_idlayer_get(const nn_module *m, nn_idlayer *out) {
  if (!m || !m->tab) return err_set(DRV_EINVAL, "nn_idlayer_get: not an id layer");
  const nn_sptab *s = m->tab;
  *out = (nn_idlayer){s->kind == K_BAG ? NN_ID_BAG : s->kind == K_LINEAR ? NN_ID_LINEAR
                                                                         : NN_ID_EMBEDDING,
                      sptable_rows(s->t), sptable_dim(s->t), s->o, sptable_seed(s->t)};
  out->o.std = sptable_std(s->t);
  return 0;
}

nn_module *nn_idlayer_new(const nn_idlayer *l) {
  switch (l->kind) {
  case NN_ID_BAG: return bag_new(l->rows, l->dim, &l->o, l->seed);
  case NN_ID_LINEAR: return linear_new(l->rows, l->dim, l->o.std, l->seed);
  case NN_ID_EMBEDDING: return embedding_new(l->rows, l->dim, l->o.std, l->seed);
  }
  err_set(DRV_EINVAL, "nn_idlayer_new: kind %d is not known", (int)l->kind);
  return NULL;
}

/* ---- a model's tables ----------------------------------------------------------------- */

void nn_table_list_free(nn_table_list *l) {
  if (!l) return;
  free(l->items);
  l->items = NULL;
  l->n = 0;
  l->cap = 0;
}

static int table_push(nn_table_list *l, nn_module *m, const char *prefix) {
  if (util_grow(&l->items, &l->cap, (size_t)l->n + 1, sizeof *l->items, 4) < 0)
    return err_set(DRV_ENOMEM, "out of memory collecting tables");
  nn_table *t = &l->items[l->n];
  int len = snprintf(t->name, sizeof t->name, "%sweight", prefix);
  if (len < 0 || (size_t)len >= sizeof t->name)
    return err_set(DRV_EINVAL, "table name %sweight is too long", prefix);
  t->owner = m;
  t->value = m->tab->t;
  t->grad = &m->tab->g;
  l->n++;
  return 0;
}

static int collect(nn_module *m, const char *prefix, int first, nn_table_list *out) {
  if (m->tab) {
    int rc = table_push(out, m, prefix);
    if (rc < 0) return rc;
  }
  for (int i = 0; i < m->nchildren; i++) {
    char sub[64];
    int len = snprintf(sub, sizeof sub, "%s%d.", prefix, i + first);
    if (len < 0 || (size_t)len >= sizeof sub)
      return err_set(DRV_EINVAL, "model nested too deeply to name its tables");
    int rc = collect(m->children[i], sub, first, out);
    if (rc < 0) return rc;
  }
  return 0;
}

bool nn_tables_read_x(const nn_table_list *l) {
  nn_idlayer k;
  return l->n > 0 && nn_idlayer_get(l->items[0].owner, &k) == 0 && k.kind == NN_ID_EMBEDDING;
}

int nn_collect_tables(nn_module *m, bool torch_names, nn_table_list *out) {
  if (!m || !out) return err_set(DRV_EINVAL, "nn_collect_tables: NULL argument");
  return collect(m, "", torch_names ? 0 : 1, out);
}

/* 1: target found on x, 0: found with a computed input (*front set),
 * -1: not under m. front is what feeds m. */
static int reads_x(const nn_module *m, const nn_module *t, bool on_x, const nn_module *front,
                   const nn_module **out) {
  if (m == t) {
    *out = front;
    return on_x ? 1 : 0;
  }
  bool seq = strcmp(m->ops->type, "Sequential") == 0;
  bool branches = strcmp(m->ops->type, "Concat") == 0 || strcmp(m->ops->type, "Sum") == 0;
  for (int i = 0; i < m->nchildren; i++) {
    bool cx = (seq && i == 0) || branches ? on_x : false;
    const nn_module *cf = seq && i > 0 ? m->children[i - 1] : seq || branches ? front : m;
    int rc = reads_x(m->children[i], t, cx, cf, out);
    if (rc >= 0) return rc;
  }
  return -1;
}

int nn_reads_x(const nn_module *root, const nn_module *target, char *front, size_t n) {
  const nn_module *f = NULL;
  int rc = root && target ? reads_x(root, target, true, NULL, &f) : -1;
  if (rc < 0) return err_set(DRV_EINVAL, "nn_reads_x: the module is not in the model");
  if (front && n) snprintf(front, n, "%s", f ? "a layer" : "");
  if (front && f) nn_name_of(f, front, n);
  return rc;
}

int nn_embedding_ids(const nn_module *emb, const tensor *x, uint64_t **ids, size_t *n) {
  *ids = NULL;
  *n = 0;
  if (!emb || !emb->tab || emb->tab->kind != K_EMBEDDING)
    return err_set(DRV_EINVAL, "nn_embedding_ids: not an nn.Embedding { sparse = true }");
  int rc = emb_check(emb, x);
  if (rc < 0) return rc;
  size_t k = (size_t)tensor_numel(x);
  if (k == 0) return 0;
  if (!(*ids = malloc(k * sizeof **ids)))
    return err_set(DRV_ENOMEM, "out of memory for %zu ids", k);
  const float *p = tensor_data(x);
  for (size_t i = 0; i < k; i++) (*ids)[i] = (uint64_t)p[i];
  *n = k;
  return 0;
}

const nn_module *nn_find_table(const nn_module *m) {
  if (!m || m->tab) return m;
  for (int i = 0; i < m->nchildren; i++) {
    const nn_module *f = nn_find_table(m->children[i]);
    if (f) return f;
  }
  return NULL;
}

int nn_refuse_tables(const nn_module *m, const char *where) {
  const nn_module *f = nn_find_table(m);
  if (!f) return 0;
  char nm[96];
  return err_set(DRV_EUNSUPPORTED, "sparse tables %s are not supported yet: %s holds one", where,
                 nn_name_of(f, nm, sizeof nm));
}
