/* l_optim_sched.c - drover.optim.schedule: learning-rate schedules as Lua
 * values ("drover.Schedule" userdata holding an optim_sched), given to an
 * optimizer as optim.SGD { lr = 0.1, schedule = ... }.
 *
 * Option names are PyTorch's (step_size, gamma, milestones, T_max,
 * eta_min, start_factor, factor, patience, threshold, min_lr), counted in
 * optimizer updates; unknown options are refused. warmup { after = s }
 * composes a warmup with one main schedule.
 */
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "base/err.h"
#include "luabind/l_util.h"
#include "numeric/optim_sched.h"

#define SCHED_MT "drover.Schedule"

static const optim_sched *check_sched(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, SCHED_MT);
}

static optim_sched *new_sched(lua_State *L, const char *what, const char *const *keys,
                              optim_sched_kind kind) {
  if (!lua_istable(L, 1))
    luaL_error(L, "%s: expected a table of options (got %s)", what, luaL_typename(L, 1));
  lopts_check_keys(L, 1, what, keys);
  optim_sched *s = lua_newuserdatauv(L, sizeof *s, 0);
  memset(s, 0, sizeof *s);
  s->kind = kind;
  luaL_setmetatable(L, SCHED_MT);
  return s;
}

/* The checked result; raises the library's message. */
static int done(lua_State *L, const optim_sched *s) {
  if (optim_sched_check(s) < 0) return luaL_error(L, "%s", err_msg());
  return 1;
}

static int64_t need_int(lua_State *L, const char *key, const char *what) {
  if (lua_getfield(L, 1, key) == LUA_TNIL) luaL_error(L, "%s: %s is required", what, key);
  lua_pop(L, 1);
  return lopts_int(L, 1, key, 0, LOPTS_ANY, LUA_MAXINTEGER, what);
}

/* optim.schedule.step { step_size = N, gamma = 0.1 } */
static int l_step(lua_State *L) {
  static const char *const keys[] = {"step_size", "gamma", NULL};
  const char *what = "optim.schedule.step";
  optim_sched *s = new_sched(L, what, keys, OSCHED_STEP);
  s->step_size = need_int(L, "step_size", what);
  s->gamma = (float)lopts_real(L, 1, "gamma", 0.1, LOPTS_ANY, HUGE_VAL, what);
  return done(L, s);
}

