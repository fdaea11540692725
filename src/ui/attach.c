/* attach.c - `drover attach`: the attach client (ATTACH, SNAPSHOTs applied
 * to a runview, COMMAND and its reply), the plain-text snapshot of
 * --print, and the command itself: finding the coordinator of a run
 * directory, --print, --command, --stop, or the dashboard.
 *
 * The dashboard runs on the main loop and calls its source synchronously
 * (a ':' command waits for its reply), but uv_run must never run inside
 * one of its own callbacks. So the client gets a loop of its own, driven
 * from the main loop (a uv_poll on its backend fd and a timer for its
 * next timeout): a command pumps the client's loop alone, from a callback
 * of the main one.
 */
#include "ui/attach.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/conn.h"
#include "ui/dash.h"
#include "proto/runsnap.h"
#include "base/err.h"
#include "base/rundir.h"
#include "base/log.h"
#include "train/progress.h"
#include "run/fitrun.h"
#include "ui/runs.h"
#include "proto/wire_msgs.h"

struct attach_client {
  uv_loop_t *loop;
  auth_secret secret;
  conn_opts copts;
  conn *cn;            /* NULL once closed */
  uv_timer_t timer;    /* bounds the waits */
  bool control;
  double hz;
  runview m;
  char run_dir[1024];
  bool have_snapshot, closed, freeing, timed_out;
  char why[400];
  size_t bytes, frames;
  uint32_t next_req, req; /* the command in flight (req 0: none) */
  bool replied;
  int status;
  char reply[WIRE_MAX_STR + 1];
  /* The log tail the dashboard's detail view shows: its own request, so
   * that a ':' command in flight does not lose it (log_req 0: none). */
  uint32_t log_req;
  char log_node[64], log_asked[64]; /* the newest answer's node; the one asked */
  char log[WIRE_MAX_STR + 1]; /* the reply's text, the reason when there is none */
};

/* ============================== the client =============================== */

static void client_free(uv_handle_t *h) {
  attach_client *a = h->data;
  runview_free(&a->m);
  free(a);
}

static void client_ready(conn *cn) {
  attach_client *a = conn_ud(cn);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_attach(&w, &(wire_msg_attach){a->control, a->hz});
  conn_send_wr(cn, &w, WIRE_ATTACH, 0);
}

static void fail(attach_client *a, const char *fmt, const char *detail) {
  if (!a->why[0]) snprintf(a->why, sizeof a->why, fmt, detail);
  if (a->cn) conn_close(a->cn, a->why);
}

static void client_frame(conn *cn, const wire_header *h, const uint8_t *pl) {
  attach_client *a = conn_ud(cn);
  switch (h->type) {
  case WIRE_SNAPSHOT:
    if (runsnap_apply(&a->m, a->run_dir, sizeof a->run_dir, pl, h->len) < 0) {
      fail(a, "malformed SNAPSHOT from the coordinator: %.300s", err_msg());
      return;
    }
    a->have_snapshot = true;
    a->bytes += WIRE_HEADER_SIZE + h->len;
    a->frames++;
    return;
  case WIRE_COMMAND_REPLY: {
    wire_msg_command_reply m;
    char text[sizeof a->reply];
    if (wire_get_command_reply(pl, h->len, &m) < 0 || wire_str_copy(m.text, text, sizeof text) < 0)
      return;
    if (h->req && h->req == a->log_req) {
      a->log_req = 0;
      snprintf(a->log_node, sizeof a->log_node, "%s", a->log_asked);
      snprintf(a->log, sizeof a->log, "%s", text);
      return;
    }
    if (h->req != a->req || !a->req) return; /* a late one */
    a->status = m.status;
    snprintf(a->reply, sizeof a->reply, "%s", text);
    a->replied = true;
    return;
  }
  case WIRE_ERROR: {
    char msg[WIRE_MAX_STR + 1];
    wire_rd_error(pl, h->len, msg, sizeof msg);
    fail(a, "the coordinator refused: %.300s", msg);
    return;
  }
  default:
    fail(a, "unexpected %s from the coordinator", wire_type_name(h->type));
  }
}

