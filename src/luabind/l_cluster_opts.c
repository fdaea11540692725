/* l_cluster_opts.c - drover.cluster{...}'s options table into coord_opts:
 * role counts or per-role resource specs (tf-yarn's TaskSpec), the
 * launcher's settings (hosts, ssh_config, slurm = {...}, files), and the
 * addresses. Every mistake raises a Lua error naming the key.
 */
#include <ctype.h>
#include <limits.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "cluster/coord/coord.h"
#include "luabind/l_cluster_opts.h"
#include "luabind/l_util.h"
#include "net/conn.h"

static const char *const cluster_keys[] = {
    "launcher", "ps", "worker", "chief", "evaluator", "reservation_timeout", "heartbeat",
    "heartbeat_timeout", "name", "runs", "split_threshold", "cpus", "max_restarts", "max_queue",
    "hosts", "ssh_config", "slurm", "spark", "yarn", "files", "bind", "address", "ps_replicas",
    "command_limit", "tensorboard", "transport", NULL};
static const char *const role_keys[] = {"instances", "cpus", "memory", "gpus", "label",
                                        "launcher", NULL};
/* A ps table also takes `replicas` (ps_replicas, spelled as issue 12 has it). */
/* A worker table also takes `min` and `max`: the bounds of c:scale. */
static const char *const worker_keys[] = {"instances", "cpus", "memory", "gpus", "label",
                                          "launcher", "min", "max", NULL};
static const char *const ps_keys[] = {"instances", "cpus", "memory", "gpus", "label", "replicas",
                                      "launcher", NULL};
static const char *const yarn_keys[] = {"rm", "queue", "name", "max_attempts", "am_classpath",
                                        "submit_timeout", "staging", "orphan_timeout", "user",
                                        NULL};
static const char *const slurm_keys[] = {"partition", "time", "account", "qos", "constraint",
                                         "options", "pending_timeout", NULL};
static const char *const spark_keys[] = {"master", "master_ui", "submit", "conf", NULL};
static const char *const tensorboard_keys[] = {"port", "bind", NULL};

/* The string field `key` of the table at idx, or def when absent. The
 * string stays alive in that table, which outlives the call. */
static const char *opt_string(lua_State *L, int idx, const char *key, const char *def,
                              const char *what) {
  int t = lua_getfield(L, idx, key);
  if (t != LUA_TNIL && t != LUA_TSTRING) luaL_error(L, "%s: %s must be a string", what, key);
  const char *s = t == LUA_TNIL ? def : lua_tostring(L, -1);
  lua_pop(L, 1);
  return s;
}

/* A list of strings at t[key] into a C array owned by a userdata left on
 * the stack (so a Lua error frees it); nil is pushed when absent. */
static const char *const *opt_strings(lua_State *L, int idx, const char *key, int max, int *n,
                                      const char *what) {
  *n = 0;
  idx = lua_absindex(L, idx);
  if (lua_getfield(L, idx, key) == LUA_TNIL) return NULL; /* the nil stays */
  if (!lua_istable(L, -1)) luaL_error(L, "%s: %s must be a list of strings", what, key);
  lua_Integer len = luaL_len(L, -1);
  if (len < 1 || len > max) luaL_error(L, "%s: %s must list 1..%d strings", what, key, max);
  const char **a = lua_newuserdatauv(L, (size_t)len * sizeof *a, 0);
  for (lua_Integer i = 1; i <= len; i++) {
    if (lua_rawgeti(L, -2, i) != LUA_TSTRING)
      luaL_error(L, "%s: %s[%d] must be a string", what, key, (int)i);
    a[i - 1] = lua_tostring(L, -1); /* alive in the list, alive in the options */
    lua_pop(L, 1);
  }
  lua_remove(L, -2);
  *n = (int)len;
  return a;
}

