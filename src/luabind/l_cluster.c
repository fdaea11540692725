/* l_cluster.c - drover.cluster { ... }: a cluster of ps, worker, chief and
 * evaluator processes, c:fit(exp), c:evaluate(exp), c:nodes(),
 * c:predict(exp, data), c:serve { predict = exp },
 * c:shutdown { grace, timeout } (c:schedule, c:join, c:done: l_schedule.c).
 *
 * A cluster left without c:shutdown() is shut down when it is collected or
 * when the script ends (lua_close); failures found then still make the
 * script's exit status non-zero (drover_cluster_failures).
 */
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cluster/coord/coord.h"
#include "run/fitrun.h"
#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_cluster_opts.h"
#include "luabind/l_feed.h"
#include "luabind/l_settings.h"
#include "luabind/l_util.h"
#include "luabind/repl.h"
#include "train/bineval.h"
#include "ui/runs.h"

#define CLUSTER_MT "drover.Cluster"

typedef struct lcluster {
  coord *c;          /* NULL once shut down */
  char run_dir[1024];
  char address[80];
} lcluster;

/* Failures of clusters shut down by their finalizer, for the exit status. */
static int finalizer_failures;

int drover_cluster_failures(void) { return finalizer_failures; }

static lcluster *check_cluster(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, CLUSTER_MT);
}

static coord *live(lua_State *L, lcluster *lc) {
  if (!lc->c) luaL_error(L, "cluster: it was shut down (run directory %s)", lc->run_dir);
  return lc->c;
}

coord *lcluster_live(lua_State *L, int idx) { return live(L, check_cluster(L, idx)); }

coord *lcluster_get(lua_State *L, int idx) {
  lcluster *lc = luaL_testudata(L, idx, CLUSTER_MT);
  return lc ? lc->c : NULL;
}

/* Raises "cluster: <the last error>", once: messages from the
 * coordinator's option checks carry the prefix already. */
static int cluster_error(lua_State *L) {
  const char *m = err_msg();
  return strncmp(m, "cluster: ", 9) == 0 ? luaL_error(L, "%s", m) : luaL_error(L, "cluster: %s", m);
}

static int do_shutdown(lcluster *lc, double grace, double timeout, char *report, size_t n);

/* ============================== drover stop in the REPL ================== */
/* In the REPL, Ctrl-C stops a line, not the cluster: the run is the
 * cluster, so `drover stop` ends it as a script's run ends, and the REPL
 * stays. The coordinator calls on_run_stop from its tick once the stop's
 * checkpoint is taken: it interrupts the line running (a c:fit), if any,
 * as Ctrl-C; the cluster is shut down between loop turns, after that line
 * or at the prompt (lcluster_end_stopped, called by repl.c). */
#define STOPS_MAX 16
static lcluster *stopping[STOPS_MAX];
static int nstopping;

static void on_run_stop(void *ud) {
  lcluster *lc = ud;
  for (int i = 0; i < nstopping; i++)
    if (stopping[i] == lc) return;
  if (nstopping < STOPS_MAX) stopping[nstopping++] = lc;
  repl_interrupt_line();
}

static void forget_stop(lcluster *lc) {
  for (int i = 0; i < nstopping; i++)
    if (stopping[i] == lc) stopping[i--] = stopping[--nstopping];
}

bool lcluster_stop_pending(void) { return nstopping > 0; }

int lcluster_end_stopped(void) {
  int n = 0;
  for (; nstopping > 0; n++) {
    lcluster *lc = stopping[0]; /* do_shutdown forgets it */
    char report[8192];
    int failures = do_shutdown(lc, 5, 30, report, sizeof report);
    fprintf(stderr, "drover stop: the run in %s was stopped: its cluster is shut down (c:fit on "
            "it fails from now on); the REPL goes on\n", lc->run_dir);
    if (failures > 0)
      fprintf(stderr, "drover: cluster %s: %d node failure%s: %s\n", lc->run_dir, failures,
              failures == 1 ? "" : "s", report);
  }
  return n;
}

/* ============================== creation ================================= */

