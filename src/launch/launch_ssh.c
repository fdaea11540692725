/* launch_ssh.c - the ssh launcher: node processes on other hosts, each
 * started by the system `ssh` client, whose local process is the node's
 * handle (its exit is the node's exit).
 *
 * Hosts are "name" or "name:slots" (1 slot by default); a node (role,
 * index) is placed on its first start, round-robin over the hosts that have
 * a free slot (so two ps land on two hosts when they can), and keeps that
 * host across restarts. More nodes than slots is an error of that start.
 *
 * Before any node starts, every host is checked for this very binary and,
 * where it lacks it (or the run has `files`), gets a per-run directory
 * with a copy of drover and the files (launch_ship.c has the layout).
 *
 * Each task runs, with ssh's stdout and stderr appended to the local
 * <run_dir>/logs/<role>-<index>.log:
 *   ssh [-F CONFIG] -T -o BatchMode=yes -o ServerAliveInterval=5
 *       -o ServerAliveCountMax=3 -- HOST sh -c '<WRAPPER>' drover-node
 *       DIR [env OPENBLAS_NUM_THREADS=N] EXE node --coord ... --log-forward
 * The node forwards its records and output to the coordinator, which
 * appends them to that same log (as for Spark): no file on the host is
 * needed to read them.
 * CONFIG is the launcher's ssh_config (a test's private sshd), else the
 * user's own config and keys apply. DIR is the host's per-run directory
 * (the node's working directory) or "." (the login directory); EXE the
 * drover shipped there, or this binary's own path when the host has the
 * same file there.
 *
 * Addresses (coord_addr.c): nodes bind 0.0.0.0 and advertise the address
 * their coordinator connection leaves by. Unless the cluster's `address`
 * says where the coordinator is, --coord gets "@ssh:PORT", which the
 * wrapper replaces with the first field of the host's $SSH_CONNECTION: our
 * address as that host sees it (wrong behind a jump host or NAT: set
 * `address` then).
 *
 * The remote wrapper (WRAPPER below, run by sh whatever the login shell):
 *  - enters DIR and fills in "@ssh:PORT";
 *  - reads the node's key file from stdin (its line count, then its
 *    lines: keyring.h) into a 0600 file in a fresh mktemp -d directory and
 *    points DROVER_SECRET_FILE at it: the keys are never in an argument
 *    list or an environment, on either side;
 *  - starts the node in the background, its raw output to "$d/out"
 *    (forwarded already: not through ssh's stream a second time),
 *    and a watcher that reads signal
 *    names from the rest of stdin ("TERM\n") and kills the node with each;
 *    at EOF (we closed ssh's stdin, or ssh died and sshd closed the session)
 *    the watcher sends TERM and, 5 s later, KILL: a node never outlives its
 *    ssh process for long, without a pty (which would echo the keys and
 *    mangle the log);
 *  - waits for the node; after an end other than 0 or SIGTERM's (a crash,
 *    a failed start before it could reach us) writes a line and the last
 *    TAIL_LINES lines of "$d/out" to ssh's stderr, so the log has what the
 *    node could not forward; removes the directory and exits with the
 *    node's status (128 + signal when killed), which ssh passes on.
 * The node removes "$d/key" once read (node.c), and this launcher the
 * run's keys/ file it sent.
 * So `signal` writes the signal's name to ssh's stdin, and destroy kills
 * the ssh processes (their remote nodes end through the watcher).
 *
 * Exit statuses: ssh's 255 is its own failure (connection refused, host
 * unknown, authentication); the launcher appends a line naming the host to
 * the node's log, which the coordinator quotes. 129..192 is reported as
 * term_signal = status - 128 (the wrapper's rendering of a killed node).
 *
 * Not done: the run directory on the host (only the chief writes there:
 * its summaries, lost when the host does not share the path; node logs
 * no longer need it).
 *
 * Lifetimes: a task is the task base's launch_proc (launch_int.h) plus
 * the uv_pipe_t of ssh's stdin, its second handle; it is freed when both
 * close callbacks have run. Write requests carry their own buffers and are
 * freed in their callbacks, which libuv runs before the pipe's close
 * callback.
 */
