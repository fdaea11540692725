/* coord_setup.c - SETUP of a fit's nodes: each trainer its shard of the
 * training data (or its recipe: files mode; or none: feed mode), the
 * evaluator the eval data, with the model's description and variable
 * table; and SETUP again for a trainer that comes back mid-fit. The fit
 * itself is in coord_fit.c. */
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

/* ============================== setup ===================================== */

static void put_shard(wire_wr *w, void *ud, uint32_t s) {
  const fvar *v = ud;
  wire_put_item_setup_shard(w, &(wire_item_setup_shard){(uint32_t)v->sh[s].ps,
                                                        (uint64_t)v->sh[s].row0,
                                                        (uint64_t)v->sh[s].rows});
}

/* SETUP's variable table: name, shape and shards of each variable. */
static void put_var(wire_wr *w, void *ud, uint32_t i) {
  coord_fit_state *f = ud;
  fvar *v = &f->vars[i];
  wire_item_setup_var it = {.name = WIRE_STR(f->params.items[i].name),
                            .shape = {.ndim = v->value->ndim},
                            .shards = {(uint32_t)v->nshards, .put = put_shard, .ud = v}};
  memcpy(it.shape.shape, v->value->shape, (size_t)v->value->ndim * sizeof *v->value->shape);
  wire_put_item_setup_var(w, &it);
}

/* SETUP for node: shard `shard` of `shards` of d. A dataset read from a
 * file goes as its recipe (files mode: the node reads its rows itself, the
 * coordinator never gathers them); one built in memory as the shard's rows. */
static int send_setup(coord *c, int node, const coord_fit_args *a, const char *spec,
                      const dataset *d, int shard, int shards) {
  dataset *part = NULL;
  tensor *ex = NULL, *ey = NULL;
  int rc = 0;
  if (d->recipe) {
    int64_t xs[2] = {0, d->features}, ys[1] = {0};
    ex = tensor_new(2, xs);
    ey = tensor_new(1, ys);
    if (!ex || !ey) rc = err_set(DRV_ENOMEM, "out of memory");
  } else if (shards > 1 && (rc = data_shard(d, shard, shards, &part)) < 0) {
    rc = err_set(rc, "cluster: shard %d of %d of the training data: %s", shard, shards,
                 err_msg());
  }
  if (rc < 0) {
    tensor_free(ex);
    tensor_free(ey);
    return rc;
  }
  const dataset *src = part ? part : d;
  uint8_t *sp = NULL; /* the rows' ids (sparse tables), when the data has them */
  size_t splen = 0;
  if (!d->recipe && (rc = data_sparse_encode(src, &sp, &splen)) < 0) { /* files mode: read there */
    tensor_free(ex);
    tensor_free(ey);
    data_free(part);
    return rc;
  }
  char *shipped = NULL; /* the recipe with the run's files' shipped names */
  if (d->recipe && (rc = coord__ship_recipe(c, d->recipe, &shipped)) < 0) {
    tensor_free(ex);
    tensor_free(ey);
    data_free(part);
    return rc;
  }
  const char *recipe = shipped ? shipped : d->recipe;
  wire_wr w;
  char loss[64]; /* the type, with Huber's delta */
  nn_loss_spec(a->loss, loss, sizeof loss);
  wire_wr_init(&w);
  wire_put_setup(&w, &(wire_msg_setup){.model = WIRE_STR(spec),
                                       .loss = WIRE_STR(loss),
                                       .batch = (uint64_t)a->cfg->batch,
                                       .seed = a->cfg->seed,
                                       .shuffle = a->cfg->shuffle,
                                       .clip_norm = a->optim->clip_norm,
                                       .vars = {(uint32_t)c->fit->nvars, .put = put_var,
                                                .ud = c->fit},
                                       .x = {.t = ex ? ex : src->x},
                                       .y = {.t = ey ? ey : src->y},
                                       .recipe = {(const uint8_t *)recipe,
                                                  recipe ? (uint32_t)strlen(recipe) : 0},
                                       .shard = (uint32_t)shard,
                                       .shards = (uint32_t)shards,
                                       .sparse = {sp, (uint32_t)splen},
                                       .supersede = c->fit->sc.supersede});
  free(sp);
  c->fit->setup_ok[node] = false;
  coord__send(c, node, &w, WIRE_SETUP, 0);
  tensor_free(ex);
  tensor_free(ey);
  free(shipped);
  data_free(part);
  return 0;
}