static int l_cluster(lua_State *L) {
  coord_opts o;
  lcluster_read_opts(L, &o); /* what it pushes keeps o's arrays alive */
  /* The Lua side's own option: how long an attach client's line may run. */
  double limit = lopts_real(L, 1, "command_limit", 10, LOPTS_POS, 86400, "cluster");
  uv_loop_t *loop = drover_lua_loop(L);

  /* user values: 1 what workers were set up from, 2 the ':' command thread */
  lcluster *lc = lua_newuserdatauv(L, sizeof *lc, 2);
  memset(lc, 0, sizeof *lc);
  luaL_setmetatable(L, CLUSTER_MT);
  char resume[4096];
  o.resume_dir = ltrain_take_resume(L, resume, sizeof resume);
  /* `--resume --workers N`: for the cluster that takes the resume */
  if (lua_getfield(L, LUA_REGISTRYINDEX, "drover.resume_workers") == LUA_TNUMBER && o.resume_dir) {
    o.resume_workers = (int)lua_tointeger(L, -1);
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "drover.resume_workers");
  }
  lua_pop(L, 1);
  int rc = coord_start(loop, &o, &lc->c);
  if (rc < 0) return cluster_error(L);
  snprintf(lc->run_dir, sizeof lc->run_dir, "%s", coord_run_dir(lc->c));
  /* what `drover run --resume` runs again (a resumed run keeps its own) */
  if (!o.resume_dir && ltrain_save_script(L, lc->run_dir) < 0)
    fprintf(stderr, "drover: %s (this run cannot be resumed)\n", err_msg());
  snprintf(lc->address, sizeof lc->address, "%s", coord_address(lc->c));
  if (repl_hosts(L)) {
    coord_set_stop_handler(lc->c, on_run_stop, lc);
    coord_note(lc->c, RUNS_REPL_EVENT " (pid %ld): drover stop shuts its cluster down, the "
               "REPL goes on; it stands as its last fit ended", (long)getpid());
  }
  ldash_cluster_up(L, -1, lc->c, limit);
  return 1;
}

/* ============================== fit ====================================== */

typedef struct fit_ctx {
  lua_State *L;
  lsettings e;     /* the experiment's settings and values on the stack */
  int progress_fn; /* stack index of the progress function, 0 none */
  bool failed;     /* the progress function raised; its error is in the registry */
} fit_ctx;

#define set_num ldrv_set_num
#define set_int ldrv_set_int

static int call_progress(void *ud, const train_progress *p) {
  fit_ctx *x = ud;
  lua_State *L = x->L;
  lua_pushvalue(L, x->progress_fn);
  ltrain_push_progress(L, p);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    lua_setfield(L, LUA_REGISTRYINDEX, "drover.cluster.error");
    x->failed = true;
    return 1;
  }
  int stop = lua_toboolean(L, -1) == 0 && !lua_isnil(L, -1);
  lua_pop(L, 1);
  return stop;
}

/* Settings a cluster fit cannot honour: refused rather than ignored. A
 * plateau schedule is driven by the evals, so it needs them (early
 * stopping does everywhere: lsettings_read refuses it without them). */
static void refuse_in_process_only(lua_State *L, const lsettings *e) {
  const optim_cfg *o = loptim_check(L, e->optimizer);
  bool evals = e->cfg.eval && e->cfg.eval_every > 0;
  if (o->sched.kind == OSCHED_PLATEAU && !evals)
    luaL_error(L, "experiment: optim.schedule.plateau needs periodic evals (eval = { data = ..., "
               "every = N })");
}

/* Reads exp (at 2) into x->e and a; the values it refers to stay on the
 * stack (x->e's indices). */
static void read_experiment(lua_State *L, fit_ctx *x, coord_fit_args *a) {
  lua_settop(L, 2);
  *x = (fit_ctx){.L = L};
  lsettings_read(L, 2, &x->e);
  refuse_in_process_only(L, &x->e);
  train_cfg *cfg = &x->e.cfg;
  x->progress_fn = x->e.progress;
  if (x->progress_fn) cfg->on_progress = call_progress, cfg->ud = x;
  *a = (coord_fit_args){
      .model = lnn_check_module(L, x->e.model), /* tables: sharded over the ps (coord_sparse.c) */
      .loss = lnn_check_loss(L, x->e.loss),
      .optim = loptim_check(L, x->e.optimizer),
      .train = x->e.train_data ? ldata_check(L, x->e.train_data) : NULL,
      .cfg = cfg,
      .sync = x->e.sync,
      .backup_workers = x->e.backup_workers,
      .ckpt = x->e.has_ckpt ? &x->e.ck : NULL,
  };
}

