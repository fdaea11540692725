/* l_stream.c - data.stream(path_or_"-", { format = "csv", label = -1, ... }):
 * rows of CSV or libsvm lines as they arrive (a pipe, stdin, a file that
 * grows), as a drover.Stream. Its use is as a feed: train = { feed = s }
 * trains on it until it ends or max_steps (c:fit). s:read(n) takes up to n
 * rows in this process, waiting for them.
 */
#include <lauxlib.h>
#include <lua.h>
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

static const char *const stream_keys[] = {"format", "label", "delimiter", "features", "follow", NULL};

/* A stream of ids feeds a cluster's sparse tables, which come with the
 * cluster half of issue 26: until then, said so rather than "unknown
 * option". */
static void refuse_sparse_stream(lua_State *L) {
  if (!lua_istable(L, 2)) return;
  static const char *const keys[] = {"categorical", "sparse", "buckets"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    if (lua_getfield(L, 2, keys[i]) != LUA_TNIL)
      luaL_error(L, "data.stream: %s: sparse ids on a stream are not supported yet (sparse tables "
                 "on a cluster come later): read the file with data.csv or data.libsvm", keys[i]);
    lua_pop(L, 1);
  }
}

/* data.stream(path [, { format = "csv" | "libsvm", label = -1, delimiter = ",",
 * features = n (libsvm), follow = false }]) */
static int l_stream(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  refuse_sparse_stream(L);
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
  if (o.format == DATA_STREAM_CSV && o.features != 0)
    luaL_error(L, "data.stream: features is for libsvm streams (a CSV row says its columns)");
  if (opts && lua_getfield(L, 2, "follow") != LUA_TNIL) {
    if (!lua_isboolean(L, -1)) luaL_error(L, "data.stream: follow must be true or false");
    o.follow = lua_toboolean(L, -1);
  }
  lua_settop(L, 2);
  push_stream(L, path, &o);
  return 1;
}

/* s:read(n) -> x, y with 1..n rows (fewer only at the end), or nil at the
 * end; waits for rows (Ctrl-C interrupts). */
static int s_read(lua_State *L) {
  data_stream *s = check_stream(L, 1);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_argcheck(L, n >= 1 && n <= ((lua_Integer)1 << 30), 2, "n must be between 1 and 2^30");
  for (;;) {
    tensor *x, *y;
    int rc = data_stream_read(s, 1, n, &x, &y);
    if (rc == 1) {
      ltensor_push(L, x);
      ltensor_push(L, y);
      return 2;
    }
    if (rc == 0) {
      lua_pushnil(L);
      return 1;
    }
    if (rc != DRV_EAGAIN) return luaL_error(L, "%s", err_msg());
    if (err_interrupted()) return luaL_error(L, "interrupted");
    struct pollfd p = {.fd = data_stream_fd(s), .events = POLLIN};
    poll(p.fd >= 0 ? &p : NULL, p.fd >= 0 ? 1 : 0, 100); /* a regular file: check again soon */
  }
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

static const luaL_Reg s_methods[] = {{"read", s_read}, {"rows", s_rows}, {"close", s_close},
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
