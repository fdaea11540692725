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
 * events.log) instead of scribbling over the screen; they are kept too,
 * and printed to stdout when the dashboard closes, as if it had never
 * been there. With stdout redirected, the dashboard draws on /dev/tty and
 * output goes on as usual.
 *
 * With `drover run --dash` the dashboard outlives the run: when the
 * cluster goes down or the script ends, the last frame stays, frozen
 * (a copy of the model), with "run finished - q to leave" until q. A
 * script that trains in process (exp:fit) gets the dashboard on its first
 * fit, over a model of its own: one "local" node and the fit's metrics.
 */
#include <langinfo.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/coord/coord.h"
#include "ui/dash.h"
#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_util.h"
#include "train/progress.h"
#include "base/rundir.h"
#include "train/train.h"
#include "proto/nodestate.h"
#include "proto/wire.h"

#define DASH_AUTO_KEY "drover.dash.auto"
#define LAST_KEY "drover.dash.last" /* a weak table: [1] = the newest cluster */

/* One dashboard per process (dash.h). */
static struct {
  dash *d;
  coord *c;           /* the cluster shown */
  lua_State *L;
  int print_ref;      /* the script's print while ours replaces it */
  FILE *tty;          /* /dev/tty when stdin or stdout is not the terminal */
  bool autorun;       /* opened by `drover run --dash`: stays until q */
  bool frozen;        /* showing `still`: the run's last frame */
  bool local;         /* showing `still` fed by an in-process fit */
  runview still;   /* the frozen or in-process model */
  double t0;          /* in-process: when the dashboard opened (event times) */
  double last_pump;   /* in-process: when the loop last turned */
  char *held;         /* print() lines held back while the dashboard is up */
  size_t held_len, held_cap;
} live = {.print_ref = LUA_NOREF};

/* ============================== commands ================================= */

/* The command thread and its limit: the handler's ud, a userdata in the
 * cluster's user value 2 whose own user value anchors the thread. */
typedef struct command_ctx {
  lua_State *T;
  double limit; /* seconds of Lua per line (command_limit) */
} command_ctx;

/* A line's deadline: one line runs at a time (coord_run_commands does not
 * nest), so one deadline does. */
static double command_deadline;
static double command_limit_now;
#define COMMAND_HOOK_COUNT 10000 /* instructions between checks: ~0.1 ms */

/* A count hook on the command thread: a line that loops forever in Lua
 * ends with an error to its client after its limit, and at once on
 * Ctrl-C (whose handler only marks the flag, and sets its own hook on the
 * main thread, not on this one). */
static void command_hook(lua_State *T, lua_Debug *ar) {
  (void)ar;
  if (err_interrupted()) luaL_error(T, "interrupted");
  if (progress_now() > command_deadline) {
    char msg[120]; /* lua_pushfstring knows no %g */
    snprintf(msg, sizeof msg, "stopped after %g s: a command runs at most command_limit = %g s",
             command_limit_now, command_limit_now);
    luaL_error(T, "%s", msg);
  }
}

/* The handler coord runs ':' lines through: "return LINE" first (so an
 * expression shows its value), else LINE as a statement, in the
 * environment at the thread's index 1 (see command_env). */
