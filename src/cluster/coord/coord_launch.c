/* coord_launch.c - starting the cluster's processes and starting them
 * again: the node table, launching every node, a node's exit, a node's
 * loss (restart with back-off, or a failure of the run) and restarts.
 * The coordinator's lifecycle around it is in coord.c.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "base/log.h"
#include "train/progress.h"
#include "proto/wire_msgs.h"

#define RESTART_BACKOFF 0.2 /* seconds before the first restart of a node */
#define RESTART_BACKOFF_MAX 5.0

/* Workers and the chief hold nothing that training cannot rebuild (their
 * shard comes again with SETUP; the variables live on the ps nodes). */
static bool recoverable(const coord *c, const coord_node *n) {
  int i = (int)(n - c->nodes);
  return !c->shutting_down &&
         (n->role == ROLE_WORKER || n->role == ROLE_CHIEF ||
          (n->role == ROLE_PS && (coord__fit_running(c) || coord__repl_covers(c, i)))) &&
         n->restarts < c->opts.max_restarts;
}

/* "worker:1 lost: <why>": a recoverable node is queued for a restart (its
 * work goes back to the queue); any other loss is a failure of the run,
 * with the last lines of the node's log. Either way a process still
 * running (silent) is killed: it must not come back on its own. */
void coord__node_lost(coord *c, int i, const char *why) {
  coord_node *n = &c->nodes[i];
  /* Only a node with a process is lost; one already lost (restarting) or
   * over stays as it is. */
  if (!(coord__state_flags(n->state) & NS_PROCESS)) return;
  char name[32], tail[1200], left[160] = "";
  coord__node_name(n, name, sizeof name);
  if (c->ctl[i]) { /* a silent node: its connection is no longer its */
    conn *cn = c->ctl[i];
    c->ctl[i] = NULL;
    conn_close(cn, "node lost");
  }
  if (n->state == NODE_REMOVING) { /* c:scale asked it to go: gone is no loss */
    coord__node_set_state(c, i, NODE_REMOVED, ": %s", why);
    coord__sched_node_lost(c, i);
  } else if (recoverable(c, n)) {
    /* external: no process to start, only a REGISTER to wait for */
    double delay = coord__external(c)
                       ? 0
                       : RESTART_BACKOFF * (double)(1u << (n->restarts < 8 ? n->restarts : 8));
    coord__node_set_state(c, i, NODE_RESTARTING, ": %s", why);
    n->restart_at = progress_now() + (delay < RESTART_BACKOFF_MAX ? delay : RESTART_BACKOFF_MAX);
    n->inflight = 0;
    log_warn("%s lost: %s; restarting it in %.1f s", name, why, n->restart_at - progress_now());
    coord__sched_node_lost(c, i);
    /* a ps whose replica takes over (or a replica) needs no rollback */
    if (!(n->role == ROLE_PS && coord__repl_lost(c, i))) coord__fit_node_lost(c, i);
  } else if (coord__scale_lost(c, i, why, left, sizeof left)) {
    /* worker = { min }: REMOVED, the cluster shrinks; no failure */
  } else {
    char extra[256] = "";
    if (!c->shutting_down && (n->role == ROLE_WORKER || n->role == ROLE_CHIEF))
      snprintf(extra, sizeof extra, " (restarts exhausted: %d of %d)%s", n->restarts,
               c->opts.max_restarts, left);
    coord__node_set_state(c, i, NODE_LOST, ": %s", why);
    rundir_tail(n->log, 8, tail, sizeof tail);
    coord__keep_failure(c, "%s lost: %s%s%s%s", name, why, extra,
                 tail[0] ? "; last lines of its log:\n" : "", tail);
  }
  /* An external node's connection closing was its end: the restart below
   * only waits for it to register again, which needs it exited. */
  if (!n->exited && coord__external(c)) n->exited = true;
  else if (!n->exited) coord__signal(c, i, SIGKILL);
}

bool coord__external(const coord *c) { return coord_uses_launcher(&c->opts, "external"); }

/* ============================== launching ================================ */

void coord__on_exit(launcher *l, void *task_ud, int64_t status, int sig) {
  coord *c = l->ud;
  coord_node *n = task_ud;
  int i = (int)(n - c->nodes);
  char name[32], why[96];
  coord__node_name(n, name, sizeof name);
  n->exited = true;
  n->exit_status = status;
  n->term_signal = sig;
  if (sig)
    snprintf(why, sizeof why, "killed by signal %d", sig);
  else
    snprintf(why, sizeof why, "exited with status %lld", (long long)status);
  rundir_event(&c->rd, "node exit %s: %s", name, why);
  log_info("%s %s", name, why);
  if (c->shutting_down) {
    unsigned f = coord__state_flags(n->state);
    if (f & NS_FINAL) return; /* lost before, or done: it stays so */
    bool clean = !sig && status == 0;
    /* Stopped before it had registered: nothing lost. The exit itself is
     * the "node exit" line above; this one says what it means. */
    if (!(f & NS_REGISTERED))
      coord__node_set_state(c, i, NODE_DONE, ": stopped before it registered");
    else if (clean)
      coord__node_set_state(c, i, NODE_DONE, ": stopped");
    else
      coord__node_set_state(c, i, NODE_FAILED, ": did not stop cleanly");
  } else {
    coord__node_lost(c, i, why);
  }
}

