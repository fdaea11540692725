/* worker_predict.c - a worker's side of c:predict: PREDICT_MODEL builds
 * the model to predict with (its spec, then its values), each PREDICT runs
 * one forward pass in evaluation mode and answers PREDICT_RESULT with one
 * output row per input row.
 *
 * Forward passes run on the libuv thread pool, one at a time, in arrival
 * order (batches that arrive meanwhile wait in a FIFO): the loop keeps
 * reading the next batch and answering heartbeats however long a batch
 * takes. The predict model is apart from the training state a SETUP
 * built, so predicting never disturbs a fit's model.
 *
 * Sparse tables: PREDICT_ROWS frames put the rows the coordinator's
 * tables hold into the predict model's (they come before the first
 * PREDICT, on the same connection); a batch's ids come in its PREDICT, or
 * in files mode from the dataset this worker read, and are set on the
 * model for its forward pass. An id no row was sent for reads its initial
 * values, as in process.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "numeric/nn_sparse.h"
#include "numeric/rng.h"
#include "numeric/sptable.h"
#include "proto/wire_msgs.h"
#include "base/util.h"
#include "cluster/worker/worker_int.h"

/* A batch waiting for (or in) the forward pass. */
typedef struct pitem {
  uint32_t req;
  uint64_t task;
  tensor *x;          /* owned */
  dataset *ids;       /* the PREDICT's ids (owned: its sparse part), or NULL */
  int64_t *ptr;       /* files mode: the batch's offsets from 0 (owned), or NULL */
  nn_sparse sp;       /* the batch's ids (over ids or the worker's dataset); rows 0: none */
  nn_module *model;   /* a reference: a new PREDICT_MODEL may replace the worker's meanwhile */
  struct pitem *next;
} pitem;

struct wpredict {
  worker *w;
  uint64_t no;        /* the predict the model is for */
  nn_module *model;
  uint64_t batches;   /* arrived, for the fault injection */
  uint64_t die_at;    /* DROVER_FAULT=die:ROLE:INDEX:predict:N, 0 none */
  pitem *head, *tail; /* waiting, oldest first */
  pitem *cur;         /* on the thread pool (the loop leaves it and its model alone) */
  uv_work_t work;
  int rc;             /* of cur's forward pass */
  char msg[256];
  const tensor *y;    /* cur's outputs, owned by cur->model */
  bool orphaned;      /* freed while cur was pooled: the callback frees */
  dataset *data;      /* files mode: the inputs, read from the recipe (a batch's x is a view) */
  char *recipe;       /* the recipe data came from: the next predict of it reuses data */
  char failed[300];   /* why the last PREDICT_MODEL failed: its batches answer this */
  nn_table_list tables; /* model's sparse tables, PREDICT_ROWS's table numbers */
};

static void item_free(pitem *it) {
  if (!it) return;
  tensor_free(it->x);
  data_free(it->ids);
  free(it->ptr);
  nn_unref(it->model);
  free(it);
}

static void pred_release(struct wpredict *p) {
  while (p->head) {
    pitem *it = p->head;
    p->head = it->next;
    item_free(it);
  }
  item_free(p->cur);
  nn_table_list_free(&p->tables);
  nn_unref(p->model);
  data_free(p->data);
  free(p->recipe);
  free(p);
}

void worker__predict_free(worker *w) {
  struct wpredict *p = w->pred;
  if (!p) return;
  w->pred = NULL;
  if (p->cur) p->orphaned = true; /* a thread may still run it: its callback frees */
  else pred_release(p);
}

/* Fault injection for tests: DROVER_FAULT=die:worker:1:predict:N kills
 * this worker with SIGKILL when its Nth predict batch arrives, a loss in
 * the middle of a predict. With DROVER_FAULT_ONCE=PATH only the process
 * that creates PATH dies (the restarted worker does not die again). */
static uint64_t fault_die_at(int role, int index) {
  const char *f = getenv("DROVER_FAULT");
  char want[64];
  snprintf(want, sizeof want, "die:%s:%d:predict:", wire_role_name(role), index);
  if (!f || strncmp(f, want, strlen(want)) != 0) return 0;
  return strtoull(f + strlen(want), NULL, 10);
}

