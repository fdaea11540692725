/* launch_spark.c - the Spark launcher: each node the one task of a Spark
 * application of its own, submitted with spark-submit in client mode. The
 * local spark-submit process (Spark's driver, running spark/app.py) is the
 * node's handle: it exits with the node's status, 128 + S when the node was
 * killed by signal S, which is reported as term_signal = S.
 *
 * Each task runs, with its output appended to <run_dir>/logs/<role>-<i>.log:
 *   SUBMIT --master MASTER --deploy-mode client --name drover-<role>-<i>
 *          --conf spark.task.maxFailures=1 --conf spark.files.useFetchCache=false
 *          --conf spark.executor.cores=C
 *          --conf spark.task.cpus=C --conf spark.cores.max=C
 *          [--conf spark.executor.memory=<M>m]
 *          [--conf spark.executor.resource.gpu.amount=G
 *           --conf spark.task.resource.gpu.amount=G] [--conf K=V (the user's)...]
 *          --files EXE,SECRET[,FILES...]
 *          <run_dir>/spark-app.py <role>-<i> MASTER_UI NAMES -- node --coord ...
 * C is the role's cpus (1 when not given), M its memory, G its gpus (the
 * task then sets CUDA_VISIBLE_DEVICES to the addresses Spark assigned it,
 * app.py; where executors need a discovery script, as on YARN or
 * Kubernetes, conf gives spark.executor.resource.gpu.discoveryScript; a
 * standalone worker assigns its own, spark.worker.resource.gpu.*). The application
 * file is written from the copy compiled into this binary when the
 * launcher is made. app.py (its top comment) says why one application per
 * node and no barrier stage: a lost node is relaunched as a new
 * application for that node alone, and drover's reservation, not Spark's
 * barrier, makes the nodes start together.
 *
 * Refused (DRV_EINVAL): no master; conf keys the launcher sets itself or whose
 * other value would break the model (spark.master, spark.submit.deployMode,
 * spark.files, spark.task.maxFailures, spark.executor.cores,
 * spark.task.cpus, spark.cores.max; spark.executor.memory when a role sets
 * memory; spark.executor.resource.gpu.amount and
 * spark.task.resource.gpu.amount when a role sets gpus); conf keys that do
 * not start with "spark.".
 *
 * The node's key file (keyring.h: only that node's keys, never the run's
 * secret) travels as one of --files: Spark's file server serves it to
 * the executors (set spark.authenticate and spark.network.crypto.enabled
 * in conf where the network is not trusted). Copies of it go as soon as
 * they are not needed: the executor's fetch cache is off (its cache
 * would keep one in the executor's local directory), the driver drops its
 * own, the task Spark's in the executor's directory once it has its
 * copy, the node that one once read, and the coordinator the file it
 * served at the node's REGISTER (app.py, node.c, coord_keys.c).
 *
 * signal() signals the driver: SIGTERM makes Spark stop the application
 * (its shutdown hook), whose executor ends, and the node with it (the task
 * runs the node with PR_SET_PDEATHSIG). destroy sends SIGTERM to every
 * driver still running and waits up to LAUNCH_SPARK_STOP_MS for them, then
 * SIGKILLs the rest: the master ends an application whose driver is gone.
 */
#include "launch/launch.h"
#include "launch/launch_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "launch/launch_yarn_http.h"
#include "base/embed.h"
#include "base/err.h"
#include "base/rundir.h"
#include "base/util.h"
#include "proto/wire.h"

#define LAUNCH_SPARK_STOP_MS 15000
#define MAX_CONF 256
#define MAX_FILES 256

typedef struct spark_launcher {
  launch_base base; /* first member */
  char *master, *submit, *ui, *run_dir, *app;
  char **conf; /* "K=V" each, nconf of them */
  int nconf;
  char **files; /* absolute paths of the script's files */
  int nfiles;
  launch_resources res[ROLE_COUNT];
} spark_launcher;

