/* l_tensor_ops.c - tensor math for Lua scripts: + - * / and unary minus
 * with numbers and broadcasting tensors, comparisons to 0/1 masks, mm,
 * reductions along a dimension, exp/log/sqrt/abs/clamp, narrow, index,
 * tensor.cat and tensor.stack. The math is tensor_ops.c; this file only
 * converts arguments (1-based dimensions and positions, as in Torch7) and
 * raises the library's message, which names the shapes, at the script line.
 *
 * Results are new tensors, except narrow, which is a view like t[i].
 * Class ids stay 0-based (argmax, max's indices) as dataset labels are.
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdlib.h>

#include "base/err.h"
#include "luabind/l_util.h"
#include "numeric/tensor_ops.h"
#include "base/util.h"

#define TENSOR_MT "drover.Tensor"

/* Pushes t (owned) or raises the library's message. */
static int push(lua_State *L, tensor *t) {
  ltensor_push(L, t);
  return 1;
}

/* A 1-based dimension argument of t, checked, as 0-based. */
static int check_dimarg(lua_State *L, const tensor *t, int arg, int extra, const char *what) {
  lua_Integer d = luaL_checkinteger(L, arg);
  if (d < 1 || d > t->ndim + extra) {
    char s[64];
    luaL_error(L, "%s: dimension %I is outside 1..%d of a %s tensor", what, d, t->ndim + extra,
               tensor_shape_str(t, s, sizeof s));
  }
  return (int)d - 1;
}

/* ============================== arithmetic ============================== */

/* a op b where either side may be a number, a tensor or a table of numbers. */
static int binop(lua_State *L, tensor_binop op) {
  if (lua_type(L, 1) == LUA_TNUMBER)
    return push(L, tensor_binary_scalar(op, ltensor_arg(L, 2), (float)lua_tonumber(L, 1), 1));
  if (lua_type(L, 2) == LUA_TNUMBER)
    return push(L, tensor_binary_scalar(op, ltensor_arg(L, 1), (float)lua_tonumber(L, 2), 0));
  if (lua_isnoneornil(L, 2))
    return luaL_error(L, "%s: expects a tensor or a number on each side", tensor_binop_name(op));
  tensor *a = ltensor_arg(L, 1), *b = ltensor_arg(L, 2);
  return push(L, tensor_binary(op, a, b));
}

static int m_add(lua_State *L) { return binop(L, TOP_ADD); }
static int m_sub(lua_State *L) { return binop(L, TOP_SUB); }
static int m_mul(lua_State *L) { return binop(L, TOP_MUL); }
static int m_div(lua_State *L) { return binop(L, TOP_DIV); }
static int m_gt(lua_State *L) { return binop(L, TOP_GT); }
static int m_ge(lua_State *L) { return binop(L, TOP_GE); }
static int m_lt(lua_State *L) { return binop(L, TOP_LT); }
static int m_le(lua_State *L) { return binop(L, TOP_LE); }
static int m_eq(lua_State *L) { return binop(L, TOP_EQ); }
static int m_ne(lua_State *L) { return binop(L, TOP_NE); }
static int m_maximum(lua_State *L) { return binop(L, TOP_MAXIMUM); }
static int m_minimum(lua_State *L) { return binop(L, TOP_MINIMUM); }

static int unop(lua_State *L, tensor_unop op) { return push(L, tensor_unary(op, ltensor_check(L, 1))); }
static int m_unm(lua_State *L) { return unop(L, TUN_NEG); }
static int m_exp(lua_State *L) { return unop(L, TUN_EXP); }
static int m_log(lua_State *L) { return unop(L, TUN_LOG); }
static int m_sqrt(lua_State *L) { return unop(L, TUN_SQRT); }
static int m_abs(lua_State *L) { return unop(L, TUN_ABS); }

/* t:clamp(lo, hi); either bound may be nil for "unbounded". */
static int m_clamp(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  float lo = lua_isnoneornil(L, 2) ? -INFINITY : (float)luaL_checknumber(L, 2);
  float hi = lua_isnoneornil(L, 3) ? INFINITY : (float)luaL_checknumber(L, 3);
  return push(L, tensor_clamp(t, lo, hi));
}

static int m_mm(lua_State *L) {
  tensor *a = ltensor_check(L, 1), *b = ltensor_arg(L, 2);
  return push(L, tensor_mm(a, b));
}

/* ============================== reductions ============================== */

