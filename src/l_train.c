/* l_train.c - drover.train: the C primitives behind experiment:fit() and
 * experiment:evaluate() (lua/experiment.lua), and drover.seed.
 *
 * A "drover.Trainer" binds a model, a loss and an optimizer configuration
 * into an optim_t over the model's parameters. It lives as long as its
 * experiment, so a second fit() continues with the optimizer's state (as
 * a PyTorch loop would). All the work happens in train_fit(); Lua only
 * configures it and, optionally, hears about progress through a callback.
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "err.h"
#include "l_drover.h"
#include "l_util.h"
#include "nn.h"
#include "optim.h"
#include "train.h"

#define TRAINER_MT "drover.Trainer"


typedef struct trainer {
  nn_module *model; /* one reference */
  nn_loss *loss;    /* one reference */
  nn_param_list params;
  optim_t *opt; /* borrows params */
} trainer;

static trainer *check_trainer(lua_State *L, int idx) {
  trainer *t = luaL_checkudata(L, idx, TRAINER_MT);
  if (!t->opt) luaL_argerror(L, idx, "trainer is closed");
  return t;
}

static int trainer_gc(lua_State *L) {
  trainer *t = luaL_checkudata(L, 1, TRAINER_MT);
  optim_free(t->opt);
  t->opt = NULL;
  nn_param_list_free(&t->params);
  nn_unref(t->model);
  nn_loss_unref(t->loss);
  t->model = NULL;
  t->loss = NULL;
  return 0;
}

/* drover.train.new(model, loss, optimizer) -> trainer */
static int l_new(lua_State *L) {
  nn_module *model = lnn_check_module(L, 1);
  nn_loss *loss = lnn_check_loss(L, 2);
  const optim_cfg *cfg = loptim_check(L, 3);
  trainer *t = lua_newuserdatauv(L, sizeof *t, 0);
  *t = (trainer){0};
  luaL_setmetatable(L, TRAINER_MT); /* from here __gc cleans up */
  t->model = nn_ref(model);
  t->loss = nn_loss_ref(loss);
  if (nn_collect_params(model, &t->params) < 0) return luaL_error(L, "%s", drv_errmsg());
  if (t->params.n == 0) return luaL_error(L, "the model has no parameters to train");
  t->opt = optim_new(cfg, &t->params);
  if (!t->opt) return luaL_error(L, "%s", drv_errmsg());
  return 1;
}

/* ============================== progress ================================ */

/* State shared with the progress callback during one fit. */
typedef struct fit_ctx {
  lua_State *L;
  int fn;     /* stack index of the Lua progress function, 0 for none */
  int evals;  /* stack index of the table collecting periodic evals */
  int failed; /* the Lua callback raised; its error is on the stack */
  int stopped; /* the Lua callback returned false */
} fit_ctx;

void ldrv_set_num(lua_State *L, const char *k, double v) {
  if (isnan(v)) return; /* "does not apply": leave the field nil */
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

void ldrv_set_int(lua_State *L, const char *k, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

#define set_num ldrv_set_num
#define set_int ldrv_set_int

void ltrain_push_progress(lua_State *L, const train_progress *p) {
  lua_createtable(L, 0, 12);
  set_int(L, "step", p->step);
  set_int(L, "total_steps", p->total_steps);
  set_int(L, "epoch", p->epoch);
  set_int(L, "epochs", p->epochs);
  set_num(L, "loss", p->loss);
  set_num(L, "accuracy", p->accuracy);
  set_num(L, "examples_per_sec", p->examples_per_sec);
  set_num(L, "elapsed", p->elapsed);
  set_num(L, "eta", p->eta);
  lua_pushboolean(L, p->is_eval);
  lua_setfield(L, -2, "is_eval");
  if (p->is_eval) {
    set_num(L, "eval_loss", p->eval_loss);
    set_num(L, "eval_accuracy", p->eval_accuracy);
  }
}

void ltrain_push_result(lua_State *L, const train_result *r) {
  lua_createtable(L, 0, 10);
  set_num(L, "loss", r->loss);
  set_num(L, "accuracy", r->accuracy);
  set_int(L, "steps", r->steps);
  set_int(L, "epochs", r->epochs);
  set_num(L, "examples_per_sec", r->examples_per_sec);
  set_num(L, "eval_loss", r->eval_loss);
  set_num(L, "eval_accuracy", r->eval_accuracy);
  set_num(L, "seconds", r->seconds);
}

/* Runs under lua_pcall (so no Lua error escapes into train_fit) with
 * (ctx, progress, evals, fn or nil): records an eval in the history and
 * calls the user's function. Returns whether training should stop. */
static int progress_lua(lua_State *L) {
  const train_progress *p = lua_touserdata(L, 2);
  if (p->is_eval) {
    lua_createtable(L, 0, 4);
    set_int(L, "step", p->step);
    set_int(L, "epoch", p->epoch);
    set_num(L, "loss", p->eval_loss);
    set_num(L, "accuracy", p->eval_accuracy);
    lua_rawseti(L, 3, (lua_Integer)luaL_len(L, 3) + 1);
  }
  if (lua_isnil(L, 4)) return 0;
  lua_pushvalue(L, 4);
  ltrain_push_progress(L, p);
  lua_call(L, 1, 1);
  lua_pushboolean(L, lua_isboolean(L, -1) && !lua_toboolean(L, -1));
  return 1;
}

static int on_progress(void *ud, const train_progress *p) {
  fit_ctx *c = ud;
  lua_State *L = c->L;
  if (c->failed || c->stopped) return 1;
  if (!p->is_eval && !c->fn) return 0; /* the common case: no Lua to run */
  lua_pushcfunction(L, progress_lua);
  lua_pushlightuserdata(L, c);
  lua_pushlightuserdata(L, (void *)p);
  lua_pushvalue(L, c->evals);
  if (c->fn) lua_pushvalue(L, c->fn);
  else lua_pushnil(L);
  if (lua_pcall(L, 4, 1, 0) != LUA_OK) {
    c->failed = 1; /* the message stays on the stack for fit to raise */
    return 1;
  }
  int stop = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (stop) c->stopped = 1;
  return stop;
}

/* ============================== experiment settings ===================== */

void ltrain_check_experiment(lua_State *L, int idx) {
  if (lua_getmetatable(L, idx)) {
    lua_getfield(L, -1, "__name");
    bool ok = lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), "drover.Experiment") == 0;
    lua_pop(L, 2);
    if (ok) return;
  }
  luaL_argerror(L, idx, "expected an experiment (drover.experiment { ... })");
}

