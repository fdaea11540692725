/* worker_fixture.c - the model, data, placement and in-process reference
 * shared by the worker node tests (test_node_worker.c, test_worker_call.c).
 */
#include "worker_fixture.h"

#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "train/train.h"
#include "proto/wire_msgs.h"

/* n examples, 4 features in [0, 1), class = argmax of three fixed linear
 * scores (no BLAS: children are forked after this). */
dataset *wf_toy_data(int64_t n, uint64_t seed) {
  dataset *d = calloc(1, sizeof *d);
  CHECK(d != NULL);
  d->x = tensor_new2(n, 4);
  d->y = tensor_new1(n);
  rng_t r;
  rng_seed(&r, seed);
  static const float w[3][4] = {{1, -1, 0.5f, 0}, {-0.5f, 1, 0, 1}, {0, 0.2f, -1, 0.7f}};
  for (int64_t i = 0; i < n; i++) {
    float *x = tensor_data(d->x) + 4 * i, best = -1e9f;
    for (int k = 0; k < 4; k++) x[k] = rng_uniform(&r);
    for (int c = 0; c < 3; c++) {
      float s = 0;
      for (int k = 0; k < 4; k++) s += w[c][k] * x[k];
      if (s > best) best = s, tensor_data(d->y)[i] = (float)c;
    }
  }
  d->n = n;
  d->features = 4;
  d->classes = 3;
  snprintf(d->source, sizeof d->source, "toy");
  return d;
}

/* Placement used by the worker test: var 0 (1.weight [8, 4]) split over
 * both ps (rows 0-4 on ps 0, rows 5-7 on ps 1, listed in that reverse
 * order), var 1 (1.bias) on ps 1, var 2 (3.weight) on ps 0, var 3
 * (3.bias) on ps 1. */
const wf_place WF_PLACES[] = {
    {0, 1, 5, 3}, {0, 0, 0, 5}, {1, 1, 0, 8}, {2, 0, 0, 3}, {3, 1, 0, 3}};

/* The SETUP variable table's callbacks: variable i, and its shards (the
 * places naming it, in order; the encoder asks for them in order). */
typedef struct var_table {
  const nn_param_list *pl;
  const wf_place *places;
  size_t nplaces, next;
  uint32_t var;
} var_table;

static void put_shard(wire_wr *w, void *ud, uint32_t s) {
  (void)s;
  var_table *vt = ud;
  while (vt->places[vt->next].var != vt->var) vt->next++;
  const wf_place *p = &vt->places[vt->next++];
  wire_put_item_setup_shard(w, &(wire_item_setup_shard){p->ps, p->row0, p->rows});
}

static void put_var(wire_wr *w, void *ud, uint32_t i) {
  var_table *vt = ud;
  const tensor *t = vt->pl->items[i].value;
  uint32_t ns = 0;
  for (size_t p = 0; p < vt->nplaces; p++) ns += vt->places[p].var == i;
  vt->var = i;
  vt->next = 0;
  wire_item_setup_var it = {.name = WIRE_STR(vt->pl->items[i].name),
                            .shape = {.ndim = t->ndim},
                            .shards = {ns, .put = put_shard, .ud = vt}};
  memcpy(it.shape.shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
  wire_put_item_setup_var(w, &it);
}

void wf_send_setup_placed(peer *ctl, const nn_param_list *pl, const dataset *d, int64_t batch,
                          uint32_t req, const wf_place *places, size_t nplaces) {
  wire_wr w;
  wire_wr_init(&w);
  var_table vt = {pl, places, nplaces, 0, 0};
  wire_put_setup(&w, &(wire_msg_setup){.model = WIRE_STR(WF_SPEC),
                                       .loss = WIRE_STR("CrossEntropy"),
                                       .batch = (uint64_t)batch,
                                       .seed = WF_SEED,
                                       .shuffle = true,
                                       .vars = {(uint32_t)pl->n, .put = put_var, .ud = &vt},
                                       .x = {.t = d->x},
                                       .y = {.t = d->y}});
  nf_send_wr(ctl, &w, WIRE_SETUP, req);
}

void wf_send_setup(peer *ctl, const nn_param_list *pl, const dataset *d, int64_t batch,
                   uint32_t req) {
  wf_send_setup_placed(ctl, pl, d, batch, req, WF_PLACES, WF_NPLACES);
}

void wf_send_task(peer *ctl, uint64_t id, uint32_t req) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_task(&w, &(wire_msg_task){.task = id, .kind = WIRE_TASK_TRAIN_STEP});
  nf_send_wr(ctl, &w, WIRE_TASK, req);
}

