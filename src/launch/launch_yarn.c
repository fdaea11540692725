/* launch_yarn.c - the YARN launcher: each node a YARN container of one
 * application per run, with its role's resources and node label.
 *
 * drover stays one C binary with no JVM of its own: it talks to the
 * ResourceManager through its REST API and to the application's
 * ApplicationMaster over plain HTTP (launch_yarn_rm.c). The AM is drover's
 * own small Java program (yarn/.../DroverAM.java, built by `make yarn-am`,
 * installed by `make install`), which runs inside the cluster where
 * Hadoop's client jars are: YARN gives a container only to an AM that
 * speaks its RPC protocol, which a C program cannot without Hadoop's jars.
 * Hadoop's DistributedShell AM starts a fixed number of copies of one
 * command and cannot replace one container for one node; ours starts a
 * container when drover asks for a node (POST /start), stops one (POST
 * /kill), reports how each ended (GET /events, polled), and unregisters
 * (POST /finish).
 * Requests carry a random token given to the AM in its environment.
 *
 * Start (launch_yarn_rm.c): new-application gives the id and YARN's
 * maximum allocation; a role asking for more fails here with YARN's
 * numbers, before anything is submitted. The AM container is then
 * submitted (queue, name, attempts, containers kept across attempts) and
 * waited for until it registers. Then this drover and the script's files
 * go through the AM to the application's staging directory on the
 * cluster's default file system (launch_yarn_stage.c): every node's
 * container gets them as local resources, downloaded by its NodeManager
 * into the container's working directory, where the node runs ./drover.
 * The application's id, tracking URL and AM go to RUN_DIR/yarn and,
 * through the note callback, to events.log and the dashboard.
 *
 * A node is the same `drover node ... --log-forward` command as elsewhere
 * (launch.h), run by the container's shell with its key file's path and
 * the BLAS thread count in its environment. Nothing of a node goes through
 * the run directory: its key file is a local resource of its container
 * alone, uploaded at each start (launch_yarn_stage.c), its log comes over
 * its connection (--log-forward) into RUN_DIR/logs, and the container's
 * own stdout and stderr stay in YARN's container log directory.
 *
 * drover's life bounds the application's: every poll (GET /events) is also
 * drover's heartbeat, and the AM, hearing nothing for yarn.orphan_timeout
 * seconds, stops every container, removes the staging directory and
 * unregisters as FAILED, saying why (DroverAM.java). The application is
 * submitted as the local user or yarn.user (the REST API's user.name); a
 * Kerberos RM's 401 is answered with SPNEGO from the user's ticket cache.
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
 *
 * The AM's own death: with yarn.max_attempts > 1 YARN starts another
 * attempt, which adopts the running containers (DroverAM.java keeps what
 * it needs in the staging directory) and registers a new address. When
 * the AM stops answering, each poll asks the RM for the application's
 * report until it shows that address; nodes asked for meanwhile are
 * queued and sent to the new attempt. An application that ends instead
 * (no attempts left, killed) ends every node still listed.
 */
#include "launch/launch_yarn_int.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/rundir.h"

#define POLL_MS 250


/* ============================== events =================================== */

static int send_start(yarn_launcher *y, ytask *k);

static ytask *find_key(yarn_launcher *y, const char *key, ytask ***link) {
  for (ytask **q = &y->tasks; *q; q = &(*q)->next)
    if (strcmp((*q)->key, key) == 0) {
      if (link) *link = q;
      return *q;
    }
  return NULL;
}

