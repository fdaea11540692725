/* coord_repl.c - ps replicas seen from the coordinator (drover.cluster's
 * ps_replicas = 1; docs/ARCHITECTURE.md, "ps replicas").
 *
 * With ps = N and one replica each, the cluster has 2N ps processes, in N
 * groups: group k is served by its primary (ps:k at first) and kept hot on
 * its replica (ps:N+k at first). Workers only see the primaries (SPEC
 * lists the primary of group k as ps:k). The coordinator pairs a group
 * with PS_ROLE (one random token for both), the replica answers
 * PS_ROLE_OK once it holds the primary's state (SYNCING -> REPLICA).
 *
 * A primary lost while its replica is in sync: the replica is promoted
 * (REPLICA -> READY), a new SPEC sends the workers there, and the lost
 * process, started again, becomes the group's replica and is synced from
 * the new primary in the background. A replica lost: its primary serves
 * alone until the replica is back and synced. A primary lost with no
 * replica in sync falls back to the checkpoint rollback (coord_ckpt.c).
 *
 * Placement: a replica on its primary's machine is lost with it. Once
 * every ps registered (where each runs is known then: the ssh host the
 * launcher chose, its Slurm node, or the address it serves on), each group takes a replica on another
 * machine when there is one (coord__repl_place), whatever the launcher
 * did; a group that cannot is named in events.log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

int coord__repl_init(coord *c) {
  int n = c->opts.count[ROLE_PS];
  c->ngroups = n;
  c->ps_prim = calloc((size_t)n + 1, sizeof *c->ps_prim);
  c->ps_repl = calloc((size_t)n + 1, sizeof *c->ps_repl);
  c->ps_pair = calloc((size_t)n + 1, sizeof *c->ps_pair);
  c->ps_token = calloc((size_t)n + 1, sizeof *c->ps_token);
  if (!c->ps_prim || !c->ps_repl || !c->ps_pair || !c->ps_token)
    return err_set(DRV_ENOMEM, "out of memory");
  for (int k = 0; k < n; k++) {
    c->ps_prim[k] = coord__find_node(c, ROLE_PS, k);
    c->ps_repl[k] = c->opts.ps_replicas ? coord__find_node(c, ROLE_PS, n + k) : -1;
    c->ps_pair[k] = c->opts.ps_replicas > 0;
  }
  return 0;
}

/* ============================== placement ================================= */

int coord__repl_match(const char *const *prim, const char *const *cand, int n, int *out) {
  bool *used = calloc((size_t)n + 1, sizeof *used);
  if (!used) return err_set(DRV_ENOMEM, "out of memory");
  for (int k = 0; k < n; k++) { /* first pass: the first free one elsewhere */
    out[k] = -1;
    for (int j = 0; j < n && out[k] < 0; j++)
      if (!used[j] && strcmp(cand[j], prim[k]) != 0) used[out[k] = j] = true;
  }
  for (int k = 0; k < n; k++) /* the rest: whatever is left */
    for (int j = 0; j < n && out[k] < 0; j++)
      if (!used[j]) used[out[k] = j] = true;
  free(used);
  int same = 0;
  for (int k = 0; k < n; k++) {
    if (strcmp(cand[out[k]], prim[k]) != 0) continue;
    /* on its primary's machine: a swap that moves both groups elsewhere */
    int m = 0;
    while (m < n && (m == k || strcmp(cand[out[m]], prim[k]) == 0 ||
                     strcmp(cand[out[k]], prim[m]) == 0))
      m++;
    if (m < n) {
      int t = out[k];
      out[k] = out[m];
      out[m] = t;
    } else {
      same++;
    }
  }
  return same;
}

/* Where node i runs, as placement compares it: the host the launcher
 * chose (ssh), else its Slurm node, else the address it serves on (a
 * local cluster is all one machine). */
static const char *machine(coord *c, int i) {
  const coord_node *n = &c->nodes[i];
  launcher *l = coord__launcher(c, i);
  const char *m = l && l->ops->machine ? l->ops->machine(l, n->role, n->index) : NULL;
  return m ? m : n->got.slurm_node[0] ? n->got.slurm_node : n->host;
}