static void client_close(conn *cn, int err, const char *why) {
  attach_client *a = conn_ud(cn);
  a->cn = NULL;
  a->closed = true;
  if (!a->why[0]) snprintf(a->why, sizeof a->why, "%s", err || !why ? why : "the run ended");
  if (a->freeing) uv_close((uv_handle_t *)&a->timer, client_free);
}

static const conn_cbs client_cbs = {client_ready, client_frame, client_close};

int attach_client_open(uv_loop_t *loop, const char *host, int port, const auth_secret *secret,
                       bool control, double hz, attach_client **out) {
  *out = NULL;
  attach_client *a = calloc(1, sizeof *a);
  if (!a) return err_set(DRV_ENOMEM, "out of memory");
  a->loop = loop;
  a->secret = *secret;
  a->control = control;
  a->hz = hz > 0 && isfinite(hz) ? hz : 4;
  runview_init(&a->m);
  uv_timer_init(loop, &a->timer);
  a->timer.data = a;
  a->copts = (conn_opts){.secret = &a->secret, .who = AUTH_WHO_CLIENT, .cbs = &client_cbs,
                         .ud = a};
  int rc = conn_connect(loop, host, port, &a->copts, &a->cn);
  if (rc < 0) {
    a->cn = NULL;
    a->freeing = true;
    uv_close((uv_handle_t *)&a->timer, client_free);
    return rc;
  }
  *out = a;
  return 0;
}

static void on_deadline(uv_timer_t *t) {
  attach_client *a = t->data;
  a->timed_out = true;
}

/* Pumps until *flag, the connection closed, or timeout: 0, DRV_EIO,
 * DRV_ETIMEDOUT (message set). */
static int pump(attach_client *a, const bool *flag, double timeout, const char *what) {
  a->timed_out = false;
  uv_timer_start(&a->timer, on_deadline, (uint64_t)(timeout * 1000), 0);
  while (!*flag && !a->closed && !a->timed_out && !err_interrupted()) uv_run(a->loop, UV_RUN_ONCE);
  uv_timer_stop(&a->timer);
  if (*flag) return 0;
  if (a->closed) return err_set(DRV_EIO, "%s", a->why);
  if (err_interrupted()) return err_set(DRV_EINTERRUPTED, "interrupted");
  return err_set(DRV_ETIMEDOUT, "no %s within %g s (is the coordinator busy?)", what, timeout);
}

int attach_client_wait(attach_client *a, double timeout) {
  return pump(a, &a->have_snapshot, timeout, "snapshot");
}

const runview *attach_client_model(const attach_client *a) { return &a->m; }
runview *attach_client_model_mut(attach_client *a) { return &a->m; }
const char *attach_client_run_dir(const attach_client *a) { return a->run_dir; }

bool attach_client_closed(const attach_client *a, const char **why) {
  if (why) *why = a->why;
  return a->closed;
}

void attach_client_stats(const attach_client *a, size_t *bytes, size_t *frames) {
  *bytes = a->bytes;
  *frames = a->frames;
}

/* COMMAND {kind, text} with a fresh request id into *req (0 on failure). */
static int send_command(attach_client *a, int kind, const char *text, uint32_t *req) {
  *req = 0;
  if (!a->cn) return err_set(DRV_EIO, "not connected: %s", a->why);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_command(&w, &(wire_msg_command){(uint8_t)kind, WIRE_STR(text)});
  if (++a->next_req == 0) a->next_req = 1; /* req 0 means "none in flight" */
  int rc = conn_send_wr(a->cn, &w, WIRE_COMMAND, a->next_req);
  if (rc == 0) *req = a->next_req;
  return rc;
}

int attach_client_send(attach_client *a, int kind, const char *text) {
  a->replied = false;
  return send_command(a, kind, text, &a->req);
}