#include "launch/launch.h"
#include "launch/launch_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/rundir.h"
#include "base/util.h"
#include "proto/wire.h"

#define MAX_HOSTS 4096
#define TAIL_LINES "40" /* of a node's raw output, after an abnormal end */
#define MAX_SLOTS 4096

/* Double quotes only: the whole script travels inside single quotes.
 * $1 is the working directory, then come the node's command and arguments,
 * among which "@ssh:PORT" stands for our address as this host sees it. */
static const char WRAPPER[] =
    "umask 077; "
    "cd \"$1\" || exit 125; shift; "
    "for a do shift; case $a in @ssh:*) h=${SSH_CONNECTION%% *}; "
    "[ -n \"$h\" ] || { echo \"drover: no SSH_CONNECTION: set the cluster's address\" >&2; exit 125; }; "
    "case $h in *:*) h=\"[$h]\";; esac; a=\"$h:${a#@ssh:}\";; esac; set -- \"$@\" \"$a\"; done; "
    "d=$(mktemp -d \"${TMPDIR:-/tmp}/drover-node-XXXXXX\") || exit 125; "
    "IFS= read -r n; case $n in \"\"|*[!0-9]*) n=; esac; "
    "[ -n \"$n\" ] || { rm -rf \"$d\"; echo \"drover: no key file on stdin\" >&2; exit 125; }; "
    ": > \"$d/key\"; while [ \"$n\" -gt 0 ]; do IFS= read -r s || "
    "{ rm -rf \"$d\"; echo \"drover: the key file on stdin is cut short\" >&2; exit 125; }; "
    "printf \"%s\\n\" \"$s\" >> \"$d/key\"; n=$((n - 1)); done; s=; "
    "exec 3<&0; "
    "DROVER_SECRET_FILE=\"$d/key\" \"$@\" </dev/null >\"$d/out\" 2>&1 & p=$!; "
    "( while IFS= read -r g; do kill -s \"$g\" $p 2>/dev/null; done; "
    "kill -s TERM $p 2>/dev/null; sleep 5; kill -s KILL $p 2>/dev/null ) <&3 >/dev/null 2>&1 & "
    "w=$!; exec 3<&-; "
    "wait $p; st=$?; kill $w 2>/dev/null; "
    "case $st in 0|143) ;; *) echo \"drover: the node ended with status $st; the last lines of "
    "its own output on $(hostname):\" >&2; tail -n " TAIL_LINES " \"$d/out\" >&2;; esac; "
    "rm -rf \"$d\"; exit $st";

typedef struct ssh_launcher ssh_launcher;

typedef struct ssh_place {
  int role, index, host;
} ssh_place;

typedef struct ssh_task {
  launch_proc p;         /* first member; p.also is `in` */
  uv_pipe_t in;          /* ssh's stdin: the key file, then signal names */
  int host;
  char log[PATH_MAX];    /* the node's log, for the line on ssh's failure */
} ssh_task;
_Static_assert(offsetof(ssh_task, p) == 0, "p must be ssh_task's first member");

struct ssh_launcher {
  launch_base base; /* first member */
  launch_site *hosts;
  int nhosts, cursor;
  char *config;  /* -F, or NULL */
  char *run_dir;
  ssh_place *places;
  int nplaces;
  size_t cap_places;
};

typedef struct ssh_write {
  uv_write_t req;
  size_t len;
  char buf[]; /* zeroed before free: it may hold keys */
} ssh_write;

/* ============================== hosts ==================================== */

/* "name" or "name:slots" into h (name copied). */
static int parse_host(const char *spec, launch_site *h) {
  const char *colon = strrchr(spec, ':');
  size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
  h->slots = 1;
  if (colon) {
    char *end;
    errno = 0;
    long v = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end || errno || v < 1 || v > MAX_SLOTS)
      return err_set(DRV_EINVAL, "ssh: host '%s': slots must be an integer in 1..%d", spec,
                     MAX_SLOTS);
    h->slots = (int)v;
  }
  if (n == 0) return err_set(DRV_EINVAL, "ssh: host '%s' has an empty name", spec);
  if (spec[0] == '-') return err_set(DRV_EINVAL, "ssh: host '%s' starts with '-'", spec);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)spec[i] <= ' ' || spec[i] == '\'' || spec[i] == '"')
      return err_set(DRV_EINVAL, "ssh: host '%s' has a space, quote or control character",
                     spec);
  h->name = strndup(spec, n);
  if (!h->name) return err_set(DRV_ENOMEM, "out of memory");
  return 0;
}

