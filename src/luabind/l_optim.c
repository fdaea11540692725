/* l_optim.c - drover.optim: optimizer configurations as Lua userdata.
 *
 * optim.SGD { lr = 0.1, momentum = 0.9 } makes a "drover.Optimizer": a
 * checked optim_cfg, not yet bound to any model. Training binds it to a
 * model's parameters (l_train.c), so one optimizer value can configure
 * several experiments, each with its own state. Option names are exactly
 * those optim_describe() prints, so a printed optimizer reads back as Lua.
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_util.h"
#include "numeric/optim.h"

#define OPTIM_MT "drover.Optimizer"

/* The options each kind accepts, in optim_describe's order. */
static const char *const sgd_keys[] = {"lr", "momentum", "dampening", "nesterov",
                                       "weight_decay", "clip_norm", "schedule", NULL};
static const char *const adam_keys[] = {"lr", "betas", "beta1", "beta2", "eps",
                                        "weight_decay", "clip_norm", "schedule", NULL};
static const char *const adagrad_keys[] = {"lr", "lr_decay", "initial_accumulator", "eps",
                                           "weight_decay", "clip_norm", "schedule", NULL};
static const char *const rmsprop_keys[] = {"lr", "alpha", "momentum", "eps", "weight_decay",
                                           "clip_norm", "schedule", NULL};
static const char *const ftrl_keys[] = {"lr", "beta", "l1", "l2", "initial_accumulator",
                                        "clip_norm", "schedule", NULL};

static const char *const *keys_of(optim_kind k) {
  switch (k) {
  case OPTIM_SGD: return sgd_keys;
  case OPTIM_ADAM:
  case OPTIM_ADAMW: return adam_keys;
  case OPTIM_ADAGRAD: return adagrad_keys;
  case OPTIM_RMSPROP: return rmsprop_keys;
  case OPTIM_FTRL: return ftrl_keys;
  }
  return sgd_keys;
}

static int has_key(const char *const *keys, const char *k) {
  for (int i = 0; keys[i]; i++)
    if (strcmp(keys[i], k) == 0) return 1;
  return 0;
}

