/* main.c - the drover binary: argument parsing and subcommand dispatch.
 *
 * `drover` alone opens the REPL; `drover CMD ...` runs a subcommand from
 * the table (main_cmds.c; the commands on a run are main_runs.c's);
 * `drover --help`, `drover --version`, `drover CMD --help`.
 * Exit status: 0 success, 1 failure, 2 usage error, 130 interrupted.
 */
#include <cblas.h>
#include <errno.h>
#include <jansson.h>
#include <lauxlib.h>
#include <lua.h>
#include <limits.h>
#include <signal.h>
#include <lualib.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "launch/detach.h"
#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_worker.h"
#include "main_int.h"
#include "cluster/coord/coord.h"
#include "cluster/node.h"
#include "luabind/repl.h"
#include "base/rundir.h"
#include "ui/runs.h"
#include "proto/wire.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "0.1.0"
#endif

#define EXIT_INTERRUPTED 130 /* 128 + SIGINT, as a shell reports it */

static int run_script(int argc, char **argv, int script, bool dash, const char *resume,
                      const char *name);

/* ============================== help and usage ========================== */

static void print_usage(FILE *f) {
  fprintf(f,
          "usage: drover [COMMAND] [ARGS...]\n"
          "       drover --help | --version\n"
          "       drover COMMAND --help\n"
          "\n"
          "Without a command, drover opens the REPL.\n"
          "\n"
          "commands:\n");
  for (size_t i = 0; i < main_ncommands; i++)
    if (main_commands[i].name[0] != '_') fprintf(f, "  %-14s %s\n", main_commands[i].name, main_commands[i].summary);
}

int usage_error(const command *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("drover: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\n\n", stderr);
  if (cmd)
    fputs(cmd->usage, stderr);
  else
    print_usage(stderr);
  return EXIT_USAGE;
}

static bool is_help(const char *s) { return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0; }

const command *find_command(const char *name) {
  for (size_t i = 0; i < main_ncommands; i++)
    if (strcmp(main_commands[i].name, name) == 0) return &main_commands[i];
  return NULL;
}

static void print_version(void) {
  /* openblas_get_config() reads "OpenBLAS 0.3.21 DYNAMIC_ARCH ...": keep
   * the name and the version. */
  char blas[64];
  snprintf(blas, sizeof blas, "%s", openblas_get_config());
  char *sp = strchr(blas, ' ');
  if (sp && (sp = strchr(sp + 1, ' '))) *sp = '\0';
  printf("drover %s\n%s, %s, libuv %s\n", DROVER_VERSION, LUA_RELEASE, blas,
         uv_version_string());
}

int cmd_help(int argc, char **argv) {
  if (argc > 2) return usage_error(find_command("help"), "too many arguments");
  if (argc == 2) {
    const command *c = find_command(argv[1]);
    if (!c) return usage_error(NULL, "unknown command '%s'", argv[1]);
    fputs(c->usage, stdout);
    return 0;
  }
  print_usage(stdout);
  return 0;
}

/* ============================== Lua states ============================== */

/* A fresh state with the drover library on `loop`, or NULL after printing
 * why. The loop must outlive the state (finalizers pump it). */
static lua_State *new_state(uv_loop_t *loop) {
  lua_State *L = luaL_newstate();
  if (!L) {
    fputs("drover: cannot create a Lua state (out of memory)\n", stderr);
    return NULL;
  }
  drover_lua_set_loop(L, loop);
  if (drover_lua_init(L) < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    lua_close(L);
    return NULL;
  }
  return L;
}

static int open_loop(uv_loop_t *loop) {
  int rc = uv_loop_init(loop);
  if (rc < 0) fprintf(stderr, "drover: cannot start the event loop: %s\n", uv_strerror(rc));
  return rc;
}

/* Runs the close callbacks of handles the Lua state released, closes the
 * loop, and passes `status` through. */
static int close_loop(uv_loop_t *loop, int status) {
  uv_run(loop, UV_RUN_NOWAIT);
  if (uv_loop_close(loop) != 0) fputs("drover: event loop closed with live handles\n", stderr);
  return status;
}

int cmd_repl(int argc, char **argv) {
  if (argc > 1) {
    const command *c = find_command("repl");
    return argv[1][0] == '-' ? usage_error(c, "unknown option '%s'", argv[1])
                             : usage_error(c, "unexpected argument '%s'", argv[1]);
  }
  uv_loop_t loop;
  if (open_loop(&loop) < 0) return 1;
  lua_State *L = new_state(&loop);
  if (!L) return close_loop(&loop, 1);
  int status = repl_run(L, &loop);
  lua_close(L);
  rundir_record_exit(status, 0);
  return close_loop(&loop, status);
}

/* ============================== run ===================================== */

