/* l_tensor.c - drover.tensor: float32 tensors as Lua userdata, plus the
 * small helpers the other l_*.c bindings share (the global RNG behind
 * drover.seed, option-table checks).
 *
 * A Lua tensor is a "drover.Tensor" userdata holding one `tensor *` header;
 * views (t[i], t:t(), t:reshape()) are new headers over the same storage, so
 * writing through one is seen through the other, as in Torch7.
 * Construction, shape queries, get/set, row access,
 * printing and totable here; the math (arithmetic, reductions, gathers)
 * is l_tensor_ops.c over tensor_ops.c.
 */
#include <float.h>
#include <lauxlib.h>
#include <lua.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_util.h"
#include "numeric/rng.h"
#include "numeric/tensor.h"

#define TENSOR_MT "drover.Tensor"
#define RNG_KEY "drover.rng"

/* ============================== shared helpers ========================== */
/* Declared in l_util.h for the other bindings. */

/* The process-wide RNG behind layer initialisation and tensor.rand*,
 * kept in the registry (not a C global) so that each Lua state has its own
 * and drover.seed(n) fixes everything built after it. Created with seed 0. */
rng_t *ldrv_rng(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, RNG_KEY) == LUA_TUSERDATA) {
    rng_t *r = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return r;
  }
  lua_pop(L, 1);
  rng_t *r = lua_newuserdatauv(L, sizeof *r, 0);
  rng_seed(r, 0);
  lua_setfield(L, LUA_REGISTRYINDEX, RNG_KEY);
  return r;
}

/* ============================== boxes =================================== */

/* Pushes a tensor userdata taking ownership of t (freed by __gc). A NULL t
 * raises the library's last error message. Returns t. */
tensor *ltensor_push(lua_State *L, tensor *t) {
  if (!t) luaL_error(L, "%s", err_msg());
  tensor **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = t;
  luaL_setmetatable(L, TENSOR_MT);
  /* Lua sees a pointer-sized box: a loop that makes a big tensor a turn
   * (w:next_batch) would otherwise hold dozens of them until a collection
   * comes, each in freshly mapped pages. Telling the collector their size
   * frees them early, and their blocks are reused (tensor.c). */
  size_t kb = (size_t)t->storage->capacity * sizeof(float) >> 10;
  if (kb >= 1024 && t->storage->refs == 1 && !t->storage->mapped) /* its own block only */
    lua_gc(L, LUA_GCSTEP, kb > INT_MAX ? INT_MAX : (int)kb);
  return t;
}

/* The tensor at idx; raises a clear error when it is not one or was closed. */
tensor *ltensor_check(lua_State *L, int idx) {
  tensor **box = luaL_checkudata(L, idx, TENSOR_MT);
  if (!*box) luaL_argerror(L, idx, "tensor is closed");
  return *box;
}

static int64_t check_dim(lua_State *L, int arg) {
  lua_Integer n = luaL_checkinteger(L, arg);
  luaL_argcheck(L, n >= 0, arg, "sizes must be non-negative");
  return (int64_t)n;
}

/* Shape from varargs `first..top` (integers) or from one table {r, c}. */
static int shape_args(lua_State *L, int first, int64_t *shape) {
  int top = lua_gettop(L), n = 0;
  if (top == first && lua_istable(L, first)) {
    n = (int)luaL_len(L, first);
    luaL_argcheck(L, n <= TENSOR_MAXDIM, first, "too many dimensions");
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, first, i + 1);
      int isint;
      lua_Integer v = lua_tointegerx(L, -1, &isint);
      if (!isint || v < 0) luaL_argerror(L, first, "sizes must be non-negative integers");
      shape[i] = v;
      lua_pop(L, 1);
    }
    return n;
  }
  n = top - first + 1;
  if (n > TENSOR_MAXDIM) luaL_error(L, "tensor: at most %d dimensions", TENSOR_MAXDIM);
  for (int i = 0; i < n; i++) shape[i] = check_dim(L, first + i);
  return n < 0 ? 0 : n;
}

/* ============================== from Lua tables ========================= */

/* The shape of a nested table, read along its first elements. */
static int table_shape(lua_State *L, int idx, int64_t *shape) {
  int nd = 0;
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    if (nd == TENSOR_MAXDIM)
      luaL_error(L, "drover.tensor: more than %d nesting levels", TENSOR_MAXDIM);
    shape[nd++] = (int64_t)luaL_len(L, -1);
    if (shape[nd - 1] == 0) luaL_error(L, "drover.tensor: empty table at nesting level %d", nd);
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  return nd;
}

