/* l_data.c - drover.data: readers, dataset operations and batch iteration
 * as Lua userdata.
 *
 * A "drover.Dataset" owns one immutable C dataset; every operation returns
 * new datasets (`train, test = ds:split(0.8, { seed = 1 })`). Standardising
 * statistics are "drover.Stats" values, fitted on one dataset and applied
 * to another. `for x, y in ds:batch(64) do ... end` walks one epoch.
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "data/data.h"
#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_feed.h"
#include "luabind/l_util.h"
#include "numeric/tensor.h"

#define DATASET_MT "drover.Dataset"
#define STATS_MT "drover.Stats"
#define BATCHES_MT "drover.Batches"



/* ============================== boxes =================================== */

/* Pushes an empty dataset box; the caller stores the dataset in it right
 * after creating it, so __gc frees it even if a later step raises. */
static dataset **new_box(lua_State *L) {
  dataset **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, DATASET_MT);
  return box;
}

/* Raises the library error of a failed operation (rc < 0). */
static void check_rc(lua_State *L, int rc) {
  if (rc < 0) luaL_error(L, "%s", err_msg());
}

void ldata_push(lua_State *L, dataset *d) { *new_box(L) = d; }

dataset *ldata_check(lua_State *L, int idx) {
  dataset **box = luaL_checkudata(L, idx, DATASET_MT);
  if (!*box) luaL_argerror(L, idx, "dataset is closed");
  return *box;
}

dataset *ldata_values(lua_State *L, int idx) {
  dataset *d = ldata_check(L, idx);
  if (data_load(d) < 0) luaL_error(L, "%s", err_msg());
  return d;
}

void ldata_refuse_sparse(lua_State *L, const dataset *d, const char *what) {
  if (!data_has_sparse(d)) return;
  luaL_error(L, "%s: sparse tables on a cluster are not supported yet: dataset '%s' has %s "
             "(train it in process: drover.fit)", what, d->source,
             d->sp.fields > 0 ? "hashed categorical ids" : "sparse libsvm rows");
}

static int ds_gc(lua_State *L) {
  dataset **box = luaL_checkudata(L, 1, DATASET_MT);
  data_free(*box);
  *box = NULL;
  return 0;
}

static data_stats *check_stats(lua_State *L, int idx) {
  data_stats **box = luaL_checkudata(L, idx, STATS_MT);
  if (!*box) luaL_argerror(L, idx, "stats are closed");
  return *box;
}

static int stats_gc(lua_State *L) {
  data_stats **box = luaL_checkudata(L, 1, STATS_MT);
  data_stats_free(*box);
  *box = NULL;
  return 0;
}

/* ============================== readers ================================= */

static const char *const csv_keys[] = {"label",       "header",  "delimiter", "sep",     "classes",
                                       "categorical", "buckets", "missing",   NULL};

/* Most categorical columns a file may have. */
#define CSV_MAX_CAT 4096

/* A note on stderr when the first line was taken for a header by guess:
 * a file whose first row is data but holds a string would lose it. */
static void note_header(const dataset *d, const char *path) {
  if (d->header_guessed)
    fprintf(stderr, "note: data.csv: the first line of %s is not numbers, so it was read as a "
            "header (say so with { header = true }, or { header = false } to read it as data)\n",
            path);
}

/* The label option: a column index (1 the first, -1 the last) or false. */
static void csv_label(lua_State *L, data_csv_opts *o) {
  if (lua_isnoneornil(L, 2) || lua_getfield(L, 2, "label") == LUA_TNIL) return;
  if (lua_isboolean(L, -1)) {
    if (lua_toboolean(L, -1)) luaL_error(L, "data.csv: label must be a column index or false");
    o->no_label = true;
    return;
  }
  if (!lua_isinteger(L, -1)) luaL_error(L, "data.csv: label must be a column index or false");
  lua_Integer label = lua_tointeger(L, -1);
  if (label == 0 || label > 1000000 || label < -1000000)
    luaL_error(L, "data.csv: label must be a column index (1 is the first column, -1 the last)");
  o->label = (int)(label > 0 ? label - 1 : label);
  o->label_given = (int)label;
}