static int run_command(void *ud, const char *line, char *out, size_t n) {
  command_ctx *cx = ud;
  lua_State *T = cx->T; /* the cluster's command thread: never running otherwise */
  int top = lua_gettop(T);
  lua_pushfstring(T, "return %s", line);
  int rc = luaL_loadbuffer(T, lua_tostring(T, -1), lua_rawlen(T, -1), "=command");
  if (rc != LUA_OK) {
    lua_pop(T, 2);
    rc = luaL_loadbuffer(T, line, strlen(line), "=command");
  } else {
    lua_remove(T, -2);
  }
  if (rc == LUA_OK && lua_istable(T, 1)) {
    lua_pushvalue(T, 1);
    lua_setupvalue(T, -2, 1); /* a main chunk's one upvalue is _ENV */
  }
  if (rc == LUA_OK) {
    lua_pushcfunction(T, drover_lua_traceback);
    lua_insert(T, -2);
    command_limit_now = cx->limit;
    command_deadline = progress_now() + cx->limit;
    lua_sethook(T, command_hook, LUA_MASKCOUNT, COMMAND_HOOK_COUNT);
    rc = lua_pcall(T, 0, LUA_MULTRET, top + 1);
    lua_sethook(T, NULL, 0, 0);
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

static const runview *src_get(void *ud) {
  (void)ud;
  if (live.c) return coord_dash(live.c);
  return live.frozen || live.local ? &live.still : NULL;
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

static int src_scale(void *ud, const char *text, char *out, size_t n) {
  (void)ud;
  if (!live.c) return snprintf(out, n, "the cluster is gone"), DRV_EINVAL;
  return coord_scale_text(live.c, text, "the dashboard", out, n);
}

static int src_stop_plan(void *ud, const char *name, char *out, size_t n) {
  (void)ud;
  if (!live.c) return snprintf(out, n, "the cluster is gone"), DRV_EINVAL;
  return coord_stop_plan(live.c, name, out, n);
}

/* The coordinator is in this process: it reads the file itself. */
static int src_log_tail(void *ud, const char *name, char *out, size_t n) {
  (void)ud;
  if (!live.c) return snprintf(out, n, "(the cluster is gone)"), 0;
  coord_node_log_tail(live.c, name, DASH_LOG_LINES, out, n);
  return 0;
}

/* One line of print()'s text [s, s + n) as an event. */
static void print_event(const char *s, size_t n) {
  char line[sizeof ((runview_event *)0)->text];
  snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), s);
  if (live.c) coord_note(live.c, "print %s", line);
  else if (live.local) runview_add_event(&live.still, progress_now() - live.t0, line);
  else if (live.frozen) runview_add_event(&live.still, live.still.uptime, line);
}

/* print() while the dashboard is up: each line becomes an event, so a
 * multi-line string or a printed tensor is as many event lines (one event
 * holding newlines was drawn over the pane's border). */
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
  size_t len;
  const char *line = lua_tolstring(L, -1, &len);
  for (const char *p = line, *end = line + len;;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    print_event(p, (size_t)(e - p - (e > p && e[-1] == '\r')));
    if (!nl) break;
    p = nl + 1;
  }
  if (live.held_len + len + 2 > live.held_cap) {
    size_t cap = live.held_cap ? live.held_cap : 1024;
    while (cap < live.held_len + len + 2) cap *= 2;
    char *p = realloc(live.held, cap);
    if (!p) return luaL_error(L, "out of memory holding the script's output");
    live.held = p;
    live.held_cap = cap;
  }
  memcpy(live.held + live.held_len, line, len);
  live.held_len += len;
  live.held[live.held_len++] = '\n';
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
  if (live.held_len) { /* what the script printed meanwhile, in order */
    fwrite(live.held, 1, live.held_len, stdout);
    fflush(stdout);
  }
  free(live.held);
  live.held = NULL;
  live.held_len = live.held_cap = 0;
}

/* Shows c, or live.still when c is NULL (an in-process fit). */
static int open_dash(lua_State *L, coord *c) {
  if (live.d) return err_set(DRV_EINVAL, "a dashboard is already open");
  dash_opts o;
  dash_opts_default(&o);
  o.on_quit = on_quit;
  /* `drover run --dash x.lua > out`: the script's output goes to the file,
   * the dashboard to the terminal. */
  if ((!isatty(fileno(stdin)) || !isatty(fileno(stdout))) && (live.tty = fopen("/dev/tty", "r+")))
    o.in = o.out = live.tty;
  dash_source src = {
      .get = src_get, .command = src_command, .kill_node = src_kill, .log_tail = src_log_tail,
      .stop_plan = src_stop_plan, .scale = src_scale};
  live.c = c;
  live.L = L;
  int rc = dash_open(drover_lua_loop(L), &o, src, &live.d);
  if (rc < 0) {
    live.c = NULL;
    live.d = NULL;
    live.local = false;
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
  live.autorun = live.frozen = live.local = false;
  runview_free(&live.still);
}

/* Keeps the frame shown now as live.still, which no longer changes. */
static void freeze(void) {
  if (live.c) {
    if (runview_copy(&live.still, coord_dash(live.c)) < 0) runview_init(&live.still);
    live.frozen = true;
    live.c = NULL;
  }
}

/* ============================== Lua ====================================== */

/* c:dash(): shows the dashboard over c until q (Ctrl-C too). */
static int l_dash(lua_State *L) {
  coord *c = lcluster_live(L, 1);
  if (open_dash(L, c) < 0) return luaL_error(L, "dash: %s", err_msg());
  uv_loop_t *loop = drover_lua_loop(L);
  bool interrupted = false;
  while (!dash_closed(live.d)) {
    uv_run(loop, UV_RUN_ONCE);
    coord_run_commands(c);
    if (err_interrupted()) {
      interrupted = true;
      break;
    }
  }
  close_dash();
  uv_run(loop, UV_RUN_NOWAIT); /* the dashboard's handles close */
  if (interrupted) return luaL_error(L, "interrupted");
  return 0;
}

void ldash_run_commands(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, LAST_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  lua_rawgeti(L, -1, 1);
  coord *c = lcluster_get(L, -1);
  lua_pop(L, 2);
  if (c) coord_run_commands(c);
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

/* Moves onto T the environment commands run in: the cluster at idx as
 * `c` and `cluster`, whatever the script called it, over the globals
 * (read and assigned through). */
static void command_env(lua_State *L, int idx, lua_State *T) {
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, idx);
  lua_setfield(L, -2, "c");
  lua_pushvalue(L, idx);
  lua_setfield(L, -2, "cluster");
  lua_createtable(L, 0, 2);
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "__index");
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, -2);
  lua_xmove(L, T, 1);
}

