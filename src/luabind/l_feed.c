/* l_feed.c - train.feed as the coordinator's feed source
 * (coord_feed_source, coord.h): a dataset (the coordinator's built-in
 * source), a Lua function returning the next x, y (nil at the end of an
 * epoch), or a stream of CSV/libsvm lines (data.stream, a path, "-" for
 * stdin). The coordinator asks for batches between two turns of its loop,
 * so the function runs with the Lua state idle in c:fit. A dataset's or a
 * stream's ids go with each batch (coord_feed_source.sparse); a function
 * gives x and y only.
 */
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "base/err.h"
#include "luabind/l_feed.h"
#include "luabind/l_util.h"

#define FEED_TIMEOUT_DEFAULT 600.0 /* seconds without progress (TensorFlowOnSpark's) */

/* The tensor or dataset at idx, or NULL (no error). */
static tensor *ltensor_test(lua_State *L, int idx) {
  tensor **box = luaL_testudata(L, idx, "drover.Tensor");
  return box ? *box : NULL;
}

static bool ldata_test(lua_State *L, int idx) {
  dataset **box = luaL_testudata(L, idx, "drover.Dataset");
  return box && *box;
}

/* ============================== a Lua function ========================== */

/* Calls the function: x, y is a batch; false: none yet (asked again at
 * the next tick); nil ends an epoch, and it is called again for the next
 * (a function that restarts), until a pass gives nothing or `epochs`
 * passes were read. */
static int fn_next(void *ud, tensor **x, tensor **y, uint32_t *epoch) {
  lfeed *f = ud;
  lua_State *L = f->L;
  for (;;) {
    lua_pushvalue(L, f->fn);
    if (lua_pcall(L, 0, 2, 0) != LUA_OK) {
      int rc = err_set(DRV_EINVAL, "train.feed function: %s", lua_tostring(L, -1));
      lua_pop(L, 1);
      return rc;
    }
    if (lua_type(L, -2) == LUA_TBOOLEAN && !lua_toboolean(L, -2)) {
      lua_pop(L, 2);
      return DRV_EAGAIN; /* false: nothing yet, ask again at the next tick */
    }
    if (lua_isnil(L, -2)) {
      lua_pop(L, 2);
      if (!f->got || (int64_t)f->epoch >= f->epochs) return 0;
      f->epoch++;
      f->got = false;
      continue;
    }
    tensor *tx = ltensor_test(L, -2), *ty = ltensor_test(L, -1);
    tensor_free(f->x), tensor_free(f->y);
    f->x = f->y = NULL;
    if (!tx || !ty) {
      lua_pop(L, 2);
      return err_set(DRV_EINVAL, "train.feed function: it must return two tensors x, y (or nil "
                     "at the end)");
    }
    /* a copy: the Lua values may change or go once popped */
    f->x = tensor_clone(tx);
    f->y = tensor_clone(ty);
    lua_pop(L, 2);
    if (!f->x || !f->y) return err_set(DRV_ENOMEM, "out of memory");
    *x = f->x, *y = f->y;
    f->got = true;
    *epoch = f->epoch;
    return 1;
  }
}

/* ============================== a stream ================================ */

static int stream_next(void *ud, tensor **x, tensor **y, uint32_t *epoch) {
  lfeed *f = ud;
  *epoch = 1;
  tensor_free(f->x), tensor_free(f->y);
  f->x = f->y = NULL;
  int rc = data_stream_read(f->stream, f->batch, f->batch, &f->x, &f->y);
  *x = f->x, *y = f->y;
  return rc;
}

static const nn_sparse *stream_sparse(void *ud, uint64_t *bound) {
  lfeed *f = ud;
  return data_stream_sparse(f->stream, bound);
}

/* ============================== opening ================================== */

void lfeed_open(lua_State *L, const lsettings *e, lfeed *f) {
  memset(f, 0, sizeof *f);
  f->L = L;
  f->epochs = e->cfg.epochs;
  f->epoch = 1;
  f->batch = e->cfg.batch;
  int idx = e->train_feed;
  coord_feed_source *s = &f->src;
  int rc = 0;
  if (ldata_test(L, idx)) {
    rc = coord_feed_source_dataset(s, ldata_values(L, idx), e->cfg.batch, e->cfg.epochs,
                                   e->cfg.shuffle, e->cfg.seed);
    f->dataset = true;
  } else if (lua_type(L, idx) == LUA_TFUNCTION) {
    s->fd = -1;
    s->next = fn_next;
    s->ud = f;
    f->fn = idx;
    s->no_replay = "a Lua function (its batches are not known to come again in the same order)";
  } else if (lua_type(L, idx) == LUA_TSTRING && strcmp(lua_tostring(L, idx), "external") == 0) {
    s->fd = -1;
    s->external = true;
    s->feeders = e->feeders;
    s->epochs = e->cfg.epochs;
    s->no_replay = "external feeders";
  } else {
    /* a path or "-": a stream of its lines, as data.stream(path) reads it */
    f->stream = ldata_stream_for_feed(L, idx, e->cfg.epochs);
    s->fd = data_stream_fd(f->stream);
    s->next = stream_next;
    uint64_t bound;
    s->sparse = data_stream_has_ids(f->stream, &bound) ? stream_sparse : NULL;
    s->ud = f;
    s->no_replay = data_stream_no_replay(f->stream);
  }
  if (rc < 0) luaL_error(L, "train.feed: %s", err_msg());
  s->timeout = e->feed_timeout > 0 ? e->feed_timeout : FEED_TIMEOUT_DEFAULT;
}

void lfeed_close(lfeed *f) {
  tensor_free(f->x), tensor_free(f->y);
  f->x = f->y = NULL;
  if (f->dataset) coord_feed_source_free(&f->src);
}