/* delimiter = "," (or its other name, sep = "\t"): one character. */
static void csv_delimiter(lua_State *L, data_csv_opts *o) {
  if (lua_isnoneornil(L, 2)) return;
  int has_d = lua_getfield(L, 2, "delimiter") != LUA_TNIL, has_s = lua_getfield(L, 2, "sep") != LUA_TNIL;
  if (has_d && has_s) luaL_error(L, "data.csv: give delimiter or sep (the same option), not both");
  if (!has_d && !has_s) return;
  if (has_d) lua_pop(L, 1);
  size_t len;
  const char *d = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  if (!d || len != 1) luaL_error(L, "data.csv: %s must be a one-character string", has_d ? "delimiter" : "sep");
  o->delimiter = d[0];
}

/* categorical = { 15, 16, ... } (columns as 1-based numbers), buckets =
 * 2^24 (the ids' range), missing = 0 (an empty numeric field's value:
 * 0 by default with categorical columns, else an empty field is an
 * error). The column list lives in a userdata on the stack until the
 * reader has copied it into the recipe. */
int *ldata_columns(lua_State *L, const char *who, int *count) {
  if (!lua_istable(L, -1)) luaL_error(L, "%s: categorical must be a list of column numbers", who);
  lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
  if (n < 1 || n > CSV_MAX_CAT)
    luaL_error(L, "%s: categorical must list 1 to %d column numbers", who, CSV_MAX_CAT);
  int *cols = lua_newuserdatauv(L, (size_t)n * sizeof *cols, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, -2, i);
    int isint = 0;
    lua_Integer c = lua_tointegerx(L, -1, &isint);
    if (!isint || c < 1 || c > 1000000)
      luaL_error(L, "%s: categorical[%I] must be a column number (1 is the first column)", who, i);
    cols[i - 1] = (int)c - 1;
    lua_pop(L, 1);
  }
  *count = (int)n;
  return cols;
}

static void csv_categorical(lua_State *L, data_csv_opts *o) {
  if (lua_isnoneornil(L, 2)) return;
  if (lua_getfield(L, 2, "categorical") != LUA_TNIL) {
    o->categorical = ldata_columns(L, "data.csv", &o->ncategorical);
    o->has_missing = true;
    o->missing = 0;
  }
  bool cat = o->ncategorical > 0;
  if (lua_getfield(L, 2, "buckets") != LUA_TNIL && !cat)
    luaL_error(L, "data.csv: buckets needs categorical columns (categorical = { ... })");
  lua_pop(L, 1);
  o->buckets = (uint64_t)lopts_int(L, 2, "buckets", (lua_Integer)1 << 24, LOPTS_POS,
                                   (lua_Integer)DATA_MAX_BUCKETS, "data.csv");
  if (lua_getfield(L, 2, "missing") != LUA_TNIL) {
    o->missing = (float)lopts_real(L, 2, "missing", 0, LOPTS_ANY, HUGE_VAL, "data.csv");
    o->has_missing = true;
  }
  lua_pop(L, 1);
}

/* data.csv(path, { label = -1, header = false, delimiter = ",",
 * classes = "names" }). label is a column index: 1 is the first column,
 * -1 the last, false none (features only). header: true skips the first
 * line, false reads it as data, absent detects it (and says so).
 * classes = "names": the label column holds class names; false: the label
 * is a target, never class ids. */
static int l_csv(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lopts_check_keys(L, 2, "data.csv", csv_keys);
  data_csv_opts o = {.label = -1, .header = -1, .delimiter = ','};
  csv_label(L, &o);
  if (!lua_isnoneornil(L, 2) && lua_getfield(L, 2, "header") != LUA_TNIL) {
    if (!lua_isboolean(L, -1)) luaL_error(L, "data.csv: header must be true or false");
    o.header = lua_toboolean(L, -1);
  }
  csv_delimiter(L, &o);
  if (!lua_isnoneornil(L, 2) && lua_getfield(L, 2, "classes") != LUA_TNIL) {
    const char *c = lua_tostring(L, -1);
    if (lua_type(L, -1) == LUA_TSTRING && strcmp(c, "names") == 0) o.classes = 1;
    else if (lua_isboolean(L, -1) && !lua_toboolean(L, -1)) o.classes = -1;
    else luaL_error(L, "data.csv: classes must be \"names\" (class names in the label column) or "
                       "false (the label is a target)");
    if (o.no_label) luaL_error(L, "data.csv: classes needs a label column (label = false)");
  }
  csv_categorical(L, &o);
  dataset **box = new_box(L);
  check_rc(L, data_open_csv(path, &o, box));
  note_header(*box, path);
  return 1;
}

