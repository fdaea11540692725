/* l_nn.c - drover.nn: layers, containers and losses as Lua userdata.
 *
 * A "drover.Module" userdata holds one reference to a refcounted C module
 * (nn_ref/nn_unref); a Sequential holds its own references to its
 * children, so `seq[2]` hands out another reference to the same layer.
 * A weak registry table maps each live C module to its userdata, so the
 * same layer is always the same Lua value. Losses ("drover.Loss") work the
 * same way and are callable: loss(pred, target) is loss:forward(...).
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_opts.h"
#include "luabind/l_util.h"
#include "luabind/l_nn_sparse.h"
#include "numeric/nn.h"
#include "numeric/tensor.h"

#define MODULE_MT "drover.Module"
#define LOSS_MT "drover.Loss"
#define MODULES_KEY "drover.modules" /* weak: lightuserdata(nn_module*) -> userdata */



/* ============================== modules ================================= */

/* Pushes the userdata of m, creating it (with a new reference) if m has
 * none alive. The caller keeps its own reference, if any. */
void lnn_push_module(lua_State *L, nn_module *m) {
  lua_getfield(L, LUA_REGISTRYINDEX, MODULES_KEY);
  if (lua_rawgetp(L, -1, m) == LUA_TUSERDATA) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  nn_module **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = nn_ref(m);
  luaL_setmetatable(L, MODULE_MT);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, m);
  lua_remove(L, -2);
}

/* Pushes a module just built (one reference, which the userdata takes
 * over); NULL raises the library error. */
static void push_new_module(lua_State *L, nn_module *m) {
  if (!m) luaL_error(L, "%s", err_msg());
  lnn_push_module(L, m);
  nn_unref(m); /* the userdata holds its own reference now */
}

nn_module *lnn_check_module(lua_State *L, int idx) {
  nn_module **box = luaL_checkudata(L, idx, MODULE_MT);
  return *box;
}

static int is_sequential(const nn_module *m) { return nn_takes_children(m); }

static int m_gc(lua_State *L) {
  nn_module **box = luaL_checkudata(L, 1, MODULE_MT);
  nn_unref(*box);
  *box = NULL;
  return 0;
}

/* Text of nn_describe(), grown until it fits. */
static void push_description(lua_State *L, const nn_module *m) {
  size_t n = 4096;
  for (;;) {
    char *buf = malloc(n);
    if (!buf) luaL_error(L, "out of memory describing a module");
    int len = nn_describe(m, buf, n);
    if (len < 0 || (size_t)len + 1 < n) {
      lua_pushstring(L, len < 0 ? err_msg() : buf);
      free(buf);
      return;
    }
    free(buf);
    n *= 4;
  }
}

static int m_tostring(lua_State *L) {
  nn_module **box = luaL_checkudata(L, 1, MODULE_MT);
  if (!*box) lua_pushliteral(L, "nn module (collected)");
  else push_description(L, *box);
  return 1;
}

/* A contiguous 2-D view of the input: one example given as a 1-D tensor
 * becomes a batch of one. Sets *single for the caller to undo it. */
static const tensor *batch_input(lua_State *L, int idx, int *single) {
  tensor *x = ltensor_arg(L, idx);
  *single = x->ndim == 1;
  if (!tensor_is_contiguous(x)) x = ltensor_push(L, tensor_clone(x));
  if (*single) {
    int64_t shape[2] = {1, x->shape[0]};
    x = ltensor_push(L, tensor_reshape(x, 2, shape));
  }
  if (x->ndim < 2) {
    char s[64];
    luaL_error(L, "forward: input %s must be [batch, ...] (or one example [features])",
               tensor_shape_str(x, s, sizeof s));
  }
  return x;
}

/* A copy of a module-owned buffer (the module reuses it on the next
 * call), reshaped back to 1-D when the input was a single example. */
static void push_result(lua_State *L, const tensor *y, int single) {
  tensor *c = ltensor_push(L, tensor_clone(y));
  if (single && c->ndim == 2 && c->shape[0] == 1) {
    int64_t n = c->shape[1];
    ltensor_push(L, tensor_reshape(c, 1, &n));
  }
}