/* The host of (role, index): the one it had, or the next with a free slot. */
static int place(ssh_launcher *l, int role, int index) {
  for (int i = 0; i < l->nplaces; i++)
    if (l->places[i].role == role && l->places[i].index == index) return l->places[i].host;
  int total = 0;
  for (int k = 0; k < l->nhosts; k++) total += l->hosts[k].slots;
  int h = -1;
  for (int k = 0; k < l->nhosts && h < 0; k++) {
    int c = (l->cursor + k) % l->nhosts;
    if (l->hosts[c].used < l->hosts[c].slots) h = c;
  }
  if (h < 0)
    return err_set(DRV_EINVAL, "ssh: no free slot for %s-%d: the hosts have %d slots in all",
                   launch__role_name(role), index, total);
  int rc = util_grow(&l->places, &l->cap_places, (size_t)l->nplaces + 1, sizeof *l->places, 16);
  if (rc < 0) return rc;
  l->places[l->nplaces++] = (ssh_place){role, index, h};
  l->hosts[h].used++;
  l->cursor = (h + 1) % l->nhosts;
  return h;
}

/* ============================== command ================================== */

/* The coordinator's address for the node's --coord: a wildcard host
 * (coord_addr.c: nobody told us where we are) becomes "@ssh:PORT", which
 * the wrapper fills in from $SSH_CONNECTION on the host. */
static const char *coord_arg(const char *coord, char *buf, size_t n) {
  const char *colon = strrchr(coord, ':');
  if (!colon) return coord;
  size_t h = (size_t)(colon - coord);
  if ((h == 7 && strncmp(coord, "0.0.0.0", 7) == 0) || (h == 4 && strncmp(coord, "[::]", 4) == 0)) {
    snprintf(buf, n, "@ssh%s", colon);
    return buf;
  }
  return coord;
}

/* The remote command: sh -c '<WRAPPER>' drover-node DIR [env ...] EXE node
 * ARGS, DIR being the host's per-run directory, or "." (ssh's home). */
static int remote_command(const launch_site *site, const launch_task *t, char *out, size_t cap) {
  char index[16], cpus[16], hb[16], to[16], blas[48], coord[96];
  snprintf(index, sizeof index, "%d", t->index);
  snprintf(cpus, sizeof cpus, "%d", t->cpus);
  snprintf(hb, sizeof hb, "%u", (unsigned)t->heartbeat_ms);
  snprintf(to, sizeof to, "%u", (unsigned)t->timeout_ms);
  snprintf(blas, sizeof blas, "OPENBLAS_NUM_THREADS=%d", t->cpus);
  const char *args[32];
  int n = 0;
  args[n++] = "sh", args[n++] = "-c", args[n++] = WRAPPER, args[n++] = "drover-node";
  args[n++] = site->dir ? site->dir : ".";
  if (t->cpus > 0) args[n++] = "env", args[n++] = blas;
  args[n++] = site->exe ? site->exe : launch_self_exe(), args[n++] = "node";
  args[n++] = "--coord", args[n++] = coord_arg(t->coord, coord, sizeof coord);
  args[n++] = "--role", args[n++] = launch__role_name(t->role), args[n++] = "--index", args[n++] = index;
  args[n++] = "--run-dir", args[n++] = t->run_dir, args[n++] = "--bind", args[n++] = t->bind_host;
  if (t->cpus > 0) args[n++] = "--cpus", args[n++] = cpus;
  args[n++] = "--heartbeat-ms", args[n++] = hb, args[n++] = "--timeout-ms", args[n++] = to;
  args[n++] = "--log-forward";
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < n; i++)
    if (!launch__sh_quote(out, cap, &len, args[i]))
      return err_set(DRV_ERANGE, "ssh %s-%d: command too long", launch__role_name(t->role), t->index);
  return 0;
}

/* ============================== tasks ==================================== */

