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
#include <stdio.h>
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

/* ============================== fit / evaluate ========================== */

static const char *const fit_keys[] = {"batch", "epochs",     "shuffle", "seed",    "max_steps",
                                       "eval",  "eval_every", "verbose", "progress", NULL};

static void push_result(lua_State *L, const train_result *r, int evals, int stopped) {
  ltrain_push_result(L, r);
  lua_pushvalue(L, evals);
  lua_setfield(L, -2, "evals");
  if (stopped) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "stopped");
  }
}

/* trainer:fit(data, { batch, epochs, shuffle, seed, max_steps, eval,
 * eval_every, verbose, progress }) -> { loss, accuracy, steps, epochs,
 * examples_per_sec, eval_loss, eval_accuracy, seconds, evals } */
static int t_fit(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  const dataset *d = ldata_check(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  ldrv_check_keys(L, 3, "fit", fit_keys);
  train_cfg cfg = {0};
  cfg.batch = ldrv_opt_integer(L, 3, "batch", 32, "fit");
  cfg.epochs = ldrv_opt_integer(L, 3, "epochs", 1, "fit");
  cfg.shuffle = ldrv_opt_bool(L, 3, "shuffle", 1, "fit");
  cfg.seed = (uint64_t)ldrv_opt_integer(L, 3, "seed", 0, "fit");
  cfg.max_steps = ldrv_opt_integer(L, 3, "max_steps", 0, "fit");
  cfg.eval_every = ldrv_opt_integer(L, 3, "eval_every", 0, "fit");
  if (cfg.batch < 1) luaL_error(L, "fit: batch must be a positive integer");
  if (cfg.epochs < 1) luaL_error(L, "fit: epochs must be a positive integer");
  if (cfg.max_steps < 0 || cfg.eval_every < 0)
    luaL_error(L, "fit: max_steps and eval_every must be >= 0");
  if (lua_getfield(L, 3, "eval") != LUA_TNIL) cfg.eval = ldata_check(L, -1);
  lua_pop(L, 1); /* the table still references the dataset during the fit */
  if (ldrv_opt_bool(L, 3, "verbose", 1, "fit")) {
    cfg.progress = stdout;
    cfg.progress_tty = isatty(fileno(stdout));
  }
  fit_ctx ctx = {.L = L};
  lua_newtable(L);
  ctx.evals = lua_gettop(L);
  if (lua_getfield(L, 3, "progress") != LUA_TNIL) {
    luaL_checktype(L, -1, LUA_TFUNCTION);
    ctx.fn = lua_gettop(L);
  } else {
    lua_pop(L, 1);
  }
  cfg.on_progress = on_progress;
  cfg.ud = &ctx;

  train_result r;
  fflush(stdout); /* keep the script's own prints before the progress lines */
  int rc = train_fit(t->model, t->loss, t->opt, d, &cfg, &r);
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

static const luaL_Reg funcs[] = {{"new", l_new}, {"seed", l_seed}, {NULL, NULL}};

int luaopen_drover_train(lua_State *L) {
  luaL_newmetatable(L, TRAINER_MT);
  lua_pushcfunction(L, trainer_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, trainer_gc);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, t_tostring);
  lua_setfield(L, -2, "__tostring");
  luaL_newlib(L, trainer_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
