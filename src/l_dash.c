/* l_dash.c - the dashboard over a live cluster, from Lua. c:dash() (and
 * dash() in the REPL) shows it until q, pumping the loop meanwhile;
 * `drover run --dash` opens it once the script's first cluster is up, and
 * q then leaves it while the run goes on with plain progress lines.
 *
 * Also the Lua side of ':' commands (from this dashboard or an attach
 * client with --control): each cluster runs them on a Lua thread of its
 * own, between loop turns (coord_run_commands), never inside a callback.
 *
 * While the dashboard draws on the script's stdout, progress output is
 * held back and the script's print() lines go to the events pane (and
 * events.log) instead of scribbling over the screen. With stdout
 * redirected, the dashboard draws on /dev/tty and output goes on as usual.
 */
#include <lauxlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "coord.h"
#include "dash.h"
#include "err.h"
#include "l_drover.h"
#include "l_util.h"
#include "progress.h"

#define DASH_AUTO_KEY "drover.dash.auto"
#define LAST_KEY "drover.dash.last" /* a weak table: [1] = the newest cluster */

/* One dashboard per process (dash.h). */
static struct {
  dash *d;
  coord *c;           /* the cluster shown */
  lua_State *L;
  int print_ref;      /* the script's print while ours replaces it */
  FILE *tty;          /* /dev/tty when stdin or stdout is not the terminal */
} live = {.print_ref = LUA_NOREF};

/* ============================== commands ================================= */

/* The handler coord runs ':' lines through: "return LINE" first (so an
 * expression shows its value), else LINE as a statement. */
static int run_command(void *ud, const char *line, char *out, size_t n) {
  lua_State *T = ud; /* the cluster's command thread: never running otherwise */
  int top = lua_gettop(T);
  lua_pushfstring(T, "return %s", line);
  int rc = luaL_loadbuffer(T, lua_tostring(T, -1), lua_rawlen(T, -1), "=command");
  if (rc != LUA_OK) {
    lua_pop(T, 2);
    rc = luaL_loadbuffer(T, line, strlen(line), "=command");
  } else {
    lua_remove(T, -2);
  }
  if (rc == LUA_OK) {
    lua_pushcfunction(T, drover_lua_traceback);
    lua_insert(T, -2);
    rc = lua_pcall(T, 0, LUA_MULTRET, top + 1);
    lua_remove(T, top + 1);
  }
  if (rc != LUA_OK) {
    snprintf(out, n, "%s", luaL_tolstring(T, -1, NULL));
    lua_settop(T, top);
    return DRV_EINVAL;
  }
  size_t len = 0;
  out[0] = '\0';
  for (int i = top + 1; i <= lua_gettop(T) && len < n; i++) {
    const char *s = luaL_tolstring(T, i, NULL);
    len += (size_t)snprintf(out + len, n - len, "%s%s", i > top + 1 ? "\t" : "", s);
    lua_pop(T, 1);
  }
  if (lua_gettop(T) == top) snprintf(out, n, "ok");
  lua_settop(T, top);
  return 0;
}

/* ============================== the source =============================== */

static const dash_model *src_get(void *ud) {
  (void)ud;
  return live.c ? coord_dash(live.c) : NULL;
}

static int src_command(void *ud, const char *line, char *out, size_t n) {
  (void)ud;
  if (!live.c) return snprintf(out, n, "the cluster is gone"), DRV_EINVAL;
  return coord_queue_command(live.c, line, out, n);
}

static int src_kill(void *ud, const char *name, char *out, size_t n) {
  (void)ud;
  if (!live.c) return snprintf(out, n, "the cluster is gone"), DRV_EINVAL;
  return coord_stop_node(live.c, name, out, n);
}

/* The coordinator is in this process: it reads the file itself. */
static int src_log_tail(void *ud, const char *name, char *out, size_t n) {
  (void)ud;
  if (!live.c) return snprintf(out, n, "(the cluster is gone)"), 0;
  coord_node_log_tail(live.c, name, DASH_LOG_LINES, out, n);
  return 0;
}

/* print() while the dashboard is up: each line becomes an event. */
static int l_dash_print(lua_State *L) {
  int n = lua_gettop(L); /* before luaL_buffinit, which may push */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  if (live.c) coord_note(live.c, "print %s", lua_tostring(L, -1));
  return 0;
}

static void swap_print(lua_State *L, bool ours) {
  if (ours) {
    lua_getglobal(L, "print");
    live.print_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushcfunction(L, l_dash_print);
    lua_setglobal(L, "print");
  } else if (live.print_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, live.print_ref);
    lua_setglobal(L, "print");
    luaL_unref(L, LUA_REGISTRYINDEX, live.print_ref);
    live.print_ref = LUA_NOREF;
  }
}