int lcluster_parse_memory(const char *s, uint64_t *bytes) {
  char *end;
  if (!s || !isdigit((unsigned char)*s)) return -1;
  double v = strtod(s, &end);
  while (*end == ' ') end++;
  double unit = 1024.0 * 1024.0; /* a bare number is MiB, as Slurm's --mem */
  switch (toupper((unsigned char)*end)) {
  case 'K': unit = 1024.0; end++; break;
  case 'M': unit = 1024.0 * 1024.0; end++; break;
  case 'G': unit = 1024.0 * 1024.0 * 1024.0; end++; break;
  case 'T': unit = 1024.0 * 1024.0 * 1024.0 * 1024.0; end++; break;
  case '\0': break;
  default: return -1;
  }
  if (*end == 'i') end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end || !(v > 0) || v * unit > 1e18) return -1;
  *bytes = (uint64_t)(v * unit);
  return 0;
}

/* memory = MiB (a number) or a size ("4G"); what is "cluster: ROLE". */
static uint64_t opt_memory(lua_State *L, int idx, const char *what, const char *role) {
  int t = lua_getfield(L, idx, "memory");
  uint64_t bytes = 0;
  if (t == LUA_TNUMBER) {
    bytes = (uint64_t)lopts_to_int(L, -1, LOPTS_POS, (lua_Integer)1 << 40, what, "memory") << 20;
  } else if (t == LUA_TSTRING) {
    if (lcluster_parse_memory(lua_tostring(L, -1), &bytes) < 0)
      luaL_error(L, "cluster: %s.memory '%s' is not a size (\"512M\", \"4G\", or MiB as a "
                    "number)", role, lua_tostring(L, -1));
  } else if (t != LUA_TNIL) {
    luaL_error(L, "cluster: %s.memory must be a size like \"4G\"", role);
  }
  lua_pop(L, 1);
  return bytes;
}

/* `role = N` or `role = { instances = N, cpus = C, memory = M, gpus = G,
 * launcher = "local" }` (its own launcher: mixed placement; the name is
 * checked with the others by the coordinator). */
static void opt_role(lua_State *L, const char *role, int def, int *count,
                     launch_resources *res, const char **launcher) {
  int t = lua_getfield(L, 1, role);
  memset(res, 0, sizeof *res);
  *launcher = NULL;
  if (t == LUA_TNIL) {
    *count = def;
  } else if (t == LUA_TNUMBER) {
    *count = (int)lopts_to_int(L, -1, LOPTS_NONNEG, COORD_MAX_PER_ROLE, "cluster", role);
  } else if (t == LUA_TTABLE) {
    char what[48];
    snprintf(what, sizeof what, "cluster: %s", role);
    lopts_check_keys(L, -1, what,
                     strcmp(role, "ps") == 0       ? ps_keys
                     : strcmp(role, "worker") == 0 ? worker_keys
                                                   : role_keys);
    *count = (int)lopts_int(L, -1, "instances", 1, LOPTS_NONNEG, COORD_MAX_PER_ROLE, what);
    res->cpus = (int)lopts_int(L, -1, "cpus", 0, LOPTS_NONNEG, 4096, what);
    res->gpus = (int)lopts_int(L, -1, "gpus", 0, LOPTS_NONNEG, 64, what);
    res->memory = opt_memory(L, lua_gettop(L), what, role);
    res->label = opt_string(L, -1, "label", NULL, what); /* alive in the options table */
    *launcher = opt_string(L, -1, "launcher", NULL, what);
    if (*launcher && !**launcher) luaL_error(L, "%s: launcher must name a launcher", what);
  } else {
    luaL_error(L, "cluster: %s must be a count or a table { instances, cpus, memory, gpus }",
               role);
  }
  lua_pop(L, 1);
}

/* `worker = { min = A, max = B }`: what c:scale may go down and up to
 * (0: the floor 1, no ceiling but COORD_MAX_PER_ROLE). */
static void opt_scale_bounds(lua_State *L, coord_opts *o) {
  if (lua_getfield(L, 1, "worker") == LUA_TTABLE) {
    o->worker_min = (int)lopts_int(L, -1, "min", 0, LOPTS_NONNEG, COORD_MAX_PER_ROLE, "cluster: worker");
    o->worker_max = (int)lopts_int(L, -1, "max", 0, LOPTS_NONNEG, COORD_MAX_PER_ROLE, "cluster: worker");
  }
  lua_pop(L, 1);
  int n = o->count[ROLE_WORKER];
  if (o->worker_min > n || (o->worker_max && (o->worker_max < n || o->worker_max < o->worker_min)))
    luaL_error(L, "cluster: worker = { instances = %d, min = %d, max = %d }: needs min <= "
               "instances <= max", n, o->worker_min, o->worker_max);
}