/* betas = { b1, b2 }, PyTorch's spelling of beta1/beta2. */
static void read_betas(lua_State *L, int idx, optim_cfg *c, const char *what) {
  if (lua_getfield(L, idx, "betas") == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (!lua_istable(L, -1) || luaL_len(L, -1) != 2)
    luaL_error(L, "%s: betas must be a table of two numbers, like { 0.9, 0.999 }", what);
  for (int i = 1; i <= 2; i++) {
    lua_rawgeti(L, -1, i);
    if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "%s: betas[%d] must be a number", what, i);
    *(i == 1 ? &c->beta1 : &c->beta2) = (float)lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static void read_cfg(lua_State *L, int idx, optim_cfg *c, const char *what) {
  const char *const *keys = keys_of(c->kind);
  lopts_check_keys(L, idx, what, keys);
  if (lua_isnoneornil(L, idx)) return;
  /* Each field has a default already; a present key overrides it. */
  struct {
    const char *key;
    float *field;
  } nums[] = {{"lr", &c->lr},
              {"momentum", &c->momentum},
              {"dampening", &c->dampening},
              {"weight_decay", &c->weight_decay},
              {"beta1", &c->beta1},
              {"beta2", &c->beta2},
              {"eps", &c->eps},
              {"alpha", &c->alpha},
              {"lr_decay", &c->lr_decay},
              {"initial_accumulator", &c->initial_accumulator},
              {"beta", &c->beta},
              {"l1", &c->l1},
              {"l2", &c->l2},
              {"clip_norm", &c->clip_norm}};
  if (has_key(keys, "betas")) read_betas(L, idx, c, what);
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
    if (has_key(keys, nums[i].key))
      *nums[i].field =
          (float)lopts_real(L, idx, nums[i].key, *nums[i].field, LOPTS_ANY, HUGE_VAL, what);
  if (has_key(keys, "nesterov")) c->nesterov = lopts_bool(L, idx, "nesterov", c->nesterov, what);
  if (lua_getfield(L, idx, "schedule") != LUA_TNIL) {
    const optim_sched *s = luaL_testudata(L, -1, "drover.Schedule");
    if (!s)
      luaL_error(L, "%s: schedule must be an optim.schedule (e.g. optim.schedule.cosine "
                 "{ T_max = 1000 }), got %s", what, luaL_typename(L, -1));
    c->sched = *s;
  }
  lua_pop(L, 1);
}

/* optim.KIND([options]): the kind travels as the closure's upvalue. */
static int l_make(lua_State *L) {
  optim_kind kind = (optim_kind)lua_tointeger(L, lua_upvalueindex(1));
  char what[32];
  snprintf(what, sizeof what, "optim.%s", optim_kind_name(kind));
  if (!lua_isnoneornil(L, 1) && !lua_istable(L, 1))
    luaL_error(L, "%s: expected a table of options like { lr = 0.1 } (got %s)", what,
               luaL_typename(L, 1));
  lua_settop(L, 1); /* the options stay at 1 even when absent */
  optim_cfg *c = lua_newuserdatauv(L, sizeof *c, 0);
  optim_cfg_default(c, kind);
  luaL_setmetatable(L, OPTIM_MT);
  read_cfg(L, 1, c, what);
  if (optim_cfg_check(c) < 0) luaL_error(L, "%s", err_msg());
  return 1;
}

const optim_cfg *loptim_check(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, OPTIM_MT);
}

static int o_tostring(lua_State *L) {
  const optim_cfg *c = loptim_check(L, 1);
  char buf[1280];
  if (optim_describe(c, buf, sizeof buf) < 0) return luaL_error(L, "%s", err_msg());
  lua_pushstring(L, buf);
  return 1;
}

/* opt:config() -> { kind = "SGD", lr = ..., ... }: every option of its kind. */
static int o_config(lua_State *L) {
  const optim_cfg *c = loptim_check(L, 1);
  const char *const *keys = keys_of(c->kind);
  lua_newtable(L);
  lua_pushstring(L, optim_kind_name(c->kind));
  lua_setfield(L, -2, "kind");
  struct {
    const char *key;
    float v;
  } nums[] = {{"lr", c->lr},         {"momentum", c->momentum},
              {"dampening", c->dampening}, {"weight_decay", c->weight_decay},
              {"beta1", c->beta1},   {"beta2", c->beta2},
              {"eps", c->eps},       {"alpha", c->alpha},
              {"lr_decay", c->lr_decay}, {"initial_accumulator", c->initial_accumulator},
              {"beta", c->beta},     {"l1", c->l1},
              {"l2", c->l2},         {"clip_norm", c->clip_norm}};
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    if (!has_key(keys, nums[i].key)) continue;
    lua_pushnumber(L, nums[i].v);
    lua_setfield(L, -2, nums[i].key);
  }
  if (has_key(keys, "nesterov")) {
    lua_pushboolean(L, c->nesterov);
    lua_setfield(L, -2, "nesterov");
  }
  if (optim_sched_active(&c->sched)) { /* a copy: the optimizer keeps its own */
    optim_sched *s = lua_newuserdatauv(L, sizeof *s, 0);
    *s = c->sched;
    luaL_setmetatable(L, "drover.Schedule");
    lua_setfield(L, -2, "schedule");
  }
  return 1;
}

static int o_kind(lua_State *L) {
  lua_pushstring(L, optim_kind_name(loptim_check(L, 1)->kind));
  return 1;
}

static const luaL_Reg methods[] = {{"config", o_config}, {"kind", o_kind}, {NULL, NULL}};
static const luaL_Reg meta[] = {{"__tostring", o_tostring}, {NULL, NULL}};

int luaopen_drover_optim(lua_State *L) {
  ldrv_createmeta(L, OPTIM_MT, meta, methods);

  static const optim_kind kinds[] = {OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW, OPTIM_ADAGRAD,
                                     OPTIM_RMSPROP, OPTIM_FTRL};
  lua_createtable(L, 0, 6);
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    lua_pushinteger(L, kinds[i]);
    lua_pushcclosure(L, l_make, 1);
    lua_setfield(L, -2, optim_kind_name(kinds[i]));
  }
  loptim_sched_open(L);
  lua_setfield(L, -2, "schedule");
  return 1;
}
