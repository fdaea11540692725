/* l_settings.c - an experiment's settings: every check of its fields, at
 * drover.experiment { ... } and again at each fit (l_settings.h).
 *
 * One reader serves both: read_all walks a description (the table given to
 * drover.experiment, whose unknown fields are errors) or an experiment (the
 * fields lsettings_new returned, perhaps changed since). The fields are
 * read in the order drover.experiment documents them, so the first mistake
 * is the one reported.
 */
#include "luabind/l_settings.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/webhdfs.h"
#include "luabind/l_cluster_opts.h"
#include "luabind/l_opts.h"
#include "luabind/l_util.h"
#include "numeric/optim_sched.h"
#include "train/bineval.h"

#define WHAT "experiment"

/* Sorted: the error for an unknown field lists them in this order. */
static const char *const top_fields[] = {
    "backup_workers", "checkpoint", "eval", "loss", "mode", "model", "name", "optimizer",
    "progress", "runs", "seed", "stop", "tensorboard", "train", "verbose", NULL};
static const char *const train_fields[] = {"batch", "data", "epochs", "feed", "feed_timeout",
                                           "feeders", "max_steps", "reshard", "shuffle",
                                           NULL};
static const char *const eval_fields[] = {"batch", "data", "every", "metrics", NULL};
static const char *const checkpoint_fields[] = {"dir", "every", "every_seconds", "keep",
                                                "keep_best", NULL};
static const char *const keep_best_fields[] = {"metric", "mode", NULL};
static const char *const stop_fields[] = {"metric", "min_delta", "mode", "patience", NULL};

/* Raises "experiment: " and the formatted message (lua_pushfstring's
 * formats) at the caller's line, as luaL_error does. */
static int fail(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  luaL_where(L, 1);
  lua_pushliteral(L, WHAT ": ");
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_concat(L, 3);
  return lua_error(L);
}

/* Pushes t[key] (t at index tbl; tbl 0: nil); returns its type. */
static int push(lua_State *L, int tbl, const char *key) {
  if (!tbl) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  return lua_getfield(L, tbl, key);
}

/* Whether the value at idx is a drover userdata of type `name`. */
static bool is_kind(lua_State *L, int idx, const char *name) {
  if (lua_type(L, idx) != LUA_TUSERDATA) return false;
  int t = luaL_getmetafield(L, idx, "__name"); /* pushed unless nil */
  bool is = t == LUA_TSTRING && strcmp(lua_tostring(L, -1), name) == 0;
  if (t != LUA_TNIL) lua_pop(L, 1);
  return is;
}

/* Pushes t[key], which must be a drover `name` (article: how messages
 * name it); returns its index. */
static int want(lua_State *L, int tbl, const char *key, const char *name, const char *field,
                const char *article) {
  push(L, tbl, key);
  if (!is_kind(L, -1, name)) fail(L, "%s must be %s (got %s)", field, article, lopts_show(L, -1));
  return lua_gettop(L);
}

/* Pushes t[key], the sub-table `field` ("checkpoint.keep_best") with the
 * fields `keys`, and returns its index; nil is 0 (nothing pushed) when
 * optional. */
static int sub_table(lua_State *L, int tbl, const char *key, const char *field,
                     const char *example, const char *const *keys, bool optional) {
  int t = push(L, tbl, key);
  if (t == LUA_TNIL && optional) {
    lua_pop(L, 1);
    return 0;
  }
  if (t != LUA_TTABLE) fail(L, "%s must be a table %s (got %s)", field, example, lopts_show(L, -1));
  char what[64];
  snprintf(what, sizeof what, WHAT ": %s", field);
  lopts_check_fields(L, -1, what, keys);
  return lua_gettop(L);
}

/* A string field: def when nil, else one of the NULL-ended `choices`
 * (NULL: any non-empty string); returns it (alive in the table). */
static const char *string_field(lua_State *L, int tbl, const char *key, const char *def,
                                const char *field, const char *const *choices,
                                const char *expected) {
  int t = push(L, tbl, key);
  const char *v = t == LUA_TNIL ? def : t == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  bool ok = v && *v;
  if (ok && choices) {
    ok = false;
    for (int i = 0; choices[i] && !ok; i++) ok = strcmp(choices[i], v) == 0;
  }
  if (!ok) fail(L, "%s must be %s (got %s)", field, expected, lopts_show(L, -1));
  lua_pop(L, 1);
  return v;
}