static void free_task(ytask *t) {
  if (!t) return;
  free(t->cmd);
  free(t->body);
  free(t);
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

/* The task leaves the list, a line goes to its log, the owner hears. */
static void task_ended(yarn_launcher *y, ytask **link, long st, const char *diag) {
  ytask *t = *link;
  *link = t->next;
  FILE *f = fopen(t->log, "ae");
  if (f) {
    fprintf(f, "drover: YARN container of %s ended with status %ld: %s\n", t->key, st, diag);
    fclose(f);
  }
  if (st < 0 || strstr(diag, "refused")) launch_yarn__note(y, "%s: %.300s", t->key, diag);
  int64_t status;
  int sig;
  exit_of(st, &status, &sig);
  void *ud = t->ud;
  free_task(t);
  y->pub.on_exit(&y->pub, ud, status, sig);
}

/* "exit KEY STATUS DIAG" */
static void on_exit_line(yarn_launcher *y, char *line) {
  char *key = line + 5, *sp = strchr(key, ' ');
  if (!sp) return;
  *sp = '\0';
  char *end;
  long st = strtol(sp + 1, &end, 10);
  ytask **link;
  if (!find_key(y, key, &link)) return; /* stopped by destroy, or not ours */
  task_ended(y, link, st, *end ? end + 1 : "");
}

/* The application ended under us (killed, or out of AM attempts): its
 * containers are gone, so every node still listed has ended. */
static void all_ended(yarn_launcher *y) {
  while (y->tasks) task_ended(y, &y->tasks, -100, "the YARN application ended");
}

/* A new AM attempt took over: the nodes asked for while none answered
 * are asked for again (the others it adopted from the last attempt). */
static void send_queued(yarn_launcher *y) {
  for (ytask **q = &y->tasks; *q;) {
    ytask *t = *q;
    if (!t->queued) {
      q = &t->next;
      continue;
    }
    if (send_start(y, t) == 0) {
      t->queued = 0;
      q = &t->next;
    } else if (y->am_down) {
      return; /* that one is gone too: the next tick looks again */
    } else {
      task_ended(y, q, -1, err_msg()); /* the new AM refused it */
    }
  }
}

/* The AM did not answer: ask the RM whether another attempt runs. */
static void follow(yarn_launcher *y) {
  int r = launch_yarn__follow(y);
  if (r < 0)
    all_ended(y);
  else if (r > 0)
    send_queued(y);
}

/* Every tick asks the AM for its events, with or without nodes: that
 * request is also drover's heartbeat, without which the AM ends the
 * application (yarn.orphan_timeout, DroverAM.java). The timer runs on the
 * coordinator's loop, which runs while a script waits (c:fit, rv:fetch,
 * drover.sleep pump it) and while the REPL waits for input; a node gives
 * up on a coordinator whose loop stalls far sooner (its heartbeat_timeout). */
static void on_poll(uv_timer_t *tm) {
  yarn_launcher *y = tm->data;
  if (y->am_down) follow(y);
  if (y->am_down || y->gone) return;
  char *r = NULL;
  if (launch_yarn__am_req(y, "GET", "/events", NULL, NULL, NULL, YARN_REQ_MS, &r) < 0) {
    free(r);
    return; /* busy, or gone (am_down): the next tick asks the RM */
  }
  for (char *line = r, *nl; line && *line; line = nl) {
    nl = strchr(line, '\n');
    if (nl) *nl++ = '\0';
    if (strncmp(line, "exit ", 5) == 0)
      on_exit_line(y, line);
    else if (strncmp(line, "error ", 6) == 0)
      launch_yarn__note(y, "YARN ApplicationMaster: %.400s", line + 6);
  }
  free(r);
}

/* ============================== tasks ==================================== */

/* The container's command: the node, its environment and its output,
 * `exec env VAR=... ./drover node ... --log-forward 1><LOG_DIR>/stdout
 * 2><LOG_DIR>/stderr`, every word of ours quoted. ./drover and the key file
 * are local resources YARN localised into the container's working
 * directory; the key's path is resolved (readlink -f) so that the node,
 * which removes the file it read, removes the localised copy and not the
 * link to it. The node's log reaches RUN_DIR/logs over its connection
 * (--log-forward); what it writes before it connects, or after it loses
 * the coordinator, stays in YARN's container log directory (<LOG_DIR>,
 * which the NodeManager fills in): nothing is written to the run
 * directory from the container. */
static int node_command(const launch_task *t, char *out, size_t cap) {
  char idx[16], cpus[16], hb[16], to[16], bv[48];
  snprintf(idx, sizeof idx, "%d", t->index);
  snprintf(cpus, sizeof cpus, "%d", t->cpus);
  snprintf(hb, sizeof hb, "%u", (unsigned)t->heartbeat_ms);
  snprintf(to, sizeof to, "%u", (unsigned)t->timeout_ms);
  snprintf(bv, sizeof bv, "OPENBLAS_NUM_THREADS=%d", t->cpus > 0 ? t->cpus : 1);
  /* A container's environment is the NodeManager's, not ours: the one
   * variable of ours a node reads besides these is the tests' fault hook. */
  char fv[160] = "DROVER_YARN=1";
  const char *fault = getenv("DROVER_FAULT");
  if (fault && strlen(fault) < sizeof fv - 16) snprintf(fv, sizeof fv, "DROVER_FAULT=%s", fault);
  const char *a[] = {bv, fv, "./drover", "node", "--coord", t->coord, "--role",
                     launch__role_name(t->role), "--index", idx, "--run-dir", t->run_dir,
                     "--bind", t->bind_host, "--heartbeat-ms", hb, "--timeout-ms", to,
                     "--log-forward", t->cpus > 0 ? "--cpus" : NULL, cpus};
  size_t len = (size_t)snprintf(out, cap, "exec env DROVER_SECRET_FILE=\"$(readlink -f %s)\"",
                                YARN_KEY_FILE);
  for (size_t i = 0; i < sizeof a / sizeof a[0] && a[i]; i++)
    if (!launch__sh_quote(out, cap, &len, a[i]))
      return err_set(DRV_ERANGE, "yarn: the node's command is too long");
  int n = snprintf(out + len, cap - len, " 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr");
  if (n < 0 || (size_t)n >= cap - len) return err_set(DRV_ERANGE, "yarn: command too long");
  return 0;
}

/* The /start body (DroverAM.java): key, resources, label, the local
 * resources (the binary and files, and this start's key file), the
 * command. Stages the key file first. */
static int start_body(yarn_launcher *y, ytask *k) {
  char *key = NULL;
  int rc = launch_yarn__stage_key(y, k->secret, k->key, &key);
  if (rc < 0) return rc;
  size_t files = y->files ? strlen(y->files) : 0, more = strlen(key) + strlen(k->cmd) + 256;
  char *body = files > SIZE_MAX - more ? NULL : malloc(files + more);
  if (!body) {
    free(key);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  const launch_resources *r = &y->res[k->role];
  snprintf(body, files + more, "%s\n%ld\n%d\n%s\n%d\n%s%s%s", k->key, launch_yarn__role_mb(r),
           r->cpus > 0 ? r->cpus : 1, y->label[k->role], y->nfiles + 1,
           y->files ? y->files : "", key, k->cmd);
  free(key);
  free(k->body);
  k->body = body;
  return 0;
}

/* Asks the AM for the task's container: its key staged and its body made
 * once, then the same body each time (see ytask). */
static int send_start(yarn_launcher *y, ytask *k) {
  int rc = k->body ? 0 : start_body(y, k);
  if (rc == 0) rc = launch_yarn__am_req(y, "POST", "/start", k->body, NULL, NULL, YARN_REQ_MS, NULL);
  return rc;
}

/* A task for t, not yet listed or sent. */
static int new_task(const launch_task *t, void *task_ud, ytask **out) {
  ytask *k = calloc(1, sizeof *k);
  char *cmd = malloc(PATH_MAX * 10);
  int rc = !k || !cmd ? err_set(DRV_ENOMEM, "out of memory") : 0;
  if (rc == 0) {
    snprintf(k->key, sizeof k->key, "%s-%d", launch__role_name(t->role), t->index);
    k->role = t->role;
    k->ud = task_ud;
    int n = rundir_node_log(k->log, sizeof k->log, t->run_dir, launch__role_name(t->role),
                            t->index);
    int m = snprintf(k->secret, sizeof k->secret, "%s", t->secret_file);
    if (n < 0 || (size_t)n >= sizeof k->log || m < 0 || (size_t)m >= sizeof k->secret)
      rc = err_set(DRV_ERANGE, "yarn: run dir too long");
  }
  if (rc == 0) rc = node_command(t, cmd, PATH_MAX * 10);
  if (rc < 0) {
    free(cmd);
    free(k);
    return rc;
  }
  k->cmd = cmd;
  *out = k;
  return 0;
}

/* Asks the AM for the node's container. While no AM answers (its
 * attempt died; the next is on its way) the request is queued and the
 * node counts as started: it registers once the new attempt starts it,
 * and the coordinator's reservation and registration timeouts bound that
 * as for any node. */
static int yarn_start(launcher *l, const launch_task *t, void *task_ud, pid_t *pid) {
  yarn_launcher *y = (yarn_launcher *)l;
  if (pid) *pid = 0;
  int rc = launch__check_task(t);
  if (rc < 0) return rc;
  if (y->gone) return err_set(DRV_EIO, "YARN application %s has ended", y->app);
  ytask *k;
  if ((rc = new_task(t, task_ud, &k)) < 0) return rc;
  if (!y->am_down) rc = send_start(y, k);
  if (rc < 0 && y->am_down) rc = 0;
  if (rc < 0) {
    free_task(k);
    return rc;
  }
  k->queued = y->am_down;
  k->next = y->tasks;
  y->tasks = k;
  return 0;
}

static int yarn_signal(launcher *l, void *task_ud, int sig) {
  yarn_launcher *y = (yarn_launcher *)l;
  ytask **q = &y->tasks;
  while (*q && (*q)->ud != task_ud) q = &(*q)->next;
  if (!*q || sig == 0) return 0;
  if ((*q)->queued) { /* no AM has it: nothing runs */
    task_ended(y, q, -1, "stopped before its container was asked for");
    return 0;
  }
  /* YARN stops a container one way: SIGTERM, then SIGKILL after the
   * NodeManager's delay. Any signal asks for that. */
  return launch_yarn__am_req(y, "POST", "/kill", (*q)->key, NULL, NULL, YARN_REQ_MS, NULL);
}

static int yarn_running(launcher *l) {
  int n = 0;
  for (ytask *t = ((yarn_launcher *)l)->tasks; t; t = t->next) n++;
  return n;
}

/* Finishes the application: the AM stops every container, removes the
 * staging directory and unregisters; when it cannot, the RM kills the
 * application. Bounded: YARN_REQ_MS a request and 20 s for the RM to see
 * the application end (FINISHING lasts until the NodeManager reports the
 * AM's container gone, seconds on a busy machine). */
static void finish(yarn_launcher *y) {
  if (y->finished || !y->app[0]) return;
  y->finished = 1;
  if (y->gone) return;
  char path[160];
  snprintf(path, sizeof path, "/ws/v1/cluster/apps/%s/state", y->app);
  if (y->am_down) launch_yarn__follow(y);
  if (!y->am[0] || launch_yarn__am_req(y, "POST", "/finish", "SUCCEEDED\ndrover run over", NULL,
                                       NULL, YARN_REQ_MS, NULL) < 0) {
    launch_yarn__rm_kill(y);
    return;
  }
  long long end = launch__now_ms() + 20000;
  while (launch__now_ms() < end) {
    json_t *j = NULL;
    if (launch_yarn__rm_json(y, "GET", path, NULL, 200, &j) < 0) break;
    const char *st = json_string_value(json_object_get(j, "state"));
    int over = st && (!strcmp(st, "FINISHED") || !strcmp(st, "KILLED") || !strcmp(st, "FAILED"));
    json_decref(j);
    if (over) return;
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
  }
  launch_yarn__rm_kill(y);
}

static void free_launcher(yarn_launcher *y) {
  while (y->tasks) {
    ytask *t = y->tasks;
    y->tasks = t->next;
    free_task(t);
  }
  free(y->tracking);
  free(y->files);
  y->tracking = y->files = NULL;
}

static void on_timer_closed(uv_handle_t *h) { free(h->data); }

static void yarn_destroy(launcher *l) {
  if (!l) return;
  yarn_launcher *y = (yarn_launcher *)l;
  finish(y);
  free_launcher(y);
  uv_timer_stop(&y->poll);
  uv_close((uv_handle_t *)&y->poll, on_timer_closed); /* frees y */
}

static const char *yarn_where(launcher *l) { return ((yarn_launcher *)l)->where; }

/* c:scale: the AM asks the RM for a container per added node, as for a
 * restart (yarn_start); refused when YARN's nodes have no room for them
 * now, rather than leaving the requests pending. */
static int yarn_room(launcher *l, int role, const int *index, int n, int cpus) {
  yarn_launcher *y = (yarn_launcher *)l;
  (void)index, (void)cpus;
  if (y->gone) return err_set(DRV_EIO, "YARN application %s has ended", y->app);
  return launch_yarn__room(y, role, n);
}

static const launch_ops yarn_ops = {"yarn",       yarn_start,   yarn_signal,
                                    yarn_running, yarn_destroy, yarn_where, NULL, yarn_room};

/* ============================== open ===================================== */

static void random_token(char *out, size_t n) {
  unsigned char b[32] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, b, sizeof b) != (ssize_t)sizeof b) memset(b, 0, sizeof b);
    close(fd);
  }
  for (size_t i = 0; i < sizeof b && 2 * i + 2 < n; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* The user the application runs as: yarn.user, else this process's user
 * (getpwuid), sent as the RM's user.name. A name is checked for what a URL's
 * query and a YARN user name may hold. */
static int pick_user(yarn_launcher *y, const launch_yarn_opts *o) {
  const char *u = o->user;
  if (!u) {
    struct passwd *pw = getpwuid(getuid());
    if (!pw || !pw->pw_name || !*pw->pw_name)
      return err_set(DRV_EINVAL, "launcher \"yarn\": this process's user (uid %u) has no "
                     "name: set yarn.user", (unsigned)getuid());
    u = pw->pw_name;
  }
  size_t n = strlen(u);
  if (n == 0 || n >= sizeof y->user || strspn(u, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
                                               "TUVWXYZ0123456789._-@$") != n)
    return err_set(DRV_EINVAL, "yarn.user: '%s' is not a user name (letters, digits and ._-@$, "
                   "under %zu characters)", u, sizeof y->user);
  memcpy(y->user, u, n + 1);
  return 0;
}

static int configure(yarn_launcher *y, const launch_config *cfg) {
  const launch_yarn_opts *o = &cfg->yarn;
  const char *rm = o->rm ? o->rm : getenv("DROVER_YARN_RM");
  if (!rm || !*rm)
    return err_set(DRV_EINVAL, "launcher \"yarn\": no ResourceManager (yarn = { rm = "
                   "\"host:port\" } or $DROVER_YARN_RM)");
  int n = snprintf(y->rm, sizeof y->rm, "%s%s", strstr(rm, "://") ? "" : "http://", rm);
  if (n < 0 || (size_t)n >= sizeof y->rm) return err_set(DRV_EINVAL, "yarn.rm is too long");
  n = snprintf(y->run_dir, sizeof y->run_dir, "%s", cfg->run_dir);
  if (n < 0 || (size_t)n >= sizeof y->run_dir) return err_set(DRV_ERANGE, "run dir too long");
  for (int r = 0; r < ROLE_COUNT; r++) {
    y->res[r] = cfg->res[r];
    const char *lb = cfg->res[r].label ? cfg->res[r].label : "";
    if (strlen(lb) >= sizeof y->label[r] || strpbrk(lb, "\n \t"))
      return err_set(DRV_EINVAL, "%s.label: not a YARN node label", launch__role_name(r));
    snprintf(y->label[r], sizeof y->label[r], "%s", lb);
    y->res[r].label = y->label[r];
  }
  y->note = cfg->note;
  y->note_ud = cfg->note_ud;
  random_token(y->token, sizeof y->token);
  y->orphan_timeout = o->orphan_timeout > 0 ? o->orphan_timeout : 30;
  return pick_user(y, o);
}

/* The installed AM jar, for when neither yarn.am_classpath nor
 * $DROVER_YARN_AM_CLASSPATH says where the AM is: `make install` puts it
 * beside this binary (PREFIX/bin/drover, PREFIX/share/drover/
 * drover-yarn-am.jar). The path is this machine's; the AM's container
 * reads it on a machine of the cluster, so this holds where drover is
 * installed at the same PREFIX there (or the prefix is shared), which
 * the note in events.log says. Fails, naming where it looked. */
static int installed_am_jar(char *jar, size_t n) {
  static const char *const no_cp =
      "launcher \"yarn\": no classpath for drover's ApplicationMaster (yarn = "
      "{ am_classpath = ... } or $DROVER_YARN_AM_CLASSPATH: its jar and Hadoop's client "
      "jars; or drover installed with the jar by `make yarn-am install`): ";
  const char *exe = launch_self_exe();
  const char *slash = strrchr(exe, '/');
  size_t dir = slash ? (size_t)(slash - exe) : 0;
  if (dir < 4 || memcmp(exe + dir - 4, "/bin", 4) != 0)
    return err_set(DRV_EINVAL, "%sthis drover (%s) is not in an installed PREFIX/bin", no_cp, exe);
  int k = snprintf(jar, n, "%.*s/share/drover/drover-yarn-am.jar", (int)(dir - 4), exe);
  if (k < 0 || (size_t)k >= n || access(jar, R_OK) != 0)
    return err_set(DRV_EINVAL, "%sthere is no %s", no_cp, k < 0 || (size_t)k >= n ? exe : jar);
  return 0;
}

/* Submits the application and waits for its AM; on failure the
 * application is killed and the error kept. cp NULL: the installed jar. */
static int start_app(yarn_launcher *y, const launch_config *cfg, const char *cp, const char *jar) {
  int rc = launch_yarn__new_app(y);
  if (rc == 0) rc = launch_yarn__check_resources(y, cfg);
  if (rc == 0) rc = launch_yarn__submit(y, &cfg->yarn, cp, jar);
  if (rc < 0) return rc;
  launch_yarn__note(y, "YARN application %s submitted to %s", y->app, y->rm);
  if (!cp)
    launch_yarn__note(y, "YARN ApplicationMaster: the installed %s, which the cluster's "
                      "machines need at that path, with their Hadoop (YARN's default "
                      "application classpath); yarn.am_classpath sets another", jar);
  rc = launch_yarn__wait_am(y, cfg->yarn.submit_timeout > 0 ? cfg->yarn.submit_timeout : 120);
  if (rc < 0) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err_msg());
    launch_yarn__rm_kill(y);
    return err_set(rc, "%s", msg);
  }
  return 0;
}