/* Keys the launcher sets itself (see the top of the file). */
static const char *const reserved_keys[] = {
    "spark.master", "spark.submit.deployMode", "spark.files", "spark.task.maxFailures",
    "spark.executor.cores", "spark.task.cpus", "spark.cores.max", NULL};

/* ============================== start ==================================== */

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* Appends "," and s (or s alone first) to out; false when it does not fit. */
static bool add_item(char *out, size_t cap, size_t *len, const char *s) {
  int k = snprintf(out + *len, cap - *len, "%s%s", *len ? "," : "", s);
  if (k < 0 || (size_t)k >= cap - *len) return false;
  *len += (size_t)k;
  return true;
}

/* --files and the names the task finds them by: the binary, the key file,
 * then the script's files. */
static int files_lists(spark_launcher *l, const launch_task *t, char *files, size_t fcap,
                       char *names, size_t ncap) {
  size_t fl = 0, nl = 0;
  bool ok = add_item(files, fcap, &fl, launch_self_exe()) &&
            add_item(names, ncap, &nl, base_name(launch_self_exe())) &&
            add_item(files, fcap, &fl, t->secret_file) &&
            add_item(names, ncap, &nl, base_name(t->secret_file));
  for (int i = 0; ok && i < l->nfiles; i++)
    ok = add_item(files, fcap, &fl, l->files[i]) && add_item(names, ncap, &nl, base_name(l->files[i]));
  if (!ok) return err_set(DRV_ERANGE, "spark: the list of files to ship is too long");
  return 0;
}

static int spark_spawn(spark_launcher *l, launch_proc *task, const launch_task *t, void *task_ud,
                       int log_fd, int null_fd) {
  const char *r = launch__role_name(t->role);
  int c = t->cpus > 0 ? t->cpus : 1;
  char name[64], cores[3][64], mem[64], gpus[2][64], index[16], cpus[16], hb[16], to[16];
  char files[16384], names[8192];
  int rc = files_lists(l, t, files, sizeof files, names, sizeof names);
  if (rc < 0) return rc;
  snprintf(name, sizeof name, "%s-%d", r, t->index);
  snprintf(cores[0], sizeof cores[0], "spark.executor.cores=%d", c);
  snprintf(cores[1], sizeof cores[1], "spark.task.cpus=%d", c);
  snprintf(cores[2], sizeof cores[2], "spark.cores.max=%d", c);
  /* MB, rounded up (no sum that could wrap) */
  snprintf(mem, sizeof mem, "spark.executor.memory=%llum",
           (unsigned long long)(t->memory / 1048576 + (t->memory % 1048576 != 0)));
  /* the same amount per executor and per task: the executor is this
   * node's alone, and its one task gets every GPU it has */
  snprintf(gpus[0], sizeof gpus[0], "spark.executor.resource.gpu.amount=%d", t->gpus);
  snprintf(gpus[1], sizeof gpus[1], "spark.task.resource.gpu.amount=%d", t->gpus);
  snprintf(index, sizeof index, "%d", t->index);
  snprintf(cpus, sizeof cpus, "%d", t->cpus);
  snprintf(hb, sizeof hb, "%u", (unsigned)t->heartbeat_ms);
  snprintf(to, sizeof to, "%u", (unsigned)t->timeout_ms);
  char app_name[80];
  snprintf(app_name, sizeof app_name, "drover-%s", name);
  size_t cap = 64 + 2 * (size_t)l->nconf;
  char **args = calloc(cap, sizeof *args);
  if (!args) return err_set(DRV_ENOMEM, "out of memory");
  size_t n = 0;
#define ARG(s) (args[n++] = (char *)(s))
  ARG(l->submit), ARG("--master"), ARG(l->master), ARG("--deploy-mode"), ARG("client");
  ARG("--name"), ARG(app_name), ARG("--conf"), ARG("spark.task.maxFailures=1");
  ARG("--conf"), ARG("spark.files.useFetchCache=false"); /* no cached copy of the key file */
  for (int i = 0; i < 3; i++) ARG("--conf"), ARG(cores[i]);
  if (t->memory) ARG("--conf"), ARG(mem);
  if (t->gpus > 0) ARG("--conf"), ARG(gpus[0]), ARG("--conf"), ARG(gpus[1]);
  for (int i = 0; i < l->nconf; i++) ARG("--conf"), ARG(l->conf[i]);
  ARG("--files"), ARG(files), ARG(l->app), ARG(name), ARG(l->ui ? l->ui : ""), ARG(names);
  ARG("--"), ARG("node"), ARG("--coord"), ARG(t->coord), ARG("--role"), ARG(r);
  ARG("--index"), ARG(index), ARG("--run-dir"), ARG(t->run_dir), ARG("--bind"), ARG(t->bind_host);
  if (t->cpus > 0) ARG("--cpus"), ARG(cpus);
  ARG("--heartbeat-ms"), ARG(hb), ARG("--timeout-ms"), ARG(to), ARG("--log-forward"), ARG(NULL);
#undef ARG
  dprintf(log_fd, "drover: starting %s as a Spark application on %s\n", name, l->master);
  uv_stdio_container_t in = {.flags = UV_INHERIT_FD, .data.fd = null_fd};
  int err = launch__spawn(&l->base, task, l->submit, args, NULL, in, log_fd, task_ud);
  free(args);
  if (err < 0)
    return err_set(DRV_EIO, "launch %s: cannot run '%s': %s", name, l->submit, uv_strerror(err));
  return 0;
}

