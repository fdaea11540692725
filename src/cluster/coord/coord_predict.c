/* coord_predict.c - c:predict: forward passes of a model over a tensor of
 * inputs, spread over the workers, one output row per input row in input
 * order.
 *
 * The inputs are cut into batches; each batch is a task of the queue
 * (coord_sched.c) through the producer interface, sent as PREDICT with its
 * rows and answered by PREDICT_RESULT. The queue's rules give the
 * guarantees: a lost worker's batches go back to the front of the queue
 * and run elsewhere, and only the answer of the node holding a task counts,
 * so every row is predicted once. Each worker gets PREDICT_MODEL (the spec
 * and the values) before its first batch, and again when it registers anew
 * (a restarted worker has a new control connection).
 *
 * Sparse tables (issue 26): the worker gets every row the model's tables
 * hold (PREDICT_ROWS, after PREDICT_MODEL), the trained rows the
 * coordinator pulled from the ps (SPARSE_DUMP) as c:save writes them, and
 * each PREDICT carries its rows' ids (files mode: the worker reads them
 * with x). Shipping the rows, rather than having each worker pull its
 * batches' rows from the ps as training does, keeps predict independent of
 * the ps' state (a model loaded from a file, a later fit, a ps restarted
 * without a checkpoint) at the cost of every worker holding the rows held,
 * as the coordinator already does.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "base/log.h"
#include "numeric/nn_sparse.h"
#include "numeric/sptable.h"
#include "proto/wire_msgs.h"

#define PREDICT_INFLIGHT 2 /* per worker: one computing, one on the way */
#define PREDICT_ROWS_MAX (8u << 20) /* bytes of rows per PREDICT_ROWS frame */

typedef struct pred {
  coord *c;
  int producer;
  uint64_t no;            /* this predict's number (PREDICT_MODEL, PREDICT) */
  const tensor *x;        /* the inputs (borrowed) */
  const dataset *spd;     /* not files mode: the rows' ids are its sparse part (borrowed), or NULL */
  nn_table_list tables;   /* the model's sparse tables (borrowed rows) */
  const char *recipe;     /* files mode: the workers read x themselves (borrowed), or NULL */
  char *shipped;          /* recipe with the run's files' shipped names (coord_ship.c), or NULL */
  tensor *empty;          /* files mode: the x of every PREDICT, [0, ...] */
  int64_t n, batch, nbatches, produced, done, row_elems;
  int64_t *ids;           /* task id of batch b (ids grow with b) */
  tensor *out;            /* [n, k], made on the first answer */
  char *spec;
  nn_param_list params;
  const void **sent;      /* per node: the control connection the model went to */
  int failed;
  char why[600];
} pred;

static uint64_t predict_no;

/* ============================== the producer ============================= */

static void put_value(wire_wr *w, void *ud, uint32_t i) {
  const pred *p = ud;
  wire_put_item_var_tensor(w, &(wire_item_var_tensor){i, {.t = p->params.items[i].value}});
}

static void put_id(wire_wr *w, void *ud, uint32_t k) {
  wire_put_item_sparse_id(w, &(wire_item_sparse_id){((const uint64_t *)ud)[k]});
}

/* Table t's held rows to node, in frames of at most PREDICT_ROWS_MAX
 * bytes of rows (rows live in arenas: gathered per frame). */
static int send_table(pred *p, int node, int t) {
  sptable *tab = p->tables.items[t].value;
  int64_t held = sptable_held(tab), dim = sptable_dim(tab);
  int64_t per = (int64_t)PREDICT_ROWS_MAX / (dim * 4);
  if (per < 1) per = 1;
  if (per > held) per = held;
  uint64_t *ids = malloc((size_t)(per + 1) * sizeof *ids);
  float *rows = malloc((size_t)(per * dim + 1) * sizeof *rows);
  for (int64_t k0 = 0; ids && rows && k0 < held; k0 += per) {
    int64_t n = held - k0 < per ? held - k0 : per;
    for (int64_t i = 0; i < n; i++) {
      ids[i] = sptable_id(tab, k0 + i);
      memcpy(rows + i * dim, sptable_value(tab, k0 + i), (size_t)dim * sizeof *rows);
    }
    wire_wr w;
    wire_wr_init(&w);
    wire_put_predict_rows(&w, &(wire_msg_predict_rows){
                                  p->no, (uint32_t)t, {(uint32_t)n, .put = put_id, .ud = ids},
                                  {.ndim = 2, .shape = {n, dim}, .data = rows}});
    coord__send(p->c, node, &w, WIRE_PREDICT_ROWS, 0);
  }
  bool ok = ids && rows;
  free(ids);
  free(rows);
  return ok ? 0 : err_set(DRV_ENOMEM, "out of memory for the rows of table %s",
                          p->tables.items[t].name);
}

/* The model goes ahead of the node's first batch (same connection: in
 * order), its tables' rows right behind it. */