/* Sets every parameter from the frame's values (shapes checked). */
static int load_values(nn_module *m, const wire_msg_predict_model *pm) {
  nn_param_list ps = {0};
  int rc = nn_collect_params(m, &ps);
  if (rc == 0 && (uint32_t)ps.n != pm->vars.n)
    rc = err_set(DRV_EINVAL, "PREDICT_MODEL: %u values for a model of %d parameters", pm->vars.n,
                 ps.n);
  wire_rd r = wire_items_reader(&pm->vars);
  for (uint32_t i = 0; rc == 0 && i < pm->vars.n; i++) {
    wire_item_var_tensor it;
    wire_get_item_var_tensor(&r, &it);
    tensor *t = it.var < (uint32_t)ps.n ? ps.items[it.var].value : NULL;
    bool same = t && t->ndim == it.value.ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == (int64_t)it.value.shape[d];
    if (!same) rc = err_set(DRV_ESHAPE, "PREDICT_MODEL: value %u does not fit its parameter", it.var);
    else wire_tensor_to(&it.value, tensor_data(t));
  }
  nn_param_list_free(&ps);
  return rc;
}

/* Files mode: the predict's inputs, read by this worker from the recipe
 * (a mapped .npy stays mapped: a batch touches only its rows). Kept for
 * the next predict of the same data. */
