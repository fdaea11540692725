/* main_runs.c - the subcommands that act on a run or its directory:
 * attach, stop, scale, rm, ls, tensorboard, logs, hdfs, export-metrics,
 * doctor, export, and the dashboard simulator the tests drive. Each parses
 * its options and calls the ui/ or launch/ module that does the work;
 * their help texts are in main_cmds.c. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/rundir.h"
#include "main_int.h"
#include "ui/attach.h"
#include "ui/dash_sim.h"
#include "ui/doctor.h"
#include "ui/export.h"
#include "ui/export_metrics.h"
#include "ui/hdfscmd.h"
#include "ui/logs.h"
#include "ui/runs.h"
#include "ui/tbserve.h"

/* ============================== attach, ls =============================== */

static bool parse_seconds(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (!*s || *end || !(v > 0) || v > 86400) return false;
  *out = v;
  return true;
}

int cmd_attach(int argc, char **argv) {
  const command *self = find_command("attach");
  attach_opts o = {.hz = 4, .timeout = 10, .runs = RUNDIR_BASE};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool takes = strcmp(a, "--command") == 0 || strcmp(a, "--stop") == 0 ||
                 strcmp(a, "--secret-file") == 0 || strcmp(a, "--key") == 0 ||
                 strcmp(a, "--hz") == 0 ||
                 strcmp(a, "--timeout") == 0 || strcmp(a, "--runs") == 0;
    if (takes && i + 1 >= argc) return usage_error(self, "%s needs a value", a);
    if (strcmp(a, "--control") == 0) o.control = true;
    else if (strcmp(a, "--print") == 0) o.print = true;
    else if (strcmp(a, "--command") == 0) o.command = argv[++i];
    else if (strcmp(a, "--stop") == 0) o.stop = argv[++i];
    else if (strcmp(a, "--key") == 0 || strcmp(a, "--secret-file") == 0) o.secret_file = argv[++i];
    else if (strcmp(a, "--runs") == 0) o.runs = argv[++i];
    else if (strcmp(a, "--hz") == 0 && !parse_seconds(argv[++i], &o.hz))
      return usage_error(self, "--hz '%s' is not a positive number", argv[i]);
    else if (strcmp(a, "--timeout") == 0 && !parse_seconds(argv[++i], &o.timeout))
      return usage_error(self, "--timeout '%s' is not a positive number of seconds", argv[i]);
    else if (takes) continue;
    else if (a[0] == '-') return usage_error(self, "unknown option '%s'", a);
    else if (o.target2) return usage_error(self, "unexpected argument '%s'", a);
    else if (o.target) o.target2 = a;
    else o.target = a;
  }
  if (!o.target) return usage_error(self, "attach needs a run (a directory or a name) or HOST:PORT");
  if (o.target2 && (o.command || o.stop || o.control))
    return usage_error(self, "two runs are compared read-only: no --command, --stop or --control");
  if (o.command && o.stop) return usage_error(self, "--command and --stop go one at a time");
  return attach_main(&o);
}

/* ============================== stop, rm ================================ */

int cmd_stop(int argc, char **argv) {
  const command *self = find_command("stop");
  attach_opts o = {.timeout = 10, .wait = 300, .runs = "runs", .control = true,
                   .stop_run = ATTACH_STOP_CHECKPOINT};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool takes = !strcmp(a, "--key") || !strcmp(a, "--runs") || !strcmp(a, "--timeout") ||
                 !strcmp(a, "--wait");
    if (takes && i + 1 >= argc) return usage_error(self, "%s needs a value", a);
    if (!strcmp(a, "--now")) o.stop_run = ATTACH_STOP_NOW;
    else if (!strcmp(a, "--key")) o.secret_file = argv[++i];
    else if (!strcmp(a, "--runs")) o.runs = argv[++i];
    else if (!strcmp(a, "--timeout") && !parse_seconds(argv[++i], &o.timeout))
      return usage_error(self, "--timeout '%s' is not a positive number of seconds", argv[i]);
    else if (!strcmp(a, "--wait") && !(o.wait = 0, !strcmp(argv[++i], "0")) &&
             !parse_seconds(argv[i], &o.wait))
      return usage_error(self, "--wait '%s' is not a number of seconds", argv[i]);
    else if (takes) continue;
    else if (a[0] == '-') return usage_error(self, "unknown option '%s'", a);
    else if (o.target) return usage_error(self, "unexpected argument '%s'", a);
    else o.target = a;
  }
  if (!o.target) return usage_error(self, "which run? (a run directory or a name from `drover ls`)");
  return attach_main(&o);
}

