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

#include <jansson.h>
#include <stdlib.h>

#include "train/ckpt.h"
#include "data/data.h"
#include "base/err.h"
#include "base/rundir.h"
#include "run/fitrun.h"
#include "luabind/l_cluster_opts.h"
#include "luabind/l_drover.h"
#include "luabind/l_settings.h"
#include "luabind/l_util.h"
#include "luabind/repl.h"
#include "numeric/nn.h"
#include "numeric/nn_sparse.h"
#include "numeric/optim.h"
#include "train/bineval.h"
#include "train/train.h"
#include "ui/runs.h"

#define TRAINER_MT "drover.Trainer"


typedef struct trainer {
  nn_module *model; /* one reference */
  nn_loss *loss;    /* one reference */
  nn_param_list params;
  nn_table_list tables; /* the model's sparse tables */
  optim_t *opt; /* borrows params and tables */
  fitrun *run;  /* the in-process run directory, or NULL (owned) */
  bool resume;  /* the next fit restores the newest checkpoint */
  bool in_fit;
  train_position pos; /* where the last fit stopped */
  int64_t fit;        /* its number */
  uint64_t seed;      /* its seed */
} trainer;

static trainer *check_trainer(lua_State *L, int idx) {
  trainer *t = luaL_checkudata(L, idx, TRAINER_MT);
  if (!t->opt) luaL_argerror(L, idx, "trainer is closed");
  return t;
}

static int trainer_gc(lua_State *L) {
  trainer *t = luaL_checkudata(L, 1, TRAINER_MT);
  if (t->run) fitrun_close(t->run);
  free(t->run);
  t->run = NULL;
  optim_free(t->opt);
  t->opt = NULL;
  nn_param_list_free(&t->params);
  nn_table_list_free(&t->tables);
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
  if (nn_collect_params(model, &t->params) < 0 || nn_collect_tables(model, false, &t->tables) < 0)
    return luaL_error(L, "%s", err_msg());
  if (t->params.n == 0 && t->tables.n == 0)
    return luaL_error(L, "the model has no parameters to train");
  t->opt = optim_new(cfg, &t->params);
  if (!t->opt || optim_bind_tables(t->opt, &t->tables) < 0) return luaL_error(L, "%s", err_msg());
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
  trainer *t;
  ckpt_state *cs;
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
  set_num(L, "lr", p->lr);
  set_num(L, "grad_norm", p->grad_norm);
  lua_pushboolean(L, p->is_eval);
  lua_setfield(L, -2, "is_eval");
  if (p->is_eval) {
    set_num(L, "eval_loss", p->eval_loss);
    set_num(L, "eval_accuracy", p->eval_accuracy);
    if (p->metrics & BINEVAL_AUC) set_num(L, "eval_auc", p->eval_auc);
    if (p->metrics & BINEVAL_LOGLOSS) set_num(L, "eval_logloss", p->eval_logloss);
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
  if (r->metrics & BINEVAL_AUC) set_num(L, "eval_auc", r->eval_auc);
  if (r->metrics & BINEVAL_LOGLOSS) set_num(L, "eval_logloss", r->eval_logloss);
  set_num(L, "seconds", r->seconds);
  if (r->stopped_early) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "stopped_early");
    set_int(L, "best_step", r->best_step);
    set_num(L, "best_metric", r->best_metric);
  }
  if (r->stopped) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "stopped");
  }
  ltrain_mark_result(L);
}

void ltrain_mark_result(lua_State *L) {
  int top = lua_gettop(L); /* the result */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "drover.pretty") == LUA_TTABLE &&
      lua_getfield(L, -1, "result_mt") == LUA_TTABLE)
    lua_setmetatable(L, top);
  lua_settop(L, top);
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
    if (p->metrics & BINEVAL_AUC) set_num(L, "auc", p->eval_auc);
    if (p->metrics & BINEVAL_LOGLOSS) set_num(L, "logloss", p->eval_logloss);
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
  if (c->t->run) fitrun_progress(c->t->run, p);
  ldash_fit_progress(L, p);
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