static int model_spec(const coord_fit_args *a, char *spec, size_t n) {
  int len = nn_spec(a->model, spec, n);
  if (len < 0) return len;
  if ((size_t)len >= n || len >= WIRE_MAX_STR)
    return err_set(DRV_EINVAL, "cluster: the model's description (%d characters) is longer than "
                                 "the protocol's %d", len, WIRE_MAX_STR - 1);
  return 0;
}

/* Feed mode: a trainer holds no data of its own (x [0, 1], y [0]): its
 * batches come in FEED_BATCH frames. */
static int empty_data(dataset **out) {
  dataset *d = calloc(1, sizeof *d);
  if (!d || !(d->x = tensor_new2(0, 1)) || !(d->y = tensor_new1(0))) {
    data_free(d);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  *out = d;
  return 0;
}

/* SETUP for trainer t (shard t of the training data). */
static int setup_trainer(coord *c, int t, const char *spec) {
  coord_fit_state *f = c->fit;
  const coord_fit_args *a = f->args;
  if (a->train && !a->feed) return send_setup(c, f->trainers[t], a, spec, a->train, t, f->ntrainers);
  dataset *none = NULL; /* feed mode */
  int rc = empty_data(&none);
  if (rc < 0) return rc;
  rc = send_setup(c, f->trainers[t], a, spec, none, 0, 1);
  data_free(none);
  return rc;
}

int coord__setup_trainer(coord *c, int t) {
  char spec[8192];
  int node = c->fit->trainers[t];
  c->fit->setup_ok[node] = false;
  if (!c->ctl[node] || !(coord__state_flags(c->nodes[node].state) & NS_REGISTERED)) return 0;
  int rc = model_spec(c->fit->args, spec, sizeof spec);
  return rc < 0 ? rc : setup_trainer(c, t, spec);
}

static bool all_set_up(coord *c, void *arg) {
  (void)arg;
  coord_fit_state *f = c->fit;
  for (int t = 0; t < f->ntrainers; t++)
    if (!f->setup_ok[f->trainers[t]]) return false;
  return f->evaluator < 0 || !f->args->cfg->eval || f->setup_ok[f->evaluator];
}

/* A node restarting now gets its SETUP when it registers again
 * (coord__fit_node_back); the wait covers it too. */
int coord__setup_nodes(coord *c, const coord_fit_args *a) {
  coord_fit_state *f = c->fit;
  char spec[8192];
  int rc = model_spec(a, spec, sizeof spec);
  for (int t = 0; t < f->ntrainers && rc == 0; t++) rc = setup_trainer(c, t, spec);
  if (rc < 0) return rc;
  if (f->evaluator >= 0 && a->cfg->eval) rc = send_setup(c, f->evaluator, a, spec, a->cfg->eval, 0, 1);
  if (rc < 0) return rc;
  return coord__pump(c, all_set_up, NULL, 0, true);
}

static int trainer_of(const coord_fit_state *f, int node) {
  for (int t = 0; t < f->ntrainers; t++)
    if (f->trainers[t] == node) return t;
  return -1;
}

void coord__fit_node_back(coord *c, int node) {
  coord_fit_state *f = c->fit;
  if (!f || !f->args) return;
  int t = trainer_of(f, node);
  char spec[8192];
  if (c->nodes[node].role == ROLE_PS && f->ck.restoring) { /* the fit loop restores it */
    coord__node_set_state(c, node, NODE_RESTORING, ": its shards come from the newest checkpoint");
    return;
  }
  if (t < 0) return; /* only trainers come back */
  if (model_spec(f->args, spec, sizeof spec) < 0 || setup_trainer(c, t, spec) < 0) {
    char name[32];
    coord__fail_fit(f, "%s: %s", coord__node_name(&c->nodes[node], name, sizeof name), err_msg());
  }
}