static bool pred_ready(void *ud, int node) {
  pred *p = ud;
  if (p->failed) return false;
  if (p->sent[node] == p->c->ctl[node]) return true;
  const char *recipe = p->shipped ? p->shipped : p->recipe;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_predict_model(&w, &(wire_msg_predict_model){
                                 .predict = p->no, .model = WIRE_STR(p->spec),
                                 .vars = {(uint32_t)p->params.n, .put = put_value, .ud = p},
                                 .recipe = {(const uint8_t *)recipe, recipe ? (uint32_t)strlen(recipe) : 0}});
  coord__send(p->c, node, &w, WIRE_PREDICT_MODEL, 0);
  for (int t = 0; t < p->tables.n; t++)
    if (send_table(p, node, t) < 0) {
      p->failed = 1;
      snprintf(p->why, sizeof p->why, "%s", err_msg());
      return false;
    }
  p->sent[node] = p->c->ctl[node];
  return true;
}

static void pred_refill(void *ud) {
  pred *p = ud;
  int64_t want = 0;
  for (int i = 0; i < p->c->nnodes; i++)
    if (p->c->nodes[i].role == ROLE_WORKER || p->c->nodes[i].role == ROLE_CHIEF) want += PREDICT_INFLIGHT;
  while (!p->failed && p->produced < p->nbatches && coord__sched_queued(p->c, p->producer) < want) {
    int64_t id = coord__sched_add(p->c, p->producer);
    if (id < 0) {
      p->failed = 1;
      snprintf(p->why, sizeof p->why, "cannot queue a predict batch: %s", err_msg());
      return;
    }
    p->ids[p->produced++] = id;
  }
}