int coord__repl_place(coord *c) {
  int n = c->ngroups;
  if (!c->opts.ps_replicas || n == 0) return 0;
  const char **prim = calloc((size_t)n, sizeof *prim), **cand = calloc((size_t)n, sizeof *cand);
  int *node = calloc((size_t)n, sizeof *node), *out = calloc((size_t)n, sizeof *out);
  int rc = prim && cand && node && out ? 0 : err_set(DRV_ENOMEM, "out of memory");
  for (int k = 0; k < n && rc == 0; k++) {
    prim[k] = machine(c, c->ps_prim[k]);
    node[k] = c->ps_repl[k];
    cand[k] = machine(c, node[k]);
  }
  int same = rc == 0 ? coord__repl_match(prim, cand, n, out) : 0;
  if (same < 0) rc = same;
  bool many = false; /* more than one machine among the ps */
  for (int k = 0; k < n && rc == 0; k++)
    many |= strcmp(prim[k], prim[0]) != 0 || strcmp(cand[k], prim[0]) != 0;
  for (int k = 0; k < n && rc == 0; k++) {
    c->ps_repl[k] = node[out[k]];
    if (!many || strcmp(cand[out[k]], prim[k]) != 0) continue;
    char pn[32], rn[32];
    coord__node_name(&c->nodes[c->ps_prim[k]], pn, sizeof pn);
    coord__node_name(&c->nodes[c->ps_repl[k]], rn, sizeof rn);
    rundir_event(&c->rd, "ps group %d: replica %s on the same machine (%s) as its primary %s: "
                 "no other machine had a ps to spare; losing %s loses both",
                 k, rn, prim[k], pn, prim[k]);
  }
  free(prim), free(cand), free(node), free(out);
  return rc;
}

void coord__repl_free(coord *c) {
  free(c->ps_prim);
  free(c->ps_repl);
  free(c->ps_pair);
  free(c->ps_token);
}

int coord__ps_node(const coord *c, int group) {
  return group >= 0 && group < c->ngroups ? c->ps_prim[group] : -1;
}

int coord__ps_group(const coord *c, int node) {
  for (int k = 0; k < c->ngroups; k++)
    if (c->ps_prim[k] == node || c->ps_repl[k] == node) return k;
  return -1;
}

static void send_role(coord *c, int node, int role, uint64_t token, const coord_node *to) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_ps_role(&w, &(wire_msg_ps_role){role, token, WIRE_STR(to ? to->host : ""),
                                           (uint16_t)(to ? to->port : 0),
                                           (uint32_t)(to ? to->index : 0)});
  coord__send(c, node, &w, WIRE_PS_ROLE, 0);
}

/* Group k's replica takes the primary's state: REPLICA first; once it
 * answers that it expects the token, PRIMARY with the replica's address
 * (coord__repl_frame), so the primary's REPL_SYNC never comes first. */
static void pair(coord *c, int k) {
  int i = c->ps_prim[k], j = c->ps_repl[k];
  uint64_t token = 0;
  if (getrandom(&token, sizeof token, 0) != (ssize_t)sizeof token)
    token = (uint64_t)random() << 32 | (uint64_t)random();
  char pn[32];
  coord__node_name(&c->nodes[i], pn, sizeof pn);
  if (c->nodes[j].state != NODE_SYNCING)
    coord__node_set_state(c, j, NODE_SYNCING, ": replica of %s", pn);
  c->ps_token[k] = token;
  send_role(c, j, WIRE_PS_REPLICA, token, NULL);
  c->ps_pair[k] = false;
}

void coord__repl_tick(coord *c) {
  if (!c->spec_sent || c->shutting_down) return;
  for (int k = 0; k < c->ngroups; k++) {
    int i = c->ps_prim[k], j = c->ps_repl[k];
    if (j < 0 || !c->ps_pair[k] || !c->ctl[i] || !c->ctl[j]) continue;
    /* a primary being restored from a checkpoint is paired after */
    if (c->nodes[i].state != NODE_READY) continue;
    pair(c, k);
  }
}

int coord__repl_frame(coord *c, int node, const wire_header *h, const uint8_t *pl) {
  wire_msg_ps_role_ok m;
  char msg[512] = "", name[32];
  int rc = wire_get_ps_role_ok(pl, h->len, &m);
  if (rc == 0) rc = wire_str_copy(m.message, msg, sizeof msg);
  if (rc < 0) return rc;
  coord__node_name(&c->nodes[node], name, sizeof name);
  int k = coord__ps_group(c, node);
  if (k < 0 || c->ps_repl[k] != node || c->nodes[node].state != NODE_SYNCING) return 0; /* stale */
  if (!m.synced) { /* it expects the token: the primary may connect */
    send_role(c, c->ps_prim[k], WIRE_PS_PRIMARY, c->ps_token[k], &c->nodes[node]);
    return 0;
  }
  if (m.status != 0) {
    log_warn("%s could not take its primary's state: %s", name, msg);
    rundir_event(&c->rd, "replica %s not in sync: %s", name, msg);
    return 0;
  }
  coord__node_set_state(c, node, NODE_REPLICA, ": in sync at version %llu%s%s%s",
                        (unsigned long long)m.version, msg[0] ? " (" : "", msg, msg[0] ? ")" : "");
  return 0;
}

