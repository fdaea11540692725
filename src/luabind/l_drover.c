/* l_drover.c - builds the `drover` library in a Lua state: C modules, the
 * embedded Lua modules and their searcher, the error handler. */
#include "luabind/l_drover.h"
#include "luabind/l_util.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/embed.h"
#include "base/err.h"
#include "train/progress.h"
#include "base/util.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "0.1.0"
#endif

/* package.searchers entry: "drover.X" -> embedded lua/X.lua, "drover.a.b"
 * -> lua/a/b.lua. Returns the loader and the pseudo path, or a message. */
static int embedded_searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  if (strncmp(name, "drover.", 7) != 0) {
    lua_pushfstring(L, "no embedded module '%s'", name);
    return 1;
  }
  char path[256];
  snprintf(path, sizeof path, "lua/%s.lua", name + 7);
  for (char *p = path + 4; *p; p++)
    if (*p == '.' && strcmp(p, ".lua") != 0) *p = '/';
  const embed_file *f = embed_find(path);
  if (!f) {
    lua_pushfstring(L, "no embedded file '%s'", path);
    return 1;
  }
  char chunkname[300];
  snprintf(chunkname, sizeof chunkname, "@[drover]/%s", path);
  if (luaL_loadbuffer(L, f->data, f->len, chunkname) != LUA_OK)
    return lua_error(L);
  lua_pushstring(L, path);
  return 2;
}

static void add_searcher(lua_State *L) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  lua_pushcfunction(L, embedded_searcher);
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  lua_pop(L, 2);
}

static void set_module(lua_State *L, const char *field, lua_CFunction open) {
  luaL_requiref(L, field, open, 0); /* registers package.loaded[field] too */
  lua_setfield(L, -2, field + 7);   /* drover.tensor etc. */
}

#define LOOP_KEY "drover.loop"

void drover_lua_set_loop(lua_State *L, uv_loop_t *loop) {
  lua_pushlightuserdata(L, loop);
  lua_setfield(L, LUA_REGISTRYINDEX, LOOP_KEY);
}

uv_loop_t *drover_lua_loop(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, LOOP_KEY);
  uv_loop_t *loop = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (!loop) luaL_error(L, "drover: this Lua state has no event loop");
  return loop;
}

int drover_lua_traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int drover_lua_pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, drover_lua_traceback);
  lua_insert(L, base);
  int rc = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  if (rc != LUA_OK) {
    fprintf(stderr, "drover: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

/* drover.clock() -> monotonic seconds, for timing from scripts. */
static int l_clock(lua_State *L) {
  lua_pushnumber(L, progress_now());
  return 1;
}

static void on_wake(uv_timer_t *t) { *(int *)t->data = 1; }

/* drover.sleep(seconds): waits while the event loop keeps running, so a
 * script can let its cluster work (a plain os.execute("sleep") would stall
 * every connection). Ctrl-C ends it with an error. */
static int l_sleep(lua_State *L) {
  double secs = luaL_checknumber(L, 1);
  uv_loop_t *loop = drover_lua_loop(L);
  uv_timer_t *t = malloc(sizeof *t);
  if (!t) return luaL_error(L, "out of memory");
  int done = 0;
  uv_timer_init(loop, t);
  t->data = &done;
  /* the loop's clock is cached from its last turn, maybe before a long
   * computation: from it, the timer would end the sleep that much early */
  uv_update_time(loop);
  uv_timer_start(t, on_wake, secs > 0 ? (uint64_t)(secs * 1000) : 0, 0);
  while (!done && !err_interrupted()) {
    uv_run(loop, UV_RUN_ONCE);
    ldash_run_commands(L); /* attach clients' lines run while a script sleeps */
  }
  uv_close((uv_handle_t *)t, util_free_handle);
  if (!done) return luaL_error(L, "interrupted");
  return 0;
}

void ldrv_createmeta(lua_State *L, const char *name, const luaL_Reg *meta,
                     const luaL_Reg *methods) {
  luaL_newmetatable(L, name);
  if (meta) luaL_setfuncs(L, meta, 0);
  if (methods) {
    bool own_index = lua_getfield(L, -1, "__index") != LUA_TNIL;
    lua_pop(L, 1);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, own_index ? "__methods" : "__index");
  }
  lua_pop(L, 1);
}

int drover_lua_init(lua_State *L) {
  luaL_openlibs(L);
  add_searcher(L);

  lua_newtable(L);
  lua_pushliteral(L, DROVER_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushcfunction(L, l_clock);
  lua_setfield(L, -2, "clock");
  lua_pushcfunction(L, l_sleep);
  lua_setfield(L, -2, "sleep");
  lclosure_open(L); /* drover._closure_roundtrip, for tests */
  set_module(L, "drover.tensor", luaopen_drover_tensor);
  set_module(L, "drover.nn", luaopen_drover_nn);
  set_module(L, "drover.optim", luaopen_drover_optim);
  set_module(L, "drover.data", luaopen_drover_data);
  set_module(L, "drover.train", luaopen_drover_train);
  set_module(L, "drover.cluster", luaopen_drover_cluster);
  ldash_open_global(L);
  lua_pushvalue(L, -1);
  lua_setglobal(L, "drover");
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, "drover");
  lua_pop(L, 3);

  /* The Lua half of the library: experiment, help(), pretty printing. */
  lua_getglobal(L, "require");
  lua_pushliteral(L, "drover.init");
  lua_pushcfunction(L, drover_lua_traceback);
  lua_insert(L, -3);
  if (lua_pcall(L, 1, 0, -3) != LUA_OK) {
    int rc = err_set(DRV_EINVAL, "loading lua/init.lua: %s", lua_tostring(L, -1));
    lua_pop(L, 2);
    return rc;
  }
  lua_pop(L, 1);
  return 0;
}