/* The workers now hold this model and data: a worker restarted later is
 * set up from them (coord_setup's contract), so the cluster keeps them. */
static void anchor_experiment(lua_State *L, const lsettings *e) {
  lua_createtable(L, 4, 0);
  lua_pushvalue(L, e->model), lua_rawseti(L, -2, 1);
  lua_pushvalue(L, e->loss), lua_rawseti(L, -2, 2);
  lua_pushvalue(L, e->optimizer), lua_rawseti(L, -2, 3);
  if (e->train_data) lua_pushvalue(L, e->train_data), lua_rawseti(L, -2, 4);
  lua_setiuservalue(L, 1, 1);
}

/* An experiment's tensorboard = ... fitted here: served by the
 * coordinator (unless it serves one already), until the cluster stops. */
static void experiment_tensorboard(lua_State *L, coord *c) {
  tboard_opts o;
  lua_getfield(L, 2, "tensorboard");
  bool on = lcluster_tensorboard(L, -1, "experiment", &o);
  lua_pop(L, 1);
  if (on && coord_tensorboard(c, &o) < 0) luaL_error(L, "experiment: %s", err_msg());
}

/* c:fit(exp) -> the result table of exp:fit(), trained on the cluster. */
static int l_fit(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  /* c:fit(exp, { epochs = ... }) would train with exp's settings */
  if (lua_gettop(L) > 2)
    return luaL_error(L, "cluster: fit takes one argument, the experiment (its settings are "
                      "the experiment's: train = { epochs = ... })");
  fit_ctx x;
  coord_fit_args a;
  read_experiment(L, &x, &a);
  experiment_tensorboard(L, c);
  lfeed feed;
  if (x.e.train_feed) {
    lfeed_open(L, &x.e, &feed); /* may push a stream it opened: kept until the end */
    a.feed = &feed.src;
  }
  train_result res;
  train_result_init(&res);
  int rc = coord_fit(c, &a, &res);
  if (a.feed) lfeed_close(&feed);
  if (rc == DRV_EINTERRUPTED || (x.failed && err_interrupted())) /* as in process (fitrun.c) */
    coord_note(c, "interrupted: the fit stopped at step %lld", (long long)res.steps);
  fflush(stdout);
  anchor_experiment(L, &x.e);
  if (err_interrupted()) repl_raise_interrupted(L, res.steps); /* however the fit learnt of it */
  if (x.failed) {
    lua_getfield(L, LUA_REGISTRYINDEX, "drover.cluster.error");
    return lua_error(L);
  }
  if (rc < 0) return cluster_error(L);
  ltrain_push_result(L, &res);
  if (coord_fit_skipped(c)) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "skipped"); /* done before the run was interrupted */
  }
  if (a.sync) {
    lua_pushinteger(L, coord_global_steps(c));
    lua_setfield(L, -2, "global_steps");
  }
  if (a.feed) {
    int64_t fed, trained;
    coord_feed_counts(c, &fed, &trained);
    lua_pushinteger(L, fed);
    lua_setfield(L, -2, "fed");
    lua_pushinteger(L, trained);
    lua_setfield(L, -2, "batches");
  }
  return 1;
}

static const char *const feed_keys[] = {"batch", "epochs", "shuffle", "seed", "feed_timeout", NULL};

/* c:feed(source [, { batch = 32, epochs = 1, shuffle = true, seed = 0,
 * feed_timeout = 600 }]) -> { fed, taken }: streams source's batches (as
 * train.feed takes them) into the workers' input queues, where scheduled
 * functions read them with w:next_batch(n); returns once all are taken
 * (or a worker's w:terminate() stopped it). */