static void opt_slurm(lua_State *L, coord_opts *o) {
  int t = lua_getfield(L, 1, "slurm");
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushnil(L); /* keeps the stack shape: one slot */
    return;
  }
  if (t != LUA_TTABLE) luaL_error(L, "cluster: slurm must be a table");
  int s = lua_gettop(L);
  lopts_check_keys(L, s, "cluster: slurm", slurm_keys);
  launch_slurm_opts *so = &o->slurm;
  so->partition = opt_string(L, s, "partition", NULL, "cluster: slurm");
  so->time = opt_string(L, s, "time", NULL, "cluster: slurm");
  so->account = opt_string(L, s, "account", NULL, "cluster: slurm");
  so->qos = opt_string(L, s, "qos", NULL, "cluster: slurm");
  so->constraint = opt_string(L, s, "constraint", NULL, "cluster: slurm");
  so->pending_timeout =
      lopts_real(L, s, "pending_timeout", 300, LOPTS_POS, HUGE_VAL, "cluster: slurm");
  so->sbatch = opt_strings(L, s, "options", 256, &so->nsbatch, "cluster: slurm");
  lua_replace(L, s); /* the options array (or nil) takes the table's slot */
}

/* spark.conf = { ["spark.x"] = "v", ... } into two arrays (keys, values)
 * in one userdata left on the stack; the strings stay alive in the conf
 * table, which outlives the options. nil is pushed when absent. */
static void opt_spark_conf(lua_State *L, int s, launch_spark_opts *so) {
  if (lua_getfield(L, s, "conf") == LUA_TNIL) return; /* the nil stays */
  if (!lua_istable(L, -1)) luaL_error(L, "cluster: spark.conf must be a table { [\"spark.x\"] = \"v\" }");
  int t = lua_gettop(L), n = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "cluster: spark.conf keys and values must be strings");
    if (++n > 256) luaL_error(L, "cluster: spark.conf has more than 256 keys");
    lua_pop(L, 1);
  }
  const char **a = lua_newuserdatauv(L, (size_t)(n ? n : 1) * 2 * sizeof *a, 0);
  int k = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    a[k] = lua_tostring(L, -2);
    a[n + k] = lua_tostring(L, -1);
    k++;
    lua_pop(L, 1);
  }
  lua_remove(L, t);
  so->conf_keys = a;
  so->conf_values = a + n;
  so->nconf = n;
}

static void opt_spark(lua_State *L, coord_opts *o) {
  int t = lua_getfield(L, 1, "spark");
  if (t == LUA_TNIL) return; /* the nil keeps the stack shape: one slot */
  if (t != LUA_TTABLE) luaL_error(L, "cluster: spark must be a table");
  if (!coord_uses_launcher(o, "spark"))
    luaL_error(L, "cluster: spark = {...} is for launcher = \"spark\" (the cluster's or a "
                  "role's: no role runs on it)");
  int s = lua_gettop(L);
  lopts_check_keys(L, s, "cluster: spark", spark_keys);
  launch_spark_opts *so = &o->spark;
  so->master = opt_string(L, s, "master", NULL, "cluster: spark");
  so->master_ui = opt_string(L, s, "master_ui", NULL, "cluster: spark");
  so->submit = opt_string(L, s, "submit", NULL, "cluster: spark");
  opt_spark_conf(L, s, so);
  lua_replace(L, s); /* the conf arrays (or nil) take the table's slot */
}

/* yarn = { rm, queue, name, max_attempts, am_classpath, submit_timeout, staging,
 * orphan_timeout, user }: the strings stay alive in that table, which the
 * options table holds. */