static const char *const libsvm_keys[] = {"features", "zero_based", "sparse", NULL};

/* data.libsvm(path, { features = n, zero_based = false | true | "auto",
 * sparse = false }); features defaults to the largest index. sparse: the
 * rows stay sparse (the dataset's ids, x is [n, 0]), up to 2^40 features. */
static int l_libsvm(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lopts_check_keys(L, 2, "data.libsvm", libsvm_keys);
  data_libsvm_opts o = {0};
  o.sparse = lopts_bool(L, 2, "sparse", 0, "data.libsvm");
  o.features = lopts_int(L, 2, "features", 0, LOPTS_ANY,
                         o.sparse ? (lua_Integer)DATA_MAX_BUCKETS : LUA_MAXINTEGER, "data.libsvm");
  if (o.features < 0) luaL_error(L, "data.libsvm: features must be >= 0");
  if (!lua_isnoneornil(L, 2) && lua_getfield(L, 2, "zero_based") != LUA_TNIL) {
    if (lua_isboolean(L, -1)) o.zero_based = lua_toboolean(L, -1);
    else if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "auto") == 0)
      o.zero_based = -1;
    else luaL_error(L, "data.libsvm: zero_based must be true, false or \"auto\"");
  }
  dataset **box = new_box(L);
  check_rc(L, data_open_libsvm(path, &o, box));
  return 1;
}

/* data.idx(images [, labels]) */
static int l_idx(lua_State *L) {
  const char *images = luaL_checkstring(L, 1), *labels = luaL_optstring(L, 2, NULL);
  dataset **box = new_box(L);
  check_rc(L, data_open_idx(images, labels, box));
  return 1;
}

/* data.npy(x [, y]) */
static int l_npy(lua_State *L) {
  const char *x = luaL_checkstring(L, 1), *y = luaL_optstring(L, 2, NULL);
  dataset **box = new_box(L);
  check_rc(L, data_read_npy(x, y, box));
  return 1;
}

static const char *const synth_keys[] = {"n", "features", "classes", "seed", NULL};

/* data.synthetic { n = 60000, features = 784, classes = 10, seed = 1 }:
 * MNIST-shaped inputs labelled by a fixed random linear teacher. */
static int l_synthetic(lua_State *L) {
  if (!lua_isnoneornil(L, 1)) luaL_checktype(L, 1, LUA_TTABLE);
  lopts_check_keys(L, 1, "data.synthetic", synth_keys);
  data_synth_opts o;
  o.n = lopts_int(L, 1, "n", 60000, LOPTS_ANY, LUA_MAXINTEGER, "data.synthetic");
  o.features = lopts_int(L, 1, "features", 784, LOPTS_ANY, LUA_MAXINTEGER, "data.synthetic");
  o.classes = lopts_int(L, 1, "classes", 10, LOPTS_ANY, LUA_MAXINTEGER, "data.synthetic");
  o.seed = (uint64_t)lopts_int(L, 1, "seed", 0, LOPTS_ANY, LUA_MAXINTEGER, "data.synthetic");
  if (o.n <= 0 || o.features <= 0 || o.classes < 2)
    luaL_error(L, "data.synthetic: n and features must be positive and classes at least 2");
  dataset **box = new_box(L);
  check_rc(L, data_synthetic(&o, box));
  return 1;
}

/* ============================== operations ============================== */

static const char *const seed_keys[] = {"seed", NULL};

/* The seed of an options table `{ seed = n }` (or a bare integer); 0 when
 * absent, so that an operation without a seed is still reproducible. */
static uint64_t opt_seed(lua_State *L, int idx, const char *what) {
  if (lua_type(L, idx) == LUA_TNUMBER) return (uint64_t)luaL_checkinteger(L, idx);
  if (!lua_isnoneornil(L, idx) && !lua_istable(L, idx))
    luaL_error(L, "%s: expected options like { seed = 1 } (got %s)", what, luaL_typename(L, idx));
  lopts_check_keys(L, idx, what, seed_keys);
  return (uint64_t)lopts_int(L, idx, "seed", 0, LOPTS_ANY, LUA_MAXINTEGER, what);
}