static void on_written(uv_write_t *req, int status) {
  (void)status; /* a failed write shows as ssh's exit */
  ssh_write *w = (ssh_write *)req;
  memset(w->buf, 0, w->len);
  free(w);
}

/* Queues `len` bytes for ssh's stdin (copied). */
static int send_line(ssh_task *t, const char *s, size_t len) {
  ssh_write *w = malloc(sizeof *w + len);
  if (!w) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(w->buf, s, len);
  w->len = len;
  uv_buf_t b = uv_buf_init(w->buf, (unsigned)len);
  int err = uv_write(&w->req, (uv_stream_t *)&t->in, &b, 1, on_written);
  if (err < 0) {
    memset(w->buf, 0, len);
    free(w);
    return err_set(DRV_EIO, "ssh: cannot write to ssh's stdin: %s", uv_strerror(err));
  }
  return 0;
}

/* Appends one line to the node's log (ssh's own failure, named). */
static void log_line(const ssh_task *t, const char *fmt, const char *a, long long b) {
  FILE *f = util_fopen_append(t->log, 0644);
  if (!f) return;
  fprintf(f, fmt, a, b);
  fclose(f);
}

/* ssh ended (launch_ended_fn): its own failure named in the node's log,
 * the wrapper's 128 + S read as signal S. */
static void ssh_ended(launch_base *b, launch_proc *p, int64_t *status, int *term_signal) {
  ssh_task *t = (ssh_task *)p;
  const char *host = ((ssh_launcher *)b)->hosts[t->host].name;
  if (!*term_signal && *status == 255)
    log_line(t, "drover: ssh to host '%s' failed (ssh exit status %lld): the lines above say why\n",
             host, (long long)*status);
  else if (!*term_signal && *status > 128 && *status <= 128 + 64) {
    *term_signal = (int)(*status - 128);
    *status = 0;
  }
}

/* The node's key file (keyring.h) as the wrapper reads it from stdin: its
 * line count on a line, then its lines. Malloc'd into *out (zero it
 * before freeing: it holds keys). */
#define KEYFILE_MAX (8u << 20)
static int read_keyfile(const char *path, char **out, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(DRV_EIO, "cannot open key file '%s': %s", path, strerror(errno));
  struct stat st;
  char *buf = NULL;
  size_t got = 0, head = 24;
  int rc = 0;
  if (fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > KEYFILE_MAX)
    rc = err_set(DRV_EIO, "key file '%s' is empty, too large or unreadable", path);
  else if (!(buf = malloc(head + (size_t)st.st_size)))
    rc = err_set(DRV_ENOMEM, "out of memory");
  while (rc == 0 && got < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + head + got, (size_t)st.st_size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) rc = err_set(DRV_EIO, "cannot read key file '%s'", path);
    else got += (size_t)r;
  }
  close(fd);
  size_t lines = 0;
  for (size_t i = 0; rc == 0 && i < got; i++) lines += buf[head + i] == '\n';
  if (rc == 0 && buf[head + got - 1] != '\n')
    rc = err_set(DRV_EIO, "key file '%s' does not end with a newline", path);
  if (rc < 0) {
    if (buf) memset(buf, 0, head + got);
    free(buf);
    return rc;
  }
  int n = snprintf(buf, head, "%zu\n", lines);
  memmove(buf + n, buf + head, got);
  *out = buf;
  *len = (size_t)n + got;
  return 0;
}

static void forget(char *keys, size_t len) {
  memset(keys, 0, len);
  free(keys);
}

static int spawn_ssh(ssh_launcher *l, ssh_task *task, void *task_ud, const char *host,
                     const char *cmd, int log_fd) {
  char *args[20];
  int n = 0;
  args[n++] = "ssh";
  if (l->config) args[n++] = "-F", args[n++] = l->config;
  args[n++] = "-T", args[n++] = "-o", args[n++] = "BatchMode=yes";
  args[n++] = "-o", args[n++] = "ServerAliveInterval=5";
  args[n++] = "-o", args[n++] = "ServerAliveCountMax=3";
  args[n++] = "--", args[n++] = (char *)host, args[n++] = (char *)cmd, args[n] = NULL;
  /* stdin: the key file, then signal names. Own session: the terminal's
   * Ctrl-C is the coordinator's, not ssh's (launch_local.c explains why). */
  uv_stdio_container_t in = {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE,
                             .data.stream = (uv_stream_t *)&task->in};
  return launch__spawn(&l->base, &task->p, "ssh", args, NULL, in, log_fd, task_ud);
}

