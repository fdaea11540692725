/* coord_nodes.c - the nodes as the coordinator sees them: the state
 * machine every node follows, the cluster's options (defaults, checks),
 * and what each node reported of where it runs: kept in its coord_node,
 * logged to events.log, and written to <run>/nodes.tsv so a user (or a
 * script) can see what every node got without the dashboard.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "base/log.h"
#include "train/progress.h"
#include "base/util.h"

/* ============================== the state machine ======================== */

/* Every node's state changes here (coord__node_set_state), checked
 * against one table:
 *
 *                  register                     register
 *   STARTING -----------------> READY <---------------------------+
 *      |                  (BUSY while tasks                       |
 *      |                    are in flight)                        |
 *      |                          |                               |
 *      | lost, recoverable        v lost, recoverable             |
 *      +--------------------> RESTARTING --back-off over--> RELAUNCHED
 *      |                       ^  |                           |   |
 *      |                       |  +-- restart failed --+      |   |
 *      |                       +--- lost, recoverable -|------+   |
 *      | lost, not                                     v          |
 *      +-- recoverable --------------------------->  LOST  <------+
 *                                                      ^    lost, not
 *                            READY: lost, not recoverable   recoverable
 *
 *   a ps back during a fit:  READY -> RESTORING -> READY (its shards and
 *             every other ps's restored from the newest checkpoint); lost
 *             meanwhile: RESTORING -> RESTARTING or LOST
 *
 *   a ps replica (ps_replicas, coord_repl.c): READY -> SYNCING (paired
 *             with its group's primary) -> REPLICA (PS_ROLE_OK: in sync)
 *             -> READY (promoted: its primary was lost); REPLICA ->
 *             SYNCING when paired again (a primary restored from a
 *             checkpoint); lost: -> RESTARTING or LOST like any ps
 *
 *   c:scale taking a worker away: READY -> REMOVING (SHUTDOWN sent, no
 *             tasks) -> REMOVED once it exited or was silent: no loss;
 *             c:scale adding it back: REMOVED -> RELAUNCHED -> READY
 *
 *   a worker lost past its restarts (or not restarted) in a cluster with
 *             worker = { min }: STARTING, READY, RELAUNCHED, RESTARTING ->
 *             REMOVED while at least min are left (coord__scale_lost):
 *             the cluster shrinks, no failure; else LOST as any loss
 *
 *   shutdown: READY, RESTORING, SYNCING, REPLICA -> DONE (clean exit) or
 *             FAILED (any other exit); STARTING, RESTARTING, RELAUNCHED ->
 *             DONE (nothing is lost)
 *
 * LOST, DONE and FAILED are final; entering LOST or FAILED is a failure
 * of the run, counted here (c->failures).
 *
 * BUSY is not stored: a READY node is busy while its in-flight count is
 * above zero (coord_node_status), so the queue never changes states.
 *
 * The rest of the coordinator asks what a state means (its flags: has a
 * process, registered, takes tasks, a failure, final), never for a list
 * of states. So a coming state is its row in proto/nodestate.h (its
 * names, where it sorts) and one here with its arrows, and nothing
 * elsewhere changes: RESTORING, a ps restoring from a checkpoint
 * (coord_ckpt.c), came so: {process, registered}, READY -> RESTORING ->
 * READY once it registered again after a restart; without NS_TASKS the
 * queue sends it nothing, and with NS_PROCESS its loss is a loss. */

#define B(s) (1u << (s))