static int l_feed(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  lua_settop(L, 3);
  if (lua_isnil(L, 2)) return luaL_argerror(L, 2, "a feed source (a dataset, a function, a stream, a path)");
  lopts_check_keys(L, 3, "c:feed", feed_keys);
  lsettings e;
  memset(&e, 0, sizeof e);
  e.train_feed = 2;
  /* as train = { ... } takes them */
  e.cfg.batch = lopts_int(L, 3, "batch", 32, LOPTS_POS, LOPTS_COUNT_MAX, "c:feed");
  e.cfg.epochs = lopts_int(L, 3, "epochs", 1, LOPTS_POS, LOPTS_COUNT_MAX, "c:feed");
  e.cfg.shuffle = lopts_bool(L, 3, "shuffle", 1, "c:feed");
  e.cfg.seed = (uint64_t)lopts_int(L, 3, "seed", 0, LOPTS_NONNEG, LUA_MAXINTEGER, "c:feed");
  e.feed_timeout = lopts_real(L, 3, "feed_timeout", 0, LOPTS_POS, HUGE_VAL, "c:feed");
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "external") == 0)
    return luaL_error(L, "c:feed: \"external\" feeds a fit (train = { feed = \"external\" })");
  /* as train.shuffle: only a dataset's batches are ordered here */
  if (lua_istable(L, 3) && lua_getfield(L, 3, "shuffle") != LUA_TNIL &&
      !luaL_testudata(L, 2, "drover.Dataset"))
    return luaL_error(L, "c:feed: shuffle orders a dataset's batches: any other source comes in "
                         "its own order (shuffle it where it is made)");
  if (lua_istable(L, 3)) lua_pop(L, 1);
  lfeed feed;
  lfeed_open(L, &e, &feed);
  int64_t fed, taken;
  int rc = coord_feed(c, &feed.src, &fed, &taken);
  lfeed_close(&feed);
  if (rc < 0) return cluster_error(L);
  lua_createtable(L, 0, 2);
  set_int(L, "fed", fed);
  set_int(L, "taken", taken);
  return 1;
}

/* c:setup(exp): the ps nodes get exp.model's variables and the workers
 * the model and their shards, without training: closures train via w. */
static int l_setup(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  fit_ctx x;
  coord_fit_args a;
  read_experiment(L, &x, &a);
  if (coord_setup(c, &a) < 0) return cluster_error(L);
  anchor_experiment(L, &x.e);
  return 0;
}

/* c:evaluate(exp [, dataset]) -> { loss, accuracy } of the cluster's
 * current parameters (pulled from the ps nodes into exp.model); auc and
 * logloss too when exp.eval.metrics asks. */
static int l_evaluate(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  ltrain_check_experiment(L, 2);
  bool given = !lua_isnoneornil(L, 3);
  lua_settop(L, 3);
  lua_getfield(L, 2, "model"); /* 4 */
  lua_getfield(L, 2, "loss");  /* 5 */
  lua_getfield(L, 2, "train"); /* 6 */
  lua_getfield(L, 2, "eval");  /* 7 */
  const dataset *d;
  if (given) {
    d = ldata_check(L, 3);
  } else {
    if (lua_isnil(L, 7)) return luaL_error(L, "cluster: evaluate needs a dataset (or exp.eval.data)");
    lua_getfield(L, 7, "data");
    d = ldata_check(L, -1);
  }
  lua_getfield(L, 6, "batch");
  int64_t batch = lua_tointeger(L, -1);
  lua_pop(L, 1);
  unsigned metrics = 0;
  if (lua_istable(L, 7) && lua_getfield(L, 7, "metrics") != LUA_TNIL)
    metrics = lsettings_metrics(L, -1);
  nn_module *model = lnn_check_module(L, 4); /* tables: their rows come by SPARSE_DUMP */
  int rc = coord_pull(c, model);
  train_eval e;
  if (rc == 0)
    rc = train_evaluate_metrics(model, lnn_check_loss(L, 5), d, batch > 0 ? batch : 256, metrics,
                                &e);
  if (rc < 0) return cluster_error(L);
  lua_createtable(L, 0, 4);
  set_num(L, "loss", e.loss);
  set_num(L, "accuracy", e.accuracy);
  if (metrics & BINEVAL_AUC) set_num(L, "auc", e.auc);
  if (metrics & BINEVAL_LOGLOSS) set_num(L, "logloss", e.logloss);
  ltrain_mark_result(L);
  return 1;
}

/* The experiment at idx's train.batch, else 256: a predict's batch. */
static int64_t exp_batch(lua_State *L, int idx) {
  lua_getfield(L, idx, "train");
  if (lua_istable(L, -1)) lua_getfield(L, -1, "batch");
  else lua_pushnil(L);
  int64_t batch = lua_isinteger(L, -1) && lua_tointeger(L, -1) > 0 ? lua_tointeger(L, -1) : 256;
  lua_pop(L, 2);
  return batch;
}