int launch_yarn_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit, void *ud,
                    launcher **out) {
  *out = NULL;
  if (!loop || !cfg) return err_set(DRV_EINVAL, "launch_yarn_new: NULL loop or config");
  const char *cp = cfg->yarn.am_classpath ? cfg->yarn.am_classpath
                                          : getenv("DROVER_YARN_AM_CLASSPATH");
  char jar[PATH_MAX] = "";
  if (cp && !*cp) cp = NULL;
  int rc = cp ? 0 : installed_am_jar(jar, sizeof jar);
  if (rc < 0) return rc;
  yarn_launcher *y = calloc(1, sizeof *y);
  if (!y) return err_set(DRV_ENOMEM, "out of memory");
  y->pub = (launcher){.ops = &yarn_ops, .loop = loop, .on_exit = on_exit, .ud = ud};
  rc = configure(y, cfg);
  if (rc == 0) rc = launch_yarn__check_files(cfg);
  if (rc == 0) rc = start_app(y, cfg, cp, jar);
  if (rc == 0) rc = launch_yarn__stage(y, cfg);
  if (rc == 0) rc = launch_yarn__write_info(y);
  snprintf(y->where, sizeof y->where, "yarn %s %s", y->app, y->tracking ? y->tracking : "");
  if (rc == 0) launch_yarn__note(y, "YARN application %s running; tracking URL %s", y->app,
                    y->tracking ? y->tracking : "-");
  if (rc == 0) {
    int e = uv_timer_init(loop, &y->poll);
    if (e < 0) rc = err_set(DRV_EIO, "yarn: timer: %s", uv_strerror(e));
  }
  if (rc == 0) {
    y->poll.data = y;
    uv_timer_start(&y->poll, on_poll, POLL_MS, POLL_MS);
  }
  if (rc < 0) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err_msg());
    if (y->am[0]) finish(y);
    free_launcher(y);
    free(y);
    return err_set(rc, "%s", msg);
  }
  *out = &y->pub;
  return 0;
}