static const char *const max_min[] = {"max", "min", NULL};

/* ============================== train =================================== */

static bool is_feed_source(lua_State *L, int idx) {
  int t = lua_type(L, idx);
  return (t == LUA_TSTRING && lua_rawlen(L, idx) > 0) || t == LUA_TFUNCTION ||
         is_kind(L, idx, "drover.Dataset") || is_kind(L, idx, "drover.Stream");
}

/* What a train.feed other than a dataset is, for messages. */
static const char *feed_kind(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TFUNCTION) return "a function";
  if (lua_type(L, idx) != LUA_TSTRING) return "a stream";
  if (strcmp(lua_tostring(L, idx), "external") == 0) return "external feeders";
  return strcmp(lua_tostring(L, idx), "-") == 0 ? "stdin" : "a file";
}

/* train.feed: a dataset, a function returning the next x, y (nil at the
 * end), a stream (data.stream), a path or "-" (a stream of its lines), or
 * "external" (feeders on the control port); train.data then is absent. */
static void read_feed(lua_State *L, int train, lsettings *s) {
  bool has_feeders = push(L, train, "feeders") != LUA_TNIL;
  lua_pop(L, 1);
  int feed = push(L, train, "feed");
  bool external = feed == LUA_TSTRING && strcmp(lua_tostring(L, -1), "external") == 0;
  if (has_feeders && !external)
    fail(L, "train.feeders counts external feeders: it needs train.feed = \"external\"");
  if (feed == LUA_TNIL) {
    lua_pop(L, 1);
    if (push(L, train, "feed_timeout") != LUA_TNIL) fail(L, "train.feed_timeout needs train.feed");
    lua_pop(L, 1);
    s->train_data = want(L, train, "data", "drover.Dataset", "train.data", "a dataset");
    return;
  }
  if (!is_feed_source(L, -1))
    fail(L, "train.feed must be a dataset, a function returning x, y, a stream (data.stream), a "
            "path, \"-\" (stdin) or \"external\" (got %s)", lopts_show(L, -1));
  s->train_feed = lua_gettop(L);
  /* The coordinator orders a dataset's batches; any other source's come
   * in its own order, which a shuffle here cannot change. */
  if (push(L, train, "shuffle") != LUA_TNIL && !is_kind(L, -2, "drover.Dataset"))
    fail(L, "train.shuffle orders a dataset's batches: a feed from %s comes in its own order "
            "(shuffle it where it is made)", feed_kind(L, -2));
  lua_pop(L, 1);
  if (push(L, train, "data") != LUA_TNIL)
    fail(L, "train.data and train.feed are two sources: give one (a dataset can be the feed)");
  lua_pop(L, 1);
  s->feed_timeout = lopts_real(L, train, "feed_timeout", 0, LOPTS_POS, HUGE_VAL, WHAT ": train");
  s->feeders = (int)lopts_int(L, train, "feeders", 0, LOPTS_POS, INT_MAX, WHAT ": train");
}

static void read_train(lua_State *L, int idx, lsettings *s) {
  int train = sub_table(L, idx, "train", "train", "{ data = ..., batch = ..., epochs = ... }",
                        train_fields, false);
  read_feed(L, train, s);
  const char *what = WHAT ": train";
  s->cfg.batch = lopts_int(L, train, "batch", 32, LOPTS_POS, LOPTS_COUNT_MAX, what);
  s->cfg.epochs = lopts_int(L, train, "epochs", 1, LOPTS_POS, LOPTS_COUNT_MAX, what);
  s->shuffle_given = push(L, train, "shuffle") != LUA_TNIL;
  lua_pop(L, 1);
  s->cfg.shuffle = lopts_bool(L, train, "shuffle", true, what);
  s->cfg.max_steps = lopts_int(L, train, "max_steps", 0, LOPTS_NONNEG, LOPTS_COUNT_MAX, what);
  if (push(L, train, "reshard") != LUA_TNIL) {
    const char *r = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (!r || (strcmp(r, "epoch") != 0 && strcmp(r, "step") != 0))
      fail(L, "train.reshard must be \"epoch\" or \"step\" (got %s)",
           r ? r : luaL_typename(L, -1));
    s->cfg.reshard_step = strcmp(r, "step") == 0;
  }
  lua_pop(L, 1);
}

/* ============================== eval and stop =========================== */