static int m_forward(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  int single;
  const tensor *x = batch_input(L, 2, &single), *y;
  if (nn_forward(m, x, &y) < 0) return luaL_error(L, "%s", err_msg());
  push_result(L, y, single);
  return 1;
}

/* m(x) is m:forward(x). */
static int m_call(lua_State *L) { return m_forward(L); }

/* m:backward(x, dy): accumulates parameter gradients, returns dx. x must
 * be the input of the last forward. */
static int m_backward(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  int single, dsingle;
  const tensor *x = batch_input(L, 2, &single), *dx;
  const tensor *dy = batch_input(L, 3, &dsingle);
  if (nn_backward(m, x, dy, &dx) < 0) return luaL_error(L, "%s", err_msg());
  push_result(L, dx, single);
  return 1;
}

static int m_zero_grad(lua_State *L) {
  nn_zero_grad(lnn_check_module(L, 1));
  lua_settop(L, 1);
  return 1;
}

/* A list of { name = "1.weight", value = tensor, grad = tensor }: views
 * sharing the module's storage, so writing them changes the model. */
static int m_parameters(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  nn_param_list pl = {0};
  if (nn_collect_params(m, &pl) < 0) {
    nn_param_list_free(&pl);
    return luaL_error(L, "%s", err_msg());
  }
  lua_createtable(L, pl.n, 0);
  for (int i = 0; i < pl.n; i++) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, pl.items[i].name);
    lua_setfield(L, -2, "name");
    tensor *v = tensor_view(pl.items[i].value), *g = v ? tensor_view(pl.items[i].grad) : NULL;
    if (!v || !g) {
      tensor_free(v);
      nn_param_list_free(&pl);
      return luaL_error(L, "%s", err_msg());
    }
    ltensor_push(L, v); /* cannot fail now: v is not NULL */
    lua_setfield(L, -2, "value");
    ltensor_push(L, g);
    lua_setfield(L, -2, "grad");
    lua_rawseti(L, -2, i + 1);
  }
  nn_param_list_free(&pl);
  return 1;
}

static int m_num_params(lua_State *L) {
  lua_pushinteger(L, nn_num_params(lnn_check_module(L, 1)));
  return 1;
}

/* m:training([on]) switches training mode (dropout active), recursively;
 * m:evaluate() switches it off. Both return m, for chaining. */
static int m_training(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  nn_set_training(m, lua_isnone(L, 2) ? 1 : lua_toboolean(L, 2));
  lua_settop(L, 1);
  return 1;
}

static int m_evaluate(lua_State *L) {
  nn_set_training(lnn_check_module(L, 1), 0);
  lua_settop(L, 1);
  return 1;
}

static int m_is_training(lua_State *L) {
  lua_pushboolean(L, lnn_check_module(L, 1)->training);
  return 1;
}

static int m_type(lua_State *L) {
  lua_pushstring(L, lnn_check_module(L, 1)->ops->type);
  return 1;
}

/* seq:add(module): appends a layer; returns seq. */
static int m_add(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  nn_module *child = lnn_check_module(L, 2);
  if (!is_sequential(m))
    return luaL_error(L, "add: only an nn.Sequential, nn.Concat or nn.Sum takes layers");
  if (nn_sequential_add(m, child) < 0) return luaL_error(L, "%s", err_msg());
  lua_settop(L, 1);
  return 1;
}

/* seq[i] is the i-th layer (nil out of range); other keys are methods. */
static int m_index(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    int isint;
    lua_Integer i = lua_tointegerx(L, 2, &isint);
    if (!isint || i < 1 || i > m->nchildren) return 0;
    lnn_push_module(L, m->children[i - 1]);
    return 1;
  }
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "__methods");
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

static int m_len(lua_State *L) {
  lua_pushinteger(L, lnn_check_module(L, 1)->nchildren);
  return 1;
}

/* m:save(path): the parameters in a safetensors file under PyTorch's
 * names, the spec in its metadata (nn_save); returns m. */