int attach_client_log_tail(attach_client *a, const char *node, char *out, size_t n) {
  bool have = strcmp(a->log_node, node) == 0;
  if (have) snprintf(out, n, "%s", a->log);
  if (a->log_req && strcmp(a->log_asked, node) == 0) { /* asked already */
    if (!have) snprintf(out, n, "(asking the coordinator for the log)");
    return DASH_LOG_PENDING;
  }
  snprintf(a->log_asked, sizeof a->log_asked, "%s", node);
  if (send_command(a, WIRE_COMMAND_LOG_TAIL, node, &a->log_req) < 0) {
    snprintf(out, n, "(no log: %s)", err_msg());
    return 0;
  }
  if (have) return 0; /* the last answer meanwhile; the next call gets the new one */
  snprintf(out, n, "(asking the coordinator for the log)");
  return DASH_LOG_PENDING;
}

bool attach_client_reply(attach_client *a, int *status, char *out, size_t n) {
  if (!a->replied) return false;
  *status = a->status;
  snprintf(out, n, "%s", a->reply);
  return true;
}

int attach_client_command(attach_client *a, int kind, const char *text, char *out, size_t n,
                          double timeout) {
  int rc = attach_client_send(a, kind, text);
  if (rc == 0) rc = pump(a, &a->replied, timeout, "reply");
  a->req = 0;
  if (rc < 0) {
    snprintf(out, n, "%s", err_msg());
    return rc;
  }
  attach_client_reply(a, &rc, out, n);
  return rc;
}

void attach_client_close(attach_client *a) {
  if (!a || a->freeing) return;
  a->freeing = true;
  if (a->cn)
    conn_close(a->cn, "detached"); /* client_close closes the timer */
  else
    uv_close((uv_handle_t *)&a->timer, client_free);
}

/* ============================== plain text =============================== */

static const char *ago(double s, char *buf, size_t n) {
  if (s < 0) snprintf(buf, n, "-");
  else if (s < 60) snprintf(buf, n, "%.1fs", s);
  else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
  else snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
  return buf;
}

static const char *bytes_str(uint64_t b, char *buf, size_t n) {
  if (b == 0) snprintf(buf, n, "-");
  else if (b < (1u << 20)) snprintf(buf, n, "%.1fK", (double)b / 1024);
  else if (b < (1u << 30)) snprintf(buf, n, "%.1fM", (double)b / (1 << 20));
  else snprintf(buf, n, "%.2fG", (double)b / (1 << 30));
  return buf;
}

static void print_node(const runview_node *d, FILE *out) {
  char cpu[16], hb[16], rss[16];
  if (d->cpu_pct < 0) snprintf(cpu, sizeof cpu, "-");
  else snprintf(cpu, sizeof cpu, "%.1f", d->cpu_pct);
  fprintf(out, "%-14s %-11s %-8d %-15s %8d %9lld %9.1f %6s %8s %7s %8d %-20s %s\n", d->name,
          d->state, d->pid, d->host[0] ? d->host : "-", d->restarts, (long long)d->steps,
          d->examples_per_sec, cpu, bytes_str(d->rss, rss, sizeof rss),
          ago(d->heartbeat_age, hb, sizeof hb), d->inflight, d->links[0] ? d->links : "-",
          d->where[0] ? d->where : "-");
}

static void print_series(const runview_series *s, FILE *out) {
  if (s->n == 0) return;
  const runview_point *p = runview_series_at(s, s->n - 1);
  fprintf(out, "  %-18s %.6g at step %.0f (%d points)\n", s->tag, p->value, p->step, s->n);
}