/* The names are nodestate.h's (nodestate_name, nodestate_shown). */
static const struct {
  const char *verb;  /* the events.log line on entering it: "node VERB NAME..." */
  unsigned flags;    /* NS_* */
  unsigned to;       /* states it may go to, B(state) each */
} states[NODE_STATE_COUNT] = {
    [NODE_STARTING] = {"start", NS_PROCESS,
                       B(NODE_READY) | B(NODE_RESTARTING) | B(NODE_LOST) | B(NODE_DONE) |
                           B(NODE_REMOVED)},
    [NODE_READY] = {"up", NS_PROCESS | NS_REGISTERED | NS_TASKS,
                    B(NODE_RESTARTING) | B(NODE_LOST) | B(NODE_DONE) | B(NODE_FAILED) |
                        B(NODE_RESTORING) | B(NODE_SYNCING) | B(NODE_REMOVING) | B(NODE_REMOVED)},
    [NODE_BUSY] = {"busy", NS_PROCESS | NS_REGISTERED | NS_TASKS | NS_DERIVED, 0},
    [NODE_LOST] = {"lost", NS_FAILURE | NS_FINAL, 0},
    [NODE_DONE] = {"done", NS_FINAL, 0},
    [NODE_FAILED] = {"failed", NS_FAILURE | NS_FINAL, 0},
    [NODE_RESTARTING] = {"lost", 0,
                         B(NODE_RELAUNCHED) | B(NODE_LOST) | B(NODE_DONE) | B(NODE_REMOVED)},
    [NODE_RESTORING] = {"restoring", NS_PROCESS | NS_REGISTERED,
                        B(NODE_READY) | B(NODE_RESTARTING) | B(NODE_LOST) | B(NODE_DONE) |
                            B(NODE_FAILED)},
    [NODE_SYNCING] = {"syncing", NS_PROCESS | NS_REGISTERED,
                      B(NODE_REPLICA) | B(NODE_RESTARTING) | B(NODE_LOST) | B(NODE_DONE) |
                          B(NODE_FAILED)},
    [NODE_REPLICA] = {"synced", NS_PROCESS | NS_REGISTERED,
                      B(NODE_READY) | B(NODE_SYNCING) | B(NODE_RESTARTING) | B(NODE_LOST) |
                          B(NODE_DONE) | B(NODE_FAILED)},
    /* c:scale (coord_scale.c): its exit, clean or not, ends in REMOVED */
    [NODE_REMOVING] = {"removing", NS_PROCESS | NS_REGISTERED,
                       B(NODE_REMOVED) | B(NODE_DONE) | B(NODE_FAILED)},
    [NODE_REMOVED] = {"removed", 0, B(NODE_RELAUNCHED)}, /* scaled up again */
    [NODE_RELAUNCHED] = {"restart", NS_PROCESS,
                         B(NODE_READY) | B(NODE_RESTARTING) | B(NODE_LOST) | B(NODE_DONE) |
                             B(NODE_REMOVED)},
};

static bool valid(coord_node_state s) { return (unsigned)s < NODE_STATE_COUNT; }

const char *coord_state_name(coord_node_state s) { return nodestate_shown(s); }

unsigned coord__state_flags(coord_node_state s) { return valid(s) ? states[s].flags : 0; }

bool coord__state_legal(coord_node_state from, coord_node_state to) {
  return valid(from) && valid(to) && !(states[to].flags & NS_DERIVED) &&
         (states[from].to & B(to));
}

coord_node_state coord_node_status(const coord_node *n) {
  return n->state == NODE_READY && n->inflight > 0 ? NODE_BUSY : n->state;
}

/* A bug of the coordinator, not of the run: said loudly, and fatal
 * where tests ask for it. */
static int illegal(coord *c, const char *name, coord_node_state from, coord_node_state to,
                   const char *why) {
  const char *a = nodestate_name(from), *b = nodestate_name(to);
  log_error("%s: illegal state change %s -> %s%s; ignored", name, a, b, why);
  rundir_event(&c->rd, "node %s: illegal state change %s -> %s; ignored", name, a, b);
  if (c->strict_states) {
    fprintf(stderr, "drover: %s: illegal state change %s -> %s%s\n", name, a, b, why);
    abort();
  }
  return err_set(DRV_EINVAL, "%s: illegal state change %s -> %s", name, a, b);
}

int coord__node_set_state(coord *c, int i, coord_node_state to, const char *why_fmt, ...) {
  coord_node *n = &c->nodes[i];
  char name[32], why[2048];
  va_list ap;
  va_start(ap, why_fmt);
  vsnprintf(why, sizeof why, why_fmt, ap);
  va_end(ap);
  coord__node_name(n, name, sizeof name);
  coord_node_state from = n->state;
  if (!coord__state_legal(from, to)) return illegal(c, name, from, to, why);
  n->state = to;
  if (states[to].flags & NS_FAILURE) c->failures++;
  log_info("%s: %s -> %s", name, nodestate_name(from), nodestate_name(to));
  rundir_event(&c->rd, "node %s %s%s", states[to].verb, name, why);
  /* A node that takes tasks now (registered, or registered again after a
   * restart) may be what queued tasks wait for: serve the queue. Without
   * a loop (the state table's unit tests) there is no queue to serve. */
  if ((states[to].flags & NS_TASKS) && !(states[from].flags & NS_TASKS) && c->loop)
    coord__dispatch_later(c);
  return 0;
}

/* ============================== options ================================== */

