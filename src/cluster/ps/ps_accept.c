/* ps_accept.c - what a ps's data connection may send, by who it proved to
 * be (auth.h), checked at each frame's header (conn_accept): the
 * coordinator initialises, restores, checkpoints and rescales (LR_SCALE)
 * variables and ends a sync fit early (SYNC_STOP); workers, the chief and the evaluator pull and push; another ps (a primary, with
 * its own key: ps_repl.c) replicates to this one; nobody else anything.
 * Which of those a ps then serves depends on its role (ps.c, ps_repl.c):
 * a replica's REPL_SYNC must carry the coordinator's token besides. */
#include <stdbool.h>
#include <stddef.h>

#include "proto/auth.h"
#include "cluster/ps/ps_int.h"

/* Built once, on the loop thread, from the message table's limits. */
const conn_accept *ps__accept_as(auth_cap cap, int role) {
  static conn_accept coord, trainer, replicator, none;
  static bool built;
  if (!built) {
    static const uint8_t trains[] = {WIRE_PULL, WIRE_PUSH, WIRE_PUSH_ID, WIRE_HEARTBEAT},
                         manages[] = {WIRE_VAR_INIT, WIRE_CHECKPOINT, WIRE_RESTORE, WIRE_LR_SCALE,
                                      WIRE_SYNC_STOP},
                         replicates[] = {WIRE_REPL_SYNC, WIRE_REPL_SHARD, WIRE_REPL_PIECE,
                                         WIRE_REPL_SYNC_END, WIRE_REPL, WIRE_HEARTBEAT};
    coord.what = "the coordinator";
    trainer.what = "a worker, chief or evaluator";
    replicator.what = "another ps, a primary";
    none.what = "a node that does not pull, push or replicate";
    for (size_t i = 0; i < sizeof trains; i++) {
      uint8_t t = trains[i];
      coord.allow[t] = trainer.allow[t] = true;
      coord.max_len[t] = trainer.max_len[t] = wire_msg(t)->max_len;
    }
    for (size_t i = 0; i < sizeof manages; i++) {
      uint8_t t = manages[i];
      coord.allow[t] = true;
      coord.max_len[t] = wire_msg(t)->max_len;
    }
    for (size_t i = 0; i < sizeof replicates; i++) {
      uint8_t t = replicates[i];
      replicator.allow[t] = true;
      replicator.max_len[t] = wire_msg(t)->max_len;
    }
    built = true;
  }
  if (cap != AUTH_CAP_NODE) return &none;
  if (role == AUTH_ROLE_COORD) return &coord;
  return role == ROLE_PS ? &replicator : &trainer;
}

const conn_accept *ps__accept(const conn *c) { return ps__accept_as(conn_cap(c), conn_role(c)); }