static int m_save(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  if (nn_save(m, luaL_checkstring(L, 2)) < 0) return luaL_error(L, "%s", err_msg());
  lua_settop(L, 1);
  return 1;
}

/* m:load(path): values from a safetensors file of the same architecture
 * (one nn_save or PyTorch wrote); returns m. */
static int m_load(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  if (nn_load_params(m, luaL_checkstring(L, 2)) < 0) return luaL_error(L, "%s", err_msg());
  lua_settop(L, 1);
  return 1;
}

/* m:init("kaiming" | "xavier" | "uniform"): re-initialises every Linear
 * and Conv2d in m with PyTorch's formulas (nn_init); returns m. */
static int m_init(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  if (nn_init(m, luaL_checkstring(L, 2), ldrv_rng(L)) < 0) return luaL_error(L, "%s", err_msg());
  lua_settop(L, 1);
  return 1;
}

/* ============================== constructors ============================ */

static lua_Integer check_int(lua_State *L, int arg, const char *layer, const char *what,
                             lua_Integer min) {
  int isint;
  lua_Integer n = lua_tointegerx(L, arg, &isint);
  if (!isint || n < min)
    luaL_error(L, "nn.%s: %s must be a%s integer (got %s)", layer, what,
               min > 0 ? " positive" : " non-negative",
               lua_isnoneornil(L, arg) ? "nothing" : luaL_tolstring(L, arg, NULL));
  return n;
}

static lua_Integer check_size(lua_State *L, int arg, const char *what) {
  return check_int(L, arg, "Linear", what, 1);
}

/* Applies the `init` option of the table at `arg`, if any, to the module
 * on top of the stack. */
static void apply_init(lua_State *L, int arg) {
  if (!lua_istable(L, arg)) return;
  lua_getfield(L, arg, "init");
  if (!lua_isnil(L, -1) && nn_init(lnn_check_module(L, -2), luaL_checkstring(L, -1),
                                   ldrv_rng(L)) < 0)
    luaL_error(L, "%s", err_msg());
  lua_pop(L, 1);
}

/* nn.Linear(in, out [, { init = "kaiming" | "xavier" | "uniform" }]). */
static int l_linear(lua_State *L) {
  lua_Integer in = check_size(L, 1, "the input size"), out = check_size(L, 2, "the output size");
  push_new_module(L, nn_linear(in, out, ldrv_rng(L)));
  apply_init(L, 3);
  return 1;
}

/* The value at `arg` as a {height, width} pair: an integer n (n, n) or a
 * table {h, w}, each at least min (PyTorch's int-or-tuple arguments). */
static void check_pair(lua_State *L, int arg, const char *layer, const char *what,
                       lua_Integer min, int64_t *out) {
  arg = lua_absindex(L, arg);
  if (!lua_istable(L, arg)) {
    out[0] = out[1] = check_int(L, arg, layer, what, min);
    return;
  }
  if (luaL_len(L, arg) != 2)
    luaL_error(L, "nn.%s: %s must be an integer or a pair {height, width} (got a table of %d)",
               layer, what, (int)luaL_len(L, arg));
  for (int i = 0; i < 2; i++) {
    lua_rawgeti(L, arg, i + 1);
    out[i] = check_int(L, lua_gettop(L), layer, what, min);
    lua_pop(L, 1);
  }
}

/* Option `key` of the table at `arg` as a pair, def for both when absent. */
static void opt_pair(lua_State *L, int arg, const char *layer, const char *key,
                     lua_Integer def, lua_Integer min, int64_t *out) {
  out[0] = out[1] = def;
  if (!lua_istable(L, arg)) return;
  lua_getfield(L, arg, key);
  if (!lua_isnil(L, -1)) {
    char what[48];
    snprintf(what, sizeof what, "option %s", key);
    check_pair(L, -1, layer, what, min, out);
  }
  lua_pop(L, 1);
}

/* nn.Conv2d(in, out, k [, { stride = 1, padding = 0, dilation = 1,
 * bias = true, init = ... }]); k, stride, padding and dilation are each an
 * integer or a {height, width} pair. */
