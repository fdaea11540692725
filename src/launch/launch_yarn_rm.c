/* launch_yarn_rm.c - the YARN launcher's requests: the ResourceManager's
 * REST API (new-application, submit, the application's report, kill) and
 * drover's ApplicationMaster (plain HTTP with the run's token), and
 * following the application from one AM attempt to the next.
 *
 * Every request is synchronous and bounded (launch_yarn_http.h).
 */
#include "launch/launch_yarn_int.h"
#include "launch/launch_yarn_http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "base/rundir.h"

#define AM_MEMORY_MB 512

void launch_yarn__note(yarn_launcher *y, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (y->note) y->note(y->note_ud, msg);
}

/* ============================== requests ================================= */

int launch_yarn__rm_json(yarn_launcher *y, const char *method, const char *path, const char *body,
                         long want, json_t **out) {
  /* user.name: the RM's simple authentication takes the caller's name
   * from it (without it, a submitted application runs as the web's
   * static user, dr.who); a Kerberos RM takes the ticket's instead. */
  char url[640];
  snprintf(url, sizeof url, "%s%s%suser.name=%s", y->rm, path, strchr(path, '?') ? "&" : "?",
           y->user);
  long st;
  char *resp;
  int asks = 0;
  launch_yarn_http_req r = {.method = method, .url = url, .body = body,
                            .content_type = body ? "application/json" : NULL,
                            .timeout_ms = YARN_REQ_MS, .negotiate = 1, .asks_negotiate = &asks};
  if (out) *out = NULL;
  int rc = launch_yarn_http_request(&r, &st, &resp);
  if (rc < 0) return err_set(rc, "YARN ResourceManager: %s", err_msg());
  if (st == 401 && asks) {
    free(resp);
    return err_set(DRV_EPERM, "YARN ResourceManager: %s %s: the ResourceManager asks for "
                   "Kerberos (SPNEGO) and accepted no ticket of ours: run kinit (drover answers "
                   "with your Kerberos ticket cache, $KRB5CCNAME, through libcurl's GSS-API; "
                   "the ticket must be valid for the RM's HTTP/ principal)", method, path);
  }
  if (st != want) {
    rc = err_set(DRV_EIO, "YARN ResourceManager: %s %s answered %ld: %.400s", method, path, st,
                 resp);
    free(resp);
    return rc;
  }
  if (out && *resp) {
    json_error_t e;
    *out = json_loads(resp, 0, &e);
    if (!*out) rc = err_set(DRV_EPARSE, "YARN ResourceManager: %s: %s", path, e.text);
  }
  free(resp);
  return rc;
}