/* Copies the table on top of the stack (at nesting level `d`) into *p,
 * checking that it is rectangular. `path` names the position for errors. */
static void table_fill(lua_State *L, int d, int nd, const int64_t *shape, float **p, char *path,
                       size_t plen) {
  int64_t len = (int64_t)luaL_len(L, -1);
  if (len != shape[d])
    luaL_error(L, "drover.tensor: %s has %I elements, expected %I", plen ? path : "the table",
               (lua_Integer)len, (lua_Integer)shape[d]);
  for (int64_t i = 1; i <= len; i++) {
    lua_rawgeti(L, -1, i);
    size_t n = plen + (size_t)snprintf(path + plen, 128 - plen, "[%lld]", (long long)i);
    if (n >= 128) n = 127;
    if (d + 1 < nd) {
      if (!lua_istable(L, -1))
        luaL_error(L, "drover.tensor: element %s is a %s, expected a table", path,
                   luaL_typename(L, -1));
      table_fill(L, d + 1, nd, shape, p, path, n);
    } else {
      int isnum;
      lua_Number v = lua_tonumberx(L, -1, &isnum);
      if (!isnum || lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "drover.tensor: element %s is a %s, expected a number", path,
                   luaL_typename(L, -1));
      *(*p)++ = (float)v;
    }
    path[plen] = '\0';
    lua_pop(L, 1);
  }
}

static tensor *tensor_from_table(lua_State *L, int idx) {
  int64_t shape[TENSOR_MAXDIM];
  idx = lua_absindex(L, idx);
  int nd = table_shape(L, idx, shape);
  tensor *t = ltensor_push(L, tensor_new(nd, shape));
  float *p = tensor_data(t);
  char path[128] = "";
  lua_pushvalue(L, idx);
  table_fill(L, 0, nd, shape, &p, path, 0);
  lua_pop(L, 1);
  return t; /* its userdata is on the stack */
}

/* A tensor argument that may also be given as a (nested) table of numbers:
 * a table is converted and replaces the argument on the stack, so the new
 * tensor lives as long as the call. */
tensor *ltensor_arg(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_istable(L, idx)) {
    tensor *t = tensor_from_table(L, idx);
    lua_replace(L, idx);
    return t;
  }
  return ltensor_check(L, idx);
}

/* ============================== constructors ============================ */

static int l_new(lua_State *L) {
  if (lua_istable(L, 1) && lua_getmetatable(L, 1) == 0) {
    tensor_from_table(L, 1);
    return 1;
  }
  if (lua_type(L, 1) == LUA_TUSERDATA) {
    ltensor_push(L, tensor_clone(ltensor_check(L, 1)));
    return 1;
  }
  return luaL_argerror(L, 1, "expected a table of numbers (drover.tensor{ {1, 2}, {3, 4} })");
}

/* drover.tensor{...} is the same as drover.tensor.new{...}. */
static int l_call(lua_State *L) {
  lua_remove(L, 1);
  return l_new(L);
}

static tensor *new_from_args(lua_State *L, int first) {
  int64_t shape[TENSOR_MAXDIM];
  int nd = shape_args(L, first, shape);
  if (nd == 0) luaL_error(L, "tensor: give the sizes, e.g. zeros(2, 3)");
  return ltensor_push(L, tensor_new(nd, shape));
}

static int l_zeros(lua_State *L) {
  new_from_args(L, 1);
  return 1;
}

static int l_ones(lua_State *L) {
  tensor_fill(new_from_args(L, 1), 1.0f);
  return 1;
}

static int l_full(lua_State *L) {
  float v = (float)luaL_checknumber(L, 1);
  tensor_fill(new_from_args(L, 2), v);
  return 1;
}

static int l_rand(lua_State *L) {
  tensor_uniform(new_from_args(L, 1), ldrv_rng(L), 0.0f, 1.0f);
  return 1;
}

static int l_randn(lua_State *L) {
  tensor_normal(new_from_args(L, 1), ldrv_rng(L), 0.0f, 1.0f);
  return 1;
}

static int l_is(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, TENSOR_MT) != NULL);
  return 1;
}