/* `drover scale RUN worker=N`: COMMAND SCALE with the control key. */
int cmd_scale(int argc, char **argv) {
  const command *self = find_command("scale");
  attach_opts o = {.timeout = 10, .runs = "runs", .control = true};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool takes = !strcmp(a, "--key") || !strcmp(a, "--runs") || !strcmp(a, "--timeout");
    if (takes && i + 1 >= argc) return usage_error(self, "%s needs a value", a);
    if (!strcmp(a, "--key")) o.secret_file = argv[++i];
    else if (!strcmp(a, "--runs")) o.runs = argv[++i];
    else if (!strcmp(a, "--timeout") && !parse_seconds(argv[++i], &o.timeout))
      return usage_error(self, "--timeout '%s' is not a positive number of seconds", argv[i]);
    else if (takes) continue;
    else if (a[0] == '-') return usage_error(self, "unknown option '%s'", a);
    else if (!o.target) o.target = a;
    else if (!o.scale && strchr(a, '=')) o.scale = a; /* ROLE=N: the coordinator checks it */
    else return usage_error(self, "unexpected argument '%s'", a);
  }
  if (!o.target || !o.scale) return usage_error(self, "usage: drover scale RUN worker=N");
  return attach_main(&o);
}

int cmd_rm(int argc, char **argv) {
  const command *self = find_command("rm");
  const char *runs = "runs";
  int nruns = 0, status = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = argv[++i];
    else if (!strcmp(argv[i], "--runs")) return usage_error(self, "--runs needs a value");
    else if (argv[i][0] == '-') return usage_error(self, "unknown option '%s'", argv[i]);
    else nruns++;
  }
  if (!nruns) return usage_error(self, "which runs? (run directories or names from `drover ls`)");
  for (int i = 1; i < argc; i++) {
    char dir[PATH_MAX];
    if (!strcmp(argv[i], "--runs")) {
      i++;
      continue;
    }
    if (runs_find(runs, argv[i], dir, sizeof dir) < 0 || runs_remove(dir) < 0) {
      fprintf(stderr, "drover: %s\n", err_msg());
      status = 1;
      continue;
    }
    printf("removed %s\n", dir);
  }
  return status;
}

int cmd_ls(int argc, char **argv) {
  if (argc > 2) return usage_error(find_command("ls"), "unexpected argument '%s'", argv[2]);
  const char *dir = argc == 2 ? argv[1] : RUNDIR_BASE;
  if (argc < 2 && access(dir, F_OK) != 0) { /* no ./runs yet: no runs */
    printf("no runs in %s\n", dir);
    return 0;
  }
  int n = runs_list(dir, stdout);
  if (n < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    return 1;
  }
  if (n == 0) printf("no runs in %s\n", dir);
  return 0;
}

/* ============================== tensorboard ============================= */