/* c:serve { predict = exp, batch = n, requests = n, idle = s } ->
 * { requests, rows, idle }: answers predict requests from clients holding
 * the run's control key (clients/python Run.predict) with exp.model's
 * outputs (the cluster's values when it trained exp), until `requests`
 * are answered or `idle` seconds pass without one (neither: until
 * Ctrl-C). A model with sparse tables: each request carries its rows' ids
 * and the workers get the tables' rows, as for c:predict. */
static int l_serve(lua_State *L) {
  static const char *const keys[] = {"predict", "batch", "requests", "idle", NULL};
  coord *c = live(L, check_cluster(L, 1));
  luaL_checktype(L, 2, LUA_TTABLE);
  lopts_check_keys(L, 2, "c:serve", keys);
  lua_settop(L, 2);
  if (lua_getfield(L, 2, "predict") == LUA_TNIL) /* 3 */
    return luaL_error(L, "c:serve: predict = exp (the experiment whose model answers) is required");
  ltrain_check_experiment(L, 3);
  coord_serve_opts o = {
      .batch = lopts_int(L, 2, "batch", 0, LOPTS_NONNEG, LOPTS_COUNT_MAX, "c:serve"),
      .requests = lopts_int(L, 2, "requests", 0, LOPTS_NONNEG, LUA_MAXINTEGER, "c:serve"),
      .idle = lopts_real(L, 2, "idle", 0, LOPTS_NONNEG, HUGE_VAL, "c:serve")};
  if (o.batch == 0) o.batch = exp_batch(L, 3);
  lua_getfield(L, 3, "model"); /* 4: anchored on the stack while serving */
  nn_module *model = lnn_check_module(L, 4);
  coord_serve_stats st;
  if (coord_serve(c, model, &o, &st) < 0) return cluster_error(L);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, st.requests);
  lua_setfield(L, -2, "requests");
  lua_pushinteger(L, st.rows);
  lua_setfield(L, -2, "rows");
  lua_pushboolean(L, st.idle);
  lua_setfield(L, -2, "idle");
  return 1;
}

/* c:predict(exp, data [, { batch = n }]) -> [n, k] tensor: exp.model's
 * outputs for every input row, in order, computed on the workers; a
 * dataset's ids go with its rows (a model with sparse tables needs them). */
static int l_predict(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  ltrain_check_experiment(L, 2);
  /* A dataset read from a file stays on disk here: the workers read it. */
  const dataset *d = luaL_testudata(L, 3, "drover.Dataset") ? ldata_check(L, 3) : NULL;
  const char *recipe = d ? d->recipe : NULL;
  const tensor *x = recipe ? NULL : ltrain_inputs(L, 3);
  int64_t batch = 0;
  if (!lua_isnoneornil(L, 4)) {
    luaL_checktype(L, 4, LUA_TTABLE);
    if (lua_getfield(L, 4, "batch") != LUA_TNIL &&
        (!lua_isinteger(L, -1) || (batch = lua_tointeger(L, -1)) < 1))
      luaL_error(L, "cluster: predict: batch must be a positive integer");
    lua_pop(L, 1);
  }
  lua_getfield(L, 2, "model");
  nn_module *model = lnn_check_module(L, -1); /* tables: their rows go to the workers */
  tensor *shape = NULL; /* files mode: [0, ...], the rows' shape */
  if (recipe) {
    int64_t sh[TENSOR_MAXDIM];
    memcpy(sh, d->x_shape, sizeof sh);
    sh[0] = 0;
    if (d->x) memcpy(sh + 1, d->x->shape + 1, sizeof sh - sizeof sh[0]);
    if (!(shape = tensor_new(d->x ? d->x->ndim : d->x_ndim, sh))) return luaL_error(L, "out of memory");
    ltensor_push(L, shape); /* freed by the collector */
    x = shape;
  }
  if (batch <= 0) batch = exp_batch(L, 2);
  tensor *out;
  if (coord_predict(c, model, x, d, recipe, recipe ? d->n : 0, batch, &out) < 0) return cluster_error(L);
  ltensor_push(L, out);
  return 1;
}

/* c:checkpoint() -> true: a checkpoint of the cluster's variables under
 * <run>/checkpoints (taken between two steps when called during c:fit). */
static int l_checkpoint(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  if (coord_checkpoint(c) < 0) return luaL_error(L, "cluster: %s", err_msg());
  lua_pushboolean(L, 1);
  return 1;
}

