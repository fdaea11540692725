/* node.h - the node agent: what `drover node ...` runs.
 *
 * A node connects to the coordinator, authenticates, registers (role,
 * index, pid, host, data port, cpus, memory), and waits for the SPEC that
 * the coordinator sends once every node has registered. It then plays its
 * role until SHUTDOWN or until it loses the coordinator:
 *   ps         serves VAR_INIT, PULL and PUSH on its own data port (it
 *              listens before registering, so REGISTER carries the port);
 *              applies each PUSH on arrival with the shard's optimizer
 *              state (async).
 *   worker,    take SETUP (model spec, loss, batch, seed, variable
 *   chief      placement, their data shard), then run TASKs one at a time:
 *              pull every variable from the ps nodes, forward/backward on
 *              the libuv thread pool (so heartbeats keep flowing), push the
 *              gradients, reply RESULT. The chief is worker 0.
 *   evaluator  takes SETUP with the eval data, answers EVAL with
 *              EVAL_RESULT (pull, evaluate off the loop thread).
 * Heartbeats flow both ways every heartbeat_ms. A coordinator connection
 * that closes, or stays silent past timeout_ms, ends the node at once
 * (exit status 3): nodes never outlive their coordinator.
 */
#ifndef DROVER_NODE_H
#define DROVER_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/worker/worker.h"

typedef struct node_opts {
  const char *coord_host;  /* numeric address of the coordinator */
  int coord_port;
  int role, index;         /* wire_role and index */
  const char *run_dir;     /* for logs and files; may be NULL */
  const char *bind_host;   /* where a ps listens ("127.0.0.1") */
  int cpus;                /* > 0: BLAS and thread-pool threads */
  const worker_calls *calls; /* scheduled functions (worker_set_calls);
                              NULL: CALLs are refused */
  uint32_t heartbeat_ms;   /* 0: 500 */
  bool log_forward;        /* also send the log's records, and the
                              lines of the node's own stdout and stderr
                              (nodeout.h), to the coordinator (LOG), for
                              a run directory this machine cannot reach
                              (Spark) */
  uint32_t timeout_ms;     /* 0: 5000. Silence from the coordinator this
                              long ends the node. (The wait for SPEC is
                              bounded by the coordinator, which closes the
                              connection when the reservation fails.) */
} node_opts;

/* Runs the node until it is told to stop or loses the coordinator.
 * Reads the secret from $DROVER_SECRET_FILE. Returns the process exit
 * status: 0 after SHUTDOWN, 1 on a setup or protocol failure (message on
 * stderr, which is the node's log), 3 when the coordinator was lost. */
int node_main(const node_opts *o);

#endif