/* train, test = ds:split(0.8, { seed = 1 }) */
static int ds_split(lua_State *L) {
  dataset *d = ldata_check(L, 1);
  lua_Number frac = luaL_checknumber(L, 2);
  if (!(frac > 0 && frac < 1))
    luaL_error(L, "split: the fraction must be between 0 and 1 (got %f)", frac);
  uint64_t seed = opt_seed(L, 3, "split");
  dataset **a = new_box(L), **b = new_box(L);
  check_rc(L, data_split(d, frac, seed, a, b));
  return 2;
}

/* ds:shuffle { seed = n } (or ds:shuffle(n)) */
static int ds_shuffle(lua_State *L) {
  dataset *d = ldata_check(L, 1);
  uint64_t seed = opt_seed(L, 2, "shuffle");
  dataset **out = new_box(L);
  check_rc(L, data_shuffle(d, seed, out));
  return 1;
}

/* ds:shard(i, n): examples i, i+n, ...; i counts from 0 like task indices. */
static int ds_shard(lua_State *L) {
  dataset *d = ldata_check(L, 1);
  lua_Integer i = luaL_checkinteger(L, 2), n = luaL_checkinteger(L, 3);
  if (n < 1) luaL_argerror(L, 3, "the number of shards must be positive");
  if (i < 0 || i >= n)
    luaL_error(L, "shard: index %I is outside 0..%I (shards count from 0)", i, n - 1);
  dataset **out = new_box(L);
  check_rc(L, data_shard(d, i, n, out));
  return 1;
}

/* ds2, stats = ds:standardize()  fits the statistics on ds;
 * ds2 = ds:standardize(stats)     applies given ones (returned again). */
static int ds_standardize(lua_State *L) {
  dataset *d = ldata_check(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    data_stats *s = check_stats(L, 2);
    dataset **out = new_box(L);
    check_rc(L, data_standardize(d, s, out, NULL));
    lua_pushvalue(L, 2);
    return 2;
  }
  dataset **out = new_box(L);
  data_stats **sbox = lua_newuserdatauv(L, sizeof *sbox, 0);
  *sbox = NULL;
  luaL_setmetatable(L, STATS_MT);
  check_rc(L, data_standardize(d, NULL, out, sbox));
  return 2;
}

static int ds_size(lua_State *L) {
  lua_pushinteger(L, ldata_check(L, 1)->n);
  return 1;
}

/* "drover.dataset digits.csv: 1797 x 64, 10 classes" */
static int ds_tostring(lua_State *L) {
  dataset **box = luaL_checkudata(L, 1, DATASET_MT);
  const dataset *d = *box;
  if (!d) {
    lua_pushliteral(L, "drover.dataset (closed)");
    return 1;
  }
  lua_pushfstring(L, "drover.dataset %s: %I x %I, ", d->source, (lua_Integer)d->n,
                  (lua_Integer)d->features);
  if (d->unlabeled)
    lua_pushliteral(L, "no labels");
  else if (d->classes > 0)
    lua_pushfstring(L, "%I class%s", (lua_Integer)d->classes, d->classes == 1 ? "" : "es");
  else {
    lua_Integer k = d->y ? (d->y->ndim == 2 ? d->y->shape[1] : 1) : d->y_ndim == 2 ? d->y_shape[1] : 1;
    lua_pushfstring(L, "%I target%s", k, k == 1 ? "" : "s");
  }
  int parts = 2;
  if (d->sp.fields > 0)
    parts++, lua_pushfstring(L, ", %d categorical field%s (ids below %I)", d->sp.fields,
                             d->sp.fields == 1 ? "" : "s", (lua_Integer)d->sp.bound);
  else if (d->sp.bound)
    parts++, lua_pushfstring(L, ", sparse (ids below %I)", (lua_Integer)d->sp.bound);
  lua_concat(L, parts);
  return 1;
}

/* A view of one of the dataset's tensors (shares its memory). */
static void push_view(lua_State *L, const tensor *t) { ltensor_push(L, tensor_view(t)); }

