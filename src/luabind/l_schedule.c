/* l_schedule.c - ClusterCoordinator in Lua: c:schedule(fn, ...) returns a
 * RemoteValue at once; rv:fetch() waits for the closure's results;
 * c:join() waits for everything scheduled; c:done() never waits.
 *
 * The closure runs on a worker as fn(w, ...) (w: the worker object, see
 * l_worker.c). It travels as bytecode with its upvalues and arguments
 * (closure.h says what may be sent). Errors follow TensorFlow: the first
 * closure to fail is raised, with its remote traceback, by the next
 * schedule, join or done, and the closures still queued are cancelled;
 * fetch raises a closure's own error, or says it was cancelled.
 *
 * A RemoteValue keeps its cluster alive (user value 1) and releases its
 * closure's outcome when collected.
 */
#include <lauxlib.h>
#include <string.h>

#include "proto/closure.h"
#include "cluster/coord/coord.h"
#include "base/err.h"
#include "luabind/l_util.h"

#define FUTURE_MT "drover.RemoteValue"

typedef struct future {
  int64_t id;
} future;

static future *check_future(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, FUTURE_MT);
}

/* The live coordinator behind a RemoteValue (raises when shut down). */
static coord *future_coord(lua_State *L, int idx) {
  lua_getiuservalue(L, idx, 1);
  coord *c = lcluster_live(L, -1);
  lua_pop(L, 1);
  return c;
}

/* c:schedule(fn, ...) -> RemoteValue */
static int l_schedule(lua_State *L) {
  coord *c = lcluster_live(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 2;
  wire_wr w;
  wire_wr_init(&w);
  int rc = closure_encode(L, 2, 3, nargs, &w);
  if (rc < 0) {
    wire_wr_free(&w);
    return luaL_error(L, "schedule: %s", err_msg());
  }
  int64_t id = coord_schedule(c, w.buf + WIRE_HEADER_SIZE, w.len - WIRE_HEADER_SIZE);
  wire_wr_free(&w);
  if (id < 0) return luaL_error(L, "%s", err_msg());
  future *f = lua_newuserdatauv(L, sizeof *f, 1);
  f->id = id;
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, FUTURE_MT);
  return 1;
}

/* c:join(): waits for every closure scheduled; raises the first error. */
static int l_join(lua_State *L) {
  coord *c = lcluster_live(L, 1);
  if (coord_join(c) < 0) return luaL_error(L, "%s", err_msg());
  return 0;
}

/* c:done() -> true when nothing is queued or running; raises the first
 * error; never waits. */
static int l_done(lua_State *L) {
  coord *c = lcluster_live(L, 1);
  int rc = coord_done(c);
  if (rc < 0) return luaL_error(L, "%s", err_msg());
  lua_pushboolean(L, rc == 1);
  return 1;
}

/* rv:fetch() -> the closure's results (waits for them). */
static int l_fetch(lua_State *L) {
  future *f = check_future(L, 1);
  coord *c = future_coord(L, 1);
  const uint8_t *res;
  size_t n;
  if (coord_fetch(c, f->id, &res, &n) < 0) return luaL_error(L, "%s", err_msg());
  int nres = closure_decode_values(L, res, n);
  if (nres < 0) return luaL_error(L, "fetch: %s", err_msg());
  return nres;
}

/* rv:state() -> "queued", "running", "done", "failed" or "cancelled". */
static int l_state(lua_State *L) {
  future *f = check_future(L, 1);
  lua_pushstring(L, coord_call_state(future_coord(L, 1), f->id));
  return 1;
}

/* rv:info() -> { state = "done", runs = 1, node = "worker:0" }: runs > 1
 * means it was retried after its worker was lost. */
static int l_info(lua_State *L) {
  future *f = check_future(L, 1);
  coord *c = future_coord(L, 1);
  int runs, node, n;
  const char *state = coord_call_info(c, f->id, &runs, &node);
  const coord_node *nodes = coord_nodes(c, &n);
  lua_createtable(L, 0, 3);
  lua_pushstring(L, state);
  lua_setfield(L, -2, "state");
  lua_pushinteger(L, runs);
  lua_setfield(L, -2, "runs");
  if (node >= 0 && node < n) {
    lua_pushfstring(L, "%s:%d", wire_role_name(nodes[node].role), nodes[node].index);
    lua_setfield(L, -2, "node");
  }
  return 1;
}

static int l_future_gc(lua_State *L) {
  future *f = check_future(L, 1);
  lua_getiuservalue(L, 1, 1);
  coord *c = lcluster_get(L, -1); /* NULL: shut down, everything dropped */
  if (c) coord_release(c, f->id);
  return 0;
}

static int l_future_tostring(lua_State *L) {
  future *f = check_future(L, 1);
  lua_getiuservalue(L, 1, 1);
  coord *c = lcluster_get(L, -1);
  lua_pushfstring(L, "drover.RemoteValue (closure %I, %s)", (LUAI_UACINT)f->id,
                  c ? coord_call_state(c, f->id) : "cluster shut down");
  return 1;
}

void lschedule_open(lua_State *L) {
  static const luaL_Reg cluster_methods[] = {
      {"schedule", l_schedule}, {"join", l_join}, {"done", l_done}, {NULL, NULL}};
  static const luaL_Reg future_methods[] = {{"fetch", l_fetch}, {"state", l_state}, {"info", l_info}, {NULL, NULL}};
  static const luaL_Reg future_meta[] = {
      {"__gc", l_future_gc}, {"__tostring", l_future_tostring}, {NULL, NULL}};
  luaL_setfuncs(L, cluster_methods, 0);
  ldrv_createmeta(L, FUTURE_MT, future_meta, future_methods);
}