/* The end of a step: the position, and a checkpoint when one is due. */
static int on_step_end(void *ud, const train_position *pos) {
  fit_ctx *c = ud;
  c->cs->pos = *pos;
  c->t->pos = *pos;
  if (c->t->run) fitrun_step_end(c->t->run, c->cs);
  return 0;
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

/* ============================== fit / evaluate ========================== */

static void push_result(lua_State *L, const train_result *r, int evals) {
  ltrain_push_result(L, r);
  lua_pushvalue(L, evals);
  lua_setfield(L, -2, "evals");
}

/* A resumed run's first fit: restores the newest checkpoint into cs.
 * Returns 1 to continue from cs->pos, 0 to start afresh, -1 when this fit
 * was finished before the checkpoint was taken (a later fit resumes). */
static int resume_fit(lua_State *L, trainer *t, ckpt_state *cs) {
  if (!t->run || !t->resume) return 0;
  int64_t fit = cs->fit;
  int rc = fitrun_restore(t->run, cs);
  if (rc < 0) return luaL_error(L, "%s", err_msg());
  if (rc == 0) {
    t->resume = false;
    return 0;
  }
  if (cs->fit > fit) {
    cs->fit = fit;
    return -1;
  }
  t->resume = false;
  return cs->fit == fit ? 1 : 0;
}

/* How a fit whose progress function raised ended, for fitrun_end: Ctrl-C
 * (or `drover stop`) raises "interrupted" there as anywhere in Lua; any
 * other error is the function's own (its message on top of the stack). */
static int progress_failure(lua_State *L) {
  if (err_interrupted()) return DRV_EINTERRUPTED;
  return err_set(DRV_EINVAL, "the progress function raised: %s",
                 lua_isstring(L, -1) ? lua_tostring(L, -1) : "(an error object)");
}

static void run_fit(lua_State *L, trainer *t, lsettings *e, train_cfg *cfg, fit_ctx *ctx,
                    train_result *r) {
  fflush(stdout); /* keep the script's own prints before the progress lines */
  if (t->run) fitrun_begin(t->run, ctx->cs->fit, cfg->resume ? cfg->resume->step : 0);
  ldash_fit_begin(L, t->run ? &t->run->rd : NULL, t->run ? fitrun_tensorboard_url(t->run) : "");
  t->in_fit = true;
  int rc = train_fit(t->model, t->loss, t->opt, ldata_check(L, e->train_data), cfg, r);
  t->in_fit = false;
  ldash_fit_end(L);
  fflush(stdout);
  if (t->run && rc == 0 && !ctx->failed && !ctx->stopped) {
    fitrun_fit_done(t->run, ctx->cs, r);
    t->pos = ctx->cs->pos;
  }
  if (t->run) fitrun_end(t->run, r, ctx->failed ? progress_failure(L) : rc);
  if (err_interrupted()) repl_raise_interrupted(L, r->steps); /* however the fit learnt of it */
  if (ctx->failed) lua_error(L); /* the progress function's error */
  if (rc < 0) luaL_error(L, "%s", err_msg());
}

/* A later fit of an experiment continues training with new shuffles. */
#define FIT_SEED_STRIDE 7919

/* trainer:fit(exp [, n]) -> { loss, accuracy, steps, epochs,
 * examples_per_sec, eval_loss, eval_accuracy, seconds, evals }: trains
 * on exp.train.data as the experiment says; n is the fit's number (0 the
 * first), which a resumed run matches against its checkpoint's, and which
 * moves the shuffling seed from exp.seed. */
static int t_fit(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  lua_Integer n = luaL_optinteger(L, 3, 0);
  lua_settop(L, 3);
  lsettings e;
  lsettings_read(L, 2, &e); /* its values stay on the stack during the fit */
  uint64_t seed = e.cfg.seed + (uint64_t)FIT_SEED_STRIDE * (uint64_t)n;
  /* experiment.lua refuses it, naming c:fit, before the run directory is made */
  luaL_argcheck(L, !e.train_feed, 2, "train.feed is for c:fit(exp)");
  ckpt_state cs = {.model = t->model, .opt = t->opt, .rng = ldrv_rng(L), .fit = n, .seed = seed};
  int resumed = resume_fit(L, t, &cs);
  train_cfg cfg = e.cfg;
  cfg.seed = resumed > 0 ? cs.seed : seed;
  cs.seed = cfg.seed;
  train_position from = cs.pos;
  if (resumed > 0) cfg.resume = &from;
  fit_ctx ctx = {.L = L, .fn = e.progress, .t = t, .cs = &cs};
  lua_newtable(L);
  ctx.evals = lua_gettop(L);
  cfg.on_progress = on_progress;
  cfg.on_step_end = on_step_end;
  cfg.ud = &ctx;
  train_result r = {0};
  t->fit = n;
  t->seed = cfg.seed;
  if (resumed >= 0) run_fit(L, t, &e, &cfg, &ctx, &r);
  push_result(L, &r, ctx.evals);
  if (resumed < 0) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "skipped"); /* done before the run was interrupted */
  }
  return 1;
}