static int l_conv2d(lua_State *L) {
  lua_Integer in = check_int(L, 1, "Conv2d", "the input channels", 1);
  lua_Integer out = check_int(L, 2, "Conv2d", "the output channels", 1);
  int64_t k[2];
  check_pair(L, 3, "Conv2d", "the kernel size", 1, k);
  nn_conv_opts o = NN_CONV_DEFAULTS;
  if (!lua_isnoneornil(L, 4)) luaL_checktype(L, 4, LUA_TTABLE);
  opt_pair(L, 4, "Conv2d", "stride", 1, 1, o.stride);
  opt_pair(L, 4, "Conv2d", "padding", 0, 0, o.padding);
  opt_pair(L, 4, "Conv2d", "dilation", 1, 1, o.dilation);
  if (lua_istable(L, 4)) {
    lua_getfield(L, 4, "bias");
    if (!lua_isnil(L, -1)) o.bias = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  push_new_module(L, nn_conv2d(in, out, k, &o, ldrv_rng(L)));
  apply_init(L, 4);
  return 1;
}

/* nn.MaxPool2d(k [, stride [, padding]]) or (k, { stride, padding }); each
 * an integer or a {height, width} pair; stride defaults to k, as in
 * PyTorch. A table second argument is the options unless it is a pair. */
typedef nn_module *(*pool_make)(const int64_t *, const int64_t *, const int64_t *);
static int pool(lua_State *L, const char *name, pool_make make) {
  int64_t k[2], s[2], p[2] = {0, 0};
  check_pair(L, 1, name, "the kernel size", 1, k);
  s[0] = k[0], s[1] = k[1];
  bool opts = false;
  if (lua_istable(L, 2)) {
    lua_rawgeti(L, 2, 1);
    opts = lua_isnil(L, -1);
    lua_pop(L, 1);
  }
  if (opts) {
    if (!lua_isnoneornil(L, 3))
      luaL_error(L, "nn.%s: padding given both in the options and as argument 3", name);
    opt_pair(L, 2, name, "stride", 0, 1, s);
    if (s[0] == 0) s[0] = k[0], s[1] = k[1]; /* absent */
    opt_pair(L, 2, name, "padding", 0, 0, p);
  } else {
    if (!lua_isnoneornil(L, 2)) check_pair(L, 2, name, "the stride", 1, s);
    if (!lua_isnoneornil(L, 3)) check_pair(L, 3, name, "the padding", 0, p);
  }
  push_new_module(L, make(k, s, p));
  return 1;
}

static int l_maxpool2d(lua_State *L) { return pool(L, "MaxPool2d", nn_maxpool2d); }
static int l_avgpool2d(lua_State *L) { return pool(L, "AvgPool2d", nn_avgpool2d); }

static int l_flatten(lua_State *L) {
  push_new_module(L, nn_flatten());
  return 1;
}

/* nn.Unflatten(c, h, w) or nn.Unflatten({c, h, w}): one to three sizes. */
static int l_unflatten(lua_State *L) {
  int64_t shape[3];
  int table = lua_istable(L, 1);
  int n = table ? (int)luaL_len(L, 1) : lua_gettop(L);
  if (n < 1 || n > 3) return luaL_error(L, "nn.Unflatten: expected 1 to 3 sizes, got %d", n);
  for (int i = 0; i < n; i++) {
    if (table) lua_rawgeti(L, 1, i + 1);
    else lua_pushvalue(L, i + 1);
    shape[i] = check_int(L, lua_gettop(L), "Unflatten", "each size", 1);
    lua_pop(L, 1);
  }
  push_new_module(L, nn_unflatten(n, shape));
  return 1;
}

/* nn.DotInteraction(fields [, { keep_first = false }]) */
static int l_dot_interaction(lua_State *L) {
  static const char *const keys[] = {"keep_first", NULL};
  lua_Integer f = check_int(L, 1, "DotInteraction", "fields (the vectors in a row)", 1);
  if (f < 2) return luaL_error(L, "nn.DotInteraction: fields must be at least 2 (got %I)", f);
  lopts_check_keys(L, 2, "nn.DotInteraction", keys);
  bool keep = lopts_bool(L, 2, "keep_first", 0, "nn.DotInteraction");
  push_new_module(L, nn_dot_interaction(f, keep));
  return 1;
}

static int l_identity(lua_State *L) {
  push_new_module(L, nn_identity());
  return 1;
}

static int l_gelu(lua_State *L) {
  push_new_module(L, nn_gelu());
  return 1;
}

/* nn.Embedding(n, dim): ids 0..n-1 in, rows of dim out. */
static int l_embedding(lua_State *L) {
  if (lua_istable(L, 3)) return lnn_embedding_opts(L); /* { sparse = true } */
  lua_Integer n = check_int(L, 1, "Embedding", "the number of ids", 1);
  lua_Integer d = check_int(L, 2, "Embedding", "the embedding size", 1);
  push_new_module(L, nn_embedding(n, d, ldrv_rng(L)));
  return 1;
}

/* Number field `key` of the options table at `arg` (def when absent). */
static float opt_number(lua_State *L, int arg, const char *key, float def) {
  if (!lua_istable(L, arg)) return def;
  lua_getfield(L, arg, key);
  float v = (float)luaL_optnumber(L, -1, def);
  lua_pop(L, 1);
  return v;
}

/* nn.LayerNorm(dim [, { eps = 1e-5 }]). */
static int l_layer_norm(lua_State *L) {
  lua_Integer d = check_int(L, 1, "LayerNorm", "the size", 1);
  push_new_module(L, nn_layer_norm(d, opt_number(L, 2, "eps", 1e-5f)));
  return 1;
}

/* nn.BatchNorm1d / 2d(channels [, { eps = 1e-5, momentum = 0.1 }]). */
static int batch_norm(lua_State *L, int dims) {
  lua_Integer c = check_int(L, 1, dims == 1 ? "BatchNorm1d" : "BatchNorm2d", "the channels", 1);
  push_new_module(L, nn_batch_norm(dims, c, opt_number(L, 2, "eps", 1e-5f),
                                   opt_number(L, 2, "momentum", 0.1f)));
  return 1;
}

static int l_batch_norm1d(lua_State *L) { return batch_norm(L, 1); }
static int l_batch_norm2d(lua_State *L) { return batch_norm(L, 2); }

/* nn.LeakyReLU(slope = 0.01). */
static int l_leaky_relu(lua_State *L) {
  push_new_module(L, nn_leaky_relu((float)luaL_optnumber(L, 1, 0.01)));
  return 1;
}

static int l_relu(lua_State *L) {
  push_new_module(L, nn_relu());
  return 1;
}

static int l_tanh(lua_State *L) {
  push_new_module(L, nn_tanh());
  return 1;
}

static int l_sigmoid(lua_State *L) {
  push_new_module(L, nn_sigmoid());
  return 1;
}

static int l_softmax(lua_State *L) {
  push_new_module(L, nn_softmax());
  return 1;
}

/* nn.Dropout(p = 0.5); its mask stream is seeded from the global RNG, so
 * drover.seed() fixes it too. */
static int l_dropout(lua_State *L) {
  lua_Number p = luaL_optnumber(L, 1, 0.5);
  if (!(p >= 0 && p < 1)) luaL_argerror(L, 1, "nn.Dropout: p must be in [0, 1)");
  push_new_module(L, nn_dropout((float)p, rng_u64(ldrv_rng(L))));
  return 1;
}

/* nn.Sequential { layer, layer, ... } (or layers as arguments, or none);
 * nn.Concat and nn.Sum likewise. */
static int container(lua_State *L, nn_module *seq) {
  int list = lua_istable(L, 1) && !luaL_testudata(L, 1, MODULE_MT);
  int n = list ? (int)luaL_len(L, 1) : lua_gettop(L);
  push_new_module(L, seq);
  for (int i = 1; i <= n; i++) {
    if (list) lua_rawgeti(L, 1, i);
    else lua_pushvalue(L, i);
    nn_module **box = luaL_testudata(L, -1, MODULE_MT);
    if (!box)
      return luaL_error(L, "nn.%s: element %d is a %s, expected a layer (nn.Linear(...), "
                        "nn.ReLU(), ...)", seq->ops->type, i, luaL_typename(L, -1));
    if (nn_sequential_add(seq, *box) < 0)
      return luaL_error(L, "nn.%s: element %d: %s", seq->ops->type, i, err_msg());
    lua_pop(L, 1);
  }
  return 1;
}

static int l_sequential(lua_State *L) { return container(L, nn_sequential()); }
static int l_concat(lua_State *L) { return container(L, nn_concat()); }
static int l_sum(lua_State *L) { return container(L, nn_sum()); }

/* nn.Residual(m): y = x + m(x). */
static int l_residual(lua_State *L) {
  push_new_module(L, nn_residual(lnn_check_module(L, 1)));
  return 1;
}

/* nn.load(path): the model m:save wrote, rebuilt from the file alone. */
static int l_load(lua_State *L) {
  push_new_module(L, nn_load(luaL_checkstring(L, 1), ldrv_rng(L)));
  return 1;
}

/* ============================== losses ================================== */

nn_loss *lnn_check_loss(lua_State *L, int idx) {
  nn_loss **box = luaL_checkudata(L, idx, LOSS_MT);
  return *box;
}

static void push_loss(lua_State *L, nn_loss *l) {
  if (!l) luaL_error(L, "%s", err_msg());
  nn_loss **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = l;
  luaL_setmetatable(L, LOSS_MT);
}

static int loss_gc(lua_State *L) {
  nn_loss **box = luaL_checkudata(L, 1, LOSS_MT);
  nn_loss_unref(*box);
  *box = NULL;
  return 0;
}

static int loss_tostring(lua_State *L) {
  nn_loss **box = luaL_checkudata(L, 1, LOSS_MT);
  lua_pushfstring(L, "nn.%s()", *box ? (*box)->ops->type : "Loss");
  return 1;
}

/* Prediction as a batch; a 1-D target stays as given (class ids). */
static void loss_args(lua_State *L, const tensor **pred, const tensor **target, int *single) {
  *pred = batch_input(L, 2, single);
  if (lua_isnoneornil(L, 3)) luaL_argerror(L, 3, "a target is required");
  if (lua_type(L, 3) == LUA_TNUMBER) { /* one class id or value */
    tensor *one = ltensor_push(L, tensor_new1(1));
    tensor_data(one)[0] = (float)lua_tonumber(L, 3);
    lua_replace(L, 3);
  }
  tensor *t = ltensor_arg(L, 3);
  if (*single && (*pred)->shape[1] > 1 && t->ndim == 1 && t->shape[0] == (*pred)->shape[1]) {
    int64_t shape[2] = {1, t->shape[0]}; /* one example's target vector */
    if (!tensor_is_contiguous(t)) t = ltensor_push(L, tensor_clone(t));
    t = ltensor_push(L, tensor_reshape(t, 2, shape));
  } else if (!tensor_is_contiguous(t)) {
    t = ltensor_push(L, tensor_clone(t));
  }
  *target = t;
}

static int loss_forward(lua_State *L) {
  nn_loss *l = lnn_check_loss(L, 1);
  const tensor *pred, *target;
  int single;
  loss_args(L, &pred, &target, &single);
  float v;
  if (nn_loss_forward(l, pred, target, &v) < 0) return luaL_error(L, "%s", err_msg());
  lua_pushnumber(L, v);
  return 1;
}

/* loss:backward(pred, target) -> d(loss)/d(pred). */
static int loss_backward(lua_State *L) {
  nn_loss *l = lnn_check_loss(L, 1);
  const tensor *pred, *target, *g;
  int single;
  loss_args(L, &pred, &target, &single);
  if (nn_loss_backward(l, pred, target, &g) < 0) return luaL_error(L, "%s", err_msg());
  push_result(L, g, single);
  return 1;
}

static int loss_type(lua_State *L) {
  lua_pushstring(L, lnn_check_loss(L, 1)->ops->type);
  return 1;
}

static int l_cross_entropy(lua_State *L) {
  push_loss(L, nn_cross_entropy());
  return 1;
}

static int l_mse(lua_State *L) {
  push_loss(L, nn_mse());
  return 1;
}

static int l_bce(lua_State *L) {
  push_loss(L, nn_bce_with_logits());
  return 1;
}

static int l_l1(lua_State *L) {
  push_loss(L, nn_l1());
  return 1;
}

static int l_nll(lua_State *L) {
  push_loss(L, nn_nll());
  return 1;
}

/* nn.Huber(delta = 1) or nn.Huber { delta = 1 }. */
static int l_huber(lua_State *L) {
  lua_Number d = 1.0;
  if (lua_istable(L, 1)) {
    lua_getfield(L, 1, "delta");
    d = luaL_optnumber(L, -1, 1.0);
    lua_pop(L, 1);
  } else {
    d = luaL_optnumber(L, 1, 1.0);
  }
  push_loss(L, nn_huber((float)d));
  return 1;
}

/* ============================== registration ============================ */

static const luaL_Reg module_methods[] = {
    {"forward", m_forward},       {"backward", m_backward},     {"zero_grad", m_zero_grad},
    {"parameters", m_parameters}, {"num_params", m_num_params}, {"training", m_training},
    {"evaluate", m_evaluate},     {"is_training", m_is_training}, {"type", m_type},
    {"add", m_add},               {"save", m_save},             {"load", m_load},
    {"init", m_init},             {"tables", lnn_m_tables},     {NULL, NULL}};

static const luaL_Reg module_meta[] = {{"__index", m_index},       {"__len", m_len},
                                       {"__call", m_call},         {"__tostring", m_tostring},
                                       {"__gc", m_gc},             {NULL, NULL}};

static const luaL_Reg loss_methods[] = {
    {"forward", loss_forward}, {"backward", loss_backward}, {"type", loss_type}, {NULL, NULL}};

static const luaL_Reg loss_meta[] = {{"__call", loss_forward}, {"__tostring", loss_tostring},
                                     {"__gc", loss_gc},        {NULL, NULL}};

static const luaL_Reg funcs[] = {
    {"Sequential", l_sequential}, {"Linear", l_linear},
    {"ReLU", l_relu},             {"Tanh", l_tanh},
    {"Sigmoid", l_sigmoid},       {"Softmax", l_softmax},
    {"Dropout", l_dropout},       {"CrossEntropy", l_cross_entropy},
    {"MSE", l_mse},               {"BCEWithLogits", l_bce},
    {"L1", l_l1},                 {"Huber", l_huber},
    {"NLL", l_nll},               {"Conv2d", l_conv2d},
    {"MaxPool2d", l_maxpool2d},   {"AvgPool2d", l_avgpool2d},
    {"Flatten", l_flatten},       {"Unflatten", l_unflatten},
    {"Identity", l_identity},     {"GELU", l_gelu},
    {"LeakyReLU", l_leaky_relu},  {"Embedding", l_embedding},
    {"LayerNorm", l_layer_norm},  {"BatchNorm1d", l_batch_norm1d},
    {"BatchNorm2d", l_batch_norm2d}, {"Residual", l_residual},
    {"Concat", l_concat},         {"Sum", l_sum},         {"DotInteraction", l_dot_interaction},         {"load", l_load},
    {"EmbeddingBag", lnn_embedding_bag}, {"SparseLinear", lnn_sparse_linear},
    {NULL, NULL}};

int luaopen_drover_nn(lua_State *L) {
  ldrv_createmeta(L, MODULE_MT, module_meta, module_methods);
  ldrv_createmeta(L, LOSS_MT, loss_meta, loss_methods);

  lua_newtable(L); /* weak map C module -> its userdata */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, MODULES_KEY);

  luaL_newlib(L, funcs);
  return 1;
}