int launch_yarn__am_req(yarn_launcher *y, const char *method, const char *path, const char *body,
                        const char *body_file, const char *header, long timeout_ms, char **resp) {
  char url[512];
  snprintf(url, sizeof url, "%s%s", y->am, path);
  long st;
  char *r;
  if (resp) *resp = NULL;
  launch_yarn_http_req q = {.method = method, .url = url, .body = body,
                            .content_type = body ? "text/plain" : NULL, .token = y->token,
                            .timeout_ms = timeout_ms, .body_file = body_file, .header = header};
  int rc = launch_yarn_http_request(&q, &st, &r);
  y->am_down = rc < 0;
  if (rc < 0) return err_set(rc, "drover's YARN ApplicationMaster: %s", err_msg());
  if (st != 200) {
    size_t n = strlen(r);
    while (n && r[n - 1] == '\n') r[--n] = '\0';
    rc = err_set(st == 409 ? DRV_EINVAL : DRV_EIO, "YARN: %s", r);
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

int launch_yarn__new_app(yarn_launcher *y) {
  json_t *j;
  int rc = launch_yarn__rm_json(y, "POST", "/ws/v1/cluster/apps/new-application", NULL, 200, &j);
  if (rc < 0) return rc;
  const char *id = json_string_value(json_object_get(j, "application-id"));
  json_t *max = json_object_get(j, "maximum-resource-capability");
  if (!id || !max) {
    json_decref(j);
    return err_set(DRV_EPARSE, "YARN ResourceManager: new-application: no application-id");
  }
  snprintf(y->app, sizeof y->app, "%s", id);
  y->max_mb = (long)json_integer_value(json_object_get(max, "memory"));
  y->max_vcores = (long)json_integer_value(json_object_get(max, "vCores"));
  json_decref(j);
  return 0;
}

long launch_yarn__role_mb(const launch_resources *r) {
  return r->memory ? (long)((r->memory + (1u << 20) - 1) >> 20) : 1024;
}

int launch_yarn__check_resources(yarn_launcher *y, const launch_config *cfg) {
  for (int r = 0; r < ROLE_COUNT; r++) {
    if (!cfg->count[r]) continue;
    long mb = launch_yarn__role_mb(&cfg->res[r]);
    long vc = cfg->res[r].cpus > 0 ? cfg->res[r].cpus : 1;
    if (cfg->res[r].gpus > 0)
      return err_set(DRV_EUNSUPPORTED, "launcher \"yarn\": %s.gpus is not supported (ask for "
                     "GPU machines with label = \"...\")", launch__role_name(r));
    if (mb > y->max_mb || vc > y->max_vcores)
      return err_set(DRV_EINVAL, "YARN cannot place a %s: it asks for <memory:%ld, vCores:%ld> "
                     "but YARN's maximum allocation is <memory:%ld, vCores:%ld> (application "
                     "%s not submitted)", launch__role_name(r), mb, vc, y->max_mb,
                     y->max_vcores, y->app);
  }
  return 0;
}

/* Containers of <mb, vc> that node j (of the RM's /nodes) holds free, 0
 * for a node not RUNNING or not of `label` ("": a node without labels). */
static long node_fits(json_t *j, const char *label, long mb, long vc) {
  const char *st = json_string_value(json_object_get(j, "state"));
  json_t *labels = json_object_get(j, "nodeLabels");
  bool match = !*label && json_array_size(labels) == 0;
  for (size_t k = 0; k < json_array_size(labels); k++) {
    const char *s = json_string_value(json_array_get(labels, k));
    match |= s && strcmp(s, label) == 0;
  }
  if (!st || strcmp(st, "RUNNING") != 0 || !match) return 0;
  long m = (long)json_integer_value(json_object_get(j, "availMemoryMB")) / mb;
  long v = (long)json_integer_value(json_object_get(j, "availableVirtualCores")) / vc;
  return m < v ? m : v;
}

int launch_yarn__room(yarn_launcher *y, int role, int n) {
  json_t *j;
  int rc = launch_yarn__rm_json(y, "GET", "/ws/v1/cluster/nodes", NULL, 200, &j);
  if (rc < 0) return rc;
  json_t *nodes = json_object_get(json_object_get(j, "nodes"), "node");
  const launch_resources *r = &y->res[role];
  long mb = launch_yarn__role_mb(r), vc = r->cpus > 0 ? r->cpus : 1, fit = 0;
  for (size_t k = 0; k < json_array_size(nodes); k++)
    fit += node_fits(json_array_get(nodes, k), y->label[role], mb, vc);
  json_decref(j);
  if (fit >= n) return 0;
  char where[96] = "YARN's nodes";
  if (y->label[role][0]) snprintf(where, sizeof where, "YARN's nodes labelled %s", y->label[role]);
  return err_set(DRV_ERANGE, "launcher 'yarn': %d more %s%s of <memory:%ld, vCores:%ld> do not "
                 "fit: %s have room for %ld now", n, launch__role_name(role), n == 1 ? "" : "s",
                 mb, vc, where, fit);
}

/* YARN's default application classpath (yarn.application.classpath's
 * default, what Hadoop's own ApplicationMasters run with): the cluster's
 * configuration and Hadoop jars, in the NodeManager's words, which it
 * expands ({{VAR}} from its environment, <CPS> the separator) before it
 * runs the container. */
static const char yarn_app_cp[] =
    "{{HADOOP_CONF_DIR}}<CPS>{{HADOOP_COMMON_HOME}}/share/hadoop/common/*<CPS>"
    "{{HADOOP_COMMON_HOME}}/share/hadoop/common/lib/*<CPS>"
    "{{HADOOP_HDFS_HOME}}/share/hadoop/hdfs/*<CPS>{{HADOOP_HDFS_HOME}}/share/hadoop/hdfs/lib/*<CPS>"
    "{{HADOOP_YARN_HOME}}/share/hadoop/yarn/*<CPS>{{HADOOP_YARN_HOME}}/share/hadoop/yarn/lib/*";

static void env_add(json_t *env, const char *key, const char *value) {
  json_array_append_new(env, json_pack("{s:s,s:s}", "key", key, "value", value));
}

/* The AM's environment: the token, how long it waits for a word from drover
 * before it ends the application (DroverAM.java), where it stages (see Staging.java)
 * and, with the installed jar, its CLASSPATH: the NodeManager writes it
 * in double quotes, so the jar's path must have none of "$`\ (checked). */
static json_t *am_env(yarn_launcher *y, const launch_yarn_opts *o, const char *jar) {
  json_t *env = json_array();
  const char *staging = o->staging ? o->staging : getenv("DROVER_YARN_STAGING");
  char orphan[32];
  snprintf(orphan, sizeof orphan, "%g", y->orphan_timeout);
  env_add(env, "DROVER_AM_TOKEN", y->token);
  env_add(env, "DROVER_AM_ORPHAN_TIMEOUT", orphan);
  if (staging && *staging) env_add(env, "DROVER_AM_STAGING", staging);
  if (jar) {
    char cp[PATH_MAX + sizeof yarn_app_cp + 8];
    snprintf(cp, sizeof cp, "%s<CPS>%s", jar, yarn_app_cp);
    env_add(env, "CLASSPATH", cp);
  }
  return json_pack("{s:o}", "entry", env);
}

/* The AM's command: java with cp (yarn.am_classpath, quoted as given), or
 * with the CLASSPATH of its environment (the installed jar). The java of
 * the container's JAVA_HOME (a NodeManager passes its own on), else the
 * one on PATH: a Hadoop node's hadoop-env.sh sets JAVA_HOME, and its java
 * is often not on the NodeManager's PATH. No double quote: YARN writes the
 * command into `bash -c "..."`. */
#define AM_JAVA "exec ${JAVA_HOME:+$JAVA_HOME/bin/}java -Xmx256m"
static int am_command(char *cmd, size_t size, const char *cp, const char *jar) {
  const char *bad = cp ? "'" : "\"$`\\\n";
  int n = cp ? snprintf(cmd, size, AM_JAVA " -cp '%s' drover.yarn.DroverAM "
                        "1>><LOG_DIR>/am.log 2>&1", cp)
             : snprintf(cmd, size, AM_JAVA " drover.yarn.DroverAM "
                        "1>><LOG_DIR>/am.log 2>&1");
  if (n < 0 || (size_t)n >= size || strpbrk(cp ? cp : jar, bad))
    return cp ? err_set(DRV_EINVAL, "yarn.am_classpath is too long or has a quote")
              : err_set(DRV_EINVAL, "yarn: the installed AM jar's path '%s' has one of "
                        "\"$`\\ or a newline: set yarn.am_classpath", jar);
  return 0;
}

/* Containers are kept across attempts: a new AM adopts the running nodes
 * (DroverAM.java), so the AM's death costs the run nothing but a pause.
 * cp NULL: jar, the installed AM jar, with YARN's default classpath. */
int launch_yarn__submit(yarn_launcher *y, const launch_yarn_opts *o, const char *cp,
                        const char *jar) {
  char cmd[PATH_MAX * 8];
  int rc = am_command(cmd, sizeof cmd, cp, jar);
  if (rc < 0) return rc;
  json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:i,s:b,s:{s:{s:s},s:o},s:{s:i,s:i}}",
                        "application-id", y->app, "application-name", o->name ? o->name : "drover",
                        "queue", o->queue ? o->queue : "default", "application-type", "DROVER",
                        "max-app-attempts", o->max_attempts > 0 ? o->max_attempts : 1,
                        "keep-containers-across-application-attempts", 1, "am-container-spec",
                        "commands", "command", cmd, "environment", am_env(y, o, cp ? NULL : jar),
                        "resource", "memory", AM_MEMORY_MB, "vCores", 1);
  char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (!body) return err_set(DRV_ENOMEM, "out of memory");
  rc = launch_yarn__rm_json(y, "POST", "/ws/v1/cluster/apps", body, 202, NULL);
  free(body);
  return rc;
}