void attach_print(const runview *m, int events, FILE *out) {
  char up[16], eta[16], total[32] = "";
  if (m->total_steps > 0) /* a feed's is not known: "step 60", not "step 60/0" */
    snprintf(total, sizeof total, "/%lld", (long long)m->total_steps);
  fprintf(out, "run %s  %s  %s%s%s  up %s  step %lld%s  %.1f examples/s  eta %s  "
               "attached %d\n",
          m->run, m->launcher, m->state, m->mode[0] ? "  " : "", m->mode,
          ago(m->uptime, up, sizeof up), (long long)m->step, total,
          m->examples_per_sec, ago(m->eta, eta, sizeof eta), m->attach_clients);
  if (m->tensorboard[0]) fprintf(out, "tensorboard %s\n", m->tensorboard);
  fprintf(out, "%-14s %-11s %-8s %-15s %8s %9s %9s %6s %8s %7s %8s %-20s %s\n", "NODE", "STATE",
          "PID", "HOST", "RESTARTS", "STEPS", "EX/S", "CPU%", "RSS", "HB", "INFLIGHT", "LINKS",
          "WHERE");
  for (int i = 0; i < m->nnodes; i++) print_node(&m->nodes[i], out);
  fprintf(out, "queue: %lld queued (capacity %lld), %lld running, %lld done, %lld failed, "
               "%lld retried, %lld cancelled\n",
          (long long)m->queued, (long long)m->capacity, (long long)m->running,
          (long long)m->done, (long long)m->failed, (long long)m->retried,
          (long long)m->cancelled);
  if (m->tables[0]) { /* "NAME ROWS DIM HELD TOUCHED BYTES" lines, from the coordinator */
    fprintf(out, "tables:  %-20s %14s %6s %12s %12s %12s\n", "NAME", "ROWS", "DIM", "HELD",
            "ROWS/STEP", "BYTES/STEP");
    for (const char *l = m->tables; *l;) {
      char name[64];
      unsigned long long rows, dim, held;
      double touched, bytes;
      if (sscanf(l, "%63s %llu %llu %llu %lf %lf", name, &rows, &dim, &held, &touched, &bytes) == 6)
        fprintf(out, "         %-20s %14llu %6llu %12llu %12.0f %12.0f\n", name, rows, dim, held,
                touched, bytes);
      const char *nl = strchr(l, '\n');
      if (!nl) break;
      l = nl + 1;
    }
  }
  if (m->throughput.n || m->nmetrics) fprintf(out, "metrics:\n");
  print_series(&m->throughput, out);
  for (int i = 0; i < m->nmetrics; i++) print_series(&m->metrics[i], out);
  int from = m->nevents > events ? m->nevents - events : 0;
  fprintf(out, "events (last %d of %d):\n", m->nevents - from, m->nevents);
  for (int i = from; i < m->nevents; i++) {
    const runview_event *e = runview_event_at(m, i);
    fprintf(out, "  %8.1fs  %s\n", e->wall, e->text);
  }
}

/* ============================== the command ============================== */

/* Where the coordinator of the target listens, and the secret to show it. */
typedef struct target {
  char host[256];
  int port;
  char secret_file[PATH_MAX];
  char label[PATH_MAX + 16]; /* "run 'DIR'" or "coordinator HOST:PORT" for messages */
  long pid;                  /* the coordinator's, from RUN_DIR/coordinator (0: unknown) */
  char dir[PATH_MAX];        /* RUN_DIR, "" for HOST:PORT */
} target;

static bool split_hostport(const char *s, char *host, size_t n, int *port) {
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s) return false;
  const char *h = s, *hend = colon;
  if (s[0] == '[' && hend[-1] == ']') h = s + 1, hend--;
  if ((size_t)(hend - h) >= n || hend == h) return false;
  memcpy(host, h, (size_t)(hend - h));
  host[hend - h] = '\0';
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if (end == colon + 1 || (*end && *end != ' ' && *end != '\n') || p <= 0 || p > 65535)
    return false;
  *port = (int)p;
  return true;
}