static int spark_start(launcher *base, const launch_task *t, void *task_ud, pid_t *pid) {
  spark_launcher *l = (spark_launcher *)base;
  if (pid) *pid = 0;
  int rc = launch__check_task(t);
  if (rc < 0) return rc;
  launch_proc *task = calloc(1, sizeof *task);
  if (!task) return err_set(DRV_ENOMEM, "out of memory");
  int log_fd = -1, null_fd = -1;
  if ((rc = launch__open_stdio(t, &log_fd, &null_fd)) < 0) {
    free(task);
    return rc;
  }
  rc = spark_spawn(l, task, t, task_ud, log_fd, null_fd);
  close(log_fd);
  close(null_fd);
  if (rc < 0) {
    /* launch__spawn frees a task it could not start; before it, we do. */
    if (!task->owner && !task->open) free(task);
    return rc;
  }
  if (pid) *pid = task->proc.pid;
  return 0;
}

/* The driver's 128 + S is the node killed by signal S (app.py). */
static void spark_ended(launch_base *b, launch_proc *p, int64_t *status, int *sig) {
  (void)b, (void)p;
  if (!*sig && *status > 128 && *status <= 128 + 64) {
    *sig = (int)(*status - 128);
    *status = 0;
  }
}

/* ============================== control ================================== */

static int spark_signal(launcher *base, void *task_ud, int sig) {
  launch_proc *t = launch__find((launch_base *)base, task_ud);
  if (!t) return 0;
  int err = uv_process_kill(&t->proc, sig);
  if (err < 0 && err != UV_ESRCH)
    return err_set(DRV_EIO, "cannot send signal %d to spark-submit (pid %d): %s", sig,
                   t->proc.pid, uv_strerror(err));
  return 0;
}

static void free_strings(char **a, int n) {
  for (int i = 0; a && i < n; i++) free(a[i]);
  free(a);
}

/* SIGTERM, so each driver stops its application; SIGKILL after
 * LAUNCH_SPARK_STOP_MS for those that did not. */
static void spark_destroy(launcher *base) {
  spark_launcher *l = (spark_launcher *)base;
  if (!l) return;
  pid_t *pids;
  int k = launch__close_all(&l->base, SIGTERM, &pids, NULL);
  if (pids && launch__reap(pids, k, LAUNCH_SPARK_STOP_MS) > 0) {
    for (int i = 0; i < k; i++)
      if (pids[i] > 0) kill(pids[i], SIGKILL);
    launch__reap(pids, k, LAUNCH__REAP_MS);
  }
  free(pids);
  free(l->master), free(l->submit), free(l->ui), free(l->run_dir), free(l->app);
  free_strings(l->conf, l->nconf);
  free_strings(l->files, l->nfiles);
  free(l);
}