/* ============================== the application ========================== */

typedef struct app_report {
  char state[32];
  char am[256];     /* "http://host:port" once an attempt registered, else "" */
  char diag[1024];
} app_report;

static int report(yarn_launcher *y, app_report *out) {
  char path[160];
  snprintf(path, sizeof path, "/ws/v1/cluster/apps/%s", y->app);
  json_t *j;
  int rc = launch_yarn__rm_json(y, "GET", path, NULL, 200, &j);
  if (rc < 0) return rc;
  json_t *a = json_object_get(j, "app");
  const char *st = json_string_value(json_object_get(a, "state"));
  const char *am = json_string_value(json_object_get(a, "amRPCAddress"));
  const char *tr = json_string_value(json_object_get(a, "trackingUrl"));
  const char *dg = json_string_value(json_object_get(a, "diagnostics"));
  snprintf(out->state, sizeof out->state, "%s", st ? st : "");
  snprintf(out->diag, sizeof out->diag, "%s", dg ? dg : "");
  out->am[0] = '\0';
  /* Before an attempt registers the RM shows "N/A" or a port of -1. */
  if (st && !strcmp(st, "RUNNING") && am && strchr(am, ':') && strcmp(strchr(am, ':'), ":-1"))
    snprintf(out->am, sizeof out->am, "http://%s", am);
  if (tr && !y->tracking) y->tracking = strdup(tr);
  json_decref(j);
  return 0;
}

