/* l_worker.h - scheduled functions on a worker or the chief: the Lua side
 * of CALL (a Lua state per worker, a coroutine per call, the `w` object).
 * The binary hands it to the nodes it runs (node_opts.calls), because the
 * worker sits in the cluster layer, below the Lua bindings. */
#ifndef DROVER_L_WORKER_H
#define DROVER_L_WORKER_H

#include "cluster/worker/worker.h"

extern const worker_calls lworker_calls;

#endif
