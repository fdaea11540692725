/* coord_keys.c - the run's keys and what each peer may send.
 *
 * Keys (auth.h). `secret` is the nodes' root and only the coordinator
 * reads it: it derives every node's key at the coordinator from it, and
 * each ps's root R_i (auth_ps_root). Every node, ps included, gets a key
 * file holding only the keys it proves, keys/<role>-<index>.key
 * (keyring.h), written before each start and gone once the node has it
 * (the node removes what it read; the coordinator, at REGISTER, what a
 * launcher sent on): its key here, and its key at each ps it dials (a worker,
 * chief or evaluator: every ps; a ps with replicas: every other ps, as
 * itself); a ps also its
 * own root, with which it checks its clients. `control.key` lets
 * `drover attach --control` run commands and stop nodes; `view.key`
 * attaches read-only and is safe to share. All are 0600 files in the run
 * directory, and none is a node's: a node's keys neither attach nor pose
 * as another node, nor as the coordinator anywhere but at a ps's own
 * server (which a ps can do to itself only).
 *
 * What a peer may send is checked at each frame's header (conn_accept),
 * before its payload is buffered, against the tables made from
 * WIRE_TYPE_MAP's `from` column (wire.h, WIRE_PEER_MAP): an authenticated
 * peer that has not registered may send only a REGISTER (a node), an
 * ATTACH (a client), a FEED_OPEN (a client with the control key) or a
 * PREDICT_OPEN (any client: a view key's is answered with a refusal that
 * names the control key, then closed); a registered node the frames of
 * its role; an attach client COMMANDs, an external feeder (the control
 * key: it steers training) FEED_BATCH and FEED_END, a predict client (the
 * control key only) PREDICT_REQUEST. Anything else closes that
 * connection.
 */
#include <dirent.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/keyring.h"
#include "proto/wire_msgs.h"

/* A resumed run's keys were its previous process's: that run is over, and
 * new keys make its nodes and clients unable to speak to this one. */
static void remove_old_keys(coord *c) {
  static const char *const names[] = {RUNDIR_SECRET, RUNDIR_CONTROL_KEY, RUNDIR_VIEW_KEY};
  char path[1200];
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    unlink(rundir_file(&c->rd, names[i], path, sizeof path));
  DIR *d = opendir(rundir_file(&c->rd, RUNDIR_KEYS, path, sizeof path));
  for (struct dirent *e; d && (e = readdir(d));) {
    char name[300];
    if (e->d_name[0] == '.' ||
        snprintf(name, sizeof name, RUNDIR_KEYS "/%s", e->d_name) >= (int)sizeof name)
      continue;
    unlink(rundir_file(&c->rd, name, path, sizeof path));
  }
  if (d) closedir(d);
}

static int save_key(coord *c, const auth_secret *key, const char *name) {
  char path[1200];
  return auth_secret_save(key, rundir_file(&c->rd, name, path, sizeof path));
}

int coord__keys_create(coord *c) {
  char path[1200];
  int rc;
  if (c->resume) remove_old_keys(c);
  if ((rc = auth_secret_generate(&c->secret)) < 0 || (rc = auth_secret_generate(&c->control)) < 0 ||
      (rc = auth_secret_generate(&c->view)) < 0 ||
      (rc = save_key(c, &c->secret, RUNDIR_SECRET)) < 0 ||
      (rc = save_key(c, &c->control, RUNDIR_CONTROL_KEY)) < 0 ||
      (rc = save_key(c, &c->view, RUNDIR_VIEW_KEY)) < 0)
    return rc;
  auth_feed_key(&c->control, &c->feed_key);
  if (mkdir(rundir_file(&c->rd, RUNDIR_KEYS, path, sizeof path), 0700) < 0 && errno != EEXIST)
    return err_set(DRV_EIO, "cannot create '%s': %s", path, strerror(errno));
  return 0;
}

void coord__ps_coord_key(const coord *c, uint32_t ps, auth_secret *out) {
  auth_secret root;
  auth_ps_root(&c->secret, ps, &root);
  auth_node_key(&root, AUTH_ROLE_COORD, 0, out);
  sodium_memzero(&root, sizeof root);
}