/* ============================== the run directory ======================= */

/* The script's text, or NULL (stdin, unreadable). malloc'ed. */
static char *read_script(const char *path) {
  FILE *f = path && strcmp(path, "-") != 0 ? fopen(path, "rb") : NULL;
  if (!f) return NULL;
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  char buf[4096];
  size_t k;
  while (m && (k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, m);
  if (m) fclose(m);
  fclose(f);
  return text;
}

/* run.json: {"script": absolute path, "args": [...], "cwd": ...}. */
static char *run_json(lua_State *L, const char *script, int args) {
  char cwd[4096], abs[4096];
  json_t *a = json_array();
  for (lua_Integer i = 1; args && lua_rawgeti(L, args, i) == LUA_TSTRING; i++) {
    json_array_append_new(a, json_string(lua_tostring(L, -1)));
    lua_pop(L, 1);
  }
  if (args) lua_pop(L, 1);
  if (!getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
  if (!realpath(script, abs)) snprintf(abs, sizeof abs, "%s", script);
  json_t *o = json_pack("{s:s, s:o, s:s}", "script", abs, "args", a, "cwd", cwd);
  char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
  json_decref(o);
  return text;
}

/* trainer:open_run(base, name, resume_dir|nil, script|nil, args|nil,
 * tensorboard|nil) -> path */
static int t_open_run(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  const char *base = luaL_checkstring(L, 2), *name = luaL_checkstring(L, 3);
  const char *resume = luaL_optstring(L, 4, NULL), *script = luaL_optstring(L, 5, NULL);
  int args = lua_istable(L, 6) ? 6 : 0;
  tboard_opts tb;
  bool serve = lcluster_tensorboard(L, 7, "experiment", &tb);
  if (t->run) return luaL_error(L, "the experiment has a run directory already");
  if (!(t->run = calloc(1, sizeof *t->run))) return luaL_error(L, "out of memory");
  char *text = read_script(script);
  char *json = script ? run_json(L, script, args) : NULL;
  int rc = fitrun_open(t->run, base, name, resume, text, json, serve ? &tb : NULL);
  free(text);
  free(json);
  if (rc < 0) {
    free(t->run);
    t->run = NULL;
    return luaL_error(L, "%s", err_msg());
  }
  t->resume = resume != NULL;
  if (repl_hosts(L))
    rundir_event(&t->run->rd, RUNS_REPL_EVENT " (pid %ld): it stands as its last fit ended, "
                 "whatever the REPL's exit status", (long)getpid());
  lua_pushstring(L, t->run->rd.path);
  return 1;
}

/* trainer:set_checkpoint(exp): the run's checkpoints as exp.checkpointing
 * says (none without it). */
static int t_set_checkpoint(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  if (!t->run) return luaL_error(L, "checkpoints need a run directory");
  lua_settop(L, 2);
  lsettings e;
  lsettings_read(L, 2, &e);
  fitrun_set_ckpt(t->run, e.has_ckpt ? &e.ck : NULL);
  return 0;
}

/* trainer:checkpoint() -> path, or true when asked during a fit (it is
 * taken at the end of the current step). */
static int t_checkpoint(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  if (!t->run) return luaL_error(L, "checkpoint: the experiment has no run directory (runs = false)");
  if (t->in_fit) {
    t->run->requested = true;
    lua_pushboolean(L, 1);
    return 1;
  }
  ckpt_state cs = {.model = t->model, .opt = t->opt, .rng = ldrv_rng(L), .pos = t->pos,
                   .fit = t->fit, .seed = t->seed};
  if (fitrun_checkpoint(t->run, &cs) < 0) return luaL_error(L, "%s", err_msg());
  char dir[sizeof t->run->ckdir + 32];
  rundir_step(dir, sizeof dir, t->run->ckdir, t->pos.step);
  lua_pushstring(L, dir);
  return 1;
}

/* ============================== save and load =========================== */

#define SAVE_MAX_META 96

/* trainer:save(dir, meta): the model, the optimizer's state and where the
 * last fit stopped into dir (ckpt_save), `meta` (string keys to string
 * values: the experiment's description) into its manifest. */
static int t_save(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  const char *dir = luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  if (t->in_fit) return luaL_error(L, "save: not during a fit (exp:checkpoint() is)");
  const char *kv[2 * SAVE_MAX_META + 1];
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, 3)) {
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING || n == SAVE_MAX_META)
      return luaL_error(L, "save: the description must map at most %d strings to strings",
                        SAVE_MAX_META);
    kv[2 * n] = lua_tostring(L, -2);
    kv[2 * n++ + 1] = lua_tostring(L, -1); /* both stay alive in the table */
    lua_pop(L, 1);
  }
  kv[2 * n] = NULL;
  ckpt_state cs = {.model = t->model, .opt = t->opt, .rng = ldrv_rng(L), .pos = t->pos,
                   .fit = t->fit, .seed = t->seed};
  if (ckpt_save(dir, &cs, kv) < 0) return luaL_error(L, "%s", err_msg());
  return 0;
}