unsigned lsettings_metrics(lua_State *L, int idx) {
  unsigned bits = 0;
  lua_pushvalue(L, idx);
  if (!lua_istable(L, -1))
    fail(L, "eval.metrics must be a list of names, e.g. { \"auc\", \"logloss\" } (got %s)",
         luaL_typename(L, -1));
  lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    const char *name = lua_tostring(L, -1);
    int bit = lua_type(L, -1) == LUA_TSTRING ? bineval_metric(name) : -1;
    if (bit < 0)
      fail(L, "eval.metrics[%I]: unknown metric %s (known: " BINEVAL_NAMES ")", i,
           name ? name : luaL_typename(L, -1));
    bits |= (unsigned)bit;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return bits;
}

/* eval.metrics = { "auc", "logloss" }: BINEVAL_* bits. */
static unsigned read_metrics(lua_State *L, int eval) {
  unsigned bits = push(L, eval, "metrics") == LUA_TNIL ? 0 : lsettings_metrics(L, -1);
  lua_pop(L, 1);
  return bits;
}

static void read_eval(lua_State *L, int idx, lsettings *s) {
  int eval = sub_table(L, idx, "eval", "eval", "{ data = ..., every = ... }", eval_fields, true);
  s->eval_batch = s->cfg.batch;
  if (!eval) return;
  s->eval_data = want(L, eval, "data", "drover.Dataset", "eval.data", "a dataset");
  const dataset *d = ldata_check(L, s->eval_data);
  int tdata = s->train_data ? s->train_data : s->train_feed;
  const dataset *t = tdata && is_kind(L, tdata, "drover.Dataset") ? ldata_check(L, tdata) : NULL;
  if (t && d->features != t->features)
    fail(L, "eval.data has %I features but train.data has %I", (lua_Integer)d->features,
         (lua_Integer)t->features);
  const char *what = WHAT ": eval";
  s->cfg.eval = d;
  s->cfg.eval_every = lopts_int(L, eval, "every", 0, LOPTS_NONNEG, LOPTS_COUNT_MAX, what);
  s->eval_batch = lopts_int(L, eval, "batch", s->cfg.batch, LOPTS_POS, LOPTS_COUNT_MAX, what);
  s->cfg.metrics = read_metrics(L, eval);
}

/* A watched metric the evals compute only when asked (AUC, log loss) must
 * be asked for: refused before the fit rather than never observed. */
static void need_metric(lua_State *L, const lsettings *s, optim_metric m, const char *what) {
  unsigned need = m == OMETRIC_EVAL_AUC       ? BINEVAL_AUC
                  : m == OMETRIC_EVAL_LOGLOSS ? BINEVAL_LOGLOSS
                                              : 0;
  const char *name = optim_metric_name(m);
  if (need && (!s->cfg.eval || !(s->cfg.metrics & need)))
    fail(L, "%s = \"%s\" needs the evals to compute it: eval = { ..., metrics = { \"%s\" } }",
         what, name, name + 5);
}

/* optim.schedule.plateau { metric = ... } on the optimizer. */
static void read_plateau(lua_State *L, const lsettings *s) {
  const optim_cfg *o = loptim_check(L, s->optimizer);
  if (o->sched.kind == OSCHED_PLATEAU)
    need_metric(L, s, o->sched.metric, "optim.schedule.plateau: metric");
}

/* stop = { metric = "eval_loss", mode = "min", patience = N, min_delta = 0 }:
 * early stopping on the periodic evals. */
static void read_stop(lua_State *L, int idx, lsettings *s) {
  int stop = sub_table(L, idx, "stop", "stop",
                       "{ metric = \"eval_loss\", mode = \"min\", patience = 3 }", stop_fields,
                       true);
  if (!stop) return;
  static const char *const metrics[] = {"eval_loss", "eval_accuracy", "eval_auc", "eval_logloss",
                                        NULL};
  const char *metric = string_field(L, stop, "metric", NULL, "stop.metric", metrics,
                                    "\"eval_loss\", \"eval_accuracy\", \"eval_auc\" or "
                                    "\"eval_logloss\"");
  optim_metric m = (optim_metric)optim_metric_from_name(metric);
  bool up = optim_metric_maximize(m);
  const char *mode = string_field(L, stop, "mode", up ? "max" : "min", "stop.mode", max_min,
                                  "\"max\" or \"min\"");
  if (!s->cfg.eval || s->cfg.eval_every == 0)
    fail(L, "stop needs periodic evals: eval = { data = ..., every = STEPS }");
  need_metric(L, s, m, "stop.metric");
  train_stop *t = &s->cfg.stop;
  t->on = true;
  t->metric = m;
  t->maximize = strcmp(mode, "max") == 0;
  t->min_delta = lopts_real(L, stop, "min_delta", 0, LOPTS_NONNEG, HUGE_VAL, WHAT ": stop");
  t->patience = lopts_int(L, stop, "patience", 0, LOPTS_NONNEG, LOPTS_COUNT_MAX, WHAT ": stop");
  lua_pop(L, 1);
}