/* The type drover.experiment's messages name: "drover.Module", "number". */
static const char *kind(lua_State *L, int idx) {
  int t = luaL_getmetafield(L, idx, "__name");
  const char *k = t == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, idx);
  if (t != LUA_TNIL) lua_pop(L, 1); /* the metatable still holds the string */
  return k;
}

/* Pushes t[key] (t at index tbl; tbl 0: nil) and returns its index, or 0
 * (popped) when it is nil and optional. Raises unless it is of `type`
 * (a Lua type, or a userdata with the metatable __name `mt`). */
static int push_field(lua_State *L, int tbl, const char *key, int type, const char *mt,
                      bool optional, const char *field) {
  if (tbl) lua_getfield(L, tbl, key);
  else lua_pushnil(L);
  if (lua_isnil(L, -1) && optional) {
    lua_pop(L, 1);
    return 0;
  }
  if (lua_type(L, -1) != type || (mt && strcmp(kind(L, -1), mt) != 0))
    luaL_error(L, "experiment: %s must be a %s (got %s)", field, mt ? mt : lua_typename(L, type),
               kind(L, -1));
  return lua_gettop(L);
}

/* t[key] as an integer >= min (def when nil or tbl is 0). */
static int64_t int_field(lua_State *L, int tbl, const char *key, int64_t def, int64_t min,
                         const char *field) {
  if (!tbl || lua_getfield(L, tbl, key) == LUA_TNIL) {
    if (tbl) lua_pop(L, 1);
    return def;
  }
  int isint;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (!isint || v < min)
    luaL_error(L, "experiment: %s must be an integer >= %I (got %s)", field, (lua_Integer)min,
               luaL_tolstring(L, -1, NULL));
  lua_pop(L, 1);
  return v;
}

/* t[key] as a boolean (def when nil). */
static bool bool_field(lua_State *L, int tbl, const char *key, bool def, const char *field) {
  int t = lua_getfield(L, tbl, key);
  bool v = t == LUA_TNIL ? def : lua_toboolean(L, -1);
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    luaL_error(L, "experiment: %s must be true or false (got %s)", field, kind(L, -1));
  lua_pop(L, 1);
  return v;
}