/* t:OP() over everything is a number; t:OP(dim [, keepdim]) a tensor. */
static int reduce(lua_State *L, tensor_redop op, const char *what) {
  tensor *t = ltensor_check(L, 1);
  if (lua_isnoneornil(L, 2)) {
    tensor *flat = tensor_view(t);
    if (!flat) return luaL_error(L, "%s", err_msg());
    /* Any strides: reduce the dims one by one down to a scalar. */
    tensor *cur = flat;
    while (cur && cur->ndim > 0) {
      tensor *next = tensor_reduce(op == TRED_MEAN ? TRED_SUM : op, cur, 0, 0);
      tensor_free(cur);
      cur = next;
    }
    if (!cur) return luaL_error(L, "%s: %s", what, err_msg());
    int64_t none[1] = {0};
    double v = tensor_get(cur, none);
    tensor_free(cur);
    if (op == TRED_MEAN) v = tensor_numel(t) ? v / (double)tensor_numel(t) : NAN;
    lua_pushnumber(L, v);
    return 1;
  }
  int dim = check_dimarg(L, t, 2, 0, what);
  luaL_argcheck(L, lua_isnoneornil(L, 3) || lua_isboolean(L, 3), 3, "keepdim must be true or false");
  return push(L, tensor_reduce(op, t, dim, lua_toboolean(L, 3)));
}

static int m_sum(lua_State *L) { return reduce(L, TRED_SUM, "sum"); }
static int m_mean(lua_State *L) { return reduce(L, TRED_MEAN, "mean"); }

/* t:max() is a number; t:max(dim [, keepdim]) the values and their
 * 0-based positions, as PyTorch's torch.max(t, dim). */
static int maxmin(lua_State *L, tensor_redop op, const char *what) {
  if (lua_isnoneornil(L, 2)) {
    tensor *t = ltensor_check(L, 1);
    if (tensor_numel(t) == 0) {
      char s[64];
      return luaL_error(L, "%s: empty %s tensor", what, tensor_shape_str(t, s, sizeof s));
    }
    return reduce(L, op, what);
  }
  lua_settop(L, 3);
  reduce(L, op, what);
  tensor *t = ltensor_check(L, 1);
  if (op == TRED_MAX) {
    int dim = check_dimarg(L, t, 2, 0, what);
    push(L, tensor_reduce(TRED_ARGMAX, t, dim, lua_toboolean(L, 3))); /* 3: keepdim */
    return 2;
  }
  return 1;
}

static int m_max(lua_State *L) { return maxmin(L, TRED_MAX, "max"); }
static int m_min(lua_State *L) { return maxmin(L, TRED_MIN, "min"); }

/* t:argmax(dim [, keepdim]): 0-based positions along dim. Without dim, the
 * class of each row of a 2-D tensor, or the position in a 1-D one (an
 * integer), as before dims were supported. */
static int m_argmax(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  char s[64];
  if (!lua_isnoneornil(L, 2)) {
    int dim = check_dimarg(L, t, 2, 0, "argmax");
    return push(L, tensor_reduce(TRED_ARGMAX, t, dim, lua_toboolean(L, 3)));
  }
  if (t->ndim != 1 && t->ndim != 2)
    return luaL_error(L, "argmax: without a dimension expects a 1-D or 2-D tensor, got %s",
                      tensor_shape_str(t, s, sizeof s));
  tensor *r = ltensor_push(L, tensor_reduce(TRED_ARGMAX, t, t->ndim - 1, 0));
  if (t->ndim == 1) {
    int64_t none[1] = {0};
    lua_pushinteger(L, (lua_Integer)tensor_get(r, none));
  }
  return 1;
}

/* ============================== views and gathers ======================= */

/* t:narrow(dim, start, len): a view of positions start..start+len-1. */
static int m_narrow(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  int dim = check_dimarg(L, t, 2, 0, "narrow");
  lua_Integer start = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
  if (start < 1 || len < 0 || start - 1 > t->shape[dim] || len > t->shape[dim] - (start - 1)) {
    char s[64];
    return luaL_error(L, "narrow: positions %I..%I of dimension %d are outside %s", start,
                      start + len - 1, dim + 1, tensor_shape_str(t, s, sizeof s));
  }
  return push(L, tensor_narrow(t, dim, start - 1, len));
}

/* Reads 1-based ids from a table or a 1-D tensor at arg into a new array
 * of 0-based ids (freed by the caller); *n gets their count. */