void ldash_cluster_up(lua_State *L, int idx, coord *c, double limit) {
  idx = lua_absindex(L, idx);
  /* The command context lives in the cluster's user value 2, its thread in
   * the context's user value 1. */
  command_ctx *cx = lua_newuserdatauv(L, sizeof *cx, 1);
  lua_State *T = lua_newthread(L);
  command_env(L, idx, T);
  lua_setiuservalue(L, -2, 1);
  *cx = (command_ctx){T, limit};
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
  coord_set_command_handler(c, run_command, cx);
  lua_getfield(L, LUA_REGISTRYINDEX, DASH_AUTO_KEY);
  bool autoopen = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (autoopen && !live.d) {
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, DASH_AUTO_KEY); /* the first cluster only */
    if (open_dash(L, c) < 0)
      fprintf(stderr, "drover: --dash: %s; going on without it\n", err_msg());
    else
      live.autorun = true;
  }
}

void ldash_cluster_down(coord *c) {
  if (live.c != c) return;
  if (live.autorun && !dash_closed(live.d)) freeze(); /* the last frame stays until q */
  else close_dash();
}

/* ============================== in-process fits ========================== */

static void local_event(void *ud, const char *text) {
  (void)ud;
  if (live.local) runview_add_event(&live.still, progress_now() - live.t0, text);
}

/* The in-process model: one node, "local", in this process. */
static void local_model(const char *run) {
  runview_init(&live.still);
  snprintf(live.still.run, sizeof live.still.run, "%s", run);
  snprintf(live.still.launcher, sizeof live.still.launcher, "in-process");
  if (runview_set_nnodes(&live.still, 1) == 0) {
    runview_node *n = &live.still.nodes[0];
    snprintf(n->name, sizeof n->name, "local");
    n->role = ROLE_CHIEF;
    if (gethostname(n->host, sizeof n->host) != 0) snprintf(n->host, sizeof n->host, "localhost");
    n->pid = (int)getpid();
    n->cpu_pct = n->heartbeat_age = -1;
    n->backlog = -1;
  }
}

void ldash_fit_begin(lua_State *L, rundir *rd, const char *tensorboard) {
  lua_getfield(L, LUA_REGISTRYINDEX, DASH_AUTO_KEY);
  bool autoopen = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (autoopen && !live.d) {
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, DASH_AUTO_KEY);
    const char *run = rd ? strrchr(rd->path, '/') : NULL;
    local_model(run ? run + 1 : "in-process");
    live.local = true;
    live.t0 = live.last_pump = progress_now();
    if (open_dash(L, NULL) < 0) {
      fprintf(stderr, "drover: --dash: %s; going on without it\n", err_msg());
      runview_free(&live.still);
      return;
    }
    live.autorun = true;
    if (rd) rundir_set_hook(rd, local_event, NULL);
  }
  if (!live.local) return;
  snprintf(live.still.state, sizeof live.still.state, "training");
  snprintf(live.still.tensorboard, sizeof live.still.tensorboard, "%s", tensorboard);
  if (live.still.nnodes)
    snprintf(live.still.nodes[0].state, sizeof live.still.nodes[0].state, "%s", nodestate_shown(NODE_BUSY));
}