int cmd_tensorboard(int argc, char **argv) {
  const command *self = find_command("tensorboard");
  const char **names = calloc((size_t)argc, sizeof *names);
  tbserve_opts o = {.runs = RUNDIR_BASE, .names = names};
  if (!names) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool takes = !strcmp(a, "--port") || !strcmp(a, "--bind") || !strcmp(a, "--runs");
    long port;
    if (takes && i + 1 >= argc) return free(names), usage_error(self, "%s needs a value", a);
    if (!strcmp(a, "--runs")) o.runs = argv[++i];
    else if (!strcmp(a, "--bind") && snprintf(o.tb.bind, sizeof o.tb.bind, "%s", argv[++i]) > 0)
      continue;
    else if (!strcmp(a, "--port") && (!parse_count(argv[++i], 65535, &port) || port == 0))
      return free(names), usage_error(self, "--port '%s' is not a port (1..65535)", argv[i]);
    else if (!strcmp(a, "--port")) o.tb.port = (int)port;
    else if (takes) return free(names), usage_error(self, "%s needs a value", a);
    else if (a[0] == '-') return free(names), usage_error(self, "unknown option '%s'", a);
    else names[o.nnames++] = a;
  }
  int rc = tbserve_main(&o, stdout);
  free(names);
  if (rc < 0) fprintf(stderr, "drover: %s\n", err_msg());
  return rc < 0 ? 1 : 0;
}

/* ============================== logs ==================================== */

int cmd_logs(int argc, char **argv) {
  const command *self = find_command("logs");
  logs_opts o = {.runs = RUNDIR_BASE};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-f") || !strcmp(a, "--follow")) o.follow = true;
    else if (!strcmp(a, "--runs") && i + 1 < argc) o.runs = argv[++i];
    else if (!strcmp(a, "--runs")) return usage_error(self, "--runs needs a value");
    else if (a[0] == '-') return usage_error(self, "unknown option '%s'", a);
    else if (!o.run) o.run = a;
    else if (!o.node) o.node = a;
    else return usage_error(self, "unexpected argument '%s'", a);
  }
  if (!o.run) return usage_error(self, "which run? (a run directory or a name from `drover ls`)");
  if (logs_main(&o, stdout) < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    return 1;
  }
  return 0;
}

/* ============================== hdfs ==================================== */

int cmd_hdfs(int argc, char **argv) {
  int st = hdfscmd_main(argc - 1, argv + 1, stdout, stderr);
  if (st == 2) fputs(find_command("hdfs")->usage, stderr);
  return st;
}

/* ============================== export-metrics ========================== */

int cmd_export_metrics(int argc, char **argv) {
  const command *self = find_command("export-metrics");
  const char *run = NULL, *runs = RUNDIR_BASE, *file = NULL;
  export_format fmt = EXPORT_CSV;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool takes = !strcmp(a, "--runs") || !strcmp(a, "-o") || !strcmp(a, "--output");
    if (takes && i + 1 >= argc) return usage_error(self, "%s needs a value", a);
    if (!strcmp(a, "--csv")) fmt = EXPORT_CSV;
    else if (!strcmp(a, "--jsonl")) fmt = EXPORT_JSONL;
    else if (!strcmp(a, "--runs")) runs = argv[++i];
    else if (takes) file = argv[++i];
    else if (a[0] == '-') return usage_error(self, "unknown option '%s'", a);
    else if (run) return usage_error(self, "unexpected argument '%s'", a);
    else run = a;
  }
  if (!run) return usage_error(self, "which run? (a run directory or a name from `drover ls`)");
  char dir[PATH_MAX];
  FILE *out = stdout;
  if (runs_find(runs, run, dir, sizeof dir) < 0) goto fail;
  if (file && !(out = fopen(file, "w"))) {
    err_set(DRV_EIO, "cannot write '%s': %s", file, strerror(errno));
    goto fail;
  }
  long n = export_metrics(dir, fmt, out);
  if (out != stdout && fclose(out) != 0 && n >= 0)
    n = err_set(DRV_EIO, "cannot write '%s': %s", file, strerror(errno));
  if (n >= 0) return 0;
fail:
  fprintf(stderr, "drover: %s\n", err_msg());
  return 1;
}

/* ============================== doctor ================================== */