/* c:scale { worker = N }: true once the change is made (during a fit:
 * once it started); an error saying why it is refused (coord_scale). */
static int l_scale(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char *const keys[] = {"worker", "ps", "chief", "evaluator", NULL};
  lopts_check_keys(L, 2, "c:scale", keys);
  /* another role: refused by coord_scale, saying why (only workers are
   * interchangeable nodes that can come and go) */
  int role = ROLE_WORKER;
  for (int k = 1; keys[k]; k++) {
    if (lua_getfield(L, 2, keys[k]) != LUA_TNIL) role = wire_role_from_name(keys[k]);
    lua_pop(L, 1);
  }
  const char *key = wire_role_name(role);
  if (lua_getfield(L, 2, key) != LUA_TNUMBER)
    return luaL_error(L, "c:scale: worker = N is required");
  lua_pop(L, 1);
  int n = (int)lopts_int(L, 2, key, 0, LOPTS_NONNEG, COORD_MAX_PER_ROLE, "c:scale");
  if (coord_scale(c, role, n, "lua") < 0) return luaL_error(L, "%s", err_msg());
  lua_pushboolean(L, 1);
  return 1;
}

/* c:save(path): the cluster's current parameters, pulled into the model
 * last set up or fitted, as one safetensors file (model:save's format). */
static int l_save(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  const char *path = luaL_checkstring(L, 2);
  if (lua_getiuservalue(L, 1, 1) != LUA_TTABLE)
    return luaL_error(L, "cluster: nothing to save before c:fit or c:setup");
  lua_rawgeti(L, -1, 1);
  nn_module *model = lnn_check_module(L, -1);
  int rc = coord_pull(c, model);
  if (rc == 0) rc = nn_save(model, path);
  if (rc < 0) return luaL_error(L, "cluster: %s", err_msg());
  return 0;
}

/* ============================== shutdown ================================= */

static int do_shutdown(lcluster *lc, double grace, double timeout, char *report, size_t n) {
  forget_stop(lc);
  ldash_cluster_down(lc->c);
  int failures = coord_shutdown(lc->c, grace, timeout, report, n);
  coord_free(lc->c);
  lc->c = NULL;
  return failures;
}

/* c:shutdown { grace = 5, timeout = 30 }: raises if any node failed. */
static int l_shutdown(lua_State *L) {
  lcluster *lc = check_cluster(L, 1);
  if (!lc->c) return 0;
  double grace = 5, timeout = 30;
  if (lua_istable(L, 2)) {
    static const char *const keys[] = {"grace", "timeout", NULL};
    lopts_check_keys(L, 2, "shutdown", keys);
    grace = lopts_real(L, 2, "grace", grace, LOPTS_NONNEG, HUGE_VAL, "shutdown");
    timeout = lopts_real(L, 2, "timeout", timeout, LOPTS_NONNEG, HUGE_VAL, "shutdown");
  }
  char report[8192];
  int failures = do_shutdown(lc, grace, timeout, report, sizeof report);
  if (failures > 0)
    return luaL_error(L, "cluster: %d node failure%s: %s", failures, failures == 1 ? "" : "s", report);
  return 0;
}

static int l_gc(lua_State *L) {
  lcluster *lc = check_cluster(L, 1);
  if (!lc->c) return 0;
  char report[8192];
  int failures = do_shutdown(lc, 0, 5, report, sizeof report);
  if (failures > 0) {
    finalizer_failures += failures;
    fprintf(stderr, "drover: cluster %s: %d node failure%s: %s\n", lc->run_dir, failures,
            failures == 1 ? "" : "s", report);
  }
  return 0;
}

/* ============================== queries ================================== */

/* t[k] = s on the table on top, unless s is empty. */
static void set_str(lua_State *L, const char *k, const char *s) {
  if (!s[0]) return;
  lua_pushstring(L, s);
  lua_setfield(L, -2, k);
}

/* c:tables() -> { {name, rows, dim, held, touched, bytes_per_step}, ... }:
 * the fit's sparse tables as the nodes last said (coord_tables). */
