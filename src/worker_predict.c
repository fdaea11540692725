/* worker_predict.c - a worker's side of c:predict: PREDICT_MODEL builds
 * the model to predict with (its spec, then its values), each PREDICT runs
 * one forward pass in evaluation mode and answers PREDICT_RESULT with one
 * output row per input row.
 *
 * The forward pass runs on the loop thread: a predict batch is one layer
 * stack's inference (milliseconds), far below the heartbeat timeout, and
 * answering in arrival order keeps the code small. The predict model is
 * apart from the training state a SETUP built, so predicting never
 * disturbs a fit's model.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "rng.h"
#include "wire_msgs.h"
#include "worker_int.h"

struct wpredict {
  uint64_t no;        /* the predict the model is for */
  nn_module *model;
  uint64_t batches;   /* answered, for the fault injection */
  uint64_t die_at;    /* DROVER_FAULT=die:ROLE:INDEX:predict:N, 0 none */
};

void worker__predict_free(worker *w) {
  if (!w->pred) return;
  nn_unref(w->pred->model);
  free(w->pred);
  w->pred = NULL;
}

/* Fault injection for tests: DROVER_FAULT=die:worker:1:predict:N kills
 * this worker with SIGKILL when its Nth predict batch arrives, a loss in
 * the middle of a predict. */
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
    rc = drv_error(DRV_EINVAL, "PREDICT_MODEL: %u values for a model of %d parameters", pm->vars.n,
                   ps.n);
  wire_rd r = wire_items_reader(&pm->vars);
  for (uint32_t i = 0; rc == 0 && i < pm->vars.n; i++) {
    wire_item_var_tensor it;
    wire_get_item_var_tensor(&r, &it);
    tensor *t = it.var < (uint32_t)ps.n ? ps.items[it.var].value : NULL;
    bool same = t && t->ndim == it.value.ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == (int64_t)it.value.shape[d];
    if (!same) rc = drv_error(DRV_ESHAPE, "PREDICT_MODEL: value %u does not fit its parameter", it.var);
    else wire_tensor_to(&it.value, tensor_data(t));
  }
  nn_param_list_free(&ps);
  return rc;
}

int worker_predict_model(worker *w, const uint8_t *pl, size_t len) {
  wire_msg_predict_model m;
  int rc = wire_get_predict_model(pl, len, &m);
  if (rc < 0) return rc;
  char *spec = malloc(WIRE_MAX_STR + 1);
  if (!spec) return drv_error(DRV_ENOMEM, "out of memory");
  if ((rc = wire_str_copy(m.model, spec, WIRE_MAX_STR + 1)) < 0) {
    free(spec);
    return rc;
  }
  if (!w->pred && !(w->pred = calloc(1, sizeof *w->pred))) {
    free(spec);
    return drv_error(DRV_ENOMEM, "out of memory");
  }
  w->pred->die_at = fault_die_at(w->role, w->index);
  rng_t r;
  rng_seed(&r, 0);
  nn_module *model = nn_from_spec(spec, &r);
  free(spec);
  if (!model) return drv_error(DRV_EINVAL, "PREDICT_MODEL: %s", drv_errmsg());
  if ((rc = load_values(model, &m)) < 0) {
    nn_unref(model);
    return rc;
  }
  nn_set_training(model, false);
  nn_unref(w->pred->model);
  w->pred->model = model;
  w->pred->no = m.predict;
  log_info("predict %llu: model ready", (unsigned long long)m.predict);
  return 0;
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

int worker_predict(worker *w, uint32_t req, const uint8_t *pl, size_t len) {
  wire_msg_predict m;
  int rc = wire_get_predict(pl, len, &m);
  if (rc < 0) return rc;
  if (!w->pred || !w->pred->model || w->pred->no != m.predict) {
    answer(w, req, m.task, DRV_EPROTO, NULL, "PREDICT before its PREDICT_MODEL");
    return 0;
  }
  if (w->pred->die_at && ++w->pred->batches >= w->pred->die_at) {
    log_warn("DROVER_FAULT: SIGKILL at predict batch %llu", (unsigned long long)w->pred->batches);
    raise(SIGKILL);
  }
  int64_t shape[TENSOR_MAXDIM];
  for (int d = 0; d < m.x.ndim; d++) shape[d] = (int64_t)m.x.shape[d];
  tensor *x = tensor_new(m.x.ndim, shape);
  const tensor *y = NULL;
  if (!x) rc = DRV_ENOMEM;
  else wire_tensor_to(&m.x, tensor_data(x));
  if (rc == 0) rc = nn_forward(w->pred->model, x, &y);
  if (rc < 0) answer(w, req, m.task, rc, NULL, drv_errmsg());
  else answer(w, req, m.task, 0, y, NULL);
  tensor_free(x);
  return 0;
}