/* RUN_DIR/coordinator holds "HOST:PORT PID" while the run lives. */
static int read_run_dir(const char *dir, target *t) {
  char path[PATH_MAX + 32], line[512] = "";
  snprintf(t->label, sizeof t->label, "run '%s'", dir);
  snprintf(t->dir, sizeof t->dir, "%s", dir);
  snprintf(path, sizeof path, "%s/" RUNDIR_COORDINATOR, dir);
  FILE *f = fopen(path, "r");
  if (!f)
    return err_set(DRV_EIO, "run '%s' is not running (no coordinator file: it ended or never "
                              "started; see %s/" RUNDIR_EVENTS_LOG ")", dir, dir);
  bool got = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  char *sp = strchr(line, ' ');
  long pid = sp ? strtol(sp + 1, NULL, 10) : 0;
  if (!got || !sp || !split_hostport(line, t->host, sizeof t->host, &t->port))
    return err_set(DRV_EPARSE, "run '%s': cannot read its coordinator file '%s'", dir, path);
  if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
    return err_set(DRV_EIO, "run '%s' is not running (its coordinator, pid %ld, is gone)", dir,
                   pid);
  t->pid = pid;
  return 0;
}

/* The key a run directory offers this client: control.key when it asks to
 * control (or the view key, which the coordinator then refuses, saying
 * so), else view.key, else control.key: the least that does the job. */
static int pick_key(const attach_opts *o, const char *dir, target *t) {
  const char *order[2] = {RUNDIR_VIEW_KEY, RUNDIR_CONTROL_KEY};
  if (o->control || o->command || o->stop || o->stop_run || o->scale)
    order[0] = RUNDIR_CONTROL_KEY, order[1] = RUNDIR_VIEW_KEY;
  for (int i = 0; i < 2; i++) {
    snprintf(t->secret_file, sizeof t->secret_file, "%s/%s", dir, order[i]);
    if (access(t->secret_file, R_OK) == 0) return 0;
  }
  return err_set(DRV_EIO, "run '%s' has no key this user can read (" RUNDIR_CONTROL_KEY " or "
                            RUNDIR_VIEW_KEY "); pass one with --key FILE", dir);
}

static int resolve(const attach_opts *o, target *t) {
  memset(t, 0, sizeof *t);
  struct stat st;
  int rc = 0;
  if (stat(o->target, &st) == 0 && S_ISDIR(st.st_mode)) {
    rc = read_run_dir(o->target, t);
    if (rc == 0 && !o->secret_file) rc = pick_key(o, o->target, t);
  } else if (split_hostport(o->target, t->host, sizeof t->host, &t->port)) {
    snprintf(t->label, sizeof t->label, "the coordinator at %s", o->target);
    if (!o->secret_file)
      return err_set(DRV_EINVAL, "attach %s needs --key FILE (the run's control.key or view.key)",
                     o->target);
  } else if (stat(o->target, &st) != 0) {
    return err_set(DRV_EINVAL, "run directory '%s' does not exist (nor is it HOST:PORT)",
                   o->target);
  } else {
    return err_set(DRV_EINVAL, "'%s' is not a run directory", o->target);
  }
  if (rc == 0 && o->secret_file)
    snprintf(t->secret_file, sizeof t->secret_file, "%s", o->secret_file);
  return rc;
}

/* ---- the dashboard: the client's loop driven from the main loop ---- */

typedef struct live {
  attach_client *a;
  uv_loop_t *outer;
  uv_poll_t poll;
  uv_timer_t timer;
  dash *d;
  bool quit, ended;
} live;

static void live_step(live *l);

static void on_live_poll(uv_poll_t *p, int status, int events) {
  (void)status, (void)events;
  live_step(p->data);
}

static void on_live_timer(uv_timer_t *t) { live_step(t->data); }

/* The run is over for this client: the last frame stays, marked, until q.
 * The client's loop is no longer driven: with no handle active there,
 * uv_backend_timeout is 0, and a timer re-armed at 0 from its own callback
 * ran again in the same turn, forever (q was never read). */
static void live_end(live *l, bool finished) {
  runview *m = attach_client_model_mut(l->a);
  l->ended = true;
  uv_poll_stop(&l->poll);
  uv_timer_stop(&l->timer);
  snprintf(m->state, sizeof m->state, "%s", finished ? "finished" : "lost");
  snprintf(m->banner, sizeof m->banner, "%s - q to leave",
           finished ? "run finished" : "coordinator lost");
  m->version++;
}

