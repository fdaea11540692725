/* launch_yarn.c - the YARN launcher: each node a YARN container of one
 * application per run, with its role's resources and node label.
 *
 * drover stays one C binary with no JVM of its own: it talks to the
 * ResourceManager through its REST API (new-application, submit, state,
 * kill) and to the application's ApplicationMaster over plain HTTP. The AM
 * is drover's own small Java program (tests/yarn/.../DroverAM.java, built
 * by `make yarn-deps`), which runs inside the cluster where Hadoop's client
 * jars are: YARN gives a container only to an AM that speaks its RPC
 * protocol, which a C program cannot without Hadoop's jars. Hadoop's
 * DistributedShell AM starts a fixed number of copies of one command and
 * cannot replace one container for one node; ours starts a container when
 * drover asks for a node (POST /start), stops one (POST /kill), reports
 * how each ended (GET /events, polled), and unregisters (POST /finish).
 * Requests carry a random token given to the AM in its environment.
 *
 * Start: new-application gives the id and YARN's maximum allocation; a
 * role asking for more fails here with YARN's numbers, before anything is
 * submitted. The AM container is then submitted (queue, name, attempts)
 * and waited for until it registers (its amRPCAddress is the AM's HTTP
 * address); an application that ends first fails the start with YARN's
 * diagnostics. The application's id and tracking URL go to RUN_DIR/yarn
 * and, through the note callback, to events.log and the dashboard.
 *
 * A node is the same `drover node ...` command as elsewhere (launch.h),
 * run by the container's shell with the secret's path and the BLAS thread
 * count in its environment, stdout and stderr appended to the node's log
 * in the run directory: like the Slurm launcher this assumes the run
 * directory and the binary are on a file system the cluster's machines
 * share (the test YARN runs on this machine).
 *
 * Resources: memory in MiB (the role's `memory`, 1024 when not given),
 * vcores from `cpus` (1 when not given), the node label from `label`.
 * `gpus` is refused: YARN's GPU resource type needs cluster set-up that
 * this launcher does not check.
 *
 * Exits: a container's exit status as YARN reports it; 137 and 143 (the
 * NodeManager's SIGKILL and SIGTERM) and YARN's negative codes (container
 * preempted, killed by the AM or lost with its node) are reported as
 * signals. The coordinator decides what a node's exit means: a worker or
 * ps is started again through start(), which asks the AM for a new
 * container for that node alone.
 */
#include "launch.h"
#include "launch_int.h"
#include "launch_yarn_http.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "wire.h"

#define POLL_MS 250
#define REQ_MS 5000
#define KEY_MAX 32
#define AM_MEMORY_MB 512

typedef struct ytask {
  char key[KEY_MAX]; /* "worker-1" */
  void *ud;
  char log[PATH_MAX];
  struct ytask *next;
} ytask;

typedef struct yarn_launcher {
  launcher pub; /* first member */
  uv_timer_t poll;
  ytask *tasks;
  char rm[256];       /* "http://host:port" */
  char app[96];       /* application_..._0001 */
  char am[256];       /* "http://host:port" of the AM, "" until it runs */
  char token[65];
  char *tracking;     /* the RM's tracking URL (owned) */
  char where[512];    /* "yarn APP TRACKING_URL": the dashboard's header */
  launch_resources res[ROLE_COUNT];
  char label[ROLE_COUNT][64];
  long max_mb, max_vcores;
  launch_note_cb note;
  void *note_ud;
  int finished;
} yarn_launcher;