static void opt_yarn(lua_State *L, coord_opts *o) {
  int t = lua_getfield(L, 1, "yarn");
  if (t != LUA_TNIL && t != LUA_TTABLE) luaL_error(L, "cluster: yarn must be a table");
  if (t == LUA_TTABLE) {
    if (!coord_uses_launcher(o, "yarn"))
      luaL_error(L, "cluster: yarn is for launcher = \"yarn\" (the cluster's or a role's: no role "
                    "runs on it)");
    int s = lua_gettop(L);
    lopts_check_keys(L, s, "cluster: yarn", yarn_keys);
    launch_yarn_opts *y = &o->yarn;
    y->rm = opt_string(L, s, "rm", NULL, "cluster: yarn");
    y->queue = opt_string(L, s, "queue", NULL, "cluster: yarn");
    y->name = opt_string(L, s, "name", NULL, "cluster: yarn");
    y->am_classpath = opt_string(L, s, "am_classpath", NULL, "cluster: yarn");
    y->staging = opt_string(L, s, "staging", NULL, "cluster: yarn");
    /* YARN caps it with yarn.resourcemanager.am.max-attempts (2 by default). */
    y->max_attempts = (int)lopts_int(L, s, "max_attempts", 1, LOPTS_POS, 1000, "cluster: yarn");
    y->submit_timeout =
        lopts_real(L, s, "submit_timeout", 120, LOPTS_POS, HUGE_VAL, "cluster: yarn");
    /* bounded so that the AM reads it back as a plain number (%g) */
    y->orphan_timeout =
        lopts_real(L, s, "orphan_timeout", 30, LOPTS_POS, 1e6, "cluster: yarn");
    y->user = opt_string(L, s, "user", NULL, "cluster: yarn");
  }
  lua_pop(L, 1);
}

/* The top level's numbers. The coordinator states the ranges of those it
 * checks (coord__check_opts: max_restarts 0..1000, ...); here they are
 * bounded by their C types, so that nothing is truncated on the way. */
static void opt_numbers(lua_State *L, coord_opts *o) {
  o->reservation_timeout =
      lopts_real(L, 1, "reservation_timeout", 60, LOPTS_POS, HUGE_VAL, "cluster");
  /* in ms, a uint32_t: a day is far beyond any use and far within it */
  o->heartbeat_ms =
      (uint32_t)(lopts_real(L, 1, "heartbeat", 0.5, LOPTS_POS, 86400, "cluster") * 1000);
  o->heartbeat_timeout_ms =
      (uint32_t)(lopts_real(L, 1, "heartbeat_timeout", 5, LOPTS_POS, 86400, "cluster") * 1000);
  o->split_threshold = lopts_int(L, 1, "split_threshold", o->split_threshold, LOPTS_NONNEG,
                                 LUA_MAXINTEGER, "cluster");
  o->cpus = (int)lopts_int(L, 1, "cpus", 0, LOPTS_NONNEG, 4096, "cluster");
  for (int r = 0; r < ROLE_COUNT; r++)
    if (!o->res[r].cpus) o->res[r].cpus = o->cpus;
  o->max_restarts =
      (int)lopts_int(L, 1, "max_restarts", o->max_restarts, LOPTS_NONNEG, INT_MAX, "cluster");
  o->max_queue = (int)lopts_int(L, 1, "max_queue", o->max_queue, LOPTS_POS, INT_MAX, "cluster");
}

bool lcluster_tensorboard(lua_State *L, int idx, const char *what, tboard_opts *o) {
  memset(o, 0, sizeof *o);
  int t = lua_type(L, idx);
  if (t == LUA_TNIL || t == LUA_TNONE || (t == LUA_TBOOLEAN && !lua_toboolean(L, idx)))
    return false;
  if (t == LUA_TBOOLEAN) return true;
  if (t != LUA_TTABLE)
    luaL_error(L, "%s: tensorboard must be true, false or a table { port = N, bind = \"host\" } "
                  "(got %s)", what, lopts_show(L, idx));
  char sub[64];
  snprintf(sub, sizeof sub, "%s: tensorboard", what);
  idx = lua_absindex(L, idx);
  lopts_check_keys(L, idx, sub, tensorboard_keys);
  o->port = (int)lopts_int(L, idx, "port", 0, LOPTS_POS, 65535, sub); /* 0: not given */
  const char *bind = opt_string(L, idx, "bind", "", sub);
  if (lua_getfield(L, idx, "bind") != LUA_TNIL && !*bind)
    luaL_error(L, "%s.bind must name an address (\"127.0.0.1\", \"0.0.0.0\", a host name)", sub);
  lua_pop(L, 1);
  if (strlen(bind) >= sizeof o->bind) luaL_error(L, "%s.bind is too long", sub);
  snprintf(o->bind, sizeof o->bind, "%s", bind);
  return true;
}