/* optim.schedule.multistep { milestones = { a, b, ... }, gamma = 0.1 } */
static int l_multistep(lua_State *L) {
  static const char *const keys[] = {"milestones", "gamma", NULL};
  const char *what = "optim.schedule.multistep";
  optim_sched *s = new_sched(L, what, keys, OSCHED_MULTISTEP);
  if (lua_getfield(L, 1, "milestones") != LUA_TTABLE)
    luaL_error(L, "%s: milestones must be a list of steps, like { 30, 80 }", what);
  lua_Integer n = luaL_len(L, -1);
  if (n < 1 || n > OSCHED_MAX_MILESTONES)
    luaL_error(L, "%s: 1 to %d milestones (got %I)", what, OSCHED_MAX_MILESTONES, n);
  for (lua_Integer i = 1; i <= n; i++) {
    int isint;
    lua_rawgeti(L, -1, i);
    s->milestones[i - 1] = lua_tointegerx(L, -1, &isint);
    if (!isint) luaL_error(L, "%s: milestone %I must be an integer", what, i);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  s->nmilestones = (int)n;
  s->gamma = (float)lopts_real(L, 1, "gamma", 0.1, LOPTS_ANY, HUGE_VAL, what);
  return done(L, s);
}

/* optim.schedule.cosine { T_max = N, eta_min = 0 } */
static int l_cosine(lua_State *L) {
  static const char *const keys[] = {"T_max", "eta_min", NULL};
  const char *what = "optim.schedule.cosine";
  optim_sched *s = new_sched(L, what, keys, OSCHED_COSINE);
  s->t_max = need_int(L, "T_max", what);
  s->eta_min = (float)lopts_real(L, 1, "eta_min", 0, LOPTS_ANY, HUGE_VAL, what);
  return done(L, s);
}

/* optim.schedule.warmup { steps = N, start_factor = 1/3, after = s } */
static int l_warmup(lua_State *L) {
  static const char *const keys[] = {"steps", "start_factor", "after", NULL};
  const char *what = "optim.schedule.warmup";
  optim_sched *s = new_sched(L, what, keys, OSCHED_CONST);
  if (lua_getfield(L, 1, "after") != LUA_TNIL) {
    const optim_sched *after = luaL_testudata(L, -1, SCHED_MT);
    if (!after) luaL_error(L, "%s: after must be a schedule, like optim.schedule.cosine { ... }", what);
    if (after->warmup > 0) luaL_error(L, "%s: after is a warmup already", what);
    *s = *after;
  }
  lua_pop(L, 1);
  s->warmup = need_int(L, "steps", what);
  if (s->warmup < 1) luaL_error(L, "%s: steps must be > 0 (got %I)", what, (lua_Integer)s->warmup);
  s->start_factor =
      (float)lopts_real(L, 1, "start_factor", 1.0 / 3.0, LOPTS_ANY, HUGE_VAL, what);
  return done(L, s);
}

/* optim.schedule.plateau { metric = "eval_loss", mode = "min", factor =
 * 0.1, patience = 10, threshold = 1e-4, min_lr = 0 } */
static int l_plateau(lua_State *L) {
  static const char *const keys[] = {"metric", "mode", "factor", "patience", "threshold",
                                     "min_lr", NULL};
  const char *what = "optim.schedule.plateau";
  optim_sched *s = new_sched(L, what, keys, OSCHED_PLATEAU);
  lua_getfield(L, 1, "metric");
  const char *m = lua_isnil(L, -1) ? "eval_loss" : lua_tostring(L, -1);
  int metric = m && lua_type(L, -1) != LUA_TNUMBER ? optim_metric_from_name(m) : -1;
  if (metric < 0)
    luaL_error(L, "%s: metric must be \"eval_loss\", \"eval_accuracy\", \"eval_auc\" or "
               "\"eval_logloss\" (got %s)", what, luaL_tolstring(L, -1, NULL));
  s->metric = (optim_metric)metric;
  lua_getfield(L, 1, "mode");
  const char *mode = lua_isnil(L, -1) ? (optim_metric_maximize(s->metric) ? "max" : "min")
                                      : lua_tostring(L, -1);
  if (!mode || lua_type(L, -1) == LUA_TNUMBER || (strcmp(mode, "min") && strcmp(mode, "max")))
    luaL_error(L, "%s: mode must be \"min\" or \"max\" (got %s)", what, luaL_tolstring(L, -1, NULL));
  s->maximize = strcmp(mode, "max") == 0;
  lua_pop(L, 2);
  s->factor = (float)lopts_real(L, 1, "factor", 0.1, LOPTS_ANY, HUGE_VAL, what);
  s->patience = lopts_int(L, 1, "patience", 10, LOPTS_ANY, LUA_MAXINTEGER, what);
  s->threshold = (float)lopts_real(L, 1, "threshold", 1e-4, LOPTS_ANY, HUGE_VAL, what);
  s->min_lr = (float)lopts_real(L, 1, "min_lr", 0, LOPTS_ANY, HUGE_VAL, what);
  return done(L, s);
}

/* s:lr(base, k) -> the rate of the update after k earlier ones (a plateau
 * schedule as if never reduced): for plotting and checking a schedule. */
static int s_lr(lua_State *L) {
  const optim_sched *s = check_sched(L, 1);
  lua_Number base = luaL_checknumber(L, 2);
  lua_Integer k = luaL_checkinteger(L, 3);
  luaL_argcheck(L, k >= 0, 3, "steps must be >= 0");
  lua_pushnumber(L, optim_sched_lr(s, base, k, NULL));
  return 1;
}

static int s_tostring(lua_State *L) {
  char buf[640];
  optim_sched_describe(check_sched(L, 1), buf, sizeof buf);
  lua_pushstring(L, buf);
  return 1;
}

static const luaL_Reg methods[] = {{"lr", s_lr}, {NULL, NULL}};
static const luaL_Reg meta[] = {{"__tostring", s_tostring}, {NULL, NULL}};
static const luaL_Reg funcs[] = {{"step", l_step},     {"multistep", l_multistep},
                                 {"cosine", l_cosine}, {"warmup", l_warmup},
                                 {"plateau", l_plateau}, {NULL, NULL}};

/* Pushes the drover.optim.schedule table. */
void loptim_sched_open(lua_State *L) {
  ldrv_createmeta(L, SCHED_MT, meta, methods);
  luaL_newlib(L, funcs);
}