/* drover.train.read_saved(dir) -> the manifest's meta as a table, after
 * checking every file of dir against it. */
static int l_read_saved(lua_State *L) {
  const char *dir = luaL_checkstring(L, 1);
  manifest m;
  int rc = ckpt_open(dir, &m);
  if (rc < 0) {
    manifest_free(&m);
    return luaL_error(L, "%s", err_msg());
  }
  lua_newtable(L);
  for (char **p = m.meta; p && p[0] && p[1]; p += 2) {
    lua_pushstring(L, p[1]);
    lua_setfield(L, -2, p[0]);
  }
  manifest_free(&m);
  return 1;
}

/* trainer:restore(dir): the model's parameters, the optimizer's state and
 * the last fit's position from a save (the process's generator, which
 * drover.seed sets, is left alone). */
static int t_restore(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  const char *dir = luaL_checkstring(L, 2);
  if (t->in_fit) return luaL_error(L, "restore: not during a fit");
  ckpt_state cs = {.model = t->model, .opt = t->opt};
  if (ckpt_restore(dir, &cs) < 0) return luaL_error(L, "%s", err_msg());
  t->pos = cs.pos;
  t->fit = cs.fit;
  t->seed = cs.seed;
  return 0;
}

int ltrain_save_script(lua_State *L, const char *dir) {
  int top = lua_gettop(L);
  const char *script = NULL;
  int args = 0;
  if (lua_getglobal(L, "arg") == LUA_TTABLE) {
    args = lua_gettop(L);
    if (lua_rawgeti(L, args, 0) == LUA_TSTRING) script = lua_tostring(L, -1);
  }
  char *text = read_script(script);
  char *json = text ? run_json(L, script, args) : NULL;
  rundir rd = {0};
  snprintf(rd.path, sizeof rd.path, "%s", dir);
  int rc = text && !json ? err_set(DRV_ENOMEM, "out of memory") : 0;
  if (rc == 0 && text) rc = rundir_write(&rd, RUNDIR_RUN_LUA, text, 0644);
  if (rc == 0 && json) rc = rundir_write(&rd, RUNDIR_RUN_JSON, json, 0644);
  free(text);
  free(json);
  lua_settop(L, top);
  return rc;
}