/* c:scale: each added node is an application of its own (spark_start), as
 * for a restart; its executor needs the role's cores free on the
 * standalone master now (its UI's JSON: cores, coresused), or it would
 * wait for them. Without master_ui (or with a master that is not
 * standalone) nobody can say: refused, naming what is missing. */
static int spark_room(launcher *base, int role, const int *index, int n, int cpus) {
  spark_launcher *l = (spark_launcher *)base;
  (void)index;
  if (!l->ui)
    return err_set(DRV_EUNSUPPORTED, "launcher 'spark': adding nodes needs spark = { master_ui "
                   "= \"http://host:8080\" } (a standalone master's UI, to know its free cores)");
  char url[PATH_MAX];
  snprintf(url, sizeof url, "%s/json/", l->ui);
  long st = 0;
  char *resp = NULL;
  launch_yarn_http_req q = {.method = "GET", .url = url, .timeout_ms = 5000};
  int rc = launch_yarn_http_request(&q, &st, &resp);
  if (rc < 0) return err_set(rc, "launcher 'spark': %s", err_msg());
  json_t *j = st == 200 ? json_loads(resp, 0, NULL) : NULL;
  free(resp);
  if (!j) return err_set(DRV_EIO, "launcher 'spark': %s answered %ld, not the master's JSON", url, st);
  long total = (long)json_integer_value(json_object_get(j, "cores"));
  long used = (long)json_integer_value(json_object_get(j, "coresused"));
  json_decref(j);
  int c = cpus > 0 ? cpus : 1;
  if ((long)n * c > total - used)
    return err_set(DRV_ERANGE, "launcher 'spark': %d more %s%s (%d core%s each) do not fit: the "
                   "master has %ld free cores of %ld", n, launch__role_name(role),
                   n == 1 ? "" : "s", c, c == 1 ? "" : "s", total - used, total);
  return 0;
}

static const launch_ops spark_ops = {"spark", spark_start, spark_signal, launch__running,
                                     spark_destroy, NULL, NULL, spark_room};

/* ============================== making one =============================== */

static int check_conf(const launch_config *cfg) {
  const launch_spark_opts *o = &cfg->spark;
  if (o->nconf < 0 || o->nconf > MAX_CONF)
    return err_set(DRV_EINVAL, "spark: conf has %d keys (at most %d)", o->nconf, MAX_CONF);
  bool memory = false, gpus = false;
  for (int r = 0; r < ROLE_COUNT; r++) {
    if (cfg->res[r].gpus < 0)
      return err_set(DRV_EINVAL, "spark launcher: gpus (%s) is negative", launch__role_name(r));
    memory = memory || cfg->res[r].memory;
    gpus = gpus || (cfg->res[r].gpus > 0 && cfg->count[r] > 0);
  }
  for (int i = 0; i < o->nconf; i++) {
    const char *k = o->conf_keys[i];
    if (!k || !o->conf_values[i] || strncmp(k, "spark.", 6) != 0 || strchr(k, '='))
      return err_set(DRV_EINVAL, "spark: conf key '%s' is not a Spark property (spark.*)",
                     k ? k : "(null)");
    for (int j = 0; reserved_keys[j]; j++)
      if (strcmp(k, reserved_keys[j]) == 0)
        return err_set(DRV_EINVAL, "spark: conf '%s' is set by drover (roles' cpus, one "
                       "client-mode application per node, no Spark retries)", k);
    if (memory && strcmp(k, "spark.executor.memory") == 0)
      return err_set(DRV_EINVAL, "spark: conf 'spark.executor.memory' and a role's memory "
                     "both set the executors' memory: keep one");
    if (gpus && (strcmp(k, "spark.executor.resource.gpu.amount") == 0 ||
                 strcmp(k, "spark.task.resource.gpu.amount") == 0))
      return err_set(DRV_EINVAL, "spark: conf '%s' and a role's gpus both set the GPUs a node "
                     "gets: keep one", k);
  }
  return 0;
}