void coord_opts_default(coord_opts *o) {
  memset(o, 0, sizeof *o);
  o->name = "cluster";
  o->runs_base = RUNDIR_BASE;
  o->launcher = "local";
  o->reservation_timeout = 60;
  o->heartbeat_ms = 500;
  o->heartbeat_timeout_ms = 5000;
  o->split_threshold = 65536;
  o->max_restarts = 3;
  o->max_queue = 1024;
}

int coord__check_opts(const coord_opts *o) {
  if (o->count[ROLE_PS] < 1) return err_set(DRV_EINVAL, "cluster: needs at least one ps");
  if (o->count[ROLE_WORKER] + o->count[ROLE_CHIEF] < 1)
    return err_set(DRV_EINVAL, "cluster: needs at least one worker or a chief");
  if (o->count[ROLE_CHIEF] > 1 || o->count[ROLE_EVALUATOR] > 1)
    return err_set(DRV_EINVAL, "cluster: chief and evaluator take 0 or 1");
  for (int r = 0; r < ROLE_COUNT; r++) {
    if (o->count[r] < 0 || o->count[r] > COORD_MAX_PER_ROLE)
      return err_set(DRV_EINVAL, "cluster: %s = %d is out of range (0..%d)",
                     wire_role_name(r), o->count[r], COORD_MAX_PER_ROLE);
    if (o->res[r].cpus < 0 || o->res[r].gpus < 0)
      return err_set(DRV_EINVAL, "cluster: %s asks for a negative count", wire_role_name(r));
  }
  if (o->ps_replicas < 0 || o->ps_replicas > 1)
    return err_set(DRV_EINVAL, "cluster: ps_replicas = %d: 0 or 1 (one hot replica per ps)",
                   o->ps_replicas);
  if (o->max_restarts < 0 || o->max_restarts > 1000)
    return err_set(DRV_EINVAL, "cluster: max_restarts = %d is out of range (0..1000)",
                   o->max_restarts);
  if (o->max_queue < 1 || o->max_queue > (1 << 24))
    return err_set(DRV_EINVAL, "cluster: max_queue = %d is out of range (1..16777216)",
                   o->max_queue);
  conn_transport_mode m;
  if (o->transport && conn_transport_parse(o->transport, &m) < 0) {
    char why[256];
    snprintf(why, sizeof why, "%s", err_msg());
    return err_set(DRV_EINVAL, "cluster: %s", why);
  }
  /* before the run directory exists: a misspelt launcher leaves none */
  if (o->launcher && launch_check_name(o->launcher) < 0) return DRV_EUNSUPPORTED;
  int rc = coord__check_launchers(o);
  if (rc < 0) return rc;
  if (o->reservation_timeout <= 0 || o->heartbeat_ms == 0 ||
      o->heartbeat_timeout_ms <= o->heartbeat_ms)
    return err_set(DRV_EINVAL, "cluster: timeouts must be positive, and the heartbeat "
                                 "timeout longer than the heartbeat");
  return 0;
}

/* ============================== what nodes got =========================== */

static const char *or_dash(const char *s) { return s && *s ? s : "-"; }

/* One line per node: what it asked for next to what it got. Rewritten
 * whole on every registration (a restarted node may land elsewhere). */
static void write_nodes_file(coord *c) {
  size_t cap = 256 + (size_t)c->nnodes * 480, len = 0;
  char *buf = malloc(cap);
  if (!buf) return;
  len += (size_t)snprintf(buf, cap,
                          "node\tpid\thost\taddress\tcpus_asked\tthreads\tcpus\t"
                          "memory_asked\tmemory\tgpus_asked\tgpus\tslurm_job\tslurm_step\t"
                          "slurm_node\trestarts\twhere\n");
  for (int i = 0; i < c->nnodes && len < cap; i++) {
    const coord_node *n = &c->nodes[i];
    const launch_resources *want = &c->opts.res[n->role];
    char name[32];
    len += (size_t)snprintf(
        buf + len, cap - len,
        "%s\t%d\t%s\t%s\t%d\t%u\t%u\t%llu\t%llu\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n",
        coord__node_name(n, name, sizeof name), (int)n->pid,
        or_dash(n->got.hostname), or_dash(n->host), want->cpus, (unsigned)n->got.threads,
        (unsigned)n->got.affinity, (unsigned long long)want->memory,
        (unsigned long long)n->got.memory, want->gpus, or_dash(n->got.gpus),
        or_dash(n->got.slurm_job), or_dash(n->got.slurm_step), or_dash(n->got.slurm_node),
        n->restarts, or_dash(n->where));
  }
  if (rundir_write(&c->rd, RUNDIR_NODES, buf, 0644) < 0) {
    log_warn("%s", err_msg());
    rundir_lost(&c->rd, err_msg());
  }
  free(buf);
}