const char *ltrain_take_resume(lua_State *L, char *buf, size_t n) {
  const char *dir = NULL;
  if (lua_getfield(L, LUA_REGISTRYINDEX, "drover.resume") == LUA_TSTRING) {
    snprintf(buf, n, "%s", lua_tostring(L, -1));
    dir = buf;
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "drover.resume");
  }
  lua_pop(L, 1);
  return dir;
}

/* drover.train.resume_dir() -> the run directory `drover run --resume`
 * gave, or nil */
static int l_resume_dir(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, "drover.resume");
  return 1;
}

/* trainer:evaluate(data [, batch]) -> { loss = ..., accuracy = ... } */
static int t_evaluate(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  const dataset *d = ldata_check(L, 2);
  lua_Integer batch = luaL_optinteger(L, 3, 256);
  luaL_argcheck(L, batch > 0, 3, "the batch size must be positive");
  unsigned metrics = lua_isnoneornil(L, 4) ? 0 : lsettings_metrics(L, 4);
  train_eval e;
  if (train_evaluate_metrics(t->model, t->loss, d, batch, metrics, &e) < 0)
    return luaL_error(L, "%s", err_msg());
  lua_createtable(L, 0, 4);
  set_num(L, "loss", e.loss);
  set_num(L, "accuracy", e.accuracy);
  if (metrics & BINEVAL_AUC) set_num(L, "auc", e.auc);
  if (metrics & BINEVAL_LOGLOSS) set_num(L, "logloss", e.logloss);
  ltrain_mark_result(L);
  return 1;
}

/* The inputs of a predict: a dataset's x or a tensor, at idx. */
const tensor *ltrain_inputs(lua_State *L, int idx) {
  if (luaL_testudata(L, idx, "drover.Dataset")) return ldata_values(L, idx)->x;
  if (luaL_testudata(L, idx, "drover.Tensor")) return ltensor_check(L, idx);
  luaL_argerror(L, idx, "expected a dataset or a tensor of inputs");
  return NULL;
}

/* The ids of a dataset at idx (loaded) as one batch of all its rows, for
 * train_predict: false when idx is a tensor or a dataset without ids. */
static bool ltrain_sparse(lua_State *L, int idx, nn_sparse *sp) {
  if (!luaL_testudata(L, idx, "drover.Dataset")) return false;
  const dataset *d = ldata_values(L, idx);
  if (!data_has_sparse(d)) return false;
  *sp = (nn_sparse){.rows = d->n, .ptr = d->sp.ptr, .ids = d->sp.ids, .vals = d->sp.vals,
                    .fields = d->sp.fields};
  return true;
}

/* trainer:predict(data [, batch]) -> [n, k] tensor, one row per input row */
static int t_predict(lua_State *L) {
  trainer *t = check_trainer(L, 1);
  const tensor *x = ltrain_inputs(L, 2);
  lua_Integer batch = luaL_optinteger(L, 3, 256);
  luaL_argcheck(L, batch > 0, 3, "the batch size must be positive");
  nn_sparse sp;
  bool has_sp = ltrain_sparse(L, 2, &sp);
  tensor *out;
  if (train_predict(t->model, x, has_sp ? &sp : NULL, batch, &out) < 0)
    return luaL_error(L, "%s", err_msg());
  ltensor_push(L, out);
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
    {"fit", t_fit}, {"evaluate", t_evaluate}, {"predict", t_predict}, {"steps", t_steps}, {"open_run", t_open_run},
    {"set_checkpoint", t_set_checkpoint}, {"checkpoint", t_checkpoint}, {"save", t_save},
    {"restore", t_restore}, {NULL, NULL}};

static const luaL_Reg trainer_meta[] = {
    {"__gc", trainer_gc}, {"__close", trainer_gc}, {"__tostring", t_tostring}, {NULL, NULL}};

static const luaL_Reg funcs[] = {
    {"new", l_new}, {"seed", l_seed}, {"resume_dir", l_resume_dir},
    {"read_saved", l_read_saved}, {"settings", lsettings_new}, {NULL, NULL}};

int luaopen_drover_train(lua_State *L) {
  ldrv_createmeta(L, TRAINER_MT, trainer_meta, trainer_methods);
  luaL_newlib(L, funcs);
  return 1;
}