int cmd_doctor(int argc, char **argv) {
  const command *self = find_command("doctor");
  doctor_opts o = {.runs = RUNDIR_BASE};
  const char **hosts = calloc((size_t)argc, sizeof *hosts);
  if (!hosts) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool takes = !strcmp(a, "--runs") || !strcmp(a, "--timeout");
    if (takes && i + 1 >= argc) return free(hosts), usage_error(self, "%s needs a value", a);
    if (!strcmp(a, "--runs")) o.runs = argv[++i];
    else if (!strcmp(a, "--timeout") && !parse_seconds(argv[++i], &o.ssh_timeout))
      return free(hosts), usage_error(self, "--timeout '%s' is not a positive number", argv[i]);
    else if (takes) continue;
    else if (a[0] == '-') return free(hosts), usage_error(self, "unknown option '%s'", a);
    else hosts[o.nhosts++] = a;
  }
  o.hosts = hosts;
  int fails = doctor_run(&o, stdout);
  free(hosts);
  if (fails) printf("%d check%s failed\n", fails, fails == 1 ? "" : "s");
  return fails ? 1 : 0;
}

/* ============================== export ================================== */

int cmd_export(int argc, char **argv) {
  const command *self = find_command("export");
  export_opts o = {.runs = RUNDIR_BASE, .step = -1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool takes = !strcmp(a, "--step") || !strcmp(a, "-o") || !strcmp(a, "--output") ||
                 !strcmp(a, "--runs");
    if (takes && i + 1 >= argc) return usage_error(self, "%s needs a value", a);
    long n;
    if (!strcmp(a, "--step")) {
      if (!parse_count(argv[++i], LONG_MAX, &n))
        return usage_error(self, "--step needs a step number (got '%s')", argv[i]);
      o.step = n;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) o.out = argv[++i];
    else if (!strcmp(a, "--runs")) o.runs = argv[++i];
    else if (a[0] == '-') return usage_error(self, "unknown option '%s'", a);
    else if (o.run) return usage_error(self, "unexpected argument '%s'", a);
    else o.run = a;
  }
  if (!o.run) return usage_error(self, "which run? (a run directory or a name from `drover ls`)");
  if (!o.out) return usage_error(self, "-o FILE is needed: where to write the model");
  int64_t step;
  if (export_model(&o, stderr, &step) < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    return 1;
  }
  printf("%s: the model of step %lld of %s\n", o.out, (long long)step, o.run);
  return 0;
}

/* ============================== _dash-sim =============================== */

int cmd_dash_sim(int argc, char **argv) {
  const command *self = find_command("_dash-sim");
  dash_sim_opts o = {.nodes = 8, .seed = 1, .hz = 4};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    long n;
    char *end;
    if (strcmp(a, "--read-only") == 0) {
      o.read_only = true;
      continue;
    }
    if (!v) return usage_error(self, "unknown option '%s' (or it needs a value)", a);
    i++;
    if (strcmp(a, "--nodes") == 0 && parse_count(v, 100000, &n) && n > 0) o.nodes = (int)n;
    else if (strcmp(a, "--seed") == 0 && parse_count(v, LONG_MAX, &n)) o.seed = (uint64_t)n;
    else if (strcmp(a, "--theme") == 0) o.theme = v;
    else if (strcmp(a, "--log-dir") == 0) o.log_dir = v;
    else if (strcmp(a, "--hz") == 0 && (o.hz = strtod(v, &end)) > 0 && o.hz <= 60 && !*end) continue;
    else if (strcmp(a, "--warp") == 0 && (o.warp = strtod(v, &end)) >= 0 && o.warp <= 1e6 && !*end) continue;
    else if (strcmp(a, "--seconds") == 0 && (o.seconds = strtod(v, &end)) >= 0 && !*end) continue;
    else return usage_error(self, "bad option '%s %s'", a, v);
  }
  return dash_sim_run(&o);
}
