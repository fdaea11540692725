/* coord_nodes.c - the cluster's options (defaults, checks) and what each
 * node reported of where it runs: kept in its coord_node, logged to
 * events.log, and written to <run>/nodes.tsv so a user (or a script) can
 * see what every node got without the dashboard.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_int.h"
#include "err.h"
#include "log.h"

void coord_opts_default(coord_opts *o) {
  memset(o, 0, sizeof *o);
  o->name = "cluster";
  o->runs_base = "runs";
  o->launcher = "local";
  o->reservation_timeout = 60;
  o->heartbeat_ms = 500;
  o->heartbeat_timeout_ms = 5000;
  o->split_threshold = 65536;
  o->max_restarts = 3;
  o->max_queue = 1024;
}

int coord__check_opts(const coord_opts *o) {
  if (o->count[ROLE_PS] < 1) return drv_error(DRV_EINVAL, "cluster: needs at least one ps");
  if (o->count[ROLE_WORKER] + o->count[ROLE_CHIEF] < 1)
    return drv_error(DRV_EINVAL, "cluster: needs at least one worker or a chief");
  if (o->count[ROLE_CHIEF] > 1 || o->count[ROLE_EVALUATOR] > 1)
    return drv_error(DRV_EINVAL, "cluster: chief and evaluator take 0 or 1");
  for (int r = 0; r < ROLE_COUNT; r++) {
    if (o->count[r] < 0 || o->count[r] > 1024)
      return drv_error(DRV_EINVAL, "cluster: %s = %d is out of range (0..1024)",
                       wire_role_name(r), o->count[r]);
    if (o->res[r].cpus < 0 || o->res[r].gpus < 0)
      return drv_error(DRV_EINVAL, "cluster: %s asks for a negative count", wire_role_name(r));
  }
  if (o->max_restarts < 0 || o->max_restarts > 1000)
    return drv_error(DRV_EINVAL, "cluster: max_restarts = %d is out of range (0..1000)",
                     o->max_restarts);
  if (o->max_queue < 1 || o->max_queue > (1 << 24))
    return drv_error(DRV_EINVAL, "cluster: max_queue = %d is out of range (1..16777216)",
                     o->max_queue);
  if (o->reservation_timeout <= 0 || o->heartbeat_ms == 0 ||
      o->heartbeat_timeout_ms <= o->heartbeat_ms)
    return drv_error(DRV_EINVAL, "cluster: timeouts must be positive, and the heartbeat "
                                 "timeout longer than the heartbeat");
  return 0;
}

static const char *or_dash(const char *s) { return s && *s ? s : "-"; }

/* One line per node: what it asked for next to what it got. Rewritten
 * whole on every registration (a restarted node may land elsewhere). */
static void write_nodes_file(coord *c) {
  size_t cap = 256 + (size_t)c->nnodes * 320, len = 0;
  char *buf = malloc(cap);
  if (!buf) return;
  len += (size_t)snprintf(buf, cap,
                          "node\tpid\thost\taddress\tcpus_asked\tthreads\tcpus\t"
                          "memory_asked\tmemory\tgpus_asked\tgpus\tslurm_job\tslurm_step\t"
                          "slurm_node\trestarts\n");
  for (int i = 0; i < c->nnodes && len < cap; i++) {
    const coord_node *n = &c->nodes[i];
    const launch_resources *want = &c->opts.res[n->role];
    char name[32];
    len += (size_t)snprintf(
        buf + len, cap - len,
        "%s\t%d\t%s\t%s\t%d\t%u\t%u\t%llu\t%llu\t%d\t%s\t%s\t%s\t%s\t%d\n",
        coord_node_name(n, name, sizeof name), (int)n->pid,
        or_dash(n->got.hostname), or_dash(n->host), want->cpus, (unsigned)n->got.threads,
        (unsigned)n->got.affinity, (unsigned long long)want->memory,
        (unsigned long long)n->got.memory, want->gpus, or_dash(n->got.gpus),
        or_dash(n->got.slurm_job), or_dash(n->got.slurm_step), or_dash(n->got.slurm_node),
        n->restarts);
  }
  if (rundir_write(&c->rd, "nodes.tsv", buf, 0644) < 0) log_warn("%s", drv_errmsg());
  free(buf);
}

void coord__node_info(coord *c, int i, const node_info *got) {
  coord_node *n = &c->nodes[i];
  n->got = *got;
  char name[32], what[256];
  rundir_event(&c->rd, "node got %s on %s: %s", coord_node_name(n, name, sizeof name),
               got->hostname[0] ? got->hostname : "?", nodeinfo_format(got, what, sizeof what));
  write_nodes_file(c);
}