bool coord__repl_lost(coord *c, int i) {
  int k = coord__ps_group(c, i);
  if (k < 0 || c->ps_repl[k] < 0) return false;
  char name[32], rn[32];
  coord__node_name(&c->nodes[i], name, sizeof name);
  if (c->ps_repl[k] == i) { /* the replica: the primary goes on alone */
    coord__node_name(&c->nodes[c->ps_prim[k]], rn, sizeof rn);
    rundir_event(&c->rd, "replica %s lost: %s serves alone until it is back", name, rn);
    c->ps_pair[k] = true;
    return true;
  }
  int j = c->ps_repl[k];
  coord__node_name(&c->nodes[j], rn, sizeof rn);
  if (c->nodes[j].state != NODE_REPLICA || !c->ctl[j]) {
    rundir_event(&c->rd, "%s lost and its replica %s is not in sync: no promotion", name, rn);
    c->ps_pair[k] = true;
    return false;
  }
  coord__node_set_state(c, j, NODE_READY, ": promoted in place of %s", name);
  c->ps_prim[k] = j;
  c->ps_repl[k] = i;
  c->ps_pair[k] = true; /* once the lost one is back */
  send_role(c, j, WIRE_PS_ALONE, 0, NULL);
  coord__spec_all(c); /* workers go to the new primary and send their requests again */
  rundir_event(&c->rd, "ps group %d: replica %s promoted in place of %s: no update lost", k, rn,
               name);
  log_info("ps group %d: %s promoted in place of %s", k, rn, name);
  coord__fit_ps_promoted(c, k);
  return true;
}

bool coord__repl_is_replica(const coord *c, int node) {
  int k = coord__ps_group(c, node);
  return k >= 0 && c->ps_repl[k] == node;
}

int coord__stop_plan(const coord *c, int node, char *out, size_t n) {
  const coord_node *nd = &c->nodes[node];
  out[0] = '\0';
  if (nd->role != ROLE_PS) return 0;
  int k = coord__ps_group(c, node);
  char other[32];
  if (k >= 0 && c->ps_repl[k] == node) {
    coord__node_name(&c->nodes[c->ps_prim[k]], other, sizeof other);
    return snprintf(out, n, "a replica: %s serves alone until it is back, nothing is lost", other);
  }
  if (k >= 0 && c->ps_repl[k] >= 0 && c->nodes[c->ps_repl[k]].state == NODE_REPLICA) {
    coord__node_name(&c->nodes[c->ps_repl[k]], other, sizeof other);
    return snprintf(out, n, "promote replica %s: no update is lost", other);
  }
  return coord__ckpt_plan(c, out, n);
}

bool coord__repl_covers(const coord *c, int node) {
  int k = coord__ps_group(c, node);
  if (k < 0 || c->ps_repl[k] < 0) return false;
  return c->ps_repl[k] == node || c->nodes[c->ps_repl[k]].state == NODE_REPLICA;
}

/* ============================== SPEC ====================================== */

/* SPEC's nodes: the ps but their replicas, as their groups
 * (ps:k is group k's primary, wherever it runs now). */
typedef struct spec_list {
  const coord *c;
  int *node, *index;
} spec_list;

static void put_spec_node(wire_wr *w, void *ud, uint32_t k) {
  const spec_list *l = ud;
  const coord_node *n = &l->c->nodes[l->node[k]];
  wire_put_item_spec_node(w, &(wire_item_spec_node){.role = (uint8_t)n->role,
                                                    .index = (uint32_t)l->index[k],
                                                    .host = WIRE_STR(n->host),
                                                    .port = (uint16_t)n->port,
                                                    .proc = (uint32_t)n->index});
}

int coord__write_spec(const coord *c, wire_wr *w) {
  spec_list l = {c, calloc((size_t)c->nnodes + 1, sizeof(int)),
                 calloc((size_t)c->nnodes + 1, sizeof(int))};
  if (!l.node || !l.index) {
    free(l.node), free(l.index);
    wire_wr_free(w);
    return err_set(DRV_ENOMEM, "out of memory for a SPEC");
  }
  uint32_t m = 0;
  for (int i = 0; i < c->nnodes; i++) {
    if (c->nodes[i].role != ROLE_PS) continue; /* workers dial the ps only */
    int k = coord__ps_group(c, i);
    if (k < 0 || c->ps_prim[k] != i) continue; /* a replica */
    l.node[m] = i;
    l.index[m++] = k;
  }
  wire_put_spec(w, &(wire_msg_spec){{m, .put = put_spec_node, .ud = &l}, c->opts.ps_replicas > 0});
  free(l.node), free(l.index);
  return 0;
}
