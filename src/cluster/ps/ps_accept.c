/* ps_accept.c - what a ps's data connection may send, by who it proved to
 * be (auth.h), checked at each frame's header (conn_accept) against the
 * tables made from WIRE_TYPE_MAP's `from` column (wire.h): the
 * coordinator initialises, restores, checkpoints and rescales (LR_SCALE)
 * variables and ends a sync fit early (SYNC_STOP); workers, the chief and
 * the evaluator pull and push; another ps (a primary, with its own key:
 * ps_repl.c) replicates to this one; nobody else anything. Which of
 * those a ps then serves depends on its role (ps.c, ps_repl.c): a
 * replica's REPL_SYNC must carry the coordinator's token besides. */
#include <stdbool.h>
#include <stddef.h>

#include "proto/auth.h"
#include "cluster/ps/ps_int.h"

static wire_peer peer_of(auth_cap cap, int role) {
  if (cap != AUTH_CAP_NODE) return WIRE_PEER_PS_OTHER;
  if (role == AUTH_ROLE_COORD) return WIRE_PEER_PS_COORD;
  return role == ROLE_PS ? WIRE_PEER_PS_PRIMARY : WIRE_PEER_PS_TRAINER;
}

/* Built once per peer, on the loop thread. */
const conn_accept *ps__accept_as(auth_cap cap, int role) {
  static conn_accept tables[WIRE_PEER_COUNT];
  wire_peer p = peer_of(cap, role);
  if (!tables[p].what) tables[p].what = wire_peer_allow(p, tables[p].allow, tables[p].max_len);
  return &tables[p];
}

const conn_accept *ps__accept(const conn *c) { return ps__accept_as(conn_cap(c), conn_role(c)); }