static int64_t *read_ids(lua_State *L, int arg, int64_t *n) {
  int is_table = lua_istable(L, arg) && !luaL_testudata(L, arg, TENSOR_MT);
  tensor *it = is_table ? NULL : ltensor_check(L, arg);
  if (it && it->ndim != 1) {
    char s[64];
    luaL_error(L, "index: ids must be a 1-D tensor or a table, got %s",
               tensor_shape_str(it, s, sizeof s));
  }
  *n = it ? it->shape[0] : (int64_t)luaL_len(L, arg);
  size_t bytes = 0;
  if (!util_mul_ok((size_t)(*n ? *n : 1), sizeof(int64_t), &bytes))
    luaL_error(L, "index: too many ids");
  int64_t *ids = malloc(bytes);
  if (!ids) luaL_error(L, "index: out of memory");
  for (int64_t i = 0; i < *n; i++) {
    double v;
    if (it) v = tensor_get(it, &i);
    else {
      lua_rawgeti(L, arg, i + 1);
      v = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : NAN;
      lua_pop(L, 1);
    }
    if (v != floor(v) || !(fabs(v) < 9e15)) {
      free(ids);
      luaL_error(L, "index: id %I is not an integer", (lua_Integer)(i + 1));
    }
    ids[i] = (int64_t)v - 1;
  }
  return ids;
}

/* t:index(ids) picks rows; t:index(dim, ids) slices along dim. Ids are
 * 1-based positions (a table or a 1-D tensor); the result is a copy. */
static int m_index(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  int dim = 0, arg = 2;
  if (lua_type(L, 2) == LUA_TNUMBER) dim = check_dimarg(L, t, 2, 0, "index"), arg = 3;
  int64_t n;
  int64_t *ids = read_ids(L, arg, &n);
  tensor *r = tensor_index_select(t, dim, ids, n);
  free(ids);
  return push(L, r);
}

/* The tensors of the list at arg into a new array (borrowed headers). */
static const tensor **read_list(lua_State *L, int arg, int *n, const char *what) {
  luaL_checktype(L, arg, LUA_TTABLE);
  lua_Integer len = luaL_len(L, arg);
  if (len < 1 || len > 1 << 20) luaL_error(L, "%s: expects a list of 1 to 2^20 tensors", what);
  const tensor **ts = lua_newuserdatauv(L, (size_t)len * sizeof *ts, 0); /* freed by the GC */
  for (lua_Integer i = 1; i <= len; i++) {
    lua_rawgeti(L, arg, i);
    if (!luaL_testudata(L, -1, TENSOR_MT))
      luaL_error(L, "%s: element %I of the list is a %s, expected a tensor", what, i,
                 luaL_typename(L, -1));
    ts[i - 1] = ltensor_check(L, -1);
    lua_pop(L, 1); /* the list keeps it alive */
  }
  *n = (int)len;
  return ts;
}

/* tensor.cat({a, b, ...} [, dim]) joins along dim (default 1). */
static int l_cat(lua_State *L) {
  int n;
  lua_settop(L, 2);
  const tensor **ts = read_list(L, 1, &n, "cat");
  int dim = lua_isnoneornil(L, 2) ? 0 : check_dimarg(L, ts[0], 2, 0, "cat");
  return push(L, tensor_cat(ts, n, dim));
}

/* tensor.stack({a, b, ...} [, dim]) stacks equal shapes along a new dim. */
static int l_stack(lua_State *L) {
  int n;
  lua_settop(L, 2);
  const tensor **ts = read_list(L, 1, &n, "stack");
  int dim = lua_isnoneornil(L, 2) ? 0 : check_dimarg(L, ts[0], 2, 1, "stack");
  return push(L, tensor_stack(ts, n, dim));
}

/* ============================== registration ============================ */

static const luaL_Reg methods[] = {
    {"add", m_add},   {"sub", m_sub},   {"mul", m_mul},       {"div", m_div},
    {"gt", m_gt},     {"ge", m_ge},     {"lt", m_lt},         {"le", m_le},
    {"eq", m_eq},     {"ne", m_ne},     {"maximum", m_maximum}, {"minimum", m_minimum},
    {"exp", m_exp},   {"log", m_log},   {"sqrt", m_sqrt},     {"abs", m_abs},
    {"neg", m_unm},   {"clamp", m_clamp}, {"mm", m_mm},       {"sum", m_sum},
    {"mean", m_mean}, {"max", m_max},   {"min", m_min},       {"argmax", m_argmax},
    {"narrow", m_narrow}, {"index", m_index}, {NULL, NULL}};

static const luaL_Reg metamethods[] = {{"__add", m_add}, {"__sub", m_sub}, {"__mul", m_mul},
                                       {"__div", m_div}, {"__unm", m_unm}, {NULL, NULL}};

static const luaL_Reg funcs[] = {{"cat", l_cat}, {"stack", l_stack}, {NULL, NULL}};

/* Adds the operations to the Tensor metatable (and its method table under
 * __methods) and to the drover.tensor library table at lib. */
void ltensor_ops_open(lua_State *L, int lib) {
  lib = lua_absindex(L, lib);
  luaL_getmetatable(L, TENSOR_MT);
  luaL_setfuncs(L, metamethods, 0);
  lua_getfield(L, -1, "__methods");
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
  lua_pushvalue(L, lib);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