/* Node (role, index)'s key at ps `ps`, appended to k. */
static void add_ps_key(const coord *c, keyring *k, size_t *n, uint32_t ps, int role,
                       uint32_t index) {
  auth_secret root;
  auth_ps_root(&c->secret, ps, &root);
  k->ps[*n].ps = ps;
  auth_node_key(&root, role, index, &k->ps[(*n)++].key);
  sodium_memzero(&root, sizeof root);
}

/* What node i proves where (the file comment). */
static int node_keyring(const coord *c, const coord_node *nd, keyring *k) {
  uint32_t idx = (uint32_t)nd->index;
  int nps = coord__processes(c, ROLE_PS);
  memset(k, 0, sizeof *k);
  k->ps = calloc((size_t)nps + 1, sizeof *k->ps); /* nps is bounded by the cluster options */
  if (!k->ps) return err_set(DRV_ENOMEM, "out of memory for a key file");
  auth_node_key(&c->secret, nd->role, idx, &k->coord);
  if (nd->role == ROLE_PS) {
    k->has_root = true;
    auth_ps_root(&c->secret, idx, &k->root);
    /* Its replica is paired by machine once all registered
     * (coord__repl_match), after this file is written: a key at every
     * other ps, as itself only (a replica takes REPL_* with the pair's
     * token alone, and PULL/PUSH from no ps). */
    for (int p = 0; c->opts.ps_replicas && p < nps; p++)
      if (p != nd->index) add_ps_key(c, k, &k->nps, (uint32_t)p, ROLE_PS, idx);
  } else {
    for (int p = 0; p < nps; p++) add_ps_key(c, k, &k->nps, (uint32_t)p, nd->role, idx);
  }
  return 0;
}

int coord__node_key_file(coord *c, int i, char *path, size_t n) {
  const coord_node *nd = &c->nodes[i];
  rundir_node_key(path, n, c->rd.path, wire_role_name(nd->role), nd->index);
  struct stat st;
  /* A node removes its file once read (node.c), so a restart writes it
   * again; one still there is a start's whose node never read it. */
  if (stat(path, &st) == 0) return 0;
  keyring k;
  int rc = node_keyring(c, nd, &k);
  if (rc == 0) rc = keyring_write(&k, path, false);
  keyring_free(&k);
  return rc;
}

void coord__node_key_forget(coord *c, int i) {
  const coord_node *nd = &c->nodes[i];
  char path[1200];
  rundir_node_key(path, sizeof path, c->rd.path, wire_role_name(nd->role), nd->index);
  if (unlink(path) < 0 && errno != ENOENT)
    log_warn("cannot remove %s's key file '%s': %s", wire_role_name(nd->role), path,
             strerror(errno));
}

/* ============================== accept tables ============================= */

/* What peer p may send here: WIRE_TYPE_MAP's `from` column (wire.h).
 * Built once, on the loop thread. */
static const conn_accept *table(wire_peer p) {
  static conn_accept tables[WIRE_PEER_COUNT];
  if (!tables[p].what) tables[p].what = wire_peer_allow(p, tables[p].allow, tables[p].max_len);
  return &tables[p];
}

const conn_accept *coord__accept_fresh(auth_cap cap) {
  return table(cap == AUTH_CAP_NODE      ? WIRE_PEER_NEW_NODE
               : cap == AUTH_CAP_CONTROL ? WIRE_PEER_NEW_CONTROL
                                         : WIRE_PEER_NEW_VIEW);
}
const conn_accept *coord__accept_feeder(void) { return table(WIRE_PEER_FEEDER); }
const conn_accept *coord__accept_predictor(void) { return table(WIRE_PEER_PREDICTOR); }
const conn_accept *coord__accept_node(int role) {
  return table(role == ROLE_PS ? WIRE_PEER_PS : WIRE_PEER_TRAINER);
}
const conn_accept *coord__accept_attach(void) { return table(WIRE_PEER_ATTACH); }