/* The global `arg`, as lua.c builds it: argv[script] is arg[0], what
 * follows counts up from 1, what precedes counts down from -1. */
static void set_arg_table(lua_State *L, int argc, char **argv, int script) {
  lua_createtable(L, argc - script - 1, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* Prints the error on top of L for `drover run`: "drover: FILE:LINE: msg"
 * and the traceback; for Ctrl-C "drover: interrupted at step N" (a fit's)
 * or "drover: interrupted" and the script's own frames, nothing of
 * drover's insides. */
static void report_run_error(lua_State *L, bool interrupted) {
  const char *msg = lua_tostring(L, -1);
  if (!msg) msg = "(error object is not a string)";
  if (interrupted) {
    repl_report_interrupted(stderr, "drover: ", msg, true);
  } else {
    fprintf(stderr, "drover: %s\n", msg);
  }
}

/* A finished run is not run again: its script would reload its data and
 * repeat its side effects for nothing. Says how to start afresh. */
static bool refuse_finished(const char *dir, json_t *args, const char *script, const char *cwd) {
  int64_t step;
  int status;
  if (!runs_done(dir, &step, &status)) return false;
  char again[1024] = "";
  size_t len = 0;
  for (size_t i = 0; i < json_array_size(args) && len < sizeof again; i++)
    len += (size_t)snprintf(again + len, sizeof again - len, " %s",
                            json_string_value(json_array_get(args, i)));
  char at[64] = "", ex[32] = "";
  if (step >= 0) snprintf(at, sizeof at, " at step %lld", (long long)step);
  if (status >= 0) snprintf(ex, sizeof ex, " (exit %d)", status);
  fprintf(stderr, "drover: cannot resume '%s': it already finished%s%s; to train again from "
          "the start, run its script afresh (a new run directory): cd %s && drover run %s%s\n",
          dir, at, ex, cwd, script, again);
  return true;
}

/* `--resume --workers N`: the worker count the resumed run's cluster goes
 * on with (0: the one its newest checkpoint recorded); run_script hands
 * it to the cluster through the registry, as the run directory. */
static int resume_workers;

/* resume_run's part under the run directory's lock. */
static int resume_locked(const char *abs) {
  char path[4200];
  snprintf(path, sizeof path, "%s/" RUNDIR_RUN_JSON, abs);
  json_error_t jerr;
  json_t *j = json_load_file(path, 0, &jerr);
  const char *script = NULL, *cwd = NULL;
  json_t *args = NULL;
  if (!j || json_unpack(j, "{s:s, s:o, s:s}", "script", &script, "args", &args, "cwd", &cwd) < 0 ||
      !json_is_array(args)) {
    fprintf(stderr, "drover: cannot resume '%s': %s is missing or unreadable (a run keeps its "
            "script there when `drover run` starts it from a file)\n", abs, path);
    json_decref(j);
    return 1;
  }
  if (refuse_finished(abs, args, script, cwd)) {
    json_decref(j);
    return 1;
  }
  if (chdir(cwd) != 0) {
    fprintf(stderr, "drover: cannot resume '%s': cd %s: %s\n", abs, cwd, strerror(errno));
    json_decref(j);
    return 1;
  }
  size_t n = json_array_size(args);
  /* run_script reads argv[-1], the binary's name, as cmd_run's caller has it. */
  char **all = calloc(n + 4, sizeof *all);
  all[0] = "drover";
  all[1] = "run";
  snprintf(path, sizeof path, "%s/" RUNDIR_RUN_LUA, abs);
  all[2] = path;
  for (size_t i = 0; i < n; i++) all[3 + i] = (char *)json_string_value(json_array_get(args, i));
  int rc = run_script((int)n + 2, all + 1, 1, false, abs, script);
  free(all);
  json_decref(j);
  return rc;
}

/* `drover run --resume RUN`: the run's script (RUN_DIR/run.lua) and
 * arguments (RUN_DIR/run.json), run again from the directory it ran in,
 * with the run directory in the registry for exp:fit() to continue in.
 * The run directory's lock is held throughout (the coordinator takes it
 * again in this process): a second resume of it is refused, naming this
 * process, before either touches anything in it. */
static int resume_run(const char *name, const char *runs) {
  char dir[PATH_MAX], abs[PATH_MAX];
  if (runs_find(runs, name, dir, sizeof dir) < 0) {
    fprintf(stderr, "drover: cannot resume: %s\n", err_msg());
    return 1;
  }
  char rj[PATH_MAX + 16];
  snprintf(rj, sizeof rj, "%s/run.json", dir);
  if (!realpath(dir, abs) || access(rj, F_OK) != 0) { /* not a run's: no lock file made there */
    fprintf(stderr, "drover: cannot resume '%s': %s\n", dir,
            errno == ENOENT ? "its run.json is missing (a run keeps its script there when "
                              "`drover run` starts it from a file)" : strerror(errno));
    return 1;
  }
  if (rundir_lock(abs) < 0) {
    fprintf(stderr, "drover: cannot resume '%s': %s\n", dir, err_msg());
    return 1;
  }
  /* an in-process run holds its lock while its experiment lives, not
   * between two: its process file says whether it still runs */
  int rc = 1;
  if (runs_running(abs))
    fprintf(stderr, "drover: cannot resume '%s': it is still running\n", dir);
  else
    rc = resume_locked(abs);
  rundir_unlock(abs);
  return rc;
}

/* --workers N: a count from 1 to COORD_MAX_PER_ROLE, else 0. */
static int workers_arg(const char *s) {
  char *end;
  long n = strtol(s, &end, 10);
  return *s && !*end && n >= 1 && n <= COORD_MAX_PER_ROLE ? (int)n : 0;
}

/* "--resume RUN [--runs DIR] [--workers N]" (argv[0] is --resume). */
static int resume_args(const command *self, int argc, char **argv) {
  const char *run = NULL, *runs = "runs";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = argv[++i];
    else if (strcmp(argv[i], "--workers") == 0 && i + 1 < argc) {
      if (!(resume_workers = workers_arg(argv[++i])))
        return usage_error(self, "--workers takes a worker count from 1 to %d, not '%s'",
                           COORD_MAX_PER_ROLE, argv[i]);
    } else if (argv[i][0] == '-' || run)
      return usage_error(self, "--resume takes a run (and --runs DIR, --workers N) and nothing else");
    else run = argv[i];
  }
  if (!run) return usage_error(self, "--resume needs a run: a directory, or a name from `drover ls`");
  return resume_run(run, runs);
}

int cmd_run(int argc, char **argv) {
  const command *self = find_command("run");
  detach_child_init(); /* a detached run's own process: before any node starts */
  int script = 1;
  bool detach = false, dash = false;
  for (; script < argc && argv[script][0] == '-' && argv[script][1] != '\0'; script++) {
    if (strcmp(argv[script], "--") == 0) {
      script++;
      break;
    }
    if (strcmp(argv[script], "--resume") == 0) return resume_args(self, argc - script, argv + script);
    if (strcmp(argv[script], "--workers") == 0)
      return usage_error(self, "--workers goes with --resume RUN (a new run has the workers its "
                               "script's drover.cluster asks for)");
    if (strcmp(argv[script], "--detach") == 0) detach = true;
    else if (strcmp(argv[script], "--dash") == 0) dash = true;
    else return usage_error(self, "unknown option '%s'", argv[script]);
  }
  if (script >= argc) return usage_error(self, "run needs a script");
  if (detach && dash) return usage_error(self, "--dash and --detach: attach to a detached run instead");
  if (detach) {
    if (strcmp(argv[script], "-") == 0)
      return usage_error(self, "--detach needs a script file (stdin is not kept)");
    return detach_run(argc - script, argv + script);
  }

  return run_script(argc, argv, script, dash, NULL, NULL);
}

/* Runs argv[script] with its arguments; `resume` (NULL for none) is the run
 * directory a resumed run continues in, `name` what arg[0] says. */
static int run_script(int argc, char **argv, int script, bool dash, const char *resume,
                      const char *name) {
  /* argv as the script sees it starts at the binary's name. */
  char **all = argv - 1;
  int all_argc = argc + 1;
  int all_script = script + 1;

  uv_loop_t loop;
  if (open_loop(&loop) < 0) return 1;
  lua_State *L = new_state(&loop);
  if (!L) return close_loop(&loop, 1);
  set_arg_table(L, all_argc, all, all_script);
  if (dash) drover_lua_set_dash(L);
  if (resume) {
    lua_pushstring(L, resume);
    lua_setfield(L, LUA_REGISTRYINDEX, "drover.resume");
    if (resume_workers > 0) {
      lua_pushinteger(L, resume_workers);
      lua_setfield(L, LUA_REGISTRYINDEX, "drover.resume_workers");
    }
    lua_getglobal(L, "arg");
    lua_pushstring(L, name);
    lua_rawseti(L, -2, 0);
    lua_pop(L, 1);
  }

  const char *file = argv[script];
  int st = luaL_loadfile(L, strcmp(file, "-") == 0 ? NULL : file);
  if (st != LUA_OK) {
    /* LUA_ERRFILE: "cannot open FILE (No such file or directory)";
     * LUA_ERRSYNTAX: "FILE:LINE: message near 'x'". */
    fprintf(stderr, "drover: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return close_loop(&loop, 1);
  }
  int nargs = argc - script - 1;
  luaL_checkstack(L, nargs + 3, "too many arguments to the script");
  for (int i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);

  bool interrupted = false;
  st = repl_pcall(L, nargs, 0, true, &interrupted);
  if (dash) ldash_script_end(L, st == LUA_OK ? 0 : interrupted ? EXIT_INTERRUPTED : 1, interrupted);
  int status = 0;
  if (st != LUA_OK) {
    report_run_error(L, interrupted);
    lua_pop(L, 1);
    status = interrupted ? EXIT_INTERRUPTED : 1;
  }
  fflush(stdout);
  lua_close(L); /* also shuts down clusters the script left running */
  if (status == 0 && drover_cluster_failures() > 0) status = 1;
  if (rundir_records_lost() > 0) { /* a full disk: the run's records are not whole */
    fprintf(stderr, "drover: %lld records could not be written to the run directory\n",
            (long long)rundir_records_lost());
    if (status == 0) status = 1;
  }
  rundir_record_exit(status, interrupted ? SIGINT : 0);
  return close_loop(&loop, status);
}

/* ============================== node ==================================== */

/* "HOST:PORT" or "[HOST]:PORT" into host (numeric) and port. */
static bool split_hostport(const char *s, char *host, size_t n, int *port) {
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s) return false;
  const char *h = s, *hend = colon;
  if (s[0] == '[') {
    if (hend[-1] != ']') return false;
    h = s + 1;
    hend--;
  }
  if ((size_t)(hend - h) >= n || hend == h) return false;
  memcpy(host, h, (size_t)(hend - h));
  host[hend - h] = '\0';
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if (*end || end == colon + 1 || p <= 0 || p > 65535) return false;
  *port = (int)p;
  return true;
}

bool parse_count(const char *s, long max, long *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < 0 || v > max) return false;
  *out = v;
  return true;
}

int cmd_node(int argc, char **argv) {
  const command *self = find_command("node");
  static const char *const names[] = {"--coord", "--role", "--index", "--run-dir",
                                      "--bind", "--cpus", "--heartbeat-ms", "--timeout-ms"};
  const char *val[8] = {0};
  bool log_forward = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--log-forward") == 0) {
      log_forward = true;
      continue;
    }
    size_t k = 0;
    while (k < 8 && strcmp(argv[i], names[k]) != 0) k++;
    if (k == 8) return usage_error(self, "unknown argument '%s'", argv[i]);
    if (i + 1 >= argc) return usage_error(self, "%s needs a value", argv[i]);
    val[k] = argv[++i];
  }
  for (size_t k = 0; k < 8; k++)
    if (!val[k] && k != 5) return usage_error(self, "%s is required", names[k]);
  char host[256];
  long index, cpus = 0, hb, to;
  node_opts o = {0};
  if (!split_hostport(val[0], host, sizeof host, &o.coord_port))
    return usage_error(self, "--coord '%s' is not HOST:PORT", val[0]);
  if ((o.role = wire_role_from_name(val[1])) < 0)
    return usage_error(self, "unknown role '%s' (ps, chief, worker, evaluator)", val[1]);
  if (!parse_count(val[2], 1 << 20, &index))
    return usage_error(self, "--index '%s' is not a valid index", val[2]);
  if (val[5] && (!parse_count(val[5], 4096, &cpus) || cpus == 0))
    return usage_error(self, "--cpus '%s' is not a positive count", val[5]);
  if (!parse_count(val[6], 3600000, &hb) || hb == 0)
    return usage_error(self, "--heartbeat-ms '%s' is not a positive count", val[6]);
  if (!parse_count(val[7], 86400000, &to) || to == 0)
    return usage_error(self, "--timeout-ms '%s' is not a positive count", val[7]);
  o.coord_host = host;
  o.index = (int)index;
  o.run_dir = val[3];
  o.bind_host = val[4];
  o.cpus = (int)cpus;
  o.heartbeat_ms = (uint32_t)hb;
  o.timeout_ms = (uint32_t)to;
  o.log_forward = log_forward;
  o.calls = &lworker_calls;
  return node_main(&o);
}

/* ============================== dispatch ================================ */

int main(int argc, char **argv) {
  if (argc < 2) return cmd_repl(1, (char *[]){"repl", NULL});

  const char *first = argv[1];
  if (is_help(first)) {
    print_usage(stdout);
    return 0;
  }
  if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0) {
    print_version();
    return 0;
  }
  if (first[0] == '-') return usage_error(NULL, "unknown option '%s'", first);

  const command *cmd = find_command(first);
  if (!cmd) return usage_error(NULL, "unknown command '%s'", first);
  if (argc > 2 && is_help(argv[2])) {
    fputs(cmd->usage, stdout);
    return 0;
  }
  return cmd->handler(argc - 1, argv + 1);
}