void coord__node_info(coord *c, int i, const node_info *got) {
  coord_node *n = &c->nodes[i];
  n->got = *got;
  coord__node_where(c, i);
  char name[32], what[256];
  rundir_event(&c->rd, "node got %s on %s: %s, where %s", coord__node_name(n, name, sizeof name),
               got->hostname[0] ? got->hostname : "?", nodeinfo_format(got, what, sizeof what),
               n->where);
  c->nodes_dirty = true;
  /* A restarted node: at once. During the reservation, once at its end
   * and at most once a second meanwhile (coord__nodes_file): a rewrite
   * per registration was quadratic, 1,000 atomic writes of a growing file
   * for 1,000 nodes. */
  if (c->spec_sent) coord__nodes_file(c, true);
}

void coord__nodes_file(coord *c, bool now) {
  double t = progress_now();
  if (!c->nodes_dirty || (!now && t - c->nodes_written < 1.0)) return;
  c->nodes_dirty = false;
  c->nodes_written = t;
  write_nodes_file(c);
}

/* A forwarded piece of the node's log (`drover node --log-forward`):
 * appended to its log file, where the dashboard and reservation errors
 * read it. */
void coord__node_log(coord_node *n, const uint8_t *pl, uint32_t len) {
  wire_msg_log m;
  if (wire_get_log(pl, len, &m) < 0 || !m.text.len) return;
  int fd = open(n->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    log_warn("cannot append to '%s': %s", n->log, strerror(errno));
    return;
  }
  if (util_write_all(fd, m.text.s, m.text.len) < 0)
    log_warn("cannot append to '%s': %s", n->log, strerror(errno));
  close(fd);
}

int coord__node_links(coord_node *n, const uint8_t *pl, uint32_t len) {
  wire_msg_links m;
  int rc = wire_get_links(pl, len, &m);
  if (rc < 0) return rc;
  /* cut to what we keep: a summary, not a protocol value */
  size_t k = m.links.len < sizeof n->links ? m.links.len : sizeof n->links - 1;
  for (size_t j = 0; j < k; j++) /* shown on terminals as it is */
    n->links[j] = m.links.s[j] > ' ' && m.links.s[j] < 127 ? m.links.s[j] : '?';
  n->links[k] = '\0';
  return 0;
}

void coord_node_links(const coord *c, int i, char *out, size_t n) {
  const coord_node *nd = &c->nodes[i];
  const char *data = nd->role == ROLE_PS ? coord__ps_data_transport(c, i) : NULL;
  char d[32] = "";
  if (data) snprintf(d, sizeof d, ",coord-data=%s", data); /* a fit's pulls and pushes */
  if (!c->ctl[i])
    snprintf(out, n, "-");
  else
    snprintf(out, n, "coord=%s%s%s%s", conn_transport(c->ctl[i]), d, nd->links[0] ? "," : "",
             nd->links);
}

/* ============================== descriptors =============================== */

/* Each node holds a control connection here, the process a few hundred
 * descriptors more (logs, the listener, attach clients, the ps links), and
 * the handshake bound may take a quarter of the limit: raise the soft
 * limit toward twice that (the hard limit at most) when the nodes need
 * more, and say so when even the hard limit is short. */
void coord__raise_fd_limit(coord *c) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t need = ((rlim_t)c->nnodes + 256) * 4 / 3;
  if (rl.rlim_cur >= need) return;
  rlim_t was = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need * 2 ? need * 2 : rl.rlim_max;
  if (rl.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &rl) == 0)
    log_info("descriptor limit raised from %llu to %llu for %d nodes", (unsigned long long)was,
             (unsigned long long)rl.rlim_cur, c->nnodes);
  else
    rl.rlim_cur = was;
  if (rl.rlim_cur < need) {
    char msg[256];
    snprintf(msg, sizeof msg, "the descriptor limit (%llu, hard %llu) is below what %d nodes need "
             "(about %llu): raise it (ulimit -n, limits.conf) or nodes may fail to connect",
             (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, c->nnodes,
             (unsigned long long)need);
    log_warn("%s", msg);
    rundir_event(&c->rd, "%s", msg);
    fprintf(stderr, "drover: %s\n", msg);
  }
}