int coord__launch_node(coord *c, int i) {
  char secret[1200] = "-";
  /* The external launcher's nodes are someone else's, who derives their
   * keys from the secret: no file per node (creating thousands of them
   * took seconds). */
  int rc = coord__external(c) ? 0 : coord__node_key_file(c, i, secret, sizeof secret);
  if (rc < 0) return rc;
  coord_node *n = &c->nodes[i];
  launcher *l = coord__launcher(c, i);
  bool here = strcmp(l->ops->name, "local") == 0; /* beside remote nodes: routable */
  launch_task t = {
      .role = n->role, .index = n->index, .coord = here ? c->local_addr : c->node_addr,
      .run_dir = c->rd.path, .secret_file = secret,
      .bind_host = here ? c->local_bind : c->node_bind, .cpus = c->opts.res[n->role].cpus,
      .memory = c->opts.res[n->role].memory, .gpus = c->opts.res[n->role].gpus,
      .heartbeat_ms = c->opts.heartbeat_ms,
      .transport = conn_transport_mode_name(c->transport),
      /* Nodes tolerate a long silence from us (Lua may be busy between
       * pumps); a dead coordinator closes their sockets at once anyway. */
      .timeout_ms = c->opts.heartbeat_timeout_ms > 60000 ? c->opts.heartbeat_timeout_ms : 60000,
  };
  char name[32];
  coord__node_name(n, name, sizeof name);
  if (rundir_node_log(n->log, sizeof n->log, c->rd.path, wire_role_name(n->role), n->index) >=
      (int)sizeof n->log)
    n->log[0] = '\0'; /* too long to name: no log tail shown */
  rc = l->ops->start(l, &t, n, &n->pid);
  if (rc < 0) return err_set(rc, "launching %s: %s", name, err_msg());
  return 0;
}

int coord__launch_all(coord *c) {
  for (int i = 0; i < c->nnodes; i++) {
    int rc = coord__launch_node(c, i);
    if (rc < 0) return rc;
    char name[32];
    rundir_event(&c->rd, "node start %s pid %d",
                 coord__node_name(&c->nodes[i], name, sizeof name), (int)c->nodes[i].pid);
  }
  return 0;
}

/* Starts lost nodes again once their back-off is over and the old
 * process is gone (the launcher knows a task by its node). */
void coord__check_restarts(coord *c, double now) {
  if (c->shutting_down) return;
  for (int i = 0; i < c->nnodes; i++) {
    coord_node *n = &c->nodes[i];
    /* a worker c:scale started (STARTING with its clock set: the
     * cluster's first nodes are bounded by its start instead) or brought
     * back, or a restarted node: lost, as if it had died */
    bool clocked = n->state == NODE_RELAUNCHED || (n->state == NODE_STARTING && n->restart_at > 0);
    if (clocked && now - n->restart_at > c->opts.reservation_timeout) {
      char why[96];
      snprintf(why, sizeof why, "did not register within %g s of its %s",
               c->opts.reservation_timeout, n->state == NODE_STARTING ? "start" : "restart");
      coord__node_lost(c, i, why);
    }
    if (n->state != NODE_RESTARTING || !n->exited || now < n->restart_at) continue;
    char name[32];
    coord__node_name(n, name, sizeof name);
    n->restarts++;
    n->exited = false;
    n->exit_status = 0;
    n->term_signal = 0;
    n->closed_at = 0;
    n->restart_at = now;
    if (coord__launch_node(c, i) < 0) {
      char err[1024], why[1100], left[160] = "";
      snprintf(err, sizeof err, "%s", err_msg());
      n->exited = true;
      snprintf(why, sizeof why, "not restarted: %s", err);
      if (coord__scale_lost(c, i, why, left, sizeof left)) continue; /* shrinks */
      coord__node_set_state(c, i, NODE_LOST, ": not restarted: %s", err);
      coord__keep_failure(c, "%s lost and not restarted: %s%s", name, err, left);
      continue;
    }
    coord__node_set_state(c, i, NODE_RELAUNCHED, " (%d of %d) pid %d", n->restarts,
                          c->opts.max_restarts, (int)n->pid);
    log_info("%s restarted (%d of %d), pid %d", name, n->restarts, c->opts.max_restarts,
             (int)n->pid);
  }
}

/* Processes per role: with ps replicas, twice the ps (ps:N+k replicates ps:k). */
int coord__processes(const coord *c, int role) {
  return c->opts.count[role] * (role == ROLE_PS ? 1 + c->opts.ps_replicas : 1);
}

int coord__make_nodes(coord *c) {
  int total = 0;
  for (int r = 0; r < ROLE_COUNT; r++) total += coord__processes(c, r);
  /* room for the workers c:scale may add: the table never moves (a
   * launcher's task holds its node's address) */
  c->node_cap = total + coord__scale_room(&c->opts);
  c->nodes = calloc((size_t)c->node_cap, sizeof *c->nodes);
  c->ctl = calloc((size_t)c->node_cap, sizeof *c->ctl);
  if (!c->nodes || !c->ctl) return err_set(DRV_ENOMEM, "out of memory");
  for (int r = 0; r < ROLE_COUNT; r++)
    for (int k = 0; k < coord__processes(c, r); k++) {
      coord_node *n = &c->nodes[c->nnodes++];
      n->role = r;
      n->index = k;
      n->state = NODE_STARTING;
    }
  return coord__repl_init(c);
}