static int load_inputs(struct wpredict *p, const wire_bytes *recipe) {
  if (recipe->len == 0) return 0;
  if (p->recipe && strlen(p->recipe) == recipe->len &&
      memcmp(p->recipe, recipe->p, recipe->len) == 0)
    return 0;
  dataset *d;
  int rc = data_from_recipe((const char *)recipe->p, recipe->len, 0, 1, &d);
  if (rc < 0) return rc;
  char *copy = strndup((const char *)recipe->p, recipe->len);
  if (!copy) {
    data_free(d);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  data_free(p->data); /* a batch running holds a view of its storage */
  free(p->recipe);
  p->data = d;
  p->recipe = copy;
  log_info("predict inputs: %lld rows read from %s", (long long)d->n, d->source);
  return 0;
}

int worker_predict_model(worker *w, const uint8_t *pl, size_t len) {
  wire_msg_predict_model m;
  int rc = wire_get_predict_model(pl, len, &m);
  if (rc < 0) return rc;
  char *spec = malloc(WIRE_MAX_STR + 1);
  if (!spec) return err_set(DRV_ENOMEM, "out of memory");
  if ((rc = wire_str_copy(m.model, spec, WIRE_MAX_STR + 1)) < 0) {
    free(spec);
    return rc;
  }
  if (!w->pred && !(w->pred = calloc(1, sizeof *w->pred))) {
    free(spec);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  w->pred->w = w;
  w->pred->die_at = fault_die_at(w->role, w->index);
  rng_t r;
  rng_seed(&r, 0);
  nn_module *model = nn_from_spec(spec, &r);
  free(spec);
  if (!model) return err_set(DRV_EINVAL, "PREDICT_MODEL: %s", err_msg());
  if ((rc = load_values(model, &m)) < 0) {
    nn_unref(model);
    return rc;
  }
  nn_set_training(model, false);
  nn_table_list_free(&w->pred->tables);
  if ((rc = load_inputs(w->pred, &m.recipe)) < 0) {
    nn_unref(model);
    /* The batches of this predict fail, naming why; the connection stays. */
    snprintf(w->pred->failed, sizeof w->pred->failed, "%s", err_msg());
    log_error("predict %llu: %s", (unsigned long long)m.predict, w->pred->failed);
    w->pred->no = m.predict;
    nn_unref(w->pred->model);
    w->pred->model = NULL;
    return 0;
  }
  if ((rc = nn_collect_tables(model, false, &w->pred->tables)) < 0) {
    nn_unref(model);
    return rc;
  }
  w->pred->failed[0] = '\0';
  nn_unref(w->pred->model); /* a batch still running holds its own reference */
  w->pred->model = model;
  w->pred->no = m.predict;
  log_info("predict %llu: model ready", (unsigned long long)m.predict);
  return 0;
}

int worker_predict_rows(worker *w, const uint8_t *pl, size_t len) {
  wire_msg_predict_rows m;
  int rc = wire_get_predict_rows(pl, len, &m);
  if (rc < 0) return rc;
  struct wpredict *p = w->pred;
  if (!p || !p->model || p->no != m.predict) return 0; /* its PREDICT_MODEL failed: its batches say why */
  if (m.table >= (uint32_t)p->tables.n)
    return err_set(DRV_EPROTO, "PREDICT_ROWS: no table %u in a model of %d", m.table, p->tables.n);
  sptable *t = p->tables.items[m.table].value;
  int64_t dim = sptable_dim(t);
  if (m.rows.ndim != 2 || m.rows.shape[0] != (int64_t)m.ids.n || m.rows.shape[1] != dim)
    return err_set(DRV_ESHAPE, "PREDICT_ROWS: table %s: %u ids and rows of the wrong shape",
                   p->tables.items[m.table].name, m.ids.n);
  float row[256], *buf = dim <= 256 ? row : malloc((size_t)dim * sizeof *buf);
  if (!buf) return err_set(DRV_ENOMEM, "out of memory");
  wire_rd r = wire_items_reader(&m.ids);
  const uint8_t *src = m.rows.data;
  for (uint32_t i = 0; i < m.ids.n && rc == 0; i++) {
    wire_item_sparse_id id;
    wire_get_item_sparse_id(&r, &id);
    memcpy(buf, src + (size_t)i * (size_t)dim * 4, (size_t)dim * 4); /* unaligned in the frame */
    int64_t k = sptable_put(t, id.id, buf);
    if (k < 0) rc = (int)k;
  }
  if (buf != row) free(buf);
  return rc;
}

static void answer(worker *w, uint32_t req, uint64_t task, int status, const tensor *y,
                   const char *msg) {
  int64_t zero[1] = {0};
  tensor *none = y ? NULL : tensor_new(1, zero);
  wire_wr wr;
  wire_wr_init(&wr);
  wire_put_predict_result(&wr, &(wire_msg_predict_result){
                                   .task = task, .status = status, .y = {.t = y ? y : none},
                                   .message = WIRE_STR(msg ? msg : "")});
  w->send(w->ud, &wr, WIRE_PREDICT_RESULT, req);
  tensor_free(none);
}

static void start_next(struct wpredict *p);

static void work_cb(uv_work_t *req) {
  struct wpredict *p = req->data;
  p->y = NULL;
  nn_set_sparse(p->cur->model, p->cur->sp.rows > 0 ? &p->cur->sp : NULL);
  p->rc = nn_forward(p->cur->model, p->cur->x, &p->y);
  nn_set_sparse(p->cur->model, NULL);
  if (p->rc < 0) snprintf(p->msg, sizeof p->msg, "%s", err_msg());
}

static void after_work_cb(uv_work_t *req, int status) {
  struct wpredict *p = req->data;
  pitem *it = p->cur;
  if (p->orphaned) {
    pred_release(p);
    return;
  }
  p->cur = NULL;
  if (status < 0) answer(p->w, it->req, it->task, DRV_EINVAL, NULL, "predict batch cancelled");
  else if (p->rc < 0) answer(p->w, it->req, it->task, p->rc, NULL, p->msg);
  else answer(p->w, it->req, it->task, 0, p->y, NULL);
  item_free(it);
  start_next(p);
}

static void start_next(struct wpredict *p) {
  if (p->cur || !p->head) return;
  p->cur = p->head;
  p->head = p->cur->next;
  if (!p->head) p->tail = NULL;
  p->work.data = p;
  int rc = uv_queue_work(p->w->loop, &p->work, work_cb, after_work_cb);
  if (rc < 0) { /* not queued: answer now */
    pitem *it = p->cur;
    p->cur = NULL;
    answer(p->w, it->req, it->task, DRV_EINVAL, NULL, uv_strerror(rc));
    item_free(it);
  }
}

/* A batch's ids: the frame's, or (files mode) rows [row0, row0 + rows)
 * of the sparse part of the dataset this worker read; none when neither
 * has any. */
static int batch_ids(struct wpredict *p, const wire_msg_predict *m, pitem *it) {
  int64_t rows = it->x->shape[0];
  if (m->sparse.len > 0) {
    if (!(it->ids = calloc(1, sizeof *it->ids))) return err_set(DRV_ENOMEM, "out of memory");
    it->ids->n = rows;
    snprintf(it->ids->source, sizeof it->ids->source, "PREDICT");
    int rc = data_sparse_decode(it->ids, m->sparse.p, m->sparse.len, "PREDICT");
    if (rc < 0) return rc;
    const data_sparse *s = &it->ids->sp;
    it->sp = (nn_sparse){.rows = rows, .ptr = s->ptr, .ids = s->ids, .vals = s->vals,
                         .fields = s->fields};
    return 0;
  }
  const data_sparse *s = p->data && m->x.shape[0] == 0 ? &p->data->sp : NULL;
  if (!s || !s->bound || !s->ptr) return 0;
  if (!(it->ptr = malloc((size_t)(rows + 1) * sizeof *it->ptr)))
    return err_set(DRV_ENOMEM, "out of memory");
  int64_t r0 = (int64_t)m->row0, base = s->ptr[r0];
  for (int64_t i = 0; i <= rows; i++) it->ptr[i] = s->ptr[r0 + i] - base;
  it->sp = (nn_sparse){.rows = rows, .ptr = it->ptr, .ids = s->ids + base,
                       .vals = s->vals ? s->vals + base : NULL, .fields = s->fields};
  return 0;
}

/* A batch's inputs: the frame's rows, or (files mode) a view of rows
 * [row0, row0 + rows) of the inputs this worker read. */
static int batch_inputs(struct wpredict *p, const wire_msg_predict *m, tensor **x) {
  *x = NULL;
  if (m->x.shape[0] > 0 || !p->data) {
    int64_t shape[TENSOR_MAXDIM];
    for (int d = 0; d < m->x.ndim; d++) shape[d] = (int64_t)m->x.shape[d];
    if (!(*x = tensor_new(m->x.ndim, shape))) return DRV_ENOMEM;
    wire_tensor_to(&m->x, tensor_data(*x));
    return 0;
  }
  const tensor *all = p->data->x;
  if (m->rows == 0 || m->row0 > (uint64_t)all->shape[0] || m->rows > (uint64_t)all->shape[0] - m->row0)
    return err_set(DRV_ERANGE, "PREDICT: rows %llu..%llu of %lld", (unsigned long long)m->row0,
                   (unsigned long long)(m->row0 + m->rows), (long long)all->shape[0]);
  if (!(*x = tensor_view(all))) return DRV_ENOMEM;
  (*x)->shape[0] = (int64_t)m->rows;
  (*x)->offset += (int64_t)m->row0 * (p->data->features);
  return 0;
}

int worker_predict(worker *w, uint32_t req, const uint8_t *pl, size_t len) {
  wire_msg_predict m;
  int rc = wire_get_predict(pl, len, &m);
  if (rc < 0) return rc;
  struct wpredict *p = w->pred;
  if (!p || !p->model || p->no != m.predict) {
    answer(w, req, m.task, DRV_EPROTO, NULL,
           p && p->no == m.predict && p->failed[0] ? p->failed : "PREDICT before its PREDICT_MODEL");
    return 0;
  }
  if (p->die_at && ++p->batches >= p->die_at && util_fault_first()) {
    log_warn("DROVER_FAULT: SIGKILL at predict batch %llu", (unsigned long long)p->batches);
    raise(SIGKILL);
  }
  pitem *it = calloc(1, sizeof *it);
  if (!it || (rc = batch_inputs(p, &m, &it->x)) < 0 || (rc = batch_ids(p, &m, it)) < 0) {
    answer(w, req, m.task, it ? rc : DRV_ENOMEM, NULL, it ? err_msg() : "out of memory");
    item_free(it);
    return 0;
  }
  it->req = req;
  it->task = m.task;
  it->model = nn_ref(p->model);
  if (p->tail) p->tail->next = it;
  else p->head = it;
  p->tail = it;
  start_next(p);
  return 0;
}