void ltrain_read_experiment(lua_State *L, int idx, ltrain_exp *e) {
  idx = lua_absindex(L, idx);
  ltrain_check_experiment(L, idx);
  luaL_checkstack(L, 16, "experiment"); /* 8 values, and what a fit's callbacks push */
  memset(e, 0, sizeof *e);
  e->model = push_field(L, idx, "model", LUA_TUSERDATA, "drover.Module", false, "model");
  e->loss = push_field(L, idx, "loss", LUA_TUSERDATA, "drover.Loss", false, "loss");
  e->optimizer =
      push_field(L, idx, "optimizer", LUA_TUSERDATA, "drover.Optimizer", false, "optimizer");
  int train = push_field(L, idx, "train", LUA_TTABLE, NULL, false, "train");
  int eval = push_field(L, idx, "eval", LUA_TTABLE, NULL, true, "eval");
  e->progress = push_field(L, idx, "progress", LUA_TFUNCTION, NULL, true, "progress");
  e->train_data = push_field(L, train, "data", LUA_TUSERDATA, "drover.Dataset", false, "train.data");
  e->eval_data = push_field(L, eval, "data", LUA_TUSERDATA, "drover.Dataset", !eval, "eval.data");
  train_cfg *c = &e->cfg;
  c->batch = int_field(L, train, "batch", 32, 1, "train.batch");
  c->epochs = int_field(L, train, "epochs", 1, 1, "train.epochs");
  c->shuffle = bool_field(L, train, "shuffle", true, "train.shuffle");
  c->max_steps = int_field(L, train, "max_steps", 0, 0, "train.max_steps");
  c->seed = (uint64_t)int_field(L, idx, "seed", 0, 0, "seed");
  c->eval_every = int_field(L, eval, "every", 0, 0, "eval.every");
  c->eval = e->eval_data ? ldata_check(L, e->eval_data) : NULL;
  if (bool_field(L, idx, "verbose", true, "verbose")) {
    c->progress = stdout;
    c->progress_tty = isatty(fileno(stdout));
  }
}

/* ============================== fit / evaluate ========================== */

static void push_result(lua_State *L, const train_result *r, int evals, int stopped) {
  ltrain_push_result(L, r);
  lua_pushvalue(L, evals);
  lua_setfield(L, -2, "evals");
  if (stopped) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "stopped");
  }
}

/* trainer:fit(exp, seed) -> { loss, accuracy, steps, epochs,
 * examples_per_sec, eval_loss, eval_accuracy, seconds, evals }: trains
 * on exp.train.data as the experiment says, shuffling with `seed` (a later
 * fit of the same experiment shuffles anew). */
static int t_fit(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  lua_Integer seed = luaL_checkinteger(L, 3);
  lua_settop(L, 3);
  ltrain_exp e;
  ltrain_read_experiment(L, 2, &e); /* its values stay on the stack during the fit */
  train_cfg cfg = e.cfg;
  cfg.seed = (uint64_t)seed;
  fit_ctx ctx = {.L = L, .fn = e.progress};
  lua_newtable(L);
  ctx.evals = lua_gettop(L);
  cfg.on_progress = on_progress;
  cfg.ud = &ctx;

  train_result r;
  fflush(stdout); /* keep the script's own prints before the progress lines */
  int rc = train_fit(t->model, t->loss, t->opt, ldata_check(L, e.train_data), &cfg, &r);
  fflush(stdout);
  if (ctx.failed) return lua_error(L); /* the progress function's error */
  if (rc < 0) return luaL_error(L, "%s", drv_errmsg());
  push_result(L, &r, ctx.evals, ctx.stopped);
  return 1;
}

/* trainer:evaluate(data [, batch]) -> { loss = ..., accuracy = ... } */
static int t_evaluate(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  const dataset *d = ldata_check(L, 2);
  lua_Integer batch = luaL_optinteger(L, 3, 256);
  luaL_argcheck(L, batch > 0, 3, "the batch size must be positive");
  double loss, acc;
  if (train_evaluate(t->model, t->loss, d, batch, &loss, &acc) < 0)
    return luaL_error(L, "%s", drv_errmsg());
  lua_createtable(L, 0, 2);
  set_num(L, "loss", loss);
  set_num(L, "accuracy", acc);
  return 1;
}

/* trainer:steps() -> optimizer updates applied so far */
static int t_steps(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)optim_steps(check_trainer(L, 1)->opt));
  return 1;
}

static int t_tostring(lua_State *L) {
  trainer *t = luaL_checkudata(L, 1, TRAINER_MT);
  if (!t->opt) lua_pushliteral(L, "drover.trainer (closed)");
  else lua_pushfstring(L, "drover.trainer (%d parameter tensors, %I steps)", t->params.n,
                       (lua_Integer)optim_steps(t->opt));
  return 1;
}

/* drover.seed(n): reseeds the generator behind layer initialisation,
 * dropout masks and tensor.rand/randn, so everything built after it is
 * reproducible bit for bit. */
static int l_seed(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  rng_seed(ldrv_rng(L), (uint64_t)n);
  return 0;
}

static const luaL_Reg trainer_methods[] = {
    {"fit", t_fit}, {"evaluate", t_evaluate}, {"steps", t_steps}, {NULL, NULL}};

static const luaL_Reg trainer_meta[] = {
    {"__gc", trainer_gc}, {"__close", trainer_gc}, {"__tostring", t_tostring}, {NULL, NULL}};

static const luaL_Reg funcs[] = {{"new", l_new}, {"seed", l_seed}, {NULL, NULL}};

int luaopen_drover_train(lua_State *L) {
  ldrv_createmeta(L, TRAINER_MT, trainer_meta, trainer_methods);
  luaL_newlib(L, funcs);
  return 1;
}