static char *join_kv(const char *k, const char *v) {
  size_t n = strlen(k) + strlen(v) + 2;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s=%s", k, v);
  return s;
}

/* Writes the embedded spark/app.py to <run_dir>/spark-app.py. */
static int write_app(spark_launcher *l) {
  const embed_file *f = embed_find("spark/app.py");
  if (!f) return err_set(DRV_EIO, "spark: spark/app.py is not compiled into this drover");
  char path[PATH_MAX];
  int k = snprintf(path, sizeof path, "%s/" RUNDIR_SPARK_APP, l->run_dir);
  if (k < 0 || (size_t)k >= sizeof path) return err_set(DRV_ERANGE, "spark: run path too long");
  if (!(l->app = strdup(path))) return err_set(DRV_ENOMEM, "out of memory");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || util_write_all(fd, f->data, f->len) < 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return err_set(DRV_EIO, "spark: cannot write '%s': %s", path, strerror(e));
  }
  if (close(fd) < 0) return err_set(DRV_EIO, "spark: cannot write '%s': %s", path, strerror(errno));
  return 0;
}

int launch_spark_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit,
                     void *ud, launcher **out) {
  *out = NULL;
  if (!loop || !cfg || !cfg->run_dir || (cfg->nfiles > 0 && !cfg->files))
    return err_set(DRV_EINVAL, "launch_spark_new: NULL argument");
  const launch_spark_opts *o = &cfg->spark;
  if (!o->master || !*o->master)
    return err_set(DRV_EINVAL, "spark launcher: needs spark = { master = \"spark://host:7077\" }");
  int rc = check_conf(cfg);
  if (rc < 0) return rc;
  if (cfg->nfiles > MAX_FILES)
    return err_set(DRV_EINVAL, "spark: %d files (at most %d)", cfg->nfiles, MAX_FILES);
  spark_launcher *l = calloc(1, sizeof *l);
  if (!l) return err_set(DRV_ENOMEM, "out of memory creating the spark launcher");
  launch__base_init(&l->base, &spark_ops, loop, on_exit, ud, spark_ended);
  memcpy(l->res, cfg->res, sizeof l->res);
  bool ok = (l->master = strdup(o->master)) && (l->submit = strdup(o->submit ? o->submit
                                                                             : "spark-submit")) &&
            (!o->master_ui || (l->ui = strdup(o->master_ui))) &&
            (l->run_dir = strdup(cfg->run_dir)) &&
            (!o->nconf || (l->conf = calloc((size_t)o->nconf, sizeof *l->conf))) &&
            (!cfg->nfiles || (l->files = calloc((size_t)cfg->nfiles, sizeof *l->files)));
  for (int i = 0; ok && i < o->nconf; i++, l->nconf++)
    ok = (l->conf[i] = join_kv(o->conf_keys[i], o->conf_values[i])) != NULL;
  for (int i = 0; ok && i < cfg->nfiles; i++, l->nfiles++) {
    char abs[PATH_MAX];
    if (!cfg->files[i] || !realpath(cfg->files[i], abs)) {
      rc = err_set(DRV_EINVAL, "spark: cannot ship '%s': %s",
                   cfg->files[i] ? cfg->files[i] : "(null)", strerror(errno));
      spark_destroy(&l->base.pub);
      return rc;
    }
    ok = (l->files[i] = strdup(abs)) != NULL;
  }
  if (!ok) {
    spark_destroy(&l->base.pub);
    return err_set(DRV_ENOMEM, "out of memory creating the spark launcher");
  }
  if ((rc = write_app(l)) < 0) {
    spark_destroy(&l->base.pub);
    return rc;
  }
  *out = &l->base.pub;
  return 0;
}
