/* l_stream.c - data.stream(path_or_"-", { format = "csv", label = -1, ... }):
 * rows of CSV or libsvm lines as they arrive (a pipe, stdin, a file that
 * grows), as a drover.Stream. Its use is as a feed: train = { feed = s }
 * trains on it until it ends or max_steps (c:fit). s:read(n) takes up to n
 * rows in this process, waiting for them; s:dataset(n) the same as a
 * dataset, with the rows' ids when the stream has them (categorical
 * columns of a CSV stream, a libsvm stream with sparse = true).
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <poll.h>
#include <string.h>

#include "base/err.h"
#include "luabind/l_feed.h"

#define STREAM_MT "drover.Stream"

typedef struct lstream {
  data_stream *s; /* NULL once closed */
} lstream;

static data_stream *check_stream(lua_State *L, int idx) {
  lstream *u = luaL_checkudata(L, idx, STREAM_MT);
  if (!u->s) luaL_argerror(L, idx, "stream is closed");
  return u->s;
}

static data_stream **push_stream(lua_State *L, const char *path, const data_stream_opts *o) {
  lstream *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->s = NULL;
  luaL_setmetatable(L, STREAM_MT);
  if (data_stream_open(path, o, &u->s) < 0) luaL_error(L, "%s", err_msg());
  return &u->s;
}

static const char *const stream_keys[] = {"format",      "label",   "delimiter", "features",
                                          "follow",      "categorical", "buckets", "missing",
                                          "sparse",      NULL};

/* categorical = { 15, ... } (1-based columns), buckets = 2^24, missing = 0:
 * a CSV stream's ids, as data.csv takes them; sparse = true: a libsvm
 * stream's rows kept as ids and weights. The column list lives in a
 * userdata on the stack until data_stream_open has copied it. */
static void stream_ids(lua_State *L, data_stream_opts *o) {
  if (!lua_istable(L, 2)) return;
  if (lua_getfield(L, 2, "categorical") != LUA_TNIL) {
    o->categorical = ldata_columns(L, "data.stream", &o->ncategorical);
    lua_copy(L, -1, -2); /* the userdata stays on the stack, where the list was */
    lua_pop(L, 1);
  } else {
    lua_pop(L, 1);
  }
  bool cat = o->ncategorical > 0;
  if (!cat && (lua_getfield(L, 2, "buckets") != LUA_TNIL || lua_getfield(L, 2, "missing") != LUA_TNIL))
    luaL_error(L, "data.stream: buckets and missing need categorical columns (categorical = { ... })");
  o->buckets = (uint64_t)lopts_int(L, 2, "buckets", (lua_Integer)1 << 24, LOPTS_POS,
                                   (lua_Integer)DATA_MAX_BUCKETS, "data.stream");
  o->missing = (float)lopts_real(L, 2, "missing", 0, LOPTS_ANY, HUGE_VAL, "data.stream");
  o->sparse = lopts_bool(L, 2, "sparse", 0, "data.stream");
}

/* data.stream(path [, { format = "csv" | "libsvm", label = -1, delimiter = ",",
 * features = n (libsvm), follow = false }]) */
static int l_stream(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lopts_check_keys(L, 2, "data.stream", stream_keys);
  data_stream_opts o = {.format = DATA_STREAM_CSV, .label = -1, .delimiter = ','};
  bool opts = !lua_isnoneornil(L, 2);
  if (opts && lua_getfield(L, 2, "format") != LUA_TNIL) {
    const char *f = lua_tostring(L, -1);
    if (f && strcmp(f, "libsvm") == 0) o.format = DATA_STREAM_LIBSVM;
    else if (!f || strcmp(f, "csv") != 0)
      luaL_error(L, "data.stream: format must be \"csv\" or \"libsvm\"");
  }
  lua_Integer label = lopts_int(L, 2, "label", -1, LOPTS_ANY, LUA_MAXINTEGER, "data.stream");
  if (label == 0 || label > 1000000 || label < -1000000)
    luaL_error(L, "data.stream: label must be a column index (1 is the first column, -1 the last)");
  o.label = (int)(label > 0 ? label - 1 : label);
  if (opts && lua_getfield(L, 2, "delimiter") != LUA_TNIL) {
    size_t len;
    const char *d = lua_tolstring(L, -1, &len);
    if (!d || len != 1) luaL_error(L, "data.stream: delimiter must be a one-character string");
    o.delimiter = d[0];
  }
  o.features = lopts_int(L, 2, "features", 0, LOPTS_ANY, LUA_MAXINTEGER, "data.stream");
  stream_ids(L, &o);
  if (o.format == DATA_STREAM_CSV && o.features != 0)
    luaL_error(L, "data.stream: features is for libsvm streams (a CSV row says its columns)");
  if (opts && lua_getfield(L, 2, "follow") != LUA_TNIL) {
    if (!lua_isboolean(L, -1)) luaL_error(L, "data.stream: follow must be true or false");
    o.follow = lua_toboolean(L, -1);
  }
  push_stream(L, path, &o); /* it copies o.categorical (a userdata below it) */
  return 1;
}