/* Turns the loop (the dashboard's redraws and keys) at most 20 times a
 * second: a step is much shorter than a frame. */
static void local_pump(lua_State *L, bool force) {
  double t = progress_now();
  if (!force && t - live.last_pump < 0.05) return;
  live.last_pump = t;
  uv_run(drover_lua_loop(L), UV_RUN_NOWAIT);
}

void ldash_fit_progress(lua_State *L, const train_progress *p) {
  if (!live.local || dash_closed(live.d)) return;
  runview *m = &live.still;
  runview_point pt = {.step = (double)p->step, .wall = p->elapsed};
  m->uptime = p->elapsed;
  m->step = p->step;
  m->total_steps = p->total_steps;
  m->examples_per_sec = p->examples_per_sec;
  m->eta = p->eta;
  if (m->nnodes) {
    m->nodes[0].steps = p->step;
    m->nodes[0].examples_per_sec = p->examples_per_sec;
    m->nodes[0].heartbeat_age = 0;
  }
  if (p->is_eval) {
    runview_add_point(m, "eval/loss", (pt.value = p->eval_loss, pt));
    if (p->eval_accuracy == p->eval_accuracy)
      runview_add_point(m, "eval/accuracy", (pt.value = p->eval_accuracy, pt));
    if (isfinite(p->eval_auc)) runview_add_point(m, "eval/auc", (pt.value = p->eval_auc, pt));
    if (isfinite(p->eval_logloss))
      runview_add_point(m, "eval/logloss", (pt.value = p->eval_logloss, pt));
  } else {
    runview_add_point(m, "train/loss", (pt.value = p->batch_loss, pt));
    if (p->batch_accuracy == p->batch_accuracy)
      runview_add_point(m, "train/accuracy", (pt.value = p->batch_accuracy, pt));
    const runview_series *tp = &m->throughput;
    if (tp->n == 0 || p->elapsed - runview_series_at(tp, tp->n - 1)->wall >= 0.5)
      runview_add_point(m, "examples/s", (pt.value = p->examples_per_sec, pt));
  }
  local_pump(L, false);
}

void ldash_fit_end(lua_State *L) {
  if (!live.local) return;
  snprintf(live.still.state, sizeof live.still.state, "idle");
  if (live.still.nnodes)
    snprintf(live.still.nodes[0].state, sizeof live.still.nodes[0].state, "%s", nodestate_shown(NODE_READY));
  if (!dash_closed(live.d)) local_pump(L, true);
}

/* ============================== the end of the script ==================== */

void ldash_script_end(lua_State *L, int status, bool interrupted) {
  lua_getfield(L, LUA_REGISTRYINDEX, DASH_AUTO_KEY);
  bool unused = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (unused && status == 0)
    fprintf(stderr, "drover: --dash: the script started no cluster and trained nothing in "
                    "process: there was nothing to show\n");
  if (!live.d || !live.autorun) return;
  if (!dash_closed(live.d) && !interrupted) {
    freeze();
    const char *cs = nl_langinfo(CODESET);
    const char *sep = cs && strcmp(cs, "UTF-8") == 0 ? "\xe2\x80\x94" : "-";
    runview *m = &live.still;
    if (status == 0) snprintf(m->banner, sizeof m->banner, "run finished %s q to leave", sep);
    else snprintf(m->banner, sizeof m->banner, "run failed (exit %d) %s q to leave", status, sep);
    snprintf(m->state, sizeof m->state, "%s", status == 0 ? "finished" : "failed");
    for (int i = 0; live.local && i < m->nnodes; i++)
      snprintf(m->nodes[i].state, sizeof m->nodes[i].state, "%s",
               nodestate_shown(status == 0 ? NODE_DONE : NODE_FAILED));
    m->version++;
    uv_loop_t *loop = drover_lua_loop(L);
    while (!dash_closed(live.d) && !err_interrupted()) uv_run(loop, UV_RUN_ONCE);
  }
  close_dash();
  uv_run(drover_lua_loop(L), UV_RUN_NOWAIT); /* the dashboard's handles close */
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