int lcluster_read_opts(lua_State *L, coord_opts *o) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lopts_check_keys(L, 1, "cluster", cluster_keys);
  int top = lua_gettop(L);
  coord_opts_default(o);
  o->launcher = opt_string(L, 1, "launcher", o->launcher, "cluster");
  o->name = opt_string(L, 1, "name", o->name, "cluster");
  o->runs_base = opt_string(L, 1, "runs", o->runs_base, "cluster");
  static const struct { const char *name; int role, def; } roles[] = {
      {"ps", ROLE_PS, 1}, {"worker", ROLE_WORKER, 1}, {"chief", ROLE_CHIEF, 0},
      {"evaluator", ROLE_EVALUATOR, 0}};
  for (int k = 0; k < 4; k++) {
    int r = roles[k].role;
    opt_role(L, roles[k].name, roles[k].def, &o->count[r], &o->res[r], &o->role_launcher[r]);
  }
  opt_scale_bounds(L, o);
  opt_numbers(L, o);
  /* not `replicas` at the top: an experiment's sync replicas are gradients
   * per update; inside `ps = { ... }` the word is unambiguous */
  o->ps_replicas = (int)lopts_int(L, 1, "ps_replicas", -1, LOPTS_NONNEG, INT_MAX, "cluster");
  int in_ps = -1;
  if (lua_getfield(L, 1, "ps") == LUA_TTABLE)
    in_ps = (int)lopts_int(L, -1, "replicas", -1, LOPTS_NONNEG, INT_MAX, "cluster: ps");
  lua_pop(L, 1);
  if (in_ps >= 0 && o->ps_replicas >= 0 && in_ps != o->ps_replicas)
    luaL_error(L, "cluster: ps.replicas = %d and ps_replicas = %d disagree", in_ps, o->ps_replicas);
  if (in_ps >= 0) o->ps_replicas = in_ps;
  if (o->ps_replicas < 0) o->ps_replicas = 0;
  o->ssh_config = opt_string(L, 1, "ssh_config", "", "cluster"); /* "": ssh's own */
  o->bind_host = opt_string(L, 1, "bind", NULL, "cluster");       /* NULL: by launcher */
  o->address = opt_string(L, 1, "address", NULL, "cluster");
  /* nil: the process's DROVER_TRANSPORT, else auto (coord.h) */
  o->transport = opt_string(L, 1, "transport", NULL, "cluster");
  conn_transport_mode mode;
  if (o->transport && conn_transport_parse(o->transport, &mode) < 0)
    luaL_error(L, "cluster: %s", err_msg());
  o->hosts = opt_strings(L, 1, "hosts", 4096, &o->nhosts, "cluster");
  o->files = opt_strings(L, 1, "files", 4096, &o->nfiles, "cluster");
  lua_getfield(L, 1, "tensorboard");
  o->tensorboard = lcluster_tensorboard(L, -1, "cluster", &o->tboard);
  lua_pop(L, 1);
  opt_slurm(L, o);
  opt_spark(L, o);
  opt_yarn(L, o);
  for (int r = 0; r < ROLE_COUNT; r++)
    if (o->res[r].label && strcmp(coord_role_launcher(o, r), "yarn") != 0)
      luaL_error(L, "cluster: %s.label is for launcher = \"yarn\" (node labels are YARN's; "
                    "%s runs on \"%s\")", wire_role_name(r), wire_role_name(r),
                 coord_role_launcher(o, r));
  if (o->nhosts && !coord_uses_launcher(o, "ssh"))
    luaL_error(L, "cluster: hosts is for launcher = \"ssh\" (the cluster's or a role's)");
  /* external: the nodes' operator puts the files in their directories
   * under the names ssh would give them (launch_ship_name) */
  if (o->nfiles && !coord_uses_launcher(o, "ssh") && !coord_uses_launcher(o, "spark") &&
      !coord_uses_launcher(o, "yarn") && !coord_uses_launcher(o, "external"))
    luaL_error(L, "cluster: files is for launchers \"ssh\", \"spark\", \"yarn\" and "
                  "\"external\" (other launchers share the file system)");
  return lua_gettop(L) - top;
}