/* ============================== methods ================================= */

static int m_shape(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* t:size() is the shape, as Torch7's t:size() and PyTorch's t.size();
 * t:size(d) the size of dimension d. */
static int m_size(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  if (lua_isnoneornil(L, 2)) return m_shape(L);
  lua_Integer d = luaL_checkinteger(L, 2);
  luaL_argcheck(L, d >= 1 && d <= t->ndim, 2, "dimension out of range");
  lua_pushinteger(L, t->shape[d - 1]);
  return 1;
}

static int m_numel(lua_State *L) {
  lua_pushinteger(L, tensor_numel(ltensor_check(L, 1)));
  return 1;
}

static int m_dim(lua_State *L) {
  lua_pushinteger(L, ltensor_check(L, 1)->ndim);
  return 1;
}

static int m_clone(lua_State *L) {
  ltensor_push(L, tensor_clone(ltensor_check(L, 1)));
  return 1;
}

static int m_reshape(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  int64_t shape[TENSOR_MAXDIM];
  int top = lua_gettop(L), nd;
  if (top == 2 && lua_istable(L, 2)) {
    nd = (int)luaL_len(L, 2);
    luaL_argcheck(L, nd >= 1 && nd <= TENSOR_MAXDIM, 2, "1 to 4 sizes expected");
    for (int i = 0; i < nd; i++) {
      lua_rawgeti(L, 2, i + 1);
      shape[i] = lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
  } else {
    nd = top - 1;
    if (nd < 1 || nd > TENSOR_MAXDIM) luaL_error(L, "reshape: give 1 to %d sizes", TENSOR_MAXDIM);
    for (int i = 0; i < nd; i++) shape[i] = luaL_checkinteger(L, i + 2);
  }
  ltensor_push(L, tensor_reshape(t, nd, shape));
  return 1;
}

/* t:t() transposes a 2-D tensor (a view). */
static int m_t(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  if (t->ndim != 2) luaL_error(L, "t(): expects a 2-D tensor, got %d-D", t->ndim);
  ltensor_push(L, tensor_transpose(t, 0, 1));
  return 1;
}

/* Reads a 1-based multi-index from args first..first+ndim-1. */
static void check_index(lua_State *L, const tensor *t, int first, int64_t *idx) {
  if (lua_gettop(L) < first + t->ndim - 1)
    luaL_error(L, "expected %d indices for a %d-D tensor", t->ndim, t->ndim);
  for (int d = 0; d < t->ndim; d++) {
    lua_Integer i = luaL_checkinteger(L, first + d);
    if (i < 1 || i > t->shape[d])
      luaL_error(L, "index %d is %I, out of range 1..%I", d + 1, i, (lua_Integer)t->shape[d]);
    idx[d] = i - 1;
  }
}

static int m_get(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  int64_t idx[TENSOR_MAXDIM];
  check_index(L, t, 2, idx);
  lua_pushnumber(L, tensor_get(t, idx));
  return 1;
}

static int m_set(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  int64_t idx[TENSOR_MAXDIM];
  check_index(L, t, 2, idx);
  float v = (float)luaL_checknumber(L, 2 + t->ndim);
  tensor_set(t, idx, v);
  lua_settop(L, 1);
  return 1;
}

static int m_fill(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  float v = (float)luaL_checknumber(L, 2);
  lua_settop(L, 1);
  if (tensor_is_contiguous(t)) {
    tensor_fill(t, v);
    return 1;
  }
  int64_t n = tensor_numel(t), idx[TENSOR_MAXDIM] = {0};
  for (int64_t k = 0; k < n; k++) { /* a strided view */
    tensor_set(t, idx, v);
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
  }
  lua_settop(L, 1);
  return 1;
}

static void push_table(lua_State *L, const tensor *t, int d, int64_t *idx) {
  lua_createtable(L, (int)t->shape[d], 0);
  for (int64_t i = 0; i < t->shape[d]; i++) {
    idx[d] = i;
    if (d + 1 == t->ndim) lua_pushnumber(L, tensor_get(t, idx));
    else push_table(L, t, d + 1, idx);
    lua_rawseti(L, -2, i + 1);
  }
}

static int m_totable(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  int64_t idx[TENSOR_MAXDIM] = {0};
  if (t->ndim == 0) lua_pushnumber(L, tensor_get(t, idx));
  else push_table(L, t, 0, idx);
  return 1;
}

static int m_close(lua_State *L) {
  tensor **box = luaL_checkudata(L, 1, TENSOR_MT);
  tensor_free(*box);
  *box = NULL;
  return 0;
}

/* ============================== printing ================================ */

#define PREVIEW_ROWS 12 /* more rows than this are elided in the middle */
#define PREVIEW_COLS 10
#define EDGE_ROWS 5
#define EDGE_COLS 4

/* Which of `n` positions are shown: all, or the first/last `edge`. */
static int shown(int64_t i, int64_t n, int64_t limit, int64_t edge) {
  return n <= limit || i < edge || i >= n - edge;
}

static float preview_at(const tensor *t, int64_t r, int64_t c) {
  /* Viewed as a matrix [numel / last, last]: r is a flat row index. */
  int64_t idx[TENSOR_MAXDIM] = {0};
  int nd = t->ndim;
  if (nd == 0) return tensor_get(t, idx);
  idx[nd - 1] = c;
  for (int d = nd - 2; d >= 0; d--) {
    idx[d] = r % t->shape[d];
    r /= t->shape[d];
  }
  return tensor_get(t, idx);
}

typedef struct preview {
  int64_t rows, cols;
  const char *fmt; /* printf format for one value */
  int width;
} preview;

static void choose_format(const tensor *t, preview *pv) {
  int integral = 1;
  double maxabs = 0, minabs = DBL_MAX;
  for (int64_t r = 0; r < pv->rows; r++) {
    if (!shown(r, pv->rows, PREVIEW_ROWS, EDGE_ROWS)) continue;
    for (int64_t c = 0; c < pv->cols; c++) {
      if (!shown(c, pv->cols, PREVIEW_COLS, EDGE_COLS)) continue;
      float v = preview_at(t, r, c);
      if (!isfinite(v)) continue;
      double a = fabs(v);
      if (a > maxabs) maxabs = a;
      if (a > 0 && a < minabs) minabs = a;
      if (v != floorf(v)) integral = 0;
    }
  }
  if (integral && maxabs < 1e9) pv->fmt = "%.0f";
  else if (maxabs < 1e5 && (minabs >= 1e-3 || minabs == DBL_MAX)) pv->fmt = "%.4f";
  else pv->fmt = "%.4e";
  pv->width = 1;
  char buf[64];
  for (int64_t r = 0; r < pv->rows; r++) {
    if (!shown(r, pv->rows, PREVIEW_ROWS, EDGE_ROWS)) continue;
    for (int64_t c = 0; c < pv->cols; c++) {
      if (!shown(c, pv->cols, PREVIEW_COLS, EDGE_COLS)) continue;
      int w = snprintf(buf, sizeof buf, pv->fmt, (double)preview_at(t, r, c));
      if (w > pv->width) pv->width = w;
    }
  }
}

/* One line: two spaces, then the values right-aligned to a common width
 * and separated by two spaces. */
static void add_row(luaL_Buffer *b, const tensor *t, const preview *pv, int64_t r) {
  char v[64], cell[96];
  luaL_addchar(b, '\n');
  for (int64_t c = 0; c < pv->cols; c++) {
    if (!shown(c, pv->cols, PREVIEW_COLS, EDGE_COLS)) {
      if (c == EDGE_COLS) luaL_addstring(b, "  ...");
      continue;
    }
    snprintf(v, sizeof v, pv->fmt, (double)preview_at(t, r, c));
    snprintf(cell, sizeof cell, "  %*s", pv->width, v);
    luaL_addstring(b, cell);
  }
}

/* "drover.tensor [2, 3]" then the values, one row per line, with the
 * middle rows and columns of big tensors elided. */
static int m_tostring(lua_State *L) {
  tensor **box = luaL_checkudata(L, 1, TENSOR_MT);
  if (!*box) {
    lua_pushliteral(L, "drover.tensor (closed)");
    return 1;
  }
  const tensor *t = *box;
  char shape[96];
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "drover.tensor ");
  luaL_addstring(&b, tensor_shape_str(t, shape, sizeof shape));
  int64_t n = tensor_numel(t);
  preview pv;
  pv.cols = t->ndim ? t->shape[t->ndim - 1] : 1;
  pv.rows = pv.cols ? n / pv.cols : 0;
  if (n > 0) {
    choose_format(t, &pv);
    for (int64_t r = 0; r < pv.rows; r++) {
      if (shown(r, pv.rows, PREVIEW_ROWS, EDGE_ROWS)) add_row(&b, t, &pv, r);
      else if (r == EDGE_ROWS) luaL_addstring(&b, "\n  ...");
    }
  }
  luaL_pushresult(&b);
  return 1;
}

/* ============================== indexing ================================ */

/* t[i]: the number at i of a 1-D tensor, else a view of row i; nil when
 * out of range, so that ipairs(t) works. Other keys are methods. */
static int m_index(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  if (lua_type(L, 2) != LUA_TNUMBER) {
    lua_getmetatable(L, 1);
    lua_getfield(L, -1, "__methods");
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
  }
  int isint;
  lua_Integer i = lua_tointegerx(L, 2, &isint);
  if (!isint || t->ndim == 0 || i < 1 || i > t->shape[0]) return 0;
  if (t->ndim == 1) {
    int64_t idx[1] = {i - 1};
    lua_pushnumber(L, tensor_get(t, idx));
    return 1;
  }
  tensor *v = ltensor_push(L, tensor_view(t));
  v->offset += (i - 1) * t->stride[0];
  for (int d = 0; d + 1 < t->ndim; d++) {
    v->shape[d] = t->shape[d + 1];
    v->stride[d] = t->stride[d + 1];
  }
  v->ndim = t->ndim - 1;
  v->shape[v->ndim] = 1, v->stride[v->ndim] = 1;
  return 1;
}

/* t[i] = v: sets an element of a 1-D tensor, or copies a tensor/table
 * with the same number of elements into row i. */
static int m_newindex(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  int isint;
  lua_Integer i = lua_tointegerx(L, 2, &isint);
  if (!isint) return luaL_error(L, "tensor: only integer indices can be assigned");
  if (t->ndim == 0 || i < 1 || i > t->shape[0])
    return luaL_error(L, "tensor: index %I out of range 1..%I", i,
                      (lua_Integer)(t->ndim ? t->shape[0] : 0));
  if (t->ndim == 1) {
    int64_t idx[1] = {i - 1};
    tensor_set(t, idx, (float)luaL_checknumber(L, 3));
    return 0;
  }
  tensor *src = ltensor_arg(L, 3);
  lua_pushcfunction(L, m_index);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_call(L, 2, 1);
  tensor *row = ltensor_check(L, -1);
  if (tensor_numel(src) != tensor_numel(row)) {
    char a[64], b[64];
    return luaL_error(L, "tensor: cannot assign %s to row %s", tensor_shape_str(src, a, sizeof a),
                      tensor_shape_str(row, b, sizeof b));
  }
  if (tensor_copy(row, src) < 0) return luaL_error(L, "%s", err_msg());
  return 0;
}

static int m_len(lua_State *L) {
  tensor *t = ltensor_check(L, 1);
  lua_pushinteger(L, t->ndim ? t->shape[0] : 0);
  return 1;
}

/* ============================== registration ============================ */

static const luaL_Reg methods[] = {
    {"shape", m_shape},     {"size", m_size},   {"numel", m_numel}, {"dim", m_dim},
    {"clone", m_clone},
    {"reshape", m_reshape}, {"t", m_t},         {"get", m_get},   {"set", m_set},
    {"fill", m_fill},       {"totable", m_totable}, {"close", m_close}, {NULL, NULL}};

static const luaL_Reg metamethods[] = {
    {"__index", m_index}, {"__newindex", m_newindex}, {"__len", m_len},
    {"__tostring", m_tostring}, {"__gc", m_close}, {"__close", m_close}, {NULL, NULL}};

static const luaL_Reg funcs[] = {{"new", l_new},     {"zeros", l_zeros}, {"ones", l_ones},
                                 {"full", l_full},   {"rand", l_rand},   {"randn", l_randn},
                                 {"is_tensor", l_is}, {NULL, NULL}};

int luaopen_drover_tensor(lua_State *L) {
  ldrv_createmeta(L, TENSOR_MT, metamethods, methods);

  luaL_newlib(L, funcs);
  lua_createtable(L, 0, 1); /* drover.tensor{...} calls new */
  lua_pushcfunction(L, l_call);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, -2);
  ltensor_ops_open(L, -1);
  return 1;
}
