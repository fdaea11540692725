/* l_nn_sparse.c - Lua constructors of the id layers (nn.EmbeddingBag,
 * nn.SparseLinear, nn.Embedding { sparse = true }) and model:tables(), the
 * inspection of a model's sparse tables. */
#include "luabind/l_nn_sparse.h"

#include <lauxlib.h>
#include <string.h>

#include "base/err.h"
#include "luabind/l_util.h"
#include "numeric/nn_sparse.h"

/* Refuses a key of the options table at arg that is not in `known` (a
 * NULL-terminated list), naming the known ones. */
static void check_keys(lua_State *L, int arg, const char *layer, const char *const *known) {
  if (lua_isnoneornil(L, arg)) return;
  luaL_checktype(L, arg, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, arg)) {
    lua_pop(L, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    bool ok = false;
    for (int i = 0; k && known[i] && !ok; i++) ok = strcmp(k, known[i]) == 0;
    if (!ok) {
      char list[128] = "";
      for (int i = 0; known[i]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, known[i], sizeof list - strlen(list) - 1);
      }
      luaL_error(L, "nn.%s: unknown option '%s' (options: %s)", layer,
                 k ? k : luaL_tolstring(L, -1, NULL), list);
    }
  }
}

static lua_Integer check_size(lua_State *L, int arg, const char *layer, const char *what) {
  int isint;
  lua_Integer n = lua_tointegerx(L, arg, &isint);
  if (!isint || n < 1)
    luaL_error(L, "nn.%s: %s must be a positive integer (got %s)", layer, what,
               lua_isnoneornil(L, arg) ? "nothing" : luaL_tolstring(L, arg, NULL));
  return n;
}

static float opt_std(lua_State *L, int arg, const char *layer, float def) {
  if (!lua_istable(L, arg) || lua_getfield(L, arg, "std") == LUA_TNIL) {
    if (lua_istable(L, arg)) lua_pop(L, 1);
    return def;
  }
  if (!lua_isnumber(L, -1) || !(lua_tonumber(L, -1) >= 0))
    luaL_error(L, "nn.%s: std must be a number >= 0", layer);
  float v = (float)lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Option `key` among `names` (index returned), def when absent. */
static int opt_enum(lua_State *L, int arg, const char *layer, const char *key,
                    const char *const *names, int def) {
  if (!lua_istable(L, arg) || lua_getfield(L, arg, key) == LUA_TNIL) {
    if (lua_istable(L, arg)) lua_pop(L, 1);
    return def;
  }
  const char *v = lua_tostring(L, -1);
  for (int i = 0; v && names[i]; i++)
    if (strcmp(v, names[i]) == 0) {
      lua_pop(L, 1);
      return i;
    }
  return luaL_error(L, "nn.%s: %s must be \"%s\" or \"%s\"", layer, key, names[0], names[1]);
}

static int push_new(lua_State *L, nn_module *m) {
  if (!m) return luaL_error(L, "%s", err_msg());
  lnn_push_module(L, m);
  nn_unref(m); /* the userdata holds its own reference now */
  return 1;
}

int lnn_embedding_bag(lua_State *L) {
  static const char *const known[] = {"mode", "bags", "std", NULL};
  static const char *const modes[] = {"sum", "mean", NULL};
  static const char *const bags[] = {"field", "all", NULL};
  lua_Integer n = check_size(L, 1, "EmbeddingBag", "the number of ids");
  lua_Integer d = check_size(L, 2, "EmbeddingBag", "the embedding size");
  check_keys(L, 3, "EmbeddingBag", known);
  nn_bag_opts o = NN_BAG_DEFAULTS;
  o.mode = opt_enum(L, 3, "EmbeddingBag", "mode", modes, 0) ? NN_BAG_MEAN : NN_BAG_SUM;
  int b = opt_enum(L, 3, "EmbeddingBag", "bags", bags, -1);
  o.bags = b < 0 ? NN_BAGS_AUTO : b == 0 ? NN_BAGS_FIELD : NN_BAGS_ALL;
  o.std = opt_std(L, 3, "EmbeddingBag", 1.0f);
  return push_new(L, nn_embedding_bag((uint64_t)n, d, &o, ldrv_rng(L)));
}

int lnn_sparse_linear(lua_State *L) {
  static const char *const known[] = {"std", NULL};
  lua_Integer n = check_size(L, 1, "SparseLinear", "the number of ids");
  lua_Integer out = check_size(L, 2, "SparseLinear", "the output size");
  check_keys(L, 3, "SparseLinear", known);
  return push_new(L, nn_sparse_linear((uint64_t)n, out, opt_std(L, 3, "SparseLinear", 0.0f),
                                      ldrv_rng(L)));
}

int lnn_embedding_opts(lua_State *L) {
  static const char *const known[] = {"sparse", "std", NULL};
  lua_Integer n = check_size(L, 1, "Embedding", "the number of ids");
  lua_Integer d = check_size(L, 2, "Embedding", "the embedding size");
  check_keys(L, 3, "Embedding", known);
  lua_getfield(L, 3, "sparse");
  bool sparse = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (!sparse) {
    lua_getfield(L, 3, "std");
    if (!lua_isnil(L, -1)) return luaL_error(L, "nn.Embedding: std is an option of sparse = true");
    return push_new(L, nn_embedding(n, d, ldrv_rng(L)));
  }
  return push_new(L, nn_embedding_sparse(n, d, opt_std(L, 3, "Embedding", 1.0f), ldrv_rng(L)));
}

int lnn_m_tables(lua_State *L) {
  nn_module *m = lnn_check_module(L, 1);
  nn_table_list l = {0};
  if (nn_collect_tables(m, false, &l) < 0) return luaL_error(L, "%s", err_msg());
  lua_createtable(L, l.n, 0);
  for (int i = 0; i < l.n; i++) {
    const sptable *t = l.items[i].value;
    lua_createtable(L, 0, 5);
    lua_pushstring(L, l.items[i].name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, (lua_Integer)sptable_rows(t));
    lua_setfield(L, -2, "rows");
    lua_pushinteger(L, (lua_Integer)sptable_dim(t));
    lua_setfield(L, -2, "dim");
    lua_pushinteger(L, (lua_Integer)sptable_held(t));
    lua_setfield(L, -2, "held");
    lua_pushinteger(L, (lua_Integer)sptable_bytes(t));
    lua_setfield(L, -2, "bytes");
    lua_rawseti(L, -2, i + 1);
  }
  nn_table_list_free(&l);
  return 1;
}