/* The terminal is back to the script: plain output again. */
static void on_quit(void *ud) {
  (void)ud;
  progress_mute(false);
  if (live.L) swap_print(live.L, false);
}

static int open_dash(lua_State *L, coord *c) {
  if (live.d) return drv_error(DRV_EINVAL, "a dashboard is already open");
  dash_opts o;
  dash_opts_default(&o);
  o.on_quit = on_quit;
  /* `drover run --dash x.lua > out`: the script's output goes to the file,
   * the dashboard to the terminal. */
  if ((!isatty(fileno(stdin)) || !isatty(fileno(stdout))) && (live.tty = fopen("/dev/tty", "r+")))
    o.in = o.out = live.tty;
  dash_source src = {
      .get = src_get, .command = src_command, .kill_node = src_kill, .log_tail = src_log_tail};
  live.c = c;
  live.L = L;
  int rc = dash_open(drover_lua_loop(L), &o, src, &live.d);
  if (rc < 0) {
    live.c = NULL;
    live.d = NULL;
    if (live.tty) fclose(live.tty);
    live.tty = NULL;
    return rc;
  }
  if (!live.tty) { /* the dashboard draws where the script writes */
    progress_mute(true);
    swap_print(L, true);
  }
  return 0;
}

static void close_dash(void) {
  if (!live.d) return;
  bool was_open = !dash_closed(live.d);
  dash_close(live.d);
  live.d = NULL;
  live.c = NULL;
  if (was_open) on_quit(NULL);
  live.L = NULL;
  if (live.tty) fclose(live.tty); /* dash_close restored it already */
  live.tty = NULL;
}

/* ============================== Lua ====================================== */

/* c:dash(): shows the dashboard over c until q (Ctrl-C too). */
static int l_dash(lua_State *L) {
  coord *c = lcluster_live(L, 1);
  if (open_dash(L, c) < 0) return luaL_error(L, "dash: %s", drv_errmsg());
  uv_loop_t *loop = drover_lua_loop(L);
  bool interrupted = false;
  while (!dash_closed(live.d)) {
    uv_run(loop, UV_RUN_ONCE);
    coord_run_commands(c);
    if (drv_interrupted()) {
      interrupted = true;
      break;
    }
  }
  close_dash();
  uv_run(loop, UV_RUN_NOWAIT); /* the dashboard's handles close */
  if (interrupted) return luaL_error(L, "interrupted");
  return 0;
}

/* drover.dash([c]): c:dash() on c, or on the newest live cluster. */
static int l_dash_global(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    if (lua_getfield(L, LUA_REGISTRYINDEX, LAST_KEY) == LUA_TTABLE) lua_rawgeti(L, 1, 1);
    if (!lcluster_get(L, -1))
      return luaL_error(L, "dash: no live cluster (make one: c = drover.cluster { ... })");
    lua_replace(L, 1);
    lua_settop(L, 1);
  }
  return l_dash(L);
}

void ldash_cluster_up(lua_State *L, int idx, coord *c) {
  idx = lua_absindex(L, idx);
  /* The command thread lives in the cluster's user value 2. */
  lua_State *T = lua_newthread(L);
  lua_setiuservalue(L, idx, 2);
  if (lua_getfield(L, LUA_REGISTRYINDEX, LAST_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_newtable(L);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, LAST_KEY);
  }
  lua_pushvalue(L, idx);
  lua_rawseti(L, -2, 1);
  lua_pop(L, 1);
  coord_set_command_handler(c, run_command, T);
  lua_getfield(L, LUA_REGISTRYINDEX, DASH_AUTO_KEY);
  bool autoopen = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (autoopen && !live.d) {
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, DASH_AUTO_KEY); /* the first cluster only */
    if (open_dash(L, c) < 0)
      fprintf(stderr, "drover: --dash: %s; going on without it\n", drv_errmsg());
  }
}

void ldash_cluster_down(coord *c) {
  if (live.c == c) close_dash();
}

void drover_lua_set_dash(lua_State *L) {
  lua_pushboolean(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, DASH_AUTO_KEY);
}

void ldash_open(lua_State *L) {
  static const luaL_Reg methods[] = {{"dash", l_dash}, {NULL, NULL}};
  luaL_setfuncs(L, methods, 0);
}

void ldash_open_global(lua_State *L) {
  lua_pushcfunction(L, l_dash_global);
  lua_setfield(L, -2, "dash");
}