static void note(yarn_launcher *y, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(yarn_launcher *y, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (y->note) y->note(y->note_ud, msg);
}

/* ============================== REST ===================================== */

/* A request to the RM (path after http://host:port) whose answer is JSON:
 * 0 with *out (the caller decrefs), or an error with the RM's words. */
static int rm_json(yarn_launcher *y, const char *method, const char *path, const char *body,
                   long want, json_t **out) {
  char url[512];
  snprintf(url, sizeof url, "%s%s", y->rm, path);
  long st;
  char *resp;
  yhttp_req r = {method, url, body, body ? "application/json" : NULL, NULL, REQ_MS};
  int rc = yhttp(&r, &st, &resp);
  if (rc < 0) return drv_error(rc, "YARN ResourceManager: %s", drv_errmsg());
  if (st != want) {
    rc = drv_error(DRV_EIO, "YARN ResourceManager: %s %s answered %ld: %.400s", method, path, st,
                   resp);
    free(resp);
    return rc;
  }
  if (out) *out = NULL;
  if (out && *resp) {
    json_error_t e;
    *out = json_loads(resp, 0, &e);
    if (!*out) rc = drv_error(DRV_EPARSE, "YARN ResourceManager: %s: %s", path, e.text);
  }
  free(resp);
  return rc;
}

/* A request to the AM: 0 with *resp (the caller frees; may be NULL when
 * not wanted), or an error naming the AM's answer. */
static int am_req(yarn_launcher *y, const char *method, const char *path, const char *body,
                  char **resp) {
  char url[512];
  snprintf(url, sizeof url, "%s%s", y->am, path);
  long st;
  char *r;
  yhttp_req q = {method, url, body, body ? "text/plain" : NULL, y->token, REQ_MS};
  int rc = yhttp(&q, &st, &r);
  if (rc < 0) return drv_error(rc, "drover's YARN ApplicationMaster: %s", drv_errmsg());
  if (st != 200) {
    size_t n = strlen(r);
    while (n && r[n - 1] == '\n') r[--n] = '\0';
    rc = drv_error(st == 409 ? DRV_EINVAL : DRV_EIO, "YARN: %s", r);
    free(r);
    return rc;
  }
  if (resp)
    *resp = r;
  else
    free(r);
  return 0;
}

/* ============================== submit =================================== */

static void random_token(char *out, size_t n) {
  unsigned char b[32] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, b, sizeof b) != (ssize_t)sizeof b) memset(b, 0, sizeof b);
    close(fd);
  }
  for (size_t i = 0; i < sizeof b && 2 * i + 2 < n; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static int new_application(yarn_launcher *y) {
  json_t *j;
  int rc = rm_json(y, "POST", "/ws/v1/cluster/apps/new-application", NULL, 200, &j);
  if (rc < 0) return rc;
  const char *id = json_string_value(json_object_get(j, "application-id"));
  json_t *max = json_object_get(j, "maximum-resource-capability");
  if (!id || !max) {
    json_decref(j);
    return drv_error(DRV_EPARSE, "YARN ResourceManager: new-application: no application-id");
  }
  snprintf(y->app, sizeof y->app, "%s", id);
  y->max_mb = (long)json_integer_value(json_object_get(max, "memory"));
  y->max_vcores = (long)json_integer_value(json_object_get(max, "vCores"));
  json_decref(j);
  return 0;
}

static long role_mb(const launch_resources *r) {
  return r->memory ? (long)((r->memory + (1u << 20) - 1) >> 20) : 1024;
}

/* Fails, naming the role and YARN's maximum allocation, when a role asks
 * for more than any container may have: YARN would never place it. */
static int check_resources(yarn_launcher *y, const launch_config *cfg) {
  for (int r = 0; r < ROLE_COUNT; r++) {
    if (!cfg->count[r]) continue;
    long mb = role_mb(&cfg->res[r]), vc = cfg->res[r].cpus > 0 ? cfg->res[r].cpus : 1;
    if (cfg->res[r].gpus > 0)
      return drv_error(DRV_EUNSUPPORTED, "launcher \"yarn\": %s.gpus is not supported (ask for "
                       "GPU machines with label = \"...\")", launch__role_name(r));
    if (mb > y->max_mb || vc > y->max_vcores)
      return drv_error(DRV_EINVAL, "YARN cannot place a %s: it asks for <memory:%ld, vCores:%ld> "
                       "but YARN's maximum allocation is <memory:%ld, vCores:%ld> (application "
                       "%s not submitted)", launch__role_name(r), mb, vc, y->max_mb,
                       y->max_vcores, y->app);
  }
  return 0;
}

static int submit(yarn_launcher *y, const launch_yarn_opts *o, const char *cp) {
  char cmd[PATH_MAX * 8];
  int n = snprintf(cmd, sizeof cmd, "exec java -Xmx256m -cp '%s' drover.yarn.DroverAM "
                   "1>><LOG_DIR>/am.log 2>&1", cp);
  if (n < 0 || (size_t)n >= sizeof cmd || strchr(cp, '\''))
    return drv_error(DRV_EINVAL, "yarn.am_classpath is too long or has a quote");
  json_t *env = json_pack("{s:[{s:s,s:s}]}", "entry", "key", "DROVER_AM_TOKEN", "value", y->token);
  json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:i,s:{s:{s:s},s:o},s:{s:i,s:i}}", "application-id",
                        y->app, "application-name", o->name ? o->name : "drover", "queue",
                        o->queue ? o->queue : "default", "application-type", "DROVER",
                        "max-app-attempts", o->max_attempts > 0 ? o->max_attempts : 1,
                        "am-container-spec", "commands", "command", cmd, "environment", env,
                        "resource", "memory", AM_MEMORY_MB, "vCores", 1);
  char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (!body) return drv_error(DRV_ENOMEM, "out of memory");
  int rc = rm_json(y, "POST", "/ws/v1/cluster/apps", body, 202, NULL);
  free(body);
  return rc;
}