/* One turn of the client's loop, then wait for its next event. The
 * coordinator says "stopping", then "shut down", as the run ends (a last
 * snapshot, coord_dash.c); a connection that closes without either lost
 * its coordinator (SIGKILLed, its host gone). */
static void live_step(live *l) {
  if (l->ended) return;
  uv_run(l->a->loop, UV_RUN_NOWAIT);
  const char *state = attach_client_model(l->a)->state;
  bool ending = strcmp(state, "stopping") == 0 || strcmp(state, "shut down") == 0;
  if (strcmp(state, "shut down") == 0 || attach_client_closed(l->a, NULL)) {
    live_end(l, ending);
    return;
  }
  int t = uv_backend_timeout(l->a->loop);
  /* never 0: a timer due again at once runs in the same turn of the loop */
  if (t >= 0) uv_timer_start(&l->timer, on_live_timer, t > 0 ? (uint64_t)t : 1, 0);
}

static const runview *src_get(void *ud) { return attach_client_model(((live *)ud)->a); }

static int src_command(void *ud, const char *line, char *out, size_t n) {
  return attach_client_command(((live *)ud)->a, WIRE_COMMAND_LUA, line, out, n, 10.0);
}

static int src_kill(void *ud, const char *name, char *out, size_t n) {
  return attach_client_command(((live *)ud)->a, WIRE_COMMAND_STOP_NODE, name, out, n, 10.0);
}

static int src_scale(void *ud, const char *text, char *out, size_t n) {
  return attach_client_command(((live *)ud)->a, WIRE_COMMAND_SCALE, text, out, n, 10.0);
}

static int src_log_tail(void *ud, const char *name, char *out, size_t n) {
  return attach_client_log_tail(((live *)ud)->a, name, out, n);
}

static int src_stop_plan(void *ud, const char *name, char *out, size_t n) {
  return attach_client_command(((live *)ud)->a, WIRE_COMMAND_STOP_PLAN, name, out, n, 10.0);
}

static void on_quit(void *ud) {
  live *l = ud;
  l->quit = true;
  uv_poll_stop(&l->poll);
  uv_timer_stop(&l->timer);
}

static int run_dashboard(attach_client *a, const attach_opts *o) {
  uv_loop_t outer;
  if (uv_loop_init(&outer) < 0) return 1;
  live l = {.a = a, .outer = &outer};
  dash_opts dopt;
  dash_opts_default(&dopt);
  dopt.hz = o->hz;
  dopt.on_quit = on_quit;
  dopt.ud = &l;
  dash_source src = {.get = src_get,
                     .command = o->control ? src_command : NULL,
                     .kill_node = o->control ? src_kill : NULL,
                     .scale = o->control ? src_scale : NULL,
                     .log_tail = src_log_tail,
                     .stop_plan = o->control ? src_stop_plan : NULL,
                     .ud = &l};
  int status = 0;
  if (dash_open(&outer, &dopt, src, &l.d) < 0) {
    fprintf(stderr, "drover: cannot open the dashboard: %s\n", err_msg());
    status = 1;
  } else {
    uv_poll_init(&outer, &l.poll, uv_backend_fd(a->loop));
    uv_timer_init(&outer, &l.timer);
    l.poll.data = l.timer.data = &l;
    uv_poll_start(&l.poll, UV_READABLE, on_live_poll);
    live_step(&l);
    while (!l.quit && !dash_closed(l.d)) uv_run(&outer, UV_RUN_ONCE);
    dash_close(l.d);
    uv_close((uv_handle_t *)&l.poll, NULL);
    uv_close((uv_handle_t *)&l.timer, NULL);
  }
  uv_run(&outer, UV_RUN_DEFAULT); /* every handle is closing: the close callbacks */
  if (uv_loop_close(&outer) != 0)
    fputs("drover: dashboard loop closed with live handles\n", stderr);
  return status;
}

