/* ps.h - the parameter server role: variable shards, their optimizer
 * state, and the data port that serves VAR_INIT, PULL and PUSH.
 *
 * A ps holds one shard per variable id (a run places at most one shard of
 * a variable on each ps). Each shard owns its values, its optimizer config
 * and slots, and its update count; PUSH applies the gradient on arrival
 * (async training) with optim_update, or, in sync training (VAR_INIT's
 * mode), adds it to the sum of its version's gradients, applied as one
 * update once `replicas` of them arrived (see ps.c). Frames arrive on the ps's own
 * listening socket (server_kind 1), one connection per worker, evaluator or
 * coordinator. A bad request (unknown variable, wrong shape, malformed
 * payload, a frame type a ps does not serve) is answered with ERROR and
 * closes that connection only: the ps keeps serving the others.
 */
#ifndef DROVER_PS_H
#define DROVER_PS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "proto/keyring.h"

#include "proto/auth.h"
#include "proto/wire_msgs.h"

typedef struct ps_server ps_server;

/* Starts listening on host:0 (a free port, written to *port) as ps
 * `index`. `keys` is the ps's key file (keyring.h; has_root): each client
 * proves the key of the identity it claims, derived from this ps's root
 * (auth.h), and may send what that identity may (VAR_INIT, RESTORE and
 * CHECKPOINT from the coordinator only; PULL, PUSH and PUSH_ID from
 * workers, chief, evaluator and coordinator; REPL_SYNC and REPL from
 * another ps, a primary: ps_accept.c). The ps dials its replica ps:k as
 * ps:index with the file's key for ps k. Borrowed; must outlive the
 * server. Returns 0 or a negative code (message in err_msg()); *out is
 * NULL on failure. */
int ps_start(uv_loop_t *loop, const keyring *keys, uint32_t index, const char *host,
             ps_server **out, int *port);

/* Stops accepting, closes every authenticated data connection and frees
 * the shards (idempotent). Connections still in their handshake close by
 * themselves and still call back into `ps`, so its memory stays until
 * ps_free. NULL is fine. */
void ps_stop(ps_server *ps);
/* Frees the server after ps_stop, once the loop has run to completion (no
 * connection of the ps left). NULL is fine. */
void ps_free(ps_server *ps);

/* ps replicas (ps_repl.c). A ps is ALONE (serves its clients), PRIMARY
 * (forwards every VAR_INIT, PUSH, RESTORE and sparse table frame (SPARSE_INIT,
 * SPARSE_LOAD, a PUSH's SPARSE_PUSHes) to its replica and applies
 * and answers it only once the replica has it) or REPLICA (applies its
 * primary's frames and serves nobody else until it becomes ALONE: a
 * promotion). Set by the coordinator's PS_ROLE: role WIRE_PS_*, token the
 * proof a replica asks of its primary, host:port the replica, ps:`replica`
 * (PRIMARY). 0 or a negative code (a PRIMARY whose key file has no key for
 * that replica too). */
int ps_set_role(ps_server *ps, int role, uint64_t token, const char *host, int port,
                uint32_t replica);
/* Called when a replica expects its primary (synced false), then when it
 * has loaded its primary's state (status 0) or could not (negative,
 * message): node.c tells the coordinator. */
typedef void (*ps_role_fn)(void *ud, int status, bool synced, uint64_t version, const char *msg);
void ps_on_role(ps_server *ps, ps_role_fn fn, void *ud);

/* Whether the ps offers same-host links to its clients (conn.h) from now
 * on: node.c says so once REGISTERED tells the cluster's transport. The ps
 * listens for them whatever the process's mode was at ps_start, and offers
 * them from the start only when that mode was not tcp. */
void ps_set_offer(ps_server *ps, bool offer);
/* The transport of the link this ps dialled, its replica's when it is a
 * primary and the link is up: "ps:3=shm" ("" none) into out (n bytes). */
void ps_links(const ps_server *ps, char *out, size_t n);
/* Per sparse table this ps holds a shard of (at most max): its rows held
 * (SPARSE_STATS); 0 without tables. */
int ps_sparse_stats(const ps_server *ps, wire_item_table_stat *out, int max);

/* PUSH frames applied (async) or summed into an update (sync) so far. */
uint64_t ps_updates(const ps_server *ps);

#endif