static int l_tables(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  coord_table_stat st[64];
  int n = coord_tables(c, st, 64);
  if (n > 64) n = 64;
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_createtable(L, 0, 6);
    set_str(L, "name", st[i].name);
    set_int(L, "rows", (int64_t)st[i].rows);
    set_int(L, "dim", (int64_t)st[i].dim);
    set_int(L, "held", (int64_t)st[i].held);
    set_num(L, "touched", st[i].touched);
    set_num(L, "bytes_per_step", st[i].bytes);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_nodes(lua_State *L) {
  coord *c = live(L, check_cluster(L, 1));
  int n;
  const coord_node *nodes = coord_nodes(c, &n);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    const coord_node *nd = &nodes[i];
    lua_createtable(L, 0, 10);
    lua_pushstring(L, wire_role_name(nd->role));
    lua_setfield(L, -2, "role");
    set_int(L, "index", nd->index);
    lua_pushstring(L, coord_state_name(coord_node_status(nd)));
    lua_setfield(L, -2, "state");
    set_int(L, "pid", nd->pid);
    lua_pushstring(L, nd->host);
    lua_setfield(L, -2, "host");
    if (nd->port) set_int(L, "port", nd->port);
    set_int(L, "cpus", nd->got.threads); /* BLAS threads */
    set_int(L, "affinity", nd->got.affinity);
    set_int(L, "memory", (int64_t)nd->got.memory);
    set_str(L, "hostname", nd->got.hostname);
    set_str(L, "gpus", nd->got.gpus);
    set_str(L, "slurm_job", nd->got.slurm_job);
    set_str(L, "slurm_step", nd->got.slurm_step);
    set_str(L, "slurm_node", nd->got.slurm_node);
    if (nd->launcher) set_str(L, "launcher", nd->launcher);
    set_str(L, "where", nd->where);
    char links[256];
    coord_node_links(c, i, links, sizeof links);
    set_str(L, "links", links);
    set_int(L, "rss", (int64_t)nd->rss);
    set_int(L, "steps", nd->steps);
    set_int(L, "restarts", nd->restarts);
    set_int(L, "inflight", nd->inflight);
    if (coord_feed_backlog(c, i) >= 0) set_int(L, "backlog", coord_feed_backlog(c, i));
    if (nd->role == ROLE_WORKER || nd->role == ROLE_CHIEF)
      set_num(L, "examples_per_sec", nd->examples_per_sec);
    lua_pushstring(L, nd->log);
    lua_setfield(L, -2, "log");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_tostring(lua_State *L) {
  lcluster *lc = check_cluster(L, 1);
  if (!lc->c) {
    lua_pushfstring(L, "drover.cluster (shut down) %s", lc->run_dir);
    return 1;
  }
  int n, counts[ROLE_COUNT] = {0};
  const coord_node *nodes = coord_nodes(lc->c, &n);
  for (int i = 0; i < n; i++) counts[nodes[i].role]++;
  lua_pushfstring(L, "drover.cluster %s: %d ps, %d chief, %d worker, %d evaluator; run %s",
                  lc->address, counts[ROLE_PS], counts[ROLE_CHIEF], counts[ROLE_WORKER],
                  counts[ROLE_EVALUATOR], lc->run_dir);
  return 1;
}

static int l_index(lua_State *L) {
  lcluster *lc = check_cluster(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "run_dir") == 0) {
    lua_pushstring(L, lc->run_dir);
    return 1;
  }
  if (strcmp(k, "address") == 0) {
    lua_pushstring(L, lc->address);
    return 1;
  }
  luaL_getmetafield(L, 1, "__methods");
  lua_getfield(L, -1, k);
  return 1;
}

static const luaL_Reg methods[] = {
    {"fit", l_fit}, {"feed", l_feed}, {"setup", l_setup}, {"evaluate", l_evaluate}, {"predict", l_predict}, {"serve", l_serve}, {"shutdown", l_shutdown}, {"nodes", l_nodes}, {"tables", l_tables},
    {"checkpoint", l_checkpoint}, {"save", l_save}, {"scale", l_scale},
    {NULL, NULL}};

static const luaL_Reg meta[] = {
    {"__gc", l_gc}, {"__close", l_gc}, {"__tostring", l_tostring}, {"__index", l_index},
    {NULL, NULL}};

int luaopen_drover_cluster(lua_State *L) {
  ldrv_createmeta(L, CLUSTER_MT, meta, methods);
  luaL_getmetatable(L, CLUSTER_MT);
  lua_getfield(L, -1, "__methods"); /* more methods from their own files */
  lschedule_open(L);
  ldash_open(L);
  lua_pop(L, 2);
  lua_pushcfunction(L, l_cluster);
  return 1;
}