void wf_read_result(fake *f, peer *ctl, wf_result *res) {
  fk_frame *fr = NF_EXPECT(f, ctl, WIRE_RESULT);
  wire_msg_result m;
  CHECK_OK(wire_get_result(fr->p, fr->h.len, &m));
  res->task = m.task;
  res->status = m.status;
  res->loss = m.loss;
  res->correct = m.correct;
  res->examples = m.examples;
  CHECK_OK(wire_str_copy(m.message, res->msg, sizeof res->msg));
  nf_frame_free(fr);
}

/* VAR_INITs every shard of the model's parameters to the two ps. */
void wf_init_vars(fake *f, peer *ps[2], const nn_param_list *pl, const optim_cfg *cfg) {
  for (size_t p = 0; p < WF_NPLACES; p++) {
    const wf_place *pc = &WF_PLACES[p];
    tensor *rows = tensor_narrow(pl->items[pc->var].value, 0, (int64_t)pc->row0, (int64_t)pc->rows);
    nf_var_init(f, ps[pc->ps], pc->var, pc->row0, cfg, rows, (uint32_t)(100 + p));
    tensor_free(rows);
  }
}

/* Pulls every shard back and assembles the variables into out[] (clones
 * of the shapes in pl). */
void wf_pull_model(fake *f, peer *ps[2], const nn_param_list *pl, tensor **out) {
  for (int i = 0; i < pl->n; i++) out[i] = tensor_clone(pl->items[i].value);
  for (size_t p = 0; p < WF_NPLACES; p++) {
    const wf_place *pc = &WF_PLACES[p];
    tensor *t = nf_pull1(f, ps[pc->ps], pc->var, (uint32_t)(200 + p));
    int64_t row = (int64_t)tensor_numel(out[pc->var]) / out[pc->var]->shape[0];
    CHECK_INT_EQ(t->shape[0], (int64_t)pc->rows);
    memcpy(tensor_data(out[pc->var]) + (int64_t)pc->row0 * row, tensor_data(t),
           (size_t)tensor_numel(t) * sizeof(float));
    tensor_free(t);
  }
}

/* The in-process reference: WF_STEPS steps of the same model on the same
 * data, recording each step's loss and correct count. */
void wf_run_reference(wf_reference *ref, const dataset *d, const optim_cfg *cfg) {
  memset(ref, 0, sizeof *ref);
  rng_t r;
  rng_seed(&r, WF_SEED);
  ref->model = nn_from_spec(WF_SPEC, &r);
  ref->loss = nn_cross_entropy();
  CHECK(ref->model && ref->loss);
  CHECK_OK(nn_collect_params(ref->model, &ref->params));
  optim_t *opt = optim_new(cfg, &ref->params);
  CHECK(opt != NULL);
  data_iter it;
  CHECK_OK(data_iter_init(&it, d, WF_BATCH, true, WF_SEED));
  nn_zero_grad(ref->model);
  for (int s = 0; s < WF_STEPS; s++) {
    const tensor *x, *y;
    int rc = data_iter_next(&it, &x, &y);
    if (rc == 0) {
      data_iter_reset(&it);
      rc = data_iter_next(&it, &x, &y);
    }
    CHECK(rc == 1);
    ref->examples[s] = x->shape[0];
    CHECK_OK(train_step(ref->model, ref->loss, x, y, &ref->losses[s], &ref->correct[s]));
    CHECK_OK(optim_step_zero_grad(opt));
  }
  data_iter_free(&it);
  optim_free(opt);

  /* The loop above is what train_fit does: check it against train_fit
   * itself, so that "matches the reference" means "matches exp:fit()". */
  rng_seed(&r, WF_SEED);
  nn_module *m2 = nn_from_spec(WF_SPEC, &r);
  nn_param_list p2 = {0};
  CHECK_OK(nn_collect_params(m2, &p2));
  optim_t *o2 = optim_new(cfg, &p2);
  train_cfg tc = {.batch = WF_BATCH, .epochs = 100, .shuffle = true, .seed = WF_SEED,
                  .max_steps = WF_STEPS};
  train_result tr;
  CHECK_OK(train_fit(m2, ref->loss, o2, d, &tc, &tr));
  CHECK_INT_EQ(tr.steps, WF_STEPS);
  for (int i = 0; i < p2.n; i++) CHECK(nf_same_bits(p2.items[i].value, ref->params.items[i].value));
  optim_free(o2);
  nn_param_list_free(&p2);
  nn_unref(m2);
}

void wf_free_reference(wf_reference *ref) {
  nn_param_list_free(&ref->params);
  nn_loss_unref(ref->loss);
  nn_unref(ref->model);
}

optim_cfg wf_adam_cfg(void) {
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_ADAM);
  c.lr = 0.05f;
  return c;
}