static int ssh_start(launcher *base, const launch_task *t, void *task_ud, pid_t *pid) {
  ssh_launcher *l = (ssh_launcher *)base;
  if (pid) *pid = 0;
  int rc = launch__check_task(t);
  if (rc < 0) return rc;
  const char *r = launch__role_name(t->role);
  int h = place(l, t->role, t->index);
  if (h < 0) return h;
  char cmd[16384];
  char *keys = NULL;
  size_t klen = 0;
  if ((rc = remote_command(&l->hosts[h], t, cmd, sizeof cmd)) < 0 ||
      (rc = read_keyfile(t->secret_file, &keys, &klen)) < 0)
    return rc;
  /* Read once, as a node does its own (node.c): the keys travel on ssh's
   * stdin, and the coordinator writes the file again for a restart. */
  unlink(t->secret_file);
  ssh_task *task = calloc(1, sizeof *task);
  if (!task) {
    forget(keys, klen);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  rundir_node_log(task->log, sizeof task->log, t->run_dir, r, t->index);
  int log_fd = open(task->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    rc = err_set(DRV_EIO, "launch %s-%d: cannot open '%s': %s", r, t->index, task->log,
                 strerror(errno));
    free(task);
    forget(keys, klen);
    return rc;
  }
  const launch_site *site = &l->hosts[h];
  dprintf(log_fd, "drover: starting %s-%d on host '%s': %s%s, in %s\n", r, t->index, site->name,
          site->exe ? site->exe : launch_self_exe(), site->exe ? " (shipped)" : " (the host's own)",
          site->dir ? site->dir : "the login directory");
  uv_pipe_init(l->base.pub.loop, &task->in, 0);
  task->p.also = (uv_handle_t *)&task->in;
  task->host = h;
  int err = spawn_ssh(l, task, task_ud, l->hosts[h].name, cmd, log_fd);
  close(log_fd);
  if (err < 0) { /* the task is freed */
    forget(keys, klen);
    return err_set(DRV_EIO, "launch %s-%d on host '%s': cannot run ssh: %s", r, t->index,
                   l->hosts[h].name, uv_strerror(err));
  }
  rc = send_line(task, keys, klen);
  forget(keys, klen);
  if (rc < 0) uv_process_kill(&task->p.proc, SIGKILL); /* its exit is reported as usual */
  if (pid) *pid = task->p.proc.pid;
  return 0;
}

/* ============================== control ================================== */

static int ssh_signal(launcher *base, void *task_ud, int sig) {
  ssh_task *t = (ssh_task *)launch__find((launch_base *)base, task_ud);
  if (!t) return 0;
  const char *name = sig == SIGTERM ? "TERM" : sig == SIGKILL ? "KILL" : sig == SIGINT ? "INT"
                     : sig == SIGHUP ? "HUP" : sig == SIGQUIT ? "QUIT" : NULL;
  if (!name) return err_set(DRV_EINVAL, "ssh: signal %d is not forwarded", sig);
  char line[8];
  int n = snprintf(line, sizeof line, "%s\n", name);
  return send_line(t, line, (size_t)n);
}

/* Kills every ssh: sshd closes each session, the wrapper's watcher sees
 * EOF and stops its node (TERM, then KILL 5 s later). */
static void ssh_destroy(launcher *base) {
  ssh_launcher *l = (ssh_launcher *)base;
  if (!l) return;
  launch__kill_all(&l->base);
  launch_ship_ctx x = {.config = l->config, .run_dir = l->run_dir};
  if (l->run_dir) launch__ship_clean(&x, l->hosts, l->nhosts);
  for (int i = 0; i < l->nhosts; i++) {
    free(l->hosts[i].name);
    free(l->hosts[i].dir);
    free(l->hosts[i].exe);
  }
  free(l->hosts);
  free(l->places);
  free(l->config);
  free(l->run_dir);
  free(l);
}

/* The host node (role, index) was placed on (NULL before its first start). */
static const char *ssh_machine(launcher *base, int role, int index) {
  ssh_launcher *l = (ssh_launcher *)base;
  for (int i = 0; i < l->nplaces; i++)
    if (l->places[i].role == role && l->places[i].index == index)
      return l->hosts[l->places[i].host].name;
  return NULL;
}

/* c:scale: a node placed before (a removed worker coming back) still has
 * its host's slot (place() keeps it across restarts); a new one needs a
 * free slot. Refused here, before anything starts, rather than by the
 * start of one node among several. */
static int ssh_room(launcher *base, int role, const int *index, int n, int cpus) {
  ssh_launcher *l = (ssh_launcher *)base;
  (void)cpus;
  int need = 0, left = 0, total = 0;
  for (int k = 0; k < n; k++) {
    bool placed = false;
    for (int i = 0; i < l->nplaces; i++)
      placed |= l->places[i].role == role && l->places[i].index == index[k];
    need += !placed;
  }
  for (int h = 0; h < l->nhosts; h++) {
    total += l->hosts[h].slots;
    left += l->hosts[h].slots - l->hosts[h].used;
  }
  if (need > left)
    return err_set(DRV_ERANGE, "launcher 'ssh': %d more %s%s need%s a free slot and the hosts "
                   "have %d free of %d (hosts = { \"name:slots\", ... })", need,
                   launch__role_name(role), need == 1 ? "" : "s", need == 1 ? "s" : "", left,
                   total);
  return 0;
}

static const launch_ops ssh_ops = {"ssh",       ssh_start,   ssh_signal, launch__running,
                                  ssh_destroy, NULL, ssh_machine, ssh_room};

int launch_ssh_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit, void *ud,
                   launcher **out) {
  *out = NULL;
  if (!loop || !cfg || (cfg->nhosts > 0 && !cfg->hosts) || !cfg->run_dir ||
      (cfg->nfiles > 0 && !cfg->files))
    return err_set(DRV_EINVAL, "launch_ssh_new: NULL argument");
  int nhosts = cfg->nhosts;
  const char *sc = cfg->ssh_config;
  if (!sc || !*sc) sc = getenv("DROVER_SSH_CONFIG");
  if (nhosts < 1 || nhosts > MAX_HOSTS)
    return err_set(DRV_EINVAL, "ssh launcher: needs hosts = { \"host\", \"host:slots\", ... } "
                                 "(1..%d of them)", MAX_HOSTS);
  ssh_launcher *l = calloc(1, sizeof *l);
  if (l) {
    launch__base_init(&l->base, &ssh_ops, loop, on_exit, ud, ssh_ended);
    l->hosts = calloc((size_t)nhosts, sizeof *l->hosts);
  }
  if (l && sc && *sc) l->config = strdup(sc);
  if (!l || !l->hosts || (sc && *sc && !l->config)) {
    err_set(DRV_ENOMEM, "out of memory creating the ssh launcher");
    goto fail;
  }
  for (int i = 0; i < nhosts; i++, l->nhosts++)
    if (!cfg->hosts[i] || parse_host(cfg->hosts[i], &l->hosts[i]) < 0) {
      if (!cfg->hosts[i]) err_set(DRV_EINVAL, "ssh launcher: host %d is NULL", i + 1);
      goto fail;
    }
  /* From here on destroy removes whatever was shipped. */
  if (!(l->run_dir = strdup(cfg->run_dir))) {
    err_set(DRV_ENOMEM, "out of memory creating the ssh launcher");
    goto fail;
  }
  launch_ship_ctx x = {.config = l->config, .run_dir = l->run_dir, .files = cfg->files,
                       .nfiles = cfg->nfiles, .note = cfg->note, .note_ud = cfg->note_ud};
  if (launch__ship(&x, l->hosts, l->nhosts) < 0) goto fail;
  *out = &l->base.pub;
  return 0;
fail: {
  char msg[4096];
  snprintf(msg, sizeof msg, "%s", err_msg()); /* clean's ssh must not replace it */
  ssh_destroy(l ? &l->base.pub : NULL);
  return err_set(DRV_EINVAL, "%s", msg); /* the message names the host */
}
}