/* The class names as a list (index id + 1), or nil. */
static void push_names(lua_State *L, const dataset *d) {
  if (!d->names) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, (int)d->nnames, 0);
  for (int64_t i = 0; i < d->nnames; i++) {
    lua_pushstring(L, d->names[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* The sparse part's shape: { fields = k, ids = bound, weighted = b }, or
 * nil when there is none. */
static void push_sparse_info(lua_State *L, const dataset *d) {
  if (!data_has_sparse(d)) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, d->sp.fields);
  lua_setfield(L, -2, "fields");
  lua_pushinteger(L, (lua_Integer)d->sp.bound);
  lua_setfield(L, -2, "ids");
  lua_pushboolean(L, d->sp.weighted);
  lua_setfield(L, -2, "weighted");
}

/* ids, vals = ds:ids(i): the sparse entries of example i (1-based) as
 * lists (vals nil for hashed ids, all ones); nothing when the dataset
 * has no sparse part. */
static int ds_ids(lua_State *L) {
  dataset *d = ldata_values(L, 1);
  lua_Integer i = luaL_checkinteger(L, 2);
  if (!data_has_sparse(d)) return 0;
  if (i < 1 || i > d->n) luaL_error(L, "ids: example %I is outside 1..%I", i, (lua_Integer)d->n);
  int64_t a = d->sp.ptr[i - 1], m = d->sp.ptr[i] - a;
  lua_createtable(L, (int)m, 0);
  for (int64_t k = 0; k < m; k++) {
    lua_pushinteger(L, (lua_Integer)d->sp.ids[a + k]);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
  }
  if (!d->sp.weighted) return 1;
  lua_createtable(L, (int)m, 0);
  for (int64_t k = 0; k < m; k++) {
    lua_pushnumber(L, d->sp.vals[a + k]);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
  }
  return 2;
}

/* Fields n, features, classes, source, names, files, loaded, sparse, x, y
 * (x and y read a lazy dataset's rows from its file); other keys are
 * methods. */
static int ds_index(lua_State *L) {
  dataset *d = ldata_check(L, 1);
  const char *k = lua_tostring(L, 2);
  if (k && lua_type(L, 2) == LUA_TSTRING) {
    if (strcmp(k, "n") == 0) lua_pushinteger(L, d->n);
    else if (strcmp(k, "features") == 0) lua_pushinteger(L, d->features);
    else if (strcmp(k, "classes") == 0) lua_pushinteger(L, d->classes);
    else if (strcmp(k, "source") == 0) lua_pushstring(L, d->source);
    else if (strcmp(k, "names") == 0) push_names(L, d);
    else if (strcmp(k, "files") == 0) lua_pushboolean(L, d->recipe != NULL);
    else if (strcmp(k, "x") == 0) push_view(L, ldata_values(L, 1)->x);
    else if (strcmp(k, "y") == 0) push_view(L, ldata_values(L, 1)->y);
    else if (strcmp(k, "loaded") == 0) lua_pushboolean(L, !data_is_lazy(d));
    else if (strcmp(k, "sparse") == 0) push_sparse_info(L, d);
    else goto method;
    return 1;
  }
method:
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "__methods");
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

static int ds_len(lua_State *L) { return ds_size(L); }

/* ============================== batches ================================= */

typedef struct batches {
  data_iter it;
  int live;       /* it is initialised and not yet freed */
  dataset **box;  /* the dataset's box, to notice a dataset closed under us */
} batches;

static int batches_close(lua_State *L) {
  batches *b = luaL_checkudata(L, 1, BATCHES_MT);
  if (b->live) data_iter_free(&b->it);
  b->live = 0;
  return 0;
}

/* The generic-for step: x, y as new tensors, nothing at the end. */
static int batches_next(lua_State *L) {
  batches *b = luaL_checkudata(L, lua_upvalueindex(1), BATCHES_MT);
  const tensor *x, *y;
  if (!b->live) return 0;
  if (*b->box != b->it.d) return luaL_error(L, "batch: the dataset was closed while iterating");
  if (!data_iter_next(&b->it, &x, &y)) return 0;
  ltensor_push(L, tensor_clone(x));
  ltensor_push(L, tensor_clone(y));
  return 2;
}

static const char *const batch_keys[] = {"shuffle", "seed", NULL};

/* for x, y in ds:batch(64, { shuffle = true, seed = 1 }) do ... end */
static int ds_batch(lua_State *L) {
  dataset *d = ldata_values(L, 1);
  lua_Integer size = luaL_checkinteger(L, 2);
  if (size < 1) luaL_argerror(L, 2, "the batch size must be positive");
  lopts_check_keys(L, 3, "batch", batch_keys);
  int shuffle = lopts_bool(L, 3, "shuffle", 0, "batch");
  uint64_t seed = (uint64_t)lopts_int(L, 3, "seed", 0, LOPTS_ANY, LUA_MAXINTEGER, "batch");
  batches *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->live = 0;
  b->box = lua_touserdata(L, 1);
  luaL_setmetatable(L, BATCHES_MT);
  lua_pushvalue(L, 1); /* the iterator borrows d: keep it alive */
  lua_setiuservalue(L, -2, 1);
  check_rc(L, data_iter_init(&b->it, d, size, shuffle, seed));
  b->live = 1;
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, batches_next, 1);
  lua_pushnil(L);
  lua_pushnil(L);
  lua_pushvalue(L, -4); /* to-be-closed: a `break` frees the iterator */
  return 4;
}

/* ============================== stats =================================== */

static int stats_tostring(lua_State *L) {
  data_stats **box = luaL_checkudata(L, 1, STATS_MT);
  lua_pushfstring(L, "drover.stats (%I features)", (lua_Integer)(*box ? (*box)->features : 0));
  return 1;
}

static void push_floats(lua_State *L, const float *v, int64_t n) {
  ltensor_push(L, tensor_from(1, &n, v));
}

static int stats_mean(lua_State *L) {
  data_stats *s = check_stats(L, 1);
  push_floats(L, s->mean, s->features);
  return 1;
}

static int stats_std(lua_State *L) {
  data_stats *s = check_stats(L, 1);
  push_floats(L, s->std, s->features);
  return 1;
}

/* ============================== registration ============================ */

static const luaL_Reg ds_methods[] = {
    {"split", ds_split},         {"shuffle", ds_shuffle}, {"shard", ds_shard},
    {"standardize", ds_standardize}, {"size", ds_size},   {"batch", ds_batch},
    {"ids", ds_ids},
    {NULL, NULL}};

static const luaL_Reg ds_meta[] = {{"__index", ds_index}, {"__len", ds_len},
                                   {"__tostring", ds_tostring}, {"__gc", ds_gc},
                                   {"__close", ds_gc}, {NULL, NULL}};

static const luaL_Reg stats_methods[] = {{"mean", stats_mean}, {"std", stats_std}, {NULL, NULL}};

static const luaL_Reg stats_meta[] = {
    {"__tostring", stats_tostring}, {"__gc", stats_gc}, {NULL, NULL}};

static const luaL_Reg batches_meta[] = {
    {"__gc", batches_close}, {"__close", batches_close}, {NULL, NULL}};

/* data.write_csv(path, tensor) and data.write_npy(path, tensor) */
static int l_write(lua_State *L, int (*write)(const char *, const tensor *)) {
  const char *path = luaL_checkstring(L, 1);
  tensor *t = ltensor_check(L, 2);
  check_rc(L, write(path, t));
  return 0;
}
static int l_write_csv(lua_State *L) { return l_write(L, data_write_csv); }
static int l_write_npy(lua_State *L) { return l_write(L, data_write_npy); }

static const luaL_Reg funcs[] = {{"csv", l_csv}, {"libsvm", l_libsvm}, {"idx", l_idx},
                                 {"npy", l_npy}, {"synthetic", l_synthetic},
                                 {"write_csv", l_write_csv}, {"write_npy", l_write_npy},
                                 {NULL, NULL}};

int luaopen_drover_data(lua_State *L) {
  ldrv_createmeta(L, DATASET_MT, ds_meta, ds_methods);
  ldrv_createmeta(L, STATS_MT, stats_meta, stats_methods);
  ldrv_createmeta(L, BATCHES_MT, batches_meta, NULL);

  luaL_newlib(L, funcs);
  lstream_register(L); /* data.stream (l_stream.c) */
  return 1;
}