/* ============================== checkpoints ============================= */

static void read_keep_best(lua_State *L, int ckpt, lsettings *s) {
  int kb = sub_table(L, ckpt, "keep_best", "checkpoint.keep_best",
                     "{ metric = \"eval_accuracy\", mode = \"max\" }", keep_best_fields, true);
  if (!kb) return;
  push(L, kb, "metric");
  size_t n = 0;
  const char *metric = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
  if (!metric || n == 0 || n >= sizeof s->ck.metric)
    fail(L, "checkpoint.keep_best.metric must be a metric's name, e.g. \"eval_accuracy\" (got %s)",
         lopts_show(L, -1));
  snprintf(s->ck.metric, sizeof s->ck.metric, "%s", metric);
  lua_pop(L, 1);
  const char *mode = string_field(L, kb, "mode", "max", "checkpoint.keep_best.mode", max_min,
                                  "\"max\" or \"min\"");
  s->ck.max = strcmp(mode, "max") == 0;
  lua_pop(L, 1);
}

/* checkpoint.dir: an HDFS directory, resolved here once (its NameNode
 * from HADOOP_CONF_DIR for hdfs://) so nodes get a URL needing no
 * configuration. A local directory is not taken: local checkpoints are
 * the run directory's. */
static void read_ckpt_dir(lua_State *L, int ck, lsettings *s) {
  if (push(L, ck, "dir") == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  const char *d = lua_tostring(L, -1);
  if (lua_type(L, -1) != LUA_TSTRING || !webhdfs_is_url(d))
    fail(L, "checkpoint.dir must be an hdfs:// or webhdfs:// URL (got %s); local checkpoints "
         "are the run directory's checkpoints/", lopts_show(L, -1));
  if (strlen(d) >= sizeof s->ck.dir) fail(L, "checkpoint.dir is too long");
  snprintf(s->ck.dir, sizeof s->ck.dir, "%s", d);
  if (webhdfs_resolve(d, s->ck.url, sizeof s->ck.url) < 0) fail(L, "checkpoint.dir: %s", err_msg());
  lua_pop(L, 1);
}

/* checkpoint = { every = STEPS, every_seconds = S, keep = N, keep_best = {...} },
 * found under `key` ("checkpointing" in an experiment). */
static void read_checkpoint(lua_State *L, int idx, const char *key, lsettings *s) {
  int ck = sub_table(L, idx, key, "checkpoint",
                     "{ every = ..., every_seconds = ..., keep = ..., keep_best = ... }",
                     checkpoint_fields, true);
  if (!ck) return;
  const char *what = WHAT ": checkpoint";
  bool every = push(L, ck, "every") != LUA_TNIL, secs = push(L, ck, "every_seconds") != LUA_TNIL;
  lua_pop(L, 2);
  s->has_ckpt = true;
  s->ck.every = lopts_int(L, ck, "every", 0, LOPTS_NONNEG, LOPTS_COUNT_MAX, what);
  /* a count of checkpoints, which ckpt_prune takes as an int */
  s->ck.keep = (int)lopts_int(L, ck, "keep", 0, LOPTS_NONNEG, INT_MAX, what);
  read_keep_best(L, ck, s);
  s->ck.every_seconds = lopts_real(L, ck, "every_seconds", 0, LOPTS_NONNEG, HUGE_VAL, what);
  if (!every && !secs) fail(L, "checkpoint needs every = STEPS or every_seconds = S");
  read_ckpt_dir(L, ck, s);
  lua_pop(L, 1);
}

/* ============================== the whole =============================== */

static const char *const modes[] = {"async", "sync", NULL};

/* name, runs: the run directory's (read by lua/experiment.lua). */
static void check_names(lua_State *L, int idx) {
  string_field(L, idx, "name", "experiment", "name", NULL, "a non-empty string");
  int t = push(L, idx, "runs");
  bool ok = t == LUA_TNIL || (t == LUA_TBOOLEAN && !lua_toboolean(L, -1)) ||
            (t == LUA_TSTRING && lua_rawlen(L, -1) > 0);
  if (!ok) fail(L, "runs must be a directory or false (got %s)", lopts_show(L, -1));
  lua_pop(L, 1);
}

static void read_models(lua_State *L, int idx, lsettings *s) {
  s->model = want(L, idx, "model", "drover.Module", "model",
                  "an nn module, e.g. nn.Sequential { ... }");
  s->loss = want(L, idx, "loss", "drover.Loss", "loss", "an nn loss, e.g. nn.CrossEntropy()");
  s->optimizer = want(L, idx, "optimizer", "drover.Optimizer", "optimizer",
                      "an optimizer, e.g. optim.SGD { lr = 0.1 }");
}

static void read_run(lua_State *L, int idx, lsettings *s) {
  s->cfg.seed = (uint64_t)lopts_int(L, idx, "seed", 0, LOPTS_NONNEG, LUA_MAXINTEGER, WHAT);
  if (lopts_bool(L, idx, "verbose", true, WHAT)) {
    s->cfg.progress = stdout;
    s->cfg.progress_tty = isatty(fileno(stdout));
  }
  int t = push(L, idx, "progress");
  if (t != LUA_TNIL && t != LUA_TFUNCTION)
    fail(L, "progress must be a function (got %s)", lopts_show(L, -1));
  if (t == LUA_TNIL) lua_pop(L, 1);
  else s->progress = lua_gettop(L);
}

/* tensorboard = true | { port, bind }: its form and, at drover.experiment
 * { ... }, whether TensorBoard can serve (installed, the port free), so
 * that the description is refused rather than its first fit. */
static void read_tensorboard(lua_State *L, int idx, bool desc, lsettings *s) {
  push(L, idx, "tensorboard");
  s->tensorboard = lcluster_tensorboard(L, -1, WHAT, &s->tb);
  lua_pop(L, 1);
  if (desc && s->tensorboard && tboard_check(&s->tb) < 0) fail(L, "%s", err_msg());
}

/* Fields for cluster fits (c:fit), checked in any case so that typos
 * surface early. */
static void read_cluster(lua_State *L, int idx, bool desc, lsettings *s) {
  const char *mode = string_field(L, idx, "mode", "async", "mode", modes, "\"async\" or \"sync\"");
  s->sync = strcmp(mode, "sync") == 0;
  /* sync only: checked against the cluster's trainers when it fits */
  s->backup_workers = (int)lopts_int(L, idx, "backup_workers", 0, LOPTS_NONNEG, INT_MAX, WHAT);
  read_checkpoint(L, idx, desc ? "checkpoint" : "checkpointing", s);
}

/* desc: idx is a description (unknown fields are errors, the checkpoint
 * settings are `checkpoint`), else an experiment. */
static void read_all(lua_State *L, int idx, bool desc, lsettings *s) {
  luaL_checkstack(L, 24, "experiment"); /* the values read, and what a fit's callbacks push */
  memset(s, 0, sizeof *s);
  if (desc) lopts_check_fields(L, idx, WHAT, top_fields);
  check_names(L, idx);
  read_models(L, idx, s);
  read_train(L, idx, s);
  read_eval(L, idx, s);
  read_stop(L, idx, s);
  read_plateau(L, s);
  read_run(L, idx, s);
  read_tensorboard(L, idx, desc, s);
  read_cluster(L, idx, desc, s);
}

void lsettings_read(lua_State *L, int idx, lsettings *s) {
  idx = lua_absindex(L, idx);
  ltrain_check_experiment(L, idx);
  read_all(L, idx, false, s);
}

/* ============================== the experiment's fields ================== */

static void set_value(lua_State *L, const char *k, int idx) {
  if (!idx) return;
  lua_pushvalue(L, idx);
  lua_setfield(L, -2, k);
}

static void set_bool(lua_State *L, const char *k, bool v) {
  lua_pushboolean(L, v);
  lua_setfield(L, -2, k);
}

static void set_str(lua_State *L, const char *k, const char *v) {
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

static void push_train(lua_State *L, const lsettings *s) {
  lua_createtable(L, 0, 8);
  set_value(L, "feed", s->train_feed);
  if (s->feed_timeout > 0) ldrv_set_num(L, "feed_timeout", s->feed_timeout);
  if (s->feeders > 0) ldrv_set_int(L, "feeders", s->feeders);
  set_value(L, "data", s->train_data);
  ldrv_set_int(L, "batch", s->cfg.batch);
  ldrv_set_int(L, "epochs", s->cfg.epochs);
  /* Read again as it is written. A feed's default shuffle is left out, so
   * that it does not turn into a refusal when the script later makes the
   * feed a function (docs/data.md's example); train.data shows it. */
  if (s->shuffle_given || !s->train_feed) set_bool(L, "shuffle", s->cfg.shuffle);
  ldrv_set_int(L, "max_steps", s->cfg.max_steps);
  lua_pushstring(L, s->cfg.reshard_step ? "step" : "epoch");
  lua_setfield(L, -2, "reshard");
}

static void push_eval(lua_State *L, const lsettings *s) {
  lua_createtable(L, 0, 4);
  set_value(L, "data", s->eval_data);
  ldrv_set_int(L, "every", s->cfg.eval_every);
  ldrv_set_int(L, "batch", s->eval_batch);
  if (!s->cfg.metrics) return;
  lua_createtable(L, 2, 0);
  for (unsigned bit = 1, i = 0; bit <= BINEVAL_ALL; bit <<= 1)
    if (s->cfg.metrics & bit) lua_pushstring(L, bineval_name(bit)), lua_rawseti(L, -2, ++i);
  lua_setfield(L, -2, "metrics");
}

static void push_stop(lua_State *L, const train_stop *t) {
  lua_createtable(L, 0, 4);
  set_str(L, "metric", optim_metric_name(t->metric));
  set_str(L, "mode", t->maximize ? "max" : "min");
  ldrv_set_int(L, "patience", t->patience);
  ldrv_set_num(L, "min_delta", t->min_delta);
}

static void push_checkpoint(lua_State *L, const fitrun_ckpt *ck) {
  lua_createtable(L, 0, 5);
  if (ck->dir[0]) set_str(L, "dir", ck->dir);
  ldrv_set_int(L, "every", ck->every);
  ldrv_set_num(L, "every_seconds", ck->every_seconds);
  ldrv_set_int(L, "keep", ck->keep);
  if (!ck->metric[0]) return;
  lua_createtable(L, 0, 2);
  set_str(L, "metric", ck->metric);
  set_str(L, "mode", ck->max ? "max" : "min");
  lua_setfield(L, -2, "keep_best");
}

/* name and runs, as the description at desc has them (checked). */
static void push_names(lua_State *L, int desc) {
  if (lua_getfield(L, desc, "name") == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushliteral(L, "experiment");
  }
  lua_setfield(L, -2, "name");
  if (lua_getfield(L, desc, "runs") == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushliteral(L, "runs");
  }
  lua_setfield(L, -2, "runs");
}

/* Pushes the experiment's fields: the settings s read from desc. */
static void push_fields(lua_State *L, int desc, const lsettings *s) {
  lua_createtable(L, 0, 16);
  push_names(L, desc);
  set_value(L, "model", s->model);
  set_value(L, "loss", s->loss);
  set_value(L, "optimizer", s->optimizer);
  push_train(L, s);
  lua_setfield(L, -2, "train");
  if (s->eval_data) push_eval(L, s), lua_setfield(L, -2, "eval");
  if (s->cfg.stop.on) push_stop(L, &s->cfg.stop), lua_setfield(L, -2, "stop");
  ldrv_set_int(L, "seed", (int64_t)s->cfg.seed);
  set_bool(L, "verbose", s->cfg.progress != NULL);
  set_value(L, "progress", s->progress);
  set_str(L, "mode", s->sync ? "sync" : "async");
  ldrv_set_int(L, "backup_workers", s->backup_workers);
  if (s->has_ckpt) push_checkpoint(L, &s->ck), lua_setfield(L, -2, "checkpointing");
  lua_getfield(L, desc, "tensorboard"); /* as given: open_run and c:fit read it */
  lua_setfield(L, -2, "tensorboard");
}

int lsettings_new(lua_State *L) {
  if (!lua_istable(L, 1))
    fail(L, "expected a table { name = ..., model = ..., ... } (got %s)", lopts_show(L, 1));
  lua_settop(L, 1);
  lsettings s;
  read_all(L, 1, true, &s);
  push_fields(L, 1, &s);
  return 1;
}