static int64_t batch_of(const pred *p, uint64_t id) {
  int64_t lo = 0, hi = p->produced - 1;
  while (lo <= hi) {
    int64_t mid = (lo + hi) / 2;
    if ((uint64_t)p->ids[mid] == id) return mid;
    if ((uint64_t)p->ids[mid] < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/* Batch b's rows as a view header over x (no copy). */
static tensor rows_of(const pred *p, int64_t b) {
  tensor v = *p->x;
  int64_t r0 = b * p->batch;
  v.shape[0] = r0 + p->batch <= p->n ? p->batch : p->n - r0;
  v.offset += r0 * p->row_elems;
  return v;
}

static void pred_fail(pred *p, const char *fmt, const char *a, const char *b) {
  if (p->failed++) return;
  snprintf(p->why, sizeof p->why, fmt, a, b);
}

static void pred_put(void *ud, uint64_t id, wire_wr *w, uint8_t *type) {
  pred *p = ud;
  int64_t b = batch_of(p, id);
  tensor v = rows_of(p, b < 0 ? 0 : b);
  int64_t r0 = (b < 0 ? 0 : b) * p->batch;
  uint8_t *sp = NULL;
  size_t splen = 0;
  if (p->spd && data_sparse_encode_rows(p->spd, r0, v.shape[0], &sp, &splen) < 0)
    pred_fail(p, "%s: %s", "coordinator", err_msg());
  wire_put_predict(w, &(wire_msg_predict){.task = id, .predict = p->no, .row0 = (uint64_t)r0,
                                          .rows = (uint64_t)v.shape[0],
                                          .x = {.t = p->recipe ? p->empty : &v},
                                          .sparse = {sp, (uint32_t)splen}});
  free(sp);
  *type = WIRE_PREDICT;
}


static int pred_done(void *ud, int node, uint64_t id, const uint8_t *pl, uint32_t len) {
  pred *p = ud;
  wire_msg_predict_result m;
  char msg[512], name[32];
  int rc = wire_get_predict_result(pl, len, &m);
  if (rc == 0) rc = wire_str_copy(m.message, msg, sizeof msg);
  if (rc < 0) return rc;
  coord__node_name(&p->c->nodes[node], name, sizeof name);
  int64_t b = batch_of(p, id);
  if (b < 0) return err_set(DRV_EPROTO, "PREDICT_RESULT for task %llu of no batch",
                            (unsigned long long)id);
  if (m.status != 0) {
    pred_fail(p, "%s: predict failed: %s", name, msg);
    return 0;
  }
  tensor v = rows_of(p, b);
  int64_t k = m.y.ndim == 2 ? (int64_t)m.y.shape[1] : 1;
  if (m.y.ndim < 1 || m.y.ndim > 2 || (int64_t)m.y.shape[0] != v.shape[0] ||
      (p->out && p->out->shape[1] != k)) {
    pred_fail(p, "%s: %s", name, "a predict answer has the wrong shape");
    return 0;
  }
  if (!p->out) {
    int64_t shape[2] = {p->n, k};
    if (!(p->out = tensor_new(2, shape))) {
      pred_fail(p, "%s: %s", "coordinator", "out of memory for the predictions");
      return 0;
    }
  }
  wire_tensor_to(&m.y, tensor_data(p->out) + b * p->batch * k);
  p->done++;
  (void)len;
  return 0;
}

static const coord_producer_ops pred_ops = {
    .what = "predict batch",
    .task_kind = 0,
    .max_inflight = PREDICT_INFLIGHT,
    .ready = pred_ready,
    .refill = pred_refill,
    .done = pred_done,
    .put = pred_put,
};

/* ============================== the call ================================= */

static bool pred_over(coord *c, void *arg) {
  const pred *p = arg;
  (void)c;
  return p->failed || (p->done == p->nbatches && coord__sched_running(c, p->producer) == 0);
}

/* The values to predict with: the cluster's, pulled from the ps nodes,
 * when the cluster trained this model; else the model's own. */
static int current_values(coord *c, nn_module *model) {
  if (!c->fit || !c->fit->placed) return 0;
  nn_param_list now = {0};
  int rc = nn_collect_params(model, &now);
  bool same = rc == 0 && now.n == c->fit->nvars;
  for (int i = 0; same && i < now.n; i++) same = now.items[i].value == c->fit->vars[i].value;
  nn_param_list_free(&now);
  if (rc < 0) return rc;
  return same ? coord__pull_all(c) : 0;
}

static void pred_free(pred *p) {
  free(p->shipped);
  free(p->ids);
  free(p->spec);
  free(p->sent);
  nn_param_list_free(&p->params);
  nn_table_list_free(&p->tables);
  tensor_free(p->out);
  tensor_free(p->empty);
}

/* A model with tables needs ids; a dataset's sparse part rides only
 * with in-memory rows (files mode: the workers read it). */
static int check_ids(pred *p, const dataset *ids) {
  bool has = ids && data_has_sparse(ids);
  if (p->tables.n > 0 && !has && !nn_tables_read_x(&p->tables))
    return err_set(DRV_EINVAL, "predict: the model reads ids (sparse table %s) but the data has "
                   "none: pass a dataset with ids", p->tables.items[0].name);
  if (has && !p->recipe) {
    if (ids->n != p->n)
      return err_set(DRV_ESHAPE, "predict: %lld rows of ids for %lld rows of x", (long long)ids->n,
                     (long long)p->n);
    p->spd = ids;
  }
  return 0;
}

int coord_predict(coord *c, nn_module *model, const tensor *x, const dataset *ids,
                  const char *recipe, int64_t n, int64_t batch, tensor **out) {
  *out = NULL;
  if (c->shut_down || c->shutting_down) return err_set(DRV_EINVAL, "cluster: it was shut down");
  if (!x || x->ndim < 1 || (recipe ? n : x->shape[0]) < 1 || !tensor_is_contiguous(x))
    return err_set(DRV_EINVAL, "predict: expected a contiguous tensor of at least one row");
  if (batch < 1) return err_set(DRV_EINVAL, "predict: batch must be positive");
  int64_t rows = recipe ? n : x->shape[0];
  if (batch > rows) batch = rows; /* nbatches adds n + batch: no overflow */
  pred p = {.c = c, .no = ++predict_no, .x = x, .recipe = recipe, .n = rows, .batch = batch};
  p.row_elems = 1;
  for (int i = 1; i < x->ndim; i++) p.row_elems *= x->shape[i];
  p.nbatches = (p.n + batch - 1) / batch;
  int rc = current_values(c, model);
  if (rc == 0) rc = coord__ship_recipe(c, recipe, &p.shipped);
  if (rc < 0) return rc;
  p.spec = malloc(WIRE_MAX_STR);
  p.ids = malloc((size_t)p.nbatches * sizeof *p.ids);
  p.sent = calloc((size_t)c->node_cap, sizeof *p.sent);
  if (recipe) {
    int64_t shape[TENSOR_MAXDIM];
    memcpy(shape, x->shape, sizeof shape);
    shape[0] = 0;
    p.empty = tensor_new(x->ndim, shape);
  }
  if (!p.spec || !p.ids || !p.sent || (recipe && !p.empty)) {
    pred_free(&p);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  int len = nn_spec(model, p.spec, WIRE_MAX_STR);
  if (len < 0 || len >= WIRE_MAX_STR) {
    pred_free(&p);
    return len < 0 ? len : err_set(DRV_EINVAL, "predict: the model's description is too long");
  }
  if ((rc = nn_collect_params(model, &p.params)) < 0 ||
      (rc = nn_collect_tables(model, false, &p.tables)) < 0 || (rc = check_ids(&p, ids)) < 0 ||
      (rc = p.producer = coord__sched_add_producer(c, &pred_ops, &p)) < 0) {
    pred_free(&p);
    return rc;
  }
  rundir_event(&c->rd, "predict %llu: %lld rows in %lld batches%s", (unsigned long long)p.no,
               (long long)p.n, (long long)p.nbatches, recipe ? ", read by the workers from its file" : "");
  coord__dispatch(c);
  rc = coord__pump(c, pred_over, &p, 0, true);
  coord__sched_remove_producer(c, p.producer);
  if (rc == 0 && p.failed) rc = err_set(DRV_ENODE, "%s", p.why);
  rundir_event(&c->rd, "predict %llu %s", (unsigned long long)p.no, rc == 0 ? "done" : "failed");
  if (rc == 0) {
    *out = p.out;
    p.out = NULL;
  }
  pred_free(&p);
  return rc;
}