/* Waits for rows of s (Ctrl-C interrupts): 1 with them, 0 at the end. */
static int wait_rows(lua_State *L, data_stream *s, lua_Integer n, tensor **x, tensor **y,
                     dataset **d) {
  for (;;) {
    int rc = d ? data_stream_read_dataset(s, 1, n, d) : data_stream_read(s, 1, n, x, y);
    if (rc == 1 || rc == 0) return rc;
    if (rc != DRV_EAGAIN) return luaL_error(L, "%s", err_msg());
    if (err_interrupted()) return luaL_error(L, "interrupted");
    struct pollfd p = {.fd = data_stream_fd(s), .events = POLLIN};
    poll(p.fd >= 0 ? &p : NULL, p.fd >= 0 ? 1 : 0, 100); /* a regular file: check again soon */
  }
}

static lua_Integer check_n(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_argcheck(L, n >= 1 && n <= ((lua_Integer)1 << 30), 2, "n must be between 1 and 2^30");
  return n;
}

/* s:read(n) -> x, y with 1..n rows (fewer only at the end), or nil at the
 * end; waits for rows. A stream with ids has s:dataset(n). */
static int s_read(lua_State *L) {
  data_stream *s = check_stream(L, 1);
  lua_Integer n = check_n(L);
  uint64_t bound;
  if (data_stream_has_ids(s, &bound))
    return luaL_error(L, "s:read: this stream has ids (categorical columns, sparse rows), "
                      "which x and y do not carry: s:dataset(n) gives its rows with them");
  tensor *x, *y;
  if (!wait_rows(L, s, n, &x, &y, NULL)) {
    lua_pushnil(L);
    return 1;
  }
  ltensor_push(L, x);
  ltensor_push(L, y);
  return 2;
}

/* s:dataset(n) -> a dataset of 1..n rows (with their ids when the stream
 * has them), or nil at the end; waits for rows. */
static int s_dataset(lua_State *L) {
  data_stream *s = check_stream(L, 1);
  lua_Integer n = check_n(L);
  dataset *d;
  if (!wait_rows(L, s, n, NULL, NULL, &d)) {
    lua_pushnil(L);
    return 1;
  }
  ldata_push(L, d);
  return 1;
}

static int s_rows(lua_State *L) {
  lua_pushinteger(L, data_stream_rows(check_stream(L, 1)));
  return 1;
}

static int s_close(lua_State *L) {
  lstream *u = luaL_checkudata(L, 1, STREAM_MT);
  data_stream_close(u->s);
  u->s = NULL;
  return 0;
}

static int s_tostring(lua_State *L) {
  lstream *u = luaL_checkudata(L, 1, STREAM_MT);
  if (!u->s) lua_pushstring(L, "drover.Stream (closed)");
  else
    lua_pushfstring(L, "drover.Stream (%s, %I rows read%s)", data_stream_name(u->s),
                    (lua_Integer)data_stream_rows(u->s), data_stream_ended(u->s) ? ", ended" : "");
  return 1;
}

static const luaL_Reg s_methods[] = {{"read", s_read},   {"dataset", s_dataset},
                                     {"rows", s_rows},   {"close", s_close},
                                     {NULL, NULL}};
static const luaL_Reg s_meta[] = {{"__tostring", s_tostring}, {"__gc", s_close},
                                  {"__close", s_close}, {NULL, NULL}};

void lstream_register(lua_State *L) {
  ldrv_createmeta(L, STREAM_MT, s_meta, s_methods);
  lua_pushcfunction(L, l_stream);
  lua_setfield(L, -2, "stream");
}

data_stream *ldata_stream_for_feed(lua_State *L, int idx, int64_t epochs) {
  data_stream *s;
  if (luaL_testudata(L, idx, STREAM_MT)) {
    s = check_stream(L, idx);
  } else if (lua_type(L, idx) == LUA_TSTRING) {
    data_stream_opts o = {.format = DATA_STREAM_CSV, .label = -1, .delimiter = ','};
    s = *push_stream(L, lua_tostring(L, idx), &o);
  } else {
    luaL_error(L, "train.feed must be a dataset, a function, a stream, a path, \"-\" or "
                  "\"external\" (got %s)", luaL_typename(L, idx));
    return NULL;
  }
  if (epochs > 1)
    luaL_error(L, "train.feed: a stream is read once: train.epochs must be 1 (got %I)",
               (lua_Integer)epochs);
  return s;
}