/* --stop: what it will do, said first; on a terminal, asked too. 0 to go on. */
static int stop_warn(attach_client *a, const attach_opts *o) {
  char plan[WIRE_MAX_STR + 1];
  if (attach_client_command(a, WIRE_COMMAND_STOP_PLAN, o->stop, plan, sizeof plan, o->timeout) < 0 ||
      !plan[0])
    return 0; /* an unknown node: the stop itself says so */
  fprintf(stderr, "drover: stopping %s: %s\n", o->stop, plan);
  if (!isatty(fileno(stdin))) return 0;
  fprintf(stderr, "stop %s? (y/n) ", o->stop);
  int ch = getchar();
  if (ch == 'y' || ch == 'Y') return 0;
  fprintf(stderr, "drover: %s not stopped\n", o->stop);
  return 1;
}

static int one_command(attach_client *a, const attach_opts *o) {
  char out[WIRE_MAX_STR + 1];
  bool stop = o->stop != NULL;
  if (stop && o->control && stop_warn(a, o)) return 1;
  int kind = o->scale ? WIRE_COMMAND_SCALE : stop ? WIRE_COMMAND_STOP_NODE : WIRE_COMMAND_LUA;
  const char *text = o->scale ? o->scale : stop ? o->stop : o->command;
  int rc = attach_client_command(a, kind, text, out, sizeof out, o->timeout);
  if (rc < 0) {
    fprintf(stderr, "drover: %s\n", out);
    return 1;
  }
  if (out[0]) printf("%s\n", out);
  return 0;
}

/* ---- `drover stop` ---- */

/* Waits up to o->wait s for pid to exit (a script's run ends with its
 * process, once its exit status is recorded): 0 once it has. A REPL
 * outlives its runs: then, with dir, until the run no longer runs. */
static int wait_end(const attach_opts *o, long pid, const char *dir) {
  bool repl = dir && runs_repl(dir);
  for (double t = 0;; t += 0.1) {
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 0;
    if (repl && !runs_running(dir)) return 0;
    if (t >= o->wait) return -1;
    usleep(100000);
  }
}

/* An in-process run has no coordinator and no keys: its process is sent
 * FITRUN_STOP_SIGNAL (a checkpoint first: fitrun.c says how) or, with
 * --now, SIGINT, as Ctrl-C (this machine, this user). A REPL between fits
 * runs nothing: it is left alone. */
static int stop_in_process(const attach_opts *o, const char *dir) {
  long pid = runs_process_pid(dir);
  if (pid > 0 && !runs_running(dir)) {
    fprintf(stderr, "drover: run '%s' is not running: its last fit ended, and the REPL that "
            "holds it (pid %ld) is left alone\n", dir, pid);
    return 1;
  }
  if (pid <= 0) {
    fprintf(stderr, "drover: run '%s' is not running\n", dir);
    return 1;
  }
  bool now = o->stop_run == ATTACH_STOP_NOW;
  if (kill((pid_t)pid, now ? SIGINT : FITRUN_STOP_SIGNAL) != 0) {
    fprintf(stderr, "drover: cannot stop run '%s' (pid %ld): %s\n", dir, pid, strerror(errno));
    return 1;
  }
  if (now)
    printf("stopping: SIGINT to the run's process (pid %ld), as Ctrl-C (no checkpoint first)\n",
           pid);
  else
    printf("stopping: the run's process (pid %ld) checkpoints the step its fit is at (a fit "
           "with checkpoints), then the run ends as on Ctrl-C\n", pid);
  fflush(stdout);
  if (o->wait > 0 && wait_end(o, pid, dir) < 0) {
    fprintf(stderr, "drover: run '%s' has not ended within %g s\n", dir, o->wait);
    return 1;
  }
  if (o->wait > 0) printf("stopped %s\n", dir);
  return 0;
}

/* STOP_RUN, its reply, then the end: the coordinator closes every attach
 * connection as the run shuts down, and its process exits. */