static int ended(const char *st) {
  return !strcmp(st, "FAILED") || !strcmp(st, "KILLED") || !strcmp(st, "FINISHED");
}

int launch_yarn__wait_am(yarn_launcher *y, double timeout_s) {
  long long end = launch__now_ms() + (long long)(timeout_s * 1000);
  char last[32] = "";
  for (;;) {
    app_report a;
    int rc = report(y, &a);
    if (rc < 0) return rc;
    if (strcmp(a.state, last) != 0) {
      snprintf(last, sizeof last, "%s", a.state);
      launch_yarn__note(y, "YARN application %s %s", y->app, a.state);
    }
    if (ended(a.state))
      return err_set(DRV_EIO, "YARN application %s %s: %s", y->app, a.state, a.diag);
    if (a.am[0]) {
      snprintf(y->am, sizeof y->am, "%s", a.am);
      y->attempts = 1;
      return 0;
    }
    if (launch__now_ms() > end)
      return err_set(DRV_ETIMEDOUT, "YARN application %s: its ApplicationMaster did not come "
                     "up in %.0f s (state %s: %s)", y->app, timeout_s, last, a.diag);
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

int launch_yarn__follow(yarn_launcher *y) {
  if (y->gone) return -1;
  app_report a;
  if (report(y, &a) < 0) return 0; /* the RM is busy: ask again at the next tick */
  if (ended(a.state)) {
    y->gone = 1;
    launch_yarn__note(y, "YARN application %s %s: %s", y->app, a.state, a.diag);
    return -1;
  }
  if (!a.am[0] || !strcmp(a.am, y->am)) return 0;
  snprintf(y->am, sizeof y->am, "%s", a.am);
  y->am_down = 0;
  y->attempts++;
  launch_yarn__note(y, "YARN application %s: its ApplicationMaster ended; attempt %d runs at %s "
                    "and keeps the nodes' containers", y->app, y->attempts, y->am + 7);
  launch_yarn__write_info(y);
  return 1;
}

void launch_yarn__rm_kill(yarn_launcher *y) {
  char path[160];
  snprintf(path, sizeof path, "/ws/v1/cluster/apps/%s/state", y->app);
  json_t *j = NULL;
  launch_yarn__rm_json(y, "PUT", path, "{\"state\":\"KILLED\"}", 202, &j);
  json_decref(j);
}

int launch_yarn__write_info(yarn_launcher *y) {
  char path[PATH_MAX], tmp[PATH_MAX];
  int n = snprintf(path, sizeof path, "%s/" RUNDIR_YARN, y->run_dir);
  int m = snprintf(tmp, sizeof tmp, "%s/" RUNDIR_YARN ".tmp", y->run_dir);
  if (n < 0 || (size_t)n >= sizeof path || m < 0 || (size_t)m >= sizeof tmp)
    return err_set(DRV_ERANGE, "run dir path too long");
  FILE *f = fopen(tmp, "we");
  if (!f) return err_set(DRV_EIO, "cannot write '%s'", tmp);
  fprintf(f, "application\t%s\ntracking_url\t%s\nresourcemanager\t%s\n"
             "application_master\t%s\nattempt\t%d\n",
          y->app, y->tracking ? y->tracking : "", y->rm, y->am, y->attempts);
  if (fclose(f) != 0 || rename(tmp, path) != 0)
    return err_set(DRV_EIO, "cannot write '%s'", path);
  return 0;
}