/* Polls the application until its AM has registered (0, y->am set) or it
 * ended (YARN's diagnostics) or timeout_s passed. */
static int wait_am(yarn_launcher *y, double timeout_s) {
  char path[160];
  snprintf(path, sizeof path, "/ws/v1/cluster/apps/%s", y->app);
  long long end = launch__now_ms() + (long long)(timeout_s * 1000);
  char last[64] = "";
  for (;;) {
    json_t *j;
    int rc = rm_json(y, "GET", path, NULL, 200, &j);
    if (rc < 0) return rc;
    json_t *a = json_object_get(j, "app");
    const char *st = json_string_value(json_object_get(a, "state"));
    const char *am = json_string_value(json_object_get(a, "amRPCAddress"));
    const char *tr = json_string_value(json_object_get(a, "trackingUrl"));
    char diag[1024];
    snprintf(diag, sizeof diag, "%s", json_string_value(json_object_get(a, "diagnostics"))
                                          ? json_string_value(json_object_get(a, "diagnostics"))
                                          : "");
    if (tr && !y->tracking) y->tracking = strdup(tr);
    if (st && strcmp(st, last) != 0) {
      snprintf(last, sizeof last, "%s", st);
      note(y, "YARN application %s %s", y->app, st);
    }
    if (st && (!strcmp(st, "FAILED") || !strcmp(st, "KILLED") || !strcmp(st, "FINISHED"))) {
      rc = drv_error(DRV_EIO, "YARN application %s %s: %s", y->app, st, diag);
      json_decref(j);
      return rc;
    }
    if (st && !strcmp(st, "RUNNING") && am && strchr(am, ':') && strcmp(strchr(am, ':'), ":-1")) {
      snprintf(y->am, sizeof y->am, "http://%s", am);
      json_decref(j);
      return 0;
    }
    json_decref(j);
    if (launch__now_ms() > end)
      return drv_error(DRV_ETIMEDOUT, "YARN application %s: its ApplicationMaster did not come "
                       "up in %.0f s (state %s: %s)", y->app, timeout_s, last, diag);
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* Kills the application through the RM (when the AM cannot finish it). */
static void rm_kill(yarn_launcher *y) {
  char path[160];
  snprintf(path, sizeof path, "/ws/v1/cluster/apps/%s/state", y->app);
  json_t *j = NULL;
  rm_json(y, "PUT", path, "{\"state\":\"KILLED\"}", 202, &j);
  json_decref(j);
}

/* ============================== events =================================== */

static ytask *find_key(yarn_launcher *y, const char *key, ytask ***link) {
  for (ytask **q = &y->tasks; *q; q = &(*q)->next)
    if (strcmp((*q)->key, key) == 0) {
      if (link) *link = q;
      return *q;
    }
  return NULL;
}

/* YARN's exit status as the coordinator reads one: the NodeManager kills
 * with SIGTERM then SIGKILL (143, 137); YARN's own codes are negative
 * (-100 aborted, -102 preempted, -105 killed by the AM, ...). */
static void exit_of(long st, int64_t *status, int *sig) {
  *status = 0;
  *sig = 0;
  if (st == 137)
    *sig = SIGKILL;
  else if (st == 143)
    *sig = SIGTERM;
  else if (st < 0)
    *sig = SIGKILL;
  else
    *status = st;
}

/* "exit KEY STATUS DIAG": the task leaves the list, a line goes to its
 * log, and the owner hears of it. */
static void on_exit_line(yarn_launcher *y, char *line) {
  char *key = line + 5, *sp = strchr(key, ' ');
  if (!sp) return;
  *sp = '\0';
  char *end;
  long st = strtol(sp + 1, &end, 10);
  const char *diag = *end ? end + 1 : "";
  ytask **link, *t = find_key(y, key, &link);
  if (!t) return; /* stopped by destroy, or not ours */
  *link = t->next;
  FILE *f = fopen(t->log, "ae");
  if (f) {
    fprintf(f, "drover: YARN container of %s ended with status %ld: %s\n", key, st, diag);
    fclose(f);
  }
  if (st < 0 || strstr(diag, "refused")) note(y, "%s: %.300s", key, diag);
  int64_t status;
  int sig;
  exit_of(st, &status, &sig);
  void *ud = t->ud;
  free(t);
  y->pub.on_exit(&y->pub, ud, status, sig);
}

static void on_poll(uv_timer_t *tm) {
  yarn_launcher *y = tm->data;
  char *r = NULL;
  if (!y->tasks || am_req(y, "GET", "/events", NULL, &r) < 0) {
    free(r);
    return; /* the AM is busy or gone: the nodes' heartbeats tell the coordinator */
  }
  for (char *line = r, *nl; line && *line; line = nl) {
    nl = strchr(line, '\n');
    if (nl) *nl++ = '\0';
    if (strncmp(line, "exit ", 5) == 0)
      on_exit_line(y, line);
    else if (strncmp(line, "error ", 6) == 0)
      note(y, "YARN ApplicationMaster: %.400s", line + 6);
  }
  free(r);
}

/* ============================== tasks ==================================== */

/* The container's command: the node, its environment and its log,
 * `exec env VAR=... DROVER node ... >>LOG 2>&1`, every word quoted. */
static int node_command(const launch_task *t, const char *log, char *out, size_t cap) {
  char idx[16], cpus[16], hb[16], to[16], sv[PATH_MAX + 32], bv[48];
  snprintf(idx, sizeof idx, "%d", t->index);
  snprintf(cpus, sizeof cpus, "%d", t->cpus);
  snprintf(hb, sizeof hb, "%u", (unsigned)t->heartbeat_ms);
  snprintf(to, sizeof to, "%u", (unsigned)t->timeout_ms);
  snprintf(sv, sizeof sv, "DROVER_SECRET_FILE=%s", t->secret_file);
  snprintf(bv, sizeof bv, "OPENBLAS_NUM_THREADS=%d", t->cpus > 0 ? t->cpus : 1);
  /* A container's environment is the NodeManager's, not ours: the one
   * variable of ours a node reads besides these is the tests' fault hook. */
  char fv[160] = "DROVER_YARN=1";
  const char *fault = getenv("DROVER_FAULT");
  if (fault && strlen(fault) < sizeof fv - 16) snprintf(fv, sizeof fv, "DROVER_FAULT=%s", fault);
  const char *a[] = {"env", sv, bv, fv, launch_self_exe(), "node", "--coord", t->coord, "--role",
                     launch__role_name(t->role), "--index", idx, "--run-dir", t->run_dir,
                     "--bind", t->bind_host, "--heartbeat-ms", hb, "--timeout-ms", to,
                     t->cpus > 0 ? "--cpus" : NULL, cpus};
  size_t len = (size_t)snprintf(out, cap, "exec");
  for (size_t i = 0; i < sizeof a / sizeof a[0] && a[i]; i++)
    if (!launch__sh_quote(out, cap, &len, a[i]))
      return drv_error(DRV_ERANGE, "yarn: the node's command is too long");
  int n = snprintf(out + len, cap - len, " >>");
  if (n < 0 || (size_t)n >= cap - len) return drv_error(DRV_ERANGE, "yarn: command too long");
  len += (size_t)n;
  if (!launch__sh_quote(out, cap, &len, log))
    return drv_error(DRV_ERANGE, "yarn: the node's command is too long");
  n = snprintf(out + len, cap - len, " 2>&1");
  if (n < 0 || (size_t)n >= cap - len) return drv_error(DRV_ERANGE, "yarn: command too long");
  return 0;
}

static int yarn_start(launcher *l, const launch_task *t, void *task_ud, pid_t *pid) {
  yarn_launcher *y = (yarn_launcher *)l;
  if (pid) *pid = 0;
  int rc = launch__check_task(t);
  if (rc < 0) return rc;
  ytask *k = calloc(1, sizeof *k);
  char *body = malloc(PATH_MAX * 12);
  char *cmd = malloc(PATH_MAX * 10);
  if (!k || !body || !cmd) {
    rc = drv_error(DRV_ENOMEM, "out of memory");
    goto out;
  }
  snprintf(k->key, sizeof k->key, "%s-%d", launch__role_name(t->role), t->index);
  int n = snprintf(k->log, sizeof k->log, "%s/logs/%s.log", t->run_dir, k->key);
  if (n < 0 || (size_t)n >= sizeof k->log) {
    rc = drv_error(DRV_ERANGE, "yarn: run directory path too long");
    goto out;
  }
  if ((rc = node_command(t, k->log, cmd, PATH_MAX * 10)) < 0) goto out;
  const launch_resources *r = &y->res[t->role];
  snprintf(body, PATH_MAX * 12, "%s\n%ld\n%d\n%s\n%s", k->key, role_mb(r),
           r->cpus > 0 ? r->cpus : 1, y->label[t->role], cmd);
  if ((rc = am_req(y, "POST", "/start", body, NULL)) < 0) goto out;
  k->ud = task_ud;
  k->next = y->tasks;
  y->tasks = k;
  k = NULL;
out:
  free(k);
  free(body);
  free(cmd);
  return rc;
}

static int yarn_signal(launcher *l, void *task_ud, int sig) {
  yarn_launcher *y = (yarn_launcher *)l;
  ytask *t = y->tasks;
  while (t && t->ud != task_ud) t = t->next;
  if (!t || sig == 0) return 0;
  /* YARN stops a container one way: SIGTERM, then SIGKILL after the
   * NodeManager's delay. Any signal asks for that. */
  return am_req(y, "POST", "/kill", t->key, NULL);
}

static int yarn_running(launcher *l) {
  int n = 0;
  for (ytask *t = ((yarn_launcher *)l)->tasks; t; t = t->next) n++;
  return n;
}

/* Finishes the application: the AM stops every container and unregisters;
 * when it cannot, the RM kills the application. Bounded: REQ_MS a request
 * and 20 s for the RM to see the application end (FINISHING lasts until
 * the NodeManager reports the AM's container gone, seconds on a busy
 * machine). */
static void finish(yarn_launcher *y) {
  if (y->finished || !y->app[0]) return;
  y->finished = 1;
  char path[160];
  snprintf(path, sizeof path, "/ws/v1/cluster/apps/%s/state", y->app);
  if (!y->am[0] || am_req(y, "POST", "/finish", "SUCCEEDED\ndrover run over", NULL) < 0) {
    rm_kill(y);
    return;
  }
  long long end = launch__now_ms() + 20000;
  while (launch__now_ms() < end) {
    json_t *j = NULL;
    if (rm_json(y, "GET", path, NULL, 200, &j) < 0) break;
    const char *st = json_string_value(json_object_get(j, "state"));
    int over = st && (!strcmp(st, "FINISHED") || !strcmp(st, "KILLED") || !strcmp(st, "FAILED"));
    json_decref(j);
    if (over) return;
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
  }
  rm_kill(y);
}

static void on_timer_closed(uv_handle_t *h) { free(h->data); }

static void yarn_destroy(launcher *l) {
  if (!l) return;
  yarn_launcher *y = (yarn_launcher *)l;
  finish(y);
  while (y->tasks) {
    ytask *t = y->tasks;
    y->tasks = t->next;
    free(t);
  }
  free(y->tracking);
  y->tracking = NULL;
  uv_timer_stop(&y->poll);
  uv_close((uv_handle_t *)&y->poll, on_timer_closed); /* frees y */
}

static const char *yarn_where(launcher *l) { return ((yarn_launcher *)l)->where; }

static const launch_ops yarn_ops = {"yarn",       yarn_start,   yarn_signal,
                                    yarn_running, yarn_destroy, yarn_where};

/* ============================== open ===================================== */

static int write_info(yarn_launcher *y, const char *run_dir) {
  char path[PATH_MAX];
  int n = snprintf(path, sizeof path, "%s/yarn", run_dir);
  if (n < 0 || (size_t)n >= sizeof path) return drv_error(DRV_ERANGE, "run dir path too long");
  FILE *f = fopen(path, "we");
  if (!f) return drv_error(DRV_EIO, "cannot write '%s'", path);
  fprintf(f, "application\t%s\ntracking_url\t%s\nresourcemanager\t%s\n", y->app,
          y->tracking ? y->tracking : "", y->rm);
  return fclose(f) == 0 ? 0 : drv_error(DRV_EIO, "cannot write '%s'", path);
}

static int configure(yarn_launcher *y, const launch_config *cfg) {
  const launch_yarn_opts *o = &cfg->yarn;
  const char *rm = o->rm ? o->rm : getenv("DROVER_YARN_RM");
  if (!rm || !*rm)
    return drv_error(DRV_EINVAL, "launcher \"yarn\": no ResourceManager (yarn = { rm = "
                     "\"host:port\" } or $DROVER_YARN_RM)");
  int n = snprintf(y->rm, sizeof y->rm, "%s%s", strstr(rm, "://") ? "" : "http://", rm);
  if (n < 0 || (size_t)n >= sizeof y->rm) return drv_error(DRV_EINVAL, "yarn.rm is too long");
  for (int r = 0; r < ROLE_COUNT; r++) {
    y->res[r] = cfg->res[r];
    const char *lb = cfg->res[r].label ? cfg->res[r].label : "";
    if (strlen(lb) >= sizeof y->label[r] || strpbrk(lb, "\n \t"))
      return drv_error(DRV_EINVAL, "%s.label: not a YARN node label", launch__role_name(r));
    snprintf(y->label[r], sizeof y->label[r], "%s", lb);
    y->res[r].label = y->label[r];
  }
  y->note = cfg->note;
  y->note_ud = cfg->note_ud;
  random_token(y->token, sizeof y->token);
  return 0;
}

int launch_yarn_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit, void *ud,
                    launcher **out) {
  *out = NULL;
  if (!loop || !cfg) return drv_error(DRV_EINVAL, "launch_yarn_new: NULL loop or config");
  const char *cp = cfg->yarn.am_classpath ? cfg->yarn.am_classpath
                                          : getenv("DROVER_YARN_AM_CLASSPATH");
  if (!cp || !*cp)
    return drv_error(DRV_EINVAL, "launcher \"yarn\": no classpath for drover's "
                     "ApplicationMaster (yarn = { am_classpath = ... } or "
                     "$DROVER_YARN_AM_CLASSPATH: its jar and Hadoop's client jars)");
  yarn_launcher *y = calloc(1, sizeof *y);
  if (!y) return drv_error(DRV_ENOMEM, "out of memory");
  y->pub = (launcher){.ops = &yarn_ops, .loop = loop, .on_exit = on_exit, .ud = ud};
  int rc = configure(y, cfg);
  if (rc == 0) rc = new_application(y);
  if (rc == 0) rc = check_resources(y, cfg);
  if (rc == 0) rc = submit(y, &cfg->yarn, cp);
  if (rc == 0) {
    note(y, "YARN application %s submitted to %s", y->app, y->rm);
    rc = wait_am(y, cfg->yarn.submit_timeout > 0 ? cfg->yarn.submit_timeout : 120);
    if (rc < 0) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", drv_errmsg());
      rm_kill(y);
      rc = drv_error(rc, "%s", msg);
    }
  }
  if (rc == 0) rc = write_info(y, cfg->run_dir);
  snprintf(y->where, sizeof y->where, "yarn %s %s", y->app, y->tracking ? y->tracking : "");
  if (rc == 0) note(y, "YARN application %s running; tracking URL %s", y->app,
                    y->tracking ? y->tracking : "-");
  if (rc == 0) {
    int e = uv_timer_init(loop, &y->poll);
    if (e < 0) rc = drv_error(DRV_EIO, "yarn: timer: %s", uv_strerror(e));
  }
  if (rc == 0) {
    y->poll.data = y;
    uv_timer_start(&y->poll, on_poll, POLL_MS, POLL_MS);
  }
  if (rc < 0) {
    if (y->am[0]) finish(y);
    free(y->tracking);
    free(y);
    return rc;
  }
  *out = &y->pub;
  return 0;
}