static int stop_cluster(attach_client *a, const attach_opts *o, const target *t) {
  const char *label = t->label;
  char out[WIRE_MAX_STR + 1];
  const char *how = o->stop_run == ATTACH_STOP_NOW ? "now" : "";
  if (attach_client_command(a, WIRE_COMMAND_STOP_RUN, how, out, sizeof out, o->timeout) != 0) {
    fprintf(stderr, "drover: %s\n", out);
    return 1;
  }
  printf("%s\n", out);
  fflush(stdout);
  if (o->wait <= 0) return 0;
  bool never = false;
  int rc = pump(a, &never, o->wait, "end of the run");
  if (rc == DRV_EIO) { /* closed: the run is over; its process exits */
    if (t->pid > 0 && wait_end(o, t->pid, t->dir[0] ? t->dir : NULL) < 0) {
      fprintf(stderr, "drover: %s: its process (pid %ld) has not exited within %g s\n", label,
              t->pid, o->wait);
      return 1;
    }
    printf("stopped %s\n", label);
    return 0;
  }
  fprintf(stderr, "drover: %s has not ended within %g s: %s\n", label, o->wait, err_msg());
  return 1;
}

/* A run's name, or name prefix, as its directory (unless it is HOST:PORT
 * or a directory already); the message says why when there is none. */
static int find_run(const attach_opts *o, const char *name, char *dir, size_t n) {
  char host[256];
  int port;
  struct stat st;
  if (stat(name, &st) != 0 && split_hostport(name, host, sizeof host, &port)) return 1;
  return runs_find(o->runs ? o->runs : RUNDIR_BASE, name, dir, n);
}

int attach_main(const attach_opts *opts) {
  target t;
  auth_secret secret;
  int rc;
  attach_opts named = *opts;
  const attach_opts *o = &named;
  char dir[PATH_MAX], dir2[PATH_MAX];
  if ((rc = find_run(o, o->target, dir, sizeof dir)) < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    return 1;
  }
  if (rc == 0) named.target = dir;
  if (o->target2) { /* a comparison: both runs' records */
    int rc2 = find_run(o, o->target2, dir2, sizeof dir2);
    if (rc != 0 || rc2 != 0) {
      if (rc == 0 && rc2 < 0) fprintf(stderr, "drover: %s\n", err_msg());
      else fprintf(stderr, "drover: attach A B compares two runs: HOST:PORT is not one\n");
      return 1;
    }
    return attach_records_main(o, dir, dir2);
  }
  if (rc == 0 && o->stop_run && runs_in_process(dir)) return stop_in_process(o, dir);
  if (rc == 0 && !o->command && !o->stop && !o->stop_run && !o->scale && !attach_coordinator_up(dir))
    return attach_records_main(o, dir, NULL);
  log_setup(stderr, "attach", LOG_ERROR); /* conn.c's warnings: our message says it */
  if ((rc = resolve(o, &t)) < 0 || (rc = auth_init()) < 0 ||
      (rc = auth_secret_load(t.secret_file, &secret)) < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    return 1;
  }
  uv_loop_t loop;
  if (uv_loop_init(&loop) < 0) return 1;
  attach_client *a = NULL;
  /* --command and --stop without --control are sent anyway: the
   * coordinator refuses them, as it does the dashboard's. */
  rc = attach_client_open(&loop, t.host, t.port, &secret, o->control, o->print ? 10 : o->hz, &a);
  if (rc == 0) rc = attach_client_wait(a, o->timeout);
  int status = 0;
  if (rc < 0) {
    fprintf(stderr, "drover: cannot attach to %s (%s:%d): %s\n", t.label, t.host, t.port,
            err_msg());
    status = 1;
  } else if (o->stop_run) {
    status = stop_cluster(a, o, &t);
  } else if (o->stop || o->command || o->scale) {
    status = one_command(a, o);
  } else if (o->print) {
    attach_print(attach_client_model(a), 10, stdout);
    fflush(stdout);
  } else {
    status = run_dashboard(a, o);
  }
  attach_client_close(a);
  uv_run(&loop, UV_RUN_DEFAULT); /* the client frees itself in its last close callback */
  if (uv_loop_close(&loop) != 0) fputs("drover: event loop closed with live handles\n", stderr);
  return status;
}
